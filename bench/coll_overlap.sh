#!/usr/bin/env bash
# Collectives beside compute (issue 27, "nonblocking forms so a collective overlaps compute"): per
# call, the collective and COMPUTE_US of compute, blocking (the call, then the compute) or
# nonblocking (start, compute, wait): rwin-perf (Team::start_*) and Open MPI (MPI_I<collective> +
# MPI_Wait, bench/mpi/mpi_collectives.c), the same sizes, data and checks, interleaved in rounds.
# Also each collective alone and the compute alone, so the table can say how much of the shorter of
# the two the nonblocking form hid: hidden = (blocking - nonblocking) / min(collective, compute).
#
#   bench/coll_overlap.sh [BUILD_DIR] [OUT_DIR]
#
# Environment: NPS ("2 4"), SIZES (64K,1M,8M), TESTS (allreduce,allgather), COMPUTE_US (1000),
#   COMPUTE ("sleep spin": sleep = the thread blocks, as a host thread on a device kernel; spin = busy
#   on its CPU), TRANSPORTS ("shm owntcp"), ROUNDS (3), ITERS (50).
# Transports: shm = rwin UCX_TLS=posix,sysv,self, MPI btl vader,self; owntcp = rwin's own tcp
# (RWIN_TRANSPORT=tcp), MPI btl tcp,self on lo. Ranks pinned as in collectives_side_by_side.sh (rank r
# on CPU r mod 2); rwin's worker thread inherits its rank's CPU.
# Output: OUT_DIR/raw/*.csv (every run), summary.md (bench/coll_overlap_sum.py), run.log.
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE/results/coll-overlap-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
NPS=${NPS:-2 4}
SIZES=${SIZES:-64K,1M,8M}
TESTS=${TESTS:-allreduce,allgather}
COMPUTE_US=${COMPUTE_US:-1000}
COMPUTE=${COMPUTE:-sleep spin}
TRANSPORTS=${TRANSPORTS:-shm owntcp}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-50}
PERF=$BUILD/bin/rwin-perf
MPIB=$BUILD/bin/rwin_mpi_collectives
[[ -x $PERF && -x $MPIB ]] || { echo "coll_overlap: needs $PERF and $MPIB" >&2; exit 2; }
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed
        --mca oob_tcp_if_include lo --mca osc ^rdma --mca pml ob1)
log() { echo "$*" | tee -a "$OUT/run.log"; }
common=(-t "$TESTS" -s "$SIZES" -n "$ITERS" -w 5 --min-iters 10)

rwin_env() {  # rwin_env TRANSPORT: the environment of rwin's run
  case $1 in
    shm) echo "UCX_TLS=posix,sysv,self" ;;
    owntcp) echo "RWIN_TRANSPORT=tcp RWIN_IFNAME=lo" ;;
  esac
}
mpi_btl() {
  case $1 in
    shm) echo "vader,self" ;;
    owntcp) echo "tcp,self --mca btl_tcp_if_include lo" ;;
  esac
}
run_rwin() {  # run_rwin TR NP TAG ARGS...: one rwin-perf run into raw/rwin_TR_npNP_TAG.csv
  local tr=$1 np=$2 tag=$3
  shift 3
  env $(rwin_env "$tr") timeout 600 "$BUILD/bin/rwinrun" -n "$np" -- "$PERF" "${common[@]}" --csv \
    -o "$OUT/raw/rwin_${tr}_np${np}_${tag}.csv" --label "$tr" "$@" >>"$OUT/run.log" 2>&1 ||
    log "FAILED: rwin $tr np $np $tag"
}
run_mpi() {
  local tr=$1 np=$2 tag=$3
  shift 3
  # shellcheck disable=SC2046
  timeout 600 "${MPIRUN[@]}" -np "$np" --mca btl $(mpi_btl "$tr") "$MPIB" "${common[@]}" \
    -o "$OUT/raw/mpi_${tr}_np${np}_${tag}.csv" --transport "$tr" "$@" >>"$OUT/run.log" 2>&1 ||
    log "FAILED: mpi $tr np $np $tag"
}

log "coll_overlap: $(date -u +%FT%TZ) NPS=$NPS SIZES=$SIZES TESTS=$TESTS COMPUTE_US=$COMPUTE_US COMPUTE=$COMPUTE TRANSPORTS=$TRANSPORTS ROUNDS=$ROUNDS ITERS=$ITERS"
for r in $(seq 1 "$ROUNDS"); do
  for np in $NPS; do
    for tr in $TRANSPORTS; do
      log "round $r, $np ranks, $tr"
      run_rwin "$tr" "$np" "alone_r$r"
      run_mpi "$tr" "$np" "alone_r$r"
      for c in $COMPUTE; do
        # the compute alone: a barrier of one rank (nothing to wait for) with the compute after it
        env $(rwin_env shm) timeout 120 "$BUILD/bin/rwinrun" -n 1 -- "$PERF" -t barrier -n "$ITERS" -w 5 \
          --csv -o "$OUT/raw/compute_${tr}_np${np}_${c}_r$r.csv" --compute-us "$COMPUTE_US" --compute "$c" \
          >>"$OUT/run.log" 2>&1 || log "FAILED: compute alone $c"
        run_rwin "$tr" "$np" "block_${c}_r$r" --compute-us "$COMPUTE_US" --compute "$c"
        run_rwin "$tr" "$np" "nb_${c}_r$r" --compute-us "$COMPUTE_US" --compute "$c" --nonblocking
        run_mpi "$tr" "$np" "block_${c}_r$r" --compute-us "$COMPUTE_US" --compute "$c"
        run_mpi "$tr" "$np" "nb_${c}_r$r" --compute-us "$COMPUTE_US" --compute "$c" --nonblocking
      done
    done
  done
done
/usr/bin/python3 "$HERE/coll_overlap_sum.py" "$OUT" | tee "$OUT/summary.md"
