# SPDX-License-Identifier: MIT
"""Running the bench programs: one invocation, the rounds of a point
(interleaved peers), and the failures they report."""

import os
import subprocess
import time
from typing import Callable, Dict, List, Optional, Sequence

from .benches import Bench
from .parse import judge, parse_result
from .peers import SUBJECT, Peer
from .progress import Progress


def run_cmd(who: str, cmd: List[str], name: str, workers: int,
            timeout: float, env: Optional[Dict[str, str]] = None) -> dict:
    """One invocation of a bench program (cmd) that prints a RESULT line
    for benchmark `name` at `workers`: the record of the run, judged."""
    rec = {"peer": who, "cmd": cmd}
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        rec.update(ok=False, error=f"timed out after {timeout:.0f} s")
        return rec
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    rec.update(judge(parse_result(p.stdout), p, name, workers))
    return rec


def run_one(peer: Peer, bench: Bench, workers: int, timeout: float,
            wrap: Sequence[str] = ()) -> dict:
    """One invocation of the peer's program, under wrap (e.g. valgrind)."""
    env = dict(os.environ)
    env.update(peer.env(workers))
    cmd = [*wrap, str(peer.program), bench.name, str(workers)]
    return run_cmd(peer.name, cmd, bench.name, workers, timeout, env)


def note_failure(rec: dict, tag: str, what: str, prog: Progress,
                 failures: List[str]):
    """A failed run: a FAIL line with the tail of its stderr, and a failure
    for the summary and the exit status."""
    if rec["ok"]:
        return
    msg = f"{tag} {rec['peer']} {what}: {rec['error']}"
    failures.append(msg)
    prog.say("FAIL " + msg)
    for t in (rec.get("stderr") or "").strip().splitlines()[-5:]:
        prog.say("     | " + t)


def run_counts(peers: List[Peer], args) -> Dict[str, int]:
    """Per peer, the runs of a point: the subject --runs, the others
    --peer-runs."""
    return {p.name: args.runs if p.name == SUBJECT else args.peer_runs
            for p in peers}


def interleave(peers: List[Peer], args, tag: str, prog: Progress,
               failures: List[str],
               run: Callable[[Peer], dict]) -> Dict[str, List[dict]]:
    """Round i runs every peer that has a run i left (the subject has
    --runs, the others --peer-runs), in alternating order, so that no peer
    always runs on a machine another just warmed (or heated)."""
    want = run_counts(peers, args)
    runs: Dict[str, List[dict]] = {p.name: [] for p in peers}
    for i in range(max(want.values(), default=0)):
        for p in (peers if i % 2 == 0 else peers[::-1]):
            if i < want[p.name]:
                prog.show(f"{tag} {p.name} run {i + 1}/{want[p.name]}")
                rec = run(p)
                runs[p.name].append(rec)
                note_failure(rec, tag, f"run {i + 1}", prog, failures)
    return runs
