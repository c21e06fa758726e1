#!/usr/bin/env bash
# Installs the Debian packages faultline builds and tests with. Idempotent and
# quiet when everything is already there. Run as root (or with sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build
  clang llvm lld libclang-rt-dev     # BPF objects, libFuzzer, sanitizers
  liburing-dev libbpf-dev bpftool libelf-dev zlib1g-dev
  libpcre2-dev libnuma-dev systemtap-sdt-dev libjansson-dev libmicrohttpd-dev
  python3 util-linux
  python3-jinja2                     # chat templates rendered as their models' own (tests)
  python3-jsonschema                 # structured outputs checked by a validator not written here (tests)
)
# Extra packages a caller asks for (e.g. chromium for the report test).
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
