/* model_gguf.c: synthetic models written with o1_model_write_gguf and
 * loaded back (Q/K permutation for llama, none for qwen2, dtypes, rope
 * scaling, vocabulary), loader errors, and the shared test files (the
 * llama-2 tiny random model and two vocab-only files). Without
 * /work/shared the file-based tests are skipped and the program exits 77
 * after the synthetic ones pass. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "model/gguf.h"
#include "model/model.h"
#include "tests/common/test_util.h"

#define TINY	   O1_SHARED_DIR "/testdata/models/llama-2-tiny-random.gguf"
#define VOCAB_GPT2 O1_SHARED_DIR "/testdata/vocab/ggml-vocab-gpt-2.gguf"
#define VOCAB_SPM  O1_SHARED_DIR "/testdata/vocab/ggml-vocab-llama-spm.gguf"
#define HF_DIR	   O1_SHARED_DIR "/testdata/hf/"

/* A model whose tensors own float32 buffers (freed by synth_free). */
struct synth {
	struct o1_model *m;
	float *bufs[64];
	int n_bufs;
};

static float rnd(void)
{
	return (float)rand() / (float)RAND_MAX * 2 - 1;
}

static void add(struct synth *s, enum o1_tensor_role role, int layer,
		uint64_t rows, uint64_t cols)
{
	struct o1_tensor *t = &s->m->tensors[s->m->n_tensors++];
	uint64_t n = rows ? rows * cols : cols;
	float *f = malloc(n * sizeof(float));

	assert_non_null(f);
	for (uint64_t i = 0; i < n; i++)
		f[i] = rnd();
	s->bufs[s->n_bufs++] = f;
	t->role = role;
	t->layer = layer;
	t->dtype = O1_DTYPE_F32;
	t->n_dims = rows ? 2 : 1;
	t->shape[0] = rows ? rows : cols;
	t->shape[1] = rows ? cols : 0;
	t->data = f;
	t->n_bytes = n * sizeof(float);
}

static void synth_desc(struct o1_model_desc *d, enum o1_arch arch)
{
	d->arch = arch;
	snprintf(d->name, sizeof(d->name), "synthetic %s", o1_arch_name(arch));
	d->n_layers = 2;
	d->dim = 16;
	d->n_heads = 4;
	d->n_kv_heads = 2;
	d->head_dim = 8;
	d->ffn_dim = 24;
	d->vocab_size = 11;
	d->max_context_tokens = 512;
	d->norm_eps = 1e-6f;
	d->tied_embeddings = arch == O1_ARCH_QWEN2;
	d->qkv_bias = arch == O1_ARCH_QWEN2;
	d->rope.theta = 1e6f;
	d->rope.dim = 8;
	d->bos_id = d->eos_id = -1;
}

static void synth_make(struct synth *s, enum o1_arch arch)
{
	struct o1_model_desc *d;
	uint64_t q, kv;

	memset(s, 0, sizeof(*s));
	s->m = calloc(1, sizeof(*s->m));
	s->m->tensors = calloc(64, sizeof(struct o1_tensor));
	assert_non_null(s->m->tensors);
	d = &s->m->desc;
	synth_desc(d, arch);
	q = (uint64_t)d->n_heads * d->head_dim;
	kv = (uint64_t)d->n_kv_heads * d->head_dim;
	add(s, O1_T_TOKEN_EMBD, -1, d->vocab_size, d->dim);
	add(s, O1_T_OUTPUT_NORM, -1, 0, d->dim);
	if (!d->tied_embeddings)
		add(s, O1_T_OUTPUT, -1, d->vocab_size, d->dim);
	for (int l = 0; l < (int)d->n_layers; l++) {
		add(s, O1_T_ATTN_NORM, l, 0, d->dim);
		add(s, O1_T_WQ, l, q, d->dim);
		add(s, O1_T_WK, l, kv, d->dim);
		add(s, O1_T_WV, l, kv, d->dim);
		if (d->qkv_bias) {
			add(s, O1_T_BQ, l, 0, q);
			add(s, O1_T_BK, l, 0, kv);
			add(s, O1_T_BV, l, 0, kv);
		}
		add(s, O1_T_WO, l, d->dim, q);
		add(s, O1_T_FFN_NORM, l, 0, d->dim);
		add(s, O1_T_W_GATE, l, d->ffn_dim, d->dim);
		add(s, O1_T_W_UP, l, d->ffn_dim, d->dim);
		add(s, O1_T_W_DOWN, l, d->dim, d->ffn_dim);
	}
	assert_int_equal(o1_model_validate(s->m), 0);
}

static void synth_free(struct synth *s)
{
	for (int i = 0; i < s->n_bufs; i++)
		free(s->bufs[i]);
	o1_model_close(s->m);
}

/* Every tensor of S reads back from the file exactly (F32 storage). */
static void assert_tensors_equal(const struct synth *s,
				 const struct o1_model *m)
{
	for (uint32_t i = 0; i < s->m->n_tensors; i++) {
		const struct o1_tensor *a = &s->m->tensors[i];
		const struct o1_tensor *b =
		    o1_model_tensor(m, a->role, a->layer);
		float *f;

		assert_non_null(b);
		assert_int_equal(b->n_dims, a->n_dims);
		assert_memory_equal(b->shape, a->shape,
				    a->n_dims * sizeof(uint64_t));
		f = o1_test_tensor_f32(m, b);
		assert_memory_equal(f, a->data, a->n_bytes);
		free(f);
	}
}

/* Stored row of canonical row R, per llama.cpp's permute:
 * reshape(heads, 2, D/2).swapaxes(1, 2). */
static uint64_t gguf_row(uint64_t r, uint64_t d)
{
	return r / d * d + (r % d) % (d / 2) * 2 + (r % d) / (d / 2);
}

static void assert_stored_order(const struct synth *s, const struct o1_model *m,
				enum o1_tensor_role role, bool permuted)
{
	const struct o1_tensor *a = o1_model_tensor(s->m, role, 1);
	const struct o1_tensor *b = o1_model_tensor(m, role, 1);
	uint64_t cols = a->n_dims == 2 ? a->shape[1] : 1;
	uint64_t rows = a->shape[0];
	const float *src = a->data, *raw = b->data;

	assert_int_equal(b->qk_interleaved, permuted);
	assert_int_equal(b->dtype, O1_DTYPE_F32);
	for (uint64_t r = 0; r < rows; r++) {
		uint64_t to = permuted ? gguf_row(r, m->desc.head_dim) : r;

		assert_memory_equal(raw + to * cols, src + r * cols,
				    cols * sizeof(float));
	}
	if (permuted) /* the permutation is not the identity */
		assert_int_not_equal(gguf_row(1, m->desc.head_dim), 1);
}

static void round_trip(enum o1_arch arch)
{
	struct synth s;
	struct o1_model *m;
	struct o1_gguf *g;
	struct o1_gguf_str str;
	char path[64];
	bool perm = arch != O1_ARCH_QWEN2;

	srand(arch + 1);
	synth_make(&s, arch);
	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_model_write_gguf(s.m, O1_DTYPE_F32, path), 0);
	assert_int_equal(o1_model_open(path, &m), 0);
	assert_string_equal(m->desc.name, s.m->desc.name);
	o1_test_assert_desc_equal(&m->desc, &s.m->desc);
	assert_int_equal(m->desc.arch,
			 arch == O1_ARCH_MISTRAL ? O1_ARCH_LLAMA : arch);
	assert_int_equal(m->n_tensors, s.m->n_tensors);
	assert_null(m->vocab);
	assert_tensors_equal(&s, m);
	assert_stored_order(&s, m, O1_T_WQ, perm);
	assert_stored_order(&s, m, O1_T_WK, perm);
	assert_stored_order(&s, m, O1_T_WV, false);
	if (arch == O1_ARCH_QWEN2) {
		assert_stored_order(&s, m, O1_T_BQ, false);
		assert_stored_order(&s, m, O1_T_BK, false);
	}
	assert_int_equal(o1_gguf_open(path, &g), 0);
	assert_int_equal(o1_gguf_get_str(g, "general.architecture", &str), 0);
	assert_int_equal(str.len, 5);
	assert_memory_equal(str.ptr, perm ? "llama" : "qwen2", 5);
	assert_int_equal(o1_gguf_find_tensor(g, "blk.1.attn_q.weight")->ne[0],
			 16);
	assert_int_equal(o1_gguf_find_tensor(g, "blk.1.attn_k.weight")->ne[1],
			 16);
	assert_int_equal(o1_gguf_find_tensor(g, "output.weight") != NULL, perm);
	o1_gguf_close(g);
	o1_model_close(m);
	synth_free(&s);
	unlink(path);
}

static void test_llama_round_trip(void **state)
{
	(void)state;
	round_trip(O1_ARCH_LLAMA);
}

static void test_qwen2_round_trip(void **state)
{
	(void)state;
	round_trip(O1_ARCH_QWEN2);
}

static void test_mistral_round_trip(void **state)
{
	(void)state;
	round_trip(O1_ARCH_MISTRAL);
}

/* A qwen2-style model (with biases) under the llama architecture: the
 * biases are permuted like their rows. */
static void test_llama_bias_permuted(void **state)
{
	struct synth s;
	struct o1_model *m;
	char path[64];

	(void)state;
	srand(5);
	synth_make(&s, O1_ARCH_QWEN2);
	s.m->desc.arch = O1_ARCH_LLAMA;
	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_model_write_gguf(s.m, O1_DTYPE_F32, path), 0);
	assert_int_equal(o1_model_open(path, &m), 0);
	assert_true(m->desc.qkv_bias);
	assert_true(m->desc.tied_embeddings);
	assert_tensors_equal(&s, m);
	assert_stored_order(&s, m, O1_T_BQ, true);
	assert_stored_order(&s, m, O1_T_BK, true);
	o1_model_close(m);
	synth_free(&s);
	unlink(path);
}

static void half_round_trip(enum o1_dtype dtype)
{
	struct synth s;
	struct o1_model *m;
	char path[64];

	srand(11);
	synth_make(&s, O1_ARCH_LLAMA);
	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_model_write_gguf(s.m, dtype, path), 0);
	assert_int_equal(o1_model_open(path, &m), 0);
	for (uint32_t i = 0; i < s.m->n_tensors; i++) {
		const struct o1_tensor *a = &s.m->tensors[i];
		const struct o1_tensor *b =
		    o1_model_tensor(m, a->role, a->layer);
		const float *src = a->data;
		uint64_t n = o1_tensor_elements(a);
		float *f = o1_test_tensor_f32(m, b);

		assert_int_equal(b->dtype,
				 a->n_dims == 1 ? O1_DTYPE_F32 : dtype);
		for (uint64_t k = 0; k < n; k++) {
			float want =
			    a->n_dims == 1 ? src[k]
			    : dtype == O1_DTYPE_F16
				? o1_f16_to_f32(o1_f32_to_f16(src[k]))
				: o1_bf16_to_f32(o1_f32_to_bf16(src[k]));

			assert_true(f[k] == want);
		}
		free(f);
	}
	o1_model_close(m);
	synth_free(&s);
	unlink(path);
}

static void test_f16_bf16(void **state)
{
	struct synth s;
	char path[64];

	(void)state;
	half_round_trip(O1_DTYPE_F16);
	half_round_trip(O1_DTYPE_BF16);
	synth_make(&s, O1_ARCH_LLAMA);
	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_model_write_gguf(s.m, O1_DTYPE_Q8_0, path),
			 -EINVAL);
	synth_free(&s);
	unlink(path);
}

static struct o1_model *write_load(const struct synth *s, char *path,
				   size_t size)
{
	struct o1_model *m;

	o1_test_file_make(path, size, "model");
	assert_int_equal(o1_model_write_gguf(s->m, O1_DTYPE_F32, path), 0);
	assert_int_equal(o1_model_open(path, &m), 0);
	unlink(path);
	return m;
}

static void test_rope_linear_yarn(void **state)
{
	struct synth s;
	struct o1_model *m;
	struct o1_rope *r;
	char path[64];

	(void)state;
	synth_make(&s, O1_ARCH_QWEN2);
	r = &s.m->desc.rope;
	r->scaling = O1_ROPE_SCALING_LINEAR;
	r->factor = 4;
	m = write_load(&s, path, sizeof(path));
	assert_int_equal(m->desc.rope.scaling, O1_ROPE_SCALING_LINEAR);
	assert_true(m->desc.rope.factor == 4);
	o1_model_close(m);
	r->scaling = O1_ROPE_SCALING_YARN;
	r->factor = 8;
	r->original_max_positions = 4096;
	r->beta_fast = 16;
	r->beta_slow = 2;
	r->attn_factor = 0.75f;
	m = write_load(&s, path, sizeof(path));
	assert_int_equal(m->desc.rope.scaling, O1_ROPE_SCALING_YARN);
	assert_true(m->desc.rope.factor == 8);
	assert_int_equal(m->desc.rope.original_max_positions, 4096);
	assert_true(m->desc.rope.beta_fast == 16);
	assert_true(m->desc.rope.beta_slow == 2);
	assert_true(m->desc.rope.attn_factor == 0.75f);
	o1_model_close(m);
	synth_free(&s);
}

/* transformers' _compute_llama3_parameters, written as there: the new
 * inverse frequency per pair; the divisor is old / new. */
static double llama3_divisor(const struct o1_rope *r, uint32_t i)
{
	double inv = 1.0 / pow(r->theta, (double)(2 * i) / r->dim);
	double low_wave = r->original_max_positions / r->low_freq_factor;
	double high_wave = r->original_max_positions / r->high_freq_factor;
	double wave = 2 * M_PI / inv;
	double scaled = wave > low_wave ? inv / r->factor : inv;
	double smooth =
	    (r->original_max_positions / wave - r->low_freq_factor) /
	    (r->high_freq_factor - r->low_freq_factor);
	double smoothed = (1 - smooth) * scaled / r->factor + smooth * scaled;
	bool medium = !(wave < high_wave) && !(wave > low_wave);

	return inv / (medium ? smoothed : scaled);
}

static void test_rope_llama3(void **state)
{
	struct synth s;
	struct o1_model *m;
	const struct o1_tensor *t;
	struct o1_rope *r;
	char path[64];
	float *f;
	int ones = 0, eights = 0, mid = 0;

	(void)state;
	synth_make(&s, O1_ARCH_LLAMA);
	s.m->desc.head_dim = 128;
	s.m->desc.n_heads = 1;
	s.m->desc.n_kv_heads = 1;
	s.m->n_tensors = 0;
	for (int i = 0; i < s.n_bufs; i++)
		free(s.bufs[i]);
	s.n_bufs = 0;
	add(&s, O1_T_TOKEN_EMBD, -1, 11, 16);
	add(&s, O1_T_OUTPUT_NORM, -1, 0, 16);
	add(&s, O1_T_OUTPUT, -1, 11, 16);
	s.m->desc.n_layers = 0;
	r = &s.m->desc.rope;
	*r = (struct o1_rope){.theta = 500000,
			      .dim = 128,
			      .scaling = O1_ROPE_SCALING_LLAMA3,
			      .factor = 8,
			      .low_freq_factor = 1,
			      .high_freq_factor = 4,
			      .original_max_positions = 8192};
	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_model_write_gguf(s.m, O1_DTYPE_F32, path), 0);
	/* n_layers 0 fails validation: load through the loader directly */
	m = calloc(1, sizeof(*m));
	strcpy(m->path, path);
	assert_int_equal(o1_model_load_gguf(m), 0);
	t = o1_model_tensor(m, O1_T_ROPE_FREQS, -1);
	assert_non_null(t);
	assert_int_equal(t->n_dims, 1);
	assert_int_equal(t->shape[0], 64);
	f = o1_test_tensor_f32(m, t);
	for (uint32_t i = 0; i < 64; i++) {
		double want = llama3_divisor(r, i);

		assert_float_equal(f[i], want, 1e-6 * want);
		ones += f[i] == 1.0f;
		eights += f[i] == 8.0f;
		mid += f[i] > 1.0f && f[i] < 8.0f;
	}
	assert_true(ones > 0 && eights > 0 && mid > 0);
	free(f);
	o1_model_close(m);
	synth_free(&s);
	unlink(path);
}

static void make_vocab(struct o1_vocab **out, enum o1_vocab_kind kind)
{
	static const char *const toks[5] = {"<unk>", "<s>", "</s>",
					    "\xe2\x96\x81hi", "x y"};
	struct o1_vocab *v;

	assert_int_equal(o1_vocab_create(5, kind == O1_VOCAB_BPE ? 2 : 0, &v),
			 0);
	v->kind = kind;
	for (int i = 0; i < 5; i++) {
		v->tokens[i] = o1_vocab_strdup(v, toks[i], strlen(toks[i]));
		v->scores[i] = -(float)i * 0.5f;
		v->types[i] = i < 3 ? O1_TOKEN_CONTROL : O1_TOKEN_NORMAL;
	}
	if (kind == O1_VOCAB_BPE) {
		v->merges[0] = o1_vocab_strdup(v, "x y", 3);
		v->merges[1] = o1_vocab_strdup(v, "h i", 3);
		strcpy(v->pre, "llama-bpe");
	}
	v->bos_id = 1;
	v->eos_id = 2;
	v->unk_id = 0;
	v->pad_id = kind == O1_VOCAB_BPE ? 4 : -1;
	v->add_bos = kind == O1_VOCAB_BPE;
	v->add_eos = true;
	v->add_space_prefix = kind == O1_VOCAB_SPM;
	v->chat_template = kind == O1_VOCAB_SPM ? strdup("{{ x }}") : NULL;
	*out = v;
}

static void test_vocab_round_trip(void **state)
{
	struct synth s;
	struct o1_model *m;
	struct o1_vocab *v;
	char path[64];

	(void)state;
	for (int kind = O1_VOCAB_BPE; kind <= O1_VOCAB_SPM; kind++) {
		synth_make(&s, O1_ARCH_QWEN2);
		s.m->desc.vocab_size = 11;
		make_vocab(&s.m->vocab, kind);
		s.m->vocab->ignore_merges = kind == O1_VOCAB_BPE;
		m = write_load(&s, path, sizeof(path));
		assert_non_null(m->vocab);
		o1_test_assert_vocab_equal(m->vocab, s.m->vocab);
		assert_int_equal(m->desc.bos_id, 1);
		assert_int_equal(m->desc.eos_id, 2);
		o1_model_close(m);
		o1_test_file_make(path, sizeof(path), "model");
		assert_int_equal(o1_model_write_gguf(s.m, O1_DTYPE_F16, path),
				 0);
		assert_int_equal(o1_vocab_load_gguf(path, &v), 0);
		o1_test_assert_vocab_equal(v, s.m->vocab);
		o1_vocab_destroy(v);
		unlink(path);
		synth_free(&s);
	}
}

/* Defaults when the flags are absent, as llama.cpp's: SPM adds BOS and a
 * space prefix; Llama 3 style BPE adds BOS and ignores merges. */
static void vocab_defaults(const char *model, const char *pre, bool add_bos,
			   bool space, bool ignore_merges)
{
	static const char *const toks[3] = {"a", "b", "ab"};
	struct o1_gguf_writer *w;
	struct o1_vocab *v;
	char path[64];

	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_gguf_writer_create(&w), 0);
	assert_int_equal(
	    o1_gguf_writer_set_str(w, "tokenizer.ggml.model", model), 0);
	if (pre)
		assert_int_equal(
		    o1_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre), 0);
	assert_int_equal(o1_gguf_writer_set_arr(w, "tokenizer.ggml.tokens",
						O1_GGUF_STRING, toks, 3),
			 0);
	assert_int_equal(o1_gguf_writer_write(w, path), 0);
	o1_gguf_writer_destroy(w);
	assert_int_equal(o1_vocab_load_gguf(path, &v), 0);
	assert_string_equal(v->pre, pre ? pre : "default");
	assert_int_equal(v->add_bos, add_bos);
	assert_false(v->add_eos);
	assert_int_equal(v->add_space_prefix, space);
	assert_int_equal(v->ignore_merges, ignore_merges);
	assert_int_equal(v->bos_id, -1);
	assert_null(v->chat_template);
	o1_vocab_destroy(v);
	unlink(path);
}

static void test_vocab_defaults(void **state)
{
	(void)state;
	vocab_defaults("llama", NULL, true, true, false);
	vocab_defaults("gpt2", "llama-bpe", true, false, true);
	vocab_defaults("gpt2", "llama3", true, false, true);
	vocab_defaults("gpt2", "qwen2", false, false, false);
	vocab_defaults("gpt2", NULL, false, false, false);
}

/* Writes a GGUF with the model keys of a 1-layer llama, then lets EDIT
 * change it before writing; returns o1_model_open's result. */
static int open_edited(void (*edit)(struct o1_gguf_writer *w))
{
	struct o1_model *m = NULL;
	struct o1_gguf_writer *w;
	char path[64];
	static const float zero[16];
	const uint64_t ne[4] = {16};
	int err;

	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_gguf_writer_create(&w), 0);
	assert_int_equal(
	    o1_gguf_writer_set_str(w, "general.architecture", "llama"), 0);
	assert_int_equal(o1_gguf_writer_set_u32(w, "llama.context_length", 64),
			 0);
	assert_int_equal(
	    o1_gguf_writer_set_u32(w, "llama.embedding_length", 16), 0);
	assert_int_equal(o1_gguf_writer_set_u32(w, "llama.block_count", 1), 0);
	assert_int_equal(o1_gguf_writer_set_u32(w, "llama.vocab_size", 11), 0);
	assert_int_equal(
	    o1_gguf_writer_set_u32(w, "llama.feed_forward_length", 8), 0);
	assert_int_equal(
	    o1_gguf_writer_set_u32(w, "llama.attention.head_count", 2), 0);
	assert_int_equal(
	    o1_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon",
				   1e-5f),
	    0);
	assert_int_equal(o1_gguf_writer_add_tensor(w, "output_norm.weight",
						   O1_DTYPE_F32, 1, ne, zero,
						   64),
			 0);
	edit(w);
	assert_int_equal(o1_gguf_writer_write(w, path), 0);
	o1_gguf_writer_destroy(w);
	err = o1_model_open(path, &m);
	o1_model_close(m);
	unlink(path);
	return err;
}

static void edit_none(struct o1_gguf_writer *w)
{
	(void)w;
}

static void edit_arch(struct o1_gguf_writer *w)
{
	assert_int_equal(
	    o1_gguf_writer_set_str(w, "general.architecture", "gpt2"), 0);
}

static void edit_arch_type(struct o1_gguf_writer *w)
{
	assert_int_equal(o1_gguf_writer_set_u32(w, "general.architecture", 1),
			 0);
}

static void edit_dim_type(struct o1_gguf_writer *w)
{
	assert_int_equal(o1_gguf_writer_set_u32(w, "llama.embedding_len", 16),
			 0);
	assert_int_equal(
	    o1_gguf_writer_set_str(w, "llama.embedding_length", "16"), 0);
}

static void edit_layer(struct o1_gguf_writer *w)
{
	static const float zero[16];
	const uint64_t ne[4] = {16};

	assert_int_equal(o1_gguf_writer_add_tensor(w, "blk.1.attn_norm.weight",
						   O1_DTYPE_F32, 1, ne, zero,
						   64),
			 0);
}

static void edit_scaling(struct o1_gguf_writer *w)
{
	assert_int_equal(
	    o1_gguf_writer_set_str(w, "llama.rope.scaling.type", "ntk"), 0);
}

static void edit_vocab(struct o1_gguf_writer *w)
{
	static const char *const toks[2] = {"a", "b"};

	assert_int_equal(
	    o1_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"), 0);
	assert_int_equal(o1_gguf_writer_set_arr(w, "tokenizer.ggml.tokens",
						O1_GGUF_STRING, toks, 2),
			 0);
	assert_int_equal(
	    o1_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2), 0);
}

static void edit_scores(struct o1_gguf_writer *w)
{
	static const char *const toks[2] = {"a", "b"};
	static const float scores[3] = {0, 1, 2};

	assert_int_equal(
	    o1_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"), 0);
	assert_int_equal(o1_gguf_writer_set_arr(w, "tokenizer.ggml.tokens",
						O1_GGUF_STRING, toks, 2),
			 0);
	assert_int_equal(o1_gguf_writer_set_arr(w, "tokenizer.ggml.scores",
						O1_GGUF_FLOAT32, scores, 3),
			 0);
}

static void edit_tok_model(struct o1_gguf_writer *w)
{
	assert_int_equal(
	    o1_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert"), 0);
}

static void test_load_errors(void **state)
{
	(void)state;
	/* the base file has no layer tensors: validation reports them */
	assert_int_equal(open_edited(edit_none), -O1_E_MISSING);
	assert_int_equal(open_edited(edit_arch), -O1_E_UNSUPPORTED);
	assert_int_equal(open_edited(edit_arch_type), -O1_E_FORMAT);
	assert_int_equal(open_edited(edit_dim_type), -O1_E_FORMAT);
	assert_int_equal(open_edited(edit_layer), -O1_E_FORMAT);
	assert_int_equal(open_edited(edit_scaling), -O1_E_UNSUPPORTED);
	assert_int_equal(open_edited(edit_vocab), -O1_E_FORMAT);
	assert_int_equal(open_edited(edit_scores), -O1_E_FORMAT);
	assert_int_equal(open_edited(edit_tok_model), -O1_E_UNSUPPORTED);
}

/* A quantized Q matrix (Q8_0, 32 columns) under llama: dequantized and
 * un-permuted on read. */
static void test_quantized_q(void **state)
{
	struct o1_model m = {0};
	struct o1_tensor t = {0};
	uint8_t q8[8 * 34];
	float out[8 * 32];

	(void)state;
	m.desc.head_dim = 4;
	for (int r = 0; r < 8; r++) {
		q8[r * 34] = 0x00;
		q8[r * 34 + 1] = 0x3c; /* d = 1 */
		for (int c = 0; c < 32; c++)
			q8[r * 34 + 2 + c] = (uint8_t)(r * 10 + c % 4);
	}
	t.role = O1_T_WQ;
	t.dtype = O1_DTYPE_Q8_0;
	t.n_dims = 2;
	t.shape[0] = 8;
	t.shape[1] = 32;
	t.data = q8;
	t.n_bytes = sizeof(q8);
	t.qk_interleaved = true;
	assert_int_equal(o1_tensor_read_f32(&m, &t, out), 0);
	for (int r = 0; r < 8; r++)
		assert_true(out[r * 32 + 1] == gguf_row(r, 4) * 10 + 1);
}

/* The same matrix read as blocks (the backends' form): bytes untouched,
 * rows in canonical order; stored order when not permuted; rows that are
 * not whole blocks refused. */
static void test_quantized_blocks(void **state)
{
	struct o1_model m = {0};
	struct o1_tensor t = {0};
	uint8_t q8[8 * 34], out[8 * 34];

	(void)state;
	m.desc.head_dim = 4;
	for (size_t i = 0; i < sizeof(q8); i++)
		q8[i] = (uint8_t)(i * 7 + i / 34);
	t.role = O1_T_WK;
	t.dtype = O1_DTYPE_Q8_0;
	t.n_dims = 2;
	t.shape[0] = 8;
	t.shape[1] = 32;
	t.data = q8;
	t.n_bytes = sizeof(q8);
	t.qk_interleaved = true;
	assert_int_equal(o1_tensor_read_blocks(&m, &t, out), 0);
	for (int r = 0; r < 8; r++)
		assert_memory_equal(out + r * 34, q8 + gguf_row(r, 4) * 34, 34);
	t.qk_interleaved = false;
	assert_int_equal(o1_tensor_read_blocks(&m, &t, out), 0);
	assert_memory_equal(out, q8, sizeof(q8));
	t.shape[1] = 48; /* a block and a half a row */
	assert_int_equal(o1_tensor_read_blocks(&m, &t, out), -O1_E_SHAPE);
}

/* Q8_0 rows of COLS (multiple of 32) columns: scale 1/64, int8 values
 * from rand(); dequantized copy in REF. */
static uint8_t *q8_matrix(uint64_t rows, uint64_t cols, float *ref)
{
	uint64_t blocks = rows * cols / 32;
	uint8_t *b = malloc(blocks * 34);

	assert_non_null(b);
	for (uint64_t k = 0; k < blocks; k++) {
		b[k * 34] = 0x00;
		b[k * 34 + 1] = 0x24; /* 2^-6 */
		for (int j = 0; j < 32; j++) {
			int8_t q = (int8_t)(rand() % 255 - 127);

			b[k * 34 + 2 + j] = (uint8_t)q;
			ref[k * 32 + j] = q / 64.0f;
		}
	}
	return b;
}

static void add_q8(struct o1_gguf_writer *w, const char *name, uint64_t rows,
		   uint64_t cols, float *ref, uint8_t **keep)
{
	const uint64_t ne[4] = {cols, rows};

	*keep = q8_matrix(rows, cols, ref);
	assert_int_equal(o1_gguf_writer_add_tensor(w, name, O1_DTYPE_Q8_0, 2,
						   ne, *keep,
						   rows * cols / 32 * 34),
			 0);
}

static void write_q8_model(const char *path, float ref[][64 * 32],
			   const char *extra, uint64_t extra_ne)
{
	static const char *const mats[8] = {
	    "token_embd.weight",	"blk.0.attn_q.weight",
	    "blk.0.attn_k.weight",	"blk.0.attn_v.weight",
	    "blk.0.attn_output.weight", "blk.0.ffn_gate.weight",
	    "blk.0.ffn_up.weight",	"blk.0.ffn_down.weight",
	};
	static const char *const norms[3] = {"output_norm.weight",
					     "blk.0.attn_norm.weight",
					     "blk.0.ffn_norm.weight"};
	static const float ones[32] = {1};
	const uint64_t ne[4] = {32};
	uint8_t *keep[8];
	struct o1_gguf_writer *w;

	assert_int_equal(o1_gguf_writer_create(&w), 0);
	o1_gguf_writer_set_str(w, "general.architecture", "llama");
	o1_gguf_writer_set_u32(w, "llama.context_length", 128);
	o1_gguf_writer_set_u32(w, "llama.embedding_length", 32);
	o1_gguf_writer_set_u32(w, "llama.block_count", 1);
	o1_gguf_writer_set_u32(w, "llama.feed_forward_length", 64);
	o1_gguf_writer_set_u32(w, "llama.attention.head_count", 2);
	o1_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon",
			       1e-5f);
	for (int i = 0; i < 8; i++) {
		bool ffn = i >= 5;
		uint64_t rows = i == 0 ? 64 : ffn && i < 7 ? 64 : 32;
		uint64_t cols = i == 7 ? 64 : 32;

		add_q8(w, mats[i], rows, cols, ref[i], &keep[i]);
	}
	for (int i = 0; i < 3; i++)
		assert_int_equal(o1_gguf_writer_add_tensor(w, norms[i],
							   O1_DTYPE_F32, 1, ne,
							   ones, 128),
				 0);
	if (extra) {
		const uint64_t ne_x[4] = {extra_ne};

		assert_int_equal(
		    o1_gguf_writer_add_tensor(w, extra, O1_DTYPE_F32, 1, ne_x,
					      ones, extra_ne * 4),
		    0);
	}
	assert_int_equal(o1_gguf_writer_write(w, path), 0);
	o1_gguf_writer_destroy(w);
	for (int i = 0; i < 8; i++)
		free(keep[i]);
}

/* A whole llama model in Q8_0 (as llama.cpp writes it: Q/K permuted)
 * loads, validates, and reads back dequantized in canonical order. */
static void test_quantized_model(void **state)
{
	static float ref[8][64 * 32];
	static const enum o1_tensor_role roles[8] = {
	    O1_T_TOKEN_EMBD, O1_T_WQ,	  O1_T_WK,   O1_T_WV,
	    O1_T_WO,	     O1_T_W_GATE, O1_T_W_UP, O1_T_W_DOWN,
	};
	struct o1_model *m;
	char path[64];

	(void)state;
	srand(3);
	o1_test_file_make(path, sizeof(path), "model");
	write_q8_model(path, ref, NULL, 0);
	assert_int_equal(o1_model_open(path, &m), 0);
	assert_int_equal(m->desc.vocab_size, 64);
	assert_int_equal(m->desc.head_dim, 16);
	assert_true(m->desc.tied_embeddings);
	for (int i = 0; i < 8; i++) {
		const struct o1_tensor *t =
		    o1_model_tensor(m, roles[i], i ? 0 : -1);
		bool qk = roles[i] == O1_T_WQ || roles[i] == O1_T_WK;
		uint64_t cols = t->shape[1], rows = t->shape[0];
		float *f = o1_test_tensor_f32(m, t);

		assert_int_equal(t->dtype, O1_DTYPE_Q8_0);
		assert_int_equal(t->qk_interleaved, qk);
		for (uint64_t r = 0; r < rows; r++) {
			uint64_t src = qk ? gguf_row(r, 16) : r;

			assert_memory_equal(f + r * cols, ref[i] + src * cols,
					    cols * sizeof(float));
		}
		free(f);
	}
	o1_model_close(m);
	unlink(path);
}

/* Bad quantized tensors are refused at load, each with the tensor's name
 * and the reason in the log line: a block type this build does not read
 * (Q5_K), rows that are not whole blocks, blocks cut off by the end of the
 * file. Each case edits a valid Q8_0 model's bytes. */
static char logged[4096];

static int open_path(const void *path)
{
	struct o1_model *m = NULL;
	int err = o1_model_open(path, &m);

	o1_model_close(m);
	return err;
}

/* The byte offset of tensor NAME's info record just after its name (at
 * n_dims), in the file image B of N bytes. */
static size_t info_at(const uint8_t *b, size_t n, const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 8; i + len + 4 <= n; i++)
		if (memcmp(b + i, name, len) == 0 && b[i - 8] == len &&
		    b[i + len] == 2 && b[i + len + 1] == 0)
			return i + len;
	fail_msg("no tensor info for %s", name);
	return 0;
}

static void put_u64_at(uint8_t *b, size_t at, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[at + i] = (uint8_t)(v >> (8 * i));
}

static void expect_bad(const char *path, int code, const char *name,
		       const char *reason)
{
	assert_int_equal(o1_test_capture_stderr(open_path, path, logged,
						sizeof(logged)),
			 code);
	if (!strstr(logged, name) || !strstr(logged, reason))
		fail_msg("expected '%s' and '%s' in: %s", name, reason, logged);
}

static void rewrite(const char *path, const uint8_t *b, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	fclose(f);
}

static void test_quantized_bad_input(void **state)
{
	static float ref[8][64 * 32];
	const char *q = "blk.0.attn_q.weight", *down = "blk.0.ffn_down.weight";
	char path[64];
	uint8_t *b, *e;
	size_t n, at;

	(void)state;
	o1_test_file_make(path, sizeof(path), "model");
	write_q8_model(path, ref, NULL, 0);
	b = (uint8_t *)o1_test_file_read(path, &n);
	e = malloc(n);
	assert_non_null(e);
	/* attn_q: n_dims 2, ne [32, 32], type at +20 */
	at = info_at(b, n, q);
	memcpy(e, b, n);
	e[at + 20] = 13; /* Q5_K */
	rewrite(path, e, n);
	expect_bad(path, -O1_E_UNSUPPORTED, q, "type 13 (Q5_K)");
	memcpy(e, b, n);
	put_u64_at(e, at + 4, 16); /* ne [16, 64]: half a Q8_0 block a row */
	put_u64_at(e, at + 12, 64);
	rewrite(path, e, n);
	expect_bad(path, -O1_E_SHAPE, q, "not a whole number of blocks");
	/* the file ends 5 bytes into ffn_down's last block */
	{
		struct o1_gguf *g;
		const struct o1_gguf_tensor_info *t;
		size_t end;

		assert_int_equal(o1_gguf_open_memory(b, n, &g), 0);
		t = o1_gguf_find_tensor(g, down);
		assert_non_null(t);
		end = (size_t)((const uint8_t *)t->data - b) + t->n_bytes;
		o1_gguf_close(g);
		assert_true(end > 34 && end <= n);
		rewrite(path, b, end - 34 + 5);
	}
	expect_bad(path, -O1_E_BOUNDS, down, "outside");
	free(b);
	free(e);
	unlink(path);
}

/* Tensors the loader does not know are ignored, including a second
 * spelling of a layer number; one past block_count is an error. */
static int open_with_extra(const char *extra, uint64_t ne, uint32_t *n_tensors)
{
	static float ref[8][64 * 32];
	struct o1_model *m;
	char path[64];
	int err;

	o1_test_file_make(path, sizeof(path), "model");
	write_q8_model(path, ref, extra, ne);
	err = o1_model_open(path, &m);
	if (!err) {
		*n_tensors = m->n_tensors;
		o1_model_close(m);
	}
	unlink(path);
	return err;
}

static void test_extra_tensors(void **state)
{
	uint32_t n = 0;

	(void)state;
	assert_int_equal(open_with_extra("blk.00.attn_norm.weight", 32, &n), 0);
	assert_int_equal(n, 11);
	assert_int_equal(open_with_extra("blk.0.attn_norm.bias", 32, &n), 0);
	assert_int_equal(n, 11);
	assert_int_equal(open_with_extra("blk.x.attn_norm.weight", 32, &n), 0);
	assert_int_equal(open_with_extra("rope_freqs.weight", 8, &n), 0);
	assert_int_equal(n, 12);
	/* rope_freqs must hold rope.dim / 2 = 8 factors */
	assert_int_equal(open_with_extra("rope_freqs.weight", 32, &n),
			 -O1_E_SHAPE);
	assert_int_equal(open_with_extra("blk.1.attn_norm.weight", 32, &n),
			 -O1_E_FORMAT);
}

/* Without general.name the model is named after its file. */
static void test_name_from_file(void **state)
{
	struct synth s;
	struct o1_model *m;
	char path[64];
	int fd;

	(void)state;
	synth_make(&s, O1_ARCH_LLAMA);
	s.m->desc.name[0] = 0;
	snprintf(path, sizeof(path), "/tmp/o1_named_XXXXXX.gguf");
	fd = mkstemps(path, 5);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(o1_model_write_gguf(s.m, O1_DTYPE_F32, path), 0);
	assert_int_equal(o1_model_open(path, &m), 0);
	assert_int_equal(strlen(m->desc.name), strlen("o1_named_XXXXXX"));
	assert_memory_equal(m->desc.name, path + 5, strlen(m->desc.name));
	o1_model_close(m);
	synth_free(&s);
	unlink(path);
}

static bool have_shared(void)
{
	return access(TINY, R_OK) == 0 && access(VOCAB_GPT2, R_OK) == 0 &&
	       access(VOCAB_SPM, R_OK) == 0;
}

static void check_tiny_desc(const struct o1_model *m)
{
	const struct o1_model_desc *d = &m->desc;

	assert_int_equal(d->arch, O1_ARCH_LLAMA);
	assert_int_equal(d->dim, 8);
	assert_int_equal(d->n_layers, 1);
	assert_int_equal(d->ffn_dim, 32);
	assert_int_equal(d->n_heads, 2);
	assert_int_equal(d->n_kv_heads, 2);
	assert_int_equal(d->head_dim, 4);
	assert_int_equal(d->rope.dim, 4);
	assert_true(d->rope.theta == 10000.0f);
	assert_int_equal(d->rope.scaling, O1_ROPE_SCALING_NONE);
	assert_true(d->norm_eps == 1e-5f);
	assert_int_equal(d->vocab_size, 32000);
	assert_int_equal(d->max_context_tokens, 4096);
	assert_false(d->tied_embeddings);
	assert_false(d->qkv_bias);
	assert_int_equal(d->bos_id, 1);
	assert_int_equal(d->eos_id, 2);
	assert_int_equal(o1_model_tensor(m, O1_T_TOKEN_EMBD, -1)->dtype,
			 O1_DTYPE_F16);
	assert_int_equal(o1_model_tensor(m, O1_T_ATTN_NORM, 0)->dtype,
			 O1_DTYPE_F32);
	assert_true(o1_model_tensor(m, O1_T_WK, 0)->qk_interleaved);
	assert_false(o1_model_tensor(m, O1_T_WV, 0)->qk_interleaved);
	assert_int_equal(m->vocab->kind, O1_VOCAB_SPM);
	assert_int_equal(m->vocab->n_tokens, 32000);
	assert_int_equal(m->vocab->bos_id, 1);
	assert_int_equal(m->vocab->eos_id, 2);
	assert_int_equal(m->vocab->unk_id, 0);
	assert_string_equal(m->vocab->tokens[1], "<s>");
}

/* The tiny model loads as its metadata says; written back as F16 and
 * reloaded, every tensor and the vocabulary are unchanged. */
static void test_tiny_random(void **state)
{
	struct o1_model *m, *m2;
	char path[64];

	(void)state;
	if (!have_shared())
		skip();
	assert_int_equal(o1_model_open(TINY, &m), 0);
	check_tiny_desc(m);
	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_model_write_gguf(m, O1_DTYPE_F16, path), 0);
	assert_int_equal(o1_model_open(path, &m2), 0);
	check_tiny_desc(m2);
	assert_string_equal(m2->desc.name, m->desc.name);
	o1_test_assert_vocab_equal(m2->vocab, m->vocab);
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		const struct o1_tensor *a = &m->tensors[i];
		const struct o1_tensor *b =
		    o1_model_tensor(m2, a->role, a->layer);
		float *fa = o1_test_tensor_f32(m, a),
		      *fb = o1_test_tensor_f32(m2, b);

		assert_int_equal(a->dtype, b->dtype);
		assert_int_equal(a->n_bytes, b->n_bytes);
		assert_memory_equal(a->data, b->data, a->n_bytes);
		assert_memory_equal(fa, fb,
				    o1_tensor_elements(a) * sizeof(float));
		free(fa);
		free(fb);
	}
	o1_model_close(m2);
	o1_model_close(m);
	unlink(path);
}

static void test_vocab_files(void **state)
{
	struct o1_vocab *v;
	struct o1_model *m;

	(void)state;
	if (!have_shared())
		skip();
	assert_int_equal(o1_vocab_load_gguf(VOCAB_GPT2, &v), 0);
	assert_int_equal(v->kind, O1_VOCAB_BPE);
	assert_int_equal(v->n_tokens, 50257);
	assert_int_equal(v->n_merges, 50000);
	assert_int_equal(v->bos_id, 50256);
	assert_int_equal(v->eos_id, 50256);
	assert_string_equal(v->pre, "gpt-2");
	assert_string_equal(v->tokens[0], "!");
	assert_string_equal(v->tokens[50256], "<|endoftext|>");
	assert_string_equal(v->merges[0], "\xc4\xa0 t");
	assert_false(v->add_space_prefix);
	assert_false(v->ignore_merges);
	o1_vocab_destroy(v);
	assert_int_equal(o1_vocab_load_gguf(VOCAB_SPM, &v), 0);
	assert_int_equal(v->kind, O1_VOCAB_SPM);
	assert_int_equal(v->n_tokens, 32000);
	assert_int_equal(v->n_merges, 0);
	assert_int_equal(v->bos_id, 1);
	assert_int_equal(v->eos_id, 2);
	assert_int_equal(v->unk_id, 0);
	assert_true(v->add_bos);
	assert_false(v->add_eos);
	assert_string_equal(v->tokens[259], "\xe2\x96\x81\xe2\x96\x81");
	assert_int_equal(v->types[3], O1_TOKEN_BYTE);
	assert_int_equal(v->types[1], O1_TOKEN_CONTROL);
	o1_vocab_destroy(v);
	/* vocab-only files are no models */
	assert_int_equal(o1_model_open(VOCAB_GPT2, &m), -O1_E_UNSUPPORTED);
	assert_int_equal(o1_model_open(VOCAB_SPM, &m), -O1_E_MISSING);
	assert_int_equal(o1_vocab_load_gguf("/nonexistent.gguf", &v), -ENOENT);
}

/* A Hugging Face folder (loaded by model_hf.c) converted to GGUF reads
 * back tensor for tensor, bit for bit, with the same description. */
static void hf_to_gguf(const char *dir)
{
	struct o1_model *a, *b;
	char path[64];

	assert_int_equal(o1_model_open(dir, &a), 0);
	o1_test_file_make(path, sizeof(path), "model");
	assert_int_equal(o1_model_write_gguf(a, O1_DTYPE_F32, path), 0);
	assert_int_equal(o1_model_open(path, &b), 0);
	unlink(path);
	assert_int_equal(b->desc.arch, a->desc.arch);
	assert_true(b->desc.rope.theta == a->desc.rope.theta);
	assert_int_equal(b->n_tensors, a->n_tensors);
	for (uint32_t i = 0; i < a->n_tensors; i++) {
		const struct o1_tensor *t = &a->tensors[i];
		const struct o1_tensor *u =
		    o1_model_tensor(b, t->role, t->layer);
		float *x = o1_test_tensor_f32(a, t),
		      *y = o1_test_tensor_f32(b, u);

		assert_int_equal(
		    u->qk_interleaved,
		    a->desc.arch != O1_ARCH_QWEN2 &&
			(t->role == O1_T_WQ || t->role == O1_T_WK));
		assert_memory_equal(x, y,
				    o1_tensor_elements(t) * sizeof(float));
		free(x);
		free(y);
	}
	o1_model_close(b);
	o1_model_close(a);
}

static void test_hf_to_gguf(void **state)
{
	(void)state;
	if (access(HF_DIR "llama-tiny/config.json", R_OK) != 0 ||
	    access(HF_DIR "qwen2-tiny/config.json", R_OK) != 0)
		skip();
	hf_to_gguf(HF_DIR "llama-tiny");
	hf_to_gguf(HF_DIR "qwen2-tiny");
}

/* Loading a model and its vocabulary, and writing a model, with each
 * allocation failing in turn: -ENOMEM every time (no leak under ASan)
 * until the budget suffices. */
static void test_enomem(void **state)
{
	struct synth s;
	struct o1_model *m;
	struct o1_vocab *v;
	char path[64], out[64];
	long k;
	int err;

	(void)state;
	synth_make(&s, O1_ARCH_LLAMA);
	make_vocab(&s.m->vocab, O1_VOCAB_BPE);
	o1_test_file_make(path, sizeof(path), "model");
	o1_test_file_make(out, sizeof(out), "model");
	assert_int_equal(o1_model_write_gguf(s.m, O1_DTYPE_F32, path), 0);
	for (k = 0;; k++) {
		o1_test_alloc_fail_at(k);
		err = o1_model_open(path, &m);
		o1_test_alloc_fail_at(-1);
		if (!err)
			break;
		assert_int_equal(err, -ENOMEM);
	}
	assert_true(k > 10);
	assert_int_equal(m->vocab->n_merges, 2);
	o1_model_close(m);
	for (k = 0; (o1_test_alloc_fail_at(k), err = o1_vocab_load_gguf(path, &v));
	     k++) {
		o1_test_alloc_fail_at(-1);
		assert_int_equal(err, -ENOMEM);
	}
	o1_test_alloc_fail_at(-1);
	o1_vocab_destroy(v);
	for (k = 0; (o1_test_alloc_fail_at(k),
		    err = o1_model_write_gguf(s.m, O1_DTYPE_BF16, out));
	     k++) {
		o1_test_alloc_fail_at(-1);
		assert_int_equal(err, -ENOMEM);
	}
	o1_test_alloc_fail_at(-1);
	assert_true(k > 10);
	assert_int_equal(o1_model_open(out, &m), 0);
	o1_model_close(m);
	synth_free(&s);
	unlink(path);
	unlink(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_llama_round_trip),
	    cmocka_unit_test(test_qwen2_round_trip),
	    cmocka_unit_test(test_mistral_round_trip),
	    cmocka_unit_test(test_llama_bias_permuted),
	    cmocka_unit_test(test_f16_bf16),
	    cmocka_unit_test(test_rope_linear_yarn),
	    cmocka_unit_test(test_rope_llama3),
	    cmocka_unit_test(test_vocab_round_trip),
	    cmocka_unit_test(test_vocab_defaults),
	    cmocka_unit_test(test_load_errors),
	    cmocka_unit_test(test_quantized_q),
	    cmocka_unit_test(test_quantized_blocks),
	    cmocka_unit_test(test_quantized_model),
	    cmocka_unit_test(test_quantized_bad_input),
	    cmocka_unit_test(test_extra_tensors),
	    cmocka_unit_test(test_name_from_file),
	    cmocka_unit_test(test_tiny_random),
	    cmocka_unit_test(test_vocab_files),
	    cmocka_unit_test(test_hf_to_gguf),
	    cmocka_unit_test(test_enomem),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	return rc == 0 && !have_shared() ? 77 : rc;
}
