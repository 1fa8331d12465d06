#!/usr/bin/env bash
# rwin-info: --json is one valid document with every knob of common/knobs.cpp; a knob set in the
# environment shows its value and source "environment"; -c / -d select sections; usage errors.
set -u
bin=${1:?usage: rwin_info.sh BIN_DIR}
info="$bin/rwin-info"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL rwin_info: $*" >&2; exit 1; }
py=/usr/bin/python3

# Every knob: the names in the table's source (independent of rwin-info's own listing).
grep -oE '^    \{"RWIN_[A-Z0-9_]+"' "$here/../../common/knobs.cpp" | grep -oE 'RWIN_[A-Z0-9_]+' | sort >"$tmp/table"
[ "$(wc -l <"$tmp/table")" -ge 20 ] || fail "could not read the knob table: $(cat "$tmp/table")"

env -u RWIN_CHUNK_BYTES RWIN_CHUNK_BYTES=64K "$info" --json >"$tmp/all.json" 2>"$tmp/all.err" || fail "--json failed: $(cat "$tmp/all.err")"
$py - "$tmp/all.json" "$tmp/table" <<'PY' || fail "--json checks"
import json, sys
j = json.load(open(sys.argv[1]))
table = open(sys.argv[2]).read().split()
names = [k["name"] for k in j["config"]["knobs"]]
assert sorted(names) == table, f"knobs {sorted(names)} != table {table}"
for section in ("version", "build", "transports", "ucx", "rma_modes", "verbs", "config"):
    assert section in j, f"no {section}"
k = {k["name"]: k for k in j["config"]["knobs"]}
assert k["RWIN_CHUNK_BYTES"]["value"] == "64K" and k["RWIN_CHUNK_BYTES"]["source"] == "environment", k["RWIN_CHUNK_BYTES"]
assert k["RWIN_COLL_SLOTS"]["source"] == "default" and k["RWIN_COLL_SLOTS"]["value"] == "auto", k["RWIN_COLL_SLOTS"]
assert "ucx" in j["transports"] and "tcp" in j["transports"], j["transports"]
assert j["ucx"]["version"] and isinstance(j["ucx"]["resources"], list) and j["ucx"]["resources"], j["ucx"]
assert {"self", "same_host", "other_host"} <= set(j["rma_modes"]), j["rma_modes"]
assert isinstance(j["verbs"], list)
PY

# Modes follow the settings.
RWIN_UCX_RMA=native "$info" -d --json | $py -c '
import json, sys; m = json.load(sys.stdin)["rma_modes"]
assert m == {"self": "native", "same_host": "native", "other_host": "native"}, m' || fail "RWIN_UCX_RMA=native not reflected"

# The predicted modes are the ones a job gets: a 2-rank run's start-up line against rwin-info, with
# the default transports and with tcp only.
for tls in all tcp; do
  predicted=$(UCX_TLS=$tls "$info" -d --json | $py -c '
import json, sys; m = json.load(sys.stdin)["rma_modes"]; print("self: %s; same host (1 peers): %s" % (m["self"], m["same_host"]))')
  UCX_TLS=$tls RWIN_LOG_LEVEL=info "$bin/rwinrun" -n 2 --timeout 120 -- "$bin/ring_shift" >"$tmp/ring.out" 2>"$tmp/ring.err" \
    || fail "ring_shift (UCX_TLS=$tls) failed: $(cat "$tmp/ring.err")"
  [ "$(grep -c "; $predicted; other hosts (0 peers): -$" "$tmp/ring.err")" -eq 2 ] \
    || fail "UCX_TLS=$tls: rwin-info predicts '$predicted', the job logged: $(grep transport "$tmp/ring.err")"
done

# -c: the configuration only; -d: the devices only.
"$info" -c --json | $py -c '
import json, sys; j = json.load(sys.stdin)
assert "config" in j and "ucx" not in j and "verbs" not in j, list(j)' || fail "-c selects the wrong sections"
"$info" -d --json | $py -c '
import json, sys; j = json.load(sys.stdin)
assert "config" not in j and "ucx" in j and "verbs" in j, list(j)' || fail "-d selects the wrong sections"

# Text: the same sections, a knob with value and source.
RWIN_TIMEOUT_MS=1500 "$info" >"$tmp/text" || fail "text output failed"
grep -Eq '^  RWIN_TIMEOUT_MS +1500 +environment$' "$tmp/text" || fail "text: no RWIN_TIMEOUT_MS line: $(cat "$tmp/text")"
grep -q '^UCX ' "$tmp/text" || fail "text: no UCX section"
if [ ! -d /sys/class/infiniband ] || [ -z "$(ls -A /sys/class/infiniband)" ]; then
  grep -q 'no verbs devices' "$tmp/text" || fail "text: no 'no verbs devices' on a host without any"
fi

# A value that does not parse is reported, not fatal; an unknown variable is named with the closest.
RWIN_PIPELINE_DEPTH=4x RWIN_TRANSPORTS=ucx "$info" -c --json | $py -c '
import json, sys; c = json.load(sys.stdin)["config"]
assert "RWIN_PIPELINE_DEPTH=\x274x\x27" in c["error"], c.get("error")
assert [(u["name"], u["closest"]) for u in c["unknown_variables"]] == [("RWIN_TRANSPORTS", "RWIN_TRANSPORT")], c["unknown_variables"]
' || fail "bad value / unknown variable not reported"

# The collectives' tuning table: the built-in rules follow their knobs, a file's rules come first
# (named by file and index), a bad file is reported in the table's place.
RWIN_COLL_BRUCK_MAX=1K RWIN_ALLREDUCE_MESH_MAX=8K "$info" -c --json | $py -c '
import json, sys; t = json.load(sys.stdin)["config"]["coll_tuning"]
assert t[0] == {"rule": "allreduce net ranks 3.. bytes 0..1024 -> bruck", "from": "built-in (RWIN_COLL_BRUCK_MAX)"}, t[0]
assert t[-1] == {"rule": "broadcast -> direct", "from": "built-in"}, t[-1]
assert t[-2] == {"rule": "broadcast ranks 3.. bytes 0..262144 -> tree", "from": "built-in (RWIN_COLL_CHUNK_BYTES)"}, t[-2]
assert len(t) == 14, t' || fail "built-in tuning rules"
echo '{"version": 1, "rules": [{"collective": "all_to_all", "ranks": [2, 4], "bytes": [0, "2K"], "algorithm": "bruck"}]}' >"$tmp/tune.json"
RWIN_COLL_TUNING="$tmp/tune.json" "$info" -c --json | TUNE="$tmp/tune.json" $py -c '
import json, os, sys; t = json.load(sys.stdin)["config"]["coll_tuning"]
assert t[0] == {"rule": "all_to_all ranks 2..4 bytes 0..2048 -> bruck", "from": "\x27%s\x27, rule 0" % os.environ["TUNE"]}, t[0]
assert t[1] == {"rule": "reduce_scatter net ranks 3..7 bytes 4097..65536 -> direct", "from": "built-in (measured; RWIN_COLL_BRUCK_MAX unset)"}, t[1]
assert len(t) == 20, t  # the file rule, four while RWIN_COLL_BRUCK_MAX is unset, one while RWIN_ALLREDUCE_MESH_MAX is, the other 14' || fail "a tuning file's rules"
RWIN_COLL_TUNING="$tmp/tune.json" "$info" -c | grep -q "all_to_all ranks 2..4 bytes 0..2048 -> bruck" || fail "text form of the tuning table"
echo '{"version": 1, "rules": [{"collective": "all_to_all", "algorithm": "chain"}]}' >"$tmp/bad-tune.json"
RWIN_COLL_TUNING="$tmp/bad-tune.json" "$info" -c --json | $py -c '
import json, sys; t = json.load(sys.stdin)["config"]["coll_tuning"]
assert len(t) == 1 and "rule 0.algorithm: \x27chain\x27 is not an algorithm of all_to_all" in t[0]["error"], t' || fail "a bad tuning file"

# --version, --help, and a bad flag.
"$info" --version | grep -Eq '^rwin-info [0-9]+\.[0-9]+\.[0-9]+$' || fail "--version"
"$info" --help >"$tmp/help" || fail "--help exits non-zero"
grep -q -- '--json' "$tmp/help" || fail "--help does not list --json"
"$info" --bogus >"$tmp/bad.out" 2>"$tmp/bad.err" && fail "a bad flag exits 0"
grep -q -- 'bogus' "$tmp/bad.err" || fail "a bad flag prints no message naming it: $(cat "$tmp/bad.err")"
echo "PASS rwin_info"
