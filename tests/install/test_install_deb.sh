#!/usr/bin/env bash
# The Debian packages of this build (CPack's DEB generator, as
# tools/package.sh runs it): o1d, libo1client3, libo1client-dev (and
# libo1client-cuda1 with CUDA). Each package's file list (dpkg-deb -c) is
# the expected one; unpacked together (dpkg-deb -x) they hold exactly the
# files of the DESTDIR install; the libraries carry shlibs and the ldconfig
# trigger, o1d's /etc files are conffiles, the dependencies come from
# dpkg-shlibdeps; lintian (with the /usr prefix a package needs) reports no
# error. Skipped (77) in sanitizer builds: packages come from plain ones.
# Usage: test_install_deb.sh LAYOUT_SH
source "$(dirname "$0")/common.sh" "$1"
[ "$SANITIZE" = ON ] && skip "sanitizer build: packages are made from plain builds"
command -v dpkg-deb >/dev/null || skip "no dpkg-deb"
command -v dpkg-shlibdeps >/dev/null || skip "no dpkg-shlibdeps (Debian: dpkg-dev)"
install_destdir

(cd "$T" && cpack -G DEB -B "$T/cpack" --config "$O1_BUILD_DIR/CPackConfig.cmake") \
	>"$T/cpack.log" 2>&1 || { cat "$T/cpack.log"; fail "cpack -G DEB"; }
deb() { ls "$T"/cpack/"$1"_*.deb 2>/dev/null | head -1; }
packages=(o1d libo1client3 libo1client-dev)
[ "$HAVE_CUDA" = ON ] && packages+=(libo1client-cuda1)
for p in "${packages[@]}"; do [ -n "$(deb "$p")" ] || fail "no $p package"; done
[ "$(ls "$T"/cpack/*.deb | wc -l)" = "${#packages[@]}" ] ||
	fail "other packages: $(ls "$T"/cpack/*.deb)"

# Expected file lists (files and links, not folders), by package.
doc=$DATADIR/doc
expect_o1d() {
	for b in o1d o1ctl o1-sidecar o1model o1bench o1chat; do echo "$BINDIR/$b"; done
	echo "$SYSCONFDIR/o1d/o1d.ini"
	echo "$SYSCONFDIR/o1d/refine_review.txt"
	echo "$DATADIR/o1d/o1d-alerts.yml"
	echo "$DATADIR/o1d/o1d-alerts.test.yml"
	echo "$UNITDIR/o1d.service"
	echo "$UNITDIR/o1-sidecar.service"
	echo "$SYSUSERSDIR/o1d.conf"
	echo "$TMPFILESDIR/o1d.conf"
	echo "$BASHCOMPDIR/o1ctl"
	echo "$BASHCOMPDIR/o1model"
	for page in $MAN_PAGES; do
		[ "$page" = libo1client.3 ] || echo "$MANDIR/man${page##*.}/$page.gz"
	done
}
expect_libo1client3() {
	echo "$LIBDIR/libo1client.so.$SOVERSION"
	basename "$(readlink -f "$D$LIBDIR/libo1client.so.$SOVERSION")" |
		sed "s|^|$LIBDIR/|"
}
expect_libo1client-dev() {
	echo "$INCLUDEDIR/o1/client.h"
	echo "$LIBDIR/libo1client.so"
	echo "$LIBDIR/pkgconfig/o1client.pc"
	case " $MAN_PAGES " in *" libo1client.3 "*) echo "$MANDIR/man3/libo1client.3.gz" ;; esac
	if [ "$HAVE_CUDA" = ON ]; then
		echo "$INCLUDEDIR/o1/client_cuda.h"
		echo "$LIBDIR/libo1client_cuda.so"
		echo "$LIBDIR/pkgconfig/o1client-cuda.pc"
	fi
}
expect_libo1client-cuda1() {
	echo "$LIBDIR/libo1client_cuda.so.1"
	basename "$(readlink -f "$D$LIBDIR/libo1client_cuda.so.1")" |
		sed "s|^|$LIBDIR/|"
}
for p in "${packages[@]}"; do
	{ "expect_$p"; echo "$doc/$p/copyright"; echo "$doc/$p/changelog.gz"; } |
		sort -u >"$T/$p.want"
	dpkg-deb -c "$(deb "$p")" | awk '$1 !~ /^d/ {print $6}' |
		sed 's|^\./|/|' | sort >"$T/$p.got"
	diff -u "$T/$p.want" "$T/$p.got" || fail "$p: file list (- expected, + packaged)"
	dpkg-deb -x "$(deb "$p")" "$T/unpacked"
done
ok "file lists of ${packages[*]}"

# Unpacked together: the DESTDIR install, file for file.
(cd "$D" && find . ! -type d | sort) >"$T/dest.files"
(cd "$T/unpacked" && find . ! -type d | sort) >"$T/unpacked.files"
diff -u "$T/dest.files" "$T/unpacked.files" ||
	fail "the packages differ from cmake --install (- DESTDIR, + packages)"
ok "the packages hold exactly what cmake --install installs"

# Control data.
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
control() { dpkg-deb --ctrl-tarfile "$(deb "$1")" | tar -xO "./$2" 2>/dev/null; }
case "$(field o1d Depends)" in
*"libo1client3 (= "*"libc6 (>= "*) ;;
*) fail "o1d Depends: $(field o1d Depends)" ;;
esac
case "$(field libo1client-dev Depends)" in
*"libo1client3 (= "*) ;;
*) fail "libo1client-dev Depends: $(field libo1client-dev Depends)" ;;
esac
case "$(field libo1client3 Depends)" in
"libc6 (>= "*) ;;
*) fail "libo1client3 Depends: $(field libo1client3 Depends)" ;;
esac
grep -qx "libo1client $SOVERSION libo1client3 (>= .*)" <<<"$(control libo1client3 shlibs)" ||
	fail "libo1client3: no shlibs entry"
grep -qx "activate-noawait ldconfig" <<<"$(control libo1client3 triggers)" ||
	fail "libo1client3: no ldconfig trigger"
grep -qx "$SYSCONFDIR/o1d/o1d.ini" <<<"$(control o1d conffiles)" ||
	fail "o1d: o1d.ini is not a conffile"
ok "Depends from shlibs, shlibs and trigger, conffiles"

if [ "$PREFIX" != /usr ]; then
	echo "note: prefix $PREFIX is not a package's (/usr): lintian not run"
elif ! command -v lintian >/dev/null; then
	echo "note: no lintian (tools/deps.sh installs it): not run"
else
	lintian --fail-on error "$T"/cpack/*.deb >"$T/lintian" 2>&1 ||
		{ cat "$T/lintian"; fail "lintian reports errors"; }
	grep -v "root privileges" "$T/lintian" || true
	ok "lintian: no errors"
fi
