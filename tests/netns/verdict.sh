#!/usr/bin/env bash
# tests/netns/verdict.sh BUILD_DIR [RUNS [CASE...]] -- which rank asrrun
# names when ranks on several hosts end together (doc/design.md, "Verdicts
# by cause"), on three emulated hosts (lib.sh), each case with the flat star
# of daemons and with a chain (--tree-radix 1: host 3's daemon is host 2's
# child, host 2's host 1's), RUNS times in a row (default 1). The suite
# runs it once; the issue's loops are e.g.
#   (while :; do :; done) & (while :; do :; done) & \
#     tests/netns/verdict.sh build 500 killed_rank_remote_others_leave killed_remote_socket
# A case passes only if every run does; its first failing run is shown.
set -uo pipefail
build=$(cd "${1:?usage: verdict.sh BUILD_DIR [RUNS [CASE...]]}" && pwd)
RUNS=${2:-1}
shift $(($# > 1 ? 2 : 1))
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
netns_suite "$build"

all=(killed_rank_remote_others_leave killed_remote_socket leaver_remote all_leave_remote)
cases=("$@")
[ ${#cases[@]} = 0 ] && cases=("${all[@]}")

netns_cases_setup verdict 3 "${cases[@]}"
H1=$(netns_host 1) H2=$(netns_host 2) H3=$(netns_host 3)

# Each case: one run, with the tree arguments in $TREE; bad() says why it failed.

# rank 5 (host 2) dies of SIGKILL; the others' barrier fails and they
# leave (exit 0 without finalizing), those on hosts 1 and 3 maybe told
# before host 2's daemon tells the death: 137 naming rank 5, not a leaver
killed_rank_remote_others_leave() {
  run_job "$out" $TREE -H "$H1:4,$H2:4,$H3:4" "$APPS/early_exit" killed 5
  local rc=$?
  [ $rc = 137 ] || bad "exit $rc, wanted 137"
  grep -q "rank 5 on host $H2 was killed by signal 9" "$out" || bad "no summary naming rank 5 and host $H2"
  grep -q "exited with status 0 after joining" "$out" && bad "a leaver was taken for the cause"
}

# rank 2, alone on host 2, dies of SIGKILL; the ranks on hosts 1 and 3 see
# its TCP connections close and leave, without its daemon's help: their
# daemons may tell that before host 2's tells the death (or the job's abort
# may come first): 137 naming rank 2
killed_remote_socket() {
  rm -f "$work/port"
  run_job "$out" $TREE -H "$H1:2,$H2:1,$H3:2" "$APPS/killed_peer" socket 2 "$work"
  local rc=$?
  [ $rc = 137 ] || bad "exit $rc, wanted 137"
  grep -q "rank 2 on host $H2 was killed by signal 9" "$out" || bad "no summary naming rank 2 and host $H2"
  grep -q "exited with status 0 after joining" "$out" && bad "a leaver was taken for the cause"
}

# the other way round: rank 6 (host 2) leaves without finalizing and the
# others' barrier fails (they exit 1): the leaver is the cause, 125
leaver_remote() {
  run_job "$out" $TREE -H "$H1:4,$H2:4,$H3:4" "$APPS/early_exit" nofinal 6
  local rc=$?
  [ $rc = 125 ] || bad "exit $rc, wanted 125"
  grep -q "rank 6 exited with status 0 after joining the job, without finalizing.*(host $H2)" "$out" ||
    bad "no summary naming rank 6 and host $H2"
}

# every rank joins and exits 0 without finalizing, on every host at about
# the same time: a leaver is named before the job's end (125, not 0)
all_leave_remote() {
  run_job "$out" $TREE -H "$H1:4,$H2:4,$H3:4" "$APPS/early_exit" nofinal all
  local rc=$?
  [ $rc = 125 ] || bad "exit $rc, wanted 125"
  grep -q "exited with status 0 after joining the job, without finalizing" "$out" || bad "no summary naming a leaver"
}

netns_run_cases verdict "$RUNS" "${cases[@]}"
