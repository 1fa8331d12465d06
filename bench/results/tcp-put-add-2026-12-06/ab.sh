#!/bin/bash
# put(Add) over rwin's own tcp, before (staged: the target's owner applies slots in its progress) and
# after (the target's receiver thread applies WriteAdd frames), interleaved rounds on one machine.
#   bash ab.sh OLD_BUILD NEW_BUILD ROUNDS OUT_DIR
# Each run: rwin-accumulate-bw, 2 ranks (rank 0 adds into rank 1), f32, 8 B..1 MiB, 0.3 s per figure,
# once with the target waiting in a barrier and once with it asleep outside rwin for the first 0.5 s.
set -u
old=$1 new=$2 rounds=$3 out=$4
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for b in old new; do
    dir=$old; [[ $b == new ]] && dir=$new
    for away in 0 0.5; do
      RWIN_TRANSPORT=tcp RWIN_IFNAME=lo timeout 300 "$dir/bin/rwinrun" -n 2 -- "$dir/bin/rwin-accumulate-bw" \
        --dtypes f32 --sizes 8,4K,64K,1M --seconds 0.3 --target-away "$away" >"$out/r$r-$b-away$away.txt" 2>&1
    done
  done
done
