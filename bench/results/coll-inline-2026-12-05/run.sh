#!/usr/bin/env bash
# The A/B of the message number + inline payload change (bench/RESULTS.md, 2026-12-05 17:5x UTC).
# OLD = a build of 8903e32 (before), NEW = a build of the change; 7 rounds interleaved old/new, 2 ranks.
cd "$(dirname "$0")" && bash ../../coll_ab.sh "${1:?OLD build dir}" "${2:?NEW build dir}" coll2.csv 2 8,16 7 20000
