/* The part of the CUDA driver API that kernels/gemm_qw.cu uses, for the
 * CPU emulation (emu.h): tensor maps, encoded by emu.cc's
 * cuTensorMapEncodeTiled (reached as on the device, through
 * cudaGetDriverEntryPointByVersion) into its own layout, which
 * hopper_dev.h's emulated copies read. */
#ifndef O1_EMU_CUDA_H
#define O1_EMU_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;
typedef enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1 } CUresult;
typedef struct CUtensorMap_st {
	alignas(64) cuuint64_t opaque[16];
} CUtensorMap;
typedef enum {
	CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
	CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
} CUtensorMapDataType;
typedef enum { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 } CUtensorMapInterleave;
typedef enum {
	CU_TENSOR_MAP_SWIZZLE_NONE = 0,
	CU_TENSOR_MAP_SWIZZLE_128B = 3,
} CUtensorMapSwizzle;
typedef enum {
	CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
	CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
} CUtensorMapL2promotion;
typedef enum {
	CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
} CUtensorMapFloatOOBfill;

typedef enum {
	cudaDriverEntryPointSuccess = 0,
	cudaDriverEntryPointSymbolNotFound = 1,
} cudaDriverEntryPointQueryResult;
enum { cudaEnableDefault = 0 };

/* "cuTensorMapEncodeTiled" (2-D maps of UINT8 or BFLOAT16, no interleave,
 * element strides 1, swizzle none or 128B), nothing else. */
int cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
				     unsigned version,
				     unsigned long long flags,
				     cudaDriverEntryPointQueryResult *q);

#ifdef __cplusplus
}
#endif

/* The emulated map's words (emu.cc writes them, emu_tma_2d reads them). */
enum {
	EMU_MAP_BASE,
	EMU_MAP_ELEM, /* bytes an element */
	EMU_MAP_DIM0, /* elements a row */
	EMU_MAP_DIM1, /* rows */
	EMU_MAP_PITCH, /* bytes from a row to the next */
	EMU_MAP_BOX0,
	EMU_MAP_BOX1,
	EMU_MAP_SWIZZLE, /* 1: 128-byte swizzle */
	EMU_MAP_MAGIC,
};
#define EMU_MAP_MAGIC_V 0x6f31656d756d6170ull

#endif
