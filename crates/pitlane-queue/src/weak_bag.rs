//! The [`WeakBag`] trait: push and pop that may fail *transiently*.
//!
//! After the `SharedWeakBag` trait of the bagpipe crate (Eli Rosenthal and co., "Bagpipes:
//! Scalable Concurrent Bags", in `shared/seeds/bagpipes-scalable-concurrent-bags.txt`). A weak bag
//! is a concurrent container whose single-attempt operations may give up when they lose a race
//! with another thread, and say so. A failed attempt has no effect on the contents, so the
//! caller may retry on the same bag ([`WeakBag::push`], [`WeakBag::pop`] do exactly that) or
//! move on to a less contended one, which is what a [`Bagpipe`](crate::bagpipe::Bagpipe) does.
//!
//! The trait is implemented by [`mpmc::Queue`](crate::mpmc::Queue) (FIFO),
//! [`stack::Stack`](crate::stack::Stack) (LIFO) and [`Bagpipe`](crate::bagpipe::Bagpipe) (no
//! order). Each implementation documents precisely which lost races give
//! [`PopError::Transient`] or an `Err` from [`try_push`](WeakBag::try_push).

use core::fmt;

/// Why [`WeakBag::try_pop`] returned no item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PopError {
    /// The bag held no item at the moment the attempt looked (for a
    /// [`Bagpipe`](crate::bagpipe::Bagpipe): every pipe held none when it was looked at). Retrying
    /// at once is pointless; the bag only fills again when someone pushes.
    Empty,
    /// The attempt lost a race with another thread — a failed compare-and-swap, or a cell
    /// reached before the value meant for it — and had no effect. The bag may well hold items;
    /// retrying, here or on another bag, will eventually succeed or see [`PopError::Empty`].
    Transient,
}

impl fmt::Display for PopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PopError::Empty => "the bag is empty",
            PopError::Transient => "lost a race with another thread; retry",
        })
    }
}

impl std::error::Error for PopError {}

/// A concurrent bag whose single attempts may fail transiently.
///
/// # Contract for implementations
///
/// - [`try_push`](Self::try_push) either inserts the item and returns `Ok(())`, or has no effect
///   and hands the item back in `Err` — and it may only fail because it lost a race with a
///   concurrent operation (never because the bag is "full": the bags in this crate are
///   unbounded).
/// - [`try_pop`](Self::try_pop) either removes one item, or has no effect and returns
///   [`PopError::Empty`] (the bag held nothing when it looked) or [`PopError::Transient`] (it
///   lost a race).
/// - No item is ever lost or handed out twice: every item pushed is popped at most once, and an
///   item that is never popped is dropped when the bag is dropped.
///
/// ```
/// use pitlane_queue::{PopError, WeakBag};
/// use pitlane_queue::mpmc::Queue;
///
/// let queue = Queue::new();
/// queue.push(1);
/// // Without contention, attempts succeed.
/// assert_eq!(queue.try_push(2), Ok(()));
/// assert_eq!(queue.try_pop(), Ok(1));
/// assert_eq!(queue.pop(), Some(2));
/// assert_eq!(queue.try_pop(), Err(PopError::Empty));
/// ```
pub trait WeakBag {
    /// What the bag holds.
    type Item;

    /// One attempt to insert `item`: `Ok(())` if it is in the bag, `Err(item)` if the attempt
    /// lost a race and changed nothing.
    fn try_push(&self, item: Self::Item) -> Result<(), Self::Item>;

    /// One attempt to remove an item: `Ok(item)`, or `Err(PopError::Empty)` if the bag held
    /// none, or `Err(PopError::Transient)` if the attempt lost a race and changed nothing.
    fn try_pop(&self) -> Result<Self::Item, PopError>;

    /// Inserts `item`, retrying transient failures until it is in.
    fn push(&self, item: Self::Item) {
        retry_push(item, |item| self.try_push(item))
    }

    /// Removes an item, retrying transient failures; `None` once an attempt finds the bag
    /// empty.
    fn pop(&self) -> Option<Self::Item> {
        retry_pop(|| self.try_pop())
    }

    /// About how many items the bag holds: exact when no operation is in flight, otherwise
    /// off by at most the number of operations in flight. Cheap; takes no lock and writes no
    /// shared memory.
    fn size_guess(&self) -> usize;

    /// What one thread may hold while it works on this bag for a while, to make each
    /// operation cheaper: for the epoch-based [`mpmc::Queue`](crate::mpmc::Queue) a pin, so
    /// that no operation pins on its own; for the [`Stack`](crate::stack::Stack) a stash of
    /// free nodes, so that pushes and pops rarely touch the shared free list. A
    /// [`bagpipe::Handle`](crate::bagpipe::Handle) holds one per pipe.
    ///
    /// A session is meant to be short-lived compared with its thread: drop it (and open a new
    /// one) every few hundred operations, and whenever the thread turns to other work, because
    /// a queue's session delays the reclamation of retired memory process-wide while it lives.
    type Session<'a>
    where
        Self: 'a;

    /// Opens a session of the calling thread on this bag.
    fn session(&self) -> Self::Session<'_>;

    /// [`try_push`](Self::try_push) by a thread that holds `session`, opened on this bag (a
    /// session of another bag of the same type is allowed, and merely not used).
    #[inline]
    fn try_push_in(&self, item: Self::Item, session: &Self::Session<'_>) -> Result<(), Self::Item> {
        let _ = session;
        self.try_push(item)
    }

    /// [`try_pop`](Self::try_pop) by a thread that holds `session` (see
    /// [`try_push_in`](Self::try_push_in)).
    #[inline]
    fn try_pop_in(&self, session: &Self::Session<'_>) -> Result<Self::Item, PopError> {
        let _ = session;
        self.try_pop()
    }
}

/// Repeats `try_push` until it takes `item`, pausing after each lost race.
#[inline]
pub(crate) fn retry_push<T>(item: T, mut try_push: impl FnMut(T) -> Result<(), T>) {
    let mut item = item;
    let pause = RetryPause::new();
    while let Err(back) = try_push(item) {
        item = back;
        pause.pause();
    }
}

/// Repeats `try_pop` until it returns an item or finds the bag empty (`None`), pausing after
/// each lost race.
#[inline]
pub(crate) fn retry_pop<T>(mut try_pop: impl FnMut() -> Result<T, PopError>) -> Option<T> {
    let pause = RetryPause::new();
    loop {
        match try_pop() {
            Ok(item) => return Some(item),
            Err(PopError::Empty) => return None,
            Err(PopError::Transient) => pause.pause(),
        }
    }
}

/// What a retry loop does between two attempts that lost races: crossbeam-utils' exponential
/// backoff (1, 2, 4 … up to 64 spin hints), so that two threads fighting over one line let each
/// other finish a few operations instead of trading the line on every attempt; under loom a
/// yield, so that the model lets the winner of the race run.
pub(crate) struct RetryPause {
    #[cfg(not(pitlane_loom))]
    backoff: crossbeam_utils::Backoff,
}

impl RetryPause {
    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(not(pitlane_loom))]
            backoff: crossbeam_utils::Backoff::new(),
        }
    }

    #[inline]
    pub(crate) fn pause(&self) {
        #[cfg(not(pitlane_loom))]
        self.backoff.spin();
        #[cfg(pitlane_loom)]
        pitlane_sync::shim::hint::spin_loop();
    }
}
