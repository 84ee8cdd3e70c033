# SPDX-License-Identifier: MIT
"""Numbers as the tables show them."""

from typing import Callable, List, Optional


def fmt_num(x: float) -> str:
    if x >= 1000:
        return f"{x:.0f}"
    if x >= 100:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_sig(x: float) -> str:
    """Three significant digits below 100 (per-message costs can be
    0.00123), else as fmt_num."""
    if abs(x) >= 100:
        return fmt_num(x)
    return f"{x:.3g}" if x else "0"


def fmt_mr(mr: Optional[dict], failed: int = 0,
           fmt: Callable[[float], str] = fmt_num) -> str:
    if mr is None:
        return "FAILED" if failed else "—"
    s = fmt(mr["median"])
    if mr.get("n", 2) > 1:
        s += f" ({fmt(mr['min'])}–{fmt(mr['max'])})"
    return s + (f" [{failed} failed]" if failed else "")


def fmt_ratio(mr: Optional[dict]) -> str:
    if mr is None:
        return "—"
    if mr.get("n", 2) == 1:
        return f"{mr['median']:.2f}"
    return f"{mr['median']:.2f} ({mr['min']:.2f}–{mr['max']:.2f})"


def target_cell(ts: List[dict]) -> str:
    """A row's targets in a table cell: each as what, ratio, met or not."""
    if not ts:
        return "—"
    return "; ".join(
        f"{t['what']}: " + ("not measured" if t["met"] is None else
                            f"{t['ratio']:.2f}, " +
                            ("met" if t["met"] else "**not met**"))
        for t in ts)
