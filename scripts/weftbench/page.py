# SPDX-License-Identifier: MIT
"""docs/bench.md, generated from one run's results.json and the prose of
its template (docs/bench.md.in): every table, figure and verdict on the
page comes from that JSON; the template holds only prose and the places
(lines "{{NAME}}", SECTIONS) where the generated parts go.

    python3 scripts/bench.py --page RESULTS.json   (no run: the page only)
    scripts/run bench --docs                       (a run, then the page)

The tables are split by family, with the columns a reader compares (the
rest stays in the JSON); the charts are drawn from the same JSON into
docs/bench/."""

import re
import shutil
import statistics
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Dict, List, Optional

from .benches import server_label
from .fmt import fmt_num, fmt_ratio, fmt_sig
from .idlepage import idle_section
from .targets import SUBJECT, table as targets_table, tally

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "docs" / "bench.md.in"
PAGE = ROOT / "docs" / "bench.md"
PLACE = re.compile(r"^\{\{([a-z-]+)\}\}$", re.M)

SCHEDULER = ["yield", "spawn", "skynet", "fib", "sleep", "parked"]
SYNC = ["chan-pingpong", "chan-pingpong-1000", "skynet-chan", "mutex", "sem",
        "rwlock", "local-get"]
# (row, RESULT field, what it is, divisor)
MEMORY = [("skynet", "rss_kb", "peak RSS, MiB", 1024),
          ("sleep", "rss_kb", "peak RSS, MiB", 1024),
          ("parked", "rss_per_co_b", "RSS per parked coroutine, bytes", 1),
          ("parked", "vm_mib", "virtual memory, MiB", 1),
          ("parked", "maps", "mappings", 1)]
DASH = "—"


def md_table(head: List[str], rows: List[List[str]], left: int = 1) -> str:
    """A Markdown table: the first `left` columns left, the others right."""
    esc = lambda c: c.replace("|", "\\|")
    return "\n".join(
        ["| " + " | ".join(map(esc, head)) + " |",
         "|" + "|".join("---" if i < left else "--:"
                        for i in range(len(head))) + "|"] +
        ["| " + " | ".join(map(esc, r)) + " |" for r in rows])


def micro_table(res: dict, family: List[str]) -> Optional[str]:
    """weft's median and its time over each peer's, with the speed-up."""
    rows = [s for b in family for s in res.get("summary") or []
            if s["bench"] == b]
    if not rows:
        return None
    peers = [p for p in res["meta"].get("peers", []) if p != SUBJECT and
             any(p in s["ratios"] for s in rows)]
    head = ["benchmark", "unit", "workers", SUBJECT, DELAY_HEAD] + [
        f"{SUBJECT}/{p}" for p in peers] + ["speed-up over 1 worker"]
    out = []
    for s in rows:
        m = s["peers"].get(SUBJECT)
        sc = (s.get("scaling") or {}).get(SUBJECT)
        out.append([s["bench"], s["unit"], str(s["workers"]),
                    fmt_num(m["median"]) if m else "FAILED",
                    sched_cell(res, s["bench"], s["workers"], DELAY_KEYS)] +
                   [fmt_ratio(s["ratios"].get(p)) for p in peers] +
                   [f"{sc:.2f}x" if sc is not None and s["workers"] > 1
                    else DASH])
    return md_table(head, out)


# weft's own scheduling delay p50/p99 and turn time p99 (WEFT_STATS=1,
# parse.weft_sched), medians over the runs, in µs
DELAY_HEAD = f"{SUBJECT} delay p50/p99 µs"
DELAY_KEYS = ("sched_p50_ns", "sched_p99_ns")
TURN_HEAD = f"{SUBJECT} turn p99 µs"


def sched_cell(res: dict, bench: str, workers: int, keys) -> str:
    """The subject's medians of the extra fields keys (ns), as µs "a/b"."""
    xs = [extra_median(res, bench, workers, SUBJECT, k) for k in keys]
    if any(x is None for x in xs):
        return DASH
    return "/".join(fmt_num(x / 1000) for x in xs)


def extra_median(res: dict, bench: str, workers: int, peer: str,
                 key: str) -> Optional[float]:
    xs = [float(r["extra"][key]) for pt in res.get("points") or []
          if pt["bench"] == bench and pt["workers"] == workers
          for r in pt["runs"].get(peer, [])
          if r.get("ok") and key in r.get("extra", {})]
    return statistics.median(xs) if xs else None


def memory_table(res: dict) -> Optional[str]:
    peers = res["meta"].get("peers", [])
    rows = []
    for bench, key, what, div in MEMORY:
        for w in sorted({pt["workers"] for pt in res.get("points") or []
                         if pt["bench"] == bench}):
            cells = [extra_median(res, bench, w, p, key) for p in peers]
            if any(c is not None for c in cells):
                rows.append([bench, str(w), what] + [
                    DASH if c is None else fmt_amount(c / div) for c in cells])
    if not rows:
        return None
    keep = [i for i in range(len(peers)) if any(r[3 + i] != DASH for r in rows)]
    return md_table(["benchmark", "workers", "measure"] +
                    [peers[i] for i in keep],
                    [r[:3] + [r[3 + i] for i in keep] for r in rows], left=3)


def fmt_amount(x: float) -> str:
    """A count as a whole number, other amounts as the tables show them."""
    return f"{x:.0f}" if x == int(x) else fmt_num(x)


def server_peers(res: dict) -> List[str]:
    ss = (res.get("servers") or {}).get("summary") or []
    return [p for p in res["meta"].get("peers", [])
            if p != SUBJECT and any(p in s["peers"] for s in ss)]


def ratio_pair(s: dict, peer: str, keys=("rate", "p99")) -> str:
    r = s["ratios"].get(peer) or {}
    cells = [r.get(k) for k in keys]
    if not any(cells):
        return DASH
    return " / ".join(f"{c['median']:.2f}" if c else DASH for c in cells)


def server_table(res: dict) -> Optional[str]:
    ss = (res.get("servers") or {}).get("summary") or []
    if not ss:
        return None
    peers = server_peers(res)
    head = ["row", "unit", f"{SUBJECT} rate", f"{SUBJECT} p99 µs", DELAY_HEAD,
            TURN_HEAD] + [f"{SUBJECT}/{p} rate / p99" for p in peers]
    rows = []
    srv = res.get("servers") or {}
    for s in ss:
        m = s["peers"].get(SUBJECT) or {}
        rows.append([server_label(s["bench"], s["workers"], s.get("sharing")),
                     s["unit"],
                     fmt_num(m["rate"]["median"]) if m.get("rate") else "FAILED",
                     fmt_num(m["p99_us"]["median"]) if m.get("p99_us") else DASH,
                     sched_cell(srv, s["bench"], s["workers"], DELAY_KEYS),
                     sched_cell(srv, s["bench"], s["workers"], ("turn_p99_ns",))]
                    + [ratio_pair(s, p) for p in peers])
    return md_table(head, rows)


def cost_table(res: dict) -> Optional[str]:
    ss = [s for s in (res.get("servers") or {}).get("summary") or []
          if (s["peers"].get(SUBJECT) or {}).get("cpu_us_per_msg")]
    if not ss:
        return None
    peers = server_peers(res)
    head = ["row", f"{SUBJECT} CPU µs", f"{SUBJECT} voluntary switches"] + [
        f"{SUBJECT}/{p} CPU" for p in peers]
    rows = []
    for s in ss:
        m = s["peers"][SUBJECT]
        vc = m.get("vcsw_per_msg")
        rows.append([server_label(s["bench"], s["workers"], s.get("sharing")),
                     fmt_sig(m["cpu_us_per_msg"]["median"]),
                     fmt_sig(vc["median"]) if vc else DASH] +
                    [fmt_ratio((s["ratios"].get(p) or {}).get("cpu"))
                     for p in peers])
    return md_table(head, rows)


def clients_table(res: dict) -> Optional[str]:
    rs = (res.get("redis") or {}).get("summary") or []
    if not rs:
        return None
    modes = ["hooks", "threads", "async"]
    head = ["row", "unit"] + [f"{m} rate" for m in modes] + [
        "hooks/threads rate", "hooks/async rate", "hooks/threads peak RSS"]
    rows = []
    for s in rs:
        ms, rt = s["modes"], s["ratios"]
        rows.append([s["bench"], s["unit"]] + [
            fmt_num(ms[m]["rate"]["median"])
            if (ms.get(m) or {}).get("rate") else DASH for m in modes] + [
            fmt_ratio((rt.get("threads") or {}).get("rate")),
            fmt_ratio((rt.get("async") or {}).get("rate")),
            fmt_ratio((rt.get("threads") or {}).get("rss"))])
    return md_table(head, rows)


def files_table(res: dict) -> Optional[str]:
    fs = (res.get("file") or {}).get("summary") or []
    if not fs:
        return None
    from .fileio import IMPLS, SUBJECT as FSUBJECT
    others = IMPLS[1:]
    head = ["row"] + [f"{m} reads/s" for m in IMPLS] + [
        f"{FSUBJECT} CPU µs/read"] + [f"{FSUBJECT}/{m} reads/s" for m in others] + [
        f"{FSUBJECT}/{m} CPU per read" for m in others]
    rows = []
    for s in fs:
        ms, rt = s["impls"], s["ratios"]
        cpu = (ms.get(FSUBJECT) or {}).get("cpu_us")
        rows.append([s["label"]] + [
            fmt_num(ms[m]["rate"]["median"])
            if (ms.get(m) or {}).get("rate") else DASH for m in IMPLS] +
            [fmt_sig(cpu["median"]) if cpu else DASH] +
            [fmt_ratio((rt.get(m) or {}).get("rate")) for m in others] +
            [fmt_ratio((rt.get(m) or {}).get("cpu")) for m in others])
    return md_table(head, rows)


def floors_table(res: dict) -> Optional[str]:
    fs = [f for f in (res.get("floors") or {}).get("summary") or []
          if f.get("ns")]
    if not fs:
        return None
    return md_table(["floor", "ns (median)"],
                    [[f["floor"], fmt_num(f["ns"]["median"])] for f in fs])


def run_line(res: dict) -> str:
    m = res["meta"]
    quick = "--quick" in (m.get("argv") or [])
    peer_runs = m.get("peer_runs", m.get("runs"))
    return (f"Run of {m['date'][:16].replace('T', ' ')} UTC, weft "
            f"{m.get('git') or '(no git)'}, {m.get('cpus_affinity')} CPUs "
            f"({m.get('cpu') or 'unknown CPU'}), Linux {m.get('kernel')}; "
            f"`scripts/bench.py {' '.join(m.get('argv') or [])}`"
            f"{' (a quick run)' if quick else ''}: {m.get('runs')} runs per "
            f"point for weft, {peer_runs} for each peer, the peers at "
            f"{', '.join(map(str, m.get('peer_workers') or []))} workers; "
            f"peers: " + ", ".join(
                f"{p} ({v})" if v else p for p, v in
                [(p, (m.get("versions") or {}).get(p)) for p in
                 m.get("peers", [])]) +
            "".join(f"; {b} left out: {why}" for b, why in
                    ((m.get("servers") or {}).get("backends") or {}).items()
                    if why != "ran") +
            (f".  {len(res['failures'])} failed invocation(s): "
             + "; ".join(res["failures"]) if res.get("failures") else "") +
            ".")


def targets_section(res: dict) -> str:
    """The tally, then the table, each target's words on its first row
    only."""
    head, rows = targets_table(res)
    n = tally(res)
    shown = []
    for i, r in enumerate(rows):
        same = i > 0 and rows[i - 1][:2] == r[:2]
        shown.append(["", ""] + r[2:] if same else r)
    return (f"{n['met']} met, {n['not met']} not met, {n['not measured']} not "
            f"measured by this run.\n\n" + md_table(head, shown, left=4))


def charts_section(made: List[str]) -> str:
    return "\n\n".join(f"![{Path(c).stem}](bench/{Path(c).name})"
                       for c in made) or "(no charts: gnuplot was not found)"


SECTIONS: Dict[str, Callable[[dict], Optional[str]]] = {
    "run": run_line,
    "scheduler": lambda r: micro_table(r, SCHEDULER),
    "sync": lambda r: micro_table(r, SYNC),
    "memory": memory_table,
    "servers": server_table,
    "cost": cost_table,
    "clients": clients_table,
    "files": files_table,
    "floors": floors_table,
    "targets": targets_section,
    "idle-tax": idle_section,
}


def render(template: str, res: dict, made: List[str]) -> str:
    """The page: template with each {{NAME}} line replaced by its section
    (a family the run did not measure: "Not measured by this run.")."""
    def fill(m):
        name = m.group(1)
        if name == "charts":
            return charts_section(made)
        if name not in SECTIONS:
            raise ValueError(f"unknown section {{{{{name}}}}}")
        return SECTIONS[name](res) or "Not measured by this run."
    return PLACE.sub(fill, template)


def draw_charts(res: dict, img_dir: Path) -> List[str]:
    """The charts of this JSON, into img_dir (the stale ones removed)."""
    from .charts import charts
    names = res["meta"].get("peers", [])
    peers = [SimpleNamespace(name=p) for p in names]
    speers = [SimpleNamespace(name=p) for p in [SUBJECT] + server_peers(res)]
    img_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        made = charts(res.get("summary") or [],
                      (res.get("servers") or {}).get("summary") or [],
                      peers, speers, res["meta"].get("workers") or [1],
                      SimpleNamespace(out_dir=Path(tmp)))
        for old in img_dir.glob("*.png"):
            old.unlink()
        for c in made:
            shutil.copy(c, img_dir / Path(c).name)
    return [str(img_dir / Path(c).name) for c in made]


def write_page(res: dict, template: Path = TEMPLATE, page: Path = PAGE,
               charts: bool = True) -> Path:
    made = draw_charts(res, page.parent / "bench") if charts else []
    text = render(template.read_text(), res, made)
    page.write_text("<!-- generated by scripts/bench.py from " +
                    f"{template.name} and a results.json; edit the template -->\n"
                    + text)
    return page
