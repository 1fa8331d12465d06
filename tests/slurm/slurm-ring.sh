#!/usr/bin/env bash
# A real Slurm (Debian's slurm-wlm 22.05 + munge) started by this script, no systemd, as root:
#
#   phase 1, one host:  munged, slurmctld and one slurmd on 127.0.0.1 (free ports);
#                       srun --mpi=list shows pmix, srun -N 1 -n 2 hostname,
#                       srun --mpi=pmix -n 2 printenv PMIX_RANK.
#   phase 2, 3 "nodes": each node a network namespace with its own UTS hostname (n0, n1, n2) and its
#                       own slurmd; slurmctld and srun in a fourth namespace ("the login node") that
#                       holds the bridge. Checks: the PMIx probe (3 hostnames, ranks 0..5), ring_shift
#                       --mpi=none with only RWIN_JOB_KEY (TCP store, root derived from SLURM_*), and
#                       ring_shift --mpi=pmix with no RWIN_* variable at all (the PMIx bootstrap),
#                       put and get, each printing OK on all 6 ranks.
#   phase 3, compose:   docker/slurm/entrypoint.sh unchanged in 4 stand-in "containers" (network,
#                       mount and UTS namespaces) as docker/compose.slurm.yaml runs it: the
#                       controller must report 6 x OK for put and get and exit 0.
#
# usage: slurm-ring.sh [RING_SHIFT]          (default build/bin/ring_shift)
#   env: RWSLURM_RUN_TIMEOUT  seconds per srun (default 120)
#        RWSLURM_DEADLINE     seconds for the whole script, clean-up included (default 540)
#        RWSLURM_SIZE         ring_shift --size (default 4096)
#        RWSLURM_KEEP_LOGS=1  keep the temp dir (configs, daemon and srun logs; not the munge key)
# The caller's RWIN_*, SLURM_*, PMIX_*, PMI_*, OMPI_* and UCX_* variables are unset first: srun hands
# its environment to every task.
#
# Network (phases 2, 3): everything lives in namespaces made here; 10.213.0.0/24 and 10.213.1.0/24
# (phase 3: rwslurm-<pid>-c-{slurmctl,n0,n1,n2} on a bridge in rwslurm-<pid>-cbr) exist only inside them,
# no namespace has a default route, the host's own interfaces and routes are not touched.
#   rwslurm-<pid>-ctl: bridge br0 = 10.213.0.254/24 (slurmctld, srun), ports p0..p2
#   rwslurm-<pid>-n<i>: rw0 = 10.213.0.<i+1>/24, veth to p<i>  (slurmd -N n<i>, hostname n<i>)
# Names resolve through /etc/netns/<ns>/hosts, which `ip netns exec` bind-mounts over /etc/hosts.
#
# Every daemon and srun gets RWSLURM_OWNER=<temp dir>/slurm, which marks it as ours: clean-up (on exit,
# error, deadline, SIGINT, SIGTERM) ends exactly the processes whose environment holds that marker
# (slurmstepd and tasks inherit it), then munged (RWSLURM_OWNER=<temp dir>/munge), then everything left in our namespaces, then deletes the
# namespaces (veths and bridge go with them), the /etc/netns entries and the temp dir. A run killed
# with SIGKILL leaves its pid in every name; the next run removes what belongs to dead pids.
# Missing slurm/munge binaries or no netns: FAILED, never a skip (CI runs as root with netns).
set -uo pipefail

DEADLINE=${RWSLURM_DEADLINE:-540}
# The whole run is bounded: timeout sends SIGTERM (our trap cleans up in < 20 s), SIGKILL 60 s later.
if [[ -z ${RWSLURM_BOUNDED:-} ]]; then
  # --foreground: stay in the caller's process group, so a terminal's Ctrl-C reaches the script.
  RWSLURM_BOUNDED=1 exec timeout --foreground -k 60 "$DEADLINE" bash "$0" "$@"
fi
unset RWSLURM_BOUNDED

SELF=slurm-ring
say() { echo "$SELF: $*"; }
die_early() { say "FAILED: $*"; say "summary: 0 passed, 1 failed"; exit 1; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PROG=${1:-$REPO/build/bin/ring_shift}
[[ $PROG == /* ]] || PROG=$PWD/$PROG
RUN_TIMEOUT=${RWSLURM_RUN_TIMEOUT:-120}
SIZE=${RWSLURM_SIZE:-4096}
CONF_IN=$HERE/slurm.conf.in
NODES=3
TASKS=6
SUBNET=10.213.0
CTL_ADDR=$SUBNET.254
SUBNET3=10.213.1 # phase 3

# A caller's launcher or rwin variables must reach no task (srun exports the whole environment), and
# a caller's own Slurm job must not be taken for ours.
for v in $(compgen -e); do
  case $v in RWIN_* | SLURM_* | SLURMD_* | PMIX_* | PMI_* | OMPI_* | UCX_*) unset "$v" ;; esac
done

[[ $(id -u) == 0 ]] || die_early "must run as root (daemons as SlurmUser=root, network namespaces)"
for tool in munged mungekey munge unmunge slurmctld slurmd srun sinfo scontrol ip ss unshare timeout; do
  command -v "$tool" >/dev/null ||
    die_early "'$tool' not found: install slurm-wlm, munge and iproute2 (.ci/setup.sh lists them)"
done
[[ -r $CONF_IN ]] || die_early "config template not found: $CONF_IN"
[[ -x $PROG ]] || die_early "ring_shift not found or not executable: $PROG (build it: ninja -C build ring_shift)"

TMP=${TMPDIR:-/tmp}
PREFIX="rwslurm-$$"
KEEP_LOGS=${RWSLURM_KEEP_LOGS:-0}

# ---- leftovers of runs that were SIGKILLed (their pid is in every name and is gone) -----------------
is_dead() { ! kill -0 "$1" 2>/dev/null; }
marked_pids() { # marked_pids MARK: processes whose environment has RWSLURM_OWNER=MARK...
  grep -lzF -- "RWSLURM_OWNER=$1" /proc/[0-9]*/environ 2>/dev/null | awk -F/ '{ print $3 }'
}
for d in "$TMP"/rwslurm-[0-9]*.*; do
  [[ -d $d ]] || continue
  pid=${d#"$TMP"/rwslurm-}
  pid=${pid%%.*}
  [[ $pid =~ ^[0-9]+$ ]] && is_dead "$pid" || continue
  say "removing leftovers of dead run $pid: $d"
  for p in $(marked_pids "$d/"); do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$d"
done
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rwslurm-[0-9]+-[a-z0-9-]+$'); do
  pid=${ns#rwslurm-}
  pid=${pid%%-*}
  is_dead "$pid" || continue
  say "removing namespace $ns of dead run $pid"
  for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  ip netns del "$ns"
done
for d in /etc/netns/rwslurm-[0-9]*-*; do
  [[ -d $d ]] || continue
  pid=${d#/etc/netns/rwslurm-}
  pid=${pid%%-*}
  is_dead "$pid" && rm -rf "$d"
done

# ---- state and clean-up -------------------------------------------------------------------------
DIR=$(mktemp -d "$TMP/$PREFIX.XXXXXX") || die_early "mktemp failed in $TMP"
chmod 755 "$DIR" # munged: its socket's directory must be searchable by all
NETNS_SELF=$SELF
source "$REPO/tests/lib/netns.sh"
MUNGED_PID=
BG_PIDS=()

stop_marked() { # TERM every process carrying our marker, KILL what is left after 5 s
  local pids p i
  pids=$(marked_pids "$DIR/slurm")
  [[ -z $pids ]] && return
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  for ((i = 0; i < 50; i++)); do
    pids=$(marked_pids "$DIR/slurm")
    [[ -z $pids ]] && return
    sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2>/dev/null; done
  for ((i = 0; i < 50; i++)); do
    [[ -z $(marked_pids "$DIR/slurm") ]] && return
    sleep 0.1
  done
  say "processes still running after SIGKILL: $(marked_pids "$DIR/slurm" | tr '\n' ' ')"
}
cleanup() {
  local p
  stop_marked
  for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
  if [[ -n $MUNGED_PID ]]; then
    kill -TERM "$MUNGED_PID" 2>/dev/null
    wait "$MUNGED_PID" 2>/dev/null
  fi
  netns_cleanup # what is left in our namespaces, the namespaces, their /etc/netns entries
  if [[ $KEEP_LOGS == 1 ]]; then
    rm -f "$DIR/munge.key" "$DIR/munge.sock"
    say "logs kept in $DIR (RWSLURM_KEEP_LOGS=1)"
    return
  fi
  rm -rf "$DIR"
}
on_signal() {
  say "caught $1 (deadline ${DEADLINE}s or interrupted), cleaning up"
  trap - EXIT
  dump_logs
  cleanup
  fail "interrupted by $1 (deadline ${DEADLINE}s, or stopped from outside); daemons and namespaces removed"
  summary
  exit $((128 + $2))
}
trap cleanup EXIT
trap 'on_signal SIGINT 2' INT
trap 'on_signal SIGTERM 15' TERM

PASSED=0
FAILED=0
RESULTS=()
pass() { PASSED=$((PASSED + 1)); RESULTS+=("OK     $*"); say "OK $*"; }
fail() { FAILED=$((FAILED + 1)); RESULTS+=("FAILED $*"); say "FAILED $*"; }
summary() {
  say "summary ($(basename "$PROG")):"
  local l
  for l in "${RESULTS[@]}"; do say "  $l"; done
  say "summary: $PASSED passed, $FAILED failed"
}
dump_logs() { # the daemons' logs, for a failure
  local f
  for f in "$DIR"/*/*.log "$DIR"/*/*.log.err "$DIR"/compose/*/lib/*.log "$DIR"/munged.err; do
    [[ -s $f ]] || continue
    say "--- ${f#"$DIR"/} (last 15 lines) ---"
    tail -n 15 "$f" | sed "s/^/$SELF:   | /"
  done
}
abort() { # a set-up step failed: nothing after it can run
  fail "$*"
  dump_logs
  summary
  exit 1
}
run() { "$@" >"$DIR/step.log" 2>&1 || abort "set-up step: $* ($(tr '\n' ' ' <"$DIR/step.log"))"; }

# bounded LOG CMD...: runs CMD in the background with the per-run timeout, so a signal is handled at
# once; stdout (the tasks' output, what the checks read) to LOG, stderr (srun's own messages, e.g.
# "job 2 queued and waiting for resources") to LOG.err; returns CMD's status.
bounded() {
  local log=$1 rc
  shift
  local t0=$SECONDS
  timeout -k 5 "$RUN_TIMEOUT" "$@" >"$log" 2>"$log.err" &
  BG_PIDS=($!)
  wait "${BG_PIDS[0]}"
  rc=$?
  BG_PIDS=()
  BOUNDED_TIMED_OUT=0
  ((SECONDS - t0 >= RUN_TIMEOUT)) && BOUNDED_TIMED_OUT=1
  return $rc
}
# srun itself exits 137 when a task was SIGKILLed, so only the clock tells a timeout.
rc_text() { if ((BOUNDED_TIMED_OUT)); then echo "timed out after ${RUN_TIMEOUT}s"; else echo "exit $1"; fi; }
show() { # show LOG: a failed run's stdout and stderr
  sed "s/^/$SELF:   | /" "$1" | tail -n 25
  [[ -s $1.err ]] && sed "s/^/$SELF:   | stderr: /" "$1.err" | tail -n 25
}

# ---- munge: one daemon, a fresh key, every file in DIR ---------------------------------------------
MUNGE_SOCKET=$DIR/munge.sock
run mungekey --create --keyfile="$DIR/munge.key"
env RWSLURM_OWNER="$DIR/munge" munged --foreground --force --key-file="$DIR/munge.key" \
  --socket="$MUNGE_SOCKET" --pid-file="$DIR/munged.pid" --seed-file="$DIR/munged.seed" \
  --log-file="$DIR/munged.log" >"$DIR/munged.err" 2>&1 &
MUNGED_PID=$!
for ((i = 0; i < 100; i++)); do [[ -S $MUNGE_SOCKET ]] && break; sleep 0.1; done
if [[ -S $MUNGE_SOCKET ]] && munge -S "$MUNGE_SOCKET" -n | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; then
  pass "munge: munged on $MUNGE_SOCKET encodes and decodes a credential"
else
  abort "munge: munged did not come up on $MUNGE_SOCKET ($(tr '\n' ' ' <"$DIR/munged.err"))"
fi

# make_conf CLUSTER_DIR CTL_HOST CTL_ADDR CTL_PORT SLURMD_PORT NODE_LINES: the cluster's slurm.conf
make_conf() {
  local cdir=$1
  mkdir -p "$cdir/state" || return 1
  : >"$cdir/plugstack.conf" # not /etc/slurm/plugstack.conf: no site plugins
  cp "$HERE/cgroup.conf" "$cdir/cgroup.conf" || return 1 # read from slurm.conf's directory
  sed -e "s|@CLUSTER@|$PREFIX|" -e "s|@CTL_HOST@|$2|" -e "s|@CTL_ADDR@|$3|" -e "s|@CTL_PORT@|$4|" \
    -e "s|@SLURMD_PORT@|$5|" -e "s|@MUNGE_SOCKET@|$MUNGE_SOCKET|" -e "s|@DIR@|$cdir|g" \
    -e "s|@NODES@|$6|" "$CONF_IN" >"$cdir/slurm.conf"
}

# wait_idle WANT CMD_PREFIX...: until sinfo lists WANT nodes idle (30 s); prints what it saw last
wait_idle() {
  local want=$1 i seen=""
  shift
  for ((i = 0; i < 60; i++)); do
    seen=$(timeout 10 "$@" sinfo -h -N -o '%N=%T' 2>&1 | sort -u | tr '\n' ' ')
    (($(grep -o '=idle' <<<"$seen" | wc -l) == want)) && { echo "$seen"; return 0; }
    sleep 0.5
  done
  echo "$seen"
  return 1
}

# free_port: a TCP port nobody listens on or uses, below the ephemeral range and outside rwin's
# derived root ports (20000-31999).
free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((10000 + RANDOM % 9000))
    [[ -z $(ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null) ]] && { echo "$p"; return 0; }
  done
  return 1
}

# =========================== phase 1: one host =====================================================
C1=$DIR/one
HOST1=$(hostname -s)
CTL_PORT1=$(free_port) || abort "phase 1: no free port for slurmctld"
SLURMD_PORT1=$(free_port) || abort "phase 1: no free port for slurmd"
[[ $SLURMD_PORT1 == "$CTL_PORT1" ]] && SLURMD_PORT1=$((CTL_PORT1 + 1))
run make_conf "$C1" "$HOST1" 127.0.0.1 "$CTL_PORT1" "$SLURMD_PORT1" \
  "NodeName=n0 NodeAddr=127.0.0.1 NodeHostname=$HOST1 CPUs=2 State=UNKNOWN"
run mkdir -p "$C1/spool-n0" "$C1/tmp-n0"
S1=(env RWSLURM_OWNER="$DIR/slurm" SLURM_CONF="$C1/slurm.conf")
say "phase 1: one host ($HOST1), slurmctld on 127.0.0.1:$CTL_PORT1, slurmd n0 on 127.0.0.1:$SLURMD_PORT1"
"${S1[@]}" slurmctld -D -i >"$C1/slurmctld.out.log" 2>&1 &
"${S1[@]}" slurmd -D -N n0 >"$C1/slurmd.out.log" 2>&1 &
if seen=$(wait_idle 1 "${S1[@]}"); then
  pass "phase 1: slurmctld and slurmd up, sinfo: $seen"
else
  abort "phase 1: node n0 not idle within 30 s (sinfo: $seen)"
fi

if bounded "$C1/mpi-list.log" "${S1[@]}" srun --mpi=list && grep -qw pmix "$C1/mpi-list.log"; then
  pass "phase 1: srun --mpi=list shows pmix ($(grep -o 'pmix_v[0-9]*' "$C1/mpi-list.log" | head -1))"
else
  fail "phase 1: srun --mpi=list does not show pmix (the mpi_pmix plugin of slurm-wlm)"
  show "$C1/mpi-list.log"
fi

bounded "$C1/hostname.log" "${S1[@]}" srun -N 1 -n 2 hostname
rc=$?
got=$(sort "$C1/hostname.log" | tr '\n' ' ')
if ((rc == 0)) && [[ $got == "$(hostname) $(hostname) " ]]; then
  pass "phase 1: srun -N 1 -n 2 hostname -> $got"
else
  fail "phase 1: srun -N 1 -n 2 hostname: $(rc_text $rc), printed '$got', expected '$(hostname)' twice"
  show "$C1/hostname.log"
fi

bounded "$C1/pmix-rank.log" "${S1[@]}" srun --mpi=pmix -n 2 printenv PMIX_RANK
rc=$?
got=$(sort -n "$C1/pmix-rank.log" | tr '\n' ' ')
if ((rc == 0)) && [[ $got == "0 1 " ]]; then
  pass "phase 1: srun --mpi=pmix -n 2 printenv PMIX_RANK -> $got"
else
  fail "phase 1: srun --mpi=pmix -n 2 printenv PMIX_RANK: $(rc_text $rc), printed '$got', expected '0 1'"
  show "$C1/pmix-rank.log"
fi
stop_marked # phase 1's daemons; munged (marked $DIR/munge) serves phase 2 too

# =========================== phase 2: 3 nodes in network namespaces ================================
C2=$DIR/three
CTL_NS=$PREFIX-ctl
node_ns() { echo "$PREFIX-n$1"; }
node_addr() { echo "$SUBNET.$(($1 + 1))"; }

# The network (tests/lib/netns.sh): the bridge's namespace is the login node, the nodes hang on it.
run netns_bridge "$CTL_NS" "$CTL_ADDR/24"
NODE_LINES=""
NODE_SPECS=()
HOSTS_LINES=("127.0.0.1 localhost" "$CTL_ADDR rwslurm-ctl")
for ((h = 0; h < NODES; h++)); do
  NODE_SPECS+=("$(node_ns "$h")=$(node_addr "$h")")
  HOSTS_LINES+=("$(node_addr "$h") n$h")
  # Slurm's node line is a single line: the @NODES@ placeholder takes them joined by a literal \n.
  NODE_LINES+="NodeName=n$h NodeAddr=$(node_addr "$h") NodeHostname=n$h CPUs=2 State=UNKNOWN\\n"
done
run netns_star "$CTL_NS" rw0 24 "${NODE_SPECS[@]}"
for ns in "$CTL_NS" $(for ((h = 0; h < NODES; h++)); do node_ns "$h"; done); do
  run netns_hosts_file "$ns" "${HOSTS_LINES[@]}"
done
# Ports inside our own namespaces cannot collide with anyone's: Slurm's defaults.
run make_conf "$C2" rwslurm-ctl "$CTL_ADDR" 6817 6818 "$NODE_LINES"
S2=(env RWSLURM_OWNER="$DIR/slurm" SLURM_CONF="$C2/slurm.conf")
# in_ns NS HOSTNAME: the command prefix that runs in namespace NS with its own UTS hostname, as ours
in_ns() { IN_NS=(ip netns exec "$1" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$2" "${S2[@]}"); }
in_ns "$CTL_NS" rwslurm-ctl
CTL=("${IN_NS[@]}")
say "phase 2: $NODES nodes n0..n$((NODES - 1)) ($SUBNET.1-$NODES) in $PREFIX-n*, slurmctld on $CTL_ADDR:6817 in $CTL_NS"
"${CTL[@]}" slurmctld -D -i >"$C2/slurmctld.out.log" 2>&1 &
for ((h = 0; h < NODES; h++)); do
  run mkdir -p "$C2/spool-n$h" "$C2/tmp-n$h"
  in_ns "$(node_ns "$h")" "n$h"
  "${IN_NS[@]}" slurmd -D -N "n$h" >"$C2/slurmd-n$h.out.log" 2>&1 &
done
if seen=$(wait_idle "$NODES" "${CTL[@]}"); then
  pass "phase 2: slurmctld and $NODES slurmd up, sinfo: $seen"
else
  abort "phase 2: not all $NODES nodes idle within 30 s (sinfo: $seen)"
fi

# The PMIx probe: every task names its host, its PMIx and Slurm ranks and how many RWIN_* variables
# it sees (none may reach it: the pmix rings below rely on that).
bounded "$C2/probe.log" "${CTL[@]}" srun --mpi=pmix -N "$NODES" -n "$TASKS" \
  sh -c 'echo "probe $(hostname) $PMIX_RANK $SLURM_PROCID $(env | grep -c ^RWIN_) $PMIX_NAMESPACE"'
rc=$?
rwin_vars=$(awk '$1 == "probe" && $5 != 0 { n++ } END { print n + 0 }' "$C2/probe.log")
hosts=$(awk '$1 == "probe" { print $2 }' "$C2/probe.log" | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
ranks=$(awk '$1 == "probe" && $3 == $4 { print $3 }' "$C2/probe.log" | sort -n | tr '\n' ' ')
want_hosts="" want_ranks=""
for ((h = 0; h < NODES; h++)); do want_hosts+="n$h:$((TASKS / NODES)) "; done
for ((r = 0; r < TASKS; r++)); do want_ranks+="$r "; done
if ((rc == 0 && rwin_vars == 0)) && [[ $hosts == "$want_hosts" && $ranks == "$want_ranks" ]]; then
  pass "phase 2: srun --mpi=pmix -N $NODES -n $TASKS: hosts $hosts, PMIX_RANK = SLURM_PROCID = $ranks, no RWIN_* in any task"
else
  fail "phase 2: srun --mpi=pmix probe: $(rc_text $rc); hosts '$hosts' (expected '$want_hosts'), ranks '$ranks' (expected '$want_ranks'), tasks seeing RWIN_* variables: $rwin_vars (expected 0)"
  show "$C2/probe.log"
fi

# ring LABEL MODE CMD...: ring_shift on all tasks, CMD being srun with its first options; passes when srun exits 0, every
# rank prints OK and rank 0's summary says all $TASKS ranks are OK (a job of 1 rank also prints OK).
ring() {
  local label=$1 mode=$2 log="$C2/ring-$1-$2.log" rc r missing=()
  shift 2
  bounded "$log" "${CTL[@]}" "$@" --label -N "$NODES" -n "$TASKS" "$PROG" --mode "$mode" --size "$SIZE"
  rc=$?
  for ((r = 0; r < TASKS; r++)); do grep -Eq "^ *$r: OK\$" "$log" || missing+=("$r"); done
  if ((rc == 0 && ${#missing[@]} == 0)) &&
      grep -Eq "^ *0: ring_shift $mode: $TASKS ranks .*: all ranks OK" "$log"; then
    pass "phase 2: $label --mode $mode: $TASKS x OK, $(grep -Eo "[0-9]+ ranks .* over [^:]*" "$log" | head -1)"
  else
    fail "phase 2: $label --mode $mode: $(rc_text $rc); no OK from rank(s) [${missing[*]}]; rank 0 said: '$(cat "$log" "$log.err" | grep -E '^ *0: ring_shift' | head -1)'"
    show "$log"
  fi
}
# Without PMIx (srun --mpi=none): rank, size and the TCP store's root from SLURM_* variables
# (bootstrap/netif.cpp); across hosts the store wants a job key, the only RWIN_* variable here.
JOB_KEY=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
for mode in put get; do
  ring "srun --mpi=none RWIN_JOB_KEY only" "$mode" env RWIN_JOB_KEY="$JOB_KEY" srun --mpi=none
done
# The goal: srun --mpi=pmix and no RWIN_* variable; rwin takes rank, size and addresses from PMIx.
for mode in put get; do
  ring "srun --mpi=pmix no RWIN_*" "$mode" srun --mpi=pmix
done

stop_marked # phase 2's daemons

# =========================== phase 3: the compose example, containers played by namespaces =========
# docker/slurm/entrypoint.sh, unchanged, in four stand-in "containers" like compose.slurm.yaml's: each
# a network namespace (on its own bridge, 10.213.1.0/24), a mount namespace with a private /run,
# /etc/munge, /var/lib/munge, /var/log/munge and a private copy of the entrypoint's state directory at
# one common path (as /var/lib/rwin-slurm is in every container: the PMIx plugin finds remote
# slurmstepds by its own SlurmdSpoolDir), and a UTS hostname. The shared directory stands in for the
# munge-key volume; compose's DNS for /etc/netns/<ns>/hosts. Checked: the controller exits 0 after
# "OK --mode put" and "OK --mode get" (6 x OK each, srun --mpi=pmix, no RWIN_* variable).
ENTRY=$REPO/docker/slurm/entrypoint.sh
C3=$DIR/compose
CBR=$PREFIX-cbr
CNAMES="slurmctl n0 n1 n2"
cns() { echo "$PREFIX-c-$1"; }
if [[ ! -r $ENTRY ]] || ! id munge >/dev/null 2>&1; then
  fail "phase 3: needs $ENTRY and the munge user (Debian's munge package)"
else
  run netns_bridge "$CBR"
  run mkdir -p "$C3/shared" "$C3/lib"
  C_SPECS=()
  HOSTS_LINES=("127.0.0.1 localhost")
  i=0
  for x in $CNAMES; do
    i=$((i + 1))
    C_SPECS+=("$(cns "$x")=$SUBNET3.$i")
    HOSTS_LINES+=("$SUBNET3.$i $x")
    run mkdir -p "$C3/$x/lib" "$C3/$x/etc-munge" "$C3/$x/lib-munge" "$C3/$x/log-munge"
    run chown munge:munge "$C3/$x/etc-munge" "$C3/$x/lib-munge" "$C3/$x/log-munge"
    run chmod 0700 "$C3/$x/etc-munge" "$C3/$x/lib-munge" "$C3/$x/log-munge"
  done
  run netns_star "$CBR" eth0 24 "${C_SPECS[@]}"
  for x in $CNAMES; do run netns_hosts_file "$(cns "$x")" "${HOSTS_LINES[@]}"; done
  # container NAME ROLE: the command line of one stand-in container
  container() {
    CONTAINER=(ip netns exec "$(cns "$1")" unshare --uts sh -c '
      x=$1 d=$2; shift 2
      mount -t tmpfs tmpfs /run && mount --bind "$d/$x/etc-munge" /etc/munge &&
      mount --bind "$d/$x/lib-munge" /var/lib/munge && mount --bind "$d/$x/log-munge" /var/log/munge &&
      mount --bind "$d/$x/lib" "$d/lib" && hostname "$x" && exec "$@"' sh "$1" "$C3"
      env RWSLURM_OWNER="$DIR/slurm" RWSLURM_NODES="n0 n1 n2" RWSLURM_CTL=slurmctl RWSLURM_DIR="$C3/lib"
      RWSLURM_KEY_DIR="$C3/shared" RWSLURM_TEMPLATES="$HERE" RWSLURM_TIMEOUT="$RUN_TIMEOUT"
      RING_SHIFT="$PROG" RING_SIZE="$SIZE" bash "$ENTRY" "$2")
  }
  for x in n0 n1 n2; do
    container "$x" compute
    "${CONTAINER[@]}" >"$C3/$x.out.log" 2>&1 &
  done
  say "phase 3: docker/slurm/entrypoint.sh as containers slurmctl, n0, n1, n2 ($SUBNET3.1-4 in $PREFIX-c-*)"
  container slurmctl controller
  # The controller bounds itself (key and nodes 120 s each, each srun RUN_TIMEOUT); this is the backstop.
  RUN_TIMEOUT_SAVED=$RUN_TIMEOUT
  RUN_TIMEOUT=$((4 * RUN_TIMEOUT))
  bounded "$C3/controller.log" "${CONTAINER[@]}"
  rc=$?
  RUN_TIMEOUT=$RUN_TIMEOUT_SAVED
  if ((rc == 0)) && grep -q "OK --mode put: $TASKS x OK" "$C3/controller.log" &&
      grep -q "OK --mode get: $TASKS x OK" "$C3/controller.log"; then
    pass "phase 3: compose stand-in: the controller ran srun --mpi=pmix -N 3 -n $TASKS ring_shift, put and get $TASKS x OK, exit 0"
  else
    fail "phase 3: compose stand-in: controller $(rc_text $rc); its lines: $(grep -E 'rwin-slurm\[' "$C3/controller.log" | tail -3 | tr '\n' ' ')"
    show "$C3/controller.log"
  fi
fi

((FAILED > 0)) && dump_logs
summary
((FAILED == 0))
