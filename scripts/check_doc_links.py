#!/usr/bin/env python3
"""Fails when README.md, bench/RESULTS.md or docs/*.md point at a file or
folder of the repository that does not exist, or at a heading that is not
there; and when the figures outgrow their limits (bench/RESULTS.md at most
700 lines, bench/results/ at most 150 files, no dated figure in README.md).
Usage: check_doc_links.py SOURCE_DIR [FILE.md ...] (default: the files above).

Checked: Markdown links and images with a relative target (resolved from the
file's folder, `#heading` included), and every path written in the text that
starts with a top-level folder of the repository (`src/tune/table.c`,
`bench/results/2026-12-02-cpu/`), read from the repository root, with `*`
and `{a,b}` expanded as the shell does. docs/history/ is the diary: its paths
name the commit that had them, so it is not read."""
import glob
import os
import re
import sys

RESULTS_MAX_LINES = 700
RESULTS_MAX_FILES = 150

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def top_level(root):
    """Folders (and files) at the repository root that a written path may start with."""
    names = set()
    for n in os.listdir(root):
        if n.startswith(".") or n.startswith("build"):
            continue
        names.add(n)
    return names


def path_pattern(names):
    alts = "|".join(sorted((re.escape(t) for t in names), key=len, reverse=True))
    # Not after a character that would make it part of a longer path or word
    # (`$PWD/build/...`, `site-packages/nvidia/...`, `/usr/...`).
    return re.compile(r"(?<![\w./$~-])(?:%s)/[\w.*{},/+-]*" % alts)


def src_bases(root):
    """src/ and every folder under it: the design names files from their layer (`tune/table.c`)
    or from its folder's own section (`launch/ce.cu` in src/device/)."""
    bases = []
    for dirpath, _, _ in os.walk(os.path.join(root, "src")):
        bases.append(dirpath)
    return bases


def expand_braces(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(p[: m.start()] + alt + p[m.end():])
    return out


def slug(text):
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"`|\*\*|\*|_(?=\w)|(?<=\w)_", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    s = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return s.replace(" ", "-")


def anchors(path):
    found = set()
    seen = {}
    fenced = False
    with open(path, errors="replace") as fh:
        for line in fh:
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            m = None if fenced else HEADING.match(line)
            if m:
                a = slug(m.group(2))
                n = seen.get(a, 0)
                seen[a] = n + 1
                found.add(a if n == 0 else f"{a}-{n}")
    return found


def exists(root, p):
    """Whether the written path P (root-relative, maybe with globs) names something."""
    for q in expand_braces(p):
        full = os.path.join(root, q)
        if any(c in q for c in "*?["):
            if not glob.glob(full):
                return False
        elif not os.path.exists(full):
            return False
    return True


def check_file(root, rel, pattern, src_pattern, bases):
    errors = []
    path = os.path.join(root, rel)
    here = os.path.dirname(path)
    with open(path, errors="replace") as fh:
        lines = fh.read().split("\n")
    for no, line in enumerate(lines, 1):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            file_part, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(here, file_part)) if file_part else path
            if not os.path.exists(dest):
                errors.append(f"{rel}:{no}: link to {target}: {os.path.relpath(dest, root)} does not exist")
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                errors.append(f"{rel}:{no}: link to {target}: no heading #{frag} in {os.path.relpath(dest, root)}")
        for m in pattern.finditer(line):
            p = m.group(0).rstrip(".,:;")
            # "src/...", a path shown elided, and the build's outputs are not files here.
            if "..." in p or "…" in p or p.endswith("/."):
                continue
            if not exists(root, p):
                errors.append(f"{rel}:{no}: {p} does not exist")
        for m in src_pattern.finditer(line):
            p = m.group(0).rstrip(".,:;")
            # A file (with its extension) or a folder (with its slash) of a layer.
            if "..." in p or not re.search(r"(\.\w+|/)$", p):
                continue
            if not any(exists(b, p) for b in bases):
                errors.append(f"{rel}:{no}: {p} is in no folder of src/")
    return errors, lines


def results_citations(root, rel, text, headings):
    """`RESULTS, "Section"` (bench/RESULTS.md's section of that name, or a
    name it starts with): every such section must be there."""
    errors = []
    flat = re.sub(r"\s+", " ", text)
    for m in re.finditer(r'RESULTS(?:\.md)?`?,? ((?:"[^"]+"(?:,| and| or|;)? ?)+)', flat):
        for name in re.findall(r'"([^"]+)"', m.group(1)):
            if not any(h.startswith(name) for h in headings):
                errors.append(f'{rel}: cites bench/RESULTS.md, "{name}": no such section')
    return errors


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    root = os.path.abspath(sys.argv[1])
    files = sys.argv[2:] or (["README.md", os.path.join("bench", "RESULTS.md")] +
                             sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md"))))
    pattern = path_pattern(d for d in top_level(root) if "." not in d)
    src = os.path.join(root, "src")
    src_pattern = path_pattern(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    bases = src_bases(root)
    headings = []
    with open(os.path.join(root, "bench", "RESULTS.md")) as fh:
        for line in fh:
            m = HEADING.match(line)
            if m:
                headings.append(re.sub(r"\s+", " ", m.group(2)))
    errors = []
    for rel in files:
        errs, lines = check_file(root, rel, pattern, src_pattern, bases)
        errors += errs
        errors += results_citations(root, rel, "\n".join(lines), headings)
        if rel == os.path.join("bench", "RESULTS.md") and len(lines) - 1 > RESULTS_MAX_LINES:
            errors.append(f"{rel}: {len(lines) - 1} lines, more than {RESULTS_MAX_LINES}: move what a newer "
                          "figure superseded to docs/history/results-diary.md")
        if rel == "README.md":
            for no, line in enumerate(lines, 1):
                if DATE.search(line):
                    errors.append(f"{rel}:{no}: a date: dated figures belong in bench/RESULTS.md")
    results = os.path.join(root, "bench", "results")
    if not sys.argv[2:] and os.path.isdir(results):
        n = sum(len(fs) for _, _, fs in os.walk(results))
        if n > RESULTS_MAX_FILES:
            errors.append(f"bench/results: {n} files, more than {RESULTS_MAX_FILES}: keep what bench/RESULTS.md "
                          "cites and its summaries, git rm the rest (docs/history/results-diary.md says where)")
    for e in errors:
        print("check_doc_links:", e)
    print(f"check_doc_links: {len(files)} files read, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
