#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
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
  row, and the notes say why.  --quick runs a row or two of each family
  (benches.QUICK, unless --only says otherwise), no warm-up invocation, each
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
The code is the package scripts/weftbench/ (its __init__ lists the modules:
BENCHMARKS and SERVER_BENCHES in benches.py, PEERS in peers.py, FLOORS and
COST_MODEL in floors.py, CALLGRIND in callgrind.py); its unit tests are in
scripts/weftbench/tests/ (`meson test --suite benchpy`).  Progress goes to
stderr, with a line per step: "[k/n] ROW (about N s left)".
Python 3 standard library only.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from weftbench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
