#!/usr/bin/env bash
# tests/slurm/slurm.sh BUILD_DIR -- asr under a real Slurm cluster.
#
# Installs Slurm and munge when missing, starts a private cluster of two
# emulated nodes in network namespaces (cluster.sh), and runs asr in the
# three ways a Slurm user would:
#   salloc -N 2 -n 4 asrrun ...        asrrun inside an allocation (srun starts asrd)
#   sbatch --wait -N 2 -n 4 script     the same from a batch script
#   srun --mpi=pmix -N 2 -n 4 ./app    direct launch, no asrrun: Slurm's PMIx server
# each with the pairwise demo (verified data) and with a failing rank (the
# job ends with the right exit code and nothing is left running). The
# cluster is torn down at the end even when a case fails. Prints
# PASS/FAIL/SKIP lines; SKIP only when Slurm cannot be installed or started.
set -uo pipefail
build=$(cd "${1:?usage: slurm.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../netns/lib.sh" # netns_alive
cluster=$here/cluster.sh
ASRRUN=$build/bin/asrrun
APPS=$build/tests/apps
EXAMPLES=$build/examples
base=$(mktemp -d /tmp/asrslurm.XXXXXX) # short: Slurm's socket paths must fit 107 bytes
trap '"$cluster" stop "$base" >/dev/null 2>&1; rm -rf "$base"' EXIT
trap 'exit 130' INT TERM
# The direct-launch ranks elect each node's KV server with lock files: keep
# them here (srun passes the environment on), not in /tmp.
export ASR_KV_LOCK_DIR=$base/kvlock
mkdir -p "$ASR_KV_LOCK_DIR"

cases=(salloc_pairwise sbatch_pairwise srun_direct_pairwise salloc_failing_rank sbatch_failing_rank
  srun_direct_failing_rank srun_direct_abort salloc_mpi_openmpi salloc_mpi_mpich salloc_tree_pairwise
  salloc_tree_interior_killed salloc_trace srun_direct_trace)
skip_all() {
  for c in "${cases[@]}"; do echo "SKIP: slurm/$c ($1)"; done
  exit 0
}
out=$("$cluster" install 2>&1)
rc=$?
[ $rc = 77 ] && skip_all "$(echo "$out" | tail -1)"
[ $rc = 0 ] || skip_all "Slurm could not be installed: $(echo "$out" | tail -1)"
out=$("$cluster" start "$base" 2>&1)
rc=$?
[ $rc = 77 ] && skip_all "$(echo "$out" | tail -1)"
if [ $rc != 0 ]; then
  echo "$out" | tail -20
  echo "FAIL: slurm/cluster_start (exit $rc)"
  exit 1
fi
. "$base/env"
CTL=$ASR_SLURM_CTL_NS
NODE_NS=("$ASR_SLURM_N1_NS" "$ASR_SLURM_N2_NS")

# in the controller namespace, where salloc/sbatch/srun are run
client() { ip netns exec "$CTL" timeout -k 5 120 "$@"; }

# A failure shows the case's output and what the nodes' slurmd logs said
# about errors, PMIx and aborts (the cluster, and its logs, go at exit).
fail() {
  echo "FAIL: slurm/$case: $*"
  tail -15 "$log" | sed 's/^/    /'
  grep -h -i 'error\|pmix\|abort' "$base"/log/slurmd-*.log 2>/dev/null | tail -15 | sed 's/^/    slurmd: /'
  failed=1
}
result() { [ "$failed" = 0 ] && echo "PASS: slurm/$case ($1)"; }

# Nothing of the job may be left on a node: only Slurm's own daemons.
check_clean() {
  local until=$((SECONDS + 20)) left
  while :; do
    left=$(for ns in "${NODE_NS[@]}"; do netns_alive "$ns"; done | grep -v '(slurmd)\|(slurmstepd)' | tr '\n' ' ')
    [ -z "$left" ] && [ -z "$(client squeue -h 2>/dev/null)" ] && return 0
    ((SECONDS < until)) || break
    sleep 0.2
  done
  fail "left running: ${left:-none} / jobs: $(client squeue -h 2>/dev/null | tr '\n' ' ')"
}

verified() { # LOG N: N ranks on n1 and n2 verified their data
  local n
  n=$(grep -c 'all verified' "$1")
  [ "$n" = "$2" ] || { fail "$n of $2 ranks verified their data"; return; }
  grep -q '(host n1, ' "$1" || fail "no rank ran on node n1"
  grep -q '(host n2, ' "$1" || fail "no rank ran on node n2"
}

case=salloc_pairwise failed=0 log=$base/$case.log
client salloc -N 2 -n 4 "$ASRRUN" --bind-to none "$EXAMPLES/pairwise" >"$log" 2>&1
rc=$?
[ $rc = 0 ] || fail "exit $rc"
verified "$log" 4
check_clean
result "salloc -N 2 -n 4 asrrun pairwise: 4 ranks, asrd started by srun on n1 and n2"

case=sbatch_pairwise failed=0 log=$base/$case.log
cat >"$base/job.sh" <<EOS
#!/bin/sh
#SBATCH -N 2
#SBATCH -n 4
exec "$ASRRUN" --bind-to none "$EXAMPLES/pairwise"
EOS
client sbatch --wait -o "$log" "$base/job.sh" >"$base/$case.submit" 2>&1
rc=$?
[ $rc = 0 ] || fail "sbatch exit $rc: $(cat "$base/$case.submit")"
verified "$log" 4
check_clean
result "sbatch --wait with asrrun pairwise inside"

case=srun_direct_pairwise failed=0 log=$base/$case.log
client srun --mpi=pmix -N 2 -n 4 "$EXAMPLES/pairwise" -v >"$log" 2>&1
rc=$?
[ $rc = 0 ] || fail "exit $rc"
verified "$log" 4
# per-peer paths under direct launch (asr_job_init names each node by
# PMIx): shm between the two ranks of a node, tcp;ofi_rxm across; pairwise -v
# prints each peer's providers (asr_comm_provider)
n=$(grep -c 'rank [0-9]* (host [^)]*) peer [0-9]*: send ' "$log")
[ "$n" = 12 ] || fail "$n of 12 per-peer provider lines"
bad=$(awk '
  /rank [0-9]+ \(host [^)]*\) peer [0-9]+: send / {
    for (i = 1; i <= NF; i++) if ($i == "rank") break
    r = $(i + 1); h = $(i + 3); sub(/\)$/, "", h); p = $(i + 5); sub(/:$/, "", p)
    host[r] = h; s[r "," p] = $(i + 7); v[r "," p] = $(i + 9); sub(/,$/, "", s[r "," p]); pairs[r "," p] = 1
  }
  END {
    for (k in pairs) {
      split(k, a, ","); want = host[a[1]] == host[a[2]] ? "sm" : "tcp;ofi_rxm"
      if (s[k] != want || v[k] != want) print "rank " a[1] " -> " a[2] ": send " s[k] ", recv " v[k] ", wanted " want
      n++
    }
    if (n != 12) print "only " n " pairs read"
  }' "$log" | head -3)
[ -z "$bad" ] || fail "$bad"
check_clean
result "srun --mpi=pmix pairwise without asrrun; shm within a node, tcp;ofi_rxm across"

case=salloc_failing_rank failed=0 log=$base/$case.log
# rank 3 waits for a flag file, so the check below sees the job running
flag=$base/$case.go
client salloc -N 2 -n 4 "$ASRRUN" --bind-to none sh -c \
  'if [ "$ASR_RANK" = 3 ]; then while [ ! -e "$0" ]; do sleep 0.1; done; exit 7; fi; exec sleep 60' "$flag" \
  >"$log" 2>&1 &
job=$!
# while it runs: exactly one asrd per node (srun -n 1 per node, not the job's 4 tasks)
until=$((SECONDS + 30))
while [ "$(for ns in "${NODE_NS[@]}"; do netns_alive "$ns"; done | grep -c '(sleep)')" -lt 3 ] && ((SECONDS < until)); do
  sleep 0.1
done
if ((SECONDS >= until)); then
  fail "the ranks did not start within 30 s"
else
  for ns in "${NODE_NS[@]}"; do
    n=$(netns_alive "$ns" | grep -c '(asrd)')
    [ "$n" = 1 ] || fail "$n asrd processes on node namespace $ns, wanted 1"
  done
fi
touch "$flag"
{ wait $job; } 2>/dev/null
rc=$?
[ $rc = 7 ] || fail "exit $rc, wanted 7"
grep -q 'rank 3 on host n2 exited with status 7' "$log" || fail "no summary naming rank 3 and node n2"
check_clean
result "rank 3 exits 7 under salloc: asrrun exits 7 naming n2"

case=sbatch_failing_rank failed=0 log=$base/$case.log
cat >"$base/fail.sh" <<EOS
#!/bin/sh
#SBATCH -N 2
#SBATCH -n 4
exec "$ASRRUN" --bind-to none sh -c 'if [ "\$ASR_RANK" = 3 ]; then sleep 1; exit 7; fi; exec sleep 60'
EOS
client sbatch --wait -o "$log" "$base/fail.sh" >"$base/$case.submit" 2>&1
rc=$?
[ $rc = 7 ] || fail "sbatch --wait exit $rc, wanted the job's 7"
grep -q 'rank 3 on host n2 exited with status 7' "$log" || fail "no summary naming rank 3 and node n2"
check_clean
result "rank 3 exits 7 in a batch job: the job exits 7"

case=srun_direct_failing_rank failed=0 log=$base/$case.log
# a rank that dies before joining: the others wait in asr_job_init's fence
# until Slurm kills the step (-K, --kill-on-bad-exit)
client srun --mpi=pmix -K -N 2 -n 4 sh -c 'if [ "$SLURM_PROCID" = 3 ]; then exit 7; fi; exec "$0"' \
  "$EXAMPLES/pairwise" >"$log" 2>&1
rc=$?
# srun returns the highest exit status of its tasks, or 128+signal of those
# it killed: 143 (the others got SIGTERM) or 7 if none had to be killed
[ $rc = 7 ] || [ $rc = 143 ] || fail "exit $rc, wanted 7 or 143"
grep -q 'task 3: Exited with exit code 7' "$log" || fail "srun did not report task 3's exit code 7"
check_clean
result "rank 3 exits 7 under srun --mpi=pmix -K: the step ends, srun exits $rc"

case=srun_direct_abort failed=0 log=$base/$case.log
# The abort comes after a fence of all four ranks (--fence-first), i.e. once
# the step is up. Aborting straight after PMIx_Init failed once, in a
# clean-clone CI run (2026-12-01; not in 37 runs of the case alone, 25 of
# them with both CPUs kept busy): Slurm cancelled the step and killed tasks
# 0 and 2 on n1, but task 1 lived on until srun was signalled 120 s later
# (exit 124). Most likely a race inside Slurm between cancelling a step and
# starting its tasks; either way not what this case is about (an abort
# straight after start-up under asrrun is tests/netns abort_remote's).
client srun --mpi=pmix -N 2 -n 4 "$APPS/pmix_client" --abort 3:5 --fence-first >"$log" 2>&1
rc=$?
[ $rc = 5 ] || fail "exit $rc after PMIx_Abort(5)"
check_clean
result "PMIx_Abort(5) under srun ends the step, srun exits 5"

# MPI programs (tests/apps/mpi/mpi_job.c, built with each MPI's compiler)
# under salloc asrrun: 4 ranks on n1 and n2 in one job (the allreduce sums
# 1..4 over all of them).
for mpi in openmpi mpich; do
  case=salloc_mpi_$mpi failed=0 log=$base/$case.log
  cc=mpicc.$mpi
  if ! command -v "$cc" >/dev/null; then
    echo "SKIP: slurm/$case ($cc is not installed)"
    continue
  fi
  if ! "$cc" -o "$base/mpi_job_$mpi" "$here/../apps/mpi/mpi_job.c" >"$log" 2>&1; then
    fail "$cc failed"
    continue
  fi
  client salloc -N 2 -n 4 "$ASRRUN" --bind-to none "$base/mpi_job_$mpi" allreduce >"$log" 2>&1
  rc=$?
  [ $rc = 0 ] || fail "exit $rc"
  n=$(grep -c 'allreduce [0-3] of 4 sum 10$' "$log")
  [ "$n" = 4 ] || fail "$n of 4 ranks summed 10 in one job of 4"
  check_clean
  result "salloc -N 2 -n 4 asrrun $mpi allreduce: one job of 4 on n1 and n2"
done

# The tree of daemons under Slurm (launcher/tree/tree.h): at --tree-radix 1 the
# two nodes are a chain, asrrun -> n1 -> n2, and n2's asrd is an srun step
# that n1's asrd starts (inside its own step, in the same allocation); the
# fence data and output go n2 -> n1 -> asrrun.
case=salloc_tree_pairwise failed=0 log=$base/$case.log
client salloc -N 2 -n 4 "$ASRRUN" --tree-radix 1 --dry-run true >"$log" 2>&1
grep -q '^daemon tree: radix 1, depth 2:' "$log" || fail "--dry-run shows no tree of depth 2: $(grep tree "$log")"
client salloc -N 2 -n 4 "$ASRRUN" --tree-radix 1 --bind-to none "$EXAMPLES/pairwise" >"$log" 2>&1
rc=$?
[ $rc = 0 ] || fail "exit $rc"
verified "$log" 4
check_clean
result "salloc -N 2 asrrun --tree-radix 1 pairwise: n2's asrd an srun step of n1's, 4 ranks verified"

# n1's asrd, the interior daemon, killed: the job ends with 125 naming n1
# and n2 beneath it; n2's daemon loses its parent and ends its ranks.
case=salloc_tree_interior_killed failed=0 log=$base/$case.log
client salloc -N 2 -n 4 "$ASRRUN" --tree-radix 1 --bind-to none sleep 60 >"$log" 2>&1 &
job=$!
until=$((SECONDS + 30))
while [ "$(for ns in "${NODE_NS[@]}"; do netns_alive "$ns"; done | grep -c '(sleep)')" -lt 4 ] && ((SECONDS < until)); do
  sleep 0.1
done
pid=
for p in $(netns_alive "${NODE_NS[0]}" | grep '(asrd)' | cut -d'(' -f1); do
  # n1's asrd is the parent of the srun that runs n2's
  for c in $(pgrep -P "$p"); do [ "$(cat "/proc/$c/comm" 2>/dev/null)" = srun ] && pid=$p; done
done
if [ -z "$pid" ]; then
  fail "no asrd on n1 with an srun child (the ranks did not start, or n1's asrd did not start n2's)"
else
  kill -KILL "$pid"
fi
{ wait $job; } 2>/dev/null
rc=$?
[ $rc = 125 ] || fail "exit $rc, wanted 125"
grep -q 'asrd on host n1.*lost with it, the 1 host beneath it in the tree (n2)' "$log" ||
  fail "no line naming n1 and n2 beneath it"
check_clean
[ -n "$pid" ] && rm -rf /dev/shm/asrd."$pid".?????? /tmp/asrd."$pid".??????
result "kill -9 of n1's asrd (n2's parent): 125 naming n1 and n2, nothing left"

# The job's trace under Slurm (issue 52): asrrun --trace inside an
# allocation (each node's asrd an srun step), and a direct launch with
# ASR_TRACE=DIR merged afterwards by asrtrace merge; either file has every
# rank, every send's flow, and ranks on both nodes.
trace_ok() { # FILE: 4 ranks, 48 sends each with its flow, tracks on two hosts
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
ranks = sorted(p["rank"] for p in t["otherData"]["processes"] if p["kind"] == "rank")
sends = [e for e in ev if e["cat"] == "xfer" and e["name"] == "send" and e["args"]["ok"]]
flows = [e for e in ev if e["cat"] == "flow" and e["ph"] == "s"]
back = {e["id"]: e["ts"] for e in flows}
late = [e for e in ev if e["cat"] == "flow" and e["ph"] == "f" and e["ts"] < back.get(e["id"], 0)]
pids = {e["pid"] for e in sends}
if ranks != [0, 1, 2, 3] or len(sends) != 48 or len(flows) != 48 or late or len(pids) != 2:
    sys.exit("ranks %s, %d sends, %d flows, %d backwards, sends on %d hosts" % (ranks, len(sends), len(flows), len(late), len(pids)))
PY
}

case=salloc_trace failed=0 log=$base/$case.log
client salloc -N 2 -n 4 "$ASRRUN" --bind-to none --trace "$base/salloc_trace.json" "$APPS/trace_job" -m 4 >"$log" 2>&1
rc=$?
[ $rc = 0 ] || fail "exit $rc"
why=$(trace_ok "$base/salloc_trace.json" 2>&1) || fail "$why"
check_clean
result "salloc -N 2 -n 4 asrrun --trace: 4 ranks on n1 and n2, 48 sends and their flows"

case=srun_direct_trace failed=0 log=$base/$case.log
mkdir -p "$base/trace"
client env ASR_TRACE="$base/trace" srun --mpi=pmix -N 2 -n 4 "$APPS/trace_job" -m 4 >"$log" 2>&1
rc=$?
[ $rc = 0 ] || fail "exit $rc"
"$build/bin/asrtrace" merge "$base/trace" -o "$base/srun_trace.json" >>"$log" 2>&1 || fail "asrtrace merge failed"
why=$(trace_ok "$base/srun_trace.json" 2>&1) || fail "$why"
check_clean
result "srun --mpi=pmix with ASR_TRACE=DIR, then asrtrace merge: 4 ranks, 48 flows"
