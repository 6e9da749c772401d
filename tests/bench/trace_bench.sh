#!/usr/bin/env bash
# trace_bench.sh -- what libasr's trace points cost (issue 52): off against
# compiled out, and on against off, side by side in one run.
#
#   tests/bench/trace_bench.sh BUILD_DIR NOTRACE_BUILD_DIR
#   QUICK=1 tests/bench/trace_bench.sh BUILD_DIR NOTRACE_BUILD_DIR   (smoke)
#
# BUILD_DIR is a built tree with the trace points (the default);
# NOTRACE_BUILD_DIR one configured with --disable-trace (the same sources,
# the points compiled out): ./scripts/build.sh build-notrace --disable-trace.
# Both need tests/bench/asr_bench and tests/apps/pingpong (make builds them).
# The script builds nothing and says what is missing.
#
# Three variants of libasr run the same programs, in an order that rotates
# from rep to rep (a change of the machine's state hits all alike):
#   out  NOTRACE_BUILD_DIR's libasr: no trace point at all
#   off  BUILD_DIR's, ASR_TRACE unset: each point is one test of a word
#   on   BUILD_DIR's, ASR_TRACE set to a fresh directory per run
# Rows, each REPS runs per variant:
#   message (ns)   asr_bench -m breakdown's "message": ONE process, a SEND
#                  and a RECV comm on sm between two of its LNCs, 8-byte
#                  messages one at a time: asr_irecv, asr_isend, asr_test
#                  on each until done. On, a message there is two requests:
#                  four clock reads and two records in all (the send's side
#                  and the receive's, each two reads and one record).
#   rate (msgs/s)  asr_bench -m rate -w 128 (ofi_bench's 8 B rate row): two
#                  processes on sm, 128 sends in flight.
#   bw 64 KiB (MB/s) pingpong -m bw -s 65536 -w 64: two processes on sm.
# The table: row, variant, median, min..max over the reps, the ratio of
# medians to "out" (message: the difference in ns), and the goals:
#   message  off - out <= 1 ns (medians)
#   rate     off's median within out's min..max
#   bw       on / off >= 0.98 (medians)
#   message  on - off: what tracing costs a message (quoted, no goal)
# Knobs: ROWS ("message rate bw"), REPS (15), ITERS (200000: breakdown messages per run), RATE_ITERS
# (20000), BW_ITERS (2000 windows), PIN (1: the two processes of a run on
# the first two CPUs this shell may use; 0: unpinned), KEEP=1 keeps the
# work directory. Everything runs on 127.0.0.1, each process group under
# timeout and killed by its group on exit.
# shellcheck disable=SC2317  # cleanup runs from the trap, the run_* functions by name
set -u
set -m
BUILD=${1:-}
NOTRACE=${2:-}
if [ -z "$BUILD" ] || [ -z "$NOTRACE" ] || [ ! -d "$BUILD" ] || [ ! -d "$NOTRACE" ]; then
  echo "usage: $0 BUILD_DIR NOTRACE_BUILD_DIR (./scripts/build.sh build-notrace --disable-trace makes the second)" >&2
  exit 2
fi
BUILD=$(cd "$BUILD" && pwd)
NOTRACE=$(cd "$NOTRACE" && pwd)
if [ "${QUICK:-0}" = 1 ]; then
  REPS=${REPS:-1} ITERS=${ITERS:-2000} RATE_ITERS=${RATE_ITERS:-200} BW_ITERS=${BW_ITERS:-20}
fi
REPS=${REPS:-15}
ROWS=${ROWS:-message rate bw}
for r in $ROWS; do
  case $r in message | rate | bw) ;; *) echo "trace_bench: ROWS takes message, rate and bw, not '$r'" >&2; exit 2 ;; esac
done
ITERS=${ITERS:-200000}
RATE_ITERS=${RATE_ITERS:-20000}
BW_ITERS=${BW_ITERS:-2000}
PIN=${PIN:-1}
for k in REPS ITERS RATE_ITERS BW_ITERS; do
  [[ ${!k} =~ ^[1-9][0-9]*$ ]] || { echo "trace_bench: $k must be a positive whole number" >&2; exit 2; }
done
for b in "$BUILD" "$NOTRACE"; do
  for p in tests/bench/asr_bench tests/apps/pingpong; do
    [ -x "$b/$p" ] || { echo "trace_bench: $b/$p is missing (make -C $b $p)" >&2; exit 2; }
  done
done
if ! grep -q '^#define ASR_NO_TRACE 1' "$NOTRACE/config.h"; then
  echo "trace_bench: $NOTRACE was not configured with --disable-trace" >&2
  exit 2
fi
if grep -q '^#define ASR_NO_TRACE 1' "$BUILD/config.h"; then
  echo "trace_bench: $BUILD was configured with --disable-trace: it must have the trace points" >&2
  exit 2
fi

WORK=$(mktemp -d)
# the trace files where asrd puts them (launcher/tree/asrd_dir.h): in
# memory (/dev/shm) where it can, as a traced job's ranks write them
TRC_BASE=$WORK
if [ -z "${TMPDIR:-}" ] && [ -w /dev/shm ]; then TRC_BASE=$(mktemp -d /dev/shm/trace_bench.XXXXXX); fi
DATA=$WORK/data
: >"$DATA"
pids=()

cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
  [ "$TRC_BASE" = "$WORK" ] || rm -rf "$TRC_BASE"
  if [ "${KEEP:-0}" = 1 ]; then echo "trace_bench: work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PIN0=() PIN1=()
if [ "$PIN" = 1 ] && command -v taskset >/dev/null; then
  cpus=$(taskset -cp $$ | awk -F': ' '{print $2}' | tr ',' ' ')
  first=()
  for c in $cpus; do
    if [[ $c == *-* ]]; then for ((i = ${c%-*}; i <= ${c#*-}; i++)); do first+=("$i"); done; else first+=("$c"); fi
  done
  if [ "${#first[@]}" -ge 2 ]; then PIN0=(taskset -c "${first[0]}") PIN1=(taskset -c "${first[1]}"); fi
fi

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

failed=0
fail() { echo "trace_bench: $1 failed:" >&2; tail -5 "$2" >&2; failed=1; }

# env for a variant: the build and ASR_TRACE
variant_env() { # variant -> VB (build dir), VENV (env args)
  case $1 in
    out) VB=$NOTRACE VENV=(-u ASR_PROVIDER -u ASR_TRACE) ;;
    off) VB=$BUILD VENV=(-u ASR_PROVIDER -u ASR_TRACE) ;;
    on)
      VB=$BUILD
      local d
      d=$(mktemp -d "$TRC_BASE/trc.XXXXXX")
      VENV=(-u ASR_PROVIDER ASR_TRACE="$d")
      ;;
  esac
}

common_env=(ASR_IF_ADDR=127.0.0.1 ASR_KV_BIND=127.0.0.1 ASR_KV_LOCK_DIR="$WORK")

run_message() { # variant rep
  local out=$WORK/msg.$1.$2
  variant_env "$1"
  if ! env "${VENV[@]}" "${common_env[@]}" ASR_BOOTSTRAP_PORT="$(free_port)" timeout -k 5 300 \
    "${PIN0[@]}" "$VB/tests/bench/asr_bench" -m breakdown -n "$ITERS" >"$out" 2>&1; then
    fail "asr_bench breakdown ($1)" "$out"
    return
  fi
  awk -v v="$1" -v r="$2" '$1 == "breakdown" && $2 == "message" { print "message", v, $3, r }' "$out" >>"$DATA"
}

run_rate() { # variant rep
  local out=$WORK/rate.$1.$2
  variant_env "$1"
  if ! env "${VENV[@]}" "${common_env[@]}" ASR_BOOTSTRAP_PORT="$(free_port)" timeout -k 5 300 \
    "$VB/tests/bench/asr_bench" -m rate -w 128 -n "$RATE_ITERS" >"$out" 2>&1; then
    fail "asr_bench rate ($1)" "$out"
    return
  fi
  awk -v v="$1" -v r="$2" '$1 == "rate" { print "rate", v, $3, r }' "$out" >>"$DATA"
}

run_bw() { # variant rep
  local out=$WORK/bw.$1.$2 port
  variant_env "$1"
  port=$(free_port)
  env "${VENV[@]}" "${common_env[@]}" ASR_BOOTSTRAP_PORT="$port" timeout -k 5 300 "${PIN1[@]}" \
    "$VB/tests/apps/pingpong" -l 1 -p 0 -r 1 -m bw -s 65536 -S 65536 -n "$BW_ITERS" -w 64 >"$out.r1" 2>&1 &
  local r1=$!
  pids+=("$r1")
  env "${VENV[@]}" "${common_env[@]}" ASR_BOOTSTRAP_PORT="$port" timeout -k 5 300 "${PIN0[@]}" \
    "$VB/tests/apps/pingpong" -l 0 -p 1 -r 0 -m bw -s 65536 -S 65536 -n "$BW_ITERS" -w 64 >"$out" 2>&1
  local st0=$?
  wait "$r1"
  local st1=$?
  if [ "$st0" -ne 0 ] || [ "$st1" -ne 0 ]; then
    fail "pingpong bw ($1): ranks $st0 $st1" "$out"
    return
  fi
  awk -v v="$1" -v r="$2" '$1 == "bw" { print "bw64k", v, $3, r }' "$out" >>"$DATA"
}

variants=(out off on)
for ((rep = 0; rep < REPS; rep++)); do
  for row in $ROWS; do
    for ((k = 0; k < 3; k++)); do
      v=${variants[$(((rep + k) % 3))]}
      "run_$row" "$v" "$rep"
    done
  done
  rm -rf "$TRC_BASE"/trc.*
done

/usr/bin/python3 - "$DATA" "$REPS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    row, v, x, rep = line.split()
    rows.setdefault(row, {}).setdefault(v, []).append(float(x))
print("trace_bench: medians of %s interleaved runs per variant (out: compiled out; off: ASR_TRACE unset; on: set)" % sys.argv[2])
print("%-16s %-4s %12s %25s %12s  %s" % ("row", "var", "median", "min..max", "vs out", "goal"))
names = {"message": "message (ns)", "rate": "rate 8 B (msg/s)", "bw64k": "bw 64 KiB (MB/s)"}
verdicts = []
for row in ("message", "rate", "bw64k"):
    d = rows.get(row, {})
    if "out" not in d:
        continue
    med = {v: statistics.median(x) for v, x in d.items()}
    for v in ("out", "off", "on"):
        if v not in d:
            continue
        x = d[v]
        if row == "message":
            vs = "%+.1f ns" % (med[v] - med["out"]) if v != "out" else ""
        else:
            vs = "%.3f" % (med[v] / med["out"]) if v != "out" else ""
        goal = ""
        if row == "message" and v == "off":
            ok = med["off"] - med["out"] <= 1.0
            goal = "off - out <= 1 ns: %s" % ("met" if ok else "NOT met")
            verdicts.append(ok)
        if row == "message" and v == "on" and "off" in med:
            goal = "on - off = %.1f ns a message (4 clock reads, 2 records)" % (med["on"] - med["off"])
        if row == "rate" and v == "off":
            ok = min(d["out"]) <= med["off"] <= max(d["out"])
            goal = "within out's spread: %s" % ("met" if ok else "NOT met")
            verdicts.append(ok)
        if row == "bw64k" and v == "on" and "off" in med:
            ok = med["on"] / med["off"] >= 0.98
            goal = "on / off = %.3f >= 0.98: %s" % (med["on"] / med["off"], "met" if ok else "NOT met")
            verdicts.append(ok)
        print("%-16s %-4s %12.1f %25s %12s  %s" % (names[row], v, med[v], "%.1f..%.1f" % (min(x), max(x)), vs, goal))
print("goals: %d met, %d not" % (sum(verdicts), len(verdicts) - sum(verdicts)))
PY
exit $failed
