#!/usr/bin/env bash
# Runs the runtime's close-with-requests-in-flight cases under valgrind
# (memcheck follows the harness's forked cases and ranks). Any definite leak
# or memory error makes the case exit 99, which the harness reports as FAIL.
#   tests/valgrind-close.sh BUILD_DIR
set -uo pipefail
dir=$1
command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed"; exit 77; }
cd "$dir" || exit 1
rc=0
for t in close_pending close_pending_lnc close_connecting; do
  ./libtool --mode=execute valgrind -q --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite --show-leak-kinds=definite \
    tests/unit/test_runtime "$t" 2>&1 | grep -E '^(PASS|FAIL|SKIP):|==[0-9]+==' || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
done
exit $rc
