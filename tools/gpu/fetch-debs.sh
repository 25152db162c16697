#!/usr/bin/env bash
# Downloads (does not install) the Debian packages that the GPU machine lacks
# into .debs/ (git-ignored), so that tools/gpu/run.sh can unpack them there:
# that machine has CUDA, cmake and ninja but no apt and no network.
set -euo pipefail
# NCCL's NVLink multicast stays off (shared GPU hosts; issue 10).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/../.."
mkdir -p .debs
cd .debs
pkgs=(
  liburing2 liburing-dev libinih1 libinih-dev libinireader0
  libcmocka0 libcmocka-dev libcjson1 libcjson-dev
  libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libpcre2-dev
  libbpf1 libbpf-dev libmicrohttpd12 libmicrohttpd-dev
  libopenblas0 libopenblas0-pthread libopenblas-dev libopenblas-pthread-dev
  libgfortran5 libelf1 libelf-dev zlib1g zlib1g-dev pkg-config libpkgconf3 pkgconf pkgconf-bin
)
missing=()
for p in "${pkgs[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
apt-get update -qq
apt-get download "${missing[@]}" 2>&1 | grep -v '^Get:' || true
ls -1 | wc -l
