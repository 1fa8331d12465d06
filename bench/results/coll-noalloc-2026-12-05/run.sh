#!/usr/bin/env bash
# The A/B of "no allocation per call or per poll round" (bench/RESULTS.md, 2026-12-05 20:1x UTC).
# OLD = a build of 0983ddd (before), NEW = a build of 927b9f1; rounds interleaved old/new, shared memory:
# 7 at 2 ranks (coll.csv), 5 at 4 ranks (coll4.csv, 5000 calls per size).
cd "$(dirname "$0")" && OLD=${1:?OLD build dir} NEW=${2:?NEW build dir} &&
  bash ../../coll_ab.sh "$OLD" "$NEW" coll.csv 2 8,64 7 20000 && bash ../../coll_ab.sh "$OLD" "$NEW" coll4.csv 4 16,64 5 5000
