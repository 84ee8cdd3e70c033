#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The naming rule of lib/, checked.

Every name lib/ gives the linker or puts in a header is either public
(weft_*, WEFT_* in include/weft.h) or internal, spelled

    weft__<prefix>_<name>   functions, variables, and types
    weft__<prefix>          a type that is the concept itself (struct weft__deque)
    WEFT__<PREFIX>_<NAME>   macros and enum constants (WEFT__<PREFIX> alone too)

where <prefix> is the module that declares it (foo for foo.h / foo.c) or one
of the concepts PREFIXES below gives that module; a prefix belongs to one
module only, so a name says where it lives.  Exempt: include guards
(WEFT_FOO_H) and the build's -D switches (SWITCHES).  A header's
unprefixed static inline helpers (atomic.h's at_*, sanitize.h's san_*) are
file-scope in each includer: they are not checked here, and design.md names
them.

Checked: the external symbols of the static library (nm), and the
#defines, enum constants, types and declarations of lib/*.h.

usage: tools/check-names.py BUILD_DIR   (exit status 1 on a violation)
"""
import os
import re
import subprocess
import sys

# module -> the concepts it may also prefix with
PREFIXES = {
    "atomic": ["count"],
    "coro": ["co"],
    "context": ["ctx"],
    "fdtable": ["fd"],
    "park": ["waiter", "completion"],
    "waitq": ["wait", "wnode", "wakes"],
    "timer": ["timers"],
    "local": ["locals"],
    "worker": ["workers", "counters", "rt", "locked_fifo"],
    "queue": ["schedule"],
    "invariant": ["assert"],
    "sanitize": ["san"],
    "errors": ["err"],
}

# -D switches of the build (meson options, sanitizers, tests)
SWITCHES = {"WEFT_ASAN", "WEFT_TSAN", "WEFT_ASSERTIONS", "WEFT_FAULT_INJECTION", "WEFT_TEST"}

LIB = "lib"


def owners():
    """prefix -> module, checking that no prefix has two owners."""
    mods = {os.path.splitext(f)[0] for f in os.listdir(LIB) if f.endswith((".c", ".h"))}
    own = {}
    for m in sorted(mods):
        for p in [m] + PREFIXES.get(m, []):
            if p in own:
                sys.exit(f"check-names: prefix {p} belongs to {own[p]} and {m}")
            own[p] = m
    return own


def prefix_of(name, lower):
    """The module a name's prefix names, or None (longest prefix first)."""
    body = name[len("weft__"):] if lower else name[len("WEFT__"):].lower()
    return body


def module_for(name, own):
    body = name[6:].lower()
    best = None
    for p, m in own.items():
        if body == p or body.startswith(p + "_"):
            if best is None or len(p) > len(best[0]):
                best = (p, m)
    return best[1] if best else None


def check(name, where, own, public, bad):
    if name in public or name in SWITCHES:
        return
    if re.fullmatch(r"WEFT_[A-Z0-9_]+_H", name):
        return
    if not name.startswith(("weft__", "WEFT__")):
        bad.append(f"{where}: {name}: an internal name needs weft__/WEFT__")
        return
    m = module_for(name, own)
    if m is None:
        bad.append(f"{where}: {name}: no module owns its prefix")
    elif where.startswith(LIB + "/") and os.path.splitext(os.path.basename(where))[0] != m \
            and not where.endswith(".a"):
        bad.append(f"{where}: {name}: prefix of module {m}, declared elsewhere")


def public_names():
    with open("include/weft.h") as f:
        text = f.read()
    return set(re.findall(r"\b(weft_[a-z0-9_]+|WEFT_[A-Z0-9_]+)\b", text))


DECL = re.compile(r"^(?:static\s+inline\s+|extern\s+)?[a-z_][\w \*]*?\b(weft__\w+)\s*\(", re.M)
DEFINE = re.compile(r"^\s*#\s*define\s+(WEFT_\w+)", re.M)
ENUM = re.compile(r"\benum\b[^{;]*\{([^}]*)\}", re.S)
CONSTANT = re.compile(r"\b(WEFT_\w+)\s*(?:=|,|$)", re.M)
TYPE = re.compile(r"^(?:struct|typedef struct|union)\s+(weft__\w+)\s*\{", re.M)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    own, public, bad = owners(), public_names(), []
    for f in sorted(os.listdir(LIB)):
        if not f.endswith(".h"):
            continue
        path = os.path.join(LIB, f)
        with open(path) as fh:
            text = fh.read()
        for rx in (DECL, DEFINE, TYPE):
            for name in rx.findall(text):
                check(name, path, own, public, bad)
        for body in ENUM.findall(re.sub(r"/\*.*?\*/", "", text, flags=re.S)):
            for name in CONSTANT.findall(body):
                check(name, path, own, public, bad)
    lib = os.path.join(sys.argv[1], "lib", "libweft.a")
    out = subprocess.run(["nm", "-g", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRV":
            check(parts[2], lib, own, public, bad)
    for b in sorted(set(bad)):
        print(b)
    if bad:
        print(f"check-names: {len(set(bad))} names break the rule (see the docstring)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
