# SPDX-License-Identifier: MIT
"""Processes and ports: a command's output, a free port, a server process
started and stopped, the tail of its log."""

import contextlib
import socket
import subprocess
from pathlib import Path
from typing import Dict, List, Optional


def run_out(cmd: List[str], cwd=None) -> Optional[str]:
    """The stripped stdout of cmd, None if it cannot be had."""
    try:
        return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def free_port() -> int:
    """A port nobody listens on: the kernel picks one for a bind to port 0,
    and we let it go.  Each run gets its own, so no server of ours meets the
    previous one's connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def stop(proc: subprocess.Popen, timeout: float = 5) -> None:
    """SIGTERM, and SIGKILL if it has not exited within timeout seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def server_running(cmd: List[str], env: Dict[str, str], log: Path):
    """The server process, its output in log; terminated on the way out."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        stop(proc)
