# SPDX-License-Identifier: MIT
"""weft's benchmark runner (scripts/bench.py is its entry point).

One concept per module:
    benches    the benchmark rows (in-process and server)
    peers      the peer runtimes: building, versions, their servers
    procs      processes and ports (run_out, free_port, server_running)
    parse      RESULT lines, loadgen's and wrk's output
    runs       one invocation, the interleaved runs of a point, failures
    stats      medians, ranges, run-by-run ratios, notes, scaling
    fmt        numbers as the tables show them
    progress   stderr progress: status lines, steps and the time left
    micro      the in-process rows
    server     the server rows (taskset pinning, loadgen, wrk)
    variants   weft in other modes as peers: the server rows' I/O backends
               (weft-uring, weft-ringsock), the scaling run's pollers
    redis      the redis rows: hiredis in three modes against redis-server
    fileio     the file rows: 4 KiB random reads, weft under uring and epoll
               beside fio, Go and Tokio
    cost       a server's CPU, switches (/proc) and syscalls (strace) per message
    floors     the machine's cost floors and the cost model
    callgrind  instructions per operation (--docs)
    idle       the idle workers' tax (--only idle-tax): light-load echo at
               1-8 workers, sleep/parked/spawn under wait4, WEFT_STATS counts
    idlepage   its tables
    scale      the prepared scaling run (--scale, scripts/scale-run) and
               docs/scaling.md
    charts     the gnuplot charts
    report     tables, footnotes, results.md, metadata, docs/bench.md
    cli        the options and the main flow

Python 3 standard library only.
"""
