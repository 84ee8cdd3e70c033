// SPDX-License-Identifier: MIT

// The Go peer of bench/file-bench.c (bench.py's file rows, issue 48):
//
//	go-bench file-read NAME WORKERS PATH CONC SECONDS
//
// CONC goroutines each read 4 KiB blocks at random block-aligned offsets of
// PATH with os.File.ReadAt (pread(2); a read that blocks holds its OS
// thread, and the runtime hands the P to another), GOMAXPROCS=WORKERS.
// NAME file-direct-4k opens PATH with O_DIRECT (an aligned buffer).  Every
// block starts with its index: each read checks it.  The RESULT line is
// file-bench's, impl=go.
package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const fileBlock = 4096

// alignedBlock returns a fileBlock-byte slice aligned to fileBlock (O_DIRECT).
func alignedBlock() []byte {
	b := make([]byte, 2*fileBlock)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (fileBlock - 1))
	if off != 0 {
		off = fileBlock - off
	}
	return b[off : off+fileBlock]
}

func cpuNs() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func runFile(args []string) bool {
	if len(args) != 6 || args[0] != "file-read" {
		return false
	}
	name := args[1]
	flags := os.O_RDONLY
	if name == "file-direct-4k" {
		flags |= syscall.O_DIRECT
	} else if name != "file-cache-4k" {
		fmt.Fprintf(os.Stderr, "go-bench: unknown file row %q\n", name)
		os.Exit(2)
	}
	workers, _ := strconv.Atoi(args[2])
	conc, _ := strconv.Atoi(args[4])
	seconds, _ := strconv.ParseFloat(args[5], 64)
	f, err := os.OpenFile(args[3], flags, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "go-bench: %v\n", err)
		os.Exit(1)
	}
	st, err := f.Stat()
	if err != nil || workers < 1 || conc < 1 || seconds <= 0 {
		fmt.Fprintf(os.Stderr, "go-bench: bad file-read arguments\n")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(workers)
	blocks := uint64(st.Size()) / fileBlock
	var stop, counting atomic.Bool
	var reads, bad atomic.Uint64
	var wg sync.WaitGroup
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			buf := alignedBlock()
			x := seed*0x9e3779b97f4a7c15 | 1
			var n uint64
			counted := false
			for !stop.Load() {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				i := x % blocks
				if k, err := f.ReadAt(buf, int64(i*fileBlock)); k != fileBlock || err != nil {
					bad.Add(1)
					break
				}
				if binary.LittleEndian.Uint64(buf) != i {
					bad.Add(1)
				}
				if !counted && counting.Load() {
					counted, n = true, 0
				}
				n++
			}
			if counted {
				reads.Add(n)
			}
		}(uint64(g + 1))
	}
	time.Sleep(500 * time.Millisecond) // warm-up, as file-bench
	c0, t0 := cpuNs(), time.Now()
	counting.Store(true)
	time.Sleep(time.Duration(seconds * 1e9))
	stop.Store(true)
	ns := time.Since(t0).Nanoseconds()
	cpu := cpuNs() - c0
	wg.Wait()
	check := "ok"
	if bad.Load() != 0 {
		check = "fail"
	}
	fmt.Printf("RESULT name=%s impl=go workers=%d ns=%d ops=%d value=%d check=%s cpu_ns=%d\n",
		name, workers, ns, reads.Load(), conc, check, cpu)
	if check != "ok" {
		os.Exit(1)
	}
	return true
}
