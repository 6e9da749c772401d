#!/usr/bin/env bash
# Quick start, first command: installs what is missing (apt), builds, and runs
# the main job on this host. Until the launcher lands, the main job is the KV
# rendezvous demo: 8 processes elect a KV server and meet pairwise through it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
echo "== building (build/)"
"$top/scripts/build.sh" "$top/build" --enable-werror
echo "== running: tests/apps/kv_demo -n 8"
"$top/build/tests/apps/kv_demo" -n 8
