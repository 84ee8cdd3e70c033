# SPDX-License-Identifier: MIT
import unittest
from pathlib import Path

from weftbench.charts import TERM, histogram_script


class Histogram(unittest.TestCase):
    def test_servers_script(self):
        # the script servers.png had before the two histograms shared it
        png, dat = Path("/b/servers.png"), Path("/b/servers.dat")
        want = f"""{TERM}
set output '/b/servers.png'
set title 'servers on 1 worker: weft / peer (median of run-by-run ratios)'
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set yrange [0:*]
set ylabel 'ratio'
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2
plot '/b/servers.dat' using 2:xtic(1) title columnhead, '/b/servers.dat' using 3:xtic(1) title columnhead
"""
        self.assertEqual(histogram_script(
            png, dat, 2, "servers on 1 worker: weft / peer (median of "
            "run-by-run ratios)", ["set yrange [0:*]", "set ylabel 'ratio'"]),
            want)

    def test_ratios_axes(self):
        got = histogram_script(Path("r.png"), Path("r.dat"), 1, "t",
                               ["set logscale y 2", "set yrange [*:*]"])
        self.assertIn("set key top left\nset logscale y 2\n"
                      "set yrange [*:*]\nset grid ytics\n", got)
        self.assertTrue(got.endswith(
            "plot 'r.dat' using 2:xtic(1) title columnhead\n"))
