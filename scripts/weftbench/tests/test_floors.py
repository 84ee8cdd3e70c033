# SPDX-License-Identifier: MIT
import unittest

from weftbench.floors import cost_model, cost_table_rows


def mr(m):
    return {"median": m, "min": m, "max": m, "n": 1}


def floor(name, ns):
    return {"floor": name, "ns": mr(ns)}


class CostModel(unittest.TestCase):
    def test_rows(self):
        summary = [
            {"bench": "yield", "workers": 1, "unit": "ns/yield",
             "peers": {"weft": mr(45.0)}},
            # spawn at 1 worker chases cas and switch: cas is not measured
            {"bench": "spawn", "workers": 1, "unit": "ns/spawn+join",
             "peers": {"weft": mr(300.0)}},
            {"bench": "sleep", "workers": 2, "unit": "ms",
             "peers": {"weft": mr(25.0)}},
            {"bench": "fib", "workers": 1, "unit": "ms",
             "peers": {"weft": mr(5.0)}},  # no Cost
        ]
        ssummary = [{"bench": "echo-100-64", "group": "echo", "workers": 1,
                     "unit": "msgs/s",
                     "peers": {"weft": {"rate": mr(50000.0)},
                               "epoll": {"rate": mr(55000.0)}}},
                    # no limit measured in this row: no cost row
                    {"bench": "http-hello", "group": "http", "workers": 1,
                     "unit": "req/s",
                     "peers": {"weft": {"rate": mr(90000.0)}}}]
        points = [{"bench": "sleep", "workers": 2, "runs": {"weft": [
            {"ok": False}, {"ok": True, "ops": 100000}]}}]
        fsummary = [floor("switch", 10.0), floor("fresh-page", 100.0),
                    floor("epoll-wait", 2000.0), {"floor": "cas", "ns": None}]
        rows = cost_model(summary, ssummary, points, fsummary)
        self.assertEqual([(r["bench"], r["model"], r["floor"], r["ratio"])
                          for r in rows],
                         [("yield", "switch", 10.0, 4.5),
                          ("sleep", "fresh-page", 10.0, 2.5),
                          ("echo-100-64", "epoll (measured)", 55000.0, 1.1)])
        head, table = cost_table_rows(rows[:1])
        self.assertEqual(head, ["benchmark", "unit", "workers",
                                "weft median", "floor", "weft/floor",
                                "notes (the floor it chases)"])
        self.assertEqual(table, [["yield", "ns/yield", "1", "45.00", "10.00",
                                  "4.50", "switch: a yield switches "
                                  "straight to the other yielder"]])

    def test_ms_row_without_ops_has_no_floor(self):
        summary = [{"bench": "sleep", "workers": 2, "unit": "ms",
                    "peers": {"weft": mr(25.0)}}]
        self.assertEqual(cost_model(summary, [], [],
                                    [floor("fresh-page", 100.0)]), [])
