/* The fiber runtime of the CUDA emulation (emu.h). One cluster (a block,
 * or the blocks of a cluster launch) runs at a time, every thread a fiber
 * on its own stack, switched by a minimal x86-64 context switch. Barriers
 * count arrivals and release by generation. Each round resumes every
 * live fiber once, in a shuffled order; a round in which no fiber arrived
 * anywhere or passed an atomic is a deadlock, reported with where each
 * block's threads wait (addresses: addr2line -e BINARY). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "cuda.h"
#include "emu.h"

extern "C" {
#include "common/error.h"
}

#if !defined(__x86_64__)
#error "the CUDA emulation switches fibers with x86-64 assembly"
#endif

/* Saves the callee-saved registers and the stack pointer in *FROM, then
 * resumes TO. */
extern "C" void emu_switch(void **from, void *to);
asm(R"(
.text
.globl emu_switch
emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
)");

#define STACK_BYTES (256u << 10)
#define MAX_FIBERS  8192u

emu_thread *emu_cur;

struct barrier {
	unsigned count = 0, need = 0, gen = 0;
};

struct warpx {
	uint64_t slot[32];
	barrier put, done;
};

/* What a fiber last waited on, for the deadlock report. */
enum {
	W_RUN,
	W_BLOCK,
	W_CLUSTER,
	W_WARP_PUT,
	W_WARP_DONE,
	W_ATOMIC,
	W_WARPGROUP,
	W_MBARRIER
};

/* A warpgroup product issued by one thread: the group's A (64 x 16
 * bf16, gathered at issue), B's place in shared memory, the thread's
 * accumulators. */
struct wg_op {
	uint16_t a[64][16];
	uint16_t b[256][16]; /* B as it was at issue */
	const unsigned char *smem;
	uint32_t start; /* B's first byte (before the swizzle) */
	float *d;
	unsigned n;
	bool add;
};

/* A warpgroup's exchange of A fragments (4 words a thread). */
struct wgx {
	uint32_t slot[128][4];
	barrier put, done;
};

/* A tensor copy in flight, and an mbarrier's state. */
struct tma_copy {
	unsigned char *dst, *smem; /* smem: the block's shared memory */
	uint64_t map[16];
	int c0, c1;
	unsigned rounds; /* scheduler rounds before it lands */
};

struct mbar {
	unsigned count, pending, phase;
	int64_t tx;
	std::vector<tma_copy> copies;
};

struct fiber : emu_thread {
	void *sp;
	unsigned rank; /* block within the running cluster */
	bool done;
	int wait;
	void *site;
	unsigned stalled; /* rounds it sits out (emu_stall) */
	std::vector<wg_op> wg_open;		 /* issued, not committed */
	std::deque<std::vector<wg_op>> wg_groups; /* committed, pending */
};

struct emu_graph {
	std::vector<std::function<void()>> launches;
};

static void *sched_sp;
static std::vector<fiber> fibers;
static std::vector<barrier> block_bar;
static barrier cluster_bar;
static std::vector<warpx> warps;
static std::vector<wgx> wgxs; /* blocks of a multiple of 128 threads */
static std::vector<int> block_or;
static std::map<uint64_t *, mbar> mbars;
static std::vector<unsigned char> smem_all;
static size_t smem_bytes;
/* The shared address of a block's first byte of dynamic shared memory:
 * 0, or with O1_EMU_SMEM_SHIFT set, now and then (a launch in two) a
 * multiple of 16 below 1024, so that a kernel which aligns its buffers
 * to 1,024 bytes at run time (gemm_qw.cu) is checked where the array
 * does not start on that boundary. */
static uint32_t smem_origin;
static unsigned blocks, warps_per_block;
/* the running cluster's shape: block RANK at (RANK % x, RANK / x) from
 * its first block */
static emu_idx cluster_dim = {1, 1, 1};
static std::function<void()> *kernel;
static uint64_t progress;
/* The interleavings' seed: O1_TEST_SEED, as the tests' data (so that a
 * run's seed varies both), else a fixed one. */
static uint64_t emu_seed(void)
{
	const char *s = getenv("O1_TEST_SEED");

	return s ? strtoull(s, NULL, 10) : 12345;
}

static std::mt19937_64 prng(emu_seed());
static fiber *cur;
static char *stacks;
static emu_graph *capture;

static void yield(void)
{
	emu_switch(&cur->sp, sched_sp);
}

static void bar_wait(barrier *b, int what, void *site)
{
	unsigned g = b->gen;

	cur->wait = what, cur->site = site;
	progress++;
	if (++b->count == b->need) {
		b->count = 0, b->gen++;
	} else {
		while (b->gen == g)
			yield();
	}
	cur->wait = W_RUN;
}

void __attribute__((noinline)) emu_yield_maybe(void)
{
	cur->wait = W_ATOMIC, cur->site = __builtin_return_address(0);
	progress++;
	if (prng() % 4 == 0)
		yield();
	cur->wait = W_RUN;
}

void __attribute__((noinline)) __syncthreads(void)
{
	bar_wait(&block_bar[cur->rank], W_BLOCK, __builtin_return_address(0));
}

void __attribute__((noinline)) emu_cluster_sync(void)
{
	bar_wait(&cluster_bar, W_CLUSTER, __builtin_return_address(0));
}

unsigned emu_block_rank(void)
{
	return cur->rank;
}

unsigned emu_lane(void)
{
	return cur->tid.x & 31;
}

unsigned char *emu_smem(void)
{
	return smem_all.data() + cur->rank * smem_bytes;
}

void *emu_map_rank(void *p, unsigned rank)
{
	unsigned char *base = emu_smem(), *q = (unsigned char *)p;

	if (q < base || q >= base + smem_bytes || rank >= blocks) {
		fprintf(stderr,
			"emu: map_shared_rank(%p, %u) of a pointer "
			"outside this block's shared memory\n",
			p, rank);
		abort();
	}
	return smem_all.data() + rank * smem_bytes + (q - base);
}

static warpx *my_warp(void)
{
	return &warps[cur->rank * warps_per_block + cur->tid.x / 32];
}

void __attribute__((noinline)) emu_warp_put(const void *v, size_t n)
{
	warpx *w = my_warp();

	memcpy(&w->slot[cur->tid.x & 31], v, n);
	bar_wait(&w->put, W_WARP_PUT, __builtin_return_address(0));
}

void emu_warp_get(unsigned lane, void *v, size_t n)
{
	memcpy(v, &my_warp()->slot[lane], n);
}

void __attribute__((noinline)) emu_warp_done(void)
{
	bar_wait(&my_warp()->done, W_WARP_DONE, __builtin_return_address(0));
}

int __attribute__((noinline)) __syncthreads_or(int pred)
{
	int r;

	block_or[cur->rank] |= pred != 0;
	__syncthreads();
	r = block_or[cur->rank];
	__syncthreads();
	if (cur->tid.x == 0)
		block_or[cur->rank] = 0;
	__syncthreads();
	return r;
}

uint32_t emu_saddr(const void *p)
{
	const unsigned char *q = (const unsigned char *)p, *base = emu_smem();

	if (q < base || q >= base + smem_bytes) {
		fprintf(stderr, "emu: %p is not in this block's shared "
				"memory\n", p);
		abort();
	}
	return smem_origin + (uint32_t)(q - base);
}

/* A launch's smem_origin (O1_EMU_SMEM_SHIFT). */
static void pick_origin(void)
{
	static const bool shift = getenv("O1_EMU_SMEM_SHIFT") != NULL;

	smem_origin = shift && prng() % 2 ? 16 * (uint32_t)(prng() % 64) : 0;
}

/* Now and then the calling thread sits out a few dozen scheduler rounds
 * (a warp the device runs late), so that the others run ahead of it
 * through the asynchronous operations' windows. */
static void emu_stall(void)
{
	if (prng() % 8)
		return;
	cur->stalled = 1 + (unsigned)(prng() % 64);
	progress++; /* the rounds it sits out are not a deadlock */
	yield();
}

/* The 128-byte swizzle: 16-byte chunk bits 4-6 XOR address bits 7-9. */
static uint32_t swizzle128(uint32_t a)
{
	return a ^ ((a >> 7) & 7) << 4;
}

static float bf16_f(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

static void wg_read_b(const wg_op &op, uint16_t (*b)[16]);

void __attribute__((noinline)) emu_wgmma(float *d, unsigned n,
					 const uint32_t *a, uint64_t desc,
					 bool add)
{
	unsigned per = cur->bdim.x / 128, me = cur->tid.x % 128;
	uint32_t sbo = (uint32_t)(desc >> 32) & 0x3fff, end;
	wgx *w;
	wg_op op;

	if (wgxs.empty() || (desc >> 62) != 1 || sbo != 1024 >> 4 ||
	    (n != 128 && n != 256)) {
		fprintf(stderr, "emu: wgmma (n %u, descriptor %#llx, block "
				"of %u threads) not emulated: K-major B with "
				"the 128-byte swizzle, 1024-byte groups only\n",
			n, (unsigned long long)desc, cur->bdim.x);
		abort();
	}
	w = &wgxs[cur->rank * per + cur->tid.x / 128];
	memcpy(w->slot[me], a, 16);
	bar_wait(&w->put, W_WARPGROUP, __builtin_return_address(0));
	for (unsigned t = 0; t < 128; t++) {
		unsigned warp = t / 32, g = t % 32 / 4, q = t % 4;

		for (unsigned j = 0; j < 4; j++) {
			unsigned row = 16 * warp + g + 8 * (j % 2),
				 col = 2 * q + 8 * (j / 2);

			op.a[row][col] = (uint16_t)(w->slot[t][j] & 0xffff);
			op.a[row][col + 1] = (uint16_t)(w->slot[t][j] >> 16);
		}
	}
	bar_wait(&w->done, W_WARPGROUP, __builtin_return_address(0));
	op.start = (uint32_t)(desc & 0x3fff) << 4;
	/* the swizzle moves chunks within their 128-byte row: the last
	 * row's read may reach the row's end */
	end = ((op.start + (n - 1) * 128 + 31) | 127) + 1;
	if (op.start < smem_origin || end - smem_origin > smem_bytes) {
		fprintf(stderr, "emu: wgmma's B (%u bytes from %u) past the "
				"block's %zu bytes of shared memory\n",
			end - op.start, op.start, smem_bytes);
		abort();
	}
	op.smem = emu_smem(), op.d = d, op.n = n, op.add = add;
	wg_read_b(op, op.b);
	cur->wg_open.push_back(op);
}

/* OP's B (N x 16) from shared memory now. */
static void wg_read_b(const wg_op &op, uint16_t (*b)[16])
{
	for (unsigned col = 0; col < op.n; col++)
		for (unsigned k = 0; k < 16; k++)
			memcpy(&b[col][k],
			       op.smem - smem_origin +
				   swizzle128(op.start + 128 * col + 2 * k),
			       2);
}

/* The calling thread's accumulators of OP, with B as it is now, which
 * must be as it was at issue: a buffer refilled (or written) while a
 * product reading it is in flight is the kernel's race, reported. */
static void wg_retire(const wg_op &op)
{
	static uint16_t b[256][16];
	unsigned t = cur->tid.x % 128, warp = t / 32, g = t % 32 / 4,
		 q = t % 4;

	wg_read_b(op, b);
	if (memcmp(b, op.b, op.n * sizeof b[0])) {
		fprintf(stderr,
			"emu: block (%u, %u, %u) thread %u: a warpgroup "
			"product's B (shared %u..) changed between its issue "
			"and its wait\n",
			cur->bid.x, cur->bid.y, cur->bid.z, cur->tid.x,
			op.start);
		abort();
	}
	for (unsigned j = 0; j < op.n / 8; j++)
		for (unsigned e = 0; e < 4; e++) {
			unsigned row = 16 * warp + g + 8 * (e / 2),
				 col = 8 * j + 2 * q + e % 2;
			double s = 0;

			for (unsigned k = 0; k < 16; k++)
				s += (double)bf16_f(op.a[row][k]) *
				     bf16_f(b[col][k]);
			op.d[4 * j + e] =
			    (float)((op.add ? (double)op.d[4 * j + e] : 0) + s);
		}
}

void emu_wgmma_commit(void)
{
	cur->wg_groups.push_back(std::move(cur->wg_open));
	cur->wg_open.clear();
	emu_stall();
}

void emu_wgmma_wait(unsigned n)
{
	emu_stall();
	while (cur->wg_groups.size() > n) {
		for (const wg_op &op : cur->wg_groups.front())
			wg_retire(op);
		cur->wg_groups.pop_front();
	}
	/* wgmma.wait_group is .sync.aligned: the warp's lanes leave it
	 * together (a warp's arrival after it speaks for all its lanes) */
	unsigned v = 0;

	emu_warp_put(&v, 4);
	emu_warp_done();
}

/* The mbarrier at BAR, an address in any block of the cluster. */
static mbar &find_bar_at(uint64_t *bar, const char *what)
{
	auto it = mbars.find(bar);

	if (it == mbars.end()) {
		fprintf(stderr, "emu: %s on an mbarrier never initialized "
				"(%p)\n", what, (void *)bar);
		abort();
	}
	return it->second;
}

/* The mbarrier at BAR, in the calling block's shared memory. */
static mbar &find_bar(uint64_t *bar, const char *what)
{
	emu_saddr(bar);
	return find_bar_at(bar, what);
}

/* Whether every thread of block RANK of the running cluster has ended
 * (its shared memory, on the device, then another block's). */
static bool block_exited(unsigned rank)
{
	unsigned nt = (unsigned)(fibers.size() / blocks);

	for (unsigned t = 0; t < nt; t++)
		if (!fibers[rank * nt + t].done)
			return false;
	return true;
}

/* A phase completes once its arrivals and bytes are all in. */
static void bar_settle(mbar &m)
{
	if (m.pending == 0 && m.tx == 0) {
		m.phase ^= 1;
		m.pending = m.count;
	}
}

void emu_bar_init(uint64_t *bar, unsigned count)
{
	mbar &m = mbars[bar];

	emu_saddr(bar);
	/* their bytes would land on a barrier that no longer expects them */
	if (!m.copies.empty()) {
		fprintf(stderr, "emu: mbarrier %p initialized with %zu tensor "
				"copies in flight\n",
			(void *)bar, m.copies.size());
		abort();
	}
	m = mbar();
	m.count = m.pending = count;
	progress++;
}

/* One arrival on M (at BAR), announcing TX bytes. */
static void bar_arrive(mbar &m, uint64_t *bar, unsigned tx)
{
	if (!m.pending) {
		fprintf(stderr, "emu: mbarrier %p: an arrival past its "
				"count\n", (void *)bar);
		abort();
	}
	m.tx += tx;
	m.pending--;
	bar_settle(m);
	progress++;
	emu_stall();
}

void emu_bar_arrive(uint64_t *bar, unsigned tx)
{
	bar_arrive(find_bar(bar, "arrive"), bar, tx);
}

void emu_bar_arrive_remote(uint64_t *bar, unsigned rank)
{
	uint64_t *at = (uint64_t *)emu_map_rank(bar, rank);

	if (block_exited(rank)) {
		fprintf(stderr, "emu: an arrival on block %u's mbarrier %p "
				"after that block ended\n", rank, (void *)at);
		abort();
	}
	bar_arrive(find_bar_at(at, "remote arrive"), at, 0);
}

/* Copy C's box into shared memory; its bytes. */
static uint64_t tma_land(const tma_copy &c)
{
	const uint64_t *m = c.map;
	uint64_t el = m[EMU_MAP_ELEM], row_bytes = m[EMU_MAP_BOX0] * el;
	uint32_t d0 = (uint32_t)(c.dst - c.smem);
	const unsigned char *base = (const unsigned char *)m[EMU_MAP_BASE];

	for (uint64_t r = 0; r < m[EMU_MAP_BOX1]; r++)
		for (uint64_t b = 0; b < row_bytes; b++) {
			int64_t row = c.c1 + (int64_t)r,
				col = c.c0 + (int64_t)(b / el);
			uint32_t at = d0 + (uint32_t)(r * row_bytes + b);
			unsigned char v = 0;

			if (row >= 0 && (uint64_t)row < m[EMU_MAP_DIM1] &&
			    col >= 0 && (uint64_t)col < m[EMU_MAP_DIM0])
				v = base[(uint64_t)row * m[EMU_MAP_PITCH] +
					 (uint64_t)col * el + b % el];
			if (m[EMU_MAP_SWIZZLE]) /* of the address */
				at = swizzle128(smem_origin + at) - smem_origin;
			c.smem[at] = v;
		}
	return row_bytes * m[EMU_MAP_BOX1];
}

/* A tensor copy of MAP's box (C0, C1) to DST on BAR, in the calling
 * block's shared memory, or with MASK (multicast) to the same offsets
 * in each block of the cluster whose rank's bit is set. */
static void tma_issue(void *dst, const uint64_t *map, int c0, int c1,
		      uint64_t *bar, unsigned mask)
{
	uint32_t d0 = emu_saddr(dst);
	uint64_t bytes = map[EMU_MAP_BOX0] * map[EMU_MAP_ELEM] *
			 map[EMU_MAP_BOX1];

	if (!mask)
		find_bar(bar, "tensor copy");
	else
		emu_saddr(bar);
	if (map[EMU_MAP_MAGIC] != EMU_MAP_MAGIC_V) {
		fprintf(stderr, "emu: tensor copy with a map not encoded\n");
		abort();
	}
	/* the device's rules: the box's first byte of a row 16-byte
	 * aligned (another start is an illegal instruction on the H200),
	 * shared memory 128-byte aligned (1024 with the swizzle, whose
	 * pattern is of address bits) */
	if ((uint64_t)c0 * map[EMU_MAP_ELEM] % 16 ||
	    d0 % (map[EMU_MAP_SWIZZLE] ? 1024 : 128) ||
	    d0 - smem_origin + bytes > smem_bytes) {
		fprintf(stderr, "emu: tensor copy of (%d, %d) to shared %u "
				"(%llu bytes): misaligned or past the "
				"block's %zu bytes\n",
			c0, c1, d0, (unsigned long long)bytes, smem_bytes);
		abort();
	}
	if (blocks < 32 && mask >> blocks) {
		fprintf(stderr, "emu: tensor copy multicast to ranks %#x of "
				"a cluster of %u blocks\n", mask, blocks);
		abort();
	}
	for (unsigned r = 0; r < (mask ? blocks : 1); r++) {
		unsigned rank = mask ? r : cur->rank;
		tma_copy c;

		if (mask && !(mask >> r & 1))
			continue;
		/* the barrier of each block the bytes go to */
		mbar &m = find_bar_at((uint64_t *)emu_map_rank(bar, rank),
				      "tensor copy");

		c.smem = smem_all.data() + rank * smem_bytes;
		c.dst = c.smem + (d0 - smem_origin);
		memcpy(c.map, map, sizeof c.map);
		c.c0 = c0, c.c1 = c1;
		c.rounds = (unsigned)(prng() % 4);
		m.copies.push_back(c);
	}
	progress++;
}

void emu_tma_2d(void *dst, const uint64_t *map, int c0, int c1, uint64_t *bar)
{
	tma_issue(dst, map, c0, c1, bar, 0);
}

void emu_tma_2d_multicast(void *dst, const uint64_t *map, int c0, int c1,
			  uint64_t *bar, unsigned mask)
{
	if (!mask) {
		fprintf(stderr, "emu: tensor copy multicast to no block\n");
		abort();
	}
	tma_issue(dst, map, c0, c1, bar, mask);
}

bool __attribute__((noinline)) emu_bar_try_wait(uint64_t *bar,
						unsigned parity)
{
	mbar &m = find_bar(bar, "wait");

	if (m.phase != (parity & 1))
		return true;
	cur->wait = W_MBARRIER, cur->site = __builtin_return_address(0);
	yield();
	cur->wait = W_RUN;
	return false;
}

static void fiber_main(void)
{
	(*kernel)();
	if (!cur->wg_open.empty() || !cur->wg_groups.empty()) {
		fprintf(stderr,
			"emu: block (%u, %u, %u) thread %u ended with "
			"warpgroup products not waited for\n",
			cur->bid.x, cur->bid.y, cur->bid.z, cur->tid.x);
		abort();
	}
	cur->done = true;
	progress++;
	yield();
	abort(); /* never resumed */
}

static void deadlock(emu_idx base, unsigned alive, unsigned nt)
{
	fprintf(stderr,
		"emu: deadlock at block (%u, %u, %u), %u threads waiting "
		"(wait: 1 block, 2 cluster, 3-4 warp, 5 atomic, "
		"6 warpgroup, 7 mbarrier):\n",
		base.x, base.y, base.z, alive);
	for (unsigned b = 0; b < blocks; b++) {
		std::vector<std::pair<int, void *>> seen;

		for (unsigned t = 0; t < nt; t++) {
			const fiber &f = fibers[b * nt + t];
			std::pair<int, void *> k(f.done ? -1 : f.wait, f.site);

			if (std::find(seen.begin(), seen.end(), k) !=
			    seen.end())
				continue;
			seen.push_back(k);
			fprintf(stderr, "  block %u thread %u: wait %d at %p\n",
				b, t, k.first, k.second);
		}
	}
	abort();
}

/* The fibers of the cluster whose first block is BASE in a grid GDIM. */
static void start_fibers(emu_idx base, unsigned nt, emu_idx gdim)
{
	unsigned n = blocks * nt;

	fibers.assign(n, fiber());
	block_bar.assign(blocks, barrier());
	for (barrier &b : block_bar)
		b.need = nt;
	cluster_bar = barrier();
	cluster_bar.need = n;
	warps_per_block = (nt + 31) / 32;
	warps.assign(blocks * warps_per_block, warpx());
	for (warpx &w : warps)
		w.put.need = w.done.need = 32;
	wgxs.assign(nt % 128 ? 0 : blocks * (nt / 128), wgx());
	for (wgx &w : wgxs)
		w.put.need = w.done.need = 128;
	block_or.assign(blocks, 0);
	mbars.clear();
	memset(smem_all.data(), 0xab, smem_all.size()); /* uninitialised */
	for (unsigned i = 0; i < n; i++) {
		fiber &f = fibers[i];
		void **top = (void **)(stacks + (size_t)(i + 1) * STACK_BYTES);

		f.rank = i / nt;
		f.tid = {i % nt, 0, 0};
		f.bid = {base.x + f.rank % cluster_dim.x,
			 base.y + f.rank / cluster_dim.x % cluster_dim.y,
			 base.z + f.rank / (cluster_dim.x * cluster_dim.y)};
		f.bdim = {nt, 1, 1}, f.gdim = gdim;
		f.done = false, f.wait = W_RUN, f.site = NULL;
		*--top = NULL;		     /* fiber_main's return address */
		*--top = (void *)fiber_main; /* emu_switch's */
		for (int r = 0; r < 6; r++)
			*--top = NULL;
		f.sp = top;
	}
}

/* The tensor copies in flight: each lands a few rounds after its issue
 * (in any order), its bytes then counted on its barrier. */
static void land_copies(void)
{
	for (auto &kv : mbars) {
		mbar &m = kv.second;

		for (size_t i = 0; i < m.copies.size();) {
			if (m.copies[i].rounds) {
				m.copies[i].rounds--;
				i++;
			} else {
				unsigned rank = (unsigned)((m.copies[i].smem -
							    smem_all.data()) /
							   smem_bytes);

				if (block_exited(rank)) {
					fprintf(stderr,
						"emu: a tensor copy landed in "
						"block %u's shared memory after "
						"that block ended\n",
						rank);
					abort();
				}
				m.tx -= (int64_t)tma_land(m.copies[i]);
				m.copies.erase(m.copies.begin() + (long)i);
			}
			progress++;
		}
		bar_settle(m);
	}
}

static void run_cluster(emu_idx base, unsigned nt, emu_idx gdim)
{
	std::vector<unsigned> order(blocks * nt);

	start_fibers(base, nt, gdim);
	for (unsigned i = 0; i < order.size(); i++)
		order[i] = i;
	for (unsigned alive = blocks * nt; alive;) {
		uint64_t before = progress;

		std::shuffle(order.begin(), order.end(), prng);
		land_copies();
		alive = 0;
		for (unsigned i : order) {
			if (fibers[i].done)
				continue;
			if (fibers[i].stalled) {
				fibers[i].stalled--;
				progress++;
				alive++;
				continue;
			}
			cur = &fibers[i], emu_cur = cur;
			emu_switch(&sched_sp, cur->sp);
			alive += !cur->done;
		}
		if (alive && progress == before)
			deadlock(base, alive, nt);
	}
	/* a copy still in flight would write a block's shared memory
	 * after the block ended (on the device: after another took it) */
	for (auto &kv : mbars)
		if (!kv.second.copies.empty()) {
			fprintf(stderr,
				"emu: blocks of cluster (%u, %u, %u) ended with "
				"%zu tensor copies in flight on mbarrier %p\n",
				base.x, base.y, base.z, kv.second.copies.size(),
				(void *)kv.first);
			abort();
		}
}

void emu_launch(unsigned gx, unsigned gy, unsigned nt, size_t smem,
		std::function<void()> f)
{
	if (capture) {
		capture->launches.push_back(
		    [=]() { emu_launch(gx, gy, nt, smem, f); });
		return;
	}
	if (!gx || !nt || nt % 32 || gx * nt > MAX_FIBERS) {
		fprintf(stderr,
			"emu: launch of %u x %u blocks of %u threads "
			"not emulated\n",
			gx, gy, nt);
		abort();
	}
	if (!stacks)
		stacks = (char *)mmap(
		    NULL, (size_t)MAX_FIBERS * STACK_BYTES,
		    PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (stacks == MAP_FAILED)
		abort();
	blocks = gx, smem_bytes = smem;
	pick_origin();
	cluster_dim = {gx, 1, 1};
	smem_all.assign(gx * smem, 0);
	kernel = &f;
	for (unsigned y = 0; y < gy; y++)
		run_cluster({0, y, 0}, nt, {gx, gy, 1});
}

void emu_launch_grid_cl(dim3 grid, dim3 block, dim3 cl, size_t smem,
			std::function<void()> f)
{
	std::vector<emu_idx> order;
	unsigned n = cl.x * cl.y * cl.z;

	if (capture) {
		capture->launches.push_back(
		    [=]() { emu_launch_grid_cl(grid, block, cl, smem, f); });
		return;
	}
	if (!block.x || block.x % 32 || block.y != 1 || block.z != 1 || !n ||
	    grid.x % cl.x || grid.y % cl.y || grid.z % cl.z ||
	    n * block.x > MAX_FIBERS) {
		fprintf(stderr, "emu: clusters of %u x %u x %u blocks of %u x "
				"%u x %u threads in a grid of %u x %u x %u not "
				"emulated\n",
			cl.x, cl.y, cl.z, block.x, block.y, block.z, grid.x,
			grid.y, grid.z);
		abort();
	}
	if (!stacks)
		stacks = (char *)mmap(
		    NULL, (size_t)MAX_FIBERS * STACK_BYTES,
		    PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (stacks == MAP_FAILED)
		abort();
	blocks = n, smem_bytes = smem;
	pick_origin();
	cluster_dim = {cl.x, cl.y, cl.z};
	smem_all.assign(n * smem, 0);
	kernel = &f;
	for (unsigned z = 0; z < grid.z; z += cl.z)
		for (unsigned y = 0; y < grid.y; y += cl.y)
			for (unsigned x = 0; x < grid.x; x += cl.x)
				order.push_back({x, y, z});
	std::shuffle(order.begin(), order.end(), prng);
	for (const emu_idx &b : order)
		run_cluster(b, block.x, {grid.x, grid.y, grid.z});
}

void emu_launch_grid(dim3 grid, dim3 block, size_t smem,
		     std::function<void()> f)
{
	emu_launch_grid_cl(grid, block, dim3(1, 1, 1), smem, f);
}

extern "C" {
cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = aligned_alloc(256, (n + 255) / 256 * 256 + 256);
	if (!*p)
		return cudaErrorInvalidValue;
	memset(*p, 0xcd, n); /* uninitialised */
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, int kind)
{
	(void)kind;
	memcpy(d, s, n);
	return cudaSuccess;
}

cudaError_t cudaMemset(void *d, int v, size_t n)
{
	memset(d, v, n);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, int kind,
			    cudaStream_t st)
{
	(void)st;
	return cudaMemcpy(d, s, n, kind);
}

cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st)
{
	(void)st;
	return cudaMemset(d, v, n);
}

struct emu_event {
	struct timespec t;
};

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = (cudaEvent_t)calloc(1, sizeof(struct emu_event));
	return *e ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	free(e);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	(void)s;
	clock_gettime(CLOCK_MONOTONIC, &e->t);
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = (float)((b->t.tv_sec - a->t.tv_sec) * 1e3 +
		      (b->t.tv_nsec - a->t.tv_nsec) / 1e6);
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	*s = (cudaStream_t)malloc(1);
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	(void)flags;
	return cudaStreamCreate(s);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	free(s);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode)
{
	(void)s, (void)mode;
	capture = new emu_graph();
	return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
	(void)s;
	*g = capture;
	capture = NULL;
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
				 unsigned long long flags)
{
	(void)flags;
	*x = g;
	return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
	(void)s;
	for (auto &l : x->launches)
		l();
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	(void)x;
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	delete g;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int dev)
{
	(void)a, (void)dev;
	*v = EMU_SMS;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
	(void)e;
	return "emulated";
}

/* cuTensorMapEncodeTiled, for what gemm_qw.cu asks (cuda.h). */
static CUresult emu_encode_tiled(CUtensorMap *map, CUtensorMapDataType type,
				 cuuint32_t rank, void *base,
				 const cuuint64_t *dim,
				 const cuuint64_t *stride,
				 const cuuint32_t *box, const cuuint32_t *es,
				 CUtensorMapInterleave il,
				 CUtensorMapSwizzle sw,
				 CUtensorMapL2promotion l2,
				 CUtensorMapFloatOOBfill oob)
{
	uint64_t el = type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ? 2 : 1;
	uint64_t *v = map->opaque;

	(void)l2;
	if (rank != 2 ||
	    (type != CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 &&
	     type != CU_TENSOR_MAP_DATA_TYPE_UINT8) ||
	    (uintptr_t)base % 16 || stride[0] % 16 || !box[0] ||
	    box[0] > 256 || !box[1] || box[1] > 256 || es[0] != 1 ||
	    es[1] != 1 || il != CU_TENSOR_MAP_INTERLEAVE_NONE ||
	    oob != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE ||
	    (sw != CU_TENSOR_MAP_SWIZZLE_NONE &&
	     sw != CU_TENSOR_MAP_SWIZZLE_128B) ||
	    (sw == CU_TENSOR_MAP_SWIZZLE_128B && box[0] * el != 128) ||
	    box[0] * el % 16)
		return CUDA_ERROR_INVALID_VALUE;
	memset(v, 0, sizeof map->opaque);
	v[EMU_MAP_BASE] = (uint64_t)(uintptr_t)base;
	v[EMU_MAP_ELEM] = el;
	v[EMU_MAP_DIM0] = dim[0], v[EMU_MAP_DIM1] = dim[1];
	v[EMU_MAP_PITCH] = stride[0];
	v[EMU_MAP_BOX0] = box[0], v[EMU_MAP_BOX1] = box[1];
	v[EMU_MAP_SWIZZLE] = sw == CU_TENSOR_MAP_SWIZZLE_128B;
	v[EMU_MAP_MAGIC] = EMU_MAP_MAGIC_V;
	return CUDA_SUCCESS;
}

int cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
				     unsigned version,
				     unsigned long long flags,
				     cudaDriverEntryPointQueryResult *q)
{
	(void)version, (void)flags;
	if (strcmp(symbol, "cuTensorMapEncodeTiled")) {
		*fn = NULL;
		*q = cudaDriverEntryPointSymbolNotFound;
		return cudaSuccess;
	}
	*fn = (void *)emu_encode_tiled;
	*q = cudaDriverEntryPointSuccess;
	return cudaSuccess;
}

/* kernels/cuda_util.h, over the emulation. */
int o1_cuda_check(cudaError_t err, const char *what, const char *file, int line)
{
	if (!err)
		return 0;
	fprintf(stderr, "%s:%d: %s failed\n", file, line, what);
	return -O1_E_CUDA;
}

int o1_cuda_probe(void)
{
	return 0;
}
}
