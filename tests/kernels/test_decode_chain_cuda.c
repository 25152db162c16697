/* A decode layer's CUDA kernels in a chain (rmsnorm.cu, gemv.cu, rope.cu,
 * attention.cu, swiglu.cu, as the CUDA backend launches them) on fresh
 * random inputs (O1_TEST_SEED or the time, printed), activations poisoned
 * with NaN. Exit 77 without a CUDA device.
 *
 * PDL (programmatic dependent launch) changes when kernels start, never
 * what they compute, and the fused products compute what the unfused
 * kernels do: launches with it and without it, fused and unfused, eagerly
 * and captured into a graph, are compared bit for bit.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "attention_cuda_test.h"
#include "kernel_cuda_test.h"
#include "kernels/attention.h"
#include "kernels/kernels_cuda.h"
#include "kernels/rope.h"

/* PDL (kernels_cuda.h) and the fused products: one decode layer's kernels
 * over M rows (M sequences of CHAIN_CTX cached positions, each bringing one
 * token), repeated CHAIN_LAYERS times with the same weights, on a stream of
 * its own, with and without PDL, unfused and fused, must give the same
 * bits every way: a kernel that read its predecessor's output before its
 * wait would see the previous layer's values or the NaN poison. The layer
 * is the CUDA backend's: RMSNorm (adding the residual), QKV product, RoPE
 * with the KV write at position CHAIN_CTX, attention in two splits
 * (merged by its last block), O product, RMSNorm, gate/up product, SwiGLU,
 * down product; then a final RMSNorm. Captured into a graph, a PDL chain must
 * show programmatic edges (stream capture keeps PDL) and replay to the same
 * bits. */
#define CHAIN_LAYERS 8
#define CHAIN_CTX    40
#define CHAIN_PAGES  3 /* per sequence: CHAIN_CTX + 1 positions, pages of 16 */
#define CHAIN_DIM    896
#define CHAIN_FFN    4864

struct chain {
	uint32_t m;
	struct kct_kv_shape k;
	struct o1_rope_kv_args ra;
	struct o1_attn_batch b;
	uint64_t scratch_floats;
	float *x0; /* host: the first layer's input */
	float *x, *o, *gu, *nw, *nw2, *scratch;
	uint16_t *h, *att, *act, *wqkv, *wo, *wgu, *wd;
};

static void *dev_rand_bf16(size_t n, float scale)
{
	float *h = kct_randv(n, scale);
	void *d;

	kct_round_bf16(h, n);
	d = kct_dev_bf16(h, n);
	free(h);
	return d;
}

static void *dev_rand_f32(size_t n, float scale)
{
	float *h = kct_randv(n, scale);
	void *d = kct_dev_copy(h, n * 4);

	free(h);
	return d;
}

/* Step inputs of M one-token sequences at position CHAIN_CTX, sequence s
 * in pages [CHAIN_PAGES s, CHAIN_PAGES (s + 1)). */
static void chain_inputs(struct chain *c, float *inv)
{
	uint32_t m = c->m, slots[O1_GEMV_MAX_ROWS], start[O1_GEMV_MAX_ROWS];
	uint32_t q_off[O1_GEMV_MAX_ROWS + 1],
	    tables[O1_GEMV_MAX_ROWS * CHAIN_PAGES];
	int32_t pos[O1_GEMV_MAX_ROWS];

	for (uint32_t s = 0; s < m; s++) {
		pos[s] = CHAIN_CTX, start[s] = CHAIN_CTX, q_off[s] = s;
		for (uint32_t p = 0; p < CHAIN_PAGES; p++)
			tables[s * CHAIN_PAGES + p] = s * CHAIN_PAGES + p;
		slots[s] =
		    tables[s * CHAIN_PAGES + CHAIN_CTX / c->k.p] * c->k.p +
		    CHAIN_CTX % c->k.p;
	}
	q_off[m] = m;
	c->ra.pos = kct_dev_copy(pos, m * 4);
	c->ra.slots = kct_dev_copy(slots, m * 4);
	c->ra.inv_freq = kct_dev_copy(inv, c->k.d / 2 * 4);
	c->b = (struct o1_attn_batch){
	    m, kct_dev_copy(q_off, (m + 1) * 4), kct_dev_copy(start, m * 4),
	    kct_dev_copy(tables, m * CHAIN_PAGES * 4), CHAIN_PAGES};
}

static void chain_open(struct chain *c, uint32_t m)
{
	struct kct_kv_shape k = {14, 2, 64, 16, CHAIN_PAGES * m, false};
	uint32_t qd = k.hq * k.d, w = (k.hq + 2 * k.hkv) * k.d;
	size_t cache = (size_t)k.n_pages * kct_page_stride(&k);
	struct o1_rope rp = {.theta = 1e6f, .dim = k.d};
	float inv[32], sc;

	*c = (struct chain){.m = m, .k = k};
	c->x0 = kct_randv((size_t)m * CHAIN_DIM, 1);
	c->x = kct_dev((size_t)m * CHAIN_DIM * 4);
	c->o = kct_dev((size_t)m * CHAIN_DIM * 4);
	c->gu = kct_dev((size_t)m * 2 * CHAIN_FFN * 4);
	c->h = kct_dev((size_t)m * CHAIN_DIM * 2);
	c->att = kct_dev((size_t)m * qd * 2);
	c->act = kct_dev((size_t)m * CHAIN_FFN * 2);
	c->nw = dev_rand_f32(CHAIN_DIM, 1), c->nw2 = dev_rand_f32(CHAIN_DIM, 1);
	c->wqkv = dev_rand_bf16((size_t)w * CHAIN_DIM, 0.05f);
	c->wo = dev_rand_bf16((size_t)CHAIN_DIM * qd, 0.05f);
	c->wgu = dev_rand_bf16((size_t)2 * CHAIN_FFN * CHAIN_DIM, 0.05f);
	c->wd = dev_rand_bf16((size_t)CHAIN_DIM * CHAIN_FFN, 0.02f);
	c->scratch_floats = o1_attention_cuda_scratch_floats(m, k.hq, k.d, 32);
	c->scratch = kct_dev(c->scratch_floats * 4);
	c->ra = (struct o1_rope_kv_args){.q = kct_dev((size_t)m * qd * 4),
					 .k_cache = dev_rand_bf16(cache, 2),
					 .v_cache = dev_rand_bf16(cache, 2),
					 .qkv = kct_dev((size_t)m * w * 4),
					 .scale = 1,
					 .n_tokens = m,
					 .rot_dim = k.d};
	assert_int_equal(o1_rope_inv_freq(&rp, NULL, inv, &sc), 0);
	chain_inputs(c, inv);
	/* kct_dev()'s poison is a memset on the legacy stream, which the
	 * chain's stream does not wait for */
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

static void chain_close(struct chain *c)
{
	void *p[] = {c->x,
		     c->o,
		     c->gu,
		     c->nw,
		     c->nw2,
		     c->scratch,
		     c->h,
		     c->att,
		     c->act,
		     c->wqkv,
		     c->wo,
		     c->wgu,
		     c->wd,
		     c->ra.q,
		     c->ra.k_cache,
		     c->ra.v_cache,
		     (void *)c->ra.qkv,
		     (void *)c->ra.pos,
		     (void *)c->ra.slots,
		     (void *)c->ra.inv_freq,
		     (void *)c->b.q_offsets,
		     (void *)c->b.start_pos,
		     (void *)c->b.block_tables};

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		cudaFree(p[i]);
	free(c->x0);
}

static int chain_layer(struct chain *c, bool first, bool pdl, cudaStream_t st)
{
	struct o1_attn_dims dm = kct_kv_dims(&c->k);
	uint32_t m = c->m, d = CHAIN_DIM, f = CHAIN_FFN, qd = c->k.hq * c->k.d;
	uint32_t w = qd + 2 * c->k.hkv * c->k.d;
	int err = o1_rmsnorm_cuda(c->h, c->x, first ? NULL : c->o, c->nw, NULL,
				  m, d, 1e-6f, pdl, st);

	err = err ? err
		  : o1_gemv_bf16_cuda((float *)c->ra.qkv, c->h, c->wqkv, m, w,
				      d, O1_GEMV_DEFAULT, pdl, st);
	err = err ? err : o1_rope_kv_write_cuda(&c->ra, &dm, pdl, st);
	err = err ? err
		  : o1_attention_cuda(c->att, c->ra.q, c->ra.k_cache,
				      c->ra.v_cache, &dm, &c->b, m,
				      CHAIN_CTX + 1, c->scratch,
				      c->scratch_floats, NULL, NULL, pdl, st);
	err = err ? err
		  : o1_gemv_bf16_cuda(c->o, c->att, c->wo, m, d, qd,
				      O1_GEMV_DEFAULT, pdl, st);
	err = err ? err
		  : o1_rmsnorm_cuda(c->h, c->x, c->o, c->nw2, NULL, m, d, 1e-6f,
				    pdl, st);
	err = err ? err
		  : o1_gemv_bf16_cuda(c->gu, c->h, c->wgu, m, 2 * f, d,
				      O1_GEMV_DEFAULT, pdl, st);
	err = err ? err
		  : o1_swiglu_cuda(c->act, c->gu, c->gu + f, 2 * f, m, f, pdl,
				   st);
	return err ? err
		   : o1_gemv_bf16_cuda(c->o, c->act, c->wd, m, d, f,
				       O1_GEMV_DEFAULT, pdl, st);
}

/* The layer with gemv.cu's fused variants, as the CUDA backend runs it:
 * the residual adds in the O and down products, the RMSNorms in the QKV
 * and gate/up products, RoPE and the KV write in the former's epilogue,
 * SwiGLU in the latter's. */
static int chain_layer_fused(struct chain *c, bool pdl, cudaStream_t st)
{
	struct o1_attn_dims dm = kct_kv_dims(&c->k);
	uint32_t m = c->m, d = CHAIN_DIM, f = CHAIN_FFN, qd = c->k.hq * c->k.d;
	int err =
	    o1_gemv_norm_rope_kv_cuda(&c->ra, &dm, c->x, c->nw, 1e-6f, c->wqkv,
				      m, d, O1_GEMV_DEFAULT, pdl, st);

	err = err ? err
		  : o1_attention_cuda(c->att, c->ra.q, c->ra.k_cache,
				      c->ra.v_cache, &dm, &c->b, m,
				      CHAIN_CTX + 1, c->scratch,
				      c->scratch_floats, NULL, NULL, pdl, st);
	err = err ? err
		  : o1_gemv_add_bf16_cuda(c->x, c->att, c->wo, m, d, qd,
					  O1_GEMV_DEFAULT, pdl, st);
	err = err ? err
		  : o1_gemv_norm_swiglu_bf16_cuda(c->act, c->x, c->nw2, 1e-6f,
						  c->wgu, m, f, d,
						  O1_GEMV_DEFAULT, pdl, st);
	return err ? err
		   : o1_gemv_add_bf16_cuda(c->x, c->act, c->wd, m, d, f,
					   O1_GEMV_DEFAULT, pdl, st);
}

/* Every layer (FUSED: chain_layer_fused), then the final RMSNorm (adding
 * the last down product, which the fused layers added already). */
static int chain_run(struct chain *c, bool fused, bool pdl, cudaStream_t st)
{
	int err = 0;

	for (uint32_t l = 0; !err && l < CHAIN_LAYERS; l++)
		err = fused ? chain_layer_fused(c, pdl, st)
			    : chain_layer(c, l == 0, pdl, st);
	return err ? err
		   : o1_rmsnorm_cuda(c->h, c->x, fused ? NULL : c->o, c->nw,
				     NULL, c->m, CHAIN_DIM, 1e-6f, pdl, st);
}

/* Kernel nodes and programmatic (PDL) edges of G. */
static void graph_counts(cudaGraph_t g, size_t *kernels, size_t *prog)
{
	size_t n = 0, e = 0;
	cudaGraphNode_t *nodes, *from, *to;
	cudaGraphEdgeData *data;
	enum cudaGraphNodeType type;

	assert_int_equal(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
	assert_int_equal(cudaGraphGetEdges(g, NULL, NULL, NULL, &e),
			 cudaSuccess);
	nodes = malloc((n + 1) * sizeof(*nodes));
	from = malloc((e + 1) * sizeof(*from));
	to = malloc((e + 1) * sizeof(*to));
	data = calloc(e + 1, sizeof(*data));
	assert_int_equal(cudaGraphGetNodes(g, nodes, &n), cudaSuccess);
	assert_int_equal(cudaGraphGetEdges(g, from, to, data, &e), cudaSuccess);
	*kernels = *prog = 0;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cudaGraphNodeGetType(nodes[i], &type),
				 cudaSuccess);
		*kernels += type == cudaGraphNodeTypeKernel;
	}
	for (size_t i = 0; i < e; i++)
		*prog += data[i].type == cudaGraphDependencyTypeProgrammatic;
	free(nodes), free(from), free(to), free(data);
}

/* Poisons every activation, loads x, runs the chain (eagerly, or
 * captured then replayed when COUNTS is not NULL: the graph's kernels and
 * programmatic edges go there); returns x then h. */
static void *chain_result(struct chain *c, bool fused, bool pdl,
			  cudaStream_t st, size_t *counts)
{
	size_t xd = (size_t)c->m * CHAIN_DIM;
	void *act[] = {c->o,   c->gu,	   c->h,    c->att,
		       c->act, c->scratch, c->ra.q, (void *)c->ra.qkv};
	size_t bytes[] = {xd * 4,
			  (size_t)c->m * 2 * CHAIN_FFN * 4,
			  xd * 2,
			  (size_t)c->m * c->k.hq * c->k.d * 2,
			  (size_t)c->m * CHAIN_FFN * 2,
			  c->scratch_floats * 4,
			  (size_t)c->m * c->k.hq * c->k.d * 4,
			  (size_t)c->m * (c->k.hq + 2 * c->k.hkv) * c->k.d * 4};
	uint8_t *out = malloc(xd * 6);
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;

	for (size_t i = 0; i < sizeof(act) / sizeof(act[0]); i++)
		assert_int_equal(cudaMemsetAsync(act[i], 0xff, bytes[i], st),
				 cudaSuccess);
	assert_int_equal(
	    cudaMemcpyAsync(c->x, c->x0, xd * 4, cudaMemcpyHostToDevice, st),
	    cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
	if (!counts) {
		assert_int_equal(chain_run(c, fused, pdl, st), 0);
	} else {
		assert_int_equal(cudaStreamBeginCapture(
				     st, cudaStreamCaptureModeThreadLocal),
				 cudaSuccess);
		assert_int_equal(chain_run(c, fused, pdl, st), 0);
		assert_int_equal(cudaStreamEndCapture(st, &g), cudaSuccess);
		graph_counts(g, &counts[0], &counts[1]);
		assert_int_equal(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
		assert_int_equal(cudaGraphLaunch(ge, st), cudaSuccess);
	}
	assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
	if (ge)
		cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
	assert_int_equal(cudaMemcpy(out, c->x, xd * 4, cudaMemcpyDeviceToHost),
			 0);
	assert_int_equal(
	    cudaMemcpy(out + xd * 4, c->h, xd * 2, cudaMemcpyDeviceToHost), 0);
	return out;
}

/* The chain FUSED or not, with PDL or not, three times eagerly, then
 * captured: the same bits as REF every time; returns the graph's kernel
 * count. */
static size_t chain_check(struct chain *c, bool fused, bool pdl,
			  cudaStream_t st, const uint8_t *ref)
{
	size_t n[2], bytes = (size_t)c->m * CHAIN_DIM * 6;
	uint8_t *got;

	for (int rep = 0; rep < 3; rep++) {
		got = chain_result(c, fused, pdl, st, NULL);
		assert_memory_equal(got, ref, bytes);
		free(got);
	}
	got = chain_result(c, fused, pdl, st, n);
	printf("chain m %u, %s, PDL %s: graph of %zu kernels, %zu "
	       "programmatic edges\n",
	       c->m, fused ? "fused" : "unfused", pdl ? "on" : "off", n[0],
	       n[1]);
	assert_memory_equal(got, ref, bytes);
	free(got);
	if (pdl)
		assert_true(n[1] > 0); /* stream capture kept PDL */
	else
		assert_int_equal(n[1], 0);
	return n[0];
}

/* The unfused chain without PDL is the reference; the fused chain drops
 * four kernels a layer (two RMSNorms, RoPE/KV and SwiGLU). */
static void test_pdl_chain(void **state)
{
	cudaStream_t st;
	struct chain c;
	size_t unfused, fused;
	uint8_t *ref;

	(void)state;
	assert_int_equal(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking),
			 cudaSuccess);
	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		chain_open(&c, m);
		ref = chain_result(&c, false, false, st, NULL);
		for (size_t i = 0; i < (size_t)m * CHAIN_DIM; i++)
			assert_true(isfinite(((float *)ref)[i]));
		unfused = chain_check(&c, false, false, st, ref);
		assert_int_equal(chain_check(&c, false, true, st, ref),
				 unfused);
		fused = chain_check(&c, true, false, st, ref);
		assert_int_equal(chain_check(&c, true, true, st, ref), fused);
		assert_int_equal(unfused - fused, 4 * CHAIN_LAYERS);
		free(ref);
		chain_close(&c);
	}
	cudaStreamDestroy(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pdl_chain),
	};

	return kct_main("test_decode_chain_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}
