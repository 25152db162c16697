/* Helpers shared by the test executables (library o1_test_util): scratch
 * folders and files, whole-file reads, running a shell command for its
 * output, allocation-failure injection, and model comparisons. Every
 * helper fails the running cmocka test through an assertion instead of
 * returning an error, so callers need no checks of their own. */
#ifndef O1_TEST_UTIL_H
#define O1_TEST_UTIL_H

#include <stddef.h>

#include "model/model.h"
#include "model/vocab.h"

/* Creates a fresh folder /tmp/o1_test_TAG_XXXXXX; its name goes to DIR
 * (SIZE bytes). */
void o1_test_dir_make(char *dir, size_t size, const char *tag);
/* Removes DIR and everything under it (links are removed, not followed);
 * returns 0, or nonzero when something could not be removed. */
int o1_test_dir_remove(const char *dir);

/* Creates an empty file /tmp/o1_test_TAG_XXXXXX; its name goes to PATH. */
void o1_test_file_make(char *path, size_t size, const char *tag);
/* Writes TEXT to DIR/NAME, replacing it; a NULL TEXT removes the file. */
void o1_test_file_put(const char *dir, const char *name, const char *text);
/* Reads PATH whole into a new NUL-terminated buffer (the caller frees it);
 * its length goes to *LEN. */
char *o1_test_file_read(const char *path, size_t *len);

/* Runs CMD with /bin/sh; at most SIZE - 1 bytes of its stdout go to OUT,
 * NUL-terminated. Returns its exit code, 128 + the signal when killed. */
int o1_test_run(const char *cmd, char *out, size_t size);

/* Runs FN(ARG) with stderr going to a scratch file, then puts at most
 * SIZE - 1 bytes of what it wrote (the log lines) in OUT, NUL-terminated.
 * Returns FN's result. */
int o1_test_capture_stderr(int (*fn)(const void *arg), const void *arg,
			   char *out, size_t size);

/* Allocation-failure injection for executables linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup: after
 * o1_test_alloc_fail_at(K), K allocations succeed and the next one fails
 * (then all succeed again); K < 0 turns injection off. */
void o1_test_alloc_fail_at(long k);

/* Asserts that A and B describe the same shape: sizes, norm_eps, tied
 * embeddings, QKV bias and rope theta, dim and scaling (floats bit-exact).
 * The arch (mistral is written to GGUF as llama), the name, token ids and
 * rope scaling factors are the caller's to compare where they must
 * survive. */
void o1_test_assert_desc_equal(const struct o1_model_desc *a,
			       const struct o1_model_desc *b);
/* Reads tensor T of M as float32 into a new buffer (the caller frees it). */
float *o1_test_tensor_f32(const struct o1_model *m, const struct o1_tensor *t);

/* Asserts that vocabularies A and B are the same: kind, pre-tokenizer,
 * tokens with their types and scores (bit-exact, or none on both),
 * merges, special ids and flags, and chat template; two NULLs are equal,
 * one NULL is not. */
void o1_test_assert_vocab_equal(const struct o1_vocab *a,
				const struct o1_vocab *b);
/* Asserts that B has as many tensors as A and holds each of A's (found by
 * role and layer) with the same dtype, dims, shape, storage order
 * (qk_interleaved) and bytes; the message names a tensor that differs. */
void o1_test_assert_tensors_identical(const struct o1_model *a,
				      const struct o1_model *b);

#endif
