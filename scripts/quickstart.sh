#!/usr/bin/env bash
# Quick start, first command: installs what is missing (apt), builds, and runs
# the main job on this host: asrrun starts 4 ranks of the pairwise demo, which
# connect to each other through libasr, move verified data and print latency
# and bandwidth.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
echo "== building (build/)"
"$top/scripts/build.sh" "$top/build" --enable-werror
echo "== running: asrrun -n 4 examples/pairwise"
cd "$top/build"
exec ./bin/asrrun -n 4 --timeout 120 ./examples/pairwise
