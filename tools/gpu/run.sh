#!/usr/bin/env bash
# Runs on the GPU machine (no apt, no network): unpacks the .deb files that
# tools/gpu/fetch-debs.sh downloaded into .debs/ under a private prefix,
# configures and builds with CUDA, runs every test (GPU tests included) and
# the GPU benchmarks, and writes logs and results to OUT (default $OUT or
# ./gpu-out).
#   tools/gpu/run.sh [build|test|bench|e2e|hf|tp|sep|table|ipc|all] [ctest -R pattern]
# (hf: the CUDA backend against transformers, tools/gpu/hf_compare.sh)
#   tools/gpu/run.sh table ["batch1 streams"]: issue 17's table
#   (tools/gpu/table.sh), all its parts or those named.
#   tools/gpu/run.sh tp ["1 2 4"]: the tensor-parallel benchmark
#   (tools/gpu/bench_tp.sh, llama3-8b) at those TP counts.
#   tools/gpu/run.sh sep ["256/2 512/0"]: prefill/decode separation
#   (tools/gpu/prefill_sep.sh) at those prefill budgets (B/K: see there).
#   tools/gpu/run.sh ipc [RUNS]: issue 19's sleep-path A/B on the GPU host
#   (no GPU used): o1d, o1bench, o1model and bench_wake built without CUDA
#   in build/cpu, then bench_wake (each wake-up primitive's floor) and
#   tools/bench/ipc_sleep_ab.sh build/cpu RUNS (default 3; SLEEP_COUNT,
#   PING_COUNT pass through) into $OUT/ipc_sleep_ab.txt.
# NCCL (tensor parallelism) comes from the CUDA toolkit when it has
# nccl.h, else from the Python wheel nvidia-nccl-cu13 (O1_NCCL_ROOT); the
# configure log's "o1d:" line says which.
# O1_GPU_TARGETS="t1 t2": build only these targets (a half-written file
# elsewhere in the tree then cannot break the run). The hf reference models
# live in ../shared beside the checkout, which does not travel: copy
# the folder ../shared/testdata into .gpu-testdata/ (so .gpu-testdata/testdata/hf
# and so on; git-ignored) and carry it; it is
# linked as ../shared there.
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
what=${1:-all}
pattern=${2:-}
prefix=/tmp/o1-debs

unpack() {
  [ -d .debs ] || { echo "run.sh: no .debs/ (run tools/gpu/fetch-debs.sh here, carry .debs)"; exit 1; }
  mkdir -p "$prefix"
  local lib=$prefix/usr/lib/x86_64-linux-gnu
  # one unpack at a time (variant builds run side by side: session.sh)
  (
    flock 9
    for f in .debs/*.deb; do dpkg -x "$f" "$prefix"; done
    # Some -dev packages' .so links are absolute: repoint them into the prefix.
    for l in "$lib"/*.so; do
      t=$(readlink "$l" || true)
      case "$t" in /*) ln -sf "$prefix$t" "$l" ;; esac
    done
  ) 9>"$prefix.lock"
  # libmicrohttpd.pc requires gnutls.pc, which .debs/ lacks: a stub lets
  # the configure through; the GPU targets (O1_GPU_TARGETS) never link the
  # sidecar, a full build there would need gnutls itself.
  [ -e "$lib/pkgconfig/gnutls.pc" ] || printf 'Name: gnutls\nDescription: configure-only stub\nVersion: 3.8.0\nLibs:\nCflags:\n' \
    >"$lib/pkgconfig/gnutls.pc"
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CMAKE_PREFIX_PATH=$prefix/usr
  # as environment variables too, for configures run.sh does not make
  # itself (ipc_sleep_ab.sh's variant build)
  export CMAKE_LIBRARY_PATH=$lib CMAKE_INCLUDE_PATH=$prefix/usr/include
  command -v pkg-config >/dev/null || export PATH=$prefix/usr/bin:$PATH
}

# The folder of the nvidia-nccl-cu13 wheel (include/, lib/) when the CUDA
# toolkit has no nccl.h; nothing otherwise.
nccl_root() {
  local cuda d
  cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
  [ -e "$cuda/include/nccl.h" ] && return 0
  d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null) || return 0
  [ -e "$d/include/nccl.h" ] && echo "$d"
  return 0
}

build() {
  local nccl
  nccl=$(nccl_root)
  [ -n "$nccl" ] && export LD_LIBRARY_PATH=$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  cmake -S "$root" -B build/gpu -G Ninja -DO1_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu" \
    -DCMAKE_INCLUDE_PATH="$prefix/usr/include" ${nccl:+-DO1_NCCL_ROOT="$nccl"} \
    >"$out/configure.log" 2>&1 ||
    { tail -40 "$out/configure.log"; exit 1; }
  grep "o1d:" "$out/configure.log"
  cmake --build build/gpu -j "$(nproc)" ${O1_GPU_TARGETS:+--target $O1_GPU_TARGETS} \
    >"$out/build.log" 2>&1 ||
    { grep -E 'error|Error' "$out/build.log" | head -40; exit 1; }
  echo "build ok"
}

run_tests() {
  ctest --test-dir build/gpu --output-on-failure -j 8 ${pattern:+-R "$pattern"} \
    >"$out/ctest.log" 2>&1
  local rc=$?
  cp build/gpu/Testing/Temporary/LastTest.log "$out/" 2>/dev/null
  tail -15 "$out/ctest.log"
  return $rc
}

# The IPC benchmarks' programs without CUDA (build/cpu), then the sleep
# A/B through one o1d.
run_ipc() {
  if ! cmake -S "$root" -B build/cpu -G Ninja -DO1_CUDA=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/configure-cpu.log" 2>&1 ||
    ! cmake --build build/cpu -j "$(nproc)" --target o1d o1bench o1model \
      bench_wake >"$out/build-cpu.log" 2>&1; then
    tail -40 "$out/configure-cpu.log" "$out/build-cpu.log"
    exit 1
  fi
  uptime | tee "$out/ipc_sleep_ab.txt"
  # the primitives' floor first (no o1d): ~25 s
  build/cpu/tools/bench/bench_wake 2>&1 | tee -a "$out/ipc_sleep_ab.txt"
  sh tools/bench/ipc_sleep_ab.sh build/cpu "${pattern:-3}" 2>&1 | tee -a "$out/ipc_sleep_ab.txt"
}

run_bench() {
  [ -x tools/gpu/bench.sh ] && tools/gpu/bench.sh "$out"
}

link_testdata() {
  if [ ! -e "$root/../shared" ] && [ -d "$root/.gpu-testdata" ]; then
    ln -s "$root/.gpu-testdata" "$root/../shared"
  fi
}

unpack
link_testdata
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
case "$what" in
  build) build ;;
  test) build && run_tests ;;
  bench) build && run_bench ;;
  e2e) build && tools/gpu/e2e.sh "$out" ;;
  hf) build && tools/gpu/hf_compare.sh "$out" ;;
  tp) build && tools/gpu/bench_tp.sh "$out" $pattern ;;
  sep) build && tools/gpu/prefill_sep.sh "$out" $pattern ;;
  table) build && OUT=$out tools/gpu/table.sh $pattern ;;
  ipc) run_ipc ;;
  all) build && { run_tests; rc=$?; run_bench; exit $rc; } ;;
  *) echo "usage: $0 [build|test|bench|e2e|hf|tp|sep|table|ipc|all] [pattern | TP counts | budgets | parts | runs]"; exit 2 ;;
esac
