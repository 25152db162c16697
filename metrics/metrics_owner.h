/* Who owns a published metrics location (the pin directory or the
 * fallback file). The writer holds an exclusive flock on it for its whole
 * life, so a second writer tells a live owner from a dead one's leftovers
 * (the kernel drops the lock when the holder dies, SIGKILL included), and
 * a reader finds the holder in /proc/locks without taking any lock (a
 * reader's lock could make a starting writer think the place taken).
 *
 * Invariant: a writer touches pins or a file (replace, unlink) only while
 * it holds their lock, and gives the lock up only after it removed them. */
#ifndef O1_METRICS_OWNER_H
#define O1_METRICS_OWNER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Locks fd (a directory or file open for reading) for the caller's life:
 * 0; -EADDRINUSE when another process holds it (its pid in *holder, 0 when
 * /proc/locks does not tell); -errno otherwise. Closing fd lets go. */
int o1_metrics_owner_lock(int fd, pid_t *holder);
/* The process holding the lock on path: 1 with *pid, 0 when none does,
 * -errno when path or /proc/locks cannot be read. */
int o1_metrics_owner_find(const char *path, pid_t *pid);
/* Whether the writer of the metrics whose pin directory or file is the
 * inode (dev, ino), and which names itself info_pid there, still runs:
 * whether anyone holds that inode's lock when /proc/locks tells, else
 * kill(info_pid, 0) (no pid: not running). */
bool o1_metrics_owner_alive(dev_t dev, ino_t ino, uint64_t info_pid);

#endif
