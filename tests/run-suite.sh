#!/usr/bin/env bash
# Runs the test binaries of a build directory and records one line per case
# (pass/fail/skip) in COUNTS_FILE.
#   tests/run-suite.sh BUILD_DIR COUNTS_FILE [full|sanitized]
# full (the default): every case of every unit and integration binary.
# sanitized: every unit case, and of the integration binaries only the
# cases named in tests/sanitized-cases.txt (ASR_LONG=1: all of them too).
# Each binary runs in its own process group, which is killed afterwards.
set -uo pipefail
dir=$1 counts=$2 tier=${3:-full}
case $tier in full|sanitized) ;; *) echo "run-suite: tier '$tier' is neither full nor sanitized" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
[ "${ASR_LONG:-0}" = 1 ] && tier=full
record() { local i; for ((i = 0; i < $2; i++)); do echo "$1"; done >> "$counts"; }
for t in $(cd "$dir" && ls tests/unit/test_* tests/integration/test_* 2>/dev/null | grep -v '\.o$'); do
  [ -x "$dir/$t" ] || continue
  cases=()
  if [ "$tier" = sanitized ] && [[ $t == tests/integration/* ]]; then
    # shellcheck disable=SC2207 # case names have no blanks
    cases=($(awk -v b="${t##*/}" '$1 == b { print $2 }' "$here/sanitized-cases.txt"))
    [ ${#cases[@]} -gt 0 ] || continue
  fi
  log=$(mktemp)
  ( cd "$dir" && exec setsid "./$t" "${cases[@]}" ) >"$log" 2>&1 &
  pid=$!
  wait $pid
  rc=$?
  kill -KILL -- -$pid 2>/dev/null
  grep -E '^(PASS|FAIL|SKIP): ' "$log"
  npass=$(grep -c '^PASS: ' "$log"); nskip=$(grep -c '^SKIP: ' "$log"); nfail=$(grep -c '^FAIL: ' "$log")
  record pass "$npass"; record skip "$nskip"; record fail "$nfail"
  if [ "$nfail" -gt 0 ] || { [ $rc -ne 0 ] && [ $rc -ne 77 ]; }; then
    echo "---- output of $t (exit $rc) ----"; tail -60 "$log"; echo "----"
    # what each failing case said, wherever it is in the output (the tail
    # above may hold only the later cases' noise)
    echo "---- failures in $t ----"
    grep -E 'FAILED AT |TIMEOUT after |killed by signal |case.s directory is kept' "$log" | head -40
    echo "----"
    if [ "$nfail" -eq 0 ]; then echo "FAIL: $t exited $rc"; record fail 1; fi
  fi
  rm -f "$log"
done
