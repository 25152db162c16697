#!/usr/bin/env bash
# The CUDA backend's load-time autotuning (daemon/backend/cuda_tune.c),
# A/B on the GPU machine after the build (build/gpu): bench_cuda_decode
# --autotune both (off, then on, one backend after the other in the same
# process; graphs on, sampling on the device) at batch 1 for each preset,
# and at batches 64 and 256 for the last one; random bf16 models as
# tools/gpu/bench.sh makes them, llama3-8b with 4 of its layers
# (O1_TUNE_8B_LAYERS, default 4: making the whole model takes minutes).
# OUT/tune.txt: the RESULT lines, then the tuner's log lines (its picks
# per bucket and the load time it took), then a table of tok/s off/on.
#   tools/gpu/ab_tune.sh OUT [presets...]
set -uo pipefail
# NCCL's NVLink multicast stays off wherever a GPU program starts (KINDS.md).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: ab_tune.sh OUT [presets...]}
shift
presets=${*:-qwen2.5-0.5b llama3.2-1b llama3-8b}
bin=build/gpu
models=/tmp/o1-bench-models
mkdir -p "$models" "$out"
: >"$out/tune.txt"
: >"$out/tune.log"
rc=0
last=${presets##* }
for p in $presets; do
  m=$models/$p
  layers=
  if [ "$p" = llama3-8b ]; then
    layers="--layers ${O1_TUNE_8B_LAYERS:-4}"
    m=$models/$p-l${O1_TUNE_8B_LAYERS:-4}
  fi
  # shellcheck disable=SC2086 # layers is empty or two words
  [ -d "$m" ] || "$bin/tools/o1model/o1model" make --preset "$p" $layers \
    --format safetensors --dtype bf16 --out "$m" >>"$out/tune.log" 2>&1 ||
    { echo "make $p failed" | tee -a "$out/tune.txt"; rc=1; continue; }
  batches=1
  [ "$p" = "$last" ] && batches="1 64 256"
  for b in $batches; do
    t=$([ "$b" = 1 ] && echo 128 || echo 32)
    echo "# $p, prompt 128, batch $b, $t steps x 3" >>"$out/tune.txt"
    "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 --tokens "$t" \
      --reps 3 --batch "$b" --graphs on --sample device --autotune both \
      2>"$out/tune-$p-$b.log" | tee -a "$out/tune.log" |
      grep '^RESULT' >>"$out/tune.txt" || rc=1
    grep -h 'cuda autotune' "$out/tune-$p-$b.log" | sed 's/.*cuda autotune/cuda autotune/' \
      >>"$out/tune.txt"
  done
done
table=$(awk '/^# / { name = $2; sub(/,$/, "", name) } /^RESULT / {
  for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
  if (f["autotune"] == "off") off = f["tok_s"];
  else printf "  %-14s batch %3s  %10.1f -> %10.1f tok/s (%+.1f%%)\n",
    name, f["batch"], off, f["tok_s"], 100 * (f["tok_s"] / off - 1)
}' "$out/tune.txt")
printf '# tok/s, autotune off -> on\n%s\n' "$table" >>"$out/tune.txt"
cat "$out/tune.txt"
exit $rc
