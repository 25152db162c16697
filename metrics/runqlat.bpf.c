/* Run-queue delay of one process's threads: the time from a thread being
 * made runnable (sched_wakeup, sched_wakeup_new, or preempted while
 * running) to it getting a CPU (sched_switch), as a log2 histogram in
 * microseconds laid out as struct o1_metrics_hist (metrics.h): count,
 * sum_us, max_us, slots[O1_METRICS_HIST_SLOTS], slot = floor(log2(us)), slot 0 for
 * 0 and 1, clamped to the last slot. The loader checks the value size.
 *
 * Invariants: start holds at most one timestamp per thread id, deleted
 * when the thread runs; targ_tgid is set before load and never changes. */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define HIST_SLOTS   32 /* O1_METRICS_HIST_SLOTS */
#define TASK_RUNNING 0

const volatile __u32 targ_tgid = 0;

struct runq_hist {
	__u64 count;
	__u64 sum_us;
	__u64 max_us;
	__u64 slots[HIST_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct runq_hist);
} o1_runq SEC(".maps");

static __always_inline __u32 slot_of(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) {
		v >>= 32;
		r += 32;
	}
	if (v >> 16) {
		v >>= 16;
		r += 16;
	}
	if (v >> 8) {
		v >>= 8;
		r += 8;
	}
	if (v >> 4) {
		v >>= 4;
		r += 4;
	}
	if (v >> 2) {
		v >>= 2;
		r += 2;
	}
	if (v >> 1)
		r += 1;
	return r < HIST_SLOTS ? r : HIST_SLOTS - 1;
}

static __always_inline int enqueue(struct task_struct *p)
{
	__u32 pid = p->pid;
	__u64 ts;

	if (!pid || (__u32)p->tgid != targ_tgid)
		return 0;
	ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&start, &pid, &ts, BPF_ANY);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(o1_wakeup, struct task_struct *p)
{
	return enqueue(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(o1_wakeup_new, struct task_struct *p)
{
	return enqueue(p);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(o1_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	struct runq_hist *h;
	__u32 pid = next->pid, key = 0;
	__u64 *tsp, us;

	if (prev->__state == TASK_RUNNING)
		enqueue(prev);
	tsp = bpf_map_lookup_elem(&start, &pid);
	if (!tsp)
		return 0;
	us = (bpf_ktime_get_ns() - *tsp) / 1000;
	bpf_map_delete_elem(&start, &pid);
	h = bpf_map_lookup_elem(&o1_runq, &key);
	if (!h)
		return 0;
	if (us > h->max_us) /* racy: at worst a lower max (the reader only
			     * clamps quantiles with it) */
		h->max_us = us;
	__sync_fetch_and_add(&h->slots[slot_of(us)], 1);
	__sync_fetch_and_add(&h->sum_us, us);
	__sync_fetch_and_add(&h->count, 1);
	return 0;
}

/* GPL-compatible, as tracing helpers require. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";
