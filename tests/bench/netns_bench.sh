#!/usr/bin/env bash
# netns_bench.sh -- asr across emulated hosts (network namespaces, tests/netns/lib.sh).
#
#   tests/bench/netns_bench.sh BUILD_DIR        (as root; REPS=5 by default)
#
# Part 1, two hosts over tcp;ofi_rxm (rank 0 on host 1, rank 1 on host 2),
# with --bind-to none: emulated hosts share this machine's cores, and each
# host's daemon would bind its first rank to core 0, so both ranks would spin
# on one core and take turns a scheduler tick (4 ms) at a time:
#   latency    asr: examples/pairwise's 8-byte ping-pong one-way latency
#              raw: fi_pingpong -p "tcp;ofi_rxm" -e rdm -m tagged -S 8 between
#                   the same two namespaces ("usec/xfer" is already one-way).
#   bandwidth  asr: pairwise's 1 MiB messages, 16 in flight, then an 8-byte ack
#              raw: fi_pingpong -S 1 MiB (MB/sec). fi_pingpong has no window:
#                   each 1 MiB message waits for the previous reply, so the
#                   asr/raw ratio also shows what the window buys.
# Part 2, launch time on 3 hosts x 8 LNCs (asrrun runs on host 1 and starts
# the daemons with the agent "ip netns exec"):
#   asrrun true          asrrun -H h1:8,h2:8,h3:8 /bin/true
#   asrrun init+barrier  the same with tests/apps/init_barrier (asr_job_init,
#                        asr_job_barrier, asr_job_finalize)
# Every figure is the median of REPS runs; the asr and raw runs alternate so
# load drifts hit both. Exits non-zero if any run fails.
set -uo pipefail
build=$(cd "${1:?usage: netns_bench.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../netns/lib.sh"
REPS=${REPS:-5}
ASRRUN=$build/launcher/asrrun
work=$(mktemp -d)
trap 'netns_teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || { echo "netns_bench: run as root (network namespaces)" >&2; exit 2; }
command -v fi_pingpong >/dev/null || { echo "netns_bench: fi_pingpong not found (libfabric-bin)" >&2; exit 2; }
for t in launcher/asrrun launcher/asrd examples/pairwise tests/apps/init_barrier; do
  [ -x "$build/$t" ] || make -C "$build" -s "$t" >/dev/null || exit 2
done
netns_setup 3 || { echo "netns_bench: cannot create network namespaces here" >&2; exit 2; }
H1=$(netns_host 1) H2=$(netns_host 2) H3=$(netns_host 3)
failures=0

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
now() { date +%s.%N; }

asr_pair() { # -> "LAT_US BW_MBS"
  local out=$work/pair
  if ip netns exec "$H1" "$ASRRUN" --launch-agent "ip netns exec" -H "$H1:1,$H2:1" --bind-to none --timeout 60 \
    "$build/examples/pairwise" -s 1048576 -n 2000 >"$out" 2>&1; then
    sed -n 's/.*one-way latency \([0-9.]*\) us.*bandwidth \([0-9.]*\) MB\/s.*/\1 \2/p' "$out"
  else
    echo "asr pairwise failed:" >&2; tail -5 "$out" >&2; failures=$((failures + 1))
  fi
}

fpp() { # SIZE ITERS -> the client's result line fields "MB/sec usec/xfer"
  local port=$((20000 + RANDOM % 20000)) srv=$work/fpp.srv cli=$work/fpp.cli
  ip netns exec "$H2" timeout -k 5 60 fi_pingpong -p "tcp;ofi_rxm" -d asr0 -e rdm -m tagged -S "$1" -I "$2" \
    -B "$port" >"$srv" 2>&1 &
  local spid=$!
  local until=$((SECONDS + 10)) ok=1
  # the client needs the server's control port: retry its connect for a while
  until ip netns exec "$H1" timeout -k 5 60 fi_pingpong -p "tcp;ofi_rxm" -d asr0 -e rdm -m tagged -S "$1" \
    -I "$2" -P "$port" "$(netns_addr 2)" >"$cli" 2>&1; do
    if ((SECONDS >= until)) || ! kill -0 $spid 2>/dev/null; then ok=0; break; fi
    sleep 0.2
  done
  wait $spid
  if [ $ok = 1 ]; then
    awk 'NR > 1 && NF >= 8 { m = $6; u = $7 } END { if (u != "") print m, u }' "$cli"
  else
    echo "fi_pingpong failed:" >&2; tail -5 "$cli" "$srv" >&2; failures=$((failures + 1))
  fi
}

launch() { # PROGRAM -> seconds
  local t0 t1
  t0=$(now)
  if ip netns exec "$H1" "$ASRRUN" --launch-agent "ip netns exec" -H "$H1:8,$H2:8,$H3:8" --timeout 60 \
    "$@" >"$work/launch" 2>&1; then
    t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
  else
    echo "asrrun $* failed:" >&2; tail -5 "$work/launch" >&2; failures=$((failures + 1))
  fi
}

: >"$work/lat.asr"; : >"$work/bw.asr"; : >"$work/lat.raw"; : >"$work/bw.raw"; : >"$work/l.true"; : >"$work/l.ib"
for ((r = 1; r <= REPS; r++)); do
  read -r lat bw <<<"$(asr_pair)"
  [ -n "${lat:-}" ] && echo "$lat" >>"$work/lat.asr" && echo "$bw" >>"$work/bw.asr"
  read -r _ us <<<"$(fpp 8 20000)"
  [ -n "${us:-}" ] && echo "$us" >>"$work/lat.raw"
  read -r mbs _ <<<"$(fpp 1048576 200)"
  [ -n "${mbs:-}" ] && echo "$mbs" >>"$work/bw.raw"
  launch /bin/true >>"$work/l.true"
  launch "$build/tests/apps/init_barrier" >>"$work/l.ib"
done

la=$(median <"$work/lat.asr") lr=$(median <"$work/lat.raw")
ba=$(median <"$work/bw.asr") br=$(median <"$work/bw.raw")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo "asr across network-namespace hosts, tcp;ofi_rxm, median of $REPS runs (load: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-44s %12s %12s %8s\n' "two hosts" "asr" "raw" "asr/raw"
printf '%-44s %12.2f %12.2f %8s\n' "one-way latency 8 B (us; raw fi_pingpong)" "$la" "$lr" "$(ratio "$la" "$lr")"
printf '%-44s %12.0f %12.0f %8s\n' "bandwidth 1 MiB (MB/s; asr window 16)" "$ba" "$br" "$(ratio "$ba" "$br")"
printf '%-44s %12s\n' "launch, 3 hosts x 8 LNCs" "seconds"
printf '%-44s %12.3f\n' "asrrun /bin/true" "$(median <"$work/l.true")"
printf '%-44s %12.3f\n' "asrrun init+barrier+finalize" "$(median <"$work/l.ib")"
[ $failures = 0 ] || { echo "netns_bench: $failures runs failed" >&2; exit 1; }
