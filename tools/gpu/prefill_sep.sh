#!/usr/bin/env bash
# Prefill/decode separation on the GPU machine (#17 item 5), side by side:
# o1d on the CUDA backend serving a random bf16 llama3-8b cut to SEP_LAYERS
# layers (default 4), started once per prefill budget (default "time 256/2
# 2048/0"): B/K is scheduler.prefill_chunk_tokens=B and
# prefill_tokens_per_decode=K with the time budget off
# (prefill_time_ratio=0; 2048/0 = the whole max_batch_tokens, prefill never
# held back, as before the separation); "time" is the budget set by time
# (scheduler.prefill_time_ratio=1; o1d's default is auto: 0.15 on float weights),
# "time:R" the same with ratio R (a step with prefill <= (1 + R) x a decode
# step); each time running
#  1. o1bench run --long: SEP_STREAMS (64) streams of 128-word prompts
#     generating SEP_GEN (1024) tokens; once they decode, SEP_LONG (8)
#     cold prompts of SEP_WORDS (5150) words arrive at once: about 8,190
#     tokens each with the presets' vocabulary (1.59 tokens a word; every
#     --prompt-tokens count below is words, not tokens). itl_before is the
#     streams' token interval undisturbed, itl_during while the long
#     prompts prefill (target: its p99 <= 2x itl_before's p50), long_ttft
#     their time to first token;
#  1b. the same streams alone (no long prompts): their ITL p50 over the
#     whole run, at the contexts the streams reach during the long
#     prompts (issue 17 item 5 compares the p99 during with the streams'
#     p50 "without them"; itl_before is the stricter, shorter-context one);
#  2. TTFT of one cold prompt alone, 1290 words (~2,050 tokens) and 2048
#     words (~3,250): a lone prompt must not get slower;
#  3. 256 streams, 128-word prompts, 128 new tokens: throughput and ITL.
# Then one summary table. Results in OUT/sep.txt, logs in OUT/sep.log and
# o1d's own in OUT/o1d-BUDGET.log (SEP_SETS: more o1d options, e.g.
# "--set log.level=debug": each mixed step's rows, prompt tokens and time).
# SEP_DEVICE, SEP_BIN, SEP_MODEL (made when absent), SEP_TPUT (256): a
# short check of the script itself on the CPU, e.g. SEP_DEVICE=cpu
# SEP_BIN=build SEP_MODEL=demo.gguf SEP_STREAMS=4 SEP_LONG=2 SEP_WORDS=300
# SEP_GEN=300 SEP_TPUT=4.
# Run by tools/gpu/run.sh sep after the build (O1_GPU_TARGETS="o1d o1model
# o1bench" builds only these), or alone once build/gpu has them.
#   tools/gpu/prefill_sep.sh OUT [B/K|time|time:R...]
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.." || exit 1
out=${1:?usage: prefill_sep.sh OUT [B/K|time|time:R...]}
shift
budgets=${*:-time 256/2 2048/0}
layers=${SEP_LAYERS:-4}
streams=${SEP_STREAMS:-64}
long=${SEP_LONG:-8}
words=${SEP_WORDS:-5150}
gen=${SEP_GEN:-1024}
tput=${SEP_TPUT:-256}
device=${SEP_DEVICE:-cuda:0}
bin=${SEP_BIN:-build/gpu}
model=${SEP_MODEL:-/tmp/o1-bench-models/llama3-8b-L$layers}
run=$(mktemp -d /tmp/o1-sep.XXXXXX)
sock=$run/o1d.sock
mkdir -p "$out" "$(dirname "$model")"
rc=0

budget_sets() { # B/K | time | time:R: o1d's --set options for it
  case $1 in
    time) echo "--set scheduler.prefill_time_ratio=1" ;;
    time:*) echo "--set scheduler.prefill_time_ratio=${1#time:}" ;;
    */*) echo "--set scheduler.prefill_time_ratio=0" \
      "--set scheduler.prefill_chunk_tokens=${1%/*}" \
      "--set scheduler.prefill_tokens_per_decode=${1#*/}" ;;
    *) return 1 ;;
  esac
}

start_o1d() { # B/K | time | time:R
  local sets
  sets=$(budget_sets "$1") || { echo "bad budget $1 (B/K, time or time:R)"; return 1; }
  # shellcheck disable=SC2086 # the sets: words without spaces inside
  "$bin/daemon/o1d/o1d" --set model.path="$model" --set backend.device="$device" \
    --set ipc.socket="$sock" --set ipc.max_clients=128 \
    --set scheduler.max_running=256 $sets ${SEP_SETS:-} >"$run/o1d.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q "o1d: ready" "$run/o1d.log" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  tail -20 "$run/o1d.log"
  return 1
}

bench() { # file concurrency requests words new-tokens [o1bench options]
  local conn=$(($2 < 16 ? $2 : $2 / 16))
  echo "# o1bench run --concurrency $2 --connections $conn --requests $3 --prompt-tokens $4 --max-tokens $5 ${*:6}" >>"$1"
  "$bin/tools/o1bench/o1bench" run --socket "$sock" --requests "$3" \
    --concurrency "$2" --connections "$conn" --max-tokens "$5" \
    --prompt-tokens "$4" "${@:6}" >>"$1" 2>>"$out/sep.log" || rc=1
}

val() { # file key: the last value of key=
  grep "^$2=" "$1" | tail -1 | cut -d= -f2
}

[ -e "$model" ] || "$bin/tools/o1model/o1model" make --preset llama3-8b \
  --layers "$layers" --ctx 16384 --format safetensors --dtype bf16 \
  --out "$model" >>"$out/sep.log" 2>&1 ||
  { echo "make failed" | tee -a "$out/sep.txt"; exit 1; }
for b in $budgets; do
  f=$run/b${b/\//-}
  start_o1d "$b" || { echo "o1d (budget $b) did not start" | tee -a "$out/sep.txt"; rc=1; continue; }
  bench "$f.long" "$streams" "$streams" 128 "$gen" --cold --long "$long" \
    --long-tokens "$words" --long-after-ms 1000
  bench "$f.alone" "$streams" "$streams" 128 "$gen" --cold
  bench "$f.ttft2k" 1 8 1290 1 --cold
  bench "$f.ttft3k" 1 8 2048 1 --cold
  bench "$f.tput" "$tput" $((tput * 2)) 128 128 --cold
  kill -TERM "$pid"; wait "$pid"; ex=$?
  cp "$run/o1d.log" "$out/o1d-${b/\//-}.log"
  { echo "## budget $b: $(budget_sets "$b") (o1d exit $ex)"; cat "$f".*; } >>"$out/sep.txt"
done
{
  echo "## summary (ms; tok/s): budget | ITL p50 p99 before | ITL p50 p99 during | p99 during / p50 before | ITL p50 alone, p99 during / it | long TTFT p50 max | lone TTFT p50 2k 3k | $tput streams tok/s, ITL p50 p99"
  for b in $budgets; do
    f=$run/b${b/\//-}
    [ -e "$f.long" ] || continue
    python3 - "$b" "$(val "$f.long" itl_before_ms_p50)" "$(val "$f.long" itl_before_ms_p99)" \
      "$(val "$f.long" itl_during_ms_p50)" "$(val "$f.long" itl_during_ms_p99)" \
      "$(val "$f.long" long_ttft_ms_p50)" "$(val "$f.long" long_ttft_max_ms)" \
      "$(val "$f.ttft2k" ttft_ms_p50)" "$(val "$f.ttft3k" ttft_ms_p50)" \
      "$(val "$f.tput" throughput_tok_s)" "$(val "$f.tput" itl_ms_p50)" \
      "$(val "$f.tput" itl_ms_p99)" "$(val "$f.alone" itl_ms_p50)" <<'PY'
import sys
b, *v = sys.argv[1:]
x = [float(s) if s else float("nan") for s in v]
r = x[3] / x[0] if x[0] else float("nan")
ra = x[3] / x[11] if x[11] else float("nan")
print(f"{b:>7} | {x[0]:.2f} {x[1]:.2f} | {x[2]:.2f} {x[3]:.2f} | {r:.2f}x | "
      f"{x[11]:.2f}, {ra:.2f}x | "
      f"{x[4]:.0f} {x[5]:.0f} | {x[6]:.1f} {x[7]:.1f} | {x[8]:.0f}, {x[9]:.2f} {x[10]:.2f}")
PY
  done
} >>"$out/sep.txt"
cat "$out/sep.txt"
rm -rf "$run"
exit $rc
