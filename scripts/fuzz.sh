#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cc) into build-fuzz/ with clang,
# AddressSanitizer and UBSan, and runs each for SECONDS (default 600).
#
#   scripts/fuzz.sh                   # every target, 10 minutes each
#   scripts/fuzz.sh 60 pml_parser     # one target, one minute
#   JOBS=1 scripts/fuzz.sh 20         # what scripts/test.sh runs (FUZZ_SECONDS)
#
# Each target runs on its work corpus, build-fuzz/corpus/<target>/: the seeds of
# fuzz/corpus/<target>/ copied in, plus what earlier runs found, so coverage
# accumulates across runs without touching the repository's seeds. An input that
# crashes, leaks, times out or breaks an invariant is saved to
# build-fuzz/crashes/<target>/ and the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-600}
shift || true
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in fuzz/*_fuzz.cc; do
    name=$(basename "$src" _fuzz.cc)
    targets+=("$name")
  done
fi

# Longest input each target mutates to: the seeds must fit (real chat templates
# reach 17 KB); everything else stays small, which keeps executions fast.
max_len() {
  case "$1" in
    chat_template) echo 20000 ;;
    *) echo 4096 ;;
  esac
}

command -v clang++ >/dev/null || { echo "fuzz: clang++ missing (scripts/setup.sh installs clang)"; exit 2; }
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DPC_FUZZ=ON -DPC_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=Debug >/dev/null
ninja -C "$BUILD" -j "$JOBS" "${targets[@]/#/fuzz_}"

failed=()
printf '%-16s %12s %9s %8s %8s  %s\n' target executions exec/s cov ft findings
for t in "${targets[@]}"; do
  work="$BUILD/corpus/$t"
  crashes="$BUILD/crashes/$t"
  log="$BUILD/logs/$t.log"
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  if [ -d "fuzz/corpus/$t" ]; then cp -n "fuzz/corpus/$t"/* "$work"/ 2>/dev/null || true; fi
  before=$(find "$crashes" -type f | wc -l)
  rc=0
  "$BUILD/fuzz/fuzz_$t" "$work" -max_total_time="$SECS" -max_len="$(max_len "$t")" \
    -timeout=30 -rss_limit_mb=2560 -artifact_prefix="$crashes/" -print_final_stats=1 \
    >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  found=$(( $(find "$crashes" -type f | wc -l) - before ))
  printf '%-16s %12s %9s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$found"
  if [ "$rc" -ne 0 ] || [ "$found" -gt 0 ]; then
    failed+=("$t")
    echo "fuzz: $t failed (exit $rc); log: $log"
    grep -m3 -E 'ERROR: |runtime error|fuzz invariant broken|Test unit written' "$log" | sed 's/^/  /' || true
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}: inputs in $BUILD/crashes/<target>/."
  echo "  Reproduce: $BUILD/fuzz/fuzz_<target> <input>. Once fixed, add the input to"
  echo "  fuzz/corpus/<target>/ and a regression test next to the code (tests/<layer>/)."
  exit 1
fi
echo "fuzz: no findings"
