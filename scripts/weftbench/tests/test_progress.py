# SPDX-License-Identifier: MIT
import io
import unittest

from weftbench.micro import micro_steps
from weftbench.peers import Peer
from weftbench.progress import (Progress, estimate_left, format_left,
                                step_line)

from .helpers import args


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class Formatting(unittest.TestCase):
    def test_format_left(self):
        self.assertEqual(format_left(None), "time left unknown")
        self.assertEqual(format_left(0), "about 5 s left")
        self.assertEqual(format_left(41), "about 40 s left")
        self.assertEqual(format_left(119), "about 120 s left")
        self.assertEqual(format_left(120), "about 2 min left")
        self.assertEqual(format_left(170), "about 3 min left")
        self.assertEqual(format_left(3600), "about 60 min left")

    def test_estimate_left(self):
        self.assertEqual(estimate_left(10.0, 4, 6), 15.0)
        self.assertEqual(estimate_left(10.0, 4, 0), 0.0)
        self.assertIsNone(estimate_left(10.0, 0, 6))

    def test_step_line(self):
        self.assertEqual(step_line(3, 14, "[spawn w=2]", 250),
                         "[3/14] [spawn w=2] (about 4 min left)")


class Steps(unittest.TestCase):
    def run_plan(self):
        out, clock = io.StringIO(), Clock()
        prog = Progress(stream=out, clock=clock)
        prog.plan([("[floors]", 6), ("[yield w=1]", 2), ("[spawn w=1]", 4)])
        prog.step("[floors]")
        for _ in range(6):
            prog.show("run")
        clock.t += 30
        prog.step("[yield w=1]")
        prog.show("run")
        prog.show("run")
        clock.t += 570
        prog.step("[spawn w=1]")
        return out.getvalue().splitlines()

    def test_lines(self):
        self.assertEqual([x for x in self.run_plan() if x != "run"], [
            "[1/3] [floors] (time left unknown)",
            "[2/3] [yield w=1] (about 30 s left)",
            "[3/3] [spawn w=1] (about 5 min left)",
        ])

    def test_a_skipped_step_is_passed_over(self):
        out = io.StringIO()
        prog = Progress(stream=out, clock=Clock())
        prog.plan([("a", 1), ("b", 1), ("c", 1)])
        prog.step("c")
        self.assertEqual(out.getvalue(), "[3/3] c (time left unknown)\n")

    def test_micro_plan(self):
        go = Peer("go", "go", build=None, missing={"local-get": "none"})
        weft = Peer("weft", "weft", build=None)
        a = args(only=["yield", "local-get", "spawn"], runs=3, peer_runs=1,
                 workers=[1, 2], peer_workers=[2], peer_warmup=False,
                 quick=True)
        # quick: no warm-up; spawn at w=1 without go (not in peer_workers)
        self.assertEqual(micro_steps(a, [weft, go]), [
            ("[yield w=1]", 4), ("[spawn w=1]", 3), ("[spawn w=2]", 4),
            ("[local-get w=1]", 3)])
        a = args(only=["yield", "local-get"], runs=3, peer_runs=3)
        self.assertEqual(micro_steps(a, [weft, go]), [
            ("[yield w=1]", 8), ("[local-get w=1]", 4)])
