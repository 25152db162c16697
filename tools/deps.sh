#!/usr/bin/env bash
# Installs the Debian packages that o1d's build and tests need, when missing.
# Idempotent and quiet when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build clang
  libinih-dev libcjson-dev libcmocka-dev liburing-dev libbpf-dev bpftool
  libpcre2-dev libmicrohttpd-dev libopenblas-dev
  python3 python3-pytest python3-jsonschema curl nodejs
  haproxy
  scdoc man-db file lintian
)

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
