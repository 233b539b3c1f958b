#!/usr/bin/env bash
# Installs, with apt, the Debian 12 packages rightsize needs to build, test and run the demo.
# Idempotent: installs only what is missing, and does nothing when all is there.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libsqlite3-dev zlib1g-dev libcsv-dev libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  sqlite3 python3 python3-dev gzip bc time clang-format clang-tidy
  libxgboost-dev libre2-dev libdw-dev stress-ng libcpp-httplib-dev
  libtree-sitter-dev libyaml-cpp-dev
  clang libclang-rt-dev chromium openssl curl prometheus
  dpkg-dev file man-db zsh adduser
  lua5.1 lua-socket victoria-metrics libsnappy-dev
  protobuf-compiler protobuf-compiler-grpc libgrpc++-dev libprotobuf-dev
  postgresql-15 libpq-dev haproxy
)
# npm fetches the tree-sitter Python grammar (src/code/grammar/) and the dashboard's packages
# (web/) at build time. Any npm will do
# (e.g. Node 20 from nodesource); Debian's own nodejs and npm only when there is none.
if ! command -v npm >/dev/null 2>&1; then
  PKGS+=(nodejs npm)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
