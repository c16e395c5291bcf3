#!/usr/bin/env bash
# Installs the Debian 12 packages promptcache needs (when missing) and builds it
# into build/. Safe to run again: it only installs what is missing and rebuilds
# what changed.
#
#   scripts/setup.sh            # Release build with tests
#   BUILD_DIR=out scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  g++ cmake ninja-build pkg-config git
  libpcre2-dev nlohmann-json3-dev libcli11-dev libpugixml-dev libxxhash-dev libzstd-dev
  libhiredis-dev libboost-dev libcpp-httplib-dev prometheus-cpp-dev libhwy-dev
  libgtest-dev libgmock-dev libbenchmark-dev redis-server
  haproxy curl  # the cluster (scripts/cluster.sh, tests/server/cluster_test.cc)
  chromium  # the dashboard's browser test (tests/server/dashboard_test.cc)
  python3-matplotlib  # scripts/plot_bench.py (tests/plots)
  clang libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes (scripts/fuzz.sh, fuzz/)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the server's JavaScript client test; any installation
# that provides the commands will do (Debian's packages otherwise).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "setup: built $BUILD_DIR/promptcache"
