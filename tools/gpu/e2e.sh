#!/usr/bin/env bash
# End-to-end decode through libo1client on the GPU machine: o1d on the CUDA
# backend serving a random bf16 model of a preset's shape, o1bench run at
# concurrency 1 (batch-1 decode), 64, 128 and 256 streams (128- and
# 512-word prompts, 128 new tokens; 16 streams share a connection, as a
# multi-threaded client's would, and peak_inflight shows how many ran), TTFT
# for 512- and 2048-word prompts cold (--cold: no prefix-cache hit) and
# cached (one prompt repeated), the graph counters from the metrics (o1ctl
# stats --json), then batch-1 decode again with graphs off. Run by
# tools/gpu/run.sh e2e after the build; results go to OUT/e2e.txt.
# E2E_QUICK=1: batch-1 decode only (graphs on), for a short GPU call.
#   tools/gpu/e2e.sh OUT [presets...]
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
out=${1:?usage: e2e.sh OUT [presets...]}
shift
presets=${*:-qwen2.5-0.5b llama3.2-1b llama3-8b}
bin=build/gpu
models=/tmp/o1-bench-models
run=$(mktemp -d /tmp/o1-e2e.XXXXXX)
sock=$run/o1d.sock
mkdir -p "$models"
rc=0

start_o1d() { # model [graphs.enabled]
  "$bin/daemon/o1d/o1d" --set model.path="$1" --set backend.device=cuda:0 \
    --set ipc.socket="$sock" --set metrics.mode=shm \
    --set graphs.enabled="${2:-true}" \
    --set scheduler.max_running=256 >"$run/o1d.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q "o1d: ready" "$run/o1d.log" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  tail -20 "$run/o1d.log"
  return 1
}

bench() { # preset concurrency requests prompt-words new-tokens [o1bench options]
  local conn=$(($2 < 16 ? $2 : $2 / 16))
  echo "# $1: o1bench run, concurrency $2 over $conn connections, $3 requests, $4-word prompt, $5 new tokens ${*:6}" >>"$out/e2e.txt"
  "$bin/tools/o1bench/o1bench" run --socket "$sock" --requests "$3" \
    --concurrency "$2" --connections "$conn" --max-tokens "$5" \
    --prompt-tokens "$4" "${@:6}" >>"$out/e2e.txt" 2>>"$out/e2e.log" || rc=1
}

for p in $presets; do
  m=$models/$p
  [ -d "$m" ] || "$bin/tools/o1model/o1model" make --preset "$p" \
    --format safetensors --dtype bf16 --out "$m" >>"$out/e2e.log" 2>&1 ||
    { echo "make $p failed" | tee -a "$out/e2e.txt"; rc=1; continue; }
  t0=$(date +%s.%N)
  start_o1d "$m" || { echo "o1d on $p did not start" | tee -a "$out/e2e.txt"; rc=1; continue; }
  t1=$(date +%s.%N)
  echo "# $p: start to ready $(python3 -c "print(round($t1 - $t0, 2))") s" >>"$out/e2e.txt"
  grep -E "graph|capture|kv:|pages" "$run/o1d.log" | head -8 >>"$out/e2e.txt"
  if [ "${E2E_QUICK:-0}" = 1 ]; then
    bench "$p" 1 8 128 128 --cold
    kill -TERM "$pid"; wait "$pid"; echo "# o1d exit $?" >>"$out/e2e.txt"
    continue
  fi
  for c in 1 64 128 256; do
    n=$((c == 1 ? 8 : c * 2))
    bench "$p" "$c" "$n" 128 128 --cold
  done
  bench "$p" 256 512 512 128 --cold
  for t in 512 2048; do
    bench "$p" 1 8 "$t" 1 --cold
    bench "$p" 1 8 "$t" 1
  done
  echo "# $p: graph counters (o1ctl stats --json)" >>"$out/e2e.txt"
  "$bin/tools/o1ctl/o1ctl" --set ipc.socket="$sock" --set metrics.mode=shm \
    stats --json >"$out/stats-$p.json" 2>>"$out/e2e.log" || rc=1
  python3 - "$out/stats-$p.json" >>"$out/e2e.txt" 2>&1 <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
g = s.get("graphs", {})
hits = sum(b.get("hits", 0) for b in g.get("buckets", []))
miss = sum(b.get("misses", 0) for b in g.get("buckets", []))
print("graph hits", hits, "misses", miss, "oversize", g.get("oversize"),
      "capture_us", g.get("capture_us"), "capture_bytes", g.get("capture_bytes"))
print("steps", s.get("counters", {}).get("steps"))
PY
  kill -TERM "$pid"; wait "$pid"; echo "# o1d exit $?" >>"$out/e2e.txt"
  echo "# $p: graphs off" >>"$out/e2e.txt"
  start_o1d "$m" false || { echo "o1d on $p (graphs off) did not start" | tee -a "$out/e2e.txt"; rc=1; continue; }
  bench "$p" 1 8 128 128
  kill -TERM "$pid"; wait "$pid"; echo "# o1d exit $?" >>"$out/e2e.txt"
done
cat "$out/e2e.txt"
rm -rf "$run"
exit $rc
