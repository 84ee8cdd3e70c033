# SPDX-License-Identifier: MIT
"""The server rows at more than one worker count: their names, the
sharing mark, the summaries keyed by worker count, the tables and the
progress plan."""
import os
import shutil
import unittest

from weftbench.benches import (SERVER_BENCHES, ServerBench, server_label,
                               server_sharing)
from weftbench.cli import parse_args
from weftbench.floors import cost_table_rows
from weftbench.peers import Peer
from weftbench.report import (server_cost_rows, server_footnote,
                              server_table_rows, workers_note)
from weftbench.server import (Pins, load_echo, load_wrk, server_steps,
                              server_worker_counts)
from weftbench.stats import summarize_server
from weftbench.variants import BACKENDS, variant

from .helpers import args, rec

def serve(peer, ctx, kind, port):
    return ["server", kind, str(port)]


WEFT = Peer("weft", "weft", build=lambda ctx: None, server=serve,
            env=lambda w: {"WEFT_WORKERS": str(w)})
EPOLL = Peer("epoll", "epoll", build=lambda ctx: None, server=serve,
             env=lambda w: {"EPOLL_LOOPS": str(w)}, limit=True)
TOKIO = Peer("tokio", "tokio", build=lambda ctx: None, server=serve)
SB = ServerBench("echo-100-64", "echo", "t", "echo", "msgs/s", 100, 64)
PINS = {1: Pins("0", "1", "server on CPU 0, load on CPU 1"),
        2: Pins(None, None, "server and load unpinned, sharing the 2 CPUs",
                sharing=True)}


def runs(weft_ops, epoll_ops):
    lat = dict(p50_us=10, p99_us=40, conn_min=1)
    return {"weft": [rec("weft", 1_000_000_000, ops=weft_ops, **lat)],
            "epoll": [rec("epoll", 1_000_000_000, ops=epoll_ops, **lat)]}


class Naming(unittest.TestCase):
    def test_sharing(self):
        self.assertEqual([server_sharing(w) for w in (1, 2, 4)],
                         [False, True, True])

    def test_label(self):
        self.assertEqual(server_label("echo-100-64", 1), "echo-100-64 @1")
        self.assertEqual(server_label("echo-100-64", 2),
                         "echo-100-64 @2 (sharing CPUs)")
        # unpinned for want of taskset: not marked as sharing on purpose
        self.assertEqual(server_label("http-hello", 2, False),
                         "http-hello @2")


class Counts(unittest.TestCase):
    def test_defaults_quick_and_workers(self):
        self.assertEqual(server_worker_counts(None, False), [1, 2])
        self.assertEqual(server_worker_counts(None, True), [1])
        self.assertEqual(server_worker_counts([1, 4], True), [1, 4])

    def test_parse_args(self):
        self.assertEqual(parse_args([]).server_workers, [1, 2])
        self.assertEqual(parse_args(["--quick"]).server_workers, [1])
        self.assertEqual(parse_args(["--workers", "2,1,2"]).server_workers,
                         [1, 2])
        self.assertEqual(parse_args(["--workers", "4"]).server_workers, [4])

    def test_pins(self):
        p = Pins.choose(2)
        self.assertEqual((p.server, p.load, p.sharing), (None, None, True))
        self.assertIn("sharing the", p.note)
        self.assertFalse(Pins.choose(1).sharing)

    def test_pins_load_threads(self):
        cpus = sorted(os.sched_getaffinity(0))
        p = Pins.choose(1, 2)
        self.assertEqual(p.load_threads, 2)
        if len(cpus) >= 3 and shutil.which("taskset"):
            self.assertEqual((p.server, p.load),
                             (str(cpus[0]), f"{cpus[1]},{cpus[2]}"))
            self.assertIn("load on CPUs", p.note)
        else:  # too few CPUs to pin the server and two load threads apart
            self.assertEqual((p.server, p.load), (None, None))
        self.assertIn("3 load threads", Pins.choose(2, 3).note)
        self.assertEqual(Pins.wrap(["x"], "1,2"), ["taskset", "-c", "1,2", "x"])
        self.assertEqual(Pins.wrap(["x"], None), ["x"])

    def test_load_threads_reach_the_loads(self):
        cmd = load_echo(SB, "weft", 1, 9, "lg", 1, 0, 3).cmd
        self.assertEqual(cmd[cmd.index("-t") + 1], "3")
        self.assertIn("-t4", load_wrk(SB, "weft", 1, 9, "wrk", 1, 0, 4).cmd)
        self.assertEqual(parse_args(["--load-threads", "2"]).load_threads, 2)
        self.assertEqual(parse_args([]).load_threads, 1)

    def test_progress_plan(self):
        a = args(only=["echo-100-64", "http-hello"], runs=3, peer_runs=1,
                 server_workers=[1, 2], no_syscalls=True)
        self.assertEqual(server_steps(a, [WEFT, EPOLL]),
                         [("[echo-100-64 w=1]", 4), ("[echo-100-64 w=2]", 4),
                          ("[http-hello w=1]", 4), ("[http-hello w=2]", 4)])
        # with the syscall pass, a pass per peer and worker count
        a.no_syscalls = False
        a.server_workers = [2]
        self.assertEqual(server_steps(a, [WEFT, EPOLL]),
                         [("[echo-100-64 w=2]", 6), ("[http-hello w=2]", 6)])

    def test_every_row_known(self):
        self.assertIn("echo-100-64", [b.name for b in SERVER_BENCHES])


class Summaries(unittest.TestCase):
    def test_keyed_by_workers(self):
        one = summarize_server(SB, runs(2000, 4000), [WEFT, EPOLL], None, 1)
        two = summarize_server(SB, runs(3000, 4000), [WEFT, EPOLL], None, 2)
        self.assertEqual((one["workers"], one["sharing"]), (1, False))
        self.assertEqual((two["workers"], two["sharing"]), (2, True))
        self.assertEqual(one["ratios"]["epoll"]["rate"]["median"], 0.5)
        self.assertEqual(two["ratios"]["epoll"]["rate"]["median"], 0.75)
        self.assertEqual(one["notes"],
                         "slowest connection, % of mean: weft 5, epoll 2")
        self.assertEqual(two["notes"],
                         "slowest connection, % of mean: weft 3, epoll 2")

    def test_the_limit_over_the_peers(self):
        r = runs(2000, 4000)
        r["tokio"] = [rec("tokio", 1_000_000_000, ops=3200, p50_us=10,
                          p99_us=40, conn_min=1)]
        s = summarize_server(SB, r, [WEFT, TOKIO, EPOLL], None, 1)
        self.assertEqual(s["notes"],
                         "slowest connection, % of mean: weft 5, tokio 3, "
                         "epoll 2; the limit's rate over the peers': "
                         "epoll/tokio 1.25")
        # no note without a limit, nor with only the subject beside it
        self.assertNotIn("limit", summarize_server(
            SB, r, [WEFT, TOKIO], None, 1)["notes"])
        self.assertNotIn("limit", summarize_server(
            SB, r, [WEFT, EPOLL], None, 1)["notes"])

    def test_weft_under_other_backends(self):
        """Each backend's ratios to weft (on epoll) and to the limit, run
        by run; the limit's note leaves weft's modes out."""
        uring, ring = (variant(WEFT, m) for m in BACKENDS[1:])
        r = runs(2000, 4000)
        lat = dict(p50_us=10, p99_us=40, conn_min=1)
        r["weft-uring"] = [rec("weft-uring", 1_000_000_000, ops=1000, **lat)]
        r["weft-ringsock"] = [rec("weft-ringsock", 1_000_000_000, ops=2500,
                                  **lat)]
        s = summarize_server(SB, r, [WEFT, uring, ring, EPOLL], None, 1)
        self.assertEqual(s["ratios"]["weft-uring"]["rate"]["median"], 2.0)
        v = s["variants"]
        self.assertEqual(set(v), {"weft-uring", "weft-ringsock"})
        self.assertEqual(set(v["weft-ringsock"]), {"weft", "epoll"})
        self.assertEqual(v["weft-ringsock"]["weft"]["rate"]["median"], 1.25)
        self.assertEqual(v["weft-uring"]["epoll"]["rate"]["median"], 0.25)
        self.assertNotIn("limit", s["notes"])
        self.assertNotIn("SQEs", s["notes"])  # no WEFT_STATS=1 rings line
        r["weft-uring"][0]["extra"].update(ring_sqes="0", ring_enters="0")
        r["weft-ringsock"][0]["extra"].update(ring_sqes="900",
                                              ring_enters="20")
        s = summarize_server(SB, r, [WEFT, uring, ring, EPOLL], None, 1)
        self.assertIn("ring SQEs per io_uring_enter: weft-uring none, "
                      "weft-ringsock 45.0", s["notes"])
        self.assertNotIn("variants", summarize_server(
            SB, r, [WEFT, EPOLL], None, 1))
        # the worker-count knobs once each, not the backends' variables
        self.assertIn("(WEFT_WORKERS / EPOLL_LOOPS)", workers_note(
            PINS, [variant(WEFT, BACKENDS[0]), uring, ring, EPOLL]))
        note = server_footnote(args(), PINS, [WEFT, uring, EPOLL],
                               {"weft-ringsock": "no io_uring"})
        self.assertIn("weft under each I/O backend (weft: WEFT_IO=epoll; "
                      "weft-uring: WEFT_IO=uring", note)
        self.assertIn("weft-ringsock left out: no io_uring.", note)

    def test_sharing_given(self):
        s = summarize_server(SB, runs(1, 1), [WEFT], None, 2, False)
        self.assertEqual((s["workers"], s["sharing"]), (2, False))


class Tables(unittest.TestCase):
    def setUp(self):
        self.summary = [
            summarize_server(SB, runs(2000, 4000), [WEFT, EPOLL], None, 1),
            summarize_server(SB, runs(3000, 4000), [WEFT, EPOLL], None, 2)]

    def test_server_table(self):
        head, rows = server_table_rows(self.summary, [WEFT, EPOLL])
        self.assertEqual(head[:3], ["benchmark", "unit",
                                    "weft rate median (min–max)"])
        self.assertEqual(rows, [
            ["echo-100-64 @1", "msgs/s", "2000", "10.00", "40.00", "4000",
             "10.00", "40.00", "0.50", "1.00",
             "slowest connection, % of mean: weft 5, epoll 2"],
            ["echo-100-64 @2 (sharing CPUs)", "msgs/s", "3000", "10.00",
             "40.00", "4000", "10.00", "40.00", "0.75", "1.00",
             "slowest connection, % of mean: weft 3, epoll 2"]])

    def test_cost_table(self):
        _, rows = server_cost_rows(self.summary, [WEFT, EPOLL])
        self.assertEqual([r[0] for r in rows],
                         ["echo-100-64 @1", "echo-100-64 @2 (sharing CPUs)"])

    def test_cost_model_table(self):
        row = {"bench": "echo-100-64", "unit": "msgs/s", "weft": 3000.0,
               "model": "m", "floor": 9000.0, "ratio": 3.0, "why": "w"}
        _, rows = cost_table_rows([dict(row, workers=1, sharing=False),
                                   dict(row, workers=2, sharing=True)])
        self.assertEqual([r[:3] for r in rows],
                         [["echo-100-64", "msgs/s", "1"],
                          ["echo-100-64 (sharing CPUs)", "msgs/s", "2"]])

    def test_footnote(self):
        self.assertEqual(
            workers_note(PINS, [WEFT, EPOLL]),
            "Servers on 1 and 2 workers (WEFT_WORKERS / EPOLL_LOOPS), the row names saying which (@N)."
            "  @1: server on CPU 0, load on CPU 1.  @2: server and load "
            "unpinned, sharing the 2 CPUs.  \"sharing CPUs\": server and "
            "load generator unpinned on the same CPUs, so the server's rate "
            "includes its competition with its own load for them (at 1 "
            "worker each has a CPU of its own): a regression of the "
            "multi-worker I/O path shows there, but the rows are not a "
            "measure of scaling.")
        quick = workers_note({1: PINS[1]}, [WEFT], quick=True)
        self.assertEqual(
            quick, "Servers on 1 worker (WEFT_WORKERS), the row names saying which "
            "(@N).  @1: server on CPU 0, load on CPU 1.  --quick runs the "
            "server rows at 1 worker only (without it: also at 2, sharing "
            "the CPUs).")
        self.assertIn("\"sharing CPUs\"",
                      server_footnote(args(), PINS, [WEFT, EPOLL]))


if __name__ == "__main__":
    unittest.main()
