//! The intrusive waiter queue: lockless enqueue, removals under a lock, a state word in the
//! tail while empty, and a drain that survives releasing the lock.
//!
//! The algorithm is aiq's (wyfo/aiq, the seed `aiq-intrusive-async-queue.txt`); the atomic
//! drain through a private circular list is the idea of tokio-rs/tokio#5458.
//!
//! # Protocol
//!
//! A waiter is a [`Node`] pinned inside the future that waits. The queue has two words:
//!
//! - `tail`: either the address of the last node, or — while the queue is empty — a *state*
//!   (a `usize` up to [`MAX_STATE`]) stored shifted left by one with bit 0 set. Nodes are at
//!   least 2-aligned, so bit 0 tells the two apart. The state is what the primitive built on
//!   the queue keeps when nobody waits: the permit of a `Notify`, the free permits and the
//!   closed flag of a `Semaphore`.
//! - `head`: the first node (or null), written by the enqueuer that found the queue empty and
//!   otherwise only under the lock.
//!
//! Each node holds `prev` and `next` links and a status (`Unqueued`, `Queued`, `Dequeued`).
//!
//! **Enqueue** (no lock): write the node's fields and `prev` (the old tail, or null when the
//! tail held a state), then compare-and-swap the tail from what was read to the node; then
//! link the predecessor: `old_tail.next = node`, or `head = node` when the queue was empty.
//! The decision to enqueue is taken against the very tail word the swap replaces, so "take
//! the state's permits, else enqueue" is one atomic step ([`WaitQueue::enqueue_or_update`]).
//!
//! *Provenance.* An enqueuer reads the tail before its swap, and the swap compares
//! addresses only: the node read may have left, and a new node taken its address, by the
//! time the swap succeeds. So the enqueuer follows the pointer the swap returns (the current
//! last node's own) to write the link, and writes `prev` as an address with the provenance
//! exposed for whichever node is there (every node exposes its provenance when it is
//! enqueued), never the pointer it read.
//!
//! **Removal** (lock held): dequeue at the head (FIFO), pop at the tail (LIFO), or a node's
//! own removal when its future is dropped. To unlink `x` with predecessor `p`: if `x.next` is
//! null, `x` may be the tail: compare-and-swap the tail from `x` to `p` (or, when `p` is null,
//! to the state the empty queue takes), then clear `p.next` (or `head`) by a compare-and-swap
//! that fails harmlessly if a new enqueuer linked itself meanwhile. If that swap fails, an
//! enqueuer has appended behind `x` and will write `x.next`: the remover waits for it and
//! then relinks `p` and `x.next` around `x`. A node is only removed after
//! its incoming link is visible (reached from the head, or popped after waiting for its
//! link, or removed by its own owner whose enqueue returned), so no enqueuer writes into a
//! removed node. Only lock holders remove, so a queue found non-empty under the lock stays
//! non-empty until the holder removes.
//!
//! **Waiting for a link** (lock held): an enqueuer links its node a few instructions after
//! its swap on the tail, so a lock holder that finds the link missing reads it a few times;
//! then it marks the empty link as waited for (a compare-and-swap from null to a mark no
//! node address can be) and parks, keyed by the link's address. The enqueuer writes every
//! link by a swap, and if the swap replaced the mark, unparks that key. With `std`, the lock
//! holder sleeps in `parking_lot_core`'s parking lot, so that an enqueuer preempted between
//! its two steps gets the processor back instead of waiting for a spinning lock holder's
//! time slice to end (as aiq does, at the cost of a swap instead of a store per enqueue).
//!
//! **Drain** (lock held): read the head, then swap the tail from the last node to a state
//! (after the swap, an enqueuer that finds the state writes `head` for the new queue, so the
//! head is read first and then cleared by a compare-and-swap that leaves such a write alone),
//! and close the chain into a circular list through a sentinel link on the drainer's stack. The
//! nodes keep their `Queued` status, so an owner that drops its future meanwhile takes the
//! lock and unlinks itself from that list with the same unlink (in a circular list every node
//! has both neighbours, so the tail and head never come into it). The drainer removes nodes
//! one by one, and may release the lock between batches of wake-ups (before it takes the
//! waker of the first node of the next batch); on a panic in a waker, it takes the lock back
//! and finishes the remaining nodes before its sentinel goes, with the remover's `mark`,
//! which records their outcome and leaves their wakers in them: no waker is taken, and so
//! none dropped, under the lock while the panic unwinds (each is dropped with its future, by
//! its owner, as tokio's `notify_waiters` leaves them).
//!
//! **Panics in user code.** The queue calls four kinds of user code: the remover's `take`
//! and `mark` (under the lock), wakers (with the lock released) and the [`Parker`]. None of
//! their panics breaks the structure: a node unlinked by a remover is marked `Dequeued` even
//! if `take` panics (a node out of the queue but still `Queued` would be unlinked again by its
//! owner, through links that no longer hold — in a drain, through the sentinel of a returned
//! call); a guard that released the lock to wake a batch takes it back even if a waker
//! panics, so it never goes on without the lock, and the rest of that batch — with the waker
//! whose collection found the batch full — is dropped unwoken before the lock is taken back
//! (as tokio's `WakeList` does; waking them during the unwinding would make a second
//! panicking waker an abort, and dropping them under the lock would deadlock a waker whose
//! drop re-enters the queue's owner); a parker is only called before a removal changes
//! anything, or after an enqueue is complete, and a lock holder whose `park` unwinds takes
//! its waiting mark back out of the link first (left there, the next lock holder would read
//! it as a node's address).
//!
//! # Linearization points
//!
//! - enqueue and state updates: the successful compare-and-swap on `tail`;
//! - dequeue, pop, self-removal: the unlink under the lock (for a node that was the tail, the
//!   compare-and-swap that moves `tail` off it); the owner learns of it by reading `Dequeued`
//!   (acquire), which the remover stores (release) after its last access to the node;
//! - drain: the swap that moves `tail` to the state: every node enqueued before it is drained,
//!   every one after it is in the new queue.
//!
//! # Differences
//!
//! From aiq: the node status is its own byte rather than packed into `prev`; the way a lock
//! holder sleeps is a parameter ([`Parker`]); the state of an emptied queue is given by the
//! remover (aiq: a state type); the drain list is made circular
//! at once, not when the lock is first released; wakers are batched by the queue's guard.
//!
//! From tokio's `util::linked_list`: that list is a plain doubly-linked list behind the
//! primitive's mutex, so every enqueue takes the mutex; here enqueue is a compare-and-swap and
//! only removals lock, and the primitive's state lives in the same word as the tail, where
//! tokio keeps a separate state word that it must read under the mutex to enqueue.

use core::fmt;
use core::marker::{PhantomData, PhantomPinned};
use core::mem::MaybeUninit;
use core::pin::Pin;
use core::ptr;
use core::task::Waker;

use pitlane_sync::shim::atomic::{AtomicPtr, AtomicU8, Ordering};

use crate::lock::{DefaultLock, DefaultParker, Lock, Parker};

/// The largest state a [`WaitQueue`] keeps in its tail word (one bit of the word marks it as
/// a state rather than a node's address).
///
/// ```
/// use pitlane_wait::{WaitQueue, queue::MAX_STATE};
///
/// let queue: WaitQueue<()> = WaitQueue::new(MAX_STATE);
/// assert_eq!(queue.state(), Some(MAX_STATE));
/// assert_eq!(MAX_STATE, usize::MAX >> 1);
/// ```
pub const MAX_STATE: usize = usize::MAX >> 1;

/// How many wakers a [`Locked`] guard collects before it releases the lock to wake them.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::task::{Wake, Waker};
/// use pitlane_wait::{WaitQueue, queue::WAKE_BATCH};
///
/// struct Count(AtomicUsize);
/// impl Wake for Count {
///     fn wake(self: Arc<Self>) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let woken = Arc::new(Count(AtomicUsize::new(0)));
/// let queue: WaitQueue<()> = WaitQueue::new(0);
/// let mut locked = queue.lock();
/// for _ in 0..WAKE_BATCH {
///     locked.wake_later(Waker::from(woken.clone()));
/// }
/// assert_eq!(woken.0.load(Ordering::Relaxed), 0); // collected, none woken under the lock
/// locked.wake_later(Waker::from(woken.clone())); // the batch is full: unlock, wake it, relock
/// assert_eq!(woken.0.load(Ordering::Relaxed), WAKE_BATCH);
/// drop(locked); // unlocks, then wakes the rest
/// assert_eq!(woken.0.load(Ordering::Relaxed), WAKE_BATCH + 1);
/// ```
pub const WAKE_BATCH: usize = 32;

const UNQUEUED: u8 = 0;
const QUEUED: u8 = 1;
const DEQUEUED: u8 = 2;

/// The links of a node; the first field of [`Node`], so a link's address is its node's.
#[repr(C)]
struct Link {
    /// The previous node (or the drain sentinel); null for the first node of the queue.
    /// Written by the enqueuer before its swap, then only under the lock.
    prev: AtomicPtr<Link>,
    /// The next node (or the drain sentinel); null while none is linked. Written by the
    /// successor's enqueuer after its swap, or under the lock.
    next: AtomicPtr<Link>,
}

impl Link {
    fn new() -> Self {
        Link {
            prev: AtomicPtr::new(ptr::null_mut()),
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

/// Where a node stands, as its owner sees it ([`Node::status`]).
///
/// ```
/// use std::pin::pin;
/// use pitlane_wait::queue::{Decision, Node, NodeStatus, WaitQueue};
///
/// let queue: WaitQueue<()> = WaitQueue::new(0);
/// let node = pin!(Node::new(()));
/// assert_eq!(node.status(), NodeStatus::Unqueued);
/// // SAFETY: the node leaves the queue (dequeued below) before it is dropped.
/// unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
/// assert_eq!(node.status(), NodeStatus::Queued);
/// assert_eq!(queue.lock().dequeue(0, |_| None), Some(true));
/// assert_eq!(node.status(), NodeStatus::Dequeued);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeStatus {
    /// Not in any queue: never enqueued, or removed by its owner.
    Unqueued,
    /// In a queue (or in a drain of it): only a lock holder may remove it.
    Queued,
    /// Removed by another thread (dequeued, popped or drained); that thread no longer touches
    /// it.
    Dequeued,
}

/// A waiter: user data and the links into a [`WaitQueue`], pinned by the future that owns it.
///
/// ```
/// use pitlane_wait::queue::{Node, NodeStatus};
///
/// let node = Node::new(7_u32);
/// assert_eq!(*node.data(), 7);
/// assert_eq!(node.status(), NodeStatus::Unqueued);
/// ```
#[repr(C)]
pub struct Node<T> {
    link: Link,
    /// `UNQUEUED`, `QUEUED` or `DEQUEUED`; `DEQUEUED` is stored (release) by a remover after
    /// its last access to the node.
    status: AtomicU8,
    data: T,
    _pinned: PhantomPinned,
}

impl<T> Node<T> {
    /// A node carrying `data`, in no queue.
    ///
    /// ```
    /// let node = pitlane_wait::queue::Node::new("waiter");
    /// assert_eq!(*node.data(), "waiter");
    /// ```
    pub fn new(data: T) -> Self {
        Node {
            link: Link::new(),
            status: AtomicU8::new(UNQUEUED),
            data,
            _pinned: PhantomPinned,
        }
    }

    /// The data the node carries.
    ///
    /// ```
    /// let node = pitlane_wait::queue::Node::new(1_u8);
    /// assert_eq!(*node.data(), 1);
    /// ```
    pub fn data(&self) -> &T {
        &self.data
    }

    /// Where the node stands (read with acquire ordering: after `Dequeued`, every write the
    /// remover made to the node's data is visible).
    ///
    /// ```
    /// use pitlane_wait::queue::{Node, NodeStatus};
    ///
    /// assert_eq!(Node::new(()).status(), NodeStatus::Unqueued);
    /// ```
    pub fn status(&self) -> NodeStatus {
        match self.status.load(Ordering::Acquire) {
            UNQUEUED => NodeStatus::Unqueued,
            QUEUED => NodeStatus::Queued,
            _ => NodeStatus::Dequeued,
        }
    }

    /// Marks a `Dequeued` node `Unqueued` again, so that it may be enqueued anew (an
    /// `Unqueued` node stays so).
    ///
    /// # Panics
    /// If the node is `Queued`: its status must keep saying so until it leaves the queue,
    /// since its owner relies on it to know whether it may free the node.
    ///
    /// ```
    /// use pitlane_wait::queue::{Node, NodeStatus};
    ///
    /// let node = Node::new(());
    /// node.reset();
    /// assert_eq!(node.status(), NodeStatus::Unqueued);
    /// ```
    #[track_caller]
    pub fn reset(&self) {
        // A read-modify-write, so that it reads the latest status: a `Queued` node is never
        // changed, whichever thread calls this.
        if let Err(QUEUED) =
            self.status
                .compare_exchange(DEQUEUED, UNQUEUED, Ordering::Relaxed, Ordering::Relaxed)
        {
            panic!("Node::reset on a queued node");
        }
    }

    fn link_ptr(self: Pin<&Self>) -> *mut Link {
        ptr::from_ref(self.get_ref()).cast_mut().cast::<Link>()
    }
}

impl<T: fmt::Debug> fmt::Debug for Node<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("status", &self.status())
            .field("data", &self.data)
            .finish()
    }
}

/// What [`WaitQueue::enqueue_or_update`]'s decision function wants done with the tail word it
/// was shown.
///
/// ```
/// use std::pin::pin;
/// use pitlane_wait::queue::{Decision, Node, Outcome, WaitQueue};
///
/// let queue: WaitQueue<()> = WaitQueue::new(0);
/// let node = pin!(Node::new(()));
/// // SAFETY: the node is never enqueued (every decision below leaves it out).
/// let decide = |d| unsafe { queue.enqueue_or_update(node.as_ref(), move |_| d) };
/// assert_eq!(decide(Decision::Update(4)), Outcome::Updated(0));
/// assert_eq!(decide(Decision::Abort), Outcome::Aborted(Some(4)));
/// assert_eq!(queue.state(), Some(4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Enqueue the node (when the queue was empty, its state is replaced by the node).
    Enqueue,
    /// Replace the empty queue's state by this one (only when shown `Some(state)`).
    Update(usize),
    /// Leave the queue alone.
    Abort,
}

/// What [`WaitQueue::enqueue_or_update`] did.
///
/// ```
/// use std::pin::pin;
/// use pitlane_wait::queue::{Decision, Node, Outcome, WaitQueue};
///
/// let queue: WaitQueue<u8> = WaitQueue::new(2);
/// let (first, second) = (pin!(Node::new(1)), pin!(Node::new(2)));
/// // SAFETY: both nodes are drained below, before they are dropped.
/// let enqueue = |node| unsafe { queue.enqueue_or_update(node, |_| Decision::Enqueue) };
/// // Into the empty queue: the state it held comes back.
/// assert_eq!(enqueue(first.as_ref()), Outcome::Enqueued(Some(2)));
/// // Behind a waiter: there was no state.
/// assert_eq!(enqueue(second.as_ref()), Outcome::Enqueued(None));
/// assert!(queue.lock().drain(2, |_| None, |_| {}));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The node is queued; the value is the state the queue held if it was empty.
    Enqueued(Option<usize>),
    /// The empty queue's state was replaced; the value is the state before.
    Updated(usize),
    /// Nothing changed; the value is the state if the queue was empty.
    Aborted(Option<usize>),
}

#[inline]
fn tagged(state: usize) -> *mut Link {
    debug_assert!(state <= MAX_STATE);
    ptr::without_provenance_mut(state << 1 | 1)
}

#[inline]
fn untag(word: *mut Link) -> Option<usize> {
    if word.addr() & 1 == 1 {
        Some(word.addr() >> 1)
    } else {
        None
    }
}

/// The mark a lock holder leaves in an empty link before it parks to wait for it: never a
/// node's address (nodes are at least 2-aligned).
#[inline]
fn parked_mark() -> *mut Link {
    ptr::without_provenance_mut(1)
}

/// The parking key of a link: its address.
#[inline]
fn link_key(slot: &AtomicPtr<Link>) -> usize {
    ptr::from_ref(slot).addr()
}

/// An enqueuer's write of the link to its node (into the predecessor's `next`, or `head`):
/// a swap, so that it sees whether the lock holder marked the link as waited for, and then
/// wakes it.
#[inline]
fn publish_link<P: Parker>(slot: &AtomicPtr<Link>, link: *mut Link) {
    if slot.swap(link, Ordering::AcqRel) == parked_mark() {
        P::unpark(link_key(slot));
    }
}

/// An intrusive FIFO of waiters with lockless enqueue and locked removal, which keeps a state
/// word in its tail while empty (see the [module doc](self) for the protocol).
///
/// `L` is the removal lock and `P` how a lock holder waits for a lagging link
/// ([`lock`](crate::lock)).
///
/// ```
/// use std::pin::pin;
/// use pitlane_wait::queue::{Decision, Node, NodeStatus, Outcome, WaitQueue};
///
/// let queue: WaitQueue<u32> = WaitQueue::new(0);
/// let node = pin!(Node::new(42));
/// // SAFETY: the node is removed from the queue (dequeued below) before it is dropped.
/// let outcome = unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
/// assert_eq!(outcome, Outcome::Enqueued(Some(0)));
/// assert_eq!(queue.state(), None); // a waiter: no state
///
/// let mut locked = queue.lock();
/// assert_eq!(locked.dequeue(5, |value| { assert_eq!(*value, 42); None }), Some(true));
/// drop(locked);
/// assert_eq!(node.status(), NodeStatus::Dequeued);
/// assert_eq!(queue.state(), Some(5)); // emptied, with the state the remover gave
/// ```
pub struct WaitQueue<T, L = DefaultLock, P = DefaultParker> {
    /// The last node, or the state (tagged with bit 0) while empty.
    tail: AtomicPtr<Link>,
    /// The first node; null while empty or before the first enqueuer links itself.
    head: AtomicPtr<Link>,
    /// Held for every removal.
    lock: L,
    /// `*mut`, not `*const`: the queue must be invariant in `T`. It stores nodes through
    /// `&self` and hands their data out through `&self`, so a covariant queue would let a
    /// `&WaitQueue<&'static str>` enqueue a node holding a short-lived `&str` through a
    /// shortened `&WaitQueue<&'a str>`, to be read back as `&'static str` after it is freed
    /// (see the `auto_traits` doctests).
    _nodes: PhantomData<*mut Node<T>>,
    _parker: PhantomData<fn() -> P>,
}

// SAFETY: the queue owns no `T`; lock holders on any thread read the data of queued nodes
// through shared references, which `T: Sync` allows. The lock is shared as `&L`.
unsafe impl<T: Sync, L: Send + Sync, P> Send for WaitQueue<T, L, P> {}
// SAFETY: as above.
unsafe impl<T: Sync, L: Sync, P> Sync for WaitQueue<T, L, P> {}

impl<T> WaitQueue<T> {
    /// An empty queue holding `state` (at most [`MAX_STATE`]), with the default lock and
    /// parker.
    ///
    /// # Panics
    /// If `state > MAX_STATE`.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(3);
    /// assert_eq!(queue.state(), Some(3));
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn new(state: usize) -> Self {
        Self::with_lock(state, crate::lock::default_lock())
    }

    /// An empty queue holding `state` (loom build: not `const`).
    #[cfg(pitlane_loom)]
    pub fn new(state: usize) -> Self {
        Self::with_lock(state, crate::lock::default_lock())
    }
}

impl<T, L: Lock, P: Parker> WaitQueue<T, L, P> {
    /// An empty queue holding `state`, removing under `lock`.
    ///
    /// # Panics
    /// If `state > MAX_STATE`.
    ///
    /// ```
    /// use pitlane_sync::spin::RawTtas;
    /// use pitlane_wait::lock::Spin;
    /// use pitlane_wait::WaitQueue;
    ///
    /// let queue: WaitQueue<(), RawTtas, Spin> = WaitQueue::with_lock(1, RawTtas::new());
    /// assert_eq!(queue.state(), Some(1));
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn with_lock(state: usize, lock: L) -> Self {
        assert!(
            state <= MAX_STATE,
            "a wait queue's state is at most MAX_STATE"
        );
        WaitQueue {
            tail: AtomicPtr::new(ptr::without_provenance_mut(state << 1 | 1)),
            head: AtomicPtr::new(ptr::null_mut()),
            lock,
            _nodes: PhantomData,
            _parker: PhantomData,
        }
    }

    /// An empty queue holding `state`, removing under `lock` (loom build: not `const`).
    #[cfg(pitlane_loom)]
    pub fn with_lock(state: usize, lock: L) -> Self {
        assert!(
            state <= MAX_STATE,
            "a wait queue's state is at most MAX_STATE"
        );
        WaitQueue {
            tail: AtomicPtr::new(tagged(state)),
            head: AtomicPtr::new(ptr::null_mut()),
            lock,
            _nodes: PhantomData,
            _parker: PhantomData,
        }
    }

    /// The state, if the queue is empty; `None` while a node is queued.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// assert_eq!(queue.state(), Some(0));
    /// ```
    #[inline]
    pub fn state(&self) -> Option<usize> {
        untag(self.tail.load(Ordering::SeqCst))
    }

    /// Whether no node is queued.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// assert!(queue.is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.state().is_some()
    }

    /// While the queue is empty and holds `current`, replaces it by `new`, in one
    /// compare-and-swap that reads nothing first (on a contended word, one transfer of its
    /// cache line where [`fetch_update_state`](WaitQueue::fetch_update_state) may take two).
    /// Returns `Ok(current)`, or `Err(Some(s))` when the queue holds another state `s`, or
    /// `Err(None)` when a node is queued.
    ///
    /// # Panics
    /// If `current` or `new` is above [`MAX_STATE`].
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// assert_eq!(queue.compare_exchange_state(0, 1), Ok(0));
    /// assert_eq!(queue.compare_exchange_state(0, 1), Err(Some(1)));
    /// ```
    #[inline]
    pub fn compare_exchange_state(
        &self,
        current: usize,
        new: usize,
    ) -> Result<usize, Option<usize>> {
        assert!(
            current <= MAX_STATE && new <= MAX_STATE,
            "a wait queue's state is at most MAX_STATE"
        );
        match self.tail.compare_exchange(
            tagged(current),
            tagged(new),
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => Ok(current),
            Err(actual) => Err(untag(actual)),
        }
    }

    /// While the queue is empty, replaces its state `s` by `update(s)` in one atomic step
    /// (retrying on contention). Returns `Ok(previous)`, or `Err(Some(s))` when `update`
    /// returned `None`, or `Err(None)` when a node is queued.
    ///
    /// # Panics
    /// If `update` returns a state above [`MAX_STATE`].
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(2);
    /// assert_eq!(queue.fetch_update_state(|s| s.checked_sub(2)), Ok(2));
    /// assert_eq!(queue.fetch_update_state(|s| s.checked_sub(1)), Err(Some(0)));
    /// ```
    #[inline]
    pub fn fetch_update_state(
        &self,
        mut update: impl FnMut(usize) -> Option<usize>,
    ) -> Result<usize, Option<usize>> {
        let mut tail = self.tail.load(Ordering::SeqCst);
        loop {
            let state = untag(tail).ok_or(None)?;
            let next = update(state).ok_or(Some(state))?;
            assert!(
                next <= MAX_STATE,
                "a wait queue's state is at most MAX_STATE"
            );
            match self.tail.compare_exchange_weak(
                tail,
                tagged(next),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Ok(state),
                Err(actual) => tail = actual,
            }
        }
    }

    /// Enqueues `node`, or updates the empty queue's state, as `decide` says, in one atomic
    /// step: `decide` is shown the state (`None` while nodes are queued) and its answer is
    /// applied by a compare-and-swap on the tail word it was shown; on contention it is asked
    /// again. `decide` may write the node's data (through its interior mutability): the
    /// writes are published by the swap.
    ///
    /// # Safety
    /// - `node` is [`Unqueued`](NodeStatus::Unqueued), and no other enqueue of it runs
    ///   meanwhile (from another thread, or from `decide`);
    /// - if it gets enqueued, it is only ever removed through this queue, and it is not
    ///   dropped (its memory not reused) while its status is [`Queued`](NodeStatus::Queued):
    ///   its owner must [`remove`](Locked::remove) it first, or see it `Dequeued`. That holds
    ///   when this call panics too: a panic of [`Parker::unpark`] comes after the node is
    ///   queued.
    ///
    /// # Panics
    /// If `decide` returns `Update` with a state above [`MAX_STATE`], or when shown `None`;
    /// if `decide` panics (the node is then not queued); if the parker's `unpark` panics (the
    /// node is then queued).
    ///
    /// ```
    /// use std::pin::pin;
    /// use pitlane_wait::queue::{Decision, Node, Outcome, WaitQueue};
    ///
    /// let queue: WaitQueue<()> = WaitQueue::new(1);
    /// let node = pin!(Node::new(()));
    /// // Take the state's unit if there is one, else enqueue.
    /// let take = |state: Option<usize>| match state {
    ///     Some(s) if s > 0 => Decision::Update(s - 1),
    ///     _ => Decision::Enqueue,
    /// };
    /// // SAFETY: the node is removed below before it is dropped.
    /// assert_eq!(unsafe { queue.enqueue_or_update(node.as_ref(), take) }, Outcome::Updated(1));
    /// // SAFETY: as above.
    /// assert_eq!(unsafe { queue.enqueue_or_update(node.as_ref(), take) }, Outcome::Enqueued(Some(0)));
    /// // SAFETY: the node was enqueued on this queue only.
    /// assert!(unsafe { queue.lock().remove(node.as_ref()) });
    /// ```
    #[inline]
    pub unsafe fn enqueue_or_update(
        &self,
        node: Pin<&Node<T>>,
        mut decide: impl FnMut(Option<usize>) -> Decision,
    ) -> Outcome {
        debug_assert_eq!(node.status.load(Ordering::Relaxed), UNQUEUED);
        let me = node.link_ptr();
        // Every node's provenance is exposed when it is enqueued, so that the `prev` link a
        // later enqueuer writes (see below) is valid for the node at that address.
        let _ = me.expose_provenance();
        node.link.next.store(ptr::null_mut(), Ordering::Relaxed);
        let mut tail = self.tail.load(Ordering::SeqCst);
        let enqueued = loop {
            let state = untag(tail);
            let (target, enqueue) = match decide(state) {
                Decision::Enqueue => {
                    // Written before the swap, which publishes them (release). `tail` was
                    // read before the swap: the node it pointed at may have left and another
                    // taken its address by the time the swap succeeds (the swap compares
                    // addresses only), so `prev` takes the provenance exposed for whichever
                    // node is at the address when it is followed, not `tail`'s.
                    let prev = if state.is_some() {
                        ptr::null_mut()
                    } else {
                        ptr::with_exposed_provenance_mut(tail.addr())
                    };
                    node.link.prev.store(prev, Ordering::Relaxed);
                    node.status.store(QUEUED, Ordering::Relaxed);
                    (me, true)
                }
                Decision::Update(next) => {
                    assert!(state.is_some(), "Decision::Update on a queue with waiters");
                    assert!(
                        next <= MAX_STATE,
                        "a wait queue's state is at most MAX_STATE"
                    );
                    (tagged(next), false)
                }
                Decision::Abort => return Outcome::Aborted(state),
            };
            match self
                .tail
                .compare_exchange_weak(tail, target, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(replaced) => {
                    // The pointer the swap replaced: the current last node, with its own
                    // provenance, where `tail` may carry a departed node's.
                    tail = replaced;
                    break enqueue;
                }
                Err(actual) => {
                    node.status.store(UNQUEUED, Ordering::Relaxed);
                    tail = actual;
                }
            }
        };
        match untag(tail) {
            Some(state) if !enqueued => Outcome::Updated(state),
            Some(state) => {
                // The queue was empty: we are the first node.
                publish_link::<P>(&self.head, me);
                Outcome::Enqueued(Some(state))
            }
            None => {
                // SAFETY: `tail` was the last node when our swap replaced it; a remover that
                // reaches it waits for this link (its `next` is null and it is no longer the
                // tail), so it is alive until this store.
                publish_link::<P>(unsafe { &(*tail).next }, me);
                Outcome::Enqueued(None)
            }
        }
    }

    /// Takes the lock and returns the guard through which nodes are removed.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// let locked = queue.lock();
    /// assert_eq!(locked.state(), Some(0));
    /// ```
    #[inline]
    pub fn lock(&self) -> Locked<'_, T, L, P> {
        self.lock.lock();
        Locked {
            queue: self,
            held: true,
            wakers: WakeList::new(),
            _not_send: PhantomData,
        }
    }

    /// Waits until an enqueuer has written the link `slot` (it has swapped the tail, so it
    /// will): reads it [`P::SPINS`](Parker::SPINS) times, then marks it as waited for and
    /// parks until the enqueuer's swap finds the mark and unparks this thread. Returns the
    /// link.
    fn wait_link(slot: &AtomicPtr<Link>) -> *mut Link {
        for _ in 0..P::SPINS {
            let link = slot.load(Ordering::Acquire);
            if !link.is_null() {
                return link;
            }
            pitlane_sync::shim::hint::spin_loop();
        }
        Self::park_for_link(slot)
    }

    #[cold]
    fn park_for_link(slot: &AtomicPtr<Link>) -> *mut Link {
        /// If `park` unwinds (a [`Parker`] may panic: the trait is safe to implement), takes
        /// the mark back out of the link, unless the enqueuer has swapped its link in
        /// meanwhile. Left there, the mark would outlive this wait: the next lock holder reads
        /// links directly (`unlink` reads `next` once) and would take it for a node address.
        struct Unmark<'s>(&'s AtomicPtr<Link>);
        impl Drop for Unmark<'_> {
            fn drop(&mut self) {
                // Still under the lock (the guard is dropped after this frame), so no other
                // lock holder marks the link meanwhile; a failed swap means the link is there.
                let _ = self.0.compare_exchange(
                    parked_mark(),
                    ptr::null_mut(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }

        let mark = parked_mark();
        let unmark = Unmark(slot);
        let mut expected = ptr::null_mut();
        let link = loop {
            // A read-modify-write reads the latest link: the link, or the mark (ours).
            let link =
                match slot.compare_exchange(expected, mark, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => mark,
                    Err(link) => link,
                };
            if link != mark {
                break link;
            }
            expected = mark;
            P::park(link_key(slot), || slot.load(Ordering::Relaxed) == mark);
        };
        // The enqueuer replaced the mark by its link: nothing to take back.
        core::mem::forget(unmark);
        link
    }

    /// Unlinks `x` (in the queue or in a drain list). Returns whether the queue became empty,
    /// in which case its state is `empty_state`.
    ///
    /// # Safety
    /// The lock is held; `x` is a live node of this queue (or of a drain of it) whose incoming
    /// link is written.
    unsafe fn unlink(&self, x: *mut Link, empty_state: usize) -> bool {
        // SAFETY: `x` is live (caller).
        let x = unsafe { &*x };
        let prev = x.prev.load(Ordering::Relaxed);
        let mut next = x.next.load(Ordering::Acquire);
        if next.is_null() {
            // `x` may be the tail: move the tail back to its predecessor (or to a state).
            let replacement = if prev.is_null() {
                tagged(empty_state)
            } else {
                prev
            };
            let me = ptr::from_ref(x).cast_mut();
            if self
                .tail
                .compare_exchange(me, replacement, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // Clear the link into `x`, unless a new enqueuer already replaced it.
                let into_x = if prev.is_null() {
                    &self.head
                } else {
                    // SAFETY: `prev` is a live node or sentinel: removals hold the lock.
                    unsafe { &(*prev).next }
                };
                let _ = into_x.compare_exchange(
                    me,
                    ptr::null_mut(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                return prev.is_null();
            }
            // An enqueuer appended behind `x`; wait for it to link itself.
            next = Self::wait_link(&x.next);
        }
        // SAFETY: `next` is a live node or sentinel (linked, and removals hold the lock).
        unsafe { (*next).prev.store(prev, Ordering::Relaxed) };
        if prev.is_null() {
            self.head.store(next, Ordering::Release);
        } else {
            // SAFETY: as for `next`.
            unsafe { (*prev).next.store(next, Ordering::Release) };
        }
        false
    }
}

impl<T, L, P> fmt::Debug for WaitQueue<T, L, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail = self.tail.load(Ordering::SeqCst);
        f.debug_struct("WaitQueue")
            .field("state", &untag(tail))
            .finish_non_exhaustive()
    }
}

/// Up to [`WAKE_BATCH`] wakers, woken after the lock is released, in the order they were
/// collected (tokio's `WakeList` order: the first waiter removed is the first woken).
struct WakeList {
    wakers: [MaybeUninit<Waker>; WAKE_BATCH],
    /// Slots `woken..len` hold wakers still to be woken (or dropped).
    woken: usize,
    len: usize,
}

impl WakeList {
    #[inline]
    fn new() -> Self {
        WakeList {
            wakers: [const { MaybeUninit::uninit() }; WAKE_BATCH],
            woken: 0,
            len: 0,
        }
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.len == WAKE_BATCH
    }

    #[inline]
    fn push(&mut self, waker: Waker) {
        debug_assert!(!self.is_full());
        self.wakers[self.len].write(waker);
        self.len += 1;
    }

    /// Wakes every waker, first collected first, and leaves the list empty. If a waker
    /// panics, the rest are dropped without being woken (as tokio's `WakeList` does) before
    /// the panic goes on: waking them during the unwinding would turn a second panicking
    /// waker into an abort.
    fn wake_all(&mut self) {
        /// Drops the wakers not yet woken and empties the list, on return or on unwind.
        struct Empty<'l>(&'l mut WakeList);
        impl Drop for Empty<'_> {
            fn drop(&mut self) {
                self.0.drop_rest();
            }
        }

        let list = Empty(self);
        while list.0.woken < list.0.len {
            // SAFETY: slots `woken..len` are initialized; raising `woken` first hands this
            // one's ownership to us.
            let waker = unsafe { list.0.wakers[list.0.woken].assume_init_read() };
            list.0.woken += 1;
            waker.wake();
        }
    }

    /// Drops the wakers not yet woken and empties the list.
    fn drop_rest(&mut self) {
        while self.woken < self.len {
            // SAFETY: as in `wake_all`.
            let waker = unsafe { self.wakers[self.woken].assume_init_read() };
            self.woken += 1;
            drop(waker);
        }
        self.woken = 0;
        self.len = 0;
    }
}

impl Drop for WakeList {
    fn drop(&mut self) {
        self.drop_rest();
    }
}

/// Marks a removed node `Dequeued` (release) when dropped: after the remover's `take` on its
/// data returns, or if `take` panics, so that a node out of the queue never stays `Queued`
/// (its owner would unlink it again through links that no longer hold).
struct MarkDequeued<T>(*const Node<T>);

impl<T> MarkDequeued<T> {
    /// # Safety
    /// `node` was just unlinked by the caller, who holds the lock, and is alive until this
    /// guard is dropped (its owner waits for `Dequeued` or for the lock before it frees it).
    #[inline]
    unsafe fn new(node: *const Node<T>) -> Self {
        MarkDequeued(node)
    }
}

impl<T> Drop for MarkDequeued<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the node is alive until this store (see `new`), which is the remover's
        // last access to it.
        unsafe { (*self.0).status.store(DEQUEUED, Ordering::Release) };
    }
}

/// The queue's lock, held: removals, and wakers collected to be woken once it is released.
///
/// Dropping the guard releases the lock and then wakes the collected wakers. When
/// [`WAKE_BATCH`] wakers are waiting to be woken, the guard releases the lock, wakes them, and
/// takes the lock again.
///
/// ```
/// use std::pin::pin;
/// use pitlane_wait::queue::{Decision, Node, WaitQueue};
///
/// let queue: WaitQueue<&str> = WaitQueue::new(0);
/// let a = pin!(Node::new("a"));
/// let b = pin!(Node::new("b"));
/// // SAFETY: both nodes are removed below before they are dropped.
/// unsafe {
///     queue.enqueue_or_update(a.as_ref(), |_| Decision::Enqueue);
///     queue.enqueue_or_update(b.as_ref(), |_| Decision::Enqueue);
/// }
/// let mut locked = queue.lock();
/// assert_eq!(locked.front(), Some(&"a"));
/// assert_eq!(locked.pop(|name| { assert_eq!(*name, "b"); None }), Some(false));
/// assert_eq!(locked.dequeue(0, |name| { assert_eq!(*name, "a"); None }), Some(true));
/// assert_eq!(locked.dequeue(0, |_| None), None);
/// ```
///
/// The guard is not `Send`: the thread that took the lock releases it, as
/// [`Lock::unlock`] requires (a `lock_api` lock whose guards are `GuardNoSend`, as
/// `parking_lot`'s are, may not be released by another thread).
///
/// ```compile_fail
/// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
/// let locked = queue.lock();
/// std::thread::scope(|s| {
///     s.spawn(move || drop(locked)); // error: the guard is not `Send`
/// });
/// ```
pub struct Locked<'a, T, L: Lock = DefaultLock, P: Parker = DefaultParker> {
    queue: &'a WaitQueue<T, L, P>,
    /// Whether this guard holds the lock now (it does not while it wakes a batch).
    held: bool,
    wakers: WakeList,
    /// Not `Send` (see the type's doc).
    _not_send: PhantomData<*const ()>,
}

impl<'a, T, L: Lock, P: Parker> Locked<'a, T, L, P> {
    /// The state, if the queue is empty.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(9);
    /// assert_eq!(queue.lock().state(), Some(9));
    /// ```
    #[inline]
    pub fn state(&self) -> Option<usize> {
        self.queue.state()
    }

    /// [`WaitQueue::fetch_update_state`] with the lock held: the queue cannot go from having
    /// waiters to empty meanwhile, though enqueuers may still fill an empty queue.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// assert_eq!(queue.lock().fetch_update_state(|s| Some(s + 1)), Ok(0));
    /// assert_eq!(queue.state(), Some(1));
    /// ```
    #[inline]
    pub fn fetch_update_state(
        &mut self,
        update: impl FnMut(usize) -> Option<usize>,
    ) -> Result<usize, Option<usize>> {
        self.queue.fetch_update_state(update)
    }

    /// The first node's data, if a node is queued.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// assert_eq!(queue.lock().front(), None);
    /// ```
    pub fn front(&self) -> Option<&T> {
        let head = self.head()?;
        // SAFETY: `head` is queued and stays so while we hold the lock (only lock holders
        // remove); nodes are `repr(C)` with the link first.
        Some(unsafe { &(*head.cast::<Node<T>>()).data })
    }

    fn head(&self) -> Option<*mut Link> {
        debug_assert!(self.held);
        untag(self.queue.tail.load(Ordering::SeqCst))
            .is_none()
            .then(|| {
                // Non-empty under the lock stays non-empty; the first enqueuer may still be about
                // to write `head`.
                WaitQueue::<T, L, P>::wait_link(&self.queue.head)
            })
    }

    /// Removes the first node, calls `take` on its data (still under the lock: write the
    /// outcome into the data, return its waker to be woken after the lock is released), then
    /// marks it `Dequeued`. If the queue becomes empty, its state is `empty_state`. Returns
    /// `None` if no node was queued, else whether the queue became empty.
    ///
    /// # Panics
    /// If `empty_state > MAX_STATE`. If `take` panics, the node is out of the queue and
    /// marked `Dequeued` all the same (its waker, if any, is lost) and the guard still holds
    /// the lock.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// assert_eq!(queue.lock().dequeue(0, |_| None), None);
    /// ```
    pub fn dequeue(
        &mut self,
        empty_state: usize,
        take: impl FnOnce(&T) -> Option<Waker>,
    ) -> Option<bool> {
        assert!(
            empty_state <= MAX_STATE,
            "a wait queue's state is at most MAX_STATE"
        );
        let head = self.head()?;
        // SAFETY: the lock is held; `head` is queued and its incoming link (`head`) is written.
        let emptied = unsafe { self.queue.unlink(head, empty_state) };
        // SAFETY: `head` was queued and is now ours to finish.
        unsafe { self.finish(head, take) };
        Some(emptied)
    }

    /// Removes the last node (LIFO), calls `take` on its data as [`dequeue`](Self::dequeue)
    /// does, and marks it `Dequeued`; an emptied queue holds state 0. Returns `None` if no
    /// node was queued, else whether the queue became empty.
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// assert_eq!(queue.lock().pop(|_| None), None);
    /// ```
    pub fn pop(&mut self, take: impl FnOnce(&T) -> Option<Waker>) -> Option<bool> {
        debug_assert!(self.held);
        let tail = self.queue.tail.load(Ordering::SeqCst);
        if untag(tail).is_some() {
            return None;
        }
        // The last node may have just swapped itself in: wait until its enqueuer has linked
        // it, so that no link into it is written after it is gone.
        // SAFETY: `tail` is queued and stays so while we hold the lock.
        let prev = unsafe { (*tail).prev.load(Ordering::Relaxed) };
        let into = if prev.is_null() {
            &self.queue.head
        } else {
            // SAFETY: `prev` is queued, as above.
            unsafe { &(*prev).next }
        };
        let link = WaitQueue::<T, L, P>::wait_link(into);
        // Only the last node's enqueuer writes the link into it (removals hold the lock).
        debug_assert_eq!(link, tail);
        // SAFETY: the lock is held; `tail` is queued with its incoming link written.
        let emptied = unsafe { self.queue.unlink(tail, 0) };
        // SAFETY: `tail` was queued and is now ours to finish.
        unsafe { self.finish(tail, take) };
        Some(emptied)
    }

    /// Removes `node` if it is still queued (its owner leaving, e.g. a dropped future); an
    /// emptied queue holds state 0. Returns whether it was queued; it is `Unqueued` after,
    /// also when a remover had taken it out (`Dequeued`: the remover's writes to its data are
    /// visible then), so that it may be enqueued again.
    ///
    /// # Safety
    /// `node` was only ever enqueued on this queue, and the call that enqueued it has
    /// returned before this one (on this thread, or on one this thread synchronized with
    /// since): until then its incoming link may be unwritten.
    ///
    /// ```
    /// use std::pin::pin;
    /// use pitlane_wait::queue::{Decision, Node, NodeStatus, WaitQueue};
    ///
    /// let queue: WaitQueue<()> = WaitQueue::new(0);
    /// let node = pin!(Node::new(()));
    /// // SAFETY: removed below.
    /// unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
    /// // SAFETY: enqueued on this queue only.
    /// assert!(unsafe { queue.lock().remove(node.as_ref()) });
    /// assert_eq!(node.status(), NodeStatus::Unqueued);
    /// assert!(queue.is_empty());
    /// ```
    pub unsafe fn remove(&mut self, node: Pin<&Node<T>>) -> bool {
        debug_assert!(self.held);
        match node.status.load(Ordering::Acquire) {
            QUEUED => {}
            DEQUEUED => {
                // Taken out by a remover, which stored `Dequeued` under this lock as its last
                // access: nobody else writes the status now. `Unqueued` after, as documented.
                node.status.store(UNQUEUED, Ordering::Relaxed);
                return false;
            }
            _ => return false,
        }
        // SAFETY: the lock is held and the node is queued here or in a drain of this queue
        // (caller); its owner (our caller) finished its enqueue, so its incoming link is
        // written.
        unsafe { self.queue.unlink(node.link_ptr(), 0) };
        node.status.store(UNQUEUED, Ordering::Relaxed);
        true
    }

    /// If the collected batch is full, releases the lock, wakes the batch and takes the lock
    /// back, returning `true`: the caller then reads again what it read under the lock. So a
    /// remover that is about to serve a waiter can wake the batch ahead of it first, as tokio's
    /// wake lists do (they take a waiter only when there is room for its waker), and a waker of
    /// that batch never finds the waiter already served. If a waker panics, the rest of the
    /// batch is dropped unwoken, the lock is taken back, and the panic goes on.
    #[inline]
    pub(crate) fn make_room(&mut self) -> bool {
        if self.wakers.is_full() {
            self.flush(None);
            true
        } else {
            false
        }
    }

    /// Queues `waker` to be woken after the lock is released (releasing the lock to wake a
    /// full batch first).
    ///
    /// ```
    /// let queue: pitlane_wait::WaitQueue<()> = pitlane_wait::WaitQueue::new(0);
    /// let mut locked = queue.lock();
    /// locked.wake_later(std::task::Waker::noop().clone());
    /// drop(locked); // unlocks, then wakes
    /// ```
    ///
    /// If a waker of the full batch panics, `waker` is dropped unwoken with the rest of that
    /// batch, before the lock is taken back, and the panic goes on.
    #[inline]
    pub fn wake_later(&mut self, waker: Waker) {
        if self.wakers.is_full() {
            self.flush(Some(waker));
        } else {
            self.wakers.push(waker);
        }
    }

    /// Releases the lock, wakes the collected wakers, takes the lock back, then collects
    /// `pending` (a waker that found the batch full). The lock is taken back also when a
    /// waker panics, so that the guard holds the lock whenever the caller can use it again (a
    /// caller that catches the panic keeps a working guard); `pending` is then dropped, with
    /// the rest of the batch and before the lock is taken back: dropped under the lock, a
    /// waker whose drop re-enters the queue's owner (drops a future queued on it) would
    /// deadlock.
    #[cold]
    fn flush(&mut self, pending: Option<Waker>) {
        /// Takes the lock back when dropped, on return or on unwind (dropping `pending`
        /// first, which is still there only on unwind).
        struct Relock<'g, 'a, T, L: Lock, P: Parker> {
            locked: &'g mut Locked<'a, T, L, P>,
            pending: Option<Waker>,
        }
        impl<T, L: Lock, P: Parker> Drop for Relock<'_, '_, T, L, P> {
            fn drop(&mut self) {
                drop(self.pending.take());
                self.locked.queue.lock.lock();
                self.locked.held = true;
            }
        }

        self.held = false;
        // SAFETY: this guard held the lock.
        unsafe { self.queue.lock.unlock() };
        let mut relock = Relock {
            locked: self,
            pending,
        };
        relock.locked.wakers.wake_all();
        let pending = relock.pending.take();
        drop(relock);
        if let Some(waker) = pending {
            self.wakers.push(waker);
        }
    }

    /// Finishes a removed node: `take` under the lock, then `Dequeued` (release).
    ///
    /// # Safety
    /// `link` is a node of this queue just unlinked by this guard.
    unsafe fn finish(&mut self, link: *mut Link, take: impl FnOnce(&T) -> Option<Waker>) {
        let node = link.cast::<Node<T>>();
        // SAFETY: the node is alive until we store DEQUEUED: its owner waits for that (or
        // for the lock) before it drops it.
        let dequeued = unsafe { MarkDequeued::new(node) };
        // SAFETY: as above.
        let waker = take(unsafe { &(*node).data });
        // Our last access to the node (also made if `take` panics).
        drop(dequeued);
        if let Some(waker) = waker {
            self.wake_later(waker);
        }
    }

    /// Takes every queued node at once, leaving `new_state` in the emptied queue, then calls
    /// `take` on each node's data in FIFO order and marks it `Dequeued`, waking the returned
    /// wakers in batches of [`WAKE_BATCH`] with the lock released. Nodes enqueued after the
    /// drain began are not drained; nodes whose owners leave while the lock is released are
    /// skipped. Returns whether any node was queued (if none was, the state is unchanged).
    ///
    /// `mark` is `take` for the unwinding path: it records the same outcome in the data but
    /// leaves the node's waker where it is. If a waker or `take` panics, the guard takes the
    /// lock back, and each node still in the drain is finished with `mark` and marked
    /// `Dequeued`, before the panic goes on. So no waker is taken while the panic unwinds, and
    /// none is dropped under the lock (where a waker whose drop re-enters the queue's owner,
    /// say by dropping another future queued on it, would deadlock) or during the unwinding
    /// (where one whose drop panics would abort): each stays with its owner, which finds the
    /// outcome when next polled and drops the waker with its future, as tokio's
    /// `notify_waiters` leaves its waiters. The rest of the batch a panicking waker
    /// interrupted is dropped unwoken with the lock released; if `take` panicked, the wakers
    /// it returned before are woken when the guard is dropped. A panic of `mark` meanwhile
    /// aborts.
    ///
    /// # Panics
    /// If `new_state > MAX_STATE`.
    ///
    /// ```
    /// use std::pin::pin;
    /// use pitlane_wait::queue::{Decision, Node, NodeStatus, WaitQueue};
    ///
    /// let queue: WaitQueue<u8> = WaitQueue::new(0);
    /// let nodes = [pin!(Node::new(1)), pin!(Node::new(2))];
    /// for node in &nodes {
    ///     // SAFETY: drained below before the nodes are dropped.
    ///     unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
    /// }
    /// let mut seen = Vec::new();
    /// assert!(queue.lock().drain(0, |n| { seen.push(*n); None }, |_| {}));
    /// assert_eq!(seen, [1, 2]);
    /// assert!(nodes.iter().all(|n| n.status() == NodeStatus::Dequeued));
    /// ```
    ///
    /// A waker that panics: the nodes after its batch are finished by `mark`, their wakers
    /// left in them.
    ///
    /// ```
    /// use std::panic::{AssertUnwindSafe, catch_unwind};
    /// use std::pin::Pin;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::{Arc, Mutex};
    /// use std::task::{Wake, Waker};
    /// use pitlane_wait::queue::{Decision, Node, NodeStatus, WAKE_BATCH, WaitQueue};
    ///
    /// struct Waiter {
    ///     notified: AtomicBool,
    ///     waker: Mutex<Option<Waker>>,
    /// }
    /// struct Panics;
    /// impl Wake for Panics {
    ///     fn wake(self: Arc<Self>) {
    ///         panic!("a waker panics");
    ///     }
    /// }
    ///
    /// let queue: WaitQueue<Waiter> = WaitQueue::new(0);
    /// let nodes: Vec<Pin<Box<Node<Waiter>>>> = (0..WAKE_BATCH + 2)
    ///     .map(|i| {
    ///         let waker = match i {
    ///             0 => Waker::from(Arc::new(Panics)),
    ///             _ => Waker::noop().clone(),
    ///         };
    ///         let waker = Mutex::new(Some(waker));
    ///         Box::pin(Node::new(Waiter { notified: AtomicBool::new(false), waker }))
    ///     })
    ///     .collect();
    /// for node in &nodes {
    ///     // SAFETY: drained below before the nodes are dropped.
    ///     unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
    /// }
    /// let result = catch_unwind(AssertUnwindSafe(|| {
    ///     queue.lock().drain(
    ///         0,
    ///         |w| {
    ///             w.notified.store(true, Ordering::Relaxed);
    ///             w.waker.lock().unwrap().take()
    ///         },
    ///         |w| w.notified.store(true, Ordering::Relaxed),
    ///     )
    /// }));
    /// assert!(result.is_err()); // the first waker's panic
    /// for (i, node) in nodes.iter().enumerate() {
    ///     assert_eq!(node.status(), NodeStatus::Dequeued);
    ///     assert!(node.data().notified.load(Ordering::Relaxed));
    ///     // The first batch's wakers were taken; the rest were left to their owners.
    ///     assert_eq!(node.data().waker.lock().unwrap().is_some(), i >= WAKE_BATCH);
    /// }
    /// ```
    pub fn drain(
        &mut self,
        new_state: usize,
        mut take: impl FnMut(&T) -> Option<Waker>,
        mut mark: impl FnMut(&T),
    ) -> bool {
        assert!(
            new_state <= MAX_STATE,
            "a wait queue's state is at most MAX_STATE"
        );
        debug_assert!(self.held);
        if untag(self.queue.tail.load(Ordering::SeqCst)).is_some() {
            return false;
        }
        // Read the first node before the swap: once the tail holds a state again, a new
        // enqueuer writes `head` for the new queue.
        let first = WaitQueue::<T, L, P>::wait_link(&self.queue.head);
        // Swap the whole chain out: the linearization point of the drain.
        let mut last = self.queue.tail.load(Ordering::SeqCst);
        loop {
            debug_assert!(
                untag(last).is_none(),
                "a queue with waiters emptied under the lock"
            );
            match self.queue.tail.compare_exchange_weak(
                last,
                tagged(new_state),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(actual) => last = actual,
            }
        }
        // Clear `head`, unless the first enqueuer of the new queue already wrote it.
        let _ = self.queue.head.compare_exchange(
            first,
            ptr::null_mut(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        // Close the chain into a circle through a sentinel that lives in this frame.
        let sentinel = Link::new();
        let sentinel_ptr = ptr::from_ref(&sentinel).cast_mut();
        // SAFETY: `first` and `last` are drained nodes, alive until we mark them DEQUEUED
        // or their owners unlink them under the lock, which we hold. Nobody writes `last.next`
        // (its successor, if any, went into the new queue) or `first.prev`.
        unsafe {
            (*first).prev.store(sentinel_ptr, Ordering::Relaxed);
            (*last).next.store(sentinel_ptr, Ordering::Release);
        }
        sentinel.next.store(first, Ordering::Relaxed);
        sentinel.prev.store(last, Ordering::Relaxed);

        /// Removes the drained nodes; on unwind (a waker or `take` panicked), finishes every
        /// node still in the drain list with `mark`, under the lock, so that none points at
        /// the sentinel once this frame is gone. (`flush` takes the lock back after a
        /// panicking waker; the check in `drop` is a second line.)
        struct Finish<'g, 'a, T, L: Lock, P: Parker, F, M>
        where
            F: FnMut(&T) -> Option<Waker>,
            M: FnMut(&T),
        {
            locked: &'g mut Locked<'a, T, L, P>,
            sentinel: *mut Link,
            take: F,
            mark: M,
        }
        impl<T, L: Lock, P: Parker, F, M> Finish<'_, '_, T, L, P, F, M>
        where
            F: FnMut(&T) -> Option<Waker>,
            M: FnMut(&T),
        {
            /// The first node still in the drain list, if any.
            fn first(&self) -> Option<*mut Link> {
                // SAFETY: the sentinel is alive (in the caller's frame) and, with the lock
                // held, its `next` is a drained node or itself.
                let x = unsafe { (*self.sentinel).next.load(Ordering::Acquire) };
                (x != self.sentinel).then_some(x)
            }

            /// Unlinks the first node and finishes it with `finish` (under the lock), then
            /// marks it `Dequeued`.
            ///
            /// # Safety
            /// The lock is held and `x` is [`first`](Self::first).
            unsafe fn remove<R>(
                &mut self,
                x: *mut Link,
                finish: impl FnOnce(&mut Self, &T) -> R,
            ) -> R {
                // SAFETY: the lock is held; `x` is in the drain list with its incoming link
                // (the sentinel's `next`) written.
                unsafe { self.locked.queue.unlink(x, 0) };
                let node = x.cast::<Node<T>>();
                // SAFETY: `x` is alive until we store DEQUEUED below.
                let dequeued = unsafe { MarkDequeued::new(node) };
                // SAFETY: as above.
                let outcome = finish(self, unsafe { &(*node).data });
                // Our last access to the node (also made if `finish` panics).
                drop(dequeued);
                outcome
            }

            /// Removes the next node with `take` and collects its waker. Returns `false` once
            /// the drain list is empty.
            fn next(&mut self) -> bool {
                let Some(mut x) = self.first() else {
                    return false;
                };
                if self.locked.wakers.is_full() {
                    // Wake the full batch before this node's waker is taken (as tokio's
                    // `notify_waiters` takes no waker it has no room for): if a waker panics,
                    // this node is still in the list, and `drop` finishes it with `mark`.
                    self.locked.flush(None);
                    // Owners may have left while the lock was released.
                    match self.first() {
                        Some(first) => x = first,
                        None => return false,
                    }
                }
                // SAFETY: the lock is held and `x` is the first node.
                let waker = unsafe { self.remove(x, |this, data| (this.take)(data)) };
                if let Some(waker) = waker {
                    // Not full: flushed above if it was.
                    self.locked.wakers.push(waker);
                }
                true
            }
        }
        impl<T, L: Lock, P: Parker, F, M> Drop for Finish<'_, '_, T, L, P, F, M>
        where
            F: FnMut(&T) -> Option<Waker>,
            M: FnMut(&T),
        {
            fn drop(&mut self) {
                if !self.locked.held {
                    self.locked.queue.lock.lock();
                    self.locked.held = true;
                }
                while let Some(x) = self.first() {
                    // SAFETY: the lock is held and `x` is the first node.
                    unsafe { self.remove(x, |this, data| (this.mark)(data)) };
                }
            }
        }

        let mut finish = Finish {
            locked: self,
            sentinel: sentinel_ptr,
            take: &mut take,
            mark: &mut mark,
        };
        while finish.next() {}
        // Nothing left in the list: the drop only releases the borrows.
        drop(finish);
        true
    }
}

impl<T, L: Lock, P: Parker> Drop for Locked<'_, T, L, P> {
    fn drop(&mut self) {
        if self.held {
            // SAFETY: this guard holds the lock.
            unsafe { self.queue.lock.unlock() };
            self.held = false;
        }
        self.wakers.wake_all();
    }
}

impl<T, L: Lock, P: Parker> fmt::Debug for Locked<'_, T, L, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locked")
            .field("state", &self.state())
            .field("wakers", &(self.wakers.len - self.wakers.woken))
            .finish_non_exhaustive()
    }
}
