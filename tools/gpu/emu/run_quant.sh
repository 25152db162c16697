#!/usr/bin/env bash
# Runs tests/kernels/test_quant_cuda against kernels/quant.cu,
# kernels/gemv_q.cu, kernels/swiglu.cu, kernels/rmsnorm.cu and
# kernels/rope.cu (references of its fused variants) emulated on the
# CPU (emu.h): no GPU needed, so the block decoding and the decode
# products can be checked before GPU time is spent. The .cu files are
# copied into build-emu/ so that their "cuda_launch.h" is this folder's
# (launches through emu_launch, PDL a no-op). Quick mode (O1_TEST_QUICK=1): every launch within the
# emulation's 8192 threads; a few minutes on one core. x86-64, g++ and
# cmocka. O1_EMU_OUT=DIR builds in DIR instead (two runs side by side);
# O1_EMU_DEFINES adds definitions to the kernels' compile (a compile-time
# switch's variant, e.g. "-DGQ_NORM_FOLD=0", without a copy of the tree).
# SEED: O1_TEST_SEED (default: the time).
#   [O1_EMU_DEFINES=-DNAME=V] tools/gpu/emu/run_quant.sh [SEED]
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
# extern __shared__ arrays become emu_smem() (as run_decode.sh does)
shared='s/extern __shared__ \(__align__(16) \)\{0,1\}\([a-z_0-9 ]*[a-z_0-9]\) \([a-z_0-9]*\)\[\];/\2 *\3 = (\2 *)emu_smem();/'
for k in quant gemv_q swiglu rmsnorm rope; do
	sed -e "$shared" "$root/kernels/$k.cu" >"$out/${k}_emu.cc"
done
# rms_reduce.h's guard against non-CUDA compilers goes (the copy beside
# the .cc files is found first)
sed -e '/^#ifndef __CUDACC__$/,/^#endif$/d' "$root/kernels/rms_reduce.h" >"$out/rms_reduce.h"
read -r -a defs <<<"${O1_EMU_DEFINES:-}"
cxx=(g++ -std=c++17 -O1 -g -fno-pie -ffp-contract=off -include "$emu/emu.h" "${inc[@]}" ${defs[@]+"${defs[@]}"})
cc=(gcc -std=gnu11 -D_GNU_SOURCE -O1 -g -fno-pie -ffp-contract=off
    -DO1_SHARED_DIR="\"$root/../shared\"" -DO1_SOURCE_DIR="\"$root\"" "${inc[@]}")
for k in quant gemv_q swiglu rmsnorm rope; do
	"${cxx[@]}" -c "$out/${k}_emu.cc" -o "$out/${k}_emu.o"
done
"${cxx[@]}" -c "$emu/emu.cc" -o "$out/emu.o"
"${cc[@]}" -c "$root/tests/kernels/test_quant_cuda.c" -o "$out/test_quant.o"
objs=()
for c in kernels/quant kernels/quant_k kernels/matmul_q kernels/gemv_q kernels/gemv_q8 \
	 kernels/embedding kernels/threads common/log common/error \
	 tests/kernels/kernel_cuda_test tests/kernels/quant_cuda_test; do
	o=$out/$(basename "$c")_c.o
	"${cc[@]}" -O2 -Wno-psabi -c "$root/$c.c" -o "$o"
	objs+=("$o")
done
g++ -no-pie -o "$out/test_quant_cuda" "$out"/test_quant.o \
  "$out"/{quant_emu,gemv_q_emu,swiglu_emu,rmsnorm_emu,rope_emu,emu}.o "${objs[@]}" -lcmocka -lm -lpthread
O1_TEST_QUICK=1 O1_TEST_SEED=${1:-$(date +%s)} "$out/test_quant_cuda"
