#!/usr/bin/env bash
# Collectives across two "hosts" (issue 27's across-host goal): two network namespaces joined by a veth,
# each with its own hostname (a UTS namespace) and its own CPU (host a: CPU 0, host b: CPU 1), ranks
# split evenly (2 x 2 for 4 ranks, 2 x 4 for 8). rwin runs over its own tcp transport between every
# pair (it has no path that keeps shared memory inside a host and tcp across: docs/TCP.md; and UCX
# cannot stand in for one here: it reaches the other namespace through shared memory, the boot id being
# the same, measured 2026-12-06); Open MPI
# 4.1 runs with its defaults for such a job (ob1: vader inside a host, btl tcp across), launched by
# mpirun through an rsh agent that enters the namespaces. Same placement, same CPUs, same sizes.
#
# usage (root): bench/coll_across_hosts.sh [BUILD_DIR=build] [OUT_DIR=bench/results/coll-2hosts-<time>]
#   env: NPS ("4 8"), SIZES (8,64,512,4K,64K,1M,16M), TESTS (allreduce,allgather,reduce_scatter,
#        all_to_all,broadcast,barrier), ITERS (100), ROUNDS (3)
# Writes OUT/raw/{rwin,mpi}_2hosts_npN_rR.csv, then OUT/summary.md and OUT/combined.csv
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
ROUNDS=${ROUNDS:-3}
[[ $(id -u) == 0 ]] || { echo "coll_across_hosts: needs root (ip netns)" >&2; exit 2; }
[[ -x $BIN/rwin-perf ]] || { echo "coll_across_hosts: $BIN/rwin-perf not built" >&2; exit 2; }
MPI=$BIN/rwin_mpi_collectives
[[ -x $MPI ]] || { echo "coll_across_hosts: $MPI not built (mpicc missing?)" >&2; exit 2; }
mkdir -p "$OUT/raw"
LOG=$OUT/run.log
log() { echo "coll-2hosts: $*" | tee -a "$LOG" >&2; }

source "$ROOT/tests/lib/netns.sh"
NETNS_SELF=coll_across_hosts
P=cah$$
AGENT=$(mktemp "${TMPDIR:-/tmp}/coll-2hosts-agent.XXXXXX")
cleanup() { netns_cleanup; rm -f "$AGENT"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
netns_add "$P-a" && netns_add "$P-b" && netns_link "$P-a" v0 10.77.31.1/24 "$P-b" v1 10.77.31.2/24 &&
  netns_hosts_file "$P-a" "127.0.0.1 localhost" "10.77.31.1 ha" "10.77.31.2 hb" &&
  netns_hosts_file "$P-b" "127.0.0.1 localhost" "10.77.31.1 ha" "10.77.31.2 hb" || exit 1
# How a command enters host X (ha/hb): its namespace, its hostname, its CPU. mpirun's rsh agent and
# the rwin ranks below go through the same door.
cat >"$AGENT" <<EOF
#!/bin/bash
# Open MPI rsh agent: AGENT HOST CMD... (HOST ha or hb)
host=\$1; shift
ns=$P-a cpu=0
[[ \$host == hb ]] && ns=$P-b cpu=1
exec ip netns exec "\$ns" unshare --uts taskset -c "\$cpu" /bin/sh -c "hostname \$host && exec \$*"
EOF
chmod +x "$AGENT"

COMMON=(-t "$TESTS" -s "$SIZES" -n "$ITERS" -w 5 --max-bytes 256M --min-iters 5)

run_rwin() {  # np round
  local np=$1 r=$2 half=$(($1 / 2)) port=$((29500 + $2)) pids=() rank host ifname rc=0
  local key
  key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  for ((rank = 0; rank < np; rank++)); do
    host=ha ifname=v0
    ((rank >= half)) && host=hb ifname=v1
    "$AGENT" "$host" env RWIN_RANK=$rank RWIN_NRANKS="$np" RWIN_ROOT=10.77.31.1:$port RWIN_JOB_KEY="$key" \
      RWIN_TRANSPORT=tcp RWIN_IFNAME=$ifname timeout 1500 "$BIN/rwin-perf" "${COMMON[@]}" --label 2hosts \
      --timeout-ms 120000 -o "$OUT/raw/rwin_2hosts_np${np}_r$r.csv" --csv >>"$LOG" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  ((rc == 0)) || log "rwin np$np round $r failed (rc $rc)"
}
run_mpi() {  # np round
  local np=$1 r=$2 half=$(($1 / 2))
  ip netns exec "$P-a" timeout 1500 mpirun --allow-run-as-root --host "ha:$half,hb:$half" --bind-to none \
    --mca mpi_yield_when_idle 1 --mca plm_rsh_agent "$AGENT" --mca oob_tcp_if_include 10.77.31.0/24 \
    --mca btl_tcp_if_include 10.77.31.0/24 --mca pml ob1 --mca btl vader,tcp,self --mca osc ^rdma -np "$np" \
    "$MPI" "${COMMON[@]}" --transport 2hosts -o "$OUT/raw/mpi_2hosts_np${np}_r$r.csv" >>"$LOG" 2>&1 ||
    log "mpi np$np round $r failed (rc $?)"
}

{
  echo "date: $(date -u +%FT%TZ)  host load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "sizes: $SIZES  iters: $ITERS  rounds: $ROUNDS  nps: $NPS (two hosts, half the ranks each)  rwin: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
} | tee -a "$LOG" >&2
start=$SECONDS
for np in $NPS; do
  for r in $(seq 1 "$ROUNDS"); do
    order="rwin mpi"
    ((r % 2 == 0)) && order="mpi rwin"  # who goes first alternates
    for tool in $order; do
      log "np $np round $r/$ROUNDS: $tool ($((SECONDS - start)) s)"
      "run_$tool" "$np" "$r"
    done
  done
done
log "runs done in $((SECONDS - start)) s; combining"
python3 "$HERE/coll_combine.py" "$OUT" >"$OUT/summary.md" && cat "$OUT/summary.md"
