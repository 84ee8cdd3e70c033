# SPDX-License-Identifier: MIT
"""Statistics of the runs: the reported number of a run, medians and
ranges, run-by-run ratios against the subject, the notes' medians, and
the scaling over one worker."""

import statistics
from typing import Callable, Dict, List, Optional, Tuple

from .cost import costs_of
from .benches import Bench, ServerBench, server_sharing
from .fmt import fmt_num, fmt_ratio
from .peers import SUBJECT, Peer
from .variants import weft_mode


def metric(bench: Bench, rec: dict) -> float:
    """The reported number for one run: ns/op or ms."""
    if bench.per_op:
        return rec["ns"] / rec["ops"]
    return rec["ns"] / 1e6


def server_metrics(rec: dict) -> Tuple[float, float, float]:
    """msgs (requests) per second, p50 and p99 in microseconds."""
    return (rec["ops"] * 1e9 / rec["ns"], float(rec["extra"]["p50_us"]),
            float(rec["extra"]["p99_us"]))


def med_range(xs: List[float]) -> Optional[dict]:
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "n": len(xs)}


def pair_ratios(runs: Dict[str, List[dict]], peers: List[Peer],
                value: Callable[[dict], Optional[float]],
                subject: str = SUBJECT) -> Dict[str, Optional[dict]]:
    """Per peer, the median (min-max) of value(subject run i) / value(peer
    run i) over the runs where both succeeded (and both have a value, the
    peer's not 0).  peers: anything with a name (the redis rows' modes)."""
    subj = runs.get(subject, [])
    out = {}
    for p in peers:
        if p.name == subject:
            continue
        other = runs.get(p.name, [])
        pairs = [(value(a), value(b)) for a, b in zip(subj, other)
                 if a["ok"] and b["ok"]]
        out[p.name] = med_range([x / y for x, y in pairs
                                 if x is not None and y])
    return out


def extra_note(bench: Bench, runs: Dict[str, List[dict]],
               peers: List[Peer]) -> Optional[str]:
    """The notes cell: the median of each of bench.extra per peer, e.g.
    "peak RSS MiB: weft 402, go 34"."""
    notes = []
    for key, label, div in bench.extra:
        cells = []
        for p in peers:
            xs = [float(r["extra"][key]) / div for r in runs.get(p.name, [])
                  if r["ok"] and key in r["extra"]]
            if xs:
                cells.append(f"{p.name} {fmt_num(statistics.median(xs))}")
        if cells:
            notes.append(f"{label}: {', '.join(cells)}")
    return "; ".join(notes) if notes else None


def versus(bench: Bench, runs: Dict[str, List[dict]],
           peers: List[Peer]) -> Dict[str, dict]:
    """Per peer, for bench.versus: the reference's ns/op ("ref") and the
    run-by-run ratios of the metric to it ("ratio"), median (min-max)."""
    key = bench.versus[0]
    out = {}
    for p in peers:
        good = [(metric(bench, r), float(r["extra"][key]))
                for r in runs.get(p.name, [])
                if r["ok"] and float(r["extra"].get(key, 0)) > 0]
        if good:
            out[p.name] = {"ref": med_range([b for _, b in good]),
                           "ratio": med_range([a / b for a, b in good])}
    return out


def versus_note(bench: Bench, s: dict) -> Optional[str]:
    """E.g. "thread-local read in ns, and time/it: weft 0.39, 4.10
    (3.90–4.30); boost 0.41, 30.2" (each peer against its own)."""
    if not s.get("versus"):
        return None
    return (f"{bench.versus[1]} in ns, and time/it: " +
            "; ".join(f"{pn} {fmt_num(v['ref']['median'])}, "
                      f"{fmt_ratio(v['ratio'])}"
                      for pn, v in s["versus"].items()))


def summarize(bench: Bench, workers: int, runs: Dict[str, List[dict]],
              peers: List[Peer], absent: List[str]) -> dict:
    """absent: for the peers without an equivalent, "peer: why"."""
    s = {"bench": bench.name, "workers": workers, "unit": bench.unit,
         "peers": {}, "ratios": {}}
    for p in peers:
        recs = runs.get(p.name, [])
        good = [metric(bench, r) for r in recs if r["ok"]]
        s["peers"][p.name] = med_range(good)
        s["peers"][p.name + "_failed"] = sum(1 for r in recs if not r["ok"])
    # pair by pair: run i of the subject against run i of the peer
    s["ratios"] = pair_ratios(runs, peers, lambda r: metric(bench, r))
    if bench.versus:
        s["versus"] = versus(bench, runs, peers)
    notes = absent + [extra_note(bench, runs, peers), versus_note(bench, s)]
    s["notes"] = "; ".join(n for n in notes if n) or None
    return s


SERVER_METRICS = ("rate", "p50_us", "p99_us")  # the order of server_metrics()


def cpu_per_msg(rec: dict) -> Optional[float]:
    """The server's CPU µs per message in a run, None if unmeasured."""
    return (rec.get("cost") or {}).get("cpu_us_per_msg")


def summarize_server(sb: ServerBench, runs: Dict[str, List[dict]],
                     peers: List[Peer],
                     syscalls: Optional[Dict[str, dict]] = None,
                     workers: int = 1,
                     sharing: Optional[bool] = None) -> dict:
    """Per peer the median (min-max) of each run's rate, p50 and p99, and of
    the server's CPU µs and voluntary switches per message; per other peer
    the run-by-run ratios of the rates, of the p99s and of the CPU per
    message; per other weft mode ("variants") the same ratios of its own
    to the subject's and the limit's.  syscalls: per peer, the untimed
    strace pass's record.  workers: the servers' worker count; sharing:
    whether server and load shared the CPUs (None: as server_sharing(workers)
    says)."""
    if sharing is None:
        sharing = server_sharing(workers)
    s = {"bench": sb.name, "group": sb.group, "workers": workers,
         "sharing": sharing, "unit": sb.unit, "peers": {}, "ratios": {}}
    for p in peers:
        recs = runs.get(p.name, [])
        good = [server_metrics(r) for r in recs if r["ok"]]
        s["peers"][p.name] = {k: med_range([g[i] for g in good])
                              for i, k in enumerate(SERVER_METRICS)}
        s["peers"][p.name].update({k: med_range(v) for k, v in
                                   costs_of(recs).items()})
        s["peers"][p.name + "_failed"] = sum(1 for r in recs if not r["ok"])
    s["ratios"] = server_ratios(runs, peers)
    # weft's other modes (weft-uring, weft-worker) against the subject and
    # the limit
    base = [p for p in peers if p.name == SUBJECT or p.limit]
    variants = {p.name: server_ratios(runs, base, p.name) for p in peers
                if weft_mode(p.name) and p.name != SUBJECT}
    if variants:
        s["variants"] = variants
    s["syscalls"] = syscalls or {}
    notes = [fairness_note(sb, runs, peers), lost_note(runs, peers),
             load_note(runs, peers), limit_note(runs, peers),
             ring_note(runs, peers)]
    s["notes"] = "; ".join(n for n in notes if n) or None
    return s


def server_ratios(runs: Dict[str, List[dict]], peers: List[Peer],
                  subject: str = SUBJECT) -> Dict[str, dict]:
    """Per peer but subject, the run-by-run ratios of subject's rate, p99
    and CPU per message to the peer's."""
    rate = pair_ratios(runs, peers, lambda r: server_metrics(r)[0], subject)
    p99 = pair_ratios(runs, peers, lambda r: server_metrics(r)[2], subject)
    cpu = pair_ratios(runs, peers, cpu_per_msg, subject)
    return {p: {"rate": rate[p], "p99": p99[p], "cpu": cpu[p]} for p in rate}


def lost_note(runs: Dict[str, List[dict]],
              peers: List[Peer]) -> Optional[str]:
    """For UDP rows (loadgen -u, whose RESULT has late=): the datagrams lost
    per run (median), which a closed loop pays for with a timeout each."""
    cells = []
    for p in peers:
        xs = [int(r["extra"]["lost"]) for r in runs.get(p.name, [])
              if r["ok"] and "late" in r["extra"]]
        if xs:
            cells.append(f"{p.name} {statistics.median(xs):g}")
    return "datagrams lost per run: " + ", ".join(cells) if cells else None


def ring_note(runs: Dict[str, List[dict]],
              peers: List[Peer]) -> Optional[str]:
    """For weft's modes on a ring: the SQEs per io_uring_enter over the
    server's life (median over runs), how many transfers one system call
    carries; "none" where the sockets never went through the ring (on
    readiness, or ring sockets not in effect).  None without a ring."""
    cells = []
    for p in peers:
        xs = [(int(r["extra"]["ring_sqes"]), int(r["extra"]["ring_enters"]))
              for r in runs.get(p.name, [])
              if r["ok"] and "ring_sqes" in r["extra"]]
        if xs and weft_mode(p.name) and p.name != SUBJECT:
            per = [s / e for s, e in xs if e]
            cells.append(f"{p.name} " + (f"{statistics.median(per):.1f}"
                                         if per else "none"))
    return ("ring SQEs per io_uring_enter: " + ", ".join(cells)
            if cells else None)


def limit_note(runs: Dict[str, List[dict]],
               peers: List[Peer]) -> Optional[str]:
    """The limit's rate over each other peer's but weft's (median
    of run-by-run ratios): where a target asks the subject for N times a
    peer's rate and the limit itself serves less than N times it, the
    target asks the subject to beat the limit."""
    cells = []
    for lim in (p for p in peers if p.limit):
        others = [p for p in peers
                  if not weft_mode(p.name) and p.name != lim.name]
        ratios = pair_ratios(runs, others, lambda r: server_metrics(r)[0],
                             subject=lim.name)
        cells += [f"{lim.name}/{name} {r['median']:.2f}"
                  for name, r in ratios.items() if r]
    if not cells:
        return None
    return "the limit's rate over the peers': " + ", ".join(cells)


LOAD_BUSY = 0.9  # loadgen CPU per thread (per second) from which it may be the limit


def load_note(runs: Dict[str, List[dict]],
              peers: List[Peer]) -> Optional[str]:
    """For loadgen rows: when the load generator's threads were busy
    (loadgen_cpu per thread at least LOAD_BUSY, median over runs) for some
    peer, the rates may be the load's limit rather than the servers': the
    note says so, with each peer's figure; the CPU per message still
    compares the servers."""
    cells, busy = [], False
    for p in peers:
        xs = [float(r["extra"]["loadgen_cpu"]) / int(r["extra"].get("threads", 1))
              for r in runs.get(p.name, [])
              if r["ok"] and "loadgen_cpu" in r["extra"]]
        if xs:
            m = statistics.median(xs)
            busy |= m >= LOAD_BUSY
            cells.append(f"{p.name} {m:.2f}")
    if not busy:
        return None
    return ("load generator busy (CPU per thread: " + ", ".join(cells) +
            "): the rates may be its limit; compare CPU per message")


def fairness_note(sb: ServerBench, runs: Dict[str, List[dict]],
                  peers: List[Peer]) -> Optional[str]:
    """For loadgen rows: the echoes of the slowest connection as a % of the
    mean per connection (median over runs).  Near 100: the server is fair;
    near 0: it starves some clients, which p50 and p99 can hide."""
    cells = []
    for p in peers:
        xs = [100 * int(r["extra"]["conn_min"]) * sb.conns / r["ops"]
              for r in runs.get(p.name, [])
              if r["ok"] and "conn_min" in r["extra"] and r["ops"]]
        if xs:
            cells.append(f"{p.name} {statistics.median(xs):.0f}")
    return ("slowest connection, % of mean: " + ", ".join(cells)
            if cells else None)

def add_scaling(summary: List[dict], peers: List[Peer]):
    base = {}
    for s in summary:
        if s["workers"] == 1:
            base[s["bench"]] = s
    for s in summary:
        s["scaling"] = {}
        b = base.get(s["bench"])
        for p in peers:
            cur = s["peers"].get(p.name)
            one = b["peers"].get(p.name) if b else None
            s["scaling"][p.name] = (one["median"] / cur["median"]
                                    if cur and one else None)
