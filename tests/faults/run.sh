#!/usr/bin/env bash
# The fault suite (issue 9): kill -9, SIGSTOP and strangers against ranks started by hand.
#   tests/faults/run.sh BUILD_BIN_DIR [--asan-bin DIR] [--trials N] [--seed S] [--only kill,stop,stranger] ...
# All options: tests/faults/faults.py --help. Closing line "N passed, M failed"; non-zero exit on a failure.
# Debian's python3, not a pyenv one from PATH (see docs); the suite needs only its standard library.
exec /usr/bin/python3 "$(dirname "$0")/faults.py" "$@"
