#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs the 4-rank ring shift in put and get mode on
# this machine (each rank prints OK, rank 0 a summary), then a short benchmark table (point-to-point on
# 2 ranks, collectives on 4).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
for mode in put get; do
  build/bin/rwinrun -n 4 --timeout 300 -- build/bin/ring_shift --mode "$mode" --size 1048576 --iters 5
done
if [[ -x build/bin/rwin-perf ]]; then
  echo
  echo "Short benchmark (2 ranks, shared memory):"
  build/bin/rwinrun -n 2 --timeout 300 -- build/bin/rwin-perf -t put_lat,put_bw,put_add_bw,get_bw,notify_lat -s 8,4096,65536,1048576 -n 200 -w 20 --batches 5
  echo
  echo "Collectives (4 ranks, every result checked; side by side with Open MPI: bench/collectives_side_by_side.sh):"
  build/bin/rwinrun -n 4 --timeout 300 -- build/bin/rwin-perf -t allreduce,allgather,reduce_scatter,all_to_all,broadcast -s 8,65536,1048576 -n 50
fi
