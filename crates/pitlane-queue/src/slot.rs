//! The slot: one value and the state word that says who owns it.
//!
//! Queue cells and stack nodes are both slots. The state word is the only thing threads race
//! on; whoever moves it out of a *full* state owns the value.
//!
//! | state | meaning | who leaves it, and how |
//! |---|---|---|
//! | [`EMPTY`] | no value yet | the pusher, `EMPTY → FULL / H` (or `→ WRITING` first, for a large value) by CAS (the queue's pusher of a plain value with the process-wide barrier: by a plain store); a queue's popper that skips the cell, `EMPTY → TAKEN` by CAS (poison) |
//! | [`FULL`] | a plain value | its unique popper, by a store or swap of `TAKEN` (or, in the queue, by moving `deq` past it and leaving the state alone); the queue's pusher whose ticket was skipped, `FULL → TAKEN` by CAS, to take the value back |
//! | `H` (address of a [`RevokeHandle`](crate::revoke::RevokeHandle), a multiple of 8, ≥ 8) | a revocable value whose handle is at `H` | its popper by swap (`→ TAKEN`), or a revoker by CAS (`H → REVOKED`) |
//! | [`REVOKED`] | revoked: the value is dead, never to be popped | the popper that reaches it, by swap (`→ TAKEN`); it drops the value and moves on |
//! | [`WRITING`] | a queue's pusher of a large value is writing it | the pusher, `→ FULL / H` by store or CAS; a queue's popper that gives up waiting, `WRITING → TAKEN` by CAS (poison) |
//! | [`TAKEN`] | consumed (or poisoned before any value came) | never, until a stack recycles the node; except that a queue's plain store of `FULL` can land on a poisoned cell, whose pusher then sees the skip and takes the value back |
//!
//! Keeping `H` in the word lets a popper clear the item's handle without knowing that the item
//! type is [`Revocable`](crate::revoke::Revocable), and makes a revoker's CAS check, in the same
//! instruction, that the slot still holds *its* item.

use core::mem::MaybeUninit;

use pitlane_sync::shim::atomic::{AtomicUsize, Ordering};
use pitlane_sync::shim::cell::UnsafeCell;

use crate::revoke::RevokeHandle;

/// No value has been written (queue cells start here).
pub(crate) const EMPTY: usize = 0;
/// The value was consumed, or the cell was poisoned by a popper that arrived first.
pub(crate) const TAKEN: usize = 1;
/// A plain (untracked) value is present.
pub(crate) const FULL: usize = 2;
/// A tracked value was revoked: the slot still holds it, for the next pop that passes (or the
/// structure's drop) to drop.
pub(crate) const REVOKED: usize = 3;
/// A queue's pusher of a large value holds the cell and is writing the value: a pop waits for
/// it rather than giving up on it after the short wait meant for a pusher between its ticket
/// and its write.
pub(crate) const WRITING: usize = 4;

/// Whether `state` is a tracked value (the address of its handle, a multiple of 8).
#[inline]
pub(crate) fn is_tracked(state: usize) -> bool {
    state > WRITING
}

/// The state word of a slot that holds the tracked item whose handle is `handle`: the handle's
/// address, with its provenance exposed so that [`handle_of`] can rebuild the pointer (handles
/// are 8-aligned, so the word is never one of the small states).
#[inline]
pub(crate) fn tag_of(handle: &RevokeHandle) -> usize {
    core::ptr::from_ref(handle).expose_provenance()
}

/// The handle a tracked state names: the one owner of the decoding of [`tag_of`].
///
/// # Safety
/// `state` is tracked, and the value it was published with is still alive (its handle lives at
/// least as long as the value, by the [`Revocable`](crate::revoke::Revocable) contract).
#[inline]
unsafe fn handle_of<'a>(state: usize) -> &'a RevokeHandle {
    debug_assert!(is_tracked(state));
    // SAFETY: the caller guarantees the word came from `tag_of` of a live handle, whose
    // provenance `tag_of` exposed.
    unsafe { &*core::ptr::with_exposed_provenance::<RevokeHandle>(state) }
}

/// One value and its state word.
pub(crate) struct Slot<T> {
    /// Who owns the value; see the table in the module doc.
    pub(crate) state: AtomicUsize,
    /// Initialized while the state is `FULL`, `H` or `REVOKED`, and while the pusher that
    /// claimed the slot holds it between writing and publishing.
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Slot<T> {
    /// An empty slot.
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicUsize::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Makes the slot at `slot`, whose memory is uninitialized, an empty slot without writing
    /// its value storage.
    ///
    /// # Safety
    /// `slot` is valid for writes and properly aligned.
    #[cfg(not(pitlane_loom))]
    #[inline]
    pub(crate) unsafe fn init_state(slot: *mut Self) {
        // SAFETY: by the caller's contract; `value` is a `MaybeUninit`, valid uninitialized.
        unsafe { core::ptr::addr_of_mut!((*slot).state).write(AtomicUsize::new(EMPTY)) };
    }

    /// Writes `value` into the slot's storage.
    ///
    /// # Safety
    /// The caller owns the storage exclusively: it claimed the slot and has not published it,
    /// and the storage holds no value that would be overwritten without being dropped.
    #[inline]
    pub(crate) unsafe fn write(&self, value: T) {
        // SAFETY: exclusive access, by the caller's contract.
        self.value
            .with_mut(|p| unsafe { p.write(MaybeUninit::new(value)) });
    }

    /// Moves the value out of the slot's storage.
    ///
    /// # Safety
    /// The caller owns the value exclusively (it moved the state out of a full state, or it
    /// wrote the value and failed to publish it), and reads it only once.
    #[inline]
    pub(crate) unsafe fn read(&self) -> T {
        // SAFETY: exclusive ownership of an initialized value, by the caller's contract.
        self.value.with(|p| unsafe { (*p).assume_init_read() })
    }

    /// The slot's address as a handle records it.
    #[inline]
    pub(crate) fn address(&self) -> *const () {
        core::ptr::from_ref(self).cast()
    }

    /// Before publishing a value with state `tag`: a tracked item's handle is pointed at this
    /// slot (a plain `FULL` value has no handle).
    ///
    /// # Safety
    /// `tag` is [`FULL`] or the [`tag_of`] the handle of the item this slot holds, which is alive.
    #[inline]
    pub(crate) unsafe fn track(&self, tag: usize) {
        if tag != FULL {
            // SAFETY: by the caller's contract.
            unsafe { handle_of(tag) }.set(self.address());
        }
    }

    /// After taking back or taking out the value published with state `tag`: a tracked item's
    /// handle forgets this slot, unless it already names another one.
    ///
    /// # Safety
    /// As for [`track`](Self::track): the item is alive (the caller holds it).
    #[inline]
    pub(crate) unsafe fn untrack(&self, tag: usize) {
        if tag != FULL {
            // SAFETY: by the caller's contract.
            unsafe { handle_of(tag) }.clear_if(self.address());
        }
    }

    /// Drops whatever value the slot still owns, for the owner of the whole structure (no
    /// concurrent access), and clears the handle of a tracked or revoked value that still
    /// points here.
    pub(crate) fn drop_in_place(&mut self) {
        let state = self.state.load(Ordering::Relaxed);
        if state == FULL || is_tracked(state) {
            self.state.store(TAKEN, Ordering::Relaxed);
            // SAFETY: the state says the slot owns a value; `&mut self` excludes every other
            // access.
            let value = unsafe { self.read() };
            // SAFETY: `value` is alive, so its handle is (Revocable contract).
            unsafe { self.untrack(state) };
            drop(value);
        } else if state == REVOKED {
            self.state.store(TAKEN, Ordering::Relaxed);
            // SAFETY: a revoked slot still owns its (dead) value; `&mut self` excludes every
            // other access. The revoker cleared the handle; the value may be the last thing
            // keeping the handle alive, so it is not touched.
            drop(unsafe { self.read() });
        }
    }
}
