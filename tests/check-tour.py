#!/usr/bin/python3
"""check-tour.py -- checks that README.md's "Tour of the source" names only
files and functions that exist.

    tests/check-tour.py [SOURCE_DIR]

The tour is a list of tables. In each row, the first column names paths in
backticks: one with a "/" from the top of the tree, a bare name in the
folder of the row's first path; "name.[ch]" stands for name.c and name.h, a
path ending in "/" is a folder, and words after a path (`tests/x.sh BUILD`)
are its arguments. The last column of a three-column table names where to
start reading: each backticked C identifier there must be defined or
declared in one of the row's files (or, for a folder, in a file under
it, or in a file that column names beside the row's files). In the other
columns, a backticked file name (name.c, name.h, name.sh, name.md,
name.py) must be a file of the tree.

Prints one line per problem and exits 1 when there is one, 2 when the
tour is not found (it was renamed: this check would read nothing).
"""
import os
import re
import sys

top = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
prog = "check-tour"
ident = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
filename = re.compile(r"^[A-Za-z0-9_.\-/]+\.(c|h|sh|md|py|\[ch\])$")


def expand(path):
    """The files a path names ("x.[ch]": both)."""
    if path.endswith(".[ch]"):
        return [path[:-5] + ".c", path[:-5] + ".h"]
    return [path]


def files_under(d):
    out = []
    for root, _, names in os.walk(os.path.join(top, d)):
        out += [os.path.relpath(os.path.join(root, n), top) for n in names]
    return out


def defined_in(name, files):
    """Whether name is defined or declared in one of files: as a function,
    a macro, a type or a struct name (a word followed by '(' or at a
    definition), or at least as a whole word outside a comment line."""
    word = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])")
    for f in files:
        try:
            with open(os.path.join(top, f), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    s = line.strip()
                    if s.startswith(("*", "/*", "//", "#")) and not s.startswith("#define"):
                        continue
                    if word.search(s):
                        return True
        except OSError:
            pass
    return False


def main():
    try:
        with open(os.path.join(top, "README.md"), encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        print(f"{prog}: cannot read README.md: {e}")
        return 2
    m = re.search(r"^## Tour of the source\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        print(f"{prog}: README.md has no '## Tour of the source' section")
        return 2
    tree_files = set()
    for root, dnames, names in os.walk(top):
        dnames[:] = [d for d in dnames if not d.startswith(".") and d != "build"]
        tree_files.update(os.path.relpath(os.path.join(root, n), top) for n in names)
    tree_names = {os.path.basename(f) for f in tree_files}
    problems = 0
    rows = 0
    for line in m.group(1).splitlines():
        if not line.startswith("| `"):
            continue
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        rows += 1
        paths = re.findall(r"`([^`]+)`", cols[0])
        base = None
        files, dirs = [], []
        for p in paths:
            p = p.split()[0]  # arguments after a path
            if "/" in p.rstrip("/") or base is None:
                full = p  # from the top of the tree
                if base is None:
                    base = os.path.dirname(p.rstrip("/")) if not p.endswith("/") else p.rstrip("/")
            else:
                full = os.path.join(base, p)
            if full.endswith("/"):
                if not os.path.isdir(os.path.join(top, full)):
                    print(f"{prog}: {line[:60]}...: no folder {full}")
                    problems += 1
                dirs.append(full.rstrip("/"))
                continue
            for f in expand(full):
                if not os.path.isfile(os.path.join(top, f)):
                    print(f"{prog}: row of {paths[0]}: no file {f}")
                    problems += 1
                else:
                    files.append(f)
        where = files + [f for d in dirs for f in files_under(d)]
        folder = base or "."
        if len(cols) == 3:  # files the start column names are read too
            for tok in re.findall(r"`([^`]+)`", cols[2]):
                if filename.match(tok.strip()):
                    for n in expand(tok.strip()):
                        for d in [folder] + sorted({os.path.dirname(f) for f in files}):
                            if os.path.isfile(os.path.join(top, d, n)):
                                where.append(os.path.join(d, n))
        for i, col in enumerate(cols[1:], start=1):
            start_col = len(cols) == 3 and i == 2
            for tok in re.findall(r"`([^`]+)`", col):
                tok = tok.strip()
                words = tok.split()
                if start_col and words and words[0] in ("struct", "enum", "union") and len(words) == 2:
                    tok = words[1]
                if filename.match(tok):
                    for n in expand(tok):
                        if n not in tree_files and os.path.basename(n) not in tree_names:
                            print(f"{prog}: row of {paths[0]}: names {n}, which is not in the tree")
                            problems += 1
                elif start_col and ident.match(tok):
                    if not defined_in(tok, where):
                        print(f"{prog}: row of {paths[0]}: starts with {tok}, which none of its files defines")
                        problems += 1
    if rows == 0:
        print(f"{prog}: the tour has no rows")
        return 2
    if problems:
        print(f"{prog}: {problems} problem(s) in the tour's {rows} rows")
        return 1
    print(f"{prog}: the tour's {rows} rows name files and functions that exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
