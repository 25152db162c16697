#!/usr/bin/env bash
# The installed programs, run from a DESTDIR: o1model makes a tiny model;
# o1d with the installed config names the setting and the path when the
# socket folder, the model or the config file is missing; with
# --set model.path= (and a socket and metrics file of this test's own) it
# serves; o1ctl status answers; o1-sidecar serves /v1/models and a
# completion; a 20-line client built with pkg-config --cflags --libs
# o1client against the DESTDIR generates. Nothing assumes a duration: each
# wait polls with a generous deadline.
# Usage: test_install_run.sh LAYOUT_SH
source "$(dirname "$0")/common.sh" "$1"
install_destdir
export LD_LIBRARY_PATH=$D$LIBDIR # the installed libo1client, not the build's
bin=$D$BINDIR
ini=$D$SYSCONFDIR/o1d/o1d.ini
model=$T/tiny.gguf
sock=$T/o1d.sock
# This test's own socket and metrics file, so it touches nothing shared.
own=(--set "ipc.socket=$sock" --set metrics.mode=shm
	--set "metrics.shm_path=$T/metrics" --set metrics.unpin_on_exit=true)

"$bin/o1model" make --preset tiny --out "$model" >"$T/make.log" 2>&1 ||
	{ cat "$T/make.log"; fail "installed o1model make"; }
ok "installed o1model made $model"

# Bad paths: each message names the setting and the path.
expect_start_error() { # EXIT_CODE TEXT ARGS...
	local want=$1 text=$2 rc=0
	shift 2
	"$bin/o1d" "$@" >"$T/bad.log" 2>&1 || rc=$?
	[ "$rc" = "$want" ] || { cat "$T/bad.log"; fail "o1d $*: exit $rc, not $want"; }
	grep -qF -- "$text" "$T/bad.log" ||
		{ cat "$T/bad.log"; fail "o1d $*: no '$text'"; }
}
if [ ! -e /run/o1d ]; then
	expect_start_error 1 "ipc.socket /run/o1d/o1d.sock: directory /run/o1d does not exist" \
		-c "$ini" --set "model.path=$model"
	ok "o1d names ipc.socket and /run/o1d when the folder is missing"
else
	echo "note: /run/o1d exists here, the missing-folder message is not checked"
fi
expect_start_error 1 "model.path $T/none.gguf: No such file" \
	-c "$ini" --set "model.path=$T/none.gguf" "${own[@]}"
expect_start_error 2 "-c $T/none.ini: cannot open" -c "$T/none.ini"
expect_start_error 1 "model.path is empty" -c "$ini" "${own[@]}"
ok "o1d names model.path and -c when they point nowhere"

# o1d with the installed config and the model.
"$bin/o1d" -c "$ini" --set "model.path=$model" "${own[@]}" >"$T/o1d.log" 2>&1 &
pids+=($!)
wait_for "$T/o1d.log" "o1d: ready socket=$sock" 600 "${pids[0]}"
ok "installed o1d serves $sock"

"$bin/o1ctl" -c "$ini" "${own[@]}" status >"$T/status" 2>&1 ||
	{ cat "$T/status"; fail "installed o1ctl status"; }
grep -q "^model: " "$T/status" && grep -q "^ready: *yes" "$T/status" ||
	{ cat "$T/status"; fail "o1ctl status: no model or not ready"; }
ok "installed o1ctl status: $(grep '^model:' "$T/status")"

# The sidecar on a free port, with the installed config.
"$bin/o1-sidecar" -c "$ini" "${own[@]}" --set "sidecar.daemon_socket=$sock" \
	--set "model.path=$model" --listen 127.0.0.1:0 \
	--access-log "$T/access.log" 2>"$T/sidecar.log" &
pids+=($!)
wait_for "$T/sidecar.log" "o1-sidecar: ready listen=" 300 "${pids[1]}"
addr=$(sed -n 's/.*o1-sidecar: ready listen=\([^ ]*\).*/\1/p' "$T/sidecar.log")
curl -sS --max-time 300 "http://$addr/v1/models" >"$T/models" ||
	fail "GET /v1/models"
grep -q '"object":"list"' "$T/models" || { cat "$T/models"; fail "/v1/models"; }
curl -sS --max-time 300 -H 'Content-Type: application/json' \
	-d '{"model":"default","prompt":"Hello","max_tokens":4,"temperature":0}' \
	"http://$addr/v1/completions" >"$T/completion" || fail "POST /v1/completions"
grep -q '"completion_tokens":4' "$T/completion" ||
	{ cat "$T/completion"; fail "/v1/completions did not generate 4 tokens"; }
ok "installed o1-sidecar at $addr: /v1/models, /v1/completions"

# A client built against the DESTDIR with pkg-config.
export PKG_CONFIG_SYSROOT_DIR=$D PKG_CONFIG_LIBDIR=$D$LIBDIR/pkgconfig
flags=$(pkg-config --cflags --libs o1client) || fail "pkg-config o1client"
case "$flags" in *"-I$D$INCLUDEDIR"*"-L$D$LIBDIR"*) ;;
*) fail "pkg-config o1client gave '$flags', not the DESTDIR's" ;; esac
sanitize=()
[ "$SANITIZE" = ON ] && sanitize=(-fsanitize=address,undefined)
"$CC" -std=c11 -Wall -Wextra -Werror "${sanitize[@]}" \
	-o "$T/client" "$O1_SOURCE_DIR/tests/install/client.c" $flags ||
	fail "cc client.c \$(pkg-config --cflags --libs o1client)"
# ldd's whole output first: grep -q stops reading at the first match, and
# under pipefail ldd's SIGPIPE would fail the check at random.
libs=$(ldd "$T/client")
grep -qF "$D$LIBDIR/libo1client.so.$SOVERSION" <<<"$libs" ||
	{ echo "$libs"; fail "the client does not load the installed library"; }
timeout 300 "$T/client" "$sock" >"$T/client.out" 2>&1 ||
	{ cat "$T/client.out"; fail "the pkg-config client"; }
grep -q "^generated [1-9][0-9]* tokens" "$T/client.out" ||
	{ cat "$T/client.out"; fail "client output"; }
ok "client built with pkg-config: $(tail -1 "$T/client.out")"

kill -TERM "${pids[1]}" "${pids[0]}"
wait "${pids[0]}" || fail "o1d did not exit 0 on SIGTERM"
wait "${pids[1]}" || fail "o1-sidecar did not exit 0 on SIGTERM"
pids=()
ok "o1d and o1-sidecar stopped on SIGTERM"
