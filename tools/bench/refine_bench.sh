#!/bin/sh
# Refinement and confidence figures of docs/PERFORMANCE.md ("Refinement").
#   tools/bench/refine_bench.sh BUILD_DIR MODEL [RUNS]
# Starts o1d on the CPU backend with MODEL, then:
# 1. cost of per-token confidence: RUNS interleaved pairs of o1bench runs
#    (20 requests of 256 greedy tokens, one stream) without and with
#    --confidence; prints every throughput and the medians;
# 2. prefix reuse across rounds: one chat request with --refine 3 and
#    the prompt tokens, cached tokens and rounds its FINAL reports.
set -eu
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
build=$1 model=$2 runs=${3:-7}
dir=$(mktemp -d /tmp/o1-refine-bench-XXXXXX)
sock=$dir/o1d.sock
"$build/daemon/o1d/o1d" --set ipc.socket="$sock" --set model.path="$model" \
	--set metrics.enabled=false --set backend.device=cpu \
	--set backend.threads=1 --set refine.confidence_threshold=0 \
	2>"$dir/o1d.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
i=0
until grep -q "o1d: ready" "$dir/o1d.log"; do
	i=$((i + 1))
	[ $i -lt 300 ] || { cat "$dir/o1d.log"; exit 1; }
	sleep 0.1
done
bench() {
	"$build/tools/o1bench/o1bench" run --socket "$sock" --concurrency 1 "$@"
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
i=0
while [ $i -lt "$runs" ]; do
	bench --requests 20 --max-tokens 256 | sed -n 's/^throughput_tok_s=//p' >>"$dir/off"
	bench --requests 20 --max-tokens 256 --confidence | sed -n 's/^throughput_tok_s=//p' >>"$dir/on"
	i=$((i + 1))
done
echo "confidence off tok/s: $(tr '\n' ' ' <"$dir/off")"
echo "confidence on  tok/s: $(tr '\n' ' ' <"$dir/on")"
echo "median off $(median <"$dir/off") on $(median <"$dir/on")"
bench --requests 1 --max-tokens 48 --chat --refine 3 --prompt \
	"Explain in two sentences why the sky is blue, and what changes at sunset when the light crosses more of the atmosphere." |
	grep -E '^(tokens|prompt_tokens|cached_tokens|rounds|e2e_ms_p50)='
