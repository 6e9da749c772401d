#!/bin/sh
# tests/netns/time_agent.sh PREFIX HOST COMMAND... -- the launch agent of
# netns.sh's trace_clocks case: runs COMMAND (asrd and its arguments) in
# HOST's network namespace, as "ip netns exec" does, and in a time namespace
# of its own whose CLOCK_MONOTONIC is ahead of the machine's by 300, 1000
# and 2500 seconds on hosts 1, 2 and 3 (unshare --time), so that no two
# emulated hosts, nor asrrun, share a monotonic clock.
prefix=$1 host=$2
shift 2
case $host in
  "${prefix}h1") off=300 ;;
  "${prefix}h2") off=1000 ;;
  "${prefix}h3") off=2500 ;;
  *) echo "time_agent.sh: '$host' is not a host of $prefix" >&2; exit 255 ;;
esac
exec ip netns exec "$host" unshare --time --monotonic "$off" "$@"
