# SPDX-License-Identifier: MIT
"""--docs: instructions per operation of weft's yield and spawn+join,
counted by callgrind."""

import re
import shutil
import tempfile
from pathlib import Path
from typing import List, Tuple

from .benches import BENCHMARKS, Bench
from .peers import SUBJECT, Peer
from .progress import Progress
from .runs import note_failure, run_one

# --docs: instructions per operation under callgrind, of these benchmarks
# at 1 worker: (benchmark, what one operation is, what many are)
CALLGRIND = [("yield", "yield", "yields"),
             ("spawn", "spawn+join", "spawn+join pairs")]
CG_TOTAL_RE = re.compile(r"^(?:summary|totals):\s+(\d+)", re.M)


def callgrind_one(weft: Peer, bench: Bench, timeout: float) -> dict:
    """weft-bench NAME 1 under callgrind: the run's record, with the total
    instruction count (all threads, start-up included) and it per op.
    weft-bench's root() runs the work twice (the warm-up and the timed run,
    `ops` operations each): per op is total / (2 × ops)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        rec = run_one(weft, bench, 1, timeout, wrap=[
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
        m = CG_TOTAL_RE.search(out.read_text()) if out.exists() else None
    if rec["ok"] and m is None:
        rec.update(ok=False, error="no summary: or totals: line in "
                   "callgrind's output file")
    if rec["ok"]:
        rec["instructions"] = int(m[1])
        rec["per_op"] = rec["instructions"] / (2 * rec["ops"])
    return rec


def callgrind_wanted(args) -> List[str]:
    """The CALLGRIND benchmarks this run measures (--docs, not --quick,
    and --only selects them)."""
    if not args.docs or args.quick:
        return []
    return [name for name, _, _ in CALLGRIND if name in args.only]


def callgrind_steps(args) -> List[Tuple[str, int]]:
    """The progress plan of run_callgrind (if valgrind is there)."""
    if shutil.which("valgrind") is None:
        return []
    return [(f"[{name} w=1] callgrind", 1) for name in callgrind_wanted(args)]


def run_callgrind(args, weft: Peer, prog: Progress,
                  failures: List[str]) -> List[dict]:
    """With --docs (not --quick): callgrind_one of each CALLGRIND benchmark
    that --only selects, its record with "what" and "whats"."""
    if not args.docs or args.quick:
        return []
    if shutil.which("valgrind") is None:
        print("bench.py: callgrind skipped: valgrind not found "
              "(apt-get install -y valgrind)")
        return []
    recs = []
    for name, what, whats in CALLGRIND:
        if name not in args.only:
            continue
        tag = f"[{name} w=1]"
        prog.step(f"{tag} callgrind")
        prog.show(f"{tag} {SUBJECT} under callgrind")
        rec = callgrind_one(weft, next(b for b in BENCHMARKS
                                       if b.name == name), args.timeout)
        rec["what"], rec["whats"] = what, whats
        note_failure(rec, tag, "under callgrind", prog, failures)
        recs.append(rec)
    return recs


def callgrind_lines(recs: List[dict]) -> str:
    """E.g. "- instructions per yield: 167 (1,339,160,873 for `weft-bench
    yield 1`, 2 × 4,000,000 yields)", a line per good record."""
    lines = []
    for r in (r for r in recs if r["ok"]):
        prog, name, workers = r["cmd"][-3:]
        lines.append(f"- instructions per {r['what']}: {r['per_op']:.0f} "
                     f"({r['instructions']:,} for `{Path(prog).name} {name} "
                     f"{workers}`, 2 × {r['ops']:,} {r['whats']})")
    return "\n".join(lines)


CALLGRIND_FOOTNOTE = (
    "Counted by `valgrind --tool=callgrind`: every instruction of the "
    "process, all threads and start-up included, over weft-bench's warm-up "
    "and timed run (the total over 2 × ops).")


# ------------------------------------------------------------------ charts
