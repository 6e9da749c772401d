#!/usr/bin/env bash
# rma_bench.sh -- libasr's one-sided transfers (issue 51) against raw
# libfabric RMA, on one host, side by side in one run, with libasr's own
# two-sided isend/irecv and, where it is installed, UCX's put beside them.
#
#   tests/bench/rma_bench.sh BUILD_DIR
#   QUICK=1 tests/bench/rma_bench.sh BUILD_DIR     (smoke: one tiny run of everything)
#
# BUILD_DIR is a configured and built tree; the script builds nothing: it
# needs BUILD_DIR/tests/bench/ofi_rma_raw (make) and
# BUILD_DIR/tests/bench/asr_rma_bench (make tests/bench/asr_rma_bench),
# and says which make target is missing. ASR=0 runs the raw and UCX
# columns alone (no asr_rma_bench needed). Needs ss (iproute2); the UCX
# column needs ucx_perftest (ucx-utils) and is a SKIP line without it.
# Everything runs on 127.0.0.1.
#
# Paths (PATHS, in this order by default): "sm", "shm" and "tcp;ofi_rxm".
# For shm and tcp;ofi_rxm, libasr is forced onto that libfabric provider
# (ASR_PROVIDER) and raw is libfabric RMA on the same one. For sm, libasr
# runs as it does by default between two ranks of one host (ASR_PROVIDER
# unset: its own same-host path), and raw is libfabric's shm, the best
# libfabric has on one host; asr_rma_bench prints the path its comms took,
# and the table's title says it.
#
# For each path, REPS times, it runs each group of rows with the asr and
# raw runs next to each other, in an order that alternates from rep to rep
# (a change of the machine's state hits both alike):
#   write+notify latency (us)  one-way, at each of SIZES: asr_rma_bench -m
#              lat (asr_write with ASR_WRITE_NOTIFY ping-pong, the owner
#              polling asr_notif_poll) against ofi_rma_raw -m lat
#              (fi_writedata ping-pong, the target reading its CQ for the
#              FI_REMOTE_CQ_DATA completion). Beside them: asr's two-sided
#              ping-pong (asr_rma_bench -m slat) and UCX's ucp_put_lat.
#   notification delivery (us) measured in the same runs: the target
#              watches the message's first and last 8 bytes while it polls
#              for the notification; the row is the median time from the
#              first poll that saw them to the poll that returned the
#              notification (0: the notification came in the same poll that
#              moved the data; a notification before its data fails the
#              run). Shown, no goal.
#   write bandwidth (MB/s)     a window of WINDOW writes to distinct
#              offsets, the last one notifying, then an 8-byte
#              acknowledgement from the target; beside them asr's two-sided
#              window (-m sbw) and UCX's ucp_put_bw.
#   read bandwidth (MB/s)      a window of WINDOW reads; the target's only
#              call is the wait for the closing message.
#   batch (GB/s)               256 x 1 KiB and 1,024 x 4 KiB writes into
#              distinct offsets, notification after the last: asr one
#              asr_xfer_post of a list prepared once, raw one fi_writemsg
#              each (the last with FI_REMOTE_CQ_DATA); a batch takes from
#              the first post to the later of the target seeing the
#              notification and the initiator's completion; median batch.
#   prep (ms)                  asr_xfer_prep of a 15,000-entry write list
#              (asr only; median of PREP_REPS).
# Both programs check every message's stamps and whole payloads on the
# first and last of each size (rma_util.h); a wrong byte fails the run.
#
# The table, one per path: row, size, asr, raw, asr/raw (ratio of medians),
# paired (range) (median of the per-rep ratios and their smallest and
# largest: each rep's asr and raw ran next to each other), the goal and
# its verdict (met / NOT met / not measured), then "asr 2-sided" (asr's
# isend/irecv at that size) and "ucx" (ucx_perftest, same transport:
# UCX_TLS=self,posix,cma for sm and shm, UCX_TLS=self,tcp on lo for
# tcp;ofi_rxm; MB/s converted from its 2^20-byte MB). Goals (ratios of
# medians, asr/raw):
#   shm, tcp;ofi_rxm  latency <= 1.10; write and read bandwidth >= 0.95
#   sm                beat raw shm: latency < 1.00; bandwidth > 1.00
#   every path        batch >= 0.90; prep < 50 ms (absolute)
#
# Knobs (environment): PATHS ("sm shm tcp;ofi_rxm"), REPS (5), SIZES ("8 64
# 256 1024 4096 16384 65536 262144 1048576 4194304": rma_util.h's),
# ITERS (1000: round trips per latency size, a tenth from 1 MiB, for all
# three tools), WINDOW (64), BW_WINDOWS (1000: at most this many timed
# windows per bandwidth size; fewer where 256 MiB takes fewer), BATCHES
# (200), PREP_REPS (5), PIN (1: the two ranks of every run on the first two
# CPUs this shell may use, as ofi_bench.sh does; 0: unpinned), ASR (1),
# UCX (1; 0: no UCX column), KEEP=1 keeps the work directory (logs,
# per-run figures) and prints its path. QUICK=1 is the smoke run: REPS=1,
# SIZES="8 4096", ITERS=20, BW_WINDOWS=3, BATCHES=3, PREP_REPS=1 unless
# set, every row and column still run once.
#
# Hygiene: only 127.0.0.1 (ASR_IF_ADDR, ASR_KV_BIND; UCX_NET_DEVICES=lo
# for UCX's tcp; only ucx_perftest's control socket binds the wildcard
# address, which it has no option against); a fresh free port per UCX run
# (asr_launch.h picks asr's); a private ASR_KV_LOCK_DIR under a mktemp -d
# work directory; every process started runs in its own process group
# (set -m) and under `timeout`, and is killed by its group on exit or
# interrupt -- nothing is ever killed by name -- after which the
# shared-memory regions the killed processes' shm endpoints leave
# (/dev/shm/<pid>:*) are removed.
set -u
set -m

BUILD=${1:-}
if [ -z "$BUILD" ] || [ ! -d "$BUILD" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
BUILD=$(cd "$BUILD" && pwd)
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  REPS=${REPS:-1} SIZES=${SIZES-"8 4096"} ITERS=${ITERS:-20} BW_WINDOWS=${BW_WINDOWS:-3}
  BATCHES=${BATCHES:-3} PREP_REPS=${PREP_REPS:-1}
fi
PATHS=${PATHS:-"sm shm tcp;ofi_rxm"}
REPS=${REPS:-5}
SIZES=${SIZES-"8 64 256 1024 4096 16384 65536 262144 1048576 4194304"}
ITERS=${ITERS:-1000}
WINDOW=${WINDOW:-64}
BW_WINDOWS=${BW_WINDOWS:-1000}
BATCHES=${BATCHES:-200}
PREP_REPS=${PREP_REPS:-5}
PIN=${PIN:-1}
ASR=${ASR:-1}
UCX=${UCX:-1}
bad_knob() { echo "rma_bench: $1 (see the knobs at the top of $0)" >&2; exit 2; }
for k in REPS ITERS WINDOW BW_WINDOWS BATCHES PREP_REPS; do
  [[ ${!k} =~ ^[1-9][0-9]*$ ]] || bad_knob "$k must be a whole number above 0, not '${!k}'"
done
for k in QUICK PIN ASR UCX; do
  [ "${!k}" = 0 ] || [ "${!k}" = 1 ] || bad_knob "$k must be 0 or 1, not '${!k}'"
done
[ "$WINDOW" -le 120 ] || bad_knob "WINDOW must be at most 120"
[ -n "$SIZES" ] || bad_knob "SIZES is empty"
for s in $SIZES; do
  if ! [[ $s =~ ^[1-9][0-9]*$ ]] || [ "$s" -lt 8 ]; then bad_knob "a size in SIZES is '$s', not a whole number of bytes from 8"; fi
done
for p in $PATHS; do
  case $p in sm | shm | "tcp;ofi_rxm") ;; *) bad_knob "PATHS holds '$p', not sm, shm or tcp;ofi_rxm" ;; esac
done
read -ra size_list <<<"$SIZES"
ZLIST=$(IFS=,; echo "${size_list[*]}") # the programs' -z

RAW=$BUILD/tests/bench/ofi_rma_raw
ASRB=$BUILD/tests/bench/asr_rma_bench
[ -x "$RAW" ] || { echo "rma_bench: $RAW missing (make -C $BUILD tests/bench/ofi_rma_raw)" >&2; exit 2; }
if [ "$ASR" = 1 ] && [ ! -x "$ASRB" ]; then
  echo "rma_bench: $ASRB missing (make -C $BUILD tests/bench/asr_rma_bench; ASR=0 runs raw and UCX alone)" >&2
  exit 2
fi
command -v ss >/dev/null || { echo "rma_bench: ss not found (install iproute2)" >&2; exit 2; }
UCX_NOTE=""
if [ "$UCX" = 0 ]; then
  UCX_NOTE="UCX=0"
elif ! command -v ucx_perftest >/dev/null; then
  UCX_NOTE="ucx_perftest not found"
  echo "SKIP: rma_bench's UCX column: ucx_perftest not found (install ucx-utils)"
fi

# PIN=1: rank 0 of every two-rank run on the first CPU this shell may use,
# rank 1 on the second (BENCH_PIN=1 for the forking programs, taskset for
# ucx_perftest's two processes), as ofi_bench.sh places them.
PIN0=() PIN1=() PINNED=unpinned
if [ "$PIN" = 1 ] && command -v taskset >/dev/null; then
  cpus=()
  for part in $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr , ' '); do
    if [[ $part == *-* ]]; then mapfile -t -O "${#cpus[@]}" cpus < <(seq "${part%-*}" "${part#*-}"); else cpus+=("$part"); fi
  done
  if [ ${#cpus[@]} -ge 2 ]; then
    PIN0=(taskset -c "${cpus[0]}") PIN1=(taskset -c "${cpus[1]}")
    PINNED="pinned to CPUs ${cpus[0]} and ${cpus[1]}"
    export BENCH_PIN=1
  fi
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rma_bench.XXXXXX") || exit 2
DATA=$WORK/data # lines: path metric size tool value rep
: >"$DATA"
export ASR_KV_LOCK_DIR=$WORK/kvlock
mkdir -p "$ASR_KV_LOCK_DIR"
export ASR_IF_ADDR=127.0.0.1 ASR_KV_BIND=127.0.0.1
unset FI_PROVIDER ASR_KV_SERVER ASR_BOOTSTRAP_PORT NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT
FAILS=0
PIDS=()

# shellcheck disable=SC2317  # (called through the trap)
cleanup() {
  local p members=()
  if [ ${#PIDS[@]} -gt 0 ]; then
    for p in "${PIDS[@]}"; do
      # shellcheck disable=SC2207
      members+=($(pgrep -g "$p" 2>/dev/null))
    done
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    # a killed shm endpoint leaves its region behind: /dev/shm/<pid>:<n>:<ep>
    # (these pids were ours and have just been SIGKILLed)
    for p in "${members[@]+"${members[@]}"}"; do rm -f /dev/shm/"$p":*:* 2>/dev/null; done
  fi
  PIDS=()
  if [ "${KEEP:-0}" = 1 ]; then
    echo "rma_bench: work directory kept: $WORK" >&3
  else
    rm -rf "$WORK"
  fi
}
# fd 3 is the script's own stderr (a trap may run while a function's output
# goes to a log).
exec 3>&2
trap cleanup EXIT
trap 'echo "rma_bench: interrupted; stopping every process it started" >&3; exit 130' INT TERM

# Starts "$@" in the background in its own process group; its pid is in BG.
bg() {
  "$@" &
  BG=$!
  PIDS+=("$BG")
}

# Waits for background pid $1; returns its status and forgets it.
reap() {
  local st keep=() p
  wait "$1"
  st=$?
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]+"${keep[@]}"}")
  return $st
}

# Runs "$@" like bg, then waits for it (the shell can still act on a signal).
run() {
  bg "$@"
  reap "$BG"
}

port_in_use() { [ -n "$(ss -Htan "( sport = :$1 or dport = :$1 )" 2>/dev/null)" ]; }

# A free TCP port on 127.0.0.1 that no socket uses.
free_port() {
  local p i
  for i in $(seq 1 200); do
    p=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])' 2>/dev/null ||
      echo $((20000 + RANDOM % 30000)))
    [ -n "$p" ] && ! port_in_use "$p" && { echo "$p"; return 0; }
  done
  return 1
}

wait_listen() { # port, pid: waits until the port listens (or the pid died)
  local i
  for i in $(seq 1 500); do
    [ -n "$(ss -Hltn "( sport = :$1 )" 2>/dev/null)" ] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.01
  done
  return 1
}

fail() { # message, log file
  FAILS=$((FAILS + 1))
  echo "rma_bench: FAILED: $1" >&2
  [ -n "${2:-}" ] && [ -f "$2" ] && tail -n 15 "$2" | sed 's/^/    /' >&2
}

REP=0 # the run a figure belongs to (paired below)

# The rows a program prints, as data lines of tool $3: its own rows, and
# with $4 (asr's -m slat / sbw) renamed to wlat / wbw of tool asr2.
to_data() { # file path-tag tool
  awk -v t="$2" -v k="$3" -v r="$REP" '
    $1 == "wlat" || $1 == "notif" || $1 == "wbw" || $1 == "rbw" { print t, $1, $2, k, $3, r }
    $1 == "slat" { print t, "wlat", $2, "asr2", $3, r }
    $1 == "sbw" { print t, "wbw", $2, "asr2", $3, r }
    $1 == "batch" { print t, "batch", $2 "x" $3, k, $4, r }
    $1 == "prep" { print t, "prep", $2 "x" $3, k, $4, r }' "$1" >>"$DATA"
}

# The libfabric provider of a path's raw runs, and its asr settings for env.
raw_prov() { if [ "$1" = sm ]; then echo shm; else echo "$1"; fi; }
asr_sel() { # path -> ASEL
  if [ "$1" = sm ]; then ASEL=(-u ASR_PROVIDER); else ASEL=(ASR_PROVIDER="$1"); fi
}

run_raw() { # path tag mode
  local out=$WORK/raw_$2_$3.$RANDOM.out
  if ! run timeout -k 5 600 "$RAW" -p "$(raw_prov "$1")" -m "$3" -z "$ZLIST" -n "$ITERS" -w "$WINDOW" \
    -N "$BW_WINDOWS" -b "$BATCHES" >"$out" 2>&1; then
    fail "ofi_rma_raw -m $3 ($1)" "$out"
    return
  fi
  to_data "$out" "$2" raw
}

run_asr() { # path tag mode
  local out=$WORK/asr_$2_$3.$RANDOM.out seen # (its path: "asr_rma_bench: path P" on stderr, noted in $WORK/paths)
  [ "$ASR" = 1 ] || return 0
  asr_sel "$1"
  if ! run env "${ASEL[@]}" timeout -k 5 600 "$ASRB" -m "$3" -z "$ZLIST" -n "$ITERS" -w "$WINDOW" \
    -N "$BW_WINDOWS" -b "$BATCHES" -r "$PREP_REPS" -t 590 >"$out" 2>&1; then
    fail "asr_rma_bench -m $3 ($1)" "$out"
    return
  fi
  seen=$(sed -n 's/^asr_rma_bench: path //p' "$out" | head -1)
  [ -n "$seen" ] && echo "$2 $seen" >>"$WORK/paths"
  to_data "$out" "$2" asr
}

# UCX's ucp_put_lat / ucp_put_bw at one size: its server and client on the
# two CPUs; ucx_perftest's CSV (-f -v) gives overall_lat (usec, one-way: it
# halves its ping-pong) in column 4 and overall_bw (2^20-byte MB/s) in 6.
ucx_env() { # path -> UENV
  if [ "$1" = "tcp;ofi_rxm" ]; then UENV=("UCX_TLS=self,tcp" UCX_NET_DEVICES=lo); else UENV=("UCX_TLS=self,posix,cma"); fi
}
lat_rounds() { if [ "$1" -ge 1048576 ]; then local n=$((ITERS / 10)); [ $n -lt 10 ] && n=10; echo $n; else echo "$ITERS"; fi; }
bw_ops() { # size: WINDOW x the windows ofi_rma_raw times (bench_bw_windows, at most BW_WINDOWS)
  local n=$((268435456 / ($1 * WINDOW)))
  [ $n -lt 5 ] && n=5
  [ $n -gt 16384 ] && n=16384
  [ $n -gt "$BW_WINDOWS" ] && n=$BW_WINDOWS
  echo $((n * WINDOW))
}
run_ucx() { # path tag lat|bw size
  [ -z "$UCX_NOTE" ] || return 0
  local port srv log=$WORK/ucx_$2_$3_$4.$RANDOM.srv out=$WORK/ucx_$2_$3_$4.$RANDOM.cli test n w st sst line
  ucx_env "$1"
  if [ "$3" = lat ]; then test=ucp_put_lat n=$(lat_rounds "$4"); else test=ucp_put_bw n=$(bw_ops "$4"); fi
  w=$((n < 1000 ? n : 1000))
  port=$(free_port) || { fail "no free port"; return; }
  bg "${PIN1[@]}" env "${UENV[@]}" timeout -k 5 300 ucx_perftest -p "$port" >"$log" 2>&1
  srv=$BG
  if ! wait_listen "$port" "$srv"; then
    reap "$srv"
    fail "ucx_perftest server ($1, $test $4 B) did not start" "$log"
    return
  fi
  run "${PIN0[@]}" env "${UENV[@]}" timeout -k 5 300 ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$4" \
    -n "$n" -w "$w" -f -v >"$out" 2>&1
  st=$?
  reap "$srv"
  sst=$?
  if [ $st -ne 0 ] || [ $sst -ne 0 ]; then
    fail "ucx_perftest ($1, $test $4 B): client $st, server $sst" "$out"
    return
  fi
  line=$(awk -F, -v t="$2" -v m="$3" -v s="$4" -v r="$REP" '
    $1 == "iterations" { hdr = 1; next }
    hdr && NF >= 6 && $1 ~ /^ *[0-9]+$/ { v = m == "lat" ? $4 : $6 * 1.048576 }
    END { if (v != "") print t, (m == "lat" ? "wlat" : "wbw"), s, "ucx", v, r }' "$out")
  if [ -n "$line" ]; then echo "$line" >>"$DATA"; else fail "ucx_perftest ($1, $test $4 B): no result" "$out"; fi
}

# One group of a path's runs in run REP, in the order given in odd runs
# and the reverse in even ones. A step: TOOL-MODE, and :SIZE for UCX's.
group() { # path tag step...
  local p=$1 t=$2 order=() i
  shift 2
  if [ $((REP % 2)) -eq 1 ]; then
    order=("$@")
  else
    for ((i = $#; i >= 1; i--)); do order+=("${!i}"); done
  fi
  for i in "${order[@]}"; do
    case $i in
      raw-*) run_raw "$p" "$t" "${i#raw-}" ;;
      asr-*) run_asr "$p" "$t" "${i#asr-}" ;;
      ucx-*) i=${i#ucx-} && run_ucx "$p" "$t" "${i%%:*}" "${i#*:}" ;;
    esac
  done
}

median() { # tag metric size tool -> median (empty when none)
  awk -v t="$1" -v m="$2" -v s="$3" -v k="$4" '$1 == t && $2 == m && $3 == s && $4 == k { print $5 }' "$DATA" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Median of the per-run ratios asr/raw, with their range.
paired() { # tag metric size -> "median (min-max)", or "-"
  awk -v t="$1" -v m="$2" -v s="$3" '$1 == t && $2 == m && $3 == s && $4 == "asr" { A[$6] = $5 }
    $1 == t && $2 == m && $3 == s && $4 == "raw" { B[$6] = $5 }
    END { for (r in A) if ((r in B) && B[r] > 0) print A[r] / B[r] }' "$DATA" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
      med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%.2f (%.2f-%.2f)", med, v[1], v[NR] }'
}

ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }' || echo "-"; }

fmt() { [ -z "$1" ] && { echo "-"; return; }; awk -v v="$1" 'BEGIN { a = v < 0 ? -v : v; if (a >= 1000) printf "%.0f", v; else if (a >= 10) printf "%.1f", v; else if (a >= 1) printf "%.2f", v; else printf "%.3f", v }'; }

START=$(date +%s)
echo "rma_bench: build $BUILD, paths: $PATHS; $REPS runs per figure; sizes $SIZES; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); two-rank runs $PINNED${ASR_SM_CMA+; ASR_SM_CMA=$ASR_SM_CMA}" >&2
for path in $PATHS; do
  tag=${path//;/+}
  for rep in $(seq 1 "$REPS"); do
    REP=$rep
    echo "rma_bench: $path: run $rep of $REPS ($(($(date +%s) - START)) s)" >&2
    steps=(raw-lat asr-lat asr-slat)
    for s in $SIZES; do steps+=("ucx-lat:$s"); done
    group "$path" "$tag" "${steps[@]}"
    steps=(raw-wbw asr-wbw asr-sbw)
    for s in $SIZES; do steps+=("ucx-bw:$s"); done
    group "$path" "$tag" "${steps[@]}"
    group "$path" "$tag" raw-rbw asr-rbw
    group "$path" "$tag" raw-batch asr-batch
    group "$path" "$tag" asr-prep
  done
done

# --- the tables ---------------------------------------------------------------
F='%-28s %-10s %-9s %-9s %-7s %-20s %-8s %-13s %-11s %s\n'
# shellcheck disable=SC2059  # (F is the table's format)
row() { printf "$F" "$@" | sed 's/ *$//'; }

# The verdict of a ratio (or, with abs, of the asr figure itself) against
# its goal; each verdict is also noted in $WORK/verdicts for the summary
# (this runs in a command substitution's subshell).
verdict() { # asr raw op bound [abs]
  local v="not measured"
  if [ -n "$1" ] && { [ -n "${5:-}" ] || [ -n "$2" ]; }; then
    v=$(awk -v a="$1" -v b="${2:-1}" -v op="$3" -v th="$4" -v abs="${5:-}" 'BEGIN {
      x = abs != "" ? a : (b > 0 ? a / b : -1); if (x < 0) { print "not measured"; exit }
      ok = op == "le" ? x <= th : op == "lt" ? x < th : op == "ge" ? x >= th : x > th; print ok ? "met" : "NOT met" }')
  fi
  echo "$v" >>"$WORK/verdicts"
  echo "$v"
}

ucx_cell() { # tag metric size
  if [ -n "$UCX_NOTE" ]; then echo "($UCX_NOTE)"; else fmt "$(median "$1" "$2" "$3" ucx)"; fi
}

for path in $PATHS; do
  tag=${path//;/+}
  seen=$(awk -v t="$tag" '$1 == t { print $2 }' "$WORK/paths" 2>/dev/null | sort -u | paste -sd, -)
  echo
  echo "== $path: asr on ${seen:-?}, raw libfabric $(raw_prov "$path")$([ "$ASR" = 1 ] || echo " (ASR=0: no asr runs)")"
  if [ "$path" = sm ]; then
    lat_op=lt lat_goal="< 1.00" bw_op=gt bw_goal="> 1.00"
  else
    lat_op=le lat_goal="<= 1.10" bw_op=ge bw_goal=">= 0.95"
  fi
  row row size asr raw asr/raw "paired (range)" goal verdict "asr 2-sided" ucx
  for s in $SIZES; do
    a=$(median "$tag" wlat "$s" asr) r=$(median "$tag" wlat "$s" raw)
    row "write+notify latency (us)" "$s" "$(fmt "$a")" "$(fmt "$r")" "$(ratio "$a" "$r")" "$(paired "$tag" wlat "$s")" \
      "$lat_goal" "$(verdict "$a" "$r" $lat_op "${lat_goal#* }")" "$(fmt "$(median "$tag" wlat "$s" asr2)")" \
      "$(ucx_cell "$tag" wlat "$s")"
  done
  for s in $SIZES; do
    a=$(median "$tag" notif "$s" asr) r=$(median "$tag" notif "$s" raw)
    row "notification delivery (us)" "$s" "$(fmt "$a")" "$(fmt "$r")" "-" "-" "-" "-"
  done
  for s in $SIZES; do
    a=$(median "$tag" wbw "$s" asr) r=$(median "$tag" wbw "$s" raw)
    row "write bandwidth (MB/s)" "$s" "$(fmt "$a")" "$(fmt "$r")" "$(ratio "$a" "$r")" "$(paired "$tag" wbw "$s")" \
      "$bw_goal" "$(verdict "$a" "$r" $bw_op "${bw_goal#* }")" "$(fmt "$(median "$tag" wbw "$s" asr2)")" \
      "$(ucx_cell "$tag" wbw "$s")"
  done
  for s in $SIZES; do
    a=$(median "$tag" rbw "$s" asr) r=$(median "$tag" rbw "$s" raw)
    row "read bandwidth (MB/s)" "$s" "$(fmt "$a")" "$(fmt "$r")" "$(ratio "$a" "$r")" "$(paired "$tag" rbw "$s")" \
      "$bw_goal" "$(verdict "$a" "$r" $bw_op "${bw_goal#* }")"
  done
  for b in 256x1024 1024x4096; do
    a=$(median "$tag" batch "$b" asr) r=$(median "$tag" batch "$b" raw)
    row "batch (GB/s)" "$b" "$(fmt "$a")" "$(fmt "$r")" "$(ratio "$a" "$r")" "$(paired "$tag" batch "$b")" \
      ">= 0.90" "$(verdict "$a" "$r" ge 0.90)"
  done
  a=$(median "$tag" prep 15000x4096 asr)
  row "xfer_prep of 15,000 (ms)" 15000x4096 "$(fmt "$a")" - - - "< 50 ms" "$(verdict "$a" "" lt 50 abs)"
done
echo
count() { grep -cx "$1" "$WORK/verdicts" 2>/dev/null; }
echo "rma_bench: goals: $(count met) met, $(count "NOT met") NOT met, $(count "not measured") not measured; $REPS runs per figure (medians), $(($(date +%s) - START)) s in all, load now $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [ $FAILS -ne 0 ]; then
  echo "rma_bench: $FAILS run(s) FAILED" >&2
  exit 1
fi
exit 0
