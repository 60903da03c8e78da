//! The slot: one value and the state word that says who owns it.
//!
//! Queue cells and stack nodes are both slots. The state word is the only thing threads race
//! on; whoever moves it out of a *full* state owns the value.
//!
//! | state | meaning | who leaves it, and how |
//! |---|---|---|
//! | [`EMPTY`] | no value yet | the pusher, `EMPTY → FULL / H` by CAS (the queue's pusher of a plain value with the process-wide barrier: by a plain store); a queue's popper that skips the cell, `EMPTY → TAKEN` by CAS (poison) |
//! | [`FULL`] | a plain value | its unique popper, by a store or swap of `TAKEN` (or, in the queue, by moving `deq` past it and leaving the state alone); the queue's pusher whose ticket was skipped, `FULL → TAKEN` by CAS, to take the value back |
//! | `H` (address of a [`RevokeHandle`](crate::revoke::RevokeHandle), a multiple of 8, ≥ 8) | a revocable value whose handle is at `H` | its popper by swap (`→ TAKEN`), or a revoker by CAS (`H → REVOKED`) |
//! | [`REVOKED`] | revoked: the value is dead, never to be popped | the popper that reaches it, by swap (`→ TAKEN`); it drops the value and moves on |
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

/// Whether `state` is a tracked value (the address of its handle).
#[inline]
pub(crate) fn is_tracked(state: usize) -> bool {
    state > REVOKED
}

/// The handle a tracked or revoked state names.
///
/// # Safety
/// `state` is tracked, and the value it was published with is still alive (its handle lives at
/// least as long as the value, by the [`Revocable`](crate::revoke::Revocable) contract).
#[inline]
pub(crate) unsafe fn handle_of<'a>(state: usize) -> &'a RevokeHandle {
    // SAFETY: the caller guarantees the address came from `RevokeHandle::tag` of a live handle.
    unsafe { &*(state as *const RevokeHandle) }
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
            if state != FULL {
                // SAFETY: `value` is alive, so its handle is (Revocable contract).
                unsafe { handle_of(state) }.clear_if(self as *const Self as usize);
            }
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
