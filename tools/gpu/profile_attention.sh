#!/usr/bin/env bash
# Where the decode attention of a few rows loses to the bandwidth at long
# contexts, in one GPU machine call (over tools/gpu/session.sh): at 16,384
# positions a lone llama3-8b row reads its 67 MB of K/V at ~0.9-1.3 TB/s
# of the H100's 3.35 (docs/PERFORMANCE.md, thirty-seventh session), and
# its times fit waves of resident blocks, a round of loads after another.
# bench_decode_attn is built with -lineinfo (a build folder configured
# without it is configured again), then for each case of PA_CASES
# (SHAPE:BATCH:CTX):
#   - bench_decode_attn's own line for the case (every variant, no
#     profiler), and with PA_DEFINE (default none; e.g.
#     DEC_GRID_USED=0) the same from an object variant of
#     attention_decode.cu built with it (session.sh's s_object_variant),
#     main and variant by turns, PA_ROUNDS times (2);
#   - for each kernel of PA_KERNELS (row: attention_decode.cu with its
#     default tuning; tc: attention_decode_tc.cu), ncu over its fourth
#     launch (--kernel: the first three warm up), graph MAX_LEN 8,192 or
#     the context: the sections of s_ncu_sections as CSV, a few figures in
#     session.txt (s_ncu_figures), and the warp samples by SASS
#     instruction (tools/gpu/ncu_source.py).
# Results: $OUT/session.txt, the CSVs and logs in $OUT/profile.tgz, the
# ncu reports in $OUT/reports.tgz (where under 15 MB).
#   OUT=dir [PA_CASES="llama3-8b:1:16384 ..."] [PA_KERNELS="row tc"] \
#     [PA_DEFINE=NAME=V] [PA_ROUNDS=2] tools/gpu/profile_attention.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "$0")/session.sh"
cases=${PA_CASES:-llama3-8b:1:16384 llama3-8b:1:2048 llama3-8b:4:8192 llama3.2-1b:1:8192}
prof=$s_out/profile

s_profile_build bench_decode_attn || exit 1
bench=$s_bin/tools/gpu/bench_decode_attn
define=${PA_DEFINE:-}
variant=
if [ -n "$define" ] &&
	s_object_variant pa kernels/attention_decode.cu "$define" \
		tools/gpu/bench_decode_attn; then
	variant=/tmp/o1o-pa/tools/gpu/bench_decode_attn
fi

# the case's line from BENCH, tagged
line() {
	timeout 60 "$2" "${args[@]}" 2>&1 | sed "s/^/$1: /" |
		tee -a "$s_out/session.txt"
}

for c in $cases; do
	IFS=: read -r shape batch ctx <<<"$c"
	args=(--shape "$shape" --batch "$batch" --ctx "$ctx")
	s_log "$shape, batch $batch, $ctx positions"
	for _ in $(seq "${PA_ROUNDS:-2}"); do
		line main "$bench"
		[ -z "$variant" ] || line "$define" "$variant"
	done
	for k in ${PA_KERNELS:-row tc}; do
		name="$shape-$batch-$ctx-$k"
		# the kernel's function name (templates: attend_dec<...>)
		re='regex:^attend_dec(<.*>)?$'
		[ "$k" = tc ] && re='regex:^attend_dec_tc(<.*>)?$'
		timeout 120 ncu --clock-control none "${s_ncu_sections[@]}" \
			--section SourceCounters --import-source yes -k "$re" \
			--launch-skip 3 --launch-count 1 -f -o "$prof/$name" \
			"$bench" "${args[@]}" --kernel "$k" >"$prof/$name.log" 2>&1 ||
			s_log "ncu $name failed: $(tail -2 "$prof/$name.log")"
		[ -e "$prof/$name.ncu-rep" ] || continue
		ncu -i "$prof/$name.ncu-rep" --page details --csv \
			>"$prof/details-$name.csv" 2>&1
		echo "# $name" | tee -a "$s_out/session.txt"
		s_ncu_figures "$prof/details-$name.csv" | tee -a "$s_out/session.txt"
		ncu -i "$prof/$name.ncu-rep" --page source --csv \
			--print-source cuda,sass >"$prof/source-$name.csv" 2>&1
		python3 tools/gpu/ncu_source.py "$prof/source-$name.csv" 15 \
			>"$prof/samples-$name.txt" 2>&1
		head -30 "$prof/samples-$name.txt" | tee -a "$s_out/session.txt"
	done
done
s_log "done"
s_pack_profile
