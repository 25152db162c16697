#!/usr/bin/env bash
# Tensor-parallel decode benchmark (issue 10), run by tools/gpu/run.sh tp
# on the GPU machine after the build: the llama3-8b preset (random bf16
# weights written as safetensors, about 16 GB under /tmp) through
# bench_cuda_decode at each TP count the machine's GPUs allow (default 1 2
# 4; TP 1 is the plain one-GPU backend), batch 1 (greedy, prompt 128, 256
# steps) and 256 streams (prompt 128, 32 steps), CUDA graphs on. Writes
# OUT/tp.txt: how the GPUs are linked (nvidia-smi topo -m), every run's
# lines, and a table of tok/s, speedup over TP 1 and scaling efficiency
# (speedup / N) per batch.
#   tools/gpu/bench_tp.sh OUT [TP counts...]
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
out=${1:?usage: bench_tp.sh OUT [TP counts...]}
shift
counts=${*:-1 2 4}
bin=build/gpu
models=/tmp/o1-bench-models
m=$models/llama3-8b
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
mkdir -p "$models"
: >"$out/tp.txt"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nvidia-smi topo -m; } >>"$out/tp.txt" 2>&1
if [ ! -d "$m" ]; then
  t0=$(date +%s)
  "$bin/tools/o1model/o1model" make --preset llama3-8b --format safetensors \
    --dtype bf16 --out "$m" >>"$out/tp.log" 2>&1 ||
    { echo "make llama3-8b failed" | tee -a "$out/tp.txt"; exit 1; }
  echo "# llama3-8b made in $(($(date +%s) - t0)) s" >>"$out/tp.txt"
fi
rc=0
for n in $counts; do
  if [ "$n" -gt "$gpus" ]; then
    echo "# TP $n skipped: $gpus GPUs" >>"$out/tp.txt"
    continue
  fi
  echo "# llama3-8b, TP $n, prompt 128, batch 1, 256 steps" >>"$out/tp.txt"
  "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 --tokens 256 \
    --graphs on --tp "$n" >>"$out/tp.txt" 2>>"$out/tp.log" || rc=1
  echo "# llama3-8b, TP $n, prompt 128, batch 256, 32 steps" >>"$out/tp.txt"
  "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 --tokens 32 \
    --batch 256 --graphs on --tp "$n" >>"$out/tp.txt" 2>>"$out/tp.log" || rc=1
done
# tok/s per (TP, batch); speedup and efficiency against TP 1.
awk '/^RESULT / {
  for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
  r[f["tp"] "," f["batch"]] = f["tok_s"]; tps[f["tp"]] = 1; bs[f["batch"]] = 1
}
END {
  print "\n# TP  batch  tok/s  speedup  efficiency"
  for (b in bs) for (t in tps) if ((t "," b) in r) {
    base = r["1," b]
    if (base > 0)
      printf "%4d %6d %9.1f %7.2fx %9.1f%%\n", t, b, r[t "," b],
        r[t "," b] / base, 100 * r[t "," b] / base / t
    else
      printf "%4d %6d %9.1f   (no TP 1 run)\n", t, b, r[t "," b]
  }
}' "$out/tp.txt" >>"$out/tp.txt"
cat "$out/tp.txt"
exit $rc
