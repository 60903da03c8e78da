//! The probe behind `docs/notes/oversubscribed.md`: push+pop pairs on a Bagpipe of queues, a
//! Bagpipe of stacks, and one private queue per thread (through a handle, and through the plain
//! calls), at 2, 4 and 8 threads on whatever cores the machine has, for a fixed time; Mops/s of
//! all threads and the process's minor page faults during each run.
//!
//! ```text
//! cargo run --release -p pitlane-bench --example oversubscribed_probe -- 200
//! ```

use pitlane_queue::WeakBag;
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The process's minor page faults so far.
fn minflt() -> i64 {
    // SAFETY: `rusage` is plain data, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a `rusage` the call fills in.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_minflt
}

/// Push+pop pairs through a handle per thread of one Bagpipe of `B`s, or through its plain
/// calls.
fn run_bagpipe<B>(threads: usize, ms: u64, plain: bool) -> (f64, i64)
where
    B: WeakBag<Item = u64> + Default + Sync,
{
    let bag: Bagpipe<B> = Bagpipe::new();
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let b = Barrier::new(threads + 1);
    let f0 = minflt();
    let t0 = std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut n = 0u64;
                if plain {
                    b.wait();
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..1024u64 {
                            bag.push(i);
                            while bag.pop().is_none() {}
                        }
                        n += 2048;
                    }
                } else {
                    let h = bag.handle();
                    b.wait();
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..1024u64 {
                            h.push(i);
                            while h.pop().is_none() {}
                        }
                        n += 2048;
                    }
                }
                ops.fetch_add(n, Ordering::Relaxed);
            });
        }
        b.wait();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(ms));
        stop.store(true, Ordering::Relaxed);
        t0
    });
    let el = t0.elapsed().as_secs_f64();
    (ops.load(Ordering::Relaxed) as f64 / el / 1e6, minflt() - f0)
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(200);
    for round in 0..3 {
        for t in [2, 4, 8] {
            let (q, fq) = run_bagpipe::<Queue<u64>>(t, ms, false);
            let (qp, fqp) = run_bagpipe::<Queue<u64>>(t, ms, true);
            let (s, fs) = run_bagpipe::<Stack<u64>>(t, ms, false);
            let (h, fh) = run_private(t, ms, false);
            let (p, fp) = run_private(t, ms, true);
            println!(
                "r{round} t={t}: bagpipe<queue> {q:.0} Mops faults {fq} | plain bagpipe<queue> {qp:.0} faults {fqp} | bagpipe<stack> {s:.0} Mops faults {fs} | private queue handle {h:.0} faults {fh} | private queue plain {p:.0} faults {fp}"
            );
        }
    }
}

/// Each thread its own queue (nothing shared but the process-wide epoch and eras).
fn run_private(threads: usize, ms: u64, plain: bool) -> (f64, i64) {
    let queues: Vec<Queue<u64>> = (0..threads).map(|_| Queue::new()).collect();
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let b = Barrier::new(threads + 1);
    let f0 = minflt();
    let t0 = std::thread::scope(|s| {
        for q in &queues {
            let (stop, ops, b) = (&stop, &ops, &b);
            s.spawn(move || {
                let mut n = 0u64;
                if plain {
                    b.wait();
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..1024u64 {
                            q.push(i);
                            q.pop().unwrap();
                        }
                        n += 2048;
                    }
                } else {
                    let h = q.handle();
                    b.wait();
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..1024u64 {
                            h.push(i);
                            h.pop().unwrap();
                        }
                        n += 2048;
                    }
                }
                ops.fetch_add(n, Ordering::Relaxed);
            });
        }
        b.wait();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(ms));
        stop.store(true, Ordering::Relaxed);
        t0
    });
    let el = t0.elapsed().as_secs_f64();
    (ops.load(Ordering::Relaxed) as f64 / el / 1e6, minflt() - f0)
}
