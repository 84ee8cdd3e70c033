# SPDX-License-Identifier: MIT
"""The issues' targets as data, and their verdicts computed from one run's
results.json: a figure per target and row, met or not met, or "not
measured" when the run has no such figure (never an older one).

A Target names the issue, the row (benchmark) and the worker count (None:
every count the run measured), what is compared (KINDS), the peer (or
mode, or floor) it is compared against, and the comparison with its
threshold.  Each verdict is one line of docs/bench.md's targets table."""

import dataclasses
import operator
import statistics
from typing import Dict, List, Optional, Tuple

from .benches import SERVER_BENCHES
from .idle import cpu_growth, idle_sched, idle_servers

SUBJECT = "weft"
REDIS_SUBJECT = "hooks"
OPS = {"<": operator.lt, "<=": operator.le, ">=": operator.ge,
       ">": operator.gt}


@dataclasses.dataclass(frozen=True)
class Target:
    issue: int
    what: str  # the target in the issue's words
    row: str  # the benchmark row
    peer: str  # what weft is compared against: a peer, a mode, a floor
    kind: str  # what figure (KINDS)
    comparison: str  # a key of OPS: figure OP threshold is met
    threshold: float
    workers: Optional[int] = None  # None: every count the run measured
    # where the figure is: "" the run's rows, "idle_tax" its idle-tax rows
    section: str = ""
    # who is compared (server kinds): weft, or weft in another mode
    # ("weft-ringsock": variants.py)
    subject: str = SUBJECT
    # the threshold widened by the peer's own run-to-run spread of the
    # figure's measure: threshold x (1 + (max - min) / median)
    spread: bool = False


# What each kind of figure is, as the targets table says it.
KINDS = {
    "time": "weft/{peer} time",
    "scaling": "weft speed-up over 1 worker",
    "floor": "weft/floor ({peer})",
    "extra": "weft/{peer} {key}",  # key: a RESULT field, as EXTRAS names it
    "rate": "{subject}/{peer} rate",
    "p99": "{subject}/{peer} p99",
    "cpu": "{subject}/{peer} CPU per message",
    "redis-rate": "hooks/{peer} rate",
    "redis-rss": "hooks/{peer} peak RSS",
    "file-rate": "weft (uring)/{peer} reads/s",
    "growth": "weft CPU per message @N / @1",
    "growth-vs": "weft's CPU per message @N/@1 over {peer}'s",
    "steals": "weft steal attempts per stolen coroutine",
    "sched-time": "weft/{peer} time",
    "sched-vcsw": "weft/{peer} voluntary switches",
}
# the kinds of issue 46 (idle.py computes them)
IDLE_KINDS = ("growth", "growth-vs", "steals", "sched-time", "sched-vcsw")

# the RESULT fields of the "extra:FIELD" kinds, in words
EXTRAS = {"rss_per_co_b": "RSS per parked coroutine"}

SCHED = ["yield", "spawn", "skynet", "fib", "sleep", "skynet-chan", "parked",
         "chan-pingpong", "chan-pingpong-1000", "mutex"]
MULTI = [b for b in SCHED if b != "yield"] + ["sem", "rwlock"]
ECHO = [f"echo-{c}-{n}" for c in (100, 1000) for n in (64, 4096)]
PEERS = ("go", "boost", "tokio")
SERVERS = [b.name for b in SERVER_BENCHES]
# weft's backends beside weft on epoll (variants.BACKENDS)
URING = ("weft-uring", "weft-ringsock")
IDLE_ECHO = "echo-4-64"  # idle.IDLE_SERVER's name
SCALE_ECHO = ["echo-100-64", "echo-1000-64"]  # scale.py's server rows

TARGETS: List[Target] = (
    [Target(5, "every scheduler benchmark faster than each peer at the same "
            "worker count", b, p, "time", "<", 1.0)
     for b in SCHED for p in PEERS]
    + [Target(5, "a yield within 2x of the raw switch floor", "yield",
              "switch", "floor", "<=", 2.0, 1)]
    + [Target(5, "speed-up from 1 to 2 workers at least 1.7x", b, "", "scaling",
              ">=", 1.7, 2) for b in MULTI]
    + [Target(2, "spawn+join, skynet, fib at most half of Go's time", b, "go",
              "time", "<=", 0.5) for b in ("spawn", "skynet", "fib")]
    + [Target(4, "channels at most 0.7x Go's time", b, "go", "time", "<=", 0.7)
       for b in ("chan-pingpong", "chan-pingpong-1000", "skynet-chan")]
    + [Target(23, "semaphore and rwlock faster than each peer at 1 and 2 "
               "workers", b, p, "time", "<", 1.0)
       for b in ("sem", "rwlock") for p in ("go", "tokio")]
    + [Target(5, "RSS per parked coroutine no more than Go's", "parked", "go",
              "extra:rss_per_co_b", "<=", 1.0)]
    + [Target(5, "echo at least 1.1x Go's messages/s (server on 1 core)", b,
              "go", "rate", ">=", 1.1, 1) for b in ECHO]
    + [Target(5, "echo p99 no worse than Go's (server on 1 core)", b, "go",
              "p99", "<=", 1.0, 1) for b in ECHO]
    + [Target(25, "echo at least 0.97x the epoll loop's messages/s", b,
              "epoll", "rate", ">=", 0.97) for b in ECHO]
    + [Target(25, "echo CPU per message at most 1.05x the epoll loop's", b,
              "epoll", "cpu", "<=", 1.05) for b in ECHO]
    + [Target(25, "echo at least 1.1x Tokio's messages/s", b, "tokio", "rate",
              ">=", 1.1) for b in ECHO]
    + [Target(25, "echo at least 1.25x Go's messages/s", b, "go", "rate", ">=",
              1.25) for b in ECHO]
    + [Target(25, "echo p99 no worse than any peer's", b, p, "p99", "<=", 1.0)
       for b in ECHO for p in ("epoll", "go", "tokio")]
    + [Target(25, "http-hello at least 0.95x the epoll loop's requests/s",
              "http-hello", "epoll", "rate", ">=", 0.95),
       Target(25, "http-hello at least 2x Go's requests/s", "http-hello",
              "go", "rate", ">=", 2.0)]
    + [Target(22, "HTTPS hello at least 1.3x Go's requests/s, 1 worker",
              "https-hello", "go", "rate", ">=", 1.3, 1),
       Target(22, "UDP echo at least 1.2x Go's messages/s, 1 worker",
              "udp-100-64", "go", "rate", ">=", 1.2, 1)]
    + [Target(24, "hiredis through the hooks: at least 1.5x the threads' "
               "requests/s at 1,000 clients", "redis-1000", "threads",
               "redis-rate", ">=", 1.5),
       Target(24, "... with at most 1/5 of their peak RSS", "redis-1000",
              "threads", "redis-rss", "<=", 0.2),
       Target(24, "at least 0.9x the async API's requests/s", "redis-100",
              "async", "redis-rate", ">=", 0.9),
       Target(24, "at least 0.9x the async API's requests/s", "redis-1000",
              "async", "redis-rate", ">=", 0.9)]
    # issue 48: the file rows, weft under WEFT_IO=uring (every concurrency)
    + [Target(48, "4 KiB random reads with O_DIRECT: at least 0.9x fio's "
              "io_uring engine at the same queue depth", "file-direct-4k",
              "fio", "file-rate", ">=", 0.9),
       Target(48, "from the page cache: at least 2x Tokio's reads/s",
              "file-cache-4k", "tokio", "file-rate", ">=", 2.0),
       Target(48, "from the page cache: at least 2x Go's reads/s",
              "file-cache-4k", "go", "file-rate", ">=", 2.0)]
    # issue 48: the server rows under io_uring (variants.BACKENDS), where
    # the load generator caps the rates on 2 cores: CPU per message
    + [Target(48, "echo at 1,000 x 64 B with sockets on the rings: at most "
              "0.85x the epoll loop's CPU per message", "echo-1000-64",
              "epoll", "cpu", "<=", 0.85, subject="weft-ringsock")]
    + [Target(48, "server rows under uring no worse than on epoll beyond "
              "epoll's run-to-run spread (wanted: 1 + (max − min) / median "
              "of weft's CPU per message)", b, SUBJECT, "cpu", "<=", 1.0,
              subject=v, spread=True) for v in URING for b in SERVERS]
    # issue 46, on a 2-core machine: the idle tax (--only idle-tax)
    + [Target(46, "light-load echo CPU per message at 8 workers at most 1.1x "
              "the 1-worker figure", IDLE_ECHO, "", "growth", "<=", 1.1, 8,
              "idle_tax")]
    + [Target(46, "... and a smaller ratio than Go's and Tokio's", IDLE_ECHO,
              p, "growth-vs", "<", 1.0, 8, "idle_tax") for p in ("go", "tokio")]
    + [Target(46, "sleep and parked at 8 workers: at most 2 steal attempts "
              "per stolen coroutine", b, "", "steals", "<=", 2.0, 8,
              "idle_tax") for b in ("sleep", "parked")]
    + [Target(46, "... at most 1.5x the voluntary switches of Go's at "
              "GOMAXPROCS=8", b, "go", "sched-vcsw", "<=", 1.5, 8, "idle_tax")
       for b in ("sleep", "parked")]
    + [Target(46, "... the timed run no slower than Go's", b, "go",
              "sched-time", "<=", 1.0, 8, "idle_tax")
       for b in ("sleep", "parked")]
)

# issue 46 on 16 cores: judged on the scaling run's JSON (scale.py,
# docs/scaling.md), not on docs/bench.md's run
SCALE_TARGETS: List[Target] = (
    [Target(46, "echo CPU per message at 16 workers at most 1.3x the "
            "1-worker figure", b, "", "growth", "<=", 1.3, 16)
     for b in SCALE_ECHO]
    + [Target(46, "echo CPU per message at 16 workers at most Tokio's", b,
              "tokio", "cpu", "<=", 1.0, 16) for b in SCALE_ECHO]
    + [Target(46, "server rows at least 0.9x the N-loop limit's rate", b,
              "epoll", "rate", ">=", 0.9) for b in SCALE_ECHO]
    + [Target(46, "fib and skynet at least 14x their 1-worker speed", b, "",
              "scaling", ">=", 14.0, 16) for b in ("fib", "skynet")]
)


def _median(mr: Optional[dict]) -> Optional[float]:
    return mr["median"] if mr else None


def _rows(res: dict, section: Optional[str], bench: str) -> List[dict]:
    summary = res.get(section, {}).get("summary", []) if section else \
        res.get("summary", [])
    return [s for s in summary or [] if s.get("bench") == bench]


def _extra_ratio(res: dict, t: Target, key: str, workers: int
                 ) -> Optional[float]:
    """weft's median of RESULT field key over the peer's, at workers."""
    def med(peer: str) -> Optional[float]:
        xs = [float(r["extra"][key]) for pt in res.get("points", [])
              if pt["bench"] == t.row and pt["workers"] == workers
              for r in pt["runs"].get(peer, [])
              if r.get("ok") and key in r.get("extra", {})]
        return statistics.median(xs) if xs else None
    a, b = med(SUBJECT), med(t.peer)
    return a / b if a is not None and b else None


def _floor_ratio(res: dict, t: Target, workers: int) -> Optional[float]:
    """weft's median over the floor the cost model gives its row, when the
    model is that floor alone."""
    for c in res.get("cost_model") or []:
        if (c["bench"] == t.row and c["workers"] == workers
                and c.get("model") == t.peer):
            return c["ratio"]
    return None


def _server_summary(res: dict, t: Target) -> List[dict]:
    """The server summaries of the target's section."""
    if t.section == "idle_tax":
        return idle_servers(res)
    return (res.get("servers") or {}).get("summary") or []


def _idle_figure(res: dict, t: Target, w: int) -> Optional[float]:
    """A figure of IDLE_KINDS at w workers (growth: over 1 worker)."""
    if t.kind in ("growth", "growth-vs"):
        rows = _server_summary(res, t)
        x = cpu_growth(rows, t.row, SUBJECT, w)
        if t.kind == "growth" or x is None:
            return x
        y = cpu_growth(rows, t.row, t.peer, w)
        return x / y if y else None
    s = next((s for s in idle_sched(res) if s["bench"] == t.row
              and s["workers"] == w), None)
    if s is None:
        return None
    if t.kind == "steals":
        return _median((s.get("weft_stats") or {}).get(
            "steal_attempts_per_steal"))
    key = {"sched-time": "ms", "sched-vcsw": "vcsw"}[t.kind]
    return _median(((s.get("ratios") or {}).get(t.peer) or {}).get(key))


def _idle_figures(res: dict, t: Target
                  ) -> List[Tuple[Optional[int], Optional[float]]]:
    """(workers, figure) of an IDLE_KINDS target: at t.workers, or at
    every count past 1 its rows measured."""
    if t.workers is not None:
        counts = [t.workers]
    elif t.kind in ("growth", "growth-vs"):
        counts = sorted({s["workers"] for s in _server_summary(res, t)
                         if s.get("bench") == t.row and s["workers"] > 1})
    else:
        counts = sorted({s["workers"] for s in idle_sched(res)
                         if s["bench"] == t.row})
    out = [(w, _idle_figure(res, t, w)) for w in counts]
    return [(w, x) for w, x in out if x is not None]


def figures(res: dict, t: Target) -> List[Tuple[Optional[int], Optional[float]]]:
    """(workers, figure) for each worker count at which the run measured
    the target's figure; [(t.workers, None)] when it measured none."""
    out: List[Tuple[Optional[int], Optional[float]]] = []
    if t.kind in IDLE_KINDS:
        return _idle_figures(res, t) or [(t.workers, None)]
    if t.kind == "file-rate":
        for s in _rows(res, "file", t.row):
            x = _median(((s.get("ratios") or {}).get(t.peer) or {}).get("rate"))
            if x is not None:
                out.append((s["conc"], x))
        return out or [(t.workers, None)]
    if t.kind.startswith("redis-"):
        for s in _rows(res, "redis", t.row):
            r = (s.get("ratios") or {}).get(t.peer) or {}
            x = _median(r.get(t.kind[len("redis-"):]))
            if x is not None:
                out.append((None, x))
        return out or [(t.workers, None)]
    server = t.kind in ("rate", "p99", "cpu")
    for s in _rows(res, "servers" if server else None, t.row):
        w = s["workers"]
        if t.workers is not None and w != t.workers:
            continue
        if server:
            ratios = s.get("ratios") if t.subject == SUBJECT else \
                (s.get("variants") or {}).get(t.subject)
            x = _median(((ratios or {}).get(t.peer) or {}).get(t.kind))
        elif t.kind == "time":
            x = _median((s.get("ratios") or {}).get(t.peer))
        elif t.kind == "scaling":
            x = (s.get("scaling") or {}).get(SUBJECT) if w > 1 else None
        elif t.kind == "floor":
            x = _floor_ratio(res, t, w)
        elif t.kind.startswith("extra:"):
            x = _extra_ratio(res, t, t.kind.split(":", 1)[1], w)
        else:
            raise ValueError(f"unknown kind {t.kind!r}")
        if x is not None:
            out.append((w, x))
    return out or [(t.workers, None)]


# the summaries' key of a server kind's measure
MEASURES = {"rate": "rate", "p99": "p99_us", "cpu": "cpu_us_per_msg"}


def wanted(res: dict, t: Target, w: Optional[int]) -> Optional[float]:
    """The threshold of t at w workers: t.threshold, or with t.spread
    widened by the spread of the peer's runs there (None: not measured)."""
    if not t.spread:
        return t.threshold
    for s in _rows(res, "servers", t.row):
        if s["workers"] == w:
            m = ((s.get("peers") or {}).get(t.peer) or {}).get(
                MEASURES[t.kind])
            if m and m["median"]:
                return t.threshold * (1 + (m["max"] - m["min"]) / m["median"])
    return None


def verdicts(res: dict, targets: List[Target] = TARGETS) -> List[dict]:
    """One verdict per target and worker count: the target, the workers
    (None: not measured at any), the figure (None: not measured), the
    threshold it was held to ("wanted") and met (True, False, or None:
    not measured)."""
    out = []
    for t in targets:
        for w, x in figures(res, t):
            want = wanted(res, t, w)
            out.append({"target": t, "workers": w, "figure": x,
                        "wanted": want,
                        "met": None if x is None or want is None else
                        OPS[t.comparison](x, want)})
    return out


def measure_label(t: Target) -> str:
    kind = "extra" if t.kind.startswith("extra:") else t.kind
    key = EXTRAS.get(t.kind.split(":", 1)[1], "") if kind == "extra" else ""
    label = KINDS[kind].format(peer=t.peer, key=key, subject=t.subject)
    return label + (" (idle-tax rows)" if t.section == "idle_tax" else "")


def met_cell(v: dict) -> str:
    if v["met"] is None:
        return "not measured"
    return "met" if v["met"] else "**not met**"


def wanted_cell(v: dict) -> str:
    t = v["target"]
    if not t.spread:
        return f"{t.comparison} {t.threshold:g}"
    if v["wanted"] is None:
        return f"{t.comparison} {t.threshold:g} + spread"
    return f"{t.comparison} {v['wanted']:.2f}"


def figure_cell(v: dict) -> str:
    return "not measured" if v["figure"] is None else f"{v['figure']:.2f}"


def table(res: dict, targets: List[Target] = TARGETS
          ) -> Tuple[List[str], List[List[str]]]:
    """The targets table: (head, rows), one row per verdict."""
    head = ["issue", "target", "row", "measure", "wanted", "this run", "met?"]
    rows = []
    for v in verdicts(res, targets):
        t = v["target"]
        at = "x" if t.kind == "file-rate" else "@"  # file rows: readers
        row = t.row + (f" {at}{v['workers']}" if v["workers"] else "")
        rows.append([str(t.issue), t.what, row, measure_label(t),
                     wanted_cell(v), figure_cell(v),
                     met_cell(v)])
    return head, rows


def tally(res: dict, targets: List[Target] = TARGETS) -> Dict[str, int]:
    """How many verdicts are met, not met and not measured."""
    vs = verdicts(res, targets)
    return {"met": sum(v["met"] is True for v in vs),
            "not met": sum(v["met"] is False for v in vs),
            "not measured": sum(v["met"] is None for v in vs)}

