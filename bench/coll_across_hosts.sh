#!/usr/bin/env bash
# Collectives across two "hosts" (issue 27's across-host goal). Each host is a set of namespaces of its
# own: network (a veth between the two), mount (its own /dev/shm, its own sysfs, and a boot id of its
# own bind-mounted over /proc/sys/kernel/random/boot_id, which is what UCX compares to decide that a
# peer shares its memory), IPC and UTS (its hostname, so Open MPI sees two nodes), and its own CPU (host
# a: CPU 0, host b: CPU 1). So UCX and Open MPI keep shared memory inside a host and use tcp across, as
# on two machines. Ranks split evenly: 2 x 2 for 4 ranks, 2 x 4 for 8.
#   rwin, transport label "2hosts": its defaults (RWIN_TRANSPORT=auto, which picks "mixed" here: UCX's
#     direct shared memory to the peers on its host, rwin's own tcp to the others, transport/mixed);
#   rwin, label "2hostsucx": UCX to every peer (RWIN_TRANSPORT=ucx: shared memory on its host, UCX's tcp
#     in rwin's am mode across; the default before "auto");
#   rwin, label "2hostsowntcp": rwin's own tcp transport to every peer, its own host's included;
#   rwin, label "2hostsautoflat" (not in the default LANES): the defaults with AUTOFLAT_ENV (default
#     RWIN_COLL_HIER_MAX=0: flat small collectives, no gathering through host leaders);
#   Open MPI 4.1 with its defaults for such a job (ob1: vader inside a host, btl tcp across), launched by
#     mpirun through an rsh agent that enters the hosts; its results stand against both rwin lanes.
# Where a host's incoming packets are processed (RX): "sender" (the default, as every run before
#   2026-12-07 15:00): a veth hands each packet to the receiving host on the CPU that sent it, so host b's
#   CPU also runs host a's receive path, and segments that a host's two CPUs send on one connection
#   (its ranks, and its ACK processing in the other CPU's softirq) arrive reordered: TCP takes them for
#   losses (thousands of spurious fast retransmits a run, for Open MPI and rwin alike; the run log
#   lists each host's counters after each run); "own": RPS steers each veth's packets to the receiving
#   host's CPU, as a NIC interrupts its own host: in order, and the receive work on the host it is for.
# The hosts' congestion control (CC): unset, the machine's default (bbr on this VM) for Open MPI and
#   UCX, while rwin's own tcp picks its own (RWIN_TCP_CONGESTION, auto: cubic instead of bbr); CC=cubic
#   (any name) makes it both hosts' default, so every tool runs on it (the name is added to
#   net.ipv4.tcp_allowed_congestion_control for the run if needed, and the list restored at the end).
#
# usage (root): bench/coll_across_hosts.sh [BUILD_DIR=build] [OUT_DIR=bench/results/coll-2hosts-<time>]
#   env: RX (sender | own, above), CC (above), LANES ("auto ucx owntcp": which rwin lanes; also autoflat), NPS ("4 8"), SIZES (8,64,512,4K,64K,1M,16M), TESTS (allreduce,allgather,reduce_scatter,
#        all_to_all,broadcast,barrier), ITERS (100), SMALL_ITERS (1000: calls at <= 8 KiB at least, as
#        collectives_side_by_side.sh's full mode), ROUNDS (3)
# Writes OUT/raw/{rwin,mpi}_<label>_npN_rR.csv, then OUT/summary.md and OUT/combined.csv
# (bench/coll_combine.py: ratio = MPI time / rwin time, > 1: rwin faster).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
BIN=$BUILD/bin
OUT=${2:-$HERE/results/coll-2hosts-$(date -u +%Y%m%dT%H%M%SZ)}
NPS=${NPS:-4 8}
SIZES=${SIZES:-8,64,512,4K,64K,1M,16M}
TESTS=${TESTS:-allreduce,allgather,reduce_scatter,all_to_all,broadcast,barrier}
ITERS=${ITERS:-100}
SMALL_ITERS=${SMALL_ITERS:-1000}
ROUNDS=${ROUNDS:-3}
LANES=${LANES:-auto ucx owntcp}
RX=${RX:-sender}
CC=${CC:-}
[[ $RX == sender || $RX == own ]] || { echo "coll_across_hosts: RX=$RX: sender or own" >&2; exit 2; }
AUTOFLAT_ENV=${AUTOFLAT_ENV:-RWIN_COLL_HIER_MAX=0}  # lane autoflat: the defaults plus this
[[ $(id -u) == 0 ]] || { echo "coll_across_hosts: needs root (namespaces)" >&2; exit 2; }
[[ -x $BIN/rwin-perf ]] || { echo "coll_across_hosts: $BIN/rwin-perf not built" >&2; exit 2; }
MPI=$BIN/rwin_mpi_collectives
[[ -x $MPI ]] || { echo "coll_across_hosts: $MPI not built (mpicc missing?)" >&2; exit 2; }
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/run.log
log() { echo "coll-2hosts: $*" | tee -a "$LOG" >&2; }

source "$ROOT/tests/lib/netns.sh"
NETNS_SELF=coll_across_hosts
P=cah$$
NS=$(mktemp -d "${TMPDIR:-/tmp}/coll-2hosts.XXXXXX")  # the hosts' namespace files and the agent
AGENT=$NS/agent
ALLOWED_CC=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
cleanup() {
  [[ -n $CC ]] && echo "$ALLOWED_CC" >/proc/sys/net/ipv4/tcp_allowed_congestion_control
  netns_cleanup
  local f
  for f in "$NS"/mnt-* "$NS"/ipc-* "$NS"/uts-*; do umount "$f" 2>/dev/null; done
  umount "$NS" 2>/dev/null
  rm -rf "$NS"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
netns_add "$P-a" && netns_add "$P-b" && netns_link "$P-a" v0 10.77.31.1/24 "$P-b" v1 10.77.31.2/24 &&
  netns_hosts_file "$P-a" "127.0.0.1 localhost" "10.77.31.1 ha" "10.77.31.2 hb" &&
  netns_hosts_file "$P-b" "127.0.0.1 localhost" "10.77.31.1 ha" "10.77.31.2 hb" &&
  netns_wait_carrier "$P-a" v0 "$P-b" v1 || exit 1  # UCX refuses an interface without carrier
if [[ -n $CC ]]; then  # a netns may only pick an allowed algorithm as its default
  [[ " $ALLOWED_CC " == *" $CC "* ]] || echo "$ALLOWED_CC $CC" >/proc/sys/net/ipv4/tcp_allowed_congestion_control
  ip netns exec "$P-a" sysctl -qw "net.ipv4.tcp_congestion_control=$CC" &&
    ip netns exec "$P-b" sysctl -qw "net.ipv4.tcp_congestion_control=$CC" ||
    { echo "coll_across_hosts: cannot make $CC the hosts' congestion control (CC)" >&2; exit 1; }
fi
if [[ $RX == own ]]; then  # host a's packets on CPU 0, host b's on CPU 1 (rps_cpus is a CPU mask)
  ip netns exec "$P-a" sh -c 'echo 1 > /sys/class/net/v0/queues/rx-0/rps_cpus' &&
    ip netns exec "$P-b" sh -c 'echo 2 > /sys/class/net/v1/queues/rx-0/rps_cpus' ||
    { echo "coll_across_hosts: cannot steer the veths' packets (RX=own)" >&2; exit 1; }
fi
# What TCP's loss recovery did during one run, per host (namespace counters, since the last call).
tcp_recovery() {
  local h
  for h in a b; do
    echo "  host h$h: $(ip netns exec "$P-$h" nstat 2>/dev/null | awk '$1 ~ /^(TcpRetransSegs|TcpExtTCPSACKReorder|TcpExtTCPLossProbes|TcpExtTCPOFOQueue)$/ {printf "%s %s  ", $1, $2}')"
  done
}
# Namespace files can only be bind-mounted below a private mount.
mount --bind "$NS" "$NS" && mount --make-private "$NS" || { echo "coll_across_hosts: cannot make $NS private" >&2; exit 1; }
for h in a b; do
  touch "$NS/mnt-$h" "$NS/ipc-$h" "$NS/uts-$h"
  cat /proc/sys/kernel/random/uuid >"$NS/boot-$h"
  unshare --mount="$NS/mnt-$h" --ipc="$NS/ipc-$h" --uts="$NS/uts-$h" --propagation private /bin/sh -c \
    "hostname h$h && mount --bind $NS/boot-$h /proc/sys/kernel/random/boot_id && mount -t tmpfs -o size=4g tmpfs /dev/shm" &&
    nsenter --mount="$NS/mnt-$h" --net="/var/run/netns/$P-$h" mount -t sysfs sysfs /sys ||
    { echo "coll_across_hosts: setting up host h$h failed" >&2; exit 1; }
done
# How a command enters host ha or hb: its namespaces and its CPU. mpirun's rsh agent (AGENT HOST CMD...)
# and the rwin ranks below go through the same door.
cat >"$AGENT" <<AGENT_EOF
#!/bin/bash
host=\$1; shift
h=a cpu=0
[[ \$host == hb ]] && h=b cpu=1
exec nsenter --mount=$NS/mnt-\$h --ipc=$NS/ipc-\$h --uts=$NS/uts-\$h --net=/var/run/netns/$P-\$h \\
  taskset -c \$cpu /bin/sh -c "exec \$*"
AGENT_EOF
chmod +x "$AGENT"

COMMON="-t $TESTS -s $SIZES -n $ITERS -w 5 --max-bytes 256M --min-iters 5 --small-iters $SMALL_ITERS"

label_of() { case $1 in auto) echo 2hosts ;; *) echo "2hosts$1" ;; esac; }
run_rwin() {  # np round lane (auto | ucx | owntcp)
  local np=$1 r=$2 lane=$3 half=$(($1 / 2)) pids=() rank host ifname rc=0 label port envs key
  label=$(label_of "$lane")
  case $lane in auto) port=$((29500 + r)) ;; ucx) port=$((29700 + r)) ;; autoflat) port=$((29800 + r)) ;; *) port=$((29600 + r)) ;; esac
  key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  for ((rank = 0; rank < np; rank++)); do
    host=ha ifname=v0
    ((rank >= half)) && host=hb ifname=v1
    envs="UCX_NET_DEVICES=$ifname RWIN_IFNAME=$ifname"
    [[ $lane == ucx ]] && envs="RWIN_TRANSPORT=ucx $envs"
    [[ $lane == autoflat ]] && envs="$AUTOFLAT_ENV $envs"
    [[ $lane == owntcp ]] && envs="RWIN_TRANSPORT=tcp RWIN_IFNAME=$ifname"
    "$AGENT" "$host" "env RWIN_RANK=$rank RWIN_NRANKS=$np RWIN_ROOT=10.77.31.1:$port RWIN_JOB_KEY=$key $envs \
      timeout 1500 $BIN/rwin-perf $COMMON --label $label --timeout-ms 120000 \
      -o $OUT/raw/rwin_${label}_np${np}_r$r.csv --csv" >>"$LOG" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  ((rc == 0)) || log "rwin $lane np$np round $r failed (rc $rc)"
}
run_mpi() {  # np round: its results stand against every rwin lane
  local np=$1 r=$2 half=$(($1 / 2)) f=$OUT/raw/mpi_2hosts_np$1_r$2.csv lane label
  # mpirun itself in host a's network only (nsenter, not `ip netns exec`: in a mount namespace of its
  # own the agent could not enter the hosts' mount namespaces); it runs no rank, its daemons do.
  nsenter --net="/var/run/netns/$P-a" timeout 1500 mpirun --allow-run-as-root --host "ha:$half,hb:$half" --bind-to none \
    --mca mpi_yield_when_idle 1 --mca plm_rsh_agent "$AGENT" --mca oob_tcp_if_include 10.77.31.0/24 \
    --mca btl_tcp_if_include 10.77.31.0/24 --mca pml ob1 --mca btl vader,tcp,self --mca osc ^rdma -np "$np" \
    "$MPI" $COMMON --transport 2hosts -o "$f" >>"$LOG" 2>&1 || log "mpi np$np round $r failed (rc $?)"
  for lane in $LANES; do
    label=$(label_of "$lane")
    [[ $label == 2hosts ]] || sed "s/^mpi,\"*2hosts\"*,/mpi,$label,/" "$f" >"$OUT/raw/mpi_${label}_np${np}_r$r.csv" 2>/dev/null
  done
  [[ " $LANES " == *" auto "* ]] || rm -f "$f"
}
run_rwinauto() { run_rwin "$1" "$2" auto; }
run_rwinucx() { run_rwin "$1" "$2" ucx; }
run_rwinowntcp() { run_rwin "$1" "$2" owntcp; }
run_rwinautoflat() { run_rwin "$1" "$2" autoflat; }

{
  echo "date: $(date -u +%FT%TZ)  host load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "sizes: $SIZES  iters: $ITERS  rounds: $ROUNDS  nps: $NPS (two hosts, half the ranks each)  lanes: $LANES  rx: $RX  cc: ${CC:-machine default $(cat /proc/sys/net/ipv4/tcp_congestion_control)}  rwin: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
} | tee -a "$LOG" >&2
start=$SECONDS
for np in $NPS; do
  for r in $(seq 1 "$ROUNDS"); do
    order="" rev=""
    for lane in $LANES; do order="$order rwin$lane" rev="rwin$lane $rev"; done
    order="$order mpi" rev="mpi $rev"
    ((r % 2 == 0)) && order=$rev  # who goes first alternates
    for tool in $order; do
      log "np $np round $r/$ROUNDS: $tool ($((SECONDS - start)) s)"
      tcp_recovery >/dev/null  # counters from here
      "run_$tool" "$np" "$r"
      tcp_recovery >>"$LOG"
    done
  done
done
log "runs done in $((SECONDS - start)) s; combining"
python3 "$HERE/coll_combine.py" "$OUT" >"$OUT/summary.md" && cat "$OUT/summary.md"
