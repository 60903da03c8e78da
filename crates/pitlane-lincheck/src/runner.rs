//! The runner: many rounds of a small random scenario against a structure, each round's
//! history checked, the first failure shrunk and drawn.
//!
//! A round: generate a script of `ops` operations for each of `threads` threads from the
//! round's seed; make a fresh structure ([`Subject::fresh`]); start the threads together;
//! each runs its script, recording every operation; merge the logs and check the history.
//!
//! Seeds: round 0 uses the run's seed itself, and each later round a seed derived from it;
//! thread `t`'s script comes from its own stream of the round seed, so a scenario with fewer
//! threads or fewer operations makes the same random choices as the larger one, cut short. A failure reports the seed,
//! the threads and the operations per thread of the scenario that failed, and running with
//! exactly those settings replays the same scripts (the interleaving is the scheduler's, so
//! a replay may need a few rounds to fail again).
//!
//! Shrinking: after a failure the runner tries smaller scenarios (one thread fewer, half
//! the operations, one operation fewer), each for a number of attempts with the failing
//! seed and seeds derived from it, and keeps any that still fails, until none does or the
//! shrinking time is spent. Only whole recorded histories are reported: a history with
//! operations cut out of it would not be a real execution.

use std::fmt::{self, Debug};
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::checker::{Checker, Counterexample, Verdict};
use crate::history::History;
use crate::recorder::Recorder;
use crate::rng::{SplitMix64, mix64};
use crate::spec::SequentialSpec;

/// The size of one round: how many threads, and how many operations each runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Threads running at once.
    pub threads: usize,
    /// Operations each thread runs.
    pub ops_per_thread: usize,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} threads x {} ops", self.threads, self.ops_per_thread)
    }
}

/// Where an operation is being generated: which thread, which position, and the randomness.
pub struct OpSlot<'a> {
    /// The thread that will run the operation.
    pub thread: usize,
    /// Its position in that thread's script.
    pub index: usize,
    /// A number unique to this operation within its round (`thread * ops_per_thread +
    /// index`), handy for values that must be distinct.
    pub serial: u64,
    /// The thread's random stream.
    pub rng: &'a mut SplitMix64,
}

/// A structure under test, as the runner sees it: a small adapter between the runner's
/// operations and the structure's methods.
///
/// A `Sync` structure used through `&self` needs nothing more than [`Shared`]. Implement the
/// trait directly when threads need their own handles (the producer and consumer of an SPSC
/// queue), or when the operation to run depends on what the thread did before
/// ([`Subject::resolve`], for example to free an object this thread allocated).
pub trait Subject: Sync {
    /// The operations, as the specification names them.
    type Op: Clone + Debug + Send + Sync;
    /// Their results.
    type Ret: Debug + Send;
    /// What one thread holds to reach the structure.
    type Handle: Send;

    /// A fresh structure for one round, and a handle to it for each of `shape.threads`
    /// threads (exactly that many, in thread order).
    fn fresh(&self, shape: Shape) -> Vec<Self::Handle>;

    /// The operation to run for the scripted `planned` one; by default `planned` itself. It
    /// runs before the call is stamped, on the thread that will run the operation.
    fn resolve(&self, _handle: &mut Self::Handle, planned: &Self::Op) -> Self::Op {
        planned.clone()
    }

    /// Runs `op` on the structure through `handle` and returns its result.
    fn apply(&self, handle: &mut Self::Handle, op: &Self::Op) -> Self::Ret;
}

/// A [`Subject`] for a structure that threads share by reference: one closure makes a fresh
/// structure, another applies an operation to it.
///
/// # Examples
///
/// ```
/// use std::collections::VecDeque;
/// use std::sync::Mutex;
/// use pitlane_lincheck::{Runner, Shared, workload};
/// use pitlane_lincheck::specs::{ContainerOp, ContainerRet, QueueSpec};
///
/// let subject = Shared::new(
///     || Mutex::new(VecDeque::new()),
///     |queue: &Mutex<VecDeque<u64>>, op: &ContainerOp<u64>| match op {
///         ContainerOp::Push(v) => {
///             queue.lock().unwrap().push_back(*v);
///             ContainerRet::Pushed
///         }
///         ContainerOp::Pop => queue.lock().unwrap().pop_front().into(),
///     },
/// );
/// Runner::new(QueueSpec::new(), subject, workload::push_pop)
///     .threads(3)
///     .ops(5)
///     .rounds(50)
///     .assert_linearizable();
/// ```
pub struct Shared<T, Op, Ret, M, A> {
    make: M,
    apply: A,
    types: SharedTypes<T, Op, Ret>,
}

/// Ties the structure, operation and result types to a [`Shared`] without owning any.
type SharedTypes<T, Op, Ret> = PhantomData<fn() -> (T, Op, Ret)>;

impl<T, Op, Ret, M, A> Shared<T, Op, Ret, M, A>
where
    M: Fn() -> T,
    A: Fn(&T, &Op) -> Ret,
{
    /// A subject that makes each round's structure with `make` and runs operations with
    /// `apply`.
    pub fn new(make: M, apply: A) -> Self {
        Shared {
            make,
            apply,
            types: PhantomData,
        }
    }
}

impl<T, Op, Ret, M, A> Subject for Shared<T, Op, Ret, M, A>
where
    T: Send + Sync,
    Op: Clone + Debug + Send + Sync,
    Ret: Debug + Send,
    M: Fn() -> T + Sync,
    A: Fn(&T, &Op) -> Ret + Sync,
{
    type Op = Op;
    type Ret = Ret;
    type Handle = Arc<T>;

    fn fresh(&self, shape: Shape) -> Vec<Arc<T>> {
        let structure = Arc::new((self.make)());
        vec![structure; shape.threads]
    }

    fn apply(&self, handle: &mut Arc<T>, op: &Op) -> Ret {
        (self.apply)(handle, op)
    }
}

/// How a run goes: its size, length, seed and how hard to shrink.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// Threads per round (at least 1).
    pub threads: usize,
    /// Operations per thread per round (at least 1).
    pub ops_per_thread: usize,
    /// Rounds to run (at least 1); the run stops at the first failure.
    pub rounds: u64,
    /// The seed of round 0; later rounds derive theirs from it.
    pub seed: u64,
    /// The longest time spent shrinking a failure (one too long for the clock, such as
    /// `Duration::MAX`: no limit but `shrink_attempts`).
    pub shrink_time: Duration,
    /// Attempts at each smaller scenario before giving it up.
    pub shrink_attempts: u32,
    /// The step budget of the checker, per history.
    pub budget: u64,
}

impl Default for Settings {
    /// 4 threads x 8 operations, 1000 rounds, seed `0x5EED`, up to 2 s of shrinking.
    fn default() -> Self {
        Settings {
            threads: 4,
            ops_per_thread: 8,
            rounds: 1000,
            seed: 0x5EED,
            shrink_time: Duration::from_secs(2),
            shrink_attempts: 500,
            budget: Checker::DEFAULT_BUDGET,
        }
    }
}

impl Settings {
    /// Checks that the settings describe a run that can happen.
    ///
    /// # Errors
    ///
    /// A [`SettingsError`] naming the first setting that is out of range.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.threads == 0 {
            return Err(SettingsError::NoThreads);
        }
        if self.threads > MAX_THREADS {
            return Err(SettingsError::TooManyThreads {
                threads: self.threads,
            });
        }
        if self.ops_per_thread == 0 {
            return Err(SettingsError::NoOperations);
        }
        if self.rounds == 0 {
            return Err(SettingsError::NoRounds);
        }
        if self
            .threads
            .checked_mul(self.ops_per_thread)
            .is_none_or(|n| n > MAX_OPERATIONS)
        {
            return Err(SettingsError::TooManyOperations {
                threads: self.threads,
                ops_per_thread: self.ops_per_thread,
            });
        }
        Ok(())
    }

    /// The size of each round.
    pub fn shape(&self) -> Shape {
        Shape {
            threads: self.threads,
            ops_per_thread: self.ops_per_thread,
        }
    }
}

/// The most operations one round may have: beyond a few hundred, a history of a queue or a
/// stack is beyond any checker anyway.
pub const MAX_OPERATIONS: usize = 1 << 20;

/// The most threads one round may have: each is an OS thread, and every thread of a round
/// waits for all of them before it starts.
///
/// ```
/// use pitlane_lincheck::{MAX_THREADS, Settings, SettingsError};
///
/// let settings = Settings { threads: MAX_THREADS + 1, ..Settings::default() };
/// assert_eq!(
///     settings.validate(),
///     Err(SettingsError::TooManyThreads { threads: MAX_THREADS + 1 })
/// );
/// ```
pub const MAX_THREADS: usize = 1024;

/// A setting out of range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingsError {
    /// `threads` is 0.
    NoThreads,
    /// `threads` is more than [`MAX_THREADS`].
    TooManyThreads {
        /// The threads asked for.
        threads: usize,
    },
    /// `ops_per_thread` is 0.
    NoOperations,
    /// `rounds` is 0.
    NoRounds,
    /// `threads * ops_per_thread` is more than [`MAX_OPERATIONS`].
    TooManyOperations {
        /// The threads asked for.
        threads: usize,
        /// The operations per thread asked for.
        ops_per_thread: usize,
    },
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsError::NoThreads => write!(f, "the number of threads must be at least 1"),
            SettingsError::TooManyThreads { threads } => {
                write!(
                    f,
                    "{threads} threads is more than {MAX_THREADS} threads per round"
                )
            }
            SettingsError::NoOperations => {
                write!(f, "the number of operations per thread must be at least 1")
            }
            SettingsError::NoRounds => write!(f, "the number of rounds must be at least 1"),
            SettingsError::TooManyOperations {
                threads,
                ops_per_thread,
            } => write!(
                f,
                "{threads} threads x {ops_per_thread} operations is more than {MAX_OPERATIONS} operations per round"
            ),
        }
    }
}

impl std::error::Error for SettingsError {}

/// Runs rounds of a scenario against a subject and checks each history against a
/// specification.
///
/// `generate` makes each scripted operation from its [`OpSlot`]; see [`crate::workload`] for
/// ready ones.
///
/// # Examples
///
/// See [`Shared`] and the [crate documentation](crate).
pub struct Runner<S, J, G> {
    spec: S,
    subject: J,
    generate: G,
    settings: Settings,
}

impl<S, J, G> Runner<S, J, G>
where
    S: SequentialSpec<Op: Clone + Send + Sync, Ret: Send>,
    J: Subject<Op = S::Op, Ret = S::Ret>,
    G: Fn(&mut OpSlot<'_>) -> S::Op,
{
    /// A runner with [`Settings::default`].
    pub fn new(spec: S, subject: J, generate: G) -> Self {
        Runner {
            spec,
            subject,
            generate,
            settings: Settings::default(),
        }
    }

    /// Replaces all settings.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Sets the threads per round.
    pub fn threads(mut self, threads: usize) -> Self {
        self.settings.threads = threads;
        self
    }

    /// Sets the operations per thread per round.
    pub fn ops(mut self, ops_per_thread: usize) -> Self {
        self.settings.ops_per_thread = ops_per_thread;
        self
    }

    /// Sets the number of rounds.
    pub fn rounds(mut self, rounds: u64) -> Self {
        self.settings.rounds = rounds;
        self
    }

    /// Sets the seed of round 0.
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings.seed = seed;
        self
    }

    /// Sets the longest time spent shrinking a failure (zero: do not shrink).
    pub fn shrink_time(mut self, time: Duration) -> Self {
        self.settings.shrink_time = time;
        self
    }

    /// The settings in force.
    pub fn current_settings(&self) -> &Settings {
        &self.settings
    }

    /// Runs the rounds, stopping at the first history that is not linearizable, which it
    /// shrinks.
    ///
    /// # Errors
    ///
    /// A [`SettingsError`] when the settings are out of range; nothing has run then.
    ///
    /// # Panics
    ///
    /// When the subject panics, or [`Subject::fresh`] returns the wrong number of handles.
    pub fn run(&self) -> Result<RunReport<S::Op, S::Ret>, SettingsError> {
        let settings = self.settings;
        settings.validate()?;
        let checker = Checker::new().with_budget(settings.budget);
        let shape = settings.shape();
        let started = Instant::now();
        let mut report = RunReport {
            settings,
            rounds: 0,
            linearizable: 0,
            unknown: 0,
            failure: None,
        };
        for round in 0..settings.rounds {
            let seed = round_seed(settings.seed, round);
            let history = self.record(shape, seed);
            report.rounds += 1;
            match checker.check(&self.spec, &history) {
                Verdict::Linearizable(_) => report.linearizable += 1,
                Verdict::Unknown { .. } => report.unknown += 1,
                Verdict::NotLinearizable(counterexample) => {
                    let found = Failure {
                        history,
                        counterexample,
                        shape,
                        seed,
                        round,
                        found_shape: shape,
                        found_seed: seed,
                        found_after: started.elapsed(),
                    };
                    report.failure = Some(self.shrink(found, &checker));
                    break;
                }
            }
        }
        Ok(report)
    }

    /// Runs the rounds and panics with the drawing of the failure, if there is one, or when
    /// some history could not be decided within the budget.
    ///
    /// # Panics
    ///
    /// As described, and as [`Runner::run`], and when the settings are out of range.
    #[track_caller]
    pub fn assert_linearizable(&self) {
        let report = match self.run() {
            Ok(report) => report,
            Err(e) => panic!("lincheck: {e}"),
        };
        if let Some(failure) = &report.failure {
            panic!("{failure}");
        }
        assert!(
            report.unknown == 0,
            "lincheck: {} of {} histories could not be decided within the budget of {} steps; \
             use fewer threads or operations",
            report.unknown,
            report.rounds,
            report.settings.budget
        );
    }

    /// Records one round of `shape` from `seed`: fresh structure, scripted threads started
    /// together, logs merged.
    ///
    /// # Panics
    ///
    /// When the subject panics, [`Subject::fresh`] returns the wrong number of handles, or a
    /// thread cannot be started (the threads already started are let go first, so nothing
    /// waits for ever); `shape` is not checked against [`MAX_THREADS`] here, as
    /// [`Runner::run`] checks its settings.
    pub fn record(&self, shape: Shape, seed: u64) -> History<S::Op, S::Ret> {
        let scripts = self.scripts(shape, seed);
        let handles = self.subject.fresh(shape);
        assert_eq!(
            handles.len(),
            shape.threads,
            "Subject::fresh must return one handle per thread"
        );
        let recorder = Recorder::new();
        let arrived = AtomicUsize::new(0);
        // Set when a thread could not be started: the others stop waiting for it.
        let abandoned = AtomicBool::new(false);
        let subject = &self.subject;
        let logs = std::thread::scope(|s| {
            let mut workers = Vec::with_capacity(shape.threads);
            let mut refused = None;
            for (thread, (mut handle, script)) in handles.into_iter().zip(scripts).enumerate() {
                let mut log = recorder.log_with_capacity(thread, script.len());
                let (arrived, abandoned) = (&arrived, &abandoned);
                let started = std::thread::Builder::new().spawn_scoped(s, move || {
                    if start_together(arrived, abandoned, shape.threads) {
                        for planned in &script {
                            let op = subject.resolve(&mut handle, planned);
                            log.record(op, |op| subject.apply(&mut handle, op));
                        }
                    }
                    log
                });
                match started {
                    Ok(worker) => workers.push(worker),
                    Err(error) => {
                        abandoned.store(true, Ordering::Release);
                        refused = Some((thread, error));
                        break;
                    }
                }
            }
            let logs = workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect::<Vec<_>>();
            if let Some((thread, error)) = refused {
                panic!(
                    "lincheck: could not start thread {thread} of {}: {error}",
                    shape.threads
                );
            }
            logs
        });
        History::merge(logs)
    }

    /// Each thread's script for a round of `shape` from `seed`.
    fn scripts(&self, shape: Shape, seed: u64) -> Vec<Vec<S::Op>> {
        (0..shape.threads)
            .map(|thread| {
                let mut rng = SplitMix64::new(thread_seed(seed, thread));
                (0..shape.ops_per_thread)
                    .map(|index| {
                        (self.generate)(&mut OpSlot {
                            thread,
                            index,
                            serial: (thread * shape.ops_per_thread + index) as u64,
                            rng: &mut rng,
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// Looks for a smaller scenario that still fails; see the module documentation.
    fn shrink(
        &self,
        mut best: Failure<S::Op, S::Ret>,
        checker: &Checker,
    ) -> Failure<S::Op, S::Ret> {
        // A time too long to add to the clock sets no deadline: the attempts still bound it.
        let deadline = Instant::now().checked_add(self.settings.shrink_time);
        'smaller: loop {
            for shape in smaller_shapes(best.shape) {
                for attempt in 0..self.settings.shrink_attempts {
                    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                        break 'smaller;
                    }
                    let seed = if attempt == 0 {
                        best.seed
                    } else {
                        mix64(best.seed ^ mix64(u64::from(attempt)))
                    };
                    let history = self.record(shape, seed);
                    if let Verdict::NotLinearizable(counterexample) =
                        checker.check(&self.spec, &history)
                    {
                        best = Failure {
                            history,
                            counterexample,
                            shape,
                            seed,
                            ..best
                        };
                        continue 'smaller;
                    }
                }
            }
            break;
        }
        best
    }
}

/// Smaller scenarios to try, most promising first.
fn smaller_shapes(shape: Shape) -> Vec<Shape> {
    let mut shapes = Vec::new();
    if shape.threads > 1 {
        shapes.push(Shape {
            threads: shape.threads - 1,
            ..shape
        });
    }
    if shape.ops_per_thread > 2 {
        shapes.push(Shape {
            ops_per_thread: shape.ops_per_thread / 2,
            ..shape
        });
    }
    if shape.ops_per_thread > 1 {
        shapes.push(Shape {
            ops_per_thread: shape.ops_per_thread - 1,
            ..shape
        });
    }
    shapes
}

/// Round `round`'s seed: the run's seed for round 0, so that a reported seed replays.
fn round_seed(seed: u64, round: u64) -> u64 {
    if round == 0 {
        seed
    } else {
        mix64(seed ^ mix64(round.wrapping_mul(0xD6E8_FEB8_6659_FD93)))
    }
}

/// The seed of thread `thread`'s script stream in a round seeded `seed`.
fn thread_seed(seed: u64, thread: usize) -> u64 {
    mix64(seed.wrapping_add((thread as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F)))
}

/// Waits until `threads` threads have arrived, so that they start their scripts together;
/// `false` if a thread could not be started (`abandoned`), when none of them should run.
fn start_together(arrived: &AtomicUsize, abandoned: &AtomicBool, threads: usize) -> bool {
    arrived.fetch_add(1, Ordering::AcqRel);
    let mut spins = 0u32;
    while arrived.load(Ordering::Acquire) < threads {
        if abandoned.load(Ordering::Acquire) {
            return false;
        }
        // Threads may outnumber cores: after a short spin, let the others be scheduled.
        if spins < 100 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    true
}

/// The outcome of [`Runner::run`].
#[derive(Debug)]
pub struct RunReport<Op, Ret> {
    /// The settings of the run.
    pub settings: Settings,
    /// Rounds run (fewer than asked when one failed).
    pub rounds: u64,
    /// Histories found linearizable.
    pub linearizable: u64,
    /// Histories the checker could not decide within its budget.
    pub unknown: u64,
    /// The first history found not linearizable, after shrinking.
    pub failure: Option<Failure<Op, Ret>>,
}

impl<Op: Debug, Ret: Debug> RunReport<Op, Ret> {
    /// Whether every history run was found linearizable.
    pub fn all_linearizable(&self) -> bool {
        self.failure.is_none() && self.unknown == 0
    }

    /// The report without its types: counts, and the failure drawn as text.
    pub fn summary(&self) -> Summary {
        Summary {
            settings: self.settings,
            rounds: self.rounds,
            linearizable: self.linearizable,
            unknown: self.unknown,
            failure: self.failure.as_ref().map(|f| FailureSummary {
                shape: f.shape,
                seed: f.seed,
                round: f.round,
                found_after: f.found_after,
                text: f.to_string(),
            }),
        }
    }
}

/// A history that is not linearizable, as found by the runner.
#[derive(Debug)]
pub struct Failure<Op, Ret> {
    /// The history.
    pub history: History<Op, Ret>,
    /// What the checker found.
    pub counterexample: Counterexample,
    /// The scenario size that produced it (after shrinking).
    pub shape: Shape,
    /// The seed that produced its scripts: rerun with this seed and `shape` to replay them.
    pub seed: u64,
    /// The round of the run in which the first failure was found.
    pub round: u64,
    /// The scenario size of that first failure, before shrinking.
    pub found_shape: Shape,
    /// The seed of that first failure.
    pub found_seed: u64,
    /// The time from the start of the run to that first failure (shrinking comes after).
    pub found_after: Duration,
}

impl<Op: Debug, Ret: Debug> fmt::Display for Failure<Op, Ret> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "NOT LINEARIZABLE: {}, seed {:#x} (found after {:.2} s in round {} as {}, seed {:#x})",
            self.shape,
            self.seed,
            self.found_after.as_secs_f64(),
            self.round,
            self.found_shape,
            self.found_seed
        )?;
        write!(f, "{}", self.history.timeline())?;
        writeln!(f, "{}", self.counterexample)?;
        write!(
            f,
            "replay the scripts with: seed {:#x}, {} threads, {} ops per thread",
            self.seed, self.shape.threads, self.shape.ops_per_thread
        )
    }
}

/// A [`RunReport`] without its types, for tools that run many kinds of subject.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The settings of the run.
    pub settings: Settings,
    /// Rounds run.
    pub rounds: u64,
    /// Histories found linearizable.
    pub linearizable: u64,
    /// Histories not decided within the budget.
    pub unknown: u64,
    /// The failure, if any.
    pub failure: Option<FailureSummary>,
}

/// A [`Failure`] without its types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureSummary {
    /// The scenario size that failed (after shrinking).
    pub shape: Shape,
    /// The seed that replays its scripts.
    pub seed: u64,
    /// The round of the run in which it was found.
    pub round: u64,
    /// The time from the start of the run until it was found (before shrinking).
    pub found_after: Duration,
    /// The failure drawn: a headline, the timeline, the counterexample and the replay line.
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_zero_uses_the_seed_itself() {
        assert_eq!(round_seed(1234, 0), 1234);
        assert_ne!(round_seed(1234, 1), round_seed(1234, 2));
    }

    #[test]
    fn smaller_shapes_are_smaller() {
        let shape = Shape {
            threads: 3,
            ops_per_thread: 8,
        };
        for smaller in smaller_shapes(shape) {
            assert!(smaller.threads * smaller.ops_per_thread < 24);
        }
        assert!(
            smaller_shapes(Shape {
                threads: 1,
                ops_per_thread: 1
            })
            .is_empty()
        );
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        let ok = Settings::default();
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            Settings { threads: 0, ..ok }.validate(),
            Err(SettingsError::NoThreads)
        );
        assert_eq!(
            Settings {
                ops_per_thread: 0,
                ..ok
            }
            .validate(),
            Err(SettingsError::NoOperations)
        );
        assert_eq!(
            Settings { rounds: 0, ..ok }.validate(),
            Err(SettingsError::NoRounds)
        );
        assert_eq!(
            Settings {
                threads: usize::MAX,
                ..ok
            }
            .validate(),
            Err(SettingsError::TooManyThreads {
                threads: usize::MAX
            })
        );
        assert!(matches!(
            Settings {
                threads: MAX_THREADS,
                ops_per_thread: usize::MAX,
                ..ok
            }
            .validate(),
            Err(SettingsError::TooManyOperations { .. })
        ));
    }
}
