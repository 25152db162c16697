#!/usr/bin/env bash
# Graphs per context span and the decode attention shaped by its span
# (docs/PERFORMANCE.md, thirty-eighth session), end to end, in one GPU
# machine call (over tools/gpu/session.sh): the targets built,
# test_attention_decode_cuda and test_gpu_graphs, the models of SA_MODELS
# (default "l1-q4km w8-q4km") made, then for each model and each
# PROMPT:ROWS of SA_CASES (default "20000:1 6000:1 6000:2 8000:4 1500:4"),
# bench_cuda_decode with the default spans and launches against the
# launches before them (--attn 0,0,0,1 --attn-tc off: one head a block, no
# tensor cores at a few rows) and against one span (--graph-spans one:
# since the 39th session the attention takes the spans given, so one span
# is shaped as for short contexts too, on a grid for the longest),
# SA_ROUNDS (2) rounds by turns, --tokens 64 --reps 3. SA_BUDGET: the
# seconds it may take (default 560). Results in $OUT/session.txt (a line
# a run: tok/s [slowest .. fastest], the steps by span), logs in
# $OUT/logs.tgz.
#   OUT=dir [SA_MODELS=...] [SA_CASES=...] [SA_ROUNDS=2] tools/gpu/spans_ab.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "$0")/session.sh"
t0=$(date +%s)
left() { echo $((${SA_BUDGET:-560} - ($(date +%s) - t0))); }
models=${SA_MODELS:-l1-q4km w8-q4km}

s_log "start: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
[ -n "${S_BUILD:-}" ] || O1_GPU_TARGETS="o1model bench_cuda_decode test_attention_decode_cuda test_gpu_graphs" s_build
[ -e "$s_root/../shared" ] || ln -s "$s_root/.gpu-testdata" "$s_root/../shared"
# shellcheck disable=SC2086 # the models: words
s_models $models >"$s_out/models.txt" 2>&1 &
timeout 200 ctest --test-dir "$s_bin" -R "test_attention_decode_cuda|test_gpu_graphs" \
	--output-on-failure >"$s_out/ctest.txt" 2>&1
grep -E "tests passed|FAILED|Failed|\*\*\*" "$s_out/ctest.txt" | head -8 |
	tee -a "$s_out/session.txt"
wait
s_log "models made ($(left) s left)"

# MODEL PROMPT ROWS TAG ARGS...: one run, its line
run() {
	local m=$1 p=$2 b=$3 tag=$4 log
	shift 4
	[ "$(left)" -gt 60 ] || return 0
	log=$s_out/run-$m-$p-$b-$tag.txt
	timeout 120 "$s_bin/tools/gpu/bench_cuda_decode" "$s_models_dir/$m.gguf" \
		--graphs on --sample device --prompt "$p" --batch "$b" --tokens 64 \
		--reps 3 "$@" >>"$log" 2>&1
	echo "$m prompt $p rows $b $tag: $(grep RESULT "$log" | tail -1 |
		sed 's/.* tok_s=\([0-9.]*\) .*min=\([0-9.]*\) max=\([0-9.]*\).*/\1 [\2 .. \3]/') $(grep -o 'steps by context span:.*' "$log" | tail -1)" |
		tee -a "$s_out/session.txt"
}
for m in $models; do
	for c in ${SA_CASES:-20000:1 6000:1 6000:2 8000:4 1500:4}; do
		IFS=: read -r p b <<<"$c"
		for _ in $(seq "${SA_ROUNDS:-2}"); do
			run "$m" "$p" "$b" spans
			run "$m" "$p" "$b" before --attn 0,0,0,1 --attn-tc off
			run "$m" "$p" "$b" one-span --graph-spans one
		done
	done
done
s_log "end ($(left) s left)"
s_pack
(cd "$s_out" && rm -f run-*.txt build.txt models.txt ctest.txt)
