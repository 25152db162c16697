/* A self-test of the CPU emulation's Hopper operations (emu.cc behind
 * kernels/hopper_dev.h), so that CI checks the checker. Positive cases:
 * warpgroup products (n 128 and 256) whose B came in by a swizzled
 * tensor copy, against the CPU's product (small integers: every sum
 * exact, so bitwise) and the swizzle's documented layout; a two-buffer
 * pipeline of full and empty mbarriers over four phases each; a copy's
 * bytes absent until its barrier's wait; the same pipeline in clusters
 * of two blocks, each copying half of every tile into both (multicast)
 * and releasing buffers to the other by remote arrivals. Negative cases: a kernel with
 * one fault (a flag adds it), which must stop on the emulation's own
 * report of that fault (its text on stderr: an earlier, unrelated abort
 * does not pass), and which without the flag must run clean (so the
 * fault alone triggers the report). Every case runs in a child process:
 * a report aborts it, and a hang ends at an alarm. run_selftest.sh
 * builds it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* cmocka.h needs these first, and declares no C linkage itself */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}

#include "cuda.h"
#include "hopper_dev.h"

#define THREADS	     128 /* one warpgroup */
#define CHILD_ALARM_S 20 /* a hang (a check lost) ends as a failure */

/* bf16 bits of a small integer (exact). */
static uint16_t bf16_of(int v)
{
	return (uint16_t)(__float_as_uint((float)v) >> 16);
}

static float bf16_f32(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

/* Small integers from a fixed sequence, in [-3, 3]. */
static int small_int(uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	return (int)(*x >> 33) % 7 - 3;
}

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t,
			      void *, const cuuint64_t *, const cuuint64_t *,
			      const cuuint32_t *, const cuuint32_t *,
			      CUtensorMapInterleave, CUtensorMapSwizzle,
			      CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* A map of ROWS x COLS elements of TYPE at P, rows PITCH bytes apart,
 * boxes of BC x BR, encoded as gemm_qw.cu encodes its maps; 0 or -1. */
static int encode(hop_map *map, CUtensorMapDataType type, const void *p,
		  uint64_t cols, uint64_t rows, uint64_t pitch, uint32_t bc,
		  uint32_t br, CUtensorMapSwizzle sw)
{
	cuuint64_t dim[2] = {cols, rows}, stride[1] = {pitch};
	cuuint32_t box[2] = {bc, br}, one[2] = {1, 1};
	cudaDriverEntryPointQueryResult q;
	void *fn = NULL;

	if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn,
					     12000, cudaEnableDefault, &q) ||
	    q != cudaDriverEntryPointSuccess)
		return -1;
	return ((encode_fn)fn)((CUtensorMap *)map, type, 2, (void *)p, dim,
			       stride, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
			       sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
			       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
		   ? -1
		   : 0;
}

/* The product's shapes: A (64 x 64) by the K-slice of X's rows at
 * columns PROD_C0.. (one 128-byte swizzled box of 64 bf16 a row). */
#define PROD_K	64
#define PROD_C0 64
#define X_COLS	128
#define X_ROWS	200

/* Thread 0's count of box elements not where the 128-byte swizzle puts them:
 * 16-byte chunk c of row r at chunk c ^ (r % 8) (a 1024-aligned buffer),
 * rows past the tensor zeros. */
template <int N>
static void count_swizzle_misplaced(const uint8_t *sm, const uint16_t *x,
				    int c1, int *misplaced)
{
	for (int r = 0; r < N; r++)
		for (int c = 0; c < PROD_K; c++) {
			uint32_t at = 128 * r + 16 * ((2 * c / 16) ^ (r % 8)) +
				      2 * c % 16;
			uint16_t v, want = 0;

			memcpy(&v, sm + at, 2);
			if (c1 + r < X_ROWS)
				want = x[(c1 + r) * X_COLS + PROD_C0 + c];
			*misplaced += v != want;
		}
}

/* D (64 x N) = A (64 x 64) . B, B (N x 64, K-major) rows C1.. of X by
 * one tensor copy; 4 products of k16 at 32-byte steps in the swizzled
 * rows, A in mma.sync's fragment layout (thread t of the group: warp
 * w = t / 32, g = t % 32 / 4, q = t % 4; word j holds row 16 w + g +
 * 8 (j % 2), columns 2 q + 8 (j / 2) and the next); D row-major. */
template <int N>
static void k_product(const hop_map *xmap, const uint16_t *x, int c1,
		      const uint16_t *a, float *d, int *misplaced)
{
	uint8_t *sm = emu_smem();
	uint64_t *bar = (uint64_t *)(sm + N * 128);
	unsigned tid = threadIdx.x, w = tid / 32, g = tid % 32 / 4, q = tid % 4;
	uint32_t af[4][4];
	float acc[N / 2];

	if (tid == 0) {
		hop_bar_init(bar, 1);
		hop_fence_bar_init();
		hop_bar_expect_tx(bar, N * 128);
		hop_tma_2d(sm, xmap, PROD_C0, c1, bar);
	}
	__syncthreads();
	hop_bar_wait(bar, 0);
	if (tid == 0)
		count_swizzle_misplaced<N>(sm, x, c1, misplaced);
	for (int kk = 0; kk < 4; kk++)
		for (int j = 0; j < 4; j++) {
			const uint16_t *e = a + (16 * w + g + 8 * (j % 2)) * PROD_K +
					    16 * kk + 2 * q + 8 * (j / 2);

			af[kk][j] = e[0] | (uint32_t)e[1] << 16;
		}
	for (float &v : acc)
		v = NAN; /* ADD 0 must not read it */
	hop_wgmma_fence();
	for (int kk = 0; kk < 4; kk++)
		hop_wgmma(acc, af[kk], hop_desc_sw128(sm + 32 * kk), kk != 0);
	hop_wgmma_commit();
	hop_wgmma_wait<0>();
	for (int j = 0; j < N / 8; j++)
		for (int e = 0; e < 4; e++)
			d[(16 * w + g + 8 * (e / 2)) * N + 8 * j + 2 * q + e % 2] =
			    acc[4 * j + e];
}

/* The N-column product through k_product against the CPU's: 0 when
 * bitwise equal and the box landed swizzled. */
template <int N> static int run_product(int c1)
{
	static uint16_t x[X_ROWS * X_COLS] __attribute__((aligned(16)));
	static uint16_t a[64 * PROD_K];
	static float d[64 * N], want[64 * N];
	uint64_t seed = 0x5eed0000u + N;
	int misplaced = 0, wrong = 0;
	/* EMU_LAUNCH's arguments are evaluated in its lambda, over copies */
	int *misplaced_p = &misplaced;
	hop_map xmap, *xmap_p = &xmap;

	for (uint16_t &v : x)
		v = bf16_of(small_int(&seed));
	for (uint16_t &v : a)
		v = bf16_of(small_int(&seed));
	for (float &v : d)
		v = NAN;
	if (encode(&xmap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x, X_COLS, X_ROWS,
		   2 * X_COLS, 64, N, CU_TENSOR_MAP_SWIZZLE_128B))
		return fprintf(stderr, "encode failed\n"), 1;
	EMU_LAUNCH(1, 1, THREADS, N * 128 + 64, k_product<N>, xmap_p, x, c1, a,
		   d, misplaced_p);
	for (int r = 0; r < 64; r++)
		for (int c = 0; c < N; c++) {
			float s = 0;

			for (int k = 0; k < PROD_K && c1 + c < X_ROWS; k++)
				s += bf16_f32(a[r * PROD_K + k]) *
				     bf16_f32(x[(c1 + c) * X_COLS + PROD_C0 + k]);
			want[r * N + c] = s;
		}
	for (int i = 0; i < 64 * N; i++)
		wrong += !(d[i] == want[i]);
	fprintf(stderr, "n %d: %d of %d elements wrong, %d box elements "
			"misplaced\n", N, wrong, 64 * N, misplaced);
	return wrong || misplaced;
}

static int product_n128(bool fault)
{
	(void)fault;
	return run_product<128>(100); /* rows 200..227 past the tensor */
}

static int product_n256(bool fault)
{
	(void)fault;
	return run_product<256>(0); /* rows 200..255 past the tensor */
}

/* The pipeline: tile i (rows 16 i.. of a byte tensor, as two boxes 64
 * columns wide) into buffer i % 2, full[b] completing on the producer's
 * arrival and the tile's bytes, empty[b] on an arrival of each warp that
 * read its part; 8 tiles, so 4 phases of each barrier. */
#define PIPE_BUFS	2
#define PIPE_TILES	8
#define PIPE_ROWS	16
#define PIPE_COLS	128
#define PIPE_TILE_BYTES (PIPE_ROWS * PIPE_COLS)

/* Tile I into BUF on FULL: the bytes announced before the copies for an
 * even tile, after them for an odd one (a copy may land first: the count
 * goes below zero, the phase still waits for the arrival). */
static void issue_tile(uint8_t *buf, uint64_t *full, const hop_map *map,
		       int i)
{
	if (i % 2 == 0)
		hop_bar_expect_tx(full, PIPE_TILE_BYTES);
	for (int h = 0; h < 2; h++)
		hop_tma_2d(buf + h * PIPE_TILE_BYTES / 2, map, 64 * h,
			   PIPE_ROWS * i, full);
	if (i % 2)
		hop_bar_expect_tx(full, PIPE_TILE_BYTES);
}

/* Thread TID's 16 bytes of tile I in BUF (two boxes of 64 columns, one
 * after the other) unlike SRC's. */
static int tile_stale(const uint8_t *buf, const uint8_t *src, int i,
		      unsigned tid)
{
	int n = 0;

	for (int o = 16 * (int)tid; o < 16 * (int)tid + 16; o++) {
		int h = o / (PIPE_TILE_BYTES / 2),
		    r = o % (PIPE_TILE_BYTES / 2) / 64;

		n += buf[o] != src[(PIPE_ROWS * i + r) * PIPE_COLS + 64 * h +
				   o % 64];
	}
	return n;
}

/* Each thread compares its 16 bytes of each tile with SRC, counting
 * those unlike it (read before the copies landed, or misplaced) in
 * STALE; the producer counts in EARLY the phases of empty[b] that
 * completed before every warp had released the buffer. */
static void k_pipeline(const hop_map *map, const uint8_t *src, int *stale,
		       int *early)
{
	uint8_t *sm = emu_smem();
	uint64_t *full = (uint64_t *)(sm + PIPE_BUFS * PIPE_TILE_BYTES),
		 *empty = full + PIPE_BUFS;
	unsigned *released = (unsigned *)(empty + PIPE_BUFS); /* warps */
	unsigned tid = threadIdx.x;

	if (tid == 0) {
		for (int b = 0; b < PIPE_BUFS; b++) {
			hop_bar_init(&full[b], 1);
			hop_bar_init(&empty[b], THREADS / 32);
			released[b] = 0;
		}
		hop_fence_bar_init();
		for (int i = 0; i < PIPE_BUFS; i++)
			issue_tile(sm + i * PIPE_TILE_BYTES, &full[i], map, i);
	}
	__syncthreads();
	for (int i = 0; i < PIPE_TILES; i++) {
		int b = i % PIPE_BUFS, use = i / PIPE_BUFS;
		uint8_t *buf = sm + b * PIPE_TILE_BYTES;

		hop_bar_wait(&full[b], use % 2);
		*stale += tile_stale(buf, src, i, tid);
		__syncwarp(); /* the warp's lanes all read the tile */
		if (tid % 32 == 0) {
			released[b]++;
			hop_bar_arrive(&empty[b]);
		}
		if (tid == 0 && i + PIPE_BUFS < PIPE_TILES) {
			hop_bar_wait(&empty[b], use % 2);
			*early += released[b] != THREADS / 32 * (use + 1u);
			hop_fence_async_smem();
			issue_tile(buf, &full[b], map, i + PIPE_BUFS);
		}
	}
}

/* The pipelines' tensor: PIPE_TILES tiles of random bytes (from SEED)
 * into SRC, MAP over it in boxes of 64 x PIPE_ROWS; 0 or 1. */
static int pipe_tensor(uint8_t *src, uint64_t seed, hop_map *map)
{
	for (int i = 0; i < PIPE_TILES * PIPE_TILE_BYTES; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		src[i] = (uint8_t)(seed >> 56);
	}
	if (encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, src, PIPE_COLS,
		   PIPE_ROWS * PIPE_TILES, PIPE_COLS, 64, PIPE_ROWS,
		   CU_TENSOR_MAP_SWIZZLE_NONE))
		return fprintf(stderr, "encode failed\n"), 1;
	return 0;
}

static int pipeline(bool fault)
{
	static uint8_t src[PIPE_TILES * PIPE_TILE_BYTES]
	    __attribute__((aligned(16)));
	int stale = 0, early = 0, *stale_p = &stale, *early_p = &early;
	hop_map map, *map_p = &map;

	(void)fault;
	if (pipe_tensor(src, 0x9e3779b97f4a7c15ull, &map))
		return 1;
	EMU_LAUNCH(1, 1, THREADS, PIPE_BUFS * PIPE_TILE_BYTES + 64, k_pipeline,
		   map_p, (const uint8_t *)src, stale_p, early_p);
	fprintf(stderr, "%d tiles: %d bytes unlike the tensor's, %d buffers "
			"released early\n", PIPE_TILES, stale, early);
	return stale || early;
}

/* Thread 0's copy of a 64 x 16 byte box: none of its bytes in shared
 * memory right after the issue (a read there without the barrier's wait
 * sees them stale, the race the emulation exists to show), all of them
 * after the wait. */
static void k_copy_late(const hop_map *map, const uint8_t *src, int *early,
			int *missing)
{
	uint8_t *sm = emu_smem();
	uint64_t *bar = (uint64_t *)(sm + 1024);

	if (threadIdx.x)
		return;
	hop_bar_init(bar, 1);
	hop_fence_bar_init();
	hop_bar_expect_tx(bar, 1024);
	hop_tma_2d(sm, map, 0, 0, bar);
	for (int i = 0; i < 1024; i++)
		*early += sm[i] == src[i];
	hop_bar_wait(bar, 0);
	for (int i = 0; i < 1024; i++)
		*missing += sm[i] != src[i];
}

static int copy_late(bool fault)
{
	static uint8_t src[1024] __attribute__((aligned(16)));
	int early = 0, missing = 0, *early_p = &early, *missing_p = &missing;
	hop_map map, *map_p = &map;

	(void)fault;
	for (int i = 0; i < 1024; i++)
		src[i] = (uint8_t)(i % 100); /* never emu.cc's fill, 0xab */
	if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, src, 64, 16, 64, 64,
		   16, CU_TENSOR_MAP_SWIZZLE_NONE))
		return fprintf(stderr, "encode failed\n"), 1;
	EMU_LAUNCH(1, 1, THREADS, 1024 + 64, k_copy_late, map_p,
		   (const uint8_t *)src, early_p, missing_p);
	fprintf(stderr, "%d bytes there at the issue, %d missing after the "
			"wait\n", early, missing);
	return early || missing;
}

/* Thread 0 stores into a product's B (row 0, k 0: read by it) between
 * the product's issue and its wait. */
static void k_b_overwritten(bool fault)
{
	uint8_t *sm = emu_smem();
	uint16_t *b = (uint16_t *)sm;
	uint32_t af[4] = {0, 0, 0, 0};
	float acc[64];

	for (int i = threadIdx.x; i < 128 * 64; i += THREADS)
		b[i] = bf16_of(1);
	__syncthreads();
	hop_wgmma_fence();
	hop_wgmma(acc, af, hop_desc_sw128(sm), 0);
	hop_wgmma_commit();
	if (fault && threadIdx.x == 0)
		b[0] = bf16_of(2);
	hop_wgmma_wait<0>();
}

static int b_overwritten(bool fault)
{
	EMU_LAUNCH(1, 1, THREADS, 128 * 128, k_b_overwritten, fault);
	return 0;
}

/* A product over 128 rows of B, the block's shared memory 64 bytes short
 * of them with the fault: row 127's first 32 bytes are inside, but the
 * swizzle reads them from bytes 96..127 of the row (chunks 0, 1 ^ 7). */
static void k_b_past_shared(void)
{
	uint32_t af[4] = {0, 0, 0, 0};
	float acc[64];

	hop_wgmma_fence();
	hop_wgmma(acc, af, hop_desc_sw128(emu_smem()), 0);
	hop_wgmma_commit();
	hop_wgmma_wait<0>();
}

static int b_past_shared(bool fault)
{
	emu_launch(1, 1, THREADS, 128 * 128 - (fault ? 64 : 0),
		   k_b_past_shared);
	return 0;
}

/* A wait on a barrier never initialized (without the fault: initialized
 * and its phase 0 completed by one arrival). */
static void k_bar_uninitialized(bool fault)
{
	uint64_t *bar = (uint64_t *)emu_smem();

	if (threadIdx.x == 0 && !fault) {
		hop_bar_init(bar, 1);
		hop_fence_bar_init();
		hop_bar_arrive(bar);
	}
	__syncthreads();
	if (threadIdx.x == 0)
		hop_bar_wait(bar, 0);
}

static int bar_uninitialized(bool fault)
{
	EMU_LAUNCH(1, 1, THREADS, 64, k_bar_uninitialized, fault);
	return 0;
}

/* A third arrival on a barrier of count 2 in one phase (held open by
 * bytes still expected, so the phase cannot have moved on). */
static void k_bar_overarrived(bool fault)
{
	uint64_t *bar = (uint64_t *)emu_smem();

	if (threadIdx.x)
		return;
	hop_bar_init(bar, 2);
	hop_fence_bar_init();
	hop_bar_expect_tx(bar, 64);
	hop_bar_arrive(bar);
	if (fault)
		hop_bar_arrive(bar);
}

static int bar_overarrived(bool fault)
{
	EMU_LAUNCH(1, 1, THREADS, 64, k_bar_overarrived, fault);
	return 0;
}

/* One tensor copy of a 16 x 16 bf16 box from column COL of a 16 x 64
 * tensor, to an aligned buffer large enough, on an initialized barrier,
 * waited for where WAIT; the barrier initialized again after the copy's
 * issue where REINIT (after its wait where WAIT). */
static void k_one_copy(const hop_map *map, int col, bool wait, bool reinit)
{
	uint8_t *sm = emu_smem();
	uint64_t *bar = (uint64_t *)(sm + 512);

	if (threadIdx.x)
		return;
	hop_bar_init(bar, 1);
	hop_fence_bar_init();
	hop_bar_expect_tx(bar, 512);
	hop_tma_2d(sm, map, col, 0, bar);
	if (wait)
		hop_bar_wait(bar, 0);
	if (reinit)
		hop_bar_init(bar, 1);
}

static int one_copy(int col, bool wait, bool reinit)
{
	static uint16_t x[16 * 64] __attribute__((aligned(16)));
	hop_map map, *map_p = &map;

	if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x, 64, 16, 128, 16,
		   16, CU_TENSOR_MAP_SWIZZLE_NONE))
		return fprintf(stderr, "encode failed\n"), 1;
	EMU_LAUNCH(1, 1, THREADS, 512 + 64, k_one_copy, map_p, col, wait,
		   reinit);
	return 0;
}

/* A box starting at column 4 (8 bytes into a row; without the fault
 * column 8, 16 bytes): only the start is wrong. */
static int tma_misaligned(bool fault)
{
	return one_copy(fault ? 4 : 8, true, false);
}

/* A copy never waited for (without the fault: waited for): the block
 * ends with it in flight. */
static int tma_unwaited(bool fault)
{
	return one_copy(8, !fault, false);
}

/* The copy's barrier initialized again while the copy is in flight
 * (without the fault: once it was waited for). */
static int tma_reinit(bool fault)
{
	return one_copy(8, !fault, true);
}

/* A tensor copy through a map never encoded (zeros). */
static int tma_unencoded(bool fault)
{
	static uint16_t x[16 * 64] __attribute__((aligned(16)));
	hop_map map = {}, *map_p = &map;

	if (!fault &&
	    encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x, 64, 16, 128, 16,
		   16, CU_TENSOR_MAP_SWIZZLE_NONE))
		return fprintf(stderr, "encode failed\n"), 1;
	EMU_LAUNCH(1, 1, THREADS, 512 + 64, k_one_copy, map_p, 8, true,
		   false);
	return 0;
}

/* __syncthreads reached by the first 64 threads only. */
static void k_partial_syncthreads(bool fault)
{
	if (!fault || threadIdx.x < 64)
		__syncthreads();
}

static int partial_syncthreads(bool fault)
{
	EMU_LAUNCH(1, 1, THREADS, 64, k_partial_syncthreads, fault);
	return 0;
}

/* A barrier in global memory, not shared. */
static void k_bar_global(uint64_t *global, bool fault)
{
	if (threadIdx.x == 0)
		hop_bar_init(fault ? global : (uint64_t *)emu_smem(), 1);
}

static int bar_global(bool fault)
{
	static uint64_t global;
	uint64_t *global_p = &global;

	EMU_LAUNCH(1, 1, THREADS, 64, k_bar_global, global_p, fault);
	return 0;
}

/* Products left pending at the kernel's end (no wait). */
static void k_product_unwaited(bool fault)
{
	uint8_t *sm = emu_smem();
	uint32_t af[4] = {0, 0, 0, 0};
	float acc[64];

	memset(sm + threadIdx.x * 128, 0, 128);
	__syncthreads();
	hop_wgmma_fence();
	hop_wgmma(acc, af, hop_desc_sw128(sm), 0);
	hop_wgmma_commit();
	if (!fault)
		hop_wgmma_wait<0>();
}

static int product_unwaited(bool fault)
{
	EMU_LAUNCH(1, 1, THREADS, 128 * 128, k_product_unwaited, fault);
	return 0;
}

/* Clusters of two blocks along y (as gemm_qw's QW_CLUSTER launches
 * them): a two-buffer pipeline in which each tile is two boxes and block
 * r copies box r into both blocks (multicast); a buffer is refilled once
 * the block's own warps released it (empty, 4 arrivals) and the other
 * block's lead said its copy is free too (peer, 1 remote arrival). Every
 * thread of both blocks compares its 16 bytes of each tile with SRC
 * (STALE); MISPLACED counts threads whose block index is not the one
 * its cluster rank gives. */
#define MC_BOX	 (PIPE_TILE_BYTES / 2)

static void k_mc_pipeline(const hop_map *map, const uint8_t *src, int *stale,
			  int *misplaced)
{
	uint8_t *sm = emu_smem();
	uint64_t *full = (uint64_t *)(sm + PIPE_BUFS * PIPE_TILE_BYTES),
		 *empty = full + PIPE_BUFS, *peer = empty + PIPE_BUFS;
	unsigned tid = threadIdx.x, rank = hop_cluster_rank();

	*misplaced += blockIdx.y % 2 != rank || blockIdx.x != 0;
	if (tid == 0) {
		for (int b = 0; b < PIPE_BUFS; b++) {
			hop_bar_init(&full[b], 1);
			hop_bar_init(&empty[b], THREADS / 32);
			hop_bar_init(&peer[b], 1);
		}
		hop_fence_bar_init();
	}
	hop_cluster_sync(); /* both blocks' barriers before any copy */
	if (tid == 0)
		for (int i = 0; i < PIPE_BUFS; i++) {
			hop_bar_expect_tx(&full[i], PIPE_TILE_BYTES);
			hop_tma_2d_multicast(sm + i * PIPE_TILE_BYTES +
						 rank * MC_BOX,
					     map, 64 * (int)rank, PIPE_ROWS * i,
					     &full[i], 3);
		}
	__syncthreads();
	for (int i = 0; i < PIPE_TILES; i++) {
		int b = i % PIPE_BUFS, use = i / PIPE_BUFS;
		uint8_t *buf = sm + b * PIPE_TILE_BYTES;

		hop_bar_wait(&full[b], use % 2);
		*stale += tile_stale(buf, src, i, tid);
		__syncwarp();
		if (tid % 32 == 0)
			hop_bar_arrive(&empty[b]);
		if (tid == 0 && i + PIPE_BUFS < PIPE_TILES) {
			hop_bar_wait(&empty[b], use % 2);
			hop_bar_arrive_remote(&peer[b], rank ^ 1);
			hop_bar_wait(&peer[b], use % 2);
			hop_bar_expect_tx(&full[b], PIPE_TILE_BYTES);
			hop_tma_2d_multicast(buf + rank * MC_BOX, map,
					     64 * (int)rank,
					     PIPE_ROWS * (i + PIPE_BUFS),
					     &full[b], 3);
		}
	}
	hop_cluster_sync(); /* no block ends while the other may copy */
}

static int mc_pipeline(bool fault)
{
	static uint8_t src[PIPE_TILES * PIPE_TILE_BYTES]
	    __attribute__((aligned(16)));
	int stale = 0, misplaced = 0, *stale_p = &stale,
	    *misplaced_p = &misplaced;
	hop_map map, *map_p = &map;

	(void)fault;
	if (pipe_tensor(src, 0x2545f4914f6cdd1dull, &map))
		return 1;
	/* grid (1, 4): two clusters, run one after the other */
	emu_launch_grid_cl(dim3(1, 4, 1), dim3(THREADS), dim3(1, 2, 1),
			   PIPE_BUFS * PIPE_TILE_BYTES + 64,
			   [=]() {
				   k_mc_pipeline(map_p, src, stale_p,
						 misplaced_p);
			   });
	fprintf(stderr, "%d tiles in 2 clusters of 2: %d bytes unlike the "
			"tensor's, %d threads misplaced\n",
		PIPE_TILES, stale, misplaced);
	return stale || misplaced;
}

/* A cluster of two: block 0 copies a box into both blocks (or, where
 * ARRIVE, arrives on block 1's barrier) while block 1 first takes a few
 * block barriers. MODE 0: correct (a cluster barrier after the inits;
 * block 1 waits for the bytes or the arrival); 1: no cluster barrier
 * after the inits (block 0's copy meets block 1's barrier before its
 * init); 2: block 1 ends without waiting, before block 0 (which first
 * takes a few block barriers) reaches it; 3: block 0's copy names a
 * rank the cluster has not (mask 0b101). */
static void k_mc_peer(const hop_map *map, int mode, bool arrive)
{
	uint8_t *sm = emu_smem();
	uint64_t *bar = (uint64_t *)(sm + 512);
	unsigned rank = hop_cluster_rank();

	for (int i = 0; i < 3 && rank == 1; i++)
		__syncthreads();
	if (threadIdx.x == 0) {
		hop_bar_init(bar, arrive ? 1 : 1 + rank);
		hop_fence_bar_init();
	}
	if (mode != 1)
		hop_cluster_sync();
	if (rank == 1 && mode == 2)
		return;
	for (int i = 0; i < 4 && rank == 0 && mode == 2; i++)
		__syncthreads();
	if (threadIdx.x == 0 && arrive) {
		if (rank == 0)
			hop_bar_arrive_remote(bar, 1);
		else
			hop_bar_wait(bar, 0);
	} else if (threadIdx.x == 0) {
		/* block 1 counts its own arrival with the bytes (count 2):
		 * it waits for block 0's copy; block 0 issues it before its
		 * own arrival (which may sit out rounds: emu_stall) */
		if (rank == 0)
			hop_tma_2d_multicast(sm, map, 8, 0, bar,
					     mode == 3 ? 5 : 3);
		hop_bar_expect_tx(bar, 512);
		if (rank == 1)
			hop_bar_arrive(bar);
		hop_bar_wait(bar, 0);
	}
	/* block 0 outlives the copies' landing (a few rounds) */
	for (int i = 0; i < 8 && rank == 0 && mode == 2; i++)
		__syncthreads();
}

static int mc_peer(int mode, bool arrive)
{
	static uint16_t x[16 * 64] __attribute__((aligned(16)));
	hop_map map, *map_p = &map;

	if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x, 64, 16, 128, 16,
		   16, CU_TENSOR_MAP_SWIZZLE_NONE))
		return fprintf(stderr, "encode failed\n"), 1;
	emu_launch_grid_cl(dim3(2, 1, 1), dim3(THREADS), dim3(2, 1, 1),
			   512 + 64,
			   [=]() { k_mc_peer(map_p, mode, arrive); });
	return 0;
}

static int mc_before_peer_init(bool fault)
{
	return mc_peer(fault ? 1 : 0, false);
}

static int mc_outside_cluster(bool fault)
{
	return mc_peer(fault ? 3 : 0, false);
}

static int mc_after_peer_exit(bool fault)
{
	return mc_peer(fault ? 2 : 0, false);
}

static int remote_arrive_after_peer_exit(bool fault)
{
	return mc_peer(fault ? 2 : 0, true);
}

struct selftest_case {
	int (*run)(bool fault); /* 0: the kernel's results as expected */
	const char *report;	/* the emulation's words for the fault;
				   NULL: no fault to add */
	const char *detail;	/* more of them, or NULL */
};

/* C's run (FAULT) in a child; its wait status, its stderr in ERR. */
static int run_child(const selftest_case *c, bool fault, char *err,
		     size_t n)
{
	FILE *f = tmpfile();
	struct rlimit no_core = {0, 0};
	size_t got;
	pid_t pid;
	int st;

	if (!f)
		return fprintf(stderr, "tmpfile: %s\n", strerror(errno)), -1;
	fflush(stdout), fflush(stderr);
	pid = fork();
	if (pid == 0) {
		setrlimit(RLIMIT_CORE, &no_core);
		alarm(CHILD_ALARM_S);
		dup2(fileno(f), 2);
		st = c->run(fault);
		fflush(stderr);
		_exit(st ? 1 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		st = -1;
	rewind(f);
	got = fread(err, 1, n - 1, f);
	err[got] = 0;
	fclose(f);
	return st;
}

/* The case clean without its fault (exit 0, no report), then, where it
 * has one, dead with its fault (an abort or a failing exit) on its own
 * report. */
static void test_case(void **state)
{
	const selftest_case *c = (const selftest_case *)*state;
	static char err[1 << 16];
	int st = run_child(c, false, err, sizeof err);
	bool died;

	if (st || strstr(err, "emu:"))
		print_error("clean run: status %#x, stderr:\n%s", st, err);
	assert_int_equal(st, 0);
	assert_null(strstr(err, "emu:"));
	if (!c->report) {
		print_message("  %.*s\n", (int)strcspn(err, "\n"), err);
		return;
	}
	st = run_child(c, true, err, sizeof err);
	died = (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT) ||
	       (WIFEXITED(st) && WEXITSTATUS(st));
	if (!died || !strstr(err, c->report) ||
	    (c->detail && !strstr(err, c->detail)))
		print_error("faulty run: status %#x, stderr:\n%s(wanted: %s; "
			    "%s)\n",
			    st, err, c->report, c->detail ? c->detail : "");
	else
		print_message("  %.*s\n", (int)strcspn(err, "\n"), err);
	assert_true(died);
	assert_non_null(strstr(err, c->report));
	if (c->detail)
		assert_non_null(strstr(err, c->detail));
}

static const selftest_case product_128 = {product_n128, NULL, NULL};
static const selftest_case product_256 = {product_n256, NULL, NULL};
static const selftest_case phases = {pipeline, NULL, NULL};
static const selftest_case late = {copy_late, NULL, NULL};
static const selftest_case b_changed = {
    b_overwritten, "a warpgroup product's B (shared 0..) changed between "
		   "its issue and its wait",
    NULL};
static const selftest_case b_outside = {
    b_past_shared, "emu: wgmma's B (16384 bytes from 0) past the block's "
		   "16320 bytes of shared memory",
    NULL};
static const selftest_case bar_never_init = {
    bar_uninitialized, "emu: wait on an mbarrier never initialized",
    NULL};
static const selftest_case bar_past_count = {
    bar_overarrived, "emu: mbarrier ", ": an arrival past its count"};
static const selftest_case tma_column = {
    tma_misaligned, "emu: tensor copy of (4, 0) to shared 0 (512 bytes): "
		    "misaligned",
    NULL};
static const selftest_case tma_in_flight = {
    tma_unwaited, "ended with 1 tensor copies in flight on mbarrier", NULL};
static const selftest_case tma_bar_reinit = {
    tma_reinit, "emu: mbarrier ", "initialized with 1 tensor copies in flight"};
static const selftest_case tma_map = {
    tma_unencoded, "emu: tensor copy with a map not encoded", NULL};
static const selftest_case sync_partial = {
    partial_syncthreads, "emu: deadlock at block (0, 0, 0), 64 threads "
			 "waiting",
    "thread 0: wait 1 at"}; /* 1: __syncthreads */
static const selftest_case bar_not_shared = {
    bar_global, "is not in this block's shared memory", NULL};
static const selftest_case mc_phases = {mc_pipeline, NULL, NULL};
static const selftest_case mc_init = {
    mc_before_peer_init, "emu: tensor copy on an mbarrier never initialized",
    NULL};
static const selftest_case mc_mask = {
    mc_outside_cluster, "emu: tensor copy multicast to ranks 0x5 of a "
			"cluster of 2 blocks",
    NULL};
static const selftest_case mc_exit = {
    mc_after_peer_exit, "emu: a tensor copy landed in block 1's shared "
			"memory after that block ended",
    NULL};
static const selftest_case remote_exit = {
    remote_arrive_after_peer_exit, "emu: an arrival on block 1's mbarrier ",
    "after that block ended"};
static const selftest_case unwaited = {
    product_unwaited, "ended with warpgroup products not waited for",
    NULL};

#define SELFTEST(name, c) {name, test_case, NULL, NULL, (void *)&c}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    SELFTEST("wgmma_n128_tma_swizzle", product_128),
	    SELFTEST("wgmma_n256_tma_swizzle", product_256),
	    SELFTEST("mbarrier_phases_pipeline", phases),
	    SELFTEST("tma_lands_after_issue", late),
	    SELFTEST("b_overwritten_before_wait", b_changed),
	    SELFTEST("b_past_shared_memory", b_outside),
	    SELFTEST("wait_uninitialized_mbarrier", bar_never_init),
	    SELFTEST("arrival_past_count", bar_past_count),
	    SELFTEST("tma_box_column_misaligned", tma_column),
	    SELFTEST("tma_map_not_encoded", tma_map),
	    SELFTEST("tma_in_flight_at_exit", tma_in_flight),
	    SELFTEST("mbarrier_init_under_copy", tma_bar_reinit),
	    SELFTEST("syncthreads_partial_deadlock", sync_partial),
	    SELFTEST("mbarrier_outside_shared", bar_not_shared),
	    SELFTEST("products_not_waited", unwaited),
	    SELFTEST("multicast_cluster_pipeline", mc_phases),
	    SELFTEST("multicast_before_peer_init", mc_init),
	    SELFTEST("multicast_outside_cluster", mc_mask),
	    SELFTEST("multicast_after_peer_exit", mc_exit),
	    SELFTEST("remote_arrive_after_peer_exit", remote_exit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
