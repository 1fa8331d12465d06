#!/usr/bin/env bash
# The C ABI's symbols (issue 25 item 3): every function in core/rwin_c.symbols is still exported by the
# built librwin, librwin exports no rwin_* name the list lacks, and every function rwin/rwin_c.h declares
# is in the list (a declaration without a definition would only fail at a user's link).
#   c_abi_symbols.sh BUILD_DIR/bin
set -u
bin=${1:?usage: c_abi_symbols.sh BUILD_DIR/bin}
src=$(cd "$(dirname "$0")/../.." && pwd)
list=$src/core/rwin_c.symbols
header=$src/core/include/rwin/rwin_c.h
fail() { echo "FAIL c_abi_symbols: $*" >&2; exit 1; }

lib=$(find "$bin/.." -maxdepth 2 -name 'librwin.so' 2>/dev/null | head -1)
if [[ -n $lib ]]; then
  exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" && $3 ~ /^rwin_/ {print $3}' | sort -u)
else
  lib=$(find "$bin/.." -maxdepth 2 -name 'librwin.a' 2>/dev/null | head -1)
  [[ -n $lib ]] || { echo "SKIP c_abi_symbols: no librwin.so or librwin.a under $bin/.."; exit 77; }
  exported=$(nm -g --defined-only "$lib" 2>/dev/null | awk '$2 == "T" && $3 ~ /^rwin_/ {print $3}' | sort -u)
fi
listed=$(grep -v '^#' "$list" | grep -v '^$' | sort -u)
declared=$(grep -oE '^(rwin_status_t|const char\*|size_t|void) +rwin_[a-z0-9_]+\(' "$header" |
           sed -E 's/.* (rwin_[a-z0-9_]+)\(/\1/' | sort -u)
[[ -n $listed && -n $declared ]] || fail "empty list ($list) or no declarations found in $header"

gone=$(comm -23 <(echo "$listed") <(echo "$exported"))
[[ -z $gone ]] || fail "$lib no longer exports these C ABI functions listed in core/rwin_c.symbols (programs built
against an older librwin would fail to load; keep them, or bump the SONAME's major version):"$'\n'"$gone"
new=$(comm -13 <(echo "$listed") <(echo "$exported"))
[[ -z $new ]] || fail "$lib exports rwin_* functions core/rwin_c.symbols does not list. If they are new C ABI
calls, append them to core/rwin_c.symbols (one per line, keep it sorted; never remove a line):"$'\n'"$new"
undeclared=$(comm -23 <(echo "$declared") <(echo "$listed"))
[[ -z $undeclared ]] || fail "rwin/rwin_c.h declares functions that are not in core/rwin_c.symbols (nor, then,
checked to be exported):"$'\n'"$undeclared"
echo "PASS c_abi_symbols: $(wc -l <<<"$listed") C ABI functions exported by $lib"
