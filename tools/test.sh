#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: a normal build
# (CUDA compiled and linked when nvcc is present), an ASan+UBSan build, and a
# short run of each libFuzzer harness, all with warnings as errors
# (O1_WERROR); before them a compile-only pass with the flags of other
# compilers' defaults. Ends with ctest's summary lines.
set -euo pipefail
# NVLink multicast stays off wherever a GPU program starts (KINDS.md): the
# CPU emulation below runs from tools/gpu/, and the rule reads alike
# everywhere.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)

./tools/deps.sh

configure() { # configure DIR CMAKE_ARGS...
  local dir=$1; shift
  cmake -S "$root" -B "$dir" -G Ninja -DO1_WERROR=ON "$@" >/dev/null
}

build() { # build DIR CMAKE_ARGS...
  configure "$@"
  cmake --build "$1" -j "$jobs"
}

# Compile only, as a user's compiler would see the tree: Release (-O3)
# with _FORTIFY_SOURCE=3 and the format checks that Ubuntu's gcc 13 (the
# GPU machine's) turns on by default, with gcc and with clang. Fortify
# and -O3 find warnings (unused results, truncation) that the tested
# RelWithDebInfo build does not.
hardened="-D_FORTIFY_SOURCE=3 -Wformat -Wformat-security"
hardened+=" -fstack-protector-strong -fstack-clash-protection"
for cc in gcc clang; do
  command -v "$cc" >/dev/null || continue
  start=$SECONDS log=build/compile-$cc.log
  mkdir -p build
  build "build/compile-$cc" -DCMAKE_C_COMPILER="$cc" -DO1_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$hardened" >"$log" 2>&1 ||
    { grep -E -B2 -A12 -m20 'error:|FAILED:' "$log" || tail -50 "$log"; exit 1; }
  echo "compile: $cc Release $hardened: no warnings ($((SECONDS - start)) s)"
done

# The CPU emulation's Hopper operations and its reports of a kernel's
# races (tools/gpu/emu: no GPU, a few seconds): the checks run_gemm_q.sh
# relies on, themselves checked. Its fibers switch by x86-64 assembly.
if command -v g++ >/dev/null && [ "$(uname -m)" = x86_64 ]; then
  start=$SECONDS log=build/emu-selftest.log
  mkdir -p build
  O1_EMU_OUT=build/emu tools/gpu/emu/run_selftest.sh >"$log" 2>&1 ||
    { cat "$log"; exit 1; }
  echo "emu: run_selftest.sh: $(grep -c '^\[       OK \]' "$log") cases pass ($((SECONDS - start)) s)"
else
  echo "emu: run_selftest.sh skipped (needs g++ on x86-64)"
fi

# Fuzzing first (short), so the final lines are ctest's summaries.
if command -v clang >/dev/null; then
  configure build/fuzz -DCMAKE_C_COMPILER=clang -DO1_FUZZ=ON -DO1_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build/fuzz -j "$jobs" --target o1_fuzzers
  for f in build/fuzz/tests/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    corpus=$(mktemp -d)
    cp -r "tests/fuzz/corpus/${name#fuzz_}/." "$corpus/" 2>/dev/null || true
    echo "fuzz: $name for ${O1_FUZZ_SECONDS:-20}s"
    "$f" -max_total_time="${O1_FUZZ_SECONDS:-20}" -rss_limit_mb=2048 \
      -print_final_stats=0 "$corpus" 2>build/fuzz/$name.log ||
      { tail -50 build/fuzz/$name.log; exit 1; }
    rm -rf "$corpus"
  done
fi

build build/asan -DO1_SANITIZE=ON -DO1_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
echo "== ctest: ASan+UBSan build =="
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs"

# The /usr prefix of a package: tests/install's checks of the Debian
# packages run lintian on this build's (the ASan build keeps /usr/local).
build build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr
echo "== ctest: release build =="
ctest --test-dir build/release --output-on-failure -j "$jobs"
