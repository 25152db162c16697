/* A backend step split into phases, logged when it is slow (issue 17
 * item 5: about one mixed step in 35 took 4-16 ms on the H200 instead of
 * ~1.6 ms, all of it inside the backend's step). Free of CUDA calls, so
 * that the CPU backend and the tests run it too.
 *
 * Use: o1_step_trace_begin at the step's entry, o1_step_trace_mark at the
 * end of each phase the step has (phases it skips count 0), and
 * o1_step_trace_end with the step's description. A step is slow when it
 * took more than O1_STEP_TRACE_FACTOR times the median of the last
 * O1_STEP_TRACE_WINDOW steps of its kind (once O1_STEP_TRACE_MIN of that
 * kind were seen); a slow step's phases, its shape and its paths go to the
 * log at level debug, one line.
 *
 * Off (log level below debug at begin): begin reads the level, the rest
 * return at once; no clock is read. On: one clock read per mark, and the
 * median of at most O1_STEP_TRACE_WINDOW values per step.
 *
 * One thread (the one that steps) calls everything here for one trace.
 */
#ifndef O1_STEP_TRACE_H
#define O1_STEP_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define O1_STEP_TRACE_WINDOW 63
#define O1_STEP_TRACE_MIN    16
#define O1_STEP_TRACE_FACTOR 3
/* token counts whose first step is flagged (a new shape); above: not */
#define O1_STEP_TRACE_SHAPES 16384

enum o1_step_phase {
	O1_STEP_PREP,	/* host: flattening the batch into the inputs */
	O1_STEP_UPLOAD, /* enqueue of the input and sampling uploads */
	O1_STEP_LAYERS, /* enqueue of the layers (or a graph's launch) */
	O1_STEP_HEAD,	/* enqueue of head, sampling, copies back */
	O1_STEP_WAIT,	/* the wait for the device */
	O1_STEP_OUT,	/* host: results handed over */
	O1_STEP_PHASES
};

enum o1_step_kind {
	O1_STEP_DECODE_GRAPH, /* one token a sequence, a graph replayed */
	O1_STEP_DECODE,	      /* one token a sequence, eager */
	O1_STEP_MIXED,	      /* decode rows and prompt chunks */
	O1_STEP_PREFILL,      /* prompt chunks only */
	O1_STEP_KINDS
};

/* The last steps' times of one kind, a ring. */
struct o1_step_window {
	uint64_t ns[O1_STEP_TRACE_WINDOW];
	uint32_t n, next;
};

/* What the slow line says about the step (strings static or NULL). */
struct o1_step_info {
	uint32_t seqs, tokens, decode_rows, prompt_tokens, logits_rows;
	uint32_t max_len;     /* longest context */
	uint32_t bucket;      /* a graph bucket's batch; 0: none */
	const char *products; /* the products' path, e.g. "gemmex" */
	const char *attention;
};

struct o1_step_trace {
	bool on;
	uint32_t marked;		  /* bit per phase marked */
	uint64_t t0, end[O1_STEP_PHASES]; /* ns */
	uint64_t lib_ns;		  /* time inside library calls */
	uint32_t lib_calls;		  /* (cuBLAS) of the step */
	bool new_shape;			  /* first step of its token count */
	uint64_t steps, slow;
	struct o1_step_window win[O1_STEP_KINDS];
	uint8_t shapes[O1_STEP_TRACE_SHAPES / 8];
};

/* The median of W's values (the upper one of an even count); 0 when
 * empty. */
uint64_t o1_step_window_median(const struct o1_step_window *w);
/* Whether NS is slow against W (its median into *MEDIAN), then adds it. */
bool o1_step_window_push(struct o1_step_window *w, uint64_t ns,
			 uint64_t *median);

/* The step's kind from its shape. */
enum o1_step_kind o1_step_trace_kind(uint32_t decode_rows,
				     uint32_t prompt_tokens, bool graph);

struct o1_step;
/* The shape half of *OUT from ST (seqs, tokens, decode rows: sequences of
 * one token; prompt tokens: the others'; logits rows, longest context);
 * the rest zero. */
void o1_step_trace_shape(const struct o1_step *st, struct o1_step_info *out);

/* Zeroes T (off until the first begin). */
void o1_step_trace_init(struct o1_step_trace *t);
/* A step starts: on when the log prints debug lines. */
void o1_step_trace_begin(struct o1_step_trace *t);
/* Phase P ends now. */
void o1_step_trace_mark(struct o1_step_trace *t, enum o1_step_phase p);
/* NS more spent inside a library call (cuBLAS); a clock read around the
 * call, taken only when T is on: o1_step_trace_now. */
void o1_step_trace_lib(struct o1_step_trace *t, uint64_t ns);
/* The monotonic clock in ns when T is on, else 0. */
uint64_t o1_step_trace_now(const struct o1_step_trace *t);
/* The step ends now (after its last mark): slow ones are logged. Returns
 * whether it was slow (false when off). */
bool o1_step_trace_end(struct o1_step_trace *t, const char *backend,
		       const struct o1_step_info *info);

/* The testable core of begin/mark/end: the same with the times given. */
void o1_step_trace_begin_at(struct o1_step_trace *t, bool on, uint64_t now);
void o1_step_trace_mark_at(struct o1_step_trace *t, enum o1_step_phase p,
			   uint64_t now);
/* Whether the step (ending at NOW) is slow; its line into BUF (SIZE
 * bytes, truncated) when it is. */
bool o1_step_trace_end_at(struct o1_step_trace *t, const char *backend,
			  const struct o1_step_info *info, uint64_t now,
			  char *buf, size_t size);

#endif
