/* The start-up warm-up generation (see engine.h): one short greedy
 * request run through the scheduler on the calling thread, before the
 * engine thread starts, so the first client does not pay for cold caches
 * and readiness means a real generation succeeded.
 *
 * Invariants: called once, before o1_engine_start (no other thread touches
 * the engine yet); the slot is taken from and returned to the free list
 * here, so n_held is unchanged; nothing of it reaches the metrics (the
 * scheduler counts nothing meanwhile, the graph counters it moved are
 * taken as the baseline), so SLOs see client traffic only.
 */
#include <errno.h>
#include <string.h>

#include "engine_int.h"
#include "common/error.h"
#include "common/log.h"

#define WARMUP_STEPS_MAX 4096
#define WARMUP_TEXT	 "Hello"

static void fill_warmup(struct o1_engine *e, struct o1_req *r,
			uint32_t max_tokens)
{
	const struct o1_sched_opts *so = &e->o.sched;
	struct o1_wire_submit *p = &r->params;
	uint32_t id = so->bos_id >= 0 ? (uint32_t)so->bos_id : 0;

	memset(p, 0, sizeof(*p));
	p->op = O1_OP_SUBMIT;
	p->flags = O1_SUBMIT_IGNORE_EOS | O1_SUBMIT_NO_TEXT;
	p->max_tokens = max_tokens;
	p->top_p = 1.0f;
	p->repeat_penalty = 1.0f;
	if (so->tok) {
		p->prompt_kind = O1_PROMPT_TEXT;
		p->flags |= O1_SUBMIT_ADD_BOS;
		r->prompt_bytes = sizeof(WARMUP_TEXT) - 1;
		memcpy(r->prompt, WARMUP_TEXT, r->prompt_bytes);
	} else {
		p->prompt_kind = O1_PROMPT_IDS;
		r->prompt_bytes = sizeof(id);
		memcpy(r->prompt, &id, sizeof(id));
	}
	p->prompt_len = so->tok ? r->prompt_bytes : 1;
	r->client_id = UINT32_MAX;
	r->req_id = 0;
	r->submit_ns = o1_engine_now_ns();
	r->n_stop_ids = 0;
	r->stop_str_bytes = 0;
	r->n_stop_str = 0;
	atomic_store(&r->cancel, O1_REQ_RUN);
	atomic_store(&r->phase, O1_REQ_QUEUED);
	atomic_store(&r->generated, 0);
	atomic_store(&r->n_prompt, 0);
	atomic_store(&r->out_head, 0);
	atomic_store(&r->out_tail, 0);
}

/* Consumes the slot's events; 1 with *fin filled once the FINAL came. */
static int take_events(struct o1_req *r, struct o1_wire_final *fin)
{
	uint32_t head = atomic_load(&r->out_head);
	uint32_t tail = atomic_load(&r->out_tail);
	int done = 0;

	for (; tail != head; tail++) {
		const union o1_wire_entry *ev =
		    &r->out[tail & (O1_REQ_OUT_ENTRIES - 1)];

		if (ev->op == O1_EV_FINAL) {
			*fin = ev->final;
			done = 1;
		}
	}
	atomic_store(&r->out_tail, tail);
	return done;
}

static int run_warmup(struct o1_engine *e, struct o1_req *r,
		      struct o1_wire_final *fin)
{
	int n;

	o1_sched_add(e->sched, r);
	for (uint32_t i = 0; i < WARMUP_STEPS_MAX; i++) {
		if (take_events(r, fin))
			return 0;
		n = o1_sched_step(e->sched);
		if (n < 0 && take_events(r, fin))
			return 0;
		if (n < 0)
			return n;
	}
	o1_err("warm-up: no FINAL after %d steps", WARMUP_STEPS_MAX);
	o1_sched_fail_all(e->sched);
	take_events(r, fin);
	return -ETIMEDOUT;
}

int o1_engine_warmup(struct o1_engine *e, uint32_t max_tokens,
		     uint64_t *took_ns)
{
	struct o1_wire_final fin = {.reason = O1_FINISH_ERROR};
	uint64_t t0 = o1_engine_now_ns();
	struct o1_req *r;
	int err;

	if (e->thread_started || e->free_head == UINT32_MAX || !max_tokens)
		return -EINVAL;
	r = &e->slots[e->free_head];
	e->free_head = r->next_free;
	fill_warmup(e, r, max_tokens);
	o1_sched_set_metrics(e->sched, NULL);
	err = run_warmup(e, r, &fin);
	o1_sched_set_metrics(e->sched, e->metrics);
	if (e->o.graph_stats)
		e->o.graph_stats(e->o.graph_ctx, &e->graph_last);
	r->next_free = e->free_head;
	e->free_head = r->index;
	*took_ns = o1_engine_now_ns() - t0;
	if (err)
		return err;
	if (fin.reason == O1_FINISH_ERROR ||
	    fin.reason == O1_FINISH_CANCELLED ||
	    fin.generated_tokens != max_tokens) {
		o1_err("warm-up: finished with reason %u error %d after %u of "
		       "%u tokens",
		       fin.reason, fin.error, fin.generated_tokens, max_tokens);
		return fin.error ? fin.error : -EIO;
	}
	e->warmup_ns = *took_ns;
	e->warmup_ok = true;
	return 0;
}

void o1_engine_set_graphs(struct o1_engine *e, uint32_t total,
			  uint32_t captured)
{
	e->graphs_total = total;
	e->graphs_captured = captured;
}
