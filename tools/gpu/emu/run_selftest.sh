#!/usr/bin/env bash
# Runs emu_selftest.cc, the self-test of the CPU emulation's Hopper
# operations (hopper_dev.h on emu.cc): warpgroup products over a swizzled
# tensor copy against the CPU's, mbarrier phases through a pipeline, and
# one broken kernel a check (B overwritten under a product or read past
# shared memory, an mbarrier never initialized, arrived on past its
# count or initialized again under a copy in flight, a copy's box start
# misaligned or its map not encoded, __syncthreads reached by half the
# block, a multicast copy before the other block's barrier init or after
# it ended, ...), each of which must stop
# on the emulation's own report. So the checks that run_gemm_q.sh relies
# on are themselves checked, in CI (tools/test.sh), without a GPU: a few
# seconds, most of them the build. x86-64, g++ and cmocka.
# O1_EMU_OUT=DIR builds in DIR/selftest instead of build-emu/selftest.
#   tools/gpu/emu/run_selftest.sh
set -euo pipefail
# NVLink multicast stays off wherever a GPU program starts (KINDS.md); this
# one runs on the CPU, the rule is kept anyway so every script reads alike.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
root=$PWD
emu=$root/tools/gpu/emu
out=${O1_EMU_OUT:-$root/build-emu}/selftest
mkdir -p "$out"
inc=(-I"$emu" -I"$root/kernels" -I"$root")
cxx=(g++ -std=c++17 -O1 -g -fno-pie -ffp-contract=off -Wno-psabi -include "$emu/emu.h" "${inc[@]}")
"${cxx[@]}" -c "$emu/emu.cc" -o "$out/emu.o"
# warnings on (quant_dev.h's #pragma unroll is for nvcc)
"${cxx[@]}" -Wall -Wextra -Wno-unknown-pragmas -c "$emu/emu_selftest.cc" -o "$out/emu_selftest.o"
g++ -no-pie -o "$out/emu_selftest" "$out/emu_selftest.o" "$out/emu.o" -lcmocka
"$out/emu_selftest"
