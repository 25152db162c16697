#!/bin/sh
# Spin pings of many clients at once through o1d (issue 19,
# docs/PERFORMANCE.md "16 clients at once"):
#   tools/bench/ipc_clients.sh BUILD_DIR [O1D_BEFORE] [RUNS] [CLIENTS...]
# Starts o1d (BUILD_DIR's, and O1D_BEFORE, an o1d binary built from an
# older commit, when given: the two by turns, so both see the same machine
# load) on the CPU backend with the demo model (kv.pages=256,
# backend.threads=2, metrics off), and runs `o1bench ping` against it once
# per run and client count (default 1 8 12 16): with one client, its
# shm-spin line beside the unix-socket line and o1d's idle CPU; with N,
# the pooled shm-spin-Nclients line. Each line is prefixed with the
# binary, the client count and the load average at its start. PING_COUNT
# (default 200000) pings in all per run. FRONTS (default 1): the
# ipc.front_threads values to run BUILD_DIR's o1d with, by turns (lines
# "after-fN"; O1D_BEFORE runs with its own default).
set -eu
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
build=$1 before=${2:-} runs=${3:-3}
shift $(($# < 3 ? $# : 3))
clients=${*:-1 8 12 16}
count=${PING_COUNT:-200000}
dir=$(mktemp -d /tmp/o1-ipc-clients-XXXXXX)
# shellcheck source=tools/bench/o1d_demo.sh
. "$(dirname "$0")/o1d_demo.sh"
trap 'o1d_demo_down; rm -rf "$dir"' EXIT
"$build/tools/o1model/o1model" make --preset demo --out "$dir/demo.gguf" \
	>/dev/null 2>&1

# one_run BINARY LABEL N [FRONT_THREADS]: o1d up, one o1bench ping, o1d
# down
one_run() {
	sock=$dir/o1d.sock
	o1d_demo_up "$1" "$dir/demo.gguf" "$sock" "$dir/o1d.log" \
		${4:+--set ipc.front_threads=$4}
	load=$(cut -d' ' -f1 /proc/loadavg)
	if [ "$3" = 1 ]; then
		"$build/tools/o1bench/o1bench" ping --socket "$sock" \
			--count "$count" --sleep-count 2000 |
			grep -E '^(shm-spin|unix-socket|idle-cpu) '
	else
		"$build/tools/o1bench/o1bench" ping --socket "$sock" \
			--count "$count" --sleep-count 200 --clients "$3" |
			grep -E '^shm-spin-'
	fi | sed "s/^/$2 clients=$3 load=$load /"
	o1d_demo_down
}

r=0
while [ $r -lt "$runs" ]; do
	for n in $clients; do
		[ -z "$before" ] || one_run "$before" before "$n"
		for f in ${FRONTS:-1}; do
			one_run "$build/daemon/o1d/o1d" "after-f$f" "$n" "$f"
		done
	done
	r=$((r + 1))
done
