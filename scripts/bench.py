#!/usr/bin/env python3
"""Runs weft's scheduler benchmarks against peer runtimes and tabulates them.

    python3 scripts/bench.py [--quick] [--only NAME[,NAME]] [--workers 1,2]
                             [--runs N] [--json FILE] [--build-dir DIR]

It expects the weft side to be built already (`meson compile -C build`, which
scripts/run does first) and builds the peers itself (the Go peer with
`go build`; a peer whose tool is missing is skipped with a printed line).

For every benchmark and worker count: one warm-up invocation of every peer,
then --runs invocations of each, interleaved (weft, go, go, weft, ...), each
its own process, each doing its own in-process warm-up before the timed run.
Every invocation verifies its result; any failure makes the exit status 1.

Outputs (under BUILD/bench/ unless told otherwise):
    results.json   every run, raw ns and ops, plus the summary and metadata
    results.md     the summary table in Markdown (included by the docs)
    ratios.png     weft/peer time ratios per benchmark (needs gnuplot)
    scaling.png    weft speed-up vs one worker (needs gnuplot)

To add a benchmark: add it to BENCHMARKS and implement it under the same name
in every peer (bench/weft-bench.c, bench/peers/go/main.go, ...).  To add a peer
(Boost.Fiber, Tokio, ...): write a builder and add a Peer to PEERS; its program
takes `NAME WORKERS` and prints one line
    RESULT name=NAME impl=PEER workers=W ns=N ops=N value=N check=ok|fail
Python 3 standard library only.
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ tables


@dataclasses.dataclass
class Bench:
    name: str
    title: str
    per_op: bool  # report ns per op (True) or ms per run (False)
    unit: str
    fixed_workers: Optional[int] = None  # run only at this worker count


BENCHMARKS: List[Bench] = [
    Bench("yield", "yield, 2 coroutines x 2M yields, 1 worker", True, "ns/yield",
          fixed_workers=1),
    Bench("spawn", "spawn+join 1M, batches of 1000", True, "ns/spawn+join"),
    Bench("skynet", "skynet, 1M leaves, 10 children/node, join", False, "ms"),
    Bench("fib", "fork-join fib(27), no cutoff", False, "ms"),
]


class Skip(Exception):
    """A peer cannot be built or run here; the message says why."""


@dataclasses.dataclass
class Peer:
    name: str
    title: str
    # build(ctx) -> path of the program; raises Skip when it cannot be had
    build: Callable[["Ctx"], Path]
    # extra environment for a run at `workers`
    env: Callable[[int], Dict[str, str]] = lambda w: {}
    # benchmark names it implements; None: all of BENCHMARKS
    benches: Optional[List[str]] = None
    program: Optional[Path] = None  # set once built


@dataclasses.dataclass
class Ctx:
    build_dir: Path
    out_dir: Path
    log: List[str]


def build_weft(ctx: Ctx) -> Path:
    prog = ctx.build_dir / "bench" / "weft-bench"
    if not os.access(prog, os.X_OK):
        raise SystemExit(
            f"bench.py: {prog} not found; build it first: "
            f"meson setup {ctx.build_dir} && meson compile -C {ctx.build_dir}")
    return prog


def build_go(ctx: Ctx) -> Path:
    go = shutil.which("go")
    if go is None:
        raise Skip("`go` not found on PATH")
    gdir = ctx.out_dir / "go"
    prog = ctx.out_dir / "go-bench"
    env = dict(os.environ)
    env.update({
        "GOCACHE": str(gdir / "cache"),
        "GOPATH": str(gdir / "path"),
        "GOMODCACHE": str(gdir / "path" / "pkg" / "mod"),
        "GOPROXY": "off",  # no external modules; works offline
        "GOFLAGS": "",
        "GO111MODULE": "on",
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
    })
    cmd = [go, "build", "-trimpath", "-o", str(prog), "."]
    p = subprocess.run(cmd, cwd=ROOT / "bench" / "peers" / "go", env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        raise Skip("go build failed:\n" + p.stdout)
    return prog


PEERS: List[Peer] = [
    # The first peer is the subject: ratios are subject/peer, scaling is its.
    Peer("weft", "weft", build_weft),
    Peer("go", "Go goroutines", build_go,
         env=lambda w: {"GOMAXPROCS": str(w)}),
]

SUBJECT = PEERS[0].name


# ----------------------------------------------------------------- running

RESULT_RE = re.compile(r"^RESULT\s+(.*)$", re.M)


def parse_result(text: str) -> Optional[Dict[str, str]]:
    m = RESULT_RE.findall(text)
    if len(m) != 1:
        return None
    return dict(kv.split("=", 1) for kv in m[0].split() if "=" in kv)


def run_one(peer: Peer, bench: Bench, workers: int, timeout: float) -> dict:
    env = dict(os.environ)
    env.update(peer.env(workers))
    cmd = [str(peer.program), bench.name, str(workers)]
    rec = {"peer": peer.name, "cmd": cmd}
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        rec.update(ok=False, error=f"timed out after {timeout:.0f} s")
        return rec
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    r = parse_result(p.stdout)
    err = None
    if r is None:
        err = "no RESULT line"
    elif r.get("check") != "ok":
        err = f"check={r.get('check')}"
    elif r.get("name") != bench.name or r.get("workers") != str(workers):
        err = f"RESULT for name={r.get('name')} workers={r.get('workers')}"
    elif p.returncode != 0:
        err = f"exit status {p.returncode}"
    if p.returncode < 0:
        err = f"killed by signal {-p.returncode}" + (f" ({err})" if err else "")
    if err is None:
        try:
            rec.update(ns=int(r["ns"]), ops=int(r["ops"]), value=int(r["value"]))
        except (KeyError, ValueError):
            err = "malformed RESULT line"
    if err is None:
        rec["ok"] = True
        rec["extra"] = {k: v for k, v in r.items()
                        if k not in ("name", "impl", "workers", "ns", "ops",
                                     "value", "check")}
    else:
        rec.update(ok=False, error=err, rc=p.returncode,
                   stdout=p.stdout[-2000:], stderr=p.stderr[-2000:])
    return rec


def metric(bench: Bench, rec: dict) -> float:
    """The reported number for one run: ns/op or ms."""
    if bench.per_op:
        return rec["ns"] / rec["ops"]
    return rec["ns"] / 1e6


class Progress:
    def __init__(self):
        self.tty = sys.stderr.isatty()
        self.width = 0

    def show(self, msg: str):
        if self.tty:
            sys.stderr.write("\r" + msg.ljust(self.width))
            self.width = len(msg)
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    def say(self, msg: str):
        """A line that stays."""
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            self.width = 0
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    def done(self):
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            self.width = 0


# ----------------------------------------------------------------- summary


def med_range(xs: List[float]) -> Optional[dict]:
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def summarize(bench: Bench, workers: int, runs: Dict[str, List[dict]],
              peers: List[Peer]) -> dict:
    s = {"bench": bench.name, "workers": workers, "unit": bench.unit,
         "peers": {}, "ratios": {}}
    for p in peers:
        recs = runs.get(p.name, [])
        good = [metric(bench, r) for r in recs if r["ok"]]
        s["peers"][p.name] = med_range(good)
        s["peers"][p.name + "_failed"] = sum(1 for r in recs if not r["ok"])
    subj = runs.get(SUBJECT, [])
    for p in peers:
        if p.name == SUBJECT:
            continue
        other = runs.get(p.name, [])
        # pair by pair: run i of the subject against run i of the peer
        pairs = [metric(bench, a) / metric(bench, b)
                 for a, b in zip(subj, other) if a["ok"] and b["ok"]]
        s["ratios"][p.name] = med_range(pairs)
    return s


def fmt_num(x: float) -> str:
    if x >= 1000:
        return f"{x:.0f}"
    if x >= 100:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_mr(mr: Optional[dict], failed: int = 0) -> str:
    if mr is None:
        return "FAILED" if failed else "—"
    s = f"{fmt_num(mr['median'])} ({fmt_num(mr['min'])}–{fmt_num(mr['max'])})"
    return s + (f" [{failed} failed]" if failed else "")


def fmt_ratio(mr: Optional[dict]) -> str:
    if mr is None:
        return "—"
    return f"{mr['median']:.2f} ({mr['min']:.2f}–{mr['max']:.2f})"


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


def table_rows(summary: List[dict], peers: List[Peer]):
    others = [p for p in peers if p.name != SUBJECT]
    head = ["benchmark", "unit", "workers", f"{SUBJECT} median (min–max)"]
    for p in others:
        head += [f"{p.name} median (min–max)", f"{SUBJECT}/{p.name}"]
    head += [f"{SUBJECT} scaling"]
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
        rows.append(row)
    return head, rows


def text_table(head, rows) -> str:
    w = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip()
    return "\n".join([line(head), line(["-" * x for x in w])] +
                     [line(r) for r in rows])


def md_table(head, rows) -> str:
    esc = lambda c: c.replace("|", "\\|")
    out = ["| " + " | ".join(map(esc, head)) + " |",
           "|" + "|".join("---" if i < 2 else "--:"
                          for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    return "\n".join(out)


# ------------------------------------------------------------------ charts


def gnuplot(script: str, ctx: Ctx) -> bool:
    p = subprocess.run(["gnuplot"], input=script, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        print(f"bench.py: gnuplot failed:\n{p.stdout}", file=sys.stderr)
        return False
    return True


def charts(summary: List[dict], peers: List[Peer], workers: List[int],
           ctx: Ctx) -> List[Path]:
    if shutil.which("gnuplot") is None:
        print("bench.py: gnuplot not found; no charts "
              "(apt-get install -y gnuplot-nox)")
        return []
    made = []
    term = "set terminal pngcairo size 900,540 noenhanced font ',10'"
    others = [p.name for p in peers if p.name != SUBJECT]
    benches = list(dict.fromkeys(s["bench"] for s in summary))
    by = {(s["bench"], s["workers"]): s for s in summary}

    # ratios.png: clustered bars, one cluster per benchmark, a bar per
    # (peer, workers); below 1 means weft is faster.
    cols = [(p, w) for p in others for w in workers]
    if cols:
        dat = ctx.out_dir / "ratios.dat"
        with open(dat, "w") as f:
            f.write("bench " + " ".join(f'"{SUBJECT}/{p} w={w}"'
                                        for p, w in cols) + "\n")
            for b in benches:
                vals = []
                for p, w in cols:
                    s = by.get((b, w))
                    r = s["ratios"].get(p) if s else None
                    vals.append(f"{r['median']:.4f}" if r else "?")
                f.write(f'"{b}" ' + " ".join(vals) + "\n")
        png = ctx.out_dir / "ratios.png"
        plot = ", ".join(f"'{dat}' using {i + 2}:xtic(1) title columnhead"
                         for i in range(len(cols)))
        ok = gnuplot(f"""{term}
set output '{png}'
set title 'weft time / peer time (median of pairs; < 1: weft faster)'
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set yrange [0:*]
set ylabel 'ratio'
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2
plot {plot}
""", ctx)
        if ok:
            made.append(png)

    # scaling.png: speed-up vs one worker, per benchmark, weft solid and
    # peers dashed, with the ideal line.
    sweep = [b for b in benches
             if sum(1 for w in workers if (b, w) in by) > 1 and 1 in workers]
    if sweep:
        dat = ctx.out_dir / "scaling.dat"
        names = [p.name for p in peers]
        with open(dat, "w") as f:
            for b in sweep:
                for pn in names:
                    f.write(f"# {b} {pn}\n")
                    for w in workers:
                        s = by.get((b, w))
                        v = s["scaling"].get(pn) if s else None
                        if v is not None:
                            f.write(f"{w} {v:.4f}\n")
                    f.write("\n\n")
        png = ctx.out_dir / "scaling.png"
        parts, idx = [], 0
        for bi, b in enumerate(sweep):
            for pi, pn in enumerate(names):
                dt = 1 if pi == 0 else pi + 1
                parts.append(f"'{dat}' index {idx} using 1:2 with linespoints "
                             f"lc {bi + 1} dt {dt} pt {pi + 5} "
                             f"title '{b} ({pn})'")
                idx += 1
        ok = gnuplot(f"""{term}
set output '{png}'
set title 'speed-up vs 1 worker (median times)'
set xlabel 'workers'
set ylabel 'speed-up'
set xtics ({", ".join(str(w) for w in workers)})
set xrange [{min(workers) - 0.2}:{max(workers) + 0.2}]
set yrange [0:*]
set grid
set key top left
plot x with lines lc 'gray' dt 3 title 'ideal', {", ".join(parts)}
""", ctx)
        if ok:
            made.append(png)
    return made


# -------------------------------------------------------------------- main


def metadata(args, peers: List[Peer]) -> dict:
    def out(cmd, cwd=None):
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True,
                                  timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            return None
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
        "git": out(["git", "describe", "--always", "--dirty"], cwd=ROOT),
        "go": out(["go", "version"]) if shutil.which("go") else None,
        "runs": args.runs,
        "workers": args.workers,
        "peers": [p.name for p in peers],
        "argv": sys.argv[1:],
    }


DOCS = ROOT / "docs" / "bench.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def update_docs(md: Path, charts_made) -> None:
    """Replaces the generated section of docs/bench.md with this run's table
    and copies the charts to docs/bench/; the prose around it is kept."""
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"bench.py: {DOCS} lacks the {BEGIN} / {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = md.read_text()
    img_dir = DOCS.parent / "bench"
    img_dir.mkdir(exist_ok=True)
    for chart in charts_made:
        chart = Path(chart)
        shutil.copy(chart, img_dir / chart.name)
        body += f"\n![{chart.stem}](bench/{chart.name})\n"
    DOCS.write_text(head + BEGIN + "\n" + body + END + tail)
    print(f"updated {DOCS}")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="weft scheduler benchmarks vs peer runtimes")
    ap.add_argument("--quick", action="store_true",
                    help="3 runs per point instead of 5 (same sizes)")
    ap.add_argument("--only", metavar="NAME[,NAME]",
                    help="only these benchmarks: " +
                    ", ".join(b.name for b in BENCHMARKS))
    ap.add_argument("--peers", metavar="NAME[,NAME]",
                    help="only these peers besides weft: " +
                    ", ".join(p.name for p in PEERS[1:]))
    ap.add_argument("--workers", metavar="LIST",
                    help="worker counts, e.g. 1,2,4 (default: 1 and the CPUs "
                    "in the affinity mask)")
    ap.add_argument("--runs", type=int, help="runs per point (default 5)")
    ap.add_argument("--build-dir", default="build", type=Path,
                    help="meson build directory (default: build)")
    ap.add_argument("--json", type=Path,
                    help="results file (default: BUILD/bench/results.json)")
    ap.add_argument("--docs", action="store_true",
                    help="also write the table and charts into docs/bench.md")
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds per invocation (default 300)")
    args = ap.parse_args(argv)
    if args.runs is None:
        args.runs = 3 if args.quick else 5
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.workers:
        try:
            ws = sorted({int(x) for x in args.workers.split(",") if x.strip()})
        except ValueError:
            ap.error(f"--workers: not a list of integers: {args.workers!r}")
        if not ws or ws[0] < 1 or ws[-1] > 1024:
            ap.error("--workers: counts must be 1..1024")
        args.workers = ws
    else:
        args.workers = sorted({1, len(os.sched_getaffinity(0))})
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

    args.only = pick("--only", args.only, [b.name for b in BENCHMARKS])
    args.peers = pick("--peers", args.peers, [p.name for p in PEERS[1:]])
    if not args.build_dir.is_absolute():
        args.build_dir = (Path.cwd() / args.build_dir).resolve()
    if args.json is None:
        args.json = args.build_dir / "bench" / "results.json"
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out_dir = args.build_dir / "bench"
    ctx = Ctx(args.build_dir, out_dir, [])

    build_weft(ctx)  # fail early, before creating anything
    out_dir.mkdir(parents=True, exist_ok=True)
    peers: List[Peer] = []
    for p in PEERS:
        if p.name != SUBJECT and p.name not in args.peers:
            continue
        try:
            p.program = p.build(ctx)
        except Skip as e:
            print(f"bench.py: skipping peer {p.name}: {e}")
            continue
        peers.append(p)
    print(f"bench.py: peers: {', '.join(p.name for p in peers)}; workers: "
          f"{', '.join(map(str, args.workers))}; runs: {args.runs}",
          file=sys.stderr)

    prog = Progress()
    failures: List[str] = []
    points = []
    summary = []
    t_start = time.monotonic()
    for bench in (b for b in BENCHMARKS if b.name in args.only):
        ws = ([bench.fixed_workers] if bench.fixed_workers else args.workers)
        for w in ws:
            tag = f"[{bench.name} w={w}]"
            bpeers = [p for p in peers
                      if p.benches is None or bench.name in p.benches]
            runs: Dict[str, List[dict]] = {p.name: [] for p in bpeers}
            warm: Dict[str, dict] = {}

            def note(rec, what):
                if not rec["ok"]:
                    msg = f"{tag} {rec['peer']} {what}: {rec['error']}"
                    failures.append(msg)
                    prog.say("FAIL " + msg)
                    tail = (rec.get("stderr") or "").strip().splitlines()[-5:]
                    for t in tail:
                        prog.say("     | " + t)

            for p in bpeers:
                prog.show(f"{tag} {p.name} warm-up")
                warm[p.name] = run_one(p, bench, w, args.timeout)
                note(warm[p.name], "warm-up")
            for i in range(args.runs):
                # alternate who goes first, so neither always runs on a
                # machine the other just warmed (or heated)
                order = bpeers if i % 2 == 0 else bpeers[::-1]
                for p in order:
                    prog.show(f"{tag} {p.name} run {i + 1}/{args.runs}")
                    rec = run_one(p, bench, w, args.timeout)
                    runs[p.name].append(rec)
                    note(rec, f"run {i + 1}")
            points.append({"bench": bench.name, "workers": w,
                           "warmup": warm, "runs": runs})
            summary.append(summarize(bench, w, runs, bpeers))
    prog.done()
    elapsed = time.monotonic() - t_start

    add_scaling(summary, peers)
    head, rows = table_rows(summary, peers)
    meta = metadata(args, peers)
    meta["elapsed_s"] = round(elapsed, 1)

    print()
    print(text_table(head, rows))
    print()
    print(f"lower is better; {SUBJECT}/peer is the median of per-run time "
          f"ratios (< 1: {SUBJECT} faster); scaling is the {SUBJECT} speed-up "
          f"vs 1 worker; {args.runs} runs per point; {elapsed:.0f} s in all")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta,
                   "benchmarks": [dataclasses.asdict(b) for b in BENCHMARKS
                                  if b.name in args.only],
                   "summary": summary, "points": points,
                   "failures": failures}, f, indent=1)
        f.write("\n")

    md = out_dir / "results.md"
    with open(md, "w") as f:
        f.write(f"<!-- generated by scripts/bench.py on {meta['date']} -->\n")
        f.write(f"Measured on {meta['cpu'] or 'unknown CPU'}, "
                f"{meta['cpus_affinity']} CPUs, Linux {meta['kernel']}, "
                f"{meta['go'] or 'no Go'}; weft {meta['git'] or '(no git)'}; "
                f"{args.runs} runs per point.\n\n")
        for b in BENCHMARKS:
            if b.name in args.only:
                f.write(f"- **{b.name}**: {b.title}\n")
        f.write("\n" + md_table(head, rows) + "\n\n")
        f.write(f"Lower is better.  Cells are median (min–max) over the runs; "
                f"{SUBJECT}/peer is the median of run-by-run time ratios "
                f"(below 1: {SUBJECT} is faster); scaling is {SUBJECT}'s "
                f"speed-up at that worker count over 1 worker.\n")
        if failures:
            f.write("\n**Failures:**\n\n" +
                    "".join(f"- {x}\n" for x in failures))

    made = charts(summary, peers, args.workers, ctx)
    print(f"wrote {args.json}, {md}" +
          "".join(f", {m}" for m in made))
    if args.docs:
        update_docs(md, made)
    if failures:
        print(f"bench.py: {len(failures)} failure(s):", file=sys.stderr)
        for x in failures:
            print("  " + x, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
