# SPDX-License-Identifier: MIT
"""The prepared scaling run (scale.py): the pollers it runs weft under
(and the reasons it skips one), the pinning, the plan and its estimate,
and docs/scaling.md from a made-up scale.json: "not measured on 16
cores yet" until a run exists, the targets computed from the run."""
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from weftbench import scale
from weftbench.peers import Peer
from weftbench.targets import SCALE_TARGETS, verdicts
from weftbench.variants import variant

from .helpers import args, fake_weft, without_weft_env


def serve(peer, ctx, kind, port):
    return ["server", kind, str(port)]


def mr(x):
    return {"median": x, "min": x, "max": x, "n": 1}


def srv(bench, workers, weft_cpu, tokio_cpu, epoll_rate_ratio):
    return {"bench": bench, "workers": workers, "unit": "msgs/s",
            "peers": {"weft": {"rate": mr(1e5), "cpu_us_per_msg":
                               mr(weft_cpu)},
                      "weft-worker": {"rate": mr(1.1e5), "cpu_us_per_msg":
                                      mr(weft_cpu * 0.9)},
                      "tokio": {"rate": mr(9e4), "cpu_us_per_msg":
                                mr(tokio_cpu)}},
            "ratios": {"tokio": {"rate": mr(1.1), "cpu":
                                 mr(weft_cpu / tokio_cpu)},
                       "epoll": {"rate": mr(epoll_rate_ratio)}},
            "stats": {"weft": {"steal_attempts_per_steal": mr(3.0)}}}


def results(dry=False):
    """fib at 1 and 16 workers (15x), skynet at 16 only; echo-100-64's
    CPU per message 5 -> 6 (1.2x) and Tokio's 8 at 16 (weft 0.75 of it),
    0.95 of the limit's rate at 1, 0.85 at 16."""
    return {"meta": {"scale": True, "dry": dry,
                     "date": "2026-12-07T13:00:00+00:00", "git": "abc1234",
                     "cpus_affinity": 16, "cpu": "Test CPU", "kernel": "6.1",
                     "runs": 2, "workers": [1, 16], "server_workers": [1, 16],
                     "load_threads": 4, "window_s": [2.0, 0.5],
                     "loadavg": [0.1, 0.2, 0.3], "elapsed_s": 400.0,
                     "pinning": {"1": "server on CPUs 0, load on CPUs 12-15"},
                     "pollers": {"shared": "ran", "worker": "ran"},
                     "estimate_16": {"estimate_s": 390},
                     "peers": ["weft", "weft-worker", "go", "tokio",
                               "epoll"]},
            "summary": [
                {"bench": "fib", "workers": 1, "unit": "ms",
                 "peers": {"weft": mr(90.0)}, "ratios": {"go": mr(0.3)},
                 "scaling": {"weft": 1.0}},
                {"bench": "fib", "workers": 16, "unit": "ms",
                 "peers": {"weft": mr(6.0)}, "ratios": {"go": mr(0.1)},
                 "scaling": {"weft": 15.0}}],
            "servers": {"summary": [
                srv("echo-100-64", 1, 5.0, 7.0, 0.95),
                srv("echo-100-64", 16, 6.0, 8.0, 0.85)]},
            "failures": []}


class Pollers(unittest.TestCase):
    def setUp(self):
        without_weft_env(self)

    def test_the_subject_is_the_first_mode(self):
        weft = Peer("weft", "weft", build=lambda ctx: None,
                    env=lambda w: {"WEFT_WORKERS": str(w)})
        shared, worker = (variant(weft, m) for m in scale.POLLER_MODES)
        self.assertEqual((shared.name, worker.name), ("weft", "weft-worker"))
        self.assertEqual(worker.env(4), {"WEFT_WORKERS": "4",
                                         "WEFT_POLLER": "worker"})

    def test_a_rejected_mode_is_skipped_with_its_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            weft = fake_weft(tmp, 'case "$WEFT_POLLER" in shared) exit 0;; '
                             '*) echo "weft: WEFT_POLLER=\\"$WEFT_POLLER\\" '
                             'is invalid: expected shared" >&2; exit 1;; '
                             'esac\n')
            peers, skipped = scale.scale_peers([weft])
        self.assertEqual([p.name for p in peers], ["weft"])
        self.assertIn("rejects WEFT_POLLER=worker", skipped["weft-worker"])

    def test_a_library_with_both(self):
        with tempfile.TemporaryDirectory() as tmp:
            weft = fake_weft(tmp, 'case "$WEFT_POLLER" in shared|worker) '
                             'exit 0;; *) exit 1;; esac\n')
            peers, skipped = scale.scale_peers(
                [weft, Peer("go", "go", build=lambda c: None),
                 Peer("boost", "boost", build=lambda c: None)])
        self.assertEqual([p.name for p in peers],
                         ["weft", "weft-worker", "go"])
        self.assertEqual(skipped, {})
        self.assertEqual([p.name for p in scale.sched_peers(peers)],
                         ["weft", "go"])


class Plan(unittest.TestCase):
    @mock.patch("shutil.which", return_value="/usr/bin/taskset")
    def test_pins(self, _):
        pins = scale.scale_pins(16, 4)
        self.assertEqual((pins(1).server, pins(1).load), ("0", "12-15"))
        self.assertEqual((pins(8).server, pins(8).load), ("0-7", "12-15"))
        self.assertFalse(pins(8).sharing)
        self.assertEqual((pins(16).server, pins(16).sharing), (None, True))

    def test_full_run_fits_the_budget(self):
        sa = scale.scale_args(args(timeout=300), False)
        self.assertEqual(sa.workers, [1, 2, 4, 8, 16])
        self.assertEqual(sa.server_workers, [1, 4, 8, 16])
        peers = [Peer(n, n, build=lambda c: None, server=serve)
                 for n in ("weft", "weft-worker", "go", "tokio")] + [
            Peer("epoll", "epoll", build=lambda c: None, server=serve,
                 missing={b: "server only" for b in scale.SCALE_SCHED})]
        plan, est = scale.scale_plan(sa, peers)
        # 5 rows x 5 counts x (weft's warm-up + 3 peers (one weft, no
        # epoll) x 2 runs)
        self.assertEqual(est["scheduler_invocations"], 175)
        # 2 rows x 4 counts x 5 peers x 2 runs
        self.assertEqual(est["server_runs"], 80)
        self.assertLess(est["estimate_s"], scale.SCALE_BUDGET_S)
        self.assertEqual(len(plan), 5 * 5 + 2 * 4)

    def test_count_order(self):
        self.assertEqual(scale.count_order([1, 2, 4, 8, 16]), [1, 16, 2, 4, 8])
        self.assertEqual(scale.count_order([1]), [1])

    def test_dry_counts(self):
        sa = scale.scale_args(args(timeout=300), True)
        self.assertEqual(sa.workers, [1, 2])
        self.assertEqual((sa.runs, sa.window), (1, scale.DRY_WINDOW))


class Page(unittest.TestCase):
    def template(self):
        return scale.TEMPLATE.read_text()

    def test_unmeasured_until_a_run(self):
        text = scale.render_scale(self.template(), {})
        self.assertIn("## The run\n\nNot measured on 16 cores yet.", text)
        self.assertIn("Not measured on 16 cores yet.  The targets it will "
                      "judge:", text)
        self.assertIn("| fib @16 |", text)
        self.assertNotIn("| met |", text)

    def test_a_run(self):
        text = scale.render_scale(self.template(), results())
        self.assertIn("16 CPUs (Test CPU)", text)
        self.assertIn("| fib | ms | 90.00 | 6.00 | 15.00x | 0.30 / 0.10 |",
                      text)
        # CPU per message and its growth over 1 worker, per mode
        self.assertIn("| 6 (1.20) | 5.4 (1.20) | 8 (1.14) |", text)
        self.assertNotIn("A dry run", text)

    def test_dry_run_says_so(self):
        text = scale.render_scale(self.template(), results(dry=True))
        self.assertIn("**A dry run**", text)
        self.assertIn("(a dry run: they say nothing of 16 cores)", text)

    def test_write(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = scale.write_scale_page(results(), page=Path(tmp) / "s.md")
            self.assertTrue(out.read_text().startswith("<!-- generated"))


class Targets(unittest.TestCase):
    def find(self, row, kind, peer="", workers=16):
        got = [v for v in verdicts(results(), SCALE_TARGETS)
               if v["target"].row == row and v["target"].kind == kind
               and v["target"].peer == peer and v["workers"] == workers]
        self.assertEqual(len(got), 1, (row, kind, peer, got))
        return got[0]

    def test_verdicts(self):
        g = self.find("echo-100-64", "growth")
        self.assertAlmostEqual(g["figure"], 1.2)
        self.assertTrue(g["met"])
        self.assertTrue(self.find("echo-100-64", "cpu", "tokio")["met"])
        self.assertTrue(self.find("echo-100-64", "rate", "epoll", 1)["met"])
        self.assertFalse(self.find("echo-100-64", "rate", "epoll")["met"])
        self.assertTrue(self.find("fib", "scaling")["met"])

    def test_unmeasured(self):
        self.assertIsNone(self.find("skynet", "scaling")["met"])
        self.assertIsNone(self.find("echo-1000-64", "growth")["met"])


class Options(unittest.TestCase):
    """--scale, --dry and --only idle-tax as parse_args reads them."""

    def parse(self, *argv):
        from weftbench.cli import parse_args
        return parse_args(list(argv))

    def test_scale_json_and_dry(self):
        a = self.parse("--scale", "--dry", "--build-dir", "/tmp/b")
        self.assertEqual(a.json, Path("/tmp/b/bench/scale.json"))
        self.assertEqual(self.parse("--build-dir", "/tmp/b").json,
                         Path("/tmp/b/bench/results.json"))
        with self.assertRaises(SystemExit), \
                mock.patch("sys.stderr"):
            self.parse("--dry")

    def test_idle_tax_is_a_name_of_only(self):
        self.assertEqual(self.parse("--only", "idle-tax").only, ["idle-tax"])


if __name__ == "__main__":
    unittest.main()
