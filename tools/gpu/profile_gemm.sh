#!/usr/bin/env bash
# Issue 18's 256 streams: where gemm_qw's products over many rows lose to
# cuBLAS's on the bf16 matrix, in one GPU machine call (over
# tools/gpu/session.sh). bench_gemm_q is built with -lineinfo (a build
# folder configured without it is configured again), then for each shape
# of PG_SHAPES (llama3-8b's gu qkv o down) at PG_ROWS rows (256):
#   - bench_gemm_q's own line (wg and bf16 timed, no profiler);
#   - ncu over the fourth gemm_qw launch on Q4_K (the first three warm
#     up) and over the fourth cuBLAS kernel on the bf16 matrix: the
#     sections of session.sh's s_ncu_sections as CSV (details-SHAPE-wg.csv,
#     -bf16.csv), a few of their figures side by side in session.txt
#     (s_ncu_figures), and gemm_qw's warp samples by SASS instruction (tools/gpu/ncu_source.py: the wgmma
#     wait and issue, the mbarrier waits, each source file).
# Results: $OUT/session.txt, the CSVs and logs in $OUT/profile.tgz, the
# ncu reports in $OUT/reports.tgz (where under 15 MB).
#   OUT=dir [PG_SHAPES="gu qkv o down"] [PG_ROWS=256] [PG_TYPE=q4_k] \
#     tools/gpu/profile_gemm.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "$0")/session.sh"
rows=${PG_ROWS:-256}
type=${PG_TYPE:-q4_k}
prof=$s_out/profile

s_profile_build bench_gemm_q || exit 1
bench=$s_bin/tools/gpu/bench_gemm_q

for s in ${PG_SHAPES:-gu qkv o down}; do
	s_log "$s, $rows rows"
	timeout 60 "$bench" --types "$type" --shapes "$s" --rows "$rows" \
		--ways wg,bf16 2>&1 | grep '^RESULT' | tee -a "$s_out/session.txt"
	# gemm_qw: the kernel and its source lines
	timeout 120 ncu --clock-control none "${s_ncu_sections[@]}" \
		--section SourceCounters --import-source yes \
		-k regex:gemm_qw --launch-skip 3 --launch-count 1 \
		-f -o "$prof/$s-wg" "$bench" --iters 1 --types "$type" \
		--shapes "$s" --rows "$rows" --ways wg >"$prof/$s-wg.log" 2>&1 ||
		s_log "ncu $s wg failed: $(tail -2 "$prof/$s-wg.log")"
	# cuBLAS on the bf16 matrix (its kernels' names vary by version)
	timeout 120 ncu --clock-control none "${s_ncu_sections[@]}" \
		-k 'regex:gemm|sm90|cutlass|xmma|nvjet' --launch-skip 3 \
		--launch-count 1 -f -o "$prof/$s-bf16" "$bench" --iters 1 \
		--types "$type" --shapes "$s" --rows "$rows" --ways bf16 \
		>"$prof/$s-bf16.log" 2>&1 ||
		s_log "ncu $s bf16 failed: $(tail -2 "$prof/$s-bf16.log")"
	for w in wg bf16; do
		[ -e "$prof/$s-$w.ncu-rep" ] || continue
		ncu -i "$prof/$s-$w.ncu-rep" --page details --csv \
			>"$prof/details-$s-$w.csv" 2>&1
		echo "# $s $w" | tee -a "$s_out/session.txt"
		s_ncu_figures "$prof/details-$s-$w.csv" |
			tee -a "$s_out/session.txt"
	done
	if [ -e "$prof/$s-wg.ncu-rep" ]; then
		ncu -i "$prof/$s-wg.ncu-rep" --page source --csv \
			--print-source cuda,sass >"$prof/source-$s-wg.csv" 2>&1
		python3 tools/gpu/ncu_source.py "$prof/source-$s-wg.csv" 25 \
			>"$prof/samples-$s-wg.txt" 2>&1
		head -40 "$prof/samples-$s-wg.txt" | tee -a "$s_out/session.txt"
	fi
done
s_log "done"
s_pack_profile
