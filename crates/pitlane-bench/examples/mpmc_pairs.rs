//! Probe: two threads of `pairs` (each pushes one item, then pops one) on the MPMC queue
//! through a handle, through plain calls, and on `crossbeam_queue::SegQueue`, alternating in
//! one process: Mops/s and the balance (the slower thread's pairs over the faster one's), after the
//! cache-line round trip between the two threads measured before each round. With `EXTRA`,
//! each thread also does what the `bag` suite's loop does beside the calls (two tallies with a
//! SplitMix sum, a per-producer order check), which decides much of the result at two threads.
//! With `PREFILL=n`, each window starts with `n` items in the queue, as the suite's
//! `pairs_prefilled` does with 1024.
//!
//! ```sh
//! cargo build --release -p pitlane-bench --example mpmc_pairs
//! target/release/examples/mpmc_pairs 200 5        # ms per window, rounds
//! ONLY=handle,segqueue EXTRA=1 target/release/examples/mpmc_pairs 100 12
//! PREFILL=1024 ONLY=handle,plain target/release/examples/mpmc_pairs 150 3   # pairs_prefilled
//! ```
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;
use pitlane_queue::mpmc::Queue;

trait Pair: Sync {
    fn run(&self, id: u64, stop: &AtomicBool) -> u64;
    /// Pushes `item` before the window (the suite's `pairs_prefilled`).
    fn fill(&self, item: u64);
}

struct Plain(Queue<u64>);
struct ByHandle(Queue<u64>);
struct Seg(SegQueue<u64>);

/// Pops until an item comes, as the `bag` suite does.
#[inline(always)]
fn pop_until(mut pop: impl FnMut() -> Option<u64>) -> u64 {
    loop {
        if let Some(v) = pop() {
            return v;
        }
    }
}

/// What the `bag` suite does per pair beside the calls: two tallies (count, sum and a
/// SplitMix sum) and a per-producer order check. `EXTRA=1` turns it on.
#[derive(Default)]
struct Books {
    count: u64,
    sum: u64,
    mixed: u64,
    last: [u64; 4],
    bad: u64,
}

#[inline(always)]
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Books {
    #[inline(always)]
    fn see(&mut self, pushed: u64, got: u64) {
        self.count += 2;
        self.sum = self.sum.wrapping_add(pushed).wrapping_add(got);
        self.mixed = self.mixed.wrapping_add(mix(pushed)).wrapping_add(mix(got));
        let producer = (got >> 40) as usize & 3;
        let seq = got & ((1 << 40) - 1);
        if seq < self.last[producer] {
            self.bad += 1;
        }
        self.last[producer] = seq;
    }
}

/// The producer number of the items `PREFILL` puts in before a window (the threads are 0
/// and 1).
const PREFILLED: u64 = 3;

fn extra() -> bool {
    std::env::var_os("EXTRA").is_some()
}

/// One thread's pairs until `stop`, as producer `id`: the same loop for every subject, compiled
/// into each subject's `run`. Returns the pairs done.
#[inline(always)]
fn pairs(
    id: u64,
    stop: &AtomicBool,
    push: impl Fn(u64),
    mut pop: impl FnMut() -> Option<u64>,
) -> u64 {
    let mut n = 0;
    let books_on = extra();
    let mut books = Books::default();
    while !stop.load(Ordering::Relaxed) {
        for i in 0..1024 {
            let item = id << 40 | (n + i);
            push(black_box(item));
            let got = pop_until(&mut pop);
            if books_on {
                books.see(item, got);
            }
        }
        n += 1024;
    }
    black_box(&books);
    n
}

impl Pair for Plain {
    #[inline(never)]
    fn run(&self, id: u64, stop: &AtomicBool) -> u64 {
        pairs(id, stop, |item| self.0.push(item), || self.0.pop())
    }
    fn fill(&self, item: u64) {
        self.0.push(item)
    }
}

impl Pair for ByHandle {
    #[inline(never)]
    fn run(&self, id: u64, stop: &AtomicBool) -> u64 {
        let h = self.0.handle();
        pairs(id, stop, |item| h.push(item), || h.pop())
    }
    fn fill(&self, item: u64) {
        self.0.push(item)
    }
}

impl Pair for Seg {
    #[inline(never)]
    fn run(&self, id: u64, stop: &AtomicBool) -> u64 {
        pairs(id, stop, |item| self.0.push(item), || self.0.pop())
    }
    fn fill(&self, item: u64) {
        self.0.push(item)
    }
}

fn window(subject: &dyn Pair, ms: u64) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(3);
    let (counts, secs) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|id| {
                let (stop, start) = (&stop, &start);
                s.spawn(move || {
                    start.wait();
                    subject.run(id, stop)
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(ms));
        stop.store(true, Ordering::Relaxed);
        let counts: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        (counts, t0.elapsed().as_secs_f64())
    });
    let total: u64 = counts.iter().sum();
    let (least, most) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    // Two operations a pair; the balance is the suite's: fewest over most.
    (
        2.0 * total as f64 / secs / 1e6,
        *least as f64 / (*most).max(1) as f64,
    )
}

/// The cache-line round trip between two threads, in ns: a ping-pong on one atomic word.
fn round_trip() -> f64 {
    use std::sync::atomic::AtomicU64;
    const TRIPS: u64 = 100_000;
    let word = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..TRIPS {
                while word.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                word.store(2 * i + 2, Ordering::Release);
            }
        });
        for i in 0..TRIPS {
            word.store(2 * i + 1, Ordering::Release);
            while word.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
            }
        }
    });
    t0.elapsed().as_nanos() as f64 / TRIPS as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ms: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let only = std::env::var("ONLY").unwrap_or_default();
    let prefill: u64 = std::env::var("PREFILL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);

    type Make = Box<dyn Fn() -> Box<dyn Pair>>;
    let subjects: Vec<(&str, Make)> = vec![
        ("handle", Box::new(|| Box::new(ByHandle(Queue::new())))),
        ("plain", Box::new(|| Box::new(Plain(Queue::new())))),
        ("segqueue", Box::new(|| Box::new(Seg(SegQueue::new())))),
    ];
    for round in 0..rounds {
        println!("round {round} trip      {:7.1} ns", round_trip());
        for (name, make) in &subjects {
            if !only.is_empty() && !only.contains(name) {
                continue;
            }
            let subject = make();
            for i in 0..prefill {
                subject.fill(PREFILLED << 40 | i);
            }
            let (mops, balance) = window(&*subject, ms);
            println!("round {round} {name:9} {mops:7.1} Mops/s  balance {balance:.2}");
        }
    }
}
