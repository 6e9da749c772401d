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
# Part 3, per-peer paths (a context reaches the ranks of its host over shm
# and the others over tcp;ofi_rxm; runtime/paths.c), in one 2-host job of
# 2 ranks per host (ranks 0, 1 on host 1; 2, 3 on host 2), pairwise -p 1 -p 2:
#   mixed      the default: rank 0 <-> 1 on shm, rank 0 <-> 2 on tcp;ofi_rxm
#   all-tcp    the same job with ASR_PROVIDER=tcp;ofi_rxm (what every pair got
#              before per-peer paths)
#   1-host     the single-host libasr shm baseline: -H h1:2, rank 0 <-> 1
#   raw        fi_pingpong -p shm inside host 1 (same-host rows) and
#              -p "tcp;ofi_rxm" between hosts (cross-host rows)
# Goals (issue 23): the mixed same-host pair within 1.10x the latency and at
# least 0.95x the bandwidth of 1-host; the mixed cross-host pair's ratio to
# raw tcp within 10% of the all-tcp job's. And the cost of each endpoint in
# rank 0 of the mixed job, which has peers of both kinds: its open time and
# resident memory (the info line asr__ctx_endpoint logs).
# Every figure is the median of REPS runs; the asr and raw runs alternate so
# load drifts hit both. Exits non-zero if any run fails.
set -uo pipefail
build=$(cd "${1:?usage: netns_bench.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../netns/lib.sh"
REPS=${REPS:-5}
ASRRUN=$build/bin/asrrun
work=$(mktemp -d)
trap 'netns_teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || { echo "netns_bench: run as root (network namespaces)" >&2; exit 2; }
command -v fi_pingpong >/dev/null || { echo "netns_bench: fi_pingpong not found (libfabric-bin)" >&2; exit 2; }
for t in bin/asrrun bin/asrd examples/pairwise tests/apps/init_barrier; do
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

fpp_shm() { # SIZE ITERS -> "MB/sec usec/xfer" of fi_pingpong -p shm, both ends on host 1
  local port=$((20000 + RANDOM % 20000)) srv=$work/fps.srv cli=$work/fps.cli
  ip netns exec "$H1" timeout -k 5 60 fi_pingpong -p shm -e rdm -m tagged -S "$1" -I "$2" -B "$port" >"$srv" 2>&1 &
  local spid=$!
  local until=$((SECONDS + 10)) ok=1
  until ip netns exec "$H1" timeout -k 5 60 fi_pingpong -p shm -e rdm -m tagged -S "$1" -I "$2" -P "$port" \
    127.0.0.1 >"$cli" 2>&1; do
    if ((SECONDS >= until)) || ! kill -0 $spid 2>/dev/null; then ok=0; break; fi
    sleep 0.2
  done
  wait $spid
  if [ $ok = 1 ]; then
    awk 'NR > 1 && NF >= 8 { m = $6; u = $7 } END { if (u != "") print m, u }' "$cli"
  else
    echo "fi_pingpong -p shm failed:" >&2; tail -5 "$cli" "$srv" >&2; failures=$((failures + 1))
  fi
}

# paths_job TAG HOSTS [ASRRUN ARGS...]: pairwise -p 1 -p 2 (1 MiB), appending
# "LAT BW" of rank 0 <-> 1 to paths.TAG.1 and of rank 0 <-> 2 to paths.TAG.2,
# and rank 0's endpoint costs ("PROVIDER MS KIB") to paths.TAG.ep
paths_job() {
  local tag=$1 hosts=$2 out=$work/paths; shift 2
  if ip netns exec "$H1" "$ASRRUN" --launch-agent "ip netns exec" -H "$hosts" --bind-to none --timeout 60 \
    -x ASR_LOG_LEVEL=info "$@" "$build/examples/pairwise" -s 1048576 -n 2000 -p 1 -p 2 >"$out" 2>&1; then
    for p in 1 2; do
      sed -n "s/.*rank 0 <-> rank $p: one-way latency \([0-9.]*\) us.*bandwidth \([0-9.]*\) MB\/s.*/\1 \2/p" \
        "$out" >>"$work/paths.$tag.$p"
    done
    sed -n 's/^\[0\] .*endpoint \([^ ]*\) opened for .* in \([0-9.]*\) ms, resident memory +\(-*[0-9]*\) KiB.*/\1 \2 \3/p' \
      "$out" >>"$work/paths.$tag.ep"
  else
    echo "asr pairwise ($tag) failed:" >&2; tail -5 "$out" >&2; failures=$((failures + 1))
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
: >"$work/slat.raw"; : >"$work/sbw.raw"
for t in mixed tcp one; do : >"$work/paths.$t.1"; : >"$work/paths.$t.2"; : >"$work/paths.$t.ep"; done
for ((r = 1; r <= REPS; r++)); do
  read -r lat bw <<<"$(asr_pair)"
  [ -n "${lat:-}" ] && echo "$lat" >>"$work/lat.asr" && echo "$bw" >>"$work/bw.asr"
  read -r _ us <<<"$(fpp 8 20000)"
  [ -n "${us:-}" ] && echo "$us" >>"$work/lat.raw"
  read -r mbs _ <<<"$(fpp 1048576 200)"
  [ -n "${mbs:-}" ] && echo "$mbs" >>"$work/bw.raw"
  launch /bin/true >>"$work/l.true"
  launch "$build/tests/apps/init_barrier" >>"$work/l.ib"
  paths_job mixed "$H1:2,$H2:2"
  paths_job tcp "$H1:2,$H2:2" -x 'ASR_PROVIDER=tcp;ofi_rxm'
  paths_job one "$H1:2"
  read -r _ us <<<"$(fpp_shm 8 20000)"
  [ -n "${us:-}" ] && echo "$us" >>"$work/slat.raw"
  read -r mbs _ <<<"$(fpp_shm 1048576 200)"
  [ -n "${mbs:-}" ] && echo "$mbs" >>"$work/sbw.raw"
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

col() { awk -v c="$1" '{ print $c }' "$2" | median; } # COLUMN FILE -> median
ep() { awk -v p="$1" -v c="$2" '$1 == p { print $c }' "$work/paths.${3:-mixed}.ep" | median; } # PROV COL [JOB]
ml1=$(col 1 "$work/paths.mixed.1") mb1=$(col 2 "$work/paths.mixed.1")
tl1=$(col 1 "$work/paths.tcp.1") tb1=$(col 2 "$work/paths.tcp.1")
ol1=$(col 1 "$work/paths.one.1") ob1=$(col 2 "$work/paths.one.1")
ml2=$(col 1 "$work/paths.mixed.2") mb2=$(col 2 "$work/paths.mixed.2")
tl2=$(col 1 "$work/paths.tcp.2") tb2=$(col 2 "$work/paths.tcp.2")
sl=$(median <"$work/slat.raw") sb=$(median <"$work/sbw.raw")
echo
echo "per-peer paths: 2 hosts x 2 ranks, pairwise -p 1 -p 2, median of $REPS runs"
printf '%-34s %9s %9s %9s %9s %10s %10s\n' "pair" "mixed" "all-tcp" "1-host" "raw" "mixed/1h" "mixed/raw"
printf '%-34s %9.2f %9.2f %9.2f %9.2f %10s %10s\n' "same host, latency 8 B (us)" "$ml1" "$tl1" "$ol1" "$sl" \
  "$(ratio "$ml1" "$ol1")" "$(ratio "$ml1" "$sl")"
printf '%-34s %9.0f %9.0f %9.0f %9.0f %10s %10s\n' "same host, bandwidth 1 MiB (MB/s)" "$mb1" "$tb1" "$ob1" "$sb" \
  "$(ratio "$mb1" "$ob1")" "$(ratio "$mb1" "$sb")"
printf '%-34s %9.2f %9.2f %9s %9.2f %10s %10s  (all-tcp/raw %s)\n' "other host, latency 8 B (us)" "$ml2" "$tl2" "-" \
  "$lr" "-" "$(ratio "$ml2" "$lr")" "$(ratio "$tl2" "$lr")"
printf '%-34s %9.0f %9.0f %9s %9.0f %10s %10s  (all-tcp/raw %s)\n' "other host, bandwidth 1 MiB (MB/s)" "$mb2" "$tb2" \
  "-" "$br" "-" "$(ratio "$mb2" "$br")" "$(ratio "$tb2" "$br")"
echo "raw: fi_pingpong -p shm within host 1 (same-host rows), -p tcp;ofi_rxm between hosts (other-host rows)"
printf '%-34s %9s %12s %14s %14s\n' "rank 0's endpoints" "mixed ms" "mixed +KiB" "all-tcp ms" "all-tcp +KiB"
printf '%-34s %9.2f %12.0f %14s %14s\n' "shm (peers on this host)" "$(ep shm 2)" "$(ep shm 3)" "-" "-"
printf '%-34s %9.2f %12.0f %14.2f %14.0f\n' "tcp;ofi_rxm (peers on other hosts)" "$(ep 'tcp;ofi_rxm' 2)" \
  "$(ep 'tcp;ofi_rxm' 3)" "$(ep 'tcp;ofi_rxm' 2 tcp)" "$(ep 'tcp;ofi_rxm' 3 tcp)"
echo "(the second endpoint a mixed context opens is what it pays beyond an all-tcp one: the shm row)"
[ $failures = 0 ] || { echo "netns_bench: $failures runs failed" >&2; exit 1; }
