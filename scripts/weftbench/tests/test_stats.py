# SPDX-License-Identifier: MIT
import unittest

from weftbench.benches import Bench, ServerBench
from weftbench.stats import (add_scaling, med_range, metric, pair_ratios,
                             summarize, summarize_server)

from .helpers import peer, rec

PER_OP = Bench("yield", "t", True, "ns/yield")
MS = Bench("skynet", "t", False, "ms", extra=[("rss_kb", "peak RSS MiB", 1024)])
WEFT, GO, TOKIO = peer("weft"), peer("go"), peer("tokio")


class MedRange(unittest.TestCase):
    def test_odd(self):
        self.assertEqual(med_range([3.0, 1.0, 2.0]),
                         {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3})

    def test_even_is_the_mean_of_the_middle_two(self):
        self.assertEqual(med_range([4.0, 1.0, 3.0, 2.0]),
                         {"median": 2.5, "min": 1.0, "max": 4.0, "n": 4})

    def test_one_and_none(self):
        self.assertEqual(med_range([7.0]),
                         {"median": 7.0, "min": 7.0, "max": 7.0, "n": 1})
        self.assertIsNone(med_range([]))


class Metric(unittest.TestCase):
    def test_per_op_and_ms(self):
        self.assertEqual(metric(PER_OP, rec("weft", 90, ops=2)), 45.0)
        self.assertEqual(metric(MS, rec("weft", 2_500_000)), 2.5)


class PairRatios(unittest.TestCase):
    def test_run_by_run_where_both_succeeded(self):
        runs = {"weft": [rec("weft", 100), rec("weft", 200),
                         rec("weft", 0, ok=False), rec("weft", 300)],
                "go": [rec("go", 50), rec("go", 0, ok=False), rec("go", 100),
                       rec("go", 600)]}
        got = pair_ratios(runs, [WEFT, GO], lambda r: r["ns"])
        self.assertEqual(got, {"go": {"median": 1.25, "min": 0.5, "max": 2.0,
                                      "n": 2}})

    def test_a_missing_peer_has_no_ratio(self):
        runs = {"weft": [rec("weft", 100)]}
        self.assertEqual(pair_ratios(runs, [WEFT, GO, TOKIO],
                                     lambda r: r["ns"]),
                         {"go": None, "tokio": None})

    def test_extra_runs_of_one_side_are_left_out(self):
        runs = {"weft": [rec("weft", 10), rec("weft", 20), rec("weft", 30)],
                "go": [rec("go", 5)]}
        self.assertEqual(pair_ratios(runs, [WEFT, GO], lambda r: r["ns"]),
                         {"go": {"median": 2.0, "min": 2.0, "max": 2.0,
                                 "n": 1}})


class Summarize(unittest.TestCase):
    def test_point(self):
        runs = {"weft": [rec("weft", 3_000_000, rss_kb=2048),
                         rec("weft", 1_000_000, rss_kb=4096),
                         rec("weft", 2_000_000, rss_kb=3072)],
                "go": [rec("go", 4_000_000, rss_kb=1024),
                       rec("go", 0, ok=False),
                       rec("go", 8_000_000, rss_kb=1024)]}
        s = summarize(MS, 2, runs, [WEFT, GO, TOKIO], ["tokio: none"])
        self.assertEqual(s["peers"], {
            "weft": {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3},
            "weft_failed": 0,
            "go": {"median": 6.0, "min": 4.0, "max": 8.0, "n": 2},
            "go_failed": 1, "tokio": None, "tokio_failed": 0})
        self.assertEqual(s["ratios"], {
            "go": {"median": 0.5, "min": 0.25, "max": 0.75, "n": 2},
            "tokio": None})
        self.assertEqual(s["notes"],
                         "tokio: none; peak RSS MiB: weft 3.00, go 1.00")
        self.assertEqual((s["bench"], s["workers"], s["unit"]),
                         ("skynet", 2, "ms"))

    def test_no_notes(self):
        s = summarize(PER_OP, 1, {"weft": [rec("weft", 10)]}, [WEFT], [])
        self.assertIsNone(s["notes"])

    def test_versus(self):
        b = Bench("local-get", "t", True, "ns/get",
                  versus=("thread_ns_per_op", "thread-local read"))
        runs = {"weft": [rec("weft", 40, ops=10, thread_ns_per_op=1.0),
                         rec("weft", 60, ops=10, thread_ns_per_op=2.0)]}
        s = summarize(b, 1, runs, [WEFT], [])
        self.assertEqual(s["versus"]["weft"]["ratio"],
                         {"median": 3.5, "min": 3.0, "max": 4.0, "n": 2})
        self.assertEqual(s["notes"], "thread-local read in ns, and time/it: "
                         "weft 1.50, 3.50 (3.00–4.00)")


class Scaling(unittest.TestCase):
    def test_over_one_worker(self):
        one = {"bench": "spawn", "workers": 1,
               "peers": {"weft": {"median": 10.0}, "go": None}}
        two = {"bench": "spawn", "workers": 2,
               "peers": {"weft": {"median": 4.0}, "go": {"median": 3.0}}}
        lone = {"bench": "fib", "workers": 2,
                "peers": {"weft": {"median": 4.0}}}
        add_scaling([one, two, lone], [WEFT, GO])
        self.assertEqual(one["scaling"], {"weft": 1.0, "go": None})
        self.assertEqual(two["scaling"], {"weft": 2.5, "go": None})
        self.assertEqual(lone["scaling"], {"weft": None, "go": None})


class Server(unittest.TestCase):
    def test_rates_latencies_and_fairness(self):
        sb = ServerBench("echo-100-64", "echo", "t", "echo", "msgs/s", 100, 64)
        lat = dict(p50_us=100, p99_us=400)
        runs = {"weft": [rec("weft", 1_000_000_000, ops=2000, conn_min=10,
                             **lat),
                         rec("weft", 2_000_000_000, ops=2000, conn_min=20,
                             **lat)],
                "go": [rec("go", 1_000_000_000, ops=1000, conn_min=5,
                           p50_us=200, p99_us=800),
                       rec("go", 0, ok=False)]}
        s = summarize_server(sb, runs, [WEFT, GO])
        self.assertEqual(s["peers"]["weft"]["rate"],
                         {"median": 1500.0, "min": 1000.0, "max": 2000.0,
                          "n": 2})
        self.assertEqual(s["peers"]["go_failed"], 1)
        self.assertEqual(s["ratios"]["go"]["rate"],
                         {"median": 2.0, "min": 2.0, "max": 2.0, "n": 1})
        self.assertEqual(s["ratios"]["go"]["p99"]["median"], 0.5)
        self.assertEqual(s["notes"],
                         "slowest connection, % of mean: weft 75, go 50")
