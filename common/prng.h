/* The pseudo-random generators behind o1d's reproducible draws:
 * splitmix64 (Steele, Lea and Flood; it seeds, and is a quick stream of
 * its own) and xoshiro256** (Blackman and Vigna). The sampler draws every
 * token's uniform from a request's xoshiro256** seeded through splitmix64
 * (sampler.h), o1model's random models use the same pair, and the tests
 * reproduce both: same seed, same numbers on every machine. Sampled
 * tokens depend on these sequences, so they never change
 * (tests/common/test_prng.c pins them).
 *
 * State is the caller's; nothing here is thread-safe beyond that.
 */
#ifndef O1_PRNG_H
#define O1_PRNG_H

#include <stdint.h>

/* The next splitmix64 output; advances *X. */
static inline uint64_t o1_prng_splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t o1_prng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* A xoshiro256** state from SEED: four splitmix64 outputs. */
static inline void o1_prng_seed(uint64_t s[4], uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		s[i] = o1_prng_splitmix64(&seed);
}

/* The next xoshiro256** output; advances S. */
static inline uint64_t o1_prng_next(uint64_t s[4])
{
	uint64_t r = o1_prng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = o1_prng_rotl(s[3], 45);
	return r;
}

/* A uniform double in [0, 1): the top 53 bits of the next output. */
static inline double o1_prng_uniform(uint64_t s[4])
{
	return (o1_prng_next(s) >> 11) * 0x1.0p-53;
}

#endif
