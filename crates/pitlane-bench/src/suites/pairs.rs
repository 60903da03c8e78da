//! The timed pair loop the `locks` and `slab` suites share: T threads each repeat "take an
//! object, give it back" for a while, optionally timing each single take and give-back, and
//! every object carries a stamp that catches two holders at once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::new_histogram;
use crate::start::{StartLine, spawn_each};

/// An allocator or pool under test, as the pair loop sees it.
pub(crate) trait PairSubject: Sync {
    /// What `take` hands out.
    type Handle: Copy;
    /// Takes an object for the thread tagged `tag` (stamping it).
    fn take(&self, tag: u64) -> Result<Self::Handle, String>;
    /// Gives `h` back (checking and clearing the stamp).
    fn give_back(&self, h: Self::Handle, tag: u64) -> Result<(), String>;
    /// After the run: everything given back, nothing lost or held twice.
    fn check(&self) -> Result<(), String>;
}

/// Stamps `word` with `tag`; it must have been 0 (nobody held `what`).
#[inline]
pub(crate) fn stamp_on(
    word: &AtomicU64,
    tag: u64,
    what: &dyn std::fmt::Display,
) -> Result<(), String> {
    let before = word.swap(tag, Ordering::Relaxed);
    if before != 0 {
        return Err(format!(
            "{what} handed to thread {tag} while thread {before} holds it"
        ));
    }
    Ok(())
}

/// Clears `word`, which must still hold `tag`.
#[inline]
pub(crate) fn stamp_off(
    word: &AtomicU64,
    tag: u64,
    what: &dyn std::fmt::Display,
) -> Result<(), String> {
    let before = word.swap(0, Ordering::Relaxed);
    if before != tag {
        return Err(format!(
            "{what} held by thread {tag} was stamped {before} meanwhile"
        ));
    }
    Ok(())
}

/// Pairs are done in rounds of this many between looks at the stop flag.
pub(crate) const ROUND: u64 = 32;

/// What one thread did.
struct Outcome {
    pairs: u64,
    started: Instant,
    ended: Instant,
    histogram: Option<Histogram<u64>>,
}

/// Pairs until `stop`, timing each take and give-back when `timed`.
fn worker<S: PairSubject>(
    s: &S,
    tag: u64,
    stop: &AtomicBool,
    timed: bool,
) -> Result<Outcome, String> {
    let started = Instant::now();
    let mut pairs = 0;
    let mut histogram = timed.then(new_histogram);
    while !stop.load(Ordering::Relaxed) {
        match histogram.as_mut() {
            None => {
                for _ in 0..ROUND {
                    let h = s.take(tag)?;
                    s.give_back(h, tag)?;
                }
            }
            Some(hist) => {
                for _ in 0..ROUND {
                    let t0 = Instant::now();
                    let h = s.take(tag)?;
                    let t1 = Instant::now();
                    s.give_back(h, tag)?;
                    let t2 = Instant::now();
                    hist.saturating_record((t1 - t0).as_nanos() as u64);
                    hist.saturating_record((t2 - t1).as_nanos() as u64);
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

/// `threads` threads (tagged 1 to `threads`) doing pairs on `s` for `run_for`, started
/// together; returns pairs per second from the first start to the last end, then runs the
/// subject's check. With `latency`, each single take and give-back is timed into it (the pairs
/// per second then include the timing cost).
pub(crate) fn run_threads<S: PairSubject>(
    s: &S,
    threads: usize,
    run_for: Duration,
    mut latency: Option<&mut Histogram<u64>>,
) -> Result<f64, String> {
    let timed = latency.is_some();
    let stop = AtomicBool::new(false);
    let start = StartLine::new(threads + 1);
    let outcomes: Vec<Result<Outcome, String>> = std::thread::scope(|scope| {
        let bodies = (0..threads).map(|t| {
            let (stop, start) = (&stop, &start);
            move || {
                start.wait();
                worker(s, t as u64 + 1, stop, timed)
            }
        });
        let handles = spawn_each(scope, threads, bodies, |_| {
            stop.store(true, Ordering::Relaxed);
            start.abandon();
        })?;
        start.wait();
        std::thread::sleep(run_for);
        stop.store(true, Ordering::Relaxed);
        Ok::<_, String>(
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("worker panicked".into())))
                .collect(),
        )
    })?;
    let (mut pairs, mut first, mut last) = (0, None::<Instant>, None::<Instant>);
    for o in outcomes {
        let o = o?;
        pairs += o.pairs;
        first = Some(first.map_or(o.started, |f| f.min(o.started)));
        last = Some(last.map_or(o.ended, |l| l.max(o.ended)));
        if let (Some(total), Some(h)) = (latency.as_deref_mut(), o.histogram) {
            total.add(&h).map_err(|e| format!("histogram merge: {e}"))?;
        }
    }
    s.check()?;
    match (first, last) {
        (Some(f), Some(l)) => Ok(pairs as f64 / (l - f).as_secs_f64()),
        _ => Err("no worker ran".into()),
    }
}
