/* The seeded generator of the tests that play a model over explicit
 * clocks (test_cadence, test_pace): xorshift64, the state the caller's,
 * so a test's draws are the same on every run and machine. */
#ifndef O1_TEST_RNG_H
#define O1_TEST_RNG_H

#include <stdint.h>

static inline uint64_t o1_test_rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Uniform in [LO, HI] (HI - LO + 1 small beside 2^64). */
static inline uint64_t o1_test_uniform(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + o1_test_rng(s) % (hi - lo + 1);
}

#endif
