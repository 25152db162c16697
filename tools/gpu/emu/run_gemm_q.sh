#!/usr/bin/env bash
# Runs tests/kernels/test_gemm_q_cuda against kernels/gemm_q.cu,
# gemm_qp.cu, gemm_qi8.cu and gemm_qw.cu emulated on the CPU (swiglu.cu
# for the reference of gemm_qw's fused SwiGLU) (emu.h; mma_dev.h's
# tensor-core operations become warp exchanges that move the elements of
# PTX's fragment layouts, its asynchronous copies plain copies;
# hopper_dev.h's wgmma, mbarriers and tensor copies run on emu.cc, the
# copies landing rounds after their issue and a product's B checked
# unchanged until its wait), so the tile loads, the masks, the pipeline's
# stages, barriers and fragment indexing are checked before GPU time is
# spent; gemm_qp_octets.cc checks gemm_qp's
# decode against quant_dev.h's bitwise. The .cu files are copied into
# build-emu/ so that their "cuda_launch.h" is this folder's (extern
# __shared__ arrays become emu_smem()). Quick mode (O1_TEST_QUICK=1): a
# subset of the shapes; a few minutes on one core. x86-64, g++ and cmocka.
# O1_EMU_OUT=DIR builds in DIR instead (two runs side by side);
# O1_EMU_DEFINES adds definitions to the kernels' compile (a compile-time
# switch's variant, e.g. "-DQW_CLUSTER=2", without a copy of the tree).
# SEED: O1_TEST_SEED (default: the time), the tests' data and the
# emulation's interleavings.
#   [O1_EMU_DEFINES=-DNAME=V] tools/gpu/emu/run_gemm_q.sh [SEED]
set -euo pipefail
# NVLink multicast stays off wherever a GPU program starts (KINDS.md); this
# one runs on the CPU, the rule is kept anyway so every script reads alike.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
root=$PWD
emu=$root/tools/gpu/emu
out=${O1_EMU_OUT:-$root/build-emu}
mkdir -p "$out"
inc=(-I"$emu" -I"$root/kernels" -I"$root" -I"$root/daemon")
shared='s/extern __shared__ \(__align__([0-9]*) \)\{0,1\}\([a-z_0-9 ]*[a-z_0-9]\) \([a-z_0-9]*\)\[\];/\2 *\3 = (\2 *)emu_smem();/'
read -r -a defs <<<"${O1_EMU_DEFINES:-}"
cxx=(g++ -std=c++17 -O1 -g -fno-pie -ffp-contract=off -Wno-psabi -include "$emu/emu.h" "${inc[@]}" ${defs[@]+"${defs[@]}"})
cc=(gcc -std=gnu11 -D_GNU_SOURCE -O1 -g -fno-pie -ffp-contract=off
    -DO1_SHARED_DIR="\"$root/../shared\"" "${inc[@]}")
"${cxx[@]}" -c "$emu/emu.cc" -o "$out/emu.o"
objs=()
for c in kernels/quant kernels/quant_k kernels/matmul_q kernels/gemv_q kernels/gemv_q8 \
	 kernels/threads common/log common/error \
	 tests/kernels/kernel_cuda_test tests/kernels/quant_cuda_test; do
	o=$out/$(basename "$c")_c.o
	"${cc[@]}" -O2 -Wno-psabi -c "$root/$c.c" -o "$o"
	objs+=("$o")
done
kobjs=()
for k in gemm_q gemm_qp gemm_qi8 gemm_qw swiglu; do
	sed -e "$shared" "$root/kernels/$k.cu" >"$out/${k}_emu.cc"
	"${cxx[@]}" -c "$out/${k}_emu.cc" -o "$out/${k}_emu.o"
	kobjs+=("$out/${k}_emu.o")
done
"${cc[@]}" -c "$root/tests/kernels/test_gemm_q_cuda.c" -o "$out/test_gemm_q.o"
g++ -no-pie -o "$out/test_gemm_q_cuda" "$out/test_gemm_q.o" "${kobjs[@]}" \
  "$out/emu.o" "${objs[@]}" -lcmocka -lm -lpthread
# O1_EMU_SMEM_SHIFT: a launch in two starts its shared memory at a
# 16-byte multiple below 1024 (gemm_qw's bytes before its first boundary)
O1_EMU_SMEM_SHIFT=1 O1_TEST_QUICK=${O1_TEST_QUICK:-1} O1_TEST_SEED=${1:-$(date +%s)} \
  "$out/test_gemm_q_cuda"
# gemm_qp's decode against quant_dev.h's, bitwise
"${cxx[@]}" -I"$out" -c "$emu/gemm_qp_octets.cc" -o "$out/gemm_qp_octets.o"
g++ -no-pie -o "$out/gemm_qp_octets" "$out/gemm_qp_octets.o" \
  "$out/emu.o" "${objs[@]}" -lcmocka -lm -lpthread
"$out/gemm_qp_octets"
