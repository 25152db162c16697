/* CUDA error reporting: one log line per failure, with where it happened. */
#include "cuda_util.h"

extern "C" {
#include "common/error.h"
#include "common/log.h"
}

extern "C" int o1_cuda_check(cudaError_t err, const char *what,
			     const char *file, int line)
{
	if (err == cudaSuccess)
		return 0;
	o1_log_write(O1_LOG_ERROR, file, line, "cuda: %s: %s (%s)", what,
		     cudaGetErrorString(err), cudaGetErrorName(err));
	return -O1_E_CUDA;
}

extern "C" int o1_cuda_probe(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
		cudaGetLastError();
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}
