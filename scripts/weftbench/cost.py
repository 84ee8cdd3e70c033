# SPDX-License-Identifier: MIT
"""What a server spends per message: its CPU time and its voluntary
context switches over the load's timed window (from /proc), and its
system calls (from `strace -c -f`, in a separate untimed pass)."""

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

CLK_TCK = os.sysconf("SC_CLK_TCK")


def parse_stat(text: str) -> int:
    """utime + stime (fields 14 and 15, in clock ticks) of a /proc/PID/stat
    line: the whole process's, every thread's (exited ones too).  The
    command (field 2) is in parentheses and may hold spaces or parentheses
    itself, so the fields are counted from the last ')'.  ValueError if the
    line is not one."""
    _, paren, rest = text.rpartition(")")
    fields = rest.split()
    if not paren or len(fields) < 13:
        raise ValueError(f"not a /proc/PID/stat line: {text[:60]!r}")
    # fields[0] is field 3 (state): field n is fields[n - 3]
    return int(fields[14 - 3]) + int(fields[15 - 3])


VCSW_RE = re.compile(r"^voluntary_ctxt_switches:\s+(\d+)\s*$", re.M)


def parse_vcsw(text: str) -> int:
    """voluntary_ctxt_switches of a /proc/PID/task/TID/status file;
    ValueError if it has none."""
    m = VCSW_RE.search(text)
    if m is None:
        raise ValueError("no voluntary_ctxt_switches line")
    return int(m[1])


def sample(pid: int, proc: Path = Path("/proc")) -> Optional[dict]:
    """The server's CPU ticks (all threads), the sum of its live threads'
    voluntary context switches and how many threads it has now; None if
    the process is gone."""
    try:
        ticks = parse_stat((proc / str(pid) / "stat").read_text())
        vcsw, threads = 0, 0
        for task in (proc / str(pid) / "task").iterdir():
            try:
                vcsw += parse_vcsw((task / "status").read_text())
                threads += 1
            except FileNotFoundError:  # the thread exited meanwhile
                pass
        return {"ticks": ticks, "vcsw": vcsw, "threads": threads}
    except (OSError, ValueError):
        return None


def per_msg(before: Optional[dict], after: Optional[dict], msgs: int,
            clk_tck: int = CLK_TCK) -> Optional[dict]:
    """The costs of the window between two samples, per message: CPU µs
    and voluntary switches; None without both samples or messages."""
    if before is None or after is None or msgs <= 0:
        return None
    cpu_s = (after["ticks"] - before["ticks"]) / clk_tck
    vcsw = after["vcsw"] - before["vcsw"]
    return {"cpu_s": cpu_s, "vcsw": vcsw, "msgs": msgs,
            "threads": after["threads"],
            "cpu_us_per_msg": cpu_s * 1e6 / msgs,
            "vcsw_per_msg": vcsw / msgs}


STRACE_TOTAL_RE = re.compile(
    r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?total\s*$", re.M)
STRACE_ROW_RE = re.compile(
    r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)\s*$", re.M)


def parse_strace(text: str) -> Optional[dict]:
    """An `strace -c` summary: the calls of its total line, and the calls
    per syscall (its rows, most first); None without a total line."""
    m = STRACE_TOTAL_RE.search(text)
    if m is None:
        return None
    rows = {name: int(n) for n, name in STRACE_ROW_RE.findall(text)
            if name != "total"}
    return {"calls": int(m[1]),
            "by_call": dict(sorted(rows.items(), key=lambda kv: -kv[1]))}


def strace_skip() -> Optional[str]:
    """Why there can be no syscall pass here, or None."""
    if shutil.which("strace") is None:
        return "`strace` not found on PATH (apt-get install -y strace)"
    return None


def strace_start(pid: int, out: Path) -> subprocess.Popen:
    """`strace -c -f -p pid -o out`, its stderr piped ("attached" lines,
    or why it could not attach)."""
    return subprocess.Popen(["strace", "-c", "-f", "-p", str(pid),
                             "-o", str(out)],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def strace_stop(st: subprocess.Popen, out: Path) -> dict:
    """SIGINT to strace (it detaches and writes its summary), then the
    summary's numbers, or {"error": why}."""
    if st.poll() is None:
        st.send_signal(signal.SIGINT)
    try:
        _, err = st.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        st.kill()
        _, err = st.communicate()
        return {"error": "strace did not exit within 20 s of SIGINT"}
    try:
        r = parse_strace(out.read_text())
    except OSError:
        r = None
    if r is None:
        lines = [x for x in (err or "").strip().splitlines()
                 if "attached" not in x]
        return {"error": "no strace -c summary" +
                (f": {lines[-1]}" if lines else "")}
    return r


def syscall_summary(calls: Optional[dict], msgs: int) -> dict:
    """The syscall pass's record: calls, messages, calls per message and the
    five most frequent calls per message."""
    if calls is None or "error" in calls:
        return {"error": (calls or {}).get("error", "no summary")}
    if msgs <= 0:
        return {"error": "the load completed no messages"}
    return {"calls": calls["calls"], "msgs": msgs,
            "per_msg": calls["calls"] / msgs,
            "top": {k: v / msgs for k, v in
                    list(calls["by_call"].items())[:5]}}


def attach_ok(st: subprocess.Popen, wait_s: float = 0.5) -> Optional[str]:
    """None if strace is still attached after wait_s, else why not (e.g.
    ptrace denied)."""
    try:
        st.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return None
    err = (st.stderr.read() if st.stderr else "").strip().splitlines()
    return ("strace exited with status "
            f"{st.returncode}" + (f": {err[-1]}" if err else ""))


def costs_of(runs: List[dict]) -> Dict[str, List[float]]:
    """The per-message CPU µs and switches of the runs that have them."""
    good = [r["cost"] for r in runs if r.get("ok") and r.get("cost")]
    return {"cpu_us_per_msg": [c["cpu_us_per_msg"] for c in good],
            "vcsw_per_msg": [c["vcsw_per_msg"] for c in good]}
