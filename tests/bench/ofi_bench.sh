#!/usr/bin/env bash
# ofi_bench.sh -- libasr against raw libfabric, on one host, side by side in
# one run: libasr's native same-host path ("sm") against raw libfabric shm,
# and libasr on the shm and tcp;ofi_rxm providers against raw libfabric on
# the same provider.
#
#   tests/bench/ofi_bench.sh BUILD_DIR
#
# BUILD_DIR is a configured and built tree (`make` builds tests/apps/pingpong,
# tests/bench/ofi_raw, tests/bench/asr_bench and tests/bench/cacheline_floor;
# the script builds them with `make -C BUILD_DIR <targets>` if one is
# missing). Needs fi_pingpong (libfabric-bin) and ss (iproute2); the MPICH
# column needs mpicc.mpich and mpiexec.mpich (mpich) and is skipped without
# them. Everything runs on 127.0.0.1.
#
# Providers (PROVIDERS, in this order by default): "sm", "shm" and
# "tcp;ofi_rxm". For shm and tcp;ofi_rxm, libasr is forced onto that
# libfabric provider (ASR_PROVIDER) and raw is libfabric on the same one.
# For sm, libasr runs as it does by default between two ranks of one host:
# ASR_PROVIDER unset, so that it takes its native same-host path (lock-free
# rings in shared memory, process_vm_readv for single-copy transfers;
# ASR_SM_CMA=0 in the environment is passed on and makes it pipeline
# without cross-process copies), and raw is libfabric's shm, the best
# libfabric has on one host: fi_pingpong -p shm, ofi_raw -p shm and
# ofi_raw_mesh -p shm, run in the same interleaved reps as the sm section's
# asr runs. (A libasr without the native path takes libfabric shm there;
# the breakdown's "path" below says which path the comms took.)
#
# For each provider, REPS times, one size at a time (each size's asr run next
# to its raw runs, in an order that alternates from rep to rep, so a change
# of the machine's state hits both alike), it measures:
#   latency (us)    one-way, SIZE = 1 B .. 4 MiB (LAT_SIZES).
#                   asr: tests/apps/pingpong -m lat -s SIZE -S SIZE (round
#                   trip / 2; pingpong and ofi_raw warm up with up to 1000
#                   untimed round trips first). All three tools time the
#                   same number of round trips per size, fi_pingpong's (below),
#                   enough that one preemption of a small VM cannot move a
#                   small size's figure much.
#                   raw: fi_pingpong -e rdm -m tagged -S SIZE -I N, one run per
#                   size (-S all would also run the 1.5x sizes, with one -I for
#                   all of them), N = 10*ITERS below 64 KiB, ITERS below 1 MiB,
#                   ITERS/10 above (fi_pingpong's former default counts):
#                   fi_pingpong has no warm-up, so its first exchange (and on
#                   tcp;ofi_rxm the connection set-up it triggers) is inside
#                   the timed loop, and many iterations amortise it.
#                   fi_pingpong's "usec/xfer" is elapsed time /
#                   (iterations * 2), i.e. already ONE-WAY (it counts the ping
#                   and the pong as two transfers): it is used as is. Note that
#                   fi_pingpong pre-posts its receive, which pingpong's pattern
#                   cannot do; so the table also shows, as "raw2", the latency
#                   of tests/bench/ofi_raw ("tsend"), the very pattern of
#                   pingpong (post send, wait for its completion, then post the
#                   receive) on raw fi_tsend/fi_trecv (and fi_tinject where
#                   libasr injects: shm, up to 4 KiB), and the ratio asr/raw2.
#   bandwidth (MB/s) window of 64 sends in flight, then a 1-byte ack (pingpong's
#                   bw mode). fi_pingpong has no windowed mode, so raw is
#                   tests/bench/ofi_raw -m bw -w 64 (one run per size, as
#                   pingpong -m bw), the same loop on
#                   fi_tsend/fi_trecv with libasr's endpoint settings. Both
#                   time enough windows to move 256 MiB (5 to 16384 windows:
#                   tests/apps/bench_util.h, bench_bw_windows).
#   rate (msgs/s)   8-byte messages, 128 in flight, 1-byte ack per window.
#                   asr: tests/bench/asr_bench -m rate -w 128 -n RATE_ITERS
#                   (pingpong's -w stops at 120); raw: ofi_raw -m rate -r 128
#                   -N RATE_ITERS: RATE_ITERS windows each (default 10000,
#                   about 1.3 million messages: shm's rate swings from run to
#                   run, and a short run catches one swing).
# and MESH_REPS times the time to connect a full mesh of 16, 64 and 192 LNC
# ranks (MESH_SIZES), MESH_LNCS LNCs per process (default 4: 16 ranks = 4
# processes, 64 ranks = 16 processes, 192 ranks = 48 processes, since the
# machine has 2 cores). A host has at most 128 LNCs (ASR_MAX_LNC), so a mesh
# of more ranks is split over "hosts" on loopback addresses 127.0.0.1,
# 127.0.0.2, ... (asr_bench -H: 192 = 2 x 96, each with its own KV server);
# shm's address vector holds at most 256 peers. Every
# rank connects a SEND and a RECV comm to every other rank; timed from the
# launcher's first fork to the moment the last comm is CONNECTED (process
# start and asr_init included), then one stamped message per comm proves
# every connection (tests/bench/asr_bench -m mesh). raw: tests/bench/
# ofi_raw_mesh, the same processes with the same endpoints opened straight
# on libfabric, addresses swapped through memory the launcher shares, then
# one stamped message from every rank to every other (on an RDM endpoint the
# first message is what connects: tcp's socket, shm's region mapping);
# timed from the first fork to the last message's arrival. The table splits
# each into the init part (until the last endpoint is up) and the part after
# it (the connection set-up itself: both wait for every rank to be up before
# the first connect, so neither starts connecting before its clock does);
# the second baseline column, "raw2", is ofi_raw_mesh -T -Z in the mesh
# rows: raw libfabric in libasr's shape, a thread per LNC and each peer put
# into the AV only as the first send to it goes out (the seed's rendezvous
# delivers a peer's address comm by comm), where plain raw drives a
# process's endpoints from one thread and maps every peer's region before
# the first connection request arrives;
# their size column is the number of
# processes ("16p"). The raw init part pays what libfabric
# 1.17 costs every process at its first fi_getinfo here -- the verbs
# provider reads /proc/kallsyms -- which libasr avoids
# (runtime/platform/ofi_kallsyms.c); its part after init costs next to nothing for
# the address exchange, where libasr's goes through the KV store.
#
# The sm section adds, measured in each of its REPS runs, next to the 8 B
# latency runs (and MPICH next to each of its sizes' runs), in the same
# alternating order:
#   latency sizes   SM_LAT_SIZES: by default LAT_SIZES plus 8, 16 and 64 B
#                   (the goals below need them) and MPICH_SIZES (none when
#                   LAT_SIZES is empty).
#   floor (one-way) tests/bench/cacheline_floor: two processes on the same
#                   two CPUs bounce one cache line through a shared mapping
#                   (FLOOR_ITERS round trips), half the round trip: the least
#                   any same-host message can take. Shown beside asr's 8 B
#                   latency (the "raw" column), with the ratio asr/floor.
#   what asr spends above the floor: asr's 8 B latency less the floor, then
#                   tests/bench/asr_bench -m breakdown: ONE process, a SEND
#                   comm from its LNC 0 to its LNC 1 and the RECV comm for
#                   it, 8-byte messages one at a time (10 x ITERS), the ns of
#                   a whole message and of each asr_isend, asr_irecv, asr_test
#                   that completes a send or a receive, asr_test that finds
#                   its request not done (and how many of those a message
#                   takes), the clock's own cost taken off. What a second
#                   process, its CPU and the cache line between them add is
#                   the difference to the latency.
#   mpich           tests/bench/mpich_pingpong.c, a PingPong written the way
#                   the usual MPI benchmarks time one (rank 0 MPI_Send then
#                   MPI_Recv, rank 1 the reverse, untimed warm-up, one-way =
#                   time / (2 x round trips), pingpong's round counts),
#                   compiled by this script with mpicc.mpich into its work
#                   directory and run as mpiexec.mpich -n 2 -bind-to
#                   user:C0,C1: Hydra's binding to the very two CPUs every
#                   two-rank run here uses (-bind-to core would take the
#                   first cores of hwloc's order, not necessarily the CPUs
#                   this shell may use; no binding with PIN=0), with UCX held
#                   to shared memory (UCX_TLS=self,sm and UCX_NET_DEVICES=lo
#                   unless set: the same transports UCX picks between two
#                   ranks of a host, without its network listeners). At each
#                   of MPICH_SIZES that is an sm latency size, MPICH_REPS
#                   runs in all, spread evenly over the REPS runs (at 1 MiB
#                   one MPICH run swings from 65 to 400 us here, so it needs
#                   more runs than the rest). Its columns "mpich" and
#                   "asr/mpich" (paired: each MPICH run against the asr run
#                   of its rep) fill the sm latency rows of those sizes, and
#                   say "skipped: mpicc.mpich not found" (or mpiexec.mpich)
#                   without MPICH.
#   goals           the section's last lines: each goal set for libasr's
#                   native path, its ratio of medians (never a figure written
#                   here) and "met" or "NOT met", or "not measured" where the
#                   knobs left its runs out: 8 B latency / raw shm's best
#                   small-message latency (the least of fi_pingpong's medians
#                   at 8, 16 and 64 B, since fi_pingpong is slow at 1-8 B)
#                   <= 0.6; 8 B rate asr/raw >= 2; window bandwidth asr/raw
#                   >= 1.5 at each size from 256 B to 4 KiB and >= 1.0 at each
#                   from 64 KiB to 4 MiB; the 64-rank mesh's part after init
#                   asr/raw <= 1.0; latency asr/MPICH <= 1.0 at each MPICH
#                   size.
# Its mesh rows are the meshes of one host only (at most 128 ranks): a
# bigger one is split over loopback "hosts", and libasr with ASR_PROVIDER
# unset takes tcp;ofi_rxm between those, which the raw shm mesh does not.
# With ASR_PROVIDER unset, libasr opens a path's endpoint when the first
# comm that takes the path needs it, not in asr_init: the sm mesh's init
# part is shorter than shm's and its part after init holds that opening.
#
# Every figure is the median of its runs, and asr/raw the ratio of two
# medians. Beside it, "paired (range)" is the median of the per-run ratios
# and their smallest and largest: a run's asr and raw figures were measured
# next to each other, in one state of the machine, so a wide range says
# that the machine's noise, not libasr, decides that ratio (loopback TCP
# bandwidth moves a lot between identical runs). The payloads are verified by
# pingpong, ofi_raw and asr_bench: every message's stamp inside the timed
# loop, every byte of the first and of the last message (latency) or window
# (bandwidth) outside it (fi_pingpong runs without -c, which would put its
# checks inside the timed loop). The script exits non-zero if any run
# fails, times out or reports a wrong payload.
#
# Windows of small messages over shm (about 64 B to 1 KiB, and the rate) are
# decided less by the cost of a message than by how the two ranks' turns
# fall: libfabric 1.17's shm sender injects each message under the
# receiver's region lock, and the receiver's progress takes that lock as
# soon as it is signalled, so a receiver polling while the window arrives
# fights for the lock message by message, and one that is still posting
# takes the window in one go: a few tens of nanoseconds added on either
# side move such a window's bandwidth more than their share. libasr's
# sender does a little more per message than a bare fi_tinject (two takes
# of the LNC's ep_lock: asr_isend's and asr_test's, libasr's locked request
# freelist), so these rows' ratios swing on both sides of 1.
#
# Knobs (environment): PIN (1: see below; 0: unpinned), PROVIDERS ("sm shm tcp;ofi_rxm"), REPS (5), MESH_REPS (3),
# MESH_SIZES ("16 64 192"), MESH_LNCS (4), RATE (1; 0: no rate runs, and no rate line), ITERS (5000: round trips per latency
# size are 10 x ITERS below 64 KiB, ITERS below 1 MiB, a tenth of it (at least
# 10) above, for all three tools), RATE_ITERS (10000),
# LAT_SIZES (powers of 4 from 1 to 4 MiB; empty: no latency runs), BW_SIZES
# (same), MESH_SIZES and MESH_REPS=0 (no mesh runs, and no mesh lines), KEEP=1 keeps the
# work directory (logs, per-run figures) and prints its path. The sm
# section's: SM_LAT_SIZES (see above; set but empty: no latency runs),
# FLOOR_ITERS (1000000: the floor's round trips), MPICH_SIZES ("8 4096
# 1048576"; empty: no MPICH runs), MPICH_REPS (15: MPICH runs per size, over
# all reps; 0: none).
#
# Hygiene: only 127.0.0.1 (ASR_IF_ADDR, ASR_KV_BIND; fi_pingpong -d lo for
# tcp; mpiexec.mpich -launcher fork -iface lo, UCX on shared memory alone --
# only fi_pingpong's control socket and Hydra's control port bind the
# wildcard address, which neither has an option for); a fresh free port per
# run (bootstrap port, and fi_pingpong's control port); a private
# ASR_KV_LOCK_DIR under a mktemp -d work directory; every process started
# runs in its own process group (set -m) and under `timeout`, stdin from
# /dev/null where it would read it (mpiexec), and is killed by its group on
# exit or interrupt -- nothing is ever killed by name; Hydra's proxy and
# ranks leave the group for sessions of their own, so every process found
# below one this script started is noted first and killed by its pid if
# still there once the groups are gone -- after which the shared-memory
# regions the killed processes' shm endpoints leave (/dev/shm/<pid>:*) are
# removed.
set -u
set -m

BUILD=${1:-}
if [ -z "$BUILD" ] || [ ! -d "$BUILD" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
BUILD=$(cd "$BUILD" && pwd)
PROVIDERS=${PROVIDERS:-"sm shm tcp;ofi_rxm"}
REPS=${REPS:-5}
MESH_REPS=${MESH_REPS:-3}
MESH_SIZES=${MESH_SIZES-"16 64 192"}
RATE=${RATE:-1}
MESH_LNCS=${MESH_LNCS:-4}
ITERS=${ITERS:-5000}
RATE_ITERS=${RATE_ITERS:-10000}
P4="1 4 16 64 256 1024 4096 16384 65536 262144 1048576 4194304"
# set but empty: none of that kind (e.g. LAT_SIZES= for bandwidth and rate alone)
LAT_SIZES=${LAT_SIZES-$P4}
BW_SIZES=${BW_SIZES-$P4}
PIN=${PIN:-1}
FLOOR_ITERS=${FLOOR_ITERS:-1000000}
MPICH_SIZES=${MPICH_SIZES-"8 4096 1048576"}
MPICH_REPS=${MPICH_REPS:-15}
# raw shm's "best small-message latency" (the sm goals) is the least of
# fi_pingpong's medians at these sizes: fi_pingpong is slow at 1-8 B
BEST_SIZES="8 16 64"
bad_knob() { echo "ofi_bench: $1 (see the knobs at the top of $0)" >&2; exit 2; }
for k in REPS MESH_REPS MESH_LNCS ITERS RATE_ITERS FLOOR_ITERS MPICH_REPS; do
  [[ ${!k} =~ ^[0-9]+$ ]] || bad_knob "$k must be a whole number, not '${!k}'"
done
[ "$REPS" -ge 1 ] || bad_knob "REPS must be at least 1"
if [ "$MESH_LNCS" -lt 1 ] || [ "$ITERS" -lt 1 ] || [ "$RATE_ITERS" -lt 1 ] || [ "$FLOOR_ITERS" -lt 1 ]; then
  bad_knob "MESH_LNCS, ITERS, RATE_ITERS and FLOOR_ITERS must be at least 1"
fi
for s in $LAT_SIZES $BW_SIZES $MESH_SIZES $MPICH_SIZES ${SM_LAT_SIZES-}; do
  [[ $s =~ ^[1-9][0-9]*$ ]] || bad_knob "a size in LAT_SIZES, BW_SIZES, MESH_SIZES, MPICH_SIZES or SM_LAT_SIZES is '$s', not a whole number of bytes (ranks for MESH_SIZES) above 0"
done
# The sm section's latency sizes: LAT_SIZES and what its goals and MPICH
# column need (none when LAT_SIZES is empty), unless SM_LAT_SIZES says.
if [ -z "${SM_LAT_SIZES+set}" ]; then
  SM_LAT_SIZES=""
  # shellcheck disable=SC2086
  [ -n "$LAT_SIZES" ] && SM_LAT_SIZES=$(printf '%s\n' $LAT_SIZES $BEST_SIZES $MPICH_SIZES | sort -n -u | tr '\n' ' ')
fi
in_list() { # word list...: is the word one of the list's?
  local w=$1 x
  shift
  for x in "$@"; do [ "$x" = "$w" ] && return 0; done
  return 1
}
[ "$PIN" = 0 ] || [ "$PIN" = 1 ] || bad_knob "PIN must be 0 or 1, not '$PIN'"
[ "$RATE" = 0 ] || [ "$RATE" = 1 ] || bad_knob "RATE must be 0 or 1, not '$RATE'"

# A big mesh holds many sockets per process (tcp;ofi_rxm: one per peer and
# LNC, and the KV connections): the soft open-files limit is raised to the
# hard one, and the bench says so.
NOFILE_NOTE="open files: soft limit $(ulimit -Sn)"
if [ "$(ulimit -Sn)" != unlimited ] && [ "$(ulimit -Sn)" != "$(ulimit -Hn)" ]; then
  was=$(ulimit -Sn)
  if ulimit -Sn "$(ulimit -Hn)" 2>/dev/null; then
    NOFILE_NOTE="open files: soft limit raised from $was to the hard limit $(ulimit -Sn)"
  fi
fi

# PIN=1 (default): the two ranks of every two-rank measurement run on two
# different CPUs, the first two this shell may use -- asr's and raw's alike
# (taskset for the separately started pingpong and fi_pingpong ranks,
# BENCH_PIN=1 for the forking ofi_raw and asr_bench), as asrrun --bind-to
# core places ranks. Unpinned, two spinning ranks on a 2-CPU machine swung up
# to 2x from run to run with the scheduler's placement. PIN=0 turns it off.
PIN0=() PIN1=() PINNED=unpinned MPICH_BIND=(-bind-to none)
if [ "$PIN" = 1 ] && command -v taskset >/dev/null; then
  cpus=()
  for part in $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr , ' '); do
    if [[ $part == *-* ]]; then mapfile -t -O "${#cpus[@]}" cpus < <(seq "${part%-*}" "${part#*-}"); else cpus+=("$part"); fi
  done
  if [ ${#cpus[@]} -ge 2 ]; then
    PIN0=(taskset -c "${cpus[0]}") PIN1=(taskset -c "${cpus[1]}")
    MPICH_BIND=(-bind-to "user:${cpus[0]},${cpus[1]}") # Hydra: rank 0 on the first, rank 1 on the second
    PINNED="pinned to CPUs ${cpus[0]} and ${cpus[1]}"
    export BENCH_PIN=1
  fi
fi

PINGPONG=$BUILD/tests/apps/pingpong
OFI_RAW=$BUILD/tests/bench/ofi_raw
ASR_BENCH=$BUILD/tests/bench/asr_bench
RAW_MESH=$BUILD/tests/bench/ofi_raw_mesh
FLOOR=$BUILD/tests/bench/cacheline_floor
missing=""
for b in "$PINGPONG" "$OFI_RAW" "$ASR_BENCH" "$RAW_MESH" "$FLOOR"; do [ -x "$b" ] || missing="$missing ${b#"$BUILD"/}"; done
if [ -n "$missing" ]; then
  echo "ofi_bench: building$missing" >&2
  # shellcheck disable=SC2086
  make -C "$BUILD" $missing >/dev/null || { echo "ofi_bench: cannot build$missing" >&2; exit 2; }
fi
command -v fi_pingpong >/dev/null || { echo "ofi_bench: fi_pingpong not found (install libfabric-bin)" >&2; exit 2; }
command -v ss >/dev/null || { echo "ofi_bench: ss not found (install iproute2)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ofi_bench.XXXXXX") || exit 2
DATA=$WORK/data   # lines: provider metric size tool value rep
: >"$DATA"
export ASR_KV_LOCK_DIR=$WORK/kvlock
mkdir -p "$ASR_KV_LOCK_DIR"
export ASR_IF_ADDR=127.0.0.1 ASR_KV_BIND=127.0.0.1
unset FI_PROVIDER ASR_KV_SERVER ASR_BOOTSTRAP_PORT NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT
# libasr's ofi_rxm default (runtime/ofi_env.c), for fi_pingpong too: libasr
# and ofi_raw set it themselves when it is unset
export FI_OFI_RXM_MSG_RX_SIZE=${FI_OFI_RXM_MSG_RX_SIZE:-1024}
FAILS=0
PIDS=()

# Every process below pid $1..., by parent links (the ones that left our
# process groups, as Hydra's proxy and ranks do, included).
# shellcheck disable=SC2317  # (called by cleanup, through the trap)
descendants() {
  local p c
  for p in "$@"; do
    for c in $(pgrep -P "$p" 2>/dev/null); do
      echo "$c"
      descendants "$c"
    done
  done
}

# A process's start time (clock ticks since boot; /proc/PID/stat field 22,
# counted after the command name's closing parenthesis): with its pid, it
# names one process, never a later one that got the same pid.
# shellcheck disable=SC2317  # (called by cleanup, through the trap)
start_time() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# shellcheck disable=SC2317  # (called through the trap)
cleanup() {
  local p i members=() below=()
  if [ ${#PIDS[@]} -gt 0 ]; then
    for p in "${PIDS[@]}"; do
      # shellcheck disable=SC2207
      members+=($(pgrep -g "$p" 2>/dev/null))
    done
    for p in $(descendants "${PIDS[@]}"); do below+=("$p:$(start_time "$p")"); done
    # TERM first (timeout passes it on and reaps its command), then KILL
    for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
    for i in $(seq 1 20); do
      kill -0 "${PIDS[@]}" 2>/dev/null || break
      sleep 0.1
    done
    for p in "${PIDS[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    # what left the groups (setsid) and outlived them: by the pid noted
    # above, if it still names the same process
    for p in "${below[@]+"${below[@]}"}"; do
      members+=("${p%%:*}")
      [ -n "${p#*:}" ] && [ "$(start_time "${p%%:*}")" = "${p#*:}" ] && kill -KILL "${p%%:*}" 2>/dev/null
    done
    # a killed shm endpoint leaves its region behind: /dev/shm/<pid>:<n>:<ep>
    # (these pids were ours and have just been SIGKILLed)
    for p in "${members[@]+"${members[@]}"}"; do rm -f /dev/shm/"$p":*:* 2>/dev/null; done
  fi
  PIDS=()
  if [ "${KEEP:-0}" = 1 ]; then
    echo "ofi_bench: work directory kept: $WORK" >&3
  else
    rm -rf "$WORK"
  fi
}
# fd 3 is the script's own stderr: a trap can run while a function's output is
# redirected to a log, and its message must not end up there.
exec 3>&2
trap cleanup EXIT
trap 'echo "ofi_bench: interrupted; stopping every process it started" >&3; exit 130' INT TERM

# The MPICH column (sm section): mpich_pingpong.c, compiled here into the
# work directory; MPICH_NOTE says why the column is empty when it is.
MPICH_PP="" MPICH_NOTE=""
# shellcheck disable=SC2086 # (PROVIDERS is a list of words)
if in_list sm $PROVIDERS && [ -n "$MPICH_SIZES" ] && [ "$MPICH_REPS" -gt 0 ]; then
  if ! command -v mpicc.mpich >/dev/null; then
    MPICH_NOTE="skipped: mpicc.mpich not found"
  elif ! command -v mpiexec.mpich >/dev/null; then
    MPICH_NOTE="skipped: mpiexec.mpich not found"
  elif ! mpicc.mpich -O2 -D_GNU_SOURCE -I "$(dirname "$0")/../apps" -o "$WORK/mpich_pingpong" "$(dirname "$0")/mpich_pingpong.c" >"$WORK/mpicc.log" 2>&1; then
    MPICH_NOTE="skipped: mpicc.mpich failed"
    sed 's/^/    /' "$WORK/mpicc.log" | tail -n 15 >&2
  else
    MPICH_PP=$WORK/mpich_pingpong
  fi
  [ -n "$MPICH_NOTE" ] && echo "ofi_bench: MPICH column $MPICH_NOTE" >&2
fi

# Starts "$@" in the background in its own process group; its pid is in BG.
bg() {
  "$@" &
  BG=$!
  PIDS+=("$BG")
}

# Waits for background pid $1; returns its status and forgets it.
reap() {
  local st
  wait "$1"
  st=$?
  local keep=() p
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]+"${keep[@]}"}")
  return $st
}

# Runs "$@" like bg, then waits for it: the shell can still act on a signal
# (a foreground command would make it wait for the end of the command).
run() {
  bg "$@"
  reap "$BG"
}

port_in_use() { [ -n "$(ss -Htan "( sport = :$1 or dport = :$1 )" 2>/dev/null)" ]; }

# A free TCP port on 127.0.0.1 that no socket (listening, connected or in
# TIME_WAIT) uses.
free_port() {
  local p i
  for i in $(seq 1 200); do
    if command -v python3 >/dev/null 2>&1; then
      p=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])' 2>/dev/null)
    else
      p=$((20000 + RANDOM % 30000))
    fi
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
  echo "ofi_bench: FAILED: $1" >&2
  [ -n "${2:-}" ] && [ -f "$2" ] && tail -n 15 "$2" | sed 's/^/    /' >&2
}

REP=0 # the run a figure belongs to (paired below)
record() { echo "$1 $2 $3 $4 $5 $REP" >>"$DATA"; } # provider metric size tool value (REP: the run)

n_for() { # iterations for a size, as pingpong picks them
  if [ "$1" -ge 1048576 ]; then
    local n=$((ITERS / 10))
    [ $n -lt 10 ] && n=10
    echo $n
  else
    echo "$ITERS"
  fi
}

# --- raw: fi_pingpong latency ------------------------------------------------
# pingpong's and ofi_raw's -n for a latency size: they take a tenth of it
# themselves from 1 MiB (bench_lat_rounds), so they time fi_pingpong's count.
lat_n() { if [ "$1" -lt 65536 ]; then echo $((ITERS * 10)); else echo "$ITERS"; fi; }

fpp_iters() { # fi_pingpong's own historic size_to_count, scaled by ITERS/1000
  if [ "$1" -lt 65536 ]; then lat_n "$1"; else n_for "$1"; fi
}

run_fi_pingpong() { # provider tag size
  local prov=$1 tag=$2 size=$3 port n dom=() log out
  n=$(fpp_iters "$size")
  [ "$prov" != shm ] && dom=(-d lo)
  port=$(free_port) || { fail "no free port"; return; }
  log=$WORK/fpp_$tag.$size.srv
  out=$WORK/fpp_$tag.$size.cli
  bg "${PIN1[@]}" timeout -k 5 120 fi_pingpong -p "$prov" "${dom[@]}" -e rdm -m tagged -S "$size" -I "$n" -B "$port" >"$log" 2>&1
  local srv=$BG
  if ! wait_listen "$port" "$srv"; then
    reap "$srv"
    fail "fi_pingpong server ($prov, $size B) did not start" "$log"
    return
  fi
  run "${PIN0[@]}" timeout -k 5 120 fi_pingpong -p "$prov" "${dom[@]}" -e rdm -m tagged -S "$size" -I "$n" -P "$port" 127.0.0.1 >"$out" 2>&1
  local cst=$?
  reap "$srv"
  local sst=$?
  if [ $cst -ne 0 ] || [ $sst -ne 0 ]; then
    fail "fi_pingpong ($prov, $size B): client $cst, server $sst" "$out"
    return
  fi
  # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec; usec/xfer is one-way
  local us
  us=$(awk 'NR > 1 && NF >= 8 { v = $7 } END { if (v != "") print v }' "$out")
  if [ -n "$us" ]; then
    record "$tag" lat "$size" fpp "$us"
  else
    fail "fi_pingpong ($prov, $size B): no result" "$out"
  fi
}

# --- raw: ofi_raw (same pattern as pingpong) --------------------------------
run_ofi_raw() { # provider tag mode(lat|bw|rate) [size]
  local out=$WORK/raw_$1.$RANDOM.out sz=()
  [ -n "${4:-}" ] && sz=(-s "$4" -S "$4")
  if ! run timeout -k 5 300 "$OFI_RAW" -p "$1" -m "$3" "${sz[@]}" -n "$(lat_n "${4:-1}")" -w 64 -r 128 -N "$RATE_ITERS" >"$out" 2>&1; then
    fail "ofi_raw ($1, $3 ${4:-})" "$out"
    return
  fi
  awk -v t="$2" -v r="$REP" '$1 == "lat" { print t, "lat", $2, "tsend", $3, r } $1 == "bw" { print t, "bw", $2, "raw", $3, r }
                 $1 == "rate" { print t, "rate", $2, "raw", $3, r }' "$out" >>"$DATA"
}

# --- asr: pingpong (lat + bw) and asr_bench (rate, mesh, breakdown) ---------
# The provider's libasr settings, for env: sm is libasr's own choice (no
# ASR_PROVIDER: the native path to a peer on this host), any other is forced.
asr_sel() { # provider -> ASEL
  if [ "$1" = sm ]; then ASEL=(-u ASR_PROVIDER); else ASEL=(ASR_PROVIDER="$1"); fi
}
# The raw libfabric provider a provider's asr runs are measured against.
raw_prov() { if [ "$1" = sm ]; then echo shm; else echo "$1"; fi; }

run_asr_pingpong() { # provider tag mode(lat|bw) size
  local port out=$WORK/pp_$2.$RANDOM.out err
  port=$(free_port) || { fail "no free port"; return; }
  err=$out.r1
  asr_sel "$1"
  bg "${PIN1[@]}" env "${ASEL[@]}" ASR_BOOTSTRAP_PORT="$port" timeout -k 5 300 "$PINGPONG" -l 1 -p 0 -r 1 -m "$3" -s "$4" -S "$4" -n "$(lat_n "$4")" -w 64 >"$err" 2>&1
  local r1=$BG
  run "${PIN0[@]}" env "${ASEL[@]}" ASR_BOOTSTRAP_PORT="$port" timeout -k 5 300 "$PINGPONG" -l 0 -p 1 -r 0 -m "$3" -s "$4" -S "$4" -n "$(lat_n "$4")" -w 64 >"$out" 2>"$out.r0"
  local st0=$?
  reap "$r1"
  local st1=$?
  if [ $st0 -ne 0 ] || [ $st1 -ne 0 ]; then
    fail "asr pingpong ($1, $3 $4): rank 0 $st0, rank 1 $st1" "$out.r0"
    [ -s "$err" ] && tail -n 5 "$err" >&2
    return
  fi
  awk -v t="$2" -v r="$REP" '$1 == "lat" { print t, "lat", $2, "asr", $3, r } $1 == "bw" { print t, "bw", $2, "asr", $3, r }' "$out" >>"$DATA"
}

run_asr_rate() { # provider tag
  local out=$WORK/rate_$2.$RANDOM.out
  asr_sel "$1"
  if ! run env "${ASEL[@]}" ASR_BOOTSTRAP_PORT="$(free_port)" timeout -k 5 300 "$ASR_BENCH" -m rate -w 128 -n "$RATE_ITERS" >"$out" 2>&1; then
    fail "asr_bench rate ($1)" "$out"
    return
  fi
  awk -v t="$2" -v r="$REP" '$1 == "rate" { print t, "rate", $2, "asr", $3, r }' "$out" >>"$DATA"
}

# What libasr spends per call, one process (asr_bench -m breakdown): bd
# KEY figures in ns (polls: a count), and the path its comms took in BD_PATH.
run_asr_breakdown() { # provider tag
  local out=$WORK/bd_$2.$RANDOM.out
  asr_sel "$1"
  if ! run env "${ASEL[@]}" ASR_BOOTSTRAP_PORT="$(free_port)" timeout -k 5 300 "$ASR_BENCH" -m breakdown -n "$(lat_n 8)" >"$out" 2>&1; then
    fail "asr_bench breakdown ($1)" "$out"
    return
  fi
  awk -v t="$2" -v r="$REP" '$1 == "breakdown" && $2 != "provider" { print t, "bd", $2, "asr", $3, r }' "$out" >>"$DATA"
  BD_PATH=$(awk '$1 == "breakdown" && $2 == "provider" { print $3 }' "$out")
}

# --- the floor: one cache line between the two CPUs --------------------------
# Recorded as an 8 B latency of tool "floor" (one-way, us), so that it pairs
# with asr's 8 B latency run by run; its round trip as floorrtt.
run_floor() { # tag
  local out=$WORK/floor.$RANDOM.out
  if ! run timeout -k 5 300 "$FLOOR" -n "$FLOOR_ITERS" >"$out" 2>&1; then
    fail "cacheline_floor" "$out"
    return
  fi
  awk -v t="$1" -v r="$REP" '$1 == "floor" { print t, "lat", 8, "floor", $3 / 1000, r; print t, "floorrtt", 64, "floor", $2 / 1000, r }' "$out" >>"$DATA"
}

# --- MPICH: mpich_pingpong under mpiexec.mpich ---------------------------------
# UCX stays on shared memory (its network transports would listen on every
# interface); Hydra's proxy is forked here and reaches mpiexec over lo.
# mpiexec reads stdin to forward it: /dev/null, or a terminal would stop
# the background job (SIGTTIN).
run_mpich() { # tag size
  local out=$WORK/mpich_$2.$RANDOM.out
  if ! run env UCX_TLS="${UCX_TLS:-self,sm}" UCX_NET_DEVICES="${UCX_NET_DEVICES:-lo}" timeout -k 5 300 \
    mpiexec.mpich -launcher fork -iface lo -n 2 "${MPICH_BIND[@]}" "$MPICH_PP" -n "$(lat_n "$2")" "$2" </dev/null >"$out" 2>&1; then
    fail "mpich_pingpong ($2 B)" "$out"
    return
  fi
  awk -v t="$1" -v r="$REP" '$1 == "lat" { print t, "lat", $2, "mpich", $3, r }' "$out" >>"$DATA"
}

# MPICH runs of a size in run REP: MPICH_REPS in all, spread evenly over the
# REPS runs (run r does floor(M r / R) - floor(M (r-1) / R)).
mpich_runs() { echo $((MPICH_REPS * REP / REPS - MPICH_REPS * (REP - 1) / REPS)); }

mesh_lncs() { local l=$MESH_LNCS; [ $(($1 % l)) -ne 0 ] && l=1; echo "$l"; }
# The fewest loopback "hosts" of at most 128 LNCs each that split RANKS into
# whole processes (asr_bench -H).
mesh_hosts() { # ranks
  local l h=1; l=$(mesh_lncs "$1")
  while [ $(($1 / h)) -gt 128 ] || [ $(($1 % (h * l))) -ne 0 ]; do h=$((h + 1)); done
  echo "$h"
}

# Both print: mesh RANKS PROCS init_ms connected_ms; "meshconn" is the part
# after init (connected - init), the connection set-up itself.
mesh_data() { # tag tool file
  awk -v t="$1" -v k="$2" -v r="$REP" '$1 == "mesh" { print t, "mesh", $2, k, $5, r; print t, "meshinit", $2, k, $4, r;
    print t, "meshconn", $2, k, $5 - $4, r; print t, "meshprocs", $2, k, $3, r }' "$3" >>"$DATA"
}

run_asr_mesh() { # provider tag ranks
  local out=$WORK/mesh_$2.$3.$RANDOM.out
  asr_sel "$1"
  if ! run env -u BENCH_PIN "${ASEL[@]}" ASR_BOOTSTRAP_PORT="$(free_port)" timeout -k 5 300 "$ASR_BENCH" -m mesh -R "$3" -L "$(mesh_lncs "$3")" -H "$(mesh_hosts "$3")" -t 280 >"$out" 2>&1; then
    fail "asr_bench mesh $3 ($1)" "$out"
    return
  fi
  mesh_data "$2" asr "$out"
}

run_raw_mesh() { # provider tag ranks [tool: raw, or rawt for -T -Z]
  local out=$WORK/rawmesh_$2.$3.$RANDOM.out tool=${4:-raw} shape=()
  [ "$tool" = rawt ] && shape=(-T -Z)
  if ! run env -u BENCH_PIN timeout -k 5 300 "$RAW_MESH" -p "$1" -R "$3" -L "$(mesh_lncs "$3")" "${shape[@]}" -t 280 >"$out" 2>&1; then
    fail "ofi_raw_mesh $3 ${shape[*]} ($1)" "$out"
    return
  fi
  mesh_data "$2" "$tool" "$out"
}

median() { # tag metric size tool -> median (empty when none)
  awk -v t="$1" -v m="$2" -v s="$3" -v k="$4" '$1 == t && $2 == m && $3 == s && $4 == k { print $5 }' "$DATA" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Median of the per-run ratios A/B, with their range: each run's asr figure
# was measured next to that run's raw one, so their ratio compares the two
# in one state of the machine; the range shows how far the pairs spread.
# Where a run has several B figures (MPICH), each pairs with its run's A.
paired() { # tag metric size toolA toolB -> "median (min-max)", or "-"
  awk -v t="$1" -v m="$2" -v s="$3" -v a="$4" -v b="$5" '$1 == t && $2 == m && $3 == s && $4 == a { A[$6] = $5 }
    $1 == t && $2 == m && $3 == s && $4 == b { nb++; Br[nb] = $6; Bv[nb] = $5 }
    END { for (i = 1; i <= nb; i++) if ((Br[i] in A) && Bv[i] > 0) print A[Br[i]] / Bv[i] }' "$DATA" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
      med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%.2f (%.2f-%.2f)", med, v[1], v[NR] }'
}


ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }' || echo "-"; }

fmt() { [ -z "$1" ] && { echo "-"; return; }; awk -v v="$1" 'BEGIN { a = v < 0 ? -v : v; if (a >= 1000) printf "%.0f", v; else if (a >= 10) printf "%.1f", v; else if (a >= 1) printf "%.2f", v; else printf "%.3f", v }'; }

# A provider's latency sizes: the sm section's include its goals' and
# MPICH's (SM_LAT_SIZES).
lat_sizes() { if [ "$1" = sm ]; then echo "$SM_LAT_SIZES"; else echo "$LAT_SIZES"; fi; }

# A provider's mesh sizes: sm's are those of one host (see the top).
mesh_sizes() {
  local r
  for r in $MESH_SIZES; do
    [ "$1" != sm ] || [ "$(mesh_hosts "$r")" -eq 1 ] && echo "$r"
  done
}

# One latency size's runs in run REP: raw (fi_pingpong, ofi_raw) and asr,
# raw first in odd runs and last in even ones; in the sm section the floor
# and the breakdown go with 8 B, and MPICH with its sizes.
lat_group() { # provider tag size
  local p=$1 t=$2 s=$3 rp k i steps=(fpp tsend asr) order=()
  rp=$(raw_prov "$p")
  if [ "$p" = sm ]; then
    [ "$s" = 8 ] && steps+=(floor breakdown)
    # shellcheck disable=SC2086
    if [ -n "$MPICH_PP" ] && in_list "$s" $MPICH_SIZES; then
      for ((k = $(mpich_runs); k > 0; k--)); do steps+=(mpich); done
    fi
  fi
  if [ $((REP % 2)) -eq 1 ]; then
    order=("${steps[@]}")
  else
    for ((i = ${#steps[@]} - 1; i >= 0; i--)); do order+=("${steps[i]}"); done
  fi
  for i in "${order[@]}"; do
    case $i in
      fpp) run_fi_pingpong "$rp" "$t" "$s" ;;
      tsend) run_ofi_raw "$rp" "$t" lat "$s" ;;
      asr) run_asr_pingpong "$p" "$t" lat "$s" ;;
      floor) run_floor "$t" ;;
      breakdown) run_asr_breakdown "$p" "$t" ;;
      mpich) run_mpich "$t" "$s" ;;
    esac
  done
}

BD_PATH=""
START=$(date +%s)
echo "ofi_bench: build $BUILD, providers: $PROVIDERS; $REPS runs per figure, $MESH_REPS per mesh; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); two-rank runs $PINNED; $NOFILE_NOTE${ASR_SM_CMA+; ASR_SM_CMA=$ASR_SM_CMA}" >&2
for prov in $PROVIDERS; do
  tag=${prov//;/+}
  rp=$(raw_prov "$prov")
  for rep in $(seq 1 "$REPS"); do
    REP=$rep
    echo "ofi_bench: $prov: run $rep of $REPS ($(($(date +%s) - START)) s)" >&2
    # Each size's asr run sits next to its raw runs, in an order that
    # alternates from run to run: a VM's small-message speed can change for
    # minutes at a time, for raw libfabric as much as for libasr, and runs
    # that are minutes apart would compare one state with the other.
    # shellcheck disable=SC2046
    if [ "$prov" = sm ] && ! in_list 8 $(lat_sizes sm); then
      run_floor "$tag"; run_asr_breakdown "$prov" "$tag" # no 8 B runs to go with
    fi
    for s in $(lat_sizes "$prov"); do lat_group "$prov" "$tag" "$s"; done
    if [ $((rep % 2)) -eq 1 ]; then
      for s in $BW_SIZES; do run_ofi_raw "$rp" "$tag" bw "$s"; run_asr_pingpong "$prov" "$tag" bw "$s"; done
      if [ "$RATE" = 1 ]; then run_ofi_raw "$rp" "$tag" rate; run_asr_rate "$prov" "$tag"; fi
    else
      for s in $BW_SIZES; do run_asr_pingpong "$prov" "$tag" bw "$s"; run_ofi_raw "$rp" "$tag" bw "$s"; done
      if [ "$RATE" = 1 ]; then run_asr_rate "$prov" "$tag"; run_ofi_raw "$rp" "$tag" rate; fi
    fi
  done
  for rep in $(seq 1 "$MESH_REPS"); do
    REP=$rep
    for r in $(mesh_sizes "$prov"); do
      echo "ofi_bench: $prov: mesh of $r ranks, run $rep of $MESH_REPS ($(($(date +%s) - START)) s)" >&2
      if [ $((rep % 2)) -eq 1 ]; then
        run_raw_mesh "$rp" "$tag" "$r"; run_asr_mesh "$prov" "$tag" "$r"; run_raw_mesh "$rp" "$tag" "$r" rawt
      else
        run_raw_mesh "$rp" "$tag" "$r" rawt; run_asr_mesh "$prov" "$tag" "$r"; run_raw_mesh "$rp" "$tag" "$r"
      fi
    done
  done
done

# --- the table ---------------------------------------------------------------
F='%-14s %-18s %-8s %-10s %-10s %-8s %-17s %-10s %-9s %-17s %-10s %-9s %s\n'
# shellcheck disable=SC2059  # (F is the table's format)
row() { printf "$F" "$@" | sed 's/ *$//'; } # (no trailing blanks where columns are empty)
row provider metric size asr raw asr/raw "paired (range)" raw2 asr/raw2 "paired (range)" mpich asr/mpich "paired (range)"

# One goal line of the sm section: the ratio A/B against its bound.
goal() { # label A B bound le|ge [why not measured]
  local v verdict
  if [ -n "$2" ] && [ -n "$3" ]; then
    v=$(ratio "$2" "$3")
    verdict=$(awk -v a="$2" -v b="$3" -v th="$4" -v op="$5" 'BEGIN {
      if (b <= 0) { print "not measured"; exit }
      ok = op == "le" ? a / b <= th : a / b >= th; print ok ? "met" : "NOT met" }')
  else
    v="-" verdict="not measured${6:+ ($6)}"
  fi
  printf '%-14s   %-62s %-7s %s\n' sm "$1" "$v" "$verdict"
}

sm_section() { # the sm rows that follow its latency, bandwidth and rate rows
  local a f what label
  a=$(median sm lat 8 asr) f=$(median sm lat 8 floor)
  row sm "floor (one-way)" 8 "$(fmt "$a")" "$(fmt "$f")" "$(ratio "$a" "$f")" "$(paired sm lat 8 asr floor)"
  printf '%-14s %s\n' sm "what asr spends above the floor, in ns (asr_bench -m breakdown: one process, 8 B, path ${BD_PATH:-?};"
  printf '%-14s %s\n' sm "  \"asr_test sent/recvd\": the call that completes it; \"pending per msg\": a count):"
  [ -n "$a" ] && [ -n "$f" ] && row sm "  latency - floor" 8 "$(fmt "$(awk -v a="$a" -v f="$f" 'BEGIN { print (a - f) * 1000 }')")"
  for what in message isend irecv test_send test_recv test_poll polls clock; do
    case $what in
      message) label="  whole message" ;;
      isend) label="  asr_isend" ;;
      irecv) label="  asr_irecv" ;;
      test_send) label="  asr_test sent" ;;
      test_recv) label="  asr_test recvd" ;;
      test_poll) label="  asr_test pending" ;;
      polls) label="  pending per msg" ;;
      clock) label="  clock (taken off)" ;;
    esac
    row sm "$label" 8 "$(fmt "$(median sm bd "$what" asr)")"
  done
}

sm_goals() {
  local a b s best bs v
  printf '%-14s %s\n' sm "goals (ratios of medians):"
  a=$(median sm lat 8 asr) best="" bs=""
  for s in $BEST_SIZES; do
    v=$(median sm lat "$s" fpp)
    [ -n "$v" ] && { [ -z "$best" ] || awk -v v="$v" -v b="$best" 'BEGIN { exit !(v < b) }'; } && best=$v bs=$s
  done
  goal "8 B latency / raw shm best small (${best:+$(fmt "$best") us at $bs B}) <= 0.6" "$a" "$best" 0.6 le "no 8, 16 or 64 B latency runs"
  goal "8 B rate asr/raw >= 2" "$(median sm rate 8 asr)" "$(median sm rate 8 raw)" 2 ge "RATE=0"
  local lo=0 hi=0
  for s in $BW_SIZES; do
    if [ "$s" -ge 256 ] && [ "$s" -le 4096 ]; then
      lo=1
      goal "bandwidth $s B asr/raw >= 1.5" "$(median sm bw "$s" asr)" "$(median sm bw "$s" raw)" 1.5 ge
    elif [ "$s" -ge 65536 ] && [ "$s" -le 4194304 ]; then
      hi=1
      goal "bandwidth $s B asr/raw >= 1.0" "$(median sm bw "$s" asr)" "$(median sm bw "$s" raw)" 1.0 ge
    fi
  done
  [ $lo = 1 ] || goal "bandwidth 256 B..4 KiB asr/raw >= 1.5" "" "" 1.5 ge "no BW_SIZES there"
  [ $hi = 1 ] || goal "bandwidth 64 KiB..4 MiB asr/raw >= 1.0" "" "" 1.0 ge "no BW_SIZES there"
  goal "mesh of 64 ranks, after init, asr/raw <= 1.0" "$(median sm meshconn 64 asr)" "$(median sm meshconn 64 raw)" 1.0 le \
    "MESH_SIZES lacks 64, or MESH_REPS=0"
  if [ -z "$MPICH_SIZES" ]; then
    goal "latency asr/MPICH <= 1.0" "" "" 1.0 le "MPICH_SIZES empty"
  fi
  for s in $MPICH_SIZES; do
    goal "latency $s B asr/MPICH <= 1.0" "$(median sm lat "$s" asr)" "$(median sm lat "$s" mpich)" 1.0 le \
      "${MPICH_NOTE:-no runs at $s B}"
  done
}

for prov in $PROVIDERS; do
  tag=${prov//;/+}
  for s in $(lat_sizes "$prov"); do
    a=$(median "$tag" lat "$s" asr) r=$(median "$tag" lat "$s" fpp) t=$(median "$tag" lat "$s" tsend)
    mp=() # the MPICH columns: sm rows at MPICH's sizes
    # shellcheck disable=SC2086
    if [ "$prov" = sm ] && in_list "$s" $MPICH_SIZES; then
      if [ -n "$MPICH_NOTE" ]; then
        mp=("$MPICH_NOTE")
      else
        m=$(median "$tag" lat "$s" mpich)
        mp=("$(fmt "$m")" "$(ratio "$a" "$m")" "$(paired "$tag" lat "$s" asr mpich)")
      fi
    fi
    row "$prov" "latency (us)" "$s" "$(fmt "$a")" "$(fmt "$r")" "$(ratio "$a" "$r")" \
      "$(paired "$tag" lat "$s" asr fpp)" "$(fmt "$t")" "$(ratio "$a" "$t")" "$(paired "$tag" lat "$s" asr tsend)" "${mp[@]+"${mp[@]}"}"
  done
  for s in $BW_SIZES; do
    a=$(median "$tag" bw "$s" asr) r=$(median "$tag" bw "$s" raw)
    row "$prov" "bandwidth (MB/s)" "$s" "$(fmt "$a")" "$(fmt "$r")" "$(ratio "$a" "$r")" \
      "$(paired "$tag" bw "$s" asr raw)"
  done
  a=$(median "$tag" rate 8 asr) r=$(median "$tag" rate 8 raw)
  [ "$RATE" = 1 ] && row "$prov" "rate (msgs/s)" 8 "$(fmt "$a")" "$(fmt "$r")" "$(ratio "$a" "$r")" "$(paired "$tag" rate 8 asr raw)"
  [ "$prov" = sm ] && sm_section
  if [ "$MESH_REPS" -gt 0 ]; then
    for m in $MESH_SIZES; do
      # shellcheck disable=SC2046
      if ! in_list "$m" $(mesh_sizes "$prov"); then
        printf '%-14s %s\n' "$prov" "mesh $m: not run (more than one host's LNCs: asr would take tcp;ofi_rxm between hosts)"
        continue
      fi
      p=$(median "$tag" meshprocs "$m" asr)
      for what in mesh meshinit meshconn; do
        case $what in
          mesh) label="mesh $m (ms)" ;;
          meshinit) label="  init part" ;;
          meshconn) label="  after init" ;;
        esac
        a=$(median "$tag" $what "$m" asr) r=$(median "$tag" $what "$m" raw) t=$(median "$tag" $what "$m" rawt)
        row "$prov" "$label" "${p:-?}p" "$(fmt "$a")" "$(fmt "$r")" "$(ratio "$a" "$r")" \
          "$(paired "$tag" $what "$m" asr raw)" "$(fmt "$t")" "$(ratio "$a" "$t")" "$(paired "$tag" $what "$m" asr rawt)"
      done
    done
  fi
  [ "$prov" = sm ] && sm_goals
done
echo "ofi_bench: $REPS runs per figure (medians), $(($(date +%s) - START)) s in all, load now $(cut -d' ' -f1-3 /proc/loadavg); $NOFILE_NOTE" >&2
if [ $FAILS -ne 0 ]; then
  echo "ofi_bench: $FAILS run(s) FAILED" >&2
  exit 1
fi
exit 0
