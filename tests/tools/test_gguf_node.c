/* Files o1model convert --quantize writes, read by Hugging Face's GGUF
 * parser (@huggingface/gguf, pinned in tests/tools/gguf_node; argv:
 * o1model, that folder, a build folder for node_modules): every tensor's
 * name, type, shape and offset, the data section's start and llama.cpp's
 * general.file_type and quantization_version are what o1d's own reader
 * finds. Exit 77 (skipped) when node or npm is missing or the registry
 * cannot be reached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/gguf.h"
#include "model/model.h"
#include "tests/backend/mem_model.h"
#include "tests/common/test_util.h"

static const char *o1model_bin, *node_src, *node_dir;
static char work[64];
static char out[1 << 16];

/* Installs the pinned package under node_dir; 0, or 77 to skip. */
static int npm_install(void)
{
	char cmd[2048];

	if (system("command -v node >/dev/null && command -v npm >/dev/null")) {
		fprintf(stderr, "skipped: node or npm is not installed\n");
		return 77;
	}
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s && cp %s/package.json %s/package-lock.json "
		 "%s/read_gguf.mjs %s/ && cd %s && (grep -q '\"version\": "
		 "\"0.4.6\"' node_modules/@huggingface/gguf/package.json "
		 "2>/dev/null || timeout 180 npm install --no-audit --no-fund "
		 "--prefer-offline --fetch-retries=1 --fetch-timeout=20000 "
		 "--loglevel=error 2>&1)",
		 node_dir, node_src, node_src, node_src, node_dir, node_dir);
	if (o1_test_run(cmd, out, sizeof(out)) != 0) {
		fprintf(stderr, "skipped: npm install failed:\n%s\n", out);
		return 77;
	}
	return 0;
}

/* What o1d's reader finds in PATH, in read_gguf.mjs's line format. */
static void expected(const char *path, char *buf, size_t size)
{
	size_t len, n = 0;
	char *img = o1_test_file_read(path, &len);
	const struct o1_gguf_tensor_info *t0;
	struct o1_gguf *g;
	uint32_t v;

	assert_int_equal(o1_gguf_open_memory(img, len, &g), 0);
	t0 = o1_gguf_tensor(g, 0);
	n += (size_t)snprintf(
	    buf + n, size - n, "data %llu\n",
	    (unsigned long long)((const char *)t0->data - img - t0->offset));
	assert_int_equal(o1_gguf_get_u32(g, "general.file_type", &v), 0);
	n +=
	    (size_t)snprintf(buf + n, size - n, "kv general.file_type %u\n", v);
	assert_int_equal(o1_gguf_get_u32(g, "general.quantization_version", &v),
			 0);
	n += (size_t)snprintf(buf + n, size - n,
			      "kv general.quantization_version %u\n", v);
	for (uint64_t i = 0; i < o1_gguf_n_tensors(g); i++) {
		const struct o1_gguf_tensor_info *t = o1_gguf_tensor(g, i);

		n += (size_t)snprintf(buf + n, size - n, "tensor %.*s %u ",
				      (int)t->name.len, t->name.ptr,
				      (unsigned)t->type);
		for (uint32_t d = 0; d < t->n_dims; d++)
			n += (size_t)snprintf(buf + n, size - n, "%s%llu",
					      d ? "," : "",
					      (unsigned long long)t->ne[d]);
		n += (size_t)snprintf(buf + n, size - n, " %llu\n",
				      (unsigned long long)t->offset);
	}
	o1_gguf_close(g);
	free(img);
}

static void check_mix(const char *mix)
{
	char cmd[2048], path[256], *want = malloc(sizeof(out));
	int lines = 0;

	snprintf(cmd, sizeof(cmd),
		 "cd %s && %s convert f32.gguf q.gguf --quantize %s "
		 ">/dev/null && node %s/read_gguf.mjs %s/q.gguf",
		 work, o1model_bin, mix, node_dir, work);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	snprintf(path, sizeof(path), "%s/q.gguf", work);
	expected(path, want, sizeof(out));
	if (strcmp(out, want) != 0)
		fail_msg("%s: @huggingface/gguf read\n%s\no1d reads\n%s", mix,
			 out, want);
	for (char *c = out; *c; c++)
		lines += *c == '\n';
	printf("%s: the %d lines agree\n", mix, lines);
	free(want);
}

static void test_quantized_files(void **state)
{
	struct o1_model_desc d = {.arch = O1_ARCH_LLAMA,
				  .n_layers = 2,
				  .dim = 256,
				  .n_heads = 4,
				  .n_kv_heads = 2,
				  .head_dim = 64,
				  .ffn_dim = 512,
				  .vocab_size = 320,
				  .max_context_tokens = 64,
				  .norm_eps = 1e-5f,
				  .rope = {.theta = 1e4f, .dim = 64},
				  .bos_id = -1,
				  .eos_id = -1};
	static const char *const mixes[] = {"q8_0", "q4_0", "q5_0", "q4_k_m",
					    "q6_k"};
	struct mem_model f;
	char path[256];

	(void)state;
	mem_model_build(&f, &d, 9);
	snprintf(path, sizeof(path), "%s/f32.gguf", work);
	assert_int_equal(o1_model_write_gguf(&f.m, O1_DTYPE_F32, path), 0);
	mem_model_release(&f);
	for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++)
		check_mix(mixes[i]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quantized_files),
	};
	int ret;

	if (argc != 4) {
		fprintf(stderr, "usage: %s O1MODEL NODE-SRC NODE-BUILD\n",
			argv[0]);
		return 2;
	}
	o1model_bin = argv[1];
	node_src = argv[2];
	node_dir = argv[3];
	ret = npm_install();
	if (ret)
		return ret;
	strcpy(work, "/tmp/o1-test-ggufnode-XXXXXX");
	if (!mkdtemp(work))
		return 1;
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	if (!getenv("O1_KEEP_TEST_FILES"))
		o1_test_dir_remove(work);
	return ret;
}
