/* gemm_qp.cu's gp_octet (Q8_0, Q4_K and Q6_K decoded with a byte
 * permutation an element) against quant_dev.h's qd_octet, bitwise, on
 * 20,000 random blocks of each type (every unit, every octet; the f16
 * scales kept finite), on the CPU emulation. run_gemm_q.sh builds it
 * beside the emulated gemm_qp.cu (gemm_qp_emu.cc, included: its decode
 * functions are static) and runs it after test_gemm_qp_cuda: exit 0 when
 * every octet matches, 1 with the count of those that do not. */
#include "gemm_qp_emu.cc"

#include <stdio.h>
#include <stdlib.h>

template <int TYPE> static unsigned mismatches(uint32_t bytes, uint32_t units)
{
	static uint8_t blk[256] __attribute__((aligned(16)));
	uint64_t x = 0x9e3779b97f4a7c15ull;
	unsigned bad = 0;

	for (int it = 0; it < 20000; it++) {
		for (uint32_t i = 0; i < bytes; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			blk[i] = (uint8_t)(x >> 56);
		}
		/* scales' f16 exponents below 0x1f: finite */
		if (TYPE == O1_QUANT_Q8_0)
			blk[1] &= 0x3b;
		else if (TYPE == O1_QUANT_Q4_K)
			blk[1] &= 0x3b, blk[3] &= 0x3b;
		else
			blk[209] &= 0x3b;
		for (uint32_t u = 0; u < units; u++) {
			qd_unit_head h = qd_head<TYPE>(blk, u);

			for (int o = 0; o < 4; o++) {
				float a[8], b[8];

				qd_octet<TYPE>(h, o, a);
				gp_octet<TYPE>(h, o, b);
				bad += memcmp(a, b, sizeof(a)) != 0;
			}
		}
	}
	return bad;
}

int main(void)
{
	unsigned q8 = mismatches<O1_QUANT_Q8_0>(O1_QUANT_Q8_0_BYTES, 1);
	unsigned q4k = mismatches<O1_QUANT_Q4_K>(O1_QUANT_Q4_K_BYTES, 8);
	unsigned q6k = mismatches<O1_QUANT_Q6_K>(O1_QUANT_Q6_K_BYTES, 8);

	printf("gemm_qp octets unlike qd_octet: q8_0 %u, q4_k %u, q6_k %u\n",
	       q8, q4k, q6k);
	return q8 || q4k || q6k;
}
