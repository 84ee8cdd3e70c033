# SPDX-License-Identifier: MIT
"""The charts (gnuplot): ratios.png, scaling.png, servers.png."""

import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

from .peers import SUBJECT, Ctx, Peer

def gnuplot(script: str, who: str = "bench.py") -> bool:
    """Runs a gnuplot script; on failure, gnuplot's output on stderr."""
    p = subprocess.run(["gnuplot"], input=script, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        print(f"{who}: gnuplot failed:\n{p.stdout}", file=sys.stderr)
        return False
    return True


TERM = "set terminal pngcairo size 900,540 noenhanced font ',10'"


def histogram_script(png: Path, dat: Path, ncols: int, title: str,
                     axes: List[str]) -> str:
    """The gnuplot script of clustered bars from dat (a header of column
    titles, then a row per cluster: its label and ncols values, "?" for
    none), with a dashed line at 1; axes: the lines that set the y axis."""
    plot = ", ".join(f"'{dat}' using {i + 2}:xtic(1) title columnhead"
                     for i in range(ncols))
    return "\n".join([
        TERM, f"set output '{png}'", f"set title '{title}'",
        "set datafile missing '?'", "set style data histograms",
        "set style histogram clustered gap 1",
        "set style fill solid 0.8 border -1", "set key top left", *axes,
        "set grid ytics",
        "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2",
        f"plot {plot}", ""])


def histogram(png: Path, dat: Path, ncols: int, title: str,
              axes: List[str]) -> bool:
    return gnuplot(histogram_script(png, dat, ncols, title, axes))


def charts(summary: List[dict], ssummary: List[dict], peers: List[Peer],
           speers: List[Peer], workers: List[int], ctx: Ctx) -> List[Path]:
    if shutil.which("gnuplot") is None:
        print("bench.py: gnuplot not found; no charts "
              "(apt-get install -y gnuplot-nox)")
        return []
    made = server_chart(ssummary, speers, ctx)
    if not summary:
        return made
    others = [p.name for p in peers if p.name != SUBJECT]
    benches = list(dict.fromkeys(s["bench"] for s in summary))
    by = {(s["bench"], s["workers"]): s for s in summary}
    # a benchmark no peer ran has no ratio and no bars
    rbenches = [b for b in benches
                if any(s["ratios"] for s in summary if s["bench"] == b)]

    # ratios.png: clustered bars, one cluster per benchmark, a bar per
    # (peer, workers); below 1 means weft is faster.  A log scale: ratios
    # from 0.1 to 40 share the chart.
    # the (peer, workers) with a ratio somewhere (--quick: peers at the
    # largest worker count only)
    cols = [(p, w) for p in others for w in workers
            if any(s["ratios"].get(p) for s in summary if s["workers"] == w)]
    if cols:
        dat = ctx.out_dir / "ratios.dat"
        with open(dat, "w") as f:
            f.write("bench " + " ".join(f'"{SUBJECT}/{p} w={w}"'
                                        for p, w in cols) + "\n")
            for b in rbenches:
                vals = []
                for p, w in cols:
                    s = by.get((b, w))
                    r = s["ratios"].get(p) if s else None
                    vals.append(f"{r['median']:.4f}" if r else "?")
                f.write(f'"{b}" ' + " ".join(vals) + "\n")
        png = ctx.out_dir / "ratios.png"
        if histogram(png, dat, len(cols), "weft time / peer time (median of "
                     "pairs; < 1: weft faster)", [
                         "set logscale y 2", "set yrange [*:*]",
                         "set ylabel 'ratio (log scale: 1/2 and 2 equally "
                         "far from 1)'",
                         "set xtics rotate by 30 right"]):
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
        ok = gnuplot(f"""{TERM}
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
""")
        if ok:
            made.append(png)
    return made


def server_chart(ssummary: List[dict], peers: List[Peer],
                 ctx: Ctx) -> List[Path]:
    """servers.png: per server row, a bar per peer for the rate ratio and one
    for the p99 ratio; the two read in opposite directions, as the legend
    says."""
    others = [p.name for p in peers if p.name != SUBJECT]
    if not ssummary or not others:
        return []
    cols = [(p, k) for p in others for k in ("rate", "p99")]
    if not any((s["ratios"].get(p) or {}).get(k)
               for s in ssummary for p, k in cols):
        return []  # no row with a ratio: every run of a side failed
    label = {"rate": "rate (> 1: {s} serves more)",
             "p99": "p99 latency (< 1: {s} shorter tail)"}
    dat = ctx.out_dir / "servers.dat"
    with open(dat, "w") as f:
        f.write("bench " + " ".join(
            f'"{SUBJECT}/{p} {label[k].format(s=SUBJECT)}"' for p, k in cols)
            + "\n")
        for s in ssummary:
            vals = []
            for p, k in cols:
                r = (s["ratios"].get(p) or {}).get(k)
                vals.append(f"{r['median']:.4f}" if r else "?")
            f.write(f'"{s["bench"]} @{s["workers"]}'
                    f'{" sharing" if s.get("sharing") else ""}" ' +
                    " ".join(vals) + "\n")
    png = ctx.out_dir / "servers.png"
    ok = histogram(png, dat, len(cols), f"servers (@N: workers): {SUBJECT} / "
                   "peer (median of run-by-run ratios)",
                   ["set yrange [0:*]", "set ylabel 'ratio'"])
    return [png] if ok else []
