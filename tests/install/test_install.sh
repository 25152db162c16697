#!/usr/bin/env bash
# cmake --install into a DESTDIR lays out a system daemon: each file in its
# place with the build's paths; the units run the installed programs as the
# o1d user (never root); the sysusers.d and tmpfiles.d entries make that
# user and /run/o1d in a scratch root; every man page renders without a
# warning; the bash completions complete.
# Usage: test_install.sh LAYOUT_SH
source "$(dirname "$0")/common.sh" "$1"
install_destdir

for p in o1d o1ctl o1-sidecar o1model o1bench o1chat; do
	[ -x "$D$BINDIR/$p" ] || fail "$BINDIR/$p is not an installed program"
done
# a page of sections 1 and 8 describes a program that is installed
for page in $MAN_PAGES; do
	case $page in *.1 | *.8) ;; *) continue ;; esac
	[ -x "$D$BINDIR/${page%.*}" ] ||
		fail "man page $page for a program not installed"
done
has "$LIBDIR/libo1client.so.$SOVERSION"
has "$LIBDIR/libo1client.so"
soname=$(objdump -p "$D$LIBDIR/libo1client.so.$SOVERSION" |
	awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libo1client.so.$SOVERSION" ] || fail "SONAME is '$soname'"
has "$INCLUDEDIR/o1/client.h"
has "$LIBDIR/pkgconfig/o1client.pc"
if [ "$HAVE_CUDA" = ON ]; then
	has "$LIBDIR/libo1client_cuda.so.1"
	has "$INCLUDEDIR/o1/client_cuda.h"
	has "$LIBDIR/pkgconfig/o1client-cuda.pc"
fi
has "$SYSCONFDIR/o1d/o1d.ini"
has "$SYSCONFDIR/o1d/refine_review.txt"
cmp "$D$SYSCONFDIR/o1d/o1d.ini" "$O1_SOURCE_DIR/config/o1d.ini" ||
	fail "the installed o1d.ini is not the documented one"
has "$DATADIR/o1d/o1d-alerts.yml"
has "$UNITDIR/o1d.service"
has "$UNITDIR/o1-sidecar.service"
has "$SYSUSERSDIR/o1d.conf"
has "$TMPFILESDIR/o1d.conf"
has "$BASHCOMPDIR/o1ctl"
has "$BASHCOMPDIR/o1model"
[ -n "$MAN_PAGES" ] || echo "note: no man pages in this build (no scdoc)"
for page in $MAN_PAGES; do has "$MANDIR/man${page##*.}/$page.gz"; done
ok "layout under $PREFIX"

# Units: installed paths, the o1d user, nothing as root.
for u in o1d o1-sidecar; do
	f=$D$UNITDIR/$u.service
	grep -Eq "^ExecStart=$BINDIR/$u -c $SYSCONFDIR/o1d/o1d.ini( |$)" "$f" ||
		fail "$u.service does not start $BINDIR/$u with the installed config"
	grep -qx "User=o1d" "$f" || fail "$u.service: no User=o1d"
	grep -qx "Group=o1d" "$f" || fail "$u.service: no Group=o1d"
	! grep -Eq "^(User|Group)=(root|0)$" "$f" || fail "$u.service runs as root"
	! grep -q "@[A-Z_]*@" "$f" || fail "$u.service: unreplaced variable"
done
ok "units run $BINDIR programs as o1d"

# sysusers.d and tmpfiles.d entries, applied to a scratch root.
if command -v systemd-sysusers >/dev/null && command -v systemd-tmpfiles >/dev/null; then
	r=$T/root
	mkdir -p "$r/etc" "$r/usr/lib/tmpfiles.d"
	systemd-sysusers --root="$r" "$D$SYSUSERSDIR/o1d.conf" >/dev/null 2>&1 ||
		fail "systemd-sysusers $SYSUSERSDIR/o1d.conf"
	uid=$(awk -F: '$1 == "o1d" {print $3}' "$r/etc/passwd")
	[ -n "$uid" ] && [ "$uid" != 0 ] || fail "sysusers: no o1d user (uid '$uid')"
	grep -q "^o1d:" "$r/etc/group" || fail "sysusers: no o1d group"
	cp "$D$TMPFILESDIR/o1d.conf" "$r/usr/lib/tmpfiles.d/o1d.conf"
	systemd-tmpfiles --root="$r" --create o1d.conf ||
		fail "systemd-tmpfiles $TMPFILESDIR/o1d.conf"
	[ "$(stat -c '%u %a %F' "$r/run/o1d")" = "$uid 755 directory" ] ||
		fail "tmpfiles: /run/o1d is $(stat -c '%u %a %F' "$r/run/o1d")"
	ok "sysusers.d makes o1d (uid $uid), tmpfiles.d makes /run/o1d"
else
	echo "note: no systemd-sysusers/systemd-tmpfiles, entries not applied"
fi

# Every page renders, without a groff or man warning.
for page in $MAN_PAGES; do
	f=$D$MANDIR/man${page##*.}/$page.gz
	MANWIDTH=80 man --warnings -l "$f" >"$T/page" 2>"$T/page.err" ||
		fail "man -l $page"
	[ ! -s "$T/page.err" ] || { cat "$T/page.err"; fail "man -l $page warns"; }
	grep -q "^NAME" "$T/page" || fail "man -l $page: no NAME section"
	grep -qF "${page%.*}" "$T/page" || fail "man -l $page: no ${page%.*}"
done
[ -z "$MAN_PAGES" ] || ok "man -l renders $MAN_PAGES"

# Completions: source the installed files and complete a few words.
complete_words() { # FILE FUNCTION WORDS...: the candidates for the last word
	local file=$1 fn=$2
	shift 2
	bash -c 'source "$1"; fn=$2; shift 2; COMP_WORDS=("$@");
		COMP_CWORD=$(($# - 1)); "$fn"; echo "${COMPREPLY[*]}"' \
		_ "$file" "$fn" "$@"
}
expect() { [ "$1" = "$2" ] || fail "completion: got '$1', expected '$2'"; }
c=$D$BASHCOMPDIR/o1ctl
expect "$(complete_words "$c" _o1ctl o1ctl st)" "status stats"
expect "$(complete_words "$c" _o1ctl o1ctl -c x.ini dr)" "drain"
expect "$(complete_words "$c" _o1ctl o1ctl stats --pro)" "--prometheus"
expect "$(complete_words "$c" _o1ctl o1ctl stats --source s)" "shm"
expect "$(complete_words "$c" _o1ctl o1ctl inject kv)" "kv_exhaust"
m=$D$BASHCOMPDIR/o1model
expect "$(complete_words "$m" _o1model o1model con)" "convert"
expect "$(complete_words "$m" _o1model o1model make --dtype b)" "bf16"
expect "$(complete_words "$m" _o1model o1model make --pres)" "--preset"
expect "$(complete_words "$m" _o1model o1model make --preset ll)" \
	"llama3.2-1b llama3-8b"
ok "bash completions of o1ctl and o1model"
