#!/usr/bin/env bash
# Helpers for one device call of a session (docs/STATUS.md "GPU sessions"),
# sourced by the call's own script, so that a call is a few lines and the
# boilerplate does not have to be rewritten each session (the device's
# checkout keeps no git-ignored file from one session to the next):
#
#   OUT=$OUT bash -c '. tools/gpu/session.sh
#     s_build                      # every GPU target (tools/gpu/run.sh build)
#     s_models qw l4 l4-q4km &     # made under /tmp/o1m (CPU) while...
#     s_ctest                      # ...ctest -L gpu runs; the error lines logged
#     wait
#     s_bench l4-q4km --prompt 128 --tokens 128 --reps 3
#     s_variant off kernels/gemm_qw.cu 's/QW_OVERLAP 1/QW_OVERLAP 0/' &&
#       S_BIN=/tmp/o1v-off/build/gpu s_bench w8-q4km --batch 256
#     s_o1d_start /tmp/o1m/qw.gguf && { s_o1bench1; s_o1bench1; s_o1d_stop; }
#     s_pack'
#
# Every line of results goes to $OUT/session.txt (and stdout); s_pack tars
# $OUT's logs, since only 8 files come back from a call. Models (s_models):
# qw (qwen2.5-0.5b), l1 (llama3.2-1b), l4 (llama3-8b cut to 4 layers), w8
# (the whole llama3-8b; minutes with 16 threads), ti (the tiny preset: for
# a check of a script on the CPU), each bf16 GGUF, and NAME-q8 or NAME-q4km
# for its Q8_0 or Q4_K_M conversion. Needs tools/gpu/run.sh's prerequisites
# (.debs carried, .gpu-testdata for the hf tests). S_BUILD (build/gpu): the
# build whose programs run; S_DEVICE (cuda:0): o1d's backend.device.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
s_root=$PWD
s_out=${OUT:?OUT, the output folder of the call}
s_bin=${S_BUILD:-$s_root/build/gpu}
s_device=${S_DEVICE:-cuda:0}
s_models_dir=/tmp/o1m
s_prefix=/tmp/o1-debs
s_lib=$s_prefix/usr/lib/x86_64-linux-gnu
s_run=$(mktemp -d /tmp/o1-session.XXXXXX)
# the run folder (socket, o1d's log: s_o1d_stop copies it to $OUT) goes
# with the call's shell; a caller's own EXIT trap replaces this one
trap 'rm -rf "$s_run"' EXIT
s_sock=$s_run/o1d.sock
s_pid=
mkdir -p "$s_out" "$s_models_dir"
export LD_LIBRARY_PATH=$s_lib:$s_lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# A line to the log, stamped.
s_log() { echo "[$(date +%T)] $*" | tee -a "$s_out/session.txt"; }

# Every GPU target (or O1_GPU_TARGETS), through run.sh (it unpacks .debs).
s_build() {
	s_log "build"
	bash tools/gpu/run.sh build >"$s_out/build.txt" 2>&1
	tail -2 "$s_out/build.txt" | tee -a "$s_out/session.txt"
}

# A variant build for an A/B in one call: a copy of the tree at
# /tmp/o1v-NAME with the sed expression EXPR applied to FILE (a
# compile-time switch, e.g. gemm_qw.cu's QW_OVERLAP), TARGETS (default
# bench_gemm_q bench_cuda_decode) built there; S_BIN=/tmp/o1v-NAME/build/gpu
# then runs its programs. Fails when EXPR changes nothing or the build
# fails. Variants may build side by side (s_variant ... &): each logs
# into its own folder.
s_variant() {
	local name=$1 file=$2 expr=$3 dir=/tmp/o1v-$1
	shift 3
	rm -rf "$dir" && mkdir -p "$dir"
	tar -C "$s_root" --exclude=./build -cf - . | tar -C "$dir" -xf -
	sed -i "$expr" "$dir/$file"
	if cmp -s "$s_root/$file" "$dir/$file"; then
		s_log "s_variant $name: '$expr' changes nothing in $file"
		return 1
	fi
	s_log "build variant $name ($file: $expr)"
	O1_GPU_TARGETS="${*:-bench_gemm_q bench_cuda_decode}" OUT=$dir/out \
		bash "$dir/tools/gpu/run.sh" build >"$s_out/build-$name.txt" 2>&1
	local rc=$?
	tail -2 "$s_out/build-$name.txt" | sed "s/^/$name: /" | tee -a "$s_out/session.txt"
	return $rc
}

# A variant of one program that differs from the main build ($s_bin, made
# by s_build first) by a define in one source file: that file's object
# compiled again by the main build's own command plus -DDEFINE, swapped
# into a copy of its library (or, where it is TARGET's own, into TARGET's
# link), and TARGET (default tools/gpu/bench_cuda_decode) linked into
# /tmp/o1o-NAME/ (S_BIN=/tmp/o1o-NAME then runs it: its tools/gpu/...).
# One compile instead of s_variant's whole build (gemv_q.cu: ~1.5
# minutes); variants may build side by side (s_object_variant ... &).
# DEFINE may be several, joined by commas (A=1,B=2: -DA=1 -DB=2), and may
# end in @FILE: FILE in SRC's place (another version of that kernel, e.g.
# one kept from an earlier commit with `git show`), with the defines
# before the @ (none: NAME:@FILE): SRC's folder copied to
# /tmp/o1o-NAME/shadow with FILE as SRC, searched first for includes.
# OBJSRC (default SRC): the file whose object is compiled again, where
# TARGET takes SRC through it (bench_gemm_q.cu includes the gemm_*.cu
# kernels: their objects in the library are not what it runs). A variant
# whose TARGET comes out the same as main's fails (its SRC not in it).
#   s_object_variant p4 kernels/gemv_q.cu GQ_PROBE=4
#   s_object_variant lc2 kernels/gemm_qw.cu QW_CLUSTER=2@/tmp/lean.cu \
#     tools/gpu/bench_gemm_q tools/gpu/bench_gemm_q.cu
s_object_variant() {
	local name=$1 src=$2 def=${3%%@*} target=${4:-tools/gpu/bench_cuda_decode}
	local objsrc=${5:-$2} d=/tmp/o1o-$1 obj lib cmd flags='' alt='' o
	[ -z "$def" ] || flags="-D${def//,/ -D}"
	if [ "$3" != "${3#*@}" ]; then
		alt=$(realpath "${3#*@}") ||
			{ s_log "s_object_variant $name: no file ${3#*@}"; return 1; }
	fi
	obj=$(cd "$s_bin" && ninja -t targets all |
		sed -n "s|^\([^:]*/$(basename "$objsrc")\.o\): .*|\1|p" | head -1)
	[ -n "$obj" ] || { s_log "s_object_variant $name: no object of $objsrc"; return 1; }
	o=$d/$(basename "$obj")
	# kernels/CMakeFiles/o1_kernels_cuda.dir/... -> kernels/libo1_kernels_cuda.a
	lib=${obj#*/CMakeFiles/}
	lib=${obj%%/CMakeFiles/*}/lib${lib%%.dir/*}.a
	[ -e "$s_bin/$lib" ] || lib= # TARGET's own object
	rm -rf "$d" && mkdir -p "$d/$(dirname "$target")"
	s_log "build object variant $name ($objsrc${alt:+, $src from $alt}: $flags)"
	# the output last (nvcc) or before -c (cc): the variant's object
	cmd=$(cd "$s_bin" && ninja -t commands "$obj" | tail -1 |
		sed -e "s| -MD -MT [^ ]* -MF [^ ]*||" \
			-e "s| -o $obj\$| $flags -o $o|" \
			-e "s| -o $obj | $flags -o $o |")
	if [ -n "$alt" ]; then
		# the shadow folder before every other (after the compiler, its
		# first word), and SRC itself compiled from there (its "quoted"
		# includes then found beside it; a pattern, so not ${cmd//...})
		mkdir -p "$d/shadow/$(dirname "$src")" &&
			cp -r "$s_root/$(dirname "$src")/." "$d/shadow/$(dirname "$src")/" &&
			cp "$alt" "$d/shadow/$src" || return 1
		# shellcheck disable=SC2001
		cmd=$(sed -e "s|^\([^ ]*\) |\1 -I$d/shadow |" \
			-e "s| [^ ]*$src | $d/shadow/$src |" <<<"$cmd")
	fi
	# the commands into the log too: what ran, if the variant is in doubt
	(cd "$s_bin" && echo "$cmd" && eval "$cmd") >"$s_out/build-$name.txt" 2>&1 &&
		if [ -n "$lib" ]; then
			cp "$s_bin/$lib" "$d/lib.a" &&
				(cd "$d" && ar r lib.a "$(basename "$obj")") >>"$s_out/build-$name.txt" 2>&1 &&
				cmd=$(cd "$s_bin" && ninja -t commands "$target" | tail -1 |
					sed -e "s| $lib | $d/lib.a |g" -e "s| -o $target | -o $d/$target |")
		else
			cmd=$(cd "$s_bin" && ninja -t commands "$target" | tail -1 |
				sed -e "s| $obj | $o |g" -e "s| -o $target | -o $d/$target |")
		fi &&
		(cd "$s_bin" && echo "$cmd" && eval "$cmd") >>"$s_out/build-$name.txt" 2>&1
	local rc=$?
	if [ $rc = 0 ] && cmp -s "$s_bin/$target" "$d/$target"; then
		s_log "s_object_variant $name: $target is main's ($objsrc's object not in it: OBJSRC?)"
		rc=1
	fi
	s_log "object variant $name: rc=$rc"
	return $rc
}

# ctest -L gpu; its summary and test_gpu_backend's error lines logged.
s_ctest() {
	s_log "ctest -L gpu"
	[ -e "$s_root/../shared" ] || ln -s "$s_root/.gpu-testdata" "$s_root/../shared"
	ctest --test-dir build/gpu -L gpu --output-on-failure -j 4 >"$s_out/ctest.txt" 2>&1
	tail -6 "$s_out/ctest.txt" | tee -a "$s_out/session.txt"
	grep -h "max rel L2" build/gpu/Testing/Temporary/LastTest.log |
		cut -c1-160 | tee -a "$s_out/session.txt"
	cp build/gpu/Testing/Temporary/LastTest.log "$s_out/"
}

# The named models (see above), made when absent.
s_models() {
	local n base q preset layers
	for n in "$@"; do
		base=${n%-q8}
		base=${base%-q4km}
		case $base in
		qw) preset=qwen2.5-0.5b layers= ;;
		l1) preset=llama3.2-1b layers= ;;
		l4) preset=llama3-8b layers="--layers 4" ;;
		w8) preset=llama3-8b layers= ;;
		ti) preset=tiny layers= ;;
		*) s_log "s_models: unknown model $n"; return 1 ;;
		esac
		# shellcheck disable=SC2086 # $layers: empty or two words
		[ -e "$s_models_dir/$base.gguf" ] ||
			"$s_bin/tools/o1model/o1model" make --preset "$preset" $layers \
				--threads "$(nproc)" --format gguf --dtype bf16 \
				--out "$s_models_dir/$base.gguf" >>"$s_out/make.txt" 2>&1
		q=
		case $n in *-q8) q=q8_0 ;; *-q4km) q=q4_k_m ;; esac
		[ -z "$q" ] || [ -e "$s_models_dir/$n.gguf" ] ||
			"$s_bin/tools/o1model/o1model" convert "$s_models_dir/$base.gguf" \
				"$s_models_dir/$n.gguf" --quantize "$q" >>"$s_out/make.txt" 2>&1
	done
}

# bench_cuda_decode on model NAME, graphs on, sampling on the device, with
# the given options; its RESULT line logged. S_BIN=dir: another build's.
s_bench() {
	local m=$1
	shift
	echo "# bench_cuda_decode $m $*" >>"$s_out/session.txt"
	"${S_BIN:-$s_bin}/tools/gpu/bench_cuda_decode" "$s_models_dir/$m.gguf" \
		--graphs on --sample device "$@" 2>&1 | grep "RESULT\|greedy ids" |
		tee -a "$s_out/session.txt"
}

# o1d on the GPU serving MODEL (a path) with any --set options; waits for
# "o1d: ready" (3 minutes at most).
s_o1d_start() {
	local m=$1
	shift
	"$s_bin/daemon/o1d/o1d" --set model.path="$m" --set backend.device="$s_device" \
		--set ipc.socket="$s_sock" --set metrics.mode=shm "$@" \
		>"$s_run/o1d.log" 2>&1 &
	s_pid=$!
	for _ in $(seq 1 900); do
		grep -q "o1d: ready" "$s_run/o1d.log" && return 0
		kill -0 "$s_pid" 2>/dev/null || break
		sleep 0.2
	done
	s_log "o1d did not start"
	tail -20 "$s_run/o1d.log" | tee -a "$s_out/session.txt"
	return 1
}

s_o1d_stop() {
	kill -TERM "$s_pid" && wait "$s_pid"
	cat "$s_run/o1d.log" >>"$s_out/o1d.log"
}

# Batch-1 decode through o1d as issue 17 measures it (8 requests one at a
# time, 128-word prompts, 128 new tokens, cold); one summary line logged.
s_o1bench1() {
	"$s_bin/tools/o1bench/o1bench" run --socket "$s_sock" --requests 8 \
		--concurrency 1 --connections 1 --max-tokens 128 --prompt-tokens 128 \
		--cold "$@" 2>&1 |
		grep -E "throughput_tok_s|stream_decode_tok_s|itl_ms_p50|itl_ms_p99|ttft_ms_p50" |
		tr '\n' ' ' | tee -a "$s_out/session.txt"
	echo | tee -a "$s_out/session.txt"
}

# ncu's sections for a kernel's profile (profile_gemm.sh,
# profile_attention.sh); SourceCounters beside them for the source view
# shellcheck disable=SC2034 # used by the scripts that source this one
s_ncu_sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis
	--section MemoryWorkloadAnalysis --section SchedulerStats
	--section WarpStateStats --section Occupancy --section LaunchStats)

# A few figures of an ncu details CSV (ncu -i REP --page details --csv:
# its rows hold them all), and the kernel's name, on stdout.
s_ncu_figures() {
	python3 - "$1" <<'PY'
import csv, re, sys
want = re.compile(r"^(Duration|Compute \(SM\) Throughput|Memory Throughput"
                  r"|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy"
                  r"|Warp Cycles Per Issued Instruction|Achieved Occupancy"
                  r"|Theoretical Occupancy|Registers Per Thread|Grid Size"
                  r"|Block Size|Executed Ipc Active|L1/TEX Hit Rate"
                  r"|L2 Hit Rate|Dynamic Shared Memory Per Block)$")
lines = open(sys.argv[1], newline="").read().splitlines()
head = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
rows = list(csv.DictReader(lines[head:])) if head is not None else []
print("  kernel:", rows[0].get("Kernel Name", "?")[:120] if rows else "none")
for r in rows:
    if want.match(r.get("Metric Name", "")):
        print(f"  {r['Metric Name']} ({r.get('Metric Unit', '')}):"
              f" {r.get('Metric Value', '')}")
PY
}

# A profile's start: the GPU's name logged, tools/gpu/TARGET built with
# -lineinfo (a build folder configured without it is configured again:
# CMake reads CUDAFLAGS at the first configure only; -lineinfo changes no
# instruction), $OUT/profile made (s_pack_profile packs it); fails
# without the program or ncu.
s_profile_build() {
	s_log "start: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
	grep -q lineinfo build/gpu/CMakeCache.txt 2>/dev/null ||
		rm -f build/gpu/CMakeCache.txt
	CUDAFLAGS=-lineinfo O1_GPU_TARGETS=$1 s_build
	mkdir -p "$s_out/profile"
	[ -x "$s_bin/tools/gpu/$1" ] || { s_log "no $1"; return 1; }
	command -v ncu >/dev/null || { s_log "no ncu"; return 1; }
}

# A profile's $OUT/profile folder packed: only 8 files come back, each at
# most 16 MB, so the CSVs and logs go into one tarball, the ncu reports
# into another where it fits (ncu -i reads them); session.txt stays.
s_pack_profile() {
	(cd "$s_out" && tar czf profile.tgz --exclude='*.ncu-rep' profile \
		./*.txt ./*.log 2>/dev/null
	tar czf reports.tgz profile/*.ncu-rep 2>/dev/null
	[ "$(stat -c %s reports.tgz 2>/dev/null || echo 0)" -lt 15000000 ] ||
		rm -f reports.tgz
	rm -rf profile && find . -maxdepth 1 -type f ! -name profile.tgz \
		! -name reports.tgz ! -name session.txt -delete)
}

# $OUT's text and logs in one archive (what comes back is 8 files).
s_pack() {
	(cd "$s_out" && tar czf session-logs.tgz ./*.txt ./*.log 2>/dev/null)
}
