/* Metric regions as pinned, mmap-able BPF array maps described by BTF, or
 * as slices of one shared-memory file.
 *
 * BPF: four BPF_MAP_TYPE_ARRAY maps with one entry (key u32 0) each,
 * created with BPF_F_MMAPABLE and a BTF value type built here from the
 * field tables of metrics.h, so `bpftool map dump` prints field names. The
 * value of entry 0 starts at offset 0 of the map's mapping.
 * File: the regions at o1_metrics_region_offset(), 4096-aligned. The writer
 * fills a temporary file, then renames it over the old one, so a reader
 * never sees a half-made file; info.magic is stored last.
 * Readers map everything read-only and check magic, version and geometry
 * before handing out pointers. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>

#include "common/error.h"
#include "common/log.h"
#include "metrics_map.h"
#include "metrics_owner.h"

static const char *const region_names[O1_METRICS_R__COUNT] = {
    [O1_METRICS_R_INFO] = "o1_info",
    [O1_METRICS_R_COUNTERS] = "o1_counters",
    [O1_METRICS_R_HISTS] = "o1_hist",
    [O1_METRICS_R_GRAPHS] = "o1_graphs",
};

static const size_t region_sizes[O1_METRICS_R__COUNT] = {
    [O1_METRICS_R_INFO] = sizeof(struct o1_metrics_info),
    [O1_METRICS_R_COUNTERS] = sizeof(struct o1_metrics_counters),
    [O1_METRICS_R_HISTS] = sizeof(struct o1_metrics_hists),
    [O1_METRICS_R_GRAPHS] = sizeof(struct o1_metrics_graphs),
};

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

int o1_metrics_shm_path_for(const char *shm_path, const char *socket, char *buf,
			    size_t len)
{
	int n;

	if (shm_path && *shm_path)
		n = snprintf(buf, len, "%s", shm_path);
	else
		n = snprintf(buf, len, "%s-%016llx",
			     O1_METRICS_DEFAULT_SHM_PATH,
			     (unsigned long long)fnv1a64(socket ? socket : ""));
	if (n < 0 || (size_t)n >= len) {
		o1_err("metrics: fallback path for socket %s does not fit in "
		       "%zu bytes",
		       socket ? socket : "(none)", len);
		return -ENAMETOOLONG;
	}
	return 0;
}

const char *o1_metrics_region_name(enum o1_metrics_region r)
{
	return region_names[r];
}

size_t o1_metrics_region_size(enum o1_metrics_region r)
{
	return region_sizes[r];
}

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

size_t o1_metrics_region_offset(enum o1_metrics_region r)
{
	size_t off = 0;

	for (unsigned i = 0; i < (unsigned)r; i++)
		off += align_up(region_sizes[i], O1_METRICS_SHM_ALIGN);
	return off;
}

size_t o1_metrics_file_size(void)
{
	return o1_metrics_region_offset(O1_METRICS_R__COUNT);
}

/* ---- BTF ---- */

struct btf_ids {
	int u32, u64, bucket_array, span_array;
};

static int btf_field(struct btf *btf, const char *name, int type, size_t off)
{
	return btf__add_field(btf, name, type, (uint32_t)(off * 8), 0);
}

static int btf_info(struct btf *btf, const struct btf_ids *t)
{
	int id = btf__add_struct(btf, "o1_metrics_info",
				 sizeof(struct o1_metrics_info));
	int err = 0;

#define O1_METRICS_X(field, ty)                                                \
	if (id > 0 && !err)                                                    \
		err = btf_field(btf, #field, t->ty,                            \
				offsetof(struct o1_metrics_info, field));
	O1_METRICS_INFO_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	return err ? err : id;
}

static int btf_counters(struct btf *btf, const struct btf_ids *t)
{
	int id = btf__add_struct(btf, "o1_metrics_counters",
				 sizeof(struct o1_metrics_counters));
	int err = 0;

#define O1_METRICS_X(cid, field, type, prom, label, help)                      \
	if (id > 0 && !err)                                                    \
		err = btf_field(btf, #field, t->u64,                           \
				offsetof(struct o1_metrics_counters, field));
	O1_METRICS_COUNTER_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	return err ? err : id;
}

/* struct o1_metrics_hist, then struct o1_metrics_hists of it. */
static int btf_hists(struct btf *btf, const struct btf_ids *t)
{
	int slots, hist, id, err;

	slots = btf__add_array(btf, t->u32, t->u64, O1_METRICS_HIST_SLOTS);
	if (slots < 0)
		return slots;
	hist = btf__add_struct(btf, "o1_metrics_hist",
			       sizeof(struct o1_metrics_hist));
	if (hist < 0)
		return hist;
	err = btf_field(btf, "count", t->u64,
			offsetof(struct o1_metrics_hist, count));
	err = err
		  ?: btf_field(btf, "sum_us", t->u64,
			       offsetof(struct o1_metrics_hist, sum_us));
	err = err
		  ?: btf_field(btf, "max_us", t->u64,
			       offsetof(struct o1_metrics_hist, max_us));
	err = err
		  ?: btf_field(btf, "slots", slots,
			       offsetof(struct o1_metrics_hist, slots));
	if (err)
		return err;
	id = btf__add_struct(btf, "o1_metrics_hists",
			     sizeof(struct o1_metrics_hists));
#define O1_METRICS_X(hid, field, prom, help)                                   \
	if (id > 0 && !err)                                                    \
		err = btf_field(btf, #field, hist,                             \
				offsetof(struct o1_metrics_hists, field));
	O1_METRICS_HIST_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	return err ? err : id;
}

static int btf_graphs(struct btf *btf, struct btf_ids *t)
{
	int bucket, span, id, err = 0;

	bucket = btf__add_struct(btf, "o1_metrics_graph_bucket",
				 sizeof(struct o1_metrics_graph_bucket));
#define O1_METRICS_X(field, ty)                                                \
	if (bucket > 0 && !err)                                                \
		err = btf_field(                                               \
		    btf, #field, t->ty,                                        \
		    offsetof(struct o1_metrics_graph_bucket, field));
	O1_METRICS_GRAPH_BUCKET_LIST(O1_METRICS_X)
	if (bucket < 0 || err)
		return bucket < 0 ? bucket : err;
	t->bucket_array =
	    btf__add_array(btf, t->u32, bucket, O1_METRICS_GRAPH_BUCKETS);
	if (t->bucket_array < 0)
		return t->bucket_array;
#undef O1_METRICS_X
	span = btf__add_struct(btf, "o1_metrics_graph_span",
			       sizeof(struct o1_metrics_graph_span));
#define O1_METRICS_X(field, ty)                                                \
	if (span > 0 && !err)                                                  \
		err =                                                          \
		    btf_field(btf, #field, t->ty,                              \
			      offsetof(struct o1_metrics_graph_span, field));
	O1_METRICS_GRAPH_SPAN_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	if (span < 0 || err)
		return span < 0 ? span : err;
	t->span_array =
	    btf__add_array(btf, t->u32, span, O1_METRICS_GRAPH_SPANS);
	if (t->span_array < 0)
		return t->span_array;
	id = btf__add_struct(btf, "o1_metrics_graphs",
			     sizeof(struct o1_metrics_graphs));
#define O1_METRICS_X(field, ty)                                                \
	if (id > 0 && !err)                                                    \
		err = btf_field(btf, #field, t->ty,                            \
				offsetof(struct o1_metrics_graphs, field));
	O1_METRICS_GRAPHS_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	return err ? err : id;
}

int o1_metrics_btf_build(struct btf **out, uint32_t *key_id,
			 uint32_t value_ids[O1_METRICS_R__COUNT])
{
	struct btf_ids t = {0};
	struct btf *btf = btf__new_empty();
	int ids[O1_METRICS_R__COUNT];

	if (!btf)
		return -errno;
	t.u32 = btf__add_int(btf, "__u32", 4, 0);
	t.u64 = btf__add_int(btf, "__u64", 8, 0);
	ids[O1_METRICS_R_INFO] = btf_info(btf, &t);
	ids[O1_METRICS_R_COUNTERS] = btf_counters(btf, &t);
	ids[O1_METRICS_R_HISTS] = btf_hists(btf, &t);
	ids[O1_METRICS_R_GRAPHS] = btf_graphs(btf, &t);
	for (unsigned r = 0; r < O1_METRICS_R__COUNT; r++) {
		if (t.u32 < 0 || t.u64 < 0 || ids[r] < 0) {
			o1_err("metrics: building BTF failed: %s",
			       strerror(errno));
			btf__free(btf);
			return -EINVAL;
		}
		value_ids[r] = (uint32_t)ids[r];
	}
	*key_id = (uint32_t)t.u32;
	*out = btf;
	return 0;
}

/* ---- common ---- */

static void maps_reset(struct o1_metrics_maps *m)
{
	memset(m, 0, sizeof(*m));
	for (unsigned r = 0; r < O1_METRICS_R__COUNT; r++)
		m->fd[r] = -1;
	m->runq_fd = -1;
	m->lock_fd = -1;
}

static int path_join(char *dst, size_t sz, const char *a, const char *b)
{
	int n = snprintf(dst, sz, "%s/%s", a, b);

	if (n < 0 || (size_t)n >= sz) {
		o1_err("metrics: path %s/%s too long", a, b);
		return -ENAMETOOLONG;
	}
	return 0;
}

static unsigned dir_mode(unsigned mode)
{
	return 0700 | (mode & 0077) | ((mode & 0044) >> 2);
}

static int set_perm(const char *path, unsigned mode, long gid)
{
	if (chmod(path, mode) < 0 ||
	    (gid >= 0 && chown(path, (uid_t)-1, (gid_t)gid) < 0)) {
		int err = -errno;

		o1_err("metrics: setting mode %o gid %ld on %s: %s", mode, gid,
		       path, strerror(-err));
		return err;
	}
	return 0;
}

int o1_metrics_set_perm(const char *path, const struct o1_metrics_perm *perm)
{
	return set_perm(path, perm->mode, perm->gid);
}

void o1_metrics_maps_publish(struct o1_metrics_maps *m)
{
	struct o1_metrics_info *info = m->base[O1_METRICS_R_INFO];
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	info->version = O1_METRICS_VERSION;
	info->backend = m->backend;
	info->n_counters = O1_METRICS_CTR__COUNT;
	info->n_hists = O1_METRICS_HIST__COUNT;
	info->hist_slots = O1_METRICS_HIST_SLOTS;
	info->graph_buckets = O1_METRICS_GRAPH_BUCKETS;
	info->graph_spans = O1_METRICS_GRAPH_SPANS;
	info->pid = (uint64_t)getpid();
	info->start_unix_ns =
	    (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	__atomic_store_n(&info->magic, O1_METRICS_MAGIC, __ATOMIC_RELEASE);
}

/* Checks what a reader found: ours, and the geometry it was built for. */
static int check_info(const struct o1_metrics_maps *m,
		      const struct o1_metrics_info *i)
{
	uint32_t magic = __atomic_load_n(&i->magic, __ATOMIC_ACQUIRE);

	if (magic != O1_METRICS_MAGIC) {
		o1_err("metrics: %s: bad magic 0x%08x (want 0x%08x), not o1d "
		       "metrics or still being created",
		       m->path, magic, O1_METRICS_MAGIC);
		return -O1_E_FORMAT;
	}
	if (i->version != O1_METRICS_VERSION ||
	    i->n_counters != O1_METRICS_CTR__COUNT ||
	    i->n_hists != O1_METRICS_HIST__COUNT ||
	    i->hist_slots != O1_METRICS_HIST_SLOTS ||
	    i->graph_buckets != O1_METRICS_GRAPH_BUCKETS ||
	    i->graph_spans != O1_METRICS_GRAPH_SPANS) {
		o1_err("metrics: %s: version %u with %u counters, %u hists, "
		       "%u slots, %u buckets, %u spans; this reader knows "
		       "version %u with %u, %u, %u, %u, %u",
		       m->path, i->version, i->n_counters, i->n_hists,
		       i->hist_slots, i->graph_buckets, i->graph_spans,
		       O1_METRICS_VERSION, O1_METRICS_CTR__COUNT,
		       O1_METRICS_HIST__COUNT, O1_METRICS_HIST_SLOTS,
		       O1_METRICS_GRAPH_BUCKETS, O1_METRICS_GRAPH_SPANS);
		return -O1_E_VERSION;
	}
	return 0;
}

/* Whether the file at m->path is the one this writer made (its lock fd's
 * inode): only that one may be removed. */
static bool is_our_file(const struct o1_metrics_maps *m)
{
	struct stat a, b;

	return m->lock_fd >= 0 && fstat(m->lock_fd, &a) == 0 &&
	       stat(m->path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

void o1_metrics_maps_close(struct o1_metrics_maps *m, bool unlink_them)
{
	char pin[PATH_MAX];

	for (unsigned r = 0; r < O1_METRICS_R__COUNT; r++) {
		if (m->len[r])
			munmap(m->base[r], m->len[r]);
		if (m->fd[r] >= 0)
			close(m->fd[r]);
		if (unlink_them && m->backend == O1_METRICS_BACKEND_BPF &&
		    path_join(pin, sizeof(pin), m->path, region_names[r]) == 0)
			unlink(pin);
	}
	if (m->runq_fd >= 0)
		close(m->runq_fd);
	if (m->file_base)
		munmap(m->file_base, m->file_len);
	if (unlink_them && m->backend == O1_METRICS_BACKEND_SHM &&
	    is_our_file(m))
		unlink(m->path);
	if (unlink_them && m->backend == O1_METRICS_BACKEND_BPF)
		rmdir(m->path);
	if (m->lock_fd >= 0)
		close(m->lock_fd); /* after the unlinks: see metrics_owner.h */
	maps_reset(m);
}

/* ---- BPF maps ---- */

/* Whether path, or its nearest existing ancestor, is on bpffs. */
static int check_bpffs(const char *path)
{
	char p[PATH_MAX];
	struct statfs st;
	char *slash;

	snprintf(p, sizeof(p), "%s", path);
	while (statfs(p, &st) < 0) {
		slash = strrchr(p, '/');
		if (errno != ENOENT || !slash || slash == p) {
			o1_warn("metrics: cannot stat %s: %s", p,
				strerror(errno));
			return -errno;
		}
		*slash = '\0';
	}
	if (st.f_type != BPF_FS_MAGIC) {
		o1_warn("metrics: %s is not on a bpf filesystem (f_type 0x%lx)"
			"; mount one with `mount -t bpf bpf %s`",
			p, (unsigned long)st.f_type, p);
		return -ENOTSUP;
	}
	return 0;
}

/* mkdir -p, giving the directories it creates the metrics permissions. */
static int make_dirs(const char *path, const struct o1_metrics_perm *perm)
{
	char p[PATH_MAX];
	int err;

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
		if (s)
			*s = '\0';
		if (mkdir(p, 0700) == 0) {
			err = set_perm(p, dir_mode(perm->mode), perm->gid);
			if (err)
				return err;
		} else if (errno != EEXIST) {
			o1_warn("metrics: mkdir %s: %s", p, strerror(errno));
			return -errno;
		}
		if (!s)
			return 0;
		*s = '/';
	}
}

static int map_create(struct o1_metrics_maps *m, enum o1_metrics_region r,
		      int btf_fd, uint32_t key_id, uint32_t value_id)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .btf_fd = (uint32_t)btf_fd,
		    .btf_key_type_id = key_id, .btf_value_type_id = value_id,
		    .map_flags = BPF_F_MMAPABLE);
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	m->fd[r] = bpf_map_create(BPF_MAP_TYPE_ARRAY, region_names[r],
				  sizeof(uint32_t), (uint32_t)region_sizes[r],
				  1, &opts);
	if (m->fd[r] < 0) {
		o1_warn("metrics: creating map %s (value %zu bytes): %s",
			region_names[r], region_sizes[r], strerror(-m->fd[r]));
		return m->fd[r];
	}
	p = mmap(NULL, align_up(region_sizes[r], (size_t)page),
		 PROT_READ | PROT_WRITE, MAP_SHARED, m->fd[r], 0);
	if (p == MAP_FAILED) {
		o1_warn("metrics: mmap of map %s: %s", region_names[r],
			strerror(errno));
		return -errno;
	}
	m->base[r] = p;
	m->len[r] = align_up(region_sizes[r], (size_t)page);
	return 0;
}

static int maps_create_all(struct o1_metrics_maps *m)
{
	uint32_t key_id, value_ids[O1_METRICS_R__COUNT];
	struct btf *btf;
	int err;

	err = o1_metrics_btf_build(&btf, &key_id, value_ids);
	if (err)
		return err;
	err = btf__load_into_kernel(btf);
	if (err) {
		o1_warn("metrics: loading BTF into the kernel: %s",
			strerror(-err));
		goto out_btf;
	}
	for (unsigned r = 0; r < O1_METRICS_R__COUNT && !err; r++)
		err = map_create(m, r, btf__fd(btf), key_id, value_ids[r]);
out_btf:
	btf__free(btf);
	return err;
}

static int map_pin(struct o1_metrics_maps *m, enum o1_metrics_region r,
		   const struct o1_metrics_perm *perm)
{
	char pin[PATH_MAX];
	int err = path_join(pin, sizeof(pin), m->path, region_names[r]);

	if (err)
		return err;
	if (unlink(pin) == 0)
		o1_info("metrics: replaced stale pin %s", pin);
	err = bpf_obj_pin(m->fd[r], pin);
	if (err) {
		o1_warn("metrics: pinning %s at %s: %s", region_names[r], pin,
			strerror(-err));
		return err;
	}
	return set_perm(pin, perm->mode, perm->gid);
}

/* The owner lock on the pin directory: a live writer's pins are never
 * replaced (see metrics_owner.h). */
static int claim_dir(struct o1_metrics_maps *m)
{
	pid_t pid;
	int err;

	m->lock_fd = open(m->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (m->lock_fd < 0) {
		err = -errno;
		o1_warn("metrics: opening %s: %s", m->path, strerror(-err));
		return err;
	}
	err = o1_metrics_owner_lock(m->lock_fd, &pid);
	if (err == -EADDRINUSE)
		o1_err("another o1d (pid %d) publishes metrics under %s; stop "
		       "it or set metrics.bpf_dir",
		       (int)pid, m->path);
	else if (err)
		o1_warn("metrics: locking %s: %s", m->path, strerror(-err));
	return err;
}

int o1_metrics_maps_create_bpf(struct o1_metrics_maps *m, const char *bpf_dir,
			       const struct o1_metrics_perm *perm)
{
	int err;

	maps_reset(m);
	m->backend = O1_METRICS_BACKEND_BPF;
	err =
	    path_join(m->path, sizeof(m->path), bpf_dir, O1_METRICS_PIN_SUBDIR);
	err = err ?: check_bpffs(bpf_dir);
	err = err ?: make_dirs(m->path, perm);
	err = err ?: claim_dir(m);
	err = err ?: set_perm(m->path, dir_mode(perm->mode), perm->gid);
	err = err ?: maps_create_all(m);
	if (err)
		goto fail_maps;
	o1_metrics_maps_publish(m);
	for (unsigned r = 0; r < O1_METRICS_R__COUNT && !err; r++)
		err = map_pin(m, r, perm);
	if (err)
		goto fail_pins;
	return 0;
fail_pins:
	/* no reader may find a mix of our pins and a previous run's */
	o1_metrics_maps_close(m, true);
	return err;
fail_maps:
	o1_metrics_maps_close(m, false);
	return err;
}

/* Readers get a read-only fd (the pins may be 0640) and copy values with
 * BPF_MAP_LOOKUP_ELEM: a read-only fd cannot be mmap-ed MAP_SHARED, the
 * kernel requires VM_SHARED, which mmap drops for files not open for
 * writing. */
static int map_open(struct o1_metrics_maps *m, enum o1_metrics_region r)
{
	LIBBPF_OPTS(bpf_obj_get_opts, opts, .file_flags = BPF_F_RDONLY);
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	char pin[PATH_MAX];
	int err = path_join(pin, sizeof(pin), m->path, region_names[r]);

	if (err)
		return err;
	m->fd[r] = bpf_obj_get_opts(pin, &opts);
	if (m->fd[r] < 0) {
		if (m->fd[r] != -ENOENT)
			o1_err("metrics: opening pin %s: %s", pin,
			       strerror(-m->fd[r]));
		return m->fd[r];
	}
	err = bpf_obj_get_info_by_fd(m->fd[r], &info, &len);
	if (err)
		return err;
	if (info.type != BPF_MAP_TYPE_ARRAY ||
	    info.value_size != region_sizes[r] || info.max_entries != 1 ||
	    !(info.map_flags & BPF_F_MMAPABLE)) {
		o1_err("metrics: %s: map type %u value %u bytes x %u flags "
		       "0x%x; want an mmapable array of one %zu-byte value",
		       pin, info.type, info.value_size, info.max_entries,
		       info.map_flags, region_sizes[r]);
		return -O1_E_VERSION;
	}
	return 0;
}

int o1_metrics_maps_read(const struct o1_metrics_maps *m,
			 enum o1_metrics_region r, void *dst)
{
	uint32_t key = 0;
	int err;

	if (!m->fd_only) {
		const uint64_t *src = m->base[r];
		uint64_t *d = dst;

		for (size_t i = 0; i < region_sizes[r] / sizeof(*d); i++)
			d[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
		return 0;
	}
	err = bpf_map_lookup_elem(m->fd[r], &key, dst);
	if (err)
		o1_err("metrics: reading map %s under %s: %s", region_names[r],
		       m->path, strerror(-err));
	return err;
}

/* The optional o1_runq pin: kept when it is a one-entry array of one
 * struct o1_metrics_hist, ignored otherwise. */
static void runq_open(struct o1_metrics_maps *m)
{
	LIBBPF_OPTS(bpf_obj_get_opts, opts, .file_flags = BPF_F_RDONLY);
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	char pin[PATH_MAX];

	if (path_join(pin, sizeof(pin), m->path, O1_METRICS_RUNQ_PIN))
		return;
	m->runq_fd = bpf_obj_get_opts(pin, &opts);
	if (m->runq_fd < 0) {
		m->runq_fd = -1;
		return;
	}
	if (bpf_obj_get_info_by_fd(m->runq_fd, &info, &len) ||
	    info.type != BPF_MAP_TYPE_ARRAY || info.max_entries != 1 ||
	    info.value_size != sizeof(struct o1_metrics_hist)) {
		o1_warn("metrics: ignoring %s: not a run-queue histogram", pin);
		close(m->runq_fd);
		m->runq_fd = -1;
	}
}

int o1_metrics_maps_read_runq(const struct o1_metrics_maps *m, void *dst)
{
	uint32_t key = 0;

	if (m->runq_fd < 0)
		return -ENOENT;
	return bpf_map_lookup_elem(m->runq_fd, &key, dst);
}

/* Where the owner lock of what a reader opened lives. */
static int note_owner(struct o1_metrics_maps *m, int fd)
{
	struct stat st;

	if ((fd >= 0 ? fstat(fd, &st) : stat(m->path, &st)) != 0)
		return -errno;
	m->owner_dev = st.st_dev;
	m->owner_ino = st.st_ino;
	return 0;
}

int o1_metrics_maps_owner(const struct o1_metrics_maps *m, uint64_t *pid)
{
	struct o1_metrics_info info;
	int err = o1_metrics_maps_read(m, O1_METRICS_R_INFO, &info);

	if (err)
		return err;
	*pid = info.pid;
	return o1_metrics_owner_alive(m->owner_dev, m->owner_ino, info.pid);
}

int o1_metrics_maps_open_bpf(struct o1_metrics_maps *m, const char *bpf_dir)
{
	struct o1_metrics_info info;
	int err;

	maps_reset(m);
	m->backend = O1_METRICS_BACKEND_BPF;
	m->fd_only = true;
	err =
	    path_join(m->path, sizeof(m->path), bpf_dir, O1_METRICS_PIN_SUBDIR);
	err = err ?: note_owner(m, -1);
	for (unsigned r = 0; r < O1_METRICS_R__COUNT && !err; r++)
		err = map_open(m, r);
	err = err ?: o1_metrics_maps_read(m, O1_METRICS_R_INFO, &info);
	err = err ?: check_info(m, &info);
	if (err)
		o1_metrics_maps_close(m, false);
	else
		runq_open(m);
	return err;
}

/* ---- shared-memory file ---- */

static void file_regions(struct o1_metrics_maps *m)
{
	for (unsigned r = 0; r < O1_METRICS_R__COUNT; r++)
		m->base[r] = (char *)m->file_base + o1_metrics_region_offset(r);
}

static int file_fill(struct o1_metrics_maps *m, int fd,
		     const struct o1_metrics_perm *perm, const char *tmp)
{
	void *p;

	if (fchmod(fd, perm->mode) < 0 ||
	    (perm->gid >= 0 && fchown(fd, (uid_t)-1, (gid_t)perm->gid) < 0) ||
	    ftruncate(fd, (off_t)o1_metrics_file_size()) < 0) {
		o1_err("metrics: preparing %s (mode %o gid %ld): %s", tmp,
		       perm->mode, perm->gid, strerror(errno));
		return -errno;
	}
	p = mmap(NULL, o1_metrics_file_size(), PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		o1_err("metrics: mmap of %s: %s", tmp, strerror(errno));
		return -errno;
	}
	m->file_base = p;
	m->file_len = o1_metrics_file_size();
	file_regions(m);
	o1_metrics_maps_publish(m);
	return 0;
}

/* The owner lock of the file at path, when there is one (*old: its fd, or
 * -1 when there is no file); -EADDRINUSE (logged) when a live writer
 * holds it. */
static int claim_file(const char *path, int *old)
{
	pid_t pid;
	int err;

	*old = open(path, O_RDONLY | O_CLOEXEC);
	if (*old < 0 && errno == ENOENT)
		return 0;
	err = *old < 0 ? -errno : o1_metrics_owner_lock(*old, &pid);
	if (err == -EADDRINUSE)
		o1_err("another o1d (pid %d) publishes metrics at %s; stop it "
		       "or set metrics.shm_path",
		       (int)pid, path);
	else if (err)
		o1_err("metrics: cannot tell whether %s is in use: %s", path,
		       strerror(-err));
	if (err && *old >= 0) {
		close(*old);
		*old = -1;
	}
	return err;
}

/* Puts the filled file tmp at m->path: over a dead writer's (*old, whose
 * lock we hold), or by link where there was none, so that a file another
 * writer made meanwhile is claimed in turn rather than replaced. */
static int place_file(struct o1_metrics_maps *m, const char *tmp, int *old)
{
	int err;

	for (int tries = 0; tries < 3; tries++) {
		if (*old >= 0)
			err = rename(tmp, m->path) == 0 ? 0 : -errno;
		else if (link(tmp, m->path) == 0)
			err = unlink(tmp) == 0 ? 0 : -errno;
		else if (errno == EEXIST)
			err = claim_file(m->path, old) ?: -EAGAIN;
		else
			err = -errno;
		if (err != -EAGAIN)
			break;
	}
	if (err && err != -EADDRINUSE)
		o1_err("metrics: putting %s at %s: %s", tmp, m->path,
		       strerror(-err));
	return err;
}

int o1_metrics_maps_create_shm(struct o1_metrics_maps *m, const char *path,
			       const struct o1_metrics_perm *perm)
{
	char tmp[PATH_MAX];
	int fd, err, n, old = -1;
	pid_t pid;

	maps_reset(m);
	m->backend = O1_METRICS_BACKEND_SHM;
	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp) ||
	    strlen(path) >= sizeof(m->path)) {
		o1_err("metrics: path %s too long", path);
		return -ENAMETOOLONG;
	}
	strcpy(m->path, path);
	err = claim_file(path, &old);
	if (err)
		return err;
	unlink(tmp); /* left by a crashed run with our pid */
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		o1_err("metrics: creating %s: %s", tmp, strerror(-err));
		goto close_old;
	}
	m->lock_fd = fd; /* a fresh file: nobody else holds its lock */
	err = o1_metrics_owner_lock(fd, &pid);
	err = err ?: file_fill(m, fd, perm, tmp);
	err = err ?: place_file(m, tmp, &old);
	if (err) {
		unlink(tmp);
		o1_metrics_maps_close(m, false);
	}
close_old:
	if (old >= 0)
		close(old);
	return err;
}

int o1_metrics_maps_create_anon(struct o1_metrics_maps *m)
{
	void *p;

	maps_reset(m);
	m->backend = O1_METRICS_BACKEND_ANON;
	strcpy(m->path, "(anonymous)");
	p = mmap(NULL, o1_metrics_file_size(), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	m->file_base = p;
	m->file_len = o1_metrics_file_size();
	file_regions(m);
	o1_metrics_maps_publish(m);
	return 0;
}

static int file_map(struct o1_metrics_maps *m, int fd)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((size_t)st.st_size != o1_metrics_file_size()) {
		o1_err("metrics: %s is %lld bytes, want %zu: another version "
		       "of o1d metrics or not a metrics file",
		       m->path, (long long)st.st_size, o1_metrics_file_size());
		return -O1_E_VERSION;
	}
	p = mmap(NULL, o1_metrics_file_size(), PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		o1_err("metrics: mmap of %s: %s", m->path, strerror(errno));
		return -errno;
	}
	m->file_base = p;
	m->file_len = o1_metrics_file_size();
	file_regions(m);
	return check_info(m, m->base[O1_METRICS_R_INFO]);
}

int o1_metrics_maps_open_shm(struct o1_metrics_maps *m, const char *path)
{
	int fd, err;

	maps_reset(m);
	m->backend = O1_METRICS_BACKEND_SHM;
	if (strlen(path) >= sizeof(m->path))
		return -ENAMETOOLONG;
	strcpy(m->path, path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			o1_err("metrics: opening %s: %s", path,
			       strerror(errno));
		return -errno;
	}
	err = note_owner(m, fd) ?: file_map(m, fd);
	close(fd);
	if (err)
		o1_metrics_maps_close(m, false);
	return err;
}
