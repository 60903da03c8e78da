//! Probe: one thread's push+pop pairs through plain `Stack` calls, a stack `Handle` and
//! `parking_lot::Mutex<Vec>`, alternating, in ns per pair. Without `HARNESS` the loop is bare;
//! with it, each subject runs inside a copy of the `bag` suite's `pairs` loop (a retrying
//! push and pop behind a `Worker` trait, sums and SplitMix sums of what went in and out), which
//! is where the compiler's inlining of the subject's calls decides much of the time.
//!
//! ```sh
//! cargo build --release -p pitlane-bench --example stack_pairs
//! target/release/examples/stack_pairs 10000000 5             # pairs per run, rounds
//! HARNESS=1 target/release/examples/stack_pairs 10000000 5
//! PC=1 target/release/examples/stack_pairs 2000000 5    # one producer, one consumer
//! ```
use std::hint::black_box;
use std::time::Instant;

use parking_lot::Mutex;
use pitlane_queue::stack::Stack;

#[inline(never)]
fn plain(s: &Stack<u64>, n: u64) {
    for i in 0..n {
        s.push(black_box(i));
        black_box(s.pop());
    }
}

#[inline(never)]
fn handle(h: &pitlane_queue::stack::Handle<'_, u64>, n: u64) {
    for i in 0..n {
        h.push(black_box(i));
        black_box(h.pop());
    }
}

#[inline(never)]
fn mutex(m: &Mutex<Vec<u64>>, n: u64) {
    for i in 0..n {
        m.lock().push(black_box(i));
        black_box(m.lock().pop());
    }
}

/// One thread's access, as the `bag` suite's workers see it.
trait Worker {
    fn try_push(&self, item: u64) -> Result<(), u64>;
    fn try_pop(&self) -> Option<u64>;
}
impl Worker for Stack<u64> {
    #[inline]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.push(item);
        Ok(())
    }
    #[inline]
    fn try_pop(&self) -> Option<u64> {
        self.pop()
    }
}
impl Worker for pitlane_queue::stack::Handle<'_, u64> {
    #[inline]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.push(item);
        Ok(())
    }
    #[inline]
    fn try_pop(&self) -> Option<u64> {
        self.pop()
    }
}
impl Worker for Mutex<Vec<u64>> {
    #[inline]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.lock().push(item);
        Ok(())
    }
    #[inline]
    fn try_pop(&self) -> Option<u64> {
        self.lock().pop()
    }
}
impl<W: Worker> Worker for &W {
    #[inline]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        (**self).try_push(item)
    }
    #[inline]
    fn try_pop(&self) -> Option<u64> {
        (**self).try_pop()
    }
}

fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The suite's `pairs` loop: retrying push and pop, and sums of what went in and came out.
#[inline(never)]
fn harness<W: Worker>(w: W, n: u64) -> u64 {
    let (mut sum, mut mixed) = (0_u64, 0_u64);
    for i in 0..n {
        let mut item = black_box(i);
        let mut spins = 0_u32;
        while let Err(back) = w.try_push(item) {
            item = back;
            spins += 1;
            std::hint::spin_loop();
        }
        let got = loop {
            if let Some(got) = w.try_pop() {
                break got;
            }
            spins += 1;
        };
        sum = sum
            .wrapping_add(i)
            .wrapping_add(got)
            .wrapping_add(spins as u64);
        mixed = mixed.wrapping_add(mix(i)).wrapping_add(mix(got));
    }
    sum ^ mixed
}

/// One producer pushing `n` items and one consumer popping until it has them all, as the
/// suite's `producer_consumer` at two threads: ns per operation (pushes and pops).
fn producer_consumer<W: Worker + Sync>(w: &W, n: u64) -> f64 {
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..n {
                let mut item = i;
                while let Err(back) = w.try_push(item) {
                    item = back;
                    std::hint::spin_loop();
                }
            }
        });
        s.spawn(|| {
            let (mut got, mut sum) = (0, 0_u64);
            while got < n {
                match w.try_pop() {
                    Some(item) => {
                        got += 1;
                        sum = sum.wrapping_add(item);
                    }
                    None => std::hint::spin_loop(),
                }
            }
            assert_eq!(sum, n * (n - 1) / 2, "an item lost or duplicated");
        });
    });
    started.elapsed().as_nanos() as f64 / (2 * n) as f64
}

fn main() {
    if std::env::var_os("PC").is_some() {
        // PC=1: one producer and one consumer, plain stack calls and `Mutex<Vec>` alternating
        // (items per run, rounds).
        let n: u64 = std::env::args()
            .nth(1)
            .map_or(2_000_000, |n| n.parse().unwrap());
        let rounds: usize = std::env::args().nth(2).map_or(5, |n| n.parse().unwrap());
        for _ in 0..rounds {
            let s = Stack::new();
            let stack = producer_consumer(&s, n);
            let m = Mutex::new(Vec::new());
            let mutex = producer_consumer(&m, n);
            println!(
                "producer_consumer: stack {stack:.2}  mutex {mutex:.2} ns per op  stack/mutex time {:.2}",
                stack / mutex
            );
        }
        return;
    }
    if std::env::var_os("HARNESS").is_some() {
        // PAD=k leaks k bytes first, to move what the heap hands out next (probe of placement).
        if let Some(pad) = std::env::var("PAD")
            .ok()
            .and_then(|k| k.parse::<usize>().ok())
        {
            std::mem::forget(vec![1_u8; pad]);
        }
        let n: u64 = std::env::args()
            .nth(1)
            .map_or(5_000_000, |n| n.parse().unwrap());
        let rounds: usize = std::env::args().nth(2).map_or(5, |n| n.parse().unwrap());
        // ONLY=plain|handle|mutex runs one subject (for instruction counts under callgrind).
        let only = std::env::var("ONLY").ok();
        let s = Box::new(Stack::new());
        let h = s.handle();
        let m = Box::new(Mutex::new(Vec::new()));
        let ns = |t: Instant| t.elapsed().as_nanos() as f64 / n as f64;
        for _ in 0..rounds {
            let t = Instant::now();
            if only.as_deref().is_none_or(|o| o == "plain") {
                black_box(harness(&*s, n));
            }
            let p = ns(t);
            let t = Instant::now();
            if only.as_deref().is_none_or(|o| o == "handle") {
                black_box(harness(&h, n));
            }
            let hd = ns(t);
            let t = Instant::now();
            if only.as_deref().is_none_or(|o| o == "mutex") {
                black_box(harness(&*m, n));
            }
            let mx = ns(t);
            println!(
                "harness: plain {p:.2}  handle {hd:.2}  mutex {mx:.2}  plain/mutex time {:.2}",
                p / mx
            );
        }
        return;
    }
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(5_000_000, |n| n.parse().unwrap());
    let rounds: usize = std::env::args().nth(2).map_or(5, |n| n.parse().unwrap());
    let s = Box::new(Stack::new());
    let h = s.handle();
    let m = Box::new(Mutex::new(Vec::new()));
    let ns = |t: Instant| t.elapsed().as_nanos() as f64 / n as f64;
    for _ in 0..rounds {
        let t = Instant::now();
        plain(&s, n);
        let p = ns(t);
        let t = Instant::now();
        handle(&h, n);
        let hd = ns(t);
        let t = Instant::now();
        mutex(&m, n);
        let mx = ns(t);
        println!(
            "plain {p:.2}  handle {hd:.2}  mutex {mx:.2}  plain/mutex time {:.2}",
            p / mx
        );
    }
}
