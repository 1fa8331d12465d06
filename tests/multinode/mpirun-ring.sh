#!/usr/bin/env bash
# Ring shift launched by Open MPI's mpirun (Debian 12: Open MPI 4.1.4), on loopback.
#
# usage: mpirun-ring.sh BIN_DIR
#   env: RWIN_MPIRUN_NP (default 4)  RWIN_MPIRUN_SIZES (default "1 1000 3000000")
#        RWIN_MPIRUN_MODES (default "put get")  RWIN_MPIRUN_TIMEOUT seconds per run (default 120)
#        RWIN_MPIRUN_PROG  program instead of BIN_DIR/ring_shift (e.g. tcp_ring_standin.py)
#        RWIN_MPIRUN_DERIVED    1 (default): also run every case WITHOUT RWIN_ROOT and with
#                               RWIN_BOOTSTRAP=tcp, so rwin derives the root from Open MPI's variables
#                               (bootstrap/netif.h, LaunchEnv::detect). Without RWIN_BOOTSTRAP=tcp
#                               mpirun's PMIx server would be used (tests/scripts/pmix_bootstrap.sh).
#
# The command, for people copying it (as root; drop --allow-run-as-root otherwise):
#   mpirun --allow-run-as-root --oversubscribe -np 4 --mca oob_tcp_if_include lo \
#     -x RWIN_ROOT=127.0.0.1:29400 -x UCX_TLS=tcp -x UCX_NET_DEVICES=lo build/bin/ring_shift --mode put
# rwin takes rank and size from OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE; rank 0 serves the
# bootstrap store at RWIN_ROOT. oob_tcp_if_include and UCX_NET_DEVICES keep everything on loopback.
set -uo pipefail

BIN_DIR=${1:?usage: mpirun-ring.sh BIN_DIR}
NP=${RWIN_MPIRUN_NP:-4}
SIZES=${RWIN_MPIRUN_SIZES:-"1 1000 3000000"}
MODES=${RWIN_MPIRUN_MODES:-"put get"}
RUN_TIMEOUT=${RWIN_MPIRUN_TIMEOUT:-120}
PROG=${RWIN_MPIRUN_PROG:-$BIN_DIR/ring_shift}
DERIVED=${RWIN_MPIRUN_DERIVED:-1}

command -v mpirun >/dev/null || { echo "mpirun-ring: mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
[[ -x $PROG ]] || { echo "mpirun-ring: program not found or not executable: $PROG" >&2; exit 2; }
LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rwin-mpirun-ring.XXXXXX")
MPIRUN_PID=
cleanup() {
  # Only the mpirun this script started; mpirun tears down its own ranks on SIGTERM.
  if [[ -n $MPIRUN_PID ]]; then kill -TERM "$MPIRUN_PID" 2>/dev/null; wait "$MPIRUN_PID" 2>/dev/null; fi
  rm -rf "$LOG_DIR"
}
trap cleanup EXIT
trap 'trap - EXIT; cleanup; exit 130' INT
trap 'trap - EXIT; cleanup; exit 143' TERM

# A loopback port nobody listens on, starting from a per-process offset so that parallel runs of this
# script do not collide. Rank 0 binds it; a race with another program remains possible but would show
# as a clear bind error, never a wrong result.
free_port() {
  local p
  for ((p = 29400 + $$ % 500; p < 30400; p++)); do
    if [[ -z $(ss -Htln "sport = :$p" 2>/dev/null) ]]; then echo "$p"; return 0; fi
  done
  return 1
}

ROOT_FLAG=()
[[ $(id -u) == 0 ]] && ROOT_FLAG=(--allow-run-as-root)

FAILURES=0
SUMMARY=()
variants=(explicit)
[[ $DERIVED == 1 ]] && variants+=(derived)
for variant in "${variants[@]}"; do
  for mode in $MODES; do
    for size in $SIZES; do
      log="$LOG_DIR/$variant-$mode-$size.log"
      # A job key, as docs/SCALING.md tells mpirun users (a derived root may not be loopback).
      env_flags=(-x UCX_TLS=tcp -x UCX_NET_DEVICES=lo -x "RWIN_JOB_KEY=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')")
      if [[ $variant == explicit ]]; then
        port=$(free_port) || { echo "mpirun-ring: no free loopback port in 29400-30399" >&2; exit 1; }
        env_flags+=(-x "RWIN_ROOT=127.0.0.1:$port")
      else
        # The tcp bootstrap's derived root, not PMIx (which mpirun would otherwise get: pmix_bootstrap.sh).
        env_flags+=(-x RWIN_BOOTSTRAP=tcp)
      fi
      # RWIN_ROOT from the caller's environment must not leak into the derived variant.
      env -u RWIN_ROOT -u RWIN_RANK -u RWIN_NRANKS timeout -k 10 "$RUN_TIMEOUT" \
        mpirun "${ROOT_FLAG[@]}" --oversubscribe -np "$NP" --tag-output \
        --mca oob_tcp_if_include lo --mca btl self,vader "${env_flags[@]}" \
        "$PROG" --mode "$mode" --size "$size" >"$log" 2>&1 &
      MPIRUN_PID=$!
      wait "$MPIRUN_PID"
      rc=$?
      MPIRUN_PID=
      bad=()
      ((rc == 124 || rc == 137)) && bad+=("timed out after ${RUN_TIMEOUT}s")
      ((rc != 0 && rc != 124 && rc != 137)) && bad+=("mpirun exit $rc")
      for ((r = 0; r < NP; r++)); do
        # --tag-output prefixes every line with [jobid,rank]<stdout>:
        grep -Eq "^\[[0-9]+,$r\]<stdout>:.*\bOK\b" "$log" || bad+=("rank $r printed no OK")
      done
      if ((${#bad[@]} == 0)); then
        SUMMARY+=("PASS mpirun np=$NP root=$variant mode=$mode size=$size")
      else
        FAILURES=$((FAILURES + 1))
        SUMMARY+=("FAIL mpirun np=$NP root=$variant mode=$mode size=$size: $(IFS=";"; echo "${bad[*]}")")
        tail -n 40 "$log" | sed 's/^/mpirun-ring:   | /' >&2
      fi
    done
  done
done

echo "mpirun-ring: summary ($(basename "$PROG"))"
for line in "${SUMMARY[@]}"; do echo "mpirun-ring:   $line"; done
if ((FAILURES > 0)); then echo "mpirun-ring: FAILED ($FAILURES)"; exit 1; fi
echo "mpirun-ring: all passed"
