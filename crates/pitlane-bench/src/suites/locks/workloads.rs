//! The workloads of the `locks` suite: threads that take and return objects of a pool, and
//! the check that no object is ever held twice.

use super::*;

/// One 64-byte object; word 0 records who holds it (0 when free).
#[repr(align(64))]
pub(super) struct Object {
    pub(super) words: [AtomicU64; OBJECT_SIZE / 8],
}

pub(super) struct Pool<F> {
    pub(super) list: F,
    pub(super) objects: Box<[Object]>,
}

impl<F: Freelist> Pool<F> {
    pub(super) fn new(list: F) -> Self {
        let objects = (0..OBJECTS)
            .map(|_| Object {
                words: Default::default(),
            })
            .collect();
        Self { list, objects }
    }
}

/// A pool as the workload sees it.
pub(super) trait PoolOps: Sync {
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
pub(super) fn run_pairs<F: Freelist>(
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

pub(super) struct Outcome {
    pub(super) pairs: u64,
    pub(super) started: Instant,
    pub(super) ended: Instant,
    pub(super) histogram: Option<Histogram<u64>>,
}

/// Pairs are done in rounds of this many between looks at the stop flag.
pub(super) const ROUND: u64 = 32;

pub(super) fn worker(
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
