# SPDX-License-Identifier: MIT
"""The peer runtimes: how each is built (or found) and run, and the
subject, weft, that the others are measured against."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from .benches import BENCHMARKS
from .procs import run_out

ROOT = Path(__file__).resolve().parents[2]


class Skip(Exception):
    """A peer cannot be built or run here; the message (one line) says why."""


@dataclasses.dataclass
class Peer:
    name: str
    title: str
    # build(ctx) -> path of the program; raises Skip when it cannot be had
    build: Callable[["Ctx"], Path]
    # extra environment for a run at `workers`
    env: Callable[[int], Dict[str, str]] = lambda w: {}
    # the benchmarks of BENCHMARKS it has no equivalent of -> why (the notes)
    missing: Dict[str, str] = dataclasses.field(default_factory=dict)
    # the benchmarks it takes too long at for --quick -> why (the notes)
    slow: Dict[str, str] = dataclasses.field(default_factory=dict)
    # server(peer, ctx, kind, port) -> the command of its `kind` server
    # ("echo", "http", "https", "udp-echo"); raises Skip when it has none;
    # None: no servers
    server: Optional[Callable[["Peer", "Ctx", str, int], List[str]]] = None
    # version(ctx) -> what it was built with, for the metadata (weft's is
    # the git description)
    version: Callable[["Ctx"], Optional[str]] = lambda ctx: None
    program: Optional[Path] = None  # set once built
    # its servers are the limit of the server rows (the hand-written loop):
    # the notes give its rate over each other peer's
    limit: bool = False
    # meson builds it with weft (build only finds it): --build-peers, which
    # runs beside meson, leaves it out
    by_meson: bool = False

    def absent(self, bench: "Bench", quick: bool) -> Optional[str]:
        """Why it does not run bench (a note), or None if it does."""
        if bench.name in self.missing:
            return self.missing[bench.name]
        return self.slow.get(bench.name) if quick else None


@dataclasses.dataclass
class Ctx:
    build_dir: Path
    out_dir: Path
    log: List[str]
    # --prebuilt: use the peers' programs an earlier run built, build nothing
    prebuilt: bool = False


def prebuilt(ctx: Ctx, prog: Path) -> Optional[Path]:
    """With --prebuilt, the program an earlier build left at prog (Skip if
    there is none); without it, None: build it."""
    if not ctx.prebuilt:
        return None
    if not os.access(prog, os.X_OK):
        raise Skip(f"{prog} not there (--prebuilt builds nothing)")
    return prog


def build_step(what: str, cmd: List[str], cwd: Path, log: Path,
               env: Optional[Dict[str, str]] = None) -> None:
    """Runs a peer's build command, its output in log; on failure, Skip with
    the first error line of it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=900)
    except (OSError, subprocess.SubprocessError) as e:
        raise Skip(f"{what} could not run: {e}")
    log.write_text(" ".join(cmd) + "\n" + p.stdout)
    if p.returncode != 0:
        lines = [x.strip() for x in p.stdout.splitlines() if x.strip()]
        first = next((x for x in lines if re.search(r"\berror\b", x, re.I)),
                     lines[-1] if lines else "no output")
        raise Skip(f"{what} failed (exit status {p.returncode}): {first} "
                   f"(all of it in {log})")


# The directories whose meson targets the suite runs (not test/'s)
SUITE_DIRS = ("lib", "hook", "bench", "examples")


def meson_targets(build_dir: Path) -> List[str]:
    """The targets of SUITE_DIRS in build_dir's meson project, as
    `meson compile` takes them (DIR/NAME:TYPE): scripts/run bench builds
    those alone."""
    p = subprocess.run(["meson", "introspect", str(build_dir), "--targets"],
                       stdout=subprocess.PIPE, text=True, check=True)
    out = []
    for t in json.loads(p.stdout):
        d = Path(t["defined_in"]).parent.relative_to(ROOT)
        if d.parts and d.parts[0] in SUITE_DIRS and t["type"] != "run":
            out.append(f"{d}/{t['name']}:{t['type'].replace(' ', '_')}")
    return out


def build_weft(ctx: Ctx) -> Path:
    prog = ctx.build_dir / "bench" / "weft-bench"
    if not os.access(prog, os.X_OK):
        raise SystemExit(
            f"bench.py: {prog} not found; build it first: "
            f"meson setup {ctx.build_dir} && meson compile -C {ctx.build_dir}")
    return prog


def build_go(ctx: Ctx) -> Path:
    prog = ctx.out_dir / "go-bench"
    if prebuilt(ctx, prog):
        return prog
    go = shutil.which("go")
    if go is None:
        raise Skip("`go` not found on PATH (apt-get install -y golang-go)")
    gdir = ctx.out_dir / "go"
    env = dict(os.environ)
    env.update({
        "GOCACHE": str(gdir / "cache"),
        "GOPATH": str(gdir / "path"),
        "GOMODCACHE": str(gdir / "path" / "pkg" / "mod"),
        "GOPROXY": "off",  # no external modules; works offline
        "GOFLAGS": "",
        "GO111MODULE": "on",
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
    })
    # no -trimpath: it would rebuild every package of the standard library
    # instead of reusing those GOROOT/pkg holds precompiled
    build_step("go build", [go, "build", "-o", str(prog), "."],
               ROOT / "bench" / "peers" / "go", gdir / "build.log", env)
    return prog


BOOST_SRC = ROOT / "bench" / "peers" / "boost" / "boost-bench.cpp"


def cxx() -> str:
    return os.environ.get("CXX") or "g++"


def build_boost(ctx: Ctx) -> Path:
    """g++ on the one source file, redone when the source or the command
    changed."""
    prog = ctx.out_dir / "boost-bench"
    if prebuilt(ctx, prog):
        return prog
    if shutil.which(cxx()) is None:
        raise Skip(f"`{cxx()}` not found on PATH "
                   "(apt-get install -y g++ libboost-fiber-dev)")
    cmd = [cxx(), "-O2", "-std=c++17", "-o", str(prog), str(BOOST_SRC),
           "-lboost_fiber", "-lboost_context", "-pthread"]
    stamp = ctx.out_dir / "boost" / "command"
    if (os.access(prog, os.X_OK) and stamp.exists()
            and stamp.read_text() == " ".join(cmd)
            and prog.stat().st_mtime >= BOOST_SRC.stat().st_mtime):
        return prog
    build_step(cxx(), cmd, BOOST_SRC.parent, ctx.out_dir / "boost" / "build.log")
    stamp.write_text(" ".join(cmd))
    return prog


def boost_version(ctx: Ctx) -> Optional[str]:
    v = None
    try:
        m = re.search(r'#define BOOST_LIB_VERSION "([^"]+)"',
                      Path("/usr/include/boost/version.hpp").read_text())
        v = m and m[1].replace("_", ".")
    except OSError:
        pass
    cc = run_out([cxx(), "--version"])
    return f"Boost {v or '?'}, {cc.splitlines()[0] if cc else cxx()}"


# Tokio: Debian's cargo and rustc (not a rustup toolchain that may be first
# on PATH), offline, against the crates Debian packages under DEBIAN_CRATES
# (librust-tokio-dev and the librust-*-dev it pulls in).
TOKIO_SRC = ROOT / "bench" / "peers" / "tokio"
CARGO, RUSTC = Path("/usr/bin/cargo"), Path("/usr/bin/rustc")
DEBIAN_CRATES = Path("/usr/share/cargo/registry")


def build_tokio(ctx: Ctx) -> Path:
    """cargo build --release --offline of a copy of bench/peers/tokio under
    BUILD/bench/tokio/crate (so that the Cargo.lock cargo writes stays out
    of the source tree); cargo itself skips the work when nothing changed."""
    tdir = ctx.out_dir / "tokio"
    prog = tdir / "target" / "release" / "tokio-bench"
    if prebuilt(ctx, prog):
        return prog
    for tool in (CARGO, RUSTC):
        if not os.access(tool, os.X_OK):
            raise Skip(f"{tool} not found (Debian's cargo and rustc: "
                       "apt-get install -y cargo rustc librust-tokio-dev)")
    if not any(DEBIAN_CRATES.glob("tokio-1.*")):
        raise Skip(f"no tokio crate under {DEBIAN_CRATES} "
                   "(apt-get install -y librust-tokio-dev)")
    crate = tdir / "crate"
    for src in TOKIO_SRC.rglob("*"):
        rel = src.relative_to(TOKIO_SRC)
        if not src.is_file() or rel.parts[0] in ("target", "Cargo.lock"):
            continue
        dst = crate / rel
        data = src.read_bytes()
        if not dst.exists() or dst.read_bytes() != data:  # keep cargo's mtimes
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
    env = dict(os.environ)
    env.update({"CARGO_HOME": str(tdir / "home"),  # not ~/.cargo's config
                "CARGO_TARGET_DIR": str(tdir / "target"),
                "RUSTC": str(RUSTC)})
    for k in ("RUSTFLAGS", "CARGO_BUILD_TARGET", "RUSTC_WRAPPER"):
        env.pop(k, None)
    # resolved anew against what is installed now (offline, instant), so an
    # upgraded Debian crate does not meet a stale lock; unchanged versions
    # leave cargo nothing to rebuild
    (crate / "Cargo.lock").unlink(missing_ok=True)
    print("bench.py: building the tokio peer (cargo, offline)", file=sys.stderr)
    build_step("cargo build", [str(CARGO), "build", "--release", "--offline"],
               crate, tdir / "build.log", env)
    return prog


def tokio_version(ctx: Ctx) -> Optional[str]:
    v = None
    try:
        m = re.search(r'name = "tokio"\nversion = "([^"]+)"',
                      (ctx.out_dir / "tokio" / "crate" / "Cargo.lock").read_text())
        v = m and m[1]
    except OSError:
        pass
    return f"Tokio {v or '?'}, {run_out([str(RUSTC), '--version']) or 'rustc'}"


def tls_files(ctx: Ctx) -> Tuple[Path, Path]:
    """The certificate and key (PEM) of the https servers, made at run time
    by server.make_cert."""
    return ctx.out_dir / "tls" / "cert.pem", ctx.out_dir / "tls" / "key.pem"


def server_args(ctx: Ctx, kind: str, port: int) -> List[str]:
    """A server's arguments after its kind: the port, then for https the
    certificate and key."""
    return [str(port)] + ([str(f) for f in tls_files(ctx)]
                          if kind == "https" else [])


# kind -> weft's example program (examples/) and the words before the port
WEFT_PROGRAMS = {"https": ("weft-tls", ["server"])}


def weft_server(peer: "Peer", ctx: Ctx, kind: str, port: int) -> List[str]:
    name, words = WEFT_PROGRAMS.get(kind, (f"weft-{kind}", []))
    prog = ctx.build_dir / "examples" / name
    if not os.access(prog, os.X_OK):
        why = " (OpenSSL's libssl-dev missing at meson setup?)" if (
            kind == "https") else ""
        raise Skip(f"{prog} not built{why} (meson configure {ctx.build_dir} "
                   f"-Dexamples=true && meson compile -C {ctx.build_dir})")
    return [str(prog)] + words + server_args(ctx, kind, port)


def build_epoll(ctx: Ctx) -> Path:
    """The hand-written epoll servers (bench/peers/epoll), built by meson
    with the rest of bench/."""
    prog = ctx.build_dir / "bench" / "weft-epoll"
    if not os.access(prog, os.X_OK):
        raise Skip(f"{prog} not built (meson compile -C {ctx.build_dir})")
    return prog


def subcommand_server(peer: "Peer", ctx: Ctx, kind: str, port: int) -> List[str]:
    """A program whose servers are its `KIND-server` subcommands (Go's)."""
    return [str(peer.program), f"{kind}-server"] + server_args(ctx, kind, port)


def epoll_server(peer: "Peer", ctx: Ctx, kind: str, port: int) -> List[str]:
    """The epoll loop's echo-server and http-server: plain TCP only."""
    if kind not in ("echo", "http"):
        raise Skip(f"the epoll loop has no {kind} server (it is the limit "
                   f"of plain TCP I/O: echo and http only)")
    return subcommand_server(peer, ctx, kind, port)


# kind -> why Tokio has no such server
TOKIO_LACKS = {
    "http": "Tokio has no HTTP server of its own (hyper is a separate crate)",
    "https": "Tokio has no TLS of its own (tokio-rustls and hyper are "
             "separate crates)",
}


def tokio_server(peer: "Peer", ctx: Ctx, kind: str, port: int) -> List[str]:
    if kind in TOKIO_LACKS:
        raise Skip(TOKIO_LACKS[kind])
    return [str(peer.program), f"{kind}-server", str(port)]


PEERS: List[Peer] = [
    # The first peer is the subject: ratios are subject/peer, scaling is its.
    # The bench programs take their workers as an argument; the servers from
    # the environment.
    # WEFT_STATS=1: weft's own scheduling delay and turn time, printed at
    # exit, go into each run's extra fields (parse.weft_sched)
    Peer("weft", "weft", build_weft,
         env=lambda w: {"WEFT_WORKERS": str(w), "WEFT_STATS": "1"}, server=weft_server,
         by_meson=True),
    Peer("go", "Go goroutines", build_go,
         env=lambda w: {"GOMAXPROCS": str(w)},
         missing={"local-get": "Go has no coroutine-local storage"},
         server=subcommand_server, version=lambda ctx: run_out(["go", "version"])),
    Peer("boost", "Boost.Fiber, work_stealing", build_boost,
         missing={"sem": "Boost.Fiber has no semaphore",
                  "rwlock": "Boost.Fiber has no reader-writer lock"},
         slow={b: "skipped by --quick (5-45 s a run here)"
               for b in ("spawn", "skynet", "fib", "chan-pingpong", "sleep",
                         "skynet-chan", "parked")},
         version=boost_version),
    Peer("tokio", "Tokio, multi-thread runtime", build_tokio,
         slow={"yield": "skipped by --quick (7 s a run here)"},
         env=lambda w: {"TOKIO_WORKER_THREADS": str(w)}, server=tokio_server,
         version=tokio_version),
]

# The limit of the server rows: one epoll loop per worker (EPOLL_LOOPS
# threads, each with its own SO_REUSEPORT listener: nginx's shape), no
# scheduler, so it
# has no equivalent of any scheduler benchmark.
PEERS.append(Peer(
    "epoll", "hand-written epoll loops (C, one thread each)", build_epoll,
    env=lambda w: {"EPOLL_LOOPS": str(w)},
    missing={b.name: "a server only: epoll loops have no scheduler"
             for b in BENCHMARKS},
    server=epoll_server, limit=True, by_meson=True))

SUBJECT = PEERS[0].name
