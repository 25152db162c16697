/* CPU backend forward on small in-memory models against a naive dense
 * forward in double written here from the transformers definitions, for
 * every RoPE scaling (none, linear, llama3, yarn, a GGUF rope_freqs
 * tensor), Q/K/V biases, tied and untied heads, GQA and MQA, and
 * n_heads * head_dim != dim; two sequences batched, prefilled in chunks.
 * Needs no files. Tolerance: 1e-4 x max|logit| (f32 against double). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "backend/backend.h"
#include "common/error.h"
#include "backend/kv_pool.h"
#include "model/model.h"

#define PI   3.141592653589793
#define NTOK 21

struct fixture {
	struct o1_model m;
	struct o1_tensor t[64];
	float *data[64];
};

static uint64_t rng = 99;

static float frand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static void add(struct fixture *f, enum o1_tensor_role role, int layer,
		uint64_t rows, uint64_t cols, float scale, float offset)
{
	uint32_t i = f->m.n_tensors++;
	uint64_t n = rows ? rows * cols : cols;
	float *d = malloc(n * sizeof(float));

	for (uint64_t j = 0; j < n; j++)
		d[j] = offset + frand() * scale;
	f->data[i] = d;
	f->t[i] = (struct o1_tensor){.role = role,
				     .layer = layer,
				     .dtype = O1_DTYPE_F32,
				     .n_dims = rows ? 2 : 1,
				     .shape = {rows ? rows : cols, cols},
				     .data = d,
				     .n_bytes = n * 4};
}

static void build(struct fixture *f, const struct o1_model_desc *d,
		  const float *rope_freqs)
{
	uint64_t q = d->n_heads * d->head_dim, kv = d->n_kv_heads * d->head_dim;

	memset(f, 0, sizeof(*f));
	f->m.desc = *d;
	f->m.tensors = f->t;
	add(f, O1_T_TOKEN_EMBD, -1, d->vocab_size, d->dim, 1, 0);
	add(f, O1_T_OUTPUT_NORM, -1, 0, d->dim, 0.3f, 1);
	if (!d->tied_embeddings)
		add(f, O1_T_OUTPUT, -1, d->vocab_size, d->dim, 0.3f, 0);
	if (rope_freqs) {
		add(f, O1_T_ROPE_FREQS, -1, 0, d->rope.dim / 2, 0, 0);
		memcpy(f->data[f->m.n_tensors - 1], rope_freqs,
		       d->rope.dim / 2 * sizeof(float));
	}
	for (int l = 0; l < (int)d->n_layers; l++) {
		add(f, O1_T_ATTN_NORM, l, 0, d->dim, 0.3f, 1);
		add(f, O1_T_WQ, l, q, d->dim, 0.3f, 0);
		add(f, O1_T_WK, l, kv, d->dim, 0.3f, 0);
		add(f, O1_T_WV, l, kv, d->dim, 0.3f, 0);
		if (d->qkv_bias) {
			add(f, O1_T_BQ, l, 0, q, 0.5f, 0);
			add(f, O1_T_BK, l, 0, kv, 0.5f, 0);
			add(f, O1_T_BV, l, 0, kv, 0.5f, 0);
		}
		add(f, O1_T_WO, l, d->dim, q, 0.3f, 0);
		add(f, O1_T_FFN_NORM, l, 0, d->dim, 0.3f, 1);
		add(f, O1_T_W_GATE, l, d->ffn_dim, d->dim, 0.3f, 0);
		add(f, O1_T_W_UP, l, d->ffn_dim, d->dim, 0.3f, 0);
		add(f, O1_T_W_DOWN, l, d->dim, d->ffn_dim, 0.3f, 0);
	}
	assert_int_equal(o1_model_validate(&f->m), 0);
}

static void release(struct fixture *f)
{
	for (uint32_t i = 0; i < f->m.n_tensors; i++)
		free(f->data[i]);
}

static const float *w(const struct fixture *f, enum o1_tensor_role r, int l)
{
	const struct o1_tensor *t = o1_model_tensor(&f->m, r, l);

	return t ? t->data : NULL;
}

/* Inverse frequencies in double, from the transformers formulas. */
static void naive_inv_freq(const struct o1_rope *r, const float *div,
			   double *inv, double *scale)
{
	uint32_t R = r->dim;

	*scale = 1;
	for (uint32_t i = 0; i < R / 2; i++) {
		double base = pow(r->theta, -(2.0 * i) / R);
		double wl = 2 * PI / base, s;
		double lo =
		    r->original_max_positions / (double)r->low_freq_factor;
		double hi =
		    r->original_max_positions / (double)r->high_freq_factor;

		inv[i] = base;
		if (div)
			inv[i] = base / div[i];
		else if (r->scaling == O1_ROPE_SCALING_LINEAR)
			inv[i] = base / r->factor;
		else if (r->scaling == O1_ROPE_SCALING_LLAMA3 && wl > lo)
			inv[i] = base / r->factor;
		else if (r->scaling == O1_ROPE_SCALING_LLAMA3 && wl >= hi) {
			s = (r->original_max_positions / wl -
			     r->low_freq_factor) /
			    (r->high_freq_factor - r->low_freq_factor);
			inv[i] = (1 - s) * base / r->factor + s * base;
		}
	}
	if (r->scaling == O1_ROPE_SCALING_YARN && !div) {
		double cd_lo = R *
			       log(r->original_max_positions / (32 * 2 * PI)) /
			       (2 * log(r->theta));
		double cd_hi = R *
			       log(r->original_max_positions / (1 * 2 * PI)) /
			       (2 * log(r->theta));
		double lo = fmax(floor(cd_lo), 0),
		       hi = fmin(ceil(cd_hi), R - 1);

		for (uint32_t i = 0; i < R / 2; i++) {
			double base = pow(r->theta, -(2.0 * i) / R);
			double ramp = fmin(fmax((i - lo) / (hi - lo), 0), 1);
			double extra = 1 - ramp; /* weight of extrapolation */

			inv[i] = base / r->factor * (1 - extra) + base * extra;
		}
		*scale = 0.1 * log(r->factor) + 1;
	}
}

static void rms(const double *x, const float *wt, uint32_t n, double eps,
		double *out)
{
	double ss = 0;

	for (uint32_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	for (uint32_t i = 0; i < n; i++)
		out[i] = wt[i] * x[i] / sqrt(ss / n + eps);
}

/* out (rows) = W (rows, cols) x + b */
static void mv(const float *W, const float *b, const double *x, uint32_t rows,
	       uint32_t cols, double *out)
{
	for (uint32_t r = 0; r < rows; r++) {
		out[r] = b ? b[r] : 0;
		for (uint32_t c = 0; c < cols; c++)
			out[r] += (double)W[(size_t)r * cols + c] * x[c];
	}
}

static void rope(double *v, uint32_t heads, uint32_t hd, uint32_t rot,
		 uint32_t pos, const double *inv, double scale)
{
	for (uint32_t h = 0; h < heads; h++)
		for (uint32_t i = 0; i < rot / 2; i++) {
			double *a = v + h * hd + i, *b = a + rot / 2;
			double c = cos(pos * inv[i]) * scale;
			double s = sin(pos * inv[i]) * scale;
			double x0 = *a, x1 = *b;

			*a = x0 * c - x1 * s;
			*b = x1 * c + x0 * s;
		}
}

struct acts {
	double *x, *h, *q, *k, *v, *att, *o, *g, *u;
};

static void attention(const struct o1_model_desc *d, const struct acts *a,
		      uint32_t t)
{
	uint32_t hd = d->head_dim, qd = d->n_heads * hd;
	uint32_t kvd = d->n_kv_heads * hd, grp = d->n_heads / d->n_kv_heads;
	double sc[64];

	for (uint32_t hq = 0; hq < d->n_heads; hq++) {
		const double *q = a->q + t * qd + hq * hd;
		uint32_t g = hq / grp;
		double m = -INFINITY, z = 0;

		for (uint32_t j = 0; j <= t; j++) {
			sc[j] = 0;
			for (uint32_t c = 0; c < hd; c++)
				sc[j] += q[c] * a->k[j * kvd + g * hd + c];
			sc[j] /= sqrt(hd);
			m = fmax(m, sc[j]);
		}
		for (uint32_t j = 0; j <= t; j++)
			z += (sc[j] = exp(sc[j] - m));
		for (uint32_t c = 0; c < hd; c++) {
			a->att[hq * hd + c] = 0;
			for (uint32_t j = 0; j <= t; j++)
				a->att[hq * hd + c] +=
				    sc[j] / z * a->v[j * kvd + g * hd + c];
		}
	}
}

static void naive_layer(const struct fixture *f, int l, uint32_t n,
			const double *inv, double scale, struct acts *a)
{
	const struct o1_model_desc *d = &f->m.desc;
	uint32_t qd = d->n_heads * d->head_dim,
		 kvd = d->n_kv_heads * d->head_dim;

	for (uint32_t t = 0; t < n; t++) {
		rms(a->x + t * d->dim, w(f, O1_T_ATTN_NORM, l), d->dim,
		    d->norm_eps, a->h);
		mv(w(f, O1_T_WQ, l), w(f, O1_T_BQ, l), a->h, qd, d->dim,
		   a->q + t * qd);
		mv(w(f, O1_T_WK, l), w(f, O1_T_BK, l), a->h, kvd, d->dim,
		   a->k + t * kvd);
		mv(w(f, O1_T_WV, l), w(f, O1_T_BV, l), a->h, kvd, d->dim,
		   a->v + t * kvd);
		rope(a->q + t * qd, d->n_heads, d->head_dim, d->rope.dim, t,
		     inv, scale);
		rope(a->k + t * kvd, d->n_kv_heads, d->head_dim, d->rope.dim, t,
		     inv, scale);
	}
	for (uint32_t t = 0; t < n; t++) {
		double *x = a->x + t * d->dim;

		attention(d, a, t);
		mv(w(f, O1_T_WO, l), NULL, a->att, d->dim, qd, a->o);
		for (uint32_t i = 0; i < d->dim; i++)
			x[i] += a->o[i];
		rms(x, w(f, O1_T_FFN_NORM, l), d->dim, d->norm_eps, a->h);
		mv(w(f, O1_T_W_GATE, l), NULL, a->h, d->ffn_dim, d->dim, a->g);
		mv(w(f, O1_T_W_UP, l), NULL, a->h, d->ffn_dim, d->dim, a->u);
		for (uint32_t i = 0; i < d->ffn_dim; i++)
			a->g[i] = a->g[i] / (1 + exp(-a->g[i])) * a->u[i];
		mv(w(f, O1_T_W_DOWN, l), NULL, a->g, d->dim, d->ffn_dim, a->o);
		for (uint32_t i = 0; i < d->dim; i++)
			x[i] += a->o[i];
	}
}

static void naive_forward(const struct fixture *f, const int32_t *ids,
			  uint32_t n, const float *div, double *logits)
{
	const struct o1_model_desc *d = &f->m.desc;
	uint32_t qd = d->n_heads * d->head_dim,
		 kvd = d->n_kv_heads * d->head_dim;
	const float *head =
	    w(f, d->tied_embeddings ? O1_T_TOKEN_EMBD : O1_T_OUTPUT, -1);
	double inv[64], scale;
	struct acts a = {
	    calloc(n * d->dim, 8), calloc(d->dim, 8),	  calloc(n * qd, 8),
	    calloc(n * kvd, 8),	   calloc(n * kvd, 8),	  calloc(qd, 8),
	    calloc(d->dim, 8),	   calloc(d->ffn_dim, 8), calloc(d->ffn_dim, 8),
	};

	naive_inv_freq(&d->rope, div, inv, &scale);
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t i = 0; i < d->dim; i++)
			a.x[t * d->dim + i] =
			    w(f, O1_T_TOKEN_EMBD, -1)[ids[t] * d->dim + i];
	for (int l = 0; l < (int)d->n_layers; l++)
		naive_layer(f, l, n, inv, scale, &a);
	for (uint32_t t = 0; t < n; t++) {
		rms(a.x + t * d->dim, w(f, O1_T_OUTPUT_NORM, -1), d->dim,
		    d->norm_eps, a.h);
		mv(head, NULL, a.h, d->vocab_size, d->dim,
		   logits + (size_t)t * d->vocab_size);
	}
	free(a.x), free(a.h), free(a.q), free(a.k), free(a.v), free(a.att);
	free(a.o), free(a.g), free(a.u);
}

/* Two sequences (NTOK and 13 tokens) through the backend, batched, in
 * chunks; every row's logits to OUT[seq]. */
static void engine_forward(const struct fixture *f, const int32_t *ids,
			   float *out[2])
{
	static const uint32_t chunks[3][2] = {{7, 5}, {14, 1}, {0, 7}};
	struct o1_backend_config cfg = {.n_threads = 2,
					.max_batch_tokens = 32,
					.max_seqs = 2,
					.max_context_tokens = 64,
					.n_pages = 40,
					.page_tokens = 3};
	uint32_t pages[2][24], len[2] = {0, 0}, v = f->m.desc.vocab_size;
	struct o1_block_table tab[2];
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	float *logits = malloc(32 * v * sizeof(float));

	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f->m, &cfg, &b), 0);
	assert_int_equal(o1_kv_pool_create(o1_backend_kv_layout(b), &pool), 0);
	for (int s = 0; s < 2; s++) {
		o1_kv_table_init(&tab[s], pages[s], 24);
		assert_int_equal(o1_kv_table_reserve(pool, &tab[s], NTOK), 0);
	}
	for (int c = 0; c < 3; c++) {
		struct o1_step_seq ss[2];
		struct o1_step st = {.seqs = ss,
				     .n_seqs = 0,
				     .logits = logits,
				     .logits_rows = 32};
		uint32_t row = 0;

		for (int s = 0; s < 2; s++)
			if (chunks[c][s])
				ss[st.n_seqs++] = (struct o1_step_seq){
				    ids + (s ? 3 : 0) + len[s],
				    chunks[c][s],
				    len[s],
				    pages[s],
				    tab[s].n_pages,
				    true};
		assert_int_equal(o1_backend_step(b, &st), 0);
		for (int s = 0; s < 2; s++) {
			memcpy(out[s] + (size_t)len[s] * v,
			       logits + (size_t)row * v,
			       chunks[c][s] * v * sizeof(float));
			row += chunks[c][s], len[s] += chunks[c][s];
		}
	}
	for (int s = 0; s < 2; s++)
		o1_kv_table_fini(pool, &tab[s]);
	o1_kv_pool_destroy(pool);
	o1_backend_destroy(b);
	free(logits);
}

static void check(const struct o1_model_desc *d, const float *div)
{
	struct fixture f;
	int32_t ids[NTOK + 3];
	uint32_t v = d->vocab_size, n[2] = {NTOK, 13};
	float *got[2] = {malloc(NTOK * v * 4), malloc(NTOK * v * 4)};
	double *ref = malloc(NTOK * v * 8), mx = 0, worst = 0;

	build(&f, d, div);
	for (int i = 0; i < NTOK + 3; i++)
		ids[i] = (int32_t)((i * 7 + 3) % v);
	engine_forward(&f, ids, got);
	for (int s = 0; s < 2; s++) {
		naive_forward(&f, ids + (s ? 3 : 0), n[s], div, ref);
		for (size_t i = 0; i < n[s] * v; i++) {
			mx = fmax(mx, fabs(ref[i]));
			worst = fmax(worst, fabs(ref[i] - got[s][i]));
		}
	}
	print_message("scaling %s: max |logit| %.3f, worst error %.2g\n",
		      o1_rope_scaling_name(d->rope.scaling), mx, worst);
	assert_true(worst <= 1e-4 * mx);
	release(&f);
	free(got[0]), free(got[1]), free(ref);
}

static struct o1_model_desc llama_desc(void)
{
	return (struct o1_model_desc){.arch = O1_ARCH_LLAMA,
				      .n_layers = 2,
				      .dim = 32,
				      .n_heads = 4,
				      .n_kv_heads = 2,
				      .head_dim = 10,
				      .ffn_dim = 48,
				      .vocab_size = 50,
				      .max_context_tokens = 64,
				      .norm_eps = 1e-5f,
				      .rope = {.theta = 10000, .dim = 10},
				      .bos_id = -1,
				      .eos_id = -1};
}

static void test_default(void **state)
{
	struct o1_model_desc d = llama_desc();

	(void)state;
	check(&d, NULL);
}

static void test_qwen_yarn(void **state)
{
	struct o1_model_desc d = llama_desc();

	(void)state;
	d.arch = O1_ARCH_QWEN2, d.dim = 24, d.n_kv_heads = 1, d.head_dim = 8;
	d.tied_embeddings = true, d.qkv_bias = true;
	d.rope = (struct o1_rope){.theta = 10000,
				  .dim = 8,
				  .scaling = O1_ROPE_SCALING_YARN,
				  .factor = 4,
				  .original_max_positions = 16};
	check(&d, NULL);
}

static void test_llama3_linear(void **state)
{
	struct o1_model_desc d = llama_desc();

	(void)state;
	d.head_dim = 16;
	d.rope = (struct o1_rope){.theta = 500000,
				  .dim = 16,
				  .scaling = O1_ROPE_SCALING_LLAMA3,
				  .factor = 8,
				  .low_freq_factor = 1,
				  .high_freq_factor = 4,
				  .original_max_positions = 32};
	check(&d, NULL);
	d.rope.scaling = O1_ROPE_SCALING_LINEAR, d.rope.factor = 2;
	check(&d, NULL);
}

static void test_rope_freqs(void **state)
{
	struct o1_model_desc d = llama_desc();
	const float div[5] = {1, 1.5f, 2, 4, 8};

	(void)state;
	check(&d, div);
}

/* Configurations the backend refuses, each with one log line. */
static void test_bad_config(void **state)
{
	struct o1_model_desc d = llama_desc();
	struct o1_backend_config ok = {.n_threads = 1,
				       .max_batch_tokens = 8,
				       .max_seqs = 2,
				       .n_pages = 4},
				 c;
	struct o1_backend *b = NULL;
	struct fixture f;

	(void)state;
	build(&f, &d, NULL);
	c = ok, c.n_pages = 0;
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &c, &b),
			 -O1_E_CONFIG);
	c = ok, c.max_seqs = 9;
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &c, &b),
			 -O1_E_CONFIG);
	c = ok, c.n_threads = 1000;
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &c, &b),
			 -O1_E_CONFIG);
	f.m.desc.rope.scaling = O1_ROPE_SCALING_YARN; /* factor 0 */
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &ok, &b),
			 -O1_E_CONFIG);
	f.m.desc.rope.scaling = O1_ROPE_SCALING_NONE;
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &ok, &b), 0);
	assert_int_equal(o1_backend_kv_layout(b)->page_tokens,
			 O1_KV_PAGE_TOKENS_DEFAULT);
	assert_int_equal(o1_backend_config(b)->max_context_tokens, 64);
	o1_backend_destroy(b);
	o1_backend_destroy(NULL);
	release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_config),
	    cmocka_unit_test(test_default),
	    cmocka_unit_test(test_qwen_yarn),
	    cmocka_unit_test(test_llama3_linear),
	    cmocka_unit_test(test_rope_freqs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
