//! A 32-bit index and a 32-bit generation in one atomic word.
//!
//! A freelist head that is compared and swapped by index alone suffers ABA: a thread reads head
//! `A` with successor `B`, stalls while others pop `A`, pop `B` and push `A` back, then swaps
//! the head from `A` to the stale `B` — handing out `B` twice. Packing a generation that every
//! successful exchange increments next to the index makes the stale exchange fail, because the
//! word it expects is gone even though the index is back. A 32-bit generation wraps after
//! 2^32 exchanges; a thread would have to stall across exactly that many for ABA to return.
//!
//! **Linearization points.** [`TaggedIndex::load`] is the load; a successful
//! [`TaggedIndex::compare_exchange`] / [`TaggedIndex::compare_exchange_weak`] takes effect at its
//! read-modify-write.
//!
//! ```
//! use pitlane_sync::{TaggedIndex, Tagged};
//! use std::sync::atomic::Ordering;
//!
//! let head = TaggedIndex::new(7);
//! let seen = head.load(Ordering::Acquire);
//! assert_eq!((seen.index(), seen.generation()), (7, 0));
//! let now = head.compare_exchange(seen, 3, Ordering::AcqRel, Ordering::Acquire).unwrap();
//! assert_eq!((now.index(), now.generation()), (3, 1));
//! // The old snapshot no longer matches, even if the index were 7 again.
//! assert!(head.compare_exchange(seen, 9, Ordering::AcqRel, Ordering::Acquire).is_err());
//! ```

use crate::shim::atomic::{AtomicU64, Ordering};

/// A snapshot of a [`TaggedIndex`]: an index and the generation it was stored with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tagged {
    word: u64,
}

impl Tagged {
    /// Index meaning "none" (an empty list), by convention of pitlane's freelists.
    pub const NIL: u32 = u32::MAX;

    /// A snapshot holding `index` at `generation`.
    #[inline]
    pub const fn new(index: u32, generation: u32) -> Self {
        Self {
            word: ((generation as u64) << 32) | index as u64,
        }
    }

    /// The index.
    #[inline]
    pub const fn index(self) -> u32 {
        self.word as u32
    }

    /// The generation: how many successful exchanges the word had seen when it was read.
    #[inline]
    pub const fn generation(self) -> u32 {
        (self.word >> 32) as u32
    }

    /// Whether the index is [`Tagged::NIL`].
    #[inline]
    pub const fn is_nil(self) -> bool {
        self.index() == Self::NIL
    }

    /// The snapshot that replaces `self` when `index` is exchanged in: the next generation
    /// (wrapping).
    #[inline]
    pub const fn successor(self, index: u32) -> Self {
        Self::new(index, self.generation().wrapping_add(1))
    }

    /// The packed word: generation in the high 32 bits, index in the low 32.
    #[inline]
    pub const fn to_bits(self) -> u64 {
        self.word
    }

    /// Unpacks a word produced by [`Tagged::to_bits`].
    #[inline]
    pub const fn from_bits(word: u64) -> Self {
        Self { word }
    }
}

/// An `AtomicU64` holding a [`Tagged`] index: compare-exchange succeeds only when both the
/// index and the generation match, and each success advances the generation.
#[derive(Debug)]
pub struct TaggedIndex {
    word: AtomicU64,
}

impl TaggedIndex {
    /// Holds `index` at generation 0.
    #[cfg(not(pitlane_loom))]
    pub const fn new(index: u32) -> Self {
        Self {
            word: AtomicU64::new(Tagged::new(index, 0).to_bits()),
        }
    }

    /// Holds `index` at generation 0.
    #[cfg(pitlane_loom)]
    pub fn new(index: u32) -> Self {
        Self {
            word: AtomicU64::new(Tagged::new(index, 0).to_bits()),
        }
    }

    /// Reads the index and its generation.
    #[inline]
    pub fn load(&self, order: Ordering) -> Tagged {
        Tagged::from_bits(self.word.load(order))
    }

    /// Replaces `current` by `index` at the next generation if the word still equals `current`.
    /// Returns the new snapshot on success and the word found on failure.
    #[inline]
    pub fn compare_exchange(
        &self,
        current: Tagged,
        index: u32,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Tagged, Tagged> {
        let next = current.successor(index);
        self.word
            .compare_exchange(current.to_bits(), next.to_bits(), success, failure)
            .map(|_| next)
            .map_err(Tagged::from_bits)
    }

    /// Like [`compare_exchange`](Self::compare_exchange) but may fail spuriously; for retry
    /// loops.
    #[inline]
    pub fn compare_exchange_weak(
        &self,
        current: Tagged,
        index: u32,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Tagged, Tagged> {
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
    fn packs_and_unpacks() {
        let t = Tagged::new(0xdead_beef, 0x1234_5678);
        assert_eq!(t.index(), 0xdead_beef);
        assert_eq!(t.generation(), 0x1234_5678);
        assert_eq!(Tagged::from_bits(t.to_bits()), t);
        assert!(Tagged::new(Tagged::NIL, 3).is_nil());
    }

    #[test]
    fn generation_wraps() {
        let t = Tagged::new(1, u32::MAX).successor(2);
        assert_eq!((t.index(), t.generation()), (2, 0));
    }

    #[test]
    fn stale_snapshot_fails_after_aba() {
        let head = TaggedIndex::new(1);
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
