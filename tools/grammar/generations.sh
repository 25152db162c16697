#!/bin/sh
# Issue 23 item 4's check in full: 1,000 generations (20 JSON Schemas x
# PER_SCHEMA seeds, 50 by default) by o1d on the CPU backend with the tiny
# random model, each whole document validated by Debian's
# python3-jsonschema (/usr/bin/python3 first on PATH), 0 failures; cut
# ones end with finish LENGTH; the same requests with sampling in the
# backend (token masks in the step) stream the same events. It is
# tests/daemon/test_grammar_o1d (CI runs the same 1,000, 200 under the
# sanitizers) with the validator pinned to Debian's.
#   tools/grammar/generations.sh BUILD_DIR [PER_SCHEMA]
# BUILD_DIR must hold the targets o1d, o1model and test_grammar_o1d.
set -eu
# NCCL's NVLink multicast stays off wherever o1d starts (issue 10); this
# one runs the CPU backend, the rule is kept anyway so every script reads alike.
export NCCL_NVLS_ENABLE=0
build=$1 per=${2:-50}
src=$(cd "$(dirname "$0")/../.." && pwd)
for t in daemon/o1d/o1d tools/o1model/o1model tests/daemon/test_grammar_o1d; do
	[ -x "$build/$t" ] || {
		echo "generations.sh: $build/$t missing (cmake --build $build" \
			"--target o1d o1model test_grammar_o1d)" >&2
		exit 2
	}
done
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || {
	echo "generations.sh: Debian's python3-jsonschema is not installed" >&2
	exit 2
}
PATH=/usr/bin:$PATH O1_GRAMMAR_PER_SCHEMA=$per \
	"$build/tests/daemon/test_grammar_o1d" "$build/daemon/o1d/o1d" \
	"$build/tools/o1model/o1model" "$src/tests/daemon/validate_json.py"
