#!/usr/bin/env bash
# Fails when a C file differs from what clang-format (.clang-format) makes of it.
# One clang-format process checks every file (--dry-run --Werror); each file
# it finds wrong is named once, with the command that formats it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
files=()
while IFS= read -r f; do files+=("$f"); done < <(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
[ ${#files[@]} -gt 0 ] || exit 0
if out=$(clang-format --style=file --dry-run --Werror "${files[@]}" 2>&1); then exit 0; fi
bad=$(printf '%s\n' "$out" | sed -n 's/^\(.*\.[ch]\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ -z "$bad" ]; then
  printf '%s\n' "$out" | tail -20
  echo "clang-format failed (above)"
  exit 1
fi
while IFS= read -r f; do echo "not formatted: $f (run: clang-format -i $f)"; done <<<"$bad"
exit 1
