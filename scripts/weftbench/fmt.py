"""Numbers as the tables show them."""

from typing import Optional


def fmt_num(x: float) -> str:
    if x >= 1000:
        return f"{x:.0f}"
    if x >= 100:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_mr(mr: Optional[dict], failed: int = 0) -> str:
    if mr is None:
        return "FAILED" if failed else "—"
    s = fmt_num(mr["median"])
    if mr.get("n", 2) > 1:
        s += f" ({fmt_num(mr['min'])}–{fmt_num(mr['max'])})"
    return s + (f" [{failed} failed]" if failed else "")


def fmt_ratio(mr: Optional[dict]) -> str:
    if mr is None:
        return "—"
    if mr.get("n", 2) == 1:
        return f"{mr['median']:.2f}"
    return f"{mr['median']:.2f} ({mr['min']:.2f}–{mr['max']:.2f})"
