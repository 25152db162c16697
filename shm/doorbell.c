/* Doorbell wake-ups over futex words in shared memory; see doorbell.h for
 * the fence protocol. Shared (not private) futexes: both processes map the
 * same memfd, so the kernel keys the word by page, not by address space. */
#include "doorbell.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

uint32_t o1_doorbell_prepare(struct o1_ring_ctrl *ctrl)
{
	uint32_t seq =
	    atomic_load_explicit(&ctrl->doorbell, memory_order_acquire);

	atomic_fetch_or_explicit(&ctrl->flags, O1_RING_NEED_WAKEUP,
				 memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return seq;
}

void o1_doorbell_cancel(struct o1_ring_ctrl *ctrl)
{
	atomic_fetch_and_explicit(&ctrl->flags, ~(uint32_t)O1_RING_NEED_WAKEUP,
				  memory_order_relaxed);
}

int o1_doorbell_wait(struct o1_ring_ctrl *ctrl, uint32_t seq,
		     int64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;
	long ret;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tsp = &ts;
	}
	ret =
	    syscall(SYS_futex, &ctrl->doorbell, FUTEX_WAIT, seq, tsp, NULL, 0);
	if (ret == 0 || errno == EAGAIN)
		return 0;
	return -errno;
}

int o1_doorbell_ring(struct o1_ring_ctrl *ctrl, int efd)
{
	uint64_t one = 1;

	atomic_fetch_add_explicit(&ctrl->doorbell, 1, memory_order_release);
	if (efd >= 0) {
		if (write(efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			return -errno;
		return 1;
	}
	if (syscall(SYS_futex, &ctrl->doorbell, FUTEX_WAKE, INT_MAX, NULL, NULL,
		    0) < 0)
		return -errno;
	return 1;
}

int o1_doorbell_notify_fenced(struct o1_ring_ctrl *ctrl, int efd)
{
	if (!(atomic_load_explicit(&ctrl->flags, memory_order_relaxed) &
	      O1_RING_NEED_WAKEUP))
		return 0;
	return o1_doorbell_ring(ctrl, efd);
}

int o1_doorbell_notify(struct o1_ring_ctrl *ctrl, int efd)
{
	atomic_thread_fence(memory_order_seq_cst);
	return o1_doorbell_notify_fenced(ctrl, efd);
}
