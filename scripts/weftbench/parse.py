# SPDX-License-Identifier: MIT
"""Reading results: the RESULT lines of the bench programs and of loadgen,
and wrk's report in the same shape."""

import re
import subprocess
from typing import Dict, Optional


RESULT_RE = re.compile(r"^RESULT\s+(.*)$", re.M)


def parse_result(text: str) -> Optional[Dict[str, str]]:
    m = RESULT_RE.findall(text)
    if len(m) != 1:
        return None
    return dict(kv.split("=", 1) for kv in m[0].split() if "=" in kv)


# weft's own histograms as WEFT_STATS=1 prints them at shutdown
# (lib/stats.c): "sched_delay  N timed, p50 < X ns, p99 < Y ns, ..."
WEFT_HIST_RE = re.compile(r"^(sched_delay|turn_time)\s+\d+ timed, p50 < (\d+) ns, "
                          r"p99 < (\d+) ns", re.M)


def weft_sched(text: str) -> Dict[str, str]:
    """The scheduling delay's p50 and p99 and the turn time's p99, in ns
    (bucket bounds), from a weft program's WEFT_STATS=1 output; {} if it
    has none."""
    h = {name: (p50, p99) for name, p50, p99 in WEFT_HIST_RE.findall(text)}
    if set(h) != {"sched_delay", "turn_time"}:
        return {}
    return {"sched_p50_ns": h["sched_delay"][0], "sched_p99_ns": h["sched_delay"][1],
            "turn_p99_ns": h["turn_time"][1]}


# and its rings' line: "rings  N SQEs, M submissions, ..." (0 under epoll)
WEFT_RINGS_RE = re.compile(r"^rings\s+(\d+) SQEs, (\d+) submissions", re.M)


def weft_rings(text: str) -> Dict[str, str]:
    """The SQEs weft's rings took and the io_uring_enter calls that
    submitted them, over the program's life, from its WEFT_STATS=1
    output; {} if it has none."""
    m = WEFT_RINGS_RE.findall(text)
    return {"ring_sqes": m[-1][0], "ring_enters": m[-1][1]} if m else {}


def judge(r: Optional[Dict[str, str]], p: subprocess.CompletedProcess,
          name: str, workers: int) -> dict:
    """The fields of a run's record from its RESULT (r) and its process (p):
    ok=True and the numbers, or ok=False and why."""
    err = None
    if r is None:
        err = "no RESULT line"
    elif r.get("check") != "ok":
        err = f"check={r.get('check')}"
    elif r.get("name") != name or r.get("workers") != str(workers):
        err = f"RESULT for name={r.get('name')} workers={r.get('workers')}"
    elif p.returncode != 0:
        err = f"exit status {p.returncode}"
    if p.returncode < 0:
        err = f"killed by signal {-p.returncode}" + (f" ({err})" if err else "")
    rec = {}
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
        rec["extra"].update(weft_sched(p.stderr or ""))
    else:
        rec.update(ok=False, error=err, rc=p.returncode,
                   stdout=p.stdout[-2000:], stderr=p.stderr[-2000:])
    return rec
WRK_DONE_RE = re.compile(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),", re.M)
WRK_RATE_RE = re.compile(r"^Requests/sec:\s+([\d.]+)", re.M)
WRK_PCT_RE = re.compile(r"^\s+(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s|m)\s*$", re.M)
WRK_ERR_RE = re.compile(r"Socket errors: connect (\d+), read (\d+), "
                        r"write (\d+), timeout (\d+)")
WRK_NON2XX_RE = re.compile(r"Non-2xx or 3xx responses: (\d+)")
TO_US = {"us": 1, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def wrk_result(text: str, name: str, impl: str,
               workers: int) -> Optional[Dict[str, str]]:
    """wrk's report as the fields of a RESULT line; None if it is not one.
    Any socket error or non-2xx answer fails the check."""
    done, rate = WRK_DONE_RE.search(text), WRK_RATE_RE.search(text)
    pct = {k: float(v) * TO_US[u] for k, v, u in WRK_PCT_RE.findall(text)}
    if not done or not rate or set(pct) != {"50", "99"}:
        return None
    errs = WRK_ERR_RE.search(text)
    socket_errors = sum(map(int, errs.groups())) if errs else 0
    non2xx = WRK_NON2XX_RE.search(text)
    non2xx = int(non2xx[1]) if non2xx else 0
    ok = socket_errors == 0 and non2xx == 0 and int(done[1]) > 0
    return {"name": name, "impl": impl, "workers": str(workers),
            "ns": str(round(float(done[2]) * TO_US[done[3]] * 1e3)),
            "ops": done[1], "value": str(round(float(rate[1]))),
            "check": "ok" if ok else "fail",
            "p50_us": f"{pct['50']:.1f}", "p99_us": f"{pct['99']:.1f}",
            "socket_errors": str(socket_errors), "non2xx": str(non2xx)}
