//! What two threads can do on shared cache lines, with nothing else in the way: the ceiling
//! under the two-thread `bag` figures.
//!
//! Each pattern runs on two threads at once, each thread doing `OPS` operations; the figure
//! is all operations of both threads per second of wall time (Mops/s, the `bag` suite's
//! unit). The patterns are subjects of one case of the bench runner: a warm-up round, then
//! interleaved rounds in rotated order, reported as median [min–max].
//!
//! - `fetch_add, one line`: both threads `fetch_add` one word.
//! - `fetch_add, two lines`: each thread alternates between two words on two lines, the way
//!   a fetch-and-add queue's push (`enq`) and pop (`deq`) alternate in `pairs`.
//! - `CAS loop, one line`: load, then compare-and-swap until it succeeds, retrying at once.
//! - `CAS loop with backoff, one line` and `…, two lines`: the same, pausing after each lost
//!   race with crossbeam's `Backoff::spin` (1, 2, 4 … 64 spin hints), as crossbeam's
//!   `SegQueue` does. A thread that lost steps aside and the other one keeps the line for a
//!   while: the figure counts operations, not fairness.
//!
//! ```text
//! cargo run --release -p pitlane-bench --example line_bound
//! ```

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use crossbeam_utils::{Backoff, CachePadded};
use pitlane_bench::results::{Better, Metric, params};
use pitlane_bench::runner::{Bench, Case, RunConfig, RunResult, Subject};

/// Operations per thread per run.
const OPS: usize = 2_000_000;
/// Threads per run.
const THREADS: usize = 2;

/// Two words on two cache lines.
struct Lines {
    first: CachePadded<AtomicUsize>,
    second: CachePadded<AtomicUsize>,
}

impl Lines {
    fn new() -> Self {
        Self {
            first: CachePadded::new(AtomicUsize::new(0)),
            second: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// The line for operation `i` when a pattern alternates, else the first.
    fn word(&self, i: usize, alternate: bool) -> &AtomicUsize {
        if alternate && i % 2 == 1 {
            &self.second
        } else {
            &self.first
        }
    }

    /// How many increments the words hold: every pattern increments once per operation.
    fn total(&self) -> usize {
        self.first.load(Ordering::Relaxed) + self.second.load(Ordering::Relaxed)
    }
}

/// One operation of a pattern on `lines`.
type Op = fn(&Lines, usize);

fn fetch_add(lines: &Lines, i: usize, alternate: bool) {
    lines.word(i, alternate).fetch_add(1, Ordering::SeqCst);
}

fn cas_loop(lines: &Lines, i: usize, alternate: bool, backoff: bool) {
    let word = lines.word(i, alternate);
    let pause = Backoff::new();
    let mut seen = word.load(Ordering::Relaxed);
    while let Err(now) = word.compare_exchange(seen, seen + 1, Ordering::SeqCst, Ordering::Relaxed)
    {
        seen = now;
        if backoff {
            pause.spin();
        }
    }
}

const PATTERNS: [(&str, Op); 5] = [
    ("fetch_add, one line", |l, i| fetch_add(l, i, false)),
    ("fetch_add, two lines", |l, i| fetch_add(l, i, true)),
    ("CAS loop, one line", |l, i| cas_loop(l, i, false, false)),
    ("CAS loop with backoff, one line", |l, i| {
        cas_loop(l, i, false, true)
    }),
    ("CAS loop with backoff, two lines", |l, i| {
        cas_loop(l, i, true, true)
    }),
];

/// One run of `op`: Mops/s over both threads, or an error if an increment was lost.
fn run(op: Op) -> RunResult {
    let lines = Lines::new();
    let start = Barrier::new(THREADS + 1);
    let began = thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                start.wait();
                for i in 0..OPS {
                    op(black_box(&lines), i);
                }
            });
        }
        start.wait();
        Instant::now()
    });
    let seconds = began.elapsed().as_secs_f64();
    // Every operation incremented a word exactly once: a check that the run did its work.
    if lines.total() != THREADS * OPS {
        return Err(format!(
            "{} of {} increments landed",
            lines.total(),
            THREADS * OPS
        ));
    }
    Ok(vec![(THREADS * OPS) as f64 / seconds / 1e6])
}

fn main() -> ExitCode {
    let mut bench = Bench::new(RunConfig::full());
    bench.begin_suite("line_bound");
    let metric = Metric::new("mops_per_s", "Mops/s", Better::Higher);
    let case = PATTERNS.iter().fold(
        Case::new("line_bound", params! {"threads" => THREADS}, vec![metric]),
        // Peers, not ours: no pattern is a pitlane structure, so no ratios are computed.
        |case, &(name, op)| case.subject(Subject::peer(name, move || run(op))),
    );
    if let Err(error) = bench.measure(case) {
        eprintln!("line_bound: {error}");
        return ExitCode::FAILURE;
    }
    let report = bench.finish();
    println!("{THREADS} threads, {OPS} operations each, Mops/s, median [min-max]:");
    for record in &report.records {
        println!(
            "  {:34} {:6.1} [{:.1}-{:.1}] over {} rounds",
            record.subject, record.median, record.min, record.max, record.samples
        );
    }
    ExitCode::SUCCESS
}
