#!/usr/bin/env bash
# Runs the Python tests (pytest from Debian, /usr/bin/python3) against a
# build tree and prints one line per test: PASS: / FAIL: / SKIP: python/NAME
# (scripts/test.sh counts them): the module's (test_asr.py, test_rma.py:
# real asrrun jobs) and asrtrace's (test_asrtrace.py: synthetic traces).
#   tests/python/run.sh BUILD_DIR
# A build without the module (no python3-dev, --disable-python), or a
# machine without numpy, is one visible SKIP line for the module's tests;
# a machine without pytest, one for all.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: tests/python/run.sh BUILD_DIR}" && pwd)
py=/usr/bin/python3
if ! $py -c 'import pytest' 2>/dev/null; then
  echo "SKIP: python (no pytest for $py: scripts/deps.sh --test installs it)"
  exit 0
fi
files=("$here/test_asrtrace.py")
if ! ls "$build"/python/asr.*so >/dev/null 2>&1; then
  echo "SKIP: python (the module was not built in $build: python3-dev missing, or --disable-python)"
elif ! $py -c 'import numpy' 2>/dev/null; then
  echo "SKIP: python (no numpy for $py: scripts/deps.sh --test installs it)"
else
  files=("$here")
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
ASR_BUILDDIR=$build PYTEST_ASR_RESULTS=$results $py -m pytest -p no:cacheprovider -q "${files[@]}" >"$results.log" 2>&1
rc=$?
cat "$results"
if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then
  tail -60 "$results.log"
fi
rm -f "$results.log"
grep -q '^FAIL: ' "$results" && exit 1
[ $rc -eq 0 ] || [ $rc -eq 5 ] || { echo "FAIL: python (pytest exited $rc)"; exit 1; }
exit 0
