#!/usr/bin/env bash
# Quick start, second command: installs what is missing, builds, and runs the
# whole test suite. Its tiers (README "Tests"):
#   - unit tests under all three builds: -Werror, ASan+UBSan, TSan (the
#     sanitizer builds are debug builds: assert() is live);
#   - integration tests (real asrrun jobs) under the -Werror build, and the
#     cases named in tests/sanitized-cases.txt under ASan and TSan;
#   - the Python module's tests (tests/python: pytest, /usr/bin/python3,
#     real asrrun jobs; SKIP lines where the module was not built) and
#     asrtrace's (synthetic traces; plot's SKIP without matplotlib), the
#     multi-host (network namespaces) and Slurm suites, the fuzz
#     targets (corpus replay and 10 s each), the format, layering and
#     error-space checks,
#     the runtime's close cases under valgrind, benchmark smoke runs, and
#     make distcheck (its tree runs the unit tests that read the shipped
#     files and time nothing: tests/Makefile.mk's DISTCHECK_TESTS);
#   - ASR_LONG=1 adds the long tier: soaks, long stalls, large emulations
#     (TEST_LONG cases, otherwise SKIP lines), and every integration case
#     under the sanitizer builds too.
# Ends with one line "N passed, N failed, N skipped" and exits non-zero on
# any failure.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
counts=$(mktemp) bg=$(mktemp -d) bgpid=""
trap '[ -n "$bgpid" ] && kill -KILL -- -"$bgpid" 2>/dev/null; rm -rf "$counts" "$bg"' EXIT
"$top/scripts/deps.sh" --test || { echo "0 passed, 1 failed"; exit 1; }
# Third-party libraries not built with TSan (libpmix) race among their own
# threads. What those libraries' memset/memcpy touch is not checked
# (ignore_noninstrumented_modules): checking libfabric's own buffers was
# most of the TSan build's time; the one access of theirs that is ours to
# order, the provider's into a data buffer, libasr tells TSan of itself
# (common/asr_tsan.h; test_runtime_mt's tsan_sees_the_providers_write).
# A TSan process with threads sleeps before it exits so that threads still
# running meet the exit's destructors: 100 ms of it, not the default 1 s,
# which every asrrun, asrd and rank of every job paid in turn.
export TSAN_OPTIONS="suppressions=$top/tests/tsan.supp:ignore_noninstrumented_modules=1:atexit_sleep_ms=100${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# Each "== " section's wall time, listed before the summary line, so that
# the suite's 20-minute budget (README "Tests") can be watched part by part.
timings=() cur="" cur_t0=0
section() {
  end_section
  cur=$1 cur_t0=$SECONDS
  echo "== $1"
}
end_section() {
  if [ -n "$cur" ]; then timings+=("$(printf '%5d s  %s' $((SECONDS - cur_t0)) "$cur")"); fi
  cur=""
}

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

# The sanitizer builds, make distcheck, the fuzz targets and the three
# benchmarks' smoke runs go one after the other in the background, at the
# lowest CPU priority, while the -Werror build's tests run: those mostly
# wait on processes and leave about one of the two cores idle, and at nice
# 19 the background takes little from them. Nothing in the background
# asserts a bound on time (distcheck's tree runs only such tests:
# DISTCHECK_TESTS; a fuzz target fuzzes for 10 s of the wall's time, with
# what CPU it gets, its count of runs in its PASS line; a smoke run checks
# that every figure completes and verifies, under timeouts of minutes). Its own process group, killed on any exit. Each
# step leaves $bg/NAME.rc ("status seconds") and $bg/NAME.log.
background() {
  ( exec setsid env BG="$bg" bash -c '
      bgstep() {
        local name=$1 t0=$SECONDS; shift
        nice -n 19 "$@" >"$BG/$name.log" 2>&1
        echo "$? $((SECONDS - t0))" >"$BG/$name.rc"
      }
      bgstep asan "$0/scripts/build.sh" "$0/build-asan" --enable-werror --enable-asan --enable-debug
      bgstep tsan "$0/scripts/build.sh" "$0/build-tsan" --enable-werror --enable-tsan --enable-debug
      bgstep distcheck make -C "$0/build" -s -j"$(nproc)" distcheck \
        DISTCHECK_CONFIGURE_FLAGS="--enable-werror --disable-integration-tests" TESTS="\$(DISTCHECK_TESTS)"
      bgstep fuzz "$0/tests/fuzz/run.sh" "$0/build"
      bgstep kv-bench make -C "$0/build" -s bench BENCH_ARGS=-q
      bgstep ofi-bench env REPS=1 MESH_REPS=1 MESH_SIZES=4 MESH_LNCS=2 LAT_SIZES=1 BW_SIZES=4096 ITERS=100 \
        RATE_ITERS=100 FLOOR_ITERS=100000 MPICH_REPS=1 "$0/tests/bench/ofi_bench.sh" "$0/build"
      bgstep rma-bench env QUICK=1 UCX=0 "$0/tests/bench/rma_bench.sh" "$0/build"
    ' "$top" ) &
  bgpid=$!
}
# Waits for a background step and counts it as one test: its PASS/FAIL line
# (and the tail of its log when it failed). Returns its status.
bg_result() { # name label
  while [ ! -s "$bg/$1.rc" ]; do sleep 1; done
  local rc secs
  read -r rc secs <"$bg/$1.rc"
  if [ "$rc" = 0 ]; then
    echo pass >>"$counts"; echo "PASS: $2 ($secs s, in the background)"
  else
    tail -30 "$bg/$1.log"; echo fail >>"$counts"; echo "FAIL: $2 ($secs s, in the background)"
  fi
  return "$rc"
}

section "default build ($top/build)"
if "$top/scripts/build.sh" "$top/build" --enable-werror; then
  echo pass >>"$counts"; echo "PASS: build-default"
  background
  "$top/tests/run-suite.sh" "$top/build" "$counts" full
else
  echo fail >>"$counts"; echo "FAIL: build-default"
fi
for san in asan tsan; do
  section "$san build ($top/build-$san)"
  if [ -z "$bgpid" ]; then
    echo fail >>"$counts"; echo "FAIL: build-$san (not built: the default build failed)"
  elif bg_result "$san" "build-$san"; then
    "$top/tests/run-suite.sh" "$top/build-$san" "$counts" sanitized
  fi
done

# A test script that prints its own PASS/FAIL/SKIP lines: its lines and
# counts from its log, and a failure when it exited non-zero.
script_lines() { # name log status
  # (with the lines a script indents under a FAIL: the failing run's output)
  grep -E '^(PASS|FAIL|SKIP): |^    ' "$2"
  sed -n 's/^\(PASS\|FAIL\|SKIP\): .*/\1/p' "$2" | tr 'A-Z' 'a-z' >>"$counts"
  if [ "$3" -ne 0 ]; then
    tail -30 "$2"; echo "FAIL: $1 exited $3"; echo fail >>"$counts"
  fi
}
script_suite() { # name command...
  local name=$1 log rc; shift
  log=$(mktemp)
  "$@" >"$log" 2>&1; rc=$?
  script_lines "$name" "$log" $rc
  rm -f "$log"
}

section "Python module (pytest under asrrun jobs)"
script_suite python "$top/tests/python/run.sh" "$top/build"
section "multi-host (network namespaces)"
script_suite netns "$top/tests/netns/netns.sh" "$top/build"
script_suite verdict "$top/tests/netns/verdict.sh" "$top/build"
# the failure policy across hosts: 5 runs of each case, 100 in the long tier
script_suite failure "$top/tests/netns/failure.sh" "$top/build" "$([ "${ASR_LONG:-0}" = 1 ] && echo 100 || echo 5)"
section "the tree of daemons (emulated hosts, many to a network namespace)"
script_suite tree "$top/tests/netns/tree.sh" "$top/build"
section "Slurm (a private two-node cluster)"
script_suite slurm "$top/tests/slurm/slurm.sh" "$top/build"
section "fuzz (libFuzzer targets of the decoders of outside bytes; in the background)"
if [ -n "$bgpid" ]; then
  while [ ! -s "$bg/fuzz.rc" ]; do sleep 1; done
  read -r rc _ <"$bg/fuzz.rc"
  script_lines fuzz "$bg/fuzz.log" "$rc"
else
  echo fail >>"$counts"; echo "FAIL: fuzz (not run: the default build failed)"
fi

section "checks"
step format-check "$top/scripts/check-format.sh"
step layering-check "$top/tests/check-layering.sh" "$top/build"
step layering-check-planted "$top/tests/check-layering-planted.sh"
step tour-check /usr/bin/python3 "$top/tests/check-tour.py" "$top"
# one error space (ASR_E*): no bare -1 returned in the C layers (issue 20)
step error-space-check bash -c "cd '$top' && ! grep -rn 'return -1' common bootstrap runtime launcher"
step valgrind-close "$top/tests/valgrind-close.sh" "$top/build"
if [ -n "$bgpid" ]; then
  bg_result distcheck distcheck
  bg_result kv-bench kv-bench-smoke
  bg_result ofi-bench ofi-bench-smoke
  bg_result rma-bench rma-bench-smoke
  wait "$bgpid"; bgpid=""
else
  echo fail >>"$counts"; echo "FAIL: distcheck, kv-bench-smoke, ofi-bench-smoke, rma-bench-smoke (not run: the default build failed)"
fi

end_section
echo "== time per section (the whole suite: $((SECONDS / 60)) min $((SECONDS % 60)) s)"
printf '%s\n' "${timings[@]}"
p=$(grep -c '^pass' "$counts"); f=$(grep -c '^fail' "$counts"); s=$(grep -c '^skip' "$counts")
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
