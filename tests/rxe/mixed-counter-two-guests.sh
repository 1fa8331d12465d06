#!/usr/bin/env bash
# mixed-counter-two-guests.sh <build>/bin
#
# Issue 23, bug 2 (docs/CONTRACT.md, "Atomics on one word: CPU or NIC, never both"): one counter per
# rank fed at once by the ranks on its host and by the ranks on the other host, with an exact final
# sum (rwin_mixed_counter). Two qemu guests with their own rxe0 joined by a link, two ranks in each,
# so every rank has a same-host peer (UCX: shared memory, "direct") and two other-host peers (UCX
# over rxe: "native", NIC atomics), first over UCX, then over verbs. Each guest gets 2 vCPUs: with
# one, the responder's read-modify-write (rxe, in softirq) could never interleave with a CPU atomic
# of a process and a broken rule would go unseen. Exit 0 when every transport run passes on all 4 ranks.
# RWIN_MC_TRANSPORTS (default "ucx verbs"): which transports run. Over UCX the sums were once short: a
# quiet that skipped flushing mapped peers whose atomics UCX still held (docs/CONTRACT.md).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$(cd "${1:?usage: mixed-counter-two-guests.sh <build>/bin}" && pwd -P)
[ -x "$bin/rwin_mixed_counter" ] || { echo "mixed-counter: $bin/rwin_mixed_counter not built" >&2; exit 2; }
key=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
RWIN_RXE_SHARE=$(dirname "$bin")${RWIN_RXE_SHARE:+$'\n'$RWIN_RXE_SHARE} RWIN_RXE_NODES=2 RWIN_RXE_SMP=${RWIN_RXE_SMP:-2} \
  RWIN_RXE_TIMEOUT=${RWIN_RXE_TIMEOUT:-300} exec "$here/run-in-guest.sh" bash -c "export RWIN_JOB_KEY=$key RWIN_MC_TRANSPORTS=\"${RWIN_MC_TRANSPORTS:-ucx verbs}\""'
  set -uo pipefail
  if [ "$RWIN_RXE_NODE" = 0 ]; then root=$RWIN_RXE_IP; else root=$RWIN_RXE_PEER_IP; fi
  export RWIN_NRANKS=4 RWIN_IB_DEVICE=$RWIN_RXE_DEV RWIN_STARTUP_TIMEOUT_MS=60000 RWIN_TIMEOUT_MS=60000
  port=29531 fails=0
  for tp in $RWIN_MC_TRANSPORTS; do
    pids=()
    for i in 0 1; do
      r=$((2 * RWIN_RXE_NODE + i))
      RWIN_TRANSPORT=$tp RWIN_RANK=$r RWIN_ROOT=$root:$port RWIN_LOG_LEVEL=debug RWIN_LOG_SUBSYS=ucx \
        timeout 200 "$0" --rounds ${RWIN_MC_ROUNDS:-100} --local-adds ${RWIN_MC_LOCAL_ADDS:-200} --remote-adds ${RWIN_MC_REMOTE_ADDS:-1} >/tmp/mc.$tp.$r.log 2>&1 &
      pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait $p || rc=$?; done
    for i in 0 1; do
      r=$((2 * RWIN_RXE_NODE + i))
      grep -E "^rank |rwin_mixed_counter|atomics through UCX|error" /tmp/mc.$tp.$r.log | grep -v " debug .*endpoint" | head -8
      ok=1
      grep -q "^rank $r: counter .*: OK$" /tmp/mc.$tp.$r.log || ok=0
      if [ $tp = ucx ]; then
        # The mix this test is about: the same-host peer through shared memory, the others on the NIC,
        # and the rule in force (every atomic through UCX).
        grep -q "same-host/direct" /tmp/mc.$tp.$r.log && grep -q "other-host/native" /tmp/mc.$tp.$r.log || {
          echo "mixed-counter: rank $r over ucx: not the same-host direct + other-host native mix"; ok=0; }
      fi
      if [ $ok = 1 ]; then echo "mixed-counter: PASS $tp rank $r"; else
        echo "mixed-counter: FAIL $tp rank $r (exit $rc); the end of its log:"
        grep -v " debug " /tmp/mc.$tp.$r.log | tail -25 | cut -c1-400
        fails=$((fails + 1))
      fi
    done
    port=$((port + 1))
  done
  exit $fails
' "$bin/rwin_mixed_counter"
