#!/usr/bin/env bash
# Quick start on a fresh clone: installs what is missing, builds a release
# build in build/release, writes a small demo model into build/demo/ and
# shows what it holds. Safe to run again (it rebuilds what changed and
# rewrites the demo model, which is the same bytes every time).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build/release
demo=$root/build/demo

echo "== 1/3 dependencies"
./tools/deps.sh

echo "== 2/3 configure and build ($build)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)"

echo "== 3/3 demo model ($demo/tiny.gguf)"
mkdir -p "$demo"
"$build/tools/o1model/o1model" make --preset tiny --arch llama --seed 1 \
  --dtype f32 --format gguf --out "$demo/tiny.gguf"
"$build/tools/o1model/o1model" info "$demo/tiny.gguf"

cat <<MSG

The demo model holds RANDOM weights: it has a real shape and a working
tokenizer, so everything runs end to end, but what it generates is noise.

To use a real model, point o1d at a GGUF file or a Hugging Face folder
(config.json + *.safetensors), in config/o1d.ini ([model] path = ...) or
on the command line with --set model.path=/path/to/model. Check a model
first with:
  $build/tools/o1model/o1model info /path/to/model.gguf
Convert between the formats with:
  $build/tools/o1model/o1model convert IN OUT --format gguf|safetensors
MSG
