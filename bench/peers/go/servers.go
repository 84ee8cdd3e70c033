// SPDX-License-Identifier: MIT

// The Go peers of weft's example servers (examples/echo.c, examples/http.c),
// run by scripts/bench.py under bench/loadgen and wrk:
//
//	go-bench echo-server PORT   a goroutine per connection echoing its bytes
//	go-bench http-server PORT   net/http answering "Hello, World!"
//
// GOMAXPROCS comes from the environment (the runner sets it to 1, as it sets
// WEFT_WORKERS=1 for weft).  Each prints "listening on PORT" once it accepts,
// and runs until killed.
package main

import (
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

// serve listens on PORT (all addresses; Go sets SO_REUSEADDR and takes the
// backlog from net.core.somaxconn) and runs the server on it.
func serve(name, port string, run func(net.Listener) error) {
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintf(os.Stderr, "go-bench %s: %v\n", name, err)
		os.Exit(2)
	}
	fmt.Printf("listening on %s\n", port) // stdout is unbuffered in Go
	if err := run(ln); err != nil {
		fmt.Fprintf(os.Stderr, "go-bench %s: %v\n", name, err)
		os.Exit(1)
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
	body := []byte("Hello, World!")
	return http.Serve(ln, http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Type", "text/plain")
			h.Set("Content-Length", "13")
			w.Write(body)
		}))
}
