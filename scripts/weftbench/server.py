# SPDX-License-Identifier: MIT
"""The server rows: every peer's echo, HTTP, HTTPS or UDP echo server on a
fresh port, on 1 worker pinned to one CPU (taskset) under loadgen or wrk
pinned to another, and on 2 workers with server and load unpinned, sharing
the CPUs (the rows with a fixed worker count at that count only)."""

import dataclasses
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from .cost import (attach_ok, per_msg, sample, strace_skip, strace_start,
                   strace_stop, syscall_summary)
from .benches import (SERVER_BENCHES, SERVER_WORKERS, WRK_GROUPS, ServerBench,
                      row_workers, server_sharing)
from .parse import judge, parse_result, weft_rings, weft_sched, wrk_result
from .peers import Ctx, Peer, Skip, tls_files
from .procs import free_port, log_tail, server_running
from .progress import Progress
from .runs import interleave, run_counts
from .stats import summarize_server

ECHO_SECONDS = {False: (5.0, 1.0), True: (0.6, 0.3)}  # quick -> (run, warm-up)
# --quick's server worker counts (CI): see server_worker_counts
QUICK_SERVER_WORKERS = (1,)
WRK_SECONDS = {False: 10, True: 2}
READY_TIMEOUT_S = 10  # for "listening on PORT"
HELLO = b"Hello, World!"


@dataclasses.dataclass
class Pins:
    """The CPUs of the server and of its load (taskset lists; None:
    unpinned), why, and the load's threads."""
    server: Optional[str]
    load: Optional[str]
    note: str
    sharing: bool = False  # unpinned on purpose: server and load share CPUs
    load_threads: int = 1

    @staticmethod
    def choose(workers: int = 1, load_threads: int = 1) -> "Pins":
        """1 worker: the server on the first CPU, its load on the next
        load_threads; more: both unpinned, sharing the CPUs."""
        cpus = sorted(os.sched_getaffinity(0))
        n = load_threads
        if server_sharing(workers):
            return Pins(None, None, f"server and load unpinned, sharing the "
                        f"{len(cpus)} CPUs" + (f", {n} load threads" if n > 1
                                              else ""), True, n)
        if shutil.which("taskset") is None:
            return Pins(None, None, "unpinned: taskset not found (util-linux)",
                        False, n)
        if len(cpus) < 1 + n:
            return Pins(None, None, f"unpinned: only {len(cpus)} CPUs for the "
                        f"server and {n} load thread{'s' if n > 1 else ''}",
                        False, n)
        load = ",".join(map(str, cpus[1:1 + n]))
        return Pins(str(cpus[0]), load, f"server on CPU {cpus[0]}, load on "
                    f"CPU{'s' if n > 1 else ''} {load}", False, n)

    @staticmethod
    def wrap(cmd: List[str], cpus: Optional[str]) -> List[str]:
        return cmd if cpus is None else ["taskset", "-c", cpus] + cmd


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


def http_check(ctx: Ctx, port: int, cafile: Optional[Path] = None
               ) -> Optional[str]:
    """Two pipelined requests, the second with Connection: close: two 200s
    with the body, then the end of the connection (over TLS with cafile:
    the server's certificate verified against it, for localhost, and its
    close_notify).  None when all is right, else what is wrong."""
    req = (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
           b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    what = "HTTPS check" if cafile else "HTTP check"
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                (raw if cafile is None else ssl.create_default_context(
                    cafile=str(cafile)).wrap_socket(
                        raw, server_hostname="localhost")) as s:
            s.sendall(req)
            while chunk := s.recv(65536):
                data += chunk
    except OSError as e:  # ssl.SSLError is one
        return f"{what}: {e}"
    for i in (1, 2):
        head, blank, data = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = [v.strip() for n, _, v in (x.partition(b":") for x in lines[1:])
                  if n.strip().lower() == b"content-length"]
        if not blank or not lines[0].startswith(b"HTTP/1.1 200 "):
            return f"{what}: response {i} is not a 200: {head[:60]!r}"
        if length != [str(len(HELLO)).encode()] or not data.startswith(HELLO):
            return f"{what}: response {i}: body {data[:20]!r}, length {length}"
        data = data[len(HELLO):]
    if data:
        return f"{what}: {len(data)} bytes after the second response"
    return None


def https_check(ctx: Ctx, port: int) -> Optional[str]:
    return http_check(ctx, port, tls_files(ctx)[0])


def udp_check(ctx: Ctx, port: int) -> Optional[str]:
    """One datagram must come back as it went, within 5 s."""
    msg = os.urandom(64)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            s.send(msg)
            got = s.recv(65536)
    except OSError as e:
        return f"UDP check: {e}"
    return None if got == msg else f"UDP check: {got[:20]!r}... came back"


@dataclasses.dataclass
class Load:
    """A load's command, its warm-up (seconds after its start that its
    timed window opens), its timeout, and how to read its stdout."""
    cmd: List[str]
    warm_s: float
    timeout: float
    parse: Callable[[str], Optional[Dict[str, str]]]


def load_echo(sb: ServerBench, impl: str, workers: int, port: int,
              tool: Path, run_s: float, warm_s: float, threads: int) -> Load:
    udp = ["-u"] if sb.server == "udp-echo" else []
    big = ["-b", str(sb.big_conns), "-B", str(sb.big_size)] if sb.big_conns else []
    cmd = [str(tool)] + udp + ["-c", str(sb.conns), "-s", str(sb.size)] + big + [
           "-d", str(run_s), "-w", str(warm_s), "-p", str(port),
           "-t", str(threads), "-i", impl, "-W", str(workers)]
    return Load(cmd, warm_s, run_s + warm_s + 60, parse_result)


def load_wrk(sb: ServerBench, impl: str, workers: int, port: int,
             tool: Path, run_s: float, warm_s: float, threads: int) -> Load:
    # wrk has no warm-up: its window is the whole run
    scheme = "https" if sb.server == "https" else "http"
    cmd = [str(tool), f"-t{threads}", f"-c{sb.conns}", f"-d{run_s:g}s", "--latency",
           f"{scheme}://127.0.0.1:{port}/"]
    return Load(cmd, 0.0, run_s + 60,
                lambda out: wrk_result(out, sb.name, impl, workers))


def load_seconds(sb: ServerBench, quick: bool) -> Tuple[float, float]:
    """(run, warm-up) seconds of the timed runs of sb."""
    if sb.group in WRK_GROUPS:
        return float(WRK_SECONDS[quick]), 0.0
    return ECHO_SECONDS[quick]


def run_load(load: Load, pins: Pins, server_pid: int):
    """Runs the load (pinned); samples the server when the load's warm-up
    ends and when the load is over.  (RESULT fields or None, the completed
    process, the two samples)."""
    p = subprocess.Popen(Pins.wrap(load.cmd, pins.load),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        if load.warm_s > 0:
            time.sleep(load.warm_s)
        before = sample(server_pid)
        out, err = p.communicate(timeout=load.timeout)
        after = sample(server_pid)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise subprocess.TimeoutExpired(load.cmd, load.timeout)
    except BaseException:
        p.kill()
        p.wait()
        raise
    done = subprocess.CompletedProcess(load.cmd, p.returncode, out, err)
    return load.parse(out), done, before, after


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


def make_cert(ctx: Ctx) -> None:
    """A fresh self-signed certificate for localhost and 127.0.0.1 and its
    key (EC P-256, as `weft-tls cert` makes), at tls_files(ctx), for every
    peer's https server; Skip if openssl cannot make them."""
    cert, key = tls_files(ctx)
    openssl = shutil.which("openssl")
    if openssl is None:
        raise Skip("`openssl` not found on PATH (apt-get install -y openssl)")
    cert.parent.mkdir(parents=True, exist_ok=True)
    cmd = [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
           "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
           "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        last = (p.stdout.strip().splitlines() or ["no output"])[-1]
        raise Skip(f"openssl req failed (exit status {p.returncode}): {last}")


def find_wrk_tls(ctx: Ctx) -> Path:
    """wrk, and the certificate of the https servers made."""
    wrk = find_wrk(ctx)
    make_cert(ctx)
    return wrk


# group -> (find the load tool (and make what the servers need), run it,
# check the server before it)
LOADS = {
    "echo": (find_loadgen, load_echo, None),
    "http": (find_wrk, load_wrk, http_check),
    "tls": (find_wrk_tls, load_wrk, https_check),
    "udp": (find_loadgen, load_echo, udp_check),
    "fair": (find_loadgen, load_echo, None),
}


def run_server_one(peer: Peer, sb: ServerBench, workers: int, ctx: Ctx,
                   tool: Path, quick: bool, pins: Pins) -> dict:
    port = free_port()
    cmd = Pins.wrap(peer.server(peer, ctx, sb.server, port), pins.server)
    env = dict(os.environ)
    env.update(peer.env(workers))
    log = ctx.out_dir / f"server-{peer.name}-{sb.server}.log"
    _, load, check = LOADS[sb.group]
    rec = {"peer": peer.name, "cmd": cmd, "port": port}
    t0 = time.monotonic()
    with server_running(cmd, env, log) as srv:
        err = wait_listening(srv, log, port)
        if err is None and check is not None:
            err = check(ctx, port)
        if err is None:
            try:
                r, p, before, after = run_load(
                    load(sb, peer.name, workers, port, tool,
                         *load_seconds(sb, quick), pins.load_threads),
                    pins, srv.pid)
                rec.update(judge(r, p, sb.name, workers))
                if rec["ok"]:
                    rec["cost"] = per_msg(before, after, rec["ops"])
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
    if rec["ok"]:  # the server's own WEFT_STATS=1 lines, at its exit
        text = log.read_text(errors="replace")
        rec["extra"].update({**weft_sched(text), **weft_rings(text)})
    if not rec["ok"]:
        rec["stderr"] = (rec.get("stderr", "") + "\nserver: " +
                         log_tail(log)).strip()
    return rec


SYSCALL_SECONDS = 1.0  # the load of the syscall pass, without a warm-up


def syscalls_wanted(args) -> bool:
    """The untimed syscall pass: not under --quick nor --no-syscalls."""
    return not args.quick and not getattr(args, "no_syscalls", False)


def syscall_pass(peer: Peer, sb: ServerBench, workers: int, ctx: Ctx,
                 tool: Path, pins: Pins) -> dict:
    """Once per peer and row, untimed: a fresh server under `strace -c -f`
    for SYSCALL_SECONDS of the same load; its system calls per message
    ({"skipped": why} or {"error": why} when there are none)."""
    why = strace_skip()
    if why is not None:
        return {"skipped": why}
    port = free_port()
    cmd = Pins.wrap(peer.server(peer, ctx, sb.server, port), pins.server)
    env = dict(os.environ)
    env.update(peer.env(workers))
    log = ctx.out_dir / f"server-{peer.name}-{sb.server}-strace.log"
    out = ctx.out_dir / f"strace-{peer.name}-{sb.name}-w{workers}.txt"
    out.unlink(missing_ok=True)
    _, load, _ = LOADS[sb.group]
    with server_running(cmd, env, log) as srv:
        err = wait_listening(srv, log, port)
        if err is not None:
            return {"error": err}
        st = strace_start(srv.pid, out)
        err = attach_ok(st)
        if err is not None:
            strace_stop(st, out)
            return {"skipped": f"strace could not attach: {err}"}
        try:
            r, p, _, _ = run_load(load(sb, peer.name, workers, port, tool,
                                       SYSCALL_SECONDS, 0.0,
                                       pins.load_threads), pins, srv.pid)
        except subprocess.TimeoutExpired as e:
            strace_stop(st, out)
            return {"error": f"load timed out after {e.timeout:.0f} s"}
        except BaseException:
            strace_stop(st, out)
            raise
        calls = strace_stop(st, out)
    rec = judge(r, p, sb.name, workers)
    if not rec["ok"]:
        return {"error": f"load under strace: {rec['error']}"}
    res = syscall_summary(calls, rec["ops"])
    res["file"] = str(out)
    return res


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


def server_rows(args) -> List[ServerBench]:
    """The server rows --only selects."""
    return [b for b in SERVER_BENCHES
            if b.group in args.only or b.name in args.only]


def server_worker_counts(workers: Optional[List[int]], quick: bool
                         ) -> List[int]:
    """The worker counts of the server rows: --workers when given (None:
    not given), else SERVER_WORKERS, under --quick QUICK_SERVER_WORKERS."""
    if workers:
        return list(workers)
    return list(QUICK_SERVER_WORKERS if quick else SERVER_WORKERS)


def server_tag(sb: ServerBench, workers: int) -> str:
    """The progress tag of a server row at a worker count."""
    return f"[{sb.name} w={workers}]"


def server_steps(args, peers: List[Peer]) -> List[Tuple[str, int]]:
    """The progress plan of run_servers: (tag, invocations) per row and
    worker count, for the peers that have servers at all."""
    want = run_counts([p for p in peers if p.server is not None], args)
    passes = len(want) if syscalls_wanted(args) else 0
    return [(server_tag(sb, w), sum(want.values()) + passes)
            for sb in server_rows(args)
            for w in row_workers(sb, args.server_workers)]


def run_servers(args, peers: List[Peer], ctx: Ctx, prog: Progress,
                failures: List[str]):
    """Every selected server row at each worker count of
    args.server_workers: (points, summary, pins per worker count)."""
    rows = server_rows(args)
    if not rows:
        return [], [], None
    # the counts some row runs at (the fixed rows' only, if alone)
    pins = {w: Pins.choose(w, args.load_threads)
            for w in sorted({w for sb in rows
                             for w in row_workers(sb, args.server_workers)})}
    for w, pn in pins.items():
        print(f"bench.py: servers on {w} worker{'s' if w > 1 else ''}: "
              f"{pn.note}", file=sys.stderr)
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
        if not row_workers(sb, args.server_workers):
            print(f"bench.py: skipped {sb.name}: it runs on "
                  f"{sb.fixed_workers} worker only, not on "
                  f"{', '.join(map(str, args.server_workers))}")
        for w in row_workers(sb, args.server_workers):
            tag = server_tag(sb, w)
            prog.step(tag)
            runs = interleave(
                speers, args, tag, prog, failures,
                lambda p: run_server_one(p, sb, w, ctx, tools[sb.group],
                                         args.quick, pins[w]))
            sys_calls = {}
            if syscalls_wanted(args):
                for p in speers:
                    prog.show(f"{tag} {p.name} under strace -c -f (untimed)")
                    sys_calls[p.name] = syscall_pass(p, sb, w, ctx,
                                                     tools[sb.group], pins[w])
                    what = sys_calls[p.name].get("error")
                    if what is not None:
                        prog.say(f"bench.py: {tag} {p.name}: no syscall "
                                 f"count: {what}")
            points.append({"bench": sb.name, "workers": w,
                           "sharing": pins[w].sharing, "pinning": pins[w].note,
                           "runs": runs, "syscalls": sys_calls})
            summary.append(summarize_server(sb, runs, speers, sys_calls, w,
                                            pins[w].sharing))
    return points, summary, pins
