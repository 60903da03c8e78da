//! Differential tests against tokio itself: the same random single-threaded script runs on
//! `tokio::sync::{Semaphore, Notify}` and on `pitlane_wait::{Semaphore, Notify}` side by
//! side, futures polled by hand (no runtime) with [`CountingWaker`]s, and every observable
//! result must be identical at every step.
//!
//! - Semaphore scripts: create `acquire`/`acquire_many(n)`/`acquire_owned`/
//!   `acquire_many_owned(n)` futures (n = 0, small, around and above what is free, and
//!   `u32::MAX`), poll the k-th live future (with its own waker or a fresh one), drop the k-th
//!   live future (polled or not), `try_acquire`/`try_acquire_many` (0 included) and their
//!   `_owned` forms, `add_permits`, `forget_permits`, `close`, drop the k-th held permit,
//!   `forget` it, `split` it, `merge` two of them. Starting from 0, 1, a few,
//!   `MAX_PERMITS - 1` and `MAX_PERMITS` permits. After each step: the step's result (a poll's
//!   `Pending`/`Ready(Ok(num_permits))`/`Ready(Err(..))` with the error's `Debug` and
//!   `Display`, a `try_*`'s `Ok(num_permits)`/`Err(..)`, `forget_permits`'s count, `split`'s
//!   `Option`, a panic's message), `available_permits()`, `is_closed()`, every held permit's
//!   `num_permits()`, and the wake count and live clone count of every waker handed out so far
//!   (those of live futures, of futures already completed or dropped, and of wakers replaced
//!   by a fresh one). A script stops at the first step that panics (in both).
//! - Notify scripts: create `notified()`/`notified_owned()` futures, `enable()` the k-th, poll
//!   the k-th (own or fresh waker; a completed future stays in the list and is polled again,
//!   which checks fusing), drop the k-th, `notify_one`, `notify_last`, `notify_waiters`.
//!   After each step: the poll result or `enable`'s return, and the wake and clone counts of
//!   every waker as above. The state is only ever compared where the script itself polls or
//!   enables: polling is not a neutral read (it makes a future a waiter).
//!
//! Wake counts (and waker clone counts) are compared exactly, not just "a future that would
//! now be ready was woken": on one thread, tokio's wake-ups are deterministic (a waiter is
//! woken once, when it is served, failed by `close`, or chosen by a notify, and a replaced
//! or dropped waker is never woken or kept), and pitlane matches it exactly.
//!
//! Plain tests pin down the panics (and messages) and edge results users' tests might match
//! on. The first run of these scripts found four ways pitlane's `Semaphore` behaved unlike
//! tokio's (`close` gave a queued waiter's partial permits back at once; a waiter served
//! before a `close` but polled after it got its permits; `try_acquire_many(0)` failed while
//! tasks waited; `add_permits` past `MAX_PERMITS` panicked even where the waiters took the
//! excess); each is fixed and has a minimised test at the end. What still differs, on
//! purpose, is pinned down there too: the state a semaphore is left in after `add_permits`
//! panics, and the form of `Debug`.
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use pitlane_testkit::wakers::CountingWaker;
use proptest::prelude::*;

/// The most permits either semaphore may hold (the two are asserted equal below).
const MAX: usize = pitlane_wait::Semaphore::MAX_PERMITS;

/// What one step of a script returned, in a form both worlds share.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    /// The step returns nothing (or had nothing to act on).
    Unit,
    /// A poll: `None` while pending; `Ok(num_permits)` (0 for a `Notified`) or
    /// `Err((Debug, Display))` once ready.
    Poll(Option<Result<usize, (String, String)>>),
    /// A `try_acquire*`: `Ok(num_permits)` or `Err((Debug, Display))`.
    Try(Result<usize, (String, String)>),
    /// `forget_permits`'s count.
    Forgot(usize),
    /// `split`'s result: the new permit's `num_permits`.
    Split(Option<usize>),
    /// `enable`'s result.
    Enabled(bool),
    /// The step panicked with this message.
    Panicked(String),
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// Runs `f`, turning a panic into its message.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| panic_message(&*payload))
}

fn error_pair<E: std::fmt::Debug + std::fmt::Display>(e: &E) -> (String, String) {
    (format!("{e:?}"), e.to_string())
}

/// The wake count and the live clone count of a waker source (1 = no clone is kept anywhere).
fn waker_state(waker: &CountingWaker) -> (usize, usize) {
    (waker.wakes(), waker.live())
}

// ---------------------------------------------------------------------------------------------
// Semaphore
// ---------------------------------------------------------------------------------------------

/// Which method a script calls.
#[derive(Clone, Copy, Debug)]
enum Api {
    /// `acquire` / `try_acquire` (one permit).
    One,
    /// `acquire_many` / `try_acquire_many`.
    Many,
    /// `acquire_owned` / `try_acquire_owned` (one permit).
    OneOwned,
    /// `acquire_many_owned` / `try_acquire_many_owned`.
    ManyOwned,
}

/// A permit count, absolute or relative to what there is when the step runs.
#[derive(Clone, Copy, Debug)]
enum Count {
    Abs(u32),
    /// `available_permits()` (for acquires) or the permit's `num_permits()` (for `split`)
    /// plus this, clamped to the type's range.
    Rel(i8),
}

impl Count {
    fn resolve(self, base: usize) -> usize {
        match self {
            Count::Abs(n) => n as usize,
            Count::Rel(d) => base.saturating_add_signed(d as isize),
        }
    }

    fn resolve_u32(self, base: usize) -> u32 {
        u32::try_from(self.resolve(base)).unwrap_or(u32::MAX)
    }
}

#[derive(Clone, Copy, Debug)]
enum SemOp {
    /// Create an acquire future (not polled yet).
    Acquire(Api, Count),
    /// Poll the k-th live future with its waker.
    Poll(usize),
    /// Poll the k-th live future with a fresh waker (the old one must not be woken after).
    PollFresh(usize),
    /// Drop the k-th live future.
    DropFuture(usize),
    TryAcquire(Api, Count),
    AddPermits(usize),
    ForgetPermits(usize),
    Close,
    /// Drop the k-th held permit.
    DropPermit(usize),
    /// `forget()` the k-th held permit.
    ForgetPermit(usize),
    /// `split` the k-th held permit.
    Split(usize, Count),
    /// Merge the j-th held permit into the i-th (when both are borrowed or both owned).
    Merge(usize, usize),
}

/// Everything that can be read off a semaphore world without changing it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SemSnapshot {
    available: usize,
    closed: bool,
    /// Per live future, in order: its waker's (wakes, live clones).
    futures: Vec<(usize, usize)>,
    /// Wakers no longer in use (future completed or dropped, or waker replaced), in order.
    retired: Vec<(usize, usize)>,
    /// Per held permit, in order: (owned?, num_permits).
    permits: Vec<(bool, usize)>,
}

/// One world's semaphore script runner, written once and instantiated for tokio's and for
/// pitlane's types: the names `Semaphore`, `SemaphorePermit`, `OwnedSemaphorePermit`,
/// `AcquireError` resolve where the macro is invoked.
macro_rules! semaphore_world {
    () => {
        use std::future::Future;
        use std::pin::Pin;
        use std::sync::Arc;
        use std::task::Poll;

        use pitlane_testkit::wakers::CountingWaker;

        use super::{Api, Out, SemOp, SemSnapshot, error_pair, waker_state};

        pub enum Permit<'a> {
            Borrowed(SemaphorePermit<'a>),
            Owned(OwnedSemaphorePermit),
        }

        impl Permit<'_> {
            fn num_permits(&self) -> usize {
                match self {
                    Permit::Borrowed(p) => p.num_permits(),
                    Permit::Owned(p) => p.num_permits(),
                }
            }
        }

        type Borrowed<'a> =
            Pin<Box<dyn Future<Output = Result<SemaphorePermit<'a>, AcquireError>> + 'a>>;
        type Owned = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>>>>;

        enum Acquire<'a> {
            Borrowed(Borrowed<'a>),
            Owned(Owned),
        }

        pub struct World<'a> {
            sem: &'a Arc<Semaphore>,
            /// Live futures: waker, future, polled at least once.
            futures: Vec<(CountingWaker, Acquire<'a>, bool)>,
            retired: Vec<CountingWaker>,
            permits: Vec<Permit<'a>>,
        }

        impl<'a> World<'a> {
            pub fn new(sem: &'a Arc<Semaphore>) -> Self {
                World {
                    sem,
                    futures: Vec::new(),
                    retired: Vec::new(),
                    permits: Vec::new(),
                }
            }

            pub fn snapshot(&self) -> SemSnapshot {
                SemSnapshot {
                    available: self.sem.available_permits(),
                    closed: self.sem.is_closed(),
                    futures: self.futures.iter().map(|(w, ..)| waker_state(w)).collect(),
                    retired: self.retired.iter().map(waker_state).collect(),
                    permits: self
                        .permits
                        .iter()
                        .map(|p| (matches!(p, Permit::Owned(_)), p.num_permits()))
                        .collect(),
                }
            }

            fn poll(&mut self, k: usize, fresh: bool) -> Out {
                if self.futures.is_empty() {
                    return Out::Unit;
                }
                let k = k % self.futures.len();
                if fresh {
                    let old = std::mem::replace(&mut self.futures[k].0, CountingWaker::new());
                    self.retired.push(old);
                }
                let (waker, future, polled) = &mut self.futures[k];
                *polled = true;
                let result = waker.with_context(|cx| match future {
                    Acquire::Borrowed(f) => f.as_mut().poll(cx).map(|r| r.map(Permit::Borrowed)),
                    Acquire::Owned(f) => f.as_mut().poll(cx).map(|r| r.map(Permit::Owned)),
                });
                match result {
                    Poll::Pending => Out::Poll(None),
                    Poll::Ready(result) => {
                        // A completed acquire is not polled again (it would panic).
                        self.retire(k);
                        Out::Poll(Some(match result {
                            Ok(permit) => {
                                let n = permit.num_permits();
                                self.permits.push(permit);
                                Ok(n)
                            }
                            Err(e) => Err(error_pair(&e)),
                        }))
                    }
                }
            }

            /// Drops the k-th live future, keeping its waker's counts.
            fn retire(&mut self, k: usize) {
                let (waker, future, _) = self.futures.remove(k);
                drop(future);
                self.retired.push(waker);
            }

            fn held(&self, k: usize) -> Option<usize> {
                (!self.permits.is_empty()).then(|| k % self.permits.len())
            }

            pub fn apply(&mut self, op: &SemOp) -> Out {
                match *op {
                    SemOp::Acquire(api, n) => {
                        let n = n.resolve_u32(self.sem.available_permits());
                        let future = match api {
                            Api::One => Acquire::Borrowed(Box::pin(self.sem.acquire())),
                            Api::Many => Acquire::Borrowed(Box::pin(self.sem.acquire_many(n))),
                            Api::OneOwned => {
                                Acquire::Owned(Box::pin(self.sem.clone().acquire_owned()))
                            }
                            Api::ManyOwned => {
                                Acquire::Owned(Box::pin(self.sem.clone().acquire_many_owned(n)))
                            }
                        };
                        self.futures.push((CountingWaker::new(), future, false));
                        Out::Unit
                    }
                    SemOp::Poll(k) => self.poll(k, false),
                    SemOp::PollFresh(k) => self.poll(k, true),
                    SemOp::DropFuture(k) => {
                        if !self.futures.is_empty() {
                            self.retire(k % self.futures.len());
                        }
                        Out::Unit
                    }
                    SemOp::TryAcquire(api, n) => {
                        let n = n.resolve_u32(self.sem.available_permits());
                        let result = match api {
                            Api::One => self.sem.try_acquire().map(Permit::Borrowed),
                            Api::Many => self.sem.try_acquire_many(n).map(Permit::Borrowed),
                            Api::OneOwned => {
                                self.sem.clone().try_acquire_owned().map(Permit::Owned)
                            }
                            Api::ManyOwned => self
                                .sem
                                .clone()
                                .try_acquire_many_owned(n)
                                .map(Permit::Owned),
                        };
                        Out::Try(match result {
                            Ok(permit) => {
                                let n = permit.num_permits();
                                self.permits.push(permit);
                                Ok(n)
                            }
                            Err(e) => Err(error_pair(&e)),
                        })
                    }
                    SemOp::AddPermits(n) => {
                        self.sem.add_permits(n);
                        Out::Unit
                    }
                    SemOp::ForgetPermits(n) => Out::Forgot(self.sem.forget_permits(n)),
                    SemOp::Close => {
                        self.sem.close();
                        Out::Unit
                    }
                    SemOp::DropPermit(k) => {
                        if let Some(k) = self.held(k) {
                            drop(self.permits.remove(k));
                        }
                        Out::Unit
                    }
                    SemOp::ForgetPermit(k) => {
                        if let Some(k) = self.held(k) {
                            match self.permits.remove(k) {
                                Permit::Borrowed(p) => p.forget(),
                                Permit::Owned(p) => p.forget(),
                            }
                        }
                        Out::Unit
                    }
                    SemOp::Split(k, n) => {
                        let Some(k) = self.held(k) else {
                            return Out::Unit;
                        };
                        let n = n.resolve(self.permits[k].num_permits());
                        let split = match &mut self.permits[k] {
                            Permit::Borrowed(p) => p.split(n).map(Permit::Borrowed),
                            Permit::Owned(p) => p.split(n).map(Permit::Owned),
                        };
                        Out::Split(split.map(|p| {
                            let n = p.num_permits();
                            self.permits.push(p);
                            n
                        }))
                    }
                    SemOp::Merge(i, j) => {
                        let (Some(i), Some(j)) = (self.held(i), self.held(j)) else {
                            return Out::Unit;
                        };
                        let same_kind = matches!(
                            (&self.permits[i], &self.permits[j]),
                            (Permit::Borrowed(_), Permit::Borrowed(_))
                                | (Permit::Owned(_), Permit::Owned(_))
                        );
                        if i == j || !same_kind {
                            return Out::Unit;
                        }
                        let other = self.permits.remove(j);
                        let i = if j < i { i - 1 } else { i };
                        match (&mut self.permits[i], other) {
                            (Permit::Borrowed(p), Permit::Borrowed(o)) => p.merge(o),
                            (Permit::Owned(p), Permit::Owned(o)) => p.merge(o),
                            _ => unreachable!(),
                        }
                        Out::Unit
                    }
                }
            }

            /// Drops the first live future, else the first held permit; false when there was
            /// nothing left.
            pub fn tear_down_one(&mut self) -> bool {
                if !self.futures.is_empty() {
                    self.retire(0);
                    true
                } else if !self.permits.is_empty() {
                    drop(self.permits.remove(0));
                    true
                } else {
                    false
                }
            }
        }
    };
}

mod tokio_semaphore {
    use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore, SemaphorePermit};
    semaphore_world!();
}

mod pitlane_semaphore {
    use pitlane_wait::{AcquireError, OwnedSemaphorePermit, Semaphore, SemaphorePermit};
    semaphore_world!();
}

/// Runs `ops` on both semaphores, started with `start` permits, comparing every step; then
/// drops the futures and permits left one by one, comparing after each.
///
/// If a step panics (in both, with the same message) the script ends there, and what is left
/// is neither compared (see
/// [`after_an_overflow_panic_the_semaphore_stays_within_max_permits`]) nor dropped but
/// leaked: giving the permits back could overflow the semaphore again, and a second panic
/// while a failed assertion unwinds would abort the test binary.
fn run_semaphore(start: usize, ops: &[SemOp]) {
    let tokio_sem = Arc::new(tokio::sync::Semaphore::new(start));
    let pitlane_sem = Arc::new(pitlane_wait::Semaphore::new(start));
    let mut tokio = ManuallyDrop::new(tokio_semaphore::World::new(&tokio_sem));
    let mut pitlane = ManuallyDrop::new(pitlane_semaphore::World::new(&pitlane_sem));
    assert_eq!(tokio.snapshot(), pitlane.snapshot(), "start {start}");
    for (step, op) in ops.iter().enumerate() {
        let expected = guarded(|| tokio.apply(op)).unwrap_or_else(Out::Panicked);
        let got = guarded(|| pitlane.apply(op)).unwrap_or_else(Out::Panicked);
        assert_eq!(
            got, expected,
            "step {step} {op:?} (pitlane left, tokio right); start {start}, script {ops:?}"
        );
        if matches!(expected, Out::Panicked(_)) {
            return;
        }
        assert_eq!(
            pitlane.snapshot(),
            tokio.snapshot(),
            "after step {step} {op:?} (pitlane left, tokio right); start {start}, script {ops:?}"
        );
    }
    loop {
        // Giving back a permit can overflow (`add_permits` only checks the free permits).
        let more = guarded(|| tokio.tear_down_one());
        assert_eq!(
            guarded(|| pitlane.tear_down_one()),
            more,
            "tearing down (pitlane left, tokio right); start {start}, script {ops:?}"
        );
        if more.is_err() {
            return;
        }
        assert_eq!(
            pitlane.snapshot(),
            tokio.snapshot(),
            "tearing down (pitlane left, tokio right); start {start}, script {ops:?}"
        );
        if more == Ok(false) {
            break;
        }
    }
    // Empty now: nothing left to give back.
    drop(ManuallyDrop::into_inner(tokio));
    drop(ManuallyDrop::into_inner(pitlane));
}

fn api() -> impl Strategy<Value = Api> {
    prop_oneof![
        1 => Just(Api::One),
        3 => Just(Api::Many),
        1 => Just(Api::OneOwned),
        2 => Just(Api::ManyOwned),
    ]
}

fn count() -> impl Strategy<Value = Count> {
    prop_oneof![
        4 => (0_u32..5).prop_map(Count::Abs),
        3 => (-2_i8..=2).prop_map(Count::Rel),
        1 => Just(Count::Abs(u32::MAX)),
    ]
}

/// What to split off a permit: 0..3, or all it holds, one less, one more.
fn split_count() -> impl Strategy<Value = Count> {
    prop_oneof![
        (0_u32..3).prop_map(Count::Abs),
        (-1_i8..=1).prop_map(Count::Rel),
    ]
}

fn sem_op() -> impl Strategy<Value = SemOp> {
    prop_oneof![
        8 => (api(), count()).prop_map(|(a, n)| SemOp::Acquire(a, n)),
        10 => any::<usize>().prop_map(SemOp::Poll),
        2 => any::<usize>().prop_map(SemOp::PollFresh),
        4 => any::<usize>().prop_map(SemOp::DropFuture),
        4 => (api(), count()).prop_map(|(a, n)| SemOp::TryAcquire(a, n)),
        6 => prop_oneof![29 => 0_usize..5, 1 => Just(usize::MAX)].prop_map(SemOp::AddPermits),
        2 => prop_oneof![4 => 0_usize..5, 1 => Just(usize::MAX), 1 => Just(MAX)]
            .prop_map(SemOp::ForgetPermits),
        // Rare: most of a script should run on an open semaphore.
        1 => Just(SemOp::Close),
        6 => any::<usize>().prop_map(SemOp::DropPermit),
        2 => any::<usize>().prop_map(SemOp::ForgetPermit),
        2 => (any::<usize>(), split_count()).prop_map(|(k, n)| SemOp::Split(k, n)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| SemOp::Merge(i, j)),
    ]
}

fn start_permits() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => Just(0_usize),
        2 => Just(1_usize),
        3 => 2_usize..6,
        1 => Just(MAX - 1),
        1 => Just(MAX),
    ]
}

// ---------------------------------------------------------------------------------------------
// Notify
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum NotifyOp {
    /// Create a `notified()` (or, if true, `notified_owned()`) future, not polled yet.
    Notified(bool),
    /// `enable()` the k-th future.
    Enable(usize),
    /// Poll the k-th future with its waker.
    Poll(usize),
    /// Poll the k-th future with a fresh waker.
    PollFresh(usize),
    /// Drop the k-th future.
    Drop(usize),
    NotifyOne,
    NotifyLast,
    NotifyWaiters,
}

/// Per future (live ones, in order), then per retired waker: (wakes, live clones).
#[derive(Clone, Debug, PartialEq, Eq)]
struct NotifySnapshot {
    futures: Vec<(usize, usize)>,
    retired: Vec<(usize, usize)>,
}

macro_rules! notify_world {
    () => {
        use std::future::Future;
        use std::pin::Pin;
        use std::sync::Arc;
        use std::task::Poll;

        use pitlane_testkit::wakers::CountingWaker;

        use super::{NotifyOp, NotifySnapshot, Out, waker_state};

        enum Waiting<'a> {
            Borrowed(Pin<Box<Notified<'a>>>),
            Owned(Pin<Box<OwnedNotified>>),
        }

        pub struct World<'a> {
            notify: &'a Arc<Notify>,
            futures: Vec<(CountingWaker, Waiting<'a>)>,
            retired: Vec<CountingWaker>,
        }

        impl<'a> World<'a> {
            pub fn new(notify: &'a Arc<Notify>) -> Self {
                World {
                    notify,
                    futures: Vec::new(),
                    retired: Vec::new(),
                }
            }

            pub fn snapshot(&self) -> NotifySnapshot {
                NotifySnapshot {
                    futures: self.futures.iter().map(|(w, _)| waker_state(w)).collect(),
                    retired: self.retired.iter().map(waker_state).collect(),
                }
            }

            fn pick(&self, k: usize) -> Option<usize> {
                (!self.futures.is_empty()).then(|| k % self.futures.len())
            }

            fn poll(&mut self, k: usize, fresh: bool) -> Out {
                let Some(k) = self.pick(k) else {
                    return Out::Unit;
                };
                if fresh {
                    let old = std::mem::replace(&mut self.futures[k].0, CountingWaker::new());
                    self.retired.push(old);
                }
                let (waker, future) = &mut self.futures[k];
                let ready = waker.with_context(|cx| match future {
                    Waiting::Borrowed(f) => f.as_mut().poll(cx),
                    Waiting::Owned(f) => f.as_mut().poll(cx),
                });
                // A completed `Notified` stays: polling it again must give `Ready` again.
                Out::Poll(match ready {
                    Poll::Pending => None,
                    Poll::Ready(()) => Some(Ok(0)),
                })
            }

            pub fn apply(&mut self, op: &NotifyOp) -> Out {
                match *op {
                    NotifyOp::Notified(owned) => {
                        let future = if owned {
                            Waiting::Owned(Box::pin(self.notify.clone().notified_owned()))
                        } else {
                            Waiting::Borrowed(Box::pin(self.notify.notified()))
                        };
                        self.futures.push((CountingWaker::new(), future));
                        Out::Unit
                    }
                    NotifyOp::Enable(k) => {
                        let Some(k) = self.pick(k) else {
                            return Out::Unit;
                        };
                        Out::Enabled(match &mut self.futures[k].1 {
                            Waiting::Borrowed(f) => f.as_mut().enable(),
                            Waiting::Owned(f) => f.as_mut().enable(),
                        })
                    }
                    NotifyOp::Poll(k) => self.poll(k, false),
                    NotifyOp::PollFresh(k) => self.poll(k, true),
                    NotifyOp::Drop(k) => {
                        if let Some(k) = self.pick(k) {
                            let (waker, future) = self.futures.remove(k);
                            drop(future);
                            self.retired.push(waker);
                        }
                        Out::Unit
                    }
                    NotifyOp::NotifyOne => {
                        self.notify.notify_one();
                        Out::Unit
                    }
                    NotifyOp::NotifyLast => {
                        self.notify.notify_last();
                        Out::Unit
                    }
                    NotifyOp::NotifyWaiters => {
                        self.notify.notify_waiters();
                        Out::Unit
                    }
                }
            }

            /// Drops the first future; false when there was none.
            pub fn tear_down_one(&mut self) -> bool {
                if self.futures.is_empty() {
                    return false;
                }
                let (waker, future) = self.futures.remove(0);
                drop(future);
                self.retired.push(waker);
                true
            }
        }
    };
}

mod tokio_notify {
    use tokio::sync::Notify;
    use tokio::sync::futures::{Notified, OwnedNotified};
    notify_world!();
}

mod pitlane_notify {
    use pitlane_wait::Notify;
    use pitlane_wait::notify::{Notified, OwnedNotified};
    notify_world!();
}

/// Runs `ops` on both `Notify`s, comparing every step, then drops the futures one by one
/// (a dropped chosen waiter passes its notification on), comparing after each.
fn run_notify(ops: &[NotifyOp]) {
    let tokio_notify = Arc::new(tokio::sync::Notify::new());
    let pitlane_notify = Arc::new(pitlane_wait::Notify::new());
    let mut tokio = tokio_notify::World::new(&tokio_notify);
    let mut pitlane = pitlane_notify::World::new(&pitlane_notify);
    for (step, op) in ops.iter().enumerate() {
        let expected = guarded(|| tokio.apply(op)).unwrap_or_else(Out::Panicked);
        let got = guarded(|| pitlane.apply(op)).unwrap_or_else(Out::Panicked);
        assert_eq!(
            got, expected,
            "step {step} {op:?} (pitlane left, tokio right); script {ops:?}"
        );
        if matches!(expected, Out::Panicked(_)) {
            return;
        }
        assert_eq!(
            pitlane.snapshot(),
            tokio.snapshot(),
            "after step {step} {op:?} (pitlane left, tokio right); script {ops:?}"
        );
    }
    loop {
        let more = tokio.tear_down_one();
        assert_eq!(pitlane.tear_down_one(), more);
        assert_eq!(
            pitlane.snapshot(),
            tokio.snapshot(),
            "tearing down (pitlane left, tokio right); script {ops:?}"
        );
        if !more {
            break;
        }
    }
    // Whatever permit is left must be the same too: a fresh future's `enable` takes it.
    let mut t = Box::pin(tokio_notify.notified());
    let mut p = Box::pin(pitlane_notify.notified());
    assert_eq!(
        p.as_mut().enable(),
        t.as_mut().enable(),
        "permit left at the end (pitlane left, tokio right); script {ops:?}"
    );
}

fn notify_op() -> impl Strategy<Value = NotifyOp> {
    prop_oneof![
        4 => any::<bool>().prop_map(NotifyOp::Notified),
        2 => any::<usize>().prop_map(NotifyOp::Enable),
        4 => any::<usize>().prop_map(NotifyOp::Poll),
        1 => any::<usize>().prop_map(NotifyOp::PollFresh),
        2 => any::<usize>().prop_map(NotifyOp::Drop),
        2 => Just(NotifyOp::NotifyOne),
        1 => Just(NotifyOp::NotifyLast),
        1 => Just(NotifyOp::NotifyWaiters),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(debug_assertions) { 1000 } else { 8000 },
        // A failure prints its minimal script; keep no regression file.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn semaphore_scripts_match_tokio(
        start in start_permits(),
        ops in prop::collection::vec(sem_op(), 0..60),
    ) {
        run_semaphore(start, &ops);
    }

    #[test]
    fn notify_scripts_match_tokio(ops in prop::collection::vec(notify_op(), 0..60)) {
        run_notify(&ops);
    }
}

// ---------------------------------------------------------------------------------------------
// Plain tests: panics, messages and edge results.
// ---------------------------------------------------------------------------------------------

/// Runs `f` on tokio's side and on pitlane's, returning both outcomes (a panic as its message).
fn both<T>(
    tokio: impl FnOnce() -> T,
    pitlane: impl FnOnce() -> T,
) -> (Result<T, String>, Result<T, String>) {
    (guarded(tokio), guarded(pitlane))
}

#[test]
fn max_permits_is_the_same() {
    assert_eq!(
        pitlane_wait::Semaphore::MAX_PERMITS,
        tokio::sync::Semaphore::MAX_PERMITS
    );
}

#[test]
fn new_past_max_permits_panics_alike() {
    let (t, p) = both(
        || tokio::sync::Semaphore::new(MAX + 1).available_permits(),
        || pitlane_wait::Semaphore::new(MAX + 1).available_permits(),
    );
    assert!(t.is_err());
    assert_eq!(p, t);
    assert_eq!(
        t.unwrap_err(),
        format!("a semaphore may not have more than MAX_PERMITS permits ({MAX})")
    );
}

#[test]
fn add_permits_up_to_max_is_fine_and_one_more_panics_alike() {
    let tokio = tokio::sync::Semaphore::new(MAX - 1);
    let pitlane = pitlane_wait::Semaphore::new(MAX - 1);
    tokio.add_permits(1);
    pitlane.add_permits(1);
    assert_eq!(pitlane.available_permits(), tokio.available_permits());
    assert_eq!(tokio.available_permits(), MAX);
    // Adding zero to a full semaphore is not an overflow.
    let (t, p) = both(|| tokio.add_permits(0), || pitlane.add_permits(0));
    assert_eq!((p, t), (Ok(()), Ok(())));
    let (t, p) = both(|| tokio.add_permits(1), || pitlane.add_permits(1));
    assert_eq!(
        t,
        Err(format!(
            "number of added permits (1) would overflow MAX_PERMITS ({MAX})"
        ))
    );
    assert_eq!(p, t);
}

#[test]
fn add_permits_above_max_at_once_panics_alike() {
    let tokio = tokio::sync::Semaphore::new(0);
    let pitlane = pitlane_wait::Semaphore::new(0);
    let (t, p) = both(
        || tokio.add_permits(MAX + 1),
        || pitlane.add_permits(MAX + 1),
    );
    assert_eq!(
        t,
        Err(format!("cannot add more than MAX_PERMITS permits ({MAX})"))
    );
    assert_eq!(p, t);
    let (t, p) = both(
        || tokio.add_permits(usize::MAX),
        || pitlane.add_permits(usize::MAX),
    );
    assert!(t.is_err());
    assert_eq!(p, t);
}

#[test]
fn merging_permits_of_different_semaphores_panics_alike() {
    let (t, p) = both(
        || {
            let (a, b) = (
                tokio::sync::Semaphore::new(1),
                tokio::sync::Semaphore::new(1),
            );
            let mut permit = a.try_acquire().unwrap();
            permit.merge(b.try_acquire().unwrap());
        },
        || {
            let (a, b) = (
                pitlane_wait::Semaphore::new(1),
                pitlane_wait::Semaphore::new(1),
            );
            let mut permit = a.try_acquire().unwrap();
            permit.merge(b.try_acquire().unwrap());
        },
    );
    assert_eq!(
        t,
        Err("merging permits from different semaphore instances".to_owned())
    );
    assert_eq!(p, t);
    let (t, p) = both(
        || {
            let (a, b) = (
                Arc::new(tokio::sync::Semaphore::new(1)),
                Arc::new(tokio::sync::Semaphore::new(1)),
            );
            let mut permit = a.try_acquire_owned().unwrap();
            permit.merge(b.try_acquire_owned().unwrap());
        },
        || {
            let (a, b) = (
                Arc::new(pitlane_wait::Semaphore::new(1)),
                Arc::new(pitlane_wait::Semaphore::new(1)),
            );
            let mut permit = a.try_acquire_owned().unwrap();
            permit.merge(b.try_acquire_owned().unwrap());
        },
    );
    assert_eq!(
        t,
        Err("merging permits from different semaphore instances".to_owned())
    );
    assert_eq!(p, t);
}

#[test]
fn split_larger_than_held_is_none_not_a_panic() {
    let tokio = tokio::sync::Semaphore::new(3);
    let pitlane = pitlane_wait::Semaphore::new(3);
    let mut t = tokio.try_acquire_many(2).unwrap();
    let mut p = pitlane.try_acquire_many(2).unwrap();
    assert!(t.split(3).is_none());
    assert!(p.split(3).is_none());
    assert_eq!((p.num_permits(), t.num_permits()), (2, 2));
    // Splitting everything off leaves an empty permit, which gives nothing back.
    let (t_all, p_all) = (t.split(2).unwrap(), p.split(2).unwrap());
    assert_eq!((p.num_permits(), t.num_permits()), (0, 0));
    drop((t, p));
    assert_eq!(pitlane.available_permits(), tokio.available_permits());
    assert_eq!(tokio.available_permits(), 1);
    drop((t_all, p_all));
    assert_eq!(pitlane.available_permits(), tokio.available_permits());
    assert_eq!(tokio.available_permits(), 3);
    // Owned permits alike.
    let tokio = Arc::new(tokio::sync::Semaphore::new(1));
    let pitlane = Arc::new(pitlane_wait::Semaphore::new(1));
    let mut t = tokio.try_acquire_owned().unwrap();
    let mut p = pitlane.try_acquire_owned().unwrap();
    assert!(t.split(2).is_none());
    assert!(p.split(2).is_none());
    assert_eq!(t.split(0).map(|s| s.num_permits()), Some(0));
    assert_eq!(p.split(0).map(|s| s.num_permits()), Some(0));
}

#[test]
fn polling_a_completed_acquire_panics_alike() {
    let tokio = tokio::sync::Semaphore::new(1);
    let pitlane = pitlane_wait::Semaphore::new(1);
    let waker = CountingWaker::new();
    let mut t = Box::pin(tokio.acquire());
    let mut p = Box::pin(pitlane.acquire());
    assert!(waker.with_context(|cx| t.as_mut().poll(cx)).is_ready());
    assert!(waker.with_context(|cx| p.as_mut().poll(cx)).is_ready());
    let (t, p) = both(
        || waker.with_context(|cx| t.as_mut().poll(cx)).is_ready(),
        || waker.with_context(|cx| p.as_mut().poll(cx)).is_ready(),
    );
    assert!(t.is_err(), "tokio: {t:?}");
    assert_eq!(p, t);
    // Completed with an error alike.
    let tokio = tokio::sync::Semaphore::new(0);
    let pitlane = pitlane_wait::Semaphore::new(0);
    tokio.close();
    pitlane.close();
    let mut t = Box::pin(tokio.acquire_many(2));
    let mut p = Box::pin(pitlane.acquire_many(2));
    assert!(matches!(
        waker.with_context(|cx| t.as_mut().poll(cx)),
        Poll::Ready(Err(_))
    ));
    assert!(matches!(
        waker.with_context(|cx| p.as_mut().poll(cx)),
        Poll::Ready(Err(_))
    ));
    let (t, p) = both(
        || waker.with_context(|cx| t.as_mut().poll(cx)).is_ready(),
        || waker.with_context(|cx| p.as_mut().poll(cx)).is_ready(),
    );
    assert!(t.is_err(), "tokio: {t:?}");
    assert_eq!(p, t);
}

#[test]
fn zero_permits_are_there_unless_closed() {
    let tokio = tokio::sync::Semaphore::new(0);
    let pitlane = pitlane_wait::Semaphore::new(0);
    let waker = CountingWaker::new();
    assert_eq!(tokio.try_acquire_many(0).map(|p| p.num_permits()), Ok(0));
    assert_eq!(pitlane.try_acquire_many(0).map(|p| p.num_permits()), Ok(0));
    // `acquire_many(0)` completes at once even behind a queued waiter, in both.
    let mut t_waiter = Box::pin(tokio.acquire());
    let mut p_waiter = Box::pin(pitlane.acquire());
    assert!(
        waker
            .with_context(|cx| t_waiter.as_mut().poll(cx))
            .is_pending()
    );
    assert!(
        waker
            .with_context(|cx| p_waiter.as_mut().poll(cx))
            .is_pending()
    );
    let mut t = Box::pin(tokio.acquire_many(0));
    let mut p = Box::pin(pitlane.acquire_many(0));
    let t = waker
        .with_context(|cx| t.as_mut().poll(cx))
        .map(|r| r.map(|p| p.num_permits()));
    let p = waker
        .with_context(|cx| p.as_mut().poll(cx))
        .map(|r| r.map(|p| p.num_permits()));
    assert!(matches!(t, Poll::Ready(Ok(0))));
    assert!(matches!(p, Poll::Ready(Ok(0))));
}

#[test]
fn errors_format_alike() {
    let tokio = tokio::sync::Semaphore::new(0);
    let pitlane = pitlane_wait::Semaphore::new(0);
    assert_eq!(
        error_pair(&pitlane.try_acquire().unwrap_err()),
        error_pair(&tokio.try_acquire().unwrap_err())
    );
    tokio.close();
    pitlane.close();
    assert_eq!(
        error_pair(&pitlane.try_acquire_many(0).unwrap_err()),
        error_pair(&tokio.try_acquire_many(0).unwrap_err())
    );
    let waker = CountingWaker::new();
    let mut t = Box::pin(tokio.acquire_many(0));
    let mut p = Box::pin(pitlane.acquire_many(0));
    let Poll::Ready(Err(t)) = waker.with_context(|cx| t.as_mut().poll(cx)) else {
        panic!("tokio's acquire_many(0) on a closed semaphore is not an error")
    };
    let Poll::Ready(Err(p)) = waker.with_context(|cx| p.as_mut().poll(cx)) else {
        panic!("pitlane's acquire_many(0) on a closed semaphore is not an error")
    };
    assert_eq!(error_pair(&p), error_pair(&t));
}

// ---------------------------------------------------------------------------------------------
// The divergences the scripts found, minimised (each fixed: pitlane now does what tokio does),
// and the two differences kept on purpose.
// ---------------------------------------------------------------------------------------------

/// Polls `future` once with `waker`, giving `None` while pending, else what `permit` makes of
/// the permit (which it consumes) or the error's `Display`.
fn poll_permits<F, P, E>(
    future: &mut Pin<Box<F>>,
    waker: &CountingWaker,
    permit: impl FnOnce(P) -> usize,
) -> Option<Result<usize, String>>
where
    F: Future<Output = Result<P, E>> + ?Sized,
    E: std::fmt::Display,
{
    match waker.with_context(|cx| future.as_mut().poll(cx)) {
        Poll::Pending => None,
        Poll::Ready(r) => Some(r.map(permit).map_err(|e| e.to_string())),
    }
}

macro_rules! close_with_a_partial_waiter {
    ($sem:ty) => {{
        // One permit free, a waiter for two: it takes the one and queues.
        let sem = <$sem>::new(1);
        let waker = CountingWaker::new();
        let mut waiter = Box::pin(sem.acquire_many(2));
        let mut seen = vec![poll_permits(&mut waiter, &waker, |p| p.num_permits())];
        let mut available = vec![sem.available_permits()];
        sem.close();
        available.push(sem.available_permits());
        seen.push(poll_permits(&mut waiter, &waker, |p| p.num_permits()));
        available.push(sem.available_permits());
        drop(waiter);
        available.push(sem.available_permits());
        (seen, available, waker.wakes())
    }};
}

/// `close()` with a queued waiter that holds part of its permits: the permits stay with the
/// waiter until its future fails (its next poll) or is dropped, so `available_permits()` is
/// still 0 right after the close. (Pitlane used to give them back in `close()` itself.)
#[test]
fn close_leaves_a_waiters_partial_permits_with_it_until_it_fails() {
    let tokio = close_with_a_partial_waiter!(tokio::sync::Semaphore);
    let pitlane = close_with_a_partial_waiter!(pitlane_wait::Semaphore);
    let closed = Some(Err("semaphore closed".to_owned()));
    // [Pending, Err], available 0 after close, 1 after the failing poll, 1 after drop.
    assert_eq!(tokio, (vec![None, closed], vec![0, 0, 1, 1], 1));
    assert_eq!(pitlane, tokio);
}

macro_rules! close_after_serving_a_waiter {
    ($sem:ty) => {{
        let sem = <$sem>::new(0);
        let waker = CountingWaker::new();
        let mut waiter = Box::pin(sem.acquire());
        let first = poll_permits(&mut waiter, &waker, |p| p.num_permits());
        sem.add_permits(1); // serves (and wakes) the waiter
        let woken = waker.wakes();
        sem.close(); // before the served waiter is polled again
        let second = poll_permits(&mut waiter, &waker, |p| p.num_permits());
        let available = sem.available_permits();
        drop(waiter);
        (first, woken, second, available, sem.available_permits())
    }};
}

/// A waiter served in full (and woken) before `close()`, polled after it: the poll returns
/// `Err(AcquireError)` and its permit goes back to the semaphore. (Pitlane's used to return
/// `Ok(permit)`.)
#[test]
fn a_waiter_served_before_a_close_and_polled_after_it_fails() {
    let tokio = close_after_serving_a_waiter!(tokio::sync::Semaphore);
    let pitlane = close_after_serving_a_waiter!(pitlane_wait::Semaphore);
    assert_eq!(
        tokio,
        (None, 1, Some(Err("semaphore closed".to_owned())), 1, 1)
    );
    assert_eq!(pitlane, tokio);
}

macro_rules! add_more_than_max_with_a_waiter {
    ($sem:ty) => {{
        let sem = <$sem>::new(0);
        let waker = CountingWaker::new();
        let mut waiter = Box::pin(sem.acquire_many(3));
        let first = poll_permits(&mut waiter, &waker, |p| p.num_permits());
        // MAX + 3: three for the waiter, MAX for the semaphore.
        let added = catch_unwind(AssertUnwindSafe(|| sem.add_permits(MAX + 3)))
            .map_err(|payload| panic_message(&*payload));
        let state = (sem.available_permits(), waker.wakes());
        let second = poll_permits(&mut waiter, &waker, |p| {
            let n = p.num_permits();
            p.forget(); // dropping it would overflow the semaphore
            n
        });
        drop(waiter);
        (first, added, state, second)
    }};
}

/// `add_permits(n)` with `n > MAX_PERMITS` where the waiters take the excess: only what is
/// left for the semaphore after serving the waiters is checked, so nothing panics. (Pitlane's
/// used to panic up front, "cannot add more than MAX_PERMITS permits", serving nobody.)
#[test]
fn add_permits_past_max_is_fine_where_the_waiters_take_the_excess() {
    let tokio = add_more_than_max_with_a_waiter!(tokio::sync::Semaphore);
    let pitlane = add_more_than_max_with_a_waiter!(pitlane_wait::Semaphore);
    assert_eq!(tokio, (None, Ok(()), (MAX, 1), Some(Ok(3))));
    assert_eq!(pitlane, tokio);
}

macro_rules! add_usize_max_with_waiters {
    ($sem:ty) => {{
        let sem = <$sem>::new(0);
        let waker = CountingWaker::new();
        let mut one = Box::pin(sem.acquire());
        let mut two = Box::pin(sem.acquire_many(2));
        let polled = (
            poll_permits(&mut one, &waker, |p| p.num_permits()),
            poll_permits(&mut two, &waker, |p| p.num_permits()),
        );
        let added = catch_unwind(AssertUnwindSafe(|| sem.add_permits(usize::MAX)))
            .map_err(|payload| panic_message(&*payload));
        let (available, woken) = (sem.available_permits(), waker.wakes());
        let served = (
            poll_permits(&mut one, &waker, |p| p.num_permits()),
            poll_permits(&mut two, &waker, |p| p.num_permits()),
        );
        ((polled, added, available, served), woken)
    }};
}

/// `add_permits(usize::MAX)` with waiters: they are served first, then the rest is refused
/// with the same panic, and what is left is not added; a later poll of each waiter gives its
/// permits. (Only the wake-ups differ: tokio drops the served waiters' wakers unwoken as the
/// panic unwinds; pitlane wakes them, as its guard releases the lock.)
#[test]
fn add_permits_of_usize_max_serves_the_waiters_then_panics_alike() {
    let tokio = add_usize_max_with_waiters!(tokio::sync::Semaphore);
    let pitlane = add_usize_max_with_waiters!(pitlane_wait::Semaphore);
    let refused = format!("cannot add more than MAX_PERMITS permits ({MAX})");
    assert_eq!(
        tokio.0,
        ((None, None), Err(refused), 0, (Some(Ok(1)), Some(Ok(2))))
    );
    assert_eq!(pitlane.0, tokio.0);
    assert_eq!(
        (tokio.1, pitlane.1),
        (0, 2),
        "woken: tokio none, pitlane both"
    );
}

macro_rules! try_zero_with_a_waiter {
    ($sem:ty) => {{
        let sem = <$sem>::new(0);
        let waker = CountingWaker::new();
        let mut waiter = Box::pin(sem.acquire());
        let first = poll_permits(&mut waiter, &waker, |p| p.num_permits());
        let zero = sem
            .try_acquire_many(0)
            .map(|p| p.num_permits())
            .map_err(|e| e.to_string());
        (first, zero)
    }};
}

/// `try_acquire_many(0)` while a waiter is queued (no permit free): an empty permit (zero
/// permits are always there unless closed, as for `acquire_many(0)`, which completes at
/// once). (Pitlane's used to fail with `NoPermits`.)
#[test]
fn try_acquire_of_zero_while_tasks_wait_succeeds() {
    let tokio = try_zero_with_a_waiter!(tokio::sync::Semaphore);
    let pitlane = try_zero_with_a_waiter!(pitlane_wait::Semaphore);
    assert_eq!(tokio, (None, Ok(0)));
    assert_eq!(pitlane, tokio);
}

/// Kept different on purpose: the state after `add_permits` panics on overflow. Both panic
/// with the same message, but tokio has already added the permits when it checks, leaving
/// `available_permits()` past `MAX_PERMITS`, a count no semaphore may hold; pitlane adds
/// nothing.
#[test]
fn after_an_overflow_panic_the_semaphore_stays_within_max_permits() {
    let tokio = tokio::sync::Semaphore::new(MAX);
    let pitlane = pitlane_wait::Semaphore::new(MAX);
    let (t, p) = both(|| tokio.add_permits(1), || pitlane.add_permits(1));
    assert_eq!(p, t);
    assert!(p.is_err(), "both panic");
    assert_eq!(tokio.available_permits(), MAX + 1);
    assert_eq!(pitlane.available_permits(), MAX);
}

/// Kept different on purpose: the form of `Debug` (tokio's shows its internals), which is not
/// a stable contract of either; both show the free permits.
#[test]
fn debug_output_shows_the_permits_in_both() {
    let tokio = format!("{:?}", tokio::sync::Semaphore::new(2));
    let pitlane = format!("{:?}", pitlane_wait::Semaphore::new(2));
    // tokio: `Semaphore { ll_sem: Semaphore { permits: 2 } }`.
    assert!(tokio.contains("permits: 2"), "{tokio}");
    assert_eq!(pitlane, "Semaphore { permits: 2, closed: false }");
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
