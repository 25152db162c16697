#!/bin/sh
# docs/PERFORMANCE.md's table "The scheduler on a modelled H200": for each
# prefill_time_ratio, sched_sim's two workloads on the whole llama3-8b
# model (256 streams of cold and of shared prompts; 8 long prompts beside
# 64 streams) and the long-prompt one on the 4-layer cut, the mean over
# SEEDS seeds (default 5):
#   tools/bench/sched_sim_table.sh BUILD_DIR [SIM_BEFORE] [RATIOS] [SEEDS]
# SIM_BEFORE: a sched_sim built against an older scheduler.c (one without
# prefill_whole_ratio: drop that line of its options), run beside it ("":
# none). RATIOS default "0 0.2 0.25 0.4 1". Each line: ratio, binary, whole ratio, then
# cold tok/s, its ITL p99/p50, TTFT p50; shared tok/s, p99/p50; the long
# prompts' streams' p99 over their p50 before (and over their p50 without
# the long prompts), the long prompts' TTFT; the same ratio on the cut.
set -eu
build=$1 before=${2:-} ratios=${3:-0 0.2 0.25 0.4 1} seeds=${4:-5}
sim=$build/tools/bench/sched_sim
mean() { # FIELD...: the mean of each field over the lines on stdin
	awk -v f="$*" 'BEGIN { n = split(f, k, " ") }
	{ for (i = 1; i <= NF; i++) { split($i, a, "="); v[a[1]] += a[2] } c++ }
	END { for (i = 1; i <= n; i++) printf "%s%.2f", (i > 1 ? " " : ""), v[k[i]] / c }'
}
runs() { # BINARY ARGS...: every seed, the lines it prints but comments
	b=$1
	shift
	s=1
	while [ $s -le "$seeds" ]; do
		"$b" --seed $s "$@" | grep -v '^#'
		s=$((s + 1))
	done
}
row() { # LABEL BINARY WHOLE RATIO
	b=$2 w=$3 r=$4
	wo=--whole
	[ "$w" = - ] && wo= w=
	cold=$(runs "$b" --ratio "$r" $wo $w --rounds 2 --only tput | grep 'round=1' |
		mean tok_s p99_over_p50 ttft_p50_ms)
	shared=$(runs "$b" --ratio "$r" $wo $w --rounds 2 --only tput --shared --prompt 128 |
		grep 'round=1' | mean tok_s p99_over_p50)
	long=$(runs "$b" --ratio "$r" $wo $w --only long |
		mean during_p99_over_before_p50 during_p99_over_without_p50 long_ttft_p50_ms)
	cut=$(runs "$b" --preset llama3-8b-4l --ratio "$r" $wo $w --only long |
		mean during_p99_over_before_p50 during_p99_over_without_p50)
	echo "ratio=$r $1 | cold $cold | shared $shared | long $long | 4-layer long $cut"
}
for r in $ratios; do
	[ -z "$before" ] || row before "$before" - "$r"
	[ "$r" = 0 ] && { row "new" "$sim" 1 0; continue; }
	row "new whole=0" "$sim" 0 "$r"
	row "new whole=1" "$sim" 1 "$r"
done
