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

/// Runs `threads` threads of `worker` (given the thread's number and the stop flag, it returns
/// the operations it did) for `ms` milliseconds: Mops/s of all threads, and the minor page
/// faults the process took meanwhile.
fn measure(
    threads: usize,
    ms: u64,
    worker: impl Fn(usize, &AtomicBool) -> u64 + Sync,
) -> (f64, i64) {
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let start = Barrier::new(threads + 1);
    let faults = minflt();
    let started = std::thread::scope(|s| {
        for t in 0..threads {
            let (worker, stop, ops, start) = (&worker, &stop, &ops, &start);
            s.spawn(move || {
                start.wait();
                ops.fetch_add(worker(t, stop), Ordering::Relaxed)
            });
        }
        start.wait();
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(ms));
        stop.store(true, Ordering::Relaxed);
        started
    });
    let seconds = started.elapsed().as_secs_f64();
    (
        ops.load(Ordering::Relaxed) as f64 / seconds / 1e6,
        minflt() - faults,
    )
}

/// Push+pop pairs until `stop`, each pop waiting for an item: the operations done.
fn pairs(stop: &AtomicBool, push: impl Fn(u64), pop: impl Fn() -> Option<u64>) -> u64 {
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        for i in 0..1024 {
            push(i);
            while pop().is_none() {}
        }
        done += 2048;
    }
    done
}

/// Pairs on one Bagpipe of `B`s: through its plain calls, or a handle per thread.
fn run_bagpipe<B>(threads: usize, ms: u64, plain: bool) -> (f64, i64)
where
    B: WeakBag<Item = u64> + Default + Sync,
{
    let bag: Bagpipe<B> = Bagpipe::new();
    measure(threads, ms, |_, stop| {
        if plain {
            pairs(stop, |i| bag.push(i), || bag.pop())
        } else {
            let handle = bag.handle();
            pairs(stop, |i| handle.push(i), || handle.pop())
        }
    })
}

/// Pairs on a queue of each thread's own (nothing shared but the process-wide epoch and
/// eras): through its plain calls, or a handle.
fn run_private(threads: usize, ms: u64, plain: bool) -> (f64, i64) {
    let queues: Vec<Queue<u64>> = (0..threads).map(|_| Queue::new()).collect();
    measure(threads, ms, |t, stop| {
        let queue = &queues[t];
        if plain {
            pairs(stop, |i| queue.push(i), || queue.pop())
        } else {
            let handle = queue.handle();
            pairs(stop, |i| handle.push(i), || handle.pop())
        }
    })
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("a run's length in milliseconds"))
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
