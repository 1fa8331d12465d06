#!/usr/bin/python3
"""docs/CONFIG.md against the code's knob table (common/knobs.cpp, dumped by `rwin-info -c --json`).

Fails when a knob is missing from CONFIG.md's table, when its row's default column does not contain
the table's default text, or when CONFIG.md's table names an RWIN_* variable the code does not know.

usage: config_doc_check.py RWIN_INFO CONFIG_MD
"""
import json
import re
import subprocess
import sys


def rows(md_text):
    """(names, default cell) of every row of the tables whose header starts `| variable | default |`."""
    out, in_table = [], False
    for line in md_text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            in_table = False
            continue
        if cells[:2] == ["variable", "default"]:
            in_table = True
            continue
        if in_table and not set(cells[0]) <= set("-: "):
            out.append((re.findall(r"RWIN_[A-Z0-9_]+", cells[0]), " ".join(cells[1].replace("`", "").split())))
    return out


def main():
    rwin_info, config_md = sys.argv[1], sys.argv[2]
    doc = rows(open(config_md, encoding="utf-8").read())
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("RWIN_")}
    dump = json.loads(subprocess.run([rwin_info, "-c", "--json"], env=env, check=True, capture_output=True, text=True).stdout)
    knobs = {k["name"]: k for k in dump["config"]["knobs"]}
    problems = []
    if not doc:
        problems.append(f"{config_md}: no '| variable | default | meaning |' table found")
    for name, k in knobs.items():
        mine = [d for names, d in doc if name in names]
        if not mine:
            problems.append(f"{name} is in the code's table but not in {config_md}")
        elif not any(k["default"] in d for d in mine):
            problems.append(f"{name}: code default '{k['default']}' is not in {config_md}'s default column: {mine}")
    for names, _ in doc:
        for name in names:
            if name not in knobs:
                problems.append(f"{name} is in {config_md} but not in the code's table (common/knobs.cpp)")
    for p in problems:
        print("FAIL config_doc:", p)
    if problems:
        return 1
    print(f"PASS config_doc: {len(knobs)} knobs, {config_md} agrees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
