/* A float's bits and back (memcpy: no aliasing rules broken, and
 * compilers reduce it to a register move). */
#ifndef O1_COMMON_BITS_H
#define O1_COMMON_BITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t o1_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float o1_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

#endif
