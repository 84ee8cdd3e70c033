# SPDX-License-Identifier: MIT
"""The redis rows: their selection, the ratios of hooks to the other
modes, the issue's targets marked met or not, and the table without the
hooks mode."""
import unittest
from pathlib import Path

from weftbench.benches import REDIS_BENCHES
from weftbench.cli import parse_args
from weftbench.redis import (Mode, redis_rows, redis_steps, redis_table_rows,
                             summarize_redis, targets_of)

from .helpers import args, rec

R1000 = next(b for b in REDIS_BENCHES if b.clients == 1000)
MODES = [Mode(m, Path("/x")) for m in ("hooks", "threads", "async")]


def runs(hooks_ops, threads_ops, async_ops, hooks_rss=4096,
         threads_rss=40960):
    s = 1_000_000_000
    return {"hooks": [rec("hooks", s, ops=hooks_ops, rss_kb=hooks_rss)],
            "threads": [rec("threads", s, ops=threads_ops,
                            rss_kb=threads_rss)],
            "async": [rec("async", s, ops=async_ops, rss_kb=2048)]}


class Select(unittest.TestCase):
    def test_only(self):
        self.assertEqual([b.name for b in redis_rows(args(only=["redis"]))],
                         ["redis-100", "redis-1000"])
        self.assertEqual([b.name for b in
                          redis_rows(args(only=["redis-1000", "sem"]))],
                         ["redis-1000"])
        self.assertEqual(redis_rows(args(only=["echo"])), [])

    def test_parse_args_knows_them(self):
        self.assertEqual(parse_args(["--only", "redis,sem,rwlock"]).only,
                         ["redis", "sem", "rwlock"])

    def test_steps(self):
        self.assertEqual(redis_steps(args(only=["redis-100"], runs=5)),
                         [("[redis-100]", 15)])
        self.assertEqual(redis_steps(args(only=["redis-100"], quick=True)),
                         [("[redis-100]", 3)])


class Targets(unittest.TestCase):
    def test_met(self):
        s = summarize_redis(R1000, runs(160, 100, 170), MODES, [])
        self.assertAlmostEqual(s["ratios"]["threads"]["rate"]["median"], 1.6)
        self.assertAlmostEqual(s["ratios"]["threads"]["rss"]["median"], 0.1)
        self.assertEqual([t["met"] for t in s["targets"]], [True, True, True])

    def test_not_met(self):
        s = summarize_redis(R1000, runs(120, 100, 170, hooks_rss=20480),
                            MODES, [])
        met = {t["what"]: t["met"] for t in s["targets"]}
        self.assertEqual(met, {"hooks/threads rate >= 1.5": False,
                               "hooks/threads rss <= 0.2": False,
                               "hooks/async rate >= 0.9": False})
        row = redis_table_rows([s])[1][0]
        self.assertIn("**not met**", row[-2])

    def test_without_hooks(self):
        r = runs(0, 100, 170)
        del r["hooks"]
        s = summarize_redis(R1000, r, MODES[1:], ["hooks: not built"])
        self.assertTrue(all(t["met"] is None for t in targets_of(s)))
        head, rows = redis_table_rows([s])
        self.assertEqual(len(head), len(rows[0]))
        cells = dict(zip(head, rows[0]))
        self.assertEqual(cells["hooks median (min–max)"], "—")
        self.assertIn("not measured", cells["targets (issue 24)"])
        self.assertEqual(cells["notes"], "hooks: not built")


if __name__ == "__main__":
    unittest.main()
