#!/usr/bin/env bash
# Quick start, second command: installs what is missing, builds, and runs the
# whole test suite: the unit/integration tests on a -Werror build, again under
# ASan+UBSan and under TSan, the format check, the runtime's close cases under
# valgrind, make distcheck and benchmark smoke runs (the KV store's; libasr
# against raw libfabric, one small size of each kind, payloads checked).
# Ends with one line "N passed, N failed, N skipped" and exits non-zero on
# any failure.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
counts=$(mktemp)
trap 'rm -f "$counts"' EXIT
"$top/scripts/deps.sh" || { echo "0 passed, 1 failed"; exit 1; }
# Third-party libraries not built with TSan (libpmix) race among their own threads.
export TSAN_OPTIONS="suppressions=$top/tests/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# One suite step that is not a test binary: counts as one test.
step() {
  local name=$1; shift
  local t0=$SECONDS
  if out=$("$@" 2>&1); then
    echo "PASS: $name ($((SECONDS - t0)) s)"; echo pass >> "$counts"
  else
    echo "$out" | tail -30
    echo "FAIL: $name ($((SECONDS - t0)) s)"; echo fail >> "$counts"
  fi
}

build_and_run() { # label dir configure-options...
  local label=$1 dir=$2; shift 2
  echo "== $label build ($dir)"
  if "$top/scripts/build.sh" "$dir" "$@"; then
    echo pass >> "$counts"; echo "PASS: build-$label"
    "$top/tests/run-suite.sh" "$dir" "$counts"
  else
    echo fail >> "$counts"; echo "FAIL: build-$label"
  fi
}

build_and_run default "$top/build" --enable-werror
build_and_run asan "$top/build-asan" --enable-werror --enable-asan --enable-debug
build_and_run tsan "$top/build-tsan" --enable-werror --enable-tsan --enable-debug

# A test script that prints its own PASS/FAIL/SKIP lines.
script_suite() { # name command...
  local name=$1 log rc; shift
  log=$(mktemp)
  "$@" >"$log" 2>&1; rc=$?
  grep -E '^(PASS|FAIL|SKIP): ' "$log"
  sed -n 's/^\(PASS\|FAIL\|SKIP\): .*/\1/p' "$log" | tr 'A-Z' 'a-z' >>"$counts"
  if [ $rc -ne 0 ]; then
    tail -30 "$log"; echo "FAIL: $name exited $rc"; echo fail >>"$counts"
  fi
  rm -f "$log"
}

echo "== multi-host (network namespaces)"
script_suite netns "$top/tests/netns/netns.sh" "$top/build"
echo "== Slurm (a private two-node cluster)"
script_suite slurm "$top/tests/slurm/slurm.sh" "$top/build"

echo "== checks"
step format-check "$top/scripts/check-format.sh"
step valgrind-close "$top/tests/valgrind-close.sh" "$top/build"
step kv-bench-smoke make -C "$top/build" -s bench BENCH_ARGS=-q
step ofi-bench-smoke env REPS=1 MESH_REPS=1 MESH_SIZES=4 MESH_LNCS=2 LAT_SIZES=1 BW_SIZES=4096 ITERS=100 \
  RATE_ITERS=100 "$top/tests/bench/ofi_bench.sh" "$top/build"
step distcheck make -C "$top/build" -s distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror

p=$(grep -c '^pass' "$counts"); f=$(grep -c '^fail' "$counts"); s=$(grep -c '^skip' "$counts")
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
