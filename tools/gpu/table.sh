#!/usr/bin/env bash
# Issue 17's table: o1d end to end beside the backend alone and the floor,
# every figure REPS times (3) in the same run, then one markdown table of
# median [min .. max] (tools/gpu/table.py). Parts, in this order by default:
#
#   batch1   batch-1 decode through o1d (o1bench, 8 requests one at a time,
#            128-word prompts, 128 new tokens, cold; one unrecorded request
#            first) and bench_cuda_decode on the same file (its floor: the
#            weight bytes a token over the copy bandwidth it measures), for
#            each of TABLE_BATCH1's models (qw l1 w8 w8-q8 w8-q4km)
#   streams  TABLE_BIG (w8): 64, 128 and 256 concurrent streams of 80- and
#            320-word prompts (~124 and ~504 tokens), 128 new tokens, twice
#            as many requests as streams, 16 streams a connection; prompts
#            shared (prefix cache) and, at 256, cold (a fresh o1d each
#            repetition); peak_inflight shows how many ran (TABLE_STREAMS:
#            "shared cold", or one of them)
#   ttft     TABLE_BIG: time to first token of 323- and 1,292-word prompts
#            (~512 and ~2,048 tokens) cold (--cold, a fresh o1d) and cached
#            (one prompt repeated), 8 requests one at a time
#   long     TABLE_BIG: 64 streams decoding (128-word prompts, 1,024 new
#            tokens) when 8 cold ~8,190-token prompts arrive: the streams'
#            ITL p50 before and p99 during, the long prompts' TTFT
#   hf       tools/gpu/hf_compare.sh: o1d's logits and transformers' bf16
#            run against transformers' f32 run (once: it is deterministic)
#
#   OUT=dir [TABLE_O1D="--set k=v ..."] tools/gpu/table.sh [PART...]
#
# Every measure appends one line of key=value to OUT/table.raw (part, model,
# the shape, rep, then the figures); table.py OUT/table.raw [more.raw...]
# makes the table, so that parts run in separate device calls (ten minutes
# at most each: the whole takes ~25 minutes on the H200 with the models
# made) add up to one table. The build must exist (tools/gpu/run.sh build;
# S_BUILD another). A check of the script on the CPU: S_BUILD=build
# S_DEVICE=cpu TABLE_BATCH1=ti TABLE_BIG=ti TABLE_SMALL=1 REPS=2.
set -uo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10; session.sh
# sets it too).
export NCCL_NVLS_ENABLE=0
# shellcheck source=tools/gpu/session.sh
. "$(dirname "${BASH_SOURCE[0]}")/session.sh"
reps=${REPS:-3}
batch1=${TABLE_BATCH1:-qw l1 w8 w8-q8 w8-q4km}
big=${TABLE_BIG:-w8}
small=${TABLE_SMALL:-0} # 1: a few streams and short prompts (CPU check)
raw=$s_out/table.raw
parts=${*:-batch1 streams ttft long hf}
rc=0

# o1bench run ARGS...: its key=value lines joined on one line (the
# request counts checked: a run that lost a request fails the table)
t_o1bench() {
	local r
	r=$("$s_bin/tools/o1bench/o1bench" run --socket "$s_sock" "$@" \
		2>>"$s_out/table.log" | grep -E '^[a-z0-9_]+=[-+.0-9eE]+$' |
		tr '\n' ' ')
	echo "$r"
	# (in a command substitution: the end of the script counts these)
	case " $r" in
	*" errors=0 "*) ;;
	*) echo "o1bench $* failed: $r" >>"$s_out/table.log" ;;
	esac
}

# LINE: appended to the raw file (and the session log)
t_put() { echo "$*" | tee -a "$raw" >>"$s_out/session.txt"; }

t_batch1() {
	local m r res
	for m in $batch1; do
		s_models "$m" || { rc=1; continue; }
		s_log "table batch1 $m"
		# shellcheck disable=SC2086 # TABLE_O1D: several words
		if s_o1d_start "$s_models_dir/$m.gguf" ${TABLE_O1D:-}; then
			t_o1bench --requests 1 --concurrency 1 --connections 1 \
				--max-tokens 8 --prompt-tokens 16 --cold >/dev/null
			for r in $(seq 1 "$reps"); do
				t_put "part=batch1 side=o1d model=$m rep=$r" \
					"$(t_o1bench --requests 8 --concurrency 1 \
						--connections 1 --max-tokens 128 \
						--prompt-tokens 128 --cold)"
			done
			s_o1d_stop
		else
			rc=1
		fi
		[ "$s_device" = cpu ] && continue # bench_cuda_decode: GPU only
		for r in $(seq 1 "$reps"); do
			res=$("$s_bin/tools/gpu/bench_cuda_decode" \
				"$s_models_dir/$m.gguf" --graphs on --sample device \
				--prompt 128 --tokens 128 2>>"$s_out/table.log" |
				grep '^RESULT' | cut -d' ' -f2-)
			[ -n "$res" ] || rc=1
			t_put "part=batch1 side=backend model=$m rep=$r $res"
		done
	done
}

# the o1d options of the big model's runs: room for 256 streams, and
# TABLE_O1D's (more o1d options, split on spaces, batch1's too: an A/B of
# a setting; its table in an OUT of its own, since table.py does not tell
# them apart)
t_big_start() {
	# shellcheck disable=SC2086 # TABLE_O1D: several words
	s_o1d_start "$s_models_dir/$big.gguf" --set scheduler.max_running=256 \
		--set ipc.max_clients=128 ${TABLE_O1D:-}
}

t_streams() {
	local c w r cache n conn cold
	s_models "$big" || { rc=1; return; }
	s_log "table streams $big"
	t_big_start || { rc=1; return; }
	for cache in ${TABLE_STREAMS:-shared cold}; do
		cold=
		[ $cache = shared ] || cold=--cold
		for c in 64 128 256; do
			[ "$cache" = cold ] && [ "$c" != 256 ] && continue
			[ "$small" = 1 ] && c=$((c / 32))
			for w in 80 320; do
				[ "$small" = 1 ] && w=$((w / 8))
				n=$((2 * c))
				conn=$((c < 16 ? 1 : c / 16))
				for r in $(seq 1 "$reps"); do
					# cold: a fresh o1d, or the last rep's
					# prompts are cached
					if [ "$cache" = cold ]; then
						s_o1d_stop
						t_big_start || { rc=1; continue; }
					fi
					t_put "part=streams model=$big cache=$cache" \
						"streams=$c words=$w rep=$r" \
						"$(t_o1bench --requests $n --concurrency "$c" \
							--connections $conn --max-tokens 128 \
							--prompt-tokens $w \
							${cold:+"$cold"})"
				done
			done
		done
	done
	s_o1d_stop
}

t_ttft() {
	local w r cache cold
	s_models "$big" || { rc=1; return; }
	for w in 323 1292; do
		[ "$small" = 1 ] && w=$((w / 8))
		for cache in cold cached; do
			cold=
			[ $cache = cached ] || cold=--cold
			for r in $(seq 1 "$reps"); do
				# a fresh o1d: nothing cached, no estimate learned
				s_log "table ttft $big $w words $cache ($r)"
				t_big_start || { rc=1; continue; }
				t_put "part=ttft model=$big cache=$cache words=$w rep=$r" \
					"$(t_o1bench --requests 8 --concurrency 1 \
						--connections 1 --max-tokens 1 \
						--prompt-tokens $w \
						${cold:+"$cold"})"
				s_o1d_stop
			done
		done
	done
}

t_long() {
	local r streams=64 long=8 words=5150 gen=1024 after=1000
	[ "$small" = 1 ] && streams=4 long=2 words=300 gen=300 after=50
	s_models "$big" || { rc=1; return; }
	for r in $(seq 1 "$reps"); do
		s_log "table long $big ($r)"
		t_big_start || { rc=1; continue; }
		t_put "part=long model=$big streams=$streams long=$long" \
			"words=$words rep=$r" \
			"$(t_o1bench --requests $streams --concurrency $streams \
				--connections $((streams < 16 ? 1 : streams / 16)) \
				--max-tokens $gen --prompt-tokens 128 --cold \
				--long $long --long-tokens $words --long-after-ms $after)"
		s_o1d_stop
	done
}

t_hf() {
	s_log "table hf"
	tools/gpu/hf_compare.sh "$s_out/hf" >>"$s_out/table.log" 2>&1 || rc=1
	cp "$s_out/hf/hf.txt" "$s_out/table-hf.txt" 2>/dev/null || rc=1
}

[ -x "$s_bin/daemon/o1d/o1d" ] || s_build
for p in $parts; do
	case $p in
	batch1 | streams | ttft | long | hf) "t_$p" ;;
	*) s_log "table: unknown part $p (batch1 streams ttft long hf)"; rc=1 ;;
	esac
done
! grep -q "^o1bench .* failed" "$s_out/table.log" 2>/dev/null || rc=1
# (the hf part alone writes no raw lines: its table is table-hf.txt)
if [ -e "$raw" ]; then
	python3 tools/gpu/table.py "$raw" >"$s_out/table.md" || rc=1
else
	: >"$s_out/table.md"
fi
[ ! -e "$s_out/table-hf.txt" ] || cat "$s_out/table-hf.txt" >>"$s_out/table.md"
cat "$s_out/table.md"
exit $rc
