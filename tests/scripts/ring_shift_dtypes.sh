#!/usr/bin/env bash
# ring_shift --dtype: every element type on 2, 5 and 8 ranks, put and get, over UCX tcp and shared
# memory (verbs: tests/rxe/guest-suite.sh). Every rank and the summary must say OK.
# RWIN_TEST_TIER=ci: every type and both modes over both lanes, each type on one rank count (2, 5, 8 in
# turn) instead of all three: 48 jobs instead of 144 (the dtype code does not depend on the rank count;
# the counts still all run, each with a third of the types).
set -u
bin=${1:?usage: ring_shift_dtypes.sh BIN_DIR}
tier=${RWIN_TEST_TIER:-full}
pass=0 fail=0
i=0
for tls in tcp posix,sysv,self; do
  for n in 2 5 8; do
    for dt in f16 bf16 i8 i16 u8 u16 i32 i64 u32 u64 f32 f64; do
      i=$((i + 1))
      [[ $tier == ci && $((i % 3)) -ne $(((n / 3) % 3)) ]] && continue  # n 2, 5, 8 -> 0, 1, 2
      for mode in put get; do
        out=$(UCX_TLS=$tls timeout 120 "$bin/rwinrun" -n $n -- "$bin/ring_shift" --dtype $dt --mode $mode --size 4099 --iters 2 2>&1)
        rc=$?
        if [[ $rc -eq 0 && $(grep -c '] OK$' <<<"$out") -eq $n ]] && grep -q "x 4099 $dt x .*all ranks OK" <<<"$out"; then
          pass=$((pass + 1))
        else
          fail=$((fail + 1))
          echo "FAIL ring_shift --dtype $dt --mode $mode on $n ranks over $tls (status $rc):"
          tail -5 <<<"$out"
        fi
      done
    done
  done
done
echo "ring_shift dtypes: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
