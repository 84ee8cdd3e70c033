# SPDX-License-Identifier: MIT
"""The targets table of docs/bench.md against a made-up results.json:
every verdict computed from the run (met, not met), "not measured" where
the run has no figure, never a figure from elsewhere; and the page built
from a template around it."""
import unittest
from pathlib import Path
from tempfile import TemporaryDirectory

from weftbench import page
from weftbench.targets import TARGETS, Target, table, tally, verdicts


def mr(x: float) -> dict:
    return {"median": x, "min": x, "max": x, "n": 1}


def results() -> dict:
    """A run of spawn at 1 and 2 workers (Go at 2 only), yield at 1, one
    echo row at 1 worker, the floors' cost model for yield, and parked's
    RSS per coroutine; nothing else."""
    return {
        "meta": {"date": "2026-12-07T01:00:00+00:00", "git": "abc1234",
                 "cpus_affinity": 2, "cpu": "Test CPU", "kernel": "6.1",
                 "argv": ["--quick"], "runs": 3, "peer_runs": 1,
                 "workers": [1, 2], "peer_workers": [2],
                 "peers": ["weft", "go", "tokio", "epoll"],
                 "versions": {"go": "go1.19"}},
        "summary": [
            {"bench": "spawn", "workers": 1, "unit": "ns/spawn+join",
             "peers": {"weft": mr(100.0)}, "ratios": {},
             "scaling": {"weft": 1.0}},
            {"bench": "spawn", "workers": 2, "unit": "ns/spawn+join",
             "peers": {"weft": mr(80.0), "go": mr(200.0)},
             "ratios": {"go": mr(0.4), "tokio": mr(1.2)},
             "scaling": {"weft": 1.25}},
            {"bench": "yield", "workers": 1, "unit": "ns/yield",
             "peers": {"weft": mr(30.0)}, "ratios": {"go": mr(0.6)},
             "scaling": {}},
            {"bench": "parked", "workers": 2, "unit": "ms",
             "peers": {"weft": mr(150.0), "go": mr(200.0)},
             "ratios": {"go": mr(0.75)}, "scaling": {}},
        ],
        "points": [
            # weft's own delay (WEFT_STATS=1): medians 2 and 40 µs
            {"bench": "spawn", "workers": 2, "runs": {
                "weft": [{"ok": True, "extra": {"sched_p50_ns": str(a),
                                                "sched_p99_ns": str(b)}}
                         for a, b in ((1000, 30000), (2000, 40000),
                                      (3000, 50000))]}},
            {"bench": "parked", "workers": 2, "runs": {
                "weft": [{"ok": True, "extra": {"rss_per_co_b": "4400"}}],
                "go": [{"ok": True, "extra": {"rss_per_co_b": "2200"}}]}},
        ],
        "cost_model": [{"bench": "yield", "workers": 1, "model": "switch",
                        "ratio": 5.0}],
        "servers": {"points": [
            {"bench": "echo-100-64", "workers": 1, "runs": {
                "weft": [{"ok": True, "extra": {
                    "sched_p50_ns": "1024", "sched_p99_ns": "9216",
                    "turn_p99_ns": "3584"}}]}}], "summary": [
            {"bench": "echo-100-64", "workers": 1, "sharing": False,
             "unit": "msgs/s",
             "peers": {"weft": {"rate": mr(1e5), "p99_us": mr(50.0),
                                "cpu_us_per_msg": mr(3.0)}},
             "ratios": {"go": {"rate": mr(1.3), "p99": mr(0.8),
                               "cpu": mr(0.9)},
                        "epoll": {"rate": mr(0.9), "p99": mr(1.1),
                                  "cpu": mr(1.02)}}}]},
        "redis": {"summary": [
            {"bench": "redis-1000", "clients": 1000, "unit": "req/s",
             "modes": {}, "ratios": {"threads": {"rate": mr(2.0),
                                                 "rss": mr(0.75)}}}]},
        "floors": {"summary": []},
        "failures": [],
    }


def backends() -> dict:
    """results() with weft under its other backends: echo-100-64 @1,
    whose weft (epoll) CPU per message spread over 10% of its median
    (2.85-3.15 µs), and echo-1000-64 @1, whose spread is nil; http-hello
    not run; weft-ringsock not run at 2 workers."""
    res = results()
    srv = res["servers"]["summary"]
    srv[0]["peers"]["weft"]["cpu_us_per_msg"] = {
        "median": 3.0, "min": 2.85, "max": 3.15, "n": 3}
    srv[0]["variants"] = {
        "weft-uring": {"weft": {"cpu": mr(1.08)}, "epoll": {"cpu": mr(1.1)}},
        "weft-ringsock": {"weft": {"cpu": mr(1.2)},
                          "epoll": {"cpu": mr(1.22)}}}
    srv.append({"bench": "echo-1000-64", "workers": 1, "unit": "msgs/s",
                "peers": {"weft": {"cpu_us_per_msg": mr(2.0)}}, "ratios": {},
                "variants": {"weft-uring": {"weft": {"cpu": mr(1.0)}},
                             "weft-ringsock": {"weft": {"cpu": mr(0.9)},
                                               "epoll": {"cpu": mr(0.8)}}}})
    srv.append({"bench": "echo-1000-64", "workers": 2, "unit": "msgs/s",
                "peers": {"weft": {"cpu_us_per_msg": mr(2.5)}}, "ratios": {},
                "variants": {"weft-uring": {"weft": {"cpu": mr(1.01)}}}})
    return res


def find(vs, row, peer, kind, workers="any", issue=None, subject="weft"):
    got = [v for v in vs if v["target"].row == row and v["target"].peer == peer
           and v["target"].kind == kind and v["target"].subject == subject
           and (workers == "any" or v["workers"] == workers)
           and issue in (None, v["target"].issue)]
    assert len(got) == 1, (row, peer, kind, got)
    return got[0]


class Verdicts(unittest.TestCase):
    def setUp(self):
        self.vs = verdicts(results())

    def test_met_and_not_met_from_the_run(self):
        v = find(self.vs, "spawn", "go", "time", 2, issue=5)
        self.assertEqual((v["figure"], v["met"]), (0.4, True))
        v = find(self.vs, "spawn", "tokio", "time", 2)
        self.assertEqual((v["figure"], v["met"]), (1.2, False))
        # issue 2's spawn <= 0.5x Go: met at 0.4
        v = find(self.vs, "spawn", "go", "time", 2, issue=2)
        self.assertEqual((v["figure"], v["met"]), (0.4, True))

    def test_scaling_floor_and_extra(self):
        v = find(self.vs, "spawn", "", "scaling")
        self.assertEqual((v["workers"], v["figure"], v["met"]),
                         (2, 1.25, False))
        v = find(self.vs, "yield", "switch", "floor")
        self.assertEqual((v["figure"], v["met"]), (5.0, False))
        v = find(self.vs, "parked", "go", "extra:rss_per_co_b")
        self.assertEqual((v["workers"], v["figure"], v["met"]),
                         (2, 2.0, False))

    def test_servers_and_clients(self):
        met = [x["met"] for x in self.vs if x["target"].row == "echo-100-64"
               and x["target"].peer == "go" and x["target"].kind == "rate"]
        # issue 5's >= 1.1 met, issue 25's >= 1.25 met
        self.assertEqual(met, [True, True])
        v = find(self.vs, "echo-100-64", "epoll", "cpu")
        self.assertEqual((v["figure"], v["met"]), (1.02, True))
        v = find(self.vs, "echo-100-64", "epoll", "rate")
        self.assertEqual((v["figure"], v["met"]), (0.9, False))
        v = find(self.vs, "redis-1000", "threads", "redis-rss")
        self.assertEqual((v["workers"], v["figure"], v["met"]),
                         (None, 0.75, False))

    def test_not_measured_is_never_an_old_figure(self):
        # a ratio the run lacks at a worker count it ran: no verdict there
        self.assertFalse([v for v in self.vs if v["target"].row == "spawn"
                          and v["target"].peer == "go" and v["workers"] == 1])
        for row, peer, kind in [("fib", "go", "time"),  # not run
                                ("echo-1000-64", "go", "rate"),
                                ("http-hello", "epoll", "rate"),
                                ("redis-100", "async", "redis-rate"),
                                ("yield", "boost", "time"),  # peer absent
                                ("sem", "", "scaling")]:
            for v in self.vs:
                t = v["target"]
                if (t.row, t.peer, t.kind) == (row, peer, kind):
                    self.assertIsNone(v["figure"], (row, peer))
                    self.assertIsNone(v["met"], (row, peer))

    def test_every_target_has_a_verdict(self):
        targets = {id(v["target"]) for v in self.vs}
        self.assertEqual(targets, {id(t) for t in TARGETS})

    def test_an_empty_run_measures_nothing(self):
        empty = {"meta": {"peers": ["weft"]}}
        n = tally(empty)
        self.assertEqual((n["met"], n["not met"]), (0, 0))
        self.assertEqual(n["not measured"], len(TARGETS))


class Backends(unittest.TestCase):
    """Issue 48's server targets: weft's other backends against weft on
    epoll (within its spread) and ring sockets against the loop."""
    def setUp(self):
        self.vs = verdicts(backends())

    def test_within_the_spread_of_epoll(self):
        v = find(self.vs, "echo-100-64", "weft", "cpu", 1,
                 subject="weft-uring")
        self.assertAlmostEqual(v["wanted"], 1.1)
        self.assertEqual((v["figure"], v["met"]), (1.08, True))
        v = find(self.vs, "echo-100-64", "weft", "cpu", 1,
                 subject="weft-ringsock")
        self.assertEqual((v["figure"], v["met"]), (1.2, False))
        # no spread: no worse at all
        v = find(self.vs, "echo-1000-64", "weft", "cpu", 2,
                 subject="weft-uring")
        self.assertEqual((v["wanted"], v["met"]), (1.0, False))
        v = find(self.vs, "echo-1000-64", "weft", "cpu", 1,
                 subject="weft-uring")
        self.assertEqual((v["wanted"], v["met"]), (1.0, True))

    def test_ring_sockets_against_the_loop(self):
        v = find(self.vs, "echo-1000-64", "epoll", "cpu", 1,
                 subject="weft-ringsock")
        self.assertEqual((v["figure"], v["met"]), (0.8, True))
        # weft's own target on the same row and peer stays weft's
        v = find(self.vs, "echo-100-64", "epoll", "cpu", 1)
        self.assertEqual(v["figure"], 1.02)

    def test_a_backend_or_row_not_run_is_not_measured(self):
        # a count the row ran without the backend: no verdict there
        self.assertEqual([v["workers"] for v in self.vs
                          if v["target"].subject == "weft-ringsock"
                          and v["target"].row == "echo-1000-64"
                          and v["target"].peer == "weft"], [1])
        v = find(self.vs, "http-hello", "weft", "cpu", None,
                 subject="weft-uring")
        self.assertEqual((v["figure"], v["wanted"], v["met"]),
                         (None, None, None))

    def test_cells(self):
        _, rows = table(backends(), [
            t for t in TARGETS if t.subject == "weft-uring"
            and t.row in ("echo-100-64", "http-hello")])
        self.assertEqual([r[2:] for r in rows], [
            ["echo-100-64 @1", "weft-uring/weft CPU per message", "<= 1.10",
             "1.08", "met"],
            ["http-hello", "weft-uring/weft CPU per message",
             "<= 1 + spread", "not measured", "not measured"]])


class Table(unittest.TestCase):
    def test_cells(self):
        t = [Target(2, "spawn at most half of Go's", "spawn", "go", "time",
                    "<=", 0.5),
             Target(5, "faster than Tokio", "spawn", "tokio", "time", "<", 1),
             Target(4, "fib at most 0.7x Go", "fib", "go", "time", "<=", 0.7)]
        head, rows = table(results(), t)
        self.assertEqual(head[-2:], ["this run", "met?"])
        self.assertEqual(rows, [
            ["2", "spawn at most half of Go's", "spawn @2", "weft/go time",
             "<= 0.5", "0.40", "met"],
            ["5", "faster than Tokio", "spawn @2", "weft/tokio time", "< 1",
             "1.20", "**not met**"],
            ["4", "fib at most 0.7x Go", "fib", "weft/go time", "<= 0.7",
             "not measured", "not measured"]])


class Page(unittest.TestCase):
    def test_the_prose_is_kept_and_every_place_filled(self):
        tmpl = ("# Bench\n\nprose stays\n\n{{run}}\n\n{{scheduler}}\n\n"
                "{{sync}}\n\n{{servers}}\n\n{{targets}}\n\nmore prose\n")
        text = page.render(tmpl, results(), [])
        self.assertIn("prose stays", text)
        self.assertIn("more prose", text)
        self.assertNotIn("{{", text)
        self.assertIn("abc1234", text)
        # the peers with a ratio in the family (not epoll, a server only)
        self.assertIn("| weft delay p50/p99 µs | weft/go | weft/tokio | "
                      "speed-up", text)
        self.assertIn("| spawn | ns/spawn+join | 2 | 80.00 | 2.00/40.00 | "
                      "0.40 | 1.20 | 1.25x |", text)
        self.assertIn("| yield | ns/yield | 1 | 30.00 | — |", text)
        self.assertIn("Not measured by this run.", text)  # no sync rows
        self.assertIn("| echo-100-64 @1 | msgs/s | 100000 | 50.00 | "
                      "1.02/9.22 | 3.58 |", text)
        n = tally(results())
        self.assertIn(f"{n['met']} met, {n['not met']} not met", text)

    def test_a_backend_left_out_says_why(self):
        res = results()
        res["meta"]["servers"] = {"backends": {
            "weft": "ran", "weft-uring": "the library rejects WEFT_IO=uring"}}
        self.assertIn("; weft-uring left out: the library rejects "
                      "WEFT_IO=uring.", page.run_line(res))
        self.assertNotIn("left out", page.run_line(results()))

    def test_an_unknown_place_is_an_error(self):
        with self.assertRaises(ValueError):
            page.render("{{nonsense}}\n", results(), [])

    def test_write_page(self):
        with TemporaryDirectory() as tmp:
            tmpl, out = Path(tmp) / "t.md.in", Path(tmp) / "t.md"
            tmpl.write_text("{{targets}}\n")
            page.write_page(results(), tmpl, out, charts=False)
            text = out.read_text()
            self.assertTrue(text.startswith("<!-- generated"))
            self.assertIn("not measured", text)


if __name__ == "__main__":
    unittest.main()
