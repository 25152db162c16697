#!/usr/bin/env bash
# A/B of compile-time defines of one kernel file, whole models, in one GPU
# machine call (over tools/gpu/session.sh): the main build's
# bench_cuda_decode (and o1model), each variant as an object variant
# (session.sh's s_object_variant: that one file recompiled with -DDEFINE,
# ~1.5 minutes, side by side while the models are made), then
# bench_cuda_decode on every model by turns: main, each variant, and main
# with each of AB_EXTRA's option sets, AB_ROUNDS times. A summary of
# tok/s and prefill ms (the prompt's) by model and variant (every round,
# and the median) closes $OUT/session.txt; the logs go into
# $OUT/session-logs.tgz (only 8 files come back from a call: the other
# files are removed).
#
#   OUT=dir AB_SRC=kernels/gemv_q.cu AB_VARIANTS="p1:GQ_PROBE=1 p4:GQ_PROBE=4" \
#     [AB_MODELS="qw-q4km l1-q4km"] [AB_ROUNDS=2] [AB_EXTRA="--attention off;--prefetch on"] \
#     [AB_ARGS="--prompt 128 --tokens 128 --reps 3"] [AB_BUDGET=s] tools/gpu/object_ab.sh
#
# AB_SRC is needed only with AB_VARIANTS (without, main and AB_EXTRA's
# option sets alone). A variant's defines may be several, joined by commas
# (w16pf:GQ_WARPS=16,GQ_SELF_PF=8192). AB_TARGETS (default "o1model
# bench_cuda_decode"): what the main build makes (add test_gpu_backend to
# run it after).
# AB_CHECK=1: each variant's test_gpu_backend too (the same object swapped
# into it; AB_TARGETS must build test_gpu_backend), run before the rounds:
# the whole models against the CPU backend, for variants whose bits differ
# from main's. AB_MODELS: session.sh's model names (empty: none, for an
# A/B of AB_GEMM alone). AB_GEMM: bench_gemm_q's arguments (e.g. "--rows
# 256 --types q4_k --shapes gu,down,qkv,o --ways wg,bf16"), where AB_SRC
# is a kernel bench_gemm_q.cu includes (gemm_q, gemm_qp, gemm_qi8 or
# gemm_qw.cu): main's and each variant's bench_gemm_q (bench_gemm_q.cu
# compiled again with the variant) run by turns, AB_ROUNDS times, before
# the models, and summed up as the models are (wg_us, and bf16_us beside
# it). AB_BUDGET (default 560): rounds not
# begun past it are skipped. A variant whose build fails is left out (its
# log says why). The kernel's GQ_PROBE variants (gemv_q.cu) give wrong
# results by design: their greedy digests differ, their times are what
# counts.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "$0")/session.sh"
t0=$(date +%s)
left() { echo $((${AB_BUDGET:-560} - ($(date +%s) - t0))); }
src=${AB_SRC:-}
[ -z "${AB_VARIANTS:-}" ] || [ -n "$src" ] ||
	{ echo "object_ab: AB_VARIANTS needs AB_SRC, the kernel file" >&2; exit 2; }
models=${AB_MODELS-qw-q4km l1-q4km}
rounds=${AB_ROUNDS:-2}
read -r -a args <<<"${AB_ARGS:---prompt 128 --tokens 128 --reps 3}"
IFS=';' read -r -a extras <<<"${AB_EXTRA:-}"
results=$s_out/ab.raw
: >"$results"

s_log "start: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
targets=${AB_TARGETS:-o1model bench_cuda_decode}
[ -z "${AB_GEMM:-}" ] || targets="$targets bench_gemm_q"
O1_GPU_TARGETS=$targets s_build
[ -x "$s_bin/tools/gpu/bench_cuda_decode" ] || { s_log "no bench_cuda_decode"; exit 1; }
names=()
for v in ${AB_VARIANTS:-}; do
	s_object_variant "${v%%:*}" "$src" "${v#*:}" &
	[ "${AB_CHECK:-0}" = 0 ] ||
		s_object_variant "${v%%:*}-check" "$src" "${v#*:}" tests/gpu/test_gpu_backend &
	[ -z "${AB_GEMM:-}" ] ||
		s_object_variant "${v%%:*}-gemm" "$src" "${v#*:}" tools/gpu/bench_gemm_q \
			tools/gpu/bench_gemm_q.cu &
	names+=("${v%%:*}")
done
# shellcheck disable=SC2086 # the models: words
s_models $models
wait
for n in "${names[@]}"; do
	t=/tmp/o1o-$n-check/tests/gpu/test_gpu_backend
	[ "${AB_CHECK:-0}" != 0 ] || continue
	[ -x "$t" ] || { s_log "variant $n: no test_gpu_backend"; continue; }
	[ -e "$s_root/../shared" ] || ln -s "$s_root/.gpu-testdata" "$s_root/../shared"
	(cd "$s_bin/tests/gpu" && timeout 200 "$t" "$s_bin/tools/o1model/o1model") \
		>"$s_out/check-$n.txt" 2>&1
	rc=$?
	s_log "variant $n: test_gpu_backend rc=$rc ($(grep -cE '^\[       OK' "$s_out/check-$n.txt") passed, $(grep -cE '^\[  FAILED  \] [a-z]' "$s_out/check-$n.txt") failed)"
done
ok=(main)
for n in "${names[@]}"; do
	[ -x "/tmp/o1o-$n/tools/gpu/bench_cuda_decode" ] && ok+=("$n")
done
s_log "variants built: ${ok[*]} ($(left) s left)"

# AB_GEMM: the products alone, by turns; a line a (shape, rows, type) and
# build: the wg_us of every round, the median, its change against main's,
# and the median bf16_us (cuBLAS, the same in every build)
if [ -n "${AB_GEMM:-}" ]; then
	read -r -a gemm_args <<<"$AB_GEMM"
	: >"$s_out/gemm.raw"
	for round in $(seq 1 "$rounds"); do
		[ "$(left)" -gt 60 ] || { s_log "gemm round $round skipped: budget"; break; }
		s_log "gemm round $round"
		for n in main "${names[@]}"; do
			b=$s_bin/tools/gpu/bench_gemm_q
			[ "$n" = main ] || b=/tmp/o1o-$n-gemm/tools/gpu/bench_gemm_q
			[ -x "$b" ] || { s_log "variant $n: no bench_gemm_q"; continue; }
			"$b" "${gemm_args[@]}" 2>>"$s_out/gemm.log" |
				sed -n "s/^RESULT /$n /p" >>"$s_out/gemm.raw"
		done
	done
	s_log "gemm summary: wg_us every round, the median (its change against main's), bf16_us's median"
	python3 - "$s_out/gemm.raw" <<'PY' | tee -a "$s_out/session.txt"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, *pairs = line.split()
    f = dict(p.split("=", 1) for p in pairs if "=" in p)
    key = (f.get("shape"), f.get("m"), f.get("type"))
    runs.setdefault(key, {}).setdefault(name, []).append(f)
def med(rows, k):
    v = [float(r[k]) for r in rows if float(r.get(k, -1)) > 0]
    return statistics.median(v) if v else None
for (shape, m, typ), by in runs.items():
    base = med(by.get("main", []), "wg_us")
    for name, rows in by.items():
        w = med(rows, "wg_us")
        ch = ("" if name == "main" or w is None or not base
              else f" ({100 * (w / base - 1):+.1f}%)")
        b = med(rows, "bf16_us")
        print(f"gemm {shape} m={m} {typ} | {name}: wg_us "
              f"{' '.join(r.get('wg_us', '-') for r in rows)} median "
              f"{'-' if w is None else f'{w:.1f}'}{ch} | bf16_us "
              f"{'-' if b is None else f'{b:.1f}'}")
PY
fi

# one run: NAME (its label), BIN (a build's folder), MODEL, options...
ab_one() {
	local name=$1 bin=$2 m=$3 r t p
	shift 3
	r=$(S_BIN=$bin s_bench "$m" "${args[@]}" "$@" | grep '^RESULT')
	t=$(echo "$r" | sed -n 's/.* tok_s=\([0-9.]*\) .*/\1/p')
	p=$(echo "$r" | sed -n 's/.* prefill_ms=\([0-9.]*\) .*/\1/p')
	echo "$m $name ${t:-failed} ${p:-failed}" >>"$results"
}

for round in $(seq 1 "$rounds"); do
	[ "$(left)" -gt 60 ] || { s_log "round $round skipped: budget"; break; }
	s_log "round $round"
	for m in $models; do
		for n in "${ok[@]}"; do
			if [ "$n" = main ]; then
				ab_one main "$s_bin" "$m"
			else
				echo "# variant $n" >>"$s_out/session.txt"
				ab_one "$n" "/tmp/o1o-$n" "$m"
			fi
		done
		for e in "${extras[@]}"; do
			[ -n "$e" ] || continue
			# shellcheck disable=SC2086 # the option set: words
			ab_one "main $e" "$s_bin" "$m" $e
		done
	done
done

s_log "summary: tok/s and the prompt's prefill ms, every round, then the median (and its change against main's)"
python3 - "$results" <<'PY' | tee -a "$s_out/session.txt"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    model, rest = line.split(" ", 1)
    label, tok, pre = rest.rstrip("\n").rsplit(" ", 2)
    runs.setdefault((model, label), []).append((tok, pre))
def median(values):
    ok = [float(v) for v in values if v != "failed"]
    return statistics.median(ok) if ok else None
def shown(m):
    return "-" if m is None else f"{m:.3f}"
def change(m, base):
    return "" if m is None or not base else f" ({100 * (m / base - 1):+.1f}%)"
for (model, label), values in runs.items():
    toks = [t for t, _ in values]
    pres = [p for _, p in values]
    base = median([t for t, _ in runs.get((model, "main"), [])])
    mt, mp = median(toks), median(pres)
    print(f"{model} | {label}: tok/s {' '.join(toks)} median {shown(mt)}"
          f"{'' if label == 'main' else change(mt, base)}"
          f" | prefill ms {' '.join(pres)} median {shown(mp)}")
PY
s_pack
(cd "$s_out" && find . -maxdepth 1 -type f ! -name session-logs.tgz \
	! -name session.txt ! -name ab.raw ! -name gemm.raw -delete)
