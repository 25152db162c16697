/* Where the metric regions live: creating, pinning and mapping the four BPF
 * array maps (with BTF, BPF_F_MMAPABLE), or the shared-memory fallback file
 * with the same regions. Used by the writer (o1d) and the readers.
 *
 * Invariants: a struct o1_metrics_maps owns its mappings and fds; base[i]
 * points at a region of o1_metrics_region_size(i) bytes, writable only when
 * created by o1_metrics_maps_create*; a bpf reader has fds and no base. */
#ifndef O1_METRICS_MAP_H
#define O1_METRICS_MAP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "metrics.h"

#define O1_METRICS_DEFAULT_BPF_DIR  "/sys/fs/bpf/o1d"
#define O1_METRICS_DEFAULT_SHM_PATH "/dev/shm/o1d-metrics-v3"
#define O1_METRICS_RUNQ_PIN	    "o1_runq"
#define O1_METRICS_PIN_SUBDIR	    "v3"
#define O1_METRICS_DEFAULT_MODE	    0640

enum o1_metrics_region {
	O1_METRICS_R_INFO,
	O1_METRICS_R_COUNTERS,
	O1_METRICS_R_HISTS,
	O1_METRICS_R_GRAPHS,
	O1_METRICS_R__COUNT,
};

struct o1_metrics_maps {
	enum o1_metrics_backend backend;
	void *base[O1_METRICS_R__COUNT]; /* one mapping per region */
	size_t len[O1_METRICS_R__COUNT]; /* bytes mapped (bpf backend) */
	int fd[O1_METRICS_R__COUNT];	 /* map fds (bpf backend), or -1 */
	bool fd_only;	 /* bpf reader: no mappings, values read by syscall */
	int runq_fd;	 /* bpf reader: the optional o1_runq pin, or -1 */
	void *file_base; /* whole-file mapping (shm) */
	size_t file_len;
	int lock_fd; /* writer: holds the owner lock (metrics_owner.h) on the
		      * pin directory or the file for its life, or -1 */
	dev_t owner_dev; /* reader: the pin directory or file opened, whose */
	ino_t owner_ino; /* owner lock tells whether its writer runs */
	char path[PATH_MAX]; /* pin directory (with v1) or the file */
};

/* Permissions given to what the writer creates. */
struct o1_metrics_perm {
	long gid;      /* group owning pins, dirs and file; -1 keeps ours */
	unsigned mode; /* pins and file, e.g. 0640; dirs get r/x to match */
};

/* The fallback file of the daemon serving on SOCKET: SHM_PATH when set
 * (not NULL nor ""), else O1_METRICS_DEFAULT_SHM_PATH "-" and 16 hex
 * digits of the FNV-1a 64 hash of SOCKET, so two daemons do not collide
 * and a reader given the same configuration finds the same file. Writes
 * it into BUF (LEN bytes); -ENAMETOOLONG when it does not fit. */
int o1_metrics_shm_path_for(const char *shm_path, const char *socket, char *buf,
			    size_t len);

/* Map name (<= 15 chars) and value size of region r. */
const char *o1_metrics_region_name(enum o1_metrics_region r);
size_t o1_metrics_region_size(enum o1_metrics_region r);
/* Offset of region r in the fallback file, and the file's size. */
size_t o1_metrics_region_offset(enum o1_metrics_region r);
size_t o1_metrics_file_size(void);

/* Builds the BTF that describes the four values (in userspace, no kernel).
 * On success *out is owned by the caller (btf__free), key_id is the u32 key
 * type and value_ids[r] the struct type of region r. */
struct btf;
int o1_metrics_btf_build(struct btf **out, uint32_t *key_id,
			 uint32_t value_ids[O1_METRICS_R__COUNT]);

/* Writer: creates the maps, maps them read-write, and pins them under
 * bpf_dir/v3/ replacing stale pins. Fails (logged) when bpf_dir is not on
 * a bpf filesystem or the caller lacks the capability, and with
 * -EADDRINUSE, touching nothing, when a live writer owns bpf_dir/v1. */
int o1_metrics_maps_create_bpf(struct o1_metrics_maps *m, const char *bpf_dir,
			       const struct o1_metrics_perm *perm);
/* Writer: creates the fallback file at path (atomically replacing a dead
 * writer's) and maps it read-write; -EADDRINUSE, touching nothing, when a
 * live writer owns the file at path. */
int o1_metrics_maps_create_shm(struct o1_metrics_maps *m, const char *path,
			       const struct o1_metrics_perm *perm);
/* Writer: private anonymous memory (metrics kept but not published). */
int o1_metrics_maps_create_anon(struct o1_metrics_maps *m);
/* Writer: stamps info (magic last, with release). */
void o1_metrics_maps_publish(struct o1_metrics_maps *m);

/* Reader: opens the pins under bpf_dir/v3/ read-only (fds, no mapping). */
int o1_metrics_maps_open_bpf(struct o1_metrics_maps *m, const char *bpf_dir);
/* Copies region r (o1_metrics_region_size(r) bytes) into dst: from the
 * mapping (u64 by u64, relaxed), or by BPF_MAP_LOOKUP_ELEM for a bpf
 * reader. */
int o1_metrics_maps_read(const struct o1_metrics_maps *m,
			 enum o1_metrics_region r, void *dst);
/* Copies the run-queue delay histogram (struct o1_metrics_hist) that the
 * optional BPF program keeps in the o1_runq pin; -ENOENT without one. */
int o1_metrics_maps_read_runq(const struct o1_metrics_maps *m, void *dst);

/* Gives a pin or file the metrics permissions (logged on failure). */
int o1_metrics_set_perm(const char *path, const struct o1_metrics_perm *perm);
/* Reader: opens the fallback file read-only. */
int o1_metrics_maps_open_shm(struct o1_metrics_maps *m, const char *path);

/* Reader: the writer's pid as the metrics name it (*pid), and whether it
 * still runs (1) or not (0); -errno when the info cannot be read. */
int o1_metrics_maps_owner(const struct o1_metrics_maps *m, uint64_t *pid);

/* Unmaps and closes; with unlink, also removes the pins or the file (a
 * writer's own only: a file at path that is not the one it made stays). */
void o1_metrics_maps_close(struct o1_metrics_maps *m, bool unlink_them);

#endif
