/* o1model convert --quantize (tools/o1model/quant_recipe.c): each matrix
 * gets llama.cpp's type for the mix (the Q4_K_M layer pattern of a
 * 32-layer model, the LM head's Q6_K, the row-length fallbacks), the file
 * loads back with those types and llama.cpp's general.file_type, its
 * blocks are kernels/quant.h's quantization of the source rows, and the
 * CPU backend's logits on it stay close to those of the same model in
 * bf16 (llama with Q/K permuted in GGUF, and qwen2 with a tied head):
 *
 *   relative L2 of the logits against the bf16 model's, at every
 *   position, at most 3 x e_w x sqrt(P); top-1 the same at every
 *   position, or a near tie (the bf16 model's logit for the pick within
 *   2 x that bound x rms of its logits of its maximum).
 *
 * e_w is the format's relative RMS error on the weights, measured on the
 * model itself (RMS over the matrices: Q8_0 0.004, Q6_K 0.013, Q4_K_M
 * 0.050, Q4_0 0.064), and P = 2 x layers + 1 the products a token's
 * residual stream passes through. The products' errors are independent,
 * so they add in quadrature: sqrt(P). The factor 3 covers what a layer
 * does to an error on its way to the logits (2.0 to 2.2 measured here)
 * and bf16's own rounding (bf16 against f32 is printed, ~0.01). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>

#include "backend/backend.h"
#include "backend/kv_pool.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "tests/backend/mem_model.h"
#include "tests/common/test_util.h"
#include "tools/o1model/quant_recipe.h"

#define VOCAB 512
#define N_IDS 11

static char *o1model_bin;
static char work[64];

/* A llama (untied, Q/K permuted in GGUF) or qwen2 (tied, biases) model
 * with every matrix's rows whole blocks of 256. */
static void build(struct mem_model *f, enum o1_arch arch, uint32_t layers)
{
	struct o1_model_desc d = {.arch = arch,
				  .n_layers = layers,
				  .dim = 256,
				  .n_heads = 4,
				  .n_kv_heads = 2,
				  .head_dim = 64,
				  .ffn_dim = 768,
				  .vocab_size = VOCAB,
				  .max_context_tokens = 64,
				  .norm_eps = 1e-5f,
				  .qkv_bias = arch == O1_ARCH_QWEN2,
				  .tied_embeddings = arch == O1_ARCH_QWEN2,
				  .rope = {.theta = 1e4f, .dim = 64},
				  .bos_id = -1,
				  .eos_id = -1};

	mem_model_build(f, &d, 5);
	snprintf(f->m.desc.name, sizeof(f->m.desc.name), "quant test");
	/* matrices std 1/16 (mem_model's are 0.3/sqrt(3)): products of rows
	 * of 256 keep their input's scale, as a trained model's do, instead
	 * of a gain of 2.8 each that makes attention argmax-like and the
	 * model chaotic */
	for (uint32_t i = 0; i < f->m.n_tensors; i++)
		if (f->t[i].n_dims == 2 && f->t[i].role != O1_T_TOKEN_EMBD)
			for (uint64_t j = 0; j < o1_tensor_elements(&f->t[i]);
			     j++)
				((float *)f->data[i])[j] *= 0.36f;
}

/* The types quant_recipe.h documents, for a shape of L layers. */
static void test_recipe_types(void **state)
{
	/* llama3-8b's Q4_K_M: attn_v / ffn_down Q6_K in these 16 layers */
	static const int more[32] = {1, 1, 1, 1, 0, 0, 1, 0, 0, 1, 0,
				     0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1,
				     0, 0, 1, 0, 0, 1, 1, 1, 1, 1};
	struct mem_model f;
	enum o1_dtype types[MEM_MODEL_MAX_TENSORS];

	(void)state;
	for (uint32_t i = 0; i < 32; i++)
		assert_int_equal(o1model_quant_more_bits(i, 32), more[i]);
	build(&f, O1_ARCH_LLAMA, 4);
	assert_int_equal(o1model_quant_types(&f.m, O1MODEL_Q4_K_M, types), 15);
	for (uint32_t i = 0; i < f.m.n_tensors; i++) {
		const struct o1_tensor *t = &f.t[i];
		bool six = t->role == O1_T_OUTPUT ||
			   ((t->role == O1_T_WV || t->role == O1_T_W_DOWN) &&
			    t->layer >= 2); /* of 4 layers: 2 and 3 */
		enum o1_dtype want = t->n_dims == 1 ? O1_DTYPE_F32
				     : six	    ? O1_DTYPE_Q6_K
						    : O1_DTYPE_Q4_K;

		assert_int_equal(types[i], want);
	}
	assert_int_equal(o1model_quant_types(&f.m, O1MODEL_Q4_0, types), 2);
	for (uint32_t i = 0; i < f.m.n_tensors; i++)
		if (f.t[i].n_dims == 2)
			assert_int_equal(types[i], f.t[i].role == O1_T_OUTPUT
						       ? O1_DTYPE_Q6_K
						       : O1_DTYPE_Q4_0);
	assert_int_equal(o1model_quant_types(&f.m, O1MODEL_Q8_0, types), 7);
	for (uint32_t i = 0; i < f.m.n_tensors; i++)
		if (f.t[i].n_dims == 2)
			assert_int_equal(types[i], O1_DTYPE_Q8_0);
	mem_model_release(&f);
}

/* F's matrices in mix Q of 32-element blocks of TYPE: the tied head
 * Q6_K's fallback Q8_0, the down rows of 80 F16, the rest TYPE. */
static void check_32_mix(const struct mem_model *f, enum o1model_quant q,
			 enum o1_dtype type)
{
	enum o1_dtype types[MEM_MODEL_MAX_TENSORS];

	o1model_quant_types(&f->m, q, types);
	for (uint32_t i = 0; i < f->m.n_tensors; i++)
		if (f->t[i].n_dims == 2)
			assert_int_equal(types[i],
					 f->t[i].role == O1_T_W_DOWN ? O1_DTYPE_F16
					 : f->t[i].role == O1_T_TOKEN_EMBD
					     ? O1_DTYPE_Q8_0
					     : type);
}

/* Rows that are not whole blocks fall back as llama.cpp's do: Q4_K to
 * Q5_0, Q6_K to Q8_0, Q4_0 and Q5_0 to F16 (a 96-wide model: 3 blocks of
 * 32, no block of 256). */
static void test_recipe_fallback(void **state)
{
	struct o1_model_desc d = {.arch = O1_ARCH_QWEN2,
				  .n_layers = 2,
				  .dim = 96,
				  .n_heads = 2,
				  .n_kv_heads = 1,
				  .head_dim = 48,
				  .ffn_dim = 80,
				  .vocab_size = 64,
				  .max_context_tokens = 64,
				  .norm_eps = 1e-5f,
				  .qkv_bias = true,
				  .tied_embeddings = true,
				  .rope = {.theta = 1e4f, .dim = 48}};
	enum o1_dtype types[MEM_MODEL_MAX_TENSORS];
	struct mem_model f;

	(void)state;
	mem_model_build(&f, &d, 3);
	o1model_quant_types(&f.m, O1MODEL_Q4_K_M, types);
	/* down: rows of 80 are not 32s; the tied head and layer 1's V
	 * (use_more_bits of 2 layers) are Q6_K's, the rest Q4_K's */
	for (uint32_t i = 0; i < f.m.n_tensors; i++)
		if (f.t[i].n_dims == 2)
			assert_int_equal(
			    types[i],
			    f.t[i].role == O1_T_W_DOWN ? O1_DTYPE_F16
			    : f.t[i].role == O1_T_TOKEN_EMBD ||
				    (f.t[i].role == O1_T_WV && f.t[i].layer == 1)
				? O1_DTYPE_Q8_0
				: O1_DTYPE_Q5_0);
	check_32_mix(&f, O1MODEL_Q5_0, O1_DTYPE_Q5_0);
	check_32_mix(&f, O1MODEL_Q4_0, O1_DTYPE_Q4_0);
	mem_model_release(&f);
}

/* Runs o1model with ARGS (NULL-terminated) in the work folder; returns
 * its exit code. */
static int run_argv(const char *const *args)
{
	const char *argv[16] = {o1model_bin};
	int n = 1, status;
	pid_t pid;

	while (n < 15 && args[n - 1]) {
		argv[n] = args[n - 1];
		n++;
	}
	argv[n] = NULL;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (chdir(work) != 0)
			_exit(126);
		execv(o1model_bin, (char **)argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

#define RUN(...) run_argv((const char *const[]){__VA_ARGS__, NULL})

static struct o1_model *open_in_work(const char *name)
{
	char path[256];
	struct o1_model *m;

	snprintf(path, sizeof(path), "%s/%s", work, name);
	assert_int_equal(o1_model_open(path, &m), 0);
	return m;
}

/* Logits of every position of a fixed prompt (CPU backend, 2 threads). */
static float *logits(const struct o1_model *m)
{
	static const int32_t ids[N_IDS] = {1,	7,  300, 511, 42, 42,
					   128, 99, 0,	 256, 3};
	uint32_t pages[4] = {0, 1, 2, 3};
	struct o1_backend_config cfg = {.n_threads = 2,
					.max_batch_tokens = N_IDS,
					.max_seqs = 1,
					.max_context_tokens = 64,
					.n_pages = 4,
					.page_tokens = 16};
	struct o1_step_seq seq = {ids, N_IDS, 0, pages, 1, true};
	float *out = malloc(N_IDS * VOCAB * sizeof(float));
	struct o1_step st = {
	    .seqs = &seq, .n_seqs = 1, .logits = out, .logits_rows = N_IDS};
	struct o1_backend *b;

	assert_non_null(out);
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, m, &cfg, &b), 0);
	assert_int_equal(o1_backend_step(b, &st), 0);
	o1_backend_destroy(b);
	return out;
}

static double rel_l2(const float *a, const float *ref)
{
	double e = 0, s = 0;

	for (int v = 0; v < VOCAB; v++) {
		e += ((double)a[v] - ref[v]) * ((double)a[v] - ref[v]);
		s += (double)ref[v] * ref[v];
	}
	return sqrt(e / s);
}

static int argmax(const float *l)
{
	int best = 0;

	for (int v = 1; v < VOCAB; v++)
		if (l[v] > l[best])
			best = v;
	return best;
}

/* The block matrices' relative RMS errors against F's f32 weights, as the
 * root mean square over the matrices (each matrix weighs the same,
 * whatever its scale). */
static double weight_error(const struct o1_model *m, const struct mem_model *f)
{
	double sum = 0;
	int count = 0;

	for (uint32_t i = 0; i < f->m.n_tensors; i++) {
		const struct o1_tensor *src = &f->t[i];
		const struct o1_tensor *t =
		    o1_model_tensor(m, src->role, src->layer);
		uint64_t n = o1_tensor_elements(src);
		const float *x = f->data[i];
		double e = 0, s = 0;
		float *q;

		if (src->n_dims == 1 || !o1_quant_is_block(t->dtype))
			continue;
		q = o1_test_tensor_f32(m, t);
		for (uint64_t j = 0; j < n; j++) {
			e += ((double)q[j] - x[j]) * ((double)q[j] - x[j]);
			s += (double)x[j] * x[j];
		}
		free(q);
		sum += e / s;
		count++;
	}
	return sqrt(sum / count);
}

/* A quantized file's blocks are quant.h's quantization of the source's
 * rows (ffn_up of layer 0: no Q/K permutation to undo). */
static void check_blocks(const struct o1_model *q, const struct mem_model *f)
{
	const struct o1_tensor *t = o1_model_tensor(q, O1_T_W_UP, 0);
	const struct o1_tensor *src = o1_model_tensor(&f->m, O1_T_W_UP, 0);
	uint8_t *want = malloc(t->n_bytes);

	assert_non_null(want);
	assert_int_equal(o1_quant_quantize((enum o1_quant_type)t->dtype,
					   src->data, want,
					   o1_tensor_elements(src)),
			 0);
	assert_memory_equal(t->data, want, t->n_bytes);
	free(want);
}

/* o1model info's weight bytes a token reads: every tensor's bytes but an
 * untied token embedding's, of which one row. */
static void check_info(const struct o1_model *m)
{
	const struct o1_tensor *e = o1_model_tensor(m, O1_T_TOKEN_EMBD, -1);
	uint64_t want = 0;
	char cmd[512], text[8192], line[128];

	for (uint32_t i = 0; i < m->n_tensors; i++)
		want += m->tensors[i].n_bytes;
	if (!m->desc.tied_embeddings)
		want -= e->n_bytes - e->n_bytes / e->shape[0];
	snprintf(cmd, sizeof(cmd), "%s info %s/q.gguf", o1model_bin, work);
	assert_int_equal(o1_test_run(cmd, text, sizeof(text)), 0);
	snprintf(line, sizeof(line), "per token:    %llu bytes",
		 (unsigned long long)want);
	if (!strstr(text, line))
		fail_msg("no '%s' in:\n%s", line, text);
}

/* Converts the f32 file to MIX and checks the types, the blocks and the
 * logits against REF (the bf16 model's). */
static void check_mix(const struct mem_model *f, const char *mix,
		      const float *ref, uint32_t layers)
{
	enum o1_dtype want[MEM_MODEL_MAX_TENSORS];
	enum o1model_quant q;
	struct o1_model *m;
	double ew, bound, worst = 0;
	int agree = 0;
	float *l;

	assert_int_equal(
	    RUN("convert", "f32.gguf", "q.gguf", "--quantize", mix), 0);
	m = open_in_work("q.gguf");
	assert_int_equal(o1model_quant_parse(mix, &q), 0);
	o1model_quant_types(&f->m, q, want);
	for (uint32_t i = 0; i < f->m.n_tensors; i++)
		assert_int_equal(
		    o1_model_tensor(m, f->t[i].role, f->t[i].layer)->dtype,
		    want[i]);
	check_blocks(m, f);
	check_info(m);
	ew = weight_error(m, f);
	bound = 3 * ew * sqrt(2.0 * layers + 1);
	l = logits(m);
	for (int p = 0; p < N_IDS; p++) {
		const float *a = l + p * VOCAB, *r = ref + p * VOCAB;
		double e = rel_l2(a, r), rms = 0;

		for (int v = 0; v < VOCAB; v++)
			rms += (double)r[v] * r[v] / VOCAB;
		worst = fmax(worst, e);
		agree += argmax(a) == argmax(r) ||
			 r[argmax(r)] - r[argmax(a)] <= 2 * bound * sqrt(rms);
	}
	printf("%s: weight error %.4f, logits rel L2 against bf16 worst "
	       "%.4f (bound %.4f), top-1 %d/%d\n",
	       mix, ew, worst, bound, agree, N_IDS);
	assert_true(worst <= bound);
	assert_int_equal(agree, N_IDS);
	free(l);
	o1_model_close(m);
}

static void check_arch(enum o1_arch arch)
{
	static const char *const mixes[] = {"q8_0", "q6_k", "q4_k_m", "q4_0",
					    "q5_0"};
	struct o1_model *m32, *m16;
	struct mem_model f;
	char path[256];
	float *ref, *exact;
	double worst = 0;

	build(&f, arch, 4);
	snprintf(path, sizeof(path), "%s/f32.gguf", work);
	assert_int_equal(o1_model_write_gguf(&f.m, O1_DTYPE_F32, path), 0);
	assert_int_equal(
	    RUN("convert", "f32.gguf", "bf16.gguf", "--dtype", "bf16"), 0);
	m32 = open_in_work("f32.gguf");
	m16 = open_in_work("bf16.gguf");
	exact = logits(m32);
	ref = logits(m16);
	for (int p = 0; p < N_IDS; p++)
		worst = fmax(worst, rel_l2(ref + p * VOCAB, exact + p * VOCAB));
	printf("%s: bf16 against f32: logits rel L2 worst %.4f\n",
	       o1_arch_name(arch), worst);
	for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++)
		check_mix(&f, mixes[i], ref, 4);
	free(ref), free(exact);
	o1_model_close(m32);
	o1_model_close(m16);
	mem_model_release(&f);
}

static void test_convert_llama(void **state)
{
	(void)state;
	check_arch(O1_ARCH_LLAMA);
}

static void test_convert_qwen2(void **state)
{
	(void)state;
	check_arch(O1_ARCH_QWEN2);
}

/* --quantize writes GGUF only, takes no --dtype, and names its mixes. */
static void test_bad_arguments(void **state)
{
	struct mem_model f;
	char path[256];

	(void)state;
	build(&f, O1_ARCH_LLAMA, 1);
	snprintf(path, sizeof(path), "%s/small.gguf", work);
	assert_int_equal(o1_model_write_gguf(&f.m, O1_DTYPE_F32, path), 0);
	mem_model_release(&f);
	assert_int_equal(
	    RUN("convert", "small.gguf", "x", "--quantize", "q8_0"), 2);
	assert_int_equal(
	    RUN("convert", "small.gguf", "x.gguf", "--quantize", "q5_k_m"), 2);
	assert_int_equal(RUN("convert", "small.gguf", "x.gguf", "--quantize",
			     "q8_0", "--dtype", "f16"),
			 2);
	assert_int_equal(
	    RUN("convert", "small.gguf", "x.gguf", "--quantize", "q4_k_m"), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_recipe_types),
	    cmocka_unit_test(test_recipe_fallback),
	    cmocka_unit_test(test_convert_llama),
	    cmocka_unit_test(test_convert_qwen2),
	    cmocka_unit_test(test_bad_arguments),
	};
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH-TO-o1model\n", argv[0]);
		return 2;
	}
	o1model_bin = realpath(argv[1], NULL);
	if (!o1model_bin)
		return 1;
	strcpy(work, "/tmp/o1-test-quant-XXXXXX");
	if (!mkdtemp(work))
		return 1;
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	if (!getenv("O1_KEEP_TEST_FILES"))
		o1_test_dir_remove(work);
	free(o1model_bin);
	return ret;
}
