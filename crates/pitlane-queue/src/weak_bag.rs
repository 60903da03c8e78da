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
//! [`PopError::Transient`] or a [`PushError`] from [`try_push`](WeakBag::try_push). A
//! [`BagHandle`], made by [`WeakBag::handle`], is one thread's cheaper way to the same
//! operations.

pub use crate::error::{PopError, PushError};

/// A concurrent bag whose single attempts may fail transiently.
///
/// # Contract for implementations
///
/// - [`try_push`](Self::try_push) either inserts the item and returns `Ok(())`, or has no effect
///   and hands the item back: in [`PushError::Transient`] if it lost a race with a concurrent
///   operation, in [`PushError::Full`] if the bag has no room (only a
///   [`Stack`](crate::stack::Stack) holding [`MAX_ITEMS`](crate::stack::MAX_ITEMS), a queue
///   or stack that needed memory to grow and was refused it, or a Bagpipe all of whose pipes
///   are full).
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

    /// One attempt to insert `item`: `Ok(())` if it is in the bag; otherwise the attempt changed
    /// nothing and the item comes back in [`PushError::Transient`] (it lost a race) or
    /// [`PushError::Full`] (no room).
    ///
    /// ```
    /// use pitlane_queue::{WeakBag, stack::Stack};
    ///
    /// let stack = Stack::new();
    /// assert!(WeakBag::try_push(&stack, 'x').is_ok());
    /// ```
    fn try_push(&self, item: Self::Item) -> Result<(), PushError<Self::Item>>;

    /// One attempt to remove an item: `Ok(item)`, or `Err(PopError::Empty)` if the bag held
    /// none, or `Err(PopError::Transient)` if the attempt lost a race and changed nothing.
    ///
    /// ```
    /// use pitlane_queue::{PopError, WeakBag, stack::Stack};
    ///
    /// let stack: Stack<u8> = Stack::new();
    /// assert_eq!(WeakBag::try_pop(&stack), Err(PopError::Empty));
    /// ```
    fn try_pop(&self) -> Result<Self::Item, PopError>;

    /// Whether the bag keeps state per seat for its plain calls, so that a Bagpipe's plain
    /// call should look the seat up once and hand it to [`try_push_seated`](Self::try_push_seated)
    /// and [`try_pop_seated`](Self::try_pop_seated). Not for use outside this crate.
    #[doc(hidden)]
    const SEATED: bool = false;

    /// [`try_push`](Self::try_push) by a thread whose seat is `seat` (as it stood when the
    /// caller's call began; possibly none): what a Bagpipe's plain call uses on its pipes,
    /// having read the seat once for the whole call. Bags with per-seat state (the
    /// [`Stack`](crate::stack::Stack)) take it from here, and make their own plain call when
    /// `seat` is none; the others need not override this. Not for use outside this crate,
    /// which alone can make a `Held`.
    #[doc(hidden)]
    #[inline(always)]
    fn try_push_seated(
        &self,
        seat: crate::seat::Held<'_>,
        item: Self::Item,
    ) -> Result<(), PushError<Self::Item>> {
        let _ = seat;
        self.try_push(item)
    }

    /// [`try_pop`](Self::try_pop) by a thread whose seat is `seat`: see
    /// [`try_push_seated`](Self::try_push_seated).
    #[doc(hidden)]
    #[inline(always)]
    fn try_pop_seated(&self, seat: crate::seat::Held<'_>) -> Result<Self::Item, PopError> {
        let _ = seat;
        self.try_pop()
    }

    /// Inserts `item`, retrying transient failures until it is in. After each lost race the
    /// thread pauses before it tries again: 32 spin hints after the first, 64 after each
    /// further one, which lets the winner finish a run of operations on the contended cache
    /// line instead of losing it back at once.
    ///
    /// # Panics
    /// If the bag is full (see [`PushError::Full`]).
    ///
    /// ```
    /// use pitlane_queue::{WeakBag, mpmc::Queue};
    ///
    /// let queue = Queue::new();
    /// WeakBag::push(&queue, 5);
    /// assert_eq!(queue.pop(), Some(5));
    /// ```
    #[inline]
    fn push(&self, item: Self::Item) {
        retry_push(item, |item| self.try_push(item))
    }

    /// Removes an item, retrying transient failures with the pauses of
    /// [`push`](Self::push); `None` once an attempt finds the bag empty.
    ///
    /// ```
    /// use pitlane_queue::{WeakBag, mpmc::Queue};
    ///
    /// let queue: Queue<u8> = Queue::new();
    /// assert_eq!(WeakBag::pop(&queue), None);
    /// ```
    #[inline]
    fn pop(&self) -> Option<Self::Item> {
        retry_pop(|| self.try_pop())
    }

    /// About how many items the bag holds: exact when no operation is in flight, otherwise
    /// off by at most the number of operations in flight. Cheap; takes no lock and writes no
    /// shared memory.
    ///
    /// ```
    /// use pitlane_queue::{WeakBag, stack::Stack};
    ///
    /// let stack = Stack::new();
    /// stack.push(1);
    /// assert_eq!(WeakBag::size_guess(&stack), 1);
    /// ```
    fn size_guess(&self) -> usize;

    /// The handle type of this bag: see [`handle`](Self::handle).
    type Handle<'a>: BagHandle<Item = Self::Item>
    where
        Self: 'a;

    /// A handle of the calling thread on this bag: the same operations, with what makes them
    /// cheaper for a thread that keeps working on the bag held in the handle (see
    /// [`BagHandle`]). Give each thread its own.
    ///
    /// ```
    /// use pitlane_queue::{BagHandle, WeakBag, mpmc::Queue};
    ///
    /// let queue = Queue::new();
    /// let handle = WeakBag::handle(&queue);
    /// handle.push(3);
    /// assert_eq!(handle.pop(), Some(3));
    /// ```
    fn handle(&self) -> Self::Handle<'_>;
}

/// One thread's access to a [`WeakBag`]: the bag's operations, with what the thread holds to
/// make them cheaper.
///
/// | bag | what its handle holds |
/// |---|---|
/// | [`mpmc::Queue`](crate::mpmc::Queue) | an epoch pin, renewed every 256 operations, so that no operation pins on its own (plain calls announce an era instead, about as cheaply, where the process has `membarrier`) |
/// | [`Stack`](crate::stack::Stack) | a stash of free nodes and a count of its own, so that a push and a pop touch only the top (plain calls have the same, per thread, inside the stack: the handle adds no speed, only independence from the thread) |
/// | [`Bagpipe`](crate::bagpipe::Bagpipe) | its own walk through the pipes, and a handle on every pipe |
///
/// A handle is not `Sync`: one thread uses it. Drop it (or call [`release`](Self::release))
/// when the thread turns to other work for a while: a queue handle's pin delays the
/// reclamation of retired memory process-wide while it is held.
///
/// ```
/// use pitlane_queue::{BagHandle, PopError};
/// use pitlane_queue::stack::Stack;
///
/// let stack = Stack::new();
/// let handle = stack.handle();
/// handle.push(1);
/// assert_eq!(handle.try_pop(), Ok(1));
/// assert_eq!(handle.try_pop(), Err(PopError::Empty));
/// ```
pub trait BagHandle {
    /// What the bag holds.
    type Item;

    /// [`WeakBag::try_push`] through the handle.
    ///
    /// ```
    /// use pitlane_queue::{BagHandle, mpmc::Queue};
    ///
    /// let queue = Queue::new();
    /// assert!(BagHandle::try_push(&queue.handle(), 1).is_ok());
    /// ```
    fn try_push(&self, item: Self::Item) -> Result<(), PushError<Self::Item>>;

    /// [`WeakBag::try_pop`] through the handle.
    ///
    /// ```
    /// use pitlane_queue::{BagHandle, PopError, mpmc::Queue};
    ///
    /// let queue: Queue<u8> = Queue::new();
    /// assert_eq!(BagHandle::try_pop(&queue.handle()), Err(PopError::Empty));
    /// ```
    fn try_pop(&self) -> Result<Self::Item, PopError>;

    /// [`WeakBag::push`] through the handle: retries transient failures.
    ///
    /// # Panics
    /// If the bag is full (see [`PushError::Full`]).
    ///
    /// ```
    /// use pitlane_queue::{BagHandle, stack::Stack};
    ///
    /// let stack = Stack::new();
    /// BagHandle::push(&stack.handle(), 1);
    /// assert_eq!(stack.pop(), Some(1));
    /// ```
    #[inline]
    fn push(&self, item: Self::Item) {
        retry_push(item, |item| self.try_push(item))
    }

    /// [`WeakBag::pop`] through the handle: retries transient failures; `None` once the bag
    /// is found empty.
    ///
    /// ```
    /// use pitlane_queue::{BagHandle, stack::Stack};
    ///
    /// let stack: Stack<u8> = Stack::new();
    /// assert_eq!(BagHandle::pop(&stack.handle()), None);
    /// ```
    #[inline]
    fn pop(&self) -> Option<Self::Item> {
        retry_pop(|| self.try_pop())
    }

    /// Lets go of whatever the handle holds that delays other threads (a queue handle's epoch
    /// pin), keeping what only speeds this thread up (a stack handle's stash of nodes). The
    /// next operation takes it again. A [`Bagpipe`](crate::bagpipe::Bagpipe) handle does this
    /// for all its pipes every 256 operations.
    ///
    /// ```
    /// use pitlane_queue::{BagHandle, mpmc::Queue};
    ///
    /// let queue = Queue::new();
    /// let handle = queue.handle();
    /// handle.push(1);
    /// handle.release(); // about to do other work for a while
    /// assert_eq!(handle.pop(), Some(1));
    /// ```
    fn release(&self) {}
}

/// A bag is a handle on itself: generic code written against [`BagHandle`] takes either a
/// handle or a plain `&bag`, whose operations then take what they need on each call.
///
/// ```
/// use pitlane_queue::{BagHandle, mpmc::Queue};
///
/// fn fill(into: &impl BagHandle<Item = u32>) {
///     (0..3).for_each(|i| into.push(i));
/// }
///
/// let queue = Queue::new();
/// fill(&&queue);
/// fill(&queue.handle());
/// assert_eq!(queue.len(), 6);
/// ```
impl<B: WeakBag + ?Sized> BagHandle for &B {
    type Item = B::Item;

    #[inline]
    fn try_push(&self, item: B::Item) -> Result<(), PushError<B::Item>> {
        B::try_push(self, item)
    }

    #[inline]
    fn try_pop(&self) -> Result<B::Item, PopError> {
        B::try_pop(self)
    }

    #[inline]
    fn push(&self, item: B::Item) {
        B::push(self, item)
    }

    #[inline]
    fn pop(&self) -> Option<B::Item> {
        B::pop(self)
    }
}

/// The items of a bag that [`IntoIterator::into_iter`] consumed, in the order its `pop` gives
/// them (oldest first for a queue, top first for a stack, none in particular for a Bagpipe).
/// Nobody else can push or pop, so the bag's [`size_guess`](WeakBag::size_guess) is an exact
/// upper bound, the iterator's `size_hint` is `(0, Some(size_guess))`, and it yields exactly
/// that many unless some were revoked ([`RevocableBag::revoke`](crate::revoke::RevocableBag::revoke)
/// needs no reference to the bag, so it may even run while the iterator drains it: a revoked
/// item counts until a pop passes over it). So it is not an `ExactSizeIterator`, as
/// crossbeam's `SegQueue::IntoIter` is not. The items it does not yield are dropped with it.
///
/// ```
/// use pitlane_queue::mpmc::Queue;
///
/// let queue = Queue::new();
/// (0..3).for_each(|i| queue.push(i));
/// let mut items = queue.into_iter();
/// assert_eq!(items.size_hint(), (0, Some(3)));
/// assert_eq!(items.next(), Some(0));
/// ```
pub struct IntoIter<B>(B);

impl<B: WeakBag> IntoIter<B> {
    pub(crate) fn new(bag: B) -> Self {
        Self(bag)
    }
}

impl<B: WeakBag> Iterator for IntoIter<B> {
    type Item = B::Item;

    fn next(&mut self) -> Option<B::Item> {
        self.0.pop()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // No lower bound: revoked items count in `size_guess` until a pop passes them.
        (0, Some(self.0.size_guess()))
    }
}

impl<B: WeakBag> core::iter::FusedIterator for IntoIter<B> {}

impl<B: core::fmt::Debug> core::fmt::Debug for IntoIter<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("IntoIter").field(&self.0).finish()
    }
}

/// Repeats `try_push` until it takes `item`, pausing after each lost race.
///
/// # Panics
/// If an attempt reports the bag full.
#[inline]
pub(crate) fn retry_push<T>(item: T, mut try_push: impl FnMut(T) -> Result<(), PushError<T>>) {
    let mut item = item;
    let mut pause = RetryPause::new();
    loop {
        match try_push(item) {
            Ok(()) => return,
            Err(PushError::Transient(back)) => {
                item = back;
                pause.pause();
            }
            Err(PushError::Full(back)) => full(back),
        }
    }
}

/// A push that must succeed found the bag full.
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn full<T>(item: T) -> ! {
    drop(item);
    panic!(
        "pitlane_queue: the bag is full (a stack holds at most {} items), or the memory it \
         needed for more room could not be allocated",
        crate::stack::MAX_ITEMS
    );
}

/// Repeats `try_pop` until it returns an item or finds the bag empty (`None`), pausing after
/// each lost race.
#[inline]
pub(crate) fn retry_pop<T>(mut try_pop: impl FnMut() -> Result<T, PopError>) -> Option<T> {
    let mut pause = RetryPause::new();
    loop {
        match try_pop() {
            Ok(item) => return Some(item),
            Err(PopError::Empty) => return None,
            Err(PopError::Transient) => pause.pause(),
        }
    }
}

/// The spin hints before the first retry after a lost race, as a power of two: 2^5 = 32.
#[cfg(not(pitlane_loom))]
const FIRST_PAUSE_LOG2: u32 = 5;
/// The longest pause, as a power of two of spin hints: 2^6 = 64, from the second lost race of
/// one operation on. crossbeam-utils' `Backoff::spin` stops growing at the same 64.
#[cfg(not(pitlane_loom))]
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
/// Why 32 and 64, what the pause costs in tail latency, and how to measure it again:
/// `docs/notes/retry-pause.md`.
///
/// Under loom a pause is a yield, so that the model lets the winner of the race run.
pub(crate) struct RetryPause {
    /// The next pause, as a power of two of spin hints.
    #[cfg(not(pitlane_loom))]
    log2: u32,
}

impl RetryPause {
    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(not(pitlane_loom))]
            log2: FIRST_PAUSE_LOG2,
        }
    }

    /// Waits before the next attempt. The count is kept by value in the caller's loop (no
    /// `Cell` behind a reference), so that the fast path, which never pauses, stores nothing
    /// for it; only the spinning is out of line.
    #[inline]
    pub(crate) fn pause(&mut self) {
        #[cfg(not(pitlane_loom))]
        {
            spin(self.log2);
            self.log2 = (self.log2 + 1).min(LAST_PAUSE_LOG2);
        }
        #[cfg(pitlane_loom)]
        pitlane_sync::shim::hint::spin_loop();
    }

    /// How many spin hints the next [`pause`](Self::pause) waits.
    #[cfg(all(test, not(pitlane_loom)))]
    fn next_spins(&self) -> u32 {
        1 << self.log2
    }
}

/// `2^log2` spin hints.
#[cfg(not(pitlane_loom))]
#[cold]
#[inline(never)]
fn spin(log2: u32) {
    for _ in 0..1_u32 << log2 {
        core::hint::spin_loop();
    }
}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_pauses_start_at_32_spin_hints_and_double_up_to_64() {
        let mut pause = RetryPause::new();
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
