#!/usr/bin/env bash
# ctest wrapper: the ring shift launched by Open MPI's mpirun (4 ranks on loopback, explicit and
# launcher-derived root) and under a hand-made Slurm environment (3 ranks), put and get, 3 sizes.
# Runs as any user (the namespace test covers the same launchers across hosts, as root).
set -uo pipefail
BIN_DIR=${1:?usage: launch_mpirun_slurm.sh BIN_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rc=0
bash "$HERE/../multinode/mpirun-ring.sh" "$BIN_DIR" || rc=1
bash "$HERE/../multinode/slurm-env-ring.sh" "$BIN_DIR" || rc=1
exit $rc
