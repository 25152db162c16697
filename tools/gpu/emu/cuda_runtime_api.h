/* The part of the CUDA runtime API that kernels/sample.cu, gemv.cu,
 * attention.cu, rope.cu, rmsnorm.cu, their tests and tools/gpu's
 * bench_qkv_q use, for the CPU
 * emulation (emu.h): memory
 * is host memory, launches run at once (or are recorded while a stream
 * captures), events and streams are placeholders. */
#ifndef O1_EMU_CUDA_RUNTIME_API_H
#define O1_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 } cudaError_t;
enum {
	cudaMemcpyHostToDevice,
	cudaMemcpyDeviceToHost,
	cudaMemcpyDeviceToDevice,
};
enum { cudaStreamCaptureModeThreadLocal };
enum { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
typedef struct emu_stream *cudaStream_t;
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
/* an event: the host's clock when recorded (work runs at once) */
typedef struct emu_event *cudaEvent_t;
enum { cudaStreamNonBlocking = 1 };

cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, int kind);
cudaError_t cudaMemset(void *d, int v, size_t n);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
				 unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
/* the asynchronous copies run at once (no stream capture) */
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, int kind,
			    cudaStream_t st);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
/* EMU_SMS for the multiprocessor count (C tests size cases by it too). */
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int dev);
/* The one emulated device (C tests ask for it too). */
static inline cudaError_t cudaGetDevice(int *dev)
{
	*dev = 0;
	return cudaSuccess;
}

#ifdef __cplusplus
}

template <class F> static inline cudaError_t cudaFuncSetAttribute(F, int, int)
{
	return cudaSuccess;
}

/* A __device__ variable's bytes (a plain static here). */
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &sym,
					       size_t n, size_t off = 0,
					       int kind = 0)
{
	(void)kind;
	memcpy(dst, (const char *)&sym + off, n);
	return cudaSuccess;
}

/* Blocks a multiprocessor holds: shared memory's bound (228 KB, 1 KB a
 * block reserved) and 2048 threads'; registers are not modelled. */
template <class F>
static inline cudaError_t
cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, F, int threads,
					      size_t smem)
{
	int by_smem = (int)(228 * 1024 / (smem + 1024)),
	    by_threads = threads > 0 ? 2048 / threads : 0;

	*n = by_smem < by_threads ? by_smem : by_threads;
	return cudaSuccess;
}

/* One emulated device, of EMU_SMS multiprocessors (few: grids sized by
 * the multiprocessor count stay small, and their blocks stride). */
#define EMU_SMS 3
#endif

#endif
