/* The GPU tests' shared main and model making (gpu_test.h). */
#include "gpu_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "kernels/cuda_util.h"
#include "tests/common/test_util.h"

const char *o1_gpu_o1model;
char o1_gpu_dir[256];

int o1_gpu_test_main(int argc, char **argv, const char *name,
		     const struct CMUnitTest *tests, size_t n)
{
	int rc;

	if (argc < 2) {
		/* ctest passes it (tests/gpu/CMakeLists.txt) */
		fprintf(stderr, "usage: %s PATH-TO-o1model\n", argv[0]);
		return 2;
	}
	o1_gpu_o1model = argv[1];
	if (o1_cuda_probe() != 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return 77;
	}
	o1_test_dir_make(o1_gpu_dir, sizeof(o1_gpu_dir), name);
	rc = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
	if (o1_test_dir_remove(o1_gpu_dir))
		fprintf(stderr, "could not remove %s\n", o1_gpu_dir);
	return rc;
}

void o1_gpu_make_model(const char *args, const char *out, char *path,
		       size_t size)
{
	char cmd[1024];

	snprintf(path, size, "%s/%s", o1_gpu_dir, out);
	if (access(path, F_OK) == 0)
		return;
	snprintf(cmd, sizeof(cmd), "%s make %s --out %s >/dev/null",
		 o1_gpu_o1model, args, path);
	assert_int_equal(system(cmd), 0);
}
