#!/usr/bin/env bash
# Quick start on a fresh clone: installs what is missing, builds o1d and
# its tools in build/release, writes the demo model into build/demo/
# (unless a model is configured), starts o1d on it with a socket under
# /tmp, sends one chat request through o1chat (libo1client), prints the
# streamed answer and its timings, runs `o1ctl smoke` (real requests, each
# checked) while `o1ctl slo` measures the SLOs of config [slo] over that
# traffic, and stops o1d with SIGTERM. Latency objectives missed while
# every request succeeded mean a slow machine, said so, not a failure.
#
#   tools/quickstart.sh [-c FILE] [--set section.key=value ...]
#
# -c FILE (or $O1D_CONFIG) and --set are handed to o1d; when they set
# model.path, that model is served instead of the demo model. Needs no
# root: the socket and the metrics file (metrics.mode=shm, no eBPF pins)
# live in a temporary folder.
# Safe to run again (it rebuilds what changed; the demo model is the same
# bytes every time). Exits non-zero, saying which step failed, on any
# failure, including o1d not exiting 0 after SIGTERM.
set -euo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build/release
demo=$root/build/demo

config=${O1D_CONFIG:-}
sets=()
while [ $# -gt 0 ]; do
  case $1 in
  -c) config=${2:?-c needs a FILE}; shift 2 ;;
  --set) sets+=(--set "${2:?--set needs section.key=value}"); shift 2 ;;
  --set=*) sets+=(--set "${1#--set=}"); shift ;;
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "quickstart: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

fail() {
  echo "quickstart: FAILED: $*" >&2
  exit 1
}

# The model.path a config file or a --set names ("" when none).
configured_model() {
  local path=""
  if [ -n "$config" ]; then
    [ -r "$config" ] || fail "config file '$config' is not readable"
    path=$(awk -F' *= *' '/^\[/ { s = $0 } s == "[model]" && $1 == "path" \
      { print $2 }' "$config")
  fi
  for s in "${sets[@]}"; do
    case $s in model.path=*) path=${s#model.path=} ;; esac
  done
  echo "$path"
}

# True when the config file or a --set sizes the KV pool.
configured_kv() {
  if [ -n "$config" ] && awk -F' *= *' '/^\[/ { s = $0 } s == "[kv]" &&
      ($1 == "pages" || $1 == "memory_fraction") { f = 1 } END { exit !f }' \
      "$config"; then
    return 0
  fi
  for s in "${sets[@]}"; do
    case $s in kv.pages=*|kv.memory_fraction=*) return 0 ;; esac
  done
  return 1
}

echo "== 1/7 dependencies"
./tools/deps.sh

echo "== 2/7 configure and build ($build)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  >/dev/null
cmake --build "$build" -j "$(nproc)" --target o1model o1chat o1bench o1ctl
cmake --build "$build" -j "$(nproc)" --target o1d ||
  fail "building o1d (the daemon, daemon/o1d) failed or it is not in this tree yet"
o1model=$build/tools/o1model/o1model
o1chat=$build/tools/o1chat/o1chat
o1ctl=$build/tools/o1ctl/o1ctl
o1d=$(find "$build/daemon" -type f -name o1d -perm -u+x -print -quit)
[ -x "$o1d" ] || fail "no o1d binary under $build/daemon"

model=$(configured_model)
model_args=()
if [ -n "$model" ]; then
  echo "== 3/7 model: $model (configured; no demo model written)"
else
  echo "== 3/7 demo model ($demo/demo.gguf)"
  cat <<MSG
The demo model is a BIGRAM model of this project's own docs (README.md and
docs/*.md): o1model learns a byte-level BPE vocabulary from the text, counts
which token follows which, and writes the counts as transformer weights
(one-hot embeddings, attention and MLP outputs zero, log P(next | current)
in the LM head). It runs through the same engine as a real model, and what
it writes is made of the docs' own words, one likely pair at a time; it
does not understand anything.
MSG
  mkdir -p "$demo"
  texts=()
  for f in README.md docs/*.md; do
    [ -f "$f" ] && texts+=(--from-text "$f")
  done
  "$o1model" make --preset demo "${texts[@]}" --out "$demo/demo.gguf"
  model=$demo/demo.gguf
  model_args=(--set "model.path=$model")
fi
# A small KV pool unless one is configured (the default takes 90% of the
# free memory, which a quick start does not need).
configured_kv || model_args+=(--set kv.pages=1024)

echo "== 4/7 start o1d"
run=$(mktemp -d /tmp/o1d-quickstart.XXXXXX)
sock=$run/o1d.sock
log=$run/o1d.log
cfg_args=()
[ -n "$config" ] && cfg_args=(-c "$config")
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$run"
}
trap cleanup EXIT
cmd=("$o1d" "${cfg_args[@]}" "${model_args[@]}" --set "ipc.socket=$sock"
     --set metrics.enabled=true --set metrics.mode=shm
     --set "metrics.shm_path=$run/metrics.shm" "${sets[@]}")
echo "${cmd[*]}"
"${cmd[@]}" >"$log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q "o1d: ready" "$log" && break
  if ! kill -0 "$pid" 2>/dev/null; then
    tail -n 20 "$log" >&2
    fail "o1d exited before it was ready (log above)"
  fi
  sleep 0.1
done
grep -q "o1d: ready" "$log" || { tail -n 20 "$log" >&2;
  fail "o1d not ready after 60 s (log above)"; }
grep "o1d: ready" "$log"

echo "== 5/7 a chat request through libo1client (o1chat)"
prompt="What does the daemon do?"
echo "> $prompt"
timeout 120 "$o1chat" --socket "$sock" --max-tokens 80 --temperature 0.8 \
  --seed 1 "$prompt" || { tail -n 20 "$log" >&2;
  fail "o1chat failed (o1d log above)"; }

ctl=("$o1ctl" "${cfg_args[@]}" "${sets[@]}" --socket "$sock"
     --set metrics.mode=shm --set "metrics.shm_path=$run/metrics.shm")
echo "== 6/7 o1ctl smoke (o1ctl slo measures meanwhile)"
"${ctl[@]}" slo --window 4 --json >"$run/slo.json" &
slo_pid=$!
sleep 0.5
timeout 120 "${ctl[@]}" smoke || { tail -n 20 "$log" >&2;
  fail "o1ctl smoke failed a check (verdicts and o1d log above)"; }

echo "== 7/7 o1ctl slo over the smoke traffic (objectives: config [slo])"
slo_rc=0
wait "$slo_pid" || slo_rc=$?
cat "$run/slo.json"
# The names of the breached objectives, from slo --json.
breached=$(tr '{' '\n' <"$run/slo.json" |
  sed -n 's/^"name":"\([a-z0-9_]*\)".*"breach":true.*/\1/p' | tr '\n' ' ')
if [ "$slo_rc" -eq 0 ]; then
  echo "slo: every objective met"
elif [ "$slo_rc" -eq 1 ] && [ -n "$breached" ] &&
     ! grep -qw success_rate <<<"$breached"; then
  # every request was served right (smoke passed, success rate met): only
  # latency objectives missed, which says how fast this machine is
  echo "slo: o1d works; this machine is too slow for the latency" \
       "objectives of [slo] (breached: ${breached% }); on a loaded or" \
       "small machine that is expected, not a failure"
else
  fail "o1ctl slo: ${breached:-an objective} breached (exit $slo_rc)"
fi

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || { tail -n 20 "$log" >&2;
  fail "o1d exited $rc after SIGTERM (log above)"; }
echo "o1d stopped (SIGTERM, exit 0)"

cat <<MSG

Done. To serve a real model instead of the demo, point o1d at a GGUF file
or a Hugging Face folder (config.json + *.safetensors):
  tools/quickstart.sh --set model.path=/path/to/model.gguf
or set [model] path = ... in a config file (see config/o1d.ini) and pass
it with -c FILE (or O1D_CONFIG=FILE). Check a model first with:
  $o1model info /path/to/model.gguf
Convert between the formats with:
  $o1model convert IN OUT --format gguf|safetensors
Gate a deploy on a running o1d with (see docs/OPERATIONS.md):
  $o1ctl health && $o1ctl smoke && $o1ctl slo --baseline baseline.json
Load test a running o1d with:
  $build/tools/o1bench/o1bench run --socket PATH --requests 64 \\
    --concurrency 8 --max-tokens 64
MSG
