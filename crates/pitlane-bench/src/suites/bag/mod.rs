//! Suite `bag`: the Bagpipes benchmark (the bagpipe crate's `bench_bag`), fitted to two cores.
//!
//! Subjects: pitlane's [`Bagpipe`] over its fetch-and-add queue and over its Treiber stack,
//! the bare [`mpmc::Queue`] and [`Stack`] — each twice, through its plain methods (named after
//! the structure) and through a per-thread handle (named `…::Handle`) — and what a Rust user
//! would pick instead:
//! `crossbeam_queue::SegQueue` and `ArrayQueue`, `concurrent_queue::ConcurrentQueue` (bounded
//! and unbounded), and a `VecDeque` behind `std::sync::Mutex` or `parking_lot::Mutex`; a
//! `parking_lot::Mutex<Vec>` stands beside the stack. Every item is a `u64`; the bounded
//! subjects get a capacity of [`CAPACITY`], which no run fills.
//!
//! Workloads, each run for a fixed time (the first three are the seed's benchmark's):
//! - `pairs`: every thread pushes an item, then pops one, over and over, from an empty
//!   structure;
//! - `pairs_prefilled`: the same after [`PREFILL`] items were pushed;
//! - `producer_consumer`: half the threads push, half pop (so at 2 and 4 threads only); the
//!   producers stop at the deadline and the consumers then drain what is left, which the
//!   time includes. Over a subject that holds at most so many items and whose push panics
//!   past them (the stack and the Bagpipe of stacks: two million), the producers wait for the
//!   consumers once the backlog comes within `Backlog::headroom` items of that (more with
//!   more threads), as they wait on a full bounded queue;
//! - `pairs_latency`: `pairs` with each push and each pop timed, retries included, for the
//!   p50/p99/p99.9/max of one operation: what a thread pays for the others' contention.
//!
//! The metric of the first three is million successful operations (pushes plus pops) per
//! second. A pop that finds nothing is not counted: in `pairs` it is retried (a thread always
//! pushed before it pops, so some item is in the structure), in `producer_consumer` the
//! consumer waits. `pairs` and `pairs_prefilled` at two threads or more also give the
//! `thread_balance` (the fewest operations of one thread over the most), and
//! `producer_consumer` the `backlog_items` left when the producers stopped.
//!
//! Correctness inside every run: items are distinct (producing thread and sequence number),
//! and each thread sums what it pushed and what it popped, both plainly and through a mixing
//! function; after the run the rest is drained, and the counts and both sums of everything
//! popped must equal those of everything pushed, so an item lost or duplicated aborts the
//! benchmark. The FIFO subjects are also checked for order: every consumer must see each
//! producer's items in the order they were pushed.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use pitlane_queue::bagpipe::{self, Bagpipe};
use pitlane_queue::mpmc;
use pitlane_queue::stack::Stack;

use super::{Suite, Workload};

mod checks;
mod subjects;
mod workloads;

use crate::results::{Better, Goal, Metric, params};
use crate::runner::{Bench, BenchError, Case, RunResult, Subject};
use crate::start::{StartLine, spawn_each};
use checks::*;
use subjects::*;
use workloads::*;

/// The suite.
pub struct Bag;

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "pairs",
        about: "every thread pushes then pops, from empty; Mops/s at 1/2/4 threads",
    },
    Workload {
        name: "pairs_prefilled",
        about: "every thread pushes then pops, after 1024 items; Mops/s at 1/2/4 threads",
    },
    Workload {
        name: "pairs_latency",
        about: "pairs with each push and pop timed: p50/p99/p99.9/max ns at 1/2/4 threads",
    },
    Workload {
        name: "producer_consumer",
        about: "half the threads push, half pop, then drain; Mops/s at 2/4 threads, and the \
                backlog left when the producers stopped",
    },
];

/// Items pushed before `pairs_prefilled` starts.
pub const PREFILL: usize = 1024;
/// Capacity of the bounded subjects: more than any run holds at once in `pairs`.
pub const CAPACITY: usize = 1 << 16;
/// Operations between two looks at the stop flag.
const ROUND: usize = 64;
/// Bits of an item that hold its sequence number; the producing thread is above them.
const SEQ_BITS: u32 = 40;
/// Failed attempts a waiting thread spins through before it yields its core once.
const SPINS_BEFORE_YIELD: u32 = 64;
/// A producer_consumer consumer looks whether the producers have stopped once per this many
/// pops (and whenever it finds the structure empty), to measure the backlog.
const BACKLOG_CHECK: u64 = 256;

impl Suite for Bag {
    fn name(&self) -> &'static str {
        "bag"
    }

    fn about(&self) -> &'static str {
        "Bagpipe, fetch-and-add queue and Treiber stack beside SegQueue, ArrayQueue, concurrent-queue and mutexes"
    }

    fn workloads(&self) -> &'static [Workload] {
        WORKLOADS
    }

    /// Issue 5, Mops/s: Bagpipe over the queue at least 2x SegQueue on `pairs` at 2 threads
    /// and 1.5x at 4; the queue at least 1.2x SegQueue on `pairs` and `producer_consumer` at 2
    /// threads; the stack at least `parking_lot::Mutex<Vec>` at 2 threads (`pairs`,
    /// `pairs_prefilled` and `producer_consumer`).
    fn goals(&self) -> Vec<Goal> {
        let segqueue = <crossbeam_queue::SegQueue<u64> as BagSubject>::NAME;
        let mutex_vec = <parking_lot::Mutex<Vec<u64>> as BagSubject>::NAME;
        let bagpipe = <Bagpipe<mpmc::Queue<u64>> as BagSubject>::NAME;
        let queue = <mpmc::Queue<u64> as BagSubject>::NAME;
        let stack = <Stack<u64> as BagSubject>::NAME;
        let stack_bagpipe = <Bagpipe<Stack<u64>> as BagSubject>::NAME;
        let plain_bagpipe = <Plain<Bagpipe<mpmc::Queue<u64>>> as BagSubject>::NAME;
        let plain_stack_bagpipe = <Plain<Bagpipe<Stack<u64>>> as BagSubject>::NAME;
        let plain_queue = <Plain<mpmc::Queue<u64>> as BagSubject>::NAME;
        let plain_stack = <Plain<Stack<u64>> as BagSubject>::NAME;
        let mops = Metric::new("mops_per_s", "Mops/s", Better::Higher);
        let goal = |workload: &str, threads: usize, ours: &str, peer: &str, target: f64| {
            Goal::ratio(
                workload,
                params! {"threads" => threads},
                &mops,
                ours,
                peer,
                target,
            )
            .from_issue(5)
        };
        // Issue 15: the plain calls a user makes first are as fast as the handles.
        let plain = |workload: &str, threads: usize, ours: &str, peer: &str, target: f64| {
            Goal::ratio(
                workload,
                params! {"threads" => threads},
                &mops,
                ours,
                peer,
                target,
            )
            .from_issue(15)
        };
        let mut goals = vec![
            goal("pairs", 2, bagpipe, segqueue, 2.0),
            goal("pairs", 4, bagpipe, segqueue, 1.5),
            goal("pairs", 2, queue, segqueue, 1.2),
            goal("producer_consumer", 2, queue, segqueue, 1.2),
            goal("pairs", 2, stack, mutex_vec, 1.0),
            goal("pairs_prefilled", 2, stack, mutex_vec, 1.0),
            goal("producer_consumer", 2, stack, mutex_vec, 1.0),
        ];
        // "Every plain call within 10% of its handle's throughput": at each thread count the
        // suite runs (one thread, the two cores, and oversubscribed).
        for threads in [1, 2, 4] {
            for workload in ["pairs", "pairs_prefilled"] {
                for (ours, handle) in [
                    (plain_queue, queue),
                    (plain_stack, stack),
                    (plain_bagpipe, bagpipe),
                    (plain_stack_bagpipe, stack_bagpipe),
                ] {
                    goals.push(plain(workload, threads, ours, handle, 0.9));
                }
            }
        }
        goals.push(plain("pairs", 1, plain_stack, mutex_vec, 1.0));
        goals
    }

    fn run(&self, bench: &mut Bench) -> Result<(), BenchError> {
        let threads = bench.config().threads(&[1, 2, 4]);
        let run_for = bench.config().duration(250);
        bench.note(format!(
            "Each run lasts {} ms per subject; threads beyond the machine's {} cores \
             oversubscribe it. Mops/s counts successful pushes plus pops. Bagpipes have {} \
             pipes (twice the available parallelism, rounded up to a power of two). Each \
             of pitlane's structures is measured twice: through its plain methods (subjects \
             named after the structure, what a user calls first) and through a handle per \
             thread (subjects named `Handle`): `Queue::handle` keeps the thread pinned to the \
             epoch (renewed every 256 operations) instead of pinning per operation, \
             `Stack::handle` keeps a stash of free nodes, and a Bagpipe handle holds one such \
             handle per pipe. Bounded subjects have capacity \
             {CAPACITY}. \
             producer_consumer needs a producer and a consumer, so it runs at 2 and 4 threads \
             only; its Mops/s include the drain after the producers stop, and its \
             `backlog_items` is how many items were still in the structure when they stopped \
             (to within {BACKLOG_CHECK} per consumer): an unbounded structure whose consumers \
             fall behind runs both sides without sharing a cache line, and is paid for in \
             memory instead. The stack subjects hold at most {} items, so their \
             producers wait for the consumers when the backlog comes within {} of that (at \
             2 threads; more with more threads). \
             In pairs at 2 threads and more, `thread_balance` is the fewest \
             operations one thread did divided by the most (1 when the threads shared the \
             structure evenly): a high Mops/s with a low balance came from one thread running \
             alone while the others waited.",
            run_for.as_millis(),
            crate::env::cores(),
            Bagpipe::<mpmc::Queue<u64>>::new().pipe_count(),
            pitlane_queue::stack::MAX_ITEMS,
            Backlog::headroom(1, 2),
        ));
        for (workload, prefill) in [("pairs", 0), ("pairs_prefilled", PREFILL)] {
            for &t in &threads {
                let mut metrics = vec![Metric::new("mops_per_s", "Mops/s", Better::Higher)];
                if t >= 2 {
                    metrics.push(
                        Metric::new("thread_balance", "ratio", Better::Higher).without_ratios(),
                    );
                }
                let mut case = Case::new(
                    workload,
                    params! {"threads" => t, "items" => prefill},
                    metrics,
                );
                for entry in subjects() {
                    let run = move || (entry.pairs)(t, prefill, run_for);
                    case.push(entry.subject(run));
                }
                bench.measure(case)?;
            }
        }
        for &t in threads.iter().filter(|&&t| t >= 2) {
            let metrics = vec![
                Metric::new("mops_per_s", "Mops/s", Better::Higher),
                Metric::new("backlog_items", "items", Better::Lower).without_ratios(),
            ];
            let mut case = Case::new("producer_consumer", params! {"threads" => t}, metrics);
            for entry in subjects() {
                let run = move || (entry.producer_consumer)(t, run_for);
                case.push(entry.subject(run));
            }
            bench.measure(case)?;
        }
        bench.note(format!(
            "pairs_latency times each push and each pop with `std::time::Instant` \
             (clock_gettime through the vDSO), a pop from its first attempt to the item, so \
             retries after lost races are included; every figure includes the timer's own cost, \
             {:.0} ns for an empty interval (median) in this run. The Mops/s of `pairs` are \
             measured without the timer.",
            super::timer_overhead_ns()
        ));
        for &t in &threads {
            let metrics = [
                "latency_p50_ns",
                "latency_p99_ns",
                "latency_p999_ns",
                "latency_max_ns",
            ]
            .map(|name| Metric::new(name, "ns", Better::Lower).without_ratios())
            .to_vec();
            let mut case = Case::new("pairs_latency", params! {"threads" => t}, metrics);
            for entry in subjects() {
                let run = move || (entry.pairs_latency)(t, run_for);
                case.push(entry.subject(run));
            }
            bench.measure(case)?;
        }
        Ok(())
    }
}

/// One subject: its name and its two workloads, monomorphised (no dynamic dispatch inside the
/// timed loops).
#[derive(Clone, Copy)]
struct Entry {
    name: &'static str,
    peer: bool,
    pairs: fn(usize, usize, Duration) -> RunResult,
    pairs_latency: fn(usize, Duration) -> RunResult,
    producer_consumer: fn(usize, Duration) -> RunResult,
}

impl Entry {
    fn of<S: BagSubject>() -> Self {
        Entry {
            name: S::NAME,
            peer: S::PEER,
            pairs: run_pairs::<S>,
            pairs_latency: run_pairs_latency::<S>,
            producer_consumer: run_producer_consumer::<S>,
        }
    }

    fn subject<'a>(&self, run: impl FnMut() -> RunResult + 'a) -> Subject<'a> {
        if self.peer {
            Subject::peer(self.name, run)
        } else {
            Subject::ours(self.name, run)
        }
    }
}

fn subjects() -> Vec<Entry> {
    vec![
        Entry::of::<Bagpipe<mpmc::Queue<u64>>>(),
        Entry::of::<Bagpipe<Stack<u64>>>(),
        Entry::of::<mpmc::Queue<u64>>(),
        Entry::of::<Stack<u64>>(),
        Entry::of::<Plain<Bagpipe<mpmc::Queue<u64>>>>(),
        Entry::of::<Plain<Bagpipe<Stack<u64>>>>(),
        Entry::of::<Plain<mpmc::Queue<u64>>>(),
        Entry::of::<Plain<Stack<u64>>>(),
        Entry::of::<crossbeam_queue::SegQueue<u64>>(),
        Entry::of::<crossbeam_queue::ArrayQueue<u64>>(),
        Entry::of::<BoundedConcurrentQueue>(),
        Entry::of::<UnboundedConcurrentQueue>(),
        Entry::of::<std::sync::Mutex<VecDeque<u64>>>(),
        Entry::of::<parking_lot::Mutex<VecDeque<u64>>>(),
        Entry::of::<parking_lot::Mutex<Vec<u64>>>(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subject_passes_its_checks_in_every_workload() {
        let run_for = Duration::from_millis(10);
        for entry in subjects() {
            for threads in [1, 2, 3] {
                let figures = (entry.pairs)(threads, 16, run_for)
                    .unwrap_or_else(|e| panic!("{} pairs: {e}", entry.name));
                assert!(figures[0] > 0.0, "{}", entry.name);
                // The balance comes with two threads or more, and is a share.
                assert_eq!(figures.len(), if threads >= 2 { 2 } else { 1 });
                if let Some(&balance) = figures.get(1) {
                    assert!((0.0..=1.0).contains(&balance), "{} {balance}", entry.name);
                }
            }
            for threads in [1, 2] {
                let latency = (entry.pairs_latency)(threads, run_for)
                    .unwrap_or_else(|e| panic!("{} pairs_latency: {e}", entry.name));
                // p50, p99, p99.9 and max, in order, and no operation takes no time.
                assert_eq!(latency.len(), 4, "{}", entry.name);
                assert!(latency[0] > 0.0, "{} {latency:?}", entry.name);
                assert!(
                    latency.windows(2).all(|w| w[0] <= w[1]),
                    "{} {latency:?}",
                    entry.name
                );
            }
            let rate = (entry.producer_consumer)(2, run_for)
                .unwrap_or_else(|e| panic!("{} producer_consumer: {e}", entry.name))[0];
            assert!(rate > 0.0, "{}", entry.name);
        }
    }

    #[test]
    fn the_balance_is_the_fewest_operations_of_a_thread_over_the_most() {
        let now = Instant::now();
        let outcome = |pushes: u64, pops: u64| Outcome {
            pushed: Tally {
                count: pushes,
                ..Tally::default()
            },
            popped: Tally {
                count: pops,
                ..Tally::default()
            },
            started: now,
            ended: now,
        };
        let even = [outcome(50, 50), outcome(50, 50)];
        assert_eq!(balance(&even), 1.0);
        let skewed = [outcome(200, 200), outcome(50, 50), outcome(100, 100)];
        assert_eq!(balance(&skewed), 0.25);
        assert_eq!(balance(&[outcome(0, 0), outcome(10, 10)]), 0.0);
    }

    /// A queue whose first pops take 200 µs each (40 ms in all), so that its consumer falls
    /// behind; later pops are quick, so that the drain does not take long.
    struct SlowPops(crossbeam_queue::SegQueue<u64>, AtomicUsize);

    impl Worker for SlowPops {
        fn try_push(&self, item: u64) -> Result<(), u64> {
            self.0.push(item);
            Ok(())
        }
        fn try_pop(&self) -> Option<u64> {
            if self.1.fetch_add(1, Ordering::Relaxed) < 200 {
                thread::sleep(Duration::from_micros(200));
            }
            self.0.pop()
        }
    }

    impl BagSubject for SlowPops {
        const NAME: &'static str = "slow pops";
        const PEER: bool = true;
        const FIFO: bool = true;
        fn make() -> Self {
            Self(crossbeam_queue::SegQueue::new(), AtomicUsize::new(0))
        }
        fn worker(&self) -> impl Worker + '_ {
            self
        }
    }

    #[test]
    fn the_backlog_shows_a_consumer_that_falls_behind() {
        let figures = run_producer_consumer::<SlowPops>(2, Duration::from_millis(20)).unwrap();
        let [rate, backlog] = figures[..] else {
            panic!("two figures expected, got {figures:?}");
        };
        assert!(rate > 0.0);
        // The 20 ms run ends while the consumer is still in its slow pops, after at most 100 of
        // them; the producer pushes far more than that.
        assert!(backlog > 1000.0, "backlog {backlog}");
    }

    /// [`SlowPops`] whose push panics past `HOLDS_AT_MOST` items, as the stack's does.
    struct SlowPopsHoldingFew(SlowPops);

    impl SlowPopsHoldingFew {
        /// Room for 1000 items beyond what the limit keeps aside with one producer of two
        /// threads.
        const HOLDS: usize = Backlog::headroom(1, 2) as usize + 1000;
    }

    impl Worker for SlowPopsHoldingFew {
        fn try_push(&self, item: u64) -> Result<(), u64> {
            assert!(self.0.0.len() < Self::HOLDS, "pushed past what it holds");
            self.0.try_push(item)
        }
        fn try_pop(&self) -> Option<u64> {
            self.0.try_pop()
        }
    }

    impl BagSubject for SlowPopsHoldingFew {
        const NAME: &'static str = "slow pops, holding few";
        const PEER: bool = true;
        const FIFO: bool = true;
        const HOLDS_AT_MOST: Option<usize> = Some(Self::HOLDS);
        fn make() -> Self {
            Self(SlowPops::make())
        }
        fn worker(&self) -> impl Worker + '_ {
            self
        }
    }

    #[test]
    fn producers_wait_for_consumers_before_a_subject_holds_all_it_can() {
        // The consumer pops 200 items in its first 40 ms; the producer would push far more
        // than 1000 in the run's 20 ms, and panic past them.
        let figures =
            run_producer_consumer::<SlowPopsHoldingFew>(2, Duration::from_millis(20)).unwrap();
        assert!(figures[1] > 0.0, "backlog {}", figures[1]);
        assert!(
            figures[1] < SlowPopsHoldingFew::HOLDS as f64,
            "backlog {}",
            figures[1]
        );
    }

    /// A structure whose push panics from the 100th on.
    struct PanickingPush(crossbeam_queue::SegQueue<u64>, AtomicUsize);

    impl Worker for PanickingPush {
        fn try_push(&self, item: u64) -> Result<(), u64> {
            let earlier = self.1.fetch_add(1, Ordering::Relaxed);
            assert!(earlier < 99, "the 100th push panics");
            self.0.push(item);
            Ok(())
        }
        fn try_pop(&self) -> Option<u64> {
            self.0.pop()
        }
    }

    impl BagSubject for PanickingPush {
        const NAME: &'static str = "panicking push";
        const PEER: bool = true;
        const FIFO: bool = true;
        fn make() -> Self {
            Self(crossbeam_queue::SegQueue::new(), AtomicUsize::new(0))
        }
        fn worker(&self) -> impl Worker + '_ {
            self
        }
    }

    #[test]
    fn a_producer_that_panics_ends_the_run_with_an_error_instead_of_a_hang() {
        // Before, the consumer waited for the producer to say it had stopped, for ever.
        let outcome = run_producer_consumer::<PanickingPush>(2, Duration::from_millis(20));
        assert_eq!(outcome, Err("worker panicked".to_string()));
    }

    #[test]
    fn the_backlog_never_exceeds_what_a_bounded_queue_holds() {
        // A bounded queue holds at most CAPACITY items, and the backlog, counted from pops the
        // consumer made by the time it saw the producers stop, cannot exceed what it held then.
        let figures =
            run_producer_consumer::<crossbeam_queue::ArrayQueue<u64>>(2, Duration::from_millis(20))
                .unwrap();
        assert!(figures[1] <= CAPACITY as f64, "backlog {}", figures[1]);
    }

    #[test]
    fn a_lost_item_is_detected() {
        let bag = crossbeam_queue::SegQueue::new();
        let mut pushed = Tally::default();
        for i in 0..10 {
            bag.push(i);
            pushed.add(i);
        }
        let _lost = bag.pop();
        let outcome = Outcome {
            pushed,
            popped: Tally::default(),
            started: Instant::now(),
            ended: Instant::now(),
        };
        let err = drain_and_check(&bag, Tally::default(), &[outcome]).unwrap_err();
        assert!(err.contains("lost or duplicated"), "{err}");
    }

    #[test]
    fn a_duplicated_item_is_detected() {
        let bag = crossbeam_queue::SegQueue::new();
        let mut pushed = Tally::default();
        for i in 0..10 {
            bag.push(i);
            pushed.add(i);
        }
        bag.push(3);
        let outcome = Outcome {
            pushed,
            popped: Tally::default(),
            started: Instant::now(),
            ended: Instant::now(),
        };
        let err = drain_and_check(&bag, Tally::default(), &[outcome]).unwrap_err();
        assert!(err.contains("popped but only"), "{err}");
    }

    #[test]
    fn reordering_is_detected_for_fifo_subjects() {
        let mut order = OrderCheck::new(true, 2);
        order.see(item(1, 5)).unwrap();
        order.see(item(0, 9)).unwrap();
        let err = order.see(item(1, 4)).unwrap_err();
        assert!(err.contains("FIFO broken"), "{err}");
        let mut unordered = OrderCheck::new(false, 2);
        unordered.see(item(1, 5)).unwrap();
        unordered.see(item(1, 4)).unwrap();
    }
}
