// SPDX-License-Identifier: MIT

// Command go-bench is the Go peer of weft-bench: the same benchmarks, the
// same sizes, the same verification and the same RESULT line, so that
// scripts/bench.py can compare the two pair by pair.  It is also the Go peer
// of weft's example servers (servers.go).
//
// Usage: go-bench NAME WORKERS     (NAME: see "list"; local-get has no Go peer)
//
//	go-bench echo-server PORT
//	go-bench http-server PORT
//	go-bench https-server PORT CERT KEY
//	go-bench udp-echo-server PORT
//	go-bench file-read NAME WORKERS PATH CONC SECONDS   (file.go)
//
// Symmetry with bench/weft-bench.c:
//   - GOMAXPROCS is set to WORKERS (the weft side sets weft_config.workers);
//   - each invocation runs the benchmark once as an in-process warm-up, then
//     once more timed; only the work is timed (monotonic clock), not process
//     or runtime start-up;
//   - "join" is sync.WaitGroup plus a result slot written by the child before
//     wg.Done() ("WaitGroup with results").  It is the idiomatic Go way to
//     wait for children and collect their values; weft_join is per child,
//     the WaitGroup waits for a whole batch, which is what Go code does.
//   - no sequential cutoffs anywhere: every node is a goroutine, as every node
//     is a coroutine in weft.
package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	yieldN      = 2_000_000 // yields per goroutine; two goroutines
	spawnTotal  = 1_000_000 // goroutines spawned and joined
	spawnBatch  = 1_000     // live at once
	skynetSize  = 1_000_000 // leaves, 10 children per node
	skynetSum   = 499_999_500_000
	fibN        = 27
	fibExpected = 196_418
	sleepN      = 100_000 // goroutines, each sleeping once
	sleepFor    = time.Millisecond
	parkedN     = 100_000   // goroutines parked on one channel at once
	skynetNodes = 1_111_111 // 1 + 10 + ... + 10^6 goroutines

	pingpongN      = 1_000_000 // round trips of the one pair of chan-pingpong
	pingpongPairs  = 1_000     // pairs of chan-pingpong-1000 ...
	pingpongRounds = 1_000     // ... and round trips of each
	mutexGs        = 1_000     // goroutines of mutex ...
	mutexIters     = 1_000     // ... each locking this many times
	semGs          = 1_000     // goroutines of sem ...
	semPermits     = 10        // ... sharing this many permits ...
	semIters       = 500       // ... each taking one this many times
	rwGs           = 1_000     // goroutines of rwlock ...
	rwIters        = 500       // ... each locking this many times ...
	rwWriteEvery   = 20        // ... one lock in 20 a write (95% reads)
	skynetChanCap  = 10        // skynet-chan: a parent's channel, one slot a child
)

type outcome struct {
	ops   int64  // operations the run counts (for ns/op)
	value int64  // the computed value that was checked
	ok    bool   // the check passed
	extra string // more key=value pairs for the RESULT line
}

// ---------------------------------------------------------------- yield

// Two goroutines each call runtime.Gosched() yieldN times.  ops = 2*yieldN
// yields.  "repeats" counts the iterations where the other goroutine did not
// run in between (informational: Go's scheduler checks the global run queue
// every 61 ticks, so some repeats are expected).
func benchYield() outcome {
	var last int32 = -1
	var repeats int64
	var counts [2]int64
	var wg sync.WaitGroup
	wg.Add(2)
	for k := 0; k < 2; k++ {
		go func(k int32) {
			var rep int64
			for i := 0; i < yieldN; i++ {
				if atomic.LoadInt32(&last) == k {
					rep++
				}
				atomic.StoreInt32(&last, k)
				runtime.Gosched()
			}
			counts[k] = yieldN
			atomic.AddInt64(&repeats, rep)
			wg.Done()
		}(int32(k))
	}
	wg.Wait()
	total := counts[0] + counts[1]
	return outcome{
		ops:   2 * yieldN,
		value: total,
		ok:    total == 2*yieldN,
		extra: fmt.Sprintf("repeats=%d", atomic.LoadInt64(&repeats)),
	}
}

// ---------------------------------------------------------------- spawn

// spawnTotal goroutines, in batches of spawnBatch: spawn the batch, then wait
// for it.  Each child writes its index into its slot; the parent sums them.
func benchSpawn() outcome {
	slots := make([]int64, spawnBatch)
	var sum int64
	var wg sync.WaitGroup
	for base := 0; base < spawnTotal; base += spawnBatch {
		wg.Add(spawnBatch)
		for j := 0; j < spawnBatch; j++ {
			go func(j int, v int64) {
				slots[j] = v
				wg.Done()
			}(j, int64(base+j))
		}
		wg.Wait()
		for j := 0; j < spawnBatch; j++ {
			sum += slots[j]
		}
	}
	want := int64(spawnTotal) * (spawnTotal - 1) / 2
	return outcome{ops: spawnTotal, value: sum, ok: sum == want}
}

// ---------------------------------------------------------------- skynet

// Every node is a goroutine; a node of size > 1 starts 10 children and waits
// for them with a WaitGroup, each child leaving its sum in the parent's slot.
// rss_kb is the process's peak resident set: what the most goroutines alive
// at once cost.
func skynet(num, size int64) int64 {
	if size == 1 {
		return num
	}
	var res [10]int64
	var wg sync.WaitGroup
	sub := size / 10
	wg.Add(10)
	for i := int64(0); i < 10; i++ {
		go func(i int64) {
			res[i] = skynet(num+i*sub, sub)
			wg.Done()
		}(i)
	}
	wg.Wait()
	var sum int64
	for _, r := range res {
		sum += r
	}
	return sum
}

func benchSkynet() outcome {
	var wg sync.WaitGroup
	var sum int64
	wg.Add(1)
	go func() { // the root is a goroutine too, as in weft
		sum = skynet(0, skynetSize)
		wg.Done()
	}()
	wg.Wait()
	return outcome{ops: skynetNodes, value: sum, ok: sum == skynetSum,
		extra: fmt.Sprintf("rss_kb=%d", maxRSSKiB())}
}

// ---------------------------------------------------------------- fib

// fib(n) spawns fib(n-1) as a goroutine, computes fib(n-2) inline, waits.
// No sequential cutoff.  ops = the number of goroutines spawned.
func fib(n int) int64 {
	if n < 2 {
		return int64(n)
	}
	var a int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		a = fib(n - 1)
		wg.Done()
	}()
	b := fib(n - 2)
	wg.Wait()
	return a + b
}

func benchFib() outcome {
	v := fib(fibN)
	// calls with n >= 2 spawn once each: fib(n+1) - 1 of them
	return outcome{ops: 317_810, value: v, ok: v == fibExpected}
}

// ---------------------------------------------------------------- sleep

// sleepN goroutines each sleep sleepFor once; the parent waits for all.
// value = how many woke no earlier than their deadline (all must).  rss_kb is
// the process's peak resident set: what sleepN parked goroutines cost.
func benchSleep() outcome {
	var onTime int64
	var wg sync.WaitGroup
	wg.Add(sleepN)
	for i := 0; i < sleepN; i++ {
		go func() {
			deadline := time.Now().Add(sleepFor)
			time.Sleep(sleepFor)
			if !time.Now().Before(deadline) {
				atomic.AddInt64(&onTime, 1)
			}
			wg.Done()
		}()
	}
	wg.Wait()
	v := atomic.LoadInt64(&onTime)
	return outcome{ops: sleepN, value: v, ok: v == sleepN,
		extra: fmt.Sprintf("rss_kb=%d", maxRSSKiB())}
}

// ---------------------------------------------------------------- parked

// parkedN goroutines each park in a receive on one unbuffered channel; once
// all are in (a WaitGroup counts them), the resident set is read, the
// channel closed and all waited for.  rss_per_co_b is (RSS now - RSS when
// main started) / parkedN, as in weft-bench; at the same moment vm_mib, the
// virtual size, and maps, the lines of /proc/self/maps.
var _, rssAtStartKiB = statmKiB()

// statmKiB is /proc/self/statm's first two fields in KiB: the virtual size
// and the resident set (-1 each when unreadable).
func statmKiB() (vm, rss int64) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1, -1
	}
	var pages, resident int64
	if _, err := fmt.Sscan(string(b), &pages, &resident); err != nil {
		return -1, -1
	}
	pageKiB := int64(os.Getpagesize()) / 1024
	return pages * pageKiB, resident * pageKiB
}

// mapsNow is the number of lines of /proc/self/maps (-1 when unreadable).
func mapsNow() int64 {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return -1
	}
	return int64(bytes.Count(b, []byte{'\n'}))
}

func benchParked() outcome {
	ch := make(chan int)
	var in, done sync.WaitGroup
	var closed int64
	in.Add(parkedN)
	done.Add(parkedN)
	for i := 0; i < parkedN; i++ {
		go func() {
			in.Done()
			if _, ok := <-ch; !ok {
				atomic.AddInt64(&closed, 1)
			}
			done.Done()
		}()
	}
	in.Wait()
	time.Sleep(sleepFor) // the last ones reach their receive
	vm, rss := statmKiB()
	maps := mapsNow()
	close(ch)
	done.Wait()
	v := atomic.LoadInt64(&closed)
	return outcome{ops: parkedN, value: v, ok: v == parkedN,
		extra: fmt.Sprintf("rss_per_co_b=%d vm_mib=%d maps=%d",
			(rss-rssAtStartKiB)*1024/parkedN, vm/1024, maps)}
}

// maxRSSKiB is the process's peak resident set in KiB: /proc/self/status's
// VmHWM, as in weft-bench (bench/peak_rss.h: getrusage's ru_maxrss is
// carried over execve from bench.py's Python); ru_maxrss without /proc.
func maxRSSKiB() int64 {
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
				return kb
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return int64(ru.Maxrss)
}

// spawnWait runs f(0) .. f(n-1), each in a goroutine of its own, and waits
// for them all.
func spawnWait(n int, f func(i int)) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			f(i)
			wg.Done()
		}(i)
	}
	wg.Wait()
}

// ---------------------------------------------------------------- chan-pingpong

// pingpongPair sends i on ping to a ponger goroutine it starts, which sends
// i+1 back on pong, both unbuffered, rounds times; it returns the round trips
// that came back as i+1.  The ponger ends after its last send, which this
// goroutine receives, so there is nothing to wait for.
func pingpongPair(rounds int) int64 {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for i := 0; i < rounds; i++ {
			pong <- <-ping + 1
		}
	}()
	var good int64
	for i := 0; i < rounds; i++ {
		ping <- i
		if <-pong == i+1 {
			good++
		}
	}
	return good
}

// pingpong runs pairs pairs at once, each pinger a goroutine of its own (as
// in weft); ops = all round trips, all must be good.
func pingpong(pairs, rounds int) outcome {
	good := make([]int64, pairs)
	spawnWait(pairs, func(i int) { good[i] = pingpongPair(rounds) })
	var sum int64
	for _, g := range good {
		sum += g
	}
	total := int64(pairs) * int64(rounds)
	return outcome{ops: total, value: sum, ok: sum == total}
}

func benchChanPingpong() outcome     { return pingpong(1, pingpongN) }
func benchChanPingpong1000() outcome { return pingpong(pingpongPairs, pingpongRounds) }

// ---------------------------------------------------------------- mutex

// mutexGs goroutines each lock one sync.Mutex mutexIters times to increment
// a plain counter, which must come out exact.  ops = lock+unlock pairs.
func benchMutex() outcome {
	var mu sync.Mutex
	var count int64
	spawnWait(mutexGs, func(int) {
		for i := 0; i < mutexIters; i++ {
			mu.Lock()
			count++
			mu.Unlock()
		}
	})
	total := int64(mutexGs) * mutexIters
	return outcome{ops: total, value: count, ok: count == total}
}

// ---------------------------------------------------------------- sem, rwlock

// In both, a holder keeps its permit or lock across one runtime.Gosched(),
// as weft's across weft_yield(), so that the goroutines contend at any
// GOMAXPROCS.  An occupancy counts the holders inside at once.
type occupancy struct{ now, max int32 }

// enter counts one holder in and returns how many are inside now.
func (o *occupancy) enter() int32 {
	n := atomic.AddInt32(&o.now, 1)
	for m := atomic.LoadInt32(&o.max); n > m; m = atomic.LoadInt32(&o.max) {
		if atomic.CompareAndSwapInt32(&o.max, m, n) {
			break
		}
	}
	return n
}

func (o *occupancy) leave() { atomic.AddInt32(&o.now, -1) }

// benchSem: semGs goroutines share a semaphore of semPermits permits, a
// buffered channel (stdlib only: golang.org/x/sync/semaphore is not at
// hand offline), each taking one semIters times.
func benchSem() outcome {
	sem := make(chan struct{}, semPermits)
	var in occupancy
	var good int64
	spawnWait(semGs, func(int) {
		var g int64
		for i := 0; i < semIters; i++ {
			sem <- struct{}{}
			if in.enter() <= semPermits {
				g++
			}
			runtime.Gosched()
			in.leave()
			<-sem
		}
		atomic.AddInt64(&good, g)
	})
	total := int64(semGs) * semIters
	return outcome{ops: total, value: good, ok: good == total,
		extra: fmt.Sprintf("max_inside=%d", in.max)}
}

// benchRwlock: rwGs goroutines each lock one sync.RWMutex rwIters times,
// goroutine k writing at the iterations i with (i+k) % rwWriteEvery == 0;
// the same checks as weft-bench.c's.
func benchRwlock() outcome {
	var mu sync.RWMutex
	var readers, writers occupancy
	var a, b, good int64
	spawnWait(rwGs, func(k int) {
		var g int64
		for i := 0; i < rwIters; i++ {
			if (i+k)%rwWriteEvery == 0 {
				mu.Lock()
				alone := writers.enter() == 1 && atomic.LoadInt32(&readers.now) == 0
				a++
				runtime.Gosched()
				b++
				if alone && a == b {
					g++
				}
				writers.leave()
				mu.Unlock()
			} else {
				mu.RLock()
				readers.enter()
				x := a
				runtime.Gosched()
				if x == a && x == b && atomic.LoadInt32(&writers.now) == 0 {
					g++
				}
				readers.leave()
				mu.RUnlock()
			}
		}
		atomic.AddInt64(&good, g)
	})
	total := int64(rwGs) * rwIters
	writes := total / rwWriteEvery
	return outcome{ops: total, value: good,
		ok:    good == total && a == writes && b == writes,
		extra: fmt.Sprintf("max_readers=%d", readers.max)}
}

// ---------------------------------------------------------------- skynet-chan

// skynetChan is the classic Go skynet: every node a goroutine, a leaf sends
// its number up, an inner node makes one channel for its 10 children,
// receives their 10 sums and sends theirs up.  The channel has skynetChanCap
// slots (the classic has none) so that no child waits for its parent, as in
// weft.
func skynetChan(up chan<- int64, num, size int64) {
	if size == 1 {
		up <- num
		return
	}
	in := make(chan int64, skynetChanCap)
	sub := size / 10
	for i := int64(0); i < 10; i++ {
		go skynetChan(in, num+i*sub, sub)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-in
	}
	up <- sum
}

func benchSkynetChan() outcome {
	up := make(chan int64, skynetChanCap)
	go skynetChan(up, 0, skynetSize)
	sum := <-up
	return outcome{ops: skynetNodes, value: sum, ok: sum == skynetSum}
}

// ---------------------------------------------------------------- main

var benches = []struct {
	name string
	fn   func() outcome
}{
	{"yield", benchYield},
	{"spawn", benchSpawn},
	{"skynet", benchSkynet},
	{"fib", benchFib},
	{"sleep", benchSleep},
	{"parked", benchParked},
	{"chan-pingpong", benchChanPingpong},
	{"chan-pingpong-1000", benchChanPingpong1000},
	{"mutex", benchMutex},
	{"sem", benchSem},
	{"rwlock", benchRwlock},
	{"skynet-chan", benchSkynetChan},
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go-bench NAME WORKERS   (go-bench list)\n"+
		"       go-bench echo-server|http-server|udp-echo-server PORT\n"+
		"       go-bench https-server PORT CERT KEY")
	os.Exit(2)
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "list" {
		for _, b := range benches {
			fmt.Println(b.name)
		}
		return
	}
	if runServer(os.Args[1:]) || runFile(os.Args[1:]) {
		return
	}
	if len(os.Args) != 3 {
		usage()
	}
	workers, err := strconv.Atoi(os.Args[2])
	if err != nil || workers < 1 || workers > 1024 {
		fmt.Fprintf(os.Stderr, "go-bench: bad worker count %q (1..1024)\n", os.Args[2])
		os.Exit(2)
	}
	var fn func() outcome
	for _, b := range benches {
		if b.name == os.Args[1] {
			fn = b.fn
		}
	}
	if fn == nil {
		fmt.Fprintf(os.Stderr, "go-bench: unknown benchmark %q\n", os.Args[1])
		usage()
	}
	runtime.GOMAXPROCS(workers)

	warm := fn() // warm-up, same as weft-bench
	t0 := time.Now()
	r := fn()
	ns := time.Since(t0).Nanoseconds()

	check := "ok"
	if !warm.ok || !r.ok {
		check = "fail"
	}
	line := fmt.Sprintf("RESULT name=%s impl=go workers=%d ns=%d ops=%d value=%d check=%s",
		os.Args[1], runtime.GOMAXPROCS(0), ns, r.ops, r.value, check)
	if r.extra != "" {
		line += " " + r.extra
	}
	fmt.Println(line)
	if check != "ok" {
		os.Exit(1)
	}
}
