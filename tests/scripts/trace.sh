#!/usr/bin/env bash
# RWIN_TRACE (docs/OBSERVING.md, "Timeline"): a 4-rank, 10-iteration ring shift under rwinrun writes one
# trace file per rank; `rwin-trace merge` makes one Chrome Trace Event file of them that Debian's python3
# json reads, with each rank's puts and notifies to the next rank and its waits; the summary names the
# longest waits; two files for one rank are refused. Python sets the knob the same way.
set -u
bin=${1:?usage: trace.sh BIN_DIR}
fail() { echo "FAIL trace: $*" >&2; exit 1; }
export UCX_TLS=tcp,self UCX_NET_DEVICES=lo
source "$(dirname "$0")/../lib/python_env.sh"
# Python with this build's package (an ASan build's needs its runtime preloaded: python_env.sh).
pyrun() { (rwin_python_asan_env "$bin/../python" trace >/dev/null; PYTHONPATH=$bin/../python exec "$@"); }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=4 iters=10
out=$(RWIN_TRACE=$dir/t timeout 120 "$bin/rwinrun" -n $n -- "$bin/ring_shift" --mode put --size 1000 --iters $iters 2>&1) ||
  fail "ring_shift with RWIN_TRACE failed: $out"
mkdir -p "$dir/t" 2>/dev/null
for r in 0 1 2 3; do
  ls "$dir/t"/rwin-trace-rank$r-pid*.json >/dev/null 2>&1 || fail "no trace file of rank $r in $dir/t: $(ls "$dir/t")"
done
ls "$dir/t"/*.tmp* >/dev/null 2>&1 && fail "a temporary file was left: $(ls "$dir/t")"
merged=$("$bin/rwin-trace" merge "$dir/t" -o "$dir/job.json" 2>&1) || fail "rwin-trace merge failed: $merged"
grep -q "longest waits:" <<<"$merged" || fail "the merge printed no summary: $merged"
grep -q "rank [0-3]: wait 'ring_signals' word" <<<"$merged" || fail "the longest waits name no ring wait: $merged"
check=$(cat <<'PY'
import json, sys
n, iters = int(sys.argv[2]), int(sys.argv[3])
doc = json.load(open(sys.argv[1]))  # a JSON parser's view, as Perfetto's
ev = doc["traceEvents"]
assert doc["otherData"]["ranks"] == list(range(n)), doc["otherData"]
for e in ev:
    assert e["ph"] in ("X", "i", "M"), e
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
    if e["ph"] != "M":
        assert e["ts"] >= 0, e
    if e["ph"] == "X":
        assert e["dur"] >= 0, e
assert sorted({e["pid"] for e in ev}) == list(range(n)), sorted({e["pid"] for e in ev})
for r in range(n):
    mine = [e for e in ev if e["pid"] == r and e["ph"] == "X"]
    nxt = (r + 1) % n
    puts = [e for e in mine if e["name"] == "put" and e["args"].get("peer") == nxt]
    assert len(puts) == iters and all(e["args"]["bytes"] == 4000 for e in puts), (r, puts)
    notifies = [e for e in mine if e["name"] == "notify" and e["args"].get("peer") == nxt]
    assert len(notifies) >= iters, (r, len(notifies))
    waits = [e for e in mine if e["name"] == "wait" and "ring_signals" in e["args"]["detail"]]
    assert len(waits) >= iters and all(e["args"]["cmp"] in ("==", "!=", ">", ">=", "<", "<=") and "expected" in e["args"] for e in waits), (r, waits[:2])
    names = {e["name"] for e in mine}
    for want in ("bootstrap", "connect", "shutdown barrier"):
        assert want in names, (r, want, names)
    # Each put ends before the notify after it begins: the ring's order, on one clock.
    first_put = min(e["ts"] for e in puts)
    assert any(e["ts"] >= first_put for e in notifies), r
print(f"trace: {n} ranks, {len(ev)} events; each rank's {iters} puts and notifies to rank r+1 and its waits")
PY
)
/usr/bin/python3 -c "$check" "$dir/job.json" $n $iters || fail "the merged trace does not show the ring"
sum=$("$bin/rwin-trace" summary "$dir/job.json" 2>&1) || fail "rwin-trace summary failed: $sum"
grep -Eq '^  put +40 ' <<<"$sum" || fail "the summary does not count the ring's 40 puts: $sum"
# A run of calls folded into one event (args.calls) counts as its calls: 1 + 5 notifies, 6 us in all,
# the longest 1 us per call (the run's 5 us over its 5 calls does not beat the single one's 1 us).
cat >"$dir/folded.json" <<'JSON'
{"traceEvents":[
{"name":"notify","cat":"sync","ph":"X","ts":10.0,"dur":1.0,"pid":0,"tid":0,"args":{"peer":1}},
{"name":"notify","cat":"sync","ph":"X","ts":20.0,"dur":5.0,"pid":0,"tid":0,"args":{"peer":1,"calls":5}}
],"otherData":{}}
JSON
sum=$("$bin/rwin-trace" summary "$dir/folded.json" 2>&1) || fail "rwin-trace summary of a folded run failed: $sum"
grep -Eq '^  notify +6 +0\.006 +1\.00 +1\.00 ' <<<"$sum" || fail "the summary does not count a folded run's calls: $sum"
# Two files claiming rank 0 (two jobs in one directory) are refused, naming both.
f0=$(ls "$dir/t"/rwin-trace-rank0-pid*.json)
cp "$f0" "$dir/t/rwin-trace-rank0-pid1.json"
err=$("$bin/rwin-trace" merge "$dir/t" -o "$dir/job2.json" 2>&1) && fail "merge accepted two files of rank 0: $err"
grep -q "two files" <<<"$err" || fail "the refusal does not say why: $err"
[[ -e $dir/job2.json ]] && fail "a refused merge wrote its output"
# Through Python: the knob is read by the Context the bindings make.
[[ -d $bin/../python/rwin ]] || fail "no Python package in $bin/../python (the build makes it)"
{
  py=$(cat <<'PY'
import glob, json, os, sys, rwin
ctx = rwin.Context()
ctx.barrier()
del ctx
import gc; gc.collect()
PY
)
  out=$(RWIN_TRACE=$dir/py pyrun timeout 120 "$bin/rwinrun" -n 2 -- /usr/bin/python3 -c "$py" 2>&1) ||
    fail "python with RWIN_TRACE failed: $out"
  rwin_sanitizer_clean "$out" || fail "a sanitizer report: $out"
  [[ $(ls "$dir/py"/rwin-trace-rank*-pid*.json 2>/dev/null | wc -l) -eq 2 ]] || fail "python ranks wrote no traces: $(ls "$dir/py" 2>&1)"
  m=$("$bin/rwin-trace" merge -q "$dir/py" -o "$dir/py.json" 2>&1) || fail "merging python's traces failed: $m"
  /usr/bin/python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
assert sorted({e["pid"] for e in ev}) == [0, 1]
assert sum(e["name"] == "barrier" for e in ev) >= 2, [e["name"] for e in ev]
 ' "$dir/py.json" || fail "python's merged trace lacks its barriers"
}
# Agents (run-time peers): each writes its own file at close; the merge gives each a row named by its
# address, with its calls (put, get, put_notify naming the region they reach, wait with its comparison).
agent_py=$(cat <<'PY'
import numpy as np, rwin
a = rwin.Agent(progress_thread=True)
b = rwin.Agent(progress_thread=True)
buf = np.zeros(64, np.int64)
rb = b.register(buf)
remote = a.import_region(rb.descriptor())
src = np.arange(4, dtype=np.int64)
a.put(remote, 0, src)
a.put_notify(remote, 64, src, remote, 480, 1)
b.wait(rb, 480, 1)
out = np.zeros(4, np.int64)
a.get(out, remote, 0)
a.flush()
assert list(out) == [0, 1, 2, 3], out
print(a.address, b.address)
a.close()
b.close()
PY
)
addrs=$(RWIN_TRACE=$dir/ag pyrun timeout 120 /usr/bin/python3 -c "$agent_py" 2>&1) ||
  fail "two traced agents failed: $addrs"
rwin_sanitizer_clean "$addrs" || fail "a sanitizer report: $addrs"
addrs=$(tail -n 1 <<<"$addrs")
[[ $(ls "$dir/ag"/rwin-trace-agent-pid*.json 2>/dev/null | wc -l) -eq 2 ]] || fail "two agents wrote no two files: $(ls "$dir/ag" 2>&1)"
m=$("$bin/rwin-trace" merge "$dir/ag" -o "$dir/ag.json" 2>&1) || fail "merging the agents' traces failed: $m"
grep -q "0 rank(s), 2 agent(s)" <<<"$m" || fail "the merge does not count two agents: $m"
/usr/bin/python3 -c '
import json, sys
a, b = sys.argv[2].split()
doc = json.load(open(sys.argv[1]))
assert sorted(doc["otherData"]["agents"].values()) == sorted([a, b]), doc["otherData"]
ev = doc["traceEvents"]
rows = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
pa = [p for p, n in rows.items() if n.startswith("agent " + a + " ")]
pb = [p for p, n in rows.items() if n.startswith("agent " + b + " ")]
assert len(pa) == 1 and len(pb) == 1 and pa[0] >= 1000, rows
mine = lambda p, name: [e for e in ev if e["pid"] == p and e["name"] == name and e["ph"] == "X"]
put = mine(pa[0], "put")
assert len(put) == 1 and put[0]["args"]["bytes"] == 32 and put[0]["cat"] == "agent", put
assert ("of agent " + b) in put[0]["args"]["detail"] and "at offset 0" in put[0]["args"]["detail"], put
pn = mine(pa[0], "put_notify")
assert len(pn) == 1 and "at offset 64" in pn[0]["args"]["detail"], pn
assert len(mine(pa[0], "get")) == 1 and len(mine(pa[0], "import")) == 1 and len(mine(pa[0], "flush")) == 1
w = mine(pb[0], "wait")
assert len(w) == 1 and w[0]["args"]["cmp"] == ">=" and w[0]["args"]["expected"] == 1, w
assert len(mine(pb[0], "register")) == 1
' "$dir/ag.json" "$addrs" || fail "the agents' merged trace lacks their calls: $(cat "$dir/ag.json" | head -c 3000)"
echo "PASS trace"
