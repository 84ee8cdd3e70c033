#!/usr/bin/env python3
"""Runs weft's benchmarks against peer runtimes and tabulates them.

    python3 scripts/bench.py [--quick] [--only NAME[,NAME]] [--workers 1,2]
                             [--runs N] [--json FILE] [--build-dir DIR]

It expects the weft side to be built already (`meson compile -C build`, which
scripts/run does first) and builds the peers itself, under BUILD/bench/: Go
with `go build`, Boost.Fiber with g++, Tokio with Debian's cargo, offline
(PEERS).  A peer that cannot be built is skipped with one line saying why
("bench.py: tokio peer skipped: ...").

Two kinds of benchmarks (bench/README.md has the list):

- In-process ones (BENCHMARKS: the scheduler's, sleep, channels, mutex,
  coroutine-locals).  For every benchmark and worker count: one warm-up
  invocation of every peer, then --runs invocations of each, interleaved
  (weft, go, boost, tokio, tokio, boost, go, weft, ...), each its own
  process, each doing its own in-process warm-up before the timed run.  A
  peer without an equivalent of a benchmark (Peer.missing) has "—" in its
  row, and the notes say why.  --quick runs no warm-up invocation, each
  peer other than weft once per point and only at the largest worker count
  (--peer-runs, --peer-workers change that), the heavy benchmarks (sleep,
  parked: seconds of fresh stacks per process) only at the largest worker
  count, and leaves out a peer's Peer.slow ones (with the reason).
- Network servers (SERVER_BENCHES: echo, http).  Per run and peer: the
  peer's server on a fresh port, on 1 worker, pinned to one CPU; the load
  (bench/loadgen, or wrk) pinned to another; the server killed after.  The
  load generators warm up before they measure.

And, once per invocation of this script, the machine's cost floors
(FLOORS: bench/floors.c, `floors NAME`: a context switch, a CAS, a cache
line between cores, a syscall, a cross-core wake, a fresh page), --runs times
each at 1 worker, in a table of their own; then the cost model (COST_MODEL):
for each benchmark row of the run that has one, the floors it chases, in the
row's unit, and weft's median over them.  With --docs (not --quick) and
valgrind installed, `weft-bench yield 1` and `spawn 1` also run under
callgrind, for the instructions per yield and per spawn+join.

Every invocation verifies its result; any failure makes the exit status 1.

Outputs (under BUILD/bench/ unless told otherwise):
    results.json   every run, raw ns and ops, plus the summaries and metadata
    results.md     the summary tables in Markdown (included by the docs),
                   the floors and the cost model among them
    ratios.png     weft/peer time ratios per benchmark (needs gnuplot)
    scaling.png    weft speed-up vs one worker (needs gnuplot)
    servers.png    weft/peer throughput and p99 ratios per server row

To add a benchmark: add it to BENCHMARKS and implement it under the same name
in every peer (bench/weft-bench.c, bench/peers/*/), or list it in the
Peer.missing of those that have no equivalent, with the reason.  To add a
peer: write a builder and add a Peer to PEERS; its program takes
`NAME WORKERS` and prints one line
    RESULT name=NAME impl=PEER workers=W ns=N ops=N value=N check=ok|fail
and, for the server rows, give the Peer a `server` (the command of its echo
and HTTP servers, which print "listening on PORT" when ready).
Python 3 standard library only.
"""

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ tables


@dataclasses.dataclass
class Bench:
    name: str
    title: str
    per_op: bool  # report ns per op (True) or ms per run (False)
    unit: str
    fixed_workers: Optional[int] = None  # run only at this worker count
    # seconds per invocation whatever the workers (fresh stacks for 100,000
    # coroutines): --quick runs it at the largest worker count only
    heavy: bool = False
    # extra fields of the RESULT line shown in the notes column:
    # (key, label, divisor) each, e.g. ("rss_kb", "peak RSS MiB", 1024)
    extra: Sequence[Tuple[str, str, float]] = ()
    # a reference cost the program measures in the same run, in ns per op:
    # (key of the RESULT field, label); the notes give its median and the
    # median of the run-by-run ratios metric / reference
    versus: Optional[Tuple[str, str]] = None


BENCHMARKS: List[Bench] = [
    Bench("yield", "yield, 2 coroutines x 2M yields, 1 worker", True, "ns/yield",
          fixed_workers=1),
    Bench("spawn", "spawn+join 1M, batches of 1000", True, "ns/spawn+join"),
    Bench("skynet", "skynet, 1M leaves, 10 children/node, join", False, "ms",
          extra=[("rss_kb", "peak RSS MiB", 1024)]),
    Bench("fib", "fork-join fib(27), no cutoff", False, "ms"),
    Bench("sleep", "100k coroutines sleep 1 ms at once, join all", False, "ms", heavy=True,
          extra=[("rss_kb", "peak RSS MiB", 1024)]),
    Bench("chan-pingpong", "ping-pong over 2 unbuffered channels, 1 pair x 1M "
          "round trips", True, "ns/round trip"),
    Bench("chan-pingpong-1000", "ping-pong over 2 unbuffered channels, 1000 "
          "pairs x 1000 round trips", True, "ns/round trip"),
    Bench("mutex", "1000 coroutines x 1000 lock/increment/unlock of one mutex",
          True, "ns/lock+unlock"),
    Bench("skynet-chan", "skynet, 1M leaves, 10 children/node, channels",
          False, "ms"),
    Bench("parked", "100k coroutines parked on one channel at once, then "
          "released", False, "ms", heavy=True, extra=[("rss_per_co_b", "RSS bytes per parked coroutine", 1),
                           ("vm_mib", "virtual MiB", 1), ("maps", "mappings", 1)]),
    # one coroutine: more workers would only idle
    Bench("local-get", "weft_local_get (Boost: fiber_specific_ptr::get, "
          "Tokio: task_local! with) vs a thread-local read, 100M reads each, "
          "1 coroutine", True, "ns/get", fixed_workers=1,
          versus=("thread_ns_per_op", "thread-local read")),
]


@dataclasses.dataclass
class ServerBench:
    """A network row: every peer's server of one kind under one load."""
    name: str  # the RESULT name
    group: str  # what --only selects (or the name itself)
    title: str
    server: str  # the kind of server the peers run: "echo" or "http"
    unit: str
    conns: int
    size: int = 0  # message bytes, for echo


SERVER_BENCHES: List[ServerBench] = [
    ServerBench(f"echo-{c}-{n}", "echo",
                f"echo, {c} connections, {n} B messages, closed loop",
                "echo", "msgs/s", c, n)
    for c in (100, 1000) for n in (64, 4096)
] + [
    ServerBench("http-hello", "http",
                "HTTP/1.1 hello world under wrk, 100 connections, 1 thread",
                "http", "req/s", 100),
]
GROUPS = list(dict.fromkeys(b.group for b in SERVER_BENCHES))


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
    # ("echo", "http"); raises Skip when it has none; None: no servers
    server: Optional[Callable[["Peer", "Ctx", str, int], List[str]]] = None
    # version(ctx) -> what it was built with, for the metadata (weft's is
    # the git description)
    version: Callable[["Ctx"], Optional[str]] = lambda ctx: None
    program: Optional[Path] = None  # set once built

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


def run_out(cmd: List[str], cwd=None) -> Optional[str]:
    """The stripped stdout of cmd, None if it cannot be had."""
    try:
        return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


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


def build_weft(ctx: Ctx) -> Path:
    prog = ctx.build_dir / "bench" / "weft-bench"
    if not os.access(prog, os.X_OK):
        raise SystemExit(
            f"bench.py: {prog} not found; build it first: "
            f"meson setup {ctx.build_dir} && meson compile -C {ctx.build_dir}")
    return prog


def build_go(ctx: Ctx) -> Path:
    go = shutil.which("go")
    if go is None:
        raise Skip("`go` not found on PATH (apt-get install -y golang-go)")
    gdir = ctx.out_dir / "go"
    prog = ctx.out_dir / "go-bench"
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
    build_step("go build", [go, "build", "-trimpath", "-o", str(prog), "."],
               ROOT / "bench" / "peers" / "go", gdir / "build.log", env)
    return prog


BOOST_SRC = ROOT / "bench" / "peers" / "boost" / "boost-bench.cpp"


def cxx() -> str:
    return os.environ.get("CXX") or "g++"


def build_boost(ctx: Ctx) -> Path:
    """g++ on the one source file, redone when the source or the command
    changed."""
    if shutil.which(cxx()) is None:
        raise Skip(f"`{cxx()}` not found on PATH "
                   "(apt-get install -y g++ libboost-fiber-dev)")
    prog = ctx.out_dir / "boost-bench"
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
    for tool in (CARGO, RUSTC):
        if not os.access(tool, os.X_OK):
            raise Skip(f"{tool} not found (Debian's cargo and rustc: "
                       "apt-get install -y cargo rustc librust-tokio-dev)")
    if not any(DEBIAN_CRATES.glob("tokio-1.*")):
        raise Skip(f"no tokio crate under {DEBIAN_CRATES} "
                   "(apt-get install -y librust-tokio-dev)")
    tdir = ctx.out_dir / "tokio"
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
    return tdir / "target" / "release" / "tokio-bench"


def tokio_version(ctx: Ctx) -> Optional[str]:
    v = None
    try:
        m = re.search(r'name = "tokio"\nversion = "([^"]+)"',
                      (ctx.out_dir / "tokio" / "crate" / "Cargo.lock").read_text())
        v = m and m[1]
    except OSError:
        pass
    return f"Tokio {v or '?'}, {run_out([str(RUSTC), '--version']) or 'rustc'}"


def weft_server(peer: "Peer", ctx: Ctx, kind: str, port: int) -> List[str]:
    prog = ctx.build_dir / "examples" / f"weft-{kind}"
    if not os.access(prog, os.X_OK):
        raise Skip(f"{prog} not built (meson configure {ctx.build_dir} "
                   f"-Dexamples=true && meson compile -C {ctx.build_dir})")
    return [str(prog), str(port)]


def go_server(peer: "Peer", ctx: Ctx, kind: str, port: int) -> List[str]:
    return [str(peer.program), f"{kind}-server", str(port)]


def tokio_server(peer: "Peer", ctx: Ctx, kind: str, port: int) -> List[str]:
    if kind != "echo":
        raise Skip("Tokio has no HTTP server of its own (hyper is a "
                   "separate crate); echo only")
    return [str(peer.program), "echo-server", str(port)]


PEERS: List[Peer] = [
    # The first peer is the subject: ratios are subject/peer, scaling is its.
    # The bench programs take their workers as an argument; the servers from
    # the environment.
    Peer("weft", "weft", build_weft,
         env=lambda w: {"WEFT_WORKERS": str(w)}, server=weft_server),
    Peer("go", "Go goroutines", build_go,
         env=lambda w: {"GOMAXPROCS": str(w)},
         missing={"local-get": "Go has no coroutine-local storage"},
         server=go_server, version=lambda ctx: run_out(["go", "version"])),
    Peer("boost", "Boost.Fiber, work_stealing", build_boost,
         slow={b: "skipped by --quick (5-45 s a run here)"
               for b in ("spawn", "skynet", "fib", "chan-pingpong", "sleep",
                         "skynet-chan", "parked")},
         version=boost_version),
    Peer("tokio", "Tokio, multi-thread runtime", build_tokio,
         slow={"yield": "skipped by --quick (7 s a run here)"},
         env=lambda w: {"TOKIO_WORKER_THREADS": str(w)}, server=tokio_server,
         version=tokio_version),
]

SUBJECT = PEERS[0].name


# ----------------------------------------------------------------- running

RESULT_RE = re.compile(r"^RESULT\s+(.*)$", re.M)


def parse_result(text: str) -> Optional[Dict[str, str]]:
    m = RESULT_RE.findall(text)
    if len(m) != 1:
        return None
    return dict(kv.split("=", 1) for kv in m[0].split() if "=" in kv)


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
    else:
        rec.update(ok=False, error=err, rc=p.returncode,
                   stdout=p.stdout[-2000:], stderr=p.stderr[-2000:])
    return rec


def run_one(peer: Peer, bench: Bench, workers: int, timeout: float,
            wrap: Sequence[str] = ()) -> dict:
    """One invocation of the peer's program, under wrap (e.g. valgrind)."""
    env = dict(os.environ)
    env.update(peer.env(workers))
    cmd = [*wrap, str(peer.program), bench.name, str(workers)]
    rec = {"peer": peer.name, "cmd": cmd}
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        rec.update(ok=False, error=f"timed out after {timeout:.0f} s")
        return rec
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    rec.update(judge(parse_result(p.stdout), p, bench.name, workers))
    return rec


def metric(bench: Bench, rec: dict) -> float:
    """The reported number for one run: ns/op or ms."""
    if bench.per_op:
        return rec["ns"] / rec["ops"]
    return rec["ns"] / 1e6


class Progress:
    def __init__(self):
        self.tty = sys.stderr.isatty()
        self.width = 0

    def show(self, msg: str):
        if self.tty:
            sys.stderr.write("\r" + msg.ljust(self.width))
            self.width = len(msg)
        else:
            sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    def say(self, msg: str):
        """A line that stays."""
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            self.width = 0
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    def done(self):
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            self.width = 0


def note_failure(rec: dict, tag: str, what: str, prog: Progress,
                 failures: List[str]):
    """A failed run: a FAIL line with the tail of its stderr, and a failure
    for the summary and the exit status."""
    if rec["ok"]:
        return
    msg = f"{tag} {rec['peer']} {what}: {rec['error']}"
    failures.append(msg)
    prog.say("FAIL " + msg)
    for t in (rec.get("stderr") or "").strip().splitlines()[-5:]:
        prog.say("     | " + t)


# ----------------------------------------------------------------- servers

SERVER_WORKERS = 1  # the servers run on one worker: WEFT_WORKERS / GOMAXPROCS
ECHO_SECONDS = {False: (5.0, 1.0), True: (0.6, 0.3)}  # quick -> (run, warm-up)
WRK_SECONDS = {False: 10, True: 2}
READY_TIMEOUT_S = 10  # for "listening on PORT"
HELLO = b"Hello, World!"


@dataclasses.dataclass
class Pins:
    """The CPUs of the server and of its load (None: unpinned), and why."""
    server: Optional[int]
    load: Optional[int]
    note: str

    @staticmethod
    def choose() -> "Pins":
        cpus = sorted(os.sched_getaffinity(0))
        if shutil.which("taskset") is None:
            return Pins(None, None, "unpinned: taskset not found (util-linux)")
        if len(cpus) < 2:
            return Pins(None, None, f"unpinned: only {len(cpus)} CPU")
        return Pins(cpus[0], cpus[1],
                    f"server on CPU {cpus[0]}, load on CPU {cpus[1]}")

    @staticmethod
    def wrap(cmd: List[str], cpu: Optional[int]) -> List[str]:
        return cmd if cpu is None else ["taskset", "-c", str(cpu)] + cmd


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


@contextlib.contextmanager
def server_running(cmd: List[str], env: Dict[str, str], log: Path):
    """The server process, its output in log; terminated on the way out."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_listening(proc: subprocess.Popen, log: Path, port: int) -> Optional[str]:
    """None once the server says it listens on port, else what went wrong."""
    want = f"listening on {port}".encode()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if want in log.read_bytes():
            return None
        if proc.poll() is not None:
            return f"server exited with status {proc.returncode} before listening"
        time.sleep(0.01)
    return f"no '{want.decode()}' within {READY_TIMEOUT_S} s"


def http_check(port: int) -> Optional[str]:
    """Two pipelined requests, the second with Connection: close: two 200s
    with the body, then the end of the connection.  None when all is right,
    else what is wrong."""
    req = (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
           b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(req)
            while chunk := s.recv(65536):
                data += chunk
    except OSError as e:
        return f"HTTP check: {e}"
    for i in (1, 2):
        head, blank, data = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = [v.strip() for n, _, v in (x.partition(b":") for x in lines[1:])
                  if n.strip().lower() == b"content-length"]
        if not blank or not lines[0].startswith(b"HTTP/1.1 200 "):
            return f"HTTP check: response {i} is not a 200: {head[:60]!r}"
        if length != [str(len(HELLO)).encode()] or not data.startswith(HELLO):
            return f"HTTP check: response {i}: body {data[:20]!r}, length {length}"
        data = data[len(HELLO):]
    if data:
        return f"HTTP check: {len(data)} bytes after the second response"
    return None


def load_echo(sb: ServerBench, impl: str, port: int, tool: Path, quick: bool,
              pins: Pins):
    run_s, warm_s = ECHO_SECONDS[quick]
    cmd = [str(tool), "-c", str(sb.conns), "-s", str(sb.size),
           "-d", str(run_s), "-w", str(warm_s), "-p", str(port),
           "-i", impl, "-W", str(SERVER_WORKERS)]
    p = subprocess.run(Pins.wrap(cmd, pins.load), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True,
                       timeout=run_s + warm_s + 60)
    return parse_result(p.stdout), p


WRK_DONE_RE = re.compile(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),", re.M)
WRK_RATE_RE = re.compile(r"^Requests/sec:\s+([\d.]+)", re.M)
WRK_PCT_RE = re.compile(r"^\s+(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s|m)\s*$", re.M)
WRK_ERR_RE = re.compile(r"Socket errors: connect (\d+), read (\d+), "
                        r"write (\d+), timeout (\d+)")
WRK_NON2XX_RE = re.compile(r"Non-2xx or 3xx responses: (\d+)")
TO_US = {"us": 1, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def wrk_result(text: str, name: str, impl: str) -> Optional[Dict[str, str]]:
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
    return {"name": name, "impl": impl, "workers": str(SERVER_WORKERS),
            "ns": str(round(float(done[2]) * TO_US[done[3]] * 1e3)),
            "ops": done[1], "value": str(round(float(rate[1]))),
            "check": "ok" if ok else "fail",
            "p50_us": f"{pct['50']:.1f}", "p99_us": f"{pct['99']:.1f}",
            "socket_errors": str(socket_errors), "non2xx": str(non2xx)}


def load_wrk(sb: ServerBench, impl: str, port: int, tool: Path, quick: bool,
             pins: Pins):
    secs = WRK_SECONDS[quick]
    cmd = [str(tool), "-t1", f"-c{sb.conns}", f"-d{secs}s", "--latency",
           f"http://127.0.0.1:{port}/"]
    p = subprocess.run(Pins.wrap(cmd, pins.load), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=secs + 60)
    return wrk_result(p.stdout, sb.name, impl), p


def find_loadgen(ctx: Ctx) -> Path:
    prog = ctx.build_dir / "bench" / "loadgen"
    if not os.access(prog, os.X_OK):
        raise Skip(f"{prog} not built (meson compile -C {ctx.build_dir})")
    return prog


def find_wrk(ctx: Ctx) -> Path:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise Skip("`wrk` not found on PATH (apt-get install -y wrk)")
    return Path(wrk)


# group -> (find the load tool, run it, check the server before it)
LOADS = {
    "echo": (find_loadgen, load_echo, None),
    "http": (find_wrk, load_wrk, http_check),
}


def run_server_one(peer: Peer, sb: ServerBench, ctx: Ctx, tool: Path,
                   quick: bool, pins: Pins) -> dict:
    port = free_port()
    cmd = Pins.wrap(peer.server(peer, ctx, sb.server, port), pins.server)
    env = dict(os.environ)
    env.update(peer.env(SERVER_WORKERS))
    log = ctx.out_dir / f"server-{peer.name}-{sb.server}.log"
    _, load, check = LOADS[sb.group]
    rec = {"peer": peer.name, "cmd": cmd, "port": port}
    t0 = time.monotonic()
    with server_running(cmd, env, log) as srv:
        err = wait_listening(srv, log, port)
        if err is None and check is not None:
            err = check(port)
        if err is None:
            try:
                r, p = load(sb, peer.name, port, tool, quick, pins)
                rec.update(judge(r, p, sb.name, SERVER_WORKERS))
            except subprocess.TimeoutExpired as e:
                err = f"load timed out after {e.timeout:.0f} s"
        if err is None and srv.poll() is not None:
            err = f"server exited with status {srv.returncode} during the run"
        if err is None and rec["ok"] and not all(
                k in rec["extra"] for k in ("p50_us", "p99_us")):
            err = "RESULT without p50_us and p99_us"
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    if err is not None:
        rec.update(ok=False, error=err)
    if not rec["ok"]:
        rec["stderr"] = (rec.get("stderr", "") + "\nserver: " +
                         log_tail(log)).strip()
    return rec


def server_metrics(rec: dict) -> Tuple[float, float, float]:
    """msgs (requests) per second, p50 and p99 in microseconds."""
    return (rec["ops"] * 1e9 / rec["ns"], float(rec["extra"]["p50_us"]),
            float(rec["extra"]["p99_us"]))


def server_peers(sb: ServerBench, peers: List[Peer], ctx: Ctx,
                 known: Dict[Tuple[str, str], bool]) -> List[Peer]:
    """The peers that have sb's server; a line for each that has not (once)."""
    have = []
    for p in peers:
        key = (p.name, sb.server)
        if key not in known:
            try:
                if p.server is None:
                    raise Skip("it has no servers")
                p.server(p, ctx, sb.server, 0)
                known[key] = True
            except Skip as e:
                print(f"bench.py: skipped the {sb.server} server of "
                      f"{p.name}: {e}")
                known[key] = False
        if known[key]:
            have.append(p)
    return have


def run_servers(args, peers: List[Peer], ctx: Ctx, prog: "Progress",
                failures: List[str]):
    """Every selected server row: (points, summary, pins)."""
    rows = [b for b in SERVER_BENCHES
            if b.group in args.only or b.name in args.only]
    if not rows:
        return [], [], None
    pins = Pins.choose()
    print(f"bench.py: servers on {SERVER_WORKERS} worker; {pins.note}",
          file=sys.stderr)
    tools: Dict[str, Optional[Path]] = {}
    for group in dict.fromkeys(b.group for b in rows):
        try:
            tools[group] = LOADS[group][0](ctx)
        except Skip as e:
            print(f"bench.py: skipped {group}: {e}")
            tools[group] = None
    known: Dict[Tuple[str, str], bool] = {}
    points, summary = [], []
    for sb in rows:
        speers = server_peers(sb, peers, ctx, known)
        if tools[sb.group] is None or not speers:
            continue
        runs = interleave(speers, args, f"[{sb.name}]", prog, failures,
                          lambda p: run_server_one(p, sb, ctx, tools[sb.group],
                                                   args.quick, pins))
        points.append({"bench": sb.name, "workers": SERVER_WORKERS,
                       "runs": runs})
        summary.append(summarize_server(sb, runs, speers))
    return points, summary, pins


# ----------------------------------------------------------------- summary


def med_range(xs: List[float]) -> Optional[dict]:
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "n": len(xs)}


def pair_ratios(runs: Dict[str, List[dict]], peers: List[Peer],
                value: Callable[[dict], float]) -> Dict[str, Optional[dict]]:
    """Per peer, the median (min-max) of value(subject run i) / value(peer
    run i) over the runs where both succeeded."""
    subj = runs.get(SUBJECT, [])
    out = {}
    for p in peers:
        if p.name == SUBJECT:
            continue
        other = runs.get(p.name, [])
        out[p.name] = med_range([value(a) / value(b) for a, b in
                                 zip(subj, other) if a["ok"] and b["ok"]])
    return out


def extra_note(bench: Bench, runs: Dict[str, List[dict]],
               peers: List[Peer]) -> Optional[str]:
    """The notes cell: the median of each of bench.extra per peer, e.g.
    "peak RSS MiB: weft 402, go 34"."""
    notes = []
    for key, label, div in bench.extra:
        cells = []
        for p in peers:
            xs = [float(r["extra"][key]) / div for r in runs.get(p.name, [])
                  if r["ok"] and key in r["extra"]]
            if xs:
                cells.append(f"{p.name} {fmt_num(statistics.median(xs))}")
        if cells:
            notes.append(f"{label}: {', '.join(cells)}")
    return "; ".join(notes) if notes else None


def versus(bench: Bench, runs: Dict[str, List[dict]],
           peers: List[Peer]) -> Dict[str, dict]:
    """Per peer, for bench.versus: the reference's ns/op ("ref") and the
    run-by-run ratios of the metric to it ("ratio"), median (min-max)."""
    key = bench.versus[0]
    out = {}
    for p in peers:
        good = [(metric(bench, r), float(r["extra"][key]))
                for r in runs.get(p.name, [])
                if r["ok"] and float(r["extra"].get(key, 0)) > 0]
        if good:
            out[p.name] = {"ref": med_range([b for _, b in good]),
                           "ratio": med_range([a / b for a, b in good])}
    return out


def versus_note(bench: Bench, s: dict) -> Optional[str]:
    """E.g. "thread-local read in ns, and time/it: weft 0.39, 4.10
    (3.90–4.30); boost 0.41, 30.2" (each peer against its own)."""
    if not s.get("versus"):
        return None
    return (f"{bench.versus[1]} in ns, and time/it: " +
            "; ".join(f"{pn} {fmt_num(v['ref']['median'])}, "
                      f"{fmt_ratio(v['ratio'])}"
                      for pn, v in s["versus"].items()))


def summarize(bench: Bench, workers: int, runs: Dict[str, List[dict]],
              peers: List[Peer], absent: List[str]) -> dict:
    """absent: for the peers without an equivalent, "peer: why"."""
    s = {"bench": bench.name, "workers": workers, "unit": bench.unit,
         "peers": {}, "ratios": {}}
    for p in peers:
        recs = runs.get(p.name, [])
        good = [metric(bench, r) for r in recs if r["ok"]]
        s["peers"][p.name] = med_range(good)
        s["peers"][p.name + "_failed"] = sum(1 for r in recs if not r["ok"])
    # pair by pair: run i of the subject against run i of the peer
    s["ratios"] = pair_ratios(runs, peers, lambda r: metric(bench, r))
    if bench.versus:
        s["versus"] = versus(bench, runs, peers)
    notes = absent + [extra_note(bench, runs, peers), versus_note(bench, s)]
    s["notes"] = "; ".join(n for n in notes if n) or None
    return s


SERVER_METRICS = ("rate", "p50_us", "p99_us")  # the order of server_metrics()


def summarize_server(sb: ServerBench, runs: Dict[str, List[dict]],
                     peers: List[Peer]) -> dict:
    """Per peer the median (min-max) of each run's rate, p50 and p99; per
    other peer the run-by-run ratios of the rates and of the p99s."""
    s = {"bench": sb.name, "group": sb.group, "workers": SERVER_WORKERS,
         "unit": sb.unit, "peers": {}, "ratios": {}}
    for p in peers:
        recs = runs.get(p.name, [])
        good = [server_metrics(r) for r in recs if r["ok"]]
        s["peers"][p.name] = {k: med_range([g[i] for g in good])
                              for i, k in enumerate(SERVER_METRICS)}
        s["peers"][p.name + "_failed"] = sum(1 for r in recs if not r["ok"])
    rate = pair_ratios(runs, peers, lambda r: server_metrics(r)[0])
    p99 = pair_ratios(runs, peers, lambda r: server_metrics(r)[2])
    s["ratios"] = {p: {"rate": rate[p], "p99": p99[p]} for p in rate}
    s["notes"] = fairness_note(sb, runs, peers)
    return s


def fairness_note(sb: ServerBench, runs: Dict[str, List[dict]],
                  peers: List[Peer]) -> Optional[str]:
    """For loadgen rows: the echoes of the slowest connection as a % of the
    mean per connection (median over runs).  Near 100: the server is fair;
    near 0: it starves some clients, which p50 and p99 can hide."""
    cells = []
    for p in peers:
        xs = [100 * int(r["extra"]["conn_min"]) * sb.conns / r["ops"]
              for r in runs.get(p.name, [])
              if r["ok"] and "conn_min" in r["extra"] and r["ops"]]
        if xs:
            cells.append(f"{p.name} {statistics.median(xs):.0f}")
    return ("slowest connection, % of mean: " + ", ".join(cells)
            if cells else None)


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


def add_scaling(summary: List[dict], peers: List[Peer]):
    base = {}
    for s in summary:
        if s["workers"] == 1:
            base[s["bench"]] = s
    for s in summary:
        s["scaling"] = {}
        b = base.get(s["bench"])
        for p in peers:
            cur = s["peers"].get(p.name)
            one = b["peers"].get(p.name) if b else None
            s["scaling"][p.name] = (one["median"] / cur["median"]
                                    if cur and one else None)


def table_rows(summary: List[dict], peers: List[Peer]):
    others = [p for p in peers if p.name != SUBJECT]
    notes = any(s.get("notes") for s in summary)
    head = ["benchmark", "unit", "workers", f"{SUBJECT} median (min–max)"]
    for p in others:
        head += [f"{p.name} median (min–max)", f"{SUBJECT}/{p.name}"]
    head += [f"{SUBJECT} scaling"] + (["notes (medians)"] if notes else [])
    rows = []
    for s in summary:
        row = [s["bench"], s["unit"], str(s["workers"]),
               fmt_mr(s["peers"][SUBJECT], s["peers"][SUBJECT + "_failed"])]
        for p in others:
            row += [fmt_mr(s["peers"].get(p.name),
                           s["peers"].get(p.name + "_failed", 0)),
                    fmt_ratio(s["ratios"].get(p.name))]
        sc = s["scaling"].get(SUBJECT)
        row += ["—" if sc is None or s["workers"] == 1 else f"{sc:.2f}x"]
        row += [s.get("notes") or "—"] if notes else []
        rows.append(row)
    return head, rows


def server_table_rows(summary: List[dict], peers: List[Peer]):
    """Per peer: rate median (min–max), median p50 and p99; then per other
    peer the two ratios, each saying which way is better."""
    others = [p for p in peers if p.name != SUBJECT]
    head = ["benchmark", "unit"]
    for p in peers:
        head += [f"{p.name} rate median (min–max)", f"{p.name} p50 µs",
                 f"{p.name} p99 µs"]
    for p in others:
        head += [f"{SUBJECT}/{p.name} rate (higher: {SUBJECT} better)",
                 f"{SUBJECT}/{p.name} p99 (lower: {SUBJECT} better)"]
    head += ["notes (medians)"]
    rows = []
    for s in summary:
        row = [s["bench"], s["unit"]]
        for p in peers:
            m = s["peers"].get(p.name) or {}
            failed = s["peers"].get(p.name + "_failed", 0)
            lat = [m.get(k) for k in ("p50_us", "p99_us")]
            row += [fmt_mr(m.get("rate"), failed)] + [
                fmt_num(x["median"]) if x else "—" for x in lat]
        for p in others:
            r = s["ratios"].get(p.name) or {}
            row += [fmt_ratio(r.get("rate")), fmt_ratio(r.get("p99"))]
        row += [s.get("notes") or "—"]
        rows.append(row)
    return head, rows


def server_footnote(args, pins: "Pins", peers: List[Peer]) -> str:
    knobs = " / ".join(k for p in peers for k in p.env(SERVER_WORKERS))
    return (f"Rates (msgs/s, req/s): higher is better; {SUBJECT}/peer rate "
            f"is the median of run-by-run rate ratios (above 1: {SUBJECT} "
            f"serves more).  Latencies are round trips in µs, the median "
            f"over the runs of each run's p50 and p99: lower is better; "
            f"{SUBJECT}/peer p99 below 1: {SUBJECT}'s tail is shorter.  "
            f"The slowest connection's echoes as a % of the mean per "
            f"connection: near 100, the server is fair to its clients; near "
            f"0, it starves some (which p50 and p99 can hide).  "
            f"Servers on {SERVER_WORKERS} worker ({knobs}), {pins.note}; "
            f"{runs_note(args, servers=True)}.")


def text_table(head, rows) -> str:
    w = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip()
    return "\n".join([line(head), line(["-" * x for x in w])] +
                     [line(r) for r in rows])


def md_table(head, rows) -> str:
    esc = lambda c: c.replace("|", "\\|")
    # names and notes left, numbers right
    left = lambda i: i < 2 or head[i].startswith("notes")
    out = ["| " + " | ".join(map(esc, head)) + " |",
           "|" + "|".join("---" if left(i) else "--:"
                          for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    return "\n".join(out)


# ---------------------------------------------------- floors and cost model

# The machine's cost floors (bench/floors.c, `floors NAME`): what the
# cheapest version of each thing weft does costs here, per operation.
FLOORS: List[Bench] = [
    Bench("switch", "weft's context switch (lib/context.h), two contexts "
          "back and forth", True, "ns/switch"),
    Bench("cas", "uncontended CAS (lock cmpxchg) on a line no other thread "
          "touches", True, "ns/CAS"),
    Bench("line-transfer", "one cache line handed between threads on two "
          "CPUs, one way", True, "ns/transfer"),
    Bench("epoll-wait", "epoll_wait, timeout 0, on an empty set: a syscall",
          True, "ns/call"),
    Bench("eventfd-wake", "an eventfd write wakes a thread asleep in "
          "epoll_wait on the other CPU, one way", True, "ns/wake"),
    Bench("fresh-page", "the first write to a fresh 4 KiB anonymous page",
          True, "ns/page"),
]
TWO_CPU_FLOORS = {"line-transfer"}  # fail by design on one CPU: skipped


def build_floors(ctx: Ctx) -> Path:
    prog = ctx.build_dir / "bench" / "floors"
    if not os.access(prog, os.X_OK):
        raise Skip(f"{prog} not built (meson compile -C {ctx.build_dir})")
    return prog


# floors are run as a peer of their own, one thread (or two) each
FLOOR_PEER = Peer("floor", "the machine's cost floors (bench/floors.c)",
                  build_floors)


def usable_floors() -> List[Bench]:
    """FLOORS, less those this affinity mask cannot run (a line each)."""
    cpus = len(os.sched_getaffinity(0))
    if cpus >= 2:
        return FLOORS
    for name in sorted(TWO_CPU_FLOORS):
        print(f"bench.py: floor {name} skipped: it needs 2 CPUs, the "
              f"affinity mask has {cpus}")
    return [f for f in FLOORS if f.name not in TWO_CPU_FLOORS]


def run_floors(args, ctx: Ctx, prog: Progress,
               failures: List[str]) -> Tuple[List[dict], List[dict]]:
    """Every floor --runs times, round-robin, at 1 worker: (points, summary).
    Each invocation warms itself up; there is no warm-up invocation."""
    try:
        FLOOR_PEER.program = build_floors(ctx)
    except Skip as e:
        print(f"bench.py: floors skipped: {e}")
        return [], []
    floors = usable_floors()
    runs: Dict[str, List[dict]] = {f.name: [] for f in floors}
    for i in range(args.runs):
        for f in floors:
            tag = f"[{f.name}]"
            prog.show(f"{tag} floor run {i + 1}/{args.runs}")
            rec = run_one(FLOOR_PEER, f, 1, args.timeout)
            runs[f.name].append(rec)
            note_failure(rec, tag, f"run {i + 1}", prog, failures)
    return ([{"floor": f.name, "runs": runs[f.name]} for f in floors],
            [summarize_floor(f, runs[f.name]) for f in floors])


def summarize_floor(f: Bench, recs: List[dict]) -> dict:
    return {"floor": f.name, "unit": f.unit, "title": f.title,
            "ns": med_range([metric(f, r) for r in recs if r["ok"]]),
            "failed": sum(1 for r in recs if not r["ok"])}


def floor_table_rows(fsummary: List[dict]):
    head = ["floor", "unit", "median (min–max)", "notes"]
    return head, [[f["floor"], f["unit"], fmt_mr(f["ns"], f["failed"]),
                   f["title"]] for f in fsummary]


def floor_footnote(args) -> str:
    cpus = sorted(os.sched_getaffinity(0))[:2]
    where = (f"two, on CPUs {cpus[0]} and {cpus[1]}" if len(cpus) == 2
             else "two, unpinned (one CPU)")
    return (f"The machine's cost floors (bench/floors.c), ns per operation, "
            f"median (min–max) over {args.runs} invocation"
            f"{'s' if args.runs != 1 else ''} of each; each invocation a "
            f"warm-up and a timed loop (at most 0.2 s).  One thread, but "
            f"line-transfer and eventfd-wake: {where}.")


ONE = lambda w: w == 1  # noqa: E731
MORE = lambda w: w > 1  # noqa: E731


@dataclasses.dataclass
class Cost:
    """What a benchmark row chases at the worker counts `when` holds for:
    the sum of count × floor over terms, per operation of the row."""
    bench: str  # a Bench name, or a ServerBench group
    terms: List[Tuple[int, str]]  # (count, floor name)
    why: str
    when: Callable[[int], bool] = lambda w: True


COST_MODEL: List[Cost] = [
    Cost("yield", [(2, "switch")], "a yield is two switches, to the "
         "scheduler and back", ONE),
    Cost("spawn", [(2, "cas"), (3, "switch")], "the join handshake's two "
         "atomic RMWs; two switches in, one out", ONE),
    Cost("spawn", [(2, "cas"), (3, "switch"), (2, "line-transfer")],
         "the same, and a stolen child's control block crossing cores, "
         "there and back", MORE),
    Cost("mutex", [(2, "cas")], "an uncontended lock and unlock, one "
         "atomic RMW each", ONE),
    Cost("chan-pingpong", [(4, "switch"), (4, "cas")], "per round trip "
         "two parks and two resumes, four channel operations", ONE),
    Cost("chan-pingpong", [(2, "line-transfer")], "each of the two wakes "
         "per round trip crosses cores", MORE),
    Cost("sleep", [(1, "fresh-page")], "a fresh stack page per coroutine "
         "on the first burst; the timed run reuses the warm-up's stacks, so "
         "below 1 means it did"),
    Cost("parked", [(1, "fresh-page")], "as sleep"),
    Cost("echo", [(2, "epoll-wait")], "two syscalls (read, send) per round "
         "trip; the floor is a ceiling rate"),
]


def subject_ops(points: List[dict]) -> Dict[Tuple[str, int], int]:
    """(bench, workers) -> the ops of the subject's first good run."""
    out = {}
    for pt in points:
        ops = [r["ops"] for r in pt["runs"].get(SUBJECT, []) if r["ok"]]
        if ops:
            out[(pt["bench"], pt["workers"])] = ops[0]
    return out


def in_unit(s: dict, floor_ns: float, subject: float,
            ops: Optional[int]) -> Optional[Tuple[float, float]]:
    """(the floor in the row's unit, subject/floor as times) for a floor of
    floor_ns per operation; None if the row's ops are unknown."""
    if "group" in s:  # a server row, a rate: the floor is a ceiling
        ceiling = 1e9 / floor_ns
        return ceiling, ceiling / subject
    if next(b for b in BENCHMARKS if b.name == s["bench"]).per_op:
        return floor_ns, subject / floor_ns
    if not ops:
        return None
    return floor_ns * ops / 1e6, subject / (floor_ns * ops / 1e6)  # ms


def cost_model(summary: List[dict], ssummary: List[dict],
               points: List[dict], fsummary: List[dict]) -> List[dict]:
    """A row per benchmark row of this run that has a Cost whose floors
    were all measured."""
    ns = {f["floor"]: f["ns"]["median"] for f in fsummary if f["ns"]}
    ops = subject_ops(points)
    rows = []
    for s in summary + ssummary:
        cost = next((c for c in COST_MODEL if c.bench == s.get("group", s[
            "bench"]) and c.when(s["workers"])), None)
        m = s["peers"].get(SUBJECT)
        m = m and m.get("rate", m)  # a server row's are per metric
        if (cost is None or not m or not all(f in ns
                                             for _, f in cost.terms)):
            continue
        floor_ns = sum(k * ns[f] for k, f in cost.terms)
        got = in_unit(s, floor_ns, m["median"],
                      ops.get((s["bench"], s["workers"])))
        if got:
            rows.append({"bench": s["bench"], "workers": s["workers"],
                         "unit": s["unit"], SUBJECT: m["median"],
                         "model": " + ".join(f"{k} × {f}" if k > 1 else f
                                             for k, f in cost.terms),
                         "floor_ns": floor_ns, "floor": got[0],
                         "ratio": got[1], "why": cost.why})
    return rows


def cost_table_rows(rows: List[dict]):
    head = ["benchmark", "unit", "workers", f"{SUBJECT} median", "floor",
            f"{SUBJECT}/floor", "notes (the floor it chases)"]
    return head, [[r["bench"], r["unit"], str(r["workers"]),
                   fmt_num(r[SUBJECT]), fmt_num(r["floor"]),
                   f"{r['ratio']:.2f}", f"{r['model']}: {r['why']}"]
                  for r in rows]


COST_FOOTNOTE = (
    f"The cost model: the floor a row chases is the sum of the floors above "
    f"that its operation cannot do without, in the row's unit (sleep and "
    f"parked: one per coroutine, times their count; echo: a ceiling rate, "
    f"the inverse of its time per round trip).  {SUBJECT}/floor is "
    f"{SUBJECT}'s median over that floor as times (for a rate: the ceiling "
    f"over {SUBJECT}'s rate): how many times the floor's cost {SUBJECT} "
    f"pays.  Lower bounds that leave out the scheduler's bookkeeping, not "
    f"predictions.")

# --docs: instructions per operation under callgrind, of these benchmarks
# at 1 worker: (benchmark, what one operation is, what many are)
CALLGRIND = [("yield", "yield", "yields"),
             ("spawn", "spawn+join", "spawn+join pairs")]
CG_TOTAL_RE = re.compile(r"^(?:summary|totals):\s+(\d+)", re.M)


def callgrind_one(weft: Peer, bench: Bench, timeout: float) -> dict:
    """weft-bench NAME 1 under callgrind: the run's record, with the total
    instruction count (all threads, start-up included) and it per op.
    weft-bench's root() runs the work twice (the warm-up and the timed run,
    `ops` operations each): per op is total / (2 × ops)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        rec = run_one(weft, bench, 1, timeout, wrap=[
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
        m = CG_TOTAL_RE.search(out.read_text()) if out.exists() else None
    if rec["ok"] and m is None:
        rec.update(ok=False, error="no summary: or totals: line in "
                   "callgrind's output file")
    if rec["ok"]:
        rec["instructions"] = int(m[1])
        rec["per_op"] = rec["instructions"] / (2 * rec["ops"])
    return rec


def run_callgrind(args, weft: Peer, prog: Progress,
                  failures: List[str]) -> List[dict]:
    """With --docs (not --quick): callgrind_one of each CALLGRIND benchmark
    that --only selects, its record with "what" and "whats"."""
    if not args.docs or args.quick:
        return []
    if shutil.which("valgrind") is None:
        print("bench.py: callgrind skipped: valgrind not found "
              "(apt-get install -y valgrind)")
        return []
    recs = []
    for name, what, whats in CALLGRIND:
        if name not in args.only:
            continue
        tag = f"[{name} w=1]"
        prog.show(f"{tag} {SUBJECT} under callgrind")
        rec = callgrind_one(weft, next(b for b in BENCHMARKS
                                       if b.name == name), args.timeout)
        rec["what"], rec["whats"] = what, whats
        note_failure(rec, tag, "under callgrind", prog, failures)
        recs.append(rec)
    return recs


def callgrind_lines(recs: List[dict]) -> str:
    """E.g. "- instructions per yield: 167 (1,339,160,873 for `weft-bench
    yield 1`, 2 × 4,000,000 yields)", a line per good record."""
    lines = []
    for r in (r for r in recs if r["ok"]):
        prog, name, workers = r["cmd"][-3:]
        lines.append(f"- instructions per {r['what']}: {r['per_op']:.0f} "
                     f"({r['instructions']:,} for `{Path(prog).name} {name} "
                     f"{workers}`, 2 × {r['ops']:,} {r['whats']})")
    return "\n".join(lines)


CALLGRIND_FOOTNOTE = (
    "Counted by `valgrind --tool=callgrind`: every instruction of the "
    "process, all threads and start-up included, over weft-bench's warm-up "
    "and timed run (the total over 2 × ops).")


# ------------------------------------------------------------------ charts


def gnuplot(script: str, ctx: Ctx) -> bool:
    p = subprocess.run(["gnuplot"], input=script, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        print(f"bench.py: gnuplot failed:\n{p.stdout}", file=sys.stderr)
        return False
    return True


TERM = "set terminal pngcairo size 900,540 noenhanced font ',10'"


def charts(summary: List[dict], ssummary: List[dict], peers: List[Peer],
           speers: List[Peer], workers: List[int], ctx: Ctx) -> List[Path]:
    if shutil.which("gnuplot") is None:
        print("bench.py: gnuplot not found; no charts "
              "(apt-get install -y gnuplot-nox)")
        return []
    made = server_chart(ssummary, speers, ctx)
    if not summary:
        return made
    others = [p.name for p in peers if p.name != SUBJECT]
    benches = list(dict.fromkeys(s["bench"] for s in summary))
    by = {(s["bench"], s["workers"]): s for s in summary}
    # a benchmark no peer ran has no ratio and no bars
    rbenches = [b for b in benches
                if any(s["ratios"] for s in summary if s["bench"] == b)]

    # ratios.png: clustered bars, one cluster per benchmark, a bar per
    # (peer, workers); below 1 means weft is faster.  A log scale: ratios
    # from 0.1 to 40 share the chart.
    # the (peer, workers) with a ratio somewhere (--quick: peers at the
    # largest worker count only)
    cols = [(p, w) for p in others for w in workers
            if any(s["ratios"].get(p) for s in summary if s["workers"] == w)]
    if cols:
        dat = ctx.out_dir / "ratios.dat"
        with open(dat, "w") as f:
            f.write("bench " + " ".join(f'"{SUBJECT}/{p} w={w}"'
                                        for p, w in cols) + "\n")
            for b in rbenches:
                vals = []
                for p, w in cols:
                    s = by.get((b, w))
                    r = s["ratios"].get(p) if s else None
                    vals.append(f"{r['median']:.4f}" if r else "?")
                f.write(f'"{b}" ' + " ".join(vals) + "\n")
        png = ctx.out_dir / "ratios.png"
        plot = ", ".join(f"'{dat}' using {i + 2}:xtic(1) title columnhead"
                         for i in range(len(cols)))
        ok = gnuplot(f"""{TERM}
set output '{png}'
set title 'weft time / peer time (median of pairs; < 1: weft faster)'
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set logscale y 2
set yrange [*:*]
set ylabel 'ratio (log scale: 1/2 and 2 equally far from 1)'
set xtics rotate by 30 right
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2
plot {plot}
""", ctx)
        if ok:
            made.append(png)

    # scaling.png: speed-up vs one worker, per benchmark, weft solid and
    # peers dashed, with the ideal line.
    sweep = [b for b in benches
             if sum(1 for w in workers if (b, w) in by) > 1 and 1 in workers]
    if sweep:
        dat = ctx.out_dir / "scaling.dat"
        names = [p.name for p in peers]
        with open(dat, "w") as f:
            for b in sweep:
                for pn in names:
                    f.write(f"# {b} {pn}\n")
                    for w in workers:
                        s = by.get((b, w))
                        v = s["scaling"].get(pn) if s else None
                        if v is not None:
                            f.write(f"{w} {v:.4f}\n")
                    f.write("\n\n")
        png = ctx.out_dir / "scaling.png"
        parts, idx = [], 0
        for bi, b in enumerate(sweep):
            for pi, pn in enumerate(names):
                dt = 1 if pi == 0 else pi + 1
                parts.append(f"'{dat}' index {idx} using 1:2 with linespoints "
                             f"lc {bi + 1} dt {dt} pt {pi + 5} "
                             f"title '{b} ({pn})'")
                idx += 1
        ok = gnuplot(f"""{TERM}
set output '{png}'
set title 'speed-up vs 1 worker (median times)'
set xlabel 'workers'
set ylabel 'speed-up'
set xtics ({", ".join(str(w) for w in workers)})
set xrange [{min(workers) - 0.2}:{max(workers) + 0.2}]
set yrange [0:*]
set grid
set key top left
plot x with lines lc 'gray' dt 3 title 'ideal', {", ".join(parts)}
""", ctx)
        if ok:
            made.append(png)
    return made


def server_chart(ssummary: List[dict], peers: List[Peer],
                 ctx: Ctx) -> List[Path]:
    """servers.png: per server row, a bar per peer for the rate ratio and one
    for the p99 ratio; the two read in opposite directions, as the legend
    says."""
    others = [p.name for p in peers if p.name != SUBJECT]
    if not ssummary or not others:
        return []
    cols = [(p, k) for p in others for k in ("rate", "p99")]
    if not any((s["ratios"].get(p) or {}).get(k)
               for s in ssummary for p, k in cols):
        return []  # no row with a ratio: every run of a side failed
    label = {"rate": "rate (> 1: {s} serves more)",
             "p99": "p99 latency (< 1: {s} shorter tail)"}
    dat = ctx.out_dir / "servers.dat"
    with open(dat, "w") as f:
        f.write("bench " + " ".join(
            f'"{SUBJECT}/{p} {label[k].format(s=SUBJECT)}"' for p, k in cols)
            + "\n")
        for s in ssummary:
            vals = []
            for p, k in cols:
                r = (s["ratios"].get(p) or {}).get(k)
                vals.append(f"{r['median']:.4f}" if r else "?")
            f.write(f'"{s["bench"]}" ' + " ".join(vals) + "\n")
    png = ctx.out_dir / "servers.png"
    plot = ", ".join(f"'{dat}' using {i + 2}:xtic(1) title columnhead"
                     for i in range(len(cols)))
    ok = gnuplot(f"""{TERM}
set output '{png}'
set title 'servers on 1 worker: {SUBJECT} / peer (median of run-by-run ratios)'
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set yrange [0:*]
set ylabel 'ratio'
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2
plot {plot}
""", ctx)
    return [png] if ok else []


# -------------------------------------------------------------------- main


def metadata(args, peers: List[Peer], ctx: Ctx) -> dict:
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "cpu": cpu,
        "cpus_online": os.cpu_count(),
        "cpus_affinity": len(os.sched_getaffinity(0)),
        "git": run_out(["git", "describe", "--always", "--dirty"], cwd=ROOT),
        # what each peer was built with
        "versions": {p.name: p.version(ctx) for p in peers
                     if p.name != SUBJECT},
        "runs": args.runs,
        "peer_runs": args.peer_runs,
        "workers": args.workers,
        "peer_workers": args.peer_workers,
        "peers": [p.name for p in peers],
        "argv": sys.argv[1:],
    }


DOCS = ROOT / "docs" / "bench.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def update_docs(md: Path, charts_made) -> None:
    """Replaces the generated section of docs/bench.md with this run's table
    and copies the charts to docs/bench/; the prose around it is kept."""
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"bench.py: {DOCS} lacks the {BEGIN} / {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = md.read_text()
    img_dir = DOCS.parent / "bench"
    img_dir.mkdir(exist_ok=True)
    for chart in charts_made:
        chart = Path(chart)
        shutil.copy(chart, img_dir / chart.name)
        body += f"\n![{chart.stem}](bench/{chart.name})\n"
    DOCS.write_text(head + BEGIN + "\n" + body + END + tail)
    print(f"updated {DOCS}")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="weft benchmarks (scheduler, timers, servers) vs peer runtimes")
    ap.add_argument("--quick", action="store_true",
                    help="3 runs per point instead of 5, and the peers "
                    "other than weft 1, without a warm-up invocation, only at "
                    "the largest worker count (same sizes; the server rows "
                    "run shorter)")
    ap.add_argument("--only", metavar="NAME[,NAME]",
                    help="only these benchmarks: " +
                    ", ".join(b.name for b in BENCHMARKS) + ", " +
                    ", ".join(GROUPS) + " (the server rows; or one row: " +
                    ", ".join(b.name for b in SERVER_BENCHES) + ")")
    ap.add_argument("--peers", metavar="NAME[,NAME]",
                    help="only these peers besides weft: " +
                    ", ".join(p.name for p in PEERS[1:]))
    ap.add_argument("--workers", metavar="LIST",
                    help="worker counts, e.g. 1,2,4 (default: 1 and the CPUs "
                    "in the affinity mask)")
    ap.add_argument("--runs", type=int, help="runs per point (default 5)")
    ap.add_argument("--peer-runs", type=int,
                    help="runs per point of the peers other than weft "
                    "(default: --runs; --quick: 1)")
    ap.add_argument("--peer-workers", metavar="LIST",
                    help="the worker counts of --workers at which the peers "
                    "other than weft run (default: all; --quick: the largest)")
    ap.add_argument("--build-dir", default="build", type=Path,
                    help="meson build directory (default: build)")
    ap.add_argument("--json", type=Path,
                    help="results file (default: BUILD/bench/results.json)")
    ap.add_argument("--docs", action="store_true",
                    help="also write the tables and charts into "
                    "docs/bench.md (without --quick, and with valgrind: also "
                    "callgrind's instructions per yield and per spawn+join)")
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds per invocation (default 300)")
    args = ap.parse_args(argv)
    if args.runs is None:
        args.runs = 3 if args.quick else 5
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.peer_runs is None:
        args.peer_runs = 1 if args.quick else args.runs
    if args.peer_runs < 1:
        ap.error("--peer-runs must be at least 1")
    # the peers' warm-up invocation: not in a quick run
    args.peer_warmup = not args.quick

    def counts(option: str, value: str) -> List[int]:
        try:
            ws = sorted({int(x) for x in value.split(",") if x.strip()})
        except ValueError:
            ap.error(f"{option}: not a list of integers: {value!r}")
        if not ws or ws[0] < 1 or ws[-1] > 1024:
            ap.error(f"{option}: counts must be 1..1024")
        return ws

    if args.workers:
        args.workers = counts("--workers", args.workers)
    else:
        args.workers = sorted({1, len(os.sched_getaffinity(0))})
    if args.peer_workers:
        args.peer_workers = counts("--peer-workers", args.peer_workers)
        bad = [w for w in args.peer_workers if w not in args.workers]
        if bad:
            ap.error(f"--peer-workers: {bad} not in --workers {args.workers}")
    else:
        args.peer_workers = args.workers[-1:] if args.quick else args.workers
    def pick(option: str, value: Optional[str], known: List[str]) -> List[str]:
        """The comma-separated names of --only / --peers, all known ones if unset."""
        if not value:
            return known
        want = [x.strip() for x in value.split(",") if x.strip()]
        bad = [x for x in want if x not in known]
        if bad:
            ap.error(f"{option}: unknown {', '.join(bad)} "
                     f"(known: {', '.join(known)})")
        return want

    args.only = pick("--only", args.only, [b.name for b in BENCHMARKS] +
                     GROUPS + [b.name for b in SERVER_BENCHES])
    args.peers = pick("--peers", args.peers, [p.name for p in PEERS[1:]])
    if not args.build_dir.is_absolute():
        args.build_dir = (Path.cwd() / args.build_dir).resolve()
    if args.json is None:
        args.json = args.build_dir / "bench" / "results.json"
    return args


def run_benches(args, peers: List[Peer], prog: Progress,
                failures: List[str]):
    """Every selected in-process benchmark: (points, summary)."""
    points, summary = [], []
    for bench in (b for b in BENCHMARKS if b.name in args.only):
        ws = ([bench.fixed_workers] if bench.fixed_workers else
              args.workers[-1:] if bench.heavy and args.quick else args.workers)
        for w in ws:
            tag = f"[{bench.name} w={w}]"
            # the peers at this point: those with an equivalent, at the
            # worker counts they run (a benchmark of fixed workers: there)
            bpeers = [p for p in peers if not p.absent(bench, args.quick) and (
                p.name == SUBJECT or bench.fixed_workers
                or w in args.peer_workers)]
            absent = [f"{p.name}: {p.absent(bench, args.quick)}" for p in peers
                      if p.absent(bench, args.quick)]
            warm: Dict[str, dict] = {}
            for p in bpeers:
                if (p.name == SUBJECT and not args.quick) or args.peer_warmup:
                    prog.show(f"{tag} {p.name} warm-up")
                    warm[p.name] = run_one(p, bench, w, args.timeout)
                    note_failure(warm[p.name], tag, "warm-up", prog, failures)
            runs = interleave(bpeers, args, tag, prog, failures,
                              lambda p: run_one(p, bench, w, args.timeout))
            points.append({"bench": bench.name, "workers": w,
                           "warmup": warm, "runs": runs})
            summary.append(summarize(bench, w, runs, bpeers, absent))
    return points, summary


def interleave(peers: List[Peer], args, tag: str, prog: "Progress",
               failures: List[str],
               run: Callable[[Peer], dict]) -> Dict[str, List[dict]]:
    """Round i runs every peer that has a run i left (the subject has
    --runs, the others --peer-runs), in alternating order, so that no peer
    always runs on a machine another just warmed (or heated)."""
    want = {p.name: args.runs if p.name == SUBJECT else args.peer_runs
            for p in peers}
    runs: Dict[str, List[dict]] = {p.name: [] for p in peers}
    for i in range(max(want.values(), default=0)):
        for p in (peers if i % 2 == 0 else peers[::-1]):
            if i < want[p.name]:
                prog.show(f"{tag} {p.name} run {i + 1}/{want[p.name]}")
                rec = run(p)
                runs[p.name].append(rec)
                note_failure(rec, tag, f"run {i + 1}", prog, failures)
    return runs


BENCH_FOOTNOTE = (f"Lower is better.  Cells are median (min–max) over the "
                  f"runs; {SUBJECT}/peer is the median of run-by-run time "
                  f"ratios (below 1: {SUBJECT} is faster); scaling is "
                  f"{SUBJECT}'s speed-up at that worker count over 1 worker.")


def runs_note(args, servers: bool = False) -> str:
    """E.g. "3 runs per point; the other peers 1, only at 2 workers (or a
    benchmark's fixed count), without a warm-up invocation"."""
    others = []
    if args.peer_runs != args.runs:
        others.append(str(args.peer_runs))
    if args.peer_workers != args.workers and not servers:
        others.append("only at " + ", ".join(map(str, args.peer_workers)) +
                      " workers (or a benchmark's fixed count)")
    if not args.peer_warmup and not servers:  # the servers have none
        others.append("without a warm-up invocation")
    return (f"{args.runs} runs per {'row' if servers else 'point'}" +
            (f"; the other peers {', '.join(others)}" if others else "") +
            ("; --quick: no warm-up invocation of weft either, sleep and "
             "parked at the largest worker count only"
             if args.quick and not servers else ""))


def write_markdown(md: Path, meta: dict, args, tables: List[Tuple[str, str]],
                   failures: List[str]):
    """results.md: where and how, what each row is, then each table (as
    (table, footnote)) and the failures."""
    with open(md, "w") as f:
        f.write(f"<!-- generated by scripts/bench.py on {meta['date']} -->\n")
        f.write(f"Measured on {meta['cpu'] or 'unknown CPU'}, "
                f"{meta['cpus_affinity']} CPUs, Linux {meta['kernel']}, "
                f"weft {meta['git'] or '(no git)'}; "
                + "".join(f"{v}; " for v in meta["versions"].values() if v)
                + f"{runs_note(args)}.\n\n")
        for b in BENCHMARKS + SERVER_BENCHES:
            if b.name in args.only or getattr(b, "group", None) in args.only:
                f.write(f"- **{b.name}**: {b.title}\n")
        for table, footnote in tables:
            f.write("\n" + table + "\n\n" + footnote + "\n")
        if failures:
            f.write("\n**Failures:**\n\n" +
                    "".join(f"- {x}\n" for x in failures))


def build_peers(args, ctx: Ctx) -> List[Peer]:
    peers: List[Peer] = []
    for p in PEERS:
        if p.name != SUBJECT and p.name not in args.peers:
            continue
        try:
            p.program = p.build(ctx)
        except Skip as e:
            print(f"bench.py: {p.name} peer skipped: {e}")
            continue
        peers.append(p)
    return peers


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out_dir = args.build_dir / "bench"
    ctx = Ctx(args.build_dir, out_dir, [])

    build_weft(ctx)  # fail early, before creating anything
    out_dir.mkdir(parents=True, exist_ok=True)
    peers = build_peers(args, ctx)
    print(f"bench.py: peers: {', '.join(p.name for p in peers)}; workers: "
          f"{', '.join(map(str, args.workers))}; {runs_note(args)}",
          file=sys.stderr)

    prog = Progress()
    failures: List[str] = []
    t_start = time.monotonic()
    fpoints, fsummary = run_floors(args, ctx, prog, failures)
    points, summary = run_benches(args, peers, prog, failures)
    spoints, ssummary, pins = run_servers(args, peers, ctx, prog, failures)
    cg = run_callgrind(args, peers[0], prog, failures)
    prog.done()
    elapsed = time.monotonic() - t_start

    add_scaling(summary, peers)
    meta = metadata(args, peers, ctx)
    meta["elapsed_s"] = round(elapsed, 1)
    meta["servers"] = pins and {"workers": SERVER_WORKERS, "pinning": pins.note,
                                "echo_s": ECHO_SECONDS[args.quick],
                                "wrk_s": WRK_SECONDS[args.quick]}

    text, tables = [], []  # the text tables; (markdown, footnote) pairs

    def add_table(head_rows, note: str):
        head, rows = head_rows
        if rows:
            text.append(text_table(head, rows) + "\n\n" + note)
            tables.append((md_table(head, rows), note))

    if summary:
        add_table(table_rows(summary, peers), BENCH_FOOTNOTE)
    # the peers of the server rows (not those without servers)
    speers = [p for p in peers if any(p.name in s["peers"] for s in ssummary)]
    if ssummary:
        add_table(server_table_rows(ssummary, speers),
                  server_footnote(args, pins, speers))
    costs = cost_model(summary, ssummary, points, fsummary)
    add_table(floor_table_rows(fsummary), floor_footnote(args))
    add_table(cost_table_rows(costs), COST_FOOTNOTE)
    lines = callgrind_lines(cg)
    if lines:
        text.append(lines + "\n\n" + CALLGRIND_FOOTNOTE)
        tables.append((lines, CALLGRIND_FOOTNOTE))
    for t in text:
        print("\n" + t)
    print(f"\n{runs_note(args)}; {elapsed:.0f} s in all")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta,
                   "benchmarks": [dataclasses.asdict(b) for b in BENCHMARKS
                                  if b.name in args.only],
                   "summary": summary, "points": points,
                   "servers": {
                       "benchmarks": [dataclasses.asdict(b) for b in
                                      SERVER_BENCHES if b.name in args.only
                                      or b.group in args.only],
                       "summary": ssummary, "points": spoints},
                   "floors": {
                       "benchmarks": [dataclasses.asdict(b) for b in FLOORS],
                       "summary": fsummary, "points": fpoints},
                   "cost_model": costs, "callgrind": cg,
                   "failures": failures}, f, indent=1)
        f.write("\n")

    md = out_dir / "results.md"
    write_markdown(md, meta, args, tables, failures)
    made = charts(summary, ssummary, peers, speers, args.workers, ctx)
    print(f"wrote {args.json}, {md}" +
          "".join(f", {m}" for m in made))
    if args.docs:
        update_docs(md, made)
    if failures:
        print(f"bench.py: {len(failures)} failure(s):", file=sys.stderr)
        for x in failures:
            print("  " + x, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
