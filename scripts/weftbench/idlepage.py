# SPDX-License-Identifier: MIT
"""The idle-tax tables (issue 46), from results.json's "idle_tax" section
(idle.py): the light-load echo at 1-8 workers with every peer's CPU per
message over its own at 1 and the counts that explain it, and the
scheduler rows at 8 workers beside Go's (and Tokio's)."""

from typing import List, Optional, Tuple

from .fmt import fmt_num, fmt_ratio, fmt_sig
from .idle import IDLE_SERVER, cpu_growth, idle_sched, idle_servers
from .targets import SUBJECT

DASH = "—"
Table = Tuple[Tuple[List[str], List[List[str]]], str]

SERVER_NOTE = (
    f"{IDLE_SERVER.title}.  CPU µs per message and voluntary switches per "
    f"message as in the cost table (the server process, the load's timed "
    f"window); \"@N/@1\": the peer's median CPU per message at N workers "
    f"over its own at 1 (below or near 1: idle workers cost nothing).  "
    f"weft's counts are the WEFT_STATS=1 table the server prints at its "
    f"exit, over its whole life: per message, the messages of the window "
    f"and of the load's warm-up (counted at the window's rate); steal "
    f"attempts per stolen coroutine (steal_attempts / steals).  Syscalls: "
    f"the untimed strace pass of the cost table (— : not counted).  Server "
    f"and load unpinned at every count, 1 included, sharing the CPUs (so "
    f"that only the worker count changes; past the CPUs on purpose).")
SCHED_NOTE = (
    "Each invocation under wait4(2): its timed run (ms, the RESULT line), "
    "system time (s) and voluntary context switches of the whole process "
    "(both of the program's runs of the row: its warm-up and the timed "
    "one), medians over the runs; weft/peer: medians of run-by-run "
    "ratios.  weft's steal attempts per stolen coroutine and sleeps: its "
    "WEFT_STATS=1 table (the same process, both runs).")


def _med(mr: Optional[dict], fmt=fmt_sig) -> str:
    return fmt(mr["median"]) if mr else DASH


def _peers(rows: List[dict]) -> List[str]:
    names = dict.fromkeys(p for s in rows for p in s.get("peers") or {}
                          if not p.endswith("_failed"))
    return [SUBJECT] * (SUBJECT in names) + [p for p in names
                                              if p != SUBJECT]


def server_rows(res: dict) -> Optional[Tuple[List[str], List[List[str]]]]:
    ss = idle_servers(res)
    if not ss:
        return None
    peers = _peers(ss)
    head = (["row", "workers", f"{SUBJECT} CPU µs/msg"] +
            [f"{p} @N/@1" for p in peers] +
            [f"{SUBJECT} wakeups/msg", f"{SUBJECT} sleeps/msg",
             f"{SUBJECT} steal attempts/steal"] +
            [f"{p} vol. switches/msg" for p in peers] +
            [f"{p} syscalls/msg" for p in peers])
    rows = []
    for s in ss:
        m = s["peers"].get(SUBJECT) or {}
        st = s.get("weft_stats") or {}
        grow = [cpu_growth(ss, s["bench"], p, s["workers"]) for p in peers]
        sc = s.get("syscalls") or {}
        rows.append(
            [s["bench"], str(s["workers"]), _med(m.get("cpu_us_per_msg"))] +
            [DASH if g is None else f"{g:.2f}" for g in grow] +
            [_med(st.get("wakeups_per_msg")), _med(st.get("sleeps_per_msg")),
             _med(st.get("steal_attempts_per_steal"), fmt_num)] +
            [_med((s["peers"].get(p) or {}).get("vcsw_per_msg"))
             for p in peers] +
            [fmt_sig(sc[p]["per_msg"]) if "per_msg" in (sc.get(p) or {})
             else DASH for p in peers])
    return head, rows


def sched_rows(res: dict) -> Optional[Tuple[List[str], List[List[str]]]]:
    ss = idle_sched(res)
    if not ss:
        return None
    peers = _peers(ss)
    others = [p for p in peers if p != SUBJECT]
    head = (["row", "workers"] + [f"{p} ms" for p in peers] +
            [f"{SUBJECT}/{p} time" for p in others] +
            [f"{p} system s" for p in peers] +
            [f"{p} vol. switches" for p in peers] +
            [f"{SUBJECT}/{p} vol. switches" for p in others] +
            [f"{SUBJECT} steal attempts per stolen coroutine",
             f"{SUBJECT} sleeps"])
    rows = []
    for s in ss:
        pm = lambda p, k: (s["peers"].get(p) or {}).get(k)
        rt = lambda p, k: ((s.get("ratios") or {}).get(p) or {}).get(k)
        st = s.get("weft_stats") or {}
        rows.append(
            [s["bench"], str(s["workers"])] +
            [_med(pm(p, "ms"), fmt_num) for p in peers] +
            [fmt_ratio(rt(p, "ms")) for p in others] +
            [_med(pm(p, "stime_s")) for p in peers] +
            [_med(pm(p, "vcsw"), fmt_num) for p in peers] +
            [fmt_ratio(rt(p, "vcsw")) for p in others] +
            [_med(st.get("steal_attempts_per_steal"), fmt_num),
             _med(st.get("sleeps"), fmt_num)])
    return head, rows


def load_note(res: dict) -> str:
    it = res.get("idle_tax") or {}
    la, lb = it.get("loadavg"), it.get("loadavg_after")
    if not la:
        return ""
    return (f"  Load average (1, 5, 15 min) at the start: "
            f"{', '.join(map(str, la))}" +
            (f"; at the end: {', '.join(map(str, lb))}" if lb else "") + ".")


def idle_tables(res: dict) -> List[Table]:
    """((head, rows), footnote) of each idle-tax table the run has."""
    out = []
    srv, sch = server_rows(res), sched_rows(res)
    if srv:
        out.append((srv, SERVER_NOTE + load_note(res)))
    if sch:
        out.append((sch, SCHED_NOTE + load_note(res)))
    return out


def idle_section(res: dict) -> Optional[str]:
    """docs/bench.md's idle-tax section: each table and its footnote."""
    from .page import md_table
    parts = [md_table(*hr, left=2) + "\n\n" + note
             for hr, note in idle_tables(res)]
    return "\n\n".join(parts) or None
