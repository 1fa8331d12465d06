#!/usr/bin/env bash
# The rxe suite, from the host: boots soft-RoCE guests (tests/rxe/run-in-guest.sh) and runs
#   1. selftest.sh (rxe0 ACTIVE, an RDMA write loopback),
#   2. guest-suite.sh (contract suite over verbs, ring shifts 1 element .. 64 MiB),
#   3. verbs-two-guests.sh (ring shift across two guests' rxe devices, packets on a real link).
# Must run from the checkout root (the guest shares the current directory read-write).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "${1:-build/bin}")
fails=0
run() {
  local name=$1; shift
  local t0=$SECONDS
  if "$@"; then echo "rxe: PASS $name ($((SECONDS - t0)) s)"; else echo "rxe: FAIL $name ($((SECONDS - t0)) s)"; fails=$((fails + 1)); fi
}
run "selftest" bash tests/rxe/selftest.sh
run "one guest: verbs contract suite and ring shifts" \
  env RWIN_RXE_TIMEOUT=${RWIN_RXE_SUITE_TIMEOUT:-2400} tests/rxe/run-in-guest.sh bash tests/rxe/guest-suite.sh "$BIN"
run "two guests: ring shift across two rxe devices" \
  env RWIN_RXE_TIMEOUT=900 bash tests/rxe/verbs-two-guests.sh "$BIN"
echo "rxe: $fails failed"
[[ $fails -eq 0 ]]
