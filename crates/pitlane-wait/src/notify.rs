//! [`Notify`]: wakes one task or all of them, with tokio's API and behaviour, on the
//! [`WaitQueue`].
//!
//! # Protocol
//!
//! The queue's state, while nobody waits, is the permit: 0 (none) or 1 (stored). A separate
//! counter counts `notify_waiters` calls.
//!
//! - A [`Notified`] records the counter when it is created. When first polled (or
//!   [enabled](Notified::enable)) it returns at once if the counter moved; otherwise, in one
//!   compare-and-swap on the tail, it takes a stored permit or enqueues itself. Before that
//!   decision, if the last notification came from another thread (a notifier on the
//!   waiter's own thread cannot act meanwhile), it waits a bounded number of spin hints
//!   while it would have to enqueue: while
//!   waiters are queued (for the notifiers to take them out, after which the queue may hold a
//!   permit again), then while the queue is empty without a permit (for a `notify_one` to
//!   store one); a `notify_waiters` seen during the wait (the counter moved) completes it, as
//!   at its first read. After
//!   enqueueing it reads the counter again: a `notify_waiters` that ran between its first
//!   read and its enqueue could not see it, so it leaves the queue and completes (forwarding
//!   a `notify_one` it may have received meanwhile). Often that broadcast did see it
//!   and is draining the queue with the lock held, so the waiter first reads its own status
//!   a bounded number of times, waiting for the drain to take it out, and takes the lock to
//!   remove itself only if it is still queued after that.
//! - `notify_one` stores the permit by a compare-and-swap if the queue is empty (a second
//!   permit is not stored, but a stored one is written again, so that every `notify_one`
//!   happens before the wake-up that takes the permit, as tokio's and `Thread::unpark` do);
//!   otherwise it takes the lock and dequeues the first waiter
//!   (`notify_last`: the last one), marks it notified, and wakes it once the lock is released.
//! - `notify_waiters` increments the counter; if waiters are queued it takes the lock and
//!   drains the queue: every waiter queued before the drain's swap is notified, none after,
//!   and a stored permit is left as it is. Wakers are woken in batches of 32 with the lock
//!   released in between. Between the increment and the look at the queue stands a
//!   sequentially consistent fence, and so does one between a waiter's enqueue and its second
//!   read of the counter: whichever fence comes first in their single total order, the other
//!   side's read sees this side's write, so either the broadcast sees the waiter queued or the
//!   waiter sees the increment. (Fences, which loom models, rather than sequentially
//!   consistent accesses, which it models as acquire/release only: loom checks this very
//!   code. A read-modify-write of the counter in place of the waiter's read also works, but
//!   costs a contended cache line where the fence costs none.)
//! - A queued waiter polled (or enabled) again completes if it has been dequeued, or if the
//!   counter moved since it recorded it: the broadcast behind that move saw it queued (its
//!   enqueue's second read saw no broadcast, see above), so it is in that broadcast's drain,
//!   maybe in a batch not reached yet while the drainer has released the lock to wake the
//!   earlier ones (or about to be drained). It then leaves the queue, or the drain list,
//!   under the lock, as tokio's waiter (which reads the counter under its lock) completes.
//! - A waiter dropped after it was notified by `notify_one`/`notify_last` but before it
//!   returned `Ready` passes the notification on (to the next waiter in the same order, or to
//!   the permit).
//! - A broadcast's drain takes every waiter queued at its swap, which comes after its
//!   increment (the broadcast may wait for the lock in between). A waiter created after the
//!   increment and queued before the swap is not covered by that broadcast: found drained
//!   while the counter still reads the value it recorded at creation, it is not done; it
//!   registers again, as at a first poll, when next polled (with that poll's waker) or
//!   enabled (keeping the waker it had: the drain woke it through a clone, made under the
//!   lock, and left it its waker; unless a waker panicked before the drain reached it: then
//!   it is left unwoken, as the waiters the drain covers are on that path). tokio's
//!   broadcast increments and takes its list under one hold of its lock, so no waiter of its
//!   is created in between.
//!
//! Linearization points: `notify_one`'s compare-and-swap on the tail, or its unlink of the
//! waiter; `notify_waiters`' increment; a waiter's take of the permit, or the unlink that
//! notifies it, or (completed by a broadcast before the broadcast's drain reached it) its
//! read of the counter that differs from the value it recorded at creation. A waiter drained
//! by a broadcast that does not cover it (see above) is out of the queue from the drain until
//! its next poll registers it again: a `notify_one` meanwhile goes to the waiters queued
//! then, or to the permit (which that poll takes), where tokio's would pick that waiter if it
//! had waited longest.

use core::fmt;
use core::future::Future;
use core::ops::Deref;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

#[cfg(feature = "alloc")]
use alloc::sync::Arc;

use crate::queue::{Decision, Locked, Node, NodeStatus, Outcome, WaitQueue};
use crate::waker_slot::{WakerSlot, poll_queued};
use pitlane_sync::shim::atomic::{AtomicU8, AtomicUsize, Ordering, fence};

const NO_PERMIT: usize = 0;
const PERMIT: usize = 1;

/// How a waiter was notified.
const NOTIFIED_NONE: u8 = 0;
const NOTIFIED_FIFO: u8 = 1;
const NOTIFIED_LIFO: u8 = 2;
const NOTIFIED_ALL: u8 = 3;

/// A waiting `Notified`'s part of the queue.
pub(crate) struct Waiter {
    /// Registered by the owner (see `WakerSlot`); taken by the notifier under the lock.
    waker: WakerSlot,
    /// One of `NOTIFIED_*`, written by the notifier before it marks the node dequeued.
    notification: AtomicU8,
    /// The broadcast counter when the `Notified` was created, read by its owner and by a
    /// broadcast's drain to tell whether a broadcast covers the waiter.
    created: usize,
}

// SAFETY: `waker` is accessed by the owner only while its node is unqueued (before the
// enqueue's swap publishes it, or after it reads `Dequeued`) and otherwise only under the
// queue's lock (`WakerSlot`); `notification` is atomic.
unsafe impl Sync for Waiter {}

impl Waiter {
    fn new(created: usize) -> Self {
        Waiter {
            waker: WakerSlot::new(),
            notification: AtomicU8::new(NOTIFIED_NONE),
            created,
        }
    }

    /// Under the lock: records how the waiter was notified and takes its waker.
    fn notify(&self, how: u8) -> Option<Waker> {
        self.mark(how);
        // SAFETY: called by a lock holder on a queued node being removed.
        unsafe { self.waker.take() }
    }

    /// Under the lock, by the drain of the broadcast that made the counter `began`: records
    /// the broadcast and takes the waiter's waker, unless the waiter was created after that
    /// increment. Such a waiter is not covered by the broadcast and registers again when next
    /// polled (see `drained_uncovered`): it keeps its waker, and is woken through a clone, so
    /// that registering again from `enable` (which brings no waker) still leaves it the waker
    /// its poll registered, as a tokio waiter (never drained by such a broadcast) keeps it.
    fn notify_all(&self, began: usize) -> Option<Waker> {
        self.mark(NOTIFIED_ALL);
        // Created at `began` or later (the counter only moves forward, wrapping).
        if self.created.wrapping_sub(began) <= usize::MAX / 2 {
            // SAFETY: called by a lock holder on a queued node being removed.
            unsafe { self.waker.clone_kept() }
        } else {
            // SAFETY: as above.
            unsafe { self.waker.take() }
        }
    }

    /// Under the lock: records how the waiter was notified and leaves its waker in it (a
    /// drain finished while a panic unwinds; the owner finds the notification when next
    /// polled, and drops the waker then, as a tokio waiter does).
    fn mark(&self, how: u8) {
        self.notification.store(how, Ordering::Relaxed);
    }
}

/// Notifies a single task, or all waiting tasks, to wake up: tokio's `Notify`, on a queue
/// whose enqueue takes no lock.
///
/// A `Notify` holds at most one permit. [`notify_one`](Notify::notify_one) gives it to the
/// task waiting longest (or stores it, when none waits), [`notify_last`](Notify::notify_last)
/// to the task waiting least long, and [`notify_waiters`](Notify::notify_waiters) wakes every
/// task waiting at that moment — including every [`Notified`] created before the call, even if
/// not yet polled — and stores no permit.
///
/// ```
/// use std::sync::Arc;
/// use pitlane_wait::Notify;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let notify = Arc::new(Notify::new());
/// let notify2 = notify.clone();
/// let handle = tokio::spawn(async move {
///     notify2.notified().await;
///     "woken"
/// });
/// notify.notify_one();
/// assert_eq!(handle.await.unwrap(), "woken");
/// # }
/// ```
pub struct Notify {
    /// The waiters; the state while empty is the permit.
    queue: WaitQueue<Waiter>,
    /// How many times `notify_waiters` was called (wrapping).
    broadcasts: AtomicUsize,
    /// The thread that called `notify_one`, `notify_last` or `notify_waiters` last, as a
    /// [`thread_token`], or 0: a hint, read by a waiter to decide whether a short wait before
    /// it enqueues can end in a notification (see `wait_before_deciding`).
    notifier: AtomicUsize,
}

impl Notify {
    /// A `Notify` with no permit and no waiter.
    ///
    /// ```
    /// let notify = pitlane_wait::Notify::new();
    /// notify.notify_one(); // stores the permit
    /// ```
    pub fn new() -> Notify {
        Notify {
            queue: WaitQueue::new(NO_PERMIT),
            broadcasts: AtomicUsize::new(0),
            notifier: AtomicUsize::new(0),
        }
    }

    /// A `Notify` for a `static`: the same as [`new`](Notify::new), in a `const` context.
    ///
    /// ```
    /// use pitlane_wait::Notify;
    ///
    /// static SHUTDOWN: Notify = Notify::const_new();
    /// SHUTDOWN.notify_waiters();
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn const_new() -> Notify {
        Notify {
            queue: WaitQueue::new(NO_PERMIT),
            broadcasts: AtomicUsize::new(0),
            notifier: AtomicUsize::new(0),
        }
    }

    /// A future that completes when this `Notify` is notified.
    ///
    /// It sees every [`notify_waiters`](Notify::notify_waiters) from its creation on, and a
    /// [`notify_one`](Notify::notify_one) once it has been polled or
    /// [enabled](Notified::enable) (or a permit stored before that). It is fused: once it
    /// returned `Ready`, it always does.
    ///
    /// Its first poll (or `enable`), when it finds no permit and the last `notify_*` call
    /// came from another thread, spins briefly before it registers: while other waiters are
    /// queued, then while the queue is empty without a
    /// permit, at most 32 spin hints each, each wait ending as soon as its condition changes
    /// or a `notify_waiters` happens. A notification that comes a moment later then completes
    /// it at once instead of through a wake-up (see the module doc).
    ///
    /// # Cancel safety
    /// Dropping a `Notified` that was chosen by `notify_one` or `notify_last` but had not yet
    /// returned `Ready` passes the notification on to another waiter (or to the permit).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let notify = pitlane_wait::Notify::new();
    /// notify.notify_one();
    /// notify.notified().await; // takes the stored permit
    /// # }
    /// ```
    pub fn notified(&self) -> Notified<'_> {
        Notified {
            wait: Wait::new(self),
        }
    }

    /// [`notified`](Notify::notified) for a `Notify` in an `Arc`: the future owns a reference,
    /// so it is `'static`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let notify = Arc::new(pitlane_wait::Notify::new());
    /// let notified = notify.clone().notified_owned();
    /// notify.notify_one();
    /// notified.await;
    /// # }
    /// ```
    #[cfg(feature = "alloc")]
    pub fn notified_owned(self: Arc<Self>) -> OwnedNotified {
        OwnedNotified {
            wait: Wait::new(self),
        }
    }

    /// Wakes the task that has waited longest, or stores a permit for the next
    /// [`notified`](Notify::notified) to take if no task waits (at most one permit is stored).
    ///
    /// What the caller wrote before the call is visible to the task it wakes, or to the task
    /// that takes the permit, even when the permit was stored already (as with
    /// [`Thread::unpark`](https://doc.rust-lang.org/std/thread/struct.Thread.html#method.unpark)).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let notify = pitlane_wait::Notify::new();
    /// notify.notify_one();
    /// notify.notify_one(); // still one permit
    /// notify.notified().await;
    /// let mut second = std::pin::pin!(notify.notified());
    /// assert!(!second.as_mut().enable());
    /// # }
    /// ```
    #[inline]
    pub fn notify_one(&self) {
        self.notify(NOTIFIED_FIFO);
    }

    /// Wakes the task that has waited least long, or stores a permit if no task waits.
    ///
    /// ```
    /// use std::pin::pin;
    /// let notify = pitlane_wait::Notify::new();
    /// let mut first = pin!(notify.notified());
    /// let mut second = pin!(notify.notified());
    /// first.as_mut().enable();
    /// second.as_mut().enable();
    /// notify.notify_last();
    /// assert!(second.as_mut().enable()); // the last one in was woken
    /// assert!(!first.as_mut().enable());
    /// ```
    #[inline]
    pub fn notify_last(&self) {
        self.notify(NOTIFIED_LIFO);
    }

    #[inline]
    fn notify(&self, how: u8) {
        self.note_notifier();
        // No waiter: store the permit by a compare-and-swap from "no permit"; if it is stored
        // already, write it again (a compare-and-swap from "permit" to "permit"), so that,
        // as with tokio and `Thread::unpark`, this call happens before the wake-up that takes
        // the permit even when it coalesces with an earlier one.
        let mut expected = NO_PERMIT;
        loop {
            match self.queue.compare_exchange_state(expected, PERMIT) {
                Ok(_) => return,
                Err(Some(state)) => expected = state,
                Err(None) => return self.notify_waiter(how),
            }
        }
    }

    /// Records the calling thread as the last notifier (a plain store, made only when it
    /// changes, so a thread that keeps notifying writes nothing more).
    #[inline]
    fn note_notifier(&self) {
        let me = thread_token();
        if me != 0 && self.notifier.load(Ordering::Relaxed) != me {
            self.notifier.store(me, Ordering::Relaxed);
        }
    }

    /// Whether the last notification came from another thread than the caller's: only then
    /// can a notifier act while the caller waits before deciding. Always under loom, so that
    /// the models see those waits; never without `std` (no thread tokens).
    #[inline]
    fn notifier_elsewhere(&self) -> bool {
        if cfg!(pitlane_loom) {
            return true;
        }
        let last = self.notifier.load(Ordering::Relaxed);
        last != 0 && last != thread_token()
    }

    #[inline(never)]
    fn notify_waiter(&self, how: u8) {
        let mut locked = self.queue.lock();
        notify_locked(&mut locked, how);
        // The guard releases the lock, then wakes the waiter.
    }

    /// Wakes every task waiting now, and every [`Notified`] created before this call that has
    /// not completed yet (even if it was never polled). Stores no permit, and leaves a stored
    /// permit where it is.
    ///
    /// The set of waiters woken is fixed atomically at the call: a task that starts waiting
    /// while the wake-ups are under way is not woken by this call, and a [`Notified`]
    /// created after the call began is not completed by it (should the call's drain find it
    /// queued, it is woken through a clone of its waker, which it keeps, and registers again
    /// when polled or enabled: so an `enable` then leaves it the waker its poll registered, as
    /// on tokio; the clone is made under the lock, as tokio's poll of a queued `Notified` with
    /// a new waker makes its clone).
    ///
    /// If a waker panics, the remaining waiters are still marked notified before the panic
    /// continues, as tokio's are: they are not woken, and keep their wakers (each is dropped
    /// when its future completes, or with the future), so that no waker is dropped while the
    /// lock is held or the panic unwinds; each completes when next polled (one created after
    /// this call began registers again instead).
    ///
    /// ```
    /// use std::pin::pin;
    /// let notify = pitlane_wait::Notify::new();
    /// let mut a = pin!(notify.notified());
    /// let mut b = pin!(notify.notified()); // created, not yet polled
    /// a.as_mut().enable();
    /// notify.notify_waiters();
    /// assert!(a.as_mut().enable());
    /// assert!(b.as_mut().enable());
    /// ```
    pub fn notify_waiters(&self) {
        self.note_notifier();
        let began = self
            .broadcasts
            .fetch_add(1, Ordering::SeqCst)
            .wrapping_add(1);
        // Either a waiter's second read of the counter sees this increment, or this look at
        // the queue sees the waiter queued (see the module doc).
        fence(Ordering::SeqCst);
        if self.queue.is_empty() {
            return;
        }
        let mut locked = self.queue.lock();
        locked.drain(
            NO_PERMIT,
            |waiter| waiter.notify_all(began),
            |waiter| waiter.mark(NOTIFIED_ALL),
        );
    }
}

/// Under the lock: gives a notification to one waiter (first or last), or stores the permit.
fn notify_locked(locked: &mut Locked<'_, Waiter>, how: u8) {
    loop {
        if locked.fetch_update_state(|_| Some(PERMIT)).is_ok() {
            return;
        }
        let notified = if how == NOTIFIED_LIFO {
            locked.pop(|waiter| waiter.notify(how))
        } else {
            locked.dequeue(NO_PERMIT, |waiter| waiter.notify(how))
        };
        if notified.is_some() {
            return;
        }
    }
}

impl Default for Notify {
    fn default() -> Notify {
        Notify::new()
    }
}

// `Notify` is unwind safe, as tokio's is (its tests/unwindsafe.rs checks that; without these
// impls the `UnsafeCell` of a waiter's waker slot, reached through the queue's node pointers,
// would make it neither). A panic cannot leave a `Notify` broken for the code that catches
// it: the only user code it runs is wakers, woken with the lock released (and cloned under it,
// for a queued waiter polled with a new waker and for a waiter a broadcast drains without
// covering it: a clone that panics there leaves the waiter its waker and the queue whole, as
// a `take` that panics in a drain does), and a waker that panics in `notify_waiters` still
// leaves every drained waiter notified (see that method);
// the lock does not poison, and every other step is an atomic operation or a list update
// made under the lock by code that does not panic.
impl core::panic::UnwindSafe for Notify {}
impl core::panic::RefUnwindSafe for Notify {}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.queue.state();
        f.debug_struct("Notify")
            .field("permit", &(state == Some(PERMIT)))
            .field("waiters", &state.is_none())
            .finish()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Created, neither polled nor enabled.
    Init,
    /// Queued (or dequeued by a notifier, not yet seen).
    Waiting,
    /// Returned (or will return) `Ready`.
    Done,
}

/// The future behind [`Notified`] and [`OwnedNotified`].
struct Wait<N: Deref<Target = Notify>> {
    notify: N,
    phase: Phase,
    /// Its waiter: it records `notify.broadcasts` when the future was created (`created`).
    node: Node<Waiter>,
}

impl<N: Deref<Target = Notify>> Wait<N> {
    fn new(notify: N) -> Self {
        let broadcasts = notify.broadcasts.load(Ordering::SeqCst);
        Wait {
            notify,
            phase: Phase::Init,
            node: Node::new(Waiter::new(broadcasts)),
        }
    }

    fn poll_wait(self: Pin<&mut Self>, waker: Option<&Waker>) -> Poll<()> {
        // SAFETY: `node` is the only structurally pinned field and is never moved out.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: `this` is pinned, so is its `node`.
        let node = unsafe { Pin::new_unchecked(&this.node) };
        let notify = &*this.notify;
        let created = node.data().created;
        match this.phase {
            Phase::Init => {
                // A notify_waiters since creation completes us without taking the permit.
                if notify.broadcasts.load(Ordering::SeqCst) != created {
                    this.phase = Phase::Done;
                    return Poll::Ready(());
                }
                if wait_before_deciding(notify, created) {
                    // A notify_waiters since creation, seen while waiting: as above.
                    this.phase = Phase::Done;
                    return Poll::Ready(());
                }
                let take_or_enqueue = |state: Option<usize>| match state {
                    Some(PERMIT) => Decision::Update(NO_PERMIT),
                    _ => {
                        if let Some(waker) = waker {
                            // SAFETY: the node is not queued yet: nobody else sees it.
                            unsafe { node.data().waker.register(waker) };
                        }
                        Decision::Enqueue
                    }
                };
                // SAFETY: the node is unqueued (phase Init); it is only enqueued here, and
                // `Drop` removes it (or sees it dequeued) before it goes.
                match unsafe { notify.queue.enqueue_or_update(node, take_or_enqueue) } {
                    Outcome::Updated(_) => {
                        // Done first: should the dropped waker's `Drop` panic, a later poll
                        // must not take a second permit.
                        this.phase = Phase::Done;
                        // SAFETY: the node was not enqueued (the decision took the permit);
                        // nobody else sees it.
                        unsafe { node.data().waker.unregister() };
                        Poll::Ready(())
                    }
                    Outcome::Enqueued(_) => {
                        this.phase = Phase::Waiting;
                        // Pairs with the fence in `notify_waiters` (see the module doc).
                        fence(Ordering::SeqCst);
                        if notify.broadcasts.load(Ordering::SeqCst) != created {
                            // A notify_waiters ran between our first read and our enqueue.
                            leave_after_broadcast(notify, node);
                            this.phase = Phase::Done;
                            // A completed `Notified` keeps no waker, as tokio's (which checks
                            // the counter under its lock before it registers any).
                            // SAFETY: the node is out of the queue (removed by `leave`, or
                            // dequeued: the remover is done with it); only we touch its slot.
                            unsafe { node.data().waker.unregister() };
                            return Poll::Ready(());
                        }
                        Poll::Pending
                    }
                    Outcome::Aborted(_) => unreachable!("the decision never aborts"),
                }
            }
            Phase::Waiting => {
                let done = node.status() == NodeStatus::Dequeued
                    || if notify.broadcasts.load(Ordering::SeqCst) != created {
                        // A broadcast that covers us (see `leave_covered`) has not reached us
                        // yet: it is draining batches ahead of ours, or about to drain.
                        leave_covered(notify, node);
                        true
                    } else {
                        match waker {
                            // SAFETY: the node was enqueued on this queue only; the slot is
                            // its own.
                            Some(waker) => unsafe {
                                poll_queued(&notify.queue, node, &node.data().waker, waker)
                            },
                            // `enable` on a queued waiter: only look.
                            None => false,
                        }
                    };
                if done {
                    if drained_uncovered(notify, node, created) {
                        // Drained by a broadcast that began (incremented the counter) before
                        // this future was created: not notified. Register again, as a fresh
                        // first poll does (the counter is the one recorded at creation). The
                        // drain left the waiter its waker (see `Waiter::notify_all`): a poll
                        // registers its own instead, an `enable` (no waker) keeps it.
                        if waker.is_some() {
                            // SAFETY: the node is dequeued: the remover is done with it and
                            // nobody else touches its slot.
                            unsafe { node.data().waker.unregister() };
                        }
                        node.data()
                            .notification
                            .store(NOTIFIED_NONE, Ordering::Relaxed);
                        node.reset();
                        this.phase = Phase::Init;
                        // SAFETY: `this` is the pinned future itself (see above); it is not
                        // moved. The Init phase does not come back here.
                        return unsafe { Pin::new_unchecked(this) }.poll_wait(waker);
                    }
                    this.phase = Phase::Done;
                    // A completed `Notified` keeps no waker, as tokio's (which takes it out when
                    // it completes): the one it registered, if it left the queue itself, or one
                    // a drain left it (on its unwinding path, or not covering it).
                    // SAFETY: the node is out of the queue (dequeued: the remover is done with
                    // it; or removed by `leave_covered`); only we touch its slot.
                    unsafe { node.data().waker.unregister() };
                    return Poll::Ready(());
                }
                Poll::Pending
            }
            Phase::Done => Poll::Ready(()),
        }
    }

    fn enable(self: Pin<&mut Self>) -> bool {
        self.poll_wait(None).is_ready()
    }
}

/// How many spin hints a waiter about to decide waits at most while waiters are queued (one
/// under loom, where the hint is a yield, so that the models see a decision taken after the
/// wait and a broadcast seen during it).
const QUEUED_SPINS: u32 = if cfg!(pitlane_loom) { 1 } else { 32 };

/// How many spin hints a waiter about to decide waits at most, after that, while the queue is
/// empty and holds no permit (one under loom, as above).
const ARRIVAL_SPINS: u32 = if cfg!(pitlane_loom) { 1 } else { 32 };

/// Before a waiter's first decision (take the permit or enqueue), waits a little for the
/// decision to become "take": while waiters are queued, for the notifiers to take them out
/// (up to [`QUEUED_SPINS`] hints); then, while the queue is empty and holds no permit, for a
/// `notify_one` to store one (up to [`ARRIVAL_SPINS`] hints). Returns `true` as soon as the
/// broadcast counter differs from `created` (its value when the waiter was created): a
/// `notify_waiters` ran since, which completes the waiter, as at its first read.
///
/// Why: while waiters are queued the decision can only be "enqueue behind them", since
/// `notify_one` stores no permit until the queue is empty. In a tight notify/wait loop
/// (tokio's own benchmark) a woken task comes back to wait again at once; enqueued at once,
/// behind the others, it keeps the queue from ever emptying, and every later wake-up goes
/// through a dequeue and a cross-thread wake instead of a stored permit (with 500 tasks,
/// 470-510 of every 500 wake-ups; see `docs/notes/wait-bench.md`, seventh session). tokio's
/// waiter is held back the same way by the mutex that its enqueue and the notifier's dequeue
/// both take. A waiter that finds no permit and nobody queued enqueues and then needs a
/// cross-thread wake too, where a `notify_one` or `notify_waiters` a moment later would have
/// completed it on the spot.
///
/// Only when the last notification came from another thread (see
/// [`Notify::notifier_elsewhere`]): a notifier on the waiter's own thread (two tasks of a
/// single-threaded runtime that notify each other) cannot act while the waiter spins, so
/// there the wait would only add its whole length to every hand-over (a ping-pong between two
/// tasks on a `current_thread` runtime went from about 320 to 1,330 ns per round trip with
/// it; `docs/notes/wait-bench.md`, seventh session).
///
/// The waits are bounded (at most 64 hints, about 2.6 µs here) and end as soon as their
/// condition changes; the decision after them is the same single compare-and-swap. The waiter
/// is not registered during the wait (its poll has not returned), so a `notify_one` meanwhile
/// goes to the queued waiters or to the permit, as it would if the poll had started later.
#[inline]
fn wait_before_deciding(notify: &Notify, created: usize) -> bool {
    if !notify.notifier_elsewhere() {
        return false;
    }
    let mut spins = 0;
    while spins < QUEUED_SPINS && notify.queue.state().is_none() {
        if notify.broadcasts.load(Ordering::SeqCst) != created {
            return true;
        }
        pitlane_sync::shim::hint::spin_loop();
        spins += 1;
    }
    spins = 0;
    while spins < ARRIVAL_SPINS && notify.queue.state() == Some(NO_PERMIT) {
        if notify.broadcasts.load(Ordering::SeqCst) != created {
            return true;
        }
        pitlane_sync::shim::hint::spin_loop();
        spins += 1;
    }
    false
}

/// A number that names the calling thread while it runs (the address of a thread-local of
/// its own), for [`Notify::notifier_elsewhere`]; 0 without `std` and under loom. A token may
/// be reused by a later thread: it serves a hint only.
#[inline]
fn thread_token() -> usize {
    #[cfg(all(feature = "std", not(pitlane_loom)))]
    {
        std::thread_local! {
            static MARK: u8 = const { 0 };
        }
        MARK.with(|mark| core::ptr::from_ref(mark).addr())
    }
    #[cfg(not(all(feature = "std", not(pitlane_loom))))]
    {
        0
    }
}

/// How many times a waiter that found a broadcast after it enqueued reads its own status,
/// waiting for that broadcast's drain to take it out, before it takes the lock to leave (one
/// under loom, where the wait is a yield).
const LEAVE_SPINS: u32 = if cfg!(pitlane_loom) { 1 } else { 200 };

/// A waiter enqueued after a broadcast it should have seen leaves the queue; a notification
/// it got meanwhile from `notify_one`/`notify_last` goes on to another waiter.
///
/// The broadcast has often seen the waiter queued (its look at the queue came after the
/// waiter's enqueue) and is draining it with the lock held: the waiter first waits a little
/// for that drain to mark it `Dequeued` instead of taking the lock against it. Only the wait
/// is new; what the waiter does after is what it would do under the lock.
#[cold]
fn leave_after_broadcast(notify: &Notify, node: Pin<&Node<Waiter>>) {
    let mut spins = 0;
    while spins < LEAVE_SPINS && node.status() != NodeStatus::Dequeued {
        pitlane_sync::shim::hint::spin_loop();
        spins += 1;
    }
    leave(notify, node);
}

/// Takes a queued waiter that will not complete through the queue out of it for good: removes
/// it under the lock if it is still queued; if a notifier dequeued it first with a
/// `notify_one`/`notify_last` that it will never return, passes that on to another waiter (or
/// to the permit). Used by a dropped waiter and by one that leaves after a broadcast.
fn leave(notify: &Notify, node: Pin<&Node<Waiter>>) {
    if node.status() != NodeStatus::Dequeued {
        let mut locked = notify.queue.lock();
        // SAFETY: the node was enqueued on this queue only.
        if unsafe { locked.remove(node) } {
            return;
        }
        // Dequeued meanwhile: the remover is done with it (the lock orders its writes).
        if let Some(how) = unreturned(node) {
            notify_locked(&mut locked, how);
        }
        return;
    }
    // `Dequeued` was read with acquire ordering: the remover's write of the notification,
    // made before it stored `Dequeued` (release), is visible, and it no longer touches the
    // node.
    if let Some(how) = unreturned(node) {
        notify_locked(&mut notify.queue.lock(), how);
    }
}

/// A queued waiter that finds the broadcast counter moved since its enqueue completes, as
/// tokio's does (tokio reads the counter under its lock): it leaves the queue, or the drain
/// list of the broadcast that has not reached it yet, under the lock. Its enqueue's second
/// read of the counter (after the fence) saw no broadcast, so the broadcast whose increment it
/// sees now saw it queued (see the module doc) and drains it, unless a notifier has dequeued
/// it first: either way it is notified, and it returns that notification (a `notify_one`
/// taken meanwhile is returned, not passed on, as tokio's waiter returns it).
#[cold]
fn leave_covered(notify: &Notify, node: Pin<&Node<Waiter>>) {
    let mut locked = notify.queue.lock();
    // SAFETY: the node was enqueued on this queue only, by a call that returned.
    unsafe { locked.remove(node) };
}

/// Whether a waiter found dequeued was drained by a `notify_waiters` that does not cover it:
/// one whose increment of the counter came before the waiter was created (`created`, the
/// value it recorded then, is still the counter's value). The broadcast's increment is its
/// linearization point, but its drain (under the lock, maybe after waiting for it) takes every
/// waiter queued at its swap, including those created and queued in between; such a waiter
/// was not notified, and registers again (tokio's waiters cannot be created in that window:
/// its broadcast increments the counter and takes the list under one hold of its lock).
///
/// A waiter that found the counter moved since its creation is covered, whatever drained it;
/// the drain stored its `Dequeued` (release) after its increment, so a waiter that reads
/// `Dequeued` (acquire) reads that increment or a later value of the counter.
fn drained_uncovered(notify: &Notify, node: Pin<&Node<Waiter>>, created: usize) -> bool {
    node.status() == NodeStatus::Dequeued
        && node.data().notification.load(Ordering::Relaxed) == NOTIFIED_ALL
        && notify.broadcasts.load(Ordering::SeqCst) == created
}

/// The `notify_one`/`notify_last` a dequeued waiter got, if it got one (not a broadcast).
fn unreturned(node: Pin<&Node<Waiter>>) -> Option<u8> {
    let how = node.data().notification.load(Ordering::Relaxed);
    (how == NOTIFIED_FIFO || how == NOTIFIED_LIFO).then_some(how)
}

impl<N: Deref<Target = Notify>> Drop for Wait<N> {
    fn drop(&mut self) {
        if self.phase != Phase::Waiting {
            return;
        }
        // SAFETY: `drop` runs on the pinned value in place; the node is not moved.
        let node = unsafe { Pin::new_unchecked(&self.node) };
        // Chosen but never returned Ready: `leave` passes the notification on.
        leave(&self.notify, node);
    }
}

/// The future [`Notify::notified`] returns (tokio's `tokio::sync::futures::Notified`).
///
/// `Send` and `Sync`, not `Unpin` (it holds its queue node): pin it to poll it or
/// [`enable`](Notified::enable) it.
///
/// ```
/// use std::pin::pin;
/// let notify = pitlane_wait::Notify::new();
/// let mut notified = pin!(notify.notified());
/// assert!(!notified.as_mut().enable()); // queued now: a notify_one will pick it
/// notify.notify_one();
/// assert!(notified.as_mut().enable());
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Notified<'a> {
    wait: Wait<&'a Notify>,
}

// SAFETY: the node's cells are only accessed under the queue's lock or by the owner while the
// node is not shared (see `Waiter`); `&Notify` is `Send + Sync`.
unsafe impl Send for Notified<'_> {}
// SAFETY: as above; `&Notified` gives no access to the node.
unsafe impl Sync for Notified<'_> {}

impl Notified<'_> {
    /// Registers this future as a waiter without polling it, so that it can receive a
    /// [`notify_one`](Notify::notify_one) from now on (a `notify_waiters` it sees from its
    /// creation anyway). Returns `true` if it is already notified (it will be `Ready` when
    /// polled), taking a stored permit if there was one.
    ///
    /// ```
    /// use std::pin::pin;
    /// let notify = pitlane_wait::Notify::new();
    /// let mut notified = pin!(notify.notified());
    /// notified.as_mut().enable();
    /// notify.notify_one(); // goes to the enabled waiter, not to a permit
    /// assert!(notified.as_mut().enable());
    /// ```
    pub fn enable(self: Pin<&mut Self>) -> bool {
        // SAFETY: projection to the pinned field `wait`.
        unsafe { self.map_unchecked_mut(|n| &mut n.wait) }.enable()
    }
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: projection to the pinned field `wait`.
        unsafe { self.map_unchecked_mut(|n| &mut n.wait) }.poll_wait(Some(cx.waker()))
    }
}

impl fmt::Debug for Notified<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notified")
            .field("notify", &self.wait.notify)
            .field("phase", &self.wait.phase)
            .finish()
    }
}

/// The future [`Notify::notified_owned`] returns (tokio's
/// `tokio::sync::futures::OwnedNotified`): a [`Notified`] that owns its `Arc<Notify>`.
///
/// ```
/// use std::pin::pin;
/// use std::sync::Arc;
/// let notify = Arc::new(pitlane_wait::Notify::new());
/// let mut notified = pin!(notify.clone().notified_owned());
/// notify.notify_waiters();
/// assert!(notified.as_mut().enable());
/// ```
#[cfg(feature = "alloc")]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct OwnedNotified {
    wait: Wait<Arc<Notify>>,
}

#[cfg(feature = "alloc")]
// SAFETY: as for `Notified`; `Arc<Notify>` is `Send + Sync`.
unsafe impl Send for OwnedNotified {}
#[cfg(feature = "alloc")]
// SAFETY: as for `Notified`.
unsafe impl Sync for OwnedNotified {}

#[cfg(feature = "alloc")]
impl OwnedNotified {
    /// [`Notified::enable`] for the owned future.
    ///
    /// ```
    /// use std::pin::pin;
    /// use std::sync::Arc;
    /// let notify = Arc::new(pitlane_wait::Notify::new());
    /// notify.notify_one();
    /// let mut notified = pin!(notify.notified_owned());
    /// assert!(notified.as_mut().enable()); // took the permit
    /// ```
    pub fn enable(self: Pin<&mut Self>) -> bool {
        // SAFETY: projection to the pinned field `wait`.
        unsafe { self.map_unchecked_mut(|n| &mut n.wait) }.enable()
    }
}

#[cfg(feature = "alloc")]
impl Future for OwnedNotified {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: projection to the pinned field `wait`.
        unsafe { self.map_unchecked_mut(|n| &mut n.wait) }.poll_wait(Some(cx.waker()))
    }
}

#[cfg(feature = "alloc")]
impl fmt::Debug for OwnedNotified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedNotified")
            .field("notify", &*self.wait.notify)
            .field("phase", &self.wait.phase)
            .finish()
    }
}
