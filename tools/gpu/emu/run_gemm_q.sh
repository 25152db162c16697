#!/usr/bin/env bash
# Runs tests/kernels/test_gemm_q_cuda against kernels/gemm_q.cu emulated on
# the CPU (emu.h; mma_dev.h's tensor-core operations become warp exchanges
# that move the elements of PTX's fragment layouts), so the tile loads,
# the masks and the fragment indexing are checked before GPU time is
# spent. The .cu file is copied into build-emu/ so that its
# "cuda_launch.h" is this folder's. Quick mode (O1_TEST_QUICK=1): a subset
# of the shapes; a few minutes on one core. x86-64, g++ and cmocka.
#   tools/gpu/emu/run_gemm_q.sh
set -euo pipefail
# NVLink multicast stays off wherever a GPU program starts (KINDS.md); this
# one runs on the CPU, the rule is kept anyway so every script reads alike.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
root=$PWD
emu=$root/tools/gpu/emu
out=$root/build-emu
mkdir -p "$out"
inc=(-I"$emu" -I"$root/kernels" -I"$root" -I"$root/daemon")
cp "$root/kernels/gemm_q.cu" "$out/gemm_q_emu.cc"
cxx=(g++ -std=c++17 -O1 -g -fno-pie -ffp-contract=off -include "$emu/emu.h" "${inc[@]}")
cc=(gcc -std=gnu11 -D_GNU_SOURCE -O1 -g -fno-pie -ffp-contract=off
    -DO1_SHARED_DIR="\"$root/../shared\"" "${inc[@]}")
"${cxx[@]}" -c "$out/gemm_q_emu.cc" -o "$out/gemm_q_emu.o"
"${cxx[@]}" -c "$emu/emu.cc" -o "$out/emu.o"
"${cc[@]}" -c "$root/tests/kernels/test_gemm_q_cuda.c" -o "$out/test_gemm_q.o"
objs=()
for c in kernels/quant kernels/quant_k kernels/matmul_q kernels/gemv_q \
	 kernels/threads common/log common/error; do
	o=$out/$(basename "$c")_c.o
	"${cc[@]}" -O2 -Wno-psabi -c "$root/$c.c" -o "$o"
	objs+=("$o")
done
g++ -no-pie -o "$out/test_gemm_q_cuda" "$out"/test_gemm_q.o \
  "$out"/{gemm_q_emu,emu}.o "${objs[@]}" -lcmocka -lm -lpthread
O1_TEST_QUICK=${O1_TEST_QUICK:-1} "$out/test_gemm_q_cuda"
