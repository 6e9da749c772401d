#!/usr/bin/env bash
# tests/fuzz/run.sh BUILD_DIR [SECONDS] [RUNS] -- builds and runs the fuzz
# targets of the decoders that read bytes from outside the process.
#
# Each target below is compiled from its sources by clang with libFuzzer,
# AddressSanitizer (leak checks on) and UBSan into BUILD_DIR/fuzz/, rebuilt
# when a source, a header or this script is newer. Then, per target:
#   1. every input of its committed corpus, tests/fuzz/corpus/NAME/, runs once
#      (the seeds and the reproducers of bugs already fixed);
#   2. it fuzzes for at most SECONDS (default 10; 0: no time bound) on a copy
#      of that corpus in a temporary directory, and with RUNS for at most RUNS
#      inputs, whichever comes first (tests/fuzz/run.sh build 0 10000000 is a
#      long run of ten million inputs each).
# The targets run as many at a time as there are CPUs, each on one core.
# One line per target: "PASS: fuzz/NAME (N runs, T s)", "FAIL: fuzz/NAME: why"
# or "SKIP: fuzz/NAME: clang with libFuzzer not found"; the exit status is
# non-zero when one failed. A failing input is kept in
# BUILD_DIR/fuzz/artifacts/NAME/ with the log; to reproduce it run
# BUILD_DIR/fuzz/fuzz_NAME FILE. Nothing is written outside BUILD_DIR but the
# temporary directories, which are removed. FUZZ_TARGETS="NAME ..." runs
# only those targets.
set -euo pipefail

# The targets, one row each: NAME | SOURCES | INCLUDE DIRECTORIES | PKG-CONFIG
# PACKAGES. Paths are relative to the top of the tree; the source of the
# target itself comes first. A new decoder joins with one row, a
# tests/fuzz/fuzz_NAME.c and a seed corpus in tests/fuzz/corpus/NAME/.
TARGETS=(
  "kv_frame | tests/fuzz/fuzz_kv_frame.c bootstrap/kv_frame.c bootstrap/kv_keys.c common/asr_err.c
     | common bootstrap |"
  "yaml | tests/fuzz/fuzz_yaml.c launcher/config/config.c launcher/config/config_yaml.c common/asr_env.c common/asr_netif.c common/asr_err.c
     common/asr_fs.c | common launcher/config | yaml-0.1"
  "hostfile | tests/fuzz/fuzz_hostfile.c launcher/config/config.c launcher/config/config_yaml.c launcher/launch/hostlist.c
     launcher/launch/alloc.c launcher/launch/launch_pick.c launcher/launch/launch_slurm.c launcher/launch/launch_slurm_nodes.c
     launcher/launch/launch_rsh.c launcher/launch/launch_local.c launcher/launch/launch_agent.c common/asr_env.c
     common/asr_netif.c common/asr_err.c common/asr_fs.c common/asr_sig.c | common launcher/config launcher/launch | yaml-0.1"
  "ctl | tests/fuzz/fuzz_ctl.c launcher/ctl/ctl.c launcher/ctl/ctl_msg.c common/asr_buf.c common/asr_err.c
     common/asr_loop.c common/asr_rand.c common/asr_sock.c common/asr_time.c | common launcher/config launcher/ctl |"
  "report | tests/fuzz/fuzz_report.c bootstrap/report_fmt.c common/asr_err.c | common bootstrap |"
  "http | tests/fuzz/fuzz_http.c launcher/metrics/metrics_http.c | common launcher/metrics |"
  "pmi | tests/fuzz/fuzz_pmi.c launcher/asrd/pmi/pmi_wire.c common/asr_buf.c common/asr_err.c | common launcher/asrd/pmi |"
  "pmi2 | tests/fuzz/fuzz_pmi2.c launcher/asrd/pmi/pmi2_wire.c common/asr_buf.c common/asr_err.c | common launcher/asrd/pmi |"
  "mem_desc | tests/fuzz/fuzz_mem_desc.c runtime/rma/mem_desc.c common/asr_siphash.c common/asr_err.c
     | common runtime/include runtime/rma |"
  "trace | tests/fuzz/fuzz_trace.c launcher/trace/trace_read.c launcher/trace/trace_merge.c common/asr_err.c
     | common launcher/trace |"
  "net_handle | tests/fuzz/fuzz_net_handle.c common/asr_err.c | common runtime | libfabric"
  "sm | tests/fuzz/fuzz_sm.c runtime/sm/sm_record.c runtime/sm/sm_data.c runtime/sm/sm_rma.c common/asr_err.c common/asr_log.c
     common/asr_env.c common/asr_netif.c common/asr_fs.c common/asr_time.c | common runtime runtime/sm runtime/include |"
)

# The compiler, and what every target is built with: the tree's warnings
# (configure.ac's ASR_CFLAGS) and the sanitizers, whose reports stop the run.
FUZZ_CC=${FUZZ_CC:-clang}
# shellcheck disable=SC2054 # the commas are clang's, inside one word
CFLAGS_FUZZ=(-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -Wall -Wextra -Wshadow -Wno-unused-parameter -Wmissing-prototypes -Wstrict-prototypes -Werror -pthread)
# Per input: a hang is an input that runs this long (seconds). Generous, as
# libFuzzer's clock is the wall's: on a loaded machine a process has stalled
# for 47 s, and a real hang still shows.
INPUT_TIMEOUT=60
# Fuzzing schedules fast inputs more (up to 30 times): the slowest (a Slurm
# list of 64k names, 100 ms under the sanitizers) would otherwise take the
# run over as the corpus grows.
FUZZ_OPTS=(-entropic_scale_per_exec_time=1)

usage() { echo "usage: tests/fuzz/run.sh BUILD_DIR [SECONDS] [RUNS]" >&2; exit 2; }
if [ $# -lt 1 ] || [ $# -gt 3 ]; then usage; fi
seconds=${2:-10}
runs=${3:-}
[[ $seconds =~ ^[0-9]+$ ]] || usage
[ -z "$runs" ] || [[ $runs =~ ^[0-9]+$ ]] || usage
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1/fuzz"
build=$(cd "$1" && pwd)
out=$build/fuzz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }
names=()
for row in "${TARGETS[@]}"; do names+=("$(trim "${row%%|*}")"); done

# libFuzzer ships with clang (Debian: clang and libclang-rt-14-dev); without
# it every target is a visible SKIP, never a silent pass.
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' >"$tmp/probe.c"
if ! command -v "$FUZZ_CC" >/dev/null ||
  ! "$FUZZ_CC" -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1; then
  for n in "${names[@]}"; do echo "SKIP: fuzz/$n: clang with libFuzzer not found"; done
  exit 0
fi

# autoconf's config.h: the build directory's when it is configured, else a
# stand-in with what the sources take from it.
if [ -f "$build/config.h" ]; then
  confdir=$build
else
  confdir=$out/include
  mkdir -p "$confdir"
  version=$(sed -n 's/^AC_INIT(\[asr\], \[\([^]]*\)\].*/\1/p' "$top/configure.ac")
  printf '#define _GNU_SOURCE 1\n#define PACKAGE_VERSION "%s"\n' "${version:-0}" >"$tmp/config.h"
  cmp -s "$tmp/config.h" "$confdir/config.h" || cp "$tmp/config.h" "$confdir/config.h"
fi

failed=0
fail() { echo "FAIL: fuzz/$name: $*"; failed=1; }

# build NAME SOURCES INCLUDES PACKAGES: (re)builds $out/fuzz_NAME.
build_target() {
  local bin=$out/fuzz_$1 srcs=() incs=() flags=() pkgflags=() s
  read -r -a srcs <<<"$2"
  for s in $3 tests/fuzz; do incs+=("$top/$s"); flags+=(-I "$top/$s"); done
  if [ -n "$4" ]; then
    # shellcheck disable=SC2086 # the package list is words
    if ! s=$(pkg-config --cflags --libs $4 2>&1); then
      fail "pkg-config: $4 not found ($s)"
      return 1
    fi
    read -r -a pkgflags <<<"$s"
  fi
  if [ -x "$bin" ] && [ -z "$(find "${srcs[@]/#/$top/}" "${incs[@]}" "$top/tests/fuzz/run.sh" "$confdir/config.h" \
    -newer "$bin" -print -quit)" ]; then
    return 0
  fi
  # The configured build's config.h (autoconf's, which every source
  # includes first) comes first on the include path.
  if ! "$FUZZ_CC" "${CFLAGS_FUZZ[@]}" -I "$confdir" "${flags[@]}" "${srcs[@]/#/$top/}" "${pkgflags[@]}" \
    -o "$bin.new" >"$out/fuzz_$1.build.log" 2>&1; then
    sed 's/^/    /' "$out/fuzz_$1.build.log" | head -20
    fail "does not build (log: $out/fuzz_$1.build.log)"
    return 1
  fi
  mv "$bin.new" "$bin"
}

# why LOG: the first line of LOG that says what went wrong.
why() {
  grep -m1 -E 'FUZZ_ASSERT|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|==[0-9]+==ERROR|run interrupted' \
    "$1" ||
    tail -1 "$1"
}

# keep NAME LOG DIR: saves the log and the inputs that failed for a rerun.
keep() {
  local dest=$out/artifacts/$1
  mkdir -p "$dest"
  cp "$2" "$dest/$(basename "$2")"
  if [ -d "$3" ]; then find "$3" -maxdepth 1 -type f -exec cp {} "$dest/" \;; fi
  echo "$dest"
}

# run_target ROW: builds, replays and fuzzes one target; its lines go to
# stdout, and it returns non-zero when the target failed.
run_target() {
  local row=$1 name srcs incs pkgs corpus bin seeds work limits t0 n
  IFS='|' read -r name srcs incs pkgs <<<"$(tr '\n' ' ' <<<"$row")"
  name=$(trim "$name")
  corpus=$top/tests/fuzz/corpus/$name
  build_target "$name" "$(trim "$srcs")" "$(trim "$incs")" "$(trim "$pkgs")" || return 1
  bin=$out/fuzz_$name
  seeds=()
  if [ -d "$corpus" ]; then mapfile -t seeds < <(find "$corpus" -type f | sort); fi
  if [ ${#seeds[@]} -eq 0 ]; then
    fail "no seed corpus in tests/fuzz/corpus/$name/"
    return 1
  fi
  work=$tmp/$name
  mkdir -p "$work/cwd" "$work/corpus" "$work/crash"
  # The targets run in an empty directory: a relative path an input names
  # (a YAML hostfile) finds nothing, and nothing lands in the tree.
  # 1. replay: each committed input once
  if ! (cd "$work/cwd" && "$bin" -timeout=$INPUT_TIMEOUT -artifact_prefix="$work/crash/" "${seeds[@]}") \
    </dev/null >"$work/replay.log" 2>&1; then
    tail -15 "$work/replay.log" | sed 's/^/    /'
    fail "a corpus input fails: $(why "$work/replay.log") (kept in $(keep "$name" "$work/replay.log" "$work/crash"))"
    return 1
  fi
  # 2. fuzz on a scratch copy of the corpus
  cp "${seeds[@]}" "$work/corpus/"
  limits=(-max_total_time="$seconds")
  [ -z "$runs" ] || limits+=(-runs="$runs")
  t0=$SECONDS
  if ! (cd "$work/cwd" && "$bin" "${limits[@]}" "${FUZZ_OPTS[@]}" -timeout=$INPUT_TIMEOUT -print_final_stats=1 \
    -artifact_prefix="$work/crash/" "$work/corpus") </dev/null >"$work/fuzz.log" 2>&1; then
    tail -15 "$work/fuzz.log" | sed 's/^/    /'
    fail "$(why "$work/fuzz.log") (kept in $(keep "$name" "$work/fuzz.log" "$work/crash"))"
    return 1
  fi
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
  echo "PASS: fuzz/$name (${n:-?} runs, $((SECONDS - t0)) s)"
}

# The targets run as many at a time as there are CPUs (each fuzzes on one
# core for its SECONDS); their lines are printed in the table's order once
# each is done, and each one's outcome is a file, read after the waits.
par=$(nproc 2>/dev/null || echo 1)
run=()
for row in "${TARGETS[@]}"; do
  name=$(trim "${row%%|*}")
  if [ -n "${FUZZ_TARGETS:-}" ] && ! [[ " $FUZZ_TARGETS " == *" $name "* ]]; then continue; fi
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
  (
    rc=0
    run_target "$row" || rc=1
    echo "$rc" >"$tmp/$name.rc"
  ) >"$tmp/$name.out" 2>&1 &
  run+=("$name")
done
wait
for name in "${run[@]}"; do
  cat "$tmp/$name.out"
  [ "$(cat "$tmp/$name.rc" 2>/dev/null)" = 0 ] || failed=1
done
exit $failed
