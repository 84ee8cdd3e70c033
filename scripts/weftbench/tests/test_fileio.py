# SPDX-License-Identifier: MIT
"""The file rows (issue 48): their selection, weft-uring's ratios to the
other programs, and the issue's targets marked met or not."""
import unittest
from pathlib import Path

from weftbench.cli import parse_args
from weftbench.fileio import (FILE_BENCHES, Impl, file_rows, file_steps,
                              file_table_rows, summarize_file)

from .helpers import args, rec

IMPLS = [Impl(m, lambda fb, p, s: []) for m in
         ("weft-uring", "weft-epoll", "fio", "go", "tokio")]


def runs(ops: dict, cpu_ns: int = 1_000_000):
    s = 1_000_000_000
    return {m: [rec(m, s, ops=n, cpu_ns=cpu_ns)] for m, n in ops.items()}


class Select(unittest.TestCase):
    def test_only(self):
        self.assertEqual([b.label for b in file_rows(args(only=["file"]))],
                         ["file-cache-4k x64", "file-cache-4k x256",
                          "file-direct-4k x64", "file-direct-4k x256"])
        self.assertEqual([b.label for b in
                          file_rows(args(only=["file-direct-4k"]))],
                         ["file-direct-4k x64", "file-direct-4k x256"])
        self.assertEqual(file_rows(args(only=["echo"])), [])

    def test_parse_args_knows_them(self):
        self.assertEqual(parse_args(["--only", "file,file-cache-4k"]).only,
                         ["file", "file-cache-4k"])

    def test_steps(self):
        self.assertEqual(file_steps(args(only=["file-cache-4k"], runs=3)),
                         [("[file-cache-4k x64]", 15),
                          ("[file-cache-4k x256]", 15)])


class Summary(unittest.TestCase):
    def test_direct_target(self):
        fb = next(b for b in FILE_BENCHES if b.direct)
        s = summarize_file(fb, runs({"weft-uring": 95, "weft-epoll": 50,
                                     "fio": 100, "go": 20, "tokio": 40}),
                           IMPLS, [])
        self.assertAlmostEqual(s["ratios"]["fio"]["rate"]["median"], 0.95)
        self.assertEqual([(t["what"], t["met"]) for t in s["targets"]],
                         [("weft-uring/fio reads/s >= 0.9", True)])
        self.assertAlmostEqual(s["impls"]["go"]["cpu_us"]["median"], 50.0)

    def test_cache_targets(self):
        fb = next(b for b in FILE_BENCHES if not b.direct)
        s = summarize_file(fb, runs({"weft-uring": 100, "weft-epoll": 100,
                                     "fio": 80, "go": 90, "tokio": 10}),
                           IMPLS, ["tokio: its peer was not built"])
        self.assertEqual([t["met"] for t in s["targets"]], [True, False])
        head, rows = file_table_rows([s])
        self.assertEqual(len(head), len(rows[0]))
        self.assertIn("**not met**", rows[0][-2])

    def test_a_missing_program_is_not_measured(self):
        fb = next(b for b in FILE_BENCHES if b.direct)
        s = summarize_file(fb, runs({"weft-uring": 100}), IMPLS[:1],
                           ["fio: not found"])
        self.assertEqual([t["met"] for t in s["targets"]], [None])


if __name__ == "__main__":
    unittest.main()
