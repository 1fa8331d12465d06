#!/usr/bin/env bash
# RWIN_STATS=1 (docs/OBSERVING.md): every rank of a ring shift prints one "rwin-stats {...}" line when its
# Context ends, valid JSON (read with Debian's python3 json), with the ring's puts and notifies to the
# next rank counted; without the variable nothing is printed.
set -u
bin=${1:?usage: stats_line.sh BIN_DIR}
fail() { echo "FAIL stats_line: $*" >&2; exit 1; }
export UCX_TLS=tcp,self UCX_NET_DEVICES=lo
iters=3
out=$(RWIN_STATS=1 timeout 120 "$bin/rwinrun" -n 3 -- "$bin/ring_shift" --mode put --size 1000 --iters $iters 2>&1) ||
  fail "ring_shift with RWIN_STATS=1 failed: $out"
lines=$(grep -o 'rwin-stats {.*' <<<"$out")
[[ $(wc -l <<<"$lines") -eq 3 ]] || fail "expected 3 rwin-stats lines, got: $out"
check=$(cat <<'PY'
import json, sys
iters = int(sys.argv[1])
ranks = sorted((json.loads(l[len("rwin-stats "):]) for l in sys.stdin.read().splitlines()), key=lambda s: s["rank"])
assert [s["rank"] for s in ranks] == [0, 1, 2], ranks
for s in ranks:
    nxt = s["peers"][(s["rank"] + 1) % 3]
    assert nxt["puts"] >= iters and nxt["put_bytes"] >= iters * 1000, s
    assert nxt["notifies"] >= iters, s
    assert s["total"]["puts"] >= nxt["puts"] and s["waits"] >= iters, s
    assert all(k in s for k in ("wait_ns", "quiets", "barriers", "wrs", "failed_peers")), s
print("stats_line: 3 ranks, each line valid JSON with the ring's puts and notifies to the next rank")
PY
)
/usr/bin/python3 -c "$check" "$iters" <<<"$lines" || fail "the lines do not say what the ring did: $lines"
out=$(timeout 120 "$bin/rwinrun" -n 2 -- "$bin/ring_shift" --mode put --size 1000 --iters 1 2>&1) || fail "ring_shift failed: $out"
grep -q 'rwin-stats' <<<"$out" && fail "rwin-stats printed without RWIN_STATS: $out"
echo "PASS stats_line"
