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

    /// Inserts `item`, retrying transient failures until it is in. After each lost race the
    /// thread pauses before it tries again: 64 spin hints after the first, doubling to at most
    /// 256, which lets the winner finish a run of operations on the contended cache line
    /// instead of losing it back at once.
    fn push(&self, item: Self::Item) {
        retry_push(item, |item| self.try_push(item))
    }

    /// Removes an item, retrying transient failures with the pauses of
    /// [`push`](Self::push); `None` once an attempt finds the bag empty.
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

/// The spin hints before the first retry after a lost race, as a power of two: 2^6 = 64
/// (crossbeam-utils' `Backoff` reaches this at its sixth step and stops growing there).
const FIRST_PAUSE_LOG2: u32 = 6;
/// The longest pause, as a power of two of spin hints: 2^8 = 256, from the third lost race of
/// one operation on.
const LAST_PAUSE_LOG2: u32 = 8;

/// What a retry loop does between two attempts that lost races: it waits 64 spin hints after
/// the first loss, then 128, then 256 after each further one.
///
/// The first pause is long on purpose. The thread that won the race holds the contended line
/// (the stack's top, a segment's `deq`); a loser that comes back after a spin hint or two takes
/// that line away in the middle of the winner's next operation, and the two trade it on every
/// operation. Waiting about as long as a few dozen uncontended operations lets the winner
/// finish a run of them on a line it keeps, and the roles swap at the next lost race, so both
/// threads get their turns. Measured at two threads on the `bag` suite's `pairs`, three
/// interleaved runs of each build: with crossbeam's backoff from one spin hint (the previous
/// policy) the stack did 15.0–17.7 Mops/s and the queue 20.1–21.5; with this pause, 58.2–61.4
/// and 55.9–58.3. The work stays shared: in those runs the slower of the two threads did
/// 0.83–0.98 of the faster one's operations on the stack and 0.44–0.98 on the queue, against
/// 0.42–0.87 for `crossbeam_queue::SegQueue` and 0.78–1.00 for `parking_lot::Mutex<Vec>` (the
/// suite's `thread_balance`). The price is the loser's wait: on the 2-vCPU Xeon machines this
/// project measures on a spin hint takes 13.6 ns, so the pauses are 0.9, 1.7 and 3.5 µs.
///
/// Under loom a pause is a yield, so that the model lets the winner of the race run.
pub(crate) struct RetryPause {
    /// The next pause, as a power of two of spin hints.
    #[cfg(not(pitlane_loom))]
    log2: core::cell::Cell<u32>,
}

impl RetryPause {
    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(not(pitlane_loom))]
            log2: core::cell::Cell::new(FIRST_PAUSE_LOG2),
        }
    }

    /// Waits before the next attempt.
    #[cold]
    pub(crate) fn pause(&self) {
        #[cfg(not(pitlane_loom))]
        {
            let log2 = self.log2.get();
            for _ in 0..1_u32 << log2 {
                core::hint::spin_loop();
            }
            self.log2.set((log2 + 1).min(LAST_PAUSE_LOG2));
        }
        #[cfg(pitlane_loom)]
        pitlane_sync::shim::hint::spin_loop();
    }

    /// How many spin hints the next [`pause`](Self::pause) waits.
    #[cfg(all(test, not(pitlane_loom)))]
    fn next_spins(&self) -> u32 {
        1 << self.log2.get()
    }
}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_pauses_start_at_64_spin_hints_and_double_up_to_256() {
        let pause = RetryPause::new();
        let mut spins = Vec::new();
        for _ in 0..5 {
            spins.push(pause.next_spins());
            pause.pause();
        }
        assert_eq!(spins, [64, 128, 256, 256, 256]);
        // Each retry loop starts over.
        assert_eq!(RetryPause::new().next_spins(), 64);
    }
}
