/* o1model end to end: runs the real binary (argv[1]) in a scratch folder
 * and opens what it wrote with the model loaders.
 *
 * Checks: make then info for every arch and format (and a real preset's
 * shapes with one layer); the same random model written as GGUF and as
 * safetensors reads back to the same floats (the Q/K permutation undone);
 * safetensors -> GGUF -> safetensors gives bit-identical tensors, config
 * and vocabulary for llama and qwen2 in f32, f16 and bf16, and for the
 * shared HF test folders; make is deterministic in its seed; vocabulary
 * padding; bad arguments exit 2 with a message; chat-render prints
 * exactly the rendering (every one of ../shared/testdata/chat's 666, or
 * its raised error). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/gguf.h"
#include "model/model.h"
#include "tests/common/test_util.h"

static char *o1model_bin;
static char work[64];
static char out_text[1 << 16]; /* stdout of the last run */
static char err_text[1 << 14]; /* stderr of the last run */

static void read_back(int fd, char *buf, size_t len)
{
	ssize_t n;

	lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, len - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
}

/* Runs o1model with ARGS (NULL-terminated) in the work folder; returns its
 * exit code and keeps its stdout and stderr in out_text / err_text. */
static int run_argv(const char *const *args)
{
	const char *argv[32] = {o1model_bin};
	char out_path[] = "/tmp/o1-test-out-XXXXXX";
	char err_path[] = "/tmp/o1-test-err-XXXXXX";
	int n = 1, status, ofd = mkstemp(out_path), efd = mkstemp(err_path);
	pid_t pid;

	while (n < 31 && args[n - 1]) {
		argv[n] = args[n - 1];
		n++;
	}
	argv[n] = NULL;
	assert_true(ofd >= 0 && efd >= 0);
	unlink(out_path);
	unlink(err_path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(ofd, 1);
		dup2(efd, 2);
		if (chdir(work) != 0)
			_exit(126);
		execv(o1model_bin, (char **)argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	read_back(ofd, out_text, sizeof(out_text));
	read_back(efd, err_text, sizeof(err_text));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

#define RUN(...) run_argv((const char *const[]){__VA_ARGS__, NULL})
#define RUN_OK(...)                                                            \
	do {                                                                   \
		int ret_ = RUN(__VA_ARGS__);                                   \
		if (ret_ != 0)                                                 \
			fail_msg("o1model exit %d: %s", ret_, err_text);       \
	} while (0)

static struct o1_model *open_model(const char *name)
{
	char path[256];
	struct o1_model *m = NULL;
	int err;

	snprintf(path, sizeof(path), "%s/%s", work, name);
	err = o1_model_open(path, &m);
	if (err)
		fail_msg("open %s: %d", path, err);
	return m;
}

static void assert_same_desc(const struct o1_model_desc *a,
			     const struct o1_model_desc *b)
{
	o1_test_assert_desc_equal(a, b);
	assert_int_equal(a->arch, b->arch);
}

static void assert_same_ids(const struct o1_model_desc *a,
			    const struct o1_model_desc *b)
{
	assert_int_equal(a->bos_id, b->bos_id);
	assert_int_equal(a->eos_id, b->eos_id);
}

/* Every tensor of A is in B with the same dtype, shape and bytes, and
 * neither stores Q/K interleaved. */
static void assert_same_bytes(const struct o1_model *a,
			      const struct o1_model *b)
{
	o1_test_assert_tensors_identical(a, b);
	for (uint32_t i = 0; i < a->n_tensors; i++)
		assert_false(a->tensors[i].qk_interleaved);
}

/* Every tensor of A reads as the same floats from B. */
static void assert_same_floats(const struct o1_model *a,
			       const struct o1_model *b)
{
	assert_int_equal(a->n_tensors, b->n_tensors);
	for (uint32_t i = 0; i < a->n_tensors; i++) {
		const struct o1_tensor *x = &a->tensors[i];
		const struct o1_tensor *y =
		    o1_model_tensor(b, x->role, x->layer);
		uint64_t n = o1_tensor_elements(x);
		float *fx, *fy;

		assert_non_null(y);
		assert_int_equal(o1_tensor_elements(y), n);
		fx = o1_test_tensor_f32(a, x);
		fy = o1_test_tensor_f32(b, y);
		if (memcmp(fx, fy, n * sizeof(float)) != 0)
			fail_msg("tensor %s layer %d reads differently",
				 o1_tensor_role_name(x->role), x->layer);
		free(fx);
		free(fy);
	}
}

static cJSON *info_json(const char *path)
{
	cJSON *j;

	RUN_OK("info", "--json", path);
	j = cJSON_Parse(out_text);
	if (!j)
		fail_msg("info --json %s: not JSON: %s", path, out_text);
	return j;
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v))
		fail_msg("no number '%s'", key);
	return v->valuedouble;
}

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsString(v))
		fail_msg("no string '%s'", key);
	return v->valuestring;
}

static bool flag(const cJSON *o, const char *key)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static const cJSON *obj(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsObject(v))
		fail_msg("no object '%s'", key);
	return v;
}

static const char *const archs[] = {"llama", "qwen2", "mistral"};
static const char *const dtypes[] = {"f32", "f16", "bf16"};

static void test_make_then_info(void **state)
{
	char out[64];

	(void)state;
	for (int a = 0; a < 3; a++)
		for (int gguf = 0; gguf < 2; gguf++) {
			bool qwen = a == 1;
			cJSON *j;

			snprintf(out, sizeof(out), "info-%s%s", archs[a],
				 gguf ? ".gguf" : "");
			RUN_OK("make", "--arch", archs[a], "--preset", "tiny",
			       "--seed", "3", "--dtype", "f16", "--out", out);
			j = info_json(out);
			/* llama.cpp writes mistral models as "llama" */
			assert_string_equal(str(j, "arch"), gguf && a == 2
								? "llama"
								: archs[a]);
			assert_int_equal(num(j, "n_layers"), 2);
			assert_int_equal(num(j, "dim"), 64);
			assert_int_equal(num(j, "n_heads"), 4);
			assert_int_equal(num(j, "n_kv_heads"), 2);
			assert_int_equal(num(j, "head_dim"), 16);
			assert_int_equal(num(j, "ffn_dim"), 128);
			assert_int_equal(flag(j, "qkv_bias"), qwen);
			assert_int_equal(flag(j, "tied_embeddings"), qwen);
			assert_int_equal(num(obj(j, "tensors"), "count"),
					 2 + 2 * (9 + 3 * qwen) + !qwen);
			assert_int_equal(num(obj(j, "vocab"), "n_tokens"),
					 num(j, "vocab_size"));
			assert_string_equal(str(obj(j, "vocab"), "pre"),
					    "gpt2");
			assert_string_equal(
			    str(obj(j, "vocab"), "chat_template"), "chatml");
			assert_string_equal(str(obj(j, "vocab"), "eos"),
					    "<|im_end|>");
			cJSON_Delete(j);
			RUN_OK("info", out);
			assert_non_null(strstr(out_text, "chat:       chatml"));
		}
}

/* The same random model as GGUF and as safetensors reads back the same. */
static void test_gguf_matches_safetensors(void **state)
{
	(void)state;
	for (int a = 0; a < 2; a++) {
		char g[64], h[64];
		struct o1_model *mg, *mh;

		snprintf(g, sizeof(g), "same-%s.gguf", archs[a]);
		snprintf(h, sizeof(h), "same-%s", archs[a]);
		RUN_OK("make", "--arch", archs[a], "--preset", "tiny", "--seed",
		       "5", "--dtype", "bf16", "--out", g);
		RUN_OK("make", "--arch", archs[a], "--preset", "tiny", "--seed",
		       "5", "--dtype", "bf16", "--out", h);
		mg = open_model(g);
		mh = open_model(h);
		assert_same_desc(&mg->desc, &mh->desc);
		assert_same_ids(&mg->desc, &mh->desc);
		assert_same_floats(mh, mg);
		o1_test_assert_vocab_equal(mh->vocab, mg->vocab);
		o1_model_close(mg);
		o1_model_close(mh);
	}
}

/* Raw bytes of WQ layer 0 in the GGUF differ from the HF ones exactly when
 * llama.cpp's Q/K permutation applies (llama), so it is exercised. */
static void check_qk_storage(const struct o1_model *hf,
			     const struct o1_model *gg, bool permuted)
{
	const struct o1_tensor *a = o1_model_tensor(hf, O1_T_WQ, 0);
	const struct o1_tensor *b = o1_model_tensor(gg, O1_T_WQ, 0);

	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->dtype, b->dtype);
	assert_int_equal(b->qk_interleaved, permuted);
	assert_int_equal(memcmp(a->data, b->data, a->n_bytes) != 0, permuted);
}

static void round_trip(const char *arch, const char *dtype)
{
	char src[64], mid[64], back[64];
	struct o1_model *ms, *mm, *mb;

	snprintf(src, sizeof(src), "rt-%s-%s", arch, dtype);
	snprintf(mid, sizeof(mid), "rt-%s-%s.gguf", arch, dtype);
	snprintf(back, sizeof(back), "rt-%s-%s-back", arch, dtype);
	RUN_OK("make", "--arch", arch, "--preset", "tiny", "--seed", "11",
	       "--dtype", dtype, "--format", "safetensors", "--out", src);
	RUN_OK("convert", src, mid, "--format", "gguf");
	RUN_OK("convert", mid, back);
	ms = open_model(src);
	mm = open_model(mid);
	mb = open_model(back);
	check_qk_storage(ms, mm, strcmp(arch, "qwen2") != 0);
	assert_same_desc(&ms->desc, &mm->desc);
	assert_same_desc(&ms->desc, &mb->desc);
	assert_same_ids(&ms->desc, &mb->desc);
	assert_same_bytes(ms, mb);
	o1_test_assert_vocab_equal(ms->vocab, mb->vocab);
	o1_model_close(ms);
	o1_model_close(mm);
	o1_model_close(mb);
}

static void test_round_trip(void **state)
{
	(void)state;
	for (int a = 0; a < 2; a++)
		for (int d = 0; d < 3; d++)
			round_trip(archs[a], dtypes[d]);
}

static void test_convert_dtype(void **state)
{
	struct o1_model *m;

	(void)state;
	RUN_OK("make", "--preset", "tiny", "--seed", "2", "--out", "cd.gguf");
	RUN_OK("convert", "cd.gguf", "cd-bf16", "--dtype", "bf16");
	m = open_model("cd-bf16");
	assert_int_equal(o1_model_tensor(m, O1_T_WQ, 1)->dtype, O1_DTYPE_BF16);
	o1_model_close(m);
}

static bool files_equal(const char *a, const char *b)
{
	char pa[256], pb[256], *da, *db;
	size_t na, nb;
	bool same;

	snprintf(pa, sizeof(pa), "%s/%s", work, a);
	snprintf(pb, sizeof(pb), "%s/%s", work, b);
	da = o1_test_file_read(pa, &na);
	db = o1_test_file_read(pb, &nb);
	same = na == nb && memcmp(da, db, na) == 0;
	free(da);
	free(db);
	return same;
}

static void test_determinism(void **state)
{
	(void)state;
	RUN_OK("make", "--preset", "tiny", "--seed", "7", "--out", "d1.gguf");
	RUN_OK("make", "--preset", "tiny", "--seed", "7", "--out", "d2.gguf");
	RUN_OK("make", "--preset", "tiny", "--seed", "8", "--out", "d3.gguf");
	assert_true(files_equal("d1.gguf", "d2.gguf"));
	assert_false(files_equal("d1.gguf", "d3.gguf"));
	RUN_OK("make", "--arch", "qwen2", "--preset", "tiny", "--seed", "7",
	       "--dtype", "bf16", "--out", "h1");
	RUN_OK("make", "--arch", "qwen2", "--preset", "tiny", "--seed", "7",
	       "--dtype", "bf16", "--out", "h2");
	RUN_OK("make", "--arch", "qwen2", "--preset", "tiny", "--seed", "9",
	       "--dtype", "bf16", "--out", "h3");
	assert_true(
	    files_equal("h1/model.safetensors", "h2/model.safetensors"));
	assert_true(files_equal("h1/tokenizer.json", "h2/tokenizer.json"));
	assert_false(
	    files_equal("h1/model.safetensors", "h3/model.safetensors"));
}

/* make fills tensors on every CPU: the bytes do not depend on --threads
 * (1, 3, 8 or the default), in GGUF f32 and safetensors bf16. */
static void test_make_threads(void **state)
{
	static const char *const threads[] = {"1", "3", "8"};
	char out[32], ref[32];

	(void)state;
	RUN_OK("make", "--preset", "tiny", "--layers", "9", "--seed", "3",
	       "--out", "thr.gguf");
	RUN_OK("make", "--preset", "tiny", "--layers", "9", "--seed", "3",
	       "--dtype", "bf16", "--out", "thr");
	for (size_t i = 0; i < sizeof(threads) / sizeof(threads[0]); i++) {
		snprintf(out, sizeof(out), "thr%s.gguf", threads[i]);
		RUN_OK("make", "--preset", "tiny", "--layers", "9", "--seed",
		       "3", "--threads", threads[i], "--out", out);
		assert_true(files_equal("thr.gguf", out));
		snprintf(out, sizeof(out), "thr%s", threads[i]);
		RUN_OK("make", "--preset", "tiny", "--layers", "9", "--seed",
		       "3", "--dtype", "bf16", "--threads", threads[i],
		       "--out", out);
		snprintf(out, sizeof(out), "thr%s/model.safetensors",
			 threads[i]);
		snprintf(ref, sizeof(ref), "thr/model.safetensors");
		assert_true(files_equal(ref, out));
	}
}

static void test_vocab_padding(void **state)
{
	struct o1_model *m;
	char last[32];
	cJSON *j;
	uint32_t n;

	(void)state;
	RUN_OK("make", "--preset", "tiny", "--vocab", "600", "--seed", "1",
	       "--out", "pad.gguf");
	j = info_json("pad.gguf");
	assert_int_equal(num(j, "vocab_size"), 600);
	assert_int_equal(num(obj(j, "vocab"), "n_tokens"), 600);
	n = 600 - (uint32_t)num(obj(j, "vocab"), "n_unused");
	cJSON_Delete(j);
	m = open_model("pad.gguf");
	snprintf(last, sizeof(last), "<|unused_%u|>", 599 - n);
	assert_string_equal(m->vocab->tokens[n], "<|unused_0|>");
	assert_string_equal(m->vocab->tokens[599], last);
	assert_int_equal(m->vocab->types[599], O1_TOKEN_UNUSED);
	assert_int_equal(m->vocab->types[n - 1], O1_TOKEN_CONTROL);
	o1_model_close(m);
}

/* A real preset's shapes, with one layer and a small vocabulary. */
static void test_presets(void **state)
{
	cJSON *j;

	(void)state;
	RUN_OK("make", "--preset", "qwen2.5-0.5b", "--layers", "1", "--vocab",
	       "1000", "--dtype", "bf16", "--out", "q05.gguf");
	j = info_json("q05.gguf");
	assert_string_equal(str(j, "arch"), "qwen2");
	assert_int_equal(num(j, "dim"), 896);
	assert_int_equal(num(j, "n_heads"), 14);
	assert_int_equal(num(j, "n_kv_heads"), 2);
	assert_int_equal(num(j, "head_dim"), 64);
	assert_int_equal(num(j, "ffn_dim"), 4864);
	assert_int_equal(num(j, "max_context_tokens"), 32768);
	assert_true(num(j, "norm_eps") == 1e-6);
	assert_true(num(obj(j, "rope"), "theta") == 1e6);
	assert_true(flag(j, "tied_embeddings"));
	assert_true(flag(j, "qkv_bias"));
	cJSON_Delete(j);
	RUN_OK("make", "--preset", "llama3.2-1b", "--layers", "1", "--vocab",
	       "600", "--ctx", "4096", "--dtype", "bf16", "--out", "l1b");
	j = info_json("l1b");
	assert_int_equal(num(j, "dim"), 2048);
	assert_int_equal(num(j, "n_heads"), 32);
	assert_int_equal(num(j, "n_kv_heads"), 8);
	assert_int_equal(num(j, "ffn_dim"), 8192);
	assert_int_equal(num(j, "max_context_tokens"), 4096);
	assert_true(num(obj(j, "rope"), "theta") == 5e5);
	assert_string_equal(str(obj(j, "rope"), "scaling"), "llama3");
	assert_true(num(obj(j, "rope"), "factor") == 32);
	assert_true(num(obj(j, "rope"), "high_freq_factor") == 4);
	assert_int_equal(num(obj(j, "rope"), "original_max_positions"), 8192);
	assert_true(flag(j, "tied_embeddings"));
	assert_false(flag(j, "qkv_bias"));
	cJSON_Delete(j);
}

struct bad_args {
	const char *args[12];
	int code;
	const char *expect;
};

static const struct bad_args bad[] = {
    {{"make", "--out", "x.gguf"}, 2, "--preset and --out are required"},
    {{"make", "--preset", "tiny"}, 2, "--preset and --out are required"},
    {{"make", "--preset", "huge", "--out", "x.gguf"}, 2, "unknown preset"},
    {{"make", "--preset", "tiny", "--dtype", "q8_0", "--out", "x.gguf"},
     2,
     "expected f32|f16|bf16"},
    {{"make", "--preset", "tiny", "--layers", "0", "--out", "x.gguf"},
     2,
     "--layers '0'"},
    {{"make", "--preset", "tiny", "--seed", "-1", "--out", "x.gguf"},
     2,
     "--seed '-1'"},
    {{"make", "--preset", "tiny", "--layers", "2x", "--out", "x.gguf"},
     2,
     "expected a whole number"},
    {{"make", "--preset", "tiny", "--arch", "gpt2", "--out", "x.gguf"},
     2,
     "--arch 'gpt2'"},
    {{"make", "--preset", "tiny", "--format", "onnx", "--out", "x"},
     2,
     "expected gguf|safetensors"},
    {{"make", "--preset", "tiny", "--vocab", "10", "--out", "x.gguf"},
     2,
     "smaller than the tokenizer"},
    {{"make", "--preset", "tiny", "--threads", "0", "--out", "x.gguf"},
     2,
     "--threads '0'"},
    {{"make", "--preset", "tiny", "--bogus", "--out", "x.gguf"},
     2,
     "usage: o1model make"},
    {{"make", "--preset", "tiny", "--out", "x.gguf", "extra"},
     2,
     "unexpected argument"},
    {{"make", "--preset", "tiny", "--out", "no/such/dir/x.gguf"},
     1,
     "no/such/dir"},
    {{"convert", "only-one"}, 2, "expected IN and OUT"},
    {{"convert", "a.gguf", "b", "--dtype", "q4_0"}, 2, "--dtype 'q4_0'"},
    {{"convert", "missing.gguf", "b"}, 1, "missing.gguf"},
    {{"info"}, 2, "expected one PATH"},
    {{"info", "--yaml", "x"}, 2, "usage: o1model info"},
    {{"info", "missing.gguf"}, 1, "missing.gguf"},
    {{"chat-render", "t.jinja"}, 2, "--messages FILE"},
    {{"chat-render", "--messages", "m.json"}, 2, "--messages FILE"},
    {{"chat-render", "t.jinja", "--messages", "m.json", "--var", "x"},
     2,
     "NAME=JSON"},
    {{"chat-render", "missing.jinja", "--messages", "m.json"},
     1,
     "missing.jinja"},
    {{"quant", "q5_k", "--cols", "256", "a", "b"}, 2, "type 'q5_k'"},
    {{"quant", "q4_k", "--cols", "1000", "a", "b"}, 2, "not a multiple"},
    {{"quant", "q8_0", "a", "b"}, 2, "expected TYPE, --cols N"},
    {{"dequant", "q8_0", "--cols", "0", "a", "b"}, 2, "--cols '0'"},
    {{"dequant", "q8_0", "--cols", "32", "missing.bin", "b"},
     1,
     "missing.bin"},
};

static void test_bad_arguments(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = run_argv(bad[i].args);

		if (ret != bad[i].code || !strstr(err_text, bad[i].expect))
			fail_msg("case %zu (%s %s): exit %d, stderr '%s'", i,
				 bad[i].args[0], bad[i].args[1], ret, err_text);
	}
}

/* Every command `o1model help` lists has its entry in the man page
 * (docs/man/o1model.1.scd), and convert's page names --quantize. */
static void test_man_page_lists_commands(void **state)
{
	static const char *const help[] = {"help", NULL};
	char *page, *line, *save = NULL, want[64];
	size_t n;
	int listed = 0;

	(void)state;
	assert_int_equal(run_argv(help), 0);
	page = o1_test_file_read(O1_SOURCE_DIR "/docs/man/o1model.1.scd", &n);
	assert_non_null(page);
	for (line = strtok_r(out_text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char cmd[32];

		if (strncmp(line, "  ", 2) || sscanf(line, " %31s", cmd) != 1 ||
		    !strcmp(cmd, "help"))
			continue;
		snprintf(want, sizeof(want), "\n*%s*", cmd);
		if (!strstr(page, want))
			fail_msg("o1model.1 has no entry for '%s'", cmd);
		listed++;
	}
	assert_true(listed >= 10);
	assert_non_null(strstr(page, "*--quantize*"));
	free(page);
}

/* quant / dequant reproduce llama.cpp's vectors byte for byte (see
 * tests/kernels/test_quant.c for the counts behind "identical"). */
static void assert_file_is(const char *name, const char *ref)
{
	char path[512], *a, *b;
	size_t na, nb;

	snprintf(path, sizeof(path), "%s/%s", work, name);
	a = o1_test_file_read(path, &na);
	b = o1_test_file_read(ref, &nb);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	free(a);
	free(b);
}

static void test_quant_vectors(void **state)
{
	static const char *const types[] = {"q8_0", "q4_0", "q5_0", "q4_k",
					    "q6_k"};
	const char *shared = O1_SHARED_DIR "/testdata/quant";
	char in[512], ref[512];

	(void)state;
	if (access(O1_SHARED_DIR "/testdata/quant/input.f32", R_OK) != 0)
		skip();
	snprintf(in, sizeof(in), "%s/input.f32", shared);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		/* Q5_0's vectors are ours (tests/data/quant/README) */
		const char *dir = strcmp(types[i], "q5_0")
				      ? shared
				      : O1_SOURCE_DIR "/tests/data/quant";

		RUN_OK("quant", types[i], "--cols", "1024", in, "q.bin");
		snprintf(ref, sizeof(ref), "%s/%s.bin", dir, types[i]);
		assert_file_is("q.bin", ref);
		RUN_OK("dequant", types[i], "--cols", "1024", ref, "q.f32");
		snprintf(ref, sizeof(ref), "%s/%s.dequant.f32", dir, types[i]);
		assert_file_is("q.f32", ref);
	}
}

/* Part of a row, or a NaN, is refused, and no output is left behind. */
static void test_quant_bad_files(void **state)
{
	float row[64] = {0};
	char path[512];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/part.f32", work);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(row, sizeof(float), 40, f), 40);
	fclose(f);
	assert_int_equal(RUN("quant", "q8_0", "--cols", "32", "part.f32",
			     "part.bin"),
			 1);
	assert_non_null(strstr(err_text, "not a whole number of rows"));
	assert_int_equal(RUN("dequant", "q8_0", "--cols", "32", "part.f32",
			     "part.out"),
			 1);
	assert_non_null(strstr(err_text, "rows of 34 bytes"));
	row[35] = NAN;
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(row, sizeof(float), 64, f), 64);
	fclose(f);
	assert_int_equal(RUN("quant", "q4_0", "--cols", "32", "part.f32",
			     "part.bin"),
			 1);
	assert_non_null(strstr(err_text, "row 1 holds a NaN"));
	snprintf(path, sizeof(path), "%s/part.bin", work);
	assert_int_equal(access(path, F_OK), -1);
}

/* test-vectors: an input that is not a readable file is an error naming
 * it (exit 1); a missing path skips (exit 77). */
static void test_vectors_bad_input(void **state)
{
	char dir[512];

	(void)state;
	RUN_OK("make", "--preset", "tiny", "--out", "tv.gguf");
	snprintf(dir, sizeof(dir), "%s/tv-dir.inp", work);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(
	    RUN("test-vectors", "tv.gguf", "tv-dir.inp", "tv.gguf"), 1);
	assert_non_null(strstr(err_text, "tv-dir.inp: is a directory"));
	assert_int_equal(
	    RUN("test-vectors", "tv.gguf", "tv.gguf", "tv-dir.inp"), 1);
	assert_non_null(strstr(err_text, "tv-dir.inp: is a directory"));
	assert_int_equal(
	    RUN("test-vectors", "tv.gguf", "tv-none.inp", "tv-dir.inp"), 77);
}

/* The shared HF test folders go to GGUF and back bit for bit. */
static void test_shared_hf_round_trip(void **state)
{
	static const char *const names[] = {"llama-tiny", "qwen2-tiny"};
	char src[512], mid[64], back[64];
	struct o1_model *ms, *mb;

	(void)state;
	snprintf(src, sizeof(src), "%s/testdata/hf/llama-tiny/config.json",
		 O1_SHARED_DIR);
	if (access(src, R_OK) != 0)
		skip();
	for (int i = 0; i < 2; i++) {
		snprintf(src, sizeof(src), "%s/testdata/hf/%s", O1_SHARED_DIR,
			 names[i]);
		snprintf(mid, sizeof(mid), "shared-%s.gguf", names[i]);
		snprintf(back, sizeof(back), "shared-%s-back", names[i]);
		RUN_OK("convert", src, mid);
		RUN_OK("convert", mid, back);
		assert_int_equal(o1_model_open(src, &ms), 0);
		mb = open_model(back);
		/* no tokenizer here, so GGUF keeps no BOS/EOS ids */
		assert_same_desc(&ms->desc, &mb->desc);
		assert_same_bytes(ms, mb);
		o1_model_close(ms);
		o1_model_close(mb);
	}
}

/* llama.cpp's own GGUF goes to safetensors and back: same description and
 * tokens, matrices read back as the same floats (F16 kept as F16). */
static void test_llama_cpp_gguf_round_trip(void **state)
{
	char src[512];
	struct o1_model *ms, *mb;

	(void)state;
	snprintf(src, sizeof(src),
		 "%s/testdata/models/llama-2-tiny-random.gguf", O1_SHARED_DIR);
	if (access(src, R_OK) != 0)
		skip();
	RUN_OK("convert", src, "l2-hf");
	RUN_OK("convert", "l2-hf", "l2-back.gguf");
	assert_int_equal(o1_model_open(src, &ms), 0);
	mb = open_model("l2-back.gguf");
	assert_same_desc(&ms->desc, &mb->desc);
	assert_same_ids(&ms->desc, &mb->desc);
	for (uint32_t i = 0; i < ms->n_tensors; i++) {
		const struct o1_tensor *x = &ms->tensors[i];
		const struct o1_tensor *y =
		    o1_model_tensor(mb, x->role, x->layer);

		assert_non_null(y);
		if (x->n_dims == 2) {
			assert_int_equal(x->dtype, y->dtype);
			assert_memory_equal(x->data, y->data, x->n_bytes);
		}
	}
	assert_int_equal(ms->vocab->n_tokens, mb->vocab->n_tokens);
	for (uint32_t i = 0; i < ms->vocab->n_tokens; i++)
		assert_string_equal(ms->vocab->tokens[i], mb->vocab->tokens[i]);
	o1_model_close(ms);
	o1_model_close(mb);
}

/* Q8_0 blocks of N floats (a multiple of 32): an f16 scale, 32 int8. */
static void quantize_q8_0(const float *x, uint64_t n, uint8_t *out)
{
	for (uint64_t b = 0; b < n / 32; b++, x += 32, out += 34) {
		float amax = 0, d;
		uint16_t h;

		for (int i = 0; i < 32; i++)
			amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
		d = amax / 127;
		h = o1_f32_to_f16(d);
		memcpy(out, &h, 2);
		for (int i = 0; i < 32; i++)
			out[2 + i] =
			    (uint8_t)(int8_t)(d ? roundf(x[i] / d) : 0);
	}
}

/* Writes PATH: the f32 GGUF SRC with every matrix in Q8_0. */
static void write_q8_copy(const char *src, const char *path)
{
	static const char *const u32_keys[] = {
	    "llama.context_length",	  "llama.embedding_length",
	    "llama.block_count",	  "llama.feed_forward_length",
	    "llama.attention.head_count", "llama.attention.head_count_kv",
	    "llama.rope.dimension_count"};
	struct o1_gguf *g;
	struct o1_gguf_writer *w;
	void *bufs[64];
	uint32_t u;
	float f;

	assert_int_equal(o1_gguf_open(src, &g), 0);
	assert_int_equal(o1_gguf_writer_create(&w), 0);
	assert_int_equal(
	    o1_gguf_writer_set_str(w, "general.architecture", "llama"), 0);
	for (size_t i = 0; i < sizeof(u32_keys) / sizeof(u32_keys[0]); i++) {
		assert_int_equal(o1_gguf_get_u32(g, u32_keys[i], &u), 0);
		assert_int_equal(o1_gguf_writer_set_u32(w, u32_keys[i], u), 0);
	}
	assert_int_equal(
	    o1_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f),
	    0);
	assert_int_equal(o1_gguf_writer_set_f32(
			     w, "llama.attention.layer_norm_rms_epsilon", f),
			 0);
	assert_true(o1_gguf_n_tensors(g) <= 64);
	for (uint64_t i = 0; i < o1_gguf_n_tensors(g); i++) {
		const struct o1_gguf_tensor_info *t = o1_gguf_tensor(g, i);
		uint64_t n = t->ne[0] * (t->n_dims == 2 ? t->ne[1] : 1);
		char name[80];
		bool q = t->n_dims == 2;

		assert_int_equal(t->type, O1_DTYPE_F32);
		snprintf(name, sizeof(name), "%.*s", (int)t->name.len,
			 t->name.ptr);
		bufs[i] = malloc(q ? n / 32 * 34 : n * 4);
		if (q)
			quantize_q8_0(t->data, n, bufs[i]);
		else
			memcpy(bufs[i], t->data, n * 4);
		assert_int_equal(o1_gguf_writer_add_tensor(
				     w, name, q ? O1_DTYPE_Q8_0 : O1_DTYPE_F32,
				     t->n_dims, t->ne, bufs[i],
				     q ? n / 32 * 34 : n * 4),
				 0);
	}
	assert_int_equal(o1_gguf_writer_write(w, path), 0);
	for (uint64_t i = 0; i < o1_gguf_n_tensors(g); i++)
		free(bufs[i]);
	o1_gguf_writer_destroy(w);
	o1_gguf_close(g);
}

/* A quantized source converts to f16 by default: each tensor is the f16
 * rounding of its dequantized values. */
static void test_convert_quantized(void **state)
{
	char src[256], q8[256];
	struct o1_model *mq, *mh;

	(void)state;
	RUN_OK("make", "--preset", "tiny", "--seed", "4", "--out", "f32.gguf");
	snprintf(src, sizeof(src), "%s/f32.gguf", work);
	snprintf(q8, sizeof(q8), "%s/q8.gguf", work);
	write_q8_copy(src, q8);
	RUN_OK("convert", "q8.gguf", "q8-hf");
	assert_non_null(strstr(err_text, "writing f16"));
	mq = open_model("q8.gguf");
	mh = open_model("q8-hf");
	assert_int_equal(o1_model_tensor(mq, O1_T_WQ, 0)->dtype, O1_DTYPE_Q8_0);
	for (uint32_t i = 0; i < mq->n_tensors; i++) {
		const struct o1_tensor *x = &mq->tensors[i];
		const struct o1_tensor *y =
		    o1_model_tensor(mh, x->role, x->layer);
		uint64_t n = o1_tensor_elements(x);
		const uint16_t *h = y->data;
		float *fx;

		assert_int_equal(y->dtype, O1_DTYPE_F16);
		fx = o1_test_tensor_f32(mq, x);
		for (uint64_t k = 0; k < n; k++)
			if (h[k] != o1_f32_to_f16(fx[k]))
				fail_msg("%s layer %d element %llu",
					 o1_tensor_role_name(x->role), x->layer,
					 (unsigned long long)k);
		free(fx);
	}
	o1_model_close(mq);
	o1_model_close(mh);
}

static bool has_key(const struct o1_gguf *g, struct o1_gguf_str k)
{
	char key[256];

	snprintf(key, sizeof(key), "%.*s", (int)k.len, k.ptr);
	return o1_gguf_find_key(g, key) >= 0;
}

/* ne[0] (in_features) of tensor NAME in G. */
static uint64_t ne0(const struct o1_gguf *g, const char *name)
{
	const struct o1_gguf_tensor_info *t = o1_gguf_find_tensor(g, name);

	if (!t)
		fail_msg("tensor %s missing", name);
	return t->ne[0];
}

/* A llama GGUF that o1model makes has every key and tensor name of one
 * llama.cpp wrote (the built-in vocabulary has no unknown token, so
 * tokenizer.ggml.unknown_token_id may be absent), in ggml's dim order. */
static void test_gguf_follows_llama_cpp(void **state)
{
	char ref_path[512];
	struct o1_gguf *ref, *ours;
	struct o1_gguf_str k;
	char path[256];

	(void)state;
	snprintf(ref_path, sizeof(ref_path),
		 "%s/testdata/models/llama-2-tiny-random.gguf", O1_SHARED_DIR);
	if (access(ref_path, R_OK) != 0)
		skip();
	RUN_OK("make", "--preset", "tiny", "--layers", "1", "--out",
	       "like-llama-cpp.gguf");
	snprintf(path, sizeof(path), "%s/like-llama-cpp.gguf", work);
	assert_int_equal(o1_gguf_open(ref_path, &ref), 0);
	assert_int_equal(o1_gguf_open(path, &ours), 0);
	for (uint64_t i = 0; i < o1_gguf_n_kv(ref); i++) {
		k = o1_gguf_key(ref, i);
		if (!has_key(ours, k) &&
		    strncmp(k.ptr, "tokenizer.ggml.unknown_token_id", k.len))
			fail_msg("key %.*s missing", (int)k.len, k.ptr);
	}
	for (uint64_t i = 0; i < o1_gguf_n_tensors(ref); i++) {
		const struct o1_gguf_tensor_info *t = o1_gguf_tensor(ref, i);
		char name[80];
		const struct o1_gguf_tensor_info *u;

		snprintf(name, sizeof(name), "%.*s", (int)t->name.len,
			 t->name.ptr);
		u = o1_gguf_find_tensor(ours, name);
		if (!u || u->n_dims != t->n_dims)
			fail_msg("tensor %s missing or not %u-D", name,
				 t->n_dims);
	}
	assert_int_equal(o1_gguf_n_tensors(ours), o1_gguf_n_tensors(ref));
	assert_int_equal(ne0(ref, "token_embd.weight"), 8);
	assert_int_equal(ne0(ref, "blk.0.ffn_down.weight"), 32);
	assert_int_equal(ne0(ours, "token_embd.weight"), 64);
	assert_int_equal(ne0(ours, "blk.0.ffn_down.weight"), 128);
	assert_int_equal(ne0(ours, "blk.0.ffn_gate.weight"), 64);
	o1_gguf_close(ref);
	o1_gguf_close(ours);
}

/* --tokenizer copies a vocabulary from a GGUF file or a tokenizer.json. */
static void test_tokenizer_option(void **state)
{
	char gguf[512], json[512];
	cJSON *j;

	(void)state;
	snprintf(gguf, sizeof(gguf),
		 "%s/testdata/models/llama-2-tiny-random.gguf", O1_SHARED_DIR);
	snprintf(json, sizeof(json), "%s/testdata/vocab/gpt-2/tokenizer.json",
		 O1_SHARED_DIR);
	if (access(gguf, R_OK) != 0 || access(json, R_OK) != 0)
		skip();
	RUN_OK("make", "--preset", "tiny", "--tokenizer", gguf, "--out",
	       "tok-spm.gguf");
	j = info_json("tok-spm.gguf");
	assert_string_equal(str(obj(j, "vocab"), "kind"), "spm");
	assert_int_equal(num(obj(j, "vocab"), "n_tokens"), 32000);
	assert_int_equal(num(j, "vocab_size"), 32000);
	assert_string_equal(str(obj(j, "vocab"), "bos"), "<s>");
	cJSON_Delete(j);
	RUN_OK("make", "--preset", "tiny", "--tokenizer", json, "--out",
	       "tok-gpt2");
	j = info_json("tok-gpt2");
	assert_string_equal(str(obj(j, "vocab"), "kind"), "bpe");
	assert_int_equal(num(j, "vocab_size"), 50257);
	assert_int_equal(num(obj(j, "vocab"), "n_merges"), 50000);
	cJSON_Delete(j);
}

/* Writes TEXT to NAME in the work folder. */
static void put_file(const char *name, const char *text)
{
	o1_test_file_put(work, name, text);
}

/* chat-render prints the rendering as is; template errors go to stderr
 * with exit 1, the raised ones prefixed "TemplateError: ". */
static void test_chat_render(void **state)
{
	(void)state;
	put_file("t.jinja", "{{ bos_token }}{% for m in messages %}[{{ m.role "
			    "}}:{{ m.content }}]{% endfor %}{% if "
			    "add_generation_prompt %}<gen>{% endif %}{{ x }}"
			    "{{ tools|length if tools else '' }}\n");
	put_file("m.json", "[{\"role\": \"user\", \"content\": \"hi\"}]");
	put_file("tools.json", "[{\"type\": \"function\"}]");
	RUN_OK("chat-render", "t.jinja", "--messages", "m.json");
	assert_string_equal(out_text, "[user:hi]<gen>");
	RUN_OK("chat-render", "t.jinja", "--messages", "m.json",
	       "--no-generation-prompt", "--bos-token", "<s>", "--var",
	       "x=\"!\"", "--tools", "tools.json");
	assert_string_equal(out_text, "<s>[user:hi]!1");
	put_file("r.jinja", "{{ raise_exception('no ' ~ messages[0].role) }}");
	assert_int_equal(RUN("chat-render", "r.jinja", "--messages", "m.json"),
			 1);
	assert_string_equal(out_text, "");
	assert_non_null(strstr(err_text, "TemplateError: r.jinja:1:"));
	assert_non_null(strstr(err_text, "no user"));
	put_file("s.jinja", "ok\n{% if %}");
	assert_int_equal(RUN("chat-render", "s.jinja", "--messages", "m.json"),
			 1);
	assert_non_null(strstr(err_text, "s.jinja:2:7:"));
	put_file("bad.json", "[");
	assert_int_equal(
	    RUN("chat-render", "t.jinja", "--messages", "bad.json"), 1);
	assert_non_null(strstr(err_text, "not JSON"));
}

/* One rendering of ../shared/testdata/chat through o1model chat-render:
 * the same text as transformers, or the same raised message. */
static bool render_matches(const cJSON *r, const char *tmpl_file)
{
	const cJSON *tools = cJSON_GetObjectItem(r, "tools");
	const char *want =
	    cJSON_GetStringValue(cJSON_GetObjectItem(r, "rendered"));
	const char *raised =
	    cJSON_GetStringValue(cJSON_GetObjectItem(r, "error"));
	char *msgs = cJSON_PrintUnformatted(cJSON_GetObjectItem(r, "messages"));
	char *tl = cJSON_IsArray(tools) ? cJSON_PrintUnformatted(tools) : NULL;
	const char *args[16] = {
	    "chat-render", tmpl_file, "--messages", "m.json", "--bos-token",
	    cJSON_GetStringValue(cJSON_GetObjectItem(r, "bos_token")),
	    "--eos-token",
	    cJSON_GetStringValue(cJSON_GetObjectItem(r, "eos_token"))};
	int n = 8, code;

	put_file("m.json", msgs);
	if (tl) {
		put_file("tools.json", tl);
		args[n++] = "--tools";
		args[n++] = "tools.json";
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItem(r, "add_generation_prompt")))
		args[n++] = "--no-generation-prompt";
	code = run_argv(args);
	free(msgs);
	free(tl);
	if (raised)
		return code == 1 && !strncmp(raised, "TemplateError: ", 15) &&
		       !strncmp(err_text, "TemplateError: ", 15) &&
		       strstr(err_text, raised + 15);
	return code == 0 && want && !strcmp(out_text, want);
}

/* Every rendering of ../shared/testdata/chat replayed through the CLI. */
static void test_chat_render_renderings(void **state)
{
	const char *dir = O1_SHARED_DIR "/testdata/chat";
	char path[512], name[128], file[160], *text, *line, *save = NULL;
	cJSON *tmpls, *it;
	size_t len, total = 0, same = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/renderings.jsonl", dir);
	if (access(path, R_OK))
		skip();
	snprintf(path, sizeof(path), "%s/templates.json", dir);
	text = o1_test_file_read(path, &len);
	tmpls = cJSON_Parse(text);
	free(text);
	/* the n-th template of a name is NAME#n, written to NAME_n.jinja */
	cJSON_ArrayForEach(it, tmpls)
	{
		const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
		int k = 1;

		for (const cJSON *p = tmpls->child; p != it; p = p->next)
			k += !strcmp(nm, cJSON_GetStringValue(
					     cJSON_GetObjectItem(p, "name")));
		snprintf(file, sizeof(file), "%s_%d.jinja", nm, k);
		put_file(file, cJSON_GetStringValue(
				   cJSON_GetObjectItem(it, "template")));
	}
	cJSON_Delete(tmpls);
	snprintf(path, sizeof(path), "%s/renderings.jsonl", dir);
	text = o1_test_file_read(path, &len);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		cJSON *r = cJSON_Parse(line);
		const char *t =
		    cJSON_GetStringValue(cJSON_GetObjectItem(r, "template"));
		const char *hash = strchr(t, '#');

		snprintf(name, sizeof(name), "%.*s", hash ? (int)(hash - t)
							  : (int)strlen(t),
			 t);
		snprintf(file, sizeof(file), "%s_%s.jinja", name,
			 hash ? hash + 1 : "1");
		total++;
		if (render_matches(r, file))
			same++;
		else
			print_error("chat-render differs: %s %s\n", t,
				    cJSON_GetStringValue(
					cJSON_GetObjectItem(r, "case")));
		cJSON_Delete(r);
	}
	free(text);
	print_message("chat-render: %zu of %zu renderings identical\n", same,
		      total);
	assert_int_equal(total, 666);
	assert_int_equal(same, total);
}

static int teardown(void **state)
{
	(void)state;
	if (!getenv("O1_KEEP_TEST_FILES"))
		o1_test_dir_remove(work);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_make_then_info),
	    cmocka_unit_test(test_gguf_matches_safetensors),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_convert_dtype),
	    cmocka_unit_test(test_convert_quantized),
	    cmocka_unit_test(test_determinism),
	    cmocka_unit_test(test_make_threads),
	    cmocka_unit_test(test_vocab_padding),
	    cmocka_unit_test(test_presets),
	    cmocka_unit_test(test_bad_arguments),
	    cmocka_unit_test(test_man_page_lists_commands),
	    cmocka_unit_test(test_chat_render),
	    cmocka_unit_test(test_chat_render_renderings),
	    cmocka_unit_test(test_vectors_bad_input),
	    cmocka_unit_test(test_quant_vectors),
	    cmocka_unit_test(test_quant_bad_files),
	    cmocka_unit_test(test_shared_hf_round_trip),
	    cmocka_unit_test(test_llama_cpp_gguf_round_trip),
	    cmocka_unit_test(test_tokenizer_option),
	    cmocka_unit_test(test_gguf_follows_llama_cpp),
	};
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH-TO-o1model\n", argv[0]);
		return 2;
	}
	o1model_bin = realpath(argv[1], NULL); /* the runs chdir first */
	if (!o1model_bin) {
		perror(argv[1]);
		return 1;
	}
	strcpy(work, "/tmp/o1-test-o1model-XXXXXX");
	if (!mkdtemp(work)) {
		perror("mkdtemp");
		return 1;
	}
	ret = cmocka_run_group_tests(tests, NULL, teardown);
	free(o1model_bin);
	return ret;
}
