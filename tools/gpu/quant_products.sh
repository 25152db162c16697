#!/usr/bin/env bash
# The block products of wide steps (issue 18: prefill and batched decode on
# GGUF block weights) in one GPU machine call, over tools/gpu/session.sh:
# every GPU target built, `ctest -L gpu` (the products' exact checks and
# the backend's routes against the CPU), bench_gemm_q (the tiles, gemm_qw
# and bf16 cuBLAS at llama3-8b's shapes, 16-2,048 rows), then the whole
# llama3-8b Q4_K_M (made and converted while the tests run) through
# bench_cuda_decode at QP_BATCHES (256 128 1) rows with gemm_qw on up to
# QP_ROWS (256, o1d's default) and off (0), and the bf16 file it was
# converted from (issue 18's bar: Q4_K_M at bf16's throughput, so the
# baseline in the same run), by turns; each step a time
# guard, so the call ends inside the device's 10 minutes; then batch 256
# with the gate/up product's fused SwiGLU off (--fusion off: A/B) and
# issue 17's batch-1 row of the Q4_K_M through o1d (table.sh batch1).
# QP_AB=FILE:EXPR adds an A/B of a compile-time switch (s_variant, built
# while the tests run) after bench_gemm_q, QP_AB2 a second variant in the
# same turns (each variant's test_gemm_q_cuda, quick, runs first); the
# call's ~585 s do not hold the build, ctest, the model and the variants'
# turns (2026-12-05: the A/B was skipped), so an A/B call sets QP_CTEST=0
# (no ctest) and comes after a call that made the model (kept in /tmp/o1m
# while the machine stays warm). Results in
# $OUT/session.txt (the table in $OUT/table.md); the logs in $OUT/logs.tgz.
#   OUT=dir [QP_AB='kernels/gemm_qw.cu:s/QW_OVERLAP 1/QW_OVERLAP 0/'] \
#     [QP_AB2='FILE:EXPR'] \
#     tools/gpu/quant_products.sh
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10; session.sh
# sets it too).
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "$0")/session.sh"
t0=$(date +%s)
# QP_BUDGET: the seconds this script may take (default 585: the call's 600)
left() { echo $((${QP_BUDGET:-585} - ($(date +%s) - t0))); }
s_build
s_models w8-q4km >/dev/null 2>&1 &
mp=$!
# QP_AB=FILE:EXPR (and QP_AB2, a second): variants (EXPR applied to FILE)
# built side by side while the tests and bench_gemm_q run (one after the
# other, the second did not fit: 2026-12-05)
vt="bench_gemm_q bench_cuda_decode test_gemm_q_cuda"
pa= pb=
if [ -n "${QP_AB:-}" ]; then
	s_variant ab "${QP_AB%%:*}" "${QP_AB#*:}" $vt &
	pa=$!
fi
if [ -n "${QP_AB2:-}" ]; then
	s_variant ab2 "${QP_AB2%%:*}" "${QP_AB2#*:}" $vt &
	pb=$!
fi
if [ "${QP_CTEST:-1}" != 0 ]; then
	s_ctest
	grep -h "gemm_qw\|FAILED\|y\[\|relative" "$s_out/ctest.txt" | cut -c1-220 |
		head -20 | tee -a "$s_out/session.txt"
fi
s_log "bench_gemm_q ($(left) s left)"
timeout 120 "$s_bin/tools/gpu/bench_gemm_q" --iters 10 --types q4_k,q6_k,q8_0 \
	--shapes gu,down,qkv,o --ways tiles,wg,bf16 >"$s_out/bench_gemm_q.txt" 2>&1
sed -n 's/^RESULT //p' "$s_out/bench_gemm_q.txt" |
	awk '{print $1,$2,$3,$4,$11,$22,$23,$24,$25,$26}' | tee -a "$s_out/session.txt"
wait $mp
s_log "models: $(cd "$s_models_dir" && echo *) ($(left) s left)"
# the variants against this tree, by turns: bench_gemm_q's Q4_K products,
# then the whole Q4_K_M at 256 rows
vs=
[ -n "$pa" ] && wait "$pa" && vs="$vs ab"
[ -n "$pb" ] && wait "$pb" && vs="$vs ab2"
s_log "variants built:${vs:- none} ($(left) s left)"
[ "$(left)" -gt 150 ] || vs=
if [ -n "$vs" ]; then
	# each variant's exact checks first (quick: a subset of the shapes,
	# the whole list takes ~150 s in ctest; a timing probe such as
	# QW_PROBE_TOKENS_ONCE fails them by design)
	for v in $vs; do
		O1_TEST_QUICK=1 timeout 90 \
			"/tmp/o1v-$v/build/gpu/tests/kernels/test_gemm_q_cuda" \
			>"$s_out/test_gemm_q-$v.txt" 2>&1
		echo "$v test_gemm_q_cuda rc=$? $(grep -c '^\[       OK' \
			"$s_out/test_gemm_q-$v.txt") ok, $(grep -c '^\[  FAILED  \] [a-z]' \
			"$s_out/test_gemm_q-$v.txt") failed" | tee -a "$s_out/session.txt"
	done
	for v in this $vs this $vs; do
		bin=$s_bin
		[ $v = this ] || bin=/tmp/o1v-$v/build/gpu
		timeout 60 "$bin/tools/gpu/bench_gemm_q" --iters 10 --types q4_k \
			--shapes gu,down,qkv,o --ways wg 2>&1 | sed -n 's/^RESULT //p' |
			awk -v v=$v '{print v,$1,$2,$3,$4,$22,$27}' | tee -a "$s_out/session.txt"
	done
	for v in this $vs; do
		[ "$(left)" -gt 60 ] || break
		bin=$s_bin
		[ $v = this ] || bin=/tmp/o1v-$v/build/gpu
		echo "# $v" >>"$s_out/session.txt"
		S_BIN=$bin s_bench w8-q4km --batch 256 --prompt 128 --tokens 32
	done
fi
for b in ${QP_BATCHES:-256 128 1}; do
	for r in "${QP_ROWS:-256}" 0; do
		[ "$(left)" -gt 40 ] || break
		s_bench w8-q4km --batch "$b" --prompt 128 --tokens 32 --quant-wg-rows "$r"
	done
	[ "$(left)" -gt 40 ] &&
		s_bench w8 --batch "$b" --prompt 128 --tokens 32
done
[ "$(left)" -gt 40 ] &&
	s_bench w8-q4km --batch 256 --prompt 128 --tokens 32 --fusion off
if [ "$(left)" -gt 50 ]; then
	TABLE_BATCH1=w8-q4km timeout $(($(left) - 15)) \
		bash "$(dirname "$0")/table.sh" batch1 >"$s_out/table_out.txt" 2>&1
	s_log "table batch1 rc=$? ($(left) s left)"
	pkill -x o1d
	python3 "$(dirname "$0")/table.py" "$s_out/table.raw" \
		>>"$s_out/session.txt" 2>&1
fi
s_log "end ($(left) s left)"
(cd "$s_out" && tar czf logs.tgz ./*.log ./*.txt 2>/dev/null &&
	rm -f ./*.log ./make.txt ./build.txt ./ctest.txt ./table_out.txt)
