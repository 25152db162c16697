/* Peak memory of the GGUF writers: o1_gguf_writer_write with fill
 * callbacks, and o1_model_write_gguf, hold one tensor's buffers at a time.
 * The executable is linked with --wrap for malloc, calloc, realloc and
 * free; while tracking is on, every block of at least TRACK_MIN bytes is
 * recorded with its size, so the live total and its peak are exact for
 * the blocks that matter (small ones, and blocks libc allocates for
 * itself, are left out). Each test checks that the file it wrote is
 * several times larger than the peak it allowed, so keeping every tensor
 * until the end would fail it. Single-threaded. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "model/gguf.h"
#include "model/model.h"
#include "tests/common/test_util.h"

#define TRACK_MIN  1024
#define MAX_BLOCKS 256

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static struct {
	bool on;
	bool overflow; /* more than MAX_BLOCKS live: the peak is unknown */
	struct {
		void *p;
		size_t n;
	} blocks[MAX_BLOCKS];
	size_t n_blocks, live, peak;
} trk;

static void track_start(void)
{
	memset(&trk, 0, sizeof(trk));
	trk.on = true;
}

static void track_add(void *p, size_t n)
{
	if (!trk.on || !p || n < TRACK_MIN)
		return;
	if (trk.n_blocks == MAX_BLOCKS) {
		trk.overflow = true;
		return;
	}
	trk.blocks[trk.n_blocks].p = p;
	trk.blocks[trk.n_blocks++].n = n;
	trk.live += n;
	if (trk.live > trk.peak)
		trk.peak = trk.live;
}

static void track_remove(void *p)
{
	for (size_t i = 0; p && i < trk.n_blocks; i++) {
		if (trk.blocks[i].p == p) {
			trk.live -= trk.blocks[i].n;
			trk.blocks[i] = trk.blocks[--trk.n_blocks];
			return;
		}
	}
}

void *__wrap_malloc(size_t n)
{
	void *p = __real_malloc(n);

	track_add(p, n);
	return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
	void *p = __real_calloc(n, size);

	track_add(p, n * size);
	return p;
}

void *__wrap_realloc(void *old, size_t n)
{
	void *p = __real_realloc(old, n);

	if (p || n == 0)
		track_remove(old);
	track_add(p, n);
	return p;
}

void __wrap_free(void *p)
{
	track_remove(p);
	__real_free(p);
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

/* ---- the GGUF writer with fill callbacks ---- */

#define N_FILLED  8
#define FILL_ELEM 16384 /* floats per tensor: 64 KiB */

struct pattern {
	uint32_t index;
	int fail; /* returned instead of filling when nonzero */
};

static int fill_pattern(void *ctx, void *dst)
{
	const struct pattern *p = ctx;
	float *f = dst;

	if (p->fail)
		return p->fail;
	for (uint32_t i = 0; i < FILL_ELEM; i++)
		f[i] = (float)(p->index * FILL_ELEM + i);
	return 0;
}

static struct o1_gguf_writer *pattern_writer(struct pattern *pats)
{
	struct o1_gguf_writer *w;
	const uint64_t ne[4] = {FILL_ELEM / 64, 64, 1, 1};
	char name[32];

	assert_int_equal(o1_gguf_writer_create(&w), 0);
	assert_int_equal(o1_gguf_writer_set_str(w, "general.name", "peak"), 0);
	for (uint32_t i = 0; i < N_FILLED; i++) {
		pats[i] = (struct pattern){.index = i};
		snprintf(name, sizeof(name), "t%u", i);
		assert_int_equal(
		    o1_gguf_writer_add_tensor_fill(w, name, O1_DTYPE_F32, 2, ne,
						   FILL_ELEM * sizeof(float),
						   fill_pattern, &pats[i]),
		    0);
	}
	return w;
}

static void assert_patterns(const char *path)
{
	const struct o1_gguf_tensor_info *ti;
	struct o1_gguf *g;
	float v;

	assert_int_equal(o1_gguf_open(path, &g), 0);
	assert_int_equal(o1_gguf_n_tensors(g), N_FILLED);
	for (uint32_t i = 0; i < N_FILLED; i++) {
		ti = o1_gguf_tensor(g, i);
		assert_int_equal(ti->n_bytes, FILL_ELEM * sizeof(float));
		assert_int_equal(ti->ne[0] * ti->ne[1], FILL_ELEM);
		for (uint32_t e = 0; e < FILL_ELEM; e += 997) {
			memcpy(&v, (const float *)ti->data + e, sizeof(v));
			assert_true(v == (float)(i * FILL_ELEM + e));
		}
	}
	o1_gguf_close(g);
}

static void test_fill_peak(void **state)
{
	struct pattern pats[N_FILLED];
	struct o1_gguf_writer *w;
	size_t one = FILL_ELEM * sizeof(float);
	char path[64];

	(void)state;
	o1_test_file_make(path, sizeof(path), "gguf_peak");
	w = pattern_writer(pats);
	track_start();
	assert_int_equal(o1_gguf_writer_write(w, path), 0);
	trk.on = false;
	o1_gguf_writer_destroy(w);
	assert_false(trk.overflow);
	assert_int_equal(trk.live, 0);
	assert_true(trk.peak >= one); /* the one fill buffer */
	assert_true(trk.peak < one + one / 2);
	assert_true(file_size(path) >= N_FILLED * one);
	assert_patterns(path);
	unlink(path);
}

static void test_fill_error(void **state)
{
	struct pattern pats[N_FILLED];
	struct o1_gguf_writer *w;
	struct stat st;
	char path[64];

	(void)state;
	o1_test_file_make(path, sizeof(path), "gguf_peak");
	w = pattern_writer(pats);
	pats[5].fail = -O1_E_FORMAT;
	assert_int_equal(o1_gguf_writer_write(w, path), -O1_E_FORMAT);
	assert_int_equal(stat(path, &st), -1); /* removed again */
	o1_gguf_writer_destroy(w);
}

static void test_fill_null(void **state)
{
	struct o1_gguf_writer *w;
	const uint64_t ne[4] = {4, 1, 1, 1};

	(void)state;
	assert_int_equal(o1_gguf_writer_create(&w), 0);
	assert_int_equal(o1_gguf_writer_add_tensor_fill(w, "x", O1_DTYPE_F32, 1,
							ne, 16, NULL, NULL),
			 -EINVAL);
	/* the size is checked as for borrowed data */
	assert_int_equal(o1_gguf_writer_add_tensor_fill(w, "x", O1_DTYPE_F16, 1,
							ne, 16, fill_pattern,
							NULL),
			 -O1_E_SHAPE);
	o1_gguf_writer_destroy(w);
}

/* ---- o1_model_write_gguf ---- */

/* A llama model whose tensors all point into one float32 buffer. */
struct big {
	struct o1_model *m;
	float *data;
	uint64_t used, cap;
	uint64_t max_elems; /* of the largest tensor */
};

static void big_add(struct big *b, enum o1_tensor_role role, int layer)
{
	struct o1_tensor *t = &b->m->tensors[b->m->n_tensors++];
	uint64_t rows, cols, n;

	assert_int_equal(
	    o1_model_expected_shape(&b->m->desc, role, &rows, &cols), 0);
	n = rows ? rows * cols : cols;
	assert_true(b->used + n <= b->cap);
	t->role = role;
	t->layer = layer;
	t->dtype = O1_DTYPE_F32;
	t->n_dims = rows ? 2 : 1;
	t->shape[0] = rows ? rows : cols;
	t->shape[1] = rows ? cols : 0;
	t->data = b->data + b->used;
	t->n_bytes = n * sizeof(float);
	b->used += n;
	if (n > b->max_elems)
		b->max_elems = n;
}

static void big_desc(struct o1_model_desc *d)
{
	d->arch = O1_ARCH_LLAMA;
	snprintf(d->name, sizeof(d->name), "peak");
	d->n_layers = 4;
	d->dim = 128;
	d->n_heads = 4;
	d->n_kv_heads = 4;
	d->head_dim = 32;
	d->ffn_dim = 256;
	d->vocab_size = 256;
	d->max_context_tokens = 512;
	d->norm_eps = 1e-5f;
	d->rope.theta = 1e4f;
	d->rope.dim = 32;
	d->bos_id = d->eos_id = -1;
}

static void big_make(struct big *b)
{
	static const enum o1_tensor_role per_layer[] = {
	    O1_T_ATTN_NORM, O1_T_WQ,	 O1_T_WK,   O1_T_WV,	O1_T_WO,
	    O1_T_FFN_NORM,  O1_T_W_GATE, O1_T_W_UP, O1_T_W_DOWN};

	memset(b, 0, sizeof(*b));
	b->m = calloc(1, sizeof(*b->m));
	assert_non_null(b->m);
	b->m->tensors = calloc(64, sizeof(struct o1_tensor));
	b->cap = 1u << 20;
	b->data = malloc(b->cap * sizeof(float));
	assert_non_null(b->m->tensors);
	assert_non_null(b->data);
	for (uint64_t i = 0; i < b->cap; i++)
		b->data[i] = (float)(i % 1021) / 1021.0f - 0.5f;
	big_desc(&b->m->desc);
	big_add(b, O1_T_TOKEN_EMBD, -1);
	big_add(b, O1_T_OUTPUT_NORM, -1);
	big_add(b, O1_T_OUTPUT, -1);
	for (int l = 0; l < (int)b->m->desc.n_layers; l++)
		for (size_t r = 0; r < sizeof(per_layer) / sizeof(*per_layer);
		     r++)
			big_add(b, per_layer[r], l);
	assert_int_equal(o1_model_validate(b->m), 0);
}

static void big_free(struct big *b)
{
	o1_model_close(b->m);
	free(b->data);
}

/* Every tensor of B reads back from BACK within TOL (Q/K un-permuted). */
static void assert_same_values(const struct big *b, const struct o1_model *back,
			       float tol)
{
	for (uint32_t i = 0; i < b->m->n_tensors; i++) {
		const struct o1_tensor *a = &b->m->tensors[i];
		const struct o1_tensor *t =
		    o1_model_tensor(back, a->role, a->layer);
		const float *want = a->data;
		float *got;

		assert_non_null(t);
		got = o1_test_tensor_f32(back, t);
		for (uint64_t e = 0; e < o1_tensor_elements(a); e++)
			if (!(fabsf(got[e] - want[e]) <= tol))
				fail_msg(
				    "%s layer %d element %llu: %g, want %g",
				    o1_tensor_role_name(a->role), a->layer,
				    (unsigned long long)e, got[e], want[e]);
		free(got);
	}
}

/* Writes B in DTYPE; the peak may be the largest tensor as float32 twice
 * (read, and Q/K rows permuted) plus its converted copy. */
static void model_peak(enum o1_dtype dtype)
{
	struct o1_model *back;
	struct big b;
	uint64_t limit;
	char path[64];

	big_make(&b);
	limit = b.max_elems *
		(2 * sizeof(float) +
		 (dtype == O1_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t)));
	o1_test_file_make(path, sizeof(path), "gguf_peak");
	track_start();
	assert_int_equal(o1_model_write_gguf(b.m, dtype, path), 0);
	trk.on = false;
	assert_false(trk.overflow);
	assert_int_equal(trk.live, 0);
	print_message("%s: peak %zu bytes, %llu allowed, file %llu\n",
		      o1_dtype_name(dtype), trk.peak, (unsigned long long)limit,
		      (unsigned long long)file_size(path));
	assert_true(trk.peak <= limit);
	assert_true(file_size(path) > 3 * limit);
	assert_int_equal(o1_model_open(path, &back), 0);
	assert_int_equal(back->n_tensors, b.m->n_tensors);
	assert_same_values(&b, back, dtype == O1_DTYPE_F32 ? 0.0f : 5e-4f);
	o1_model_close(back);
	big_free(&b);
	unlink(path);
}

static void test_model_peak_f32(void **state)
{
	(void)state;
	model_peak(O1_DTYPE_F32);
}

static void test_model_peak_f16(void **state)
{
	(void)state;
	model_peak(O1_DTYPE_F16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fill_peak),
	    cmocka_unit_test(test_fill_error),
	    cmocka_unit_test(test_fill_null),
	    cmocka_unit_test(test_model_peak_f32),
	    cmocka_unit_test(test_model_peak_f16),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
