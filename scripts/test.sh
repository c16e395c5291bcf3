#!/usr/bin/env bash
# Runs the whole test suite: sets up and builds (scripts/setup.sh), runs every
# test with CTest, then rebuilds the GGUF reader's tests with AddressSanitizer
# and runs the corrupt-input tests under it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
JOBS=${JOBS:-$(nproc)}
ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 900

echo "test: corrupt-input tests under AddressSanitizer"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPC_ASAN=ON >/dev/null
cmake --build build-asan -j "$JOBS" --target test_gguf
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 build-asan/test_gguf --gtest_filter='GgufCorrupt*'
echo "test: all passed"
