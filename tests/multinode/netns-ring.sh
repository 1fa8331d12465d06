#!/usr/bin/env bash
# Ring shift across "hosts" that are network namespaces on this machine.
#
# usage: netns-ring.sh BIN_DIR
#   env: RWIN_NETNS_HOSTS (>= 3, default 3)     RWIN_NETNS_RANKS_PER_HOST (default 1)
#        RWIN_NETNS_SIZES (default "1 1000 3000000")  RWIN_NETNS_MODES (default "put get")
#        RWIN_NETNS_TIMEOUT seconds per run (default 120)
#        RWIN_NETNS_PROG   program to run instead of BIN_DIR/ring_shift (e.g. tcp_ring_standin.py)
#        RWIN_NETNS_UNIT_TESTS  gtest binary with NetifFromEnv (default BIN_DIR/rwin_unit_tests;
#                               "none" skips the interface-choice checks)
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
# UCX_TLS=tcp and UCX_NET_DEVICES=rw0. A run passes when every rank exits 0 and prints OK.
#
# Clean-up: every namespace is deleted on exit, error, timeout, SIGINT and SIGTERM (veths and the
# bridge live only inside them and go with them); rank processes still running are killed first.
set -uo pipefail

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

CREATED_NS=()
RANK_PIDS=()

cleanup() {
  local pid ns
  for pid in "${RANK_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${RANK_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  RANK_PIDS=()
  for ns in "${CREATED_NS[@]}"; do
    ip netns del "$ns" 2>/dev/null || echo "netns-ring: could not delete namespace $ns" >&2
  done
  CREATED_NS=()
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

add_ns() {
  run ip netns add "$1"
  CREATED_NS+=("$1")
  run ip -n "$1" link set lo up
}

# ---- topology ---------------------------------------------------------------------------------
add_ns "$BR_NS"
run ip -n "$BR_NS" link add br0 type bridge
run ip -n "$BR_NS" link set br0 up
for ((h = 0; h < HOSTS; h++)); do
  ns=$(host_ns "$h")
  add_ns "$ns"
  # Created directly inside the namespaces: no veth end ever exists in the host's namespace.
  run ip link add rw0 netns "$ns" type veth peer name "p$h" netns "$BR_NS"
  run ip -n "$BR_NS" link set "p$h" master br0
  run ip -n "$BR_NS" link set "p$h" up
  run ip -n "$ns" addr add "$(host_addr "$h")/24" dev rw0
  run ip -n "$ns" link set rw0 up
done
H1=$(host_ns 1)
H2=$(host_ns 2)
run ip link add rw1 netns "$H1" type veth peer name rw1 netns "$H2"
run ip -n "$H1" addr add 10.77.1.2/24 dev rw1
run ip -n "$H2" addr add 10.77.1.3/24 dev rw1
run ip -n "$H1" link set rw1 up
run ip -n "$H2" link set rw1 up
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
PORT=29500
for mode in $MODES; do
  for size in $SIZES; do
    PORT=$((PORT + 1)) # fresh port per run: a lingering TIME_WAIT socket never blocks the next bind
    RANK_PIDS=()
    start=$EPOCHREALTIME
    for ((r = 0; r < NRANKS; r++)); do
      h=$((r % HOSTS))
      ip netns exec "$(host_ns "$h")" env RWIN_RANK="$r" RWIN_NRANKS="$NRANKS" \
        RWIN_ROOT="$(host_addr 0):$PORT" UCX_TLS=tcp UCX_NET_DEVICES=rw0 \
        timeout -k 5 "$RUN_TIMEOUT" "$PROG" --mode "$mode" --size "$size" \
        >"$LOG_DIR/$mode-$size-r$r.log" 2>&1 &
      RANK_PIDS+=($!)
    done
    bad=()
    for ((r = 0; r < NRANKS; r++)); do
      wait "${RANK_PIDS[$r]}"
      rc=$?
      log="$LOG_DIR/$mode-$size-r$r.log"
      if ((rc == 124 || rc == 137)); then
        bad+=("rank $r timed out after ${RUN_TIMEOUT}s")
      elif ((rc != 0)); then
        bad+=("rank $r exit $rc")
      elif ! grep -qw OK "$log"; then
        bad+=("rank $r printed no OK")
      fi
    done
    RANK_PIDS=()
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    if ((${#bad[@]} == 0)); then
      # ring_shift's rank 0 names the transport it ran over ("... over ucx(tcp): all ranks OK").
      over=$(grep -m1 -o ' over [^:]*' "$LOG_DIR/$mode-$size-r0.log")
      SUMMARY+=("PASS ring mode=$mode size=$size ranks=$NRANKS hosts=$HOSTS${over} (${secs}s)")
    else
      FAILURES=$((FAILURES + 1))
      SUMMARY+=("FAIL ring mode=$mode size=$size ranks=$NRANKS: $(IFS=";"; echo "${bad[*]}")")
      for ((r = 0; r < NRANKS; r++)); do
        echo "netns-ring: --- rank $r (h$((r % HOSTS))) mode=$mode size=$size ---" >&2
        tail -n 20 "$LOG_DIR/$mode-$size-r$r.log" | sed 's/^/netns-ring:   | /' >&2
      done
    fi
  done
done

echo "netns-ring: summary ($(basename "$PROG"))"
for line in "${SUMMARY[@]}"; do echo "netns-ring:   $line"; done
if ((FAILURES > 0)); then
  echo "netns-ring: FAILED ($FAILURES)"
  exit 1
fi
echo "netns-ring: all passed"
