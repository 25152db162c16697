/* The grammar compiler's growable uint32 arrays (see grammar_int.h):
 * capacity doubles from 64, so pushes are amortised O(1); a failed
 * reallocation leaves the array as it was. */
#include <errno.h>
#include <stdlib.h>

#include "grammar/grammar_int.h"

int gr_vec_push(struct gvec *x, uint32_t val)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 64;
		uint32_t *v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n++] = val;
	return 0;
}
