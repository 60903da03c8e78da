//! The slot: one value and the state word that says who owns it; and the *tracking* of
//! revocable values: the encoding of a tracked slot's state and of the word of the item's
//! [`RevokeHandle`](crate::revoke::RevokeHandle), which this module alone reads and writes.
//!
//! Queue cells and stack nodes are both slots. The state word is the only thing threads race
//! on; whoever moves it out of a *full* state owns the value.
//!
//! | state | meaning | who leaves it, and how |
//! |---|---|---|
//! | [`EMPTY`] | no value yet | the pusher, `EMPTY → FULL / H` (or `→ WRITING` first, for a large value) by CAS (the queue's pusher of a plain value with the process-wide barrier: by a plain store); a queue's popper that skips the cell, `EMPTY → TAKEN` by CAS (poison) |
//! | [`FULL`] | a plain value | its unique popper, by a store or swap of `TAKEN` (or, in the queue, by moving `deq` past it and leaving the state alone); the queue's pusher whose ticket was skipped, `FULL → TAKEN` by CAS, to take the value back |
//! | `H` (address of the item's [`TrackWord`], with the push's *mark*, below) | a revocable value whose handle is at `H` | its popper by swap (`→ TAKEN`), or a revoker by CAS (`H → REVOKED`) |
//! | [`REVOKED`] | revoked: the value is dead, never to be popped | the popper that reaches it, by swap (`→ TAKEN`); it drops the value and moves on |
//! | [`WRITING`] | a queue's pusher of a large value is writing it | the pusher, `→ FULL / H` by store or CAS; a queue's popper that gives up waiting, `WRITING → TAKEN` by CAS (poison) |
//! | [`TAKEN`] | consumed (or poisoned before any value came) | never, until a stack recycles the node; except that a queue's plain store of `FULL` can land on a poisoned cell, whose pusher then sees the skip and takes the value back |
//!
//! Keeping `H` in the word lets a popper clear the item's handle without knowing that the item
//! type is [`Revocable`](crate::revoke::Revocable), and makes a revoker's CAS check, in the same
//! instruction, that the slot still holds *its* item, from *the push it read in the handle*.
//!
//! # Tracking words and their stamps
//!
//! A handle's word names the slot its item sits in (its address), or none. Every tracked push
//! gives the item a new *stamp*, a 16-bit count of the tracked pushes of that item, kept in
//! the bits above the address (48 to 63) of both words it writes: the handle's word
//! (`stamp | slot`) and the slot's state (`stamp | H`). Those bits (or, for an unstamped push,
//! bit 0: below) are the push's *mark*, the same in both words, so that whoever holds one of
//! the words can tell the other: whoever removes the tracking removes exactly the word of
//! that push.
//!
//! - A tracked push reads the handle's word, and replaces it (one compare-and-swap) with the
//!   new slot and the next stamp; then it publishes the state with the same stamp.
//! - The revoker reads the handle's word `w = stamp | slot`, and CASes the slot's state from
//!   `stamp | H`; only if that succeeds does it forget the handle: CAS `w → stamp | none`.
//! - The popper (or a pusher taking its value back) that holds the state `stamp | H` forgets
//!   the handle with a CAS from `stamp | slot`.
//! - Forgetting keeps the stamp, so the next push counts on from it: a handle's word never
//!   holds the same value twice within 2^16 tracked pushes of its item.
//!
//! The stamp closes the race of a *late forget*: a stack reuses a node as soon as a pop has
//! passed it, so between a revoker's winning CAS and its forget, a pop can skip the revoked
//! node, recycle it, and a tracked push of another copy of the item can land in that very node.
//! Without the stamp, the handle would then hold the address the revoker read, and the
//! revoker's forget would erase the new copy's tracking. With it, the new push's word has the
//! next stamp, and the late forget fails. It also keeps a revoker that read an old push's word
//! from marking a newer copy in the same slot: the state's stamp differs, the CAS fails, and the
//! revoke reports the item gone, which it was at some moment during the call (a pop took
//! the copy it read).
//!
//! **What is left** is a wrap: the late forget erases a newer copy's tracking only if, while
//! one revoker stands between its winning CAS and its forget (a few instructions, unless the
//! thread is preempted there), the item is pushed with tracking a multiple of 2^16 times (and
//! taken out again between pushes), and the last of those pushes lands in the very slot the
//! revoker read. The same wrap lets a revoker that read an old word mark the newer copy, which
//! is harmless (that copy is in the bag, and the revoker then forgets its word, as it should).
//! An owner that pushes a page only while it holds it, and holds a revoked page only once
//! `revoke` has returned, never pushes during a revoke of it, so it is not exposed at all.
//!
//! **Addresses above 2^48.** Both addresses must fit below bit 48 to carry a stamp (user space
//! on x86-64 and AArch64 Linux and macOS does, unless a process maps memory there on purpose;
//! a 32-bit target has no bits to spare). When one does not, the push writes *unstamped*
//! words instead: the addresses with bit 0 set (both are at least 8-aligned), and no stamp.
//! Such pushes work as they did before stamps, late forget included, and the count of stamps
//! starts again after one; nothing else changes.

use core::mem::MaybeUninit;

use core::ptr;

use pitlane_sync::shim::atomic::{AtomicPtr, AtomicUsize, Ordering};
use pitlane_sync::shim::cell::UnsafeCell;

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

/// Whether `state` is a tracked value (a handle's address, at least 8, with its mark).
#[inline]
pub(crate) fn is_tracked(state: usize) -> bool {
    state > WRITING
}

/// Bits of a tracking word above its address that hold the stamp (none on a 32-bit target).
const STAMP_BITS: u32 = if cfg!(target_pointer_width = "64") {
    16
} else {
    0
};
/// Bits of a tracking word below the stamp: the address.
const ADDRESS_BITS: u32 = usize::BITS - STAMP_BITS;
/// The address bits of a stamped word.
const ADDRESS_MASK: usize = usize::MAX >> STAMP_BITS;
/// The largest stamp.
const STAMP_MAX: usize = (1 << STAMP_BITS) - 1;
/// Bit 0 of an unstamped word (see "Addresses above 2^48" in the module doc).
const UNSTAMPED: usize = 1;

/// The mark of `word` (a handle's word or a tracked state): its stamp bits, or [`UNSTAMPED`].
#[inline]
fn mark_of(word: usize) -> usize {
    if word & UNSTAMPED != 0 {
        UNSTAMPED
    } else {
        word & !ADDRESS_MASK
    }
}

/// The address `word` names (0 for a handle's word that names no slot).
#[inline]
fn address_of(word: usize) -> usize {
    if word & UNSTAMPED != 0 {
        word & !UNSTAMPED
    } else {
        word & ADDRESS_MASK
    }
}

/// The mark of the tracked push that follows the one whose handle word is `word`, for a value
/// whose handle is at `handle` going into the slot at `slot`.
#[inline]
fn next_mark(word: usize, handle: usize, slot: usize) -> usize {
    // No bits for a stamp (a 32-bit target), or an address that reaches into them.
    if STAMP_BITS == 0 || (handle | slot).checked_shr(ADDRESS_BITS).unwrap_or(0) != 0 {
        return UNSTAMPED;
    }
    let stamp = match mark_of(word) {
        UNSTAMPED => 0,
        // `checked_shr` is `None` only where there are no stamp bits.
        mark => mark.checked_shr(ADDRESS_BITS).unwrap_or(0),
    };
    let next = stamp.wrapping_add(1) & STAMP_MAX;
    next.checked_shl(ADDRESS_BITS).unwrap_or(0)
}

/// The word of a [`RevokeHandle`](crate::revoke::RevokeHandle): the address of the slot its
/// item sits in, or none, with the mark of the push that put it there (see the module doc).
#[derive(Debug, Default)]
#[repr(align(8))]
pub(crate) struct TrackWord {
    /// `mark | slot address` (the slot's provenance), or `stamp | 0` when it names no slot.
    word: AtomicPtr<()>,
}

impl TrackWord {
    /// A word that names no slot.
    #[cfg(not(pitlane_loom))]
    pub(crate) const fn new() -> Self {
        Self {
            word: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// A word that names no slot.
    #[cfg(pitlane_loom)]
    pub(crate) fn new() -> Self {
        Self {
            word: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Whether the word names a slot (reads this word alone).
    #[inline]
    pub(crate) fn names_a_slot(&self) -> bool {
        address_of(self.word.load(Ordering::Acquire).addr()) != 0
    }

    /// The state word of a slot holding the tracked item whose handle word this is, before
    /// its mark: the word's address, with its provenance exposed so that [`handle_at`] can
    /// rebuild the pointer (the word is 8-aligned, so the state is never one of the small
    /// states).
    #[inline]
    pub(crate) fn tag(&self) -> usize {
        ptr::from_ref(self).expose_provenance()
    }

    /// Points the word at `slot`, with the next stamp, for a push about to publish there; the
    /// state to publish (`mark | H`).
    #[inline]
    fn point_at(&self, slot: *const ()) -> usize {
        let handle = self.tag();
        let mut seen = self.word.load(Ordering::Relaxed);
        loop {
            let mark = next_mark(seen.addr(), handle, slot.addr());
            let word = slot.cast_mut().map_addr(|address| address | mark);
            // Release: a revoker that reads the word (Acquire) sees the slot's memory as the
            // pusher did.
            match self
                .word
                .compare_exchange_weak(seen, word, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return handle | mark,
                Err(now) => seen = now,
            }
        }
    }

    /// Forgets the slot `word` names, if the handle still holds exactly `word` (the push that
    /// wrote it is the latest), keeping its stamp.
    #[inline]
    fn forget(&self, word: *mut ()) {
        let kept = match mark_of(word.addr()) {
            UNSTAMPED => 0,
            stamp => stamp,
        };
        let _ = self.word.compare_exchange(
            word,
            ptr::without_provenance_mut(kept),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

/// The handle word a tracked state names, with its address without the mark: the one owner of
/// the decoding of [`TrackWord::tag`].
///
/// # Safety
/// `state` is tracked, and the value it was published with is still alive (its handle lives at
/// least as long as the value, by the [`Revocable`](crate::revoke::Revocable) contract).
#[inline]
unsafe fn handle_at<'a>(state: usize) -> &'a TrackWord {
    debug_assert!(is_tracked(state));
    // SAFETY: the caller guarantees the word came from `tag` of a live handle word (with a
    // mark added above or below its address bits), whose provenance `tag` exposed.
    unsafe { &*ptr::with_exposed_provenance::<TrackWord>(address_of(state)) }
}

/// One value and its state word.
///
/// `repr(C)` with the state first: the state word is at the start of every slot, whatever
/// `T` is, so that a revoker, which reaches a slot through a handle alone, touches the state
/// word and nothing else even when it names the item by another type than the slot's (two
/// [`Revocable`](crate::revoke::Revocable) types may share a handle; see [`revoke`]).
#[repr(C)]
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
    fn address(&self) -> *const () {
        ptr::from_ref(self).cast()
    }

    /// Before publishing a value with `tag` ([`FULL`], or the [`TrackWord::tag`] of a
    /// tracked item's handle): the state to publish. For a tracked item, the handle is pointed
    /// at this slot with the next stamp, and the state is its tag with the same mark.
    ///
    /// # Safety
    /// `tag` is [`FULL`] or the tag of the handle of the item this slot holds, which is alive.
    #[inline]
    pub(crate) unsafe fn track(&self, tag: usize) -> usize {
        if tag == FULL {
            return FULL;
        }
        // SAFETY: by the caller's contract; `tag` has no mark yet, so it decodes to itself
        // (it has bit 0 clear, and fits below the stamp bits or `point_at` marks it unstamped).
        let handle = unsafe { &*ptr::with_exposed_provenance::<TrackWord>(tag) };
        handle.point_at(self.address())
    }

    /// After taking back or taking out the value published with `state`: a tracked item's
    /// handle forgets this slot, if it still holds the word of that very push.
    ///
    /// # Safety
    /// As for [`track`](Self::track): `state` is what `track` returned, and the item is alive
    /// (the caller holds it).
    #[inline]
    pub(crate) unsafe fn untrack(&self, state: usize) {
        if state != FULL {
            let word = self.address().cast_mut().map_addr(|a| a | mark_of(state));
            // SAFETY: by the caller's contract.
            unsafe { handle_at(state) }.forget(word);
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

/// Revokes the item whose handle word is `handle`, if it still sits where the word says: one
/// CAS of that slot's state from the state of the push the word records to [`REVOKED`], then
/// the handle forgets that push. `true` if this call revoked it.
///
/// Only the slot's state word is touched, and it is reached without the slot's value type: it
/// is the first field of every [`Slot`] (`repr(C)`), so the revoke is the same whichever of
/// the item types that share the handle the caller names the item by.
///
/// # Safety
/// The memory of the slot `handle` names, if any, is alive for the whole call.
pub(crate) unsafe fn revoke(handle: &TrackWord) -> bool {
    let word = handle.word.load(Ordering::Acquire);
    let at = word.map_addr(address_of);
    if at.is_null() {
        return false;
    }
    // SAFETY: a word that names a slot names the start of a `Slot` of a structure the item was
    // pushed into, alive by the caller's contract; a `Slot` of any value type begins with its
    // state, an `AtomicUsize` (`repr(C)`), so this reference covers that word alone. The
    // pointer carries the provenance of the structure's allocation (the pusher's `map_addr`,
    // undone here).
    let state = unsafe { &*at.cast::<AtomicUsize>() };
    let expected = handle.tag() | mark_of(word.addr());
    // Mark the slot dead if it still holds this very push of the item.
    let revoked = state
        .compare_exchange(expected, REVOKED, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok();
    if revoked {
        handle.forget(word);
    }
    revoked
}

/// Where `usize` is 32 bits there are no stamp bits: every tracked push is unstamped, as the
/// module doc says (CI runs the crate's tests on `i686-unknown-linux-gnu`).
#[cfg(all(test, not(pitlane_loom), target_pointer_width = "32"))]
mod tests_32 {
    use super::*;

    #[test]
    fn every_push_is_unstamped_and_decodes_whole() {
        let (handle, slot) = (0x7f12_3450, 0xfff0_0008);
        for word in [0, UNSTAMPED, slot | UNSTAMPED] {
            let mark = next_mark(word, handle, slot);
            assert_eq!(mark, UNSTAMPED);
            assert_eq!(address_of(slot | mark), slot);
            assert_eq!(address_of(handle | mark), handle);
            assert_eq!(mark_of(slot | mark), UNSTAMPED);
            assert!(is_tracked(handle | mark));
        }
    }
}

#[cfg(all(test, not(pitlane_loom), target_pointer_width = "64"))]
mod tests {
    use super::*;

    /// An 8-aligned address below 2^48, and one above.
    const LOW: usize = 0x7f12_3456_7890;
    const HIGH: usize = 0xff00_0000_0000_1000;

    #[test]
    fn a_stamped_word_keeps_its_address_and_its_stamp_apart() {
        let mark = next_mark(0, LOW, LOW + 64);
        assert_eq!(mark, 1 << 48, "the first push has stamp 1");
        let word = (LOW + 64) | mark;
        assert_eq!(address_of(word), LOW + 64);
        assert_eq!(mark_of(word), mark);
        // A state with the same mark decodes to the handle's address.
        assert_eq!(address_of(LOW | mark), LOW);
        assert!(is_tracked(LOW | mark));
        // A forgotten word keeps the stamp and names no slot.
        assert_eq!(address_of(mark), 0);
        assert_eq!(next_mark(mark, LOW, LOW + 64), 2 << 48);
    }

    #[test]
    fn the_stamp_wraps_after_two_to_the_sixteen_pushes() {
        let mut word = 0;
        for push in 1..=STAMP_MAX {
            word = next_mark(word, LOW, LOW + 8) | (LOW + 8);
            assert_eq!(mark_of(word) >> 48, push);
        }
        // The next push wraps to stamp 0: the handle word repeats only now.
        assert_eq!(next_mark(word, LOW, LOW + 8), 0);
        assert_eq!(STAMP_MAX, 65_535);
    }

    #[test]
    fn an_address_above_the_stamp_bits_gives_an_unstamped_word_that_decodes_whole() {
        for (handle, slot) in [(HIGH, LOW), (LOW, HIGH), (HIGH, HIGH + 64)] {
            let mark = next_mark(5 << 48, handle, slot);
            assert_eq!(mark, UNSTAMPED);
            assert_eq!(address_of(slot | mark), slot);
            assert_eq!(address_of(handle | mark), handle);
            assert_eq!(mark_of(slot | mark), UNSTAMPED);
            assert!(is_tracked(handle | mark));
        }
        // After an unstamped word, stamps start again from 1.
        assert_eq!(next_mark(HIGH | UNSTAMPED, LOW, LOW), 1 << 48);
    }

    #[test]
    fn a_forget_with_an_older_word_leaves_a_newer_push_tracked() {
        let slot = Slot::<u8>::new();
        let handle = TrackWord::new();
        let first = slot.address().cast_mut();
        let state = handle.point_at(first);
        let old = handle.word.load(Ordering::Relaxed);
        assert_eq!(old.map_addr(address_of), first);
        // The item is taken out of the slot, then pushed into the same slot again.
        // SAFETY: `state` came from `point_at` of the live `handle`.
        unsafe { slot.untrack(state) };
        assert!(!handle.names_a_slot());
        let newer = handle.point_at(first);
        assert_ne!(newer, state);
        // A late forget of the first push's word changes nothing.
        handle.forget(old);
        assert!(handle.names_a_slot());
        // SAFETY: as above.
        unsafe { slot.untrack(newer) };
        assert!(!handle.names_a_slot());
    }
}
