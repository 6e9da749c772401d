#!/usr/bin/env bash
# Configures and builds asr in a build directory.
#   scripts/build.sh [BUILD_DIR] [configure options...]
# Default BUILD_DIR is build/ at the top of the source tree.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/build}
shift || true
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
  autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
mkdir -p "$dir"
cd "$dir"
# Reconfigure when the options differ from the last run.
opts="$*"
if [ ! -f Makefile ] || [ "$(cat .asr-configure-opts 2>/dev/null)" != "$opts" ] || [ "$top/configure" -nt Makefile ]; then
  "$top/configure" -q "$@"
  echo "$opts" > .asr-configure-opts
fi
make -j"$(nproc)" >/dev/null 2>build.log || { cat build.log >&2; exit 1; }
make -j"$(nproc)" check TESTS= >/dev/null 2>>build.log || { cat build.log >&2; exit 1; }
