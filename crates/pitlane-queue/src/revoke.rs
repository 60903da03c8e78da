//! Revocation: taking a known item back out of a bag, from wherever it sits.
//!
//! After the `Revocable` / `RevocableWeakBag` traits of the bagpipe crate (seed
//! `bagpipes-scalable-concurrent-bags.txt`): an allocator keeps partly free pages in a bag, and
//! when a page becomes entirely free it wants that page back *now*, without popping everything
//! in front of it. A revocable item carries (through a pointer, so the same handle is seen by
//! every copy of the item) a [`RevokeHandle`]; a push that tracks the item stores the address
//! of the slot it lands in there, and [`RevocableBag::revoke`] needs one compare-and-swap on
//! that slot.
//!
//! # The protocol
//!
//! A slot's state word holds `H`, the address of the item's handle, while the tracked item
//! sits in it (see the table in the crate's `slot` module).
//!
//! - **Push** (tracked): write the value, store the slot's address into the handle, then CAS
//!   the slot's state `EMPTY → H`. If the CAS fails (a queue popper poisoned the cell first),
//!   set the handle back to empty before trying elsewhere.
//! - **Revoke**: read the slot address `c` from the handle; CAS `c.state` from `H` to
//!   `REVOKED`. Success means the item is out of the bag: no pop will return it. The revoker
//!   clears the handle and returns `true`. Any other state (taken, poisoned, or a different
//!   item) means the item is not at `c` any more: `false`. The revoker never touches the
//!   value; the bag's copy stays in the slot until a pop passes over the slot and drops it (or
//!   the bag is dropped), so a slot is only ever recycled by the thread that unlinked it.
//! - **Pop**: the popper that reaches the slot swaps the state to `TAKEN`. It gets `H`: it owns
//!   the value and clears the handle. It gets `REVOKED`: the slot was revoked; the popper drops
//!   the bag's copy of the value without touching the handle (the revoker cleared it, and the
//!   handle need not outlive the value) and moves on to the next slot: pops skip revoked
//!   cells.
//!
//! Of a concurrent revoke and pop of the same item, exactly one wins: both are single
//! read-modify-writes on the same word, which must read `H` to win, and each winner replaces
//! `H`. The handle is cleared only by a compare-and-swap from this slot's address, so a handle
//! never goes back to an old slot.
//!
//! # Linearization points
//!
//! A successful revoke takes effect at its CAS `H → REVOKED`; a failed one at its load of the
//! handle (if empty) or its failed CAS. A tracked push takes effect at its CAS `EMPTY → H`.
//!
//! # Memory safety of a stale slot address
//!
//! A revoker may read the address of a slot whose item has since been popped; it then CASes a
//! word that must still be memory of the same structure. A [`Stack`](crate::stack::Stack)
//! never frees node memory before it is dropped, so that holds trivially. An
//! [`mpmc::Queue`](crate::mpmc::Queue) frees whole segments through crossbeam-epoch, and the
//! protocol keeps a segment alive while any revoker could still read one of its addresses:
//!
//! 1. Every thread that touches a handle or a slot of a segment `S` is protected from before
//!    it reads the slot's address until after its last access to the slot: pinned (revokers,
//!    handles, tracked pushes), or, for a plain call of the queue, inside an era, and a retired
//!    segment leaves limbo (see the queue's reclamation section) only once no such call is
//!    inside it, before its first grace period starts. So for the steps below, a plain call
//!    counts as pinned until that moment.
//! 2. The address of slot `c` is written into a handle once, by the pusher of `c` after it
//!    drew the ticket of `c` in a linked segment (never into a segment that is not linked yet,
//!    which a lost link CAS would free at once), and removed
//!    (by a compare-and-swap from `c`) by that pusher when its publishing CAS fails, by the
//!    popper that takes the value, or by the revoker that marks it. The pusher and the unique
//!    popper of `c` hold `S` while they do so, so they remove it before the first function
//!    deferred for `S` runs. A winning revoker won its CAS before the popper of `c` swapped the
//!    state, so it was pinned before that first function ran, and it removes the address
//!    before the second one runs.
//! 3. A retired segment is freed (or handed to the queue's pool for reuse) by the third
//!    function of a chain, each deferred from inside the previous one. A revoker that read `c`
//!    read it before the address was removed, so it was pinned before the second function ran,
//!    and the third one waits for it to unpin.
//!
//! Under `cfg(pitlane_loom)` the queue keeps retired segments until it is dropped instead (loom
//! cannot model crossbeam-epoch), which is what lets loom check the slot protocol itself.

use core::ptr;

use pitlane_sync::shim::atomic::{AtomicPtr, Ordering};

use crate::slot::{REVOKED, Slot};
use crate::weak_bag::{PushError, WeakBag};

/// Where a revocable item sits: the address of its slot, or nothing.
///
/// It lives *outside* the item's own bytes (for instance in the header of the page an item
/// points to), so that every copy and every move of the item sees the same handle.
///
/// ```
/// use pitlane_queue::revoke::RevokeHandle;
///
/// let handle = RevokeHandle::new();
/// assert!(!handle.is_in_bag());
/// ```
#[derive(Debug, Default)]
#[repr(align(8))]
pub struct RevokeHandle {
    /// The [`Slot`] holding the item (type-erased), or null when it is in no bag (as far as a
    /// revoker needs to know: during a push attempt it may name a slot not yet published).
    slot: AtomicPtr<()>,
}

impl RevokeHandle {
    /// A handle of an item that is in no bag; `const`, so a handle can sit in a `static`.
    ///
    /// ```
    /// use pitlane_queue::revoke::RevokeHandle;
    ///
    /// static HANDLE: RevokeHandle = RevokeHandle::new();
    /// assert!(!HANDLE.is_in_bag());
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn new() -> Self {
        Self {
            slot: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// A handle of an item that is in no bag.
    #[cfg(pitlane_loom)]
    pub fn new() -> Self {
        Self {
            slot: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Whether a tracked push has placed the item in a bag and no pop or revoke has taken it
    /// out since (a snapshot: a concurrent pop may be taking it right now).
    ///
    /// ```
    /// use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
    /// use pitlane_queue::stack::Stack;
    ///
    /// struct Page(RevokeHandle);
    /// // SAFETY: the handle lives in the page, outside the reference.
    /// unsafe impl Revocable for &Page {
    ///     fn revoke_handle(&self) -> &RevokeHandle {
    ///         &self.0
    ///     }
    /// }
    ///
    /// let page = Page(RevokeHandle::new());
    /// let stack = Stack::new();
    /// stack.push_revocable(&page);
    /// assert!(page.0.is_in_bag());
    /// stack.pop();
    /// assert!(!page.0.is_in_bag());
    /// ```
    pub fn is_in_bag(&self) -> bool {
        !self.slot.load(Ordering::Acquire).is_null()
    }

    /// Records that the item is about to be published in the slot at `slot`.
    #[inline]
    pub(crate) fn set(&self, slot: *const ()) {
        self.slot.store(slot.cast_mut(), Ordering::Release);
    }

    /// Forgets the slot at `slot`, unless the handle already names another one (or none).
    #[inline]
    pub(crate) fn clear_if(&self, slot: *const ()) {
        let _ = self.slot.compare_exchange(
            slot.cast_mut(),
            ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

/// An item that can be revoked from a bag: it reaches a [`RevokeHandle`] that lives outside its
/// own bytes.
///
/// ```
/// use pitlane_queue::revoke::{Revocable, RevokeHandle};
///
/// struct Page {
///     handle: RevokeHandle,
///     number: usize,
/// }
///
/// // SAFETY: the handle is inside the `Page`, which a `&Page` only points to; it outlives the
/// // reference and does not move.
/// unsafe impl Revocable for &Page {
///     fn revoke_handle(&self) -> &RevokeHandle {
///         &self.handle
///     }
/// }
/// ```
///
/// # Safety
///
/// `revoke_handle` must return the same handle, at the same address, for the value and every
/// copy or move of it, for as long as any of them exists; the handle must not live inside the
/// value's own bytes (it is reached through a reference or pointer the value holds). At most
/// one copy of an item may be in bags at any one time (a second tracked push of a copy
/// redirects the handle; the bags stay sound, but only one copy can then be revoked).
pub unsafe trait Revocable {
    /// The item's handle.
    fn revoke_handle(&self) -> &RevokeHandle;
}

/// A [`WeakBag`] that can track where revocable items sit and take them back.
pub trait RevocableBag: WeakBag
where
    Self::Item: Revocable,
{
    /// Like [`try_push`](WeakBag::try_push), and records in the item's handle where it landed,
    /// so that [`revoke`](Self::revoke) can find it.
    fn try_push_revocable(&self, item: Self::Item) -> Result<(), PushError<Self::Item>>;

    /// Like [`push`](WeakBag::push), tracking the item like
    /// [`try_push_revocable`](Self::try_push_revocable).
    fn push_revocable(&self, item: Self::Item) {
        crate::weak_bag::retry_push(item, |item| self.try_push_revocable(item))
    }

    /// Removes `item` from wherever it sits with one compare-and-swap on its slot: no pop will
    /// return it. Returns `true` if this call removed it; `false` if it is in no bag (never
    /// pushed with tracking, or already popped or revoked), or a concurrent pop or revoke won
    /// the race for it. The bag's own copy of the item stays in the slot until a pop passes
    /// over it or the bag is dropped, and is dropped then.
    ///
    /// **Known defect** (found by an audit, not fixed yet; the ignored loom model
    /// `a_late_revoker_does_not_untrack_the_page_pushed_again_into_its_node` in
    /// `tests/loom_bagpipe.rs`): in a [`Stack`](crate::stack::Stack) (and a Bagpipe of stacks),
    /// a revoke that has won its compare-and-swap clears the item's handle a moment later. If
    /// in that moment a pop passes the revoked node, the node is reused at once, and another
    /// copy of the same item is pushed with tracking into that very node, the late clear
    /// erases the new push's tracking: [`RevokeHandle::is_in_bag`] then says `false` and
    /// `revoke` cannot find that copy, though a pop returns it. Until it is fixed, do not push
    /// a copy of an item with tracking while a revoke of it may still be running: an owner
    /// that pushes only what it owns, and owns a revoked item only once `revoke` has returned
    /// `true`, never does. No memory of the bag is misused either way.
    ///
    /// # Safety
    ///
    /// The bag the item was last pushed into with tracking, if any, is not dropped before this
    /// call returns. (Implementations find the slot through the handle alone, so `revoke`
    /// needs no `&self`; holding a reference to that bag is the easy way to keep the promise.)
    unsafe fn revoke(item: &Self::Item) -> bool;
}

/// The revoke step common to every slot-based bag.
///
/// # Safety
/// The memory of the slot the handle names, if any, is alive for the whole call: either the
/// structure never frees slots before it is dropped and is not dropped, or the caller is pinned
/// as described in the module doc.
pub(crate) unsafe fn revoke_slot<T: Revocable>(item: &T) -> bool {
    let handle = item.revoke_handle();
    let at = handle.slot.load(Ordering::Acquire);
    if at.is_null() {
        return false;
    }
    let tag = crate::slot::tag_of(handle);
    // SAFETY: a non-null handle names a slot of a structure that stores `T` (the item was
    // pushed into it), alive by the caller's contract; the pointer carries the provenance of
    // the structure's allocation.
    let slot = unsafe { &*at.cast::<Slot<T>>() };
    // Mark the slot dead if it still holds this very item.
    let revoked = slot
        .state
        .compare_exchange(tag, REVOKED, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok();
    if revoked {
        handle.clear_if(at);
    }
    revoked
}
