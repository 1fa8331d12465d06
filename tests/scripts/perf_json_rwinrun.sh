#!/usr/bin/env bash
# rwin-perf --json through rwinrun: with --no-prefix stdout is one JSON document (only rank 0
# writes it) that records the version, chunk, depth, nbi and the RMA mode each peer gets, over UCX
# tcp (rwin's am protocol) and shared memory (direct); with --output DIR rank 0's file is that
# document and rank 1's is empty; without either, lines are still prefixed "[rank] ".
#   perf_json_rwinrun.sh BIN_DIR
set -uo pipefail
BIN=${1:?usage: perf_json_rwinrun.sh BIN_DIR}
[[ -x $BIN/rwin-perf ]] || { echo "rwin-perf not built: skipped"; exit 77; }
src=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n 's/^project(rwin VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
PY=/usr/bin/python3
export UCX_LOG_LEVEL=fatal
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL perf_json_rwinrun: $*"; fail=1; }
quick=(-s 8,4K -n 20 -w 2 --batches 2 --no-pin)

# check FILE MODE CHUNK DEPTH NBI TESTS: FILE parses as JSON and holds what the run was given.
check() {
  "$PY" - "$@" "$version" <<'EOF'
import json, sys
path, mode, chunk, depth, nbi, tests, version = sys.argv[1:]
with open(path) as f:
    doc = json.load(f)  # the whole stream: one document, nothing before or after it
want = {"tool": "rwin-perf", "version": version, "chunk_bytes": int(chunk), "pipeline_depth": int(depth),
        "nbi": nbi == "1", "rma_mode": mode, "nranks": 2, "transport_kind": "ucx"}
errs = [f"{k} = {doc.get(k)!r}, want {v!r}" for k, v in want.items() if doc.get(k) != v]
if doc.get("rma_modes") != [mode, mode]:
    errs.append(f"rma_modes = {doc.get('rma_modes')!r}, want [{mode!r}, {mode!r}]")
if not str(doc.get("transport", "")).startswith("ucx("):
    errs.append(f"transport = {doc.get('transport')!r}")
recs = doc.get("records", doc.get("collectives"))
got = sorted({(r["test"], r["size"]) for r in recs or []})
exp = sorted({(t, s) for t in tests.split(",") for s in ([0] if t == "barrier" else [8, 4096])})
if got != exp:
    errs.append(f"records {got}, want {exp}")
for r in recs or []:
    fig = r.get("rwin", r)
    if not (isinstance(fig.get("avg_us"), float) and fig["avg_us"] > 0):
        errs.append(f"{r['test']} {r['size']}: avg_us = {fig.get('avg_us')!r}")
if errs:
    print(path + ": " + "; ".join(errs))
    sys.exit(1)
EOF
}

# Pair tests over tcp (am) and shared memory (direct), with the knobs the JSON must echo.
for tr in tcp:am posix,sysv,self:direct; do
  tls=${tr%:*} mode=${tr##*:}
  if ! UCX_TLS=$tls timeout 300 "$BIN/rwinrun" -n 2 --no-prefix -- "$BIN/rwin-perf" -t put_lat,put_bw "${quick[@]}" \
      --chunk 64K --depth 3 --nbi --json >"$tmp/$mode.json" 2>"$tmp/$mode.err"; then
    bad "$tls: rwin-perf failed: $(tail -5 "$tmp/$mode.err")"; continue
  fi
  check "$tmp/$mode.json" "$mode" 65536 3 1 put_lat,put_bw || bad "$tls: $(head -c 2000 "$tmp/$mode.json")"
done

# The collectives' document as well (every rank runs them; still rank 0 alone writes).
if UCX_TLS=tcp timeout 300 "$BIN/rwinrun" -n 2 --no-prefix -- "$BIN/rwin-perf" -t allreduce,barrier -s 8,4K -n 3 -w 1 \
    --min-iters 3 --no-pin --depth 2 --json >"$tmp/coll.json" 2>"$tmp/coll.err"; then
  check "$tmp/coll.json" am "$(sed -n 's/.*"chunk_bytes": \([0-9]*\).*/\1/p' "$tmp/coll.json")" 2 0 allreduce,barrier ||
    bad "collectives: $(head -c 2000 "$tmp/coll.json")"
else
  bad "collectives: rwin-perf failed: $(tail -5 "$tmp/coll.err")"
fi

# --output DIR: rank 0's stdout file is the document, rank 1 wrote nothing on stdout.
if UCX_TLS=tcp timeout 300 "$BIN/rwinrun" -n 2 --output "$tmp/out" -- "$BIN/rwin-perf" -t put_bw "${quick[@]}" \
    --depth 5 --json >"$tmp/rwinrun.out" 2>"$tmp/rwinrun.err"; then
  check "$tmp/out/rank.0.out" am "$(sed -n 's/.*"chunk_bytes": \([0-9]*\).*/\1/p' "$tmp/out/rank.0.out")" 5 0 put_bw ||
    bad "--output: rank.0.out: $(head -c 2000 "$tmp/out/rank.0.out")"
  [[ -e $tmp/out/rank.1.out && ! -s $tmp/out/rank.1.out ]] || bad "--output: rank.1.out missing or not empty"
  grep -q "rwin-perf: \[1/2\] put_bw 8" "$tmp/out/rank.0.err" || bad "--output: rank 0's progress not in rank.0.err"
  [[ -s $tmp/rwinrun.out ]] && bad "--output: rwinrun itself printed: $(head -3 "$tmp/rwinrun.out")"
else
  bad "--output: rwin-perf failed: $(tail -5 "$tmp/rwinrun.err")"
fi

# Default: every line prefixed, so the same command is not a JSON document.
if UCX_TLS=tcp timeout 300 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -t put_bw "${quick[@]}" --json \
    >"$tmp/prefixed.json" 2>"$tmp/prefixed.err"; then
  [[ $(head -1 "$tmp/prefixed.json") == "[0] {" ]] || bad "default output not prefixed: $(head -2 "$tmp/prefixed.json")"
  grep -qv '^\[0\] ' "$tmp/prefixed.json" && bad "a stdout line without the [0] prefix: $(grep -v '^\[0\] ' "$tmp/prefixed.json" | head -2)"
  "$PY" -m json.tool "$tmp/prefixed.json" >/dev/null 2>&1 && bad "prefixed output parsed as JSON"
else
  bad "default: rwin-perf failed: $(tail -5 "$tmp/prefixed.err")"
fi

[[ $fail -eq 0 ]] && echo "PASS perf_json_rwinrun"
exit $fail
