#!/usr/bin/env bash
# A private two-node Slurm cluster on this one machine, for tests.
#
#   tests/slurm/cluster.sh install               apt-get what is missing (root)
#   tests/slurm/cluster.sh start BASEDIR         munged + slurmctld + slurmd n1, n2
#   tests/slurm/cluster.sh exec BASEDIR CMD...   run CMD in the controller netns
#   tests/slurm/cluster.sh stop BASEDIR          stop all of it (idempotent)
#
# Exit status 77 (the automake "skip" code) with a one-line reason when this
# machine cannot run Slurm (not root, packages missing, no network namespaces).
#
# Layout. Every emulated node gets its own network identity, because the asr
# runtime identifies a peer by (IP address, logical core) and runs one
# rendezvous server per host on a fixed port: two nodes sharing 127.0.0.1
# would collide. So there are three network namespaces, all named after a
# random id chosen at start ("asrs<id>-c", "asrs<id>-n1", "asrs<id>-n2"):
#
#   asrs<id>-c   br0 198.18.0.100/24 (the bridge), vn1, vn2: munged, slurmctld,
#                and every client (srun/salloc/sbatch/sinfo) via "exec"
#   asrs<id>-n1  eth0 198.18.0.101/24 (veth peer of vn1): slurmd -N n1
#   asrs<id>-n2  eth0 198.18.0.102/24 (veth peer of vn2): slurmd -N n2
#
# Nothing is created in the root namespace: the veth pairs are created from
# inside the node namespace with their peer placed directly in the controller
# namespace, and the bridge lives in the controller namespace. 198.18.0.0/15 is
# reserved for benchmarking (RFC 2544), so it never clashes with a real network,
# and since each cluster has its own namespaces, several clusters may use the
# same addresses at the same time.
#
# The namespaces share the mount, PID, UTS and IPC namespaces with the host:
# files (BASEDIR, the munge socket, which is a Unix path), gethostname(), /dev/shm
# and the CPUs are shared by the emulated nodes; only the network differs.
#
# Everything lives under BASEDIR:
#   slurm.conf, env (sourceable: SLURM_CONF, ASR_SLURM_*), cluster.id,
#   netns.list (namespaces created, for stop), pids/NAME.pid ("PID STARTTIME"),
#   munge/ (key, seed, pid, log), munge-sock/ (0755), state/, spool/nK/, tmp/nK/,
#   log/ (daemon logs).
set -euo pipefail

prog=${0##*/}
SKIP=77
SUBNET_PREFIX=198.18.0
CTL_ADDR=$SUBNET_PREFIX.100
NODES=(n1 n2)
CPUS_PER_NODE=4
START_TIMEOUT=30 # seconds until both nodes must be idle
STOP_WAIT=10     # seconds a daemon gets between SIGTERM and SIGKILL

say() { echo "$prog: $*" >&2; }
die() { say "$*"; exit 1; }
skip() { echo "$prog: skip: $*" >&2; exit "$SKIP"; }

usage() {
  cat >&2 <<EOF
usage: $prog install
       $prog start BASEDIR
       $prog exec BASEDIR CMD [ARGS...]
       $prog stop BASEDIR
EOF
  exit 2
}

# ---------------------------------------------------------------- install ---

PKGS=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libpmix-dev iproute2)

missing_pkgs() {
  local p
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

cmd_install() {
  command -v dpkg-query >/dev/null 2>&1 || skip "no dpkg-query: not a Debian-like system"
  local missing
  mapfile -t missing < <(missing_pkgs)
  if [ ${#missing[@]} -eq 0 ]; then
    echo "$prog: all ${#PKGS[@]} packages present"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || skip "packages missing (${missing[*]}) and not root to install them"
  command -v apt-get >/dev/null 2>&1 || skip "packages missing (${missing[*]}) and no apt-get"
  export DEBIAN_FRONTEND=noninteractive
  echo "$prog: installing ${missing[*]}"
  # The package lists may be stale or absent: update only when a plain install fails.
  if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
      skip "apt-get install ${missing[*]} failed"
  fi
  mapfile -t missing < <(missing_pkgs)
  [ ${#missing[@]} -eq 0 ] || skip "still missing after apt-get: ${missing[*]}"
  echo "$prog: installed"
}

# ------------------------------------------------------------- processes ---

# Field 3 (state) and field 22 (start time) of /proc/PID/stat. The comm field
# may hold spaces and parentheses, so cut after the last ')'.
proc_stat_field() { # PID FIELD
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  # after "pid (comm) " the fields are numbered from 3
  awk -v f="$(($2 - 2))" '{ print $f }' <<<"$s"
}

# True when the process recorded in pidfile F is still the one we started and
# has not exited. A zombie still answers kill -0 (the notes: after setsid from
# an exited script), so the state field decides; the start time guards against
# the pid having been reused by an unrelated process.
recorded_alive() { # PIDFILE
  local pid start state now
  [ -s "$1" ] || return 1
  read -r pid start <"$1" || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  state=$(proc_stat_field "$pid" 3) || return 1
  now=$(proc_stat_field "$pid" 22) || return 1
  [ "$now" = "$start" ] || return 1
  [ "$state" != Z ] && [ "$state" != X ]
}

recorded_pid() { local pid _; read -r pid _ <"$1"; echo "$pid"; }

# Run CMD in network namespace NS, and only there. Not "ip netns exec": that
# also unshares the mount namespace and mounts a fresh /sys for the netns,
# which hides /sys/fs/cgroup, and slurmd then dies with "No filesystem mounted
# on /sys/fs/cgroup / Unable to initialize cgroup plugin" (even with
# proctrack/linuxproc and task/none). nsenter --net switches the network
# namespace alone and execs without forking.
in_ns() { # NS CMD...
  local ns=$1
  shift
  nsenter --net="/run/netns/$ns" "$@"
}

# Start a daemon in the foreground mode of its own, in namespace NS, in a new
# session, and record its pid. In a non-interactive script a background child
# is not a process-group leader, so setsid(1) calls setsid() and execs without
# forking, and nsenter execs too: $! is the daemon itself. We check that below
# by its /proc comm.
spawn() { # NAME NS LOG CMD...
  local name=$1 ns=$2 log=$3
  shift 3
  setsid nsenter --net="/run/netns/$ns" "$@" </dev/null >>"$log" 2>&1 &
  local pid=$!
  local start=""
  local i
  for i in $(seq 50); do
    start=$(proc_stat_field "$pid" 22) && break
    sleep 0.01
  done
  [ -n "$start" ] || die "$name exited at once (see $log)"
  echo "$pid $start" >"$B/pids/$name.pid"
}

# Wait until the exec has happened (comm is no longer setsid/nsenter) and the
# process still runs; fail with the log's tail otherwise.
check_spawned() { # NAME EXPECTED_COMM LOG
  local f=$B/pids/$1.pid pid comm i
  pid=$(recorded_pid "$f")
  for i in $(seq 100); do
    recorded_alive "$f" || { tail -n 20 "$3" >&2 || true; die "$1 died at start (log $3)"; }
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    [ "$comm" = "$2" ] && return 0
    sleep 0.01
  done
  die "$1: pid $pid runs '$comm', not $2"
}

# SIGTERM every recorded, live daemon; then wait (bounded) for all to go,
# then SIGKILL what is left. Only pids from BASEDIR/pids, never by name.
stop_recorded() {
  local f pid live=() i
  shopt -s nullglob
  # slurmds first, then slurmctld, munged last (the others use it).
  for f in "$B"/pids/slurmd-*.pid "$B"/pids/slurmctld.pid "$B"/pids/munged.pid; do
    if recorded_alive "$f"; then
      pid=$(recorded_pid "$f")
      kill -TERM "$pid" 2>/dev/null || true
      live+=("$f")
    fi
  done
  for ((i = 0; i < STOP_WAIT * 20 && ${#live[@]} > 0; i++)); do
    local still=()
    for f in "${live[@]}"; do recorded_alive "$f" && still+=("$f"); done
    live=("${still[@]+"${still[@]}"}")
    [ ${#live[@]} -gt 0 ] && sleep 0.05
  done
  for f in "${live[@]+"${live[@]}"}"; do
    pid=$(recorded_pid "$f")
    say "$(basename "$f" .pid) (pid $pid) ignored SIGTERM for ${STOP_WAIT}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  done
  for f in "$B"/pids/*.pid; do
    for ((i = 0; i < 100; i++)); do recorded_alive "$f" || break; sleep 0.02; done
    recorded_alive "$f" || rm -f "$f"
  done
  shopt -u nullglob
}

# The pids of this process and its ancestors: never signal those (a test may
# call "stop" from inside the controller namespace via "exec").
ancestors() {
  local p=$$
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    echo "$p"
    p=$(proc_stat_field "$p" 4) || break
  done
}

# True when PID is this script or one of its children (or theirs): the
# command substitutions that run while sweeping.
descends_from_us() { # PID
  local p=$1
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    [ "$p" = $$ ] && return 0
    p=$(proc_stat_field "$p" 4) || return 0 # gone already: nothing to do
  done
  return 1
}

# Processes still inside one of our namespaces once the daemons are gone:
# slurmstepd and job tasks (slurmstepd daemonizes away from slurmd, so a step
# that outlived scancel survives its slurmd), or a client a test left behind.
# Only processes in namespaces this cluster created can be there, so they are
# all descendants of this cluster; a netns lives on as long as a process is in
# it, so this is also what lets the namespaces really go away.
sweep_namespaces() {
  local ns pids=() p anc i
  anc=" $(ancestors | tr '\n' ' ') "
  for ns in "${NETNS[@]+"${NETNS[@]}"}"; do
    [ -e "/run/netns/$ns" ] || continue
    for p in $(ip netns pids "$ns" 2>/dev/null || true); do
      [[ $anc == *" $p "* ]] && continue
      descends_from_us "$p" && continue # our own helper commands
      pids+=("$p:$(proc_stat_field "$p" 22 || echo gone)")
    done
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  # Each entry is PID:STARTTIME, so that a pid reused meanwhile is left alone.
  for p in "${pids[@]}"; do
    same_proc "$p" || continue
    say "leftover process in cluster namespace: pid ${p%%:*} ($(cat "/proc/${p%%:*}/comm" 2>/dev/null)): SIGTERM"
    kill -TERM "${p%%:*}" 2>/dev/null || true
  done
  for ((i = 0; i < 60; i++)); do
    local left=0
    for p in "${pids[@]}"; do
      same_proc "$p" && [ "$(proc_stat_field "${p%%:*}" 3)" != Z ] && left=1
    done
    [ $left -eq 0 ] && return 0
    sleep 0.05
  done
  for p in "${pids[@]}"; do
    if same_proc "$p"; then kill -KILL "${p%%:*}" 2>/dev/null || true; fi
  done
}

same_proc() { # PID:STARTTIME
  [ "$(proc_stat_field "${1%%:*}" 22 2>/dev/null)" = "${1#*:}" ]
}

# ----------------------------------------------------------------- state ---

set_base() { # BASEDIR (must exist for stop/exec; created by start)
  [ -n "${1:-}" ] || usage
  B=$(cd "$1" && pwd) || die "no such directory: $1"
  CONF=$B/slurm.conf
}

load_ids() {
  NETNS=()
  [ -f "$B/netns.list" ] && mapfile -t NETNS <"$B/netns.list"
  ID=""
  [ -f "$B/cluster.id" ] && ID=$(cat "$B/cluster.id")
  CTL_NS=${ID:+asrs$ID-c}
}

in_ctl() { in_ns "$CTL_NS" env SLURM_CONF="$CONF" "$@"; }

# Is the port free for listening in namespace NS? The namespaces are new, so
# this is a formality, but it costs nothing.
port_free() { # NS PORT
  [ -z "$(in_ns "$1" ss -Htln "sport = :$2" 2>/dev/null)" ]
}

# ----------------------------------------------------------------- start ---

# Create network namespace NAME, recorded in netns.list *before* it exists so
# that a start killed at any point leaves nothing stop cannot find (stop skips
# names that do not exist). Never records a name that was already there (it
# would belong to someone else).
add_netns() { # NAME
  local err
  [ ! -e "/run/netns/$1" ] || die "network namespace $1 already exists"
  echo "$1" >>"$B/netns.list"
  NETNS+=("$1")
  if ! err=$(ip netns add "$1" 2>&1); then
    unset 'NETNS[${#NETNS[@]}-1]'
    printf '%s\n' "${NETNS[@]+"${NETNS[@]}"}" | grep -v '^$' >"$B/netns.list" || true
    skip "cannot create a network namespace: $err"
  fi
}

# EXIT trap while starting: on any failure (die, skip, set -e) stop what was
# started and keep the exit status.
start_failed() {
  local rc=$?
  trap - EXIT
  if [ $rc -ne 0 ]; then
    say "start failed; stopping what was started"
    cmd_stop_inner || true
  fi
  exit $rc
}

cmd_start() {
  [ $# -eq 1 ] || usage
  [ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, slurmd as root)"
  local c
  for c in ip ss nsenter munged mungekey munge unmunge slurmctld slurmd sinfo srun scontrol squeue scancel setsid timeout; do
    command -v "$c" >/dev/null 2>&1 || skip "$c not found: run '$prog install' first"
  done
  [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] || [ -n "$(find /usr/lib*/ -name mpi_pmix.so -path '*slurm*' 2>/dev/null | head -n 1)" ] ||
    skip "Slurm's PMIx plugin (mpi_pmix.so) not found"
  mkdir -p "$1"
  set_base "$1"
  load_ids
  # Unix socket paths live under BASEDIR and are limited to 107 bytes; the
  # longest is the PMIx plugin's BASEDIR/spool/nK/stepd.slurm.pmix.JOB.STEP.
  [ ${#B} -le 60 ] || die "BASEDIR path too long (${#B} > 60 chars): Unix socket paths under it would not fit"
  if [ -n "$ID" ]; then
    local f
    for f in "$B"/pids/*.pid; do
      [ -e "$f" ] && recorded_alive "$f" && die "a cluster is already running in $B (run '$prog stop $B' first)"
    done
    # A previous start that was not stopped: clean it first.
    cmd_stop_inner
  fi

  local t0
  t0=$(date +%s.%N)
  # From here on, any failure stops what was started.
  trap start_failed EXIT
  # A signal must also run the cleanup (bash skips the EXIT trap otherwise).
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP

  rm -rf "$B/state" "$B/spool" "$B/tmp" "$B/log" "$B/pids" "$B/munge" "$B/munge-sock" "$B/env"
  mkdir -p "$B/state" "$B/log" "$B/pids"
  local n
  for n in "${NODES[@]}"; do mkdir -p "$B/spool/$n" "$B/tmp/$n"; done
  # munged refuses a key/log/pid directory writable by others, and its socket
  # directory must be 0755 or clients get "Socket is inaccessible" (notes).
  mkdir -p "$B/munge" "$B/munge-sock"
  chmod 0700 "$B/munge"
  chmod 0755 "$B/munge-sock"

  # ---- network namespaces
  while :; do
    ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
    compgen -G "/run/netns/asrs$ID-*" >/dev/null || break
  done
  echo "$ID" >"$B/cluster.id"
  CTL_NS=asrs$ID-c
  : >"$B/netns.list"
  NETNS=()
  local err
  add_netns "$CTL_NS"
  ip -n "$CTL_NS" link set lo up
  err=$(ip -n "$CTL_NS" link add br0 type bridge 2>&1) || skip "cannot create a bridge in a namespace: $err"
  ip -n "$CTL_NS" addr add "$CTL_ADDR/24" dev br0
  ip -n "$CTL_NS" link set br0 up
  local k ns
  for k in "${!NODES[@]}"; do
    n=${NODES[$k]}
    ns=asrs$ID-$n
    add_netns "$ns"
    ip -n "$ns" link set lo up
    # Created from inside the node namespace, peer straight into the
    # controller namespace: no interface ever appears in the root namespace.
    err=$(ip -n "$ns" link add eth0 type veth peer name "v$n" netns "$CTL_NS" 2>&1) ||
      skip "cannot create a veth pair between namespaces: $err"
    ip -n "$CTL_NS" link set "v$n" master br0
    ip -n "$CTL_NS" link set "v$n" up
    ip -n "$ns" addr add "$SUBNET_PREFIX.$((101 + k))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done

  # ---- ports: outside the ephemeral range (32768-60999 by default), where
  # srun/slurmstepd open their own listening sockets.
  local ctld_port slurmd_port
  while :; do
    ctld_port=$((20000 + RANDOM % 10000))
    slurmd_port=$((ctld_port + 1))
    port_free "$CTL_NS" "$ctld_port" || continue
    for n in "${NODES[@]}"; do port_free "asrs$ID-$n" "$slurmd_port" || continue 2; done
    break
  done

  # ---- slurm.conf
  local host
  host=$(hostname -s)
  {
    echo "# Private test cluster $ID, written by $prog; see tests/slurm/cluster.sh."
    echo "ClusterName=asr$ID"
    # slurmctld checks that gethostname() matches SlurmctldHost; the netns
    # shares the UTS namespace, the address in parentheses is the bridge's.
    echo "SlurmctldHost=$host($CTL_ADDR)"
    echo "SlurmctldPort=$ctld_port"
    echo "SlurmdPort=$slurmd_port"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$B/munge-sock/munge.socket"
    echo "StateSaveLocation=$B/state"
    # %n: one spool and one TmpFS per emulated node. A shared TmpFS breaks the
    # PMIx plugin: 'Cannot create directory "/tmp/spmix_appdir_0_1.0": File
    # exists' (notes).
    echo "SlurmdSpoolDir=$B/spool/%n"
    echo "TmpFS=$B/tmp/%n"
    echo "SlurmctldPidFile=$B/log/slurmctld.pidfile"
    echo "SlurmdPidFile=$B/log/slurmd-%n.pidfile"
    echo "SlurmctldLogFile=$B/log/slurmctld.log"
    echo "SlurmdLogFile=$B/log/slurmd-%n.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SwitchType=switch/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    # Lets a node claim more CPUs than the machine has; without it 'srun -n 4'
    # pends forever without an error (notes).
    echo "SlurmdParameters=config_overrides"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "MailProg=/bin/true"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AcctGatherEnergyType=acct_gather_energy/none"
    echo "JobCompType=jobcomp/none"
    # Short waits: a cancelled test job should not hold up teardown.
    echo "KillWait=2"
    # sbatch --wait polls after 2 s, then multiplies its sleep by 4 while it
    # is below MinJobAge/2 (8 s, 32 s): with 5 it keeps polling every 2 s.
    # Finished jobs stay visible to scontrol for at least 5 s.
    echo "MinJobAge=5"
    echo "InactiveLimit=0"
    echo "SlurmdTimeout=30"
    echo "SchedulerType=sched/backfill"
    # Otherwise slurmctld holds each batch job back for its batch_sched_delay
    # before the scheduler looks at it; with 0 it is scheduled at once.
    echo "SchedulerParameters=batch_sched_delay=0"
    for k in "${!NODES[@]}"; do
      echo "NodeName=${NODES[$k]} NodeHostname=$host NodeAddr=$SUBNET_PREFIX.$((101 + k)) CPUs=$CPUS_PER_NODE State=UNKNOWN"
    done
    echo "PartitionName=test Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
    # For experiments: extra lines from the caller (a later line overrides an
    # earlier one).
    if [ -n "${ASR_SLURM_CONF_EXTRA:-}" ]; then printf '%s\n' "$ASR_SLURM_CONF_EXTRA"; fi
  } >"$CONF"
  export SLURM_CONF=$CONF

  # ---- munged (in the controller namespace; its socket is a Unix path, so
  # slurmd/slurmstepd/clients in every namespace reach it).
  local sock=$B/munge-sock/munge.socket
  mungekey --create --keyfile="$B/munge/munge.key" >/dev/null 2>&1 || die "mungekey --create failed"
  chmod 0400 "$B/munge/munge.key"
  spawn munged "$CTL_NS" "$B/log/munged.out" munged --foreground --force \
    --key-file="$B/munge/munge.key" --socket="$sock" --pid-file="$B/munge/munged.pid" \
    --log-file="$B/munge/munged.log" --seed-file="$B/munge/munged.seed"
  check_spawned munged munged "$B/log/munged.out"
  local i ok=0
  for i in $(seq 250); do
    if [ -S "$sock" ] && munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; then ok=1; break; fi
    recorded_alive "$B/pids/munged.pid" || break
    sleep 0.02
  done
  [ $ok -eq 1 ] || { tail -n 20 "$B/munge/munged.log" "$B/log/munged.out" >&2 || true; die "munged did not come up"; }

  # ---- slurmctld (-i: ignore any saved state; -D: foreground, so $! is it)
  spawn slurmctld "$CTL_NS" "$B/log/slurmctld.out" slurmctld -D -i -f "$CONF"
  check_spawned slurmctld slurmctld "$B/log/slurmctld.out"
  ok=0
  for i in $(seq 300); do
    if in_ctl timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; then ok=1; break; fi
    recorded_alive "$B/pids/slurmctld.pid" || break
    sleep 0.05
  done
  [ $ok -eq 1 ] || { tail -n 20 "$B/log/slurmctld.log" "$B/log/slurmctld.out" >&2 || true; die "slurmctld did not answer"; }

  # ---- one slurmd per node, each in its own namespace
  for n in "${NODES[@]}"; do
    spawn "slurmd-$n" "asrs$ID-$n" "$B/log/slurmd-$n.out" slurmd -D -N "$n" -f "$CONF"
  done
  for n in "${NODES[@]}"; do
    check_spawned "slurmd-$n" slurmd "$B/log/slurmd-$n.out"
  done

  # ---- wait until sinfo shows every node idle
  local idle=0 deadline
  deadline=$(($(date +%s) + START_TIMEOUT))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    idle=$(in_ctl timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)
    [ "$idle" -eq ${#NODES[@]} ] && break
    for f in "$B"/pids/*.pid; do
      recorded_alive "$f" || { tail -n 20 "$B/log/$(basename "$f" .pid).log" "$B/log/$(basename "$f" .pid).out" >&2 2>/dev/null || true; die "$(basename "$f" .pid) died"; }
    done
    sleep 0.05
  done
  if [ "$idle" -ne ${#NODES[@]} ]; then
    in_ctl timeout 5 sinfo -N -l >&2 || true
    for n in "${NODES[@]}"; do tail -n 10 "$B/log/slurmd-$n.log" >&2 2>/dev/null || true; done
    die "nodes not idle after ${START_TIMEOUT}s"
  fi

  # ---- the client environment
  {
    echo "# Source this file; run clients in the controller namespace:"
    echo "#   ip netns exec \"\$ASR_SLURM_CTL_NS\" srun ...   (or: $prog exec $B srun ...)"
    printf 'export SLURM_CONF=%q\n' "$CONF"
    printf 'export ASR_SLURM_BASEDIR=%q\n' "$B"
    printf 'export ASR_SLURM_ID=%q\n' "$ID"
    printf 'export ASR_SLURM_CTL_NS=%q\n' "$CTL_NS"
    printf 'export ASR_SLURM_CTL_ADDR=%q\n' "$CTL_ADDR"
    printf 'export ASR_SLURM_NODES=%q\n' "${NODES[*]}"
    for k in "${!NODES[@]}"; do
      n=${NODES[$k]}
      printf 'export ASR_SLURM_%s_NS=%q\n' "${n^^}" "asrs$ID-$n"
      printf 'export ASR_SLURM_%s_ADDR=%q\n' "${n^^}" "$SUBNET_PREFIX.$((101 + k))"
    done
    printf 'export ASR_SLURM_MUNGE_SOCKET=%q\n' "$sock"
  } >"$B/env"
  trap - EXIT INT TERM HUP
  local t1
  t1=$(date +%s.%N)
  echo "$prog: cluster $ID up in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s: nodes ${NODES[*]} idle; env in $B/env"
}

# ------------------------------------------------------------------ exec ---

cmd_exec() {
  [ $# -ge 2 ] || usage
  set_base "$1"
  shift
  [ -f "$B/env" ] || die "no cluster env in $B (not started?)"
  # shellcheck source=/dev/null
  . "$B/env"
  exec nsenter --net="/run/netns/$ASR_SLURM_CTL_NS" "$@"
}

# ------------------------------------------------------------------ stop ---

cmd_stop_inner() {
  load_ids
  # 1. Cancel leftover jobs while slurmctld and the slurmds still run, so the
  #    slurmds kill their steps' tasks; then wait (bounded) until none is left.
  if [ -n "$CTL_NS" ] && [ -f "$CONF" ] && recorded_alive "$B/pids/slurmctld.pid"; then
    local jobs i
    jobs=$(in_ctl timeout 5 squeue -h -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086  # one word per job id
      in_ctl timeout 5 scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 100; i++)); do
        [ -z "$(in_ctl timeout 5 squeue -h -o %A 2>/dev/null || true)" ] && break
        sleep 0.1
      done
    fi
  fi
  # 2. The daemons, by recorded pid.
  [ -d "$B/pids" ] && stop_recorded
  # 3. Whatever is still inside our namespaces, then the namespaces.
  sweep_namespaces
  local ns k
  for ((k = ${#NETNS[@]} - 1; k >= 0; k--)); do
    ns=${NETNS[$k]}
    if [ -e "/run/netns/$ns" ]; then
      ip netns del "$ns" 2>/dev/null || say "could not delete network namespace $ns"
    fi
  done
  rm -f "$B/netns.list" "$B/env"
  [ -e "$B/munge-sock/munge.socket" ] && rm -f "$B/munge-sock/munge.socket"
  return 0
}

cmd_stop() {
  [ $# -eq 1 ] || usage
  if [ ! -d "$1" ]; then return 0; fi # nothing was ever started there
  set_base "$1"
  [ -f "$B/cluster.id" ] || [ -d "$B/pids" ] || return 0
  cmd_stop_inner
}

# ------------------------------------------------------------------ main ---

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
  install) [ $# -eq 0 ] || usage; cmd_install ;;
  start) cmd_start "$@" ;;
  exec) cmd_exec "$@" ;;
  stop) cmd_stop "$@" ;;
  *) usage ;;
esac
