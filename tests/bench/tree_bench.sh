#!/usr/bin/env bash
# tree_bench.sh -- the tree of daemons against the flat star, on emulated
# hosts (tests/netns/lib.sh's netns_setup_many: 13 hosts to a namespace,
# each its own daemon with its own address; all of them share this
# machine's cores, so the figures are counts first and times second).
#
#   tests/bench/tree_bench.sh BUILD_DIR     (as root; REPS=3, SIZES="1 4 16 64 130")
#
# For each size (1 rank a host, and 16 hosts x 8 LNCs), flat (--tree-radix
# 0) and tree (the default radix), runs alternating so that load drifts hit
# both, and which of the two runs first alternating from round to round
# (at 4 hosts, where radix 4 is flat too, the second of each pair came out
# 7-10 % faster), each figure the median of REPS runs:
#   launch ms      asrrun ... /bin/true: start every daemon, run, shut down
#   fence ms       the libpmix client: PMIx_Init, put, commit, fence with
#                  data, a get of every peer's key, finalize
#   cpu s/host     user+system CPU of everything the fence job ran (asrrun,
#                  every daemon, every rank: each reaps its children), / hosts
#   conns          control connections asrrun held (asrrun -v's count)
#   fence msgs     fence messages asrrun handled per fence, in + out
#   depth          the tree's depth (--dry-run)
#   tree/flat      per round, the tree's launch and fence time over the flat
#                  one run beside it: median (p25-p75) of those ratios
# Exits non-zero if any run fails.
set -uo pipefail
build=$(cd "${1:?usage: tree_bench.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../netns/lib.sh"
REPS=${REPS:-3}
SIZES=${SIZES:-1 4 16 64 130}
ASRRUN=$build/bin/asrrun
work=$(mktemp -d)
trap 'netns_teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || { echo "tree_bench: run as root (network namespaces)" >&2; exit 2; }
max=1
for n in $SIZES 16; do ((n > max)) && max=$n; done
netns_setup_many "$max" 13 || { echo "tree_bench: cannot create network namespaces here" >&2; exit 2; }
AGENT="$here/../netns/agent.sh $NETNS_PREFIX $NETNS_PER"
NS1=$(netns_ens 1)
failures=0

# paired FLAT_LIST TREE_LIST -> "MEDIAN (P25-P75)" of tree/flat, run by run
paired() {
  paste <(tr ' ' '\n' <<<"$1" | grep .) <(tr ' ' '\n' <<<"$2" | grep .) |
    awk '$1 > 0 && $2 != "nan" && $1 != "nan" { print $2 / $1 }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) { print "nan"; exit }
      m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%.3f (%.3f-%.3f)", m, v[int((NR + 3) / 4)], v[int((3 * NR + 3) / 4)] }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# one N LNC RADIX WHAT -> "MS CPU_S CONNS FENCE_MSGS_PER_FENCE" (WHAT: true or fence)
one() {
  local n=$1 lnc=$2 radix=$3 what=$4 out=$work/out t0 t1 cpu
  local prog=/bin/true
  [ "$what" = fence ] && prog=$build/tests/apps/pmix_client
  local TIMEFORMAT='%U %S'
  t0=$(date +%s%N)
  cpu=$({ time ip netns exec "$NS1" "$ASRRUN" -v --launch-agent "$AGENT" --tree-radix "$radix" --timeout 120 \
    -H "$(netns_ehosts "$n" "$lnc")" "$prog" >"$out" 2>&1; } 2>&1)
  local rc=$?
  t1=$(date +%s%N)
  if [ $rc != 0 ] || { [ "$what" = fence ] && [ "$(grep -c 'all ok' "$out")" != $((n * lnc)) ]; }; then
    echo "tree_bench: $what on $n x $lnc at radix $radix failed (exit $rc):" >&2
    tail -5 "$out" >&2
    failures=$((failures + 1))
    echo "nan nan nan nan"
    return
  fi
  local ctl; ctl=$(grep '^asrrun: control:' "$out")
  local conns fences fin fout
  conns=$(sed -n 's/.*control: \([0-9]*\) connection.*/\1/p' <<<"$ctl")
  fences=$(sed -n 's/.*; \([0-9]*\) fence.*/\1/p' <<<"$ctl")
  fin=$(sed -n 's/.*: \([0-9]*\) fence messages in.*/\1/p' <<<"$ctl")
  fout=$(sed -n 's/.*in, \([0-9]*\) out.*/\1/p' <<<"$ctl")
  local per=nan
  ((fences > 0)) && per=$(((fin + fout) / fences))
  echo "$(((t1 - t0) / 1000000)) $(awk -v c="$cpu" -v n="$n" 'BEGIN { split(c, a, " "); printf "%.3f", (a[1] + a[2]) / n }') $conns $per"
}

depth() { # N RADIX
  local d; d=$(ip netns exec "$NS1" "$ASRRUN" --dry-run --launch-agent "$AGENT" --tree-radix "$2" -H "$(netns_ehosts "$1" 1)" true |
    grep '^daemon tree')
  [[ $d == *flat* ]] && echo 1 || sed -n 's/.*depth \([0-9]*\):.*/\1/p' <<<"$d"
}

printf '%-10s %-5s %6s %10s %9s %11s %6s %11s  %s\n' hosts mode depth launch_ms fence_ms cpu_s/host conns fence_msgs \
  "tree/flat, paired: launch; fence"
rows=()
for n in $SIZES 16x8; do
  lnc=1 hosts=$n
  [ "$n" = 16x8 ] && hosts=16 lnc=8
  declare -A L F C K M
  for ((i = 0; i < REPS; i++)); do
    order="flat tree"
    ((i % 2)) && order="tree flat" # which runs first alternates: the second of a pair finds caches warm
    for mode in $order; do
      radix=0
      [ $mode = tree ] && radix=16
      [ $mode = tree ] && [ "$hosts" -le 16 ] && radix=4 # a tree at these sizes too (the default radix is flat there)
      read -r ms _ _ _ <<<"$(one "$hosts" "$lnc" "$radix" true)"
      L[$mode]+="$ms "
      read -r ms cpu conns per <<<"$(one "$hosts" "$lnc" "$radix" fence)"
      F[$mode]+="$ms " C[$mode]+="$cpu " K[$mode]=$conns M[$mode]=$per
    done
  done
  for mode in flat tree; do
    radix=0
    [ $mode = tree ] && radix=16
    [ $mode = tree ] && [ "$hosts" -le 16 ] && radix=4
    ratio=
    [ $mode = tree ] && ratio="$(paired "${L[flat]}" "${L[tree]}"); $(paired "${F[flat]}" "${F[tree]}")"
    printf '%-10s %-5s %6s %10s %9s %11s %6s %11s  %s\n' "$n" "$mode$([ $mode = tree ] && echo "/$radix")" \
      "$(depth "$hosts" "$radix")" "$(tr ' ' '\n' <<<"${L[$mode]}" | grep . | median)" \
      "$(tr ' ' '\n' <<<"${F[$mode]}" | grep . | median)" "$(tr ' ' '\n' <<<"${C[$mode]}" | grep . | median)" \
      "${K[$mode]}" "${M[$mode]}" "$ratio"
  done
  unset L F C K M
done
echo "($REPS runs each, flat and tree alternating, each first in every other round; fence_msgs: FENCE/FENCE_SUB in + FENCE_DONE out at asrrun, per fence;"
echo " tree/flat: the median (p25-p75) of each round's tree time over the flat time run beside it)"
[ "$failures" = 0 ]
