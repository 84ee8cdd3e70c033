# SPDX-License-Identifier: MIT
import os
import tempfile
import unittest
from pathlib import Path

from weftbench.benches import ServerBench
from weftbench.cli import parse_args
from weftbench.cost import (parse_stat, parse_strace, parse_vcsw, per_msg,
                            sample, syscall_summary)
from weftbench.fmt import fmt_mr, fmt_sig
from weftbench.report import md_table, server_cost_footnote, server_cost_rows
from weftbench.server import syscalls_wanted
from weftbench.stats import summarize_server

from .helpers import args, peer, rec

# fields 14 (utime) = 150 and 15 (stime) = 40; a command with a space and
# parentheses of its own
STAT = ("4242 (weft (echo) x) S 1 4242 4242 0 -1 4194560 350 0 0 0 "
        "150 40 0 0 20 0 3 0 313976 3133440 359 18446744073709551615 "
        "1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n")

STATUS = """Name:\tweft-echo
Umask:\t0022
State:\tS (sleeping)
Tgid:\t4242
Pid:\t4243
Threads:\t3
Cpus_allowed_list:\t0
voluntary_ctxt_switches:\t1737
nonvoluntary_ctxt_switches:\t12
"""

# strace 6.1 -c -f -o FILE, as it writes it on SIGINT
STRACE = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 63.68    0.299398         375       798           epoll_wait
 22.38    0.105239          17      6186           sendto
 11.47    0.053931           8      6234           read
  0.31    0.001454          10       143           epoll_ctl
  0.28    0.001297          12       102         2 accept4
  0.24    0.001142          27        41           close
------ ----------- ----------- --------- --------- ----------------
100.00    0.470159          33     13504         2 total
"""


class Proc(unittest.TestCase):
    def test_stat_utime_plus_stime(self):
        self.assertEqual(parse_stat(STAT), 190)

    def test_stat_not_one(self):
        with self.assertRaises(ValueError):
            parse_stat("4242 weft S 1 2 3")
        with self.assertRaises(ValueError):
            parse_stat("4242 (weft) S 1 2 3")

    def test_status_voluntary_only(self):
        self.assertEqual(parse_vcsw(STATUS), 1737)
        with self.assertRaises(ValueError):
            parse_vcsw("Name:\tx\nnonvoluntary_ctxt_switches:\t12\n")

    def test_sample_sums_the_threads(self):
        with tempfile.TemporaryDirectory() as d:
            proc = Path(d)
            (proc / "4242" / "task").mkdir(parents=True)
            (proc / "4242" / "stat").write_text(STAT)
            for tid, n in (("4242", 5), ("4243", 1737), ("4244", 8)):
                (proc / "4242" / "task" / tid).mkdir()
                (proc / "4242" / "task" / tid / "status").write_text(
                    STATUS.replace("1737", str(n)))
            self.assertEqual(sample(4242, proc),
                             {"ticks": 190, "vcsw": 1750, "threads": 3})
            self.assertIsNone(sample(4241, proc))  # gone

    def test_sample_of_a_live_process(self):
        s = sample(os.getpid())
        self.assertGreaterEqual(s["threads"], 1)
        self.assertGreaterEqual(s["ticks"], 0)


class PerMessage(unittest.TestCase):
    def test_window(self):
        before = {"ticks": 100, "vcsw": 10, "threads": 3}
        after = {"ticks": 350, "vcsw": 60, "threads": 2}
        self.assertEqual(per_msg(before, after, 50_000, clk_tck=100),
                         {"cpu_s": 2.5, "vcsw": 50, "msgs": 50_000,
                          "threads": 2, "cpu_us_per_msg": 50.0,
                          "vcsw_per_msg": 0.001})

    def test_nothing_to_divide(self):
        s = {"ticks": 1, "vcsw": 1, "threads": 1}
        self.assertIsNone(per_msg(None, s, 10))
        self.assertIsNone(per_msg(s, None, 10))
        self.assertIsNone(per_msg(s, s, 0))


class Strace(unittest.TestCase):
    def test_total_and_rows(self):
        r = parse_strace(STRACE)
        self.assertEqual(r["calls"], 13504)
        self.assertEqual(list(r["by_call"].items()),
                         [("read", 6234), ("sendto", 6186),
                          ("epoll_wait", 798), ("epoll_ctl", 143),
                          ("accept4", 102), ("close", 41)])

    def test_total_without_errors(self):
        text = STRACE.replace("    13504         2 total",
                              "    13504           total")
        self.assertEqual(parse_strace(text)["calls"], 13504)

    def test_no_summary(self):
        self.assertIsNone(parse_strace(""))
        self.assertIsNone(parse_strace(STRACE.rsplit("------", 1)[0]))

    def test_per_message(self):
        s = syscall_summary(parse_strace(STRACE), 6752)
        self.assertEqual((s["calls"], s["msgs"], s["per_msg"]),
                         (13504, 6752, 2.0))
        self.assertEqual(list(s["top"]), ["read", "sendto", "epoll_wait",
                                          "epoll_ctl", "accept4"])
        self.assertEqual(s["top"]["epoll_wait"], 798 / 6752)
        self.assertEqual(syscall_summary({"error": "no strace -c summary"},
                                         5), {"error": "no strace -c summary"})
        self.assertIn("error", syscall_summary(parse_strace(STRACE), 0))


def mr(median, lo, hi, n):
    return {"median": median, "min": lo, "max": hi, "n": n}


WEFT, EPOLL = peer("weft"), peer("epoll")


def run(name, ops, cpu_us, vcsw, ok=True):
    r = rec(name, 1_000_000_000, ops=ops, ok=ok, p50_us=10, p99_us=20)
    if ok and cpu_us is not None:
        r["cost"] = {"cpu_us_per_msg": cpu_us, "vcsw_per_msg": vcsw}
    return r


class Summary(unittest.TestCase):
    def test_costs_and_cpu_ratio(self):
        sb = ServerBench("echo-100-64", "echo", "t", "echo", "msgs/s", 100, 64)
        runs = {"weft": [run("weft", 100, 6.0, 0.02),
                         run("weft", 100, 9.0, 0.04),
                         run("weft", 100, None, None)],  # unsampled
                "epoll": [run("epoll", 100, 3.0, 0.01),
                          run("epoll", 100, 3.0, 0.01),
                          run("epoll", 100, 2.0, 0.01)]}
        sys_calls = {"weft": {"per_msg": 2.5}, "epoll": {"skipped": "x"}}
        s = summarize_server(sb, runs, [WEFT, EPOLL], sys_calls)
        self.assertEqual(s["peers"]["weft"]["cpu_us_per_msg"],
                         mr(7.5, 6.0, 9.0, 2))
        self.assertEqual(s["peers"]["weft"]["vcsw_per_msg"]["median"], 0.03)
        self.assertEqual(s["peers"]["epoll"]["cpu_us_per_msg"],
                         mr(3.0, 2.0, 3.0, 3))
        # run 3 has no weft cost: the pairs of runs 1 and 2
        self.assertEqual(s["ratios"]["epoll"]["cpu"], mr(2.5, 2.0, 3.0, 2))
        self.assertEqual(s["syscalls"], sys_calls)

    def test_no_ratio_over_zero(self):
        # an idle window can read 0 ticks (10 ms each): no ratio, no crash
        sb = ServerBench("echo-100-64", "echo", "t", "echo", "msgs/s", 100, 64)
        runs = {"weft": [run("weft", 100, 6.0, 0.02)],
                "epoll": [run("epoll", 100, 0.0, 0.0)]}
        s = summarize_server(sb, runs, [WEFT, EPOLL])
        self.assertIsNone(s["ratios"]["epoll"]["cpu"])
        self.assertEqual(s["syscalls"], {})


COST_SUMMARY = [
    {"bench": "echo-100-64", "workers": 1, "sharing": False, "unit": "msgs/s",
     "peers": {"weft": {"cpu_us_per_msg": mr(15.14, 14.0, 16.0, 3),
                        "vcsw_per_msg": mr(0.02104, 0.02, 0.03, 3)},
               "epoll": {"cpu_us_per_msg": mr(13.3, 13.3, 13.3, 1),
                         "vcsw_per_msg": mr(0.00539, 0.00539, 0.00539, 1)}},
     "ratios": {"epoll": {"cpu": mr(1.139, 1.139, 1.139, 1)}},
     "syscalls": {"weft": {"per_msg": 2.309}, "epoll": {"per_msg": 2.068}}},
    {"bench": "http-hello", "workers": 1, "sharing": False, "unit": "req/s",
     "peers": {"weft": {"cpu_us_per_msg": mr(20.0, 20.0, 20.0, 1),
                        "vcsw_per_msg": mr(0, 0, 0, 1)},
               "epoll": {"cpu_us_per_msg": None, "vcsw_per_msg": None},
               "epoll_failed": 1},
     "ratios": {"epoll": {"cpu": None}},
     "syscalls": {"weft": {"error": "strace could not attach: EPERM"}}},
]


class CostTable(unittest.TestCase):
    def test_sig(self):
        self.assertEqual([fmt_sig(x) for x in (0, 0.005391, 2.309, 15.14,
                                               123.45, 4567.8)],
                         ["0", "0.00539", "2.31", "15.1", "123.5", "4568"])
        self.assertEqual(fmt_mr(mr(0.021, 0.02, 0.03, 3), fmt=fmt_sig),
                         "0.021 (0.02–0.03)")

    def test_markdown(self):
        self.assertEqual(md_table(*server_cost_rows(COST_SUMMARY,
                                                    [WEFT, EPOLL])),
                         "\n".join([
            "| benchmark | unit | weft CPU µs/msg | weft vol. switches/msg "
            "| weft syscalls/msg | epoll CPU µs/msg "
            "| epoll vol. switches/msg | epoll syscalls/msg "
            "| weft/epoll cpu (lower: weft cheaper) | notes |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|---|",
            "| echo-100-64 @1 | per msg | 15.1 (14–16) | 0.021 (0.02–0.03) "
            "| 2.31 | 13.3 | 0.00539 | 2.07 | 1.14 | — |",
            "| http-hello @1 | per req | 20 | 0 | — | FAILED | FAILED | — | — "
            "| weft: strace could not attach: EPERM |"]))

    def test_no_notes_column_without_notes(self):
        head, rows = server_cost_rows(COST_SUMMARY[:1], [WEFT])
        self.assertEqual(head, ["benchmark", "unit", "weft CPU µs/msg",
                                "weft vol. switches/msg",
                                "weft syscalls/msg"])
        self.assertEqual(rows, [["echo-100-64 @1", "per msg", "15.1 (14–16)",
                                 "0.021 (0.02–0.03)", "2.31"]])

    def test_footnote_names_the_sources(self):
        note = server_cost_footnote(args())
        for src in ("/proc/PID/stat", "fields 14 and 15",
                    "/proc/PID/task/*/status", "voluntary_ctxt_switches",
                    "`strace -c -f -p PID`", "untimed"):
            self.assertIn(src, note)
        self.assertIn("not counted under --quick",
                      server_cost_footnote(args(quick=True)))
        self.assertIn("not counted (--no-syscalls)",
                      server_cost_footnote(args(no_syscalls=True)))


class Options(unittest.TestCase):
    def test_syscall_pass(self):
        self.assertTrue(syscalls_wanted(parse_args([])))
        self.assertFalse(syscalls_wanted(parse_args(["--no-syscalls"])))
        self.assertFalse(syscalls_wanted(parse_args(["--quick"])))


if __name__ == "__main__":
    unittest.main()
