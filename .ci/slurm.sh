#!/usr/bin/env bash
# A laptop-size SLURM on this one machine, for CI and for trying `--profile slurm` by hand:
#   munged, slurmctld, and two slurmd ("ci1", "ci2"), each slurmd in its own network namespace (own address,
#   own /etc/hosts), so a two-node job really runs two torchruns that meet over a network. Both "nodes" are this
#   machine: each is given its real CPU count and memory (slurmd -C), so together they oversubscribe it twice.
# Usage: .ci/slurm.sh up | down | status   (root; Debian's slurmctld slurmd slurm-client munge installed)
# No systemd: the daemons run in the foreground as children of this script's `up`, and `down` stops them by the
# PIDs `up` recorded (never by name). Without slurmdbd there is no accounting (`sacct` fails), so job status
# comes from squeue, which keeps a finished job for MinJobAge seconds.
set -euo pipefail

STATE=${HSITP_SLURM_STATE:-/tmp/hsitp-slurm}        # pids, logs, spool, controller state
CONF=/etc/slurm/slurm.conf                          # the job step drops SLURM_CONF: only the default path works
MARK="# written by hsitp .ci/slurm.sh"              # `down` removes only a config carrying this line
BRIDGE=hsitpbr0
NET=10.77.0                                         # the controller at .1, the nodes from .2 on
NODES=(ci1 ci2)
MIN_JOB_AGE=300                                     # >= 3 x any status delay, and > the plugin's longest poll gap

log() { printf '[slurm.sh] %s\n' "$*" >&2; }

node_ns() { echo "hsitp-$1"; }

node_addr() { echo "${NET}.$(($1 + 2))"; } # address of node number $1 (0-based) of NODES

write_conf() {
  local hw cpus mem host
  # The node's real hardware, as slurmd reports it (CPUs, sockets, cores, threads, memory)
  hw=$(slurmd -C | head -n 1)
  cpus=$(sed -E 's/.*CPUs=([0-9]+).*/\1/' <<<"$hw")
  mem=$(sed -E 's/.*RealMemory=([0-9]+).*/\1/' <<<"$hw")
  local topo
  topo=$(grep -oE '(Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' <<<"$hw" | tr '\n' ' ')
  host=$(hostname -s)
  mkdir -p "$(dirname "$CONF")"
  {
    echo "$MARK on $(date -u +%FT%TZ); removed by '.ci/slurm.sh down'"
    echo "ClusterName=hsitpci"
    echo "SlurmctldHost=${host}(${NET}.1)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "StateSaveLocation=$STATE/ctld"
    echo "SlurmdSpoolDir=$STATE/spool/%n"
    echo "SlurmctldPidFile=$STATE/slurmctld.pid"
    echo "SlurmdPidFile=$STATE/slurmd-%n.pid"
    echo "SlurmctldLogFile=$STATE/log/slurmctld.log"
    echo "SlurmdLogFile=$STATE/log/slurmd-%n.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    # no cgroups in a container: track processes by parent pid, no task binding
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core_Memory"
    echo "SchedulerType=sched/backfill"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/none"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "MinJobAge=$MIN_JOB_AGE"
    echo "SlurmctldTimeout=30"
    echo "SlurmdTimeout=60"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    local i
    for i in "${!NODES[@]}"; do
      echo "NodeName=${NODES[$i]} NodeAddr=$(node_addr "$i") CPUs=$cpus ${topo}RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=ci Nodes=$(
      IFS=,
      echo "${NODES[*]}"
    ) Default=YES MaxTime=INFINITE State=UP"
  } >"$CONF"
  log "slurm.conf: ${#NODES[@]} nodes of CPUs=$cpus RealMemory=${mem}MB (this machine's, from slurmd -C)"
}

net_up() {
  local i j ns
  ip link add "$BRIDGE" type bridge
  ip addr add "${NET}.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in "${!NODES[@]}"; do
    ns=$(node_ns "${NODES[$i]}")
    ip netns add "$ns"
    ip link add "hsv$i" type veth peer name hs0 netns "$ns"
    ip link set "hsv$i" master "$BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(node_addr "$i")/24" dev hs0
    ip -n "$ns" link set hs0 up
    ip -n "$ns" route add default via "${NET}.1"
    # `ip netns exec` mounts /etc/netns/NS/hosts over /etc/hosts: node names resolve to node addresses, and this
    # machine's hostname to the node's own address (gloo binds to what the hostname resolves to)
    mkdir -p "/etc/netns/$ns"
    {
      grep -v -w -e "$(hostname)" -e "$(hostname -s)" /etc/hosts || true
      echo "${NET}.1 hsitpctl"
      for j in "${!NODES[@]}"; do
        echo "$(node_addr "$j") ${NODES[$j]}"
      done
      echo "$(node_addr "$i") $(hostname) $(hostname -s)"
      echo "::1 localhost ip6-localhost"
    } >"/etc/netns/$ns/hosts"
    # No DNS server is reachable from a node's namespace: a reverse lookup that misses the hosts file (c10d names
    # each store client, IPv4-mapped ::ffff:a.b.c.d included) waited 10 s for the host's resolver on every torch
    # job start. A resolver on the node's own loopback, where nothing listens, fails such a lookup at once.
    printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"/etc/netns/$ns/resolv.conf"
  done
  # traffic between the nodes crosses the bridge; where br_netfilter is loaded, let iptables pass it
  if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] && command -v iptables >/dev/null; then
    iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null || true
  fi
}

net_down() {
  local i ns
  for i in "${!NODES[@]}"; do
    ns=$(node_ns "${NODES[$i]}")
    ip link del "hsv$i" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  if command -v iptables >/dev/null; then
    iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null || true
  fi
}

record() { echo "$1 $2" >>"$STATE/pids"; }

start_bg() { # name logfile command...: start in the background, record the PID (the command exec's the daemon)
  local name=$1 out=$2
  shift 2
  nohup "$@" >"$out" 2>&1 &
  record "$name" $!
}

wait_for() { # seconds description command...
  local secs=$1 what=$2
  shift 2
  local t=0
  until "$@" >/dev/null 2>&1; do
    sleep 1
    t=$((t + 1))
    if [ "$t" -ge "$secs" ]; then
      log "timed out after ${secs}s waiting for $what"
      return 1
    fi
  done
}

nodes_idle_or_dead() { # true when every node is idle; exits the script when a slurmd died on the way
  local name pid
  while read -r name pid; do
    [ -e "/proc/$pid" ] || {
      log "$name ($pid) exited while starting"
      tail -n 20 "$STATE"/log/* >&2 || true
      exit 1
    }
  done <"$STATE/pids"
  [ "$(sinfo -h -N -o '%T' | grep -c -x idle)" -eq "${#NODES[@]}" ]
}

up() {
  [ "$(id -u)" -eq 0 ] || {
    log "must run as root"
    exit 1
  }
  for tool in munged slurmctld slurmd sbatch squeue ip; do
    command -v "$tool" >/dev/null || {
      log "$tool not found (apt-get install slurmctld slurmd slurm-client munge iproute2)"
      exit 1
    }
  done
  if [ -e "$CONF" ] && ! grep -q "^$MARK" "$CONF"; then
    log "$CONF exists and is not ours; refusing to replace a real SLURM config"
    exit 1
  fi
  if [ -s "$STATE/pids" ]; then
    log "a previous run left $STATE/pids; stopping it first"
    down
  fi
  rm -rf "$STATE"
  mkdir -p "$STATE/log" "$STATE/ctld" "$STATE/spool"
  local t0=$SECONDS

  # munge: its socket folder must be world-readable (0755) or clients cannot reach the daemon
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge
  chmod 0755 /run/munge
  [ -s /etc/munge/munge.key ] || {
    mungekey --create --keyfile /etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
  }
  start_bg munged "$STATE/log/munged.out" setpriv --reuid=munge --regid=munge --init-groups munged -F
  wait_for 20 "munged" sh -c 'munge -n | unmunge'

  write_conf
  net_up
  start_bg slurmctld "$STATE/log/slurmctld.out" slurmctld -D
  wait_for 30 "slurmctld" scontrol ping
  local node
  for node in "${NODES[@]}"; do
    mkdir -p "$STATE/spool/$node"
    # nsenter, not `ip netns exec`: that remounts /sys for the namespace, hiding /sys/fs/cgroup, which slurmd
    # needs. A private mount namespace puts the node's hosts and resolv.conf over /etc's for slurmd and its jobs.
    start_bg slurmd "$STATE/log/slurmd-$node.out" unshare --mount --propagation private \
      sh -c 'mount --bind "$1/hosts" /etc/hosts && mount --bind "$1/resolv.conf" /etc/resolv.conf &&
        exec nsenter --net="/run/netns/$2" slurmd -D -N "$3"' \
      sh "/etc/netns/$(node_ns "$node")" "$(node_ns "$node")" "$node"
  done
  if ! wait_for 60 "both nodes idle" nodes_idle_or_dead; then
    sinfo -N -l >&2 || true
    tail -n 20 "$STATE"/log/* >&2 || true
    exit 1
  fi
  log "up in $((SECONDS - t0))s: $(sinfo -h -N -o '%N(%T,%c cpus,%m MB)' | tr '\n' ' ')"
}

stop_pid() { # name pid: TERM, wait up to 15 s, then KILL; only if the PID still runs that program
  local name=$1 pid=$2 t=0
  [ -r "/proc/$pid/comm" ] || return 0
  if [ "$(cat "/proc/$pid/comm")" != "$name" ]; then
    log "pid $pid is no longer $name; leaving it alone"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || return 0
  while [ -e "/proc/$pid" ] && [ "$t" -lt 15 ]; do
    sleep 1
    t=$((t + 1))
  done
  if [ -e "/proc/$pid" ]; then
    log "$name ($pid) ignored TERM for 15 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
}

down() {
  if [ -s "$STATE/pids" ]; then
    # end every job of this cluster first, so no slurmstepd outlives its slurmd
    if scontrol ping >/dev/null 2>&1; then
      squeue -h -o '%i' 2>/dev/null | xargs -r scancel 2>/dev/null || true
      wait_for 20 "jobs to end" sh -c '[ -z "$(squeue -h -o %i)" ]' || true
    fi
    # slurmd, then slurmctld, then munged: the reverse of the start order
    local name pid
    tac "$STATE/pids" | while read -r name pid; do
      stop_pid "$name" "$pid"
    done
    rm -f "$STATE/pids"
    log "daemons stopped"
  fi
  net_down
  if [ -e "$CONF" ] && grep -q "^$MARK" "$CONF"; then
    rm -f "$CONF"
  fi
}

status() {
  if [ -s "$STATE/pids" ]; then
    local name pid
    while read -r name pid; do
      if [ -e "/proc/$pid" ]; then echo "$name $pid running"; else echo "$name $pid gone"; fi
    done <"$STATE/pids"
    sinfo -N -l || true
  else
    echo "not up (no $STATE/pids)"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
