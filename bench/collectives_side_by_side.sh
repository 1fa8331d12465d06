#!/usr/bin/env bash
# Collectives side by side on this machine, in one go: rwin (rwin-perf's collective tests) vs Open MPI
# (bench/mpi/mpi_collectives.c) vs OpenSHMEM (bench/shmem/shmem_collectives.c, OSHMEM 4.1.4), the same
# sizes (nccl-tests convention, bench/coll_common.h), the same data and exact checks, the same columns.
# Interleaved: in every round each transport runs rwin, MPI and SHMEM back to back (the order rotates
# from round to round); the table reports medians over rounds and, as ratios, the median over rounds
# of the per-round time ratios (other tool's avg time / rwin's: > 1 = rwin faster).
#
#   bench/collectives_side_by_side.sh [BUILD_DIR] [OUT_DIR]      (BUILD_DIR default: build)
#
# Modes (MODE=quick|full, default quick):
#   quick  4 ranks, sizes 8,64K,1M, -n 20, 1 round, shm + tcp                 (~1-2 minutes)
#   full   4 ranks, sizes 8 B..64 MiB (11 sizes), -n 100 capped at 256 MiB per size (>= 5 calls),
#          at least 1000 calls at <= 8 KiB (OSU's convention: 100 calls of a sub-microsecond
#          collective last less than a scheduler tick when ranks outnumber cores), 3 rounds, shm + tcp
#                                                                           (~25-35 minutes here)
# Environment (override either mode): NPS ("4"; e.g. "2 4 8"), SIZES, ITERS, ROUNDS, MAX_BYTES,
#   MIN_ITERS, SMALL_ITERS (calls at <= 8 KiB at least: full 1000, quick 0), TRANSPORTS ("shm tcp"),
#   TESTS (allreduce,allgather,reduce_scatter,all_to_all,broadcast,barrier), DTYPE (f32), OP (sum), RWIN_MODE (allreduce mode: auto), RXE=1 (also rwin over verbs in
#   one soft-RoCE guest, tests/rxe/run-in-guest.sh: rwin only, quick sizes; ~40 MB/s), SCOLL (OSHMEM
#   scoll component for the "shmem" tool, default: OSHMEM's choice), TOOLS ("rwin mpi shmem shmembasic";
#   shmembasic = OSHMEM with --mca scoll basic: its own one-sided collectives over spml ucx).
# Transports:
#   shm  rwin UCX_TLS=posix,sysv,self; MPI pml ob1 + btl vader,self (Open MPI's single-node default,
#        single-copy CMA); OSHMEM spml ucx with UCX_TLS=posix,sysv,self (UCX-allocated heap). Its
#        collectives: OSHMEM's default scoll component is "mpi" (priority 77: reduce, broadcast,
#        fcollect and barrier call Open MPI's coll/tuned on ob1/vader underneath; alltoall is
#        scoll basic over the spml); SCOLL=basic forces OSHMEM's own one-sided algorithms
#   tcp  rwin UCX_TLS=tcp UCX_NET_DEVICES=lo; MPI pml ob1 + btl tcp,self on lo; OSHMEM spml ucx with
#        UCX_TLS=tcp on lo, MPI underneath on btl tcp
#   owntcp  rwin over its own tcp transport (RWIN_TRANSPORT=tcp RWIN_IFNAME=lo, docs/TCP.md); MPI and
#        OSHMEM as for tcp (run again, so every ratio comes from the same round)
# Every rank is pinned to CPU rank mod 2 (rwin-perf does it itself; mpirun/oshrun --map-by core with
# overload allowed), 4 and 8 ranks therefore oversubscribe the 2 cores.
# Output in OUT_DIR: raw/*.csv (every run), combined.csv, summary.md (the table), coll_time_np*.png and
# coll_busbw_np*.png (gnuplot), run.log.
set -uo pipefail

BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
MODE=${MODE:-quick}
OUT=${2:-$HERE/results/coll-$MODE-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
# Raw files are named TOOL_TR_npN_rR.csv: a second run into the same OUT_DIR would overwrite rounds.
if compgen -G "$OUT/raw/*.csv" >/dev/null && [[ ${APPEND:-0} != 1 ]]; then
  echo "coll-sbs: $OUT/raw already holds results: use a fresh OUT_DIR (or APPEND=1 for other NPS/transports)" >&2
  exit 2
fi
case $MODE in
  quick) D_SIZES=8,64K,1M D_ITERS=20 D_ROUNDS=1 D_MAXB=64M D_MINI=5 D_SMALL=0 ;;
  full) D_SIZES=8,64,512,4K,32K,64K,256K,1M,4M,16M,64M D_ITERS=100 D_ROUNDS=3 D_MAXB=256M D_MINI=5 D_SMALL=1000 ;;
  *) echo "MODE must be quick or full" >&2; exit 2 ;;
esac
SIZES=${SIZES:-$D_SIZES}
ITERS=${ITERS:-$D_ITERS}
ROUNDS=${ROUNDS:-$D_ROUNDS}
MAX_BYTES=${MAX_BYTES:-$D_MAXB}
MIN_ITERS=${MIN_ITERS:-$D_MINI}
SMALL_ITERS=${SMALL_ITERS:-$D_SMALL}
NPS=${NPS:-4}
TRANSPORTS=${TRANSPORTS-shm tcp}  # set but empty: none (e.g. RXE=1 alone)
TOOLS=${TOOLS-rwin mpi shmem shmembasic}
TESTS=${TESTS:-allreduce,allgather,reduce_scatter,all_to_all,broadcast,barrier}
DTYPE=${DTYPE:-f32}
OP=${OP:-sum}
RWIN_MODE=${RWIN_MODE:-auto}
BIN=$BUILD/bin
export UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-fatal}
LOG=$OUT/run.log
log() { echo "coll-sbs: $*" | tee -a "$LOG" >&2; }

[[ -x $BIN/rwin-perf && -x $BIN/rwinrun ]] || { echo "coll-sbs: $BIN/rwin-perf or rwinrun missing" >&2; exit 2; }
MPI=$BIN/rwin_mpi_collectives
SHMEM=$BIN/rwin_shmem_collectives
if [[ ! -x $MPI ]] && command -v mpicc >/dev/null; then
  mpicc -O2 -I"$HERE" -o "$MPI" "$HERE/mpi/mpi_collectives.c" || MPI=""
fi
if [[ ! -x $SHMEM ]] && command -v oshcc >/dev/null; then
  oshcc -O2 -I"$HERE" -o "$SHMEM" "$HERE/shmem/shmem_collectives.c" || SHMEM=""
fi
[[ -x ${SHMEM:-/nonexistent} ]] || SHMEM=""
[[ -x ${MPI:-/nonexistent} ]] || { log "mpicc/mpi_collectives not available: MPI columns empty"; MPI=""; }
[[ -n $SHMEM ]] || log "oshcc not available: OpenSHMEM columns empty"

COMMON=(-t "$TESTS" -s "$SIZES" -n "$ITERS" -w 5 --max-bytes "$MAX_BYTES" --min-iters "$MIN_ITERS" --small-iters "$SMALL_ITERS"
        --dtype "$DTYPE" --op "$OP")
ORTE=(--allow-run-as-root --oversubscribe --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed
      --mca oob_tcp_if_include lo --mca osc ^rdma)

run_rwin() {  # np tr round
  local np=$1 tr=$2 r=$3 f=$OUT/raw/rwin_${tr}_np$1_r$3.csv
  local envs=(UCX_TLS=posix,sysv,self)
  [[ $tr == tcp ]] && envs=(UCX_TLS=tcp UCX_NET_DEVICES=lo)
  [[ $tr == owntcp ]] && envs=(RWIN_TRANSPORT=tcp RWIN_IFNAME=lo)
  env "${envs[@]}" timeout 1500 "$BIN/rwinrun" -n "$np" --timeout 1500 -- "$BIN/rwin-perf" "${COMMON[@]}" \
    --mode "$RWIN_MODE" --label "$tr" --timeout-ms 120000 -o "$f" --csv >>"$LOG" 2>&1 || log "rwin $tr np$np round $r failed (rc $?)"
}
run_mpi() {
  [[ -n $MPI ]] || return 0
  local np=$1 tr=$2 r=$3 f=$OUT/raw/mpi_${tr}_np$1_r$3.csv
  local btl=(--mca pml ob1 --mca btl vader,self)
  [[ $tr == tcp || $tr == owntcp ]] && btl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
  timeout 1500 mpirun "${ORTE[@]}" -np "$np" "${btl[@]}" "$MPI" "${COMMON[@]}" --transport "$tr" -o "$f" \
    >>"$LOG" 2>&1 || log "mpi $tr np$np round $r failed (rc $?)"
}
run_shmembasic() { SCOLL=basic TOOL=shmembasic run_shmem "$@"; }
run_shmem() {
  [[ -n $SHMEM ]] || return 0
  local np=$1 tr=$2 r=$3 f=$OUT/raw/${TOOL:-shmem}_${tr}_np$1_r$3.csv
  local envs=(UCX_TLS=posix,sysv,self) btl=(--mca pml ob1 --mca btl vader,self) x=(-x UCX_TLS)
  [[ $tr == tcp || $tr == owntcp ]] && envs=(UCX_TLS=tcp UCX_NET_DEVICES=lo) btl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo) x=(-x UCX_TLS -x UCX_NET_DEVICES)
  env "${envs[@]}" timeout 1500 oshrun "${ORTE[@]}" -np "$np" "${btl[@]}" --mca spml ucx ${SCOLL:+--mca scoll $SCOLL} "${x[@]}" -x UCX_LOG_LEVEL \
    -x SHMEM_SYMMETRIC_SIZE=1G "$SHMEM" "${COMMON[@]}" --transport "$tr" -o "$f" >>"$LOG" 2>&1 ||
    log "shmem $tr np$np round $r failed (rc $?)"
}

{
  echo "date: $(date -u +%FT%TZ)  host load: $(cut -d' ' -f1-3 /proc/loadavg)  mode: $MODE"
  echo "sizes: $SIZES  iters: $ITERS (max-bytes $MAX_BYTES, min $MIN_ITERS, at <= 8 KiB at least $SMALL_ITERS)  rounds: $ROUNDS  nps: $NPS  transports: $TRANSPORTS"
  echo "dtype: $DTYPE  op: $OP  rwin allreduce mode: $RWIN_MODE  rwin: $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null)"
} | tee -a "$LOG" >&2
start=$SECONDS
for np in $NPS; do
  for r in $(seq 1 "$ROUNDS"); do
    for tr in $TRANSPORTS; do
      read -r -a t <<<"$TOOLS"  # rotate who goes first
      k=$(( (r - 1) % ${#t[@]} ))
      order="${t[*]:k} ${t[*]:0:k}"
      for tool in $order; do
        log "np $np round $r/$ROUNDS $tr: $tool ($((SECONDS - start)) s)"
        "run_$tool" "$np" "$tr" "$r"
      done
    done
  done
  if [[ ${RXE:-0} == 1 ]]; then
    log "np $np rxe: rwin over verbs in a soft-RoCE guest"
    rel=$(realpath --relative-to="$(cd "$HERE/.." && pwd)" "$OUT")
    ( cd "$HERE/.." && RWIN_RXE_TIMEOUT=${RWIN_RXE_TIMEOUT:-1500} tests/rxe/run-in-guest.sh env RWIN_TRANSPORT=verbs \
        "$BIN/rwinrun" -n "$np" --timeout 1400 -- "$BIN/rwin-perf" -t "$TESTS" -s "${RXE_SIZES:-8,64K,1M}" -n "${RXE_ITERS:-20}" \
        -w 2 --min-iters 3 --max-bytes 16M --dtype "$DTYPE" --op "$OP" --mode "$RWIN_MODE" --label rxe --timeout-ms 300000 \
        -o "$rel/raw/rwin_rxe_np${np}_r1.csv" --csv ) >>"$LOG" 2>&1 || log "rxe run failed (rc $?)"
  fi
done
log "runs done in $((SECONDS - start)) s; combining"
python3 "$HERE/coll_combine.py" "$OUT" | tee "$OUT/summary.md"
for f in "$OUT"/plot_np*.gp; do
  [[ -e $f ]] && (cd "$OUT" && gnuplot "$f") 2>>"$LOG"
done
ls "$OUT"/*.png 2>/dev/null | sed 's/^/coll-sbs: plot /' >&2
