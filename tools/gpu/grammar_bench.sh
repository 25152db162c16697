#!/usr/bin/env bash
# Structured output beside unconstrained decoding in the same o1d (issue 23,
# Speed): o1d on the CUDA backend (sampling in the step, the default) with a
# random bf16 model of each preset, o1bench run at concurrency 1 and 64
# (128-word prompts, 128 new tokens, temperature 1), each load twice in
# turn: unconstrained, then every request under
# tools/bench/grammar/records.schema.json (an array of at least 24
# records: no document ends within 128 tokens, so both loads make the
# same token count), repeated ROUNDS times (default 2), interleaved. The
# models carry Llama 3's tokenizer (128,256 tokens, the vocabulary the
# masks are computed over) when ../shared/testdata/vocab/llama3.2/
# tokenizer.json is there (carry it in .gpu-testdata/vocab/llama3.2/),
# else o1model's small built-in one (masks then cover its few hundred
# tokens; the device still masks the preset's full logits row). Results
# go to OUT/grammar.txt; compare tokens_per_s of each pair (target: the
# constrained >= 95% of the unconstrained).
#   tools/gpu/grammar_bench.sh OUT [presets...]   (default llama3.2-1b)
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
out=${1:?usage: grammar_bench.sh OUT [presets...]}
shift
presets=${*:-llama3.2-1b}
bin=${O1_GPU_BIN:-build/gpu}
rounds=${ROUNDS:-2}
device=${O1_DEVICE:-cuda:0} # cpu: a local check of the script
schema=$PWD/tools/bench/grammar/records.schema.json
vocab=../shared/testdata/vocab/llama3.2/tokenizer.json
models=/tmp/o1-grammar-models
run=$(mktemp -d /tmp/o1-grammar.XXXXXX)
sock=$run/o1d.sock
mkdir -p "$models" "$out"
rc=0
tok=()
[ -f "$vocab" ] && tok=(--tokenizer "$vocab")

start_o1d() { # model
  "$bin/daemon/o1d/o1d" --set model.path="$1" --set backend.device="$device" \
    --set ipc.socket="$sock" --set metrics.enabled=false \
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

bench() { # preset concurrency label [o1bench options]
  local conn=$(($2 < 16 ? $2 : $2 / 16)) n=$(($2 == 1 ? 8 : $2 * 2))
  echo "# $1: concurrency $2, $n requests, 128 new tokens: $3" >>"$out/grammar.txt"
  "$bin/tools/o1bench/o1bench" run --socket "$sock" --requests "$n" \
    --concurrency "$2" --connections "$conn" --max-tokens 128 \
    --prompt-tokens 128 --temperature 1 --cold "${@:4}" \
    >>"$out/grammar.txt" 2>>"$out/grammar.log" || rc=1
}

echo "# tokenizer: ${tok[1]:-the built-in one of o1model}" >>"$out/grammar.txt"
for p in $presets; do
  m=$models/$p
  [ -d "$m" ] || "$bin/tools/o1model/o1model" make --preset "$p" \
    --format safetensors --dtype bf16 "${tok[@]}" --out "$m" \
    >>"$out/grammar.log" 2>&1 ||
    { echo "make $p failed" | tee -a "$out/grammar.txt"; rc=1; continue; }
  start_o1d "$m" || { echo "o1d on $p did not start" | tee -a "$out/grammar.txt"; rc=1; continue; }
  grep -E "sampling on the device|graph" "$run/o1d.log" | head -4 >>"$out/grammar.txt"
  # the first use compiles the schema (cached after): not timed
  bench "$p" 1 "warm-up (schema compile)" --json-schema "$schema"
  for c in 1 64; do
    for r in $(seq 1 "$rounds"); do
      bench "$p" "$c" "unconstrained (round $r)"
      bench "$p" "$c" "records schema (round $r)" --json-schema "$schema"
    done
  done
  grep -E "compiled|grammar" "$run/o1d.log" | head -4 >>"$out/grammar.txt"
  kill -TERM "$pid"; wait "$pid"; echo "# o1d exit $?" >>"$out/grammar.txt"
done
cat "$out/grammar.txt"
rm -rf "$run"
exit $rc
