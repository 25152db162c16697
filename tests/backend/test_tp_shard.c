/* Tensor-parallel sharding (daemon/backend/tp_shard.c): the plan's head and
 * FFN ranges for real shapes and the refusals (with their messages'
 * subject: what cannot be split), and the rank's model: every tensor of
 * every rank read back (o1_tensor_read_f32) must equal the slice of the
 * whole tensor read the same way, bitwise, for f32, bf16, f16 and Q8_0
 * weights (Q8_0 column slices in whole blocks stay Q8_0, others become
 * f32), GGUF-interleaved Q/K rows and Q/K/V biases; the ranks' slices
 * tile every split tensor exactly once. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "mem_model.h"
#include "model/model.h"
#include "backend/tp_shard.h"

static struct o1_model_desc desc(uint32_t heads, uint32_t kv, uint32_t hd,
				 uint32_t ffn)
{
	return (struct o1_model_desc){.arch = O1_ARCH_LLAMA,
				      .n_layers = 2,
				      .dim = 64,
				      .n_heads = heads,
				      .n_kv_heads = kv,
				      .head_dim = hd,
				      .ffn_dim = ffn,
				      .vocab_size = 40,
				      .max_context_tokens = 64,
				      .norm_eps = 1e-5f,
				      .rope = {.theta = 10000, .dim = hd},
				      .bos_id = -1,
				      .eos_id = -1};
}

/* llama3-8b: 32 heads, 8 kv heads of 128, FFN 14336. */
static void test_plan_llama3_8b(void **state)
{
	struct o1_model_desc d = desc(32, 8, 128, 14336);
	struct o1_tp_shard s;

	(void)state;
	for (uint32_t n = 1; n <= 8; n *= 2)
		for (uint32_t r = 0; r < n; r++) {
			assert_int_equal(o1_tp_shard_plan(&d, r, n, 8, &s), 0);
			assert_int_equal(s.rank, r);
			assert_int_equal(s.size, n);
			assert_int_equal(s.n_q_heads, 32 / n);
			assert_int_equal(s.q_head0, r * 32 / n);
			assert_int_equal(s.n_kv_heads, 8 / n);
			assert_int_equal(s.kv_head0, r * 8 / n);
			assert_int_equal(s.n_ffn, 14336 / n);
			assert_int_equal(s.ffn0, r * 14336 / n);
			/* GQA: the rank's query heads use its own kv heads */
			assert_int_equal(s.q_head0 / (32 / 8), s.kv_head0);
		}
}

static void test_plan_refused(void **state)
{
	struct o1_model_desc qwen15 = desc(12, 2, 128, 8960);
	struct o1_model_desc qwen05 = desc(14, 2, 64, 4864);
	struct o1_model_desc small = desc(8, 4, 8, 48);
	struct o1_tp_shard s;

	(void)state;
	/* kv heads 2 cannot be split over 4 GPUs */
	assert_int_equal(o1_tp_shard_plan(&qwen15, 0, 4, 8, &s),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(o1_tp_shard_plan(&qwen15, 1, 2, 8, &s), 0);
	assert_int_equal(s.n_kv_heads, 1);
	/* 14 query heads over 4 */
	assert_int_equal(o1_tp_shard_plan(&qwen05, 0, 4, 8, &s),
			 -O1_E_UNSUPPORTED);
	/* FFN 48 over 3 */
	small.n_heads = 6, small.n_kv_heads = 3;
	small.ffn_dim = 50;
	assert_int_equal(o1_tp_shard_plan(&small, 0, 3, 1, &s),
			 -O1_E_UNSUPPORTED);
	/* 48 / 4 = 12 FFN columns: fine on the CPU, not a multiple of 8 */
	small = desc(8, 4, 8, 48);
	assert_int_equal(o1_tp_shard_plan(&small, 3, 4, 1, &s), 0);
	assert_int_equal(s.ffn0, 36);
	assert_int_equal(o1_tp_shard_plan(&small, 0, 4, 8, &s),
			 -O1_E_UNSUPPORTED);
	/* query columns 2 heads x 4 = 8 per rank at 4, 4 at 8 */
	small = desc(8, 8, 4, 64);
	assert_int_equal(o1_tp_shard_plan(&small, 0, 4, 8, &s), 0);
	assert_int_equal(o1_tp_shard_plan(&small, 0, 8, 8, &s),
			 -O1_E_UNSUPPORTED);
	/* bad arguments */
	assert_int_equal(o1_tp_shard_plan(&small, 2, 2, 1, &s), -EINVAL);
	assert_int_equal(o1_tp_shard_plan(&small, 0, 0, 1, &s), -EINVAL);
	assert_int_equal(o1_tp_shard_plan(&small, 0, 16, 1, &s), -EINVAL);
	assert_int_equal(o1_tp_shard_plan(&small, 0, 2, 0, &s), -EINVAL);
}

static float *read_all(const struct o1_model *m, const struct o1_tensor *t)
{
	float *v = malloc(o1_tensor_elements(t) * sizeof(float));

	assert_non_null(v);
	assert_int_equal(o1_tensor_read_f32(m, t, v), 0);
	return v;
}

/* Rank S's tensor I equals the slice of the whole tensor; marks the
 * elements it covers in SEEN (one counter per element of the whole). */
static void check_tensor(const struct o1_model *m, const struct o1_model *sm,
			 const struct o1_tp_shard *s, uint32_t i, uint8_t *seen)
{
	const struct o1_tensor *t = &m->tensors[i], *st = &sm->tensors[i];
	uint64_t cols = t->shape[t->n_dims - 1];
	struct o1_tp_slice sl;
	float *whole = read_all(m, t), *part = read_all(sm, st);

	o1_tp_shard_slice(s, &m->desc, t, &sl);
	assert_int_equal(st->role, t->role);
	assert_int_equal(st->layer, t->layer);
	assert_int_equal(o1_tensor_elements(st), sl.n_rows * sl.n_cols);
	for (uint64_t r = 0; r < sl.n_rows; r++)
		for (uint64_t c = 0; c < sl.n_cols; c++) {
			uint64_t w = (sl.row0 + r) * cols + sl.col0 + c;

			assert_memory_equal(&part[r * sl.n_cols + c], &whole[w],
					    sizeof(float));
			seen[w]++;
		}
	free(whole);
	free(part);
}

/* Every rank of SIZE: the shard model is valid and each of its tensors is
 * its slice; split tensors are tiled once, replicated ones held whole by
 * every rank. */
static void check_ranks(const struct o1_model *m, uint32_t size)
{
	struct o1_model *sm[O1_TP_MAX_RANKS];
	struct o1_tp_shard s[O1_TP_MAX_RANKS];
	struct o1_tp_slice sl;

	for (uint32_t r = 0; r < size; r++) {
		assert_int_equal(o1_tp_shard_plan(&m->desc, r, size, 1, &s[r]),
				 0);
		assert_int_equal(o1_tp_shard_model(m, &s[r], &sm[r]), 0);
		assert_int_equal(o1_model_validate(sm[r]), 0);
		assert_int_equal(sm[r]->desc.n_heads, m->desc.n_heads / size);
		assert_int_equal(sm[r]->desc.ffn_dim, m->desc.ffn_dim / size);
	}
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		uint64_t n = o1_tensor_elements(&m->tensors[i]);
		uint8_t *seen = calloc(n, 1);

		for (uint32_t r = 0; r < size; r++)
			check_tensor(m, sm[r], &s[r], i, seen);
		o1_tp_shard_slice(&s[0], &m->desc, &m->tensors[i], &sl);
		for (uint64_t e = 0; e < n; e++)
			assert_int_equal(seen[e], sl.split ? 1 : size);
		free(seen);
	}
	for (uint32_t r = 0; r < size; r++)
		o1_model_close(sm[r]);
}

static void test_slices_f32(void **state)
{
	struct o1_model_desc d = desc(8, 4, 8, 48);
	struct mem_model f;

	(void)state;
	d.qkv_bias = true;
	mem_model_build(&f, &d, 7);
	for (uint32_t n = 1; n <= 4; n *= 2)
		check_ranks(&f.m, n);
	mem_model_release(&f);
	d = desc(6, 6, 8, 48); /* three ranks */
	d.tied_embeddings = true;
	mem_model_build(&f, &d, 8);
	check_ranks(&f.m, 3);
	check_ranks(&f.m, 6);
	mem_model_release(&f);
}

/* bf16 and f16 gather in their own type; Q8_0 in whole blocks stays
 * Q8_0 (FFN 128 over 2 and 4: 64 and 32 columns), else becomes f32 (over
 * 8: 16 columns); GGUF-interleaved Q/K rows and biases. */
static void test_slices_dtypes(void **state)
{
	struct o1_model_desc d = desc(8, 8, 8, 128);
	struct o1_model *sm;
	struct o1_tp_shard s;
	struct mem_model f;

	(void)state;
	d.qkv_bias = true;
	mem_model_build(&f, &d, 9);
	mem_model_interleave(&f);
	mem_model_convert(&f, O1_T_WQ, O1_DTYPE_BF16);
	mem_model_convert(&f, O1_T_WO, O1_DTYPE_BF16);
	mem_model_convert(&f, O1_T_W_UP, O1_DTYPE_F16);
	mem_model_convert(&f, O1_T_W_DOWN, O1_DTYPE_Q8_0);
	for (uint32_t n = 1; n <= 8; n *= 2)
		check_ranks(&f.m, n);
	assert_int_equal(o1_tp_shard_plan(&f.m.desc, 1, 4, 1, &s), 0);
	assert_int_equal(o1_tp_shard_model(&f.m, &s, &sm), 0);
	assert_int_equal(o1_model_tensor(sm, O1_T_W_DOWN, 0)->dtype,
			 O1_DTYPE_Q8_0);
	assert_int_equal(o1_model_tensor(sm, O1_T_WO, 0)->dtype, O1_DTYPE_BF16);
	assert_true(o1_model_tensor(sm, O1_T_WQ, 1)->qk_interleaved);
	/* row slices borrow the whole model's bytes */
	assert_ptr_equal(
	    o1_model_tensor(sm, O1_T_W_UP, 1)->data,
	    (const char *)o1_model_tensor(&f.m, O1_T_W_UP, 1)->data +
		(uint64_t)s.ffn0 * d.dim * 2);
	o1_model_close(sm);
	assert_int_equal(o1_tp_shard_plan(&f.m.desc, 5, 8, 1, &s), 0);
	assert_int_equal(o1_tp_shard_model(&f.m, &s, &sm), 0);
	assert_int_equal(o1_model_tensor(sm, O1_T_W_DOWN, 0)->dtype,
			 O1_DTYPE_F32);
	o1_model_close(sm);
	mem_model_release(&f);
}

static void test_elements(void **state)
{
	struct o1_model_desc d = desc(8, 4, 8, 48);
	struct o1_tp_shard s;
	struct mem_model f;
	uint64_t whole = 0, per_rank, replicated = 0;

	(void)state;
	mem_model_build(&f, &d, 10);
	for (uint32_t i = 0; i < f.m.n_tensors; i++) {
		enum o1_tensor_role r = f.t[i].role;
		uint64_t n = o1_tensor_elements(&f.t[i]);

		whole += n;
		if (r == O1_T_TOKEN_EMBD || r == O1_T_OUTPUT ||
		    r == O1_T_OUTPUT_NORM || r == O1_T_ATTN_NORM ||
		    r == O1_T_FFN_NORM)
			replicated += n;
	}
	assert_int_equal(o1_tp_shard_plan(&d, 1, 2, 1, &s), 0);
	per_rank = o1_tp_shard_elements(&f.m, &s);
	assert_int_equal(per_rank, replicated + (whole - replicated) / 2);
	mem_model_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plan_llama3_8b),
	    cmocka_unit_test(test_plan_refused),
	    cmocka_unit_test(test_slices_f32),
	    cmocka_unit_test(test_slices_dtypes),
	    cmocka_unit_test(test_elements),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
