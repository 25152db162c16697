#!/usr/bin/env bash
# systemd-analyze verify on the installed units (it needs no running
# systemd): the units with their Exec paths and config moved under the
# DESTDIR, so that verify checks the installed programs exist, and with
# MANPATH at the installed pages, so that their Documentation= resolves.
# Any message fails. Skipped (77) without systemd-analyze.
# Usage: test_install_units.sh LAYOUT_SH
source "$(dirname "$0")/common.sh" "$1"
command -v systemd-analyze >/dev/null ||
	skip "no systemd-analyze (Debian: systemd) to verify the units"
install_destdir
mkdir -p "$T/units"
for u in o1d.service o1-sidecar.service; do
	sed -e "s|=$BINDIR/|=$D$BINDIR/|" -e "s| -c $SYSCONFDIR/| -c $D$SYSCONFDIR/|" \
		"$D$UNITDIR/$u" >"$T/units/$u"
	grep -q "^ExecStart=$D$BINDIR/" "$T/units/$u" || fail "$u: ExecStart"
done
man_path=
[ -n "$MAN_PAGES" ] && man_path=$D$MANDIR
MANPATH=$man_path systemd-analyze verify --man="$([ -n "$man_path" ] && echo yes || echo no)" \
	"$T/units/o1d.service" "$T/units/o1-sidecar.service" >"$T/verify" 2>&1 ||
	{ cat "$T/verify"; fail "systemd-analyze verify"; }
[ ! -s "$T/verify" ] || { cat "$T/verify"; fail "systemd-analyze verify warns"; }
ok "systemd-analyze verify: o1d.service o1-sidecar.service"
