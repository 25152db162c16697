/* The work list of the tiled prefill attention (attention_prefill.cu),
 * plain C so the CPU tests check the same arithmetic the device runs.
 *
 * Per kv head, sequence s of a batch (attention.h's q_offsets) brings
 * n_s = q_off[s+1] - q_off[s] rows, i.e. n_s * G (row, query head) pairs
 * with G = Hq / Hkv, ordered row-major (pair m is row m / G, head m % G of
 * the group). They are cut into tiles of BM pairs: ceil(n_s G / BM) tiles
 * numbered from
 *   base(s) = floor(q_off[s] G / BM) + s.
 * Since floor((a + n) / BM) + 1 >= floor(a / BM) + ceil(n / BM), every
 * sequence's tiles end at or before the next sequence's base, so base is
 * strictly increasing, no two tiles share a number, and a grid of
 * floor(rows G / BM) + n_seqs blocks covers them all. A block number in a
 * gap (base(s) + tiles(s) <= b < base(s+1)) has no work and exits: at most
 * one such block per sequence. Everything here is computed from the device
 * copy of q_offsets on the device and the host row count, so the grid is
 * known on the host without reading the batch.
 */
#ifndef O1_ATTENTION_TILES_H
#define O1_ATTENTION_TILES_H

#include <stdint.h>

#ifdef __CUDACC__
#define O1_ATTN_HD __host__ __device__
#else
#define O1_ATTN_HD
#endif

/* Number of the first tile of sequence S. */
static inline O1_ATTN_HD uint64_t o1_attn_tile_base(const uint32_t *q_off,
						    uint32_t s, uint32_t g,
						    uint32_t bm)
{
	return (uint64_t)q_off[s] * g / bm + s;
}

/* Tiles of sequence S: ceil(n_s G / BM). */
static inline O1_ATTN_HD uint64_t o1_attn_tile_count(const uint32_t *q_off,
						     uint32_t s, uint32_t g,
						     uint32_t bm)
{
	return ((uint64_t)(q_off[s + 1] - q_off[s]) * g + bm - 1) / bm;
}

/* Blocks per kv head that cover every tile of a batch of ROWS rows. */
static inline O1_ATTN_HD uint64_t o1_attn_tile_grid(uint32_t rows,
						    uint32_t n_seqs, uint32_t g,
						    uint32_t bm)
{
	return (uint64_t)rows * g / bm + n_seqs;
}

/* An upper bound, from the host's counts alone, on the tiles of the
 * sequences with at least MIN_NEW rows: the blocks with work when a
 * launch leaves the other sequences alone (the split count is sized on
 * them, not on a mixed batch's one idle tile per decode sequence). With
 * every sequence holding a row or more, k such sequences hold at least
 * k MIN_NEW rows beside the others' one each, so k <= (ROWS - N_SEQS) /
 * (MIN_NEW - 1), and their rows are at most ROWS - N_SEQS + k; their
 * tiles at most those rows' G / BM plus one a sequence, as the grid's.
 * MIN_NEW <= 1, or fewer rows than sequences: the grid. */
static inline O1_ATTN_HD uint64_t o1_attn_tile_busy(uint32_t rows,
						    uint32_t n_seqs, uint32_t g,
						    uint32_t bm,
						    uint32_t min_new)
{
	uint64_t k = n_seqs, r = rows;

	if (min_new > 1 && rows >= n_seqs) {
		uint64_t most = (uint64_t)(rows - n_seqs) / (min_new - 1);

		k = most < n_seqs ? most : n_seqs;
		r = rows - n_seqs + k;
	}
	return r * g / bm + k;
}

/* The sequence block B falls in: the last s with base(s) <= B (binary
 * search; base is strictly increasing and base(0) = 0). */
static inline O1_ATTN_HD uint32_t o1_attn_tile_seq(const uint32_t *q_off,
						   uint32_t n_seqs, uint32_t g,
						   uint32_t bm, uint64_t b)
{
	uint32_t lo = 0, hi = n_seqs;

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (o1_attn_tile_base(q_off, mid, g, bm) <= b)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

#endif
