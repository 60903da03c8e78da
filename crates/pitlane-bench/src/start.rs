//! Starting a measurement's threads together, or saying plainly that the OS would not start
//! them all.
//!
//! A workload's threads wait at a [`StartLine`] until every one of them (and the thread that
//! times them) has arrived, as at a `std::sync::Barrier`. A barrier cannot be called off,
//! though: if the OS refuses the k-th thread (`--threads 1000` under a tight `ulimit -v`),
//! the k - 1 started would wait for good and `std::thread::Scope::spawn` would panic. So the
//! threads are spawned through [`spawn_each`], which on a refusal lets the caller stop the
//! workload and [`abandon`](StartLine::abandon) the line, so that the started threads run out
//! and are joined, and returns the refusal as an error for the report.

use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::{self, Scope, ScopedJoinHandle};

/// Where the threads of a measurement wait until all have arrived (see the module doc).
///
/// ```
/// use pitlane_bench::start::StartLine;
///
/// let line = StartLine::new(2);
/// std::thread::scope(|s| {
///     s.spawn(|| line.wait());
///     line.wait(); // both have arrived: both go
/// });
/// ```
#[derive(Debug)]
pub struct StartLine {
    parties: usize,
    /// Threads arrived so far, and whether the line is open.
    state: Mutex<(usize, bool)>,
    opened: Condvar,
}

impl StartLine {
    /// A line that opens once `parties` threads wait at it.
    pub fn new(parties: usize) -> Self {
        Self {
            parties,
            state: Mutex::new((0, parties == 0)),
            opened: Condvar::new(),
        }
    }

    /// Arrives, and waits until the line opens: when the last of the parties arrives, or when
    /// it is abandoned.
    pub fn wait(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 += 1;
        if state.0 >= self.parties {
            state.1 = true;
            self.opened.notify_all();
        }
        while !state.1 {
            state = self
                .opened
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Opens the line now, whoever has arrived: for a spawner that could not start every
    /// party, so that those it started go on (to see that they should stop) and end.
    ///
    /// ```
    /// use pitlane_bench::start::StartLine;
    ///
    /// let line = StartLine::new(3);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| line.wait());
    ///     line.abandon(); // the third party never comes
    /// });
    /// ```
    pub fn abandon(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.1 = true;
        self.opened.notify_all();
    }
}

/// Spawns one scoped thread per body, in order. If the OS refuses one, calls `abandon` with
/// the number of threads started (it must make them end: set the workload's stop flag,
/// abandon its [`StartLine`]) and returns the refusal, naming which thread of how many
/// (`count`); the threads started are joined when the scope ends.
///
/// # Errors
/// `"could not start thread K of N: <the OS's reason>"`.
///
/// ```
/// use pitlane_bench::start::{StartLine, spawn_each};
///
/// let line = StartLine::new(3);
/// let sums = std::thread::scope(|s| {
///     let bodies = (0..2u64).map(|t| {
///         let line = &line;
///         move || {
///             line.wait();
///             t * 10
///         }
///     });
///     let threads = spawn_each(s, 2, bodies, |_started| line.abandon())?;
///     line.wait();
///     Ok::<_, String>(threads.into_iter().map(|t| t.join().unwrap()).sum::<u64>())
/// });
/// assert_eq!(sums, Ok(10));
/// ```
pub fn spawn_each<'scope, T, B>(
    scope: &'scope Scope<'scope, '_>,
    count: usize,
    bodies: impl IntoIterator<Item = B>,
    abandon: impl FnOnce(usize),
) -> Result<Vec<ScopedJoinHandle<'scope, T>>, String>
where
    T: Send + 'scope,
    B: FnOnce() -> T + Send + 'scope,
{
    spawn_each_with(scope, count, bodies, abandon, |_| thread::Builder::new())
}

/// [`spawn_each`] with the builder of each thread from `builder(index)` (tests make the OS
/// refuse one through an impossible stack size).
fn spawn_each_with<'scope, T, B>(
    scope: &'scope Scope<'scope, '_>,
    count: usize,
    bodies: impl IntoIterator<Item = B>,
    abandon: impl FnOnce(usize),
    builder: impl Fn(usize) -> thread::Builder,
) -> Result<Vec<ScopedJoinHandle<'scope, T>>, String>
where
    T: Send + 'scope,
    B: FnOnce() -> T + Send + 'scope,
{
    let mut started = Vec::with_capacity(count);
    for (index, body) in bodies.into_iter().enumerate() {
        match builder(index).spawn_scoped(scope, body) {
            Ok(handle) => started.push(handle),
            Err(refused) => {
                abandon(started.len());
                return Err(format!("{REFUSAL} {} of {count}: {refused}", index + 1));
            }
        }
    }
    Ok(started)
}

/// Spawns one scoped thread, or returns the OS's refusal as [`spawn_each`] does (for a
/// workload whose only other thread is the caller, which has not waited for it yet).
///
/// # Errors
/// `"could not start thread 1 of 1: <the OS's reason>"`.
///
/// ```
/// let doubled = std::thread::scope(|s| {
///     let thread = pitlane_bench::start::spawn_one(s, || 21 * 2)?;
///     Ok::<_, String>(thread.join().unwrap())
/// });
/// assert_eq!(doubled, Ok(42));
/// ```
pub fn spawn_one<'scope, T, B>(
    scope: &'scope Scope<'scope, '_>,
    body: B,
) -> Result<ScopedJoinHandle<'scope, T>, String>
where
    T: Send + 'scope,
    B: FnOnce() -> T + Send + 'scope,
{
    thread::Builder::new()
        .spawn_scoped(scope, body)
        .map_err(|refused| format!("{REFUSAL} 1 of 1: {refused}"))
}

/// How [`spawn_each`]'s error begins: workloads return it as their `String` error, and the
/// runner tells it from a wrong result by this ([`is_refusal`]).
pub(crate) const REFUSAL: &str = "could not start thread";

/// Whether a workload's error is [`spawn_each`]'s refusal rather than a wrong result.
///
/// ```
/// assert!(pitlane_bench::start::is_refusal("could not start thread 3 of 8: out of memory"));
/// assert!(!pitlane_bench::start::is_refusal("item 7 popped twice"));
/// ```
pub fn is_refusal(why: &str) -> bool {
    why.starts_with(REFUSAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn a_line_opens_only_when_every_party_has_arrived() {
        let line = StartLine::new(4);
        let passed = AtomicUsize::new(0);
        thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    line.wait();
                    passed.fetch_add(1, Ordering::SeqCst);
                });
            }
            thread::sleep(std::time::Duration::from_millis(50));
            assert_eq!(
                passed.load(Ordering::SeqCst),
                0,
                "passed before the last party"
            );
            line.wait();
        });
        assert_eq!(passed.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_refused_thread_is_named_and_the_started_ones_are_let_go_and_end() {
        let line = StartLine::new(4);
        let stop = AtomicBool::new(false);
        let ended = AtomicUsize::new(0);
        let result = thread::scope(|s| {
            let bodies = (0..3).map(|_| {
                let (line, stop, ended) = (&line, &stop, &ended);
                move || {
                    line.wait();
                    while !stop.load(Ordering::SeqCst) {
                        thread::yield_now();
                    }
                    ended.fetch_add(1, Ordering::SeqCst);
                }
            });
            let abandon = |started| {
                assert_eq!(started, 2);
                stop.store(true, Ordering::SeqCst);
                line.abandon();
            };
            // The third thread asks for a stack no machine can map: the OS refuses it.
            let builder = |index| match index {
                2 => thread::Builder::new().stack_size(usize::MAX / 2),
                _ => thread::Builder::new(),
            };
            spawn_each_with(s, 3, bodies, abandon, builder).map(|_| ())
        });
        let error = result.unwrap_err();
        assert!(
            error.starts_with("could not start thread 3 of 3: "),
            "{error}"
        );
        assert!(is_refusal(&error));
        assert_eq!(
            ended.load(Ordering::SeqCst),
            2,
            "the two started threads ran out"
        );
    }

    #[test]
    fn every_body_runs_when_none_is_refused() {
        let abandoned = AtomicBool::new(false);
        let joined: Vec<usize> = thread::scope(|s| {
            let threads = spawn_each(s, 3, (0..3).map(|t| move || t), |_| {
                abandoned.store(true, Ordering::SeqCst)
            })
            .unwrap();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(joined, [0, 1, 2]);
        assert!(!abandoned.load(Ordering::SeqCst));
    }
}
