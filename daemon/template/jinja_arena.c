/* The Jinja interpreter's arena and its failure path.
 *
 * An arena hands out memory from chunks that grow from 4 KiB to 1 MiB and
 * frees them all at once; a byte cap bounds what one template or one
 * render may take. jfail() records an error and longjmps to the entry
 * point that set the jmp_buf (o1_jinja_parse, o1_jinja_render).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "template/jinja_int.h"

struct ja_chunk {
	struct ja_chunk *next;
	size_t used, size;
	max_align_t data[];
};

enum { CHUNK_MIN = 4096, CHUNK_MAX = 1 << 20 };

void ja_init(struct ja_arena *a, size_t cap_bytes)
{
	*a = (struct ja_arena){.cap_bytes = cap_bytes};
}

static struct ja_chunk *chunk_new(struct ja_arena *a, size_t n)
{
	size_t size = a->head ? a->head->size * 2 : CHUNK_MIN;
	struct ja_chunk *ch;

	if (size > CHUNK_MAX)
		size = CHUNK_MAX;
	if (size < n)
		size = n;
	if (a->used_bytes + size + sizeof(*ch) > a->cap_bytes) {
		a->over_cap = true;
		return NULL;
	}
	ch = malloc(sizeof(*ch) + size);
	if (!ch)
		return NULL;
	ch->used = 0;
	ch->size = size;
	a->used_bytes += size + sizeof(*ch);
	return ch;
}

void *ja_alloc(struct ja_arena *a, size_t n)
{
	const size_t align = _Alignof(max_align_t);
	struct ja_chunk *ch = a->head;
	void *p;

	a->over_cap = false;
	if (n > a->cap_bytes) {
		a->over_cap = true;
		return NULL;
	}
	n = (n + align - 1) & ~(align - 1);
	if (!n)
		n = align;
	if (!ch || ch->size - ch->used < n) {
		ch = chunk_new(a, n);
		if (!ch)
			return NULL;
		/* a big block gets a chunk of its own behind the current one,
		 * so the current one's free space is not wasted */
		if (a->head && ch->size == n) {
			ch->next = a->head->next;
			a->head->next = ch;
		} else {
			ch->next = a->head;
			a->head = ch;
		}
	}
	p = (char *)ch->data + ch->used;
	ch->used += n;
	return p;
}

void ja_fini(struct ja_arena *a)
{
	struct ja_chunk *ch = a->head, *next;

	for (; ch; ch = next) {
		next = ch->next;
		free(ch);
	}
	a->head = NULL;
	a->used_bytes = 0;
}

static int kind_ret(enum o1_jinja_error_kind kind)
{
	switch (kind) {
	case O1_JINJA_ERR_SYNTAX:
		return -O1_E_FORMAT;
	case O1_JINJA_ERR_LIMIT:
		return -O1_E_BOUNDS;
	case O1_JINJA_ERR_NOMEM:
		return -ENOMEM;
	default:
		return -EINVAL;
	}
}

void jfail(struct jfail *f, enum o1_jinja_error_kind kind, uint32_t line,
	   uint32_t col, const char *fmt, ...)
{
	va_list ap;

	f->err->kind = kind;
	f->err->line = line;
	f->err->col = col;
	va_start(ap, fmt);
	vsnprintf(f->err->msg, sizeof(f->err->msg), fmt, ap);
	va_end(ap);
	f->ret = kind_ret(kind);
	longjmp(f->jb, 1);
}

void *jalloc(struct jfail *f, struct ja_arena *a, size_t n, uint32_t line,
	     uint32_t col)
{
	void *p = ja_alloc(a, n);

	if (p)
		return p;
	if (a->over_cap)
		jfail(f, O1_JINJA_ERR_LIMIT, line, col,
		      "template needs more than %zu bytes of memory",
		      a->cap_bytes);
	jfail(f, O1_JINJA_ERR_NOMEM, line, col, "out of memory");
}
