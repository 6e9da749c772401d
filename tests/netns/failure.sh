#!/usr/bin/env bash
# tests/netns/failure.sh BUILD_DIR [RUNS [CASE...]] -- the failure policy
# (issue 50, asrrun --on-failure) across hosts: three emulated hosts
# (lib.sh), each case with the flat star of daemons and with a chain
# (--tree-radix 1: host 3's daemon is host 2's child, host 2's host 1's),
# RUNS times in a row (default 5, the issue's count for the default tier;
# its long tier runs 100). The job is tests/apps/pmix_ft, a plain libpmix
# client: every rank that lives must hear, within 5 s, PRRTE's event and
# asr's rank-state event of the rank that died, and say "ok".
# A case passes only if every run does; its first failing run is shown.
set -uo pipefail
build=$(cd "${1:?usage: failure.sh BUILD_DIR [RUNS [CASE...]]}" && pwd)
RUNS=${2:-5}
shift $(($# > 1 ? 2 : 1))
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
netns_suite "$build"

all=(remote_rank_killed_continue remote_rank_restarted restarted_rank_reconnects all_to_all_remote_killed
  host_lost_continue lone_rank_dies_fence middle_host_lost_continue host_silent_continue)
cases=("$@")
[ ${#cases[@]} = 0 ] && cases=("${all[@]}")

netns_cases_setup failure 3 "${cases[@]}"
H1=$(netns_host 1) H2=$(netns_host 2) H3=$(netns_host 3)
JOB_TIMEOUT=45

# oks N: exactly N ranks said ok.
oks() {
  local n; n=$(grep -c "pmix_ft rank [0-9]*: ok" "$out")
  [ "$n" = "$1" ] || bad "$n ranks said ok, wanted $1"
}

# rank 4 (host 2) dies of SIGKILL under continue: the 5 others hear of it
# and finish; the death is absorbed (exit 0) and the last line names it
remote_rank_killed_continue() {
  run_job "$out" $TREE --on-failure continue -H "$H1:2,$H2:2,$H3:2" "$APPS/pmix_ft" --kill 3 --fence 1
  local rc=$?
  [ $rc = 0 ] || bad "exit $rc, wanted 0"
  oks 5
  [ "$(grep -c "fence of 5 ranks: SUCCESS" "$out")" = 5 ] || bad "the others' fence did not complete"
  grep -q "PMIX_ERR_PROC_ABORTED_BY_SIG for rank 3" "$out" || bad "no PRRTE event for rank 3"
  grep -q "asr rank 3 is FAILED (incarnation 0): peer rank 3 on host $H2 died: killed by signal 9" "$out" ||
    bad "no asr event naming rank 3 on host $H2"
  tail -1 "$out" | grep -q "^asrrun: 1 failure, 0 restarts: rank 3 (host $H2, incarnation 0) killed by signal 9" ||
    bad "the last line is not the summary of rank 3's death"
}

# the same under restart: rank 3 comes back on host 2 as incarnation 1,
# and the others hear that it is alive again
remote_rank_restarted() {
  run_job "$out" $TREE --on-failure restart -H "$H1:2,$H2:2,$H3:2" "$APPS/pmix_ft" --kill 3 --expect-restart
  local rc=$?
  [ $rc = 0 ] || bad "exit $rc, wanted 0"
  oks 6
  grep -q "\[3\] pmix_ft rank 3: incarnation 1 up" "$out" || bad "rank 3's incarnation 1 did not come up"
  grep -q "asr rank 3 is ALIVE (incarnation 1)" "$out" || bad "nobody heard that rank 3 is alive again"
  tail -1 "$out" | grep -q "^asrrun: 1 failure, 1 restart: rank 3 (host $H2, incarnation 0) killed by signal 9.*restarted$" ||
    bad "the last line is not the summary of rank 3's restart"
}

# libasr (tests/apps/rank_fail, as tests/integration/test_rank_fail.c on one
# host): a 4-rank all-to-all, rank 3 on host 2 SIGKILLed mid-stream once every
# rank is READY; its host-2 neighbour (asr's sm path) and hosts 1's ranks
# (tcp;ofi_rxm) see their comms to it fail, verify every byte of their other
# comms, read it FAILED, get ASR_PEER_FAILED from the barrier, and finish;
# asrrun exits 0. The victim's messages stay eager on tcp (at most 8 KiB:
# test_rank_fail.c says why).
all_to_all_remote_killed() {
  # emptied here, not by the job's redirection: the loop below must never
  # read the READY lines of the case's previous run
  : >"$out"
  ip netns exec "$H1" timeout -k 5 60 "$ASRRUN" --launch-agent "ip netns exec" --timeout 45 $TREE \
    --on-failure continue -x RF_VICTIM_MSG=8192 -H "$H1:2,$H2:2" "$APPS/rank_fail" kill 3 >"$out" 2>&1 </dev/null &
  local job=$! t=0 victim
  while [ "$(grep -c ": READY pid " "$out")" -lt 4 ] && ((t < 300)) && kill -0 $job 2>/dev/null; do
    sleep 0.05; t=$((t + 1))
  done
  victim=$(sed -n 's/^\[3\] rank 3: READY pid \([0-9]*\).*/\1/p' "$out")
  if [ -n "$victim" ]; then kill -KILL "$victim"; else bad "rank 3 never said READY"; fi
  wait $job
  local rc=$?
  [ $rc = 0 ] || bad "exit $rc, wanted 0"
  local r
  for r in 0 1 2; do
    grep -q "^\[$r\] rank $r: DONE, [0-9]* messages verified" "$out" || bad "rank $r did not finish"
    grep -q "^\[$r\] rank $r: barrier ASR_PEER_FAILED" "$out" || bad "rank $r's barrier did not say ASR_PEER_FAILED"
  done
  grep -q "FAIL:" "$out" && bad "a rank failed a check"
  tail -1 "$out" | grep -q "^asrrun: 1 failure, 0 restarts: rank 3 (host $H2, incarnation 0) killed by signal 9" ||
    bad "the last line is not the summary of rank 3's death"
}

# rank 2, alone on host 2, dies: a fence of the others (PMIx_Fence_nb over
# the ranks still alive, as libasr's asr_job_barrier) must not wait for
# host 2, which has no rank alive -- in the chain host 2 still relays for
# host 3 below it
lone_rank_dies_fence() {
  run_job "$out" $TREE --on-failure continue -H "$H1:2,$H2:1,$H3:2" "$APPS/pmix_ft" --kill 2 --fence 1
  local rc=$?
  [ $rc = 0 ] || bad "exit $rc, wanted 0"
  oks 4
  [ "$(grep -c "fence of 4 ranks: SUCCESS" "$out")" = 4 ] || bad "the others' fence did not complete"
  grep -q "FENCE_DONE without a pending fence" "$out" && bad "a daemon was sent a fence it took no part in"
}

# libasr (tests/apps/restart_peer): rank 3 on host 2 dies twice and comes
# back in place; each time every other rank (its host-2 neighbour over
# asr's sm path, hosts 1 and 3 over tcp;ofi_rxm) sees its comms fail,
# connects again and moves verified data with the new incarnation
restarted_rank_reconnects() {
  run_job "$out" $TREE --on-failure restart -H "$H1:2,$H2:2,$H3:2" "$APPS/restart_peer" 3 2
  local rc=$?
  [ $rc = 0 ] || bad "exit $rc, wanted 0"
  local n; n=$(grep -c "restart_peer rank [0-9]*: ok" "$out")
  [ "$n" = 6 ] || bad "$n ranks said ok, wanted 6"
  [ "$(grep -c "incarnation 2: [0-9]* messages verified" "$out")" = 6 ] ||
    bad "not every rank moved data with incarnation 2"
  tail -1 "$out" | grep -q "^asrrun: 2 failures, 2 restarts: rank 3 (host $H2, incarnation 0)" ||
    bad "the last line is not the summary of rank 3's two restarts"
}

# rank 5 kills host 3's daemon: ranks 4 and 5 are lost with their host; the
# 4 others hear of them and finish (exit 0); the job does not end for it
host_lost_continue() {
  run_job "$out" $TREE --on-failure continue -H "$H1:2,$H2:2,$H3:2" "$APPS/pmix_ft" --kill 5 --kill-daemon \
    --fence 2
  local rc=$?
  [ $rc = 0 ] || bad "exit $rc, wanted 0"
  oks 4
  [ "$(grep -c "fence of 4 ranks: SUCCESS" "$out")" = 4 ] || bad "the others' fence did not complete"
  grep -q "asr rank 5 is FAILED (incarnation 0): peer rank 5 on host $H3 died: lost with its host" "$out" ||
    bad "no asr event naming rank 5 lost with host $H3"
  grep -q "aborting the job" "$out" && bad "a line says the job is aborted"
  tail -1 "$out" | grep -q "^asrrun: 2 failures, 0 restarts: rank 4 (host $H3, incarnation 0) lost with its host.*rank 5 (host $H3" ||
    bad "the last line is not the summary of host $H3's ranks"
}

# rank 3 kills host 2's daemon: in the flat star only host 2's ranks are
# lost; in the chain host 3 hangs below host 2 and is lost with it (its
# daemon loses its parent and ends its ranks); either way the job goes on
# and exits 0, and the ranks of host 1 hear of rank 3
middle_host_lost_continue() {
  run_job "$out" $TREE --on-failure continue -H "$H1:2,$H2:2,$H3:2" "$APPS/pmix_ft" --kill 3 --kill-daemon
  local rc=$?
  [ $rc = 0 ] || bad "exit $rc, wanted 0"
  grep -q "\[0\] pmix_ft rank 0: ok" "$out" && grep -q "\[1\] pmix_ft rank 1: ok" "$out" ||
    bad "a rank of host 1 did not finish"
  if [ -z "$TREE" ]; then
    oks 4
    tail -1 "$out" | grep -q "^asrrun: 2 failures, 0 restarts: rank 2 (host $H2, incarnation 0) lost with its host" ||
      bad "the last line is not the summary of host $H2's two ranks"
  else
    oks 2
    tail -1 "$out" | grep -q "^asrrun: 4 failures, 0 restarts: .*rank 5 (host $H3, incarnation 0) lost with its host" ||
      bad "the last line is not the summary of hosts $H2 and $H3's four ranks"
  fi
}

# rank 5 stops host 3's daemon and itself (SIGSTOP): the host falls silent
# and is lost after --heartbeat-timeout 2; the 4 others hear of ranks 4
# and 5 within pmix_ft's 5 s and finish (exit 0)
host_silent_continue() {
  run_job "$out" $TREE --on-failure continue --heartbeat-timeout 2 -H "$H1:2,$H2:2,$H3:2" "$APPS/pmix_ft" \
    --kill 5 --stop-daemon
  local rc=$?
  [ $rc = 0 ] || bad "exit $rc, wanted 0"
  oks 4
  grep -q "asr rank 4 is FAILED (incarnation 0): peer rank 4 on host $H3 died: lost with its host" "$out" ||
    bad "no asr event naming rank 4 lost with host $H3"
  grep -q "^asrrun: lost contact with asrd on host $H3: nothing heard for 2 s (host down or network cut?)" "$out" ||
    bad "no line saying host $H3 fell silent"
  grep -q "aborting the job" "$out" && bad "a line says the job is aborted"
}

netns_run_cases failure "$RUNS" "${cases[@]}"
