# SPDX-License-Identifier: MIT
"""Records and peers as the runner makes them, for the tests."""

import subprocess
from types import SimpleNamespace

from weftbench.peers import Peer


def peer(name: str) -> Peer:
    return Peer(name, name, build=lambda ctx: None)


def rec(peer_name: str, ns: int, ops: int = 1, ok: bool = True, **extra):
    """A run's record (runs.run_one's shape); extra: RESULT fields."""
    if not ok:
        return {"peer": peer_name, "ok": False, "error": "check=fail"}
    return {"peer": peer_name, "ok": True, "ns": ns, "ops": ops, "value": 0,
            "extra": {k: str(v) for k, v in extra.items()}}


def proc(returncode: int = 0, stdout: str = "", stderr: str = ""):
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


def args(**kw):
    """cli.parse_args's namespace, with these fields."""
    base = dict(runs=3, peer_runs=3, workers=[1, 2], peer_workers=[1, 2],
                peer_warmup=True, quick=False, docs=False, only=["yield"])
    base.update(kw)
    return SimpleNamespace(**base)
