//! Suite `locks`: the "Racing to Win" experiment.
//!
//! A pool of 4096 objects of 64 bytes keeps its free objects on an intrusive freelist (each
//! free object names the next). T threads each repeat: take an object off the list, write to
//! it, put it back. The list is guarded by each lock in turn — pitlane's three test-and-set spin
//! locks, `std::sync::Mutex`, `parking_lot::Mutex`, a raw `pthread_mutex_t` — or, lock-free,
//! `pitlane_slab::Slab`, whose freelists are Treiber stacks with tagged-index heads
//! (the talk's CAS allocator, as pitlane ships it).
//!
//! Correctness inside every run: an object carries an owner word that must read "free" when it
//! is handed out and the taker's tag when it is returned, so two threads holding one object at
//! once (broken mutual exclusion, an ABA pop) aborts the benchmark; at the end the whole pool
//! must be back on the list exactly once.

use std::cell::UnsafeCell;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use hdrhistogram::Histogram;
use lock_api::RawMutex;
use pitlane_sync::Tagged;
use pitlane_sync::spin::{RawTas, RawTasBackoff, RawTtas};

use super::pairs::{PairSubject, run_threads, stamp_off, stamp_on};
use super::{Suite, Workload, new_histogram, timer_overhead_ns};

pub(crate) mod subjects;
pub(crate) mod workloads;

use crate::results::{Better, Metric, params};
use crate::runner::{Bench, BenchError, Case, Subject};
pub use subjects::RawPthreadMutex;
use subjects::*;
use workloads::*;

/// Objects in the pool.
pub const OBJECTS: u32 = 4096;
/// Bytes per object.
pub const OBJECT_SIZE: usize = 64;
const NIL: u32 = <Tagged>::NIL;

/// The suite.
pub struct Locks;

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "throughput",
        about: "alloc/free pairs per second on a 4096 x 64 B pool, 1/2/4 threads",
    },
    Workload {
        name: "latency",
        about: "one alloc or one free, p50/p99/p99.9/max in ns, 1/2/4 threads",
    },
];

impl Suite for Locks {
    fn name(&self) -> &'static str {
        "locks"
    }

    fn about(&self) -> &'static str {
        "a 4096-object freelist behind spin locks, std/parking_lot/pthread mutexes, and lock-free CAS"
    }

    fn workloads(&self) -> &'static [Workload] {
        WORKLOADS
    }

    fn run(&self, bench: &mut Bench) -> Result<(), BenchError> {
        let threads = bench.config().threads(&[1, 2, 4]);
        let run_for = bench.config().duration(400);
        bench.note(format!(
            "Each run lasts {} ms per subject; threads beyond the machine's {} cores \
             oversubscribe it, so a spin-lock holder can be preempted while others spin.",
            run_for.as_millis(),
            crate::env::cores()
        ));
        bench.note(format!(
            "Latency is timed with `std::time::Instant` (clock_gettime(CLOCK_MONOTONIC) \
             through the vDSO) around each single alloc and each single free; every figure \
             includes the timer's own cost, measured at {:.0} ns for an empty interval (median) \
             on this run. The clock's resolution here is about 10 ns.",
            timer_overhead_ns()
        ));
        for &t in &threads {
            let throughput = Metric::new("pairs_per_s", "pairs/s", Better::Higher);
            let mut case = Case::new(
                "throughput",
                params! {"threads" => t, "capacity" => OBJECTS, "size" => OBJECT_SIZE},
                vec![throughput],
            );
            for (name, peer, run_pairs) in subjects() {
                let run = move || Ok(vec![run_pairs(t, run_for, None)?]);
                case.push(if peer {
                    Subject::peer(name, run)
                } else {
                    Subject::ours(name, run)
                });
            }
            bench.measure(case)?;
        }
        for &t in &threads {
            let metrics = vec![
                Metric::new("latency_p50_ns", "ns", Better::Lower),
                Metric::new("latency_p99_ns", "ns", Better::Lower),
                Metric::new("latency_p999_ns", "ns", Better::Lower),
                Metric::new("latency_max_ns", "ns", Better::Lower),
            ];
            let mut case = Case::new(
                "latency",
                params! {"threads" => t, "capacity" => OBJECTS, "size" => OBJECT_SIZE},
                metrics,
            );
            for (name, peer, run_pairs) in subjects() {
                let run = move || {
                    let mut hist = new_histogram();
                    run_pairs(t, run_for, Some(&mut hist))?;
                    Ok([0.5, 0.99, 0.999]
                        .iter()
                        .map(|&q| hist.value_at_quantile(q) as f64)
                        .chain([hist.max() as f64])
                        .collect())
                };
                case.push(if peer {
                    Subject::peer(name, run)
                } else {
                    Subject::ours(name, run)
                });
            }
            bench.measure(case)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subject_keeps_the_pool_whole_under_two_threads() {
        for (name, _, run) in subjects() {
            let rate =
                run(2, Duration::from_millis(20), None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(rate > 0.0, "{name}");
        }
    }

    #[test]
    fn a_double_allocation_is_detected() {
        let pool = Pool::new(SlabList::full());
        let index = pool.take(1).unwrap();
        // Put it back behind the holder's back: once the never-used objects are handed out,
        // a taker finds it owned.
        pool.list.free(index);
        let err = (0..=OBJECTS)
            .find_map(|_| pool.take(2).err())
            .expect("the object freed behind its holder's back comes back");
        assert!(err.contains("while thread 1 holds it"), "{err}");
    }

    #[test]
    fn a_lost_object_is_detected() {
        let pool = Pool::new(StdList::full());
        let _leaked = pool.take(1).unwrap();
        let err = pool.check().unwrap_err();
        assert!(err.contains("1 objects lost"), "{err}");
    }

    #[test]
    fn latency_histogram_collects_two_samples_per_pair() {
        let mut h = new_histogram();
        run_pairs::<LockApiList<RawTtas>>(1, Duration::from_millis(5), Some(&mut h)).unwrap();
        assert!(h.len() >= 2 * super::super::pairs::ROUND);
        assert_eq!(h.len() % 2, 0);
    }
}
