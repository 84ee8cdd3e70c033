# SPDX-License-Identifier: MIT
"""The benchmark rows: the in-process ones (BENCHMARKS) and the network
servers (SERVER_BENCHES)."""

import dataclasses
from typing import List, Optional, Sequence, Tuple


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
    # a holder keeps its permit / lock across one yield, so that they
    # contend at 1 worker too (bench/weft-bench.c)
    Bench("sem", "1000 coroutines x 500 acquire/yield/release of a "
          "semaphore of 10 permits", True, "ns/acquire+release",
          extra=[("max_inside", "most inside at once", 1)]),
    Bench("rwlock", "1000 coroutines x 500 locks of one rwlock, 95% "
          "read, 5% write, each held across a yield", True, "ns/lock+unlock",
          extra=[("max_readers", "most readers at once", 1)]),
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


# The worker counts of the server rows (WEFT_WORKERS / GOMAXPROCS /
# TOKIO_WORKER_THREADS): 1, the server pinned to one CPU and its load to
# another; and 2, server and load unpinned, sharing the CPUs, so that the
# multi-worker I/O path is measured too.  --workers overrides it.
SERVER_WORKERS = (1, 2)
SHARING = "sharing CPUs"


def server_sharing(workers: int) -> bool:
    """Whether a server row at `workers` runs unpinned, sharing the CPUs
    with its load generator (every count but 1)."""
    return workers != 1


def server_label(name: str, workers: int,
                 sharing: Optional[bool] = None) -> str:
    """A server row's name in the tables: "echo-100-64 @1", and for the
    rows that share the CPUs "echo-100-64 @2 (sharing CPUs)" (sharing
    None: as server_sharing(workers) says)."""
    if sharing is None:
        sharing = server_sharing(workers)
    return f"{name} @{workers}" + (f" ({SHARING})" if sharing else "")


@dataclasses.dataclass
class ServerBench:
    """A network row: every peer's server of one kind under one load."""
    name: str  # the RESULT name
    group: str  # what --only selects (or the name itself)
    title: str
    # the kind of server the peers run: "echo", "http", "https", "udp-echo"
    server: str
    unit: str
    conns: int
    size: int = 0  # message bytes, for echo
    fixed_workers: Optional[int] = None  # run only at this worker count
    # echo: this many more connections moving big_size-byte messages beside
    # the conns ones, whose rate and latencies alone the row reports
    big_conns: int = 0
    big_size: int = 0


SERVER_BENCHES: List[ServerBench] = [
    ServerBench(f"echo-{c}-{n}", "echo",
                f"echo, {c} connections, {n} B messages, closed loop",
                "echo", "msgs/s", c, n)
    for c in (100, 1000) for n in (64, 4096)
] + [
    ServerBench("http-hello", "http",
                "HTTP/1.1 hello world under wrk, 100 connections, 1 thread",
                "http", "req/s", 100),
    # issue 22: TLS and UDP, 1 worker each
    ServerBench("https-hello", "tls",
                "HTTPS hello world (HTTP/1.1 over TLS, a self-signed EC P-256 "
                "certificate) under wrk, 100 keep-alive connections, 1 "
                "thread: each connection's one handshake is spread over "
                "thousands of requests, so it measures the TLS record layer "
                "more than handshakes", "https", "req/s", 100,
                fixed_workers=1),
    # issue 49: small requests beside long transfers on one worker, the
    # small ones' p99 (a coroutine moving 1 MiB without waiting must let
    # the others run: the byte budget)
    ServerBench("fair-100-64", "fair",
                "echo fairness: 100 connections of 64 B messages beside 4 "
                "moving 1 MiB messages, closed loop; the rate and latencies "
                "are the small ones' (loadgen -b)", "echo", "msgs/s", 100, 64,
                fixed_workers=1, big_conns=4, big_size=1 << 20),
    ServerBench("udp-100-64", "udp",
                "UDP echo, 100 sockets, 64 B datagrams, closed loop (loadgen "
                "-u: a datagram not echoed within 0.5 s is lost and replaced)",
                "udp-echo", "msgs/s", 100, 64, fixed_workers=1),
]
GROUPS = list(dict.fromkeys(b.group for b in SERVER_BENCHES))
WRK_GROUPS = ("http", "tls")  # the groups under wrk, the others loadgen's


def row_workers(sb: ServerBench, counts: Sequence[int]) -> List[int]:
    """The worker counts of counts that the row runs at (all, or its
    fixed_workers)."""
    return [w for w in counts if sb.fixed_workers in (None, w)]


@dataclasses.dataclass
class RedisBench:
    """A redis row (issue 24): hiredis clients against one redis-server,
    in each of the modes of bench/redis.c."""
    name: str  # the RESULT name, also what --only selects
    title: str
    clients: int
    unit: str = "req/s"
    group: str = "redis"


REDIS_MODES = ("hooks", "threads", "async")  # the first is the subject
REDIS_BENCHES: List[RedisBench] = [
    RedisBench(f"redis-{c}", f"hiredis SET/GET pairs, {c} clients, one "
               f"connection each: coroutines through libweft-hook, a thread "
               f"each, or the async API on one libevent loop", c)
    for c in (100, 1000)
]


# --quick (CI's smoke run, which scripts/run bench --quick keeps within two
# minutes on 2 CPUs from a fresh clone, the peers' builds included): a row
# or two of each family, those whose targets move most.  Scheduler: yield,
# spawn, fib, skynet; memory: skynet's peak RSS and parked's RSS per
# coroutine; sync: the ping-pongs, mutex, sem, rwlock; servers and their
# cost per message: 1,000 connections x 64 B and http-hello; clients: 1,000
# hiredis clients.  --only runs any other row under --quick too.
QUICK = ["yield", "spawn", "fib", "skynet", "parked", "chan-pingpong",
         "chan-pingpong-1000", "mutex", "sem", "rwlock", "echo-1000-64",
         "http-hello", "redis-1000"]
