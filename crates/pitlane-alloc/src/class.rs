//! Size classes: which block size serves a request of a given size and alignment.
//!
//! Eight-byte steps up to 64 bytes, sixteen-byte steps up to 128, then four classes per
//! doubling up to 16 KiB ([`SMALL_MAX`]): at most 25 % of a block is rounding, and 12.5 % from
//! 128 bytes on. A block of class `c` lies at `page_start + k * size(c)`, and pages start on
//! 64 KiB boundaries, so every block is aligned to the largest power of two that divides its
//! size: a request with alignment `a` takes the first class at least as large whose size is
//! a multiple of `a` (that is why 24, 40 and 56 serve only alignments up to 8).
//!
//! The class is a pure function of `(size, align)`, which is what lets a free find the class
//! from the `Layout` it is given, and `realloc` stay in place exactly when the old and new
//! layouts map to the same class.

/// The block sizes, smallest first.
pub(crate) const CLASS_SIZES: [u32; CLASSES] = [
    8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640,
    768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240,
    12288, 14336, 16384,
];

/// How many small size classes there are.
pub(crate) const CLASSES: usize = 40;

/// The largest small block; bigger requests (and those aligned to more than it) are mapped
/// on their own.
///
/// ```
/// assert_eq!(pitlane_alloc::SMALL_MAX, 16 * 1024);
/// ```
pub const SMALL_MAX: usize = 16384;

/// `CLASS_OF_WORDS[(size + 7) / 8]`: the class of a request of `size` bytes with alignment at
/// most 8. A size of 0 takes the 16-byte class, not the 8-byte one: the C `malloc` promises
/// 16-byte alignment for every multiple of 16, 0 included, as glibc's `malloc(0)` has it.
static CLASS_OF_WORDS: [u8; SMALL_MAX / 8 + 1] = {
    let mut table = [0u8; SMALL_MAX / 8 + 1];
    let mut words = 0;
    let mut class = 0;
    while words <= SMALL_MAX / 8 {
        while (CLASS_SIZES[class] as usize) < words * 8 {
            class += 1;
        }
        table[words] = class as u8;
        words += 1;
    }
    // Size 0: the class of 16 bytes (two words).
    table[0] = table[2];
    table
};

/// The class of a request with alignment at most 8 and `size <= SMALL_MAX`.
#[inline(always)]
pub(crate) fn class_of_small(size: usize) -> usize {
    debug_assert!(size <= SMALL_MAX);
    // SAFETY (of the index, checked by the table's length in debug builds): `size <=
    // SMALL_MAX` keeps `(size + 7) / 8` within the table.
    let class = CLASS_OF_WORDS[(size + 7) >> 3] as usize;
    // SAFETY: the table is immutable and built at compile time from indices of
    // `CLASS_SIZES` (a class past the last would have failed its const evaluation), so every
    // entry is below `CLASSES`. Telling the compiler so removes the bounds check of the
    // heap's page array from the allocation fast path.
    unsafe { core::hint::assert_unchecked(class < CLASSES) };
    class
}

/// The class serving `size` bytes at alignment `align` (a power of two), or `None` if the
/// request is too large or too aligned for a small block.
#[inline]
pub(crate) fn class_of(size: usize, align: usize) -> Option<usize> {
    if size > SMALL_MAX {
        return None;
    }
    let mut class = class_of_small(size);
    if align <= 8 {
        return Some(class);
    }
    while class < CLASSES {
        if CLASS_SIZES[class] as usize & (align - 1) == 0 {
            return Some(class);
        }
        class += 1;
    }
    None
}

/// The block size of `class`.
#[inline(always)]
pub(crate) fn size_of_class(class: usize) -> usize {
    CLASS_SIZES[class] as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_and_alignment_gets_the_smallest_fitting_aligned_class() {
        for align_log in 0..=16 {
            let align = 1usize << align_log;
            for size in 0..=SMALL_MAX + 1 {
                let got = class_of(size, align);
                // Size 0 is served as 16 bytes (16-aligned, as the C `malloc(0)` promises).
                let least = if size == 0 { 16 } else { size };
                let want = (0..CLASSES).find(|&c| {
                    let s = CLASS_SIZES[c] as usize;
                    s >= least && s % align == 0
                });
                assert_eq!(got, want, "size {size} align {align}");
            }
        }
    }

    #[test]
    fn classes_grow_and_fit_a_page() {
        assert!(CLASS_SIZES.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(CLASS_SIZES[CLASSES - 1] as usize, SMALL_MAX);
        assert!(
            CLASS_SIZES
                .iter()
                .all(|&s| crate::segment::PAGE_SIZE / s as usize >= 4)
        );
    }
}
