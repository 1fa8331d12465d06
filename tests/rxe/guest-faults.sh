#!/usr/bin/env bash
# Runs INSIDE a soft-RoCE guest (called by guest-suite.sh): the fault suite's kill -9 trials over the
# verbs transport (tests/faults/faults.py). Kept small for the slow TCG guest: 100000 elements, a short
# delay before the kill, detection bound 10 s. RWIN_FAULTS_VERBS_TRIALS overrides the trial count,
# RWIN_FAULTS_VERBS_COLL_TRIALS that of the trials during a collective (rwin-perf, faults.py COLL_CASES).
set -uo pipefail
BIN=${1:?usage: guest-faults.sh BIN_DIR}
[[ "${RWIN_IN_GUEST:-}" == 1 ]] || { echo "guest-faults.sh runs inside tests/rxe/run-in-guest.sh" >&2; exit 2; }
exec /usr/bin/python3 "$(dirname "$0")/../faults/faults.py" "$BIN" --only kill --transports verbs \
  --trials "${RWIN_FAULTS_VERBS_TRIALS:-20}" --coll-trials "${RWIN_FAULTS_VERBS_COLL_TRIALS:-9}" --size 100000 --delay 0.3:1.5 --bound 10 --cap 25 --timeout-ms 15000
