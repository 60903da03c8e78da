//! Short runs of two threads of push+pop pairs on a fresh `mpmc::Queue<u64>` each, plain
//! calls and handles alternating as the `bag` suite's rounds do: new queue, prefill, new
//! threads, a start barrier, `ms` milliseconds. Prints each round's Mpairs/s of both and
//! the plain ÷ handle ratio, then the median ratio.
//!
//! ```sh
//! cargo build --release -p pitlane-queue --example pairs_runs
//! target/release/examples/pairs_runs 1024 31 15    # prefill, ms per run, rounds
//! ```
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pitlane_queue::PopError;
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;

static LOST: AtomicU64 = AtomicU64::new(0);

/// A pop that retries lost races with the pauses of `WeakBag::pop` (32 spin hints, then 64),
/// counting them in `lost`.
fn pop_counting(mut try_pop: impl FnMut() -> Result<u64, PopError>, lost: &mut u64) {
    let mut spins = 32;
    loop {
        match try_pop() {
            Ok(_) => return,
            Err(PopError::Empty) => {}
            Err(PopError::Transient) => {
                *lost += 1;
                for _ in 0..spins {
                    std::hint::spin_loop();
                }
                spins = 64;
            }
        }
    }
}

/// Two threads each run `worker` (set-up, `start.wait()`, then pairs until `stop`; returns
/// its pair count) for `ms` milliseconds after a common start. Returns the pairs of both and
/// Mpairs/s.
fn two_threads(ms: u64, worker: impl Fn(&Barrier, &AtomicBool) -> u64 + Sync) -> (u64, f64) {
    let stop = AtomicBool::new(false);
    let pairs = AtomicU64::new(0);
    let start = Barrier::new(3);
    let mut began = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| pairs.fetch_add(worker(&start, &stop), Ordering::Relaxed));
        }
        start.wait();
        began = Instant::now();
        std::thread::sleep(Duration::from_millis(ms));
        stop.store(true, Ordering::Relaxed);
    });
    let pairs = pairs.load(Ordering::Relaxed);
    (pairs, pairs as f64 / began.elapsed().as_secs_f64() / 1e6)
}

fn run(plain: bool, prefill: u64, ms: u64) -> f64 {
    if std::env::var_os("BAGPIPE").is_some() {
        return run_bagpipe(plain, prefill, ms);
    }
    let queue: Queue<u64> = Queue::new();
    if plain {
        (0..prefill).for_each(|i| queue.push(i));
    } else {
        let handle = queue.handle();
        (0..prefill).for_each(|i| handle.push(i));
    }
    let (pairs, rate) = two_threads(ms, |start, stop| {
        let handle = queue.handle();
        let mut n = 0;
        let mut lost = 0;
        start.wait();
        while !stop.load(Ordering::Relaxed) {
            for i in 0..64 {
                if plain {
                    queue.push(i);
                    pop_counting(|| queue.try_pop(), &mut lost);
                } else {
                    handle.push(i);
                    pop_counting(|| handle.try_pop(), &mut lost);
                }
            }
            n += 64;
        }
        LOST.fetch_add(lost, Ordering::Relaxed);
        n
    });
    let lost = LOST.swap(0, Ordering::Relaxed);
    if std::env::var_os("LOST").is_some() {
        println!(
            "{}: {:.4} lost pops per pair",
            if plain { "plain" } else { "handle" },
            lost as f64 / pairs as f64
        );
    }
    rate
}

fn main() {
    let mut args = std::env::args().skip(1);
    let prefill: u64 = args.next().map_or(1024, |s| s.parse().expect("a count"));
    let ms: u64 = args.next().map_or(31, |s| s.parse().expect("milliseconds"));
    let rounds: usize = args.next().map_or(15, |s| s.parse().expect("rounds"));
    let _ = run(true, prefill, ms);
    let _ = run(false, prefill, ms);
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let plain = run(true, prefill, ms);
        let handle = run(false, prefill, ms);
        ratios.push(plain / handle);
        println!(
            "round {round}: plain {plain:.1}, handle {handle:.1} Mpairs/s, ratio {:.3}",
            plain / handle
        );
    }
    ratios.sort_by(f64::total_cmp);
    let won = ratios.iter().filter(|&&r| r >= 0.9).count();
    println!(
        "median ratio {:.3}, {won}/{rounds} at 0.9 or more",
        ratios[rounds / 2]
    );
}

/// `run` on a `Bagpipe<Queue<u64>>` (with `BAGPIPE` set in the environment).
fn run_bagpipe(plain: bool, prefill: u64, ms: u64) -> f64 {
    let bag: Bagpipe<Queue<u64>> = Bagpipe::new();
    if plain {
        (0..prefill).for_each(|i| bag.push(i));
    } else {
        let handle = bag.handle();
        (0..prefill).for_each(|i| handle.push(i));
    }
    two_threads(ms, |start, stop| {
        let handle = bag.handle();
        let mut n = 0;
        start.wait();
        while !stop.load(Ordering::Relaxed) {
            for i in 0..64 {
                if plain {
                    bag.push(i);
                    while bag.pop().is_none() {}
                } else {
                    handle.push(i);
                    while handle.pop().is_none() {}
                }
            }
            n += 64;
        }
        n
    })
    .1
}
