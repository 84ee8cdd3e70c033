# SPDX-License-Identifier: MIT
import unittest

from weftbench.parse import (judge, parse_result, weft_rings, weft_sched,
                             wrk_result)

from .helpers import proc

LINE = ("RESULT name=yield impl=weft workers=1 ns=90000000 ops=2000000 "
        "value=4000000 check=ok")

LOADGEN = ("loadgen: warming up\n"
           "RESULT name=echo-100-64 impl=weft workers=1 ns=2000012345 "
           "ops=180000 value=90000 check=ok p50_us=1101.2 p99_us=1310.5 "
           "p999_us=1400.0 max_us=2000.5 conns=100 size=64 threads=1 "
           "errors=0 lost=0 conn_min=1700 loadgen_cpu=0.95\n")

WRK = """Running 10s test @ http://127.0.0.1:40000/
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20ms  300.00us   9.50ms   80.00%
    Req/Sec    80.00k     2.00k   85.00k    70.00%
  Latency Distribution
     50%    1.10ms
     75%    1.30ms
     90%    1.50ms
     99%  850.00us
  800000 requests in 10.00s, 70.00MB read
Requests/sec:  79999.60
Transfer/sec:      7.00MB
"""


class ParseResult(unittest.TestCase):
    def test_fields(self):
        self.assertEqual(parse_result("warming up\n" + LINE + "\n"), {
            "name": "yield", "impl": "weft", "workers": "1",
            "ns": "90000000", "ops": "2000000", "value": "4000000",
            "check": "ok"})

    def test_loadgen_line_keeps_its_extra_fields(self):
        r = parse_result(LOADGEN)
        self.assertEqual(r["name"], "echo-100-64")
        self.assertEqual(r["p99_us"], "1310.5")
        self.assertEqual(r["conn_min"], "1700")
        self.assertEqual(len(r), 18)

    def test_none_or_two_lines_are_no_result(self):
        self.assertIsNone(parse_result("no result here\n"))
        self.assertIsNone(parse_result(LINE + "\n" + LINE + "\n"))

    def test_only_at_line_start(self):
        self.assertIsNone(parse_result("  " + LINE))

    def test_words_without_equals_are_skipped(self):
        self.assertEqual(parse_result("RESULT a=1 junk b=x=y"),
                         {"a": "1", "b": "x=y"})


class Judge(unittest.TestCase):
    def test_ok(self):
        r = parse_result(LINE + " rss_kb=1024")
        self.assertEqual(judge(r, proc(0), "yield", 1), {
            "ns": 90000000, "ops": 2000000, "value": 4000000, "ok": True,
            "extra": {"rss_kb": "1024"}})

    def test_failures_say_why(self):
        cases = [
            (None, 0, "no RESULT line"),
            (LINE.replace("check=ok", "check=fail"), 0, "check=fail"),
            (LINE, 0, None),
            (LINE.replace("workers=1", "workers=2"), 0,
             "RESULT for name=yield workers=2"),
            (LINE, 3, "exit status 3"),
            (LINE, -9, "killed by signal 9 (exit status -9)"),
            (None, -11, "killed by signal 11 (no RESULT line)"),
            (LINE.replace("ns=90000000", "ns=lots"), 0,
             "malformed RESULT line"),
        ]
        for line, rc, want in cases:
            with self.subTest(line=line, rc=rc):
                r = parse_result(line) if line else None
                got = judge(r, proc(rc, "out", "err"), "yield", 1)
                self.assertEqual(got.get("error"), want)
                self.assertEqual(got["ok"], want is None)
                if want is not None:
                    self.assertEqual((got["rc"], got["stdout"], got["stderr"]),
                                     (rc, "out", "err"))

    def test_wrong_name(self):
        got = judge(parse_result(LINE), proc(0), "spawn", 1)
        self.assertEqual(got["error"], "RESULT for name=yield workers=1")


class Wrk(unittest.TestCase):
    def test_report_as_a_result(self):
        self.assertEqual(wrk_result(WRK, "http-hello", "weft", 1), {
            "name": "http-hello", "impl": "weft", "workers": "1",
            "ns": "10000000000", "ops": "800000", "value": "80000",
            "check": "ok", "p50_us": "1100.0", "p99_us": "850.0",
            "socket_errors": "0", "non2xx": "0"})

    def test_it_judges_like_a_result_line(self):
        got = judge(wrk_result(WRK, "http-hello", "go", 1), proc(0),
                    "http-hello", 1)
        self.assertEqual((got["ok"], got["ns"], got["ops"], got["value"]),
                         (True, 10000000000, 800000, 80000))

    def test_errors_fail_the_check(self):
        text = WRK.replace(
            "Requests/sec", "  Socket errors: connect 0, read 2, write 1, "
            "timeout 4\n  Non-2xx or 3xx responses: 5\nRequests/sec")
        r = wrk_result(text, "http-hello", "weft", 1)
        self.assertEqual((r["check"], r["socket_errors"], r["non2xx"]),
                         ("fail", "7", "5"))

    def test_non2xx_alone_fails_the_check(self):
        text = WRK.replace("Requests/sec",
                           "  Non-2xx or 3xx responses: 1\nRequests/sec")
        r = wrk_result(text, "http-hello", "weft", 1)
        self.assertEqual((r["check"], r["socket_errors"], r["non2xx"]),
                         ("fail", "0", "1"))

    def test_units(self):
        text = (WRK.replace("in 10.00s", "in 1.50m")
                .replace("50%    1.10ms", "50%    2.00s"))
        r = wrk_result(text, "http-hello", "weft", 1)
        self.assertEqual((r["ns"], r["p50_us"]), ("90000000000", "2000000.0"))

    def test_no_requests_fails(self):
        r = wrk_result(WRK.replace("800000 requests", "0 requests"),
                       "http-hello", "weft", 1)
        self.assertEqual(r["check"], "fail")

    def test_not_a_report(self):
        self.assertIsNone(wrk_result("unable to connect\n", "h", "weft", 1))
        self.assertIsNone(wrk_result(WRK.replace("     99%  850.00us\n", ""),
                                     "h", "weft", 1))


# WEFT_STATS=1's histogram lines (lib/stats.c, weft__stats_print)
STATS = ("weft stats: 1 workers, 0 live coroutines, 3 stacks allocated\n"
         "sched_delay                   15627 timed, p50 < 60 ns, p99 < 112 ns, "
         "p99.9 < 384 ns\n"
         "turn_time                     15627 timed, p50 < 144 ns, p99 < 176 ns, "
         "p99.9 < 3840 ns\n")


class WeftSched(unittest.TestCase):
    def test_stats_lines(self):
        self.assertEqual(weft_sched(STATS), {
            "sched_p50_ns": "60", "sched_p99_ns": "112", "turn_p99_ns": "176"})

    def test_none_without_both(self):
        self.assertEqual(weft_sched(""), {})
        self.assertEqual(weft_sched(STATS.split("turn_time")[0]), {})

    def test_judge_adds_them_to_extra(self):
        rec = judge(parse_result(LINE), proc(stdout=LINE, stderr=STATS),
                    "yield", 1)
        self.assertTrue(rec["ok"])
        self.assertEqual(rec["extra"]["sched_p99_ns"], "112")
        self.assertEqual(rec["extra"]["turn_p99_ns"], "176")


class WeftRings(unittest.TestCase):
    def test_the_rings_line(self):
        text = ("weft stats: 1 workers, ...\n"
                "stacks                     65667072 bytes, 0 of them\n"
                "rings                          8417 SQEs, 186 submissions, "
                "8417 CQEs, 0 cancels\n")
        self.assertEqual(weft_rings(text), {"ring_sqes": "8417",
                                            "ring_enters": "186"})
        self.assertEqual(weft_rings("listening on 1\n"), {})
