/* Doorbells: how one side of a ring wakes the other only when it sleeps.
 *
 * Protocol (a Dekker pair with sequentially consistent fences; the same
 * shape as liburing's sq_ring_needs_enter):
 *   consumer: seq = o1_doorbell_prepare()   reads doorbell, sets NEED_WAKEUP,
 *                                           full fence
 *             re-check the ring; if it holds entries: o1_doorbell_cancel()
 *             else sleep until doorbell != seq (futex wait, or io_uring
 *             FUTEX_WAIT, or an eventfd), then o1_doorbell_cancel().
 *   producer: o1_ring_commit(); o1_doorbell_notify(): full fence, and only
 *             when NEED_WAKEUP is set: doorbell += 1, futex wake (or an
 *             eventfd write).
 * Either the consumer's re-check sees the new tail or the producer sees
 * NEED_WAKEUP; both fences are seq_cst, so they cannot both miss. A wake
 * that lands between prepare and the sleep changed doorbell, so the futex
 * wait returns at once. A stale NEED_WAKEUP costs one needless syscall.
 * The futex words live in a MAP_SHARED mapping: never FUTEX_PRIVATE. */
#ifndef O1_DOORBELL_H
#define O1_DOORBELL_H

#include <stdint.h>
#include <time.h>

#include "ring.h"

/* Consumer: announces an intended sleep; returns the doorbell sequence to
 * wait on. The caller re-checks its ring after this. */
uint32_t o1_doorbell_prepare(struct o1_ring_ctrl *ctrl);
/* Consumer: clears NEED_WAKEUP (awake again, or the re-check found work). */
void o1_doorbell_cancel(struct o1_ring_ctrl *ctrl);
/* Consumer: sleeps until the doorbell differs from seq, timeout_ns passes
 * (< 0: no limit) or a signal arrives. Returns 0, -ETIMEDOUT or -EINTR. */
int o1_doorbell_wait(struct o1_ring_ctrl *ctrl, uint32_t seq,
		     int64_t timeout_ns);
/* Producer, after a commit: wakes the consumer if it asked for it, through
 * eventfd when efd >= 0, else a futex wake. Returns 1 when it rang, 0 when
 * no wake-up was needed, or -errno. */
int o1_doorbell_notify(struct o1_ring_ctrl *ctrl, int efd);
/* The same after the caller's own seq_cst fence, run after its commits:
 * one fence serves every ring a pass published (a fence waits for the
 * stores before it, so a fence per ring costs a cache miss per ring). */
int o1_doorbell_notify_fenced(struct o1_ring_ctrl *ctrl, int efd);
/* Rings unconditionally (used to break a sleeper out, e.g. on shutdown). */
int o1_doorbell_ring(struct o1_ring_ctrl *ctrl, int efd);

#endif
