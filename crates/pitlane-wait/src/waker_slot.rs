//! The waker of a queued waiter, and how its owner registers it: shared by [`Notify`] and
//! [`Semaphore`](crate::Semaphore).
//!
//! The owner writes the slot before it enqueues its node (nobody else can see it then); once
//! the node is queued, the slot is only touched under the queue's lock: by the owner polled
//! again with a new waker, or by the remover that takes the waker to wake it.
//!
//! [`Notify`]: crate::Notify

use core::pin::Pin;
use core::task::Waker;

use pitlane_sync::shim::cell::UnsafeCell;

use crate::queue::{Node, NodeStatus, WaitQueue};

/// A waiter's waker.
pub(crate) struct WakerSlot(UnsafeCell<Option<Waker>>);

impl WakerSlot {
    pub(crate) fn new() -> Self {
        WakerSlot(UnsafeCell::new(None))
    }

    /// Before the node is enqueued: keeps a clone of `waker`, unless a waker is kept already
    /// (from an earlier try of the same enqueue).
    ///
    /// # Safety
    /// The node holding the slot is not queued, and only its owner touches it.
    pub(crate) unsafe fn register(&self, waker: &Waker) {
        // SAFETY: nobody else reads or writes the slot (caller).
        self.0.with_mut(|cell| unsafe {
            if (*cell).is_none() {
                *cell = Some(waker.clone());
            }
        });
    }

    /// Once the waiter completed, out of the queue (never queued, removed, or dequeued): drops
    /// the waker it kept (an earlier try of the same enqueue kept it and lost its
    /// compare-and-swap, and the next one completed the waiter at once; or the waiter was
    /// queued with it, and a remover or a drain left it there), so that a completed
    /// `Notified`, which its user may keep, holds no clone of its task's waker (tokio's holds
    /// none). The semaphore's acquire futures are dropped as soon as they complete (inside
    /// `async fn`s), so they do not need it.
    ///
    /// # Safety
    /// The node holding the slot is not queued, and only its owner touches it.
    pub(crate) unsafe fn unregister(&self) {
        // SAFETY: nobody else reads or writes the slot (caller).
        let kept = self.0.with_mut(|cell| unsafe { (*cell).take() });
        drop(kept);
    }

    /// Under the lock, by a remover: takes the waker to wake it.
    ///
    /// # Safety
    /// The caller holds the queue's lock and the node holding the slot is queued (or being
    /// removed by the caller).
    pub(crate) unsafe fn take(&self) -> Option<Waker> {
        // SAFETY: the lock orders every access to a queued node's slot (caller).
        self.0.with_mut(|cell| unsafe { (*cell).take() })
    }

    /// Under the lock, by a remover that wakes the waiter but leaves it its waker: a clone of
    /// the kept waker, to be woken once the lock is released. (A broadcast's drain wakes a
    /// waiter it does not cover this way, so that the waiter, registering again, still has the
    /// waker its poll registered, even if it registers again from `enable`, which brings none.)
    ///
    /// # Safety
    /// The caller holds the queue's lock and the node holding the slot is queued (or being
    /// removed by the caller).
    pub(crate) unsafe fn clone_kept(&self) -> Option<Waker> {
        // SAFETY: the lock orders every access to a queued node's slot (caller).
        self.0.with(|cell| unsafe { (*cell).clone() })
    }

    /// Under the lock, by the owner of a queued node polled again: keeps `waker` instead of
    /// the kept one unless both wake the same task. Returns the replaced waker, to be dropped
    /// once the lock is released.
    ///
    /// # Safety
    /// The caller holds the queue's lock and the node holding the slot is queued.
    unsafe fn replace(&self, waker: &Waker) -> Option<Waker> {
        // SAFETY: the lock orders every access to a queued node's slot (caller).
        self.0.with_mut(|cell| unsafe {
            match &*cell {
                Some(current) if current.will_wake(waker) => None,
                _ => (*cell).replace(waker.clone()),
            }
        })
    }
}

/// A queued waiter polled again: `true` if a remover has taken it out of the queue (it is
/// done), else `false` after keeping `waker` in its slot (under the lock) to be woken with.
///
/// # Safety
/// `node` was enqueued on `queue` (and only there), and `slot` is its waker slot.
pub(crate) unsafe fn poll_queued<T>(
    queue: &WaitQueue<T>,
    node: Pin<&Node<T>>,
    slot: &WakerSlot,
    waker: &Waker,
) -> bool {
    if node.status() == NodeStatus::Dequeued {
        return true;
    }
    let locked = queue.lock();
    if node.status() != NodeStatus::Queued {
        return true;
    }
    // SAFETY: we hold the lock and the node is queued.
    let old = unsafe { slot.replace(waker) };
    drop(locked);
    drop(old);
    false
}
