#!/usr/bin/env bash
# Batch-1 decode, this tree against a base tree, in one GPU machine call
# (issue 17): builds this tree (tools/gpu/run.sh build, the targets below)
# and the base tree's bench_cuda_decode, o1d and o1bench, runs this tree's
# GPU tests while the models are made, then on an otherwise idle GPU:
# bench_gemv (the products' launch setups), bench_cuda_decode on each model
# for the base (host argmax) and this tree (host argmax, then sampling on
# the device), ncu over one decode step of llama3.2-1b, and o1d end to end
# at concurrency 1 (o1bench, sampling on the device) for the base and this
# tree: the like-for-like comparison. Logs and a summary under OUT.
#   tools/gpu/ab_decode.sh OUT BASE [seconds]
# BASE: the base tree's root (its build goes to BASE/build/gpu). SECONDS
# (default 500): the budget; optional stages are skipped past it. Models:
# qwen2.5-0.5b and llama3.2-1b whole, llama3-8b with 4 and 8 of its 32
# layers (making the whole one takes minutes): a layer's time is the
# difference over 4, and the whole model's step is extrapolated from it.
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
root=$PWD
out=${1:?usage: ab_decode.sh OUT BASE [seconds]}
base=$(cd "${2:?usage: ab_decode.sh OUT BASE [seconds]}" && pwd)
budget=${3:-500}
t0=$(date +%s)
models=/tmp/o1-ab-models
prefix=/tmp/o1-debs
mkdir -p "$out" "$models"
log=$out/run.log
: >"$log"
elapsed() { echo $(($(date +%s) - t0)); }
note() { echo "[$(elapsed) s] $*" | tee -a "$log"; }
# gcc 13's _FORTIFY_SOURCE warnings (issue 14) are not errors here.
export CFLAGS="-Wno-unused-result -Wno-error=format-truncation -Wno-error=stringop-truncation" CXXFLAGS="-Wno-unused-result"

# The CUDA kernel tests (tests/kernels/test_<op>_cuda).
kernel_tests="convert embedding rmsnorm swiglu argmax rope gemv attention attention_prefill decode_chain sample"
note "build (this tree)"
O1_GPU_TARGETS="o1d o1model o1ctl o1bench bench_cuda_decode bench_gemv
  $(printf 'test_%s_cuda ' $kernel_tests) test_gpu_graphs
  test_gpu_backend test_gpu_backend_sample test_gpu_devout test_gpu_faults
  o1_gpu_devout_client" OUT=/tmp/o1-build-out timeout 300 \
  tools/gpu/run.sh build >>"$log" 2>&1 ||
  { note "build failed"; grep -E "error" /tmp/o1-build-out/build.log | head -30 | tee -a "$log"; exit 1; }
bin=$root/build/gpu
bbin=$base/build/gpu
# run.sh's unpacked libraries, for the base build and the binaries.
lib=$prefix/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_SYSROOT_DIR=$prefix PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$prefix/usr
command -v pkg-config >/dev/null || export PATH=$prefix/usr/bin:$PATH

note "base build and models, in the background"
( cmake -S "$base" -B "$bbin" -G Ninja -DO1_CUDA=ON \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_LIBRARY_PATH="$lib" -DCMAKE_INCLUDE_PATH="$prefix/usr/include" &&
  cmake --build "$bbin" -j 8 --target bench_cuda_decode o1d o1bench ) \
  >/tmp/base-build.log 2>&1 &
base_pid=$!
declare -A mk=([qwen2.5-0.5b]="--preset qwen2.5-0.5b"
  [llama3.2-1b]="--preset llama3.2-1b"
  [llama3-8b-l4]="--preset llama3-8b --layers 4"
  [llama3-8b-l8]="--preset llama3-8b --layers 8")
make_pids=()
for p in "${!mk[@]}"; do
  "$bin/tools/o1model/o1model" make ${mk[$p]} --format safetensors \
    --dtype bf16 --out "$models/$p" >"/tmp/make-$p.log" 2>&1 &
  make_pids+=($!)
done

note "GPU tests"
timeout 280 ctest --test-dir build/gpu --output-on-failure -j 4 --timeout 240 \
  -R "^test_gpu_|^test_(${kernel_tests// /|})_cuda\$" -E '^test_gpu_tp$' \
  >"$out/tests.log" 2>&1
note "tests rc=$? $(grep -E 'tests passed|tests failed' "$out/tests.log")"
grep -E "^ *[0-9]+/[0-9]+ Test" "$out/tests.log" | tee -a "$log"

for p in "${make_pids[@]}"; do wait "$p"; done
wait "$base_pid" && note "base build ok" ||
  { note "base build failed"; tail -20 /tmp/base-build.log | tee -a "$log"; }
ls -la "$models" >>"$log"

note "bench_gemv"
timeout 90 "$bin/tools/gpu/bench_gemv" >"$out/bench_gemv.txt" 2>&1 ||
  note "bench_gemv failed"
grep -E "^bench_gemv|^SUMMARY" "$out/bench_gemv.txt" | tee -a "$log"

dec=$out/decode.txt
: >"$dec"
for p in qwen2.5-0.5b llama3.2-1b llama3-8b-l4 llama3-8b-l8; do
  m=$models/$p
  [ -d "$m" ] || { note "no model $p"; continue; }
  note "decode $p"
  echo "# $p base (host argmax), 384 steps" >>"$dec"
  [ -x "$bbin/tools/gpu/bench_cuda_decode" ] &&
    timeout 60 "$bbin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 \
      --tokens 384 --graphs on >>"$dec" 2>&1
  for s in host device; do
    echo "# $p this tree, sampling on the $s, 3 x 128 steps" >>"$dec"
    timeout 60 "$bin/tools/gpu/bench_cuda_decode" "$m" --prompt 128 \
      --tokens 128 --reps 3 --graphs on --sample "$s" >>"$dec" 2>&1
  done
done
if [ -d "$models/llama3.2-1b" ]; then
  note "decode llama3.2-1b, batch 4"
  echo "# llama3.2-1b base, batch 4, 128 steps" >>"$dec"
  [ -x "$bbin/tools/gpu/bench_cuda_decode" ] &&
    timeout 60 "$bbin/tools/gpu/bench_cuda_decode" \
      "$models/llama3.2-1b" --prompt 128 --tokens 128 --batch 4 \
      --graphs on >>"$dec" 2>&1
  echo "# llama3.2-1b this tree, batch 4, 3 x 128 steps" >>"$dec"
  timeout 60 "$bin/tools/gpu/bench_cuda_decode" "$models/llama3.2-1b" \
    --prompt 128 --tokens 128 --batch 4 --reps 3 --graphs on >>"$dec" 2>&1
fi
grep -E "^#|^RESULT" "$dec" | tee -a "$log"

e2e() { # bin-dir model
  local run sock pid
  run=$(mktemp -d /tmp/o1-ab.XXXXXX)
  sock=$run/o1d.sock
  "$1/daemon/o1d/o1d" --set model.path="$2" --set backend.device=cuda:0 \
    --set ipc.socket="$sock" --set metrics.mode=shm \
    --set scheduler.max_running=8 >"$run/o1d.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    grep -q "o1d: ready" "$run/o1d.log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  timeout 60 "$1/tools/o1bench/o1bench" run --socket "$sock" --requests 8 \
    --concurrency 1 --max-tokens 128 --prompt-tokens 128 2>&1 |
    grep -E "errors|throughput|itl_ms|ttft_ms_p50"
  kill "$pid"; wait "$pid" 2>/dev/null
  grep -iE "error|sampling" "$run/o1d.log" | head -5
}
for p in llama3.2-1b qwen2.5-0.5b llama3-8b-l4 llama3-8b-l8; do
  for side in base this; do
    [ "$(elapsed)" -lt $((budget - 30)) ] || break 2
    b=$bin
    [ $side = base ] && b=$bbin
    [ -x "$b/daemon/o1d/o1d" ] || continue
    note "e2e $p ($side), concurrency 1"
    echo "# e2e $p ($side)" >>"$out/e2e.txt"
    e2e "$b" "$models/$p" >>"$out/e2e.txt" 2>&1
    grep -E "itl_ms_p50|throughput" "$out/e2e.txt" | tail -2 | tee -a "$log"
  done
done

if [ "$(elapsed)" -lt $((budget - 90)) ] && command -v ncu >/dev/null; then
  note "ncu, llama3.2-1b, one eager decode step"
  timeout 80 ncu --profile-from-start off --clock-control none --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum \
    "$bin/tools/gpu/bench_cuda_decode" "$models/llama3.2-1b" --prompt 128 \
    --tokens 8 --graphs off >"/tmp/ncu.csv" 2>>"$log"
  python3 tools/gpu/ncu_sum.py </tmp/ncu.csv >"$out/ncu.txt" 2>&1
  tee -a "$log" <"$out/ncu.txt"
fi
note "done"
