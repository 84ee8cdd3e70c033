// SPDX-License-Identifier: MIT
//! The Tokio peer of bench/file-bench.c (bench.py's file rows, issue 48):
//!
//!     tokio-bench file-read NAME WORKERS PATH CONC SECONDS
//!
//! CONC tasks each read 4 KiB blocks at random block-aligned offsets of
//! PATH: each read is `FileExt::read_at` (pread(2)) inside
//! `tokio::task::spawn_blocking`, which is what tokio::fs does for every
//! call (its File adds a seek and an internal buffer copy on top: read_at
//! through spawn_blocking is the cheaper form of the same hop).  NAME
//! file-direct-4k opens PATH with O_DIRECT (an aligned buffer).  Every block
//! starts with its index: each read checks it.  The RESULT line is
//! file-bench's, impl=tokio.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::exit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BLOCK: usize = 4096;

struct Scene {
    file: File,
    blocks: u64,
    stop: AtomicBool,
    counting: AtomicBool,
    reads: AtomicU64,
    bad: AtomicU64,
}

fn cpu_ns() -> i64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) as i64 * 1_000_000_000
        + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) as i64 * 1000
}

/// A BLOCK-aligned BLOCK-byte window of an owned buffer (O_DIRECT).
struct Aligned {
    buf: Vec<u8>,
    off: usize,
}

impl Aligned {
    fn new() -> Aligned {
        let buf = vec![0u8; 2 * BLOCK];
        let off = (BLOCK - (buf.as_ptr() as usize & (BLOCK - 1))) & (BLOCK - 1);
        Aligned { buf, off }
    }
    fn block(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + BLOCK]
    }
}

async fn reader(s: Arc<Scene>, seed: u64) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut a = Aligned::new();
    let mut n = 0u64;
    let mut counted = false;
    while !s.stop.load(Ordering::Relaxed) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = x % s.blocks;
        let s2 = s.clone();
        let (back, ok) = tokio::task::spawn_blocking(move || {
            let ok = s2.file.read_at(a.block(), i * BLOCK as u64).map_or(false, |k| k == BLOCK);
            (a, ok)
        })
        .await
        .unwrap();
        a = back;
        let got = u64::from_le_bytes(a.block()[..8].try_into().unwrap());
        if !ok || got != i {
            s.bad.fetch_add(1, Ordering::Relaxed);
            break;
        }
        if !counted && s.counting.load(Ordering::Relaxed) {
            counted = true;
            n = 0;
        }
        n += 1;
    }
    if counted {
        s.reads.fetch_add(n, Ordering::Relaxed);
    }
}

pub fn file_read(args: &[String]) -> ! {
    if args.len() != 7 {
        eprintln!("usage: tokio-bench file-read NAME WORKERS PATH CONC SECONDS");
        exit(2)
    }
    let name = args[2].as_str();
    let mut o = OpenOptions::new();
    o.read(true);
    match name {
        "file-direct-4k" => {
            o.custom_flags(libc::O_DIRECT);
        }
        "file-cache-4k" => {}
        _ => {
            eprintln!("tokio-bench: unknown file row {:?}", name);
            exit(2)
        }
    }
    let workers: usize = args[3].parse().unwrap_or(0);
    let conc: u64 = args[5].parse().unwrap_or(0);
    let seconds: f64 = args[6].parse().unwrap_or(0.0);
    let file = o.open(&args[4]).unwrap_or_else(|e| {
        eprintln!("tokio-bench: {}: {}", args[4], e);
        exit(1)
    });
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if workers < 1 || conc < 1 || seconds <= 0.0 || size < BLOCK as u64 {
        eprintln!("tokio-bench: bad file-read arguments");
        exit(2)
    }
    let s = Arc::new(Scene {
        file,
        blocks: size / BLOCK as u64,
        stop: AtomicBool::new(false),
        counting: AtomicBool::new(false),
        reads: AtomicU64::new(0),
        bad: AtomicU64::new(0),
    });
    let rt = crate::runtime(Some(workers));
    let s2 = s.clone();
    let (ns, cpu) = rt.block_on(async move {
        let tasks: Vec<_> = (0..conc).map(|g| tokio::spawn(reader(s2.clone(), g + 1))).collect();
        tokio::time::sleep(Duration::from_millis(500)).await; // warm-up, as file-bench
        let (c0, t0) = (cpu_ns(), Instant::now());
        s2.counting.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        s2.stop.store(true, Ordering::Relaxed);
        let ns = t0.elapsed().as_nanos() as i64;
        let cpu = cpu_ns() - c0;
        for t in tasks {
            t.await.unwrap();
        }
        (ns, cpu)
    });
    let bad = s.bad.load(Ordering::Relaxed);
    println!(
        "RESULT name={} impl=tokio workers={} ns={} ops={} value={} check={} cpu_ns={}",
        name,
        workers,
        ns,
        s.reads.load(Ordering::Relaxed),
        conc,
        if bad == 0 { "ok" } else { "fail" },
        cpu
    );
    exit(if bad == 0 { 0 } else { 1 })
}
