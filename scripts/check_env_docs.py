#!/usr/bin/env python3
"""Fails when a TUTTI_* environment variable that the library or its tools
read is not documented in docs/tuning.md, when the library reads 20 or
more of its own, or when src/ reads an NCCL_* or TUTTI_* variable that no
TUTTI_PARAM* declaration puts in the parameters' registry (ncclParam*
would not know it): a literal name given to getenv or tutti_getenv is the
tell. Usage: check_env_docs.py SOURCE_DIR, or check_env_docs.py --self-test."""
import os
import re
import sys

# A variable is read where its name is a string literal given to one of these.
READ = re.compile(r'(?:getenv|TUTTI_PARAM\w*\s*\(\s*\w+\s*,|get)\s*\(?\s*"(TUTTI_[A-Z0-9_]+)"')
# A read that bypasses the registry's macros.
RAW_READ = re.compile(r'\b(?:tutti_)?getenv\s*\(\s*"((?:NCCL|TUTTI)_[A-Z0-9_]+)"')
# A declaration in the registry (src/util/param.h's macros).
DECLARED = re.compile(r'\bTUTTI_PARAM\w*\s*\(\s*\w+\s*,\s*"((?:NCCL|TUTTI)_[A-Z0-9_]+)"')
SOURCES = (".c", ".h", ".cu", ".cuh")


def sources(root, folder, suffixes):
    out = {}
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in sorted(files):
            if f.endswith(suffixes):
                path = os.path.join(dirpath, f)
                with open(path, errors="replace") as fh:
                    out[os.path.relpath(path, root)] = fh.read()
    return out


def read_vars(texts):
    found = set()
    for text in texts.values():
        found |= set(READ.findall(text))
    return found


def undeclared_reads(texts):
    """(file, line, name) of every getenv/tutti_getenv of a literal NCCL_* or
    TUTTI_* name that no TUTTI_PARAM* declaration in `texts` declares."""
    declared = set()
    for text in texts.values():
        declared |= set(DECLARED.findall(text))
    missing = []
    for path, text in sorted(texts.items()):
        for m in RAW_READ.finditer(text):
            if m.group(1) not in declared:
                missing.append((path, text.count("\n", 0, m.start()) + 1, m.group(1)))
    return declared, missing


def self_test():
    """The checks catch what they are for, on made-up sources."""
    texts = {
        "src/a.c": 'static TUTTI_PARAM_STR(x, "NCCL_SEEN", NULL, "any", "d");\n'
        'const char* v = tutti_getenv("NCCL_SEEN");\n'
        'const char* w = getenv( "NCCL_UNSEEN");\n',
        "src/b.cu": 'static TUTTI_PARAM(y, "TUTTI_INT", 0, "d");\n'
        'x = tutti_getenv(\n    "TUTTI_OTHER");\n'
        'h = getenv("HOME"); s = tutti_getenv("TUTTI_INT");\n',
    }
    declared, missing = undeclared_reads(texts)
    ok = declared == {"NCCL_SEEN", "TUTTI_INT"} and missing == [
        ("src/a.c", 3, "NCCL_UNSEEN"),
        ("src/b.cu", 2, "TUTTI_OTHER"),
    ]
    ok &= read_vars(texts) == {"TUTTI_INT", "TUTTI_OTHER"}
    print(f"check_env_docs: self-test {'passed' if ok else 'FAILED'}: {declared} {missing}")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1]
    src = sources(root, "src", SOURCES)
    lib = read_vars(src)
    tools = read_vars(sources(root, "tools", SOURCES + (".py",))) - lib
    with open(os.path.join(root, "docs", "tuning.md")) as fh:
        doc = fh.read()
    missing = sorted(v for v in lib | tools if f"`{v}`" not in doc)
    for v in missing:
        print(f"check_env_docs: {v} is read but not documented in docs/tuning.md")
    print(f"check_env_docs: the library reads {len(lib)} TUTTI_* variables, the tools {len(tools)} more")
    if len(lib) >= 20:
        print("check_env_docs: 20 or more: fold thresholds into TUTTI_TUNE (src/tune/knobs.c)")
    declared, raw = undeclared_reads(src)
    for path, line, name in raw:
        print(f"check_env_docs: {path}:{line} reads {name}, which no TUTTI_PARAM* declares: "
              "declare it beside its reader (src/util/param.h) so that ncclParam* knows it")
    print(f"check_env_docs: the registry declares {len(declared)} variables")
    return 1 if missing or len(lib) >= 20 or not lib or raw or not declared else 0


if __name__ == "__main__":
    sys.exit(main())
