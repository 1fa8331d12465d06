#!/usr/bin/env bash
# docs/CONFIG.md is checked against the one knob table in the code (config_doc_check.py).
set -u
bin=${1:?usage: config_doc.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/config_doc_check.py" "$bin/rwin-info" "$here/../../docs/CONFIG.md"
