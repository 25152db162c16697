#!/usr/bin/env bash
# Batch-1 decode of quantized models beside bf16 (issue 18's speed), in
# one GPU machine call: builds the targets below (tools/gpu/run.sh test,
# which also runs the block kernels' and the backend's GPU tests), makes
# llama3.2-1b and llama3-8b with 8 of its 32 layers (random bf16 weights,
# o1model make; the whole 8b takes minutes), converts each to Q8_0 and
# Q4_K_M (o1model convert --quantize), and runs bench_cuda_decode on
# every file: 128-token prompt, 3 x 128 decode steps, graphs on, sampling
# on the device (the quantized files with --quant-dot both: f32, then
# int8 block products; QUANT_DOT=int8 or f32 for one). Logs under OUT; the RESULT lines (tok/s, share of the
# floor) are printed at the end. A llama3-8b step is about 4 x the 8-layer
# one's layer time plus its head: compare the 8-layer files with each
# other, or run with FULL8B=1 for the whole model (slower to make).
# SKIP_TESTS=1 builds without running the tests (a shorter call).
#   OUT=dir tools/gpu/bench_quant.sh
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/gpu-out}
models=/tmp/o1-quant-models
mkdir -p "$out" "$models"
log=$out/bench_quant.txt
: >"$log"
what=test
[ "${SKIP_TESTS:-0}" = 1 ] && what=build
O1_GPU_TARGETS="o1model bench_cuda_decode test_quant_cuda test_gpu_backend" \
  timeout 400 tools/gpu/run.sh "$what" '^test_quant_cuda$|^test_gpu_backend$' \
  >"$out/tests.txt" 2>&1
echo "tests rc=$?: $(grep -E 'tests passed|tests failed' "$out/tests.txt")" | tee -a "$log"
bin=$root/build/gpu
lib=/tmp/o1-debs/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -x "$bin/tools/gpu/bench_cuda_decode" ] || { echo "no build"; exit 1; }
l8="--layers 8"
[ "${FULL8B:-0}" = 1 ] && l8=""
declare -A mk=([llama3.2-1b]="--preset llama3.2-1b"
  [llama3-8b]="--preset llama3-8b $l8")
for p in llama3.2-1b llama3-8b; do
  "$bin/tools/o1model/o1model" make ${mk[$p]} --format gguf --dtype bf16 \
    --out "$models/$p.gguf" >"$out/make-$p.txt" 2>&1 ||
    { echo "make $p failed" | tee -a "$log"; continue; }
  for q in q8_0 q4_k_m; do
    "$bin/tools/o1model/o1model" convert "$models/$p.gguf" \
      "$models/$p-$q.gguf" --quantize "$q" >>"$out/make-$p.txt" 2>&1 ||
      echo "convert $p $q failed" | tee -a "$log"
  done
  for f in "$p" "$p-q8_0" "$p-q4_k_m"; do
    [ -e "$models/$f.gguf" ] || continue
    echo "# $f" >>"$log"
    qd=()
    [ "$f" = "$p" ] || qd=(--quant-dot "${QUANT_DOT:-both}")
    timeout 150 "$bin/tools/gpu/bench_cuda_decode" "$models/$f.gguf" \
      --prompt 128 --tokens 128 --reps 3 --graphs on --sample device \
      "${qd[@]}" >>"$log" 2>&1
  done
done
grep -E "^#|^RESULT|floor|share|tests rc" "$log"
