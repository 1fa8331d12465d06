#!/usr/bin/env bash
# Side by side on soft-RoCE, from the host: boots one guest (two NICs: rxe0 and rxe1) and runs
# compare-in-guest.sh there.
#   bench/rxe/compare.sh [BIN_DIR] [ROUNDS]     (run from anywhere; output on stdout)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "${1:-build/bin}")
RWIN_RXE_NICS=${RWIN_RXE_NICS:-2} RWIN_RXE_TIMEOUT=${RWIN_RXE_TIMEOUT:-1800} exec tests/rxe/run-in-guest.sh bash bench/rxe/compare-in-guest.sh "$BIN" "${2:-2}"
