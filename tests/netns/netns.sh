#!/usr/bin/env bash
# tests/netns/netns.sh BUILD_DIR -- multi-host tests on emulated hosts.
#
# Three hosts are network namespaces on a bridge (lib.sh), 198.18.0.1-3.
# asrrun runs on host 1 and starts every host's asrd with the launch agent
# "ip netns exec" (the rsh backend; the namespace name is the host name).
# Each case prints PASS/FAIL/SKIP; every case checks that no process of the
# job is left in any namespace, and the namespaces are removed at the end
# even when a case fails or the script is interrupted.
set -uo pipefail
build=$(cd "${1:?usage: netns.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
netns_suite "$build"

cases=(pairwise_3x4 pmix_client_fence output_order failing_rank_remote abort_remote asrd_killed
  link_down asrrun_killed if_include_subnet if_include_bad agent_fails agent_missing pbs_nodefile mpi_openmpi_hosts
  mpi_mpich_hosts pmi2_hosts torch_gloo_hosts stall_missing_accept_hosts stall_missing_receive_hosts
  stall_barrier_hosts stall_on_demand_hosts paths_2x4 paths_forced_tcp paths_kill_mid_transfer
  rma_across_hosts trace_clocks)

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  for c in "${cases[@]}"; do echo "SKIP: netns/$c (needs root and iproute2 to create network namespaces)"; done
  exit 0
fi
if ! netns_setup 3; then
  for c in "${cases[@]}"; do echo "SKIP: netns/$c (network namespaces cannot be created on this machine)"; done
  exit 0
fi
H1=$(netns_host 1) H2=$(netns_host 2) H3=$(netns_host 3)
HOSTS="$H1:4,$H2:4,$H3:4"

# run_job OUT ARGS...: asrrun on host 1 with the agent; stdout+stderr to OUT.
run_job() {
  local out=$1; shift
  ip netns exec "$H1" timeout -k 5 120 "$ASRRUN" --launch-agent "ip netns exec" --timeout 90 "$@" \
    >"$out" 2>&1 </dev/null
}

fail() { echo "FAIL: netns/$case: $*"; tail -15 "$out" | sed 's/^/    /'; failed=1; }

# Every case ends here: nothing of the job may be left on any host.
check_clean() {
  if ! netns_wait_empty "${1:-15}"; then
    fail "processes left behind: $(netns_leftovers | tr '\n' ' ')"
    netns_teardown_procs
  fi
}
netns_teardown_procs() {
  local h p
  for h in "${NETNS_HOSTS[@]}"; do for p in $(netns_pids "$h"); do kill -KILL "$p" 2>/dev/null; done; done
}

# wait_for N NS PROG SECONDS: until NS has N live processes named PROG.
wait_for() {
  local until=$((SECONDS + $4))
  while [ "$(netns_alive "$2" | grep -c "($3)")" -lt "$1" ]; do
    ((SECONDS < until)) || return 1
    sleep 0.1
  done
}

result() { [ "$failed" = 0 ] && echo "PASS: netns/$case ($1)"; }

case=pairwise_3x4 failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" "$EXAMPLES/pairwise"
rc=$?
[ $rc = 0 ] || fail "exit $rc"
n=$(grep -c 'all verified' "$out")
[ "$n" = 12 ] || fail "$n of 12 ranks verified their data"
for k in 1 2 3; do
  grep -q "host $(netns_host $k), lnc 3" "$out" || fail "no rank reported host $(netns_host $k) LNC 3"
done
grep -q 'one-way latency' "$out" || fail "no latency line"
check_clean
result "12 ranks on 3 hosts, every pair verified"

case=pmix_client_fence failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" "$APPS/pmix_client"
rc=$?
[ $rc = 0 ] || fail "exit $rc"
n=$(grep -c 'rank .* ok' "$out")
[ "$n" = 12 ] || fail "$n of 12 ranks read every key after the cross-host fence"
check_clean
result "libpmix put/commit/fence/get across 3 daemons"

case=output_order failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" sh -c 'i=0; while [ $i -lt 300 ]; do echo "r=$ASR_RANK h=$ASR_HOSTNAME i=$i"; i=$((i+1)); done'
rc=$?
[ $rc = 0 ] || fail "exit $rc"
for r in $(seq 0 11); do
  # every line whole and tagged, in the order the rank wrote it
  got=$(grep "^\[$r\] r=$r h=" "$out" | sed 's/.* i=//' | tr '\n' ' ')
  want=$(seq 0 299 | tr '\n' ' ')
  [ "$got" = "$want" ] || { fail "rank $r's lines are missing, torn or out of order"; break; }
done
n=$(grep -vc '^\[[0-9]*\] r=[0-9]* h=asr[0-9]*h[123] i=[0-9]*$' "$out")
[ "$n" = 0 ] || fail "$n lines are not whole tagged lines"
check_clean
result "3600 lines from 3 hosts, whole, tagged, in order per rank"

case=failing_rank_remote failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" sh -c 'if [ "$ASR_RANK" = 9 ]; then sleep 1; exit 3; fi; exec sleep 60'
rc=$?
[ $rc = 3 ] || fail "exit $rc, wanted 3"
grep -q "rank 9 on host $H3 exited with status 3" "$out" || fail "no summary naming rank 9 and host $H3"
check_clean
result "exit 3 from rank 9 on $H3 ends the job with 3"

# which rank is named when several end together: verdict.sh

case=abort_remote failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" "$APPS/pmix_client" --abort 6:5
rc=$?
[ $rc = 5 ] || fail "exit $rc, wanted 5"
grep -q "rank 6 on host $H2 called abort with status 5" "$out" || fail "no summary naming rank 6 and $H2"
check_clean
result "PMIx_Abort(5) on $H2 reaches every host"

case=asrd_killed failed=0 out=$work/$case
t0=$(date +%s%N)
run_job "$out" -H "$HOSTS" sleep 60 &
job=$!
if wait_for 4 "$H3" sleep 30; then
  pid=$(netns_alive "$H3" | grep '(asrd)' | cut -d'(' -f1)
  t0=$(date +%s%N)
  kill -KILL $pid
else
  fail "the ranks on $H3 did not start"
fi
{ wait $job; } 2>/dev/null
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 125 ] || fail "exit $rc, wanted 125"
grep -q "asrd on host $H3 died" "$out" || grep -q "connection to asrd on host $H3" "$out" ||
  fail "no summary naming host $H3"
((ms < 15000)) || fail "the job took $ms ms to end"
check_clean
# A SIGKILLed asrd cannot remove its PMIx directory; the test that killed it does.
[ -n "${pid:-}" ] && rm -rf /dev/shm/asrd."$pid".?????? /tmp/asrd."$pid".??????
result "kill -9 of asrd on $H3: exit 125 after $ms ms"

case=link_down failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" --heartbeat-timeout 3 sleep 60 &
job=$!
if wait_for 4 "$H3" sleep 30; then
  t0=$(date +%s%N)
  ip -n "$H3" link set asr0 down
else
  fail "the ranks on $H3 did not start"
fi
{ wait $job; } 2>/dev/null
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 125 ] || fail "exit $rc, wanted 125"
grep -q "lost contact with asrd on host $H3" "$out" || fail "no summary naming host $H3"
# a daemon given up on is not waited for at the job's end (asrrun kills its agent)
! grep -q "did not end within" "$out" || fail "asrrun waited for the lost daemon: $(grep "did not end within" "$out")"
((ms < 20000)) || fail "the job took $ms ms to end"
# the cut-off host cleans itself: its asrd hears nothing and kills its ranks
check_clean 20
ip -n "$H3" link set asr0 up
result "veth of $H3 down: exit 125 after $ms ms, every host clean"

case=asrrun_killed failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" sleep 60 &
job=$!
if wait_for 4 "$H2" sleep 30 && wait_for 4 "$H3" sleep 30; then
  pid=$(netns_alive "$H1" | grep '(asrrun)' | cut -d'(' -f1)
  kill -KILL $pid
else
  fail "the ranks did not start"
fi
{ wait $job; } 2>/dev/null
# daemons that lose asrrun kill their ranks and exit
check_clean 15
result "kill -9 of asrrun: every daemon killed its ranks and exited"

case=if_include_subnet failed=0 out=$work/$case
run_job "$out" -H "$H2:2,$H3:2" --if-include 198.18.0.0/24 "$EXAMPLES/pairwise"
rc=$?
[ $rc = 0 ] || fail "exit $rc"
n=$(grep -c 'all verified' "$out")
[ "$n" = 4 ] || fail "$n of 4 ranks verified"
check_clean
result "--if-include 198.18.0.0/24 on hosts other than asrrun's"

case=if_include_bad failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" --if-include nosuch0 true
rc=$?
[ $rc = 125 ] || fail "exit $rc, wanted 125"
grep -q "nosuch0" "$out" || fail "the error does not name the interface"
grep -q "asr0 198.18.0" "$out" || fail "the error does not list the host's interfaces"
check_clean
result "an --if-include that matches nothing is a clear error"

case=agent_fails failed=0 out=$work/$case
run_job "$out" -H "$HOSTS" --launch-agent false true
rc=$?
[ $rc = 125 ] || fail "exit $rc, wanted 125"
grep -q "launch agent for host" "$out" || fail "the error does not name the launch agent"
check_clean
result "a launch agent that fails is a clear error"

case=agent_missing failed=0 out=$work/$case
# an agent that cannot be executed at all: asrrun says which and why (the
# vfork child cannot print; launch_agent.c reports its exec's errno)
run_job "$out" -H "$HOSTS" --launch-agent "$work/no-such-agent" true
rc=$?
[ $rc = 125 ] || fail "exit $rc, wanted 125"
grep -q "cannot execute '$work/no-such-agent': No such file or directory" "$out" ||
  fail "the error does not name the agent and why it cannot run"
grep -q "launch agent for host" "$out" || fail "the error does not name the launch agent"
check_clean
result "a launch agent that cannot be executed is a clear error"

case=pbs_nodefile failed=0 out=$work/$case
# a PBS/Torque job's node file: one line per slot, hosts in first-seen order
printf '%s\n' "$H2" "$H3" "$H2" "$H3" "$H3" >"$work/nodefile"
PBS_NODEFILE=$work/nodefile run_job "$out" "$EXAMPLES/pairwise"
rc=$?
[ $rc = 0 ] || fail "exit $rc"
n=$(grep -c 'all verified' "$out")
[ "$n" = 5 ] || fail "$n of 5 ranks verified"
grep -q "rank 1 (host $H2, lnc 1)" "$out" || fail "rank 1 is not on $H2 LNC 1 (2 slots there)"
grep -q "rank 4 (host $H3, lnc 2)" "$out" || fail "rank 4 is not on $H3 LNC 2 (3 slots there)"
check_clean
result "\$PBS_NODEFILE as the host list: 2 slots on $H2, 3 on $H3"

# MPI programs across hosts: tests/apps/mpi/mpi_job.c built with each MPI's
# compiler; 6 ranks on 3 hosts in one job (the allreduce's sum proves it),
# Open MPI's TCP on the job's network and its shared memory per emulated host.
for mpi in openmpi mpich; do
  case=mpi_${mpi}_hosts failed=0 out=$work/$case
  cc=mpicc.$mpi
  if ! command -v "$cc" >/dev/null; then
    echo "SKIP: netns/$case ($cc is not installed: apt-get install $([ $mpi = mpich ] && echo mpich libmpich-dev || echo openmpi-bin libopenmpi-dev))"
    continue
  fi
  if ! "$cc" -o "$work/mpi_job_$mpi" "$here/../apps/mpi/mpi_job.c" >"$out.cc" 2>&1; then
    fail "$cc failed: $(tail -3 "$out.cc" | tr '\n' ' ')"
    continue
  fi
  run_job "$out" -H "$H1:2,$H2:2,$H3:2" "$work/mpi_job_$mpi" allreduce
  rc=$?
  [ $rc = 0 ] || fail "exit $rc"
  n=$(grep -c 'allreduce [0-5] of 6 sum 21$' "$out")
  [ "$n" = 6 ] || fail "$n of 6 ranks summed 21 in one job of 6"
  check_clean
  result "$mpi allreduce: 6 ranks on 3 hosts in one job"
done

# PMI-2 across hosts: tests/apps/mpi/pmi2_job.c against Slurm's PMI-2
# client library; 6 ranks on 3 hosts put, fence and get every rank's key
# (the fence crosses hosts through asrrun), and the first rank of each host
# gives its host's ranks a node attribute of their own host only.
case=pmi2_hosts failed=0 out=$work/$case
if [ ! -r /usr/include/slurm/pmi2.h ]; then
  echo "SKIP: netns/$case (Slurm's PMI-2 client library is not installed: apt-get install libpmi2-0-dev)"
elif ! cc -o "$work/pmi2_job" "$here/../apps/mpi/pmi2_job.c" -lpmi2 >"$out.cc" 2>&1; then
  fail "cc -lpmi2 failed: $(tail -3 "$out.cc" | tr '\n' ' ')"
else
  run_job "$out" -H "$H1:2,$H2:2,$H3:2" "$work/pmi2_job" exchange
  rc=$?
  [ $rc = 0 ] || fail "exchange: exit $rc"
  n=$(grep -c 'exchange [0-5] of 6 ok$' "$out")
  [ "$n" = 6 ] || fail "$n of 6 ranks got every rank's key"
  run_job "$out.node" -H "$H1:2,$H2:2,$H3:2" "$work/pmi2_job" nodeattr
  rc=$?
  [ $rc = 0 ] || fail "nodeattr: exit $rc"
  for r in 0 1 2 3 4 5; do
    grep -q "^\[$r\] nodeattr $r got hi-from-$((r / 2 * 2))$" "$out.node" || fail "rank $r did not get its host's attribute"
  done
  check_clean
  result "PMI-2 (Slurm's libpmi2): 6 ranks on 3 hosts, keys fenced across hosts, node attributes per host"
fi

# torch.distributed across hosts as under torchrun: examples/torch_slice.py
# (a tensor slice through libasr, then a gloo all_reduce that finds the job
# through RANK, WORLD_SIZE, MASTER_ADDR/PORT and GLOO_SOCKET_IFNAME) with
# one rank on each of two hosts.
case=torch_gloo_hosts failed=0 out=$work/$case
if ! ls "$build"/python/asr.*so >/dev/null 2>&1 || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "SKIP: netns/$case (no Python module in $build, or no python3-torch)"
else
  PYTHONPATH=$build/python run_job "$out" -H "$H2:1,$H3:1" --if-include 198.18.0.0/24 \
    /usr/bin/python3 "$here/../../examples/torch_slice.py"
  rc=$?
  [ $rc = 0 ] || fail "exit $rc"
  grep -q '^\[1\] rank 1: got 4000 bytes: elements 1000..1999$' "$out" || fail "rank 1 did not get the slice"
  n=$(grep -c 'all_reduce -> \[3.0, 3.0, 3.0, 3.0\]$' "$out")
  [ "$n" = 2 ] || fail "$n of 2 ranks all_reduced to 3.0"
  check_clean
  result "torch slice and gloo all_reduce across 2 hosts (torchrun's variables)"
fi

# --- stuck jobs across hosts: the state report's diagnosis (issue 24) -------------
STALL=$APPS/stall
# has_line TEXT: the report has this diagnosis line, whole (fixed text)
has_line() { grep -qxF "asrrun:   $1" "$out"; }
# has_line_s HEAD TAIL: a diagnosis line HEAD<seconds>TAIL
has_line_s() {
  local l
  l=$(grep -F "asrrun:   $1" "$out" | head -1)
  [ -n "$l" ] || return 1
  l=${l#"asrrun:   $1"}
  [[ $l =~ ^[0-9]+(.*)$ ]] && [ "${BASH_REMATCH[1]}" = "$2" ]
}

# asrrun_below PID: the asrrun among PID's descendants (by parent, a few
# levels: the job's subshell, ip netns exec / timeout, asrrun).
asrrun_below() {
  local level c parents=$1 next
  for level in 1 2 3 4; do
    next=
    for p in $parents; do
      for c in $(pgrep -P "$p"); do
        [ "$(cat "/proc/$c/comm" 2>/dev/null)" = asrrun ] && { echo "$c"; return 0; }
        next="$next $c"
      done
    done
    parents=$next
  done
  return 1
}

# stuck_job OUT WANT ARGS...: the stuck job ARGS on host 1 with the agent, in
# the background, asked with asrrun --status until its report has WANT (a
# fixed text; a request counts as stuck after ASRRUN_STALL_MS), at most 60
# s; the last report to OUT, the job's own output to OUT.job. Then the job
# is ended (SIGTERM): it would never end by itself. Returns 1 when no report
# had WANT. (The report on --timeout across hosts: stall_barrier_hosts.)
stuck_job() {
  local out=$1 want=$2 job pid="" until=$((SECONDS + 60)) rc=1
  shift 2
  run_job "$out.job" "$@" &
  job=$!
  while [ -z "$pid" ] && ((SECONDS < until)); do pid=$(asrrun_below $job) || sleep 0.1; done
  while [ -n "$pid" ] && ((SECONDS < until)); do
    if ip netns exec "$H1" "$ASRRUN" --status "$pid" >"$out" 2>&1 && grep -qF "$want" "$out"; then
      rc=0
      break
    fi
    sleep 0.3
  done
  [ -n "$pid" ] && kill -TERM "$pid"
  { wait $job; } 2>/dev/null
  return $rc
}

# Rank 0 on host 1 connects to rank 1 on host 2, which never accepts: the
# SEND comm waits for its handle key on host 2's KV server.
case=stall_missing_accept_hosts failed=0 out=$work/$case
stuck_job "$out" " s in WAIT_FOR_NET_HANDLE_GET for " -H "$H1:1,$H2:1" "$STALL" accept ||
  fail "no report of the stuck connect within 60 s: $(tail -3 "$out.job" | tr '\n' ' ')"
has_line_s "rank 0 lnc 0 SEND comm to rank 1 lnc 0 waits " \
  " s in WAIT_FOR_NET_HANDLE_GET for handle-<send 0><recv 0><host $H1> on $H2: rank 1 never called asr_accept for rank 0" ||
  fail "no missing-accept line"
grep -qF "asrrun:   handle-<send 0><recv 0><host $H1> on $H2 (198.18.0.2:" "$out" || fail "the key is not listed as unset"
grep -qF "asrrun: host $H2:" "$out" || fail "no block for host $H2"
check_clean
result "a missing accept across hosts: the key and the host asked"

# 4 MiB sends from host 1 to host 2, where no receive is posted.
case=stall_missing_receive_hosts failed=0 out=$work/$case
stuck_job "$out" "rank 0 has 4 sends to rank 1 posted for " -H "$H1:1,$H2:1" "$STALL" recv 4194304 ||
  fail "no report of the stuck sends within 60 s: $(tail -3 "$out.job" | tr '\n' ' ')"
has_line_s "rank 0 has 4 sends to rank 1 posted for " " s; rank 1 posted 0 receives on that comm" ||
  fail "no missing-receive line"
check_clean
result "a missing receive across hosts: the counts of the two halves"

# Three hosts, the last rank never joins the barrier.
case=stall_barrier_hosts failed=0 out=$work/$case
run_job "$out" -H "$H1:1,$H2:1,$H3:1" --timeout 8 --report-state-on-timeout "$STALL" barrier
rc=$?
[ $rc = 124 ] || fail "exit $rc, wanted 124"
grep -qE "^asrrun:   ranks 0-1 are in asr_job_barrier; rank 2 never joined it: it is S \(sleeping\).* outside libasr$" \
  "$out" || fail "no barrier line"
check_clean
result "a barrier one rank on another host never joins"

# SIGQUIT to asrrun while ranks on two hosts exchange data: the report, and
# the job goes on and ends 0 once told to stop (the stall app's STOP file);
# asrrun --status from another process meanwhile.
case=stall_on_demand_hosts failed=0 out=$work/$case
rm -f "$work/stop"
run_job "$out" -H "$H1:1,$H2:1" "$STALL" run 60 "$work/stop" &
job=$!
until=$((SECONDS + 90))
while ! grep -q 'rank 1: running' "$out" 2>/dev/null && ((SECONDS < until)); do sleep 0.1; done
pid=$(asrrun_below $job)
if [ -z "$pid" ] || ! grep -q 'rank 1: running' "$out"; then
  fail "the job did not start"
else
  kill -QUIT "$pid"
  until=$((SECONDS + 30))
  while ! grep -q 'asrrun: end of state report' "$out" && ((SECONDS < until)); do sleep 0.1; done
  grep -qF "state report (SIGQUIT)" "$out" || fail "no report on SIGQUIT"
  grep -qF "comm lnc 0 SEND #0 to rank 1 (198.18.0.2 lnc 0): CONNECTED" "$out" || fail "no connected SEND comm"
  ip netns exec "$H1" "$ASRRUN" --status "$pid" >"$out.status" 2>&1 || fail "asrrun --status failed"
  grep -qF "comm lnc 0 RECV #0 from rank 0 (198.18.0.1 lnc 0): CONNECTED" "$out.status" ||
    fail "asrrun --status: no connected RECV comm: $(tail -3 "$out.status" | tr '\n' ' ')"
fi
touch "$work/stop" # rank 0 ends the exchange; every rank finalizes
{ wait $job; } 2>/dev/null
rc=$?
[ $rc = 0 ] || fail "exit $rc, wanted 0"
[ "$(grep -c 'rank [01]: done' "$out")" = 2 ] || fail "the ranks did not finish"
check_clean
result "the report on demand across hosts (SIGQUIT, --status), then the job ends normally"

# Per-peer paths (issue 23): 2 hosts x 4 LNCs. Each comm's provider must be
# sm (asr's own path) between two ranks of one host and tcp;ofi_rxm across (pairwise -v
# prints it per peer: asr_comm_provider), every pair verified; then with
# ASR_PROVIDER=tcp;ofi_rxm, every comm on tcp; then a rank killed
# mid-transfer on each path.
# check_paths OUT WANT_SAME WANT_OTHER: every one of the 56 ordered pairs
# reported, both comms on the provider its hosts call for.
check_paths() {
  local out=$1 same=$2 other=$3 bad n
  n=$(grep -c 'all verified' "$out")
  [ "$n" = 8 ] || fail "$n of 8 ranks verified their data"
  n=$(grep -c '^\[[0-9]*\] rank [0-9]* (host [^)]*) peer [0-9]*: send ' "$out")
  [ "$n" = 56 ] || fail "$n of 56 per-peer provider lines"
  # rank -> host, from each rank's own line; then every pair's providers
  bad=$(awk -v same="$same" -v other="$other" '
    /^\[[0-9]+\] rank [0-9]+ \(host [^)]*\) peer [0-9]+: send / {
      r = $3; h = $5; sub(/\)$/, "", h); p = $7; sub(/:$/, "", p)
      host[r] = h; s[r "," p] = $9; v[r "," p] = $11; sub(/,$/, "", s[r "," p]); pairs[r "," p] = 1
    }
    END {
      for (k in pairs) {
        split(k, a, ","); want = host[a[1]] == host[a[2]] ? same : other
        if (s[k] != want || v[k] != want) print "rank " a[1] " -> " a[2] ": send " s[k] ", recv " v[k] ", wanted " want
      }
    }' "$out" | head -3)
  [ -z "$bad" ] || fail "$bad"
}

case=paths_2x4 failed=0 out=$work/$case
run_job "$out" -H "$H1:4,$H2:4" -x ASR_LOG_LEVEL=info "$EXAMPLES/pairwise" -v -s 65536 -n 200 -p 1 -p 4
rc=$?
[ $rc = 0 ] || fail "exit $rc"
check_paths "$out" sm 'tcp;ofi_rxm'
grep -q 'rank 0 <-> rank 1: one-way latency .*provider sm)' "$out" || fail "no same-host (sm) latency line"
grep -q 'rank 0 <-> rank 4: one-way latency .*provider tcp;ofi_rxm)' "$out" || fail "no cross-host latency line"
# ASR_LOG_LEVEL=info: one line per comm naming its path
n=$(grep -c 'comm .* provider sm (local path: same host identity)' "$out")
[ "$n" = 48 ] || fail "$n of 48 info lines name a comm's sm path"
n=$(grep -c 'comm .* provider tcp;ofi_rxm (network path: another host)' "$out")
[ "$n" = 64 ] || fail "$n of 64 info lines name a comm's network path"
check_clean
result "8 ranks on 2 hosts, 56 pairs verified, sm within a host, tcp;ofi_rxm across"

case=paths_forced_tcp failed=0 out=$work/$case
run_job "$out" -H "$H1:4,$H2:4" -x 'ASR_PROVIDER=tcp;ofi_rxm' "$EXAMPLES/pairwise" -v -s 65536 -n 50
rc=$?
[ $rc = 0 ] || fail "exit $rc"
check_paths "$out" 'tcp;ofi_rxm' 'tcp;ofi_rxm'
check_clean
result "ASR_PROVIDER=tcp;ofi_rxm puts all 56 pairs on tcp;ofi_rxm"

# A rank killed mid-transfer, on each path: rank 0 (host 1) ping-pongs with
# rank 1 (host 1, sm) or rank 4 (host 2, tcp) without end; the victim is
# SIGKILLed: the job ends 137 naming it, nothing is left on any host (no
# process, no shared-memory region of the job's ranks: libfabric shm's
# <pid>:<uid>:<n> or the sm path's asrsm:<pid>:...).
case=paths_kill_mid_transfer failed=0 out=$work/$case
for victim in 1 4; do
  vh=$H1; [ $victim = 4 ] && vh=$H2
  run_job "$out.$victim" -H "$H1:4,$H2:4" --map-by slot "$EXAMPLES/pairwise" -s 65536 -n 100000000 -p $victim &
  job=$!
  until=$((SECONDS + 60))
  while ! grep -q 'all verified' "$out.$victim" 2>/dev/null && ((SECONDS < until)); do sleep 0.1; done
  sleep 0.5 # the ping-pong is under way
  # the victim: the pairwise process of rank $victim, by its environment
  pid=
  for p in $(netns_pids "$vh"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = pairwise ] || continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "ASR_RANK=$victim" && pid=$p
  done
  if [ -z "$pid" ]; then
    fail "rank $victim's process not found on $vh"
  else
    kill -KILL "$pid"
  fi
  { wait $job; } 2>/dev/null
  rc=$?
  out=$out.$victim
  [ $rc = 137 ] || fail "killing rank $victim: exit $rc, wanted 137"
  grep -q "rank $victim on host $vh was killed by signal 9" "$out" || fail "no summary naming rank $victim"
  check_clean
  left=$(ls /dev/shm 2>/dev/null | grep -c -e "^$pid:" -e "^asrsm:$pid:" || true)
  [ "$left" = 0 ] || fail "rank $victim's shared-memory region is left in /dev/shm"
  out=$work/$case
done
result "rank 1 (sm peer) and rank 4 (tcp peer) killed mid-transfer: the job ends 137, nothing left"

# One-sided transfers across hosts (issue 51): rank 0 (host 2) writes 64
# blocks with a notification each into rank 1's (host 3) registered memory
# over tcp;ofi_rxm, reads them back, and a write after the owner's
# deregistration fails at the writer and never lands (the owner's provider
# refuses the revoked key: no table to check across hosts).
case=rma_across_hosts failed=0 out=$work/$case
run_job "$out" -H "$H2:1,$H3:1" --if-include 198.18.0.0/24 "$APPS/rma_job" 64 65536
rc=$?
[ $rc = 0 ] || fail "exit $rc"
grep -q 'rma_job: rank 0 wrote 64 blocks to rank 1 (tcp;ofi_rxm), verified' "$out" || fail "no verified line over tcp"
grep -q 'rma_job: rank 1 revoked, untouched' "$out" || fail "no revocation line"
check_clean
result "64 notifying writes and a read back across hosts over tcp;ofi_rxm; a revoked key refused"

# The trace across hosts whose clocks differ (issue 52): each host's asrd,
# and so its ranks, runs in a time namespace of its own (time_agent.sh:
# CLOCK_MONOTONIC 300, 1000 and 2500 s ahead; asrrun's is the machine's).
# The merged file must give each host's offset within the error it states,
# and no send's flow may end before it starts.
case=trace_clocks failed=0 out=$work/$case
ip netns exec "$H1" timeout -k 5 150 "$ASRRUN" --launch-agent "$here/time_agent.sh $NETNS_PREFIX" --timeout 120 \
  -H "$H1:2,$H2:2,$H3:2" --if-include 198.18.0.0/24 --trace "$work/trace.json" "$APPS/trace_job" -m 8 \
  >"$out" 2>&1 </dev/null
rc=$?
[ $rc = 0 ] || fail "exit $rc"
if [ -s "$work/trace.json" ]; then
  why=$(/usr/bin/python3 - "$work/trace.json" "$H1" "$H2" "$H3" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
want = {sys.argv[2]: 300e9, sys.argv[3]: 1000e9, sys.argv[4]: 2500e9}
od = t["otherData"]
if od["clock"] != "asrrun":
    sys.exit("clock %r" % od["clock"])
hosts = {h["name"]: h for h in od["hosts"]}
for name, off in want.items():
    h = hosts.get(name)
    if not h or h["error_ns"] < 0 or abs(h["offset_ns"] - off) > h["error_ns"]:
        sys.exit("host %s: offset %s, error %s, true %d" % (name, h and h["offset_ns"], h and h["error_ns"], off))
s = {e["id"]: e for e in t["traceEvents"] if e["cat"] == "flow" and e["ph"] == "s"}
f = {e["id"]: e for e in t["traceEvents"] if e["cat"] == "flow" and e["ph"] == "f"}
sends = [e for e in t["traceEvents"] if e["cat"] == "xfer" and e["name"] == "send" and e["args"]["ok"]]
if len(s) != len(sends) or set(s) != set(f) or len(sends) != 6 * 5 * 8:
    sys.exit("%d flows for %d sends (%d expected)" % (len(s), len(sends), 6 * 5 * 8))
across = [i for i in s if s[i]["pid"] != f[i]["pid"]]
back = [i for i in s if f[i]["ts"] < s[i]["ts"]]
if not across or back:
    sys.exit("%d flows across hosts, %d end before they start" % (len(across), len(back)))
print("errors %s us; the pings' alone %s us" % (", ".join("%.1f" % (hosts[n]["error_ns"] / 1e3) for n in want),
      ", ".join("%.1f" % (hosts[n]["measured_error_ns"] / 1e3) for n in want)))
PY
  ) || fail "$why"
else
  fail "no trace file"
fi
check_clean
result "3 hosts in their own time namespaces: offsets within the stated error (${why:-?}), no flow backwards"
