#!/usr/bin/env bash
# Ring shift across "hosts" that are network namespaces on this machine.
#
# usage: netns-ring.sh BIN_DIR
#   env: RWIN_NETNS_HOSTS (>= 3, default 3)     RWIN_NETNS_RANKS_PER_HOST (default 1)
#        RWIN_NETNS_SIZES (default "1 1000 3000000")  RWIN_NETNS_MODES (default "put get")
#        RWIN_NETNS_TIMEOUT seconds per run (default 120)
#        RWIN_NETNS_PROG   program to run instead of BIN_DIR/ring_shift (e.g. tcp_ring_standin.py)
#        RWIN_NETNS_ATOMICS  1 (default, with ring_shift): also fetching atomics between the hosts
#                            (ticket_ring.py, over UCX tcp and rwin's own tcp; needs BIN_DIR/../python)
#        RWIN_NETNS_UNIT_TESTS  gtest binary with NetifFromEnv (default BIN_DIR/rwin_unit_tests;
#                               "none" skips the interface-choice checks)
#        RWIN_NETNS_LAUNCHERS   which launchers to run (default "env env-autoif mpirun slurm", below)
#        RWIN_NETNS_DERIVED     1 (default): also run mpirun and slurm WITHOUT RWIN_ROOT, so the root
#                               is derived from the launcher's variables (derive_root_from_launcher),
#                               and mpirun with no RWIN_* variable at all (the PMIx bootstrap)
#        RWIN_NETNS_ROOTKINDS   with DERIVED=1, which of "explicit derived pmix" to run (default all)
#
# Topology (everything lives in namespaces this script creates; nothing touches the host's own
# interfaces or routes, and the 10.77/16 addresses exist only inside these namespaces):
#
#   rwin-<pid>-br:  bridge br0, ports p0..p<H-1>
#   rwin-<pid>-h<i>: rw0 = 10.77.0.<i+1>/24, veth to p<i> on br0       ("the cluster network")
#   h1 <-> h2:      rw1 = 10.77.1.2/24 (h1), 10.77.1.3/24 (h2), a direct veth ("a second network")
#                   h1's default route points at rw1, so choosing "the default route's interface"
#                   would be wrong for reaching the root on 10.77.0.1; the route to the root is rw0.
#
# Rank r runs in h<r % H> (round robin, so with one rank per host every ring edge crosses hosts);
# rank 0 is in h0 and serves the bootstrap store at RWIN_ROOT=10.77.0.1:<port>. Each rank gets
# UCX_TLS=tcp and UCX_NET_DEVICES=rw0 (env-autoif: unset). A run passes when every rank exits 0 and prints OK.
#
# Clean-up: every namespace is deleted on exit, error, timeout, SIGINT and SIGTERM (veths and the
# bridge live only inside them and go with them); rank processes still running are killed first.
set -uo pipefail
# A caller's own rank variables must not reach the ranks: RWIN_RANK would outrank OMPI_/SLURM_ ones.
unset RWIN_RANK RWIN_NRANKS RWIN_ROOT
# The job's store key (docs/SCALING.md): one per script run, like a launcher would make per job.
JOB_KEY=${RWIN_JOB_KEY:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}

BIN_DIR=${1:?usage: netns-ring.sh BIN_DIR}
BIN_DIR=$(cd "$BIN_DIR" 2>/dev/null && pwd) || { echo "netns-ring: no such directory: $1" >&2; exit 2; }
HOSTS=${RWIN_NETNS_HOSTS:-3}
RPH=${RWIN_NETNS_RANKS_PER_HOST:-1}
SIZES=${RWIN_NETNS_SIZES:-"1 1000 3000000"}
MODES=${RWIN_NETNS_MODES:-"put get"}
RUN_TIMEOUT=${RWIN_NETNS_TIMEOUT:-120}
PROG=${RWIN_NETNS_PROG:-$BIN_DIR/ring_shift}
UNIT=${RWIN_NETNS_UNIT_TESTS:-$BIN_DIR/rwin_unit_tests}
NRANKS=$((HOSTS * RPH))
PREFIX="rwin-$$"
BR_NS="$PREFIX-br"
LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rwin-netns-ring.XXXXXX")

if ((HOSTS < 3)); then echo "netns-ring: need at least 3 hosts, got $HOSTS" >&2; exit 2; fi
if ((HOSTS > 200)); then echo "netns-ring: at most 200 hosts (one /24)" >&2; exit 2; fi
if [[ ! -x $PROG ]]; then echo "netns-ring: program not found or not executable: $PROG" >&2; exit 2; fi

host_ns() { echo "$PREFIX-h$1"; }
host_addr() { echo "10.77.0.$(($1 + 1))"; }

NETNS_SELF=netns-ring
source "$(dirname "${BASH_SOURCE[0]}")/../lib/netns.sh"
RANK_PIDS=()

cleanup() {
  local pid
  for pid in "${RANK_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${RANK_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  RANK_PIDS=()
  netns_cleanup # what still runs in our namespaces, the namespaces, their /etc/netns entries
  rm -rf "$LOG_DIR"
}
on_signal() {
  echo "netns-ring: caught $1, cleaning up" >&2
  trap - EXIT
  cleanup
  exit $((128 + $2))
}
trap cleanup EXIT
trap 'on_signal SIGINT 2' INT
trap 'on_signal SIGTERM 15' TERM

die() { echo "netns-ring: $*" >&2; exit 1; }
run() { "$@" || die "setup step failed: $*"; }

# ---- topology (tests/lib/netns.sh) ------------------------------------------------------------
netns_bridge "$BR_NS" || exit 1
HOST_SPECS=()
for ((h = 0; h < HOSTS; h++)); do HOST_SPECS+=("$(host_ns "$h")=$(host_addr "$h")"); done
netns_star "$BR_NS" rw0 24 "${HOST_SPECS[@]}" || exit 1
H1=$(host_ns 1)
H2=$(host_ns 2)
netns_link "$H1" rw1 10.77.1.2/24 "$H2" rw1 10.77.1.3/24 || exit 1
run ip -n "$H1" route add default via 10.77.1.3 dev rw1
echo "netns-ring: $HOSTS hosts ($PREFIX-h0..h$((HOSTS - 1))) on bridge br0 in $BR_NS, $RPH rank(s) per host"
ip -n "$H1" -br addr | sed 's/^/netns-ring:   h1 /'
ip -n "$H1" route | sed 's/^/netns-ring:   h1 route /'

FAILURES=0
SUMMARY=()

# ---- interface choice -------------------------------------------------------------------------
# check NS ROOT EXPECT [VAR=VALUE...]: runs the NetifFromEnv gtest inside namespace NS.
netif_check() {
  local ns=$1 root=$2 expect=$3
  shift 3
  local log="$LOG_DIR/netif.log"
  if ip netns exec "$ns" env RWIN_NETIF_TEST_ROOT="$root" RWIN_NETIF_TEST_EXPECT="$expect" "$@" \
      timeout -k 5 60 "$UNIT" --gtest_filter=NetifFromEnv.ChoosesExpectedInterface >"$log" 2>&1 &&
      grep -q '^\[  PASSED  \] 1 test' "$log"; then
    SUMMARY+=("PASS netif ${ns#"$PREFIX"-} root=$root${*:+ $*} -> $(grep -o 'netif: .*' "$log" | head -1)")
  else
    FAILURES=$((FAILURES + 1))
    SUMMARY+=("FAIL netif ${ns#"$PREFIX"-} root=$root${*:+ $*} expected $expect")
    sed 's/^/netns-ring:   | /' "$log" >&2
  fi
}
if [[ $UNIT == none ]]; then
  SUMMARY+=("SKIP netif checks (RWIN_NETNS_UNIT_TESTS=none)")
elif [[ ! -x $UNIT ]]; then
  FAILURES=$((FAILURES + 1))
  SUMMARY+=("FAIL netif checks: $UNIT not found (build rwin_unit_tests or set RWIN_NETNS_UNIT_TESTS)")
else
  netif_check "$(host_ns 0)" 10.77.0.1 rw0
  netif_check "$H1" 10.77.0.1 rw0                  # route to the root, not the default route (rw1)
  netif_check "$H1" 10.77.0.3 rw0
  netif_check "$H1" 10.77.1.3 rw1                  # a root on the second network
  netif_check "$H1" 10.77.0.1 rw1 RWIN_IFNAME=rw1  # the user's choice wins
  netif_check "$H1" 10.77.0.1 "error:rw1 10.77.1.2" RWIN_IFNAME=nope0  # error lists what it saw
  netif_check "$H2" 10.77.9.9 "error:no route"     # h2 has no default route
fi

# ---- ring shift ---------------------------------------------------------------------------------
# launcher "env":    this script starts every rank with RWIN_RANK/RWIN_NRANKS/RWIN_ROOT.
# launcher "env-autoif": the same without UCX_NET_DEVICES (rwin chooses the interface).
# launcher "mpirun": Open MPI's mpirun runs in h0; an rsh agent (written below) starts its orted in
#                    the other namespaces, each with its own UTS hostname hN; ranks get
#                    OMPI_COMM_WORLD_RANK/SIZE and (explicit) RWIN_ROOT via -x.
# launcher "slurm":  this script plays srun: SLURM_PROCID/SLURM_NTASKS/SLURM_JOB_ID/SLURM_STEP_ID/
#                    SLURM_STEP_NODELIST=h[0-(H-1)]/SLURMD_NODENAME per rank.
# root "explicit" passes RWIN_ROOT=10.77.0.1:<port>; root "derived" passes none, so the program must
# derive it from the launcher's variables (bootstrap/netif.h derive_root_from_launcher): mpirun's
# HNP uri gives 10.77.0.1, Slurm's nodelist gives h0 (resolved through /etc/netns/<ns>/hosts).
# root "pmix" (mpirun only) passes no RWIN_* variable: rank 0 serves the store on the address that
# routes to rank 1's host (PMIX_HOSTNAME h1) and hands it and a fresh key out through PMIx.
AGENT="$LOG_DIR/ns-rsh-agent.sh"
cat >"$AGENT" <<AGENT_EOF
#!/usr/bin/env bash
# mpirun's rsh agent: "ssh hN cmd..." becomes "run cmd in namespace $PREFIX-hN as host hN".
host=\$1; shift
exec ip netns exec "$PREFIX-\$host" unshare --uts sh -c "hostname \$host; \$*"
AGENT_EOF
chmod +x "$AGENT"

HOSTLIST=""
for ((h = 0; h < HOSTS; h++)); do HOSTLIST+="${HOSTLIST:+,}h$h:$RPH"; done

report() { # report LABEL LOGPREFIX: turns the bad[] list of the last run into a summary line
  local label=$1 logs=$2 f
  local secs
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if ((${#bad[@]} == 0)); then
    # ring_shift's rank 0 names the transport it ran over ("... over ucx(tcp): all ranks OK").
    over=$(cat "$logs"* | grep -m1 -o ' over [^:]*')
    SUMMARY+=("PASS $label ranks=$NRANKS hosts=$HOSTS${over} (${secs}s)")
  else
    FAILURES=$((FAILURES + 1))
    SUMMARY+=("FAIL $label ranks=$NRANKS: $(IFS=";"; echo "${bad[*]}")")
    for f in "$logs"*; do
      echo "netns-ring: --- $label: ${f##*/} ---" >&2
      tail -n 20 "$f" | sed 's/^/netns-ring:   | /' >&2
    done
  fi
}

check_rank_rc() { # check_rank_rc RANK RC LOG
  if (($2 == 124 || $2 == 137)); then
    bad+=("rank $1 timed out after ${RUN_TIMEOUT}s")
  elif (($2 != 0)); then
    bad+=("rank $1 exit $2")
  elif ! grep -qw OK "$3"; then
    bad+=("rank $1 printed no OK")
  fi
}

run_ranks() { # run_ranks LAUNCHER ROOTKIND MODE SIZE: one rank per background process
  local launcher=$1 rootkind=$2 mode=$3 size=$4 r h logs="$LOG_DIR/$1-$2-$3-$4-r"
  local job=$((4200 + PORT)) step=0 root_env=()
  [[ $rootkind == explicit ]] && root_env=(RWIN_ROOT="$(host_addr 0):$PORT")
  RANK_PIDS=()
  for ((r = 0; r < NRANKS; r++)); do
    h=$((r % HOSTS))
    local who=(RWIN_RANK="$r" RWIN_NRANKS="$NRANKS")
    if [[ $launcher == slurm ]]; then
      # Derived port = 20000 + (job*1000 + step) % 12000 (bootstrap/netif.h derived_port).
      who=(SLURM_PROCID="$r" SLURM_NTASKS="$NRANKS" SLURM_LOCALID=$((r / HOSTS)) SLURM_NODEID="$h"
        SLURM_JOB_ID="$job" SLURM_STEP_ID="$step" SLURM_STEP_NODELIST="h[0-$((HOSTS - 1))]"
        SLURM_JOB_NODELIST="h[0-$((HOSTS - 1))]" SLURM_STEP_NUM_NODES="$HOSTS" SLURMD_NODENAME="h$h"
        SLURM_LAUNCH_NODE_IPADDR="$(host_addr 0)")
    fi
    local devices=(UCX_NET_DEVICES=rw0)
    # env-autoif leaves UCX_NET_DEVICES unset: rwin must pick the interface that reaches the root
    # itself (h1 and h2 also have rw1, and h1's default route is rw1).
    [[ $launcher == env-autoif ]] && devices=()
    ip netns exec "$(host_ns "$h")" env "${who[@]}" "${root_env[@]}" RWIN_JOB_KEY="$JOB_KEY" UCX_TLS=tcp "${devices[@]}" "${EXTRA_ENV[@]}" \
      timeout -k 5 "$RUN_TIMEOUT" "${RUN_CMD[@]}" --mode "$mode" --size "$size" >"$logs$r.log" 2>&1 &
    RANK_PIDS+=($!)
  done
  bad=()
  for ((r = 0; r < NRANKS; r++)); do
    wait "${RANK_PIDS[$r]}"
    check_rank_rc "$r" $? "$logs$r.log"
  done
  RANK_PIDS=()
  report "$launcher root=$rootkind mode=$mode size=$size${LABEL_SUFFIX:-}" "$logs"
}

run_mpirun() { # run_mpirun ROOTKIND MODE SIZE
  local rootkind=$1 mode=$2 size=$3 log="$LOG_DIR/mpirun-$1-$2-$3.log" r rc
  # explicit: RWIN_ROOT; derived: the tcp bootstrap's root from mpirun's variables; pmix: nothing
  # at all (no root, no key): rank 0 picks the address that routes to h1 and hands it out via PMIx.
  local root_flag=(-x RWIN_JOB_KEY="$JOB_KEY")
  [[ $rootkind == explicit ]] && root_flag+=(-x "RWIN_ROOT=$(host_addr 0):$PORT")
  [[ $rootkind == derived ]] && root_flag+=(-x RWIN_BOOTSTRAP=tcp)
  [[ $rootkind == pmix ]] && root_flag=()
  # --map-by node puts rank r on h(r % H), as the other launchers do; oob/btl stay on rw0.
  ip netns exec "$(host_ns 0)" unshare --uts sh -c 'hostname h0; exec "$@"' sh \
    timeout -k 10 "$RUN_TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np "$NRANKS" \
    --host "$HOSTLIST" --map-by node --mca plm_rsh_agent "$AGENT" \
    --mca oob_tcp_if_include rw0 --mca btl self,tcp --mca btl_tcp_if_include rw0 --tag-output \
    -x UCX_TLS=tcp -x UCX_NET_DEVICES=rw0 "${root_flag[@]}" \
    "$PROG" --mode "$mode" --size "$size" >"$log" 2>&1 &
  RANK_PIDS=($!)
  wait "${RANK_PIDS[0]}"
  rc=$?
  RANK_PIDS=()
  bad=()
  ((rc == 124 || rc == 137)) && bad+=("mpirun timed out after ${RUN_TIMEOUT}s")
  ((rc != 0 && rc != 124 && rc != 137)) && bad+=("mpirun exit $rc")
  for ((r = 0; r < NRANKS; r++)); do
    grep -Eq "^\[[0-9]+,$r\]<stdout>:.*\bOK\b" "$log" || bad+=("rank $r printed no OK")
  done
  report "mpirun root=$rootkind mode=$mode size=$size" "$log"
}

LAUNCHERS=${RWIN_NETNS_LAUNCHERS:-"env env-autoif mpirun slurm"}
if [[ $LAUNCHERS == *mpirun* ]] && ! command -v mpirun >/dev/null; then
  FAILURES=$((FAILURES + 1))
  SUMMARY+=("FAIL mpirun launcher: mpirun not found (apt-get install openmpi-bin, or RWIN_NETNS_LAUNCHERS)")
  LAUNCHERS=${LAUNCHERS//mpirun/}
fi
for launcher in $LAUNCHERS; do
  case $launcher in env | env-autoif | mpirun | slurm) ;; *) die "unknown launcher '$launcher' (env env-autoif mpirun slurm)" ;; esac
done
ROOTKINDS=explicit
if [[ ${RWIN_NETNS_DERIVED:-1} == 1 ]]; then
  ROOTKINDS=${RWIN_NETNS_ROOTKINDS:-"explicit derived pmix"}
  # Slurm node names must resolve in every namespace: ip netns exec bind-mounts /etc/netns/<ns>/hosts.
  # localhost must stay: Open MPI's daemons fail to connect back ("unable to complete a TCP
  # connection") when it does not resolve.
  HOSTS_LINES=("127.0.0.1 localhost")
  for ((k = 0; k < HOSTS; k++)); do HOSTS_LINES+=("$(host_addr "$k") h$k"); done
  for ((h = 0; h < HOSTS; h++)); do netns_hosts_file "$(host_ns "$h")" "${HOSTS_LINES[@]}" || exit 1; done
fi

PORT=29500
EXTRA_ENV=()
RUN_CMD=("$PROG")  # what run_ranks starts per rank
for launcher in $LAUNCHERS; do
  for rootkind in $ROOTKINDS; do
    [[ $launcher == env* && $rootkind == derived ]] && continue # RWIN_ROOT is that launcher's only way
    [[ $launcher != mpirun && $rootkind == pmix ]] && continue # only mpirun runs a PMIx server here
    for mode in $MODES; do
      for size in $SIZES; do
        PORT=$((PORT + 1)) # fresh port per run: a lingering TIME_WAIT socket never blocks a bind
        start=$EPOCHREALTIME
        if [[ $launcher == mpirun ]]; then
          run_mpirun "$rootkind" "$mode" "$size"
        else
          run_ranks "$launcher" "$rootkind" "$mode" "$size"
        fi
      done
    done
  done
done

# rwin's own tcp transport between the hosts (docs/TCP.md): it must listen on the interface that
# routes to the root, found the way env-autoif finds it (h1 and h2 also have rw1).
if [[ ${RWIN_NETNS_OWN_TCP:-1} == 1 && $(basename "$PROG") == ring_shift ]]; then
  EXTRA_ENV=(RWIN_TRANSPORT=tcp)
  for mode in $MODES; do
    PORT=$((PORT + 1))
    start=$EPOCHREALTIME
    run_ranks env-autoif explicit "$mode" "${SIZES##* }"
  done
  # And with three connections per pair, every Write of 4 KiB or more striped over them (RWIN_TCP_SOCKETS).
  EXTRA_ENV=(RWIN_TRANSPORT=tcp RWIN_TCP_SOCKETS=3 RWIN_TCP_STRIPE_MIN=4K) LABEL_SUFFIX=" sockets=3"
  for mode in $MODES; do
    PORT=$((PORT + 1))
    start=$EPOCHREALTIME
    run_ranks env-autoif explicit "$mode" "${SIZES##* }"
  done
  EXTRA_ENV=() LABEL_SUFFIX=
fi

# Fetching atomics between the hosts (issue 25), over UCX tcp and rwin's own tcp: ticket_ring.py draws
# tickets from rank 0's counter (each must come out once) and CASes and swaps words on its neighbours.
if [[ ${RWIN_NETNS_ATOMICS:-1} == 1 && $(basename "$PROG") == ring_shift ]]; then
  PYDIR=$(cd "$BIN_DIR/.." && pwd)/python
  if PYTHONPATH=$PYDIR /usr/bin/python3 -c "import rwin" 2>/dev/null; then
    RUN_CMD=(/usr/bin/python3 "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ticket_ring.py")
    for tp in ucx tcp; do
      EXTRA_ENV=(PYTHONPATH="$PYDIR" PYTHONDONTWRITEBYTECODE=1)
      [[ $tp == tcp ]] && EXTRA_ENV+=(RWIN_TRANSPORT=tcp)
      PORT=$((PORT + 1))
      start=$EPOCHREALTIME
      run_ranks env-autoif explicit fetch-atomics 0
    done
    RUN_CMD=("$PROG") EXTRA_ENV=()
  else
    SUMMARY+=("SKIP fetching atomics (tests/multinode/ticket_ring.py): no rwin Python package in $PYDIR")
  fi
fi

echo "netns-ring: summary ($(basename "$PROG"))"
for line in "${SUMMARY[@]}"; do echo "netns-ring:   $line"; done
if ((FAILURES > 0)); then
  echo "netns-ring: FAILED ($FAILURES)"
  exit 1
fi
echo "netns-ring: all passed"
