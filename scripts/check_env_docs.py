#!/usr/bin/env python3
"""Fails when a TUTTI_* environment variable that the library or its tools
read is not documented in docs/tuning.md, or when the library reads 20 or
more of its own. Usage: check_env_docs.py SOURCE_DIR."""
import os
import re
import sys

# A variable is read where its name is a string literal given to one of these.
READ = re.compile(r'(?:getenv|TUTTI_PARAM(?:_RANGE)?\s*\(\s*\w+\s*,|get)\s*\(?\s*"(TUTTI_[A-Z0-9_]+)"')


def read_vars(root, folder):
    found = set()
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in files:
            if f.endswith((".c", ".h", ".cu", ".cuh", ".py")):
                with open(os.path.join(dirpath, f), errors="replace") as fh:
                    found |= set(READ.findall(fh.read()))
    return found


def main():
    root = sys.argv[1]
    lib = read_vars(root, "src")
    tools = read_vars(root, "tools") - lib
    with open(os.path.join(root, "docs", "tuning.md")) as fh:
        doc = fh.read()
    missing = sorted(v for v in lib | tools if f"`{v}`" not in doc)
    for v in missing:
        print(f"check_env_docs: {v} is read but not documented in docs/tuning.md")
    print(f"check_env_docs: the library reads {len(lib)} TUTTI_* variables, the tools {len(tools)} more")
    if len(lib) >= 20:
        print("check_env_docs: 20 or more: fold thresholds into TUTTI_TUNE (src/tune/knobs.c)")
    return 1 if missing or len(lib) >= 20 or not lib else 0


if __name__ == "__main__":
    sys.exit(main())
