//! An index and a generation in one atomic 64-bit word, split as the user chooses.
//!
//! A freelist head that is compared and swapped by index alone suffers ABA: a thread reads head
//! `A` with successor `B`, stalls while others pop `A`, pop `B` and push `A` back, then swaps
//! the head from `A` to the stale `B` — handing out `B` twice. Packing a generation that every
//! successful exchange increments next to the index makes the stale exchange fail, because the
//! word it expects is gone even though the index is back.
//!
//! # The split, and what is left of ABA
//!
//! `INDEX_BITS` of the 64 bits hold the index and the other `64 - INDEX_BITS` the generation.
//! The generation wraps after `2^(64 - INDEX_BITS)` successful exchanges of the word; a thread
//! whose exchange would be stale still fails unless it stalled, between its load and its
//! exchange, across *exactly* a multiple of that many exchanges, and the word then holds the
//! very index it read. How long a wrap takes, if one word saw 10^9 successful exchanges a
//! second (more than any word sees: a contended cache line moves between cores tens of
//! millions of times a second):
//!
//! | `INDEX_BITS` | indices | generation bits | one wrap at 10^9/s |
//! |---:|---:|---:|---:|
//! | 16 | 65,535 | 48 | 3.3 days |
//! | 20 (default) | 1,048,575 | 44 | 4.9 hours |
//! | 21 | 2,097,151 | 43 | 2.4 hours |
//! | 24 | 16,777,215 | 40 | 18 minutes |
//! | 32 | 4,294,967,295 | 32 | 4.3 seconds |
//!
//! So the residual risk is a thread descheduled for hours, at an exchange rate no hardware
//! reaches, and then resumed at exactly the right moment. Choose the fewest index bits the
//! structure needs: a split wider than 21 index bits trades that margin for indices.
//!
//! **Linearization points.** [`TaggedIndex::load`] is the load; a successful
//! [`TaggedIndex::compare_exchange`] / [`TaggedIndex::compare_exchange_weak`] takes effect at its
//! read-modify-write.
//!
//! ```
//! use pitlane_sync::{TaggedIndex, Tagged};
//! use std::sync::atomic::Ordering;
//!
//! let head: TaggedIndex = TaggedIndex::new(7);
//! let seen = head.load(Ordering::Acquire);
//! assert_eq!((seen.index(), seen.generation()), (7, 0));
//! let now = head.compare_exchange(seen, 3, Ordering::AcqRel, Ordering::Acquire).unwrap();
//! assert_eq!((now.index(), now.generation()), (3, 1));
//! // The old snapshot no longer matches, even if the index were 7 again.
//! assert!(head.compare_exchange(seen, 9, Ordering::AcqRel, Ordering::Acquire).is_err());
//! ```

#[cfg(any(pitlane_loom, target_has_atomic = "64"))]
use crate::shim::atomic::{AtomicU64, Ordering};

/// The index bits of a [`TaggedIndex`] unless its type says otherwise.
///
/// ```
/// use pitlane_sync::tagged::{DEFAULT_INDEX_BITS, Tagged};
///
/// assert_eq!(Tagged::<DEFAULT_INDEX_BITS>::NIL, Tagged::<20>::NIL);
/// assert_eq!(Tagged::<DEFAULT_INDEX_BITS>::GENERATIONS, 1 << 44);
/// ```
pub const DEFAULT_INDEX_BITS: u32 = 20;

/// A snapshot of a [`TaggedIndex`]: an index of `INDEX_BITS` bits and the generation it was
/// stored with (the other `64 - INDEX_BITS` bits).
///
/// ```
/// use pitlane_sync::Tagged;
///
/// let t = Tagged::<16>::new(5, 9);
/// assert_eq!((t.index(), t.generation()), (5, 9));
/// assert_eq!(Tagged::<16>::NIL, 0xffff);
/// ```
///
/// A split outside 1 to 32 index bits does not compile, whichever way a snapshot is made:
///
/// ```compile_fail
/// // 40 index bits do not fit the `u32` an index is.
/// let t = pitlane_sync::Tagged::<40>::from_bits(1 << 35);
/// ```
///
/// ```compile_fail
/// let t = pitlane_sync::Tagged::<33>::new(0, 0);
/// ```
///
/// ```compile_fail
/// // No index bit: the generation would take the whole word.
/// let g = pitlane_sync::Tagged::<0>::GENERATIONS;
/// ```
///
/// ```compile_fail
/// let g = pitlane_sync::Tagged::<64>::GENERATIONS;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tagged<const INDEX_BITS: u32 = DEFAULT_INDEX_BITS> {
    word: u64,
}

impl<const INDEX_BITS: u32> Tagged<INDEX_BITS> {
    /// Rejects a split with no index bit or more index bits than a `u32` holds.
    const VALID: () = assert!(
        INDEX_BITS >= 1 && INDEX_BITS <= 32,
        "a TaggedIndex needs 1 to 32 index bits"
    );

    /// The mask of the index bits.
    const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

    /// The largest index, which by convention of pitlane's freelists means "none" (an empty
    /// list): all index bits set.
    ///
    /// ```
    /// assert_eq!(pitlane_sync::Tagged::<20>::NIL, (1 << 20) - 1);
    /// ```
    pub const NIL: u32 = {
        let () = Self::VALID;
        Self::INDEX_MASK as u32
    };

    /// How many distinct generations there are before one repeats: `2^(64 - INDEX_BITS)`,
    /// which does not compile for a split the type rejects.
    ///
    /// ```
    /// assert_eq!(pitlane_sync::Tagged::<20>::GENERATIONS, 1 << 44);
    /// ```
    pub const GENERATIONS: u64 = {
        let () = Self::VALID;
        1 << (64 - INDEX_BITS)
    };

    /// A snapshot holding `index` at `generation`; both are cut to their bits (an index above
    /// [`NIL`](Self::NIL) keeps its low `INDEX_BITS` bits, a generation its low
    /// `64 - INDEX_BITS`).
    ///
    /// ```
    /// let t = pitlane_sync::Tagged::<8>::new(0x1ff, 3);
    /// assert_eq!((t.index(), t.generation()), (0xff, 3));
    /// ```
    #[inline]
    pub const fn new(index: u32, generation: u64) -> Self {
        let () = Self::VALID;
        Self {
            word: (generation << INDEX_BITS) | (index as u64 & Self::INDEX_MASK),
        }
    }

    /// The index.
    ///
    /// ```
    /// assert_eq!(pitlane_sync::Tagged::<20>::new(3, 1).index(), 3);
    /// ```
    #[inline]
    pub const fn index(self) -> u32 {
        (self.word & Self::INDEX_MASK) as u32
    }

    /// The generation: how many successful exchanges the word had seen when it was read,
    /// modulo [`GENERATIONS`](Self::GENERATIONS).
    ///
    /// ```
    /// assert_eq!(pitlane_sync::Tagged::<20>::new(3, 1).generation(), 1);
    /// ```
    #[inline]
    pub const fn generation(self) -> u64 {
        self.word >> INDEX_BITS
    }

    /// Whether the index is [`NIL`](Self::NIL).
    ///
    /// ```
    /// use pitlane_sync::Tagged;
    /// assert!(Tagged::<20>::new(Tagged::<20>::NIL, 0).is_nil());
    /// ```
    #[inline]
    pub const fn is_nil(self) -> bool {
        self.index() == Self::NIL
    }

    /// The snapshot that replaces `self` when `index` is exchanged in: the next generation
    /// (wrapping after [`GENERATIONS`](Self::GENERATIONS)).
    ///
    /// ```
    /// let t = pitlane_sync::Tagged::<20>::new(1, 7).successor(2);
    /// assert_eq!((t.index(), t.generation()), (2, 8));
    /// ```
    #[inline]
    pub const fn successor(self, index: u32) -> Self {
        // The generation's bits are the word's top bits: adding one below them carries
        // into the generation, and an overflow past bit 63 is the wrap.
        Self {
            word: ((self.word | Self::INDEX_MASK).wrapping_add(1))
                | (index as u64 & Self::INDEX_MASK),
        }
    }

    /// The packed word: generation in the high `64 - INDEX_BITS` bits, index in the low ones.
    ///
    /// ```
    /// assert_eq!(pitlane_sync::Tagged::<20>::new(3, 1).to_bits(), (1 << 20) | 3);
    /// ```
    #[inline]
    pub const fn to_bits(self) -> u64 {
        self.word
    }

    /// Unpacks a word produced by [`Tagged::to_bits`]. Like [`Tagged::new`], it does not
    /// compile for a split outside 1 to 32 index bits (an index wider than a `u32` would be
    /// cut silently).
    ///
    /// ```
    /// use pitlane_sync::Tagged;
    /// let t = Tagged::<20>::new(3, 1);
    /// assert_eq!(Tagged::<20>::from_bits(t.to_bits()), t);
    /// ```
    #[inline]
    pub const fn from_bits(word: u64) -> Self {
        let () = Self::VALID;
        Self { word }
    }
}

/// An `AtomicU64` holding a [`Tagged`] index: compare-exchange succeeds only when both the
/// index and the generation match, and each success advances the generation.
///
/// ```
/// use std::sync::atomic::Ordering;
/// use pitlane_sync::TaggedIndex;
///
/// // A split for a structure of at most 2^16 - 1 entries: 48 generation bits.
/// let head = TaggedIndex::<16>::new(0);
/// let seen = head.load(Ordering::Relaxed);
/// assert!(head.compare_exchange(seen, 1, Ordering::AcqRel, Ordering::Relaxed).is_ok());
/// ```
///
/// Only on targets with 64-bit atomics (`target_has_atomic = "64"`).
#[cfg(any(pitlane_loom, target_has_atomic = "64"))]
#[derive(Debug)]
pub struct TaggedIndex<const INDEX_BITS: u32 = DEFAULT_INDEX_BITS> {
    word: AtomicU64,
}

#[cfg(any(pitlane_loom, target_has_atomic = "64"))]
impl<const INDEX_BITS: u32> TaggedIndex<INDEX_BITS> {
    /// Holds `index` at generation 0.
    ///
    /// ```
    /// let head: pitlane_sync::TaggedIndex = pitlane_sync::TaggedIndex::new(4);
    /// assert_eq!(head.load(std::sync::atomic::Ordering::Relaxed).index(), 4);
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn new(index: u32) -> Self {
        Self {
            word: AtomicU64::new(Tagged::<INDEX_BITS>::new(index, 0).to_bits()),
        }
    }

    /// Holds `index` at generation 0.
    #[cfg(pitlane_loom)]
    pub fn new(index: u32) -> Self {
        Self {
            word: AtomicU64::new(Tagged::<INDEX_BITS>::new(index, 0).to_bits()),
        }
    }

    /// Reads the index and its generation.
    ///
    /// ```
    /// let head: pitlane_sync::TaggedIndex = pitlane_sync::TaggedIndex::new(4);
    /// let seen = head.load(std::sync::atomic::Ordering::Acquire);
    /// assert_eq!((seen.index(), seen.generation()), (4, 0));
    /// ```
    #[inline]
    pub fn load(&self, order: Ordering) -> Tagged<INDEX_BITS> {
        Tagged::from_bits(self.word.load(order))
    }

    /// Replaces `current` by `index` at the next generation if the word still equals `current`.
    /// Returns the new snapshot on success and the word found on failure.
    ///
    /// ```
    /// use std::sync::atomic::Ordering::{AcqRel, Acquire};
    /// let head: pitlane_sync::TaggedIndex = pitlane_sync::TaggedIndex::new(4);
    /// let seen = head.load(Acquire);
    /// let now = head.compare_exchange(seen, 5, AcqRel, Acquire).unwrap();
    /// assert_eq!(head.compare_exchange(seen, 6, AcqRel, Acquire), Err(now));
    /// ```
    #[inline]
    pub fn compare_exchange(
        &self,
        current: Tagged<INDEX_BITS>,
        index: u32,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Tagged<INDEX_BITS>, Tagged<INDEX_BITS>> {
        let next = current.successor(index);
        self.word
            .compare_exchange(current.to_bits(), next.to_bits(), success, failure)
            .map(|_| next)
            .map_err(Tagged::from_bits)
    }

    /// Like [`compare_exchange`](Self::compare_exchange) but may fail spuriously; for retry
    /// loops.
    ///
    /// ```
    /// use std::sync::atomic::Ordering::{AcqRel, Acquire};
    /// let head: pitlane_sync::TaggedIndex = pitlane_sync::TaggedIndex::new(4);
    /// let mut seen = head.load(Acquire);
    /// while let Err(now) = head.compare_exchange_weak(seen, 5, AcqRel, Acquire) {
    ///     seen = now;
    /// }
    /// assert_eq!(head.load(Acquire).index(), 5);
    /// ```
    #[inline]
    pub fn compare_exchange_weak(
        &self,
        current: Tagged<INDEX_BITS>,
        index: u32,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Tagged<INDEX_BITS>, Tagged<INDEX_BITS>> {
        let next = current.successor(index);
        self.word
            .compare_exchange_weak(current.to_bits(), next.to_bits(), success, failure)
            .map(|_| next)
            .map_err(Tagged::from_bits)
    }
}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks_at_every_split() {
        fn check<const B: u32>() {
            let nil = Tagged::<B>::NIL;
            assert_eq!(u64::from(nil), (1u64 << B) - 1);
            for index in [0, 1, nil / 2, nil] {
                for generation in [0, 1, Tagged::<B>::GENERATIONS - 1] {
                    let t = Tagged::<B>::new(index, generation);
                    assert_eq!((t.index(), t.generation()), (index, generation));
                    assert_eq!(Tagged::<B>::from_bits(t.to_bits()), t);
                }
            }
            assert!(Tagged::<B>::new(nil, 3).is_nil());
        }
        check::<1>();
        check::<16>();
        check::<20>();
        check::<21>();
        check::<31>();
        check::<32>();
    }

    #[test]
    fn the_default_split_wraps_only_after_hours_at_a_billion_exchanges_a_second() {
        let seconds = Tagged::<DEFAULT_INDEX_BITS>::GENERATIONS / 1_000_000_000;
        assert!(seconds >= 4 * 3600, "a wrap in {seconds} s");
    }

    #[test]
    fn generation_wraps_to_zero_and_keeps_the_new_index() {
        fn check<const B: u32>() {
            let last = Tagged::<B>::GENERATIONS - 1;
            let t = Tagged::<B>::new(1, last).successor(Tagged::<B>::NIL);
            assert_eq!((t.index(), t.generation()), (Tagged::<B>::NIL, 0));
            let t = Tagged::<B>::new(Tagged::<B>::NIL, 5).successor(0);
            assert_eq!((t.index(), t.generation()), (0, 6));
        }
        check::<1>();
        check::<20>();
        check::<32>();
    }

    #[test]
    fn an_index_too_wide_keeps_its_low_bits() {
        assert_eq!(Tagged::<4>::new(0x13, 0).index(), 0x3);
        assert_eq!(Tagged::<4>::new(0, 0).successor(0x1f).index(), 0xf);
    }

    #[test]
    fn stale_snapshot_fails_after_aba() {
        let head: TaggedIndex = TaggedIndex::new(1);
        let stale = head.load(Ordering::Relaxed);
        let a = head
            .compare_exchange(stale, 2, Ordering::AcqRel, Ordering::Relaxed)
            .unwrap();
        let b = head
            .compare_exchange(a, 1, Ordering::AcqRel, Ordering::Relaxed)
            .unwrap();
        assert_eq!(b.index(), stale.index());
        let err = head
            .compare_exchange(stale, 5, Ordering::AcqRel, Ordering::Relaxed)
            .unwrap_err();
        assert_eq!(err, b);
    }
}
