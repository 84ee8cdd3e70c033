# SPDX-License-Identifier: MIT
"""The redis rows (issue 24): bench/redis.c's hiredis clients, through
libweft-hook in coroutines, a thread per connection, and the async API on
one libevent loop, against one redis-server that the runner starts (a free
loopback port, no persistence, a throwaway directory), pinned as the
server rows pin their servers: redis-server on the first CPU, the clients
on the second."""

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .benches import REDIS_BENCHES, REDIS_MODES, RedisBench
from .fmt import fmt_mr, fmt_num, fmt_ratio, target_cell
from .peers import Ctx, Skip
from .procs import free_port, log_tail, server_running
from .progress import Progress
from .runs import interleave, run_cmd
from .server import Pins
from .stats import med_range, pair_ratios

# (run, warm-up) seconds of each client invocation
REDIS_SECONDS = {False: (5.0, 1.0), True: (1.0, 0.5)}
REDIS_WORKERS = 1  # hooks' weft workers: the clients have one CPU
READY = b"Ready to accept connections"
READY_TIMEOUT_S = 10
SUBJECT = REDIS_MODES[0]

# The targets, at (clients, what, ratio of hooks to the other mode,
# at least (True) or at most (False) the bound).
TARGETS = [
    (1000, "rate", "threads", True, 1.5),
    (1000, "rss", "threads", False, 0.2),
    (100, "rate", "async", True, 0.9),
    (1000, "rate", "async", True, 0.9),
]


@dataclasses.dataclass
class Mode:
    """One mode of bench/redis.c and the program that has it."""
    name: str
    program: Path


def redis_rows(args) -> List[RedisBench]:
    return [b for b in REDIS_BENCHES
            if b.group in args.only or b.name in args.only]


def find_modes(ctx: Ctx) -> Tuple[List[Mode], List[str]]:
    """The modes that can run, and "mode: why" for those that cannot.
    Raises Skip when none can (no redis-bench, no redis-server)."""
    if shutil.which("redis-server") is None:
        raise Skip("`redis-server` not found (apt-get install -y "
                   "redis-server libhiredis-dev libevent-dev)")
    plain = ctx.build_dir / "bench" / "redis-bench"
    hooks = ctx.build_dir / "bench" / "redis-bench-hooks"
    if not os.access(plain, os.X_OK):
        raise Skip(f"{plain} not built (it needs libhiredis-dev and "
                   f"libevent-dev at meson setup)")
    modes, absent = [], []
    for m in REDIS_MODES:
        prog = hooks if m == "hooks" else plain
        if os.access(prog, os.X_OK):
            modes.append(Mode(m, prog))
        else:
            absent.append(f"{m}: {prog.name} not built (libweft-hook, "
                          f"meson's weft_hook_dep, is not in this build)")
    return modes, absent


def wait_ready(proc: subprocess.Popen, log: Path) -> Optional[str]:
    """None once redis-server says it accepts connections, else why not."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if READY in log.read_bytes():
            return None
        if proc.poll() is not None:
            return f"redis-server exited with status {proc.returncode}: " \
                   f"{log_tail(log, 2)}"
        time.sleep(0.02)
    return f"redis-server not ready within {READY_TIMEOUT_S} s"


def redis_server_cmd(port: int, data_dir: str) -> List[str]:
    return ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", data_dir,
            "--daemonize", "no", "--protected-mode", "no",
            "--tcp-backlog", "4096", "--maxclients", "10000"]


def client_cmd(mode: Mode, rb: RedisBench, port: int, quick: bool
               ) -> List[str]:
    run_s, warm_s = REDIS_SECONDS[quick]
    return [str(mode.program), mode.name, str(rb.clients), str(port),
            f"{run_s:g}", f"{warm_s:g}", str(REDIS_WORKERS)]


def run_client(mode: Mode, rb: RedisBench, port: int, quick: bool,
               pins: Pins, timeout: float) -> dict:
    cmd = Pins.wrap(client_cmd(mode, rb, port, quick), pins.load)
    return run_cmd(mode.name, cmd, rb.name, REDIS_WORKERS, timeout)


def rate(rec: dict) -> float:
    return rec["ops"] * 1e9 / rec["ns"]


def rss_mib(rec: dict) -> Optional[float]:
    kb = float(rec["extra"].get("rss_kb", -1))
    return kb / 1024 if kb > 0 else None


def summarize_redis(rb: RedisBench, runs: Dict[str, List[dict]],
                    modes: List[Mode], absent: List[str]) -> dict:
    """Per mode the median (min-max) rate and peak RSS; per other mode the
    run-by-run ratios of hooks to it; the issue's targets of this row."""
    s = {"bench": rb.name, "clients": rb.clients, "unit": rb.unit,
         "modes": {}, "ratios": {}, "absent": absent}
    for m in modes:
        recs = runs.get(m.name, [])
        good = [r for r in recs if r["ok"]]
        s["modes"][m.name] = {
            "rate": med_range([rate(r) for r in good]),
            "rss_mib": med_range([x for x in map(rss_mib, good) if x]),
            "failed": sum(1 for r in recs if not r["ok"])}
    if any(m.name == SUBJECT for m in modes):
        rates = pair_ratios(runs, modes, rate, SUBJECT)
        rsss = pair_ratios(runs, modes, rss_mib, SUBJECT)
        s["ratios"] = {m: {"rate": rates[m], "rss": rsss[m]} for m in rates}
    s["targets"] = targets_of(s)
    return s


def targets_of(s: dict) -> List[dict]:
    """This row's targets: what, the median ratio (None: not measured) and
    whether it is met."""
    out = []
    for clients, what, other, at_least, bound in TARGETS:
        if clients != s["clients"]:
            continue
        r = (s["ratios"].get(other) or {}).get(what)
        x = r["median"] if r else None
        met = None if x is None else (x >= bound if at_least else x <= bound)
        out.append({"what": f"{SUBJECT}/{other} {what} "
                            f"{'>=' if at_least else '<='} {bound:g}",
                    "ratio": x, "met": met})
    return out


def redis_table_rows(summary: List[dict]):
    head = ["benchmark", "unit"]
    head += [f"{m} median (min–max)" for m in REDIS_MODES]
    head += [f"{m} peak RSS MiB" for m in REDIS_MODES]
    head += [f"{SUBJECT}/{m} rate (higher: {SUBJECT} better)"
             for m in REDIS_MODES[1:]]
    head += [f"{SUBJECT}/threads RSS (lower: {SUBJECT} smaller)",
             "targets (issue 24)", "notes"]
    rows = []
    for s in summary:
        ms = s["modes"]
        row = [s["bench"], s["unit"]]
        row += [fmt_mr((ms.get(m) or {}).get("rate"),
                       (ms.get(m) or {}).get("failed", 0)) for m in REDIS_MODES]
        row += [fmt_num(x["median"]) if x else "—" for x in
                ((ms.get(m) or {}).get("rss_mib") for m in REDIS_MODES)]
        row += [fmt_ratio((s["ratios"].get(m) or {}).get("rate"))
                for m in REDIS_MODES[1:]]
        row += [fmt_ratio((s["ratios"].get("threads") or {}).get("rss")),
                target_cell(s["targets"]), "; ".join(s["absent"]) or "—"]
        rows.append(row)
    return head, rows


def redis_footnote(args, pins: Optional[Pins]) -> str:
    run_s, warm_s = REDIS_SECONDS[args.quick]
    where = pins.note.replace("server", "redis-server").replace(
        "load", "clients") if pins else "unpinned"
    return (f"bench/redis.c against one redis-server (7.x, --save '' "
            f"--appendonly no, a throwaway directory, a free loopback "
            f"port); {where}.  Every client does SET k v / GET k pairs, one "
            f"request at a time, each reply checked; requests/s over a "
            f"{run_s:g} s window after {warm_s:g} s of connecting and "
            f"warming up: higher is better.  Peak RSS: the client process's "
            f"VmHWM (bench/peak_rss.h).  {SUBJECT}/mode: medians of run-by-run "
            f"ratios.  The modes run the same request code: hooks one weft "
            f"coroutine per connection (1 worker), the synchronous API "
            f"parked by libweft-hook; threads one pthread (default "
            f"attributes) per connection; async hiredis's async API, every "
            f"connection on one libevent loop.  One redis-server on one CPU "
            f"serves them all: a rate near its own limit is the server's, "
            f"not the client's.  {args.runs if not args.quick else 1} "
            f"run(s) per mode and row, interleaved.")


def redis_steps(args) -> List[Tuple[str, int]]:
    n = 1 if args.quick else args.runs
    return [(f"[{rb.name}]", n * len(REDIS_MODES)) for rb in redis_rows(args)]


def run_redis(args, ctx: Ctx, prog: Progress, failures: List[str]):
    """Every selected redis row: (points, summary, pins)."""
    rows = redis_rows(args)
    if not rows:
        return [], [], None
    try:
        modes, absent = find_modes(ctx)
    except Skip as e:
        print(f"bench.py: skipped redis: {e}")
        return [], [], None
    for a in absent:
        print(f"bench.py: redis: skipped {a}")
    pins = Pins.choose(1)
    print(f"bench.py: redis: {pins.note.replace('load', 'clients')}",
          file=sys.stderr)
    # every mode as many runs (the runner's subject is weft, not a mode)
    rargs = _with_runs(args, 1 if args.quick else args.runs)
    points, summary = [], []
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="weft-redis-") as data:
        log = ctx.out_dir / "redis-server.log"
        cmd = Pins.wrap(redis_server_cmd(port, data), pins.server)
        with server_running(cmd, dict(os.environ), log) as srv:
            err = wait_ready(srv, log)
            if err is not None:
                failures.append(f"redis: {err}")
                prog.say(f"FAIL redis: {err}")
                return [], [], pins
            for rb in rows:
                tag = f"[{rb.name}]"
                prog.step(tag)
                runs = interleave(
                    modes, rargs, tag, prog, failures,
                    lambda m: run_client(m, rb, port, args.quick, pins,
                                         args.timeout))
                points.append({"bench": rb.name, "clients": rb.clients,
                               "pinning": pins.note, "runs": runs})
                summary.append(summarize_redis(rb, runs, modes, absent))
            if srv.poll() is not None:
                msg = f"redis: redis-server exited ({log_tail(log, 2)})"
                failures.append(msg)
                prog.say("FAIL " + msg)
    return points, summary, pins


def _with_runs(args, n: int):
    """args with every mode at n runs (interleave's counts)."""
    a = type(args)(**vars(args))
    a.runs = a.peer_runs = n
    return a
