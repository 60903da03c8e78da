//! Suite `locks`: the "Racing to Win" experiment.
//!
//! A pool of 4096 objects of 64 bytes keeps its free objects on an intrusive freelist (each
//! free object names the next). T threads each repeat: take an object off the list, write to
//! it, put it back. The list is guarded by each lock in turn — pitlane's three test-and-set spin
//! locks, `std::sync::Mutex`, `parking_lot::Mutex`, a raw `pthread_mutex_t` — or, lock-free, a
//! Treiber stack whose head is a [`TaggedIndex`] (the talk's CAS allocator).
//!
//! Correctness inside every run: an object carries an owner word that must read "free" when it
//! is handed out and the taker's tag when it is returned, so two threads holding one object at
//! once (broken mutual exclusion, an ABA pop) aborts the benchmark; at the end the whole pool
//! must be back on the list exactly once.

use std::cell::UnsafeCell;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lock_api::RawMutex;
use pitlane_sync::spin::{RawTas, RawTasBackoff, RawTtas};
use pitlane_sync::{Tagged, TaggedIndex};

use super::{Suite, Workload, new_histogram, timer_overhead_ns};
use crate::results::{Better, Metric, params};
use crate::runner::{Bench, BenchError, Case, Subject};

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

/// One subject's run: threads, duration, optional latency histogram -> pairs per second.
type Runner = fn(usize, Duration, Option<&mut Histogram<u64>>) -> Result<f64, String>;

/// Subject name, whether it is a peer, and its run (monomorphised per freelist, so no subject
/// pays for dynamic dispatch).
fn subjects() -> Vec<(&'static str, bool, Runner)> {
    vec![
        (
            "pitlane::spin::TasMutex",
            false,
            run_pairs::<LockApiList<RawTas>>,
        ),
        (
            "pitlane::spin::TtasMutex",
            false,
            run_pairs::<LockApiList<RawTtas>>,
        ),
        (
            "pitlane::spin::TasBackoffMutex",
            false,
            run_pairs::<LockApiList<RawTasBackoff>>,
        ),
        (
            "pitlane::TaggedIndex (Treiber freelist)",
            false,
            run_pairs::<TreiberList>,
        ),
        ("std::sync::Mutex", true, run_pairs::<StdList>),
        (
            "parking_lot::Mutex",
            true,
            run_pairs::<LockApiList<parking_lot::RawMutex>>,
        ),
        (
            "libc::pthread_mutex_t",
            true,
            run_pairs::<LockApiList<RawPthreadMutex>>,
        ),
    ]
}

/// The operations every subject provides: take a free index, give one back.
pub trait Freelist: Send + Sync {
    /// Takes a free object's index, `None` when none is free.
    fn alloc(&self) -> Option<u32>;
    /// Returns an object taken by `alloc`.
    fn free(&self, index: u32);
    /// A list holding every object of the pool.
    fn full() -> Self
    where
        Self: Sized;
}

/// The freelist as sequential code, for the lock-based subjects.
struct ListState {
    head: u32,
    next: Box<[u32]>,
}

impl ListState {
    fn full() -> Self {
        let next = (1..=OBJECTS)
            .map(|i| if i == OBJECTS { NIL } else { i })
            .collect();
        Self { head: 0, next }
    }

    #[inline]
    fn pop(&mut self) -> Option<u32> {
        let head = self.head;
        if head == NIL {
            return None;
        }
        self.head = self.next[head as usize];
        Some(head)
    }

    #[inline]
    fn push(&mut self, index: u32) {
        self.next[index as usize] = self.head;
        self.head = index;
    }
}

struct LockApiList<R: RawMutex>(lock_api::Mutex<R, ListState>);

impl<R: RawMutex + Send + Sync> Freelist for LockApiList<R> {
    fn full() -> Self {
        Self(lock_api::Mutex::new(ListState::full()))
    }

    #[inline]
    fn alloc(&self) -> Option<u32> {
        self.0.lock().pop()
    }

    #[inline]
    fn free(&self, index: u32) {
        self.0.lock().push(index)
    }
}

struct StdList(std::sync::Mutex<ListState>);

impl Freelist for StdList {
    fn full() -> Self {
        Self(std::sync::Mutex::new(ListState::full()))
    }

    #[inline]
    fn alloc(&self) -> Option<u32> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    #[inline]
    fn free(&self, index: u32) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(index)
    }
}

/// The talk's lock-free allocator: a Treiber stack of indices whose head carries a
/// generation, so a pop that read a stale successor fails its compare-exchange.
struct TreiberList {
    head: TaggedIndex,
    next: Box<[AtomicU32]>,
}

impl Freelist for TreiberList {
    fn full() -> Self {
        let next = (1..=OBJECTS)
            .map(|i| AtomicU32::new(if i == OBJECTS { NIL } else { i }))
            .collect();
        Self {
            head: TaggedIndex::new(0),
            next,
        }
    }

    #[inline]
    fn alloc(&self) -> Option<u32> {
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            if head.is_nil() {
                return None;
            }
            // May be stale if `head` was popped meanwhile; then the generation has moved on
            // and the exchange below fails.
            let next = self.next[head.index() as usize].load(Ordering::Relaxed);
            match self
                .head
                .compare_exchange_weak(head, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some(head.index()),
                Err(seen) => head = seen,
            }
        }
    }

    #[inline]
    fn free(&self, index: u32) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            self.next[index as usize].store(head.index(), Ordering::Relaxed);
            match self
                .head
                .compare_exchange_weak(head, index, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(seen) => head = seen,
            }
        }
    }
}

/// A `pthread_mutex_t` as a `lock_api` raw mutex, so the pthread subject runs the same code as
/// the others.
pub struct RawPthreadMutex(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: a pthread mutex is made to be shared between threads; all access goes through the
// pthread functions.
unsafe impl Sync for RawPthreadMutex {}
// SAFETY: as above; an unlocked mutex may move between threads.
unsafe impl Send for RawPthreadMutex {}

// SAFETY: pthread_mutex_lock/trylock/unlock give mutual exclusion; a default (normal) mutex is
// unlocked only by its holder, which lock_api guarantees.
unsafe impl RawMutex for RawPthreadMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawPthreadMutex(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
    type GuardMarker = lock_api::GuardNoSend;

    fn lock(&self) {
        // SAFETY: the mutex was statically initialised and is not moved while in use (it
        // lives inside a boxed pool for its whole life).
        let rc = unsafe { libc::pthread_mutex_lock(self.0.get()) };
        assert_eq!(rc, 0, "pthread_mutex_lock failed");
    }

    fn try_lock(&self) -> bool {
        // SAFETY: as in `lock`.
        unsafe { libc::pthread_mutex_trylock(self.0.get()) == 0 }
    }

    unsafe fn unlock(&self) {
        // SAFETY: the caller holds the lock (RawMutex contract); the mutex is initialised.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
    }
}

impl Drop for RawPthreadMutex {
    fn drop(&mut self) {
        // SAFETY: nobody holds or waits on the mutex: we have `&mut self`.
        unsafe { libc::pthread_mutex_destroy(self.0.get()) };
    }
}

/// One 64-byte object; word 0 records who holds it (0 when free).
#[repr(align(64))]
struct Object {
    words: [AtomicU64; OBJECT_SIZE / 8],
}

struct Pool<F> {
    list: F,
    objects: Box<[Object]>,
}

impl<F: Freelist> Pool<F> {
    fn new(list: F) -> Self {
        let objects = (0..OBJECTS)
            .map(|_| Object {
                words: Default::default(),
            })
            .collect();
        Self { list, objects }
    }
}

/// A pool as the workload sees it.
trait PoolOps: Sync {
    fn take(&self, tag: u64) -> Result<u32, String>;
    fn give_back(&self, index: u32, tag: u64) -> Result<(), String>;
    /// Empties the list and checks that every object was on it exactly once.
    fn check_complete(&self) -> Result<(), String>;
}

impl<F: Freelist> PoolOps for Pool<F> {
    #[inline]
    fn take(&self, tag: u64) -> Result<u32, String> {
        let index = self
            .list
            .alloc()
            .ok_or("freelist empty with objects to spare")?;
        let owner = &self.objects[index as usize].words[0];
        let previous = owner.load(Ordering::Relaxed);
        if previous != 0 {
            return Err(format!(
                "object {index} handed to thread {tag} while thread {previous} holds it"
            ));
        }
        owner.store(tag, Ordering::Relaxed);
        Ok(index)
    }

    #[inline]
    fn give_back(&self, index: u32, tag: u64) -> Result<(), String> {
        let owner = &self.objects[index as usize].words[0];
        let seen = owner.load(Ordering::Relaxed);
        if seen != tag {
            return Err(format!(
                "object {index} held by thread {tag} was taken by thread {seen} meanwhile"
            ));
        }
        owner.store(0, Ordering::Relaxed);
        self.list.free(index);
        Ok(())
    }

    fn check_complete(&self) -> Result<(), String> {
        let mut seen = vec![false; OBJECTS as usize];
        while let Some(i) = self.list.alloc() {
            let slot = seen
                .get_mut(i as usize)
                .ok_or_else(|| format!("index {i} out of range"))?;
            if std::mem::replace(slot, true) {
                return Err(format!("object {i} is on the freelist twice"));
            }
        }
        let missing = seen.iter().filter(|s| !**s).count();
        if missing > 0 {
            return Err(format!("{missing} objects lost from the freelist"));
        }
        Ok(())
    }
}

/// Runs `threads` threads doing alloc/free pairs for `run_for`; returns pairs per second. With
/// `latency`, each single alloc and free is timed into it (the pairs per second are then a
/// by-product that includes the timing cost).
fn run_pairs<F: Freelist>(
    threads: usize,
    run_for: Duration,
    latency: Option<&mut Histogram<u64>>,
) -> Result<f64, String> {
    let pool = Pool::new(F::full());
    let pool = &pool;
    let timed = latency.is_some();
    let stop = AtomicBool::new(false);
    let start = Barrier::new(threads + 1);
    let outcomes: Vec<Result<Outcome, String>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, start) = (&stop, &start);
                s.spawn(move || {
                    start.wait();
                    worker(pool, t as u64 + 1, stop, timed)
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(run_for);
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("worker panicked".into())))
            .collect()
    });
    let mut pairs = 0_u64;
    let mut first_start: Option<Instant> = None;
    let mut last_end: Option<Instant> = None;
    let mut merged = latency;
    for outcome in outcomes {
        let outcome = outcome?;
        pairs += outcome.pairs;
        first_start = Some(first_start.map_or(outcome.started, |s| s.min(outcome.started)));
        last_end = Some(last_end.map_or(outcome.ended, |e| e.max(outcome.ended)));
        if let (Some(total), Some(h)) = (merged.as_deref_mut(), outcome.histogram) {
            total.add(&h).map_err(|e| format!("histogram merge: {e}"))?;
        }
    }
    pool.check_complete()?;
    let elapsed = match (first_start, last_end) {
        (Some(s), Some(e)) => (e - s).as_secs_f64(),
        _ => return Err("no worker ran".into()),
    };
    Ok(pairs as f64 / elapsed)
}

struct Outcome {
    pairs: u64,
    started: Instant,
    ended: Instant,
    histogram: Option<Histogram<u64>>,
}

/// Pairs are done in rounds of this many between looks at the stop flag.
const ROUND: u64 = 32;

fn worker(
    pool: &impl PoolOps,
    tag: u64,
    stop: &AtomicBool,
    timed: bool,
) -> Result<Outcome, String> {
    let started = Instant::now();
    let mut pairs = 0_u64;
    let mut histogram = timed.then(new_histogram);
    while !stop.load(Ordering::Relaxed) {
        match histogram.as_mut() {
            None => {
                for _ in 0..ROUND {
                    let index = pool.take(tag)?;
                    pool.give_back(index, tag)?;
                }
            }
            Some(h) => {
                for _ in 0..ROUND {
                    let t0 = Instant::now();
                    let index = pool.take(tag)?;
                    let t1 = Instant::now();
                    pool.give_back(index, tag)?;
                    let t2 = Instant::now();
                    h.saturating_record((t1 - t0).as_nanos() as u64);
                    h.saturating_record((t2 - t1).as_nanos() as u64);
                }
            }
        }
        pairs += ROUND;
    }
    Ok(Outcome {
        pairs,
        started,
        ended: Instant::now(),
        histogram,
    })
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
        let pool = Pool::new(TreiberList::full());
        let index = pool.take(1).unwrap();
        // Put it back behind the holder's back: the next taker finds it owned.
        pool.list.free(index);
        let err = pool.take(2).unwrap_err();
        assert!(err.contains("while thread 1 holds it"), "{err}");
    }

    #[test]
    fn a_lost_object_is_detected() {
        let pool = Pool::new(StdList::full());
        let _leaked = pool.take(1).unwrap();
        let err = pool.check_complete().unwrap_err();
        assert!(err.contains("1 objects lost"), "{err}");
    }

    #[test]
    fn latency_histogram_collects_two_samples_per_pair() {
        let mut h = new_histogram();
        run_pairs::<LockApiList<RawTtas>>(1, Duration::from_millis(5), Some(&mut h)).unwrap();
        assert!(h.len() >= 2 * ROUND);
        assert_eq!(h.len() % 2, 0);
    }
}
