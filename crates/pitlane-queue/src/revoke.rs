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
//! sits in it (see the table in the crate's `slot` module). Each tracked push of an item gives
//! it the next *stamp* (a 16-bit count of its tracked pushes), which the push writes into both
//! words it sets: the handle holds `stamp | c` (the slot's address) and the slot's state
//! `stamp | H`. The `slot` module owns this encoding.
//!
//! - **Push** (tracked): write the value; replace the handle's word, whatever it holds, by
//!   `stamp | c` with the next stamp (a compare-and-swap loop); then publish the state
//!   `stamp | H` (a stack's pusher stores it into the node it owns; a queue's pusher CASes it
//!   from `EMPTY`). If the queue's CAS fails (a popper poisoned the cell first), forget the
//!   handle's word (below) before trying elsewhere; a stack's push whose CAS on the top fails
//!   takes its state back with a CAS `stamp | H → TAKEN` and forgets the same way.
//! - **Revoke**: read the handle's word `w = stamp | c` (none: `false`); CAS `c.state` from
//!   `stamp | H` to `REVOKED`. Success means the item is out of the bag: no pop will return
//!   it. The revoker then forgets `w` and returns `true`. Any other state (taken, poisoned, a
//!   different item, or a later push of the same item with another stamp) means the push the
//!   revoker read no longer holds the slot: `false`. The revoker never touches the value; the
//!   bag's copy stays in the slot until a pop passes over the slot and drops it (or the bag is
//!   dropped), so a slot is only ever recycled by the thread that unlinked it.
//! - **Pop**: the popper that reaches the slot swaps the state to `TAKEN`. It gets
//!   `stamp | H`: it owns the value and forgets `stamp | c`. It gets `REVOKED`: the slot was
//!   revoked; the popper drops the bag's copy of the value without touching the handle (the
//!   revoker forgets its word, and the handle need not outlive the value) and moves on to the
//!   next slot: pops skip revoked cells.
//! - **Forget** `w`: a compare-and-swap of the handle's word from `w` to "none", keeping the
//!   stamp. It succeeds only if no tracked push of the item has come since the push that wrote
//!   `w`.
//!
//! Of a concurrent revoke and pop of the same item, exactly one wins: both are single
//! read-modify-writes on the same word, which must read `stamp | H` to win, and each winner
//! replaces it; that word comes back only with a push of the same item into the same slot
//! with the same stamp, 2^16 tracked pushes of the item later.
//!
//! Stamps make a late forget harmless. A stack recycles a node as soon as a pop has passed
//! it, so between a revoker's winning CAS and its forget, a pop can skip the revoked node, and
//! a tracked push of another copy of the item can land in that very node, pointing the handle
//! at the same address. The new push's word carries the next stamp, so the revoker's forget,
//! from the old word, fails, and the new copy stays tracked. (A queue's cells are never reused
//! while a revoker that read one of their addresses is pinned, below, so the queue did not
//! need stamps for this; it carries them all the same, as the encoding is shared.)
//!
//! **Residual risk.** The stamp wraps: a late forget erases a newer copy's tracking if, while
//! one revoker stands between its winning CAS and its forget (a few instructions, unless its
//! thread is preempted there), the item is pushed with tracking a multiple of 2^16 times (and
//! taken out between pushes) and the last of those pushes lands in the very slot the revoker
//! read. Then [`RevokeHandle::is_in_bag`] says `false` and `revoke` cannot find that copy
//! (no memory is misused, and a pop still returns it once). An owner that pushes an item only
//! while it holds it, and holds a revoked item only once `revoke` has returned `true`, never
//! pushes during a revoke of it, and is not exposed. On a 32-bit target there are no bits for
//! the stamp, and where an address lies at or above 2^48 (only in a process that maps memory
//! there on purpose) the push goes unstamped: there the late forget works as without stamps
//! (see the `slot` module). On a 32-bit target this is not a wrap but the rule: a copy pushed
//! again into the slot of a copy whose revoke has won but not yet returned may lose its
//! tracking as above (no memory is misused, and every copy is still popped or revoked exactly
//! once). `tests/stress_revoke.rs`, which pushes again at once on purpose, sees it within a
//! second on `i686-unknown-linux-gnu`, through a Bagpipe of stacks; an owner that keeps the
//! rule above is not exposed on any target.
//!
//! # Linearization points
//!
//! A tracked push takes effect at the compare-and-swap that makes it reachable to pops: a
//! queue's CAS `EMPTY → stamp | H`, a stack's CAS on the top. A stack's pusher stores the
//! state into the node it owns before that CAS, so a revoke may mark the node in between: the
//! push and the revoke then both take effect at the revoke's CAS (the item goes in and comes
//! out at once), and the push reports success. A successful revoke takes effect at its CAS
//! `stamp | H → REVOKED`. A failed revoke takes effect at its load of the handle if that
//! found none; otherwise at its failed CAS, or, if the slot then held a later push of the
//! same item, at a moment between its load and its CAS when the copy it read had been taken
//! out by a pop or a revoke and the later one was not yet pushed: the item was in no bag then.
//! The handle's word is a snapshot that may run ahead of these points (set just before the
//! push takes effect, forgotten just after the removal does).
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
//!    (by a compare-and-swap from the word that push wrote) by that pusher when its publishing
//!    CAS fails, by the popper that takes the value, or by the revoker that marks it. The pusher and the unique
//!    popper of `c` hold `S` while they do so, so they remove it before the first function
//!    deferred for `S` runs. A winning revoker won its CAS before the popper of `c` swapped the
//!    state, so it was pinned before that first function ran, and it removes the address
//!    before the second one runs.
//! 3. A retired segment is freed (or handed to the queue's pool for reuse) by the third
//!    function of a chain, each deferred from inside the previous one (in a queue that has
//!    never seen a tracked push, no handle names any of its cells, and the chain is one
//!    function long: see the queue's `recycle_after_grace`). A revoker that read `c`
//!    read it before the address was removed, so it was pinned before the second function ran,
//!    and the third one waits for it to unpin.
//!
//! Under `cfg(pitlane_loom)` the queue keeps retired segments until it is dropped instead (loom
//! cannot model crossbeam-epoch), which is what lets loom check the slot protocol itself.

use crate::slot::TrackWord;
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
    /// The slot holding the item (type-erased), or none when it is in no bag (as far as a
    /// revoker needs to know: during a push attempt it may name a slot not yet published),
    /// with the stamp of the item's latest tracked push (the encoding is the `slot` module's).
    word: TrackWord,
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
            word: TrackWord::new(),
        }
    }

    /// A handle of an item that is in no bag.
    #[cfg(pitlane_loom)]
    pub fn new() -> Self {
        Self {
            word: TrackWord::new(),
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
        self.word.names_a_slot()
    }

    /// What a tracked push of the item passes to the slot (see `Slot::track`).
    #[inline]
    pub(crate) fn tag(&self) -> usize {
        self.word.tag()
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
///
/// Several item types may reach the same handle (a `&Page` and a wrapper of it, say): an item
/// pushed as one type may be revoked through a bag of another, or of another kind, since a
/// revoke only marks the state word of the slot the handle names, which every bag's slot
/// keeps at the same place, and protects it as the slot's own bag needs.
pub unsafe trait Revocable {
    /// The item's handle.
    ///
    /// ```
    /// use pitlane_queue::revoke::{Revocable, RevokeHandle};
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
    /// let (a, b) = (&page, &page);
    /// // Every copy of the item reaches the same handle.
    /// assert!(std::ptr::eq(a.revoke_handle(), b.revoke_handle()));
    /// ```
    fn revoke_handle(&self) -> &RevokeHandle;
}

/// A [`WeakBag`] that can track where revocable items sit and take them back.
///
/// ```
/// use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
/// use pitlane_queue::{mpmc::Queue, stack::Stack};
///
/// struct Page(RevokeHandle);
/// // SAFETY: the handle lives in the page, outside the reference.
/// unsafe impl Revocable for &Page {
///     fn revoke_handle(&self) -> &RevokeHandle {
///         &self.0
///     }
/// }
///
/// // Generic over the bag: a page that becomes free is taken back from wherever it sits.
/// fn take_back<B: RevocableBag<Item = &'static Page>>(bag: &B, page: &'static Page) -> bool {
///     // SAFETY: `bag`, the only bag the page is pushed into, outlives the call.
///     unsafe { B::revoke(&page) }
/// }
///
/// static PAGES: [Page; 3] = [const { Page(RevokeHandle::new()) }; 3];
/// let queue = Queue::new();
/// PAGES.iter().for_each(|page| queue.push_revocable(page));
/// assert!(take_back(&queue, &PAGES[1]));
/// let left: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
/// assert!(left.len() == 2 && std::ptr::eq(left[1], &PAGES[2]));
/// let stack = Stack::new();
/// stack.push_revocable(&PAGES[0]);
/// assert!(take_back(&stack, &PAGES[0]));
/// assert_eq!(stack.pop().map(|_| ()), None);
/// ```
pub trait RevocableBag: WeakBag
where
    Self::Item: Revocable,
{
    /// Like [`try_push`](WeakBag::try_push), and records in the item's handle where it landed,
    /// so that [`revoke`](Self::revoke) can find it.
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
    /// assert!(stack.try_push_revocable(&page).is_ok()); // alone: no race to lose
    /// assert!(page.0.is_in_bag());
    /// ```
    fn try_push_revocable(&self, item: Self::Item) -> Result<(), PushError<Self::Item>>;

    /// Like [`push`](WeakBag::push), tracking the item like
    /// [`try_push_revocable`](Self::try_push_revocable).
    ///
    /// # Panics
    /// As [`push`](WeakBag::push): if the bag is full (a stack at its
    /// [`MAX_ITEMS`](crate::stack::MAX_ITEMS)) or needs memory to grow that the allocator
    /// refuses; [`try_push_revocable`](Self::try_push_revocable) hands the item back instead.
    ///
    /// ```
    /// use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
    /// use pitlane_queue::mpmc::Queue;
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
    /// let queue = Queue::new();
    /// queue.push_revocable(&page);
    /// assert!(page.0.is_in_bag());
    /// assert!(queue.pop().is_some());
    /// assert!(!page.0.is_in_bag());
    /// ```
    fn push_revocable(&self, item: Self::Item) {
        crate::weak_bag::retry_push(item, |item| self.try_push_revocable(item))
    }

    /// Removes `item` from wherever it sits with one compare-and-swap on its slot: no pop will
    /// return it. Returns `true` if this call removed it; `false` if it is in no bag (never
    /// pushed with tracking, or already popped or revoked), or a concurrent pop or revoke won
    /// the race for it. The bag's own copy of the item stays in the slot until a pop passes
    /// over it or the bag is dropped, and is dropped then: a panic from that drop comes out of
    /// that pop (or `try_pop`, or an `into_iter`'s `next`), and leaves the bag as if the pop
    /// had passed over the item without one.
    ///
    /// Of a concurrent revoke and pop of the same item, exactly one wins. After `revoke`
    /// returns `true`, [`RevokeHandle::is_in_bag`] says `false` unless another copy of the item
    /// has been pushed with tracking since, and a revoke never erases the tracking of a copy
    /// pushed while it runs, even one pushed into the very slot it has just revoked (see "The
    /// protocol" in the [module documentation](self), with its residual risk: the 16-bit
    /// stamp that tells such pushes apart wraps after 2^16 tracked pushes of the item, and a
    /// 32-bit target has no stamp at all).
    ///
    /// # Safety
    ///
    /// The bag the item was last pushed into with tracking, if any, is not dropped before this
    /// call returns. (Implementations find the slot through the handle alone, so `revoke`
    /// needs no `&self`; holding a reference to that bag is the easy way to keep the promise.)
    /// Where other threads may pop the item and push it into another bag while this call runs,
    /// that holds for every bag that is its last one at some moment of the call, the one it
    /// sat in when the call began included: the call may still be reading that bag's slot.
    ///
    /// ```
    /// use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// struct Page(RevokeHandle);
    /// // SAFETY: the handle lives in the page, outside the reference.
    /// unsafe impl Revocable for &Page {
    ///     fn revoke_handle(&self) -> &RevokeHandle {
    ///         &self.0
    ///     }
    /// }
    ///
    /// let (first, second) = (Page(RevokeHandle::new()), Page(RevokeHandle::new()));
    /// let queue = Queue::new();
    /// queue.push_revocable(&first);
    /// queue.push_revocable(&second);
    /// // SAFETY: `queue`, where the pages were pushed, outlives both calls.
    /// assert!(unsafe { Queue::<&Page>::revoke(&&first) });
    /// assert!(!unsafe { Queue::<&Page>::revoke(&&first) }); // already out
    /// // Pops skip the revoked cell.
    /// assert!(queue.pop().is_some_and(|page| std::ptr::eq(page, &second)));
    /// assert!(queue.pop().is_none());
    /// ```
    unsafe fn revoke(item: &Self::Item) -> bool;
}

/// The revoke step common to every slot-based bag, and the only one: whichever bag type the
/// caller names, and whichever of the item types that share the handle, it pins the epoch
/// (what a queue's slot needs, harmless for a stack's) and marks the slot's state word alone.
/// The handle may name a slot of any bag, of any item type sharing the handle, since
/// [`RevocableBag::revoke`] does not say which bag it is called through.
///
/// # Safety
/// The structure that holds the slot the handle names, if any, is not dropped before this
/// call returns.
pub(crate) unsafe fn revoke_slot<T: Revocable>(item: &T) -> bool {
    // Pinned from before the handle is read until the last access to the slot, as the
    // protocol above needs for a queue's segments, even when the caller names a stack.
    #[cfg(not(pitlane_loom))]
    let _guard = crossbeam_epoch::pin();
    // SAFETY: the slot's structure is alive by the caller's contract, and a queue's segment
    // is not recycled while we are pinned (see "Memory safety of a stale slot address").
    unsafe { crate::slot::revoke(&item.revoke_handle().word) }
}
