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

pub use crate::error::PopError;

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
    /// thread pauses before it tries again: 32 spin hints after the first, 64 after each
    /// further one, which lets the winner finish a run of operations on the contended cache
    /// line instead of losing it back at once.
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

/// The spin hints before the first retry after a lost race, as a power of two: 2^5 = 32.
const FIRST_PAUSE_LOG2: u32 = 5;
/// The longest pause, as a power of two of spin hints: 2^6 = 64, from the second lost race of
/// one operation on. crossbeam-utils' `Backoff::spin` stops growing at the same 64.
const LAST_PAUSE_LOG2: u32 = 6;

/// What a retry loop does between two attempts that lost races: it waits 32 spin hints after
/// the first loss and 64 after each further one. This is crossbeam-utils' `Backoff::spin`
/// started at its sixth step instead of its first.
///
/// The first pause is long on purpose. The thread that won the race holds the contended line
/// (the stack's top, a segment's `deq`); a loser that comes back after a spin hint or two takes
/// that line away in the middle of the winner's next operation, and the two trade it on every
/// operation. Waiting about as long as a dozen uncontended operations lets the winner finish
/// a run of them on a line it keeps, and the roles swap at the next lost race, so both threads
/// get their turns.
///
/// Measured at two threads with the `bag` suite, three interleaved runs of this policy and of
/// crossbeam's backoff from one spin hint (the previous one), medians of each run:
///
/// | | previous | this | peer in the same runs |
/// |---|---:|---:|---:|
/// | stack `pairs`, Mops/s | 14–15 | 46–47 | `parking_lot::Mutex<Vec>` 18–23 |
/// | queue `pairs`, Mops/s | 18–20 | 42–43 | `crossbeam_queue::SegQueue` 22–31 |
/// | stack, p50 / p99 / p99.9 of one operation, ns | 108–130 / 571–742 / 790–925 | 41 / 1076–1156 / 2375–3409 | 324–469 / 938–1339 / 1357–2293 |
/// | queue, p50 / p99 / p99.9, ns | 128–134 / 366–396 / 942–1089 | 117–123 / 1083–1108 / 3035–3403 | 204–220 / 610–635 / 1576–1736 |
///
/// So the pause buys throughput and the median with the tail: the loser of a race waits
/// 0.44 µs, then 0.87 µs, on the 2-vCPU Xeon machines this project measures on (a spin hint
/// takes 13.6 ns there). The work stays shared: the slower thread did 0.88–0.92 of the faster
/// one's operations on the stack and 0.76–0.96 on the queue (the suite's `thread_balance`),
/// against 0.85–0.93 and 0.79–0.96 before. In other interleaved runs, pauses of 64 spin hints
/// doubling to 256 gave 59 Mops/s (stack) and 54–55 (queue) with a p99.9 of 3.8–9.8 µs, and a
/// constant 32 gave 41–48 and 34–37 with a p99.9 of 1.6–2.7 µs.
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
    fn the_pauses_start_at_32_spin_hints_and_double_up_to_64() {
        let pause = RetryPause::new();
        let mut spins = Vec::new();
        for _ in 0..5 {
            spins.push(pause.next_spins());
            pause.pause();
        }
        assert_eq!(spins, [32, 64, 64, 64, 64]);
        // Each retry loop starts over.
        assert_eq!(RetryPause::new().next_spins(), 32);
    }
}
