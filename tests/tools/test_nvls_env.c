/* NCCL's NVLink multicast stays off on every path that starts o1d or a
 * GPU program (issue 10): config/o1d.service.in sets
 * Environment=NCCL_NVLS_ENABLE=0, and every shell script under tools/
 * that starts o1d (daemon/o1d/o1d, "$o1d") or the GPU programs
 * (bench_cuda_decode, tools/gpu/) exports NCCL_NVLS_ENABLE=0 on a line of
 * its own before its first command that could. At least the known
 * starters must be found, so a renamed tree cannot pass by matching
 * nothing. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define EXPORT "\nexport NCCL_NVLS_ENABLE=0\n"

static const char *const starts[] = {"daemon/o1d/o1d", "\"$o1d\"",
				     "bench_cuda_decode", "tools/gpu/"};
static unsigned n_starters, n_bad;

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* Is P on a comment line of TEXT? */
static int in_comment(const char *text, const char *p)
{
	while (p > text && *(p - 1) != '\n')
		p--;
	while (*p == ' ' || *p == '\t')
		p++;
	return *p == '#';
}

/* The first place outside comments where TEXT names anything of
 * starts[], or NULL. */
static const char *first_start(const char *text)
{
	const char *first = NULL;

	for (size_t i = 0; i < sizeof(starts) / sizeof(*starts); i++) {
		const char *p = strstr(text, starts[i]);

		while (p && in_comment(text, p))
			p = strstr(p + 1, starts[i]);
		if (p && (!first || p < first))
			first = p;
	}
	return first;
}

static int visit(const char *path, const struct stat *st, int type,
		 struct FTW *ftw)
{
	size_t n = strlen(path);
	const char *start, *exp;
	char *text;

	(void)st, (void)ftw;
	if (type != FTW_F || n < 3 || strcmp(path + n - 3, ".sh") != 0)
		return 0;
	text = read_all(path);
	start = first_start(text);
	if (start) {
		n_starters++;
		exp = strstr(text, EXPORT);
		if (!exp || exp > start) {
			print_error("%s starts o1d or a GPU program without "
				    "'export NCCL_NVLS_ENABLE=0' before\n",
				    path);
			n_bad++;
		}
	}
	free(text);
	return 0;
}

static void test_scripts(void **state)
{
	(void)state;
	assert_int_equal(nftw(O1_SOURCE_DIR "/tools", visit, 16, FTW_PHYS), 0);
	print_message("%u scripts start o1d or GPU programs\n", n_starters);
	assert_true(n_starters >= 4); /* run, bench, e2e, bench_tp, ... */
	assert_int_equal(n_bad, 0);
}

static void test_service(void **state)
{
	char *text = read_all(O1_SOURCE_DIR "/config/o1d.service.in");

	(void)state;
	assert_non_null(strstr(text, "\nEnvironment=NCCL_NVLS_ENABLE=0\n"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scripts),
	    cmocka_unit_test(test_service),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
