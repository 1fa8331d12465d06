#!/usr/bin/env bash
# run-verbs-tests.sh <build>/bin [extra gtest args]
#
# Runs the raw-verbs transport tests on Soft-RoCE inside a qemu guest (tests/rxe/run-in-guest.sh):
# the blob and device-selection unit tests and the forked-rank VerbsTransport tests of
# rwin_mp_tests. Inside the guest there is an RDMA device, so a skipped verbs test is a failure
# here (it would mean the transport did not find rxe0).
# Exit status: 0 all passed; otherwise the tests' or the runner's status.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$(cd "${1:?usage: run-verbs-tests.sh <build>/bin [gtest args]}" && pwd -P)
shift
for b in rwin_unit_tests rwin_mp_tests; do
  [ -x "$bin/$b" ] || { echo "run-verbs-tests: $bin/$b not built" >&2; exit 2; }
done
cd "$bin"  # the guest shares the current directory read-write at the same path
exec "$here/run-in-guest.sh" bash -c '
  set -uo pipefail
  log=/tmp/verbs-tests.log
  ./rwin_unit_tests --gtest_filter="VerbsBlob*:VerbsDevice*" "$@" 2>&1 | tee "$log"; rc=$?
  [ $rc = 0 ] || exit $rc
  ./rwin_mp_tests --gtest_filter="VerbsTransport*" "$@" 2>&1 | tee -a "$log"; rc=$?
  [ $rc = 0 ] || exit $rc
  if grep -q "^\[  SKIPPED \]" "$log"; then
    echo "run-verbs-tests: FAIL: verbs tests skipped inside the guest (no RDMA device found?)" >&2
    exit 1
  fi
' verbs-tests "$@"
