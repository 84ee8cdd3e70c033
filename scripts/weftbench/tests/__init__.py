# SPDX-License-Identifier: MIT
"""Unit tests of weftbench's pure parts (stdlib unittest):

    python3 -m unittest discover -s scripts/weftbench/tests -t scripts

or `meson test --suite benchpy` in a build directory."""
