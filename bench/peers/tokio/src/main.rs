// SPDX-License-Identifier: MIT

//! tokio-bench: the Tokio peer of bench/weft-bench.c.  The same benchmarks,
//! sizes and checks, and the same RESULT line, so that scripts/bench.py
//! compares it with weft pair by pair.  It is also the Tokio peer of weft's
//! example echo servers, TCP and UDP (there is no HTTP server: Tokio has
//! none of its own).
//!
//!     tokio-bench NAME WORKERS     (NAME: see "list")
//!     tokio-bench echo-server PORT
//!     tokio-bench udp-echo-server PORT
//!
//! Symmetry with weft-bench and go-bench:
//!   - the multi-thread runtime with `worker_threads` = WORKERS; the
//!     benchmark runs in a task spawned on it (weft's root is a coroutine),
//!     not in `block_on`'s future on the main thread;
//!   - each invocation runs the benchmark once as an in-process warm-up, then
//!     once more timed (the work only, std::time::Instant);
//!   - every node is a task, no sequential cutoffs; "join" is awaiting the
//!     child's JoinHandle, which carries its result (Tokio's idiom);
//!   - a recursive async fn needs boxing (Rust 1.63), so skynet's and fib's
//!     nodes are Pin<Box<dyn Future>>: one allocation more per node than
//!     the task itself;
//!   - the ping-pongs use tokio::sync::mpsc::channel(1): Tokio has no
//!     rendezvous channel, and capacity 1 is the closest (a send completes
//!     once the value is in the slot, not when it is received; in a
//!     ping-pong each side waits for the answer anyway);
//!   - `sem` and `rwlock` are tokio::sync::Semaphore and RwLock (both
//!     FIFO-fair), each holder yielding once (yield_now) while it holds;
//!   - `mutex` is tokio::sync::Mutex (async, FIFO-fair), `sleep`
//!     tokio::time::sleep (a 1 ms-granular timer wheel that rounds up);
//!   - `local-get` reads a task_local! with LocalKey::with, against a
//!     thread_local! Cell read in the same run (see weft-bench.c);
//!   - `parked` parks its tasks in a tokio::sync::broadcast receive (see
//!     there why), counted in by a Semaphore used as a latch.
//!
//! The echo servers' workers come from TOKIO_WORKER_THREADS (read by Tokio's
//! runtime builder; the runner sets it to 1, as WEFT_WORKERS=1 for weft).

mod file;

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::process::exit;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::runtime::{Builder, Runtime};
use tokio::sync::{broadcast, mpsc, Mutex, RwLock, Semaphore};
use tokio::task::JoinHandle;

// The sizes; bench/weft-bench.c and bench/peers/go/main.go use the same ones.
const YIELD_N: i64 = 2_000_000; // yields per task; two tasks
const SPAWN_TOTAL: i64 = 1_000_000; // tasks spawned and joined
const SPAWN_BATCH: i64 = 1_000; // live at once
const SKYNET_SIZE: i64 = 1_000_000; // leaves, 10 children per node
const SKYNET_SUM: i64 = 499_999_500_000;
const SKYNET_NODES: i64 = 1_111_111; // 1 + 10 + ... + 10^6
const FIB_N: i64 = 27;
const FIB_EXPECTED: i64 = 196_418;
const FIB_SPAWNS: i64 = 317_810; // calls with n >= 2: fib(28) - 1
const SLEEP_N: i64 = 100_000; // tasks, each sleeping once
const SLEEP_FOR: Duration = Duration::from_millis(1);
const PARKED_N: i64 = 100_000; // tasks parked on one channel at once
const PINGPONG_N: i64 = 1_000_000; // round trips of chan-pingpong's one pair
const PINGPONG_PAIRS: i64 = 1_000; // pairs of chan-pingpong-1000 ...
const PINGPONG_ROUNDS: i64 = 1_000; // ... and round trips of each
const MUTEX_TASKS: i64 = 1_000; // tasks of mutex ...
const MUTEX_ITERS: i64 = 1_000; // ... each locking this many times
const SEM_TASKS: i64 = 1_000; // tasks of sem ...
const SEM_PERMITS: i32 = 10; // ... sharing this many permits ...
const SEM_ITERS: i64 = 500; // ... each taking one this many times
const RW_TASKS: i64 = 1_000; // tasks of rwlock ...
const RW_ITERS: i64 = 500; // ... each locking this many times ...
const RW_WRITE_EVERY: i64 = 20; // ... one lock in 20 a write (95% reads)
const SKYNET_CHAN_CAP: usize = 10; // skynet-chan: a parent's channel, a slot a child
const LOCAL_N: i64 = 100_000_000; // local-get: reads of each kind
const LOCAL_VALUE: isize = 3; // the value read, so that the sums check the reads

struct Outcome {
    ops: i64,     // operations the run counts (for ns/op)
    value: i64,   // the computed value that was checked
    ok: bool,     // the check passed
    extra: String, // more key=value pairs for the RESULT line
    // Some: the benchmark timed its measured part itself (local-get); None:
    // the root task times the whole run
    ns: Option<i64>,
}

impl Outcome {
    fn new(ops: i64, value: i64, ok: bool) -> Outcome {
        Outcome { ops, value, ok, extra: String::new(), ns: None }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A child's result; a panicked child (a failed unwrap in it) ends the run.
async fn join<T>(h: JoinHandle<T>) -> T {
    h.await.expect("task failed")
}

/// The process's peak resident set in KiB (as weft-bench and go-bench):
/// rss_kb= of skynet and sleep.  /proc/self/status's VmHWM, not getrusage's
/// ru_maxrss, which Linux carries over execve from bench.py's Python
/// (bench/peak_rss.h); ru_maxrss only without /proc.
fn max_rss_kib() -> i64 {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let hwm = status.lines().find_map(|l| l.strip_prefix("VmHWM:"));
        if let Some(Ok(kb)) = hwm.map(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>()) {
            return kb;
        }
    }
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return -1;
    }
    ru.ru_maxrss as i64
}

// ------------------------------------------------------------------ yield

// Two tasks each call yield_now() YIELD_N times; ops = 2 * YIELD_N.
// "repeats" counts the iterations where the other task did not run in
// between (informational, as for Go: Tokio does not promise an order).
async fn bench_yield() -> Outcome {
    let last = Arc::new(AtomicI32::new(-1));
    let tasks: Vec<_> = (0..2)
        .map(|k| {
            let last = last.clone();
            tokio::spawn(async move {
                let mut rep = 0i64;
                for _ in 0..YIELD_N {
                    if last.load(Ordering::Relaxed) == k {
                        rep += 1;
                    }
                    last.store(k, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                (YIELD_N, rep)
            })
        })
        .collect();
    let (mut total, mut repeats) = (0, 0);
    for t in tasks {
        let (n, rep) = join(t).await;
        total += n;
        repeats += rep;
    }
    let mut o = Outcome::new(2 * YIELD_N, total, total == 2 * YIELD_N);
    o.extra = format!("repeats={}", repeats);
    o
}

// ------------------------------------------------------------------ spawn

// SPAWN_TOTAL tasks in batches of SPAWN_BATCH: spawn the batch, then join it;
// each child returns its index, the parent sums them.
async fn bench_spawn() -> Outcome {
    let mut sum = 0i64;
    let mut batch = Vec::with_capacity(SPAWN_BATCH as usize);
    for base in (0..SPAWN_TOTAL).step_by(SPAWN_BATCH as usize) {
        for j in 0..SPAWN_BATCH {
            let v = base + j;
            batch.push(tokio::spawn(async move { v }));
        }
        for t in batch.drain(..) {
            sum += join(t).await;
        }
    }
    Outcome::new(SPAWN_TOTAL, sum, sum == SPAWN_TOTAL * (SPAWN_TOTAL - 1) / 2)
}

// ----------------------------------------------------------------- skynet

// Every node is a task; a node of size > 1 spawns 10 children and joins
// them in order, summing what they return.  rss_kb: the peak resident set,
// what the most tasks alive at once cost.
fn skynet(num: i64, size: i64) -> BoxFuture<i64> {
    Box::pin(async move {
        if size == 1 {
            return num;
        }
        let sub = size / 10;
        let kids: [JoinHandle<i64>; 10] =
            std::array::from_fn(|i| tokio::spawn(skynet(num + i as i64 * sub, sub)));
        let mut sum = 0;
        for k in kids {
            sum += join(k).await;
        }
        sum
    })
}

async fn bench_skynet() -> Outcome {
    // the root is a task too, as in weft and Go
    let sum = join(tokio::spawn(skynet(0, SKYNET_SIZE))).await;
    let mut o = Outcome::new(SKYNET_NODES, sum, sum == SKYNET_SUM);
    o.extra = format!("rss_kb={}", max_rss_kib());
    o
}

// -------------------------------------------------------------------- fib

// fib(n) spawns fib(n-1) as a task, computes fib(n-2) inline, joins.
fn fib(n: i64) -> BoxFuture<i64> {
    Box::pin(async move {
        if n < 2 {
            return n;
        }
        let a = tokio::spawn(fib(n - 1));
        let b = fib(n - 2).await;
        join(a).await + b
    })
}

async fn bench_fib() -> Outcome {
    let v = fib(FIB_N).await;
    Outcome::new(FIB_SPAWNS, v, v == FIB_EXPECTED)
}

// ------------------------------------------------------------------ sleep

// SLEEP_N tasks each sleep SLEEP_FOR once, all at the same time; value = how
// many woke no earlier than their deadline (all must).  rss_kb: the peak
// resident set of the process.
async fn bench_sleep() -> Outcome {
    let tasks: Vec<_> = (0..SLEEP_N)
        .map(|_| {
            tokio::spawn(async {
                let deadline = Instant::now() + SLEEP_FOR;
                tokio::time::sleep(SLEEP_FOR).await;
                Instant::now() >= deadline
            })
        })
        .collect();
    let mut on_time = 0;
    for t in tasks {
        on_time += join(t).await as i64;
    }
    let mut o = Outcome::new(SLEEP_N, on_time, on_time == SLEEP_N);
    o.extra = format!("rss_kb={}", max_rss_kib());
    o
}

// ---------------------------------------------------------- chan-pingpong

// A pair: the pinger sends i on `ping`, its ponger task answers i + 1 on
// `pong`, `rounds` times; it returns the round trips that came back right.
// The pinger is a task of its own, makes the channels, spawns the ponger and
// joins it at the end.
async fn pingpong_pair(rounds: i64) -> i64 {
    let (ping_tx, mut ping_rx) = mpsc::channel::<i64>(1);
    let (pong_tx, mut pong_rx) = mpsc::channel::<i64>(1);
    let ponger = tokio::spawn(async move {
        for _ in 0..rounds {
            let v = ping_rx.recv().await.expect("ping closed");
            pong_tx.send(v + 1).await.expect("pong closed");
        }
    });
    let mut good = 0;
    for i in 0..rounds {
        ping_tx.send(i).await.expect("ping closed");
        if pong_rx.recv().await == Some(i + 1) {
            good += 1;
        }
    }
    join(ponger).await;
    good
}

async fn pingpong(pairs: i64, rounds: i64) -> Outcome {
    let tasks: Vec<_> = (0..pairs).map(|_| tokio::spawn(pingpong_pair(rounds))).collect();
    let mut good = 0;
    for t in tasks {
        good += join(t).await;
    }
    let total = pairs * rounds;
    Outcome::new(total, good, good == total)
}

// ------------------------------------------------------------------ mutex

// MUTEX_TASKS tasks each lock one tokio::sync::Mutex MUTEX_ITERS times to
// increment the counter it guards, which must come out exact.
async fn bench_mutex() -> Outcome {
    let m = Arc::new(Mutex::new(0i64));
    let tasks: Vec<_> = (0..MUTEX_TASKS)
        .map(|_| {
            let m = m.clone();
            tokio::spawn(async move {
                for _ in 0..MUTEX_ITERS {
                    *m.lock().await += 1;
                }
            })
        })
        .collect();
    for t in tasks {
        join(t).await;
    }
    let count = *m.lock().await;
    let total = MUTEX_TASKS * MUTEX_ITERS;
    Outcome::new(total, count, count == total)
}

// ------------------------------------------------------------ sem, rwlock

// In both, a holder keeps its permit or lock across one yield_now(), as
// weft's across weft_yield(), so that the tasks contend at any worker count.
// An occupancy counts the holders inside at once.
#[derive(Default)]
struct Occupancy {
    now: AtomicI32,
    max: AtomicI32,
}

impl Occupancy {
    /// Counts one holder in; returns how many are inside now.
    fn enter(&self) -> i32 {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::Relaxed);
        n
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Spawns f(0) .. f(n-1), each a task, and joins them; the sum of their
/// results.
async fn spawn_sum<F, Fut>(n: i64, f: F) -> i64
where
    F: Fn(i64) -> Fut,
    Fut: Future<Output = i64> + Send + 'static,
{
    let tasks: Vec<_> = (0..n).map(|k| tokio::spawn(f(k))).collect();
    let mut sum = 0;
    for t in tasks {
        sum += join(t).await;
    }
    sum
}

// SEM_TASKS tasks share a tokio::sync::Semaphore of SEM_PERMITS permits,
// each taking one SEM_ITERS times.
async fn bench_sem() -> Outcome {
    let st = Arc::new((Semaphore::new(SEM_PERMITS as usize), Occupancy::default()));
    let good = spawn_sum(SEM_TASKS, |_| {
        let st = st.clone();
        async move {
            let mut g = 0;
            for _ in 0..SEM_ITERS {
                let permit = st.0.acquire().await.expect("semaphore closed");
                g += (st.1.enter() <= SEM_PERMITS) as i64;
                tokio::task::yield_now().await;
                st.1.leave();
                drop(permit);
            }
            g
        }
    })
    .await;
    let total = SEM_TASKS * SEM_ITERS;
    let mut o = Outcome::new(total, good, good == total);
    o.extra = format!("max_inside={}", st.1.max.load(Ordering::Relaxed));
    o
}

// RW_TASKS tasks each lock one tokio::sync::RwLock<(a, b)> RW_ITERS times,
// task k writing at the iterations i with (i + k) % RW_WRITE_EVERY == 0; the
// same checks as weft-bench.c's.
async fn bench_rwlock() -> Outcome {
    let st = Arc::new((RwLock::new((0i64, 0i64)), Occupancy::default(), Occupancy::default()));
    let good = spawn_sum(RW_TASKS, |k| {
        let st = st.clone();
        async move {
            let (lock, readers, writers) = (&st.0, &st.1, &st.2);
            let mut g = 0;
            for i in 0..RW_ITERS {
                if (i + k) % RW_WRITE_EVERY == 0 {
                    let mut v = lock.write().await;
                    let alone = writers.enter() == 1 && readers.now.load(Ordering::SeqCst) == 0;
                    v.0 += 1;
                    tokio::task::yield_now().await;
                    v.1 += 1;
                    g += (alone && v.0 == v.1) as i64;
                    writers.leave();
                } else {
                    let v = lock.read().await;
                    readers.enter();
                    let a = v.0;
                    tokio::task::yield_now().await;
                    g += (a == v.0 && a == v.1 && writers.now.load(Ordering::SeqCst) == 0) as i64;
                    readers.leave();
                }
            }
            g
        }
    })
    .await;
    let total = RW_TASKS * RW_ITERS;
    let writes = total / RW_WRITE_EVERY;
    let v = *st.0.read().await;
    let mut o = Outcome::new(total, good, good == total && v.0 == writes && v.1 == writes);
    o.extra = format!("max_readers={}", st.1.max.load(Ordering::Relaxed));
    o
}

// ------------------------------------------------------------ skynet-chan

// The classic Go skynet: a leaf sends its number up; an inner node makes one
// channel of SKYNET_CHAN_CAP slots for its 10 children, receives their 10
// sums and sends theirs up.  Children are not joined (their handles are
// dropped: detached), as Go leaves its goroutines to end by themselves.
fn skynet_chan(up: mpsc::Sender<i64>, num: i64, size: i64) -> BoxFuture<()> {
    Box::pin(async move {
        if size == 1 {
            up.send(num).await.expect("parent gone");
            return;
        }
        let (tx, mut rx) = mpsc::channel(SKYNET_CHAN_CAP);
        let sub = size / 10;
        for i in 0..10 {
            tokio::spawn(skynet_chan(tx.clone(), num + i * sub, sub));
        }
        let mut sum = 0;
        for _ in 0..10 {
            sum += rx.recv().await.expect("child gone");
        }
        up.send(sum).await.expect("parent gone");
    })
}

async fn bench_skynet_chan() -> Outcome {
    let (tx, mut rx) = mpsc::channel(SKYNET_CHAN_CAP);
    tokio::spawn(skynet_chan(tx, 0, SKYNET_SIZE));
    let sum = rx.recv().await.expect("root gone");
    Outcome::new(SKYNET_NODES, sum, sum == SKYNET_SUM)
}

// -------------------------------------------------------------- local-get

// LOCAL_N reads of a task_local! in this (the root) task, then LOCAL_N reads
// of a thread_local! Cell, each loop with a compiler barrier (an empty asm!
// may touch any memory) so that the read is redone every iteration.  ns and
// ops are the task-local loop's; thread_ns_per_op the thread-local loop's
// time per read.
tokio::task_local! {
    static KEY: isize;
}

thread_local! {
    static TLS: Cell<isize> = const { Cell::new(0) };
}

fn compiler_barrier() {
    unsafe { std::arch::asm!("", options(nostack, preserves_flags)) }
}

async fn bench_local_get() -> Outcome {
    KEY.scope(LOCAL_VALUE, async {
        let want = LOCAL_N * LOCAL_VALUE as i64;
        let (mut sum, mut tsum) = (0i64, 0i64);
        TLS.with(|t| t.set(KEY.get()));
        let t0 = Instant::now();
        for _ in 0..LOCAL_N {
            sum += KEY.with(|v| *v) as i64;
            compiler_barrier();
        }
        let t1 = Instant::now();
        for _ in 0..LOCAL_N {
            tsum += TLS.with(|t| t.get()) as i64;
            compiler_barrier();
        }
        let t2 = Instant::now();
        let mut o = Outcome::new(LOCAL_N, sum, sum == want && tsum == want);
        o.ns = Some((t1 - t0).as_nanos() as i64);
        o.extra = format!(
            "thread_ns_per_op={:.3}",
            (t2 - t1).as_nanos() as f64 / LOCAL_N as f64
        );
        o
    })
    .await
}

// ----------------------------------------------------------------- parked

// PARKED_N tasks each park in a receive on one channel; once all are in (a
// latch counts them), the resident set is read, the channel closed (every
// receive returns Closed) and all joined.  value = the tasks whose receive
// saw Closed; all must.  rss_per_co_b is (RSS now - RSS when main started) /
// PARKED_N, vm_mib the virtual size and maps the lines of /proc/self/maps
// at the same moment, as in weft-bench.
//
// The channel is a tokio::sync::broadcast of capacity 1, closed by dropping
// its one Sender: Tokio has no channel on which many receivers park waiting
// for one value each (mpsc has a single Receiver, which tasks sharing it
// behind a Mutex would wait for on the Mutex, not on the channel), and a
// oneshot each would be PARKED_N channels, an allocation each, not one.
// broadcast's receivers all wait on its one waiter list, as weft's on its
// channel; that it would hand a value to every receiver, not to one, does not
// show, as nothing is sent.  Each Receiver (subscribed before its task is
// spawned) lives in its task's future.  The latch: a Semaphore of no permits,
// each task adding one, the parent acquiring PARKED_N (Tokio has no wait
// group).
static RSS_AT_START_KIB: AtomicI64 = AtomicI64::new(-1);

/// /proc/self/statm's first two fields in KiB: the virtual size and the
/// resident set (-1 each when unreadable).
fn statm_kib() -> (i64, i64) {
    let page_kib = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64 / 1024;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut fields = statm.split_whitespace().map(|f| f.parse::<i64>());
    match (fields.next(), fields.next()) {
        (Some(Ok(pages)), Some(Ok(resident))) => (pages * page_kib, resident * page_kib),
        _ => (-1, -1),
    }
}

/// The lines of /proc/self/maps (-1 when unreadable).
fn maps_now() -> i64 {
    match std::fs::read("/proc/self/maps") {
        Ok(b) => b.iter().filter(|&&c| c == b'\n').count() as i64,
        Err(_) => -1,
    }
}

async fn bench_parked() -> Outcome {
    let (tx, _) = broadcast::channel::<i32>(1);
    let counted_in = Arc::new(Semaphore::new(0));
    let tasks: Vec<_> = (0..PARKED_N)
        .map(|_| {
            let mut rx = tx.subscribe();
            let counted_in = counted_in.clone();
            tokio::spawn(async move {
                counted_in.add_permits(1);
                matches!(rx.recv().await, Err(broadcast::error::RecvError::Closed))
            })
        })
        .collect();
    counted_in
        .acquire_many(PARKED_N as u32)
        .await
        .expect("latch closed")
        .forget();
    tokio::time::sleep(SLEEP_FOR).await; // the last ones reach their receive
    let (vm, rss) = statm_kib();
    let maps = maps_now();
    drop(tx);
    let mut closed = 0;
    for t in tasks {
        closed += join(t).await as i64;
    }
    let mut o = Outcome::new(PARKED_N, closed, closed == PARKED_N);
    o.extra = format!(
        "rss_per_co_b={} vm_mib={} maps={}",
        (rss - RSS_AT_START_KIB.load(Ordering::Relaxed)) * 1024 / PARKED_N,
        vm / 1024,
        maps
    );
    o
}

// ------------------------------------------------------------ echo server

// examples/echo.c in Tokio: accept, and a task per connection writing back
// whatever it reads (TCP_NODELAY, as weft's and Go's).  The accept loop is a
// task too, so that with one worker everything runs on that worker.
fn echo_server(port: &str) -> ! {
    let port = parse_port("echo-server", port);
    let rt = runtime(None);
    let err = rt.block_on(async move {
        let ln = match listen(port) {
            Ok(ln) => ln,
            Err(e) => return e,
        };
        println!("listening on {}", port); // stdout is line-buffered
        match tokio::spawn(accept_loop(ln)).await {
            Ok(e) => e,
            Err(e) => std::io::Error::new(std::io::ErrorKind::Other, e.to_string()),
        }
    });
    eprintln!("tokio-bench echo-server: {}", err);
    exit(1)
}

fn parse_port(name: &str, port: &str) -> u16 {
    port.parse().unwrap_or_else(|_| {
        eprintln!("tokio-bench {}: bad port {:?}", name, port);
        exit(2)
    })
}

/// All addresses, SO_REUSEADDR and a backlog of 4096 (Go takes
/// net.core.somaxconn; Tokio's TcpListener::bind would take 1024).
fn listen(port: u16) -> std::io::Result<TcpListener> {
    let sock = TcpSocket::new_v4()?;
    sock.set_reuseaddr(true)?;
    sock.bind(([0, 0, 0, 0], port).into())?;
    sock.listen(4096)
}

/// Accepts until an error other than running out of descriptors, which it
/// returns.
async fn accept_loop(ln: TcpListener) -> std::io::Error {
    loop {
        match ln.accept().await {
            Ok((s, _)) => {
                let _ = s.set_nodelay(true);
                tokio::spawn(echo(s));
            }
            // out of descriptors: wait for connections to close
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            Err(e) => return e,
        }
    }
}

async fn echo(mut s: TcpStream) {
    // an explicit loop, as Go's (not tokio::io::copy)
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if s.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

// -------------------------------------------------------- UDP echo server

// examples/udp_echo.c in Tokio: one task sending every datagram back to its
// sender (spawned, as the accept loop, so that it runs on the worker).
fn udp_echo_server(port: &str) -> ! {
    let port = parse_port("udp-echo-server", port);
    let rt = runtime(None);
    let err = rt.block_on(async move {
        let sock = match UdpSocket::bind(("0.0.0.0", port)).await {
            Ok(s) => s,
            Err(e) => return e,
        };
        println!("listening on {}", port);
        match tokio::spawn(udp_echo(sock)).await {
            Ok(e) => e,
            Err(e) => std::io::Error::new(std::io::ErrorKind::Other, e.to_string()),
        }
    });
    eprintln!("tokio-bench udp-echo-server: {}", err);
    exit(1)
}

/// Echoes until an error other than an earlier datagram's ICMP error (a
/// client gone), which it returns.
async fn udp_echo(sock: UdpSocket) -> std::io::Error {
    let mut buf = vec![0u8; 65536];
    loop {
        let r = match sock.recv_from(&mut buf).await {
            Ok((n, from)) => sock.send_to(&buf[..n], from).await.map(|_| ()),
            Err(e) => Err(e),
        };
        match r {
            Err(e) if e.raw_os_error() != Some(libc::ECONNREFUSED) => return e,
            _ => {}
        }
    }
}

// ------------------------------------------------------------------- main

const BENCHES: &[&str] = &[
    "yield",
    "spawn",
    "skynet",
    "fib",
    "sleep",
    "chan-pingpong",
    "chan-pingpong-1000",
    "mutex",
    "sem",
    "rwlock",
    "skynet-chan",
    "local-get",
    "parked",
];

fn bench(name: &str) -> BoxFuture<Outcome> {
    match name {
        "yield" => Box::pin(bench_yield()),
        "spawn" => Box::pin(bench_spawn()),
        "skynet" => Box::pin(bench_skynet()),
        "fib" => Box::pin(bench_fib()),
        "sleep" => Box::pin(bench_sleep()),
        "chan-pingpong" => Box::pin(pingpong(1, PINGPONG_N)),
        "chan-pingpong-1000" => Box::pin(pingpong(PINGPONG_PAIRS, PINGPONG_ROUNDS)),
        "mutex" => Box::pin(bench_mutex()),
        "sem" => Box::pin(bench_sem()),
        "rwlock" => Box::pin(bench_rwlock()),
        "skynet-chan" => Box::pin(bench_skynet_chan()),
        "local-get" => Box::pin(bench_local_get()),
        "parked" => Box::pin(bench_parked()),
        _ => unreachable!("checked in main"),
    }
}

/// The multi-thread runtime with `workers` workers (None: Tokio's default,
/// which reads TOKIO_WORKER_THREADS), timers and I/O enabled.
fn runtime(workers: Option<usize>) -> Runtime {
    let mut b = Builder::new_multi_thread();
    if let Some(w) = workers {
        b.worker_threads(w);
    }
    b.enable_all().build().unwrap_or_else(|e| {
        eprintln!("tokio-bench: runtime: {}", e);
        exit(2)
    })
}

fn usage() -> ! {
    eprintln!("usage: tokio-bench NAME WORKERS   (tokio-bench list)\n       tokio-bench echo-server|udp-echo-server PORT");
    exit(2)
}

fn main() {
    RSS_AT_START_KIB.store(statm_kib().1, Ordering::Relaxed);
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 2 && args[1] == "list" {
        for b in BENCHES {
            println!("{}", b);
        }
        return;
    }
    if args.len() > 1 && args[1] == "file-read" {
        file::file_read(&args);
    }
    if args.len() != 3 {
        usage();
    }
    if args[1] == "echo-server" {
        echo_server(&args[2]);
    }
    if args[1] == "udp-echo-server" {
        udp_echo_server(&args[2]);
    }
    let name = args[1].clone();
    if !BENCHES.contains(&name.as_str()) {
        eprintln!("tokio-bench: unknown benchmark {:?}", name);
        usage();
    }
    let workers = match args[2].parse::<usize>() {
        Ok(w) if (1..=1024).contains(&w) => w,
        _ => {
            eprintln!("tokio-bench: bad worker count {:?} (1..1024)", args[2]);
            exit(2)
        }
    };

    let rt = runtime(Some(workers));
    let n = name.clone();
    let (warm, r, ns) = rt.block_on(async move {
        join(tokio::spawn(async move {
            let warm = bench(&n).await; // warm-up, as weft-bench
            let t0 = Instant::now();
            let r = bench(&n).await;
            let ns = r.ns.unwrap_or_else(|| t0.elapsed().as_nanos() as i64);
            (warm, r, ns)
        }))
        .await
    });

    let ok = warm.ok && r.ok;
    let mut line = format!(
        "RESULT name={} impl=tokio workers={} ns={} ops={} value={} check={}",
        name,
        workers,
        ns,
        r.ops,
        r.value,
        if ok { "ok" } else { "fail" }
    );
    if !r.extra.is_empty() {
        line.push(' ');
        line.push_str(&r.extra);
    }
    println!("{}", line);
    // the runtime's drop waits for detached tasks (skynet-chan's last
    // leaves); that is after the measurement, so skip it
    std::mem::forget(rt);
    exit(if ok { 0 } else { 1 });
}
