#!/usr/bin/env bash
# GPU benchmarks, run by tools/gpu/run.sh (bench|all) on the GPU machine
# after the build: one layer's prefill attention for 512- and 2048-token
# chunks in the presets' shapes, row kernel vs tiled kernel beside the
# FLOP floor (bench_prefill_attn, no model needed); device sampling per
# mode and batch beside its bandwidth floor (bench_cuda_sample); batch-1
# decode of random bf16 models in the qwen2.5-0.5b and llama3.2-1b shapes
# (written as safetensors: the GGUF writer holds a whole model in RAM), reported
# beside the floor (weight bytes per token / measured device copy
# bandwidth), A/B over graphs, the fused decode products and PDL
# (programmatic dependent launch) in one process each, at batch 1 and 4
# (the decode path they apply to), summed up in a table per preset.
# O1_BENCH_QUANT (default "q8_0 q4_k_m"; empty: none) then converts each
# preset to those GGUF block mixes (o1model convert --quantize) and runs
# batch 1 and 4 decode on the block products, beside their floor (the
# blocks' bytes), and batch 64.
# Results go to OUT/bench.txt.
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
# Device sampling: rows 1-256 x vocab 151936 (Qwen2) and 128256 (Llama 3)
# per mode, eager and graph-replayed, beside the copy-bandwidth floor.
for v in 151936 128256; do
  "$bin/tools/gpu/bench_cuda_sample" --vocab "$v" >>"$out/bench.txt" \
    2>>"$out/bench.log" || rc=1
done
for p in $presets; do
  m=$models/$p
  [ -d "$m" ] || "$bin/tools/o1model/o1model" make --preset "$p" \
    --format safetensors --dtype bf16 --out "$m" >>"$out/bench.log" 2>&1 ||
    { echo "make $p failed" | tee -a "$out/bench.txt"; rc=1; continue; }
  # Batch 1 (greedy): graphs off and on, each unfused and fused, each
  # without and with PDL, in the same process; batch 4 likewise with
  # graphs on; then batched decode throughput (O1_BENCH_BATCHES, default
  # "64 256", where fusion and PDL do not apply).
  : >"$out/ab-$p.txt"
  echo "# $p, prompt 128, batch 1, 256 steps" >>"$out/bench.txt"
  "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 --tokens 256 \
    --pdl both --fusion both 2>>"$out/bench.log" |
    tee -a "$out/ab-$p.txt" >>"$out/bench.txt" || rc=1
  echo "# $p, prompt 128, batch 4, 128 steps" >>"$out/bench.txt"
  "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 --tokens 128 \
    --batch 4 --graphs on --pdl both --fusion both 2>>"$out/bench.log" |
    tee -a "$out/ab-$p.txt" >>"$out/bench.txt" || rc=1
  echo "# $p: decode A/B (tok/s, ms a step, kernels a step with graphs)" \
    >>"$out/bench.txt"
  awk '/^RESULT / {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    printf "  batch %s  graphs %-3s  fusion %-3s  PDL %-3s  %9.1f tok/s  %7.4f ms  %s kernels\n",
      f["batch"], f["graphs"], f["fusion"], f["pdl"], f["tok_s"], f["ms_step"], f["kernels"]
  }' "$out/ab-$p.txt" >>"$out/bench.txt"
  for b in ${O1_BENCH_BATCHES-64 256}; do
    echo "# $p, prompt 128, batch $b, 32 steps" >>"$out/bench.txt"
    "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 --tokens 32 \
      --batch "$b" >>"$out/bench.txt" 2>>"$out/bench.log" || rc=1
  done
  # The device's share of one decode step (kernel durations, ncu; eager,
  # so each kernel is seen), fused and unfused. O1_BENCH_NCU=0 skips it.
  if [ "${O1_BENCH_NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
    for fu in on off; do
      echo "# $p, prompt 128: kernels of one decode step (ncu), fusion $fu" \
        >>"$out/bench.txt"
      ncu --profile-from-start off --clock-control none --csv \
        --metrics gpu__time_duration.sum "$bin/tools/gpu/bench_cuda_decode" \
        "$m" --prompt 128 --tokens 16 --graphs off --fusion "$fu" \
        --pdl "$fu" 2>>"$out/bench.log" |
        python3 tools/gpu/ncu_sum.py >>"$out/bench.txt" 2>&1 || rc=1
    done
  fi
done
# Quantized: the bf16 folder to each mix, then decode on its blocks.
for p in $presets; do
  m=$models/$p
  [ -d "$m" ] || continue
  for q in ${O1_BENCH_QUANT-q8_0 q4_k_m}; do
    g=$models/$p-$q.gguf
    [ -f "$g" ] || "$bin/tools/o1model/o1model" convert "$m" "$g" \
      --quantize "$q" >>"$out/bench.log" 2>&1 ||
      { echo "convert $p $q failed" | tee -a "$out/bench.txt"; rc=1; continue; }
    for b in 1 4 64; do
      t=$([ "$b" = 64 ] && echo 32 || echo 256)
      echo "# $p $q, prompt 128, batch $b, $t steps" >>"$out/bench.txt"
      "$bin/tools/gpu/bench_cuda_decode" "$g" --prompt 128 --tokens "$t" \
        --batch "$b" >>"$out/bench.txt" 2>>"$out/bench.log" || rc=1
    done
  done
done
cat "$out/bench.txt"
exit $rc
