#!/usr/bin/env bash
# Ring shift under a hand-made Slurm environment: no Slurm runs here, so this script plays srun. It
# starts 3 ranks in the background with the variables srun gives a 3-task, 1-node step, checks every
# rank prints OK, and kills what it started on exit.
#
# usage: slurm-env-ring.sh BIN_DIR
#   env: RWIN_SLURM_NTASKS (default 3)  RWIN_SLURM_SIZES (default "1 1000 3000000")
#        RWIN_SLURM_MODES (default "put get")  RWIN_SLURM_TIMEOUT seconds per run (default 120)
#        RWIN_SLURM_PROG  program instead of BIN_DIR/ring_shift (e.g. tcp_ring_standin.py)
#        RWIN_SLURM_DERIVED    1 (default): also run every case WITHOUT RWIN_ROOT, so rwin derives
#                              "localhost:<port>" from SLURM_STEP_NODELIST and SLURM_JOB_ID/STEP_ID
#                              (bootstrap/netif.h, LaunchEnv::detect)
#
# Rank and size come from SLURM_PROCID/SLURM_NTASKS; RWIN_*, OMPI_* and PMI_* are removed from the
# ranks' environment so that nothing else can supply them.
set -uo pipefail

BIN_DIR=${1:?usage: slurm-env-ring.sh BIN_DIR}
NTASKS=${RWIN_SLURM_NTASKS:-3}
SIZES=${RWIN_SLURM_SIZES:-"1 1000 3000000"}
MODES=${RWIN_SLURM_MODES:-"put get"}
RUN_TIMEOUT=${RWIN_SLURM_TIMEOUT:-120}
PROG=${RWIN_SLURM_PROG:-$BIN_DIR/ring_shift}
DERIVED=${RWIN_SLURM_DERIVED:-1}

[[ -x $PROG ]] || { echo "slurm-env-ring: program not found or not executable: $PROG" >&2; exit 2; }
LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rwin-slurm-env-ring.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  PIDS=()
  rm -rf "$LOG_DIR"
}
trap cleanup EXIT
trap 'trap - EXIT; cleanup; exit 130' INT
trap 'trap - EXIT; cleanup; exit 143' TERM

free_port() {
  local p
  for ((p = 30400 + $$ % 500; p < 31400; p++)); do
    if [[ -z $(ss -Htln "sport = :$p" 2>/dev/null) ]]; then echo "$p"; return 0; fi
  done
  return 1
}

# Every variable a rank's code could consult to find its launcher, removed so only Slurm's remain.
strip_launchers() {
  local v out=()
  for v in $(compgen -e); do
    case $v in RWIN_* | OMPI_* | PMI_* | PMIX_* | SLURM_* | SLURMD_*) out+=(-u "$v") ;; esac
  done
  ((${#out[@]} == 0)) || printf '%s\n' "${out[@]}"
}
mapfile -t UNSET < <(strip_launchers)

FAILURES=0
SUMMARY=()
variants=(explicit)
[[ $DERIVED == 1 ]] && variants+=(derived)
for variant in "${variants[@]}"; do
  for mode in $MODES; do
    for size in $SIZES; do
      port=$(free_port) || { echo "slurm-env-ring: no free loopback port in 30400-31399" >&2; exit 1; }
      # Choose job and step ids whose derived port (20000 + (job*1000 + step) % 12000, see
      # derived_port in bootstrap/netif.h) is exactly the free port, so the derived variant binds it.
      off=$((port - 20000))
      step=$((off % 1000))
      job=$((off / 1000 + 12 * 3000)) # +36000 keeps the id realistic and the port the same
      # A job key, as docs/SCALING.md tells srun users (a derived root may not be loopback).
      root_env=(RWIN_JOB_KEY="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')")
      [[ $variant == explicit ]] && root_env+=(RWIN_ROOT="127.0.0.1:$port")
      PIDS=()
      for ((r = 0; r < NTASKS; r++)); do
        env "${UNSET[@]}" "${root_env[@]}" \
          SLURM_JOB_ID="$job" SLURM_JOBID="$job" SLURM_STEP_ID="$step" SLURM_STEPID="$step" \
          SLURM_PROCID="$r" SLURM_LOCALID="$r" SLURM_NODEID=0 SLURM_NTASKS="$NTASKS" SLURM_NPROCS="$NTASKS" \
          SLURM_STEP_NUM_TASKS="$NTASKS" SLURM_STEP_NUM_NODES=1 SLURM_JOB_NUM_NODES=1 SLURM_NNODES=1 \
          SLURM_STEP_NODELIST=localhost SLURM_JOB_NODELIST=localhost SLURM_NODELIST=localhost \
          SLURM_STEP_TASKS_PER_NODE="$NTASKS" SLURM_TASKS_PER_NODE="$NTASKS" \
          SLURM_LAUNCH_NODE_IPADDR=127.0.0.1 SLURM_SRUN_COMM_HOST=127.0.0.1 SLURMD_NODENAME=localhost \
          SLURM_TOPOLOGY_ADDR=localhost SLURM_CLUSTER_NAME=fake \
          UCX_TLS=tcp UCX_NET_DEVICES=lo \
          timeout -k 5 "$RUN_TIMEOUT" "$PROG" --mode "$mode" --size "$size" \
          >"$LOG_DIR/$variant-$mode-$size-r$r.log" 2>&1 &
        PIDS+=($!)
      done
      bad=()
      for ((r = 0; r < NTASKS; r++)); do
        wait "${PIDS[$r]}"
        rc=$?
        log="$LOG_DIR/$variant-$mode-$size-r$r.log"
        if ((rc == 124 || rc == 137)); then
          bad+=("rank $r timed out after ${RUN_TIMEOUT}s")
        elif ((rc != 0)); then
          bad+=("rank $r exit $rc")
        elif ! grep -qw OK "$log"; then
          bad+=("rank $r printed no OK")
        fi
      done
      PIDS=()
      if ((${#bad[@]} == 0)); then
        SUMMARY+=("PASS slurm-env ntasks=$NTASKS root=$variant mode=$mode size=$size")
      else
        FAILURES=$((FAILURES + 1))
        SUMMARY+=("FAIL slurm-env ntasks=$NTASKS root=$variant mode=$mode size=$size: $(IFS=';'; echo "${bad[*]}")")
        for ((r = 0; r < NTASKS; r++)); do
          tail -n 20 "$LOG_DIR/$variant-$mode-$size-r$r.log" | sed "s/^/slurm-env-ring:   rank $r | /" >&2
        done
      fi
    done
  done
done

echo "slurm-env-ring: summary ($(basename "$PROG"))"
for line in "${SUMMARY[@]}"; do echo "slurm-env-ring:   $line"; done
if ((FAILURES > 0)); then echo "slurm-env-ring: FAILED ($FAILURES)"; exit 1; fi
echo "slurm-env-ring: all passed"
