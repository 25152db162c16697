#!/usr/bin/env bash
# Fuzzes every libFuzzer harness (tests/fuzz/) for SECONDS each, longer
# than tools/test.sh's short run, keeping what it learns:
#   tools/fuzz.sh [SECONDS] [HARNESS...]      (default 300 s, all of them)
# Builds build/fuzz with clang (ASan + UBSan + coverage). Each harness runs
# over its corpus in build/fuzz/corpus/NAME, kept from run to run and
# seeded from tests/fuzz/corpus/NAME; afterwards the inputs that reach code
# the seeds do not (new edges, hit counts aside: libFuzzer -merge=1
# -use_counters=0) are merged into tests/fuzz/corpus/NAME, so `git status`
# shows the seeds worth committing (O1_FUZZ_NO_MERGE=1 leaves the seeds
# alone). A crash, leak, timeout or undefined behaviour stops
# that harness, leaves its input in build/fuzz/artifacts/NAME/ and makes
# the script exit 1 after the others ran; each harness's output is in
# build/fuzz/NAME.log (harnesses log nothing themselves: O1_FUZZ_LOG=debug
# brings the parsers' lines back when replaying a crash).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
[ $# -gt 0 ] && shift
case $secs in
'' | *[!0-9]* | 0)
	echo "fuzz.sh: SECONDS must be a number above 0, not '$secs'" >&2
	exit 2
	;;
esac
command -v clang >/dev/null || {
	echo "fuzz.sh: needs clang (libFuzzer)" >&2
	exit 2
}
build=build/fuzz
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DO1_FUZZ=ON \
	-DO1_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target o1_fuzzers

if [ $# -gt 0 ]; then
	names=("$@")
else
	names=()
	for f in "$build"/tests/fuzz/fuzz_*; do
		[ -x "$f" ] && [ -f "$f" ] && names+=("$(basename "$f")")
	done
fi

failed=()
for name in "${names[@]}"; do
	bin=$build/tests/fuzz/$name
	seeds=tests/fuzz/corpus/${name#fuzz_}
	corpus=$build/corpus/$name
	artifacts=$build/artifacts/$name/
	log=$build/$name.log
	[ -x "$bin" ] || {
		echo "fuzz.sh: no harness $name" >&2
		exit 2
	}
	mkdir -p "$corpus" "$artifacts" "$seeds"
	echo "fuzz: $name for ${secs}s (corpus $corpus)"
	# new inputs go to the first folder: the kept corpus, not the seeds
	if ! "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
		-print_final_stats=1 -artifact_prefix="$artifacts" \
		"$corpus" "$seeds" >"$log" 2>&1; then
		tail -40 "$log"
		echo "fuzz: $name FAILED: input in $artifacts, output in $log"
		failed+=("$name")
		continue
	fi
	grep -E '^stat::number_of_executed_units|^Done ' "$log" | tail -1 || true
	[ "${O1_FUZZ_NO_MERGE:-0}" = 1 ] && continue
	before=$(find "$seeds" -type f | wc -l)
	"$bin" -merge=1 -use_counters=0 -rss_limit_mb=2048 -timeout=10 \
		"$seeds" "$corpus" >>"$log" 2>&1
	after=$(find "$seeds" -type f | wc -l)
	echo "fuzz: $name: $((after - before)) new seeds in $seeds"
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: failed: ${failed[*]}"
	exit 1
fi
echo "fuzz: all ${#names[@]} harnesses clean"
