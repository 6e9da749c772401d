#!/usr/bin/env bash
# Runs the Python module's tests (tests/python/test_asr.py, pytest from
# Debian, /usr/bin/python3) against a build tree and prints one line per
# test: PASS: / FAIL: / SKIP: python/NAME (scripts/test.sh counts them).
#   tests/python/run.sh BUILD_DIR
# A build without the module (no python3-dev, --disable-python), or a
# machine without pytest, is one visible SKIP line.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: tests/python/run.sh BUILD_DIR}" && pwd)
py=/usr/bin/python3
if ! ls "$build"/python/asr.*so >/dev/null 2>&1; then
  echo "SKIP: python (the module was not built in $build: python3-dev missing, or --disable-python)"
  exit 0
fi
if ! $py -c 'import pytest, numpy' 2>/dev/null; then
  echo "SKIP: python (no pytest or numpy for $py: scripts/deps.sh --test installs them)"
  exit 0
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
ASR_BUILDDIR=$build PYTEST_ASR_RESULTS=$results $py -m pytest -p no:cacheprovider -q "$here" >"$results.log" 2>&1
rc=$?
cat "$results"
if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then
  tail -60 "$results.log"
fi
rm -f "$results.log"
grep -q '^FAIL: ' "$results" && exit 1
[ $rc -eq 0 ] || [ $rc -eq 5 ] || { echo "FAIL: python (pytest exited $rc)"; exit 1; }
exit 0
