/* The tiled prefill kernel's work list (kernels/attention_tiles.h), run on
 * the CPU with the arithmetic the device uses: over random and edge-case
 * batches, every block of the grid maps to at most one tile, every tile of
 * every sequence is reached by exactly one block, tiles cover each
 * sequence's (row, head) pairs exactly, and idle blocks are at most one per
 * sequence; o1_attn_tile_busy bounds the tiles of the sequences with at
 * least MIN_NEW rows, exactly where a chunk sits beside decode rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/attention_tiles.h"

#define MAX_SEQS 300

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)((rng >> 33) % n);
}

/* Walks the whole grid for q_off (n_seqs + 1), G and BM. */
static void check_batch(const uint32_t *q_off, uint32_t n_seqs, uint32_t g,
			uint32_t bm)
{
	uint32_t rows = q_off[n_seqs];
	uint64_t grid = o1_attn_tile_grid(rows, n_seqs, g, bm), idle = 0;
	uint64_t covered[MAX_SEQS] = {0}, reached[MAX_SEQS] = {0};

	for (uint32_t s = 0; s + 1 < n_seqs; s++) {
		uint64_t end = o1_attn_tile_base(q_off, s, g, bm) +
			       o1_attn_tile_count(q_off, s, g, bm);

		assert_true(end <= o1_attn_tile_base(q_off, s + 1, g, bm));
	}
	assert_int_equal(o1_attn_tile_base(q_off, 0, g, bm), 0);
	for (uint64_t b = 0; b < grid; b++) {
		uint32_t s = o1_attn_tile_seq(q_off, n_seqs, g, bm, b);
		uint64_t base = o1_attn_tile_base(q_off, s, g, bm);
		uint64_t pairs = (uint64_t)(q_off[s + 1] - q_off[s]) * g, m0;

		assert_true(s < n_seqs && base <= b);
		assert_true(s + 1 == n_seqs ||
			    o1_attn_tile_base(q_off, s + 1, g, bm) > b);
		m0 = (b - base) * bm;
		if (m0 >= pairs) {
			idle++;
			continue;
		}
		/* tiles arrive in order within a sequence: no gaps, no repeats
		 */
		assert_true(reached[s] == b - base);
		reached[s]++;
		covered[s] += (pairs - m0 < bm ? pairs - m0 : bm);
	}
	for (uint32_t s = 0; s < n_seqs; s++) {
		assert_true(reached[s] == o1_attn_tile_count(q_off, s, g, bm));
		assert_true(covered[s] ==
			    (uint64_t)(q_off[s + 1] - q_off[s]) * g);
	}
	assert_true(idle <= n_seqs);
	for (uint32_t min_new = 1; min_new <= 64; min_new *= 2) {
		uint64_t busy = 0;

		for (uint32_t s = 0; s < n_seqs; s++)
			if (q_off[s + 1] - q_off[s] >= min_new)
				busy += o1_attn_tile_count(q_off, s, g, bm);
		assert_true(busy <=
			    o1_attn_tile_busy(rows, n_seqs, g, bm, min_new));
	}
	assert_true(o1_attn_tile_busy(rows, n_seqs, g, bm, 1) == grid);
}

/* Issue 17's stall case: a 16-row chunk beside 45 decode rows is one
 * tile with work (of 47 blocks a kv head); beside a 40-row chunk (2
 * tiles) the counts allow two sequences of 16+ rows: 3. */
static void test_tiles_busy(void **state)
{
	uint32_t q_off[48];

	(void)state;
	for (uint32_t s = 0; s <= 45; s++)
		q_off[s] = s;
	q_off[46] = 45 + 16;
	assert_int_equal(o1_attn_tile_grid(61, 46, 4, 128), 47);
	assert_int_equal(o1_attn_tile_busy(61, 46, 4, 128, 16), 1);
	check_batch(q_off, 46, 4, 128);
	q_off[46] = 45 + 40;
	assert_int_equal(o1_attn_tile_busy(85, 46, 4, 128, 16), 3);
	check_batch(q_off, 46, 4, 128);
	/* prompts alone: their own tiles */
	assert_int_equal(o1_attn_tile_busy(2048, 1, 4, 128, 16), 65);
}

static void test_tiles_edges(void **state)
{
	static const uint32_t one[] = {0, 1}, chunk[] = {0, 2048};
	static const uint32_t mixed[] = {0, 512, 513, 514, 534, 549, 565, 566};
	static const uint32_t gs[] = {1, 2, 4, 7, 8, 32};

	(void)state;
	for (size_t i = 0; i < sizeof(gs) / sizeof(gs[0]); i++) {
		check_batch(one, 1, gs[i], 64);
		check_batch(chunk, 1, gs[i], 64);
		check_batch(mixed, 7, gs[i], 64);
		check_batch(mixed, 7, gs[i], 16);
		check_batch(mixed, 7, gs[i], 128);
	}
}

/* Random batches: decode rows, short and long chunks. */
static void test_tiles_random(void **state)
{
	static const uint32_t gs[] = {1, 2, 3, 4, 7, 8, 16, 32};
	static const uint32_t bms[] = {16, 64, 128};
	uint32_t q_off[MAX_SEQS + 1];

	(void)state;
	for (int it = 0; it < 400; it++) {
		uint32_t n = 1 + rnd(MAX_SEQS), kind = rnd(3);

		q_off[0] = 0;
		for (uint32_t s = 0; s < n; s++) {
			uint32_t k = kind == 0	 ? 1
				     : kind == 1 ? 1 + rnd(40)
				     : rnd(4)	 ? 1 + rnd(8)
						 : 1 + rnd(3000);

			q_off[s + 1] = q_off[s] + k;
		}
		check_batch(q_off, n, gs[rnd(8)], bms[rnd(3)]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tiles_edges),
	    cmocka_unit_test(test_tiles_random),
	    cmocka_unit_test(test_tiles_busy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
