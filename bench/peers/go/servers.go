// SPDX-License-Identifier: MIT

// The Go peers of weft's example servers (examples/echo.c, examples/http.c),
// run by scripts/bench.py under bench/loadgen and wrk:
//
//	go-bench echo-server PORT       a goroutine per connection echoing its bytes
//	go-bench http-server PORT       net/http answering "Hello, World!"
//	go-bench https-server PORT CERT KEY
//	                                the same over crypto/tls (examples/tls.c)
//	go-bench udp-echo-server PORT   every datagram back to its sender
//	                                (examples/udp_echo.c)
//
// GOMAXPROCS comes from the environment (the runner sets it to 1, as it sets
// WEFT_WORKERS=1 for weft).  Each prints "listening on PORT" once it accepts,
// and runs until killed.
package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

var servers = map[string]func(net.Listener) error{
	"echo-server": echoServer,
	"http-server": httpServer,
}

// runServer runs the server subcommand args[0] with its arguments (PORT,
// and for https-server CERT KEY); false if there is no such subcommand or
// the arguments are not its.
func runServer(args []string) bool {
	switch {
	case len(args) == 2 && servers[args[0]] != nil:
		serve(args[0], args[1], servers[args[0]])
	case len(args) == 4 && args[0] == "https-server":
		serve(args[0], args[1], func(ln net.Listener) error {
			return httpsServer(ln, args[2], args[3])
		})
	case len(args) == 2 && args[0] == "udp-echo-server":
		udpEchoServer(args[1])
	default:
		return false
	}
	return true
}

// fail reports a server's error and exits.
func fail(name string, err error, status int) {
	fmt.Fprintf(os.Stderr, "go-bench %s: %v\n", name, err)
	os.Exit(status)
}

// serve listens on PORT (all addresses; Go sets SO_REUSEADDR and takes the
// backlog from net.core.somaxconn) and runs the server on it.
func serve(name, port string, run func(net.Listener) error) {
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fail(name, err, 2)
	}
	fmt.Printf("listening on %s\n", port) // stdout is unbuffered in Go
	if err := run(ln); err != nil {
		fail(name, err, 1)
	}
}

// echoServer is examples/echo.c in Go: accept, and a goroutine per
// connection that writes back whatever it reads.  Accepted connections have
// TCP_NODELAY already (Go's default; weft's example sets it too).
func echoServer(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			// out of descriptors: wait for connections to close
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		go echo(c)
	}
}

func echo(c net.Conn) {
	defer c.Close()
	// an explicit loop, not io.Copy: io.Copy between TCP connections may
	// splice(2) in the kernel, which the C side does not do
	buf := make([]byte, 16<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// httpServer is examples/http.c in Go: every request gets 200 and the same
// 13-byte body; keep-alive and pipelining are net/http's.
func httpServer(ln net.Listener) error {
	return http.Serve(ln, hello())
}

func hello() http.Handler {
	body := []byte("Hello, World!")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain")
		h.Set("Content-Length", "13")
		w.Write(body)
	})
}

// httpsServer is examples/tls.c's server in Go: httpServer over crypto/tls
// with the PEM certificate and key given, TLS 1.2 or later as the C side
// (crypto/tls's defaults otherwise; net/http's HTTP/2 is left off, as wrk
// and weft speak HTTP/1.1 only).
func httpsServer(ln net.Listener, cert, key string) error {
	srv := &http.Server{
		Handler:      hello(),
		TLSConfig:    &tls.Config{MinVersion: tls.VersionTLS12},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	return srv.ServeTLS(ln, cert, key)
}

// udpEchoServer is examples/udp_echo.c in Go: one goroutine sending every
// datagram back to its sender.
func udpEchoServer(port string) {
	const name = "udp-echo-server"
	pc, err := net.ListenPacket("udp", ":"+port)
	if err != nil {
		fail(name, err, 2)
	}
	fmt.Printf("listening on %s\n", port)
	buf := make([]byte, 65536)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err == nil {
			_, err = pc.WriteTo(buf[:n], from)
		}
		// an ICMP error of an earlier datagram (a client gone) is not
		// the socket's: go on, as the C side does
		if err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			fail(name, err, 1)
		}
	}
}
