//! Suite `spsc`: the B-Queue paper's evaluation (Wang et al., IJPP 2013, Section 5), fitted to
//! two cores.
//!
//! Subjects: `pitlane::spsc` (the B-Queue), the SPSC queues a Rust user would pick instead
//! (`rtrb`, `ringbuf`, `crossbeam_queue::ArrayQueue`, `std::sync::mpsc::sync_channel`), and the
//! paper's baselines written from its figures ([`baselines`]: Lamport, FastForward,
//! MCRingBuffer in its deadlock-prone and its "sane" form). Every item is a `u64`.
//!
//! Workloads:
//! - `throughput`: one producer, one consumer, ns per item, at capacity 2048 (batch 256, the
//!   paper's dummy testbed) and 65536.
//! - `multi_queue`: the paper's real testbed fitted to two cores: one producer thread deals
//!   items round-robin into N queues, one consumer thread polls them round-robin.
//! - `rtt`: ping-pong over two queues, ns per round trip.
//! - `backtracking`: a producer that pauses between pushes; push-to-pop latency.
//! - `batch_size`: the paper's sweep of batch sizes for `pitlane::spsc` (Fig. 14), beside rtrb.
//!
//! Correctness inside every run: each queue must deliver exactly the values pushed into it, in
//! order (the consumer checks every value against the next one it expects), and nothing after
//! the last; a run that stalls for 10 s is a failure too. Either aborts the benchmark.
//!
//! Timing: a run is timed in parts (16 equal parts of its items, or blocks of 64 round
//! trips) and reports the median part, which keeps the time slices a shared machine gives to
//! other processes out of the figure.

pub mod baselines;
mod subjects;
mod workloads;

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use pitlane_queue::spsc as pitlane;

use self::baselines::{FastForward, Lamport, McRingBuffer, Ticker};
use super::{Suite, Workload};
use crate::results::{Better, Goal, Metric, params};
use crate::runner::{Bench, BenchError, Case, RunResult, Subject};
use crate::start::spawn_one;

pub use subjects::*;
use workloads::*;

/// The suite.
pub struct Spsc;

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "throughput",
        about: "1 producer, 1 consumer, u64 items, ns per item at capacity 2048 (batch 256) and 65536",
    },
    Workload {
        name: "multi_queue",
        about: "1 producer deals round-robin into N = 1..16 queues, 1 consumer polls them; ns per item",
    },
    Workload {
        name: "rtt",
        about: "ping-pong over two queues, ns per round trip",
    },
    Workload {
        name: "backtracking",
        about: "a producer pausing 1 us between pushes; push-to-pop latency p50/p99",
    },
    Workload {
        name: "batch_size",
        about: "pitlane::spsc throughput at capacity 2048 for batch 1..1024 (the paper's Fig. 14)",
    },
];

/// The paper's queue size and batch size.
const PAPER_CAPACITY: usize = 2048;
const PAPER_BATCH: usize = 256;
/// The large capacity of `throughput`.
const LARGE_CAPACITY: usize = 65536;
/// The queue counts of `multi_queue`.
const QUEUE_COUNTS: [usize; 5] = [1, 2, 4, 8, 16];
/// The batch sizes of `batch_size`.
const BATCH_SIZES: [usize; 6] = [1, 4, 16, 64, 256, 1024];
/// The producer's pause in `backtracking`.
const PAUSE: Duration = Duration::from_micros(1);
/// Failed attempts a waiting thread spins through before it yields its core once.
const SPINS_BEFORE_YIELD: u32 = 1024;
/// Parts of a run timed separately (see [`Segments`]).
const SEGMENTS: u64 = 16;
/// Round trips timed together in `rtt`.
const ROUNDS_PER_BLOCK: u64 = 64;
/// A run that makes no progress for this long has deadlocked.
const STALL_LIMIT: Duration = Duration::from_secs(10);

impl Suite for Spsc {
    fn name(&self) -> &'static str {
        "spsc"
    }

    fn about(&self) -> &'static str {
        "the B-Queue beside rtrb, ringbuf, ArrayQueue, sync_channel and the paper's baselines"
    }

    fn workloads(&self) -> &'static [Workload] {
        WORKLOADS
    }

    /// Issue 4: the B-Queue at most 0.8x rtrb's ns per item in `throughput` at both
    /// capacities, at most 0.7x in `multi_queue` at 8 and 16 queues, at most 1.1x in `rtt`.
    fn goals(&self) -> Vec<Goal> {
        let ours = PitlaneSpsc::<true>::NAME;
        let peer = Rtrb::NAME;
        let throughput = [PAPER_CAPACITY, LARGE_CAPACITY].map(|capacity| {
            Goal::ratio(
                "throughput",
                params! {"capacity" => capacity},
                &ns_per_item(),
                ours,
                peer,
                0.8,
            )
        });
        let multi = [8, 16].map(|queues| {
            Goal::ratio(
                "multi_queue",
                params! {"queues" => queues},
                &ns_per_item(),
                ours,
                peer,
                0.7,
            )
        });
        let rtt = Goal::ratio("rtt", params! {}, &rtt_metric(), ours, peer, 1.1);
        throughput
            .into_iter()
            .chain(multi)
            .chain([rtt])
            .map(|g| g.from_issue(4))
            .collect()
    }

    fn run(&self, bench: &mut Bench) -> Result<(), BenchError> {
        let config = bench.config().clone();
        let throughput_items: u64 = config.pick(1 << 24, 1 << 21);
        let multi_items: u64 = config.pick(1 << 23, 1 << 20);
        let sweep_items: u64 = config.pick(1 << 23, 1 << 20);
        let latency_items: u64 = config.pick(256 * 256, 256 * 32);
        let rtt_for = config.duration(100);

        bench.note(format!(
            "Two threads (producer, consumer) on a machine with {} cores, not pinned. A thread \
             that finds its queue full or empty spins ({SPINS_BEFORE_YIELD} spin hints) and then \
             yields once; every subject runs the same loop. Items are `u64`; every consumer \
             checks that each queue delivers exactly 0, 1, 2, … (or its share of them) in order.",
            crate::env::cores()
        ));
        bench.note(format!(
            "Time per item (`throughput`, `multi_queue`, `batch_size`) is the median over the \
             {SEGMENTS} equal parts of a run, each timed by the consumer; time per round trip \
             (`rtt`) is the median over blocks of {ROUNDS_PER_BLOCK} round trips. On a shared \
             two-core machine a run's total time mostly counts how often another process took \
             one of the cores; the median part is the rate while both threads ran. In \
             `throughput`, `rtt` and `backtracking` each end of a queue and the stop flag sit \
             on cache lines of their own, so one thread's writes to its end never take a line \
             the other thread reads."
        ));
        bench.note(
            "Baselines (`baseline::…`) are written from the B-Queue paper's figures, not the \
             authors' code: Lamport (head and tail in one cache line), FastForward with temporal \
             slipping (DANGER 2, GOOD 6 cache lines, checked every 256 dequeues), MCRingBuffer \
             with batched index updates (batch as for pitlane), plain (`deadlock`) and with an \
             auxiliary thread that ticks every 10 µs (`thread::sleep`, so in practice every \
             ~60 µs or more) after which the producer fills its partial batch with garbage the \
             consumer discards (`sane`). `rtt` leaves out MCRingBuffer(deadlock): a single \
             item never completes a batch, so ping-pong deadlocks (the paper's Section 2.5); in \
             `rtt` and `backtracking` the sane form's producer also checks the tick while it \
             waits.",
        );
        bench.note(format!(
            "`backtracking` timestamps each item with `Instant::now()` just before the push and \
             just after the pop (two clock reads, ~20-40 ns, are inside every figure); the \
             producer pauses {} µs between pushes. `pitlane::spsc (adaptive off)` is the same \
             queue with the paper's plain backtracking (every search starts from the full \
             batch).",
            PAUSE.as_micros()
        ));

        for (capacity, batch) in [
            (PAPER_CAPACITY, PAPER_BATCH),
            (LARGE_CAPACITY, pitlane::default_batch(LARGE_CAPACITY)),
        ] {
            let mut case = Case::new(
                "throughput",
                params! {"threads" => 2, "capacity" => capacity, "batch" => batch, "items" => throughput_items},
                vec![ns_per_item()],
            );
            for subject in all_lanes(Shape::Throughput {
                capacity,
                batch,
                items: throughput_items,
            }) {
                case.push(subject);
            }
            bench.measure(case)?;
        }

        for queues in QUEUE_COUNTS {
            let mut case = Case::new(
                "multi_queue",
                params! {"threads" => 2, "queues" => queues, "capacity" => PAPER_CAPACITY, "batch" => PAPER_BATCH, "items" => multi_items},
                vec![ns_per_item()],
            );
            for subject in all_lanes(Shape::MultiQueue {
                queues,
                items: multi_items,
            }) {
                case.push(subject);
            }
            bench.measure(case)?;
        }

        let mut case = Case::new(
            "rtt",
            params! {"threads" => 2, "capacity" => PAPER_CAPACITY, "batch" => PAPER_BATCH},
            vec![rtt_metric()],
        );
        for subject in all_lanes(Shape::RoundTrip { run_for: rtt_for }) {
            case.push(subject);
        }
        bench.measure(case)?;

        let mut case = Case::new(
            "backtracking",
            params! {"threads" => 2, "capacity" => PAPER_CAPACITY, "batch" => PAPER_BATCH, "items" => latency_items},
            vec![
                Metric::new("latency_p50_ns", "ns", Better::Lower),
                Metric::new("latency_p99_ns", "ns", Better::Lower),
            ],
        );
        for subject in all_lanes(Shape::Backtracking {
            items: latency_items,
        }) {
            case.push(subject);
        }
        bench.measure(case)?;

        for batch in BATCH_SIZES {
            let shape = Shape::Throughput {
                capacity: PAPER_CAPACITY,
                batch,
                items: sweep_items,
            };
            let case = Case::new(
                "batch_size",
                params! {"threads" => 2, "capacity" => PAPER_CAPACITY, "batch" => batch, "items" => sweep_items},
                vec![ns_per_item()],
            )
            .subject(subject::<PitlaneSpsc<true>>(shape))
            .subject(subject::<Rtrb>(shape));
            bench.measure(case)?;
        }
        Ok(())
    }
}

fn rtt_metric() -> Metric {
    Metric::new("ns_per_round_trip", "ns", Better::Lower)
}

fn ns_per_item() -> Metric {
    Metric::new("ns_per_item", "ns", Better::Lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subject of every workload runs correctly at a small size.
    #[test]
    fn every_subject_passes_its_own_checks() {
        let shapes = [
            Shape::Throughput {
                capacity: 64,
                batch: 16,
                items: 20_000,
            },
            Shape::MultiQueue {
                queues: 3,
                items: 3 * 256 * 4,
            },
            Shape::RoundTrip {
                run_for: Duration::from_millis(5),
            },
            Shape::Backtracking { items: 512 },
        ];
        fn check<L: Lane>(shape: Shape) {
            let values =
                run_shape::<L>(shape).unwrap_or_else(|e| panic!("{} on {shape:?}: {e}", L::NAME));
            assert!(
                values.iter().all(|v| *v > 0.0),
                "{} on {shape:?}: {values:?}",
                L::NAME
            );
        }
        for shape in shapes {
            // The same subjects as `all_lanes`.
            assert_eq!(
                all_lanes(shape).len(),
                match shape {
                    Shape::RoundTrip { .. } => 8,
                    Shape::Backtracking { .. } => 10,
                    _ => 9,
                }
            );
            check::<PitlaneSpsc<true>>(shape);
            check::<PitlaneSpsc<false>>(shape);
            check::<Rtrb>(shape);
            check::<Ringbuf>(shape);
            check::<ArrayQueue>(shape);
            check::<SyncChannel>(shape);
            check::<Lamport>(shape);
            check::<FastForward>(shape);
            check::<McRingBuffer<true>>(shape);
            if !matches!(shape, Shape::RoundTrip { .. }) {
                check::<McRingBuffer<false>>(shape);
            }
        }
    }

    /// A queue that loses a value is caught.
    #[test]
    fn a_lost_value_aborts_the_run() {
        struct Leaky;
        struct LeakyTx(pitlane::Producer<u64>);
        impl Tx for LeakyTx {
            fn try_push(&mut self, value: u64) -> bool {
                value == 77 || self.0.try_push(value).is_ok()
            }
        }
        impl Lane for Leaky {
            const NAME: &'static str = "leaky";
            type Tx = LeakyTx;
            type Rx = pitlane::Consumer<u64>;
            fn pair(capacity: usize, batch: usize, ticker: &Ticker) -> (LeakyTx, Self::Rx) {
                let (tx, rx) = PitlaneSpsc::<true>::pair(capacity, batch, ticker);
                (LeakyTx(tx), rx)
            }
        }
        let error = throughput::<Leaky>(64, 8, 1000).unwrap_err();
        assert!(error.contains("expected value 77, received 78"), "{error}");
    }
}
