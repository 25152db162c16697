#!/usr/bin/env bash
# The decode attention's cap on a few rows' splits (attention_decode.cu's
# dec_few: at up to 8 rows a row uses at most the splits of 128 target
# blocks (264 until the 49th session), about one wave, until they pass 8
# rounds each) at other values,
# in one GPU machine call (over tools/gpu/session.sh), set at run time by
# o1_attn_decode_tune's few_blocks:
#   1. the build; the models made behind the next two steps;
#   2. bench_decode_attn (cold us a layer, L2 flushed) at each graph span's
#      length (300 and 1,024 positions in the first span, 2,048 in the
#      second, 8,192 in the third), llama3-8b at 1 and 4 rows, llama3.2-1b
#      at 1, llama3-8b at 2 and 8, qwen2.5-0.5b at 1, while the budget
#      allows (the 49th session's call 1: 10 s for the first four): the
#      default beside each of SA_FEW and beside a named target of 132
#      blocks (`--attn
#      0,0,132,0`, which drops the cap and cuts the grid: what the
#      37th-40th sessions' A/Bs measured);
#   3. test_attention_decode_cuda (few_blocks 264 among its tunings) and
#      test_attention_prefill_cuda;
#   4. whole models by turns (object_ab.sh, `--attn 0,0,0,0,F` for each F
#      of SA_FEW against the default), prompts of 200 (three rounds) then
#      2,000 (two, as the budget allows), 128 tokens.
# Results in $OUT/session.txt; the logs in $OUT/ab200/session-logs.tgz
# (the build, bench_decode_attn's lines, the test, the first A/B) and
# $OUT/session-logs.tgz (the second A/B).
#   OUT=dir [SA_FEW="264 132"] [SA_MODELS="w8-q4km l1-q4km"] [SA_BUDGET=s] \
#     tools/gpu/attn_split_ab.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0
here=$(dirname "$0")
# shellcheck source=tools/gpu/session.sh
. "$here/session.sh"
t0=$(date +%s)
left() { echo $((${SA_BUDGET:-585} - ($(date +%s) - t0))); }
few=${SA_FEW:-264 132}
models=${SA_MODELS:-w8-q4km l1-q4km}
tunes=()
extra=
for f in $few; do
	tunes+=(--tune "0,0,0,0,$f")
	extra="${extra:+$extra;}--attn 0,0,0,0,$f"
done

s_log "start: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
targets="o1model bench_cuda_decode bench_decode_attn"
O1_GPU_TARGETS="$targets test_attention_decode_cuda test_attention_prefill_cuda" s_build
[ -e "$s_root/../shared" ] || ln -s "$s_root/.gpu-testdata" "$s_root/../shared"
# shellcheck disable=SC2086 # the models: words
(s_models $models >"$s_out/models.txt" 2>&1) &
made=$!

s_log "bench_decode_attn ($(left) s left)"
bda=$s_bin/tools/gpu/bench_decode_attn
# (until the models are about made: ~200 s after the build)
for case in llama3-8b:1 llama3-8b:4 llama3.2-1b:1 llama3-8b:2 llama3-8b:8 qwen2.5-0.5b:1; do
	for cg in 300:1024 1024:1024 2048:4096 8192:16384; do
		[ "$(left)" -gt 250 ] || break 2
		timeout 60 "$bda" --shape "${case%:*}" --batch "${case#*:}" \
			--ctx "${cg%:*}" --graph-len "${cg#*:}" "${tunes[@]}" \
			--tune 0,0,132,0
	done
done >"$s_out/bda.txt" 2>&1
# the default's cold us at the graph length, then each tuning's
grep -E "cold us old|tune " "$s_out/bda.txt" |
	sed -E 's/: cold us old [0-9.]+ \(graph [0-9.]+\) new [0-9.]+ \(graph ([0-9.]+)\).*/: default \1 us/' |
	tee -a "$s_out/session.txt"

s_log "the attention's tests ($(left) s left)"
timeout 120 ctest --test-dir "$s_bin" \
	-R "test_attention_decode_cuda|test_attention_prefill_cuda" \
	--output-on-failure >"$s_out/ctest.txt" 2>&1
s_log "ctest rc=$?"
grep -E "tests passed|FAILED" "$s_out/ctest.txt" | tee -a "$s_out/session.txt"
wait "$made"
s_log "models made ($(left) s left)"

export AB_MODELS=$models AB_EXTRA=$extra AB_TARGETS="o1model bench_cuda_decode"
AB_ROUNDS=3 AB_BUDGET=$(($(left) - 80)) AB_ARGS="--prompt 200 --tokens 128 --reps 3" \
	bash "$here/object_ab.sh"
# (object_ab.sh clears $OUT's top level of all but its own files)
mkdir -p "$s_out/ab200" &&
	mv "$s_out/session-logs.tgz" "$s_out/ab.raw" "$s_out/ab200/" 2>/dev/null
AB_ROUNDS=2 AB_BUDGET=$(($(left) - 10)) AB_ARGS="--prompt 2000 --tokens 128 --reps 3" \
	bash "$here/object_ab.sh"
