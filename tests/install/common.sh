# Shared by the tests/install scripts: the layout, a scratch folder
# removed on exit, a DESTDIR install of the build, and the checks' verbs.
# Usage: source common.sh LAYOUT_SH
set -euo pipefail
# shellcheck source=/dev/null
source "$1"
MAN_PAGES=${MAN_PAGES//;/ }
T=$(mktemp -d /tmp/o1-install-XXXXXX)
D=$T/dest
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
ok() { echo "ok: $*"; }

# install_destdir: the whole build into $D, as a packager would.
install_destdir() {
	DESTDIR=$D cmake --install "$O1_BUILD_DIR" >"$T/install.log" 2>&1 ||
		{ cat "$T/install.log"; fail "cmake --install"; }
}

# the file exists (as a file or a link) in $D
has() { [ -e "$D$1" ] || [ -L "$D$1" ] || fail "not installed: $1"; }

# wait_for FILE TEXT SECONDS [PID]: polls FILE for TEXT; fails when PID
# exits first or the deadline passes.
wait_for() {
	local file=$1 text=$2 deadline=$((SECONDS + $3)) pid=${4:-}
	while ! grep -qF -- "$text" "$file" 2>/dev/null; do
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			cat "$file" >&2 || true
			fail "exited before '$text' appeared in $file"
		fi
		[ $SECONDS -lt $deadline ] ||
			{ cat "$file" >&2; fail "no '$text' in $file after $3 s"; }
		sleep 0.2
	done
}
