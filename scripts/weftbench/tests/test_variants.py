# SPDX-License-Identifier: MIT
"""weft in other modes as peers (variants.py): the server rows' backends
(weft on epoll, weft-uring, weft-ringsock) and the reasons one is left
out: a library that refuses its variables (io_uring that cannot be had,
EPERM), or one that does not read them."""
import tempfile
import unittest

from weftbench import variants
from weftbench.peers import Peer

from .helpers import fake_weft, without_weft_env

# a library that knows every variable of the backends and can have
# io_uring; $1 replaces the uring case (a sandbox that refuses it)
LIBRARY = '''
case "$WEFT_IO" in ""|auto|epoll) ;; uring) %s ;; *) exit 1;; esac
case "$WEFT_URING_SOCKETS" in ""|0|1) ;; *) exit 1;; esac
case "$WEFT_POLLER" in ""|shared|worker) ;; *) exit 1;; esac
exit 0
'''
EPERM = ('echo "weft: WEFT_IO=uring cannot be had: io_uring_setup failed: '
         'Operation not permitted" >&2; '
         'echo "weft-bench: weft_main: Operation not permitted" >&2; exit 1')


def go() -> Peer:
    return Peer("go", "go", build=lambda c: None)


class Backends(unittest.TestCase):
    def setUp(self):
        without_weft_env(self)

    def test_each_backend_beside_the_peers(self):
        with tempfile.TemporaryDirectory() as tmp:
            weft = fake_weft(tmp, LIBRARY % ":")
            peers, skipped = variants.backend_peers([weft, go()], [1, 2])
        self.assertEqual([p.name for p in peers],
                         ["weft", "weft-uring", "weft-ringsock", "go"])
        self.assertEqual(skipped, {})
        w, uring, ring = peers[:3]
        self.assertEqual(w.env(1), {"WEFT_WORKERS": "1", "WEFT_IO": "epoll"})
        self.assertEqual(uring.env(2), {"WEFT_WORKERS": "2",
                                        "WEFT_IO": "uring"})
        # ring sockets need a poller per worker past 1 worker
        self.assertEqual(ring.env(1), {"WEFT_WORKERS": "1",
                                       "WEFT_IO": "uring",
                                       "WEFT_URING_SOCKETS": "1"})
        self.assertEqual(ring.env(2)["WEFT_POLLER"], "worker")
        self.assertEqual(variants.backends_meta(skipped),
                         {"weft": "ran", "weft-uring": "ran",
                          "weft-ringsock": "ran"})

    def test_no_io_uring_here(self):
        with tempfile.TemporaryDirectory() as tmp:
            weft = fake_weft(tmp, LIBRARY % EPERM)
            peers, skipped = variants.backend_peers([weft, go()], [1])
        self.assertEqual([p.name for p in peers], ["weft", "go"])
        self.assertEqual(set(skipped), {"weft-uring", "weft-ringsock"})
        # the library's own line, not the program's last
        self.assertEqual(
            skipped["weft-uring"], "the library rejects WEFT_IO=uring: "
            "weft: WEFT_IO=uring cannot be had: io_uring_setup failed: "
            "Operation not permitted")
        note = variants.backends_note(peers, skipped)
        self.assertIn("weft-ringsock left out: the library rejects WEFT_IO="
                      "uring WEFT_URING_SOCKETS=1: weft: WEFT_IO=uring cannot "
                      "be had", note)
        self.assertNotIn("under each I/O backend", note)

    def test_a_library_that_does_not_read_a_variable(self):
        with tempfile.TemporaryDirectory() as tmp:
            old = fake_weft(tmp, 'case "$WEFT_IO" in no-such-value) exit 1;; '
                            'esac\nexit 0\n')
            self.assertIn("does not read WEFT_URING_SOCKETS (it accepts "
                          "WEFT_URING_SOCKETS=no-such-value too)",
                          variants.mode_check(old, variants.ring_sockets(1)))
            self.assertIsNone(variants.mode_check(old, {"WEFT_IO": "uring"}))
            none = fake_weft(tmp, "exit 0\n")
            self.assertIn("does not read WEFT_POLLER", variants.mode_check(
                none, {"WEFT_POLLER": "worker"}))

    def test_the_largest_count_is_checked(self):
        """A library without WEFT_POLLER=worker has ring sockets at 1
        worker only: a run at 2 leaves weft-ringsock out."""
        script = (LIBRARY % ":").replace("shared|worker", "shared")
        with tempfile.TemporaryDirectory() as tmp:
            weft = fake_weft(tmp, script)
            one, _ = variants.backend_peers([weft], [1])
            both, skipped = variants.backend_peers([weft], [1, 2])
        self.assertIn("weft-ringsock", [p.name for p in one])
        self.assertEqual([p.name for p in both], ["weft", "weft-uring"])
        self.assertIn("WEFT_POLLER=worker", skipped["weft-ringsock"])

    def test_weft_mode(self):
        self.assertTrue(variants.weft_mode("weft"))
        self.assertTrue(variants.weft_mode("weft-ringsock"))
        self.assertFalse(variants.weft_mode("tokio"))
