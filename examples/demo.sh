#!/usr/bin/env bash
# The main job: installs what is missing, builds, runs the 4-rank ring shift in put and get mode on
# this machine (each rank prints OK, rank 0 a summary), then a short benchmark table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
for mode in put get; do
  build/bin/rwinrun -n 4 --timeout 300 -- build/bin/ring_shift --mode "$mode" --size 1048576 --iters 5
done
if [[ -x build/bin/rwin-perf ]]; then
  echo
  echo "Short benchmark (2 ranks, shared memory):"
  build/bin/rwinrun -n 2 --timeout 300 -- build/bin/rwin-perf -t put_lat,put_bw,get_bw,notify_lat -s 8,4096,65536,1048576 -n 200 -w 20 --batches 5
fi
