/* o1model run end to end (the binary is argv[1]): a --prompt on a model
 * o1model make writes, reproducible by seed; then, when ../shared is
 * present, for each reference model in ../shared/testdata/hf, as a folder
 * and after o1model convert to GGUF, --ids-only
 * greedy output equals greedy_new_ids, and --dump-logits --max-tokens 0
 * writes [n_prompt, vocab] float32 logits within 1e-3 x max|ref| of
 * logits.f32; bad arguments exit 2 and failures 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <math.h>

#include "tests/common/test_util.h"

static const char *o1model;

/* The ids of KEY as "a b c" into OUT. */
static void ids_text(const cJSON *root, const char *key, char *out, size_t cap)
{
	const cJSON *e;
	size_t at = 0;

	out[0] = 0;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, key)) at += snprintf(
	    out + at, cap - at, "%s%d", at ? " " : "", (int)e->valuedouble);
}

/* Runs MODEL (a folder or a GGUF) against the reference files in REF. */
static void check_model(const char *model, const char *ref_dir)
{
	char path[600], cmd[2048], prompt[1024], want[1024], got[1024];
	char dump[64];
	size_t len, dlen;
	char *text = NULL;
	cJSON *root;
	float *ref, *logits;
	double mx = 0, worst = 0;

	o1_test_file_make(dump, sizeof(dump), "run");
	snprintf(path, sizeof(path), "%s/reference.json", ref_dir);
	text = o1_test_file_read(path, &len);
	root = cJSON_Parse(text);
	ids_text(root, "greedy_prompt_ids", prompt, sizeof(prompt));
	ids_text(root, "greedy_new_ids", want, sizeof(want));
	snprintf(cmd, sizeof(cmd),
		 "%s run %s --ids '%s' --max-tokens 24 "
		 "--ids-only --page-tokens 3",
		 o1model, model, prompt);
	assert_int_equal(o1_test_run(cmd, got, sizeof(got)), 0);
	got[strcspn(got, "\n")] = 0;
	assert_string_equal(got, want);
	ids_text(root, "prompt_ids", prompt, sizeof(prompt));
	snprintf(cmd, sizeof(cmd),
		 "%s run %s --ids '%s' --max-tokens 0 "
		 "--dump-logits %s >/dev/null",
		 o1model, model, prompt, dump);
	assert_int_equal(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/logits.f32", ref_dir);
	ref = (float *)o1_test_file_read(path, &len);
	logits = (float *)o1_test_file_read(dump, &dlen);
	assert_int_equal(len, dlen);
	for (size_t i = 0; i < len / 4; i++) {
		mx = fmax(mx, fabs(ref[i]));
		worst = fmax(worst, fabs(ref[i] - logits[i]));
	}
	assert_true(worst <= 1e-3 * mx);
	unlink(dump);
	free(ref), free(logits), free(text);
	cJSON_Delete(root);
}

/* Each reference folder as it is, and converted to GGUF by o1model
 * convert (Q/K rows permuted on disk, restored by the loader). */
static void test_reference_models(void **state)
{
	static const char *const names[] = {"llama-tiny", "qwen2-tiny"};
	char dir[512], gguf[64], cmd[1200];

	(void)state;
	o1_test_file_make(gguf, sizeof(gguf), "run_gguf");
	for (int i = 0; i < 2; i++) {
		snprintf(dir, sizeof(dir), O1_SHARED_DIR "/testdata/hf/%s",
			 names[i]);
		check_model(dir, dir);
		snprintf(cmd, sizeof(cmd),
			 "%s convert %s %s.gguf >/dev/null 2>&1", o1model, dir,
			 gguf);
		assert_int_equal(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "%s.gguf", gguf);
		check_model(cmd, dir);
		unlink(cmd);
	}
	unlink(gguf);
}

static int run_status(const char *args)
{
	char cmd[1024];
	int st;

	snprintf(cmd, sizeof(cmd), "%s run %s 2>/dev/null >/dev/null", o1model,
		 args);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_bad_arguments(void **state)
{
	const char *m = O1_SHARED_DIR "/testdata/hf/llama-tiny";
	char args[600];

	(void)state;
	assert_int_equal(run_status(m), 2); /* neither --ids nor --prompt */
	snprintf(args, sizeof(args), "%s --ids '1 x'", m);
	assert_int_equal(run_status(args), 2);
	snprintf(args, sizeof(args), "%s --ids 1 --top-p 2", m);
	assert_int_equal(run_status(args), 2);
	snprintf(args, sizeof(args), "%s --ids 1 --backend tpu", m);
	assert_int_equal(run_status(args), 2);
	snprintf(args, sizeof(args), "%s --ids 1 --backend cuda", m);
	assert_int_equal(run_status(args), 1);
	snprintf(args, sizeof(args), "%s --ids 640", m); /* vocab is 640 */
	assert_int_equal(run_status(args), 1);
	snprintf(args, sizeof(args), "%s --ids 1 --max-tokens 600", m);
	assert_int_equal(run_status(args), 1);		   /* context 512 */
	snprintf(args, sizeof(args), "%s --prompt hi", m); /* no vocab */
	assert_int_equal(run_status(args), 1);
}

/* Output of "o1model run ARGS" (CAP - 1 bytes at most) into OUT; exit
 * status. */
static int run_output(const char *args, char *out, size_t cap)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s run %s 2>/dev/null", o1model, args);
	return o1_test_run(cmd, out, cap);
}

/* A model with a vocabulary (o1model make's built-in tokenizer): --prompt
 * is tokenized, the ids line is followed by the text, and sampling with a
 * seed repeats itself exactly. Needs no shared files. */
static void test_prompt_sampling(void **state)
{
	char path[64], cmd[1024], args[600];
	char a[4096], b[4096], c[4096];

	(void)state;
	o1_test_file_make(path, sizeof(path), "run_model");
	snprintf(cmd, sizeof(cmd),
		 "%s make --preset tiny --out %s.gguf "
		 ">/dev/null 2>&1",
		 o1model, path);
	assert_int_equal(system(cmd), 0);
	snprintf(args, sizeof(args),
		 "%s.gguf --prompt 'Hello world' "
		 "--max-tokens 12 --temperature 0.9 --top-p 0.95 --seed 7",
		 path);
	assert_int_equal(run_output(args, a, sizeof(a)), 0);
	assert_int_equal(run_output(args, b, sizeof(b)), 0);
	assert_string_equal(a, b);
	assert_non_null(strchr(a, '\n')); /* ids line, then the text */
	assert_int_equal(strspn(a, "0123456789 "), strchr(a, '\n') - a);
	snprintf(args, sizeof(args),
		 "%s.gguf --prompt 'Hello world' "
		 "--max-tokens 12 --temperature 0.9 --top-p 0.95 --seed 8",
		 path);
	assert_int_equal(run_output(args, c, sizeof(c)), 0);
	assert_string_not_equal(a, c);
	snprintf(args, sizeof(args),
		 "%s.gguf --prompt 'Hello world' "
		 "--max-tokens 5 --ids-only",
		 path);
	assert_int_equal(run_output(args, c, sizeof(c)), 0);
	assert_int_equal(strchr(c, '\n') - c + 1, (long)strlen(c));
	snprintf(cmd, sizeof(cmd), "%s.gguf", path);
	unlink(cmd);
	unlink(path);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest always[] = {
	    cmocka_unit_test(test_prompt_sampling),
	};
	const struct CMUnitTest shared[] = {
	    cmocka_unit_test(test_reference_models),
	    cmocka_unit_test(test_bad_arguments),
	};
	int err;

	if (argc < 2)
		return 2;
	o1model = argv[1];
	err = cmocka_run_group_tests(always, NULL, NULL);
	if (err || access(O1_SHARED_DIR "/testdata/hf", R_OK) != 0)
		return err;
	return cmocka_run_group_tests(shared, NULL, NULL);
}
