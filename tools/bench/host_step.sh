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
# (default 1 64 256: as many streams, each 4 requests of 512 greedy tokens),
# and prints, per binary and stream count, the host CPU time of the engine
# thread per step at that batch size (the median of RUNS runs, default 5,
# and the range), its wall time per step, o1bench's ITL p50 and
# throughput. The CPU time is the figure to compare: the wall time
# includes preemption by the o1bench threads on a small machine. Metrics
# are on (the fallback file), as in production.
# On a GPU: O1D_MODEL=FILE O1D_DEVICE=cuda:0 serves FILE on that device
# with its real forward pass (no null_forward; prompts of O1D_PROMPT
# words, default 128, O1D_TOKENS new tokens, default 128): the table then
# also gives the forward pass's wall time per step at that batch, and
# host + forward is the period a stream sees.
set -eu
# NCCL's NVLink multicast stays off wherever o1d starts (issue 10), GPU or not.
export NCCL_NVLS_ENABLE=0
build=$1 before=${2:-} runs=${3:-5}
shift $(($# < 3 ? $# : 3))
streams=${*:-1 64 256}
dir=$(mktemp -d /tmp/o1-host-step-XXXXXX)
pid=
trap '[ -z "$pid" ] || kill $pid 2>/dev/null; [ -n "${O1_KEEP:-}" ] || rm -rf "$dir"' EXIT
model=${O1D_MODEL:-} device=${O1D_DEVICE:-cpu}
prompt=${O1D_PROMPT:-16} tokens=${O1D_TOKENS:-512}
if [ -z "$model" ]; then
	model=$dir/tiny.gguf
	"$build/tools/o1model/o1model" make --preset tiny --out "$model" \
		>/dev/null
	# null_forward's tokens: below the tiny vocabulary's specials (bos
	# is the first of them)
	ids=$("$build/tools/o1model/o1model" info "$model" |
		sed -n 's|^bos/eos: *\([0-9]*\) /.*|\1|p')
else
	prompt=${O1D_PROMPT:-128} tokens=${O1D_TOKENS:-128}
fi

start() { # $1: the o1d binary
	: >"$dir/o1d.log"
	"$1" --set ipc.socket="$dir/o1d.sock" --set model.path="$model" \
		--set metrics.mode=shm --set metrics.unpin_on_exit=true \
		--set backend.device="$device" --set backend.threads=1 \
		--set backend.sample_in_backend=on \
		--set scheduler.max_running=256 \
		--set ipc.max_clients=1024 --set ipc.max_half_open=1024 \
		--set faults.enabled=true \
		2>>"$dir/o1d.log" &
	pid=$!
	i=0
	until grep -q "o1d: ready" "$dir/o1d.log"; do
		i=$((i + 1))
		[ $i -lt 3000 ] || { cat "$dir/o1d.log"; exit 1; }
		sleep 0.1
	done
}
stop() {
	kill $pid
	wait $pid || true
	pid=
}
ctl() { "$build/tools/o1ctl/o1ctl" --socket "$dir/o1d.sock" "$@" >/dev/null; }

# One run of $2 streams on o1d $1: appends "cpu wall forward itl tok/s"
# to $dir/$3.
run() {
	start "$1"
	[ -n "${O1D_MODEL:-}" ] || ctl inject null_forward on $ids
	ctl inject host_clock on
	"$build/tools/o1bench/o1bench" run --socket "$dir/o1d.sock" \
		--requests $(($2 * 4)) --concurrency "$2" --max-tokens "$tokens" \
		--prompt-tokens "$prompt" --cold >"$dir/bench"
	ctl inject host_clock off
	stop
	itl=$(sed -n 's/^itl_ms_p50=//p' "$dir/bench")
	tps=$(sed -n 's/^throughput_tok_s=//p' "$dir/bench")
	fig='[0-9]* steps, host cpu \([0-9.]*\) us a step, wall \([0-9.]*\) us; forward \([0-9.]*\) us'
	sed -n "s/.*host_clock: batch $2: $fig.*/\1 \2 \3 $itl $tps/p" \
		"$dir/o1d.log" >>"$dir/$3"
	sed -n "s/.*host_clock: steps with prompt tokens: $fig.*/\1 \2 \3 $itl $tps/p" \
		"$dir/o1d.log" >>"$dir/$3.prefill"
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
printf "%-14s %7s  %-22s %-22s %-22s %-22s %s\n" binary streams \
	"host cpu us/step" "host wall us/step" "forward us/step" \
	"ITL p50 ms" "tok/s"
for s in $streams; do
	for b in before after before.prefill after.prefill; do
		f=$dir/${b%.prefill}.$s${b#${b%.prefill}}
		[ -s "$f" ] || continue
		printf "%-14s %7s" $b $s
		for k in 1 2 3 4; do
			printf "  %-22s" "$(cut -d' ' -f$k "$f" | median)"
		done
		printf "  %s\n" "$(cut -d' ' -f5 "$f" | median)"
	done
done
echo "(median [min-max] of the runs; host = the engine thread between two steps;"
echo " a batch size's rows: decode steps of that many rows; .prefill: the steps"
echo " that carried prompt tokens, whatever their size)"
