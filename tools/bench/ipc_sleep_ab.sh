#!/bin/sh
# A client-side A/B of the sleep path (issue 19 item 2): `o1bench ping`'s
# sleep lines through one o1d (BUILD_DIR's, on the CPU backend with the
# demo model, kv.pages=256, metrics off) from BUILD_DIR's o1bench and from
# a variant's, by turns, so both see the same machine and daemon. The
# variant is this tree with SEDEXPR applied to FILE (by default
# libo1client's spin through the daemon's wake-up, WAKING_MAX_NS, set to
# 0), its o1bench (libo1client linked in statically) built without CUDA in
# a copy under /tmp. Each line is prefixed with its side, the run and the
# load average at its start; PING_COUNT (default 20000) spin and
# SLEEP_COUNT (default 2000) sleep pings a run.
#   tools/bench/ipc_sleep_ab.sh BUILD_DIR [RUNS] [FILE SEDEXPR]
set -eu
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
build=$(cd "$1" && pwd) runs=${2:-3}
file=${3:-client/stream.c}
expr=${4:-'s/^#define WAKING_MAX_NS 50000ull/#define WAKING_MAX_NS 0ull/'}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/o1-sleep-ab-XXXXXX)
# shellcheck source=tools/bench/o1d_demo.sh
. "$(dirname "$0")/o1d_demo.sh"
trap 'o1d_demo_down; rm -rf "$dir"' EXIT

mkdir "$dir/src"
tar -C "$root" --exclude=./build --exclude=./build-emu --exclude=./.git \
	-cf - . | tar -C "$dir/src" -xf -
sed -i "$expr" "$dir/src/$file"
if cmp -s "$root/$file" "$dir/src/$file"; then
	echo "ipc_sleep_ab: '$expr' changes nothing in $file" >&2
	exit 1
fi
cmake -S "$dir/src" -B "$dir/b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DO1_CUDA=OFF >"$dir/build.log" 2>&1 &&
	cmake --build "$dir/b" --target o1bench >>"$dir/build.log" 2>&1 ||
	{ tail -30 "$dir/build.log" >&2; exit 1; }
"$build/tools/o1model/o1model" make --preset demo --out "$dir/demo.gguf" \
	>/dev/null 2>&1

sock=$dir/o1d.sock
o1d_demo_up "$build/daemon/o1d/o1d" "$dir/demo.gguf" "$sock" "$dir/o1d.log"
echo "# variant: $file: $expr"
r=0
while [ $r -lt "$runs" ]; do
	for side in main variant; do
		bench=$build/tools/o1bench/o1bench
		[ $side = main ] || bench=$dir/b/tools/o1bench/o1bench
		load=$(cut -d' ' -f1 /proc/loadavg)
		"$bench" ping --socket "$sock" --count "${PING_COUNT:-20000}" \
			--sleep-count "${SLEEP_COUNT:-2000}" |
			grep -E '^(shm-sleep|shm-sleep-daemon|unix-socket-proc-sleep) ' |
			sed "s/^/$side run=$r load=$load /"
	done
	r=$((r + 1))
done
o1d_demo_down
