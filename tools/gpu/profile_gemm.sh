#!/usr/bin/env bash
# Issue 18's 256 streams: where gemm_qw's products over many rows lose to
# cuBLAS's on the bf16 matrix, in one GPU machine call (over
# tools/gpu/session.sh). bench_gemm_q is built with -lineinfo (a build
# folder configured without it is configured again), then for each shape
# of PG_SHAPES (llama3-8b's gu qkv o down) at PG_ROWS rows (256):
#   - bench_gemm_q's own line (wg and bf16 timed, no profiler);
#   - ncu over the fourth gemm_qw launch on Q4_K (the first three warm
#     up) and over the fourth cuBLAS kernel on the bf16 matrix: the
#     sections below as CSV (details-SHAPE-wg.csv, -bf16.csv), a few of
#     their figures side by side in session.txt, and gemm_qw's warp
#     samples by SASS instruction (tools/gpu/ncu_source.py: the wgmma
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
mkdir -p "$prof"

s_log "start: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
# -lineinfo changes no instruction; CMake reads CUDAFLAGS at the first
# configure only
grep -q lineinfo build/gpu/CMakeCache.txt 2>/dev/null ||
	rm -f build/gpu/CMakeCache.txt
CUDAFLAGS=-lineinfo O1_GPU_TARGETS=bench_gemm_q s_build
bench=$s_bin/tools/gpu/bench_gemm_q
[ -x "$bench" ] || { s_log "no bench_gemm_q"; exit 1; }
command -v ncu >/dev/null || { s_log "no ncu"; exit 1; }

sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis
	--section MemoryWorkloadAnalysis --section SchedulerStats
	--section WarpStateStats --section Occupancy --section LaunchStats)
# A few figures of an ncu details CSV (its rows hold them all), and the
# kernel's name
figures() {
	python3 - "$1" <<'PY'
import csv, re, sys
want = re.compile(r"^(Duration|Compute \(SM\) Throughput|Memory Throughput"
                  r"|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy"
                  r"|Warp Cycles Per Issued Instruction|Achieved Occupancy"
                  r"|Registers Per Thread|Grid Size|Executed Ipc Active"
                  r"|Dynamic Shared Memory Per Block)$")
lines = open(sys.argv[1], newline="").read().splitlines()
head = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
rows = list(csv.DictReader(lines[head:])) if head is not None else []
print("  kernel:", rows[0].get("Kernel Name", "?")[:120] if rows else "none")
for r in rows:
    if want.match(r.get("Metric Name", "")):
        print(f"  {r['Metric Name']} ({r.get('Metric Unit', '')}):"
              f" {r.get('Metric Value', '')}")
PY
}

for s in ${PG_SHAPES:-gu qkv o down}; do
	s_log "$s, $rows rows"
	timeout 60 "$bench" --types "$type" --shapes "$s" --rows "$rows" \
		--ways wg,bf16 2>&1 | grep '^RESULT' | tee -a "$s_out/session.txt"
	# gemm_qw: the kernel and its source lines
	timeout 120 ncu --clock-control none "${sections[@]}" \
		--section SourceCounters --import-source yes \
		-k regex:gemm_qw --launch-skip 3 --launch-count 1 \
		-f -o "$prof/$s-wg" "$bench" --iters 1 --types "$type" \
		--shapes "$s" --rows "$rows" --ways wg >"$prof/$s-wg.log" 2>&1 ||
		s_log "ncu $s wg failed: $(tail -2 "$prof/$s-wg.log")"
	# cuBLAS on the bf16 matrix (its kernels' names vary by version)
	timeout 120 ncu --clock-control none "${sections[@]}" \
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
		figures "$prof/details-$s-$w.csv" | tee -a "$s_out/session.txt"
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
# only 8 files come back, each at most 16 MB: the CSVs and logs in one
# tarball, the reports in another where it fits (ncu -i reads them)
(cd "$s_out" && tar czf profile.tgz --exclude='*.ncu-rep' profile ./*.txt \
	./*.log 2>/dev/null
	tar czf reports.tgz profile/*.ncu-rep 2>/dev/null
	[ "$(stat -c %s reports.tgz 2>/dev/null || echo 0)" -lt 15000000 ] ||
		rm -f reports.tgz
	rm -rf profile && find . -maxdepth 1 -type f ! -name profile.tgz \
		! -name reports.tgz ! -name session.txt -delete)
