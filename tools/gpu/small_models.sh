#!/usr/bin/env bash
# Issue 18's small models in one GPU machine call (over
# tools/gpu/session.sh): every GPU target built, `ctest -L gpu` (SM_CTEST=0:
# not), bench_launch (what a kernel boundary costs against a grid
# barrier: the small models' lever), bench_decode_attn's sweep at batch 1
# and contexts 200-500 (into bench_launch.txt), bench_gemv_q's Q5_0 beside Q4_0,
# qwen2.5-0.5b bf16 / Q4_K_M (mostly Q5_0: llama.cpp's fallback where rows
# are 896) / Q8_0 and llama3.2-1b bf16 / Q4_K_M at batch 1
# (bench_cuda_decode), the Q4_K_M's f32 decode path, then o1d's batch-1 row
# (table.sh) if time is left. SM_BUDGET: the seconds it may take (default
# 580: the call's 600). Results in $OUT/session.txt and
# $OUT/bench_launch.txt, the logs in $OUT/session-logs.tgz.
#   OUT=dir [SM_CTEST=0] [SM_BUDGET=s] tools/gpu/small_models.sh
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "$0")/session.sh"
t0=$(date +%s)
left() { echo $((${SM_BUDGET:-580} - ($(date +%s) - t0))); }
s_build
s_models qw qw-q4km qw-q8 l1 l1-q4km >/dev/null 2>&1 &
mp=$!
[ "${SM_CTEST:-1}" = 0 ] || s_ctest
grep -h "FAILED\|Q5_0\|q5_0" "$s_out/ctest.txt" 2>/dev/null | cut -c1-200 | head -30 |
	tee -a "$s_out/session.txt"
s_log "bench_launch ($(left) s left)"
timeout 30 "$s_bin/tools/gpu/bench_launch" >"$s_out/bench_launch.txt" 2>&1
echo "bench_launch rc=$?" >>"$s_out/bench_launch.txt"
# batch 1's decode attention at o1d's contexts (128-word prompts: ~205
# tokens, then 128 steps), the default tuning beside the sweep's best
s_log "bench_decode_attn --sweep, batch 1 ($(left) s left)"
for c in 200 300 500; do
	timeout 30 "$s_bin/tools/gpu/bench_decode_attn" --sweep --batch 1 \
		--ctx $c >>"$s_out/bench_launch.txt" 2>&1
done
s_log "bench_gemv_q q4_0,q5_0 ($(left) s left)"
if [ "$(left)" -gt 150 ]; then
	timeout 40 "$s_bin/tools/gpu/bench_gemv_q" --iters 10 \
		--types q4_0,q5_0 >"$s_out/bench_gemv_q.txt" 2>&1
	grep -i "result\|^q\|GB/s" "$s_out/bench_gemv_q.txt" | head -40 \
		>>"$s_out/session.txt"
fi
# the models (every core) are made while the tests and the kernel benches
# (GPU-bound graph replays) run; the whole-model benches wait for them
if [ "$(left)" -gt 90 ]; then
	wait $mp
else
	kill $mp 2>/dev/null
fi
s_log "models: $(cd "$s_models_dir" && echo *) ($(left) s left)"
"$s_bin/tools/o1model/o1model" info "$s_models_dir/qw-q4km.gguf" 2>&1 |
	grep -i "q5_0\|bytes\|type" | head -8 | tee -a "$s_out/session.txt"
for m in qw qw-q4km qw-q8 l1 l1-q4km; do
	[ "$(left)" -gt 60 ] || break
	s_bench $m --prompt 128 --tokens 128 --reps 3
done
[ "$(left)" -gt 60 ] &&
	s_bench qw-q4km --prompt 128 --tokens 128 --reps 3 --quant-dot f32
if [ "$(left)" -gt 120 ]; then
	TABLE_BATCH1="qw-q4km qw" REPS=2 timeout $(($(left) - 30)) \
		bash "$(dirname "$0")/table.sh" batch1 >"$s_out/table_out.txt" 2>&1
	s_log "table batch1 rc=$? ($(left) s left)"
	pkill -x o1d
	python3 "$(dirname "$0")/table.py" "$s_out/table.raw" >>"$s_out/session.txt" 2>&1
fi
s_log "end ($(left) s left)"
s_pack
# only 8 files come back: the tarball, session.txt and bench_launch.txt
(cd "$s_out" && find . -maxdepth 1 -type f ! -name session-logs.tgz \
	! -name session.txt ! -name bench_launch.txt -delete)
