//! The allocator without `Layout`s: what the C `malloc` family needs, where `free` and
//! `realloc` are given only a pointer (pitlane-malloc builds on this).
//!
//! A pointer finds its kind by address: if its 4 MiB-aligned region is one of the segments
//! (a bit in a bitmap of the address space, set when the segment is mapped; segments are
//! never unmapped), it is a small block and its page descriptor names its class; otherwise it
//! is a large block, whose header lies right before it. [`owns`] tells a caller whether a pointer can be ours at all,
//! so that a foreign pointer is refused instead of corrupting a page.
//!
//! ```
//! use pitlane_alloc::raw;
//!
//! let block = raw::malloc(100, 8);
//! assert!(!block.is_null() && raw::owns(block));
//! // SAFETY: a live block of ours.
//! unsafe {
//!     assert!(raw::usable_size(block) >= 100);
//!     let bigger = raw::realloc(block, 100_000);
//!     assert!(!bigger.is_null());
//!     raw::free(bigger);
//! }
//! ```

use core::alloc::Layout;
use core::ptr;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::segment::{self, SEGMENT_SIZE};
use crate::{class, heap, large};

/// User-space addresses lie below 2^47 on x86-64 Linux and below 2^48 on AArch64 Linux (its
/// usual 48-bit address space puts `mmap`'s results right under 2^48; with 5-level paging on
/// x86-64, or 52-bit addresses on AArch64, the kernel maps above these only when asked with a
/// hint, which we never give). One bit per 4 MiB region below 2^48 is 2^26 bits. A segment
/// the kernel places beyond them anyway is given back and not used ([`note_segment`]).
const ADDRESS_BITS: u32 = 48;
const REGION_COUNT: usize = 1 << (ADDRESS_BITS - SEGMENT_SIZE.trailing_zeros());

/// One bit per 4 MiB region of the address space: set when the region is one of our
/// segments. 8 MiB of zeroed static memory, of which the OS backs only the pages touched.
static REGIONS: [AtomicU64; REGION_COUNT / 64] = [const { AtomicU64::new(0) }; REGION_COUNT / 64];

/// Records that the segment at `base` (4 MiB-aligned) is ours; called once per segment,
/// before any block of it is handed out. `false` if the segment lies beyond the bitmap: then
/// [`in_segment`] could not tell its blocks from large ones, and it must not be used.
pub(crate) fn note_segment(base: *mut u8) -> bool {
    let region = base.addr() >> SEGMENT_SIZE.trailing_zeros();
    match REGIONS.get(region / 64) {
        Some(word) => {
            word.fetch_or(1 << (region % 64), Ordering::Release);
            true
        }
        None => false,
    }
}

/// Whether `ptr` lies in one of our segments: then, if it is a block at all, it is a small
/// block (see [`free_small`]). One load and a bit test.
///
/// ```
/// let block = pitlane_alloc::raw::malloc(10, 8);
/// assert!(pitlane_alloc::raw::in_segment(block));
/// # unsafe { pitlane_alloc::raw::free(block) };
/// ```
#[inline(always)]
pub fn in_segment(ptr: *mut u8) -> bool {
    let region = ptr.addr() >> SEGMENT_SIZE.trailing_zeros();
    match REGIONS.get(region / 64) {
        Some(word) => word.load(Ordering::Acquire) & (1 << (region % 64)) != 0,
        None => false,
    }
}

/// Whether `ptr` may be a block of this allocator: exactly for pointers into our segments;
/// for others, whether the 64 bytes before `ptr` describe a large block of ours that holds
/// it (checked only when they lie in the same OS page as `ptr`; a page-aligned pointer
/// outside the segments is taken as ours). A `false` is certain: the pointer is not ours.
///
/// ```
/// let on_stack = 0u64;
/// assert!(!pitlane_alloc::raw::owns((&raw const on_stack).cast_mut().cast()));
/// ```
#[inline]
pub fn owns(ptr: *mut u8) -> bool {
    in_segment(ptr) || (!ptr.is_null() && large::plausible(ptr))
}

/// Whether `ptr`, which the caller is about to free, resize or ask the size of (each of which
/// reads a large block's header), is a live block of this allocator: [`owns`], and for a
/// page-aligned pointer outside the segments, which [`owns`] takes as ours unread, the same
/// check of the header before it (the mapping it names holds `ptr`, and its seal is that of
/// a live block at `ptr`). So a large block freed twice is refused while its mapping is kept
/// for reuse, page-aligned or not. A `false` is certain.
///
/// # Safety
/// If `ptr` is page-aligned (and outside the segments), the 64 bytes before it are readable,
/// as they are for every large block of ours, live or freed into the cache.
///
/// ```
/// use pitlane_alloc::raw;
///
/// let block = raw::malloc(100_000, 4096);
/// // SAFETY: a live block of ours; the bytes before it are its header.
/// assert!(unsafe { raw::owns_block(block) });
/// // SAFETY: as above, freed once.
/// unsafe { raw::free(block) };
/// ```
#[inline]
pub unsafe fn owns_block(ptr: *mut u8) -> bool {
    if in_segment(ptr) {
        return true;
    }
    if ptr.is_null() || ptr.addr() % 64 != 0 {
        return false;
    }
    // SAFETY: the 64 bytes before `ptr` lie in its own OS page, or the caller vouches for
    // them.
    unsafe { large::sealed(ptr) }
}

/// Allocates `size` bytes aligned to `align` (a power of two) from the calling thread's heap:
/// null if `align` is not a power of two, if `size` rounded up to `align` exceeds
/// `isize::MAX`, or if memory is exhausted. A `size` of 0 gives a distinct minimal block.
///
/// ```
/// let block = pitlane_alloc::raw::malloc(0, 8);
/// assert!(!block.is_null());
/// // SAFETY: a live block of ours.
/// unsafe { pitlane_alloc::raw::free(block) };
/// assert!(pitlane_alloc::raw::malloc(usize::MAX, 8).is_null());
/// assert!(pitlane_alloc::raw::malloc(16, 3).is_null());
/// ```
#[inline]
pub fn malloc(size: usize, align: usize) -> *mut u8 {
    // (With a constant `align`, as the C `malloc`'s 8, the alignment test folds away.)
    if size <= class::SMALL_MAX && align <= 8 && align.is_power_of_two() {
        // The C malloc's path: a size class by table, no `Layout` to check (a size of 0 takes
        // the 16-byte class, so each such block is distinct and 16-aligned).
        // SAFETY: the thread heap is the calling thread's.
        return unsafe { heap::alloc_small(heap::thread_heap(), class::class_of_small(size)) };
    }
    malloc_aligned(size, align)
}

/// The fast path of [`malloc`] alone, for a shim that keeps its own fast path free of
/// calls: a block of `size` bytes (8-aligned, as [`malloc`]'s at alignment 8) from the
/// calling thread's current page of the size's class, or null when serving it needs more
/// (a size above [`SMALL_MAX`](crate::SMALL_MAX), an exhausted page, a thread that has no
/// heap yet). A null says nothing about memory: call [`malloc`] then.
///
/// ```
/// use pitlane_alloc::raw;
///
/// let mut block = raw::malloc_fast(24);
/// if block.is_null() {
///     block = raw::malloc(24, 8);
/// }
/// assert!(!block.is_null());
/// // SAFETY: a live block of ours.
/// unsafe { raw::free(block) };
/// ```
#[inline(always)]
pub fn malloc_fast(size: usize) -> *mut u8 {
    if size > class::SMALL_MAX {
        return ptr::null_mut();
    }
    // SAFETY: the thread heap is the calling thread's.
    unsafe { heap::alloc_fast(heap::thread_heap(), class::class_of_small(size)) }
}

/// [`malloc`] for large sizes, alignments above 8, and alignments that are not powers of
/// two (which `Layout` refuses).
#[inline(never)]
fn malloc_aligned(size: usize, align: usize) -> *mut u8 {
    let Ok(layout) = Layout::from_size_align(size.max(1), align) else {
        return ptr::null_mut();
    };
    // SAFETY: the thread heap is the calling thread's.
    unsafe { crate::alloc_in(heap::thread_heap(), layout, ptr::null_mut(), false) }
}

/// As [`malloc`], with the block's first `size` bytes zeroed.
///
/// ```
/// let block = pitlane_alloc::raw::calloc(64, 8);
/// // SAFETY: 64 bytes of a live block, zeroed.
/// assert!(unsafe { core::slice::from_raw_parts(block, 64) }.iter().all(|&b| b == 0));
/// # unsafe { pitlane_alloc::raw::free(block) };
/// ```
#[inline]
pub fn calloc(size: usize, align: usize) -> *mut u8 {
    // A size of 0 is served as 16 bytes, 16-aligned, as `malloc`'s is.
    let size = if size == 0 { 16 } else { size };
    let Ok(layout) = Layout::from_size_align(size, align) else {
        return ptr::null_mut();
    };
    // SAFETY: as in `malloc`.
    unsafe { crate::alloc_in(heap::thread_heap(), layout, ptr::null_mut(), true) }
}

/// Frees the small block at `ptr` (one for which [`in_segment`] holds).
///
/// # Safety
/// `ptr` is a live block from [`malloc`], [`calloc`] or [`realloc`], in a segment.
///
/// ```
/// let block = pitlane_alloc::raw::malloc(10, 8);
/// assert!(pitlane_alloc::raw::in_segment(block));
/// // SAFETY: a live small block of ours, freed once.
/// unsafe { pitlane_alloc::raw::free_small(block) };
/// ```
#[inline(always)]
pub unsafe fn free_small(ptr: *mut u8) {
    // SAFETY: a live small block; the thread heap is the calling thread's.
    unsafe { heap::free_small(heap::thread_heap(), ptr) }
}

/// [`free_small`] for a shim given pointers by a program that may free a block twice (the C
/// `free`): refuses, doing nothing and returning `false`, a block that is at the head of its
/// page's free list in the calling thread's heap — one the calling thread has just freed and
/// not had handed out since, the double free in a row, which [`free_small`] would link to
/// itself (every later allocation of its class on this thread would return it); and a
/// block of a page that is in the pool (the first free emptied it), which [`free_small`]
/// would push on that page's remote list, to come back as a free block of whichever heap
/// takes the page next, maybe while the same address is live again there; and a block that
/// is the head of the calling thread's batch of remote frees for its page (freed twice in a
/// row by a thread that does not own it). A double free with other frees into the same page
/// in between, or after the page was taken again, is not caught. Returns `true` when the
/// block was freed.
///
/// # Safety
/// `ptr` is a block in a segment ([`in_segment`]) that is live, or that the calling thread
/// freed last among the blocks of its page (into its own page or its batch of remote
/// frees), or whose page is in the pool.
///
/// ```
/// use pitlane_alloc::raw;
///
/// let block = raw::malloc(24, 8);
/// // SAFETY: a live small block; the second call is refused.
/// unsafe {
///     assert!(raw::try_free_small(block));
///     assert!(!raw::try_free_small(block));
/// }
/// ```
#[inline]
pub unsafe fn try_free_small(ptr: *mut u8) -> bool {
    // SAFETY: as promised by the caller; the thread heap is the calling thread's.
    unsafe { heap::free_small_checked(heap::thread_heap(), ptr) }
}

/// The fast path of [`free`] alone, for a shim that keeps its own fast path free of calls:
/// frees `ptr` if it is a small block of a page the calling thread's heap owns and the free
/// needs nothing more (the page was not full, and does not leave its place when it empties),
/// and says whether it did. On `false` nothing was done: call [`free`] (or [`owns`] first,
/// for a pointer that may not be ours). Any pointer outside our segments gives `false`
/// without being read, null included.
///
/// # Safety
/// `ptr` is null, outside our segments, or a live block of this allocator.
///
/// ```
/// use pitlane_alloc::raw;
///
/// let block = raw::malloc(24, 8);
/// // SAFETY: a live block of ours, freed once.
/// if !unsafe { raw::free_fast(block) } {
///     unsafe { raw::free(block) };
/// }
/// ```
#[inline(always)]
pub unsafe fn free_fast(ptr: *mut u8) -> bool {
    // SAFETY: inside a segment, by the caller's contract a live small block; the thread heap
    // is the calling thread's.
    in_segment(ptr) && unsafe { heap::free_fast(heap::thread_heap(), ptr) }
}

/// Frees the block at `ptr`.
///
/// # Safety
/// `ptr` is a live block from [`malloc`], [`calloc`] or [`realloc`] (so [`owns`] holds).
///
/// ```
/// let block = pitlane_alloc::raw::malloc(10, 8);
/// // SAFETY: a live block of ours, freed once.
/// unsafe { pitlane_alloc::raw::free(block) };
/// ```
#[inline]
pub unsafe fn free(ptr: *mut u8) {
    if in_segment(ptr) {
        // SAFETY: a live small block; the thread heap is the calling thread's.
        unsafe { heap::free_small(heap::thread_heap(), ptr) }
    } else {
        // SAFETY: a live block outside the segments is a large one.
        unsafe { large::free(ptr) }
    }
}

/// Registers the allocator's `fork` handlers (`pthread_atfork`) now, if they are not yet;
/// otherwise the first allocation does. For a shim that is the process's `malloc`, to call
/// before the program runs: glibc runs the prepare handlers registered after ours while we
/// hold the allocator's locks (and the parent and child handlers registered after ours
/// before we release them), so a program's handler registered before its first `malloc` and
/// allocating in the `fork` hung there. Registering allocates nothing of ours, and the
/// handlers need nothing initialised.
///
/// ```
/// pitlane_alloc::raw::install_fork_handlers();
/// pitlane_alloc::raw::install_fork_handlers(); // registered once
/// ```
pub fn install_fork_handlers() {
    heap::install_fork_handlers();
}

/// How many bytes the block at `ptr` can hold (at least what was asked for).
///
/// # Safety
/// `ptr` is a live block of this allocator.
///
/// ```
/// let block = pitlane_alloc::raw::malloc(20, 8);
/// // SAFETY: a live block of ours.
/// assert_eq!(unsafe { pitlane_alloc::raw::usable_size(block) }, 24);
/// # unsafe { pitlane_alloc::raw::free(block) };
/// ```
pub unsafe fn usable_size(ptr: *mut u8) -> usize {
    if in_segment(ptr) {
        // SAFETY: a small block's page descriptor is where `page_of` says; its class is set
        // while the page holds blocks.
        let class = unsafe { (*segment::page_of(ptr)).class.load(Ordering::Relaxed) };
        class::size_of_class(class as usize)
    } else {
        // SAFETY: a live large block.
        unsafe { large::usable_size(ptr) }
    }
}

/// Resizes the block at `ptr` to `size` bytes (at least 1), keeping its contents up to the
/// smaller size: in place when the block can hold `size` (and a large block when its mapping
/// can grow), else by allocating with alignment 8, copying and freeing. Null if memory is
/// exhausted or `size` exceeds `isize::MAX`; the block is then left as it was.
///
/// # Safety
/// As [`free`].
///
/// ```
/// let block = pitlane_alloc::raw::malloc(8, 8);
/// // SAFETY: live blocks of ours; the old one is not used after a successful realloc.
/// unsafe {
///     block.write(7);
///     let grown = pitlane_alloc::raw::realloc(block, 1 << 20);
///     assert_eq!(grown.read(), 7);
///     pitlane_alloc::raw::free(grown);
/// }
/// ```
pub unsafe fn realloc(ptr: *mut u8, size: usize) -> *mut u8 {
    let size = size.max(1);
    if size > isize::MAX as usize - 16 {
        return ptr::null_mut();
    }
    // SAFETY: forwarded.
    let usable = unsafe { usable_size(ptr) };
    let small = in_segment(ptr);
    if small {
        // Stay in place while the block holds `size` and is not more than twice too big for
        // it (so that shrinking much does give memory back).
        if size <= usable && (usable <= 64 || size >= usable / 2) {
            return ptr;
        }
    } else if size > class::SMALL_MAX {
        // SAFETY: a live large block, resized to a large size.
        let moved = unsafe { large::realloc(ptr, size) };
        if !moved.is_null() {
            return moved;
        }
    }
    let fresh = malloc(size, 8);
    if fresh.is_null() {
        return fresh;
    }
    // SAFETY: both blocks hold at least the copied length and do not overlap; the old block
    // is freed once, after the copy.
    unsafe {
        ptr::copy_nonoverlapping(ptr, fresh, usable.min(size));
        free(ptr);
    }
    fresh
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_bitmap_covers_the_address_spaces_of_x86_64_and_aarch64_linux() {
        // AArch64 Linux with 48-bit addresses (the usual kernel) maps right under 2^48.
        let top = ptr::without_provenance_mut::<u8>((1 << 48) - SEGMENT_SIZE);
        assert_eq!(REGIONS.len() * 64 * SEGMENT_SIZE, 1 << 48);
        assert!(!in_segment(top));
        // Beyond the bitmap a segment is refused, not recorded nowhere.
        assert!(!note_segment(ptr::without_provenance_mut(1 << 48)));
        assert!(!in_segment(ptr::without_provenance_mut(1 << 48)));
    }
}
