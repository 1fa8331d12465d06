#!/usr/bin/env bash
# examples/overlap.cpp (nonblocking collectives beside compute): 3 ranks over UCX tcp, shared memory
# and rwin's own tcp; every rank must check every element of every iteration and print OK.
set -u
bin=${1:?usage: overlap_example.sh BIN_DIR}
pass=0 fail=0
for lane in "UCX_TLS=tcp" "UCX_TLS=posix,sysv,self" "RWIN_TRANSPORT=tcp RWIN_IFNAME=lo"; do
  # shellcheck disable=SC2086
  out=$(env $lane timeout 120 "$bin/rwinrun" -n 3 -- "$bin/overlap" --size 100003 --iters 4 --compute-us 1000 2>&1)
  rc=$?
  if [[ $rc -eq 0 && $(grep -c 'OK$' <<<"$out") -eq 3 ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL overlap over $lane (status $rc):"
    tail -8 <<<"$out"
  fi
done
echo "overlap example: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
