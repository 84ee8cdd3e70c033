# SPDX-License-Identifier: MIT
"""Issue 22's rows: HTTPS under wrk and UDP echo under loadgen -u, on one
worker; the servers each peer runs for them (or why not); the certificate
made at run time; the checks before the load; loadgen -u's RESULT line."""
import os
import shutil
import socket
import ssl
import tempfile
import threading
import unittest
from pathlib import Path

from weftbench.benches import GROUPS, SERVER_BENCHES, row_workers
from weftbench.cli import parse_args
from weftbench.parse import judge, parse_result
from weftbench.peers import (PEERS, Ctx, Peer, Skip, epoll_server,
                             subcommand_server, tls_files, tokio_server,
                             weft_server)
from weftbench.server import (LOADS, http_check, https_check, load_echo,
                              load_seconds, load_wrk, make_cert, server_steps,
                              udp_check)
from weftbench.stats import summarize_server

from .helpers import args, proc, rec

ROWS = {b.name: b for b in SERVER_BENCHES}
HTTPS, UDP = ROWS["https-hello"], ROWS["udp-100-64"]
UDP_LINE = ("RESULT name=udp-100-64 impl=go workers=1 ns=5000000000 "
            "ops=500000 value=100000 check=ok p50_us=900.1 p99_us=1500.0 "
            "p999_us=2000.0 max_us=501000.0 conns=100 size=64 threads=1 "
            "errors=0 lost=3 conn_min=4000 loadgen_cpu=0.50 late=1\n")


LAT = dict(p50_us=900, p99_us=1500, conn_min=1)


def ctx_in(d: str) -> Ctx:
    return Ctx(Path(d), Path(d) / "bench", [])


class Rows(unittest.TestCase):
    def test_known_to_only_and_groups(self):
        self.assertIn("tls", GROUPS)
        self.assertIn("udp", GROUPS)
        only = parse_args(["--only", "tls,udp-100-64"]).only
        self.assertEqual(only, ["tls", "udp-100-64"])

    def test_one_worker_only(self):
        self.assertEqual(row_workers(HTTPS, [1, 2]), [1])
        self.assertEqual(row_workers(UDP, [2]), [])
        self.assertEqual(row_workers(ROWS["http-hello"], [1, 2]), [1, 2])
        a = args(only=["http-hello", "https-hello", "udp-100-64"], runs=3,
                 peer_runs=3, server_workers=[1, 2], no_syscalls=True)
        w = Peer("weft", "weft", build=lambda ctx: None,
                 server=lambda *_: ["x"])
        self.assertEqual([t for t, _ in server_steps(a, [w])],
                         ["[http-hello w=1]", "[http-hello w=2]",
                          "[https-hello w=1]", "[udp-100-64 w=1]"])

    def test_keep_alive_said(self):
        self.assertIn("keep-alive", HTTPS.title)
        self.assertIn("record layer", HTTPS.title)


class Loads(unittest.TestCase):
    def test_https_under_wrk(self):
        load = load_wrk(HTTPS, "weft", 1, 9, "wrk", 10, 0, 1)
        self.assertEqual(load.cmd[-1], "https://127.0.0.1:9/")
        self.assertEqual(load_seconds(HTTPS, True), (2.0, 0.0))
        self.assertIs(LOADS["tls"][1], load_wrk)

    def test_udp_under_loadgen_u(self):
        cmd = load_echo(UDP, "go", 1, 9, "lg", 5, 1, 1).cmd
        self.assertEqual(cmd[:2], ["lg", "-u"])
        self.assertEqual(cmd[cmd.index("-c") + 1], "100")
        self.assertNotIn("-u", load_echo(ROWS["echo-100-64"], "go", 1, 9,
                                          "lg", 5, 1, 1).cmd)


class Servers(unittest.TestCase):
    def test_weft(self):
        with tempfile.TemporaryDirectory() as d:
            ctx = ctx_in(d)
            with self.assertRaisesRegex(Skip, "weft-tls not built"):
                weft_server(PEERS[0], ctx, "https", 5)
            for name in ("weft-tls", "weft-udp-echo"):
                prog = ctx.build_dir / "examples" / name
                prog.parent.mkdir(parents=True, exist_ok=True)
                prog.write_text("#!/bin/sh\n")
                os.chmod(prog, 0o755)
            cert, key = tls_files(ctx)
            self.assertEqual(weft_server(PEERS[0], ctx, "https", 5),
                             [str(ctx.build_dir / "examples" / "weft-tls"),
                              "server", "5", str(cert), str(key)])
            self.assertEqual(weft_server(PEERS[0], ctx, "udp-echo", 5),
                             [str(ctx.build_dir / "examples" /
                                  "weft-udp-echo"), "5"])

    def test_go_and_the_others(self):
        ctx = ctx_in("/b")
        go = Peer("go", "go", build=lambda ctx: None, program=Path("/g"))
        self.assertEqual(subcommand_server(go, ctx, "https", 5),
                         ["/g", "https-server", "5", "/b/bench/tls/cert.pem",
                          "/b/bench/tls/key.pem"])
        self.assertEqual(subcommand_server(go, ctx, "udp-echo", 5),
                         ["/g", "udp-echo-server", "5"])
        self.assertEqual(tokio_server(go, ctx, "udp-echo", 5),
                         ["/g", "udp-echo-server", "5"])
        with self.assertRaisesRegex(Skip, "no TLS"):
            tokio_server(go, ctx, "https", 5)
        for kind in ("https", "udp-echo"):
            with self.assertRaisesRegex(Skip, f"no {kind} server"):
                epoll_server(go, ctx, kind, 5)
        self.assertEqual(epoll_server(go, ctx, "http", 5),
                         ["/g", "http-server", "5"])


def serve_once(listener: socket.socket, wrap, answer: bytes):
    """Accepts one connection (wrapped), reads a request head, answers."""
    def run():
        c, _ = listener.accept()
        with wrap(c) as s:
            s.recv(65536)
            s.sendall(answer)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


HELLO = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!"


@unittest.skipIf(shutil.which("openssl") is None, "no openssl")
class Tls(unittest.TestCase):
    def test_cert_and_check(self):
        with tempfile.TemporaryDirectory() as d, socket.socket() as ln:
            ctx = ctx_in(d)
            make_cert(ctx)
            cert, key = tls_files(ctx)
            self.assertIn(b"BEGIN CERTIFICATE", cert.read_bytes())
            sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            sctx.load_cert_chain(cert, key)
            ln.bind(("127.0.0.1", 0))
            ln.listen()
            port = ln.getsockname()[1]
            wrap = lambda c: sctx.wrap_socket(c, server_side=True)
            serve_once(ln, wrap, HELLO * 2)
            self.assertIsNone(https_check(ctx, port))
            # one answer short
            serve_once(ln, wrap, HELLO)
            self.assertRegex(https_check(ctx, port) or "",
                             "^HTTPS check: response 2")
            # plain HTTP where TLS is wanted
            serve_once(ln, lambda c: c, HELLO * 2)
            self.assertRegex(https_check(ctx, port) or "", "^HTTPS check: ")
            serve_once(ln, lambda c: c, HELLO * 2)
            self.assertIsNone(http_check(ctx, port))


class Udp(unittest.TestCase):
    def test_check(self):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]

            def echo(transform):
                data, peer = s.recvfrom(65536)
                s.sendto(transform(data), peer)
            t = threading.Thread(target=echo, args=(lambda x: x,))
            t.start()
            self.assertIsNone(udp_check(None, port))
            t.join()
            t = threading.Thread(target=echo, args=(lambda x: x[1:],))
            t.start()
            self.assertRegex(udp_check(None, port) or "", "came back")
            t.join()
        # nothing there: the port's ICMP error, at once
        self.assertRegex(udp_check(None, port) or "", "^UDP check: ")

    def test_lost_datagrams_pass_and_are_noted(self):
        r = parse_result(UDP_LINE)
        self.assertEqual((r["lost"], r["late"]), ("3", "1"))
        j = judge(r, proc(), "udp-100-64", 1)
        self.assertTrue(j["ok"])
        self.assertEqual(j["extra"]["lost"], "3")
        go = Peer("go", "go", build=lambda ctx: None)
        runs = {"go": [rec("go", 10**9, ops=100, lost=n, late=0, **LAT)
                       for n in (0, 3, 5)]}
        s = summarize_server(UDP, runs, [go], None, 1)
        self.assertIn("datagrams lost per run: go 3", s["notes"])
        # TCP rows have no such note
        runs = {"go": [rec("go", 10**9, ops=100, lost=0, **LAT)]}
        s = summarize_server(ROWS["echo-100-64"], runs, [go], None, 1)
        self.assertNotIn("lost", s["notes"])


    def test_a_busy_load_generator_is_noted(self):
        go = Peer("go", "go", build=lambda ctx: None)
        weft = Peer("weft", "weft", build=lambda ctx: None)

        def runs(cpu, threads=1):
            return [rec(p, 10**9, ops=100, loadgen_cpu=cpu, threads=threads,
                        **LAT) for p in ("weft", "go")]
        busy = {"weft": runs("0.97")[:1], "go": runs("0.80")[1:]}
        s = summarize_server(UDP, busy, [weft, go], None, 1)
        self.assertIn("load generator busy (CPU per thread: weft 0.97, "
                      "go 0.80)", s["notes"])
        # per thread: two threads at 1.2 CPUs in all are not busy
        idle = {"weft": runs("1.20", 2)[:1], "go": runs("1.00", 2)[1:]}
        s = summarize_server(UDP, idle, [weft, go], None, 1)
        self.assertNotIn("load generator", s["notes"] or "")


if __name__ == "__main__":
    unittest.main()
