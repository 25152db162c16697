# Sourced by tools/bench's IPC scripts (ipc_clients.sh, ipc_sleep_ab.sh):
# an o1d on the CPU backend serving the demo model, for latency runs.
#   o1d_demo_up O1D MODEL SOCK LOG [ARGS...]
# starts O1D serving MODEL on the socket SOCK (kv.pages=256,
# backend.threads=2, metrics off, then ARGS: more --set options), its
# output in LOG, and sets o1d_pid; waits up to 30 s for the socket, else
# prints LOG and exits 1. o1d_demo_down stops it.
o1d_pid=

o1d_demo_up() {
	o1d_bin=$1 o1d_model=$2 o1d_sock=$3 o1d_log=$4
	shift 4
	"$o1d_bin" --set model.path="$o1d_model" --set ipc.socket="$o1d_sock" \
		--set kv.pages=256 --set backend.threads=2 \
		--set metrics.enabled=false "$@" >"$o1d_log" 2>&1 &
	o1d_pid=$!
	o1d_i=0
	while [ ! -S "$o1d_sock" ] && [ $o1d_i -lt 300 ]; do
		kill -0 "$o1d_pid" 2>/dev/null || break
		sleep 0.1
		o1d_i=$((o1d_i + 1))
	done
	[ -S "$o1d_sock" ] || { cat "$o1d_log" >&2; exit 1; }
}

o1d_demo_down() {
	[ -z "$o1d_pid" ] && return 0
	kill "$o1d_pid" 2>/dev/null || true
	wait "$o1d_pid" || true
	o1d_pid=
}
