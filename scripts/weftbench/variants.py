# SPDX-License-Identifier: MIT
"""weft in other modes as peers of its own: the same programs under extra
environment variables (WEFT_POLLER for the scaling run, WEFT_IO and
WEFT_URING_SOCKETS for the server rows), each named "weft-MODE" (or
"weft" itself: the subject in a mode), and a check that the library can
run a mode here (the reason it cannot, printed and kept, where not).

The server rows run weft under each I/O backend side by side (issue 48):

- weft: WEFT_IO=epoll, the subject;
- weft-uring: WEFT_IO=uring as users get it (sockets on readiness, files
  on the workers' rings: what `auto` takes on a kernel with io_uring);
- weft-ringsock: WEFT_IO=uring WEFT_URING_SOCKETS=1, stream sockets'
  waits on the workers' rings (with WEFT_POLLER=worker past 1 worker,
  which ring sockets need there: docs/tuning.md)."""

import dataclasses
import os
import subprocess
import sys
from typing import Callable, Dict, List, Optional, Tuple

from .peers import SUBJECT, Peer

# a value no variable of the library takes: a library that accepts it
# does not read the variable
BOGUS = "no-such-value"


@dataclasses.dataclass(frozen=True)
class Mode:
    """weft with extra environment: suffix "" is the subject itself."""
    suffix: str
    title: str
    # the variables at a worker count
    env: Callable[[int], Dict[str, str]]

    @property
    def name(self) -> str:
        return f"{SUBJECT}-{self.suffix}" if self.suffix else SUBJECT


def weft_mode(name: str) -> bool:
    """Whether a peer is weft (or weft in another mode: "weft-worker")."""
    return name == SUBJECT or name.startswith(SUBJECT + "-")


def variant(weft: Peer, mode: Mode) -> Peer:
    """weft (the subject's peer) in mode, named mode.name."""
    env = weft.env
    return dataclasses.replace(weft, name=mode.name, title=mode.title,
                               env=lambda w: {**env(w), **mode.env(w)})


def settings(env: Dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items())


def mode_check(weft: Peer, env: Dict[str, str], timeout: float = 60
               ) -> Optional[str]:
    """Why weft cannot run with env here (None: it can): a library that
    rejects it (its one stderr line: an unknown value, io_uring that
    cannot be had), or one that does not read one of its variables (it
    accepts a bogus value too, so the mode would be weft as it is)."""
    def run(extra: Dict[str, str]) -> subprocess.CompletedProcess:
        e = dict(os.environ, WEFT_WORKERS="1", **extra)
        return subprocess.run([str(weft.program), "yield", "1"], env=e,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    p = run(env)
    if p.returncode != 0:
        lines = [x for x in p.stderr.splitlines() if any(k in x for k in env)] \
            or p.stderr.strip().splitlines()[-1:] or ["no output"]
        return f"the library rejects {settings(env)}: {lines[0]}"
    for k in env:
        if run({**env, k: BOGUS}).returncode == 0:
            return (f"the library does not read {k} (it accepts {k}={BOGUS} "
                    f"too): weft under {settings(env)} would be weft as it is")
    return None


def mode_peers(weft: Peer, modes: List[Mode], workers: int, what: str
               ) -> Tuple[List[Peer], Dict[str, str]]:
    """weft once per mode it can run here (the first, the subject's, is
    not checked), and why each other mode cannot (a line printed for
    each, what: the run's name).  workers: the count whose variables
    are checked (the largest of the run: a superset)."""
    peers, skipped = [], {}
    for m in modes:
        why = mode_check(weft, m.env(workers)) if m.suffix else None
        if why:
            skipped[m.name] = why
            print(f"bench.py: {what}: {m.name} skipped: {why}",
                  file=sys.stderr)
        else:
            peers.append(variant(weft, m))
    return peers, skipped


def ring_sockets(w: int) -> Dict[str, str]:
    return {"WEFT_IO": "uring", "WEFT_URING_SOCKETS": "1",
            **({"WEFT_POLLER": "worker"} if w > 1 else {})}


# the server rows' backends; the first is the subject
BACKENDS = [
    Mode("", "weft, WEFT_IO=epoll", lambda w: {"WEFT_IO": "epoll"}),
    Mode("uring", "weft, WEFT_IO=uring (sockets on readiness, files on "
         "the rings: auto where io_uring can be had)",
         lambda w: {"WEFT_IO": "uring"}),
    Mode("ringsock", "weft, WEFT_IO=uring WEFT_URING_SOCKETS=1 (and "
         "WEFT_POLLER=worker past 1 worker)", ring_sockets),
]


def backend_peers(peers: List[Peer], counts: List[int]
                  ) -> Tuple[List[Peer], Dict[str, str]]:
    """The server rows' peers: weft under each of BACKENDS it can run here
    at the worker counts `counts`, then the others; and why each backend
    left out was."""
    weft, skipped = mode_peers(peers[0], BACKENDS, max(counts),
                               "server rows")
    return weft + peers[1:], skipped


def backends_meta(skipped: Dict[str, str]) -> Dict[str, str]:
    """Per backend of BACKENDS, "ran" or why it was left out."""
    return {m.name: skipped.get(m.name, "ran") for m in BACKENDS}


def backends_note(peers: List[Peer], skipped: Dict[str, str]) -> str:
    """The server footnote's sentence on weft's backends: which ran under
    which variables, and why any was left out."""
    names = {p.name for p in peers}
    ran = [f"{m.name}: {m.title.split(', ', 1)[1]}" for m in BACKENDS
           if m.name in names]
    out = [] if len(ran) < 2 else [
        f"weft under each I/O backend ({'; '.join(ran)}); {SUBJECT}/"
        f"{SUBJECT}-MODE rate above 1 or CPU below 1: epoll is the better "
        f"backend there."]
    out += [f"{name} left out: {why}." for name, why in skipped.items()]
    return "  ".join(out)
