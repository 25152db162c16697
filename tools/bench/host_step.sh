#!/bin/sh
# The host's work per engine step without a forward pass (issue 17,
# docs/PERFORMANCE.md "o1d's host work per step"):
#   tools/bench/host_step.sh BUILD_DIR [O1D_BEFORE] [RUNS] [STREAMS...]
# Starts o1d (BUILD_DIR's, and O1D_BEFORE, an o1d binary built from an
# older commit, when given: the two interleaved, so both see the same
# machine load) on a random tiny model with [faults] enabled, switches on
# null_forward (steps skip the forward pass and return made-up tokens:
# what remains is the scheduler, the sampling bookkeeping, detokenizing,
# stop strings, the out rings and the wake-ups) and host_clock (the engine
# thread's time between steps), runs o1bench at each stream count
# (default 1 64 256: as many requests of 512 greedy tokens, twice over),
# and prints, per binary and stream count, the host CPU time of the engine
# thread per step at that batch size (the median of RUNS runs, default 5,
# and the range), its wall time per step and o1bench's throughput. The
# CPU time is the figure to compare: the wall time includes preemption by
# the o1bench threads on a small machine.
set -eu
build=$1 before=${2:-} runs=${3:-5}
shift $(($# < 3 ? $# : 3))
streams=${*:-1 64 256}
dir=$(mktemp -d /tmp/o1-host-step-XXXXXX)
pid=
trap '[ -z "$pid" ] || kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
"$build/tools/o1model/o1model" make --preset tiny --out "$dir/tiny.gguf" \
	>/dev/null
# The tiny vocabulary: 256 byte tokens and 320 merges below the specials.
ids=576

start() { # $1: the o1d binary
	: >"$dir/o1d.log"
	"$1" --set ipc.socket="$dir/o1d.sock" --set model.path="$dir/tiny.gguf" \
		--set metrics.enabled=false --set backend.device=cpu \
		--set backend.threads=1 --set backend.sample_in_backend=on \
		--set ipc.max_clients=1024 --set faults.enabled=true \
		2>>"$dir/o1d.log" &
	pid=$!
	i=0
	until grep -q "o1d: ready" "$dir/o1d.log"; do
		i=$((i + 1))
		[ $i -lt 300 ] || { cat "$dir/o1d.log"; exit 1; }
		sleep 0.1
	done
}
stop() {
	kill $pid
	wait $pid || true
	pid=
}
ctl() { "$build/tools/o1ctl/o1ctl" --socket "$dir/o1d.sock" "$@" >/dev/null; }

# One run of $2 streams on o1d $1: appends "cpu wall tok/s" to $dir/$3.
run() {
	start "$1"
	ctl inject null_forward on $ids
	ctl inject host_clock on
	tps=$("$build/tools/o1bench/o1bench" run --socket "$dir/o1d.sock" \
		--requests $(($2 * 2)) --concurrency "$2" --max-tokens 512 |
		sed -n 's/^throughput_tok_s=//p')
	ctl inject host_clock off
	stop
	sed -n "s/.*host_clock: batch $2: [0-9]* steps, host cpu \([0-9.]*\) us a step, wall \([0-9.]*\) us.*/\1 \2 $tps/p" \
		"$dir/o1d.log" >>"$dir/$3"
}

median() { sort -n | awk '{v[NR] = $1} END {printf "%s [%s-%s]", v[int((NR + 1) / 2)], v[1], v[NR]}'; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cpus"
r=0
while [ $r -lt "$runs" ]; do
	for s in $streams; do
		[ -z "$before" ] || run "$before" "$s" "before.$s"
		run "$build/daemon/o1d/o1d" "$s" "after.$s"
	done
	r=$((r + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-7s %7s  %-26s %-26s %s\n" binary streams "host cpu us/step [range]" \
	"wall us/step [range]" "tok/s [range]"
for s in $streams; do
	for b in before after; do
		f=$dir/$b.$s
		[ -s "$f" ] || continue
		printf "%-7s %7s  %-26s %-26s %s\n" $b $s \
			"$(cut -d' ' -f1 "$f" | median)" \
			"$(cut -d' ' -f2 "$f" | median)" \
			"$(cut -d' ' -f3 "$f" | median)"
	done
done
