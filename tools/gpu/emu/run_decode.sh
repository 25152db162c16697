#!/usr/bin/env bash
# Runs tests/kernels/test_gemv_cuda, test_attention_cuda,
# test_attention_decode_cuda and test_attention_prefill_cuda (its quick
# list: O1_TEST_QUICK=1 is set here) against the decode kernels (gemv.cu,
# attention.cu's row kernel, attention_decode.cu, attention_decode_tc.cu,
# attention_prefill.cu's tiled kernel, and the rope.cu, rmsnorm.cu and
# swiglu.cu they are compared with)
# emulated on the CPU
# (emu.h): no GPU needed, so a change to a kernel's logic can be checked
# before GPU time is spent. The emulated device has EMU_SMS (3)
# multiprocessors, so grids sized by it are small and their warps stride
# over the work; blocks run one at a time in a shuffled order. A few
# minutes on one core. x86-64, g++ and cmocka. The tests of the kernels
# they are compared with (test_rope_cuda, test_rmsnorm_cuda,
# test_swiglu_cuda) run here too when named. O1_EMU_OUT=DIR builds in DIR
# instead of build-emu (two runs side by side); O1_EMU_DEFINES adds
# definitions to the kernels' compile (a compile-time switch's variant,
# e.g. "-DDEC_GRID_USED=0").
#   [O1_EMU_DEFINES=-DNAME=V] tools/gpu/emu/run_decode.sh [O1_TEST_SEED] \
#     ["gemv attention rope ..."]
set -euo pipefail
# NVLink multicast stays off wherever a GPU program starts (KINDS.md); this
# one runs on the CPU, the rule is kept anyway so every script reads alike.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../../.."
root=$PWD
emu=$root/tools/gpu/emu
out=${O1_EMU_OUT:-$root/build-emu}
mkdir -p "$out"
inc=(-I"$emu" -I"$root" -I"$root/kernels" -I"$root/tests/kernels")
kernels="gemv attention attention_decode attention_decode_tc attention_prefill rope rmsnorm swiglu"
# The dynamic shared arrays are the one line C++ cannot take: each becomes
# the emulation's; rms_reduce.h's guard against non-CUDA compilers goes.
shared='s/extern __shared__ \(__align__(16) \)\{0,1\}\([a-z_0-9 ]*[a-z_0-9]\) \([a-z_0-9]*\)\[\];/\2 *\3 = (\2 *)emu_smem();/'
for k in $kernels; do
  sed -e "$shared" "$root/kernels/$k.cu" >"$out/${k}_emu.cc"
  if grep -q 'extern __shared__' "$out/${k}_emu.cc"; then
    echo "run_decode.sh: a shared array of $k.cu was not rewritten"; exit 1
  fi
done
sed -e '/^#ifndef __CUDACC__$/,/^#endif$/d' "$root/kernels/rms_reduce.h" >"$out/rms_reduce.h"
read -r -a defs <<<"${O1_EMU_DEFINES:-}"
cxx=(g++ -std=c++17 -O1 -g -fno-pie -ffp-contract=off -Wno-unknown-pragmas
     -include "$emu/emu.h" "${inc[@]}" ${defs[@]+"${defs[@]}"})
cc=(gcc -std=gnu11 -D_GNU_SOURCE -O1 -g -fno-pie -ffp-contract=off "${inc[@]}")
objs=()
for k in $kernels; do
  "${cxx[@]}" -c "$out/${k}_emu.cc" -o "$out/${k}_emu.o"
  objs+=("$out/${k}_emu.o")
done
"${cxx[@]}" -c "$emu/emu.cc" -o "$out/emu.o"
for f in kernels/rmsnorm kernels/rope kernels/attention kernels/swiglu \
         kernels/residual kernels/threads kernels/gemv_q8 kernels/quant \
         kernels/quant_k common/log common/error \
         tests/kernels/kernel_cuda_test tests/kernels/attention_cuda_test; do
  "${cc[@]}" -c "$root/$f.c" -o "$out/$(basename "$f").o"
  objs+=("$out/$(basename "$f").o")
done
seed=${1:-$(date +%s)}
for t in ${2:-gemv attention attention_decode attention_prefill}; do
  "${cc[@]}" -c "$root/tests/kernels/test_${t}_cuda.c" -o "$out/test_${t}_cuda.o"
  g++ -no-pie -o "$out/test_${t}_cuda" "$out/test_${t}_cuda.o" "$out/emu.o" \
    "${objs[@]}" -lcmocka -lm -lpthread
  O1_TEST_QUICK=${O1_TEST_QUICK:-1} O1_TEST_SEED=$seed "$out/test_${t}_cuda"
done
