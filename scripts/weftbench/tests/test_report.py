# SPDX-License-Identifier: MIT
import unittest

from weftbench.fmt import fmt_mr, fmt_num, fmt_ratio
from weftbench.report import md_table, runs_note, table_rows, text_table

from .helpers import args, peer

PEERS = [peer("weft"), peer("go"), peer("tokio")]


def mr(median, lo, hi, n):
    return {"median": median, "min": lo, "max": hi, "n": n}


SUMMARY = [
    {"bench": "yield", "workers": 1, "unit": "ns/yield",
     "peers": {"weft": mr(45.2, 44.0, 47.5, 3), "weft_failed": 0,
               "go": mr(120.0, 110.0, 130.0, 3), "go_failed": 1,
               "tokio": None, "tokio_failed": 0},
     "ratios": {"go": mr(0.38, 0.35, 0.41, 3), "tokio": None},
     "scaling": {"weft": 1.0}, "notes": "tokio: a|b"},
    {"bench": "spawn", "workers": 2, "unit": "ns/spawn+join",
     "peers": {"weft": mr(1234.6, 1234.6, 1234.6, 1), "weft_failed": 0},
     "ratios": {}, "scaling": {"weft": 1.874}, "notes": None},
]


class Fmt(unittest.TestCase):
    def test_num(self):
        self.assertEqual([fmt_num(x) for x in (0.123, 99.999, 100, 999.95,
                                               1000, 123456.7)],
                         ["0.12", "100.00", "100.0", "1000.0", "1000",
                          "123457"])

    def test_median_range(self):
        self.assertEqual(fmt_mr(mr(45.2, 44.0, 47.5, 3)),
                         "45.20 (44.00–47.50)")
        self.assertEqual(fmt_mr(mr(2.0, 2.0, 2.0, 1)), "2.00")
        self.assertEqual(fmt_mr(mr(120, 110, 130, 2), failed=1),
                         "120.0 (110.0–130.0) [1 failed]")
        self.assertEqual(fmt_mr(None), "—")
        self.assertEqual(fmt_mr(None, failed=3), "FAILED")

    def test_ratio(self):
        self.assertEqual(fmt_ratio(mr(0.384, 0.35, 0.405, 3)),
                         "0.38 (0.35–0.41)")
        self.assertEqual(fmt_ratio(mr(2.0, 2.0, 2.0, 1)), "2.00")
        self.assertEqual(fmt_ratio(None), "—")


class Tables(unittest.TestCase):
    def test_markdown(self):
        self.assertEqual(md_table(*table_rows(SUMMARY, PEERS)), "\n".join([
            "| benchmark | unit | workers | weft median (min–max) "
            "| go median (min–max) | weft/go | tokio median (min–max) "
            "| weft/tokio | weft scaling | notes (medians) |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|---|",
            "| yield | ns/yield | 1 | 45.20 (44.00–47.50) "
            "| 120.0 (110.0–130.0) [1 failed] | 0.38 (0.35–0.41) | — | — "
            "| — | tokio: a\\|b |",
            "| spawn | ns/spawn+join | 2 | 1235 | — | — | — | — | 1.87x | — |",
        ]))

    def test_no_notes_column_without_notes(self):
        head, rows = table_rows(SUMMARY[1:], PEERS[:1])
        self.assertEqual(head, ["benchmark", "unit", "workers",
                                "weft median (min–max)", "weft scaling"])
        self.assertEqual(rows, [["spawn", "ns/spawn+join", "2", "1235",
                                 "1.87x"]])

    def test_text(self):
        self.assertEqual(text_table(["a", "bb", "c"],
                                    [["ccc", "d", ""], ["e", "ffff", "g"]]),
                         "a    bb    c\n"
                         "---  ----  -\n"
                         "ccc  d\n"
                         "e    ffff  g")


class Notes(unittest.TestCase):
    def test_runs_note_quick(self):
        a = args(runs=3, peer_runs=1, workers=[1, 2], peer_workers=[2],
                 peer_warmup=False, quick=True)
        self.assertEqual(runs_note(a), (
            "3 runs per point; the other peers 1, only at 2 workers (or a "
            "benchmark's fixed count), without a warm-up invocation; "
            "--quick: no warm-up invocation of weft either, sleep and "
            "parked at the largest worker count only"))
        self.assertEqual(runs_note(a, servers=True),
                         "3 runs per row; the other peers 1")

    def test_runs_note_plain(self):
        self.assertEqual(runs_note(args(runs=5, peer_runs=5)),
                         "5 runs per point")
