#!/usr/bin/env bash
# Runs tests/kernels/test_sample_cuda against kernels/sample.cu emulated on the
# CPU (emu.h): no GPU needed, so a change to the kernel's logic can be
# checked before GPU time is spent. Quick mode (O1_TEST_QUICK=1) by
# default: every mode and row kind at vocab 1000 and 32000, a few rows at
# 151936 and 256000, the graph replay and the statistics with fewer
# draws; about 15 minutes on one core. x86-64, g++ and cmocka.
#   tools/gpu/emu/run_sample.sh [O1_TEST_SEED]
set -euo pipefail
# NVLink multicast stays off wherever a GPU program starts (KINDS.md); this
# one runs on the CPU, the rule is kept anyway so every script reads alike.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
root=$PWD
emu=$root/tools/gpu/emu
out=$root/build-emu
mkdir -p "$out"
inc=(-I"$emu" -I"$root" -I"$root/kernels" -I"$root/common" -I"$root/daemon/model")
# The launch and the dynamic shared array are the two lines C++ cannot
# take; they become the emulation's.
sed -e 's/^\([[:space:]]*\)sample_rows<<<dim3(SMP_CL, n_rows), SMP_NT, g.smem, stream>>>(/\1EMU_LAUNCH(SMP_CL, n_rows, SMP_NT, g.smem, sample_rows,/' \
    -e 's/extern __shared__ __align__(16) unsigned char smem\[\];/unsigned char *smem = emu_smem();/' \
    "$root/kernels/sample.cu" >"$out/sample_emu.cc"
grep -q EMU_LAUNCH "$out/sample_emu.cc" || { echo "run_sample.sh: launch line not found"; exit 1; }
cxx=(g++ -std=c++17 -O1 -g -fno-pie -ffp-contract=off -include "$emu/emu.h" "${inc[@]}")
cc=(gcc -std=gnu11 -D_GNU_SOURCE -O1 -g -fno-pie -ffp-contract=off "${inc[@]}")
"${cxx[@]}" -c "$out/sample_emu.cc" -o "$out/sample_emu.o"
"${cxx[@]}" -c "$emu/emu.cc" -o "$out/emu.o"
"${cc[@]}" -c "$root/tests/kernels/test_sample_cuda.c" -o "$out/test.o"
"${cc[@]}" -O2 -Wno-psabi -c "$root/kernels/sample.c" -o "$out/sample.o"
"${cc[@]}" -c "$root/common/log.c" -o "$out/log.o"
"${cc[@]}" -c "$root/common/error.c" -o "$out/error.o"
g++ -no-pie -o "$out/test_sample_cuda" "$out"/{test,sample_emu,emu,sample,log,error}.o \
  -lcmocka -lm
O1_TEST_QUICK=1 O1_TEST_SEED=${1:-$(date +%s)} "$out/test_sample_cuda"
