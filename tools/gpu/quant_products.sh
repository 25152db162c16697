#!/usr/bin/env bash
# The block products of wide steps (issue 18: prefill and batched decode on
# GGUF block weights) in one GPU machine call, over tools/gpu/session.sh:
# every GPU target built, `ctest -L gpu` (the products' exact checks and
# the backend's routes against the CPU), bench_gemm_q (the tiles, gemm_qw
# and bf16 cuBLAS at llama3-8b's shapes, 16-2,048 rows), then the whole
# llama3-8b Q4_K_M (made and converted while the tests run) through
# bench_cuda_decode at QP_BATCHES (256 128 1) rows with gemm_qw on up to
# QP_ROWS (256, o1d's default) and off (0), by turns; each step a time
# guard, so the call ends inside the device's 10 minutes. Results in
# $OUT/session.txt; the logs in $OUT/logs.tgz.
#   OUT=dir tools/gpu/quant_products.sh
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10; session.sh
# sets it too).
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "$0")/session.sh"
t0=$(date +%s)
left() { echo $((585 - ($(date +%s) - t0))); }
s_build
s_models w8-q4km >/dev/null 2>&1 &
mp=$!
s_ctest
grep -h "gemm_qw\|FAILED\|y\[\|relative" "$s_out/ctest.txt" | cut -c1-220 |
	head -20 | tee -a "$s_out/session.txt"
s_log "bench_gemm_q ($(left) s left)"
timeout 120 "$s_bin/tools/gpu/bench_gemm_q" --iters 10 --types q4_k,q6_k,q8_0 \
	--shapes gu,down,qkv,o --ways tiles,wg,bf16 >"$s_out/bench_gemm_q.txt" 2>&1
sed -n 's/^RESULT //p' "$s_out/bench_gemm_q.txt" |
	awk '{print $1,$2,$3,$4,$11,$22,$23,$24,$25,$26}' | tee -a "$s_out/session.txt"
wait $mp
s_log "models: $(cd "$s_models_dir" && echo *) ($(left) s left)"
for b in ${QP_BATCHES:-256 128 1}; do
	for r in "${QP_ROWS:-256}" 0; do
		[ "$(left)" -gt 40 ] || break
		s_bench w8-q4km --batch "$b" --prompt 128 --tokens 32 --quant-wg-rows "$r"
	done
done
s_log "end ($(left) s left)"
(cd "$s_out" && tar czf logs.tgz ./*.log ./*.txt 2>/dev/null &&
	rm -f ./*.log ./make.txt ./build.txt ./ctest.txt)
