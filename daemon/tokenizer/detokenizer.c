/* Incremental detokenizer.
 *
 * Each token's decoded bytes (built at create time) are fed through a
 * UTF-8 assembler: a character is written only once all its bytes are
 * there, so a stream never shows half a character; bytes that cannot be
 * part of a valid character (stray continuation bytes, overlong forms,
 * surrogates, > U+10FFFF, a lead byte cut short) each end as one U+FFFD.
 * Every write is checked against the caller's room first and the state is
 * only updated once the whole piece fits. Control tokens are skipped on
 * request (SKIP_SPECIAL), except, when asked, those that mark tool calls.
 */
#include "tokenizer_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/utf8.h"

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

struct detok_out {
	char *buf;
	size_t cap, n;
	bool full;
};

static void put(struct detok_out *o, const void *s, size_t n)
{
	if (o->n + n > o->cap) {
		o->full = true;
		return;
	}
	memcpy(o->buf + o->n, s, n);
	o->n += n;
}

/* Feeds one byte through the assembler state D. */
static void feed(struct o1_detok *d, uint8_t b, struct detok_out *o)
{
	if (d->n_pend && !o1_utf8_cont_ok(d->pend[0], d->n_pend, b)) {
		put(o, replacement, 3);
		d->n_pend = 0;
	}
	if (!d->n_pend) {
		size_t n = o1_utf8_lead_len(b);

		if (n == 1)
			put(o, &b, 1);
		else if (!n)
			put(o, replacement, 3);
		else
			d->pend[d->n_pend++] = b;
		return;
	}
	d->pend[d->n_pend++] = b;
	if (d->n_pend == o1_utf8_lead_len(d->pend[0])) {
		put(o, d->pend, d->n_pend);
		d->n_pend = 0;
	}
}

/* Is control token ID a tool-call marker that D's flags keep? */
static bool kept_marker(const struct o1_tokenizer *t, const struct o1_detok *d,
			int32_t id)
{
	if (!(d->flags & O1_DECODE_KEEP_TOOL_MARKERS))
		return false;
	for (uint32_t i = 0; i < t->n_tool_marker; i++)
		if (t->tool_marker[i] == id)
			return true;
	return false;
}

void o1_tokenizer_decode_init(struct o1_detok *d, unsigned flags)
{
	memset(d, 0, sizeof(*d));
	d->flags = flags;
	d->strip = !!(flags & O1_DECODE_STRIP_PREFIX);
}

int o1_tokenizer_decode_step(const struct o1_tokenizer *t, struct o1_detok *d,
			     int32_t id, char *out, size_t cap)
{
	struct detok_out o = {out, out ? cap : 0, 0, false};
	struct o1_detok next = *d;
	const uint8_t *p;
	uint32_t len;

	if (id < 0 || (uint32_t)id >= t->n_tokens) {
		o1_warn("detokenizer: token id %d out of range [0, %u)", id,
			t->n_tokens);
		return -O1_E_BOUNDS;
	}
	if ((d->flags & O1_DECODE_SKIP_SPECIAL) &&
	    t->types[id] == O1_TOKEN_CONTROL && !kept_marker(t, d, id))
		return 0;
	p = (const uint8_t *)t->piece + t->piece_off[id];
	len = tok_len(t->piece_off, id);
	if (next.strip && len) {
		if (t->kind == O1_VOCAB_SPM && t->add_space_prefix &&
		    p[0] == ' ' && t->types[id] != O1_TOKEN_CONTROL) {
			p++;
			len--;
		}
		next.strip = t->types[id] == O1_TOKEN_CONTROL;
	}
	for (uint32_t i = 0; i < len; i++)
		feed(&next, p[i], &o);
	if (o.full)
		return -ENOSPC;
	*d = next;
	return (int)o.n;
}

int o1_tokenizer_decode_flush(struct o1_detok *d, char *out, size_t cap)
{
	if (!d->n_pend)
		return 0;
	if (!out || cap < 3)
		return -ENOSPC;
	memcpy(out, replacement, 3);
	d->n_pend = 0;
	return 3;
}

static void append(char *out, size_t cap, size_t at, const char *s, size_t n)
{
	if (at < cap)
		memcpy(out + at, s, at + n <= cap ? n : cap - at);
}

int o1_tokenizer_decode(const struct o1_tokenizer *t, const int32_t *ids,
			size_t n, unsigned flags, char *out, size_t cap)
{
	size_t total = 0, room = out ? cap : 0;
	size_t tmp_size = 4 * (t->max_piece + 4);
	char *tmp = malloc(tmp_size);
	struct o1_detok d;
	int ret = 0;

	if (!tmp)
		return -ENOMEM;
	o1_tokenizer_decode_init(&d, flags);
	for (size_t i = 0; i <= n; i++) {
		ret = i < n ? o1_tokenizer_decode_step(t, &d, ids[i], tmp,
						       tmp_size)
			    : o1_tokenizer_decode_flush(&d, tmp, tmp_size);
		if (ret < 0)
			goto out_free;
		append(out, room, total, tmp, (size_t)ret);
		total += (size_t)ret;
	}
	if (room)
		out[total < room ? total : room - 1] = 0;
	ret = total > INT32_MAX ? -O1_E_BOUNDS : (int)total;
out_free:
	free(tmp);
	return ret;
}
