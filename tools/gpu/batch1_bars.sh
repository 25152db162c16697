#!/usr/bin/env bash
# Issue 18's batch-1 bars in one GPU machine call (over
# tools/gpu/session.sh), meant for the H200 (the bars' machine; the card is
# named first in session.txt): the targets built, test_attention_decode_cuda
# (the decode attention's defaults on the GPU) and test_gpu_faults (o1d with
# graphs: replay faults, the metrics' steps by span), the models made after the
# build (never beside it), then table.sh batch1 over TB_MODELS (default
# "w8-q4km l1-q4km l1": llama3-8b Q4_K_M's 480 tok/s, llama3.2-1b's 1.5x
# over bf16), REPS 3; then, if time is left, the 8B with the L2 prefetch of
# the next product's weights (`--prefetch on`, off by default since the
# 32nd session, when it cost the small models 1.5-3%; never measured on the
# whole 8B since) and at 132 target attention blocks, against the default
# (object_ab.sh, prompts of 200). TB_BUDGET: the seconds it may take
# (default 570). Results in $OUT/session.txt, the logs in $OUT/logs.tgz.
#   OUT=dir [TB_MODELS="w8-q4km ..."] [TB_BUDGET=s] tools/gpu/batch1_bars.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "$0")/session.sh"
t0=$(date +%s)
left() { echo $((${TB_BUDGET:-570} - ($(date +%s) - t0))); }
models=${TB_MODELS:-w8-q4km l1-q4km l1}
targets="o1model bench_cuda_decode o1d o1bench o1ctl test_attention_decode_cuda test_gpu_faults"

s_log "start: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
# S_BUILD: a build that exists (a check on the CPU: S_BUILD=build
# S_DEVICE=cpu TB_MODELS=ti TB_BUDGET=100)
[ -n "${S_BUILD:-}" ] || O1_GPU_TARGETS=$targets s_build
s_log "test_attention_decode_cuda, test_gpu_faults ($(left) s left)"
timeout 180 ctest --test-dir "$s_bin" \
	-R "test_attention_decode_cuda|test_gpu_faults" --output-on-failure \
	>"$s_out/ctest.txt" 2>&1
grep -E "tests passed|FAILED|Failed|metrics: " "$s_out/ctest.txt" | head -8 |
	tee -a "$s_out/session.txt"
s_log "models: $models ($(left) s left)"
# shellcheck disable=SC2086 # the models: words
s_models $models
s_log "table batch1 ($(left) s left)"
TABLE_BATCH1=$models REPS=3 OUT=$s_out/table timeout $(($(left) - 20)) \
	bash "$(dirname "$0")/table.sh" batch1 >"$s_out/table_out.txt" 2>&1
s_log "table batch1 rc=$? ($(left) s left)"
pkill -x o1d
python3 "$(dirname "$0")/table.py" "$s_out/table/table.raw" 2>&1 | grep "^|" |
	tee -a "$s_out/session.txt"
if [ "$(left)" -gt 90 ] && [ "$s_device" != cpu ]; then
	s_log "w8-q4km --prefetch on, --attn 0,0,132,0, prompts of 200 ($(left) s left)"
	AB_MODELS=w8-q4km AB_EXTRA="--prefetch on;--attn 0,0,132,0" AB_ROUNDS=2 \
		AB_BUDGET=$(($(left) - 30)) AB_TARGETS="$targets" \
		AB_ARGS="--prompt 200 --tokens 128 --reps 3" OUT=$s_out/ab-200 \
		timeout $(($(left) - 10)) bash "$(dirname "$0")/object_ab.sh" \
		>/dev/null 2>&1
	sed -n '/summary/,$p' "$s_out/ab-200/session.txt" | tee -a "$s_out/session.txt"
fi
s_log "end ($(left) s left)"
# only 8 files come back: session.txt and one tarball of the rest
tar czf "$s_out.logs.tgz" -C "$s_out" --exclude=./session.txt . &&
	find "$s_out" -mindepth 1 -maxdepth 1 ! -name session.txt -exec rm -rf {} + &&
	mv "$s_out.logs.tgz" "$s_out/logs.tgz"
