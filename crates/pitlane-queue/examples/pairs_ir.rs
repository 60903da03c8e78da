//! One thread pushing then popping through one subject, for instruction counts under
//! `valgrind --tool=callgrind` (repeatable whatever the machine does):
//!
//! ```sh
//! cargo build --release -p pitlane-queue --example pairs_ir
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/pairs_ir bagpipe-stack-plain 1000000
//! ```
//! Subtract a run with 0 pairs and divide by the pairs for instructions per push+pop pair.
use std::hint::black_box;

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;

fn pairs(n: u64, push: impl Fn(u64), pop: impl Fn() -> Option<u64>) {
    // PREFILL=k pushes k items first, so that pushes and pops work in different places.
    let prefill: u64 = std::env::var("PREFILL").map_or(0, |k| k.parse().expect("a count"));
    (0..prefill).for_each(&push);
    for i in 0..n {
        push(black_box(i));
        black_box(pop());
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let subject = args.next().expect("a subject");
    let n: u64 = args
        .next()
        .map_or(1_000_000, |n| n.parse().expect("a count"));
    let started = std::time::Instant::now();
    match subject.as_str() {
        "stack-plain" => {
            let s = Stack::new();
            pairs(n, |i| s.push(i), || s.pop());
        }
        "stack-handle" => {
            let s = Stack::new();
            let h = s.handle();
            pairs(n, |i| h.push(i), || h.pop());
        }
        "queue-plain" => {
            let q = Queue::new();
            pairs(n, |i| q.push(i), || q.pop());
        }
        "queue-handle" => {
            let q = Queue::new();
            let h = q.handle();
            pairs(n, |i| h.push(i), || h.pop());
        }
        "bagpipe-stack-plain" => {
            let b: Bagpipe<Stack<u64>> = Bagpipe::new();
            pairs(n, |i| b.push(i), || b.pop());
        }
        "bagpipe-stack-handle" => {
            let b: Bagpipe<Stack<u64>> = Bagpipe::new();
            let h = b.handle();
            pairs(n, |i| h.push(i), || h.pop());
        }
        "bagpipe-queue-plain" => {
            let b: Bagpipe<Queue<u64>> = Bagpipe::new();
            pairs(n, |i| b.push(i), || b.pop());
        }
        "bagpipe-queue-handle" => {
            let b: Bagpipe<Queue<u64>> = Bagpipe::new();
            let h = b.handle();
            pairs(n, |i| h.push(i), || h.pop());
        }
        other => panic!("unknown subject {other}"),
    }
    if std::env::var_os("PAIRS_TIME").is_some() {
        let pair_ns = started.elapsed().as_nanos() as f64 / n.max(1) as f64;
        eprintln!("{subject}: {pair_ns:.1} ns per pair");
    }
}
