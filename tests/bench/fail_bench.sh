#!/usr/bin/env bash
# fail_bench.sh -- issue 50's benchmark: how soon a survivor's comm fails
# after its peer's death, and what a death costs the comms it does not touch.
#
#   KILLS=N REPS=R tests/bench/fail_bench.sh [BUILD_DIR]   (KILLS=50, REPS=7)
#
# Every job runs under asrrun --on-failure continue, with tests/apps/ft_bench:
#   same host      N jobs of "ft_bench detect" (2 ranks, asr's sm path): the
#                  victim prints the CLOCK_MONOTONIC time just before it
#                  raises SIGKILL, the survivor the time its posted receive
#                  (or a comm) failed; a row of p50 / p99 / max of the
#                  differences, against the goal (100 ms)
#   other host     the same with the victim on a second network-namespace
#                  host (tcp;ofi_rxm; goal 250 ms); namespaces share the
#                  machine's monotonic clock
#   other, nap     the same, the survivor sleeping 100 us between polls
#                  (FT_NAP_US) rather than spinning: on a machine of few
#                  cores, both emulated hosts and their daemons share them,
#                  and a spinning survivor delays the threads that bring it
#                  the news; this row is the path's own cost
#   host lost      N/5 jobs (at least 5) in which the victim stops its host
#                  (its daemon and itself, SIGSTOP) under --heartbeat-timeout
#                  2: goal the timeout + 1 s
#   bandwidth      REPS interleaved pairs of "ft_bench bw 1000 none|kill" (4
#                  ranks on one host: 0 streams 64 KiB messages to 1, while
#                  3, polled by 2, dies halfway through or not): the medians
#                  of rank 0's MB/s and their ratio (goal >= 0.95)
# A row whose jobs did not all give a figure says how many failed, and the
# output of the first failed job is kept (its path is printed).
# The netns rows need root and iproute2 (else a "skipped" row says so).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
kills=${KILLS:-50} reps=${REPS:-7}
ASRRUN=$build/bin/asrrun APP=$build/tests/apps/ft_bench
[ -x "$APP" ] || make -C "$build" -s tests/apps/ft_bench >/dev/null || { echo "fail_bench: cannot build $APP" >&2; exit 1; }
. "$top/tests/netns/lib.sh"
work=$(mktemp -d)
trap 'netns_teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
kept=()

# pct P FILE: the P-th percentile (nearest rank) of the numbers in FILE.
pct() { sort -g "$2" | awk -v p="$1" '{v[NR]=$1} END {if (!NR) {print "-"; exit} i=int((p*NR+99)/100); if (i<1) i=1; print v[i]}'; }

# detect_row NAME GOAL_MS COUNT CMD...: COUNT jobs of CMD; one latency (ms) each.
detect_row() {
  local name=$1 goal=$2 count=$3; shift 3
  local lat=$work/$name.lat bad=0 first_bad=""
  : >"$lat"
  for ((i = 0; i < count; i++)); do
    local out=$work/$name.$i.out
    rm -f "$work/kill_ns"
    "$@" >"$out" 2>&1
    local k d
    k=$(cat "$out" "$work/kill_ns" 2>/dev/null | sed -n 's/.*ft_bench kill_ns=\([0-9]*\).*/\1/p' | head -1)
    d=$(sed -n 's/.*ft_bench detect_ns=\([0-9]*\).*/\1/p' "$out" | head -1)
    if [ -n "$k" ] && [ -n "$d" ]; then
      echo "$(((d - k) / 1000))" | awk '{printf "%.3f\n", $1 / 1000}' >>"$lat"
      rm -f "$out"
    else
      bad=$((bad + 1))
      [ -z "$first_bad" ] && first_bad=$out
    fi
  done
  local n p50 p99 max
  n=$(wc -l <"$lat")
  p50=$(pct 50 "$lat") p99=$(pct 99 "$lat") max=$(pct 100 "$lat")
  local verdict=met
  awk -v p="$p99" -v g="$goal" 'BEGIN {exit !(p == "-" || p + 0 > g + 0)}' && verdict=missed
  printf '%-12s %6s %9s %9s %9s %9s  %s%s\n' "$name" "$n" "$p50" "$p99" "$max" "<= $goal" "$verdict" \
    "$([ $bad -gt 0 ] && echo ", $bad job(s) without a figure")"
  [ -n "$first_bad" ] && kept+=("$name: $first_bad")
}

echo "fail_bench: $kills kills per row, $reps bandwidth pairs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "detection: from the victim's last clock read before SIGKILL (or SIGSTOP of its host) to the survivor's"
echo "first failed request or comm, in ms"
printf '%-12s %6s %9s %9s %9s %9s  %s\n' row kills "p50 ms" "p99 ms" "max ms" goal verdict
detect_row "same host" 100 "$kills" timeout -k 5 60 "$ASRRUN" --timeout 30 --on-failure continue -n 2 "$APP" detect

netns_ok=0
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && netns_setup 2; then
  netns_ok=1
  H1=$(netns_host 1) H2=$(netns_host 2)
  remote() {
    ip netns exec "$H1" timeout -k 5 60 "$ASRRUN" --launch-agent "ip netns exec" --timeout 30 \
      --on-failure continue "$@"
  }
  detect_row "other host" 250 "$kills" remote -H "$H1:1,$H2:1" "$APP" detect
  detect_row "other, nap" 250 "$kills" remote -x FT_NAP_US=100 -H "$H1:1,$H2:1" "$APP" detect
  lost=$((kills / 5 < 5 ? 5 : kills / 5))
  detect_row "host lost" 3000 "$lost" remote --heartbeat-timeout 2 -x FT_KILL_FILE="$work/kill_ns" -H "$H1:1,$H2:1" \
    "$APP" detect stop-host
else
  printf '%-12s  skipped: network namespaces need root and iproute2\n' "other host"
  printf '%-12s  skipped: network namespaces need root and iproute2\n' "host lost"
fi

echo
echo "bandwidth of comms a death does not touch (rank 0 -> 1, 64 KiB messages, 1 s; 4 ranks on one host)"
: >"$work/none" && : >"$work/kill"
for ((i = 0; i < reps; i++)); do
  for k in none kill; do
    out=$work/bw.$k.$i.out
    timeout -k 5 60 "$ASRRUN" --timeout 30 --on-failure continue -n 4 "$APP" bw 1000 "$k" >"$out" 2>&1
    v=$(sed -n 's/.*ft_bench bw_MBps=\([0-9.]*\).*/\1/p' "$out" | head -1)
    if [ -n "$v" ] && grep -q "0 bad" "$out"; then
      echo "$v" >>"$work/$k"
      rm -f "$out"
    else
      kept+=("bandwidth $k: $out")
    fi
  done
done
mn=$(pct 50 "$work/none") mk=$(pct 50 "$work/kill")
ratio=$(awk -v a="$mk" -v b="$mn" 'BEGIN {if (b + 0 > 0) printf "%.3f", a / b; else print "-"}')
verdict=$(awk -v r="$ratio" 'BEGIN {print (r != "-" && r + 0 >= 0.95) ? "met" : "missed"}')
printf '%-26s %8s %8s   %s\n' "" runs "MB/s p50" "range"
printf '%-26s %8s %8s   %s\n' "no death (baseline)" "$(wc -l <"$work/none")" "$mn" \
  "$(sort -g "$work/none" | head -1)..$(sort -g "$work/none" | tail -1)"
printf '%-26s %8s %8s   %s\n' "rank 3 killed at 0.5 s" "$(wc -l <"$work/kill")" "$mk" \
  "$(sort -g "$work/kill" | head -1)..$(sort -g "$work/kill" | tail -1)"
printf 'ratio %s (goal >= 0.95): %s\n' "$ratio" "$verdict"
if [ ${#kept[@]} -gt 0 ]; then
  keep=$(mktemp -d "${TMPDIR:-/tmp}/fail_bench.XXXXXX")
  echo "jobs without a figure (their output is kept in $keep):"
  for k in "${kept[@]}"; do
    cp "${k#*: }" "$keep/" 2>/dev/null
    echo "  ${k%%: *}: $keep/$(basename "${k#*: }")"
  done
fi
exit 0
