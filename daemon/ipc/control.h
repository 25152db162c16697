/* Control-socket plumbing for the front loop: the listening socket, peer
 * credentials, the hello/welcome exchange and the sealed per-client memfd.
 * All calls are non-blocking on sockets the loop owns; none keeps state. */
#ifndef O1_IPC_CONTROL_H
#define O1_IPC_CONTROL_H

#include <stdint.h>
#include <sys/socket.h>

#include "ipc.h"
#include "shm/region.h"
#include "shm/wire.h"

/* Creates the SOCK_SEQPACKET listener at path with the given mode,
 * replacing a stale socket file (one nobody listens on; never another kind
 * of file). A live owner's socket is left alone: -EADDRINUSE, logged as
 * "another o1d (pid N) is serving on PATH". */
int o1_ipc_listen(const char *path, uint32_t mode, int *out_fd);
/* Whether a daemon listens at path: 1 (its pid in *pid, 0 when unknown),
 * 0 when nobody does (no file there, or a socket no one is bound to), or
 * -errno (-EEXIST: not a socket; -EACCES: no way to tell). Connects and
 * hangs up at once. */
int o1_ipc_probe(const char *path, pid_t *pid);
/* Start-up check before anything is loaded: path fits, its directory
 * exists and is writable, and no daemon serves there (-EADDRINUSE). Logs
 * the reason with what to do. */
int o1_ipc_socket_check(const char *path);
/* Reads SO_PEERCRED into *cred and checks it (and SO_PEERGROUPS) against
 * the allowed lists in opts. Returns 0, -EACCES or -errno. */
int o1_ipc_peer_check(int fd, const struct o1_ipc_opts *opts,
		      struct ucred *cred);
/* Checks credentials already read against opts->admin_uids (empty: the
 * daemon's uid and root). Returns 0 or -EACCES. */
int o1_ipc_admin_check(const struct o1_ipc_opts *o, const struct ucred *cred);
/* Receives one hello. Returns 0, -EAGAIN (nothing yet), -ECONNRESET (peer
 * closed), -O1_E_PROTOCOL (wrong size or magic, fds attached: those are
 * closed) or -O1_E_VERSION. */
int o1_ipc_recv_hello(int fd, struct o1_wire_hello *out);
/* Reads and discards what a refused peer sent, without waiting: at most 8
 * messages, closing any descriptors they carry. Returns how many were
 * read, -EAGAIN (nothing waiting), -ECONNRESET (peer hung up) or -errno. */
int o1_ipc_discard(int fd);
/* Creates the memfd of l->total_bytes, maps it, formats the region and
 * seals it against resizing. Returns 0 with *memfd and *base, or -errno. */
int o1_ipc_region_create(const struct o1_region_layout *l, uint16_t flags,
			 uint32_t client_id, int *memfd, void **base);
/* Sends the welcome with n_fds descriptors (0..2). Returns 0 or -errno. */
int o1_ipc_send_welcome(int fd, const struct o1_wire_welcome *w, const int *fds,
			int n_fds);

#endif
