# tests/netns/lib.sh -- emulated hosts for multi-host tests: network
# namespaces joined by veth pairs to a bridge, sourced by netns.sh and by
# tests/bench/netns_bench.sh.
#
# Layout (nothing is created in the root namespace):
#   ${NETNS_PREFIX}sw            the "switch": bridge br0
#   ${NETNS_PREFIX}h1 .. hN      the hosts: lo, and asr0 = 198.18.0.K/24
# Host K is named after its namespace; asrrun runs in h1 and starts the
# daemons of every host with the agent "ip netns exec", which takes the host
# (= namespace) name first, like ssh. asrd --hostname gives each host its name.
#
# Everything here removes what it made, even after a failure: netns_teardown
# kills the processes inside our namespaces (all started by the test) and
# deletes the namespaces.

NETNS_PREFIX=${NETNS_PREFIX:-asr$$}
NETNS_HOSTS=()

netns_host() { echo "${NETNS_PREFIX}h$1"; }
netns_addr() { echo "198.18.0.$1"; }

# netns_setup N: creates N hosts and the switch. Returns non-zero (and
# removes what it made) when namespaces cannot be created here.
netns_setup() {
  local n=$1 k sw="${NETNS_PREFIX}sw"
  ip netns add "$sw" 2>/dev/null || return 1
  NETNS_HOSTS=("$sw")
  {
    ip -n "$sw" link set lo up &&
      ip -n "$sw" link add br0 type bridge &&
      ip -n "$sw" link set br0 up
  } || { netns_teardown; return 1; }
  for ((k = 1; k <= n; k++)); do
    local h; h=$(netns_host "$k")
    ip netns add "$h" || { netns_teardown; return 1; }
    NETNS_HOSTS+=("$h")
    {
      ip -n "$h" link set lo up &&
        ip -n "$sw" link add "p$k" type veth peer name asr0 netns "$h" &&
        ip -n "$sw" link set "p$k" master br0 up &&
        ip -n "$h" addr add "$(netns_addr "$k")/24" dev asr0 &&
        ip -n "$h" link set asr0 up
    } || { netns_teardown; return 1; }
  done
  # wait until host 1 reaches every other (bridge ports start forwarding): a
  # TCP connect to a closed port answers "refused" once the path works
  local until=$((SECONDS + 10))
  for ((k = 2; k <= n; k++)); do
    until [[ $(ip netns exec "$(netns_host 1)" timeout 2 bash -c "exec 3<>/dev/tcp/$(netns_addr "$k")/9" 2>&1) == *refused* ]]; do
      ((SECONDS < until)) || { netns_teardown; return 1; }
      sleep 0.1
    done
  done
  return 0
}

# netns_pids NS: the pids of every process inside namespace NS.
netns_pids() {
  local ino i n
  ino=$(stat -L -c %i "/run/netns/$1" 2>/dev/null) || return 0
  # one stat for every process (a process gone meanwhile is only an error line)
  stat -L -c '%i %n' /proc/[0-9]*/ns/net 2>/dev/null | while read -r i n; do
    [ "$i" = "$ino" ] && { n=${n#/proc/}; echo "${n%%/*}"; }
  done
  return 0
}

# netns_alive NS: the pids inside NS that are not zombies, with their names.
netns_alive() {
  local p st
  for p in $(netns_pids "$1"); do
    st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$st" ] && [ "$st" != Z ] && echo "$p($(cat "/proc/$p/comm" 2>/dev/null))"
  done
  return 0
}

# netns_leftovers: prints "NS: pid(name) ..." for every host with live processes.
netns_leftovers() {
  local h left
  for h in "${NETNS_HOSTS[@]}"; do
    left=$(netns_alive "$h" | tr '\n' ' ')
    [ -n "$left" ] && echo "$h: $left"
  done
  return 0
}

# netns_wait_empty SECONDS: waits until no job process is left anywhere.
netns_wait_empty() {
  local until=$((SECONDS + $1))
  while [ -n "$(netns_leftovers)" ]; do
    ((SECONDS < until)) || return 1
    sleep 0.2
  done
  return 0
}

# netns_suite BUILD_DIR: what a suite script over these hosts sets first:
# ASRRUN, APPS and EXAMPLES of that build, a work folder, and traps that
# remove the work folder and every namespace on any exit.
netns_suite() {
  ASRRUN=$1/bin/asrrun
  APPS=$1/tests/apps
  EXAMPLES=$1/examples
  work=$(mktemp -d)
  trap 'netns_teardown; rm -rf "$work"' EXIT
  trap 'exit 130' INT TERM
}

netns_teardown() {
  local h p
  for h in "${NETNS_HOSTS[@]}"; do
    for p in $(netns_pids "$h"); do kill -KILL "$p" 2>/dev/null; done
  done
  for h in "${NETNS_HOSTS[@]}"; do ip netns del "$h" 2>/dev/null; done
  NETNS_HOSTS=()
  return 0
}

# --- a suite of cases, each run flat and as a chain (verdict.sh, failure.sh) --
# A suite script defines one function per case; each calls run_job and
# says what went wrong with bad (the first reason is kept in $why, the
# case's output is $out, the tree arguments $TREE: "" for the flat star,
# "--tree-radix 1" for the chain in which host 3's daemon is host 2's
# child and host 2's host 1's).

# run_job OUT ARGS...: asrrun on host 1 with the agent, --timeout
# $JOB_TIMEOUT (default 90); stdout+stderr to OUT.
run_job() {
  local out=$1 t=${JOB_TIMEOUT:-90}; shift
  ip netns exec "$(netns_host 1)" timeout -k 5 $((t + 30)) "$ASRRUN" --launch-agent "ip netns exec" --timeout "$t" \
    "$@" >"$out" 2>&1 </dev/null
}

bad() { [ -z "$why" ] && why=$*; }

# Nothing of the job may be left on any host.
netns_clean() {
  if ! netns_wait_empty 15; then
    bad "processes left behind: $(netns_leftovers | tr '\n' ' ')"
    local h p
    for h in "${NETNS_HOSTS[@]}"; do for p in $(netns_pids "$h"); do kill -KILL "$p" 2>/dev/null; done; done
  fi
}

# netns_run_cases SUITE RUNS CASE...: each case flat and as a chain, RUNS
# times in a row; a PASS or FAIL line per case and tree (with the output
# of its first failing run).
netns_run_cases() {
  local suite=$1 runs=$2 c t i t0; shift 2
  for c in "$@"; do
    if ! declare -F "$c" >/dev/null; then
      echo "FAIL: $suite/$c (no such case)"
      continue
    fi
    for t in flat chain; do
      TREE=; [ $t = chain ] && TREE="--tree-radix 1"
      name=${c}_$t out=$work/$name.out why= t0=$SECONDS
      for ((i = 1; i <= runs; i++)); do
        "$c"
        netns_clean
        [ -n "$why" ] && break
      done
      if [ -n "$why" ]; then
        echo "FAIL: $suite/$name (run $i of $runs: $why)"
        tail -15 "$out" | sed 's/^/    /'
      else
        echo "PASS: $suite/$name ($runs run(s) in a row, $((SECONDS - t0)) s)"
      fi
    done
  done
}

# netns_cases_setup SUITE N CASE...: N hosts for the suite's cases, or a
# SKIP line per case and tree, saying why, and the script ends (exit 0).
netns_cases_setup() {
  local suite=$1 n=$2; shift 2
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    netns_skip_cases "$suite" "needs root and iproute2 to create network namespaces" "$@"
    exit 0
  fi
  if ! netns_setup "$n"; then
    netns_skip_cases "$suite" "network namespaces cannot be created on this machine" "$@"
    exit 0
  fi
}

# netns_skip_cases SUITE WHY CASE...: a SKIP line per case and tree.
netns_skip_cases() {
  local suite=$1 why=$2 c t; shift 2
  for c in "$@"; do for t in flat chain; do echo "SKIP: $suite/${c}_$t ($why)"; done; done
}

# --- many emulated hosts per namespace (tests/netns/tree.sh) ----------------
# netns_setup_many H PER: H emulated hosts, PER to a namespace
# (${NETNS_PREFIX}n1 .. nK, K = ceil(H / PER), on the switch as above). Host
# J (1..H) is named ${NETNS_PREFIX}eJ and has its own address on its
# namespace's asr0, 198.19.K.S/16 (S = its place in the namespace, 1..PER:
# inside 198.18.0.0/15). tests/netns/agent.sh starts a daemon in its host's
# namespace with asrd --addr its address, so that each emulated host is a
# daemon with its own name and address, and 130 of them fit 2 cores.
NETNS_PER=1
netns_ehost() { echo "${NETNS_PREFIX}e$1"; }
netns_ens() { echo "${NETNS_PREFIX}n$(((($1) - 1) / NETNS_PER + 1))"; }
netns_eaddr() { echo "198.19.$(((($1) - 1) / NETNS_PER + 1)).$(((($1) - 1) % NETNS_PER + 1))"; }

netns_setup_many() {
  local n=$1 k j sw="${NETNS_PREFIX}sw"
  NETNS_PER=$2
  local nns=$(((n + NETNS_PER - 1) / NETNS_PER))
  ip netns add "$sw" 2>/dev/null || return 1
  NETNS_HOSTS=("$sw")
  { ip -n "$sw" link set lo up && ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up; } ||
    { netns_teardown; return 1; }
  for ((k = 1; k <= nns; k++)); do
    local h="${NETNS_PREFIX}n$k"
    ip netns add "$h" || { netns_teardown; return 1; }
    NETNS_HOSTS+=("$h")
    {
      ip -n "$h" link set lo up &&
        ip -n "$sw" link add "p$k" type veth peer name asr0 netns "$h" &&
        ip -n "$sw" link set "p$k" master br0 up &&
        ip -n "$h" link set asr0 up
    } || { netns_teardown; return 1; }
  done
  for ((j = 1; j <= n; j++)); do
    ip -n "$(netns_ens "$j")" addr add "$(netns_eaddr "$j")/16" dev asr0 || { netns_teardown; return 1; }
  done
  # the first namespace reaches every other (bridge ports forwarding)
  local until=$((SECONDS + 10))
  for ((k = 2; k <= nns; k++)); do
    until [[ $(ip netns exec "${NETNS_PREFIX}n1" timeout 2 bash -c "exec 3<>/dev/tcp/198.19.$k.1/9" 2>&1) == *refused* ]]; do
      ((SECONDS < until)) || { netns_teardown; return 1; }
      sleep 0.1
    done
  done
  return 0
}

# netns_ehosts H SLOTS: the host list -H of hosts 1..H with SLOTS slots each.
netns_ehosts() {
  local j out=""
  for ((j = 1; j <= $1; j++)); do out+="${out:+,}$(netns_ehost "$j"):$2"; done
  echo "$out"
}

# netns_epid J PROG: the pid of PROG started for emulated host J (its asrd
# has --hostname HOST; a rank has ASR_HOSTNAME=HOST in its environment).
netns_easrd() {
  local p h; h=$(netns_ehost "$1")
  for p in $(netns_pids "$(netns_ens "$1")"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = asrd ] || continue
    tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qx -- "$h" && { echo "$p"; return 0; }
  done
  return 1
}
