#!/usr/bin/env bash
# Builds the Debian packages (o1d, libo1client3, libo1client-dev, and
# libo1client-cuda1 with CUDA) through CPack's DEB generator from a Release
# build with the /usr prefix, then runs lintian on them when it is
# installed (errors fail). The .deb files end up in build/package/ (or
# $1). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/package}
shift || true
dir=build/package-tree

./tools/deps.sh
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr -DO1_MAN=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
mkdir -p "$out"
(cd "$dir" && cpack -G DEB -B "$PWD/cpack" >/dev/null)
rm -f "$out"/*.deb
cp "$dir"/cpack/*.deb "$out"/
for deb in "$out"/*.deb; do
  echo "package: $deb"
  dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Depends\): /  \1: /p'
done
if command -v lintian >/dev/null; then
  # errors fail; warnings are printed
  lintian --fail-on error --suppress-tags-from-file /dev/null "$out"/*.deb
fi
