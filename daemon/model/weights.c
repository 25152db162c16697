/* Weight bytes by type (weights.h). */
#include "weights.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void o1_model_weights(const struct o1_model *m, struct o1_model_weights *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		const struct o1_tensor *t = &m->tensors[i];
		uint32_t k = 0;

		out->total += t->n_bytes;
		while (k < out->n && out->t[k].type != t->dtype)
			k++;
		if (k == out->n && k == O1_MODEL_WEIGHT_TYPES_MAX) {
			out->other += t->n_bytes;
			continue;
		}
		if (k == out->n)
			out->t[out->n++].type = t->dtype;
		out->t[k].tensors++;
		out->t[k].bytes += t->n_bytes;
	}
	for (uint32_t i = 1; i < out->n; i++) /* largest first; few types */
		for (uint32_t k = i; k && out->t[k].bytes > out->t[k - 1].bytes;
		     k--) {
			struct o1_model_weight_type x = out->t[k];

			out->t[k] = out->t[k - 1];
			out->t[k - 1] = x;
		}
}

/* Appends to BUF at *AT; false once it does not fit. */
static bool add(char *buf, size_t n, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool add(char *buf, size_t n, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (*at >= n)
		return false;
	va_start(ap, fmt);
	r = vsnprintf(buf + *at, n - *at, fmt, ap);
	va_end(ap);
	if (r < 0 || (size_t)r >= n - *at) {
		*at = n;
		return false;
	}
	*at += (size_t)r;
	return true;
}

/* Decimal size with a unit: "3.93 GB", "0.27 MB", "512 B". */
static void size_text(uint64_t b, char *out, size_t n)
{
	if (b >= 1000000000ull)
		snprintf(out, n, "%.2f GB", b / 1e9);
	else if (b >= 1000000ull)
		snprintf(out, n, "%.2f MB", b / 1e6);
	else if (b >= 1000ull)
		snprintf(out, n, "%.2f kB", b / 1e3);
	else
		snprintf(out, n, "%llu B", (unsigned long long)b);
}

int o1_model_weights_text(const struct o1_model_weights *w, char *buf, size_t n)
{
	char sz[32];
	size_t at = 0;
	bool ok;

	buf[0] = '\0';
	size_text(w->total, sz, sizeof(sz));
	ok = add(buf, n, &at, "%s:", sz);
	for (uint32_t k = 0; ok && k < w->n; k++) {
		size_text(w->t[k].bytes, sz, sizeof(sz));
		ok = add(buf, n, &at, "%s %s %s (%u)", k ? "," : "",
			 o1_dtype_name(w->t[k].type), sz, w->t[k].tensors);
	}
	if (ok && w->other) {
		size_text(w->other, sz, sizeof(sz));
		ok = add(buf, n, &at, ", other %s", sz);
	}
	if (!ok)
		buf[n - 1] = '\0';
	return ok ? 0 : -ENOSPC;
}
