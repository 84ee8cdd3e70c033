# SPDX-License-Identifier: MIT
"""The in-process benchmark rows: per benchmark and worker count, a
warm-up invocation of every peer, then the interleaved runs."""

from typing import Dict, Iterator, List, NamedTuple, Tuple

from .benches import BENCHMARKS, Bench
from .peers import SUBJECT, Peer
from .progress import Progress
from .runs import interleave, note_failure, run_counts, run_one
from .stats import summarize


class Point(NamedTuple):
    bench: Bench
    workers: int
    tag: str
    peers: List[Peer]  # those that run at this point
    warm: List[Peer]  # those that get a warm-up invocation first
    absent: List[str]  # "peer: why" for those without an equivalent


def micro_points(args, peers: List[Peer]) -> Iterator[Point]:
    """The points of the selected benchmarks, in the order they run."""
    for bench in (b for b in BENCHMARKS if b.name in args.only):
        ws = ([bench.fixed_workers] if bench.fixed_workers else
              args.workers[-1:] if bench.heavy and args.quick else args.workers)
        for w in ws:
            # the peers at this point: those with an equivalent, at the
            # worker counts they run (a benchmark of fixed workers: there)
            bpeers = [p for p in peers if not p.absent(bench, args.quick) and (
                p.name == SUBJECT or bench.fixed_workers
                or w in args.peer_workers)]
            absent = [f"{p.name}: {p.absent(bench, args.quick)}" for p in peers
                      if p.absent(bench, args.quick)]
            warm = [p for p in bpeers
                    if (p.name == SUBJECT and not args.quick) or args.peer_warmup]
            yield Point(bench, w, f"[{bench.name} w={w}]", bpeers, warm, absent)


def micro_steps(args, peers: List[Peer]) -> List[Tuple[str, int]]:
    """The progress plan of run_benches: (tag, invocations) per point."""
    return [(pt.tag, len(pt.warm) + sum(run_counts(pt.peers, args).values()))
            for pt in micro_points(args, peers)]


def run_benches(args, peers: List[Peer], prog: Progress,
                failures: List[str]):
    """Every selected in-process benchmark: (points, summary)."""
    points, summary = [], []
    for pt in micro_points(args, peers):
        bench, w, tag = pt.bench, pt.workers, pt.tag
        prog.step(tag)
        warm: Dict[str, dict] = {}
        for p in pt.warm:
            prog.show(f"{tag} {p.name} warm-up")
            warm[p.name] = run_one(p, bench, w, args.timeout)
            note_failure(warm[p.name], tag, "warm-up", prog, failures)
        runs = interleave(pt.peers, args, tag, prog, failures,
                          lambda p: run_one(p, bench, w, args.timeout))
        points.append({"bench": bench.name, "workers": w,
                       "warmup": warm, "runs": runs})
        summary.append(summarize(bench, w, runs, pt.peers, pt.absent))
    return points, summary
