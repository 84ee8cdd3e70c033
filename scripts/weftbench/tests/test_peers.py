# SPDX-License-Identifier: MIT
"""--prebuilt: the peers' programs are taken from where a build left
them, and a missing one is a Skip, never a build."""
import os
import tempfile
import unittest
from pathlib import Path

from weftbench.cli import parse_args
from weftbench.peers import Ctx, Skip, build_boost, build_go, build_tokio

BUILT = {build_go: "go-bench", build_boost: "boost-bench",
         build_tokio: "tokio/target/release/tokio-bench"}


class Prebuilt(unittest.TestCase):
    def test_option(self):
        self.assertTrue(parse_args(["--prebuilt"]).prebuilt)
        self.assertFalse(parse_args([]).prebuilt)

    def test_missing_is_a_skip(self):
        with tempfile.TemporaryDirectory() as d:
            ctx = Ctx(Path(d), Path(d) / "bench", [], prebuilt=True)
            for build in BUILT:
                with self.assertRaisesRegex(Skip, "builds nothing"):
                    build(ctx)

    def test_takes_what_is_there(self):
        with tempfile.TemporaryDirectory() as d:
            ctx = Ctx(Path(d), Path(d) / "bench", [], prebuilt=True)
            for build, rel in BUILT.items():
                prog = ctx.out_dir / rel
                prog.parent.mkdir(parents=True, exist_ok=True)
                prog.write_text("#!/bin/sh\n")
                os.chmod(prog, 0o755)
                self.assertEqual(build(ctx), prog)


if __name__ == "__main__":
    unittest.main()
