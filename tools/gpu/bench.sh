#!/usr/bin/env bash
# GPU benchmarks, run by tools/gpu/run.sh (bench|all) on the GPU machine
# after the build: one layer's prefill attention for 512- and 2048-token
# chunks in the presets' shapes, row kernel vs tiled kernel beside the
# FLOP floor (bench_prefill_attn, no model needed); batch-1 decode of
# random bf16 models in the qwen2.5-0.5b and llama3.2-1b shapes (written
# as safetensors: the GGUF writer holds a whole model in RAM), reported
# beside the floor (weight bytes per token / measured device copy
# bandwidth). Results go to OUT/bench.txt.
#   tools/gpu/bench.sh OUT [presets...]
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
out=${1:?usage: bench.sh OUT [presets...]}
shift
presets=${*:-qwen2.5-0.5b llama3.2-1b}
bin=build/gpu
models=/tmp/o1-bench-models
mkdir -p "$models"
: >"$out/bench.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
  --format=csv,noheader >>"$out/bench.txt" 2>&1
rc=0
echo "# prefill attention, one layer, one chunk from position 0" >>"$out/bench.txt"
"$bin/tools/gpu/bench_prefill_attn" >>"$out/bench.txt" 2>>"$out/bench.log" || rc=1
for p in $presets; do
  m=$models/$p
  [ -d "$m" ] || "$bin/tools/o1model/o1model" make --preset "$p" \
    --format safetensors --dtype bf16 --out "$m" >>"$out/bench.log" 2>&1 ||
    { echo "make $p failed" | tee -a "$out/bench.txt"; rc=1; continue; }
  # Graphs off, then on, in the same process: batch 1 (greedy), then
  # batched decode throughput (O1_BENCH_BATCHES, default "64 256").
  echo "# $p, prompt 128, batch 1, 256 steps" >>"$out/bench.txt"
  "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 --tokens 256 \
    >>"$out/bench.txt" 2>>"$out/bench.log" || rc=1
  for b in ${O1_BENCH_BATCHES-64 256}; do
    echo "# $p, prompt 128, batch $b, 32 steps" >>"$out/bench.txt"
    "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 --tokens 32 \
      --batch "$b" >>"$out/bench.txt" 2>>"$out/bench.log" || rc=1
  done
  # The device's share of one decode step (kernel durations, ncu; eager,
  # so each kernel is seen). O1_BENCH_NCU=0 skips it.
  if [ "${O1_BENCH_NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
    echo "# $p, prompt 128: kernels of one decode step (ncu)" >>"$out/bench.txt"
    ncu --profile-from-start off --clock-control none --csv \
      --metrics gpu__time_duration.sum "$bin/tools/gpu/bench_cuda_decode" \
      "$m" --prompt 128 --tokens 16 --graphs off 2>>"$out/bench.log" |
      python3 tools/gpu/ncu_sum.py >>"$out/bench.txt" 2>&1 || rc=1
  fi
done
cat "$out/bench.txt"
exit $rc
