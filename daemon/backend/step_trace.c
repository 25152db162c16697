/* A backend step's phases, logged when slow (step_trace.h). A phase's
 * time is its end minus the end of the last phase marked before it (the
 * step's begin for the first), so skipped phases count 0 and the phases
 * add up to the step. The slow decision compares the step with the median
 * of its kind's window before the step joins it: a run of slow steps
 * raises the median only once it is most of the window.
 */
#include "step_trace.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "common/log.h"

static const char *const phase_name[O1_STEP_PHASES] = {
    "prep", "upload", "layers", "head", "wait", "out"};

static const char *const kind_name[O1_STEP_KINDS] = {"decode (graph)", "decode",
						     "mixed", "prefill"};

uint64_t o1_step_window_median(const struct o1_step_window *w)
{
	uint64_t v[O1_STEP_TRACE_WINDOW];
	uint32_t n = w->n;

	if (!n)
		return 0;
	memcpy(v, w->ns, n * sizeof(*v));
	for (uint32_t i = 1; i < n; i++) { /* insertion: n <= 63 */
		uint64_t x = v[i];
		uint32_t j = i;

		for (; j && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
	return v[n / 2];
}

bool o1_step_window_push(struct o1_step_window *w, uint64_t ns,
			 uint64_t *median)
{
	uint64_t m = o1_step_window_median(w);
	bool slow = w->n >= O1_STEP_TRACE_MIN && ns > O1_STEP_TRACE_FACTOR * m;

	w->ns[w->next] = ns;
	w->next = (w->next + 1) % O1_STEP_TRACE_WINDOW;
	if (w->n < O1_STEP_TRACE_WINDOW)
		w->n++;
	*median = m;
	return slow;
}

enum o1_step_kind o1_step_trace_kind(uint32_t decode_rows,
				     uint32_t prompt_tokens, bool graph)
{
	if (!prompt_tokens)
		return graph ? O1_STEP_DECODE_GRAPH : O1_STEP_DECODE;
	return decode_rows ? O1_STEP_MIXED : O1_STEP_PREFILL;
}

void o1_step_trace_shape(const struct o1_step *st, struct o1_step_info *out)
{
	*out = (struct o1_step_info){.seqs = st->n_seqs};
	for (uint32_t i = 0; i < st->n_seqs; i++) {
		const struct o1_step_seq *q = &st->seqs[i];
		uint32_t end = q->start_pos + q->n_tokens;

		out->tokens += q->n_tokens;
		if (q->n_tokens == 1)
			out->decode_rows++;
		else
			out->prompt_tokens += q->n_tokens;
		out->logits_rows += q->all_logits ? q->n_tokens : 1;
		if (end > out->max_len)
			out->max_len = end;
	}
}

void o1_step_trace_init(struct o1_step_trace *t)
{
	memset(t, 0, sizeof(*t));
}

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void o1_step_trace_begin_at(struct o1_step_trace *t, bool on, uint64_t now)
{
	t->on = on;
	t->marked = 0;
	t->t0 = now;
	t->lib_ns = 0;
	t->lib_calls = 0;
}

void o1_step_trace_begin(struct o1_step_trace *t)
{
	bool on = o1_log_get_level() >= O1_LOG_DEBUG;

	o1_step_trace_begin_at(t, on, on ? clock_ns() : 0);
}

void o1_step_trace_mark_at(struct o1_step_trace *t, enum o1_step_phase p,
			   uint64_t now)
{
	if (!t->on || p >= O1_STEP_PHASES)
		return;
	t->end[p] = now;
	t->marked |= 1u << p;
}

void o1_step_trace_mark(struct o1_step_trace *t, enum o1_step_phase p)
{
	if (t->on)
		o1_step_trace_mark_at(t, p, clock_ns());
}

uint64_t o1_step_trace_now(const struct o1_step_trace *t)
{
	return t->on ? clock_ns() : 0;
}

void o1_step_trace_lib(struct o1_step_trace *t, uint64_t ns)
{
	if (!t->on)
		return;
	t->lib_ns += ns;
	t->lib_calls++;
}

/* Whether TOKENS is a token count no step had before (then it has). */
static bool first_shape(struct o1_step_trace *t, uint32_t tokens)
{
	uint8_t bit = (uint8_t)(1u << (tokens % 8));
	bool first;

	if (tokens >= O1_STEP_TRACE_SHAPES)
		return false;
	first = !(t->shapes[tokens / 8] & bit);
	t->shapes[tokens / 8] |= bit;
	return first;
}

/* Appends the phases ("prep 12 + upload 3 + ...", us) to BUF at *OFF. */
static void put_phases(const struct o1_step_trace *t, char *buf, size_t size,
		       size_t *off)
{
	uint64_t last = t->t0;
	const char *sep = "";

	for (int p = 0; p < O1_STEP_PHASES; p++) {
		uint64_t d = 0;
		int n;

		if (t->marked & (1u << p)) {
			d = t->end[p] > last ? t->end[p] - last : 0;
			last = t->end[p];
		}
		n = snprintf(buf + *off, size - *off, "%s%s %.0f", sep,
			     phase_name[p], (double)d / 1e3);
		if (n < 0 || (size_t)n >= size - *off) {
			*off = size - 1;
			return;
		}
		*off += (size_t)n;
		sep = " + ";
	}
}

static void put_line(const struct o1_step_trace *t, const char *backend,
		     const struct o1_step_info *in, enum o1_step_kind kind,
		     uint64_t ns, uint64_t median, char *buf, size_t size)
{
	char graph[32] = "no graph";
	size_t off = 0;
	int n;

	if (in->bucket)
		snprintf(graph, sizeof(graph), "graph bucket %u", in->bucket);
	n = snprintf(buf, size,
		     "step trace (%s): slow %s step %llu: %.0f us, %.1fx "
		     "the median %.0f us of its kind: ",
		     backend, kind_name[kind], (unsigned long long)t->slow,
		     (double)ns / 1e3,
		     median ? (double)ns / (double)median : 0.0,
		     (double)median / 1e3);

	if (n < 0 || (size_t)n >= size)
		return;
	off = (size_t)n;
	put_phases(t, buf, size, &off);
	if (off + 1 >= size)
		return;
	snprintf(buf + off, size - off,
		 " us (library calls %.0f us in %u); %u decode rows + %u "
		 "prompt tokens (%u seqs, %u tokens%s, %u logits rows, "
		 "context %u), %s, products %s, attention %s",
		 (double)t->lib_ns / 1e3, t->lib_calls, in->decode_rows,
		 in->prompt_tokens, in->seqs, in->tokens,
		 t->new_shape ? ", first step of this many" : "",
		 in->logits_rows, in->max_len, graph,
		 in->products ? in->products : "-",
		 in->attention ? in->attention : "-");
}

bool o1_step_trace_end_at(struct o1_step_trace *t, const char *backend,
			  const struct o1_step_info *info, uint64_t now,
			  char *buf, size_t size)
{
	enum o1_step_kind kind;
	uint64_t ns, median;
	bool slow;

	if (!t->on)
		return false;
	t->on = false;
	kind = o1_step_trace_kind(info->decode_rows, info->prompt_tokens,
				  info->bucket != 0);
	ns = now > t->t0 ? now - t->t0 : 0;
	t->new_shape = first_shape(t, info->tokens);
	t->steps++;
	slow = o1_step_window_push(&t->win[kind], ns, &median);
	if (!slow)
		return false;
	t->slow++;
	if (buf && size)
		put_line(t, backend, info, kind, ns, median, buf, size);
	return true;
}

bool o1_step_trace_end(struct o1_step_trace *t, const char *backend,
		       const struct o1_step_info *info)
{
	char line[512];
	bool slow;

	if (!t->on)
		return false;
	line[0] = 0;
	slow = o1_step_trace_end_at(t, backend, info, clock_ns(), line,
				    sizeof(line));
	if (slow)
		o1_debug("%s", line);
	return slow;
}
