# SPDX-License-Identifier: MIT
"""The idle workers' tax (issue 46, item 2): `--only idle-tax`.

Two families, each at worker counts past the CPUs on purpose (a server
sized for its peak spends most hours like this):

- the server rows under a light load that one core serves (IDLE_SERVER: 4
  connections, 64 B echo, closed loop) at IDLE_WORKERS (WEFT_WORKERS,
  GOMAXPROCS, TOKIO_WORKER_THREADS, EPOLL_LOOPS), every peer's CPU per
  message at N workers over its own at 1 (the computed column), its
  voluntary switches and system calls per message, and weft's own counts
  (WEFT_STATS=1's table at the server's exit: wakeups, sleeps, steal
  attempts per stolen coroutine);
- the scheduler rows IDLE_SCHED (sleep, parked, spawn) at the largest of
  those counts, each invocation under wait4(2): its time, system and user
  time and voluntary switches, and weft's steal attempts per stolen
  coroutine, beside Go's (and Tokio's) same program.

The summaries go to results.json's "idle_tax" section; the tables
(page.py) and the targets (targets.py) are computed from it, the ratios
over 1 worker by the functions at the end of this module."""

import dataclasses
import os
import re
import subprocess
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .benches import BENCHMARKS, ServerBench
from .parse import judge, parse_result
from .peers import SUBJECT, Ctx, Peer, Skip
from .progress import Progress
from .runs import interleave, run_counts
from .server import (LOADS, Pins, load_seconds, run_server_one, server_peers,
                     syscall_pass, syscalls_wanted)
from .stats import med_range, pair_ratios, summarize_server
from .variants import weft_mode

IDLE_GROUP = "idle-tax"  # what --only selects
IDLE_WORKERS = (1, 2, 4, 8)
IDLE_SERVER = ServerBench(
    "echo-4-64", "echo", "echo, 4 connections, 64 B messages, closed loop: "
    "a light load that one core serves", "echo", "msgs/s", 4, 64)
IDLE_SCHED = ("sleep", "parked", "spawn")
# weft's counters from the WEFT_STATS=1 table that the tables show
STAT_KEYS = ("wakeups", "sleeps", "steals", "steal_attempts", "parks",
             "polls")
STATS_HEAD_RE = re.compile(r"^weft stats: (\d+) workers", re.M)
STATS_ROW_RE = re.compile(r"^([a-z_]+)\s+(\d+)(?:\s|$)", re.M)


def parse_weft_stats(text: str) -> Optional[Dict[str, int]]:
    """The totals of the last WEFT_STATS=1 table in text (a server's log,
    a bench program's stderr): counter -> total; None without one."""
    heads = list(STATS_HEAD_RE.finditer(text))
    if not heads:
        return None
    out = {}
    for name, total in STATS_ROW_RE.findall(text[heads[-1].end():]):
        if name not in out and name != "counter":
            out[name] = int(total)
    return out or None


def steals_ratio(st: Optional[Dict[str, int]]) -> Optional[float]:
    """Steal attempts per stolen coroutine (None: no stats or no steal)."""
    if not st or not st.get("steals"):
        return None
    return st.get("steal_attempts", 0) / st["steals"]


def with_stats(peer: Peer) -> Peer:
    """peer, its runs with WEFT_STATS=1 (weft's; the others as they are)."""
    if not weft_mode(peer.name):
        return peer
    env = peer.env
    return dataclasses.replace(peer, env=lambda w: {**env(w),
                                                    "WEFT_STATS": "1"})


# ------------------------------------------------------------ servers

def lifetime_msgs(rec: dict, run_s: float, warm_s: float) -> Optional[float]:
    """The messages of the server's whole life (the WEFT_STATS table
    counts from its start to its exit), estimated as the timed window's
    at the same rate over the warm-up too."""
    if not rec.get("ok") or not rec.get("ops"):
        return None
    return rec["ops"] * (run_s + warm_s) / run_s


def stats_per_msg(st: Optional[Dict[str, int]], msgs: Optional[float]
                  ) -> Optional[dict]:
    """weft's counts of a server run, per message and the steals ratio."""
    if not st or not msgs:
        return None
    out = {f"{k}_per_msg": st.get(k, 0) / msgs for k in STAT_KEYS}
    out["steal_attempts_per_steal"] = steals_ratio(st)
    return out


def stats_summary(runs: List[dict]) -> Dict[str, Optional[dict]]:
    """Medians (min-max) of each weft_stats field over the runs with one."""
    good = [r["weft_stats"] for r in runs if r.get("weft_stats")]
    keys = dict.fromkeys(k for g in good for k in g)
    return {k: med_range([g[k] for g in good if g.get(k) is not None])
            for k in keys}


def idle_pins(load_threads: int) -> Pins:
    """Server and load unpinned at every count, 1 worker too: only the
    worker count changes from row to row (pinned at 1 and not past it,
    @N/@1 would compare a server that must wake across CPUs with one
    that may share its load's)."""
    n = len(os.sched_getaffinity(0))
    return Pins(None, None, f"server and load unpinned at every count, "
                f"sharing the {n} CPUs" + (f", {load_threads} load threads"
                                           if load_threads > 1 else ""),
                True, load_threads)


def run_server_counts(args, peers: List[Peer], ctx: Ctx, prog: Progress,
                      failures: List[str], sb: ServerBench,
                      counts: Sequence[int], pins_of: Callable[[int], Pins],
                      label: str) -> Tuple[list, list]:
    """Server row sb at each of counts, the peers interleaved, weft's
    runs (every mode's) with WEFT_STATS=1: (points, summary), each
    summary as stats.summarize_server's plus weft's counts ("weft_stats":
    the subject's; "stats": per weft mode).  label: the progress tags'."""
    try:
        tool = LOADS[sb.group][0](ctx)
    except Skip as e:
        print(f"bench.py: skipped {label} {sb.name}: {e}")
        return [], []
    speers = [with_stats(p) for p in server_peers(sb, peers, ctx, {})]
    run_s, warm_s = load_seconds(sb, args.quick)
    points, summary = [], []
    for w in counts:
        pins = pins_of(w)
        tag = f"[{label} {sb.name} w={w}]"
        prog.step(tag)

        def one(p: Peer) -> dict:
            rec = run_server_one(p, sb, w, ctx, tool, args.quick, pins)
            if weft_mode(p.name):
                log = ctx.out_dir / f"server-{p.name}-{sb.server}.log"
                st = parse_weft_stats(log.read_text(errors="replace"))
                rec["weft_stats"] = stats_per_msg(
                    st, lifetime_msgs(rec, run_s, warm_s))
            return rec
        runs = interleave(speers, args, tag, prog, failures, one)
        sys_calls = {}
        if syscalls_wanted(args):
            for p in speers:
                prog.show(f"{tag} {p.name} under strace -c -f (untimed)")
                sys_calls[p.name] = syscall_pass(p, sb, w, ctx, tool, pins)
        points.append({"bench": sb.name, "workers": w,
                       "sharing": pins.sharing, "pinning": pins.note,
                       "runs": runs, "syscalls": sys_calls})
        s = summarize_server(sb, runs, speers, sys_calls, w, pins.sharing)
        s["stats"] = {p.name: stats_summary(runs.get(p.name, []))
                      for p in speers if weft_mode(p.name)}
        s["weft_stats"] = s["stats"].get(SUBJECT, {})
        summary.append(s)
    return points, summary


def server_steps(args, peers: List[Peer], label: str, name: str,
                 counts: Sequence[int]) -> List[Tuple[str, int]]:
    """The progress plan of run_server_counts."""
    speers = [p for p in peers if p.server is not None]
    n = sum(run_counts(speers, args).values()) + (
        len(speers) if syscalls_wanted(args) else 0)
    return [(f"[{label} {name} w={w}]", n) for w in counts]


# ---------------------------------------------------------- scheduler

def run_rusage(cmd: List[str], env: Dict[str, str], timeout: float
               ) -> Tuple[subprocess.CompletedProcess, Optional[dict]]:
    """cmd to its end, and its rusage from wait4(2): user and system
    seconds, voluntary and involuntary switches (None if it timed out)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    out, err = [], []
    # the pipes drained by threads, so that wait4 reaps the process itself
    readers = [threading.Thread(target=lambda f=f, a=a: a.append(f.read()))
               for f, a in ((p.stdout, out), (p.stderr, err))]
    for t in readers:
        t.start()
    ru = None
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            ru = {"utime_s": usage.ru_utime, "stime_s": usage.ru_stime,
                  "vcsw": usage.ru_nvcsw, "ivcsw": usage.ru_nivcsw}
            break
        if time.monotonic() > deadline:
            p.kill()
            os.waitpid(p.pid, 0)
            p.returncode = -9
            break
        time.sleep(0.005)
    for t in readers:
        t.join()
    p.stdout.close()
    p.stderr.close()
    return subprocess.CompletedProcess(cmd, p.returncode, "".join(out),
                                       "".join(err)), ru


def run_sched_one(peer: Peer, bench: str, workers: int, timeout: float
                  ) -> dict:
    """One invocation of peer's bench program under wait4, weft's with
    WEFT_STATS=1: the judged record, its rusage, weft's counts."""
    env = dict(os.environ)
    env.update(peer.env(workers))
    cmd = [str(peer.program), bench, str(workers)]
    t0 = time.monotonic()
    p, ru = run_rusage(cmd, env, timeout)
    rec = {"peer": peer.name, "cmd": cmd,
           "wall_s": round(time.monotonic() - t0, 3)}
    if ru is None:
        rec.update(ok=False, error=f"timed out after {timeout:.0f} s")
        return rec
    rec.update(judge(parse_result(p.stdout), p, bench, workers))
    rec["rusage"] = ru
    st = parse_weft_stats(p.stderr)
    if st:
        rec["weft_stats"] = {k: st.get(k, 0) for k in STAT_KEYS}
        rec["weft_stats"]["steal_attempts_per_steal"] = steals_ratio(st)
    return rec


# (key, value of a good run) of the scheduler rows' figures
SCHED_FIGURES: Dict[str, Callable[[dict], Optional[float]]] = {
    "ms": lambda r: r["ns"] / 1e6,
    "stime_s": lambda r: (r.get("rusage") or {}).get("stime_s"),
    "utime_s": lambda r: (r.get("rusage") or {}).get("utime_s"),
    "vcsw": lambda r: (r.get("rusage") or {}).get("vcsw"),
}


def summarize_sched(bench: str, workers: int, runs: Dict[str, List[dict]],
                    peers: List[Peer]) -> dict:
    """Per peer the median (min-max) of each SCHED_FIGURES; per other peer
    the run-by-run ratios of each; weft's counts."""
    s = {"bench": bench, "workers": workers, "peers": {}, "ratios": {}}
    for p in peers:
        good = [r for r in runs.get(p.name, []) if r["ok"]]
        s["peers"][p.name] = {
            k: med_range([x for x in map(f, good) if x is not None])
            for k, f in SCHED_FIGURES.items()}
        s["peers"][p.name + "_failed"] = sum(
            1 for r in runs.get(p.name, []) if not r["ok"])
    per_key = {k: pair_ratios(runs, peers, f) for k, f in
               SCHED_FIGURES.items()}
    s["ratios"] = {p: {k: per_key[k][p] for k in SCHED_FIGURES}
                   for p in per_key["ms"]}
    s["weft_stats"] = stats_summary(runs.get(SUBJECT, []))
    return s


def sched_peers(peers: List[Peer], bench: str) -> List[Peer]:
    b = next(x for x in BENCHMARKS if x.name == bench)
    return [p for p in peers if p.program and not p.absent(b, False)]


def run_idle_sched(args, peers: List[Peer], prog: Progress,
                   failures: List[str]) -> Tuple[list, list]:
    """IDLE_SCHED at the largest of IDLE_WORKERS: (points, summary)."""
    w = IDLE_WORKERS[-1]
    points, summary = [], []
    for bench in IDLE_SCHED:
        tag = f"[{IDLE_GROUP} {bench} w={w}]"
        prog.step(tag)
        bpeers = [with_stats(p) for p in sched_peers(peers, bench)]
        runs = interleave(bpeers, args, tag, prog, failures,
                          lambda p: run_sched_one(p, bench, w, args.timeout))
        points.append({"bench": bench, "workers": w, "runs": runs})
        summary.append(summarize_sched(bench, w, runs, bpeers))
    return points, summary


def idle_steps(args, peers: List[Peer]) -> List[Tuple[str, int]]:
    """The progress plan of run_idle_tax (none unless --only has it)."""
    if IDLE_GROUP not in args.only:
        return []
    return (server_steps(args, peers, IDLE_GROUP, IDLE_SERVER.name,
                         IDLE_WORKERS) +
            [(f"[{IDLE_GROUP} {b} w={IDLE_WORKERS[-1]}]",
              sum(run_counts(sched_peers(peers, b), args).values()))
             for b in IDLE_SCHED])


def run_idle_tax(args, peers: List[Peer], ctx: Ctx, prog: Progress,
                 failures: List[str]) -> Optional[dict]:
    """Both families, for results.json's "idle_tax" (None unless --only
    has IDLE_GROUP)."""
    if IDLE_GROUP not in args.only:
        return None
    load = os.getloadavg()
    spoints, ssummary = run_server_counts(
        args, peers, ctx, prog, failures, IDLE_SERVER, IDLE_WORKERS,
        lambda w: idle_pins(args.load_threads), IDLE_GROUP)
    points, summary = run_idle_sched(args, peers, prog, failures)
    return {"workers": list(IDLE_WORKERS),
            "loadavg": [round(x, 2) for x in load],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "servers": {"benchmarks": [dataclasses.asdict(IDLE_SERVER)],
                        "summary": ssummary, "points": spoints},
            "sched": {"summary": summary, "points": points}}


# ------------------------------------------- figures computed from JSON

def _server_row(summary: Sequence[dict], bench: str, workers: int
                ) -> Optional[dict]:
    return next((s for s in summary if s.get("bench") == bench
                 and s.get("workers") == workers), None)


def _cpu(s: Optional[dict], peer: str) -> Optional[float]:
    m = ((s or {}).get("peers") or {}).get(peer) or {}
    c = m.get("cpu_us_per_msg")
    return c["median"] if c else None


def cpu_growth(summary: Sequence[dict], bench: str, peer: str,
               workers: int) -> Optional[float]:
    """peer's median CPU per message at workers over its own at 1 worker,
    in the server summaries given (None: either unmeasured)."""
    one = _cpu(_server_row(summary, bench, 1), peer)
    cur = _cpu(_server_row(summary, bench, workers), peer)
    return cur / one if cur is not None and one else None


def idle_servers(res: dict) -> List[dict]:
    return ((res.get("idle_tax") or {}).get("servers") or {}).get(
        "summary") or []


def idle_sched(res: dict) -> List[dict]:
    return ((res.get("idle_tax") or {}).get("sched") or {}).get(
        "summary") or []
