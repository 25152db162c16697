/* The 16-lane f32 accumulation that matmul.h's determinism contract
 * describes, shared by the f32 product (matmul.c) and the products on
 * quantized weights (matmul_q.c), so that both reduce in the same order:
 * lane l sums the products of k = l, l + 16, ... in increasing k, then
 * t[l] = s[l] + s[l+8], u[l] = t[l] + t[l+4], v[l] = u[l] + u[l+2],
 * r = v[0] + v[1]. Include only from files built with -ffp-contract=off.
 */
#ifndef O1_MATMUL_LANES_H
#define O1_MATMUL_LANES_H

#define O1_LANES 16

typedef float o1_v16f __attribute__((vector_size(64)));
typedef float o1_v16fu __attribute__((vector_size(64), aligned(4), may_alias));

static inline __attribute__((always_inline)) o1_v16f
o1_lanes_load(const float *p)
{
	return *(const o1_v16fu *)p;
}

/* The fixed reduction of the 16 lanes of S. */
static inline __attribute__((always_inline)) float
o1_lanes_reduce(const o1_v16f *s)
{
	float t[8], u[4], v[2];

	for (int l = 0; l < 8; l++)
		t[l] = (*s)[l] + (*s)[l + 8];
	for (int l = 0; l < 4; l++)
		u[l] = t[l] + t[l + 4];
	for (int l = 0; l < 2; l++)
		v[l] = u[l] + u[l + 2];
	return v[0] + v[1];
}

#endif
