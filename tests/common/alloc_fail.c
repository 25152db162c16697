/* Allocation-failure injection (o1_test_alloc_fail_at in test_util.h).
 * Only executables linked with --wrap for malloc, calloc, realloc and
 * strdup pull this object in: its __real_* references need the wrap. While
 * alloc_budget >= 0 each allocation spends one unit and the one that finds
 * it at 0 fails. Single-threaded tests only. */
#include <stdbool.h>
#include <stddef.h>

#include "test_util.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

static long alloc_budget = -1;

void o1_test_alloc_fail_at(long k)
{
	alloc_budget = k;
}

static bool alloc_fails(void)
{
	if (alloc_budget < 0)
		return false;
	return alloc_budget-- == 0;
}

void *__wrap_malloc(size_t n)
{
	return alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return alloc_fails() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return alloc_fails() ? NULL : __real_strdup(s);
}
