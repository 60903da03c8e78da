//! [`Semaphore`]: a fair counting semaphore with tokio's API and behaviour, on the
//! [`WaitQueue`].
//!
//! # Protocol
//!
//! The queue's state, while nobody waits, is `permits << 1 | closed`. While tasks wait, no
//! permit is free (every released permit goes to the waiters) and the semaphore is open.
//!
//! - Acquire `n`: one compare-and-swap on the tail: if closed, fail; if `n` permits are free,
//!   take them; otherwise take the free ones and enqueue, asking for the rest. A task that
//!   finds others waiting enqueues behind them (strict FIFO: no barging, and a large request
//!   at the head holds back smaller ones behind it).
//! - Release `n`: if nobody waits, add `n` to the state by a compare-and-swap. Otherwise, under
//!   the lock, give permits to the head waiter: a waiter whose request is met is dequeued and
//!   woken once the lock is released (the last one's dequeue puts what is left into the state
//!   in the same swap that empties the queue); a waiter that gets only part keeps its place.
//!   Wakers are collected in batches of 32: once a batch is full, it is woken with the lock
//!   released before the next head is given anything (as tokio's release does), so a waiter
//!   polled or dropped from one of those wakers is still waiting, with nothing given.
//! - A queued acquire that is cancelled (its future dropped) leaves the queue under the lock
//!   and releases the permits it had been given so far, which go to the next waiters.
//! - Close: under the lock, set the closed bit, draining the queue if tasks wait; each drained
//!   waiter fails with [`AcquireError`] when next polled, and the permits it had been given go
//!   back to the (closed) semaphore then, or when its future is dropped (as tokio's). A waiter
//!   served before the close but polled after it fails too, and gives its permits back. A
//!   drained waiter polled before the drain reached it (the drain wakes its batches with the
//!   lock released) finds the semaphore closed, leaves the drain list under the lock, and
//!   fails at that poll.
//!
//! Linearization points: the compare-and-swap on the tail (an acquire that completes at once,
//! a `try_acquire`, a release to an empty queue, `forget_permits`), the dequeue of a waiter
//! under the lock (an acquire that waited and is polled while the semaphore is still open),
//! the drain's swap (close). An acquire that waited and is polled after a close fails at that
//! poll; until then the permits it was given are its own, counted neither as free nor as held
//! by a permit, as the partial permits of any waiter are (tokio's semaphore behaves the same).

use core::fmt;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

#[cfg(feature = "alloc")]
use alloc::sync::Arc;

use crate::queue::{Decision, Locked, Node, NodeStatus, Outcome, WaitQueue};
use crate::waker_slot::{WakerSlot, poll_queued};
use pitlane_sync::shim::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The closed flag in the queue's state.
const CLOSED: usize = 1;
/// Permits are counted from bit 1 of the state.
const PERMIT_SHIFT: u32 = 1;

/// A waiting acquire's part of the queue.
pub(crate) struct Acquirer {
    /// Registered by the owner (see `WakerSlot`); taken by the remover under the lock.
    waker: WakerSlot,
    /// How many permits the acquire asks for in all.
    needed: usize,
    /// How many it still lacks; written by the owner before it enqueues, then under the lock.
    remaining: AtomicUsize,
    /// Set under the lock when the semaphore was closed on this waiter.
    closed: AtomicBool,
}

// SAFETY: `waker` is accessed by the owner only while its node is unqueued (before the
// enqueue's swap publishes it, or after it reads `Dequeued`) and otherwise only under the
// queue's lock (`WakerSlot`); the other fields are atomic or immutable.
unsafe impl Sync for Acquirer {}

impl Acquirer {
    /// Under the lock: takes the waker of a waiter being dequeued.
    fn take_waker(&self) -> Option<Waker> {
        // SAFETY: called by a lock holder on a queued node being removed.
        unsafe { self.waker.take() }
    }
}

/// Error returned from [`Semaphore::acquire`] and its variants: the semaphore was closed.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let semaphore = pitlane_wait::Semaphore::new(0);
/// semaphore.close();
/// let error = semaphore.acquire().await.unwrap_err();
/// assert_eq!(error.to_string(), "semaphore closed");
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireError(());

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("semaphore closed")
    }
}

impl core::error::Error for AcquireError {}

/// Error returned from [`Semaphore::try_acquire`] and its variants.
///
/// ```
/// use pitlane_wait::{Semaphore, TryAcquireError};
///
/// let semaphore = Semaphore::new(0);
/// assert_eq!(semaphore.try_acquire().err(), Some(TryAcquireError::NoPermits));
/// semaphore.close();
/// assert_eq!(semaphore.try_acquire().err(), Some(TryAcquireError::Closed));
/// assert_eq!(TryAcquireError::NoPermits.to_string(), "no permits available");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryAcquireError {
    /// The semaphore was closed.
    Closed,
    /// Too few permits were free (or other tasks were waiting for them).
    NoPermits,
}

impl TryAcquireError {
    /// Whether the error is `Closed`.
    ///
    /// ```
    /// assert!(pitlane_wait::TryAcquireError::Closed.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        matches!(self, TryAcquireError::Closed)
    }

    /// Whether the error is `NoPermits`.
    ///
    /// ```
    /// assert!(pitlane_wait::TryAcquireError::NoPermits.is_no_permits());
    /// ```
    pub fn is_no_permits(&self) -> bool {
        matches!(self, TryAcquireError::NoPermits)
    }
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryAcquireError::Closed => f.write_str("semaphore closed"),
            TryAcquireError::NoPermits => f.write_str("no permits available"),
        }
    }
}

impl core::error::Error for TryAcquireError {}

/// A counting semaphore performing asynchronous permit acquisition: tokio's `Semaphore`, on a
/// queue whose enqueue takes no lock.
///
/// Fair: permits go to waiters in the order they asked, and a request for many permits at the
/// head of the queue holds back smaller requests behind it even when enough permits for those
/// are free.
///
/// With the `tokio` feature, the `acquire*` futures spend tokio's cooperative budget as
/// tokio's do: once the task's budget is spent, an acquire that has its permits returns
/// `Pending` still holding them (it keeps its place), and completes when polled after the task
/// has yielded (or fails then, giving them back, if the semaphore was closed meanwhile).
/// Without the feature there is no budget: an acquire completes as soon as its permits are
/// there (see the [crate doc](crate)).
///
/// ```
/// use pitlane_wait::{Semaphore, TryAcquireError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let semaphore = Semaphore::new(3);
/// let a_permit = semaphore.acquire().await.unwrap();
/// let two_permits = semaphore.acquire_many(2).await.unwrap();
/// assert_eq!(semaphore.available_permits(), 0);
/// assert_eq!(semaphore.try_acquire().err(), Some(TryAcquireError::NoPermits));
/// drop(a_permit);
/// assert_eq!(semaphore.available_permits(), 1);
/// # drop(two_permits);
/// # }
/// ```
pub struct Semaphore {
    /// The waiters; the state while empty is `permits << 1 | closed`.
    queue: WaitQueue<Acquirer>,
}

// `Semaphore` is unwind safe, as tokio's is (so are the permits, which hold a `&Semaphore` or
// an `Arc<Semaphore>`, as tokio's are); without these impls the `UnsafeCell` of a waiter's
// waker slot, reached through the queue's node pointers, would make it neither. A panic
// cannot leave a `Semaphore` broken for the code that catches it: its state (the permit count
// and the closed flag) and its queue change only by atomic operations or by list updates made
// under the lock by code that does not panic; the user code it runs is wakers, cloned before
// a slot is written and woken or dropped with the lock released; its own panics (a count
// above `MAX_PERMITS`, merging permits of two semaphores) come before any change, or after
// the served waiters were dequeued and the lock released, as tokio's do. The lock does not
// poison. A waker that panics while a release wakes a batch drops the wakers after it
// unwoken, as tokio's wake list does; those waiters hold their permits and complete when
// next polled.
impl core::panic::UnwindSafe for Semaphore {}
impl core::panic::RefUnwindSafe for Semaphore {}

impl Semaphore {
    /// The largest number of permits a semaphore holds: `usize::MAX >> 3`.
    ///
    /// ```
    /// assert_eq!(pitlane_wait::Semaphore::MAX_PERMITS, usize::MAX >> 3);
    /// ```
    pub const MAX_PERMITS: usize = usize::MAX >> 3;

    /// A semaphore with `permits` permits.
    ///
    /// # Panics
    /// If `permits` exceeds [`MAX_PERMITS`](Semaphore::MAX_PERMITS).
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(5);
    /// assert_eq!(semaphore.available_permits(), 5);
    /// ```
    #[track_caller]
    pub fn new(permits: usize) -> Semaphore {
        assert!(
            permits <= Self::MAX_PERMITS,
            "a semaphore may not have more than MAX_PERMITS permits ({})",
            Self::MAX_PERMITS
        );
        Semaphore {
            queue: WaitQueue::new(permits << PERMIT_SHIFT),
        }
    }

    /// [`new`](Semaphore::new) in a `const` context, for a `static`.
    ///
    /// # Panics
    /// If `permits` exceeds [`MAX_PERMITS`](Semaphore::MAX_PERMITS).
    ///
    /// ```
    /// use pitlane_wait::Semaphore;
    ///
    /// static CONNECTIONS: Semaphore = Semaphore::const_new(10);
    /// assert_eq!(CONNECTIONS.available_permits(), 10);
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn const_new(permits: usize) -> Semaphore {
        // tokio's check, word for word, so that the message ("assertion failed: permits <=
        // Self::MAX_PERMITS") is tokio's too (`new` has another, formatted one, as tokio's).
        assert!(permits <= Self::MAX_PERMITS);
        Semaphore {
            queue: WaitQueue::new(permits << PERMIT_SHIFT),
        }
    }

    /// How many permits are free now (0 while tasks wait).
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(2);
    /// let _permit = semaphore.try_acquire().unwrap();
    /// assert_eq!(semaphore.available_permits(), 1);
    /// ```
    #[inline]
    pub fn available_permits(&self) -> usize {
        self.queue.state().map_or(0, |state| state >> PERMIT_SHIFT)
    }

    /// Adds `n` permits, giving them to waiting tasks first (in FIFO order). Works on a
    /// closed semaphore too.
    ///
    /// # Panics
    /// As tokio's, once the waiters have taken what they lack: if what is left exceeds
    /// [`MAX_PERMITS`](Semaphore::MAX_PERMITS), or would make the free permits exceed it.
    /// The waiters served before the panic are woken first, with the lock released (tokio
    /// drops them unwoken); what is left is not added. If one of their wakers panics, that
    /// panic comes out instead, and the rest of the wakers are dropped unwoken (no waker is
    /// woken while a panic unwinds).
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(0);
    /// semaphore.add_permits(4);
    /// assert_eq!(semaphore.available_permits(), 4);
    /// ```
    #[track_caller]
    pub fn add_permits(&self, n: usize) {
        if n == 0 {
            return;
        }
        match self
            .queue
            .fetch_update_state(|state| add_to_state(state, n))
        {
            Ok(_) => {}
            Err(Some(_)) => overflow(n),
            Err(None) => self.release_to_waiters(n),
        }
    }

    #[inline(never)]
    #[track_caller]
    fn release_to_waiters(&self, n: usize) {
        let mut locked = self.queue.lock();
        let refused = release_locked(&mut locked, n);
        // Releases the lock and wakes the served waiters, before any panic.
        drop(locked);
        if let Err(rest) = refused {
            overflow(rest);
        }
    }

    /// Removes up to `n` free permits (as many as are free, if fewer), returning how many were
    /// removed. A closed semaphore stays closed.
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(3);
    /// assert_eq!(semaphore.forget_permits(2), 2);
    /// assert_eq!(semaphore.forget_permits(5), 1);
    /// assert_eq!(semaphore.available_permits(), 0);
    /// ```
    pub fn forget_permits(&self, n: usize) -> usize {
        match self.queue.fetch_update_state(|state| {
            let removed = (state >> PERMIT_SHIFT).min(n);
            Some(state - (removed << PERMIT_SHIFT))
        }) {
            Ok(previous) => (previous >> PERMIT_SHIFT).min(n),
            Err(_) => 0,
        }
    }

    /// Acquires one permit, waiting in FIFO order until one is free.
    ///
    /// # Errors
    /// [`AcquireError`] if the semaphore is closed (or gets closed while this waits).
    ///
    /// # Cancel safety
    /// Dropping the future gives up its place in the queue; permits it had been given are
    /// released to the next waiters.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let semaphore = pitlane_wait::Semaphore::new(1);
    /// let permit = semaphore.acquire().await.unwrap();
    /// assert_eq!(permit.num_permits(), 1);
    /// # }
    /// ```
    pub async fn acquire(&self) -> Result<SemaphorePermit<'_>, AcquireError> {
        match self.take_now(1) {
            Some(now) => now?,
            None => Acquire::new(self, 1).await?,
        }
        let permit = SemaphorePermit {
            sem: self,
            permits: 1,
        };
        #[cfg(all(feature = "tokio", not(pitlane_loom)))]
        coop::proceed(self).await?;
        Ok(permit)
    }

    /// Acquires `n` permits at once, waiting in FIFO order until they are free.
    ///
    /// # Errors
    /// [`AcquireError`] if the semaphore is closed (or gets closed while this waits).
    ///
    /// # Panics
    /// When first polled, if `n` exceeds [`MAX_PERMITS`](Semaphore::MAX_PERMITS), with
    /// tokio's message: possible only where `usize` is 32 bits.
    ///
    /// # Cancel safety
    /// As [`acquire`](Semaphore::acquire): the permits taken so far go to the next waiters.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let semaphore = pitlane_wait::Semaphore::new(5);
    /// let permit = semaphore.acquire_many(3).await.unwrap();
    /// assert_eq!(semaphore.available_permits(), 2);
    /// # drop(permit);
    /// # }
    /// ```
    pub async fn acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, AcquireError> {
        let n = permit_count(n);
        match self.take_now(n) {
            Some(now) => now?,
            None => Acquire::new(self, n).await?,
        }
        let permit = SemaphorePermit {
            sem: self,
            permits: n,
        };
        #[cfg(all(feature = "tokio", not(pitlane_loom)))]
        coop::proceed(self).await?;
        Ok(permit)
    }

    /// Takes one permit if one is free and nobody waits.
    ///
    /// # Errors
    /// [`TryAcquireError::Closed`] if closed (checked first), else
    /// [`TryAcquireError::NoPermits`].
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(1);
    /// let permit = semaphore.try_acquire().unwrap();
    /// assert!(semaphore.try_acquire().is_err());
    /// drop(permit);
    /// assert!(semaphore.try_acquire().is_ok());
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.try_take(1)?;
        Ok(SemaphorePermit {
            sem: self,
            permits: 1,
        })
    }

    /// Takes `n` permits if that many are free and nobody waits.
    ///
    /// # Errors
    /// [`TryAcquireError::Closed`] if closed (checked first), else
    /// [`TryAcquireError::NoPermits`].
    ///
    /// # Panics
    /// If `n` exceeds [`MAX_PERMITS`](Semaphore::MAX_PERMITS), with tokio's message: possible
    /// only where `usize` is 32 bits.
    ///
    /// ```
    /// use pitlane_wait::{Semaphore, TryAcquireError};
    ///
    /// let semaphore = Semaphore::new(4);
    /// let _three = semaphore.try_acquire_many(3).unwrap();
    /// assert_eq!(semaphore.try_acquire_many(2).err(), Some(TryAcquireError::NoPermits));
    /// ```
    #[inline]
    pub fn try_acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        let n = permit_count(n);
        self.try_take(n)?;
        Ok(SemaphorePermit {
            sem: self,
            permits: n,
        })
    }

    /// The first step of every acquire, before it builds its queue node: `Some` when done at
    /// once (the permits taken, or the semaphore closed), `None` when it must wait (too few
    /// permits free, or tasks waiting). It makes the same decision, by the same compare-and-swap,
    /// as the node's first poll would; the queued path makes it again against the tail word
    /// its enqueue replaces.
    #[inline]
    fn take_now(&self, n: usize) -> Option<Result<(), AcquireError>> {
        match self.queue.fetch_update_state(|state| {
            (state & CLOSED == 0 && state >> PERMIT_SHIFT >= n).then(|| state - (n << PERMIT_SHIFT))
        }) {
            Ok(_) => Some(Ok(())),
            Err(Some(state)) if state & CLOSED != 0 => Some(Err(AcquireError(()))),
            Err(_) => None,
        }
    }

    /// Gives `n` permits back (a permit's drop): to the state if nobody waits, else to the
    /// waiters under the lock.
    #[inline]
    #[track_caller]
    fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        match self
            .queue
            .fetch_update_state(|state| add_to_state(state, n))
        {
            Ok(_) => {}
            Err(Some(_)) => overflow(n),
            Err(None) => self.release_to_waiters(n),
        }
    }

    #[inline]
    fn try_take(&self, n: usize) -> Result<(), TryAcquireError> {
        match self.queue.fetch_update_state(|state| {
            if state & CLOSED != 0 || (state >> PERMIT_SHIFT) < n {
                None
            } else {
                Some(state - (n << PERMIT_SHIFT))
            }
        }) {
            Ok(_) => Ok(()),
            Err(Some(state)) if state & CLOSED != 0 => Err(TryAcquireError::Closed),
            // Tasks wait, so the semaphore is open, and zero permits are always there to take
            // (as tokio's: its check is only `free >= n`).
            Err(None) if n == 0 => Ok(()),
            Err(_) => Err(TryAcquireError::NoPermits),
        }
    }

    /// [`acquire`](Semaphore::acquire) for a semaphore in an `Arc`: the permit owns a
    /// reference, so it is `'static`.
    ///
    /// # Errors
    /// [`AcquireError`] if the semaphore is closed.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(1));
    /// let permit = semaphore.clone().acquire_owned().await.unwrap();
    /// tokio::spawn(async move { drop(permit) }).await.unwrap();
    /// assert_eq!(semaphore.available_permits(), 1);
    /// # }
    /// ```
    #[cfg(feature = "alloc")]
    pub async fn acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, AcquireError> {
        match self.take_now(1) {
            Some(now) => now?,
            None => Acquire::new(&self, 1).await?,
        }
        let permit = OwnedSemaphorePermit {
            sem: self,
            permits: 1,
        };
        #[cfg(all(feature = "tokio", not(pitlane_loom)))]
        coop::proceed(&permit.sem).await?;
        Ok(permit)
    }

    /// [`acquire_many`](Semaphore::acquire_many) for a semaphore in an `Arc`.
    ///
    /// # Errors
    /// [`AcquireError`] if the semaphore is closed.
    ///
    /// # Panics
    /// As `acquire_many`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(10));
    /// let permit = semaphore.clone().acquire_many_owned(4).await.unwrap();
    /// assert_eq!(permit.num_permits(), 4);
    /// # }
    /// ```
    #[cfg(feature = "alloc")]
    pub async fn acquire_many_owned(
        self: Arc<Self>,
        n: u32,
    ) -> Result<OwnedSemaphorePermit, AcquireError> {
        let n = permit_count(n);
        match self.take_now(n) {
            Some(now) => now?,
            None => Acquire::new(&self, n).await?,
        }
        let permit = OwnedSemaphorePermit {
            sem: self,
            permits: n,
        };
        #[cfg(all(feature = "tokio", not(pitlane_loom)))]
        coop::proceed(&permit.sem).await?;
        Ok(permit)
    }

    /// [`try_acquire`](Semaphore::try_acquire) for a semaphore in an `Arc`.
    ///
    /// # Errors
    /// As `try_acquire`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(2));
    /// let _permit = semaphore.clone().try_acquire_owned().unwrap();
    /// assert_eq!(semaphore.available_permits(), 1);
    /// ```
    #[cfg(feature = "alloc")]
    pub fn try_acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        self.try_take(1)?;
        Ok(OwnedSemaphorePermit {
            sem: self,
            permits: 1,
        })
    }

    /// [`try_acquire_many`](Semaphore::try_acquire_many) for a semaphore in an `Arc`.
    ///
    /// # Errors
    /// As `try_acquire_many`.
    ///
    /// # Panics
    /// As `try_acquire_many`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(4));
    /// let _three = semaphore.clone().try_acquire_many_owned(3).unwrap();
    /// assert!(semaphore.try_acquire_many_owned(2).is_err());
    /// ```
    #[cfg(feature = "alloc")]
    pub fn try_acquire_many_owned(
        self: Arc<Self>,
        n: u32,
    ) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        let n = permit_count(n);
        self.try_take(n)?;
        Ok(OwnedSemaphorePermit {
            sem: self,
            permits: n,
        })
    }

    /// Closes the semaphore: no permit is handed out any more, every waiting acquire fails
    /// with [`AcquireError`], and later acquires fail at once. Permits may still be added.
    ///
    /// As tokio's: a waiting acquire is woken and fails when next polled; the permits it had
    /// been given so far go back to the semaphore then (or when its future is dropped), not in
    /// `close` itself. An acquire whose permits were all given before the close, but which is
    /// polled only after it, fails as well and gives them back.
    ///
    /// ```
    /// use pitlane_wait::{Semaphore, TryAcquireError};
    ///
    /// let semaphore = Semaphore::new(1);
    /// semaphore.close();
    /// assert!(semaphore.is_closed());
    /// assert_eq!(semaphore.try_acquire().err(), Some(TryAcquireError::Closed));
    /// ```
    pub fn close(&self) {
        let mut locked = self.queue.lock();
        if locked
            .fetch_update_state(|state| Some(state | CLOSED))
            .is_ok()
        {
            return;
        }
        // Tasks wait: drain them all, leaving the closed state. A drained waiter keeps the
        // permits it had been given until its future fails (its next poll) or is dropped, which
        // gives them back, as tokio's do: until then `available_permits` does not count them.
        // If a waker panics, the waiters not woken yet are still marked closed (their wakers
        // left to them, see `Locked::drain`), and fail when next polled.
        locked.drain(
            CLOSED,
            |waiter| {
                waiter.closed.store(true, Ordering::Relaxed);
                waiter.take_waker()
            },
            |waiter| waiter.closed.store(true, Ordering::Relaxed),
        );
    }

    /// Whether [`close`](Semaphore::close) was called.
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(0);
    /// assert!(!semaphore.is_closed());
    /// semaphore.close();
    /// assert!(semaphore.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.queue.state().is_some_and(|state| state & CLOSED != 0)
    }
}

#[cfg(all(feature = "std", not(pitlane_loom)))]
impl Semaphore {
    /// [`acquire`](Semaphore::acquire) for synchronous code: blocks the thread until a permit
    /// is free.
    ///
    /// # Errors
    /// [`AcquireError`] if the semaphore is closed.
    ///
    /// # Panics
    /// With the `tokio` feature: when called from a thread that drives a tokio runtime, with
    /// tokio's message for blocking calls there.
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(1);
    /// let permit = semaphore.blocking_acquire().unwrap();
    /// assert_eq!(semaphore.available_permits(), 0);
    /// # drop(permit);
    /// ```
    #[track_caller]
    pub fn blocking_acquire(&self) -> Result<SemaphorePermit<'_>, AcquireError> {
        crate::blocking::block_on(self.acquire())
    }

    /// [`acquire_many`](Semaphore::acquire_many) for synchronous code.
    ///
    /// # Errors
    /// [`AcquireError`] if the semaphore is closed.
    ///
    /// # Panics
    /// As [`blocking_acquire`](Semaphore::blocking_acquire), and as `acquire_many`.
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(3);
    /// let permit = semaphore.blocking_acquire_many(3).unwrap();
    /// assert_eq!(permit.num_permits(), 3);
    /// ```
    #[track_caller]
    pub fn blocking_acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, AcquireError> {
        crate::blocking::block_on(self.acquire_many(n))
    }

    /// [`acquire_owned`](Semaphore::acquire_owned) for synchronous code.
    ///
    /// # Errors
    /// [`AcquireError`] if the semaphore is closed.
    ///
    /// # Panics
    /// As [`blocking_acquire`](Semaphore::blocking_acquire).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(1));
    /// let permit = semaphore.clone().blocking_acquire_owned().unwrap();
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// assert_eq!(semaphore.available_permits(), 1);
    /// ```
    #[track_caller]
    pub fn blocking_acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, AcquireError> {
        crate::blocking::block_on(self.acquire_owned())
    }

    /// [`acquire_many_owned`](Semaphore::acquire_many_owned) for synchronous code.
    ///
    /// # Errors
    /// [`AcquireError`] if the semaphore is closed.
    ///
    /// # Panics
    /// As [`blocking_acquire`](Semaphore::blocking_acquire), and as `acquire_many_owned`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(2));
    /// let permit = semaphore.blocking_acquire_many_owned(2).unwrap();
    /// assert_eq!(permit.num_permits(), 2);
    /// ```
    #[track_caller]
    pub fn blocking_acquire_many_owned(
        self: Arc<Self>,
        n: u32,
    ) -> Result<OwnedSemaphorePermit, AcquireError> {
        crate::blocking::block_on(self.acquire_many_owned(n))
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("permits", &self.available_permits())
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// A `u32` count of permits to take, as a `usize`.
///
/// # Panics
/// With tokio's message if `n` exceeds [`MAX_PERMITS`](Semaphore::MAX_PERMITS), which only a
/// target with a 32-bit `usize` allows (`MAX_PERMITS` is `usize::MAX >> 3`). tokio's acquires
/// check first, so this comes before any other outcome, as there.
#[inline]
fn permit_count(n: u32) -> usize {
    let n = n as usize;
    assert!(
        n <= Semaphore::MAX_PERMITS,
        "a semaphore may not have more than MAX_PERMITS permits ({})",
        Semaphore::MAX_PERMITS
    );
    n
}

/// `state` with `n` more permits, or `None` past `MAX_PERMITS`.
#[inline]
fn add_to_state(state: usize, n: usize) -> Option<usize> {
    let permits = (state >> PERMIT_SHIFT).checked_add(n)?;
    (permits <= Semaphore::MAX_PERMITS).then_some(state + (n << PERMIT_SHIFT))
}

/// Refuses `n` permits that no waiter took, with tokio's messages: more than
/// [`MAX_PERMITS`](Semaphore::MAX_PERMITS) at once, or more than the free permits leave room for.
#[cold]
#[track_caller]
fn overflow(n: usize) -> ! {
    assert!(
        n <= Semaphore::MAX_PERMITS,
        "cannot add more than MAX_PERMITS permits ({})",
        Semaphore::MAX_PERMITS
    );
    panic!(
        "number of added permits ({}) would overflow MAX_PERMITS ({})",
        n,
        Semaphore::MAX_PERMITS
    )
}

/// Under the lock: gives `rem` permits to the waiters in FIFO order, the rest to the state.
/// As tokio's, the waiters are served before the rest is checked against
/// [`MAX_PERMITS`](Semaphore::MAX_PERMITS): `rem` may exceed it if the waiters take the excess.
/// If the rest does not fit, it is refused: `Err(rest)`, for the caller to pass to
/// [`overflow`] once it has dropped the guard. (Panicking here would leave the served
/// waiters' wakers in the guard, to be woken by its drop while the panic unwinds, where a
/// waker that panics aborts the process.)
fn release_locked(locked: &mut Locked<'_, Acquirer>, mut rem: usize) -> Result<(), usize> {
    while rem > 0 {
        match locked.fetch_update_state(|state| add_to_state(state, rem)) {
            Ok(_) => return Ok(()),
            Err(Some(_)) => return Err(rem),
            Err(None) => {}
        }
        // A full batch of served waiters is woken (with the lock released) before the head
        // is given anything, as tokio's release does: a waker of that batch finds the head
        // still waiting, with nothing given. The queue may have changed meanwhile: read again.
        if locked.make_room() {
            continue;
        }
        let Some(head) = locked.front() else { continue };
        let lacking = head.remaining.load(Ordering::Relaxed);
        if rem < lacking {
            // Partly served: the head keeps its place.
            head.remaining.store(lacking - rem, Ordering::Relaxed);
            return Ok(());
        }
        rem -= lacking;
        // Served: dequeue it; if it was the last, what is left becomes the state in the same
        // swap (nothing, if it is more than a semaphore may hold: refused below).
        let fits = rem <= Semaphore::MAX_PERMITS;
        let emptied = locked.dequeue(if fits { rem << PERMIT_SHIFT } else { 0 }, |waiter| {
            waiter.remaining.store(0, Ordering::Relaxed);
            waiter.take_waker()
        });
        if emptied == Some(true) {
            return if fits { Ok(()) } else { Err(rem) };
        }
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Init,
    Waiting,
    Done,
}

/// The future behind every `acquire*`.
struct Acquire<'a> {
    sem: &'a Semaphore,
    phase: Phase,
    node: Node<Acquirer>,
}

// SAFETY: the node's cells are only accessed under the queue's lock or by the owner while the
// node is not shared (see `Acquirer`); `&Semaphore` is `Send + Sync`.
unsafe impl Send for Acquire<'_> {}
// SAFETY: as above; `&Acquire` gives no access to the node.
unsafe impl Sync for Acquire<'_> {}

impl<'a> Acquire<'a> {
    fn new(sem: &'a Semaphore, n: usize) -> Self {
        // The caller checked `n` (`permit_count`): the node's counts stay below `MAX_PERMITS`.
        debug_assert!(n <= Semaphore::MAX_PERMITS);
        Acquire {
            sem,
            phase: Phase::Init,
            node: Node::new(Acquirer {
                waker: WakerSlot::new(),
                needed: n,
                remaining: AtomicUsize::new(n),
                closed: AtomicBool::new(false),
            }),
        }
    }
}

impl core::future::Future for Acquire<'_> {
    type Output = Result<(), AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `node` is the only structurally pinned field and is never moved out.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: `this` is pinned, so is its `node`.
        let node = unsafe { Pin::new_unchecked(&this.node) };
        let queue = &this.sem.queue;
        match this.phase {
            Phase::Init => {
                let needed = node.data().needed;
                let waker = cx.waker();
                let prepare = |lacking: usize| {
                    node.data().remaining.store(lacking, Ordering::Relaxed);
                    // SAFETY: the node is not queued yet: nobody else sees it.
                    unsafe { node.data().waker.register(waker) };
                };
                let decide = |state: Option<usize>| match state {
                    Some(state) if state & CLOSED != 0 => Decision::Abort,
                    Some(state) => {
                        let free = state >> PERMIT_SHIFT;
                        if free >= needed {
                            Decision::Update(state - (needed << PERMIT_SHIFT))
                        } else {
                            // Take the free permits, wait for the rest.
                            prepare(needed - free);
                            Decision::Enqueue
                        }
                    }
                    None if needed == 0 => Decision::Abort,
                    None => {
                        prepare(needed);
                        Decision::Enqueue
                    }
                };
                // SAFETY: the node is unqueued (phase Init); `Drop` removes it (or sees it
                // dequeued) before it goes.
                match unsafe { queue.enqueue_or_update(node, decide) } {
                    Outcome::Updated(_) | Outcome::Aborted(None) => {
                        this.phase = Phase::Done;
                        Poll::Ready(Ok(()))
                    }
                    Outcome::Aborted(Some(_)) => {
                        this.phase = Phase::Done;
                        Poll::Ready(Err(AcquireError(())))
                    }
                    Outcome::Enqueued(_) => {
                        this.phase = Phase::Waiting;
                        Poll::Pending
                    }
                }
            }
            Phase::Waiting => {
                if node.status() == NodeStatus::Queued && this.sem.is_closed() {
                    // Still in the drain list of a `close` that has not reached us yet (it
                    // wakes batches ahead of ours with the lock released): fail now, as the
                    // close's drain would have us fail at this poll.
                    leave_closed(queue, node);
                    this.phase = Phase::Done;
                    return complete(this.sem, node);
                }
                // SAFETY: the node was enqueued on this queue only; the slot is its own.
                if unsafe { poll_queued(queue, node, &node.data().waker, cx.waker()) } {
                    this.phase = Phase::Done;
                    return complete(this.sem, node);
                }
                Poll::Pending
            }
            Phase::Done => panic!("`async fn` resumed after completion"),
        }
    }
}

/// A queued waiter that finds the semaphore closed leaves the drain list of that `close` under
/// the lock (a closed semaphore queues nobody: every node still `Queued` then is in the list
/// of the `close` whose swap closed it). If the drain took it out meanwhile, it is `Dequeued`
/// and marked closed; either way [`complete`] then fails it and gives its part back.
#[cold]
fn leave_closed(queue: &WaitQueue<Acquirer>, node: Pin<&Node<Acquirer>>) {
    let mut locked = queue.lock();
    // SAFETY: the node was enqueued on this queue only, by a call that returned.
    unsafe { locked.remove(node) };
}

/// The outcome of a waiter its remover has marked dequeued (or that left the drain list of a
/// `close`, see [`leave_closed`]): its permits, unless the
/// semaphore is closed by now. As tokio's, a waiter that finds the semaphore closed fails even
/// if it had been served before the close, and what it had been given (all it asked for, or
/// the part a drained waiter had) goes back to the semaphore.
#[track_caller]
fn complete(sem: &Semaphore, node: Pin<&Node<Acquirer>>) -> Poll<Result<(), AcquireError>> {
    let waiter = node.data();
    if waiter.closed.load(Ordering::Relaxed) || sem.is_closed() {
        sem.release(waiter.needed - waiter.remaining.load(Ordering::Relaxed));
        Poll::Ready(Err(AcquireError(())))
    } else {
        Poll::Ready(Ok(()))
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        if self.phase != Phase::Waiting {
            return;
        }
        // SAFETY: `drop` runs on the pinned value in place; the node is not moved.
        let node = unsafe { Pin::new_unchecked(&self.node) };
        let waiter = node.data();
        if node.status() == NodeStatus::Queued {
            let mut locked = self.sem.queue.lock();
            // SAFETY: the node was enqueued on this queue only.
            if unsafe { locked.remove(node) } {
                // Cancelled while queued: release what we were given so far.
                let given = waiter.needed - waiter.remaining.load(Ordering::Relaxed);
                if given > 0 {
                    let refused = release_locked(&mut locked, given);
                    // Releases the lock and wakes the served waiters, before any panic.
                    drop(locked);
                    if let Err(rest) = refused {
                        overflow(rest);
                    }
                }
                return;
            }
        }
        // Dequeued, its outcome never taken: what it was given goes back (all it asked for if
        // it was served, the part it had if `close` drained it).
        self.sem
            .release(waiter.needed - waiter.remaining.load(Ordering::Relaxed));
    }
}

/// tokio's cooperative budget for the acquires (feature `tokio`).
#[cfg(all(feature = "tokio", not(pitlane_loom)))]
mod coop {
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll, ready};

    use super::{AcquireError, Semaphore};

    /// Spends a unit of the task's budget once an acquire has its permits (which the caller
    /// holds meanwhile), as tokio's `batch_semaphore::Acquire::poll` does: its acquire takes
    /// the permits first, and only then calls `coop::poll_proceed`, so a task out of budget
    /// keeps its place (tokio 1.54, #8371: FIFO order is preserved when the budget is
    /// exhausted). With no budget left, it returns `Pending` (tokio wakes the task once it
    /// has yielded) still holding the permits; when polled again, it fails if the semaphore
    /// was closed meanwhile, as tokio's acquire does (the caller's permits go back then), and
    /// otherwise spends the budget again. Outside a tokio runtime the budget is unlimited.
    pub(super) fn proceed(sem: &Semaphore) -> Proceed<'_> {
        Proceed {
            sem,
            yielded: false,
        }
    }

    pub(super) struct Proceed<'a> {
        sem: &'a Semaphore,
        /// Whether it returned `Pending` (its budget was spent).
        yielded: bool,
    }

    impl Future for Proceed<'_> {
        type Output = Result<(), AcquireError>;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            if self.yielded && self.sem.is_closed() {
                return Poll::Ready(Err(AcquireError(())));
            }
            self.yielded = true;
            let coop = ready!(tokio::task::coop::poll_proceed(cx));
            coop.made_progress();
            Poll::Ready(Ok(()))
        }
    }
}

/// Permits taken from a [`Semaphore`], given back when dropped.
///
/// ```
/// let semaphore = pitlane_wait::Semaphore::new(2);
/// let permit = semaphore.try_acquire_many(2).unwrap();
/// assert_eq!(semaphore.available_permits(), 0);
/// drop(permit);
/// assert_eq!(semaphore.available_permits(), 2);
/// ```
#[must_use]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    /// `usize`, as tokio's: merged permits may hold more than `u32::MAX`.
    permits: usize,
}

impl<'a> SemaphorePermit<'a> {
    /// Drops the permit without giving its permits back (they are gone from the semaphore).
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(1);
    /// semaphore.try_acquire().unwrap().forget();
    /// assert_eq!(semaphore.available_permits(), 0);
    /// ```
    pub fn forget(mut self) {
        self.permits = 0;
    }

    /// Takes `other`'s permits into this one (given back together when this one drops).
    ///
    /// # Panics
    /// If the two come from different semaphores, or if the sum of their permits exceeds
    /// `usize::MAX` (with tokio's message, "number of permits overflowed"; reachable where
    /// `usize` is 32 bits, by merging permits a semaphore was given again and again). `other`
    /// is then dropped, giving its permits back, and this permit is left as it was.
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(3);
    /// let mut permit = semaphore.try_acquire().unwrap();
    /// permit.merge(semaphore.try_acquire_many(2).unwrap());
    /// assert_eq!(permit.num_permits(), 3);
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(
            core::ptr::eq(self.sem, other.sem),
            "merging permits from different semaphore instances"
        );
        self.permits = self
            .permits
            .checked_add(other.permits)
            .expect("number of permits overflowed");
        other.permits = 0;
    }

    /// Splits `n` permits off into a new permit; `None` (and no change) if this one holds
    /// fewer than `n`.
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(3);
    /// let mut permit = semaphore.try_acquire_many(3).unwrap();
    /// let one = permit.split(1).unwrap();
    /// assert_eq!((permit.num_permits(), one.num_permits()), (2, 1));
    /// assert!(permit.split(3).is_none());
    /// ```
    pub fn split(&mut self, n: usize) -> Option<Self> {
        if n > self.permits {
            return None;
        }
        self.permits -= n;
        Some(SemaphorePermit {
            sem: self.sem,
            permits: n,
        })
    }

    /// The semaphore these permits came from.
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(1);
    /// let permit = semaphore.try_acquire().unwrap();
    /// assert!(std::ptr::eq(permit.semaphore(), &semaphore));
    /// ```
    pub fn semaphore(&self) -> &Semaphore {
        self.sem
    }

    /// How many permits this holds.
    ///
    /// ```
    /// let semaphore = pitlane_wait::Semaphore::new(2);
    /// assert_eq!(semaphore.try_acquire_many(2).unwrap().num_permits(), 2);
    /// ```
    pub fn num_permits(&self) -> usize {
        self.permits
    }
}

impl Drop for SemaphorePermit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.sem.release(self.permits);
    }
}

/// Permits taken from a [`Semaphore`] in an `Arc`, given back when dropped; `'static`.
///
/// ```
/// use std::sync::Arc;
/// let semaphore = Arc::new(pitlane_wait::Semaphore::new(1));
/// let permit = semaphore.clone().try_acquire_owned().unwrap();
/// assert!(Arc::ptr_eq(permit.semaphore(), &semaphore));
/// drop(permit);
/// assert_eq!(semaphore.available_permits(), 1);
/// ```
#[cfg(feature = "alloc")]
#[must_use]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct OwnedSemaphorePermit {
    sem: Arc<Semaphore>,
    /// `usize`, as tokio's: merged permits may hold more than `u32::MAX`.
    permits: usize,
}

#[cfg(feature = "alloc")]
impl OwnedSemaphorePermit {
    /// Drops the permit without giving its permits back.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(1));
    /// semaphore.clone().try_acquire_owned().unwrap().forget();
    /// assert_eq!(semaphore.available_permits(), 0);
    /// ```
    pub fn forget(mut self) {
        self.permits = 0;
    }

    /// Takes `other`'s permits into this one.
    ///
    /// # Panics
    /// As [`SemaphorePermit::merge`]: if the two come from different semaphores, or if the sum
    /// of their permits exceeds `usize::MAX` ("number of permits overflowed").
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(2));
    /// let mut permit = semaphore.clone().try_acquire_owned().unwrap();
    /// permit.merge(semaphore.clone().try_acquire_owned().unwrap());
    /// assert_eq!(permit.num_permits(), 2);
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(
            Arc::ptr_eq(&self.sem, &other.sem),
            "merging permits from different semaphore instances"
        );
        self.permits = self
            .permits
            .checked_add(other.permits)
            .expect("number of permits overflowed");
        other.permits = 0;
    }

    /// Splits `n` permits off into a new permit; `None` (and no change) if this one holds
    /// fewer than `n`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(2));
    /// let mut permit = semaphore.try_acquire_many_owned(2).unwrap();
    /// let one = permit.split(1).unwrap();
    /// assert_eq!((permit.num_permits(), one.num_permits()), (1, 1));
    /// ```
    pub fn split(&mut self, n: usize) -> Option<Self> {
        if n > self.permits {
            return None;
        }
        self.permits -= n;
        Some(OwnedSemaphorePermit {
            sem: self.sem.clone(),
            permits: n,
        })
    }

    /// The semaphore these permits came from.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(1));
    /// let permit = semaphore.clone().try_acquire_owned().unwrap();
    /// assert_eq!(permit.semaphore().available_permits(), 0);
    /// ```
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.sem
    }

    /// How many permits this holds.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let semaphore = Arc::new(pitlane_wait::Semaphore::new(2));
    /// assert_eq!(semaphore.try_acquire_many_owned(2).unwrap().num_permits(), 2);
    /// ```
    pub fn num_permits(&self) -> usize {
        self.permits
    }
}

#[cfg(feature = "alloc")]
impl Drop for OwnedSemaphorePermit {
    #[inline]
    fn drop(&mut self) {
        self.sem.release(self.permits);
    }
}
