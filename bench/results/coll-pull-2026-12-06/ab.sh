#!/usr/bin/env bash
# Pull (RWIN_COLL_PULL_MIN, default 8 KiB) against the message path (RWIN_COLL_PULL_MIN=0) and Open MPI
# (btl vader: CMA single copy above its eager limit) over shared memory, 2/4/8 ranks on 2 cores,
# ROUNDS interleaved rounds (the order rotates), f32, avg us per call. TESTS (allgather,all_to_all),
# RAW (raw: the csv directory here).
#   bash bench/results/coll-pull-2026-12-06/ab.sh [BUILD_DIR]    -> $RAW/*.csv here, then ab_sum.py
set -u
BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-3}
SIZES=${SIZES:-8K,64K,1M,16M}
TESTS=${TESTS:-allgather,all_to_all}
RAW=$HERE/${RAW:-raw}
mkdir -p "$RAW"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed
        --mca oob_tcp_if_include lo --mca osc ^rdma --mca pml ob1 --mca btl vader,self)
for r in $(seq 1 "$ROUNDS"); do
  for np in 2 4 8; do
    order=(pull msg mpi)
    for ((k = 0; k < (r + np) % 3; ++k)); do order=("${order[@]:1}" "${order[0]}"); done
    for v in "${order[@]}"; do
      out=$RAW/${v}_np${np}_r$r.csv
      case $v in
        pull) UCX_TLS=posix,sysv,self timeout 600 "$BUILD/bin/rwinrun" -n "$np" -- "$BUILD/bin/rwin-perf" \
                -t "$TESTS" -s "$SIZES" -n 100 --csv -o "$out" --label pull >/dev/null 2>&1 ;;
        msg) RWIN_COLL_PULL_MIN=0 UCX_TLS=posix,sysv,self timeout 600 "$BUILD/bin/rwinrun" -n "$np" -- "$BUILD/bin/rwin-perf" \
                -t "$TESTS" -s "$SIZES" -n 100 --csv -o "$out" --label msg >/dev/null 2>&1 ;;
        mpi) timeout 600 "${MPIRUN[@]}" -np "$np" "$BUILD/bin/rwin_mpi_collectives" -t "$TESTS" \
                -s "$SIZES" -n 100 -o "$out" --transport shm >/dev/null 2>&1 ;;
      esac || echo "FAILED: $v np $np round $r"
    done
  done
done
/usr/bin/python3 "$HERE/ab_sum.py" "$RAW"
