#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The include graph of lib/ at the module level, and its cycles.

A module is foo.c and foo.h together (either may be missing).  An edge
A -> B means a file of module A includes "B.h"; headers from outside lib/
(weft.h) and system headers are not modules.  Prints each module's edges,
then every strongly connected component of more than one module (a cycle),
then the leaves (modules that include no other module).

With --check-doc, also checks that docs/design.md's "## Files" map names
every file of LIBDIR, and no other (exit status 1 if not).

usage: tools/include-graph.py [--check-doc] [LIBDIR]   (default: lib)
"""
import os
import re
import sys


def graph(libdir):
    files = [f for f in os.listdir(libdir) if f.endswith((".c", ".h"))]
    modules = {os.path.splitext(f)[0] for f in files}
    edges = {m: set() for m in modules}
    for f in files:
        m = os.path.splitext(f)[0]
        with open(os.path.join(libdir, f)) as fh:
            for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', fh.read(), re.M):
                dep = os.path.splitext(os.path.basename(inc))[0]
                if dep in modules and dep != m:
                    edges[m].add(dep)
    return files, edges


def sccs(edges):
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def check_doc(libdir, files):
    doc = os.path.join(os.path.dirname(os.path.abspath(libdir)), "docs", "design.md")
    with open(doc) as fh:
        text = fh.read()
    section = text.split("\n## Files\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`lib/([^`/]+)`", section))
    actual = set(os.listdir(libdir))
    for f in sorted(actual - named):
        print("design.md: lib/%s is not in the file map" % f)
    for f in sorted(named - actual):
        print("design.md: lib/%s is in the file map but not in lib/" % f)
    return actual == named


def main():
    args = [a for a in sys.argv[1:] if a != "--check-doc"]
    libdir = args[0] if args else "lib"
    files, edges = graph(libdir)
    print("%d files, %d modules" % (len(files), len(edges)))
    for m in sorted(edges):
        print("  %-10s -> %s" % (m, " ".join(sorted(edges[m])) or "(leaf)"))
    for comp in sccs(edges):
        if len(comp) > 1:
            nfiles = sum(1 for f in files if os.path.splitext(f)[0] in comp)
            print("cycle: %d modules, %d files: %s" % (len(comp), nfiles, " ".join(comp)))
    print("leaves:", " ".join(sorted(m for m in edges if not edges[m])))
    if "--check-doc" in sys.argv[1:] and not check_doc(libdir, files):
        sys.exit(1)


if __name__ == "__main__":
    main()
