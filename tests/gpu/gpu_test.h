/* What the GPU tests that make models with the o1model binary share: the
 * main (argv[1] is o1model; exit 77 without a CUDA device; a scratch
 * folder made before the tests and removed after) and making a model in
 * that folder. */
#ifndef O1_GPU_TEST_H
#define O1_GPU_TEST_H

#include <stddef.h>

struct CMUnitTest;

extern const char *o1_gpu_o1model; /* argv[1] */
extern char o1_gpu_dir[256];	   /* the scratch folder */

/* Runs the N TESTS as group NAME: 2 without argv[1], 77 without a device,
 * else cmocka's result. */
int o1_gpu_test_main(int argc, char **argv, const char *name,
		     const struct CMUnitTest *tests, size_t n);
/* `o1model make ARGS --out DIR/OUT` (unless DIR/OUT exists already), its
 * path into PATH (SIZE bytes); fails the test if o1model fails. */
void o1_gpu_make_model(const char *args, const char *out, char *path,
		       size_t size);

#endif
