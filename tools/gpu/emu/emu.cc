/* The fiber runtime of the CUDA emulation (emu.h). One cluster (the GX
 * blocks of a grid row) runs at a time, every thread a fiber on its own
 * stack, switched by a minimal x86-64 context switch. Barriers count
 * arrivals and release by generation. Each round resumes every live fiber
 * once, in a shuffled order; a round in which no fiber arrived anywhere
 * or passed an atomic is a deadlock, reported with where each block's
 * threads wait (addresses: addr2line -e BINARY). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <random>
#include <vector>

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
enum { W_RUN, W_BLOCK, W_CLUSTER, W_WARP_PUT, W_WARP_DONE, W_ATOMIC };

struct fiber : emu_thread {
	void *sp;
	unsigned rank; /* block within the running cluster */
	bool done;
	int wait;
	void *site;
};

struct emu_graph {
	std::vector<std::function<void()>> launches;
};

static void *sched_sp;
static std::vector<fiber> fibers;
static std::vector<barrier> block_bar;
static barrier cluster_bar;
static std::vector<warpx> warps;
static std::vector<unsigned char> smem_all;
static size_t smem_bytes;
static unsigned blocks, warps_per_block;
static std::function<void()> *kernel;
static uint64_t progress;
static std::mt19937_64 prng(12345);
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

static void fiber_main(void)
{
	(*kernel)();
	cur->done = true;
	progress++;
	yield();
	abort(); /* never resumed */
}

static void deadlock(emu_idx base, unsigned alive, unsigned nt)
{
	fprintf(stderr,
		"emu: deadlock at block (%u, %u, %u), %u threads waiting "
		"(wait: 1 block, 2 cluster, 3-4 warp, 5 atomic):\n",
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
	memset(smem_all.data(), 0xab, smem_all.size()); /* uninitialised */
	for (unsigned i = 0; i < n; i++) {
		fiber &f = fibers[i];
		void **top = (void **)(stacks + (size_t)(i + 1) * STACK_BYTES);

		f.rank = i / nt;
		f.tid = {i % nt, 0, 0};
		f.bid = {base.x + f.rank, base.y, base.z};
		f.bdim = {nt, 1, 1}, f.gdim = gdim;
		f.done = false, f.wait = W_RUN, f.site = NULL;
		*--top = NULL;		     /* fiber_main's return address */
		*--top = (void *)fiber_main; /* emu_switch's */
		for (int r = 0; r < 6; r++)
			*--top = NULL;
		f.sp = top;
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
		alive = 0;
		for (unsigned i : order) {
			if (fibers[i].done)
				continue;
			cur = &fibers[i], emu_cur = cur;
			emu_switch(&sched_sp, cur->sp);
			alive += !cur->done;
		}
		if (alive && progress == before)
			deadlock(base, alive, nt);
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
	smem_all.assign(gx * smem, 0);
	kernel = &f;
	for (unsigned y = 0; y < gy; y++)
		run_cluster({0, y, 0}, nt, {gx, gy, 1});
}

void emu_launch_grid(dim3 grid, dim3 block, size_t smem,
		     std::function<void()> f)
{
	std::vector<emu_idx> order;

	if (capture) {
		capture->launches.push_back(
		    [=]() { emu_launch_grid(grid, block, smem, f); });
		return;
	}
	if (!block.x || block.x % 32 || block.x > MAX_FIBERS || block.y != 1 ||
	    block.z != 1) {
		fprintf(stderr, "emu: blocks of %u x %u x %u threads not "
				"emulated\n",
			block.x, block.y, block.z);
		abort();
	}
	if (!stacks)
		stacks = (char *)mmap(
		    NULL, (size_t)MAX_FIBERS * STACK_BYTES,
		    PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (stacks == MAP_FAILED)
		abort();
	blocks = 1, smem_bytes = smem;
	smem_all.assign(smem, 0);
	kernel = &f;
	for (unsigned z = 0; z < grid.z; z++)
		for (unsigned y = 0; y < grid.y; y++)
			for (unsigned x = 0; x < grid.x; x++)
				order.push_back({x, y, z});
	std::shuffle(order.begin(), order.end(), prng);
	for (const emu_idx &b : order)
		run_cluster(b, block.x, {grid.x, grid.y, grid.z});
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
