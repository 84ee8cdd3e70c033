# SPDX-License-Identifier: MIT
"""The report: the tables (text and Markdown), their footnotes,
results.md and the run's metadata (docs/bench.md: page.py)."""

import datetime
import os
import platform
import socket
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .benches import (BENCHMARKS, REDIS_BENCHES, SERVER_BENCHES, SHARING,
                      server_label)
from .cost import CLK_TCK
from .fmt import fmt_mr, fmt_num, fmt_ratio, fmt_sig
from .peers import ROOT, SUBJECT, Ctx, Peer
from .procs import run_out
from .server import SYSCALL_SECONDS, Pins
from .variants import backends_note, weft_mode

def table_rows(summary: List[dict], peers: List[Peer]):
    others = [p for p in peers if p.name != SUBJECT]
    notes = any(s.get("notes") for s in summary)
    head = ["benchmark", "unit", "workers", f"{SUBJECT} median (min–max)"]
    for p in others:
        head += [f"{p.name} median (min–max)", f"{SUBJECT}/{p.name}"]
    head += [f"{SUBJECT} scaling"] + (["notes (medians)"] if notes else [])
    rows = []
    for s in summary:
        row = [s["bench"], s["unit"], str(s["workers"]),
               fmt_mr(s["peers"][SUBJECT], s["peers"][SUBJECT + "_failed"])]
        for p in others:
            row += [fmt_mr(s["peers"].get(p.name),
                           s["peers"].get(p.name + "_failed", 0)),
                    fmt_ratio(s["ratios"].get(p.name))]
        sc = s["scaling"].get(SUBJECT)
        row += ["—" if sc is None or s["workers"] == 1 else f"{sc:.2f}x"]
        row += [s.get("notes") or "—"] if notes else []
        rows.append(row)
    return head, rows


def server_table_rows(summary: List[dict], peers: List[Peer]):
    """Per peer: rate median (min–max), median p50 and p99; then per other
    peer the two ratios, each saying which way is better."""
    others = [p for p in peers if p.name != SUBJECT]
    head = ["benchmark", "unit"]
    for p in peers:
        head += [f"{p.name} rate median (min–max)", f"{p.name} p50 µs",
                 f"{p.name} p99 µs"]
    for p in others:
        head += [f"{SUBJECT}/{p.name} rate (higher: {SUBJECT} better)",
                 f"{SUBJECT}/{p.name} p99 (lower: {SUBJECT} better)"]
    head += ["notes (medians)"]
    rows = []
    for s in summary:
        row = [row_label(s), s["unit"]]
        for p in peers:
            m = s["peers"].get(p.name) or {}
            failed = s["peers"].get(p.name + "_failed", 0)
            lat = [m.get(k) for k in ("p50_us", "p99_us")]
            row += [fmt_mr(m.get("rate"), failed)] + [
                fmt_num(x["median"]) if x else "—" for x in lat]
        for p in others:
            r = s["ratios"].get(p.name) or {}
            row += [fmt_ratio(r.get("rate")), fmt_ratio(r.get("p99"))]
        row += [s.get("notes") or "—"]
        rows.append(row)
    return head, rows


def row_label(s: dict) -> str:
    """A server summary's name in the tables, with its worker count and
    whether it shared the CPUs: "echo-100-64 @2 (sharing CPUs)"."""
    return server_label(s["bench"], s["workers"], s.get("sharing"))


def workers_note(pins: Dict[int, Pins], peers: List[Peer],
                 quick: bool = False) -> str:
    """The footnote's sentences on the worker counts of the server rows
    and their pinning (pins: per worker count)."""
    # the variables that set the worker count (those that change with it)
    knobs = " / ".join(dict.fromkeys(
        k for p in peers for k, v in p.env(1).items() if p.env(2).get(k) != v))
    counts = sorted(pins)
    out = [f"Servers on {' and '.join(map(str, counts))} "
           f"worker{'s' if counts != [1] else ''} ({knobs}), the row "
           f"names saying which (@N)."]
    for w in counts:
        out.append(f"@{w}: {pins[w].note}.")
    if any(p.sharing for p in pins.values()):
        out.append(f"\"{SHARING}\": server and load generator unpinned on "
                   f"the same CPUs, so the server's rate includes its "
                   f"competition with its own load for them (at 1 worker "
                   f"each has a CPU of its own): a regression of the "
                   f"multi-worker I/O path shows there, but the rows are not "
                   f"a measure of scaling.")
    if quick and counts == [1]:
        out.append("--quick runs the server rows at 1 worker only "
                   "(without it: also at 2, sharing the CPUs).")
    return "  ".join(out)


def server_footnote(args, pins: Dict[int, Pins], peers: List[Peer],
                    no_backend: Optional[Dict[str, str]] = None) -> str:
    """no_backend: weft's backends left out, and why."""
    return (f"Rates (msgs/s, req/s): higher is better; {SUBJECT}/peer rate "
            f"is the median of run-by-run rate ratios (above 1: {SUBJECT} "
            f"serves more).  Latencies are round trips in µs, the median "
            f"over the runs of each run's p50 and p99: lower is better; "
            f"{SUBJECT}/peer p99 below 1: {SUBJECT}'s tail is shorter.  "
            f"The slowest connection's echoes as a % of the mean per "
            f"connection: near 100, the server is fair to its clients; near "
            f"0, it starves some (which p50 and p99 can hide).  "
            f"The limit's rate over the peers': the hand-written loop's "
            f"rate over each other peer's, the median of run-by-run "
            f"ratios; where a target asks {SUBJECT} for more than that "
            f"times a peer's rate, it asks {SUBJECT} to beat the loop.  "
            f"{workers_note(pins, peers, args.quick)}  "
            + "".join(x + "  " for x in [
                backends_note(peers, no_backend or {})] if x) +
            f"{runs_note(args, servers=True)}.")


def syscall_cell(rec: Optional[dict]) -> str:
    """The syscall pass's calls per message, or — when it did not run."""
    if not rec or "per_msg" not in rec:
        return "—"
    return fmt_sig(rec["per_msg"])


def server_cost_rows(summary: List[dict], peers: List[Peer]):
    """The server cost per message: per peer its CPU µs, voluntary context
    switches and system calls per message; per other peer weft/peer CPU
    per message; notes: why a syscall count is missing."""
    others = [p for p in peers if p.name != SUBJECT]
    head = ["benchmark", "unit"]
    for p in peers:
        head += [f"{p.name} CPU µs/msg", f"{p.name} vol. switches/msg",
                 f"{p.name} syscalls/msg"]
    head += [f"{SUBJECT}/{p.name} cpu (lower: {SUBJECT} cheaper)"
             for p in others]
    rows, notes = [], []
    for s in summary:
        # msgs/s -> per msg, req/s -> per req
        row = [row_label(s), "per " + s["unit"].split("/")[0].rstrip("s")]
        sc = s.get("syscalls") or {}
        for p in peers:
            m = s["peers"].get(p.name) or {}
            failed = s["peers"].get(p.name + "_failed", 0)
            row += [fmt_mr(m.get("cpu_us_per_msg"), failed, fmt_sig),
                    fmt_mr(m.get("vcsw_per_msg"), failed, fmt_sig),
                    syscall_cell(sc.get(p.name))]
            why = (sc.get(p.name) or {})
            why = why.get("skipped") or why.get("error")
            if why:
                notes.append(f"{p.name}: {why}")
        row += [fmt_ratio((s["ratios"].get(p.name) or {}).get("cpu"))
                for p in others]
        rows.append(row + ["; ".join(dict.fromkeys(notes)) or "—"])
        notes = []
    if all(r[-1] == "—" for r in rows):
        rows = [r[:-1] for r in rows]
    else:
        head.append("notes")
    return head, rows


def server_cost_footnote(args) -> str:
    if args.quick:
        sys_note = "not counted under --quick"
    elif getattr(args, "no_syscalls", False):
        sys_note = "not counted (--no-syscalls)"
    else:
        sys_note = (f"the `total` calls of `strace -c -f -p PID` (every "
                    f"thread) in a separate, untimed pass (a fresh server, "
                    f"the same load for {SYSCALL_SECONDS:g} s, one pass per "
                    f"peer, row and worker count; it counts the connections' setup too, an "
                    f"accept4 and a few socket calls per connection), over "
                    f"the messages that load completed; "
                    f"traced servers run slower, which can change how much "
                    f"each call carries")
    return (f"Per message (request) the load completed in its timed window, "
            f"medians (min–max) over the runs; lower is cheaper.  CPU µs: "
            f"utime+stime of the server process (all its threads; fields 14 "
            f"and 15 of /proc/PID/stat, in clock ticks of "
            f"{CLK_TCK} Hz) from the end of the load's warm-up (loadgen: "
            f"-w s after it starts; wrk, which has none: its start) to its "
            f"end.  Voluntary switches: the sum over /proc/PID/task/*/status "
            f"of voluntary_ctxt_switches at the same two instants (threads "
            f"that exit in between are lost).  Syscalls: {sys_note}.  "
            f"{SUBJECT}/peer cpu: median of run-by-run ratios of CPU per "
            f"message; {SUBJECT}/epoll is {SUBJECT}'s cost over the "
            f"hand-written loop's, the limit.  Rows \"{SHARING}\": as in "
            f"the table above, server and load shared the CPUs.")


def text_table(head, rows) -> str:
    w = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip()
    return "\n".join([line(head), line(["-" * x for x in w])] +
                     [line(r) for r in rows])


def md_table(head, rows) -> str:
    esc = lambda c: c.replace("|", "\\|")
    # names and notes left, numbers right
    left = lambda i: i < 2 or head[i].startswith("notes")
    out = ["| " + " | ".join(map(esc, head)) + " |",
           "|" + "|".join("---" if left(i) else "--:"
                          for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    return "\n".join(out)


BENCH_FOOTNOTE = (f"Lower is better.  Cells are median (min–max) over the "
                  f"runs; {SUBJECT}/peer is the median of run-by-run time "
                  f"ratios (below 1: {SUBJECT} is faster); scaling is "
                  f"{SUBJECT}'s speed-up at that worker count over 1 worker.")


def runs_note(args, servers: bool = False) -> str:
    """E.g. "3 runs per point; the other peers 1, only at 2 workers (or a
    benchmark's fixed count), without a warm-up invocation"."""
    others = []
    if args.peer_runs != args.runs:
        others.append(str(args.peer_runs))
    if args.peer_workers != args.workers and not servers:
        others.append("only at " + ", ".join(map(str, args.peer_workers)) +
                      " workers (or a benchmark's fixed count)")
    if not args.peer_warmup and not servers:  # the servers have none
        others.append("without a warm-up invocation")
    return (f"{args.runs} runs per {'row' if servers else 'point'}" +
            (f"; the other peers {', '.join(others)}" if others else "") +
            ("; --quick: no warm-up invocation of weft either, sleep and "
             "parked at the largest worker count only"
             if args.quick and not servers else ""))


def write_markdown(md: Path, meta: dict, args, tables: List[Tuple[str, str]],
                   failures: List[str]):
    """results.md: where and how, what each row is, then each table (as
    (table, footnote)) and the failures."""
    with open(md, "w") as f:
        f.write(f"<!-- generated by scripts/bench.py on {meta['date']} -->\n")
        f.write(f"Measured on {meta['cpu'] or 'unknown CPU'}, "
                f"{meta['cpus_affinity']} CPUs, Linux {meta['kernel']}, "
                f"weft {meta['git'] or '(no git)'}; "
                + "".join(f"{v}; " for v in meta["versions"].values() if v)
                + f"{runs_note(args)}.\n\n")
        for b in BENCHMARKS + SERVER_BENCHES + REDIS_BENCHES:
            if b.name in args.only or getattr(b, "group", None) in args.only:
                f.write(f"- **{b.name}**: {b.title}\n")
        for table, footnote in tables:
            f.write("\n" + table + "\n\n" + footnote + "\n")
        if failures:
            f.write("\n**Failures:**\n\n" +
                    "".join(f"- {x}\n" for x in failures))


def metadata(args, peers: List[Peer], ctx: Ctx) -> dict:
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "cpu": cpu,
        "cpus_online": os.cpu_count(),
        "cpus_affinity": len(os.sched_getaffinity(0)),
        "git": run_out(["git", "describe", "--always", "--dirty"], cwd=ROOT),
        # what each peer was built with
        "versions": {p.name: p.version(ctx) for p in peers
                     if not weft_mode(p.name)},
        "runs": args.runs,
        "peer_runs": args.peer_runs,
        "workers": args.workers,
        "peer_workers": args.peer_workers,
        "peers": [p.name for p in peers],
        "argv": sys.argv[1:],
    }
