# SPDX-License-Identifier: MIT
"""The machine's cost floors (bench/floors.c, `floors NAME`) and the cost
model: what the cheapest version of each thing weft does costs here, per
operation, and for each benchmark row the floors it chases."""

import dataclasses
import os
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from .benches import BENCHMARKS, SHARING, Bench
from .fmt import fmt_mr, fmt_num
from .peers import SUBJECT, Ctx, Peer, Skip
from .progress import Progress
from .runs import note_failure, run_one
from .stats import med_range, metric

FLOORS_STEP = "[floors]"

FLOORS: List[Bench] = [
    Bench("switch", "weft's context switch (lib/context.h), two contexts "
          "back and forth", True, "ns/switch"),
    Bench("cas", "uncontended CAS (lock cmpxchg) on a line no other thread "
          "touches", True, "ns/CAS"),
    Bench("line-transfer", "one cache line handed between threads on two "
          "CPUs, one way", True, "ns/transfer"),
    Bench("epoll-wait", "epoll_wait, timeout 0, on an empty set: a syscall",
          True, "ns/call"),
    Bench("eventfd-wake", "an eventfd write wakes a thread asleep in "
          "epoll_wait on the other CPU, one way", True, "ns/wake"),
    Bench("fresh-page", "the first write to a fresh 4 KiB anonymous page",
          True, "ns/page"),
    Bench("send-read", "a 64 B send and its read(2) over loopback TCP, "
          "one thread", True, "ns/message"),
    Bench("send-recv", "the same, taken with recv(2)", True, "ns/message"),
]
TWO_CPU_FLOORS = {"line-transfer"}  # fail by design on one CPU: skipped


def build_floors(ctx: Ctx) -> Path:
    prog = ctx.build_dir / "bench" / "floors"
    if not os.access(prog, os.X_OK):
        raise Skip(f"{prog} not built (meson compile -C {ctx.build_dir})")
    return prog


# floors are run as a peer of their own, one thread (or two) each
FLOOR_PEER = Peer("floor", "the machine's cost floors (bench/floors.c)",
                  build_floors)


def floor_steps(args) -> List[Tuple[str, int]]:
    """The progress plan of run_floors: one step, every floor --runs
    times."""
    return [(FLOORS_STEP, args.runs * len(FLOORS))]


def usable_floors() -> List[Bench]:
    """FLOORS, less those this affinity mask cannot run (a line each)."""
    cpus = len(os.sched_getaffinity(0))
    if cpus >= 2:
        return FLOORS
    for name in sorted(TWO_CPU_FLOORS):
        print(f"bench.py: floor {name} skipped: it needs 2 CPUs, the "
              f"affinity mask has {cpus}")
    return [f for f in FLOORS if f.name not in TWO_CPU_FLOORS]


def run_floors(args, ctx: Ctx, prog: Progress,
               failures: List[str]) -> Tuple[List[dict], List[dict]]:
    """Every floor --runs times, round-robin, at 1 worker: (points, summary).
    Each invocation warms itself up; there is no warm-up invocation."""
    try:
        FLOOR_PEER.program = build_floors(ctx)
    except Skip as e:
        print(f"bench.py: floors skipped: {e}")
        return [], []
    floors = usable_floors()
    prog.step(FLOORS_STEP)
    runs: Dict[str, List[dict]] = {f.name: [] for f in floors}
    for i in range(args.runs):
        for f in floors:
            tag = f"[{f.name}]"
            prog.show(f"{tag} floor run {i + 1}/{args.runs}")
            rec = run_one(FLOOR_PEER, f, 1, args.timeout)
            runs[f.name].append(rec)
            note_failure(rec, tag, f"run {i + 1}", prog, failures)
    return ([{"floor": f.name, "runs": runs[f.name]} for f in floors],
            [summarize_floor(f, runs[f.name]) for f in floors])


def summarize_floor(f: Bench, recs: List[dict]) -> dict:
    return {"floor": f.name, "unit": f.unit, "title": f.title,
            "ns": med_range([metric(f, r) for r in recs if r["ok"]]),
            "failed": sum(1 for r in recs if not r["ok"])}


def floor_table_rows(fsummary: List[dict]):
    head = ["floor", "unit", "median (min–max)", "notes"]
    return head, [[f["floor"], f["unit"], fmt_mr(f["ns"], f["failed"]),
                   f["title"]] for f in fsummary]


def floor_footnote(args) -> str:
    cpus = sorted(os.sched_getaffinity(0))[:2]
    where = (f"two, on CPUs {cpus[0]} and {cpus[1]}" if len(cpus) == 2
             else "two, unpinned (one CPU)")
    return (f"The machine's cost floors (bench/floors.c), ns per operation, "
            f"median (min–max) over {args.runs} invocation"
            f"{'s' if args.runs != 1 else ''} of each; each invocation a "
            f"warm-up and a timed loop (at most 0.2 s).  One thread, but "
            f"line-transfer and eventfd-wake: {where}.")


ONE = lambda w: w == 1  # noqa: E731
MORE = lambda w: w > 1  # noqa: E731


@dataclasses.dataclass
class Cost:
    """What a benchmark row chases at the worker counts `when` holds for:
    the sum of count × floor over terms, per operation of the row."""
    bench: str  # a Bench name, or a ServerBench group
    terms: List[Tuple[int, str]]  # (count, floor name)
    why: str
    when: Callable[[int], bool] = lambda w: True
    limit: Optional[str] = None  # a peer whose rate in the row is the floor


COST_MODEL: List[Cost] = [
    Cost("yield", [(1, "switch")], "a yield switches straight to the "
         "other yielder", ONE),
    Cost("spawn", [(2, "cas"), (1, "switch")], "the join handshake's two "
         "atomic RMWs; one switch per child, each exit switching straight "
         "to the next", ONE),
    Cost("spawn", [(2, "cas"), (1, "switch"), (2, "line-transfer")],
         "the same, and a stolen child's control block crossing cores, "
         "there and back", MORE),
    Cost("mutex", [(2, "cas")], "an uncontended lock and unlock, one "
         "atomic RMW each", ONE),
    Cost("chan-pingpong", [(4, "switch"), (4, "cas")], "per round trip "
         "two parks and two resumes, four channel operations", ONE),
    Cost("chan-pingpong", [(2, "line-transfer")], "each of the two wakes "
         "per round trip crosses cores", MORE),
    Cost("sleep", [(1, "fresh-page")], "a fresh stack page per coroutine "
         "on the first burst; the timed run reuses the warm-up's stacks, so "
         "below 1 means it did"),
    Cost("parked", [(1, "fresh-page")], "as sleep"),
    Cost("echo", [], "the hand-written epoll loop's rate in the same row "
         "(bench/peers/epoll): what a server without coroutines reaches",
         limit="epoll"),
    Cost("http", [], "as echo, with the hand-written epoll HTTP server",
         limit="epoll"),
]


def rate(s: dict, peer: str) -> Optional[dict]:
    """peer's median summary in row s (a server row's: its rate)."""
    m = s["peers"].get(peer)
    return m and m.get("rate", m)


def limit_row(s: dict, cost: Cost, m: dict) -> Optional[dict]:
    """A server row's floor: the limit peer's measured rate, a ceiling."""
    lim = rate(s, cost.limit)
    if not lim:
        return None
    return {"model": f"{cost.limit} (measured)", "floor_ns": None,
            "floor": lim["median"], "ratio": lim["median"] / m["median"]}


def terms_row(s: dict, cost: Cost, m: dict, ns: Dict[str, float],
              ops: Optional[int]) -> Optional[dict]:
    """A row's floor from the machine's floors: the sum of the terms."""
    if not all(f in ns for _, f in cost.terms):
        return None
    floor_ns = sum(k * ns[f] for k, f in cost.terms)
    got = in_unit(s, floor_ns, m["median"], ops)
    if not got:
        return None
    return {"model": " + ".join(f"{k} × {f}" if k > 1 else f
                                for k, f in cost.terms),
            "floor_ns": floor_ns, "floor": got[0], "ratio": got[1]}


def subject_ops(points: List[dict]) -> Dict[Tuple[str, int], int]:
    """(bench, workers) -> the ops of the subject's first good run."""
    out = {}
    for pt in points:
        ops = [r["ops"] for r in pt["runs"].get(SUBJECT, []) if r["ok"]]
        if ops:
            out[(pt["bench"], pt["workers"])] = ops[0]
    return out


def in_unit(s: dict, floor_ns: float, subject: float,
            ops: Optional[int]) -> Optional[Tuple[float, float]]:
    """(the floor in the row's unit, subject/floor as times) for a floor of
    floor_ns per operation; None if the row's ops are unknown."""
    if "group" in s:  # a server row, a rate: the floor is a ceiling
        ceiling = 1e9 / floor_ns
        return ceiling, ceiling / subject
    if next(b for b in BENCHMARKS if b.name == s["bench"]).per_op:
        return floor_ns, subject / floor_ns
    if not ops:
        return None
    return floor_ns * ops / 1e6, subject / (floor_ns * ops / 1e6)  # ms


def cost_model(summary: List[dict], ssummary: List[dict],
               points: List[dict], fsummary: List[dict]) -> List[dict]:
    """A row per benchmark row of this run that has a Cost whose floors
    were all measured."""
    ns = {f["floor"]: f["ns"]["median"] for f in fsummary if f["ns"]}
    ops = subject_ops(points)
    rows = []
    for s in summary + ssummary:
        cost = next((c for c in COST_MODEL if c.bench == s.get("group", s[
            "bench"]) and c.when(s["workers"])), None)
        m = rate(s, SUBJECT)
        if cost is None or not m:
            continue
        got = (limit_row(s, cost, m) if cost.limit else
               terms_row(s, cost, m, ns, ops.get((s["bench"], s["workers"]))))
        if got:
            rows.append({"bench": s["bench"], "workers": s["workers"],
                         "sharing": s.get("sharing", False),
                         "unit": s["unit"], SUBJECT: m["median"],
                         "why": cost.why, **got})
    return rows


def cost_table_rows(rows: List[dict]):
    head = ["benchmark", "unit", "workers", f"{SUBJECT} median", "floor",
            f"{SUBJECT}/floor", "notes (the floor it chases)"]
    return head, [[r["bench"] + (f" ({SHARING})" if r.get("sharing") else ""),
                   r["unit"], str(r["workers"]),
                   fmt_num(r[SUBJECT]), fmt_num(r["floor"]),
                   f"{r['ratio']:.2f}", f"{r['model']}: {r['why']}"]
                  for r in rows]


COST_FOOTNOTE = (
    f"The cost model: the floor a row chases is the sum of the floors above "
    f"that its operation cannot do without, in the row's unit (sleep and "
    f"parked: one per coroutine, times their count; the server rows: the "
    f"hand-written epoll server's rate measured in the same row, a ceiling).  {SUBJECT}/floor is "
    f"{SUBJECT}'s median over that floor as times (for a rate: the ceiling "
    f"over {SUBJECT}'s rate): how many times the floor's cost {SUBJECT} "
    f"pays.  Lower bounds that leave out the scheduler's bookkeeping, not "
    f"predictions.")
