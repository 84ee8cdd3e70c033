# SPDX-License-Identifier: MIT
"""Records and peers as the runner makes them, for the tests."""

import os
import stat
import subprocess
import unittest
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from weftbench.peers import Peer


def without_weft_env(case: unittest.TestCase) -> None:
    """For the rest of case's test: an environment without WEFT_*, which
    the fake libraries would otherwise see (CI runs the suite under
    WEFT_IO=uring and WEFT_POLLER=worker)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("WEFT_")}
    patch = mock.patch.dict(os.environ, keep, clear=True)
    patch.start()
    case.addCleanup(patch.stop)


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


def fake_weft(tmp: str, script: str) -> Peer:
    """weft whose program is a shell script (its behaviour with the
    variables of its modes)."""
    prog = Path(tmp) / "weft-bench"
    prog.write_text("#!/bin/sh\n" + script)
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    return Peer("weft", "weft", build=lambda ctx: None,
                server=lambda peer, ctx, kind, port: [kind],
                env=lambda w: {"WEFT_WORKERS": str(w)}, program=prog)
