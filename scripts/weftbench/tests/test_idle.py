# SPDX-License-Identifier: MIT
"""The idle-tax rows (issue 46): weft's WEFT_STATS=1 table parsed, the
CPU per message over 1 worker, the tables and the targets computed from
a made-up results.json, "not measured" where it has no such figure."""
import sys
import unittest

from weftbench import idle, idlepage, page
from weftbench.targets import TARGETS, verdicts

from .helpers import peer, rec

STATS = """\
weft: stall: worker 7 has run coroutine 1 for 100 ms without switching
weft stats: 8 workers, 0 live coroutines, 100001 stacks allocated, 0 offloaded calls on 0/64 helper threads, 1135 monitor wakeups, epoll
counter                       total      worker 0       worker 1
spawned                      200001              0         200001
steals                       1000             400            600
steal_attempts               1500             700            800
wakeups                      300              100            200
sleeps                       40                10             30
sched_delay                    1559 timed, p50 < 491520 ns, p99 < 37748736 ns
RESULT name=sleep impl=weft workers=8 ns=402168924 ops=100000 value=100000 check=ok
"""


def mr(x):
    return {"median": x, "min": x, "max": x, "n": 1}


def srv(workers, cpus, steals=None):
    """An idle-tax server summary: CPU µs per message per peer."""
    return {"bench": "echo-4-64", "workers": workers, "sharing": True,
            "unit": "msgs/s",
            "peers": {p: {"cpu_us_per_msg": mr(c), "vcsw_per_msg": mr(0.5)}
                      for p, c in cpus.items()},
            "ratios": {}, "syscalls": {"weft": {"per_msg": 2.0}},
            "weft_stats": {"wakeups_per_msg": mr(0.25),
                           "sleeps_per_msg": mr(0.01),
                           "steal_attempts_per_steal": steals and mr(steals)}}


def sched(bench, steals, vcsw_ratio, time_ratio):
    return {"bench": bench, "workers": 8,
            "peers": {"weft": {"ms": mr(150.0), "stime_s": mr(0.2),
                               "vcsw": mr(9000.0)},
                      "go": {"ms": mr(160.0), "stime_s": mr(0.05),
                             "vcsw": mr(7000.0)}},
            "ratios": {"go": {"ms": mr(time_ratio), "vcsw": mr(vcsw_ratio),
                              "stime_s": mr(4.0), "utime_s": None}},
            "weft_stats": {"steal_attempts_per_steal": mr(steals),
                           "sleeps": mr(500.0)}}


def results():
    """weft's CPU per message 10 at 1 worker and 10.5 at 8 (1.05x); Go's
    8 -> 12 (1.5x); Tokio's 10 -> 10 (1.0x: weft's ratio is not smaller);
    sleep at 1.5 steal attempts per steal, 1.2x Go's switches, 0.9x its
    time; parked at 14 attempts, 3x the switches, 1.1x the time."""
    return {"meta": {"peers": ["weft", "go", "tokio"]},
            "idle_tax": {
                "loadavg": [3.5, 4.0, 4.1], "loadavg_after": [3.9, 4.0, 4.1],
                "servers": {"summary": [
                    srv(1, {"weft": 10.0, "go": 8.0, "tokio": 10.0}),
                    srv(8, {"weft": 10.5, "go": 12.0, "tokio": 10.0}, 3.0)]},
                "sched": {"summary": [sched("sleep", 1.5, 1.2, 0.9),
                                      sched("parked", 14.0, 3.0, 1.1)]}}}


def find(vs, row, kind, peer=""):
    got = [v for v in vs if v["target"].issue == 46 and v["target"].row == row
           and v["target"].kind == kind and v["target"].peer == peer]
    assert len(got) == 1, (row, kind, peer, got)
    return got[0]


class Stats(unittest.TestCase):
    def test_parse_totals(self):
        st = idle.parse_weft_stats(STATS)
        self.assertEqual((st["steals"], st["steal_attempts"], st["wakeups"],
                          st["sleeps"], st["spawned"]),
                         (1000, 1500, 300, 40, 200001))
        self.assertEqual(idle.steals_ratio(st), 1.5)

    def test_last_table_wins_and_none_without(self):
        two = STATS.replace("1000 ", "7 ") + STATS
        self.assertEqual(idle.parse_weft_stats(two)["steals"], 1000)
        self.assertIsNone(idle.parse_weft_stats("listening on 8080\n"))
        self.assertIsNone(idle.steals_ratio({"steals": 0,
                                             "steal_attempts": 5}))

    def test_per_message_over_the_whole_life(self):
        r = rec("weft", 5_000_000_000, ops=5000)
        # 5 s window + 1 s warm-up at the same rate: 6000 messages
        self.assertEqual(idle.lifetime_msgs(r, 5.0, 1.0), 6000)
        got = idle.stats_per_msg(idle.parse_weft_stats(STATS), 6000)
        self.assertAlmostEqual(got["wakeups_per_msg"], 0.05)
        self.assertEqual(got["steal_attempts_per_steal"], 1.5)
        self.assertIsNone(idle.lifetime_msgs(rec("weft", 1, ok=False),
                                             5.0, 1.0))

    def test_only_weft_gets_stats(self):
        w = idle.with_stats(peer("weft"))
        self.assertEqual(w.env(8), {"WEFT_STATS": "1"})
        self.assertEqual(idle.with_stats(peer("go")).env(8), {})


class Growth(unittest.TestCase):
    def test_cpu_over_one_worker(self):
        ss = idle.idle_servers(results())
        self.assertAlmostEqual(idle.cpu_growth(ss, "echo-4-64", "weft", 8),
                               1.05)
        self.assertAlmostEqual(idle.cpu_growth(ss, "echo-4-64", "go", 8), 1.5)
        self.assertIsNone(idle.cpu_growth(ss, "echo-4-64", "epoll", 8))
        self.assertIsNone(idle.cpu_growth(ss, "echo-4-64", "weft", 4))


class Targets(unittest.TestCase):
    def setUp(self):
        self.vs = verdicts(results())

    def test_growth(self):
        v = find(self.vs, "echo-4-64", "growth")
        self.assertEqual(v["workers"], 8)
        self.assertAlmostEqual(v["figure"], 1.05)
        self.assertTrue(v["met"])

    def test_growth_against_peers(self):
        go = find(self.vs, "echo-4-64", "growth-vs", "go")
        self.assertAlmostEqual(go["figure"], 0.7)
        self.assertTrue(go["met"])
        tokio = find(self.vs, "echo-4-64", "growth-vs", "tokio")
        self.assertAlmostEqual(tokio["figure"], 1.05)
        self.assertFalse(tokio["met"])

    def test_steals_switches_time(self):
        self.assertTrue(find(self.vs, "sleep", "steals")["met"])
        self.assertFalse(find(self.vs, "parked", "steals")["met"])
        self.assertTrue(find(self.vs, "sleep", "sched-vcsw", "go")["met"])
        self.assertFalse(find(self.vs, "parked", "sched-vcsw", "go")["met"])
        self.assertTrue(find(self.vs, "sleep", "sched-time", "go")["met"])
        self.assertFalse(find(self.vs, "parked", "sched-time", "go")["met"])

    def test_not_measured_without_the_section(self):
        vs = verdicts({"meta": {}, "summary": []},
                      [t for t in TARGETS if t.issue == 46])
        self.assertTrue(vs)
        for v in vs:
            self.assertIsNone(v["met"], v["target"])
            self.assertIsNone(v["figure"])

    def test_not_measured_without_one_worker(self):
        res = results()
        res["idle_tax"]["servers"]["summary"].pop(0)
        v = find(verdicts(res), "echo-4-64", "growth")
        self.assertIsNone(v["met"])


class Tables(unittest.TestCase):
    def test_server_table(self):
        head, rows = idlepage.server_rows(results())
        self.assertEqual(head[:6], ["row", "workers", "weft CPU µs/msg",
                                    "weft @N/@1", "go @N/@1", "tokio @N/@1"])
        self.assertEqual(rows[1][:6], ["echo-4-64", "8", "10.5", "1.05",
                                       "1.50", "1.00"])
        i = head.index("weft steal attempts/steal")
        self.assertEqual((rows[0][i], rows[1][i]), ("—", "3.00"))
        self.assertEqual(rows[0][head.index("weft syscalls/msg")], "2")
        self.assertEqual(rows[0][head.index("go syscalls/msg")], "—")

    def test_sched_table(self):
        head, rows = idlepage.sched_rows(results())
        i = head.index("weft steal attempts per stolen coroutine")
        self.assertEqual([r[i] for r in rows], ["1.50", "14.00"])
        j = head.index("weft/go vol. switches")
        self.assertEqual([r[j] for r in rows], ["1.20", "3.00"])

    def test_page_section(self):
        text = page.render("{{idle-tax}}\n", results(), [])
        self.assertIn("| echo-4-64 | 8 |", text)
        self.assertIn("Load average (1, 5, 15 min) at the start: 3.5, 4.0, "
                      "4.1", text)
        self.assertEqual(page.render("{{idle-tax}}\n", {"meta": {}}, []),
                         "Not measured by this run.\n")


class Rusage(unittest.TestCase):
    def test_a_process_and_its_counts(self):
        p, ru = idle.run_rusage(
            [sys.executable, "-c", "import sys, time; time.sleep(0.05); "
             "print('out'); print('err', file=sys.stderr)"], {}, 30)
        self.assertEqual((p.returncode, p.stdout, p.stderr),
                         (0, "out\n", "err\n"))
        self.assertGreaterEqual(ru["vcsw"], 1)  # the sleep
        self.assertGreater(ru["utime_s"] + ru["stime_s"], 0)

    def test_timeout(self):
        p, ru = idle.run_rusage([sys.executable, "-c",
                                 "import time; time.sleep(30)"], {}, 0.2)
        self.assertIsNone(ru)
        self.assertLess(p.returncode, 0)


if __name__ == "__main__":
    unittest.main()
