# SPDX-License-Identifier: MIT
"""The prepared scaling run (issue 46, item 5): `bench.py --scale`, run
by scripts/scale-run on a lent many-core machine from a build made
elsewhere (--prebuilt: the peers are not built there).

- the scheduler rows SCALE_SCHED at SCALE_WORKERS, weft, Go and Tokio;
- the server rows SCALE_SERVERS at SCALE_SERVER_WORKERS with
  SCALE_LOAD_THREADS load threads, every peer with a server (the N-loop
  limit among them), weft once per poller of SCALE_POLLERS (WEFT_POLLER;
  a mode the library rejects, or a library that does not read the
  variable, is skipped with the reason printed);
- each row's windows short enough for the whole run to fit in
  SCALE_BUDGET_S on 16 cores (scale_plan estimates it before it starts).

--dry runs the same flow at the counts this machine has (at most
DRY_WORKERS), one run per point and short windows, and prints the
estimate of the full run.  The results go to BUILD/bench/scale.json (and
$OUT/scale.json when OUT is set: the lent machine's way back), then
docs/scaling.md is generated from it (write_scale_page; `bench.py --page
scale.json` regenerates it anywhere; a dry run's page goes to
BUILD/bench/scaling.md instead)."""

import json
import os
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence, Tuple

from .benches import SERVER_BENCHES
from .fmt import fmt_num, fmt_ratio, fmt_sig
from .idle import cpu_growth, run_server_counts, server_steps
from .micro import micro_steps, run_benches
from .peers import ROOT, SUBJECT, Ctx, Peer
from .progress import Progress
from .server import ECHO_SECONDS, Pins
from .stats import add_scaling
from .variants import Mode, mode_peers, variant, weft_mode
from .targets import SCALE_ECHO, SCALE_TARGETS, table as targets_table, tally

SCALE_SCHED = ["spawn", "skynet", "fib", "sleep", "parked"]
SCALE_WORKERS = [1, 2, 4, 8, 16]
SCALE_SERVERS = SCALE_ECHO
SCALE_SERVER_WORKERS = [1, 4, 8, 16]
SCALE_LOAD_THREADS = 4
SCALE_POLLERS = ("shared", "worker")  # the first is the subject's
SCALE_PEERS = ("go", "tokio", "epoll")
SCALE_RUNS = 2
# the echo rows' (run, warm-up) seconds: a warm-up past the 1 s of a SYN
# retransmitted when 1,000 connections at once overflow the backlog
SCALE_WINDOW = (1.5, 1.0)
SCALE_BUDGET_S = 8 * 60
# no count's rows start past this: the lent machine ends a command at
# 600 s, and the JSON must be written before
SCALE_DEADLINE_S = 500
DRY_WORKERS = 2
DRY_WINDOW = (0.5, 1.0)
# seconds a server run costs beyond its windows (start, "listening", the
# drain at SIGTERM), and a scheduler invocation on 16 cores at most (the
# 2026-12-04 run's slowest, Tokio's skynet at 1 worker, about 1.2 s)
SERVER_OVERHEAD_S = 0.6
SCHED_INVOCATION_S = 0.8
TEMPLATE = ROOT / "docs" / "scaling.md.in"
PAGE = ROOT / "docs" / "scaling.md"
UNMEASURED = "Not measured on 16 cores yet."


def poller_mode(mode: str) -> Mode:
    """weft with WEFT_POLLER=mode: the subject itself for the first mode,
    "weft-MODE" for the others."""
    return Mode("" if mode == SCALE_POLLERS[0] else mode,
                f"weft, WEFT_POLLER={mode}", lambda w: {"WEFT_POLLER": mode})


POLLER_MODES = [poller_mode(m) for m in SCALE_POLLERS]


def scale_peers(peers: List[Peer]) -> Tuple[List[Peer], Dict[str, str]]:
    """The run's peers: weft once per mode it accepts, then the others;
    and why each skipped mode was skipped (by its peer's name)."""
    weft, skipped = mode_peers(peers[0], POLLER_MODES, 1, "--scale")
    return weft + [p for p in peers[1:] if p.name in SCALE_PEERS], skipped


def count_order(counts: Sequence[int]) -> List[int]:
    """The order the counts run in: 1 and the largest first (the scaling
    over 1 needs both), then the others, so that a run cut short by
    SCALE_DEADLINE_S loses the middle counts."""
    ends = list(dict.fromkeys([counts[0], counts[-1]]))
    return ends + [w for w in counts if w not in ends]


def sched_peers(peers: List[Peer]) -> List[Peer]:
    """The peers of the scheduler rows: one weft (the poller does not
    matter without I/O)."""
    return [p for p in peers if p.name == SUBJECT or not weft_mode(p.name)]


def cpu_list(cpus: str) -> str:
    """"CPU 0" or "CPUs 0-3", for a taskset list."""
    return f"CPU{'s' if '-' in cpus or ',' in cpus else ''} {cpus}"


def scale_pins(cpus: int, load_threads: int):
    """A server at w workers on the first w CPUs and its load on the last
    load_threads, where they fit side by side; unpinned, sharing the
    CPUs, where they do not."""
    def pins(w: int) -> Pins:
        if shutil.which("taskset") is None:
            return Pins(None, None, "unpinned: taskset not found "
                        "(util-linux)", False, load_threads)
        if w + load_threads > cpus:
            return Pins(None, None, f"server and load unpinned, sharing the "
                        f"{cpus} CPUs", True, load_threads)
        srv = f"0-{w - 1}" if w > 1 else "0"
        load = f"{cpus - load_threads}-{cpus - 1}" if load_threads > 1 \
            else str(cpus - 1)
        return Pins(srv, load, f"server on {cpu_list(srv)}, load on "
                    f"{cpu_list(load)}", False, load_threads)
    return pins


def scale_args(args, dry: bool) -> SimpleNamespace:
    """The options of the run's rows (micro.run_benches' and the server
    loop's), the full run's or the dry run's."""
    cpus = len(os.sched_getaffinity(0))
    sched = [w for w in SCALE_WORKERS if w <= DRY_WORKERS] if dry \
        else SCALE_WORKERS
    servers = sorted({1, min(DRY_WORKERS, cpus)}) if dry \
        else SCALE_SERVER_WORKERS
    runs = 1 if dry else SCALE_RUNS
    return SimpleNamespace(
        only=SCALE_SCHED, workers=sched, peer_workers=sched,
        server_workers=servers, runs=runs, peer_runs=runs,
        peer_warmup=False, quick=False, timeout=args.timeout,
        no_syscalls=True, dry=dry,
        load_threads=1 if dry else SCALE_LOAD_THREADS,
        window=DRY_WINDOW if dry else SCALE_WINDOW, cpus=cpus)


def scale_plan(sa, peers: List[Peer]) -> Tuple[List[Tuple[str, int]], dict]:
    """The progress plan, and the estimate of the run's seconds on a
    16-core machine at these options (the full run's: scale_args(.., False))."""
    sched = micro_steps(sa, sched_peers(peers))
    servers = [st for name in SCALE_SERVERS
               for st in server_steps(sa, peers, "scale", name,
                                      sa.server_workers)]
    n_sched = sum(n for _, n in sched)
    n_srv = sum(n for _, n in servers)
    per_srv = sum(sa.window) + SERVER_OVERHEAD_S
    est = {"scheduler_invocations": n_sched, "server_runs": n_srv,
           "server_run_s": per_srv,
           "estimate_s": round(n_sched * SCHED_INVOCATION_S + n_srv * per_srv)}
    return sched + servers, est


class echo_window:
    """The echo rows' windows set to (run, warm-up) seconds while in the
    with block (server.ECHO_SECONDS, as a run's options choose them)."""

    def __init__(self, window: Tuple[float, float]):
        self.window, self.old = window, None

    def __enter__(self):
        self.old = ECHO_SECONDS[False]
        ECHO_SECONDS[False] = self.window

    def __exit__(self, *exc):
        ECHO_SECONDS[False] = self.old


def run_scale(args, peers: List[Peer], ctx: Ctx) -> int:
    """The scaling run (args.dry: the dry run): scale.json, then
    docs/scaling.md."""
    sa = scale_args(args, args.dry)
    speers, skipped = scale_peers(peers)
    full = scale_args(args, False)
    full.cpus = 16
    # the full run's estimate with every poller mode, skipped here or not
    every = [variant(peers[0], m) for m in POLLER_MODES] + [
        p for p in speers if not weft_mode(p.name)]
    _, estimate = scale_plan(full, every)
    plan, here = scale_plan(sa, speers)
    print(f"bench.py: --scale{' --dry' if sa.dry else ''}: peers "
          f"{', '.join(p.name for p in speers)}; scheduler rows at "
          f"{sa.workers}, servers at {sa.server_workers}; the full run "
          f"estimated at {estimate['estimate_s']} s on 16 cores "
          f"(budget {SCALE_BUDGET_S} s)", file=sys.stderr)
    prog = Progress()
    prog.plan(plan)
    failures: List[str] = []
    load = os.getloadavg()
    t0 = time.monotonic()
    cut: List[str] = []

    def in_time(what: str) -> bool:
        """Whether there is time left for the next count's rows; if not,
        a line saying what is left out (the JSON says it too)."""
        if time.monotonic() - t0 < SCALE_DEADLINE_S:
            return True
        cut.append(what)
        print(f"bench.py: --scale: past {SCALE_DEADLINE_S} s: {what} left "
              f"out", file=sys.stderr)
        return False

    points, summary = [], []
    spk = sched_peers(speers)
    for w in count_order(sa.workers):
        if in_time(f"the scheduler rows at {w} workers"):
            pt, sm = run_benches(SimpleNamespace(**{
                **vars(sa), "workers": [w], "peer_workers": [w]}), spk,
                prog, failures)
            points += pt
            summary += sm
    summary.sort(key=lambda s: (SCALE_SCHED.index(s["bench"]), s["workers"]))
    add_scaling(summary, spk)
    t_sched = time.monotonic() - t0
    walls = [r["wall_s"] for pt in points for rs in pt["runs"].values()
             for r in rs if "wall_s" in r]
    spoints, ssummary = [], []
    pins = scale_pins(sa.cpus, sa.load_threads)
    with echo_window(sa.window):
        for w in count_order(sa.server_workers):
            for name in SCALE_SERVERS:
                if not in_time(f"{name} at {w} workers"):
                    continue
                sb = next(b for b in SERVER_BENCHES if b.name == name)
                pt, sm = run_server_counts(sa, speers, ctx, prog, failures,
                                           sb, [w], pins, "scale")
                spoints += pt
                ssummary += sm
    ssummary.sort(key=lambda s: (SCALE_SERVERS.index(s["bench"]),
                                 s["workers"]))
    prog.done()
    elapsed = time.monotonic() - t0
    from .report import metadata
    meta = metadata(SimpleNamespace(
        runs=sa.runs, peer_runs=sa.peer_runs, workers=sa.workers,
        peer_workers=sa.peer_workers), speers, ctx)
    meta.update(scale=True, dry=sa.dry, elapsed_s=round(elapsed, 1),
                sched_s=round(t_sched, 1),
                sched_invocation_s=round(sum(walls) / len(walls), 3)
                if walls else None,
                server_workers=sa.server_workers,
                load_threads=sa.load_threads, window_s=list(sa.window),
                pollers={m: skipped.get(pm.name, "ran")
                         for m, pm in zip(SCALE_POLLERS, POLLER_MODES)},
                loadavg=[round(x, 2) for x in load],
                loadavg_after=[round(x, 2) for x in os.getloadavg()],
                estimate_16=estimate, estimate_here=here,
                pinning={w: pins(w).note for w in sa.server_workers},
                cut=cut)
    res = {"meta": meta, "summary": summary, "points": points,
           "servers": {"summary": ssummary, "points": spoints},
           "failures": failures}
    outs = [args.json]
    if os.environ.get("OUT"):
        outs.append(Path(os.environ["OUT"]) / "scale.json")
    for out in outs:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1) + "\n")
    # a dry run's page beside its JSON: docs/ shows only a real run
    page = write_scale_page(res, page=ctx.out_dir / "scaling.md") if sa.dry \
        else write_scale_page(res)
    print(f"bench.py: --scale: {elapsed:.0f} s (scheduler rows "
          f"{t_sched:.0f} s); wrote {', '.join(map(str, outs))}, {page}")
    print(scale_section_servers(res) or "", "\n\n", scale_targets(res))
    for x in failures:
        print("  FAIL " + x, file=sys.stderr)
    return 1 if failures else 0


# ------------------------------------------------------------- the page

def md(head: List[str], rows: List[List[str]], left: int = 1) -> str:
    from .page import md_table
    return md_table(head, rows, left)


def plural(n, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def scale_run_line(res: dict) -> Optional[str]:
    m = res.get("meta") or {}
    if not m.get("scale"):
        return None
    e = m.get("estimate_16") or {}
    dry = (f"**A dry run** (`--dry`: at most {DRY_WORKERS} workers, 1 run "
           f"per point, windows of {m['window_s'][0]:g} s after "
           f"{m['window_s'][1]:g} s of warm-up), not a measurement: it "
           f"shows that the run works end to end.  " if m.get("dry") else "")
    return (dry + f"Run of {m['date'][:16].replace('T', ' ')} UTC, weft "
            f"{m.get('git') or '(no git)'}, {m.get('cpus_affinity')} CPUs "
            f"({m.get('cpu') or 'unknown CPU'}), Linux {m.get('kernel')}, "
            f"load average {', '.join(map(str, m.get('loadavg') or []))} "
            f"at the start; {plural(m.get('runs'), 'run')} per point, peers "
            f"interleaved; scheduler rows at "
            f"{', '.join(map(str, m.get('workers') or []))} workers, "
            f"server rows at "
            f"{', '.join(map(str, m.get('server_workers') or []))} with "
            f"{plural(m.get('load_threads'), 'load thread')} ("
            + "; ".join(f"@{w}: {n}" for w, n in
                        (m.get("pinning") or {}).items()) +
            f"); pollers: " + "; ".join(
                f"{k}: {v}" for k, v in (m.get("pollers") or {}).items()) +
            f"; {m.get('elapsed_s')} s in all (the full run estimated at "
            f"{e.get('estimate_s')} s on 16 cores).")


def scale_section_sched(res: dict) -> Optional[str]:
    ss = res.get("summary") or []
    if not ss:
        return None
    counts = sorted({s["workers"] for s in ss})
    peers = [p for p in (res.get("meta") or {}).get("peers", [])
             if p != SUBJECT and not weft_mode(p)
             and any(p in s.get("ratios", {}) for s in ss)]
    head = (["row", "unit"] + [f"weft @{w}" for w in counts] +
            [f"weft speed-up @{counts[-1]}"] +
            [f"weft/{p} @{' / @'.join(map(str, counts))}" for p in peers])
    rows = []
    for b in dict.fromkeys(s["bench"] for s in ss):
        by = {s["workers"]: s for s in ss if s["bench"] == b}
        med = lambda w: ((by.get(w) or {}).get("peers") or {}).get(SUBJECT)
        sc = ((by.get(counts[-1]) or {}).get("scaling") or {}).get(SUBJECT)
        rat = lambda p, w: (((by.get(w) or {}).get("ratios") or {})
                            .get(p) or {}).get("median")
        rows.append(
            [b, next(iter(by.values()))["unit"]] +
            [fmt_num(med(w)["median"]) if med(w) else "—" for w in counts] +
            [f"{sc:.2f}x" if sc else "—"] +
            [" / ".join(f"{rat(p, w):.2f}" if rat(p, w) else "—"
                        for w in counts) for p in peers])
    return md(head, rows)


def scale_section_servers(res: dict) -> Optional[str]:
    ss = (res.get("servers") or {}).get("summary") or []
    if not ss:
        return None
    peers = list(dict.fromkeys(p for s in ss for p in s["peers"]
                               if not p.endswith("_failed")))
    head = (["row", "workers"] + [f"{p} msgs/s" for p in peers] +
            [f"{p} CPU µs/msg (@N/@1)" for p in peers] +
            [f"weft/{p} rate / CPU" for p in peers if p != SUBJECT] +
            [f"{p} steal attempts/steal" for p in peers if weft_mode(p)])
    rows = []
    for s in ss:
        pm = lambda p, k: ((s["peers"].get(p) or {}).get(k) or {}).get(
            "median")
        cpu = lambda p: (f"{fmt_sig(pm(p, 'cpu_us_per_msg'))} ("
                         f"{cpu_growth(ss, s['bench'], p, s['workers']):.2f})"
                         if pm(p, "cpu_us_per_msg") and cpu_growth(
                             ss, s["bench"], p, s["workers"]) else "—")
        rt = lambda p, k: ((s.get("ratios") or {}).get(p) or {}).get(k)
        st = lambda p: ((s.get("stats") or {}).get(p) or {}).get(
            "steal_attempts_per_steal")
        rows.append(
            [s["bench"], str(s["workers"])] +
            [fmt_num(pm(p, "rate")) if pm(p, "rate") else "—" for p in peers]
            + [cpu(p) for p in peers] +
            [f"{fmt_ratio(rt(p, 'rate'))} / {fmt_ratio(rt(p, 'cpu'))}"
             for p in peers if p != SUBJECT] +
            [fmt_num(st(p)["median"]) if st(p) else "—"
             for p in peers if weft_mode(p)])
    return md(head, rows, left=2)


def scale_targets(res: dict) -> str:
    """The tally (or that there is no run yet), then the table."""
    head, rows = targets_table(res, SCALE_TARGETS)
    n = tally(res, SCALE_TARGETS)
    dry = " (a dry run: they say nothing of 16 cores)" if (
        res.get("meta") or {}).get("dry") else ""
    line = (f"{n['met']} met, {n['not met']} not met, {n['not measured']} "
            f"not measured by this run{dry}." if (res.get("meta") or {}).get(
                "scale") else UNMEASURED + "  The targets it will judge:")
    return line + "\n\n" + md(head, rows, left=4)


SCALE_SECTIONS = {
    "scale-run": scale_run_line,
    "scale-sched": scale_section_sched,
    "scale-servers": scale_section_servers,
    "scale-targets": scale_targets,
}


def render_scale(template: str, res: dict) -> str:
    from .page import PLACE

    def fill(m):
        name = m.group(1)
        if name not in SCALE_SECTIONS:
            raise ValueError(f"unknown section {{{{{name}}}}}")
        return SCALE_SECTIONS[name](res) or UNMEASURED
    return PLACE.sub(fill, template)


def write_scale_page(res: dict, template: Path = TEMPLATE,
                     page: Path = PAGE) -> Path:
    page.write_text("<!-- generated by scripts/bench.py from "
                    f"{template.name} and a scale.json; edit the template "
                    "-->\n" + render_scale(template.read_text(), res))
    return page
