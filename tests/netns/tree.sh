#!/usr/bin/env bash
# tests/netns/tree.sh BUILD_DIR -- the tree of daemons (--tree-radix,
# launcher/tree/tree.h) on emulated hosts: many to a network namespace, each its
# own daemon with its own name and address (lib.sh's netns_setup_many, the
# agent tests/netns/agent.sh), so that 130 hosts fit 2 cores.
#
# At radix 4 the job sizes at the fan-out's edges: 3 and 4 hosts (every
# daemon asrrun's child: the flat star), 5 (the first host below another)
# and 17 (4*4+1: the second level full but one); at radix 2 a third level,
# whose interior daemon is lost through its parent's LOST. The long tier
# (ASR_LONG=1) adds 130 hosts at the default radix and the slower failures.
# Each case checks what the job printed, its exit code, and that nothing of
# it is left in any namespace; the namespaces are removed at the end.
set -uo pipefail
build=$(cd "${1:?usage: tree.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
netns_suite "$build"

cases=(r4_fence_3 r4_fence_4 r4_fence_5 r4_parent_ends_last_5 r4_fence_17 r4_output_17 r4_abort_leaf_17 r4_state_report_17
  r4_interior_killed_17 r4_leaf_killed_17 r2_deep_interior_killed_8 r4_stdin_deep_17)
long=(default_fence_130 default_output_130 default_abort_leaf_130 default_interior_killed_130
  r4_interior_frozen_17 r4_interior_cut_17)
LONG=${ASR_LONG:-0}

skip_all() {
  for c in "${cases[@]}" "${long[@]}"; do echo "SKIP: tree/$c ($1)"; done
  exit 0
}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  skip_all "needs root and iproute2 to create network namespaces"
fi
NHOSTS=17
[ "$LONG" = 1 ] && NHOSTS=130
# 13 hosts to a namespace: 130 hosts are 10 namespaces
if ! netns_setup_many "$NHOSTS" 13; then skip_all "network namespaces cannot be created on this machine"; fi
AGENT="$here/agent.sh $NETNS_PREFIX $NETNS_PER"
touch "$work/mark" # check_clean: what a case leaves is newer
NS1=$(netns_ens 1)
e() { netns_ehost "$1"; }

# run_job OUT ARGS...: asrrun on host 1 (namespace 1) with the agent.
run_job() {
  local out=$1; shift
  ip netns exec "$NS1" timeout -k 5 150 "$ASRRUN" --launch-agent "$AGENT" --timeout 120 "$@" \
    >"$out" 2>&1 </dev/null
}

fail() { echo "FAIL: tree/$case: $*"; tail -15 "$out" | sed 's/^/    /'; failed=1; }
result() { [ "$failed" = 0 ] && echo "PASS: tree/$case ($1)"; }

check_clean() {
  if ! netns_wait_empty "${1:-15}"; then
    fail "processes left behind: $(netns_leftovers | tr '\n' ' ')"
    local h p
    for h in "${NETNS_HOSTS[@]}"; do for p in $(netns_pids "$h"); do kill -KILL "$p" 2>/dev/null; done; done
  fi
  # a SIGKILLed asrd cannot remove its PMIx directory: the case that killed it does
  local p
  for p in ${killed:-}; do rm -rf /dev/shm/asrd."$p".?????? /tmp/asrd."$p".??????; done
  killed=
  # any other asrd's is its own or, if it had to be killed, its killer's to remove
  local d left=
  for d in $(find /dev/shm /tmp -maxdepth 1 -name 'asrd.*.??????' -newer "$work/mark" 2>/dev/null); do
    p=${d#*/asrd.} p=${p%%.*}
    [ -d "/proc/$p" ] || { left="$left ${d##*/}"; rm -rf "$d"; }
  done
  [ -z "$left" ] || fail "PMIx directories of ended daemons left behind:$left"
  touch "$work/mark"
}

# dry N RADIX DEPTH: --dry-run shows the tree of that depth (0: flat).
dry() {
  local d; d=$(run_job /dev/stdout --dry-run --tree-radix "$2" -H "$(netns_ehosts "$1" 1)" true | grep '^daemon tree')
  if [ "$3" = 0 ]; then
    [[ $d == *flat* ]] || fail "--dry-run shows '$d', not a flat tree"
  else
    [[ $d == "daemon tree: radix $2, depth $3:"* ]] || fail "--dry-run shows '$d', not depth $3"
  fi
}

# fence N RADIX DEPTH: the libpmix client on N hosts x 2 ranks: every rank
# reads every other's key after the fence (data gathered up the tree and
# sent down once per subtree).
fence() {
  local n=$1 radix=$2 depth=$3
  dry "$n" "$radix" "$depth"
  run_job "$out" --tree-radix "$radix" -H "$(netns_ehosts "$n" 2)" "$APPS/pmix_client"
  local rc=$?
  [ $rc = 0 ] || fail "exit $rc"
  local k; k=$(grep -c "verified $((2 * n - 1)) of $((2 * n - 1)) peers' keys, all ok" "$out")
  [ "$k" = $((2 * n)) ] || fail "$k of $((2 * n)) ranks read every peer's key after the fence"
  for ((j = 1; j <= n; j++)); do
    grep -q "host $(e "$j")):" "$out" || { fail "no rank reported host $(e "$j")"; break; }
  done
  check_clean
}

# output N RADIX LINES: every rank's lines whole, tagged and in order.
output() {
  local n=$1 radix=$2 lines=$3
  run_job "$out" --tree-radix "$radix" -H "$(netns_ehosts "$n" 1)" sh -c \
    "i=0; while [ \$i -lt $lines ]; do echo \"r=\$ASR_RANK h=\$ASR_HOSTNAME i=\$i\"; i=\$((i+1)); done"
  local rc=$? want got r
  [ $rc = 0 ] || fail "exit $rc"
  want=$(seq 0 $((lines - 1)) | tr '\n' ' ')
  for ((r = 0; r < n; r++)); do
    got=$(grep "^\[$r\] r=$r h=$(e $((r + 1))) " "$out" | sed 's/.* i=//' | tr '\n' ' ')
    [ "$got" = "$want" ] || { fail "rank $r's lines are missing, torn or out of order"; break; }
  done
  local bad; bad=$(grep -vc "^\[[0-9]*\] r=[0-9]* h=${NETNS_PREFIX}e[0-9]* i=[0-9]*$" "$out")
  [ "$bad" = 0 ] || fail "$bad lines are not whole tagged lines"
  check_clean
}

# abort N RADIX RANK: PMIx_Abort(5) from a leaf's rank ends every host.
abort_leaf() {
  local n=$1 radix=$2 rank=$3
  run_job "$out" --tree-radix "$radix" -H "$(netns_ehosts "$n" 1)" "$APPS/pmix_client" --abort "$rank:5"
  local rc=$?
  [ $rc = 5 ] || fail "exit $rc, wanted 5"
  grep -q "rank $rank on host $(e $((rank + 1))) called abort with status 5" "$out" ||
    fail "no summary naming rank $rank and host $(e $((rank + 1)))"
  check_clean
}

# kill_host N RADIX J HOW WANT TIMEOUT: a job of sleeps on N hosts; once
# every host runs its rank, host J's daemon is killed (HOW: KILL), frozen
# (STOP) or cut off (CUT: its address removed); the job must end with 125
# and a line matching WANT (an extended regex), within a bound.
kill_host() {
  local n=$1 radix=$2 j=$3 how=$4 want=$5 hb=${6:-10} pid rc ms t0
  run_job "$out" --tree-radix "$radix" --heartbeat-timeout "$hb" -H "$(netns_ehosts "$n" 1)" sleep 100 &
  local job=$! until=$((SECONDS + 60))
  while [ "$(for h in "${NETNS_HOSTS[@]}"; do netns_alive "$h"; done | grep -c '(sleep)')" -lt "$n" ]; do
    ((SECONDS < until)) || { fail "the ranks did not all start"; break; }
    sleep 0.2
  done
  pid=$(netns_easrd "$j")
  t0=$(date +%s%N)
  case $how in
    KILL) kill -KILL "$pid" && killed=$pid ;;
    STOP) kill -STOP "$pid" ;;
    CUT) ip -n "$(netns_ens "$j")" addr del "$(netns_eaddr "$j")/16" dev asr0 ;;
  esac
  { wait $job; } 2>/dev/null
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  [ $rc = 125 ] || fail "exit $rc, wanted 125"
  grep -Eq "$want" "$out" || fail "no line matching '$want'"
  # detection: the heartbeat timeout plus one tick at the lost daemon's
  # parent, at any depth, and the job's SIGTERM/SIGKILL grace (3 s) after
  ((ms < hb * 1000 + 8000)) || fail "the job took $ms ms to end (heartbeat timeout $hb s)"
  [ "$how" = STOP ] && kill -CONT "$pid"
  [ "$how" = CUT ] && ip -n "$(netns_ens "$j")" addr add "$(netns_eaddr "$j")/16" dev asr0
  check_clean 30
  KILL_MS=$ms
}

case=r4_fence_3 failed=0 out=$work/$case
fence 3 4 0
result "3 hosts at radix 4: asrrun's children only (flat), fence with data"

case=r4_fence_4 failed=0 out=$work/$case
fence 4 4 0
result "4 hosts at radix 4: every host asrrun's child, fence with data"

case=r4_fence_5 failed=0 out=$work/$case
fence 5 4 2
result "5 hosts at radix 4: the fifth started by the first, fence with data"

# At the end asrrun sends SHUTDOWN and closes its side; host 1's daemon
# passes it to host 5's and must end after it (its loop reaps host 5's
# agent), not as soon as asrrun's side closes: asrd's debug lines, written
# to the one stderr both share, are in the order of their writes.
case=r4_parent_ends_last_5 failed=0 out=$work/$case
ASR_LOG_LEVEL=debug ASR_LOG_SUBSYS=asrd run_job "$out" --tree-radix 4 -H "$(netns_ehosts 5 1)" true
rc=$?
[ $rc = 0 ] || fail "exit $rc"
child=$(grep -n "^\[asr asrd:4@$(e 5) .*FINISHING -> DONE" "$out" | cut -d: -f1)
agent=$(grep -n "^\[asr asrd:0@$(e 1) .*the agent of host $(e 5) ended" "$out" | cut -d: -f1)
parent=$(grep -n "^\[asr asrd:0@$(e 1) .*FINISHING -> DONE" "$out" | cut -d: -f1)
if [ -z "$child" ] || [ -z "$agent" ] || [ -z "$parent" ]; then
  fail "a daemon's end is missing from the debug log (child ${child:-none}, agent ${agent:-none}, parent ${parent:-none})"
elif ((parent < child || parent < agent)); then
  fail "host $(e 1)'s daemon ended (line $parent) before its child on $(e 5) (line $child, agent reaped: line $agent)"
fi
check_clean
result "5 hosts at radix 4: host 1's daemon ends after the child it started, reaped by its loop"

case=r4_fence_17 failed=0 out=$work/$case
fence 17 4 2
result "17 hosts at radix 4: 13 below the first four, fence with data"

case=r4_output_17 failed=0 out=$work/$case
output 17 4 300
result "17 hosts at radix 4: 300 lines a rank, whole, tagged, in order"

case=r4_abort_leaf_17 failed=0 out=$work/$case
abort_leaf 17 4 16
result "PMIx_Abort(5) on $(e 17), two hops down, reaches every host"

# asrrun under `timeout` under `ip netns exec`: its pid
asrrun_below() {
  local level c p parents=$1 next
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

# SIGQUIT: the state report asks every daemon (REPORT_REQ routed down each
# subtree) and every rank's REPORT comes back up, the deepest two hops down
case=r4_state_report_17 failed=0 out=$work/$case
# each rank says it runs (a file), then waits, asleep, until the case
# ends it: it reads one line from a FIFO that the case holds open from the
# start (so no open waits) and writes 17 lines into at the end. A fixed
# sleep could end before all 17 ranks started on a loaded host.
rm -f "$work"/up.* "$work/stop"
mkfifo "$work/stop"
exec 3<>"$work/stop"
run_job "$out" --tree-radix 4 -H "$(netns_ehosts 17 1)" sh -c \
  "touch $work/up.\$ASR_RANK; read line <$work/stop" &
job=$!
until=$((SECONDS + 60))
while [ "$(ls "$work" | grep -c '^up\.')" -lt 17 ] && ((SECONDS < until)); do sleep 0.2; done
pid=$(asrrun_below $job)
if [ -z "$pid" ]; then
  fail "no asrrun"
else
  # asrrun --status from another shell: the same report, to that shell, and
  # the job goes on
  "$ASRRUN" --status "$pid" >"$out.status" 2>&1
  rc=$?
  [ $rc = 0 ] || fail "asrrun --status exited $rc: $(tail -3 "$out.status" | tr '\n' ' ')"
  grep -qF "state report (asrrun --status)" "$out.status" || fail "--status printed no report"
  n=$(grep -c 'rank [0-9]* is not a libasr process (no report); it is S' "$out.status")
  [ "$n" = 17 ] || fail "--status: $n of 17 ranks' state came back"
  for ((j = 1; j <= 17; j++)); do
    grep -qE "$(e "$j")([^0-9]|$)" "$out.status" || { fail "--status: no word of host $(e "$j")"; break; }
  done
  kill -0 "$pid" 2>/dev/null || fail "the job ended after --status"
  kill -QUIT "$pid"
  until=$((SECONDS + 20))
  while ! grep -q 'asrrun: end of state report' "$out" && ((SECONDS < until)); do sleep 0.1; done
  grep -qF "state report (SIGQUIT)" "$out" || fail "no report on SIGQUIT"
  n=$(grep -c 'rank [0-9]* is not a libasr process (no report); it is S' "$out")
  [ "$n" = 17 ] || fail "$n of 17 ranks' state came back (the rest: $(grep -o 'rank [0-9]* gave no report[^;]*' "$out" | head -3 | tr '\n' ' '))"
fi
# a line for each rank (sh's read takes one line, byte by byte): each exits 0
printf '\n%.0s' $(seq 17) >&3
{ wait $job; } 2>/dev/null
exec 3>&-
rc=$?
[ $rc = 0 ] || fail "exit $rc, wanted 0"
check_clean
result "asrrun --status and SIGQUIT: the state report reaches all 17 hosts and every rank's state comes back"

# host 2 (index 1) is asrrun's child; its children are hosts 9..12
case=r4_interior_killed_17 failed=0 out=$work/$case
kill_host 17 4 2 KILL "host $(e 2) before the job finished.*the 4 hosts beneath it in the tree \($(e 9), $(e 10), $(e 11), $(e 12)\)"
result "kill -9 of the interior asrd on $(e 2): 125 naming it and the 4 beneath it, after $KILL_MS ms"

# host 17 (index 16) is a leaf below host 4: its parent tells
case=r4_leaf_killed_17 failed=0 out=$work/$case
kill_host 17 4 17 KILL "connection to asrd on host $(e 17) before the job finished \(its parent, host $(e 4), saw it end\)"
result "kill -9 of the leaf asrd on $(e 17): its parent says LOST, 125 after $KILL_MS ms"

# radix 2, 8 hosts: host 3 (index 2) is below host 1 and above hosts 7, 8
case=r2_deep_interior_killed_8 failed=0 out=$work/$case
dry 8 2 3
kill_host 8 2 3 KILL "host $(e 3) before the job finished \(its parent, host $(e 1), saw it end\); lost with it, the 2 hosts beneath it in the tree \($(e 7), $(e 8)\)"
result "kill -9 of $(e 3), an interior daemon two hops down: 125 naming it and the 2 beneath it, after $KILL_MS ms"

# stdin to one rank two hops down (--stdin 16: host 17, below host 4), then
# to every rank: STDIN travels down the tree (routed to one host, or once
# per subtree), every line whole and in order, and nothing to the others
case=r4_stdin_deep_17 failed=0 out=$work/$case
printf 'line-1\nline-2\nline-3\n' | ip netns exec "$NS1" timeout -k 5 150 "$ASRRUN" --launch-agent "$AGENT" \
  --timeout 120 --tree-radix 4 -H "$(netns_ehosts 17 1)" --stdin 16 cat >"$out" 2>&1
rc=$?
[ $rc = 0 ] || fail "exit $rc"
[ "$(grep -c '^\[16\] line-[123]$' "$out")" = 3 ] || fail "rank 16 did not echo the 3 lines"
[ "$(grep '^\[16\]' "$out" | tr '\n' ' ')" = "[16] line-1 [16] line-2 [16] line-3 " ] || fail "rank 16's lines out of order"
[ "$(grep -c '^\[[0-9]*\] line' "$out")" = 3 ] || fail "a rank other than 16 read stdin"
check_clean
printf 'a\nb\n' | ip netns exec "$NS1" timeout -k 5 150 "$ASRRUN" --launch-agent "$AGENT" \
  --timeout 120 --tree-radix 4 -H "$(netns_ehosts 17 1)" --stdin all cat >"$out" 2>&1
rc=$?
[ $rc = 0 ] || fail "--stdin all: exit $rc"
for ((r = 0; r < 17; r++)); do
  [ "$(grep "^\[$r\] " "$out" | tr '\n' ' ')" = "[$r] a [$r] b " ] || { fail "--stdin all: rank $r did not echo a, b"; break; }
done
check_clean
result "stdin reaches rank 16 two hops down alone, and with --stdin all every one of the 17 ranks, in order"

if [ "$LONG" != 1 ]; then
  for c in "${long[@]}"; do echo "SKIP: tree/$c (the long tier: ASR_LONG=1 runs it)"; done
  exit 0
fi

case=default_fence_130 failed=0 out=$work/$case
fence 130 16 2
result "130 hosts at the default radix, fence with data"

case=default_output_130 failed=0 out=$work/$case
output 130 16 100
result "130 hosts at the default radix: 100 lines a rank, whole, tagged, in order"

case=default_abort_leaf_130 failed=0 out=$work/$case
abort_leaf 130 16 129
result "PMIx_Abort(5) on $(e 130), two hops down, reaches all 130 hosts"

# host 3 (index 2) is asrrun's child; its children are hosts 49..64
case=default_interior_killed_130 failed=0 out=$work/$case
kill_host 130 16 3 KILL "host $(e 3) before the job finished.*the 16 hosts beneath it in the tree \($(e 49), $(e 50), "
result "kill -9 of the interior asrd on $(e 3) of 130: 125 naming it and the 16 beneath it, after $KILL_MS ms"

case=r4_interior_frozen_17 failed=0 out=$work/$case
kill_host 17 4 2 STOP "lost contact with asrd on host $(e 2): nothing heard for 3 s.*the 4 hosts beneath it in the tree" 3
result "SIGSTOP of the interior asrd on $(e 2): 125 by the heartbeat rule after $KILL_MS ms (timeout 3 s)"

case=r4_interior_cut_17 failed=0 out=$work/$case
kill_host 17 4 2 CUT "lost contact with asrd on host $(e 2): nothing heard for 3 s.*the 4 hosts beneath it in the tree" 3
result "$(e 2)'s address removed: 125 by the heartbeat rule after $KILL_MS ms (timeout 3 s)"
