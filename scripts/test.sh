#!/usr/bin/env bash
# Runs the whole test suite: sets up and builds (scripts/setup.sh), installs the
# JavaScript test clients (npm ci), runs every test with CTest (the tests start
# real `promptcache serve` and redis-server processes on loopback), then
# rebuilds the GGUF reader's tests with AddressSanitizer and runs the
# corrupt-input tests under it, and runs every libFuzzer target (fuzz/) for
# FUZZ_SECONDS (default 10) each under ASan and UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
JOBS=${JOBS:-$(nproc)}
# The official openai npm client, for the server's JavaScript client test.
(cd tests/server/js && npm ci --no-audit --no-fund --loglevel=error)
# puppeteer-core, which drives chromium for the dashboard's browser test.
(cd tests/server/dashboard && npm ci --no-audit --no-fund --loglevel=error)
ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 900

echo "test: corrupt-input tests under AddressSanitizer"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPC_ASAN=ON >/dev/null
cmake --build build-asan -j "$JOBS" --target test_gguf
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 build-asan/test_gguf --gtest_filter='GgufCorrupt*'

echo "test: fuzz targets, ${FUZZ_SECONDS:-10} s each (scripts/fuzz.sh)"
scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
echo "test: all passed"
