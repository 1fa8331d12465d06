#!/usr/bin/env bash
# The rxe suite, from the host: boots soft-RoCE guests (tests/rxe/run-in-guest.sh) and runs
#   1. selftest.sh (rxe0 ACTIVE, an RDMA write loopback),
#   2. guest-suite.sh (contract suite over verbs, ring shifts 1 element .. 64 MiB; two NICs, rxe0 and
#      rxe1, for the two-device steps),
#   3. location.sh: from a copy of the checkout under /tmp with spaces in its path, one guest started
#      in its build/bin and verbs-two-guests.sh (ring shift across two guests' rxe devices, packets on
#      a real link): guest steps find the build tree wherever the checkout is,
#   4. mixed-counter-two-guests.sh: 2 ranks in each of two guests add into one counter per rank, from the
#      same host and across the link at once; the sums must be exact (issue 23, bug 2), over UCX and
#      over verbs.
# Runs from the checkout root (the guest shares the current directory read-write) and shares the
# build tree too (RWIN_RXE_SHARE), wherever it is.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "${1:-build/bin}")
export RWIN_RXE_SHARE=$(dirname "$BIN")${RWIN_RXE_SHARE:+$'\n'$RWIN_RXE_SHARE}
fails=0
run() {
  local name=$1; shift
  local t0=$SECONDS
  if "$@"; then echo "rxe: PASS $name ($((SECONDS - t0)) s)"; else echo "rxe: FAIL $name ($((SECONDS - t0)) s)"; fails=$((fails + 1)); fi
}
run "selftest" bash tests/rxe/selftest.sh
run "one guest: verbs contract suite and ring shifts" \
  env RWIN_RXE_NICS=2 RWIN_RXE_TIMEOUT=${RWIN_RXE_SUITE_TIMEOUT:-2400} tests/rxe/run-in-guest.sh bash tests/rxe/guest-suite.sh "$BIN"
run "two guests: ring shift across two rxe devices, from a checkout under /tmp with spaces in its path" \
  bash tests/rxe/location.sh "$BIN"
run "two guests: one counter fed by same-host and other-host ranks at once, UCX and verbs" \
  bash tests/rxe/mixed-counter-two-guests.sh "$BIN"
echo "rxe: $fails failed"
[[ $fails -eq 0 ]]
