# SPDX-License-Identifier: MIT
"""The command line (every option of scripts/bench.py) and the main flow:
build the peers, run the floors, the in-process rows, the server rows and
callgrind, then print and write the tables, results.json and the charts."""

import argparse
import concurrent.futures
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import List, Optional

from .benches import (BENCHMARKS, GROUPS, QUICK, REDIS_BENCHES,
                      SERVER_BENCHES)
from .callgrind import (CALLGRIND_FOOTNOTE, callgrind_lines, callgrind_steps,
                        run_callgrind)
from .charts import charts
from .idle import IDLE_GROUP, IDLE_WORKERS, idle_steps, run_idle_tax
from .fileio import (FILE_BENCHES, FILE_GROUP, file_footnote, file_steps,
                     file_table_rows, run_files)
from .floors import (COST_FOOTNOTE, FLOORS, cost_model, cost_table_rows,
                     floor_footnote, floor_steps, floor_table_rows, run_floors)
from .micro import micro_steps, run_benches
from .idlepage import idle_tables
from .page import write_page
from .scale import (DRY_WORKERS, SCALE_LOAD_THREADS, SCALE_POLLERS,
                    SCALE_SCHED, SCALE_SERVER_WORKERS, SCALE_SERVERS,
                    SCALE_WORKERS, run_scale, write_scale_page)
from .peers import (PEERS, SUBJECT, Ctx, Peer, Skip, build_weft,
                    meson_targets)
from .progress import Progress
from .redis import (REDIS_SECONDS, redis_footnote, redis_steps,
                    redis_table_rows, run_redis)
from .report import (BENCH_FOOTNOTE, md_table, metadata, runs_note,
                     server_cost_footnote, server_cost_rows,
                     server_footnote, server_table_rows, table_rows,
                     text_table, write_markdown)
from .server import (ECHO_SECONDS, SYSCALL_SECONDS, WRK_SECONDS, run_servers,
                     server_rows, server_steps, server_worker_counts,
                     syscalls_wanted)
from .stats import add_scaling
from .variants import backend_peers, backends_meta

def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="weft benchmarks (scheduler, timers, servers) vs peer runtimes")
    ap.add_argument("--quick", action="store_true",
                    help="a row or two of each family (without --only: " +
                    ", ".join(QUICK) + "), 3 runs per point instead of 5, "
                    "and the peers other than weft 1, without a warm-up "
                    "invocation, only at the largest worker count (same "
                    "sizes; the server rows run shorter and, without "
                    "--workers, at 1 worker only)")
    ap.add_argument("--only", metavar="NAME[,NAME]",
                    help="only these benchmarks: " +
                    ", ".join(b.name for b in BENCHMARKS) + ", " +
                    ", ".join(GROUPS) + " (the server rows; or one row: " +
                    ", ".join(b.name for b in SERVER_BENCHES) + "); redis "
                    "(hiredis through libweft-hook vs threads vs async, "
                    "against redis-server; or one row: " +
                    ", ".join(b.name for b in REDIS_BENCHES) + "); " +
                    FILE_GROUP + " (issue 48: 4 KiB random reads of a file "
                    "from the page cache and O_DIRECT, weft under uring and "
                    "epoll beside fio, Go and Tokio; or one row: " +
                    ", ".join(dict.fromkeys(b.name for b in FILE_BENCHES)) +
                    "); " +
                    IDLE_GROUP + " (the idle workers' tax, issue 46: echo "
                    "under a light load, 4 connections x 64 B, at " +
                    ", ".join(map(str, IDLE_WORKERS)) + " workers, every "
                    "peer's CPU per message over its own at 1, with weft's "
                    "WEFT_STATS=1 counts; sleep, parked and spawn at " +
                    str(IDLE_WORKERS[-1]) + " workers under wait4: system "
                    "time, voluntary switches, steal attempts per stolen "
                    "coroutine)")
    ap.add_argument("--peers", metavar="NAME[,NAME]",
                    help="only these peers besides weft: " +
                    ", ".join(p.name for p in PEERS[1:]))
    ap.add_argument("--workers", metavar="LIST",
                    help="worker counts, e.g. 1,2,4 (default: 1 and the CPUs "
                    "in the affinity mask); the server rows run at these "
                    "too (default: 1, pinned, and 2, sharing the CPUs with "
                    "the load; --quick: 1): 1 pinned, every other count "
                    "unpinned, sharing the CPUs")
    ap.add_argument("--runs", type=int, help="runs per point (default 5)")
    ap.add_argument("--peer-runs", type=int,
                    help="runs per point of the peers other than weft "
                    "(default: --runs; --quick: 1)")
    ap.add_argument("--peer-workers", metavar="LIST",
                    help="the worker counts of --workers at which the peers "
                    "other than weft run (default: all; --quick: the largest)")
    ap.add_argument("--build-dir", default="build", type=Path,
                    help="meson build directory (default: build)")
    ap.add_argument("--json", type=Path,
                    help="results file (default: BUILD/bench/results.json; "
                    "--scale: BUILD/bench/scale.json)")
    ap.add_argument("--docs", action="store_true",
                    help="also regenerate docs/bench.md and its charts from "
                    "this run (without --quick, and with valgrind: also "
                    "callgrind's instructions per yield and per spawn+join)")
    ap.add_argument("--page", type=Path, metavar="RESULTS.json",
                    help="run nothing: regenerate docs/bench.md and its "
                    "charts from the prose of docs/bench.md.in and this "
                    "results file (a --scale run's scale.json: "
                    "docs/scaling.md from docs/scaling.md.in)")
    ap.add_argument("--no-syscalls", action="store_true",
                    help="skip the untimed pass of each server under "
                    "`strace -c -f` that counts its system calls per message "
                    "(--quick skips it too)")
    ap.add_argument("--load-threads", type=int, default=1, metavar="N",
                    help="threads of the server rows' load generators "
                    "(loadgen -t, wrk -t; default 1); on 1 worker they are "
                    "pinned to the N CPUs after the server's")
    ap.add_argument("--build-peers", action="store_true",
                    help="run nothing: build the peers (at once, each "
                    "beside the others) and exit; scripts/run bench does it "
                    "beside weft's own build")
    ap.add_argument("--meson-targets", action="store_true",
                    help="run nothing: print the meson targets the suite "
                    "needs (lib/, hook/, bench/, examples/; not the tests), "
                    "for `meson compile` (scripts/run bench)")
    ap.add_argument("--prebuilt", action="store_true",
                    help="build no peer: run the programs an earlier run "
                    "left under BUILD/bench (a suite built on one machine, "
                    "run on another)")
    ap.add_argument("--scale", action="store_true",
                    help="run only the prepared scaling run (issue 46, for "
                    "a lent 16-core machine; scripts/scale-run runs it "
                    "from a build made elsewhere): the scheduler rows " +
                    ", ".join(SCALE_SCHED) + " at " +
                    ", ".join(map(str, SCALE_WORKERS)) + " workers, the "
                    "server rows " + ", ".join(SCALE_SERVERS) + " at " +
                    ", ".join(map(str, SCALE_SERVER_WORKERS)) + " with " +
                    str(SCALE_LOAD_THREADS) + " load threads, weft under "
                    "each WEFT_POLLER (" + ", ".join(SCALE_POLLERS) + "), "
                    "Go, Tokio and the N-loop limit; writes "
                    "BUILD/bench/scale.json (and $OUT/scale.json), then "
                    "docs/scaling.md from it")
    ap.add_argument("--dry", action="store_true",
                    help="with --scale: the same flow at most at " +
                    str(DRY_WORKERS) + " workers, 1 run per point, short "
                    "windows (it shows the run works; it prints the full "
                    "run's estimated time on 16 cores)")
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds per invocation (default 300)")
    args = ap.parse_args(argv)
    if args.dry and not args.scale:
        ap.error("--dry goes with --scale")
    if args.runs is None:
        args.runs = 3 if args.quick else 5
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.load_threads < 1:
        ap.error("--load-threads must be at least 1")
    if args.peer_runs is None:
        args.peer_runs = 1 if args.quick else args.runs
    if args.peer_runs < 1:
        ap.error("--peer-runs must be at least 1")
    # the peers' warm-up invocation: not in a quick run
    args.peer_warmup = not args.quick

    def counts(option: str, value: str) -> List[int]:
        try:
            ws = sorted({int(x) for x in value.split(",") if x.strip()})
        except ValueError:
            ap.error(f"{option}: not a list of integers: {value!r}")
        if not ws or ws[0] < 1 or ws[-1] > 1024:
            ap.error(f"{option}: counts must be 1..1024")
        return ws

    # the server rows' counts: --workers if given, else their own
    args.server_workers = server_worker_counts(
        args.workers and counts("--workers", args.workers), args.quick)
    if args.workers:
        args.workers = counts("--workers", args.workers)
    else:
        args.workers = sorted({1, len(os.sched_getaffinity(0))})
    if args.peer_workers:
        args.peer_workers = counts("--peer-workers", args.peer_workers)
        bad = [w for w in args.peer_workers if w not in args.workers]
        if bad:
            ap.error(f"--peer-workers: {bad} not in --workers {args.workers}")
    else:
        args.peer_workers = args.workers[-1:] if args.quick else args.workers
    def pick(option: str, value: Optional[str], known: List[str]) -> List[str]:
        """The comma-separated names of --only / --peers, all known ones if unset."""
        if not value:
            return known
        want = [x.strip() for x in value.split(",") if x.strip()]
        bad = [x for x in want if x not in known]
        if bad:
            ap.error(f"{option}: unknown {', '.join(bad)} "
                     f"(known: {', '.join(known)})")
        return want

    if args.quick and not args.only:
        args.only = ",".join(QUICK)
    args.only = pick("--only", args.only, [b.name for b in BENCHMARKS] +
                     GROUPS + [b.name for b in SERVER_BENCHES] +
                     list(dict.fromkeys(b.group for b in REDIS_BENCHES)) +
                     [b.name for b in REDIS_BENCHES] + [FILE_GROUP] +
                     list(dict.fromkeys(b.name for b in FILE_BENCHES)) +
                     [IDLE_GROUP])
    args.peers = pick("--peers", args.peers, [p.name for p in PEERS[1:]])
    if not args.build_dir.is_absolute():
        args.build_dir = (Path.cwd() / args.build_dir).resolve()
    if args.json is None:
        args.json = args.build_dir / "bench" / (
            "scale.json" if args.scale else "results.json")
    return args


def build_one(p: Peer, ctx: Ctx) -> Optional[str]:
    """Builds peer p (its program in p.program); why not, if it cannot."""
    try:
        p.program = p.build(ctx)
    except Skip as e:
        return str(e)
    return None


def build_peers(args, ctx: Ctx, own_only: bool = False) -> List[Peer]:
    """The peers that build, all built at once, each beside the others
    (their compilers wait on different things), with a line per peer
    skipped; own_only: only those with a toolchain of their own (not
    by_meson), and no lines (the run that follows reports)."""
    want = [p for p in PEERS if (p.name == SUBJECT or p.name in args.peers)
            and not (own_only and p.by_meson)]
    with concurrent.futures.ThreadPoolExecutor(len(want)) as pool:
        why = list(pool.map(lambda p: build_one(p, ctx), want))
    for p, w in zip(want, why):
        if w and not own_only:
            print(f"bench.py: {p.name} peer skipped: {w}")
    return [p for p, w in zip(want, why) if w is None]


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.meson_targets:
        print(" ".join(meson_targets(args.build_dir)))
        return 0
    if args.build_peers:
        if not (args.page or args.prebuilt):
            out = args.build_dir / "bench"
            out.mkdir(parents=True, exist_ok=True)
            build_peers(args, Ctx(args.build_dir, out, [], False),
                        own_only=True)
        return 0
    if args.page:
        res = json.loads(args.page.read_text())
        write = write_scale_page if res["meta"].get("scale") else write_page
        print(f"updated {write(res)}")
        return 0
    out_dir = args.build_dir / "bench"
    ctx = Ctx(args.build_dir, out_dir, [], args.prebuilt)

    build_weft(ctx)  # fail early, before creating anything
    out_dir.mkdir(parents=True, exist_ok=True)
    peers = build_peers(args, ctx)
    if args.scale:
        return run_scale(args, peers, ctx)
    print(f"bench.py: peers: {', '.join(p.name for p in peers)}; workers: "
          f"{', '.join(map(str, args.workers))}; {runs_note(args)}",
          file=sys.stderr)

    # the server rows: weft under each I/O backend it can run here
    srv, no_backend = backend_peers(peers, args.server_workers) \
        if server_rows(args) else (peers, {})
    prog = Progress()
    prog.plan(floor_steps(args) + micro_steps(args, peers) +
              server_steps(args, srv) + redis_steps(args) +
              file_steps(args) +
              idle_steps(args, peers) +
              callgrind_steps(args))
    failures: List[str] = []
    t_start = time.monotonic()
    fpoints, fsummary = run_floors(args, ctx, prog, failures)
    points, summary = run_benches(args, peers, prog, failures)
    spoints, ssummary, pins = run_servers(args, srv, ctx, prog, failures)
    rpoints, rsummary, rpins = run_redis(args, ctx, prog, failures)
    fipoints, fisummary = run_files(args, peers, ctx, prog, failures)
    idle = run_idle_tax(args, peers, ctx, prog, failures)
    cg = run_callgrind(args, peers[0], prog, failures)
    prog.done()
    elapsed = time.monotonic() - t_start

    add_scaling(summary, peers)
    meta = metadata(args, srv, ctx)
    meta["elapsed_s"] = round(elapsed, 1)
    meta["servers"] = pins and {"workers": args.server_workers,
                                "pinning": {w: p.note for w, p in pins.items()},
                                "sharing": {w: p.sharing for w, p in pins.items()},
                                "echo_s": ECHO_SECONDS[args.quick],
                                "wrk_s": WRK_SECONDS[args.quick],
                                "syscall_pass_s": (SYSCALL_SECONDS if
                                                   syscalls_wanted(args)
                                                   else None),
                                "backends": backends_meta(no_backend)}
    meta["redis"] = rpins and {"pinning": rpins.note,
                               "seconds": REDIS_SECONDS[args.quick]}

    text, tables = [], []  # the text tables; (markdown, footnote) pairs

    def add_table(head_rows, note: str):
        head, rows = head_rows
        if rows:
            text.append(text_table(head, rows) + "\n\n" + note)
            tables.append((md_table(head, rows), note))

    if summary:
        add_table(table_rows(summary, peers), BENCH_FOOTNOTE)
    # the peers of the server rows (not those without servers)
    speers = [p for p in srv if any(p.name in s["peers"] for s in ssummary)]
    if ssummary:
        add_table(server_table_rows(ssummary, speers),
                  server_footnote(args, pins, speers, no_backend))
        add_table(server_cost_rows(ssummary, speers),
                  server_cost_footnote(args))
    if rsummary:
        add_table(redis_table_rows(rsummary), redis_footnote(args, rpins))
    if fisummary:
        add_table(file_table_rows(fisummary), file_footnote(args))
    for head_rows, note in idle_tables({"idle_tax": idle}):
        add_table(head_rows, note)
    costs = cost_model(summary, ssummary, points, fsummary)
    add_table(floor_table_rows(fsummary), floor_footnote(args))
    add_table(cost_table_rows(costs), COST_FOOTNOTE)
    lines = callgrind_lines(cg)
    if lines:
        text.append(lines + "\n\n" + CALLGRIND_FOOTNOTE)
        tables.append((lines, CALLGRIND_FOOTNOTE))
    for t in text:
        print("\n" + t)
    print(f"\n{runs_note(args)}; {elapsed:.0f} s in all")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta,
                   "benchmarks": [dataclasses.asdict(b) for b in BENCHMARKS
                                  if b.name in args.only],
                   "summary": summary, "points": points,
                   "servers": {
                       "benchmarks": [dataclasses.asdict(b) for b in
                                      SERVER_BENCHES if b.name in args.only
                                      or b.group in args.only],
                       "summary": ssummary, "points": spoints},
                   "redis": {
                       "benchmarks": [dataclasses.asdict(b) for b in
                                      REDIS_BENCHES if b.name in args.only
                                      or b.group in args.only],
                       "summary": rsummary, "points": rpoints},
                   "file": {"summary": fisummary, "points": fipoints},
                   "idle_tax": idle,
                   "floors": {
                       "benchmarks": [dataclasses.asdict(b) for b in FLOORS],
                       "summary": fsummary, "points": fpoints},
                   "cost_model": costs, "callgrind": cg,
                   "failures": failures}, f, indent=1)
        f.write("\n")

    md = out_dir / "results.md"
    write_markdown(md, meta, args, tables, failures)
    made = charts(summary, ssummary, peers, speers, args.workers, ctx)
    print(f"wrote {args.json}, {md}" +
          "".join(f", {m}" for m in made))
    if args.docs:
        print(f"updated {write_page(json.loads(args.json.read_text()))}")
    if failures:
        print(f"bench.py: {len(failures)} failure(s):", file=sys.stderr)
        for x in failures:
            print("  " + x, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
