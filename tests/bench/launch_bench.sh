#!/usr/bin/env bash
# launch_bench.sh -- how fast asrrun starts a job, beside Open MPI's mpirun and
# MPICH's mpiexec, and whether it ever hangs.
#
#   tests/bench/launch_bench.sh BUILD_DIR [-r REPS] [-q]
#
# BUILD_DIR is a configured and built tree (bin/asrrun, bin/asrd,
# tests/apps/init_barrier; the script runs `make -C BUILD_DIR <targets>` if one
# is missing).
#
# Part 1, the table: for N = 1, 8, 32, 64, 128 (NS), the wall time, median of
# REPS runs (default 5; below N = 8, with REPS >= 3, REPS x 8 / N runs, as
# such a run lasts only tens of ms and a median of few of them is noise), of
#   asrrun true              asrrun -n N /bin/true
#   asrrun init+barrier      asrrun -n N tests/apps/init_barrier
#                            (asr_job_init, asr_job_barrier, asr_job_finalize)
#   mpirun(OMPI) true        mpirun.openmpi --oversubscribe --allow-run-as-root -n N /bin/true
#   mpirun init+barrier      the same with tests/bench/mpi_init_barrier.c
#                            (MPI_Init, MPI_Barrier, MPI_Finalize), built here
#                            with mpicc.openmpi
#   mpiexec(MPICH) true      mpiexec.mpich -n N /bin/true
#   mpiexec init+barrier     the same with mpi_init_barrier.c built with mpicc.mpich
# and the ratios asr / best MPI (the faster of Open MPI and MPICH) per row.
# The runs of one N are interleaved (rep 1 of every column, then rep 2, ...),
# so load drifts on a busy machine hit every column alike. The explicit names
# (mpirun.openmpi, mpicc.openmpi, mpiexec.mpich, mpicc.mpich) are used because
# Debian's openmpi-bin and mpich both provide the mpirun / mpicc alternatives.
# An MPI that is not installed shows 'not installed' (nothing is installed by
# this script; on Debian: apt-get install openmpi-bin libopenmpi-dev mpich
# libmpich-dev).
#
# Every run is under `timeout -k 5 TIMEOUT` (60 s). A run that hits the
# timeout is a 'hang' (its cell shows 'hang' and its remaining reps are
# skipped: Open MPI is known to hang at N >= 32 on small machines); one that
# exits non-zero is a failure ('fail'). The notes under the table say how many
# runs of each such cell hung or failed.
# Wall times on a shared machine swing with other sessions' load (the kernel's
# autogroup shares the CPUs per session); compare columns of one row, not runs.
# The load average (1, 5, 15 min) at the start and end of each part is printed
# with its results, so a table can be judged by the load it ran under.
#
# Part 1 also has a second table: the same MPI_Init+MPI_Barrier+MPI_Finalize
# programs started by asrrun (asrrun OMPI prog, asrrun MPICH prog) beside
# their own launcher, with the ratio per MPI (goal: at most 1.05).
#
# Part 2, reliability: `asrrun -n REL_N /bin/true` REL_RUNS times in a row
# (128 and 100), each under `timeout -k 5 TIMEOUT`, counting hangs and
# failures; median and max are over the runs that did not hang.
#
# Part 3, MPI soak: `asrrun -n MPI_SOAK_N` (128) of each MPI's program
# MPI_SOAK_RUNS times (100), counting hangs and failures.
#
# -q (quick): N = 1 and 8, one rep, and 10 runs of -n 32 for reliability.
#
# Exit status: 0, 1 if any asrrun run failed or hung (MPI results never fail
# the script), 2 on a usage or setup error.
#
# Knobs (environment): NS, REPS (or -r), TIMEOUT (60), REL_N, REL_RUNS, MPI_SOAK_N, MPI_SOAK_RUNS,
# MPI_SOAK_MPIS (which MPIs part 3 soaks: 'ompi mpich'),
# KEEP=1 keeps the work directory (per-run logs, data) and prints its path.
#
# Hygiene: only loopback (Open MPI: OMPI_MCA_btl=self,vader and
# OMPI_MCA_{btl,oob}_tcp_if_include=lo; MPICH: HYDRA_IFACE=lo,
# UCX_NET_DEVICES=lo; asrrun uses 127.0.0.1 for a one-host job). Every
# process started runs in its own process group (set -m) under `timeout`,
# which signals that group when it expires. A launcher can put its ranks in
# groups of their own (asrd does; they die with it through PDEATHSIG), so
# after a run that hung or failed, and on exit, the script also SIGKILLs any
# process still carrying this run's unique LAUNCH_BENCH_TAG=... environment
# entry (it inherited it from us) -- nothing is ever killed by name.
set -u
set -m
export LC_ALL=C

usage() { echo "usage: $0 BUILD_DIR [-r REPS] [-q]" >&2; exit 2; }

BUILD=${1:-}
if [ -z "$BUILD" ] || [ ! -d "$BUILD" ]; then usage; fi
shift
QUICK=0
REPS_OPT=""
while [ $# -gt 0 ]; do
  case $1 in
  -q) QUICK=1 ;;
  -r) [ $# -ge 2 ] || usage; REPS_OPT=$2; shift ;;
  -r*) REPS_OPT=${1#-r} ;;
  *) usage ;;
  esac
  shift
done
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)

if [ "$QUICK" = 1 ]; then
  NS=${NS:-"1 8"}
  REPS=${REPS_OPT:-${REPS:-1}}
  REL_N=${REL_N:-32}
  REL_RUNS=${REL_RUNS:-10}
  MPI_SOAK_N=${MPI_SOAK_N:-32}
  MPI_SOAK_RUNS=${MPI_SOAK_RUNS:-3}
else
  NS=${NS:-"1 8 32 64 128"}
  REPS=${REPS_OPT:-${REPS:-5}}
  REL_N=${REL_N:-128}
  REL_RUNS=${REL_RUNS:-100}
  MPI_SOAK_N=${MPI_SOAK_N:-128}
  MPI_SOAK_RUNS=${MPI_SOAK_RUNS:-100}
fi
TIMEOUT=${TIMEOUT:-60}
case $REPS in '' | *[!0-9]* | 0) usage ;; esac
MPI_SOAK_MPIS=${MPI_SOAK_MPIS:-ompi mpich}
for mpi in $MPI_SOAK_MPIS; do
  case $mpi in ompi | mpich) ;; *) echo "launch_bench: MPI_SOAK_MPIS: '$mpi' is neither ompi nor mpich" >&2; exit 2 ;; esac
done

ASRRUN=$BUILD/bin/asrrun
ASRD=$BUILD/bin/asrd
INIT_BARRIER=$BUILD/tests/apps/init_barrier
missing=""
for b in "$ASRRUN" "$ASRD" "$INIT_BARRIER"; do [ -x "$b" ] || missing="$missing ${b#"$BUILD"/}"; done
if [ -n "$missing" ]; then
  echo "launch_bench: building$missing" >&2
  # shellcheck disable=SC2086
  make -C "$BUILD" $missing >/dev/null || { echo "launch_bench: cannot build$missing" >&2; exit 2; }
fi
command -v timeout >/dev/null || { echo "launch_bench: timeout (coreutils) not found" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/launch_bench.XXXXXX") || exit 2
DATA=$WORK/data # lines: N column status seconds
: >"$DATA"
export LAUNCH_BENCH_TAG="$$.${WORK##*.}.$RANDOM$RANDOM"
PIDS=()
ASR_BAD=0
MPI_ASR_BAD=0

# Loopback only, for both MPIs.
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl=self,vader
export HYDRA_IFACE=lo UCX_NET_DEVICES=lo
# asr: a private KV election lock directory (asrd runs the job's KV server).
export ASR_KV_LOCK_DIR=$WORK/kvlock
mkdir -p "$ASR_KV_LOCK_DIR"

# SIGKILLs every process (but this shell) that inherited our tag.
kill_strays() {
  local f pid files
  # The whole list first (the grep that made it has exited by then), then a
  # second look at each before killing it (a pid may have been reused).
  mapfile -t files < <(grep -lzxF "LAUNCH_BENCH_TAG=$LAUNCH_BENCH_TAG" /proc/[0-9]*/environ 2>/dev/null)
  for f in "${files[@]+"${files[@]}"}"; do
    pid=${f#/proc/}
    pid=${pid%/environ}
    [ "$pid" = "$$" ] && continue
    [ "$pid" = "${BASHPID:-$$}" ] && continue
    grep -qzxF "LAUNCH_BENCH_TAG=$LAUNCH_BENCH_TAG" "$f" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  done
}

# shellcheck disable=SC2317  # (called through the trap)
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  PIDS=()
  kill_strays
  if [ "${KEEP:-0}" = 1 ]; then
    echo "launch_bench: work directory kept: $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'echo "launch_bench: interrupted" >&2; exit 130' INT TERM

now() { # seconds since the epoch, microseconds
  if [ -n "${EPOCHREALTIME:-}" ]; then echo "$EPOCHREALTIME"; else date +%s.%N; fi
}

# timed LOG CMD...: runs CMD under timeout in its own process group (stdin
# /dev/null, output to LOG); sets T (wall seconds) and ST (ok, hang or fail).
timed() {
  local log=$1 t0 t1 rc
  shift
  t0=$(now)
  timeout -k 5 "$TIMEOUT" "$@" </dev/null >"$log" 2>&1 &
  PIDS+=("$!")
  wait "$!"
  rc=$?
  t1=$(now)
  PIDS=()
  T=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
  if [ $rc = 0 ]; then
    ST=ok
  elif [ $rc = 124 ] || [ $rc = 137 ]; then
    ST=hang
  else
    ST=fail
  fi
  if [ "$ST" != ok ]; then
    kill_strays
    echo "rc=$rc" >>"$log"
  fi
}

loadavg() { # "1-min 5-min 15-min", or '?'
  if [ -r /proc/loadavg ]; then cut -d' ' -f1-3 /proc/loadavg; else echo '?'; fi
}

median() { # of the numbers on stdin ('' if none)
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# --- what is installed --------------------------------------------------------
COLS="asr_true asr_ib ompi_true ompi_ib mpich_true mpich_ib asr_ompi asr_mpich"
declare -A AVAIL CMD
AVAIL[asr_true]=1
AVAIL[asr_ib]=1
CMD[asr_true]="$ASRRUN -n @N@ /bin/true"
CMD[asr_ib]="$ASRRUN -n @N@ $INIT_BARRIER"
for c in ompi_true ompi_ib mpich_true mpich_ib asr_ompi asr_mpich; do AVAIL[$c]=0; done
NOTES=()
if command -v mpirun.openmpi >/dev/null 2>&1; then
  AVAIL[ompi_true]=1
  CMD[ompi_true]="mpirun.openmpi --oversubscribe --allow-run-as-root -n @N@ /bin/true"
  if command -v mpicc.openmpi >/dev/null 2>&1; then
    if mpicc.openmpi -O2 -o "$WORK/mpi_init_barrier.ompi" "$SRC/tests/bench/mpi_init_barrier.c" >"$WORK/mpicc.ompi.log" 2>&1; then
      AVAIL[ompi_ib]=1
      CMD[ompi_ib]="mpirun.openmpi --oversubscribe --allow-run-as-root -n @N@ $WORK/mpi_init_barrier.ompi"
      AVAIL[asr_ompi]=1
      CMD[asr_ompi]="$ASRRUN -n @N@ $WORK/mpi_init_barrier.ompi"
    else
      NOTES+=("mpicc.openmpi could not build mpi_init_barrier.c: $(tail -n 1 "$WORK/mpicc.ompi.log")")
    fi
  fi
fi
if command -v mpiexec.mpich >/dev/null 2>&1; then
  AVAIL[mpich_true]=1
  CMD[mpich_true]="mpiexec.mpich -n @N@ /bin/true"
  if command -v mpicc.mpich >/dev/null 2>&1; then
    if mpicc.mpich -O2 -o "$WORK/mpi_init_barrier.mpich" "$SRC/tests/bench/mpi_init_barrier.c" >"$WORK/mpicc.mpich.log" 2>&1; then
      AVAIL[mpich_ib]=1
      CMD[mpich_ib]="mpiexec.mpich -n @N@ $WORK/mpi_init_barrier.mpich"
      AVAIL[asr_mpich]=1
      CMD[asr_mpich]="$ASRRUN -n @N@ $WORK/mpi_init_barrier.mpich"
    else
      NOTES+=("mpicc.mpich could not build mpi_init_barrier.c: $(tail -n 1 "$WORK/mpicc.mpich.log")")
    fi
  fi
fi

# --- part 1: the table -----------------------------------------------------------
LOAD_T0=$(loadavg)
reps_at() { # N: the runs of each column at N (the header's rule)
  if [ "$REPS" -ge 3 ] && [ "$1" -lt 8 ]; then echo $((REPS * 8 / $1)); else echo "$REPS"; fi
}
declare -A SKIP CELL
for n in $NS; do
  nreps=$(reps_at "$n")
  for ((rep = 1; rep <= nreps; rep++)); do
    for c in $COLS; do
      [ "${AVAIL[$c]}" = 1 ] || continue
      [ -n "${SKIP[$c.$n]:-}" ] && continue
      log=$WORK/$c.$n.$rep.log
      # shellcheck disable=SC2086  # (the command is a plain word list)
      timed "$log" ${CMD[$c]//@N@/$n}
      echo "$n $c $ST $T" >>"$DATA"
      if [ "$ST" != ok ]; then
        echo "launch_bench: $c N=$n rep $rep: $ST after ${T}s: ${CMD[$c]//@N@/$n}" >&2
        tail -n 8 "$log" | sed 's/^/    /' >&2
        case $c in asr_true | asr_ib) ASR_BAD=$((ASR_BAD + 1)) ;; asr_*) MPI_ASR_BAD=$((MPI_ASR_BAD + 1)) ;; esac
      fi
      [ "$ST" = hang ] && SKIP[$c.$n]=1
    done
  done
done

# The cell of column $1 at N $2: the median, 'hang', 'fail' or 'not installed'.
for n in $NS; do
  for c in $COLS; do
    if [ "${AVAIL[$c]}" != 1 ]; then
      CELL[$c.$n]="not installed"
      continue
    fi
    ok=$(awk -v n="$n" -v c="$c" '$1 == n && $2 == c && $3 == "ok"' "$DATA" | wc -l)
    hang=$(awk -v n="$n" -v c="$c" '$1 == n && $2 == c && $3 == "hang"' "$DATA" | wc -l)
    fail=$(awk -v n="$n" -v c="$c" '$1 == n && $2 == c && $3 == "fail"' "$DATA" | wc -l)
    med=$(awk -v n="$n" -v c="$c" '$1 == n && $2 == c && $3 == "ok" { print $4 }' "$DATA" | median)
    if [ "$hang" -gt 0 ]; then
      CELL[$c.$n]=hang
    elif [ "$fail" -gt 0 ]; then
      CELL[$c.$n]=fail
    else
      CELL[$c.$n]=$med
    fi
    if [ "$hang" -gt 0 ] || [ "$fail" -gt 0 ]; then
      note="$c N=$n: $ok ok, $hang hang(s) (> ${TIMEOUT}s), $fail failure(s)"
      [ "$ok" -gt 0 ] && note="$note; median of the ok runs $med s"
      NOTES+=("$note")
    fi
  done
done

isnum() { case $1 in '' | *[!0-9.]*) return 1 ;; esac; }
ratio() { # asr cell, MPI cells...: asr / the best numeric MPI cell
  local a=$1 best="" m
  shift
  for m in "$@"; do
    isnum "$m" || continue
    if [ -z "$best" ] || awk -v x="$m" -v y="$best" 'BEGIN { exit !(x < y) }'; then best=$m; fi
  done
  if isnum "$a" && [ -n "$best" ] && awk -v b="$best" 'BEGIN { exit !(b > 0) }'; then
    awk -v a="$a" -v b="$best" 'BEGIN { printf "%.2f", a / b }'
  else
    echo "-"
  fi
}

H=("N" "asrrun true" "asrrun init+barrier" "mpirun(OMPI) true" "mpirun init+barrier"
  "mpiexec(MPICH) true" "mpiexec init+barrier" "asr/MPI true" "asr/MPI init+barrier")
FMT="%-4s %-13s %-21s %-19s %-21s %-21s %-22s %-14s %s\n"
echo
if [ "$REPS" = 1 ]; then
  echo "launch benchmark (1 run each, wall seconds)"
else
  echo "launch benchmark (median of $REPS, wall seconds)"
fi
for n in $NS; do
  [ "$(reps_at "$n")" = "$REPS" ] || echo "(N = $n: median of $(reps_at "$n"), as each such run is short)"
done
# shellcheck disable=SC2059
printf "$FMT" "${H[@]}"
for n in $NS; do
  rt=$(ratio "${CELL[asr_true.$n]}" "${CELL[ompi_true.$n]}" "${CELL[mpich_true.$n]}")
  ri=$(ratio "${CELL[asr_ib.$n]}" "${CELL[ompi_ib.$n]}" "${CELL[mpich_ib.$n]}")
  # shellcheck disable=SC2059
  printf "$FMT" "$n" "${CELL[asr_true.$n]}" "${CELL[asr_ib.$n]}" "${CELL[ompi_true.$n]}" "${CELL[ompi_ib.$n]}" \
    "${CELL[mpich_true.$n]}" "${CELL[mpich_ib.$n]}" "$rt" "$ri"
done
echo "(asr/MPI: asrrun's median over the faster of Open MPI and MPICH; < 1 means asrrun is faster)"
echo
echo "MPI programs (MPI_Init + MPI_Barrier + MPI_Finalize) started by asrrun beside their own launcher"
FMT2="%-4s %-20s %-21s %-10s %-21s %-21s %s\n"
# shellcheck disable=SC2059
printf "$FMT2" "N" "asrrun OMPI prog" "mpirun OMPI prog" "ratio" "asrrun MPICH prog" "mpiexec MPICH prog" "ratio"
for n in $NS; do
  # shellcheck disable=SC2059
  printf "$FMT2" "$n" "${CELL[asr_ompi.$n]}" "${CELL[ompi_ib.$n]}" "$(ratio "${CELL[asr_ompi.$n]}" "${CELL[ompi_ib.$n]}")" \
    "${CELL[asr_mpich.$n]}" "${CELL[mpich_ib.$n]}" "$(ratio "${CELL[asr_mpich.$n]}" "${CELL[mpich_ib.$n]}")"
done
echo "(ratio: asrrun's median over the MPI's own launcher's, same program, same run; goal <= 1.05)"
echo "(load average 1/5/15 min: $LOAD_T0 at the start, $(loadavg) at the end)"
for note in "${NOTES[@]+"${NOTES[@]}"}"; do echo "note: $note"; done

# --- part 2: reliability -------------------------------------------------------
echo
REL=$WORK/reliability # lines: status seconds
: >"$REL"
LOAD_R0=$(loadavg)
for ((i = 1; i <= REL_RUNS; i++)); do
  timed "$WORK/rel.$i.log" "$ASRRUN" -n "$REL_N" /bin/true
  echo "$ST $T" >>"$REL"
  if [ "$ST" != ok ]; then
    echo "launch_bench: reliability run $i: $ST after ${T}s" >&2
    tail -n 8 "$WORK/rel.$i.log" | sed 's/^/    /' >&2
  else
    rm -f "$WORK/rel.$i.log"
  fi
done
hangs=$(awk '$1 == "hang"' "$REL" | wc -l)
fails=$(awk '$1 == "fail"' "$REL" | wc -l)
med=$(awk '$1 != "hang" { print $2 }' "$REL" | median)
max=$(awk '$1 != "hang" { print $2 }' "$REL" | sort -g | tail -n 1)
[ -n "$max" ] && max=$(awk -v m="$max" 'BEGIN { printf "%.3f", m }')
echo "$REL_RUNS runs of asrrun -n $REL_N /bin/true: $hangs hangs, $fails failures, median ${med:--} s, max ${max:--} s"
echo "(load average 1/5/15 min: $LOAD_R0 at the start, $(loadavg) at the end)"
ASR_BAD=$((ASR_BAD + hangs + fails))

# --- part 3: MPI soak: asrrun -n MPI_SOAK_N with each MPI's program ---------------
for mpi in $MPI_SOAK_MPIS; do
  [ "${AVAIL[asr_$mpi]:-0}" = 1 ] || { echo "MPI soak ($mpi): not installed"; continue; }
  : >"$REL"
  for ((i = 1; i <= MPI_SOAK_RUNS; i++)); do
    timed "$WORK/soak.$mpi.$i.log" "$ASRRUN" -n "$MPI_SOAK_N" "$WORK/mpi_init_barrier.$mpi"
    echo "$ST $T" >>"$REL"
    if [ "$ST" != ok ]; then
      echo "launch_bench: MPI soak ($mpi) run $i: $ST after ${T}s" >&2
      tail -n 8 "$WORK/soak.$mpi.$i.log" | sed 's/^/    /' >&2
      MPI_ASR_BAD=$((MPI_ASR_BAD + 1))
    else
      rm -f "$WORK/soak.$mpi.$i.log"
    fi
  done
  hangs=$(awk '$1 == "hang"' "$REL" | wc -l)
  fails=$(awk '$1 == "fail"' "$REL" | wc -l)
  med=$(awk '$1 != "hang" { print $2 }' "$REL" | median)
  echo "$MPI_SOAK_RUNS runs of asrrun -n $MPI_SOAK_N ($mpi MPI_Init+Barrier+Finalize): $hangs hangs, $fails failures, median ${med:--} s"
done
[ "$MPI_ASR_BAD" -gt 0 ] && echo "launch_bench: $MPI_ASR_BAD asrrun run(s) of MPI programs hung or failed" >&2

if [ "$ASR_BAD" -gt 0 ]; then
  echo "launch_bench: FAILED: $ASR_BAD asrrun run(s) hung or failed" >&2
  exit 1
fi
exit 0
