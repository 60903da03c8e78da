//! Segments and pages: where small blocks live, and how an address finds its page.
//!
//! A *segment* is a 4 MiB run of address space aligned to 4 MiB. Its first 64 KiB page holds
//! the segment header — an array of 64 page descriptors — and the other 63 pages of 64 KiB each
//! hold blocks of one size class each. Segments are mapped on demand, numbered in the order
//! they are mapped, recorded in a fixed table ([`MAX_SEGMENTS`] entries) and never unmapped:
//! a free page's memory goes back to the OS by purging (see the `pool` module), not by
//! unmapping, so that a stale read of a page descriptor (a lock-free pop that lost its race)
//! always reads mapped memory, and the header (page 0) is never purged.
//!
//! ```text
//!  segment (4 MiB, 4 MiB-aligned)
//!  +-----------+-----------+-----------+-- ... --+-----------+
//!  | header    | page 1    | page 2    |         | page 63   |   pages: 64 KiB each
//!  | Page[64]  | 24 B ×2730| 4 KiB ×16 |         |           |
//!  +-----------+-----------+-----------+-- ... --+-----------+
//!  ^ ptr & !(4 MiB - 1)            (ptr >> 16) & 63 = page number
//! ```
//!
//! A pointer to a small block finds its page with two masks, an index and a 64-byte
//! permutation table: no header before the block. Page `i`'s descriptor is entry
//! `DESCRIPTOR_ENTRIES[i]` of the header, not entry `i`, so that the pages one thread takes
//! one after another do not have descriptors one after another (see [`descriptor_entry`]).

use core::cell::Cell;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::heap::HeapCore;
use crate::os;
use crate::stats::Counters;

/// Bytes in a segment (and its alignment).
pub(crate) const SEGMENT_SIZE: usize = 1 << 22;
/// Bytes in a page: the unit in which heaps own memory, and the pool shares and purges it.
///
/// ```
/// assert_eq!(pitlane_alloc::PAGE_SIZE, 64 * 1024);
/// ```
pub const PAGE_SIZE: usize = 1 << 16;
/// Pages in a segment, the header page included.
pub(crate) const PAGES_PER_SEGMENT: usize = SEGMENT_SIZE / PAGE_SIZE;
/// The most segments: page numbers (`segment * 64 + page`) must fit the 21 index bits of the
/// pool's tagged words, whose all-ones value means "none". 32,767 segments is 128 GiB of small
/// blocks; past that, small requests fail (null), as they would when the OS refuses memory.
pub(crate) const MAX_SEGMENTS: usize = (1 << 15) - 1;

/// A free block: its first word links it to the next free block of the same list.
#[repr(C)]
pub(crate) struct Block {
    pub(crate) next: *mut Block,
}

/// Where a page is, as its owner heap sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ListState {
    /// In no heap list (in the pool, or never used).
    None,
    /// In its heap's list of pages of its class that may have free blocks.
    Partial,
    /// In its heap's list of full pages (its `FULL` flag is or was set, see `heap`).
    Full,
}

/// The descriptor of one 64 KiB page, in its segment's header.
///
/// The `Cell` fields belong to the owner heap: only the thread holding that heap reads or
/// writes them (a heap is held by one thread at a time, see `heap`). The atomics are shared.
///
/// Two cache lines: the first holds what the owner's fast paths write (`free`, `used`) and
/// what only the owner or the pool reads; the second what other threads touch on a remote
/// free (`owner`, read; `remote`, CAS). A remote free therefore never takes the line that
/// the owner's allocations write, and the owner's allocations never take the line that
/// remote frees write (it reads `remote` only on its slow path).
#[repr(C, align(128))]
pub(crate) struct Page {
    /// Blocks ready to hand out (owner only).
    pub(crate) free: Cell<*mut Block>,
    /// Blocks handed out and not yet freed back into `free` (written by the owner only, read
    /// by statistics from any thread).
    pub(crate) used: AtomicU32,
    /// Blocks the page holds at its class.
    pub(crate) capacity: Cell<u32>,
    /// Blocks carved so far: the rest of the page has never been touched.
    pub(crate) reserved: Cell<u32>,
    /// The class of the page's blocks (read by statistics too, hence atomic).
    pub(crate) class: AtomicU32,
    /// Neighbours in the owner's list.
    pub(crate) next: Cell<*mut Page>,
    pub(crate) prev: Cell<*mut Page>,
    /// The first byte of the page (set when the segment is made, never changed).
    pub(crate) start: Cell<*mut u8>,
    /// This page's global number.
    pub(crate) number: Cell<u32>,
    /// The link of the pool's page stacks: the global number of the next page.
    pub(crate) pool_next: AtomicU32,
    /// Where the page is in its owner's lists.
    pub(crate) list: Cell<ListState>,
    /// The heap that owns the page; null while it is in the pool. (Second cache line.)
    pub(crate) owner: AtomicPtr<HeapCore>,
    /// Blocks freed by threads other than the owner's, and in the low bit the `FULL` flag.
    pub(crate) remote: AtomicPtr<Block>,
    /// How many blocks remote frees pushed on `remote` that the owner has not yet taken off
    /// `used` (added after each push; see `heap::collect`).
    pub(crate) remote_count: AtomicU32,
    /// The link of the owner's list of pages that came back from full (see `heap`).
    pub(crate) delayed_next: AtomicPtr<Page>,
    /// When the page entered the dirty pool (coarse milliseconds).
    pub(crate) released_at: AtomicU64,
}

const _: () = assert!(core::mem::offset_of!(Page, owner) == 64);
const _: () = assert!(core::mem::size_of::<Page>() == 128);

// SAFETY: the `Cell` fields are only touched by the thread that holds the owner heap (or by
// the thread that has the page exclusively while it is outside every heap and pool); the
// shared fields are atomics.
unsafe impl Sync for Page {}

impl Page {
    /// A descriptor that belongs to nobody and has no blocks: the static empty page that
    /// stands in every class of a heap with no page yet, so the allocation fast path needs no
    /// initialisation check.
    pub(crate) const fn empty() -> Self {
        Self {
            free: Cell::new(ptr::null_mut()),
            used: AtomicU32::new(0),
            capacity: Cell::new(0),
            reserved: Cell::new(0),
            class: AtomicU32::new(0),
            list: Cell::new(ListState::None),
            next: Cell::new(ptr::null_mut()),
            prev: Cell::new(ptr::null_mut()),
            start: Cell::new(ptr::null_mut()),
            owner: AtomicPtr::new(ptr::null_mut()),
            remote: AtomicPtr::new(ptr::null_mut()),
            remote_count: AtomicU32::new(0),
            delayed_next: AtomicPtr::new(ptr::null_mut()),
            pool_next: AtomicU32::new(0),
            released_at: AtomicU64::new(0),
            number: Cell::new(0),
        }
    }
}

/// A segment's header: the descriptors of its pages (index 0 describes the header page
/// itself and is never used).
#[repr(C)]
pub(crate) struct Segment {
    pub(crate) pages: [Page; PAGES_PER_SEGMENT],
}

const _: () = assert!(core::mem::size_of::<Segment>() <= PAGE_SIZE);

/// The segments mapped so far, by number.
static SEGMENTS: [AtomicPtr<Segment>; MAX_SEGMENTS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_SEGMENTS];
/// How many entries of [`SEGMENTS`] are set (each set before the count covers it).
static SEGMENT_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Which entry of the segment header describes each page of the segment: a fixed
/// permutation of 0..64 that keeps the header page's own entry at 0 (see
/// [`descriptor_entry`]; the tests below check the properties it was chosen for).
const DESCRIPTOR_ENTRIES: [u8; PAGES_PER_SEGMENT] = [
    0, 33, 19, 48, 39, 42, 2, 22, 62, 53, 13, 10, 27, 9, 60, 25, 46, 7, 24, 3, 14, 36, 57, 12, 52,
    21, 5, 34, 54, 8, 26, 44, 30, 11, 4, 61, 35, 6, 43, 49, 17, 32, 16, 50, 38, 63, 20, 45, 40, 56,
    15, 51, 47, 41, 18, 37, 29, 55, 31, 59, 23, 1, 58, 28,
];

/// The entry of the segment header that describes page `index` of the segment.
///
/// Why not entry `index`: heaps take fresh pages one after another, so one thread's pages
/// (one per size class) tend to be neighbours, or every other page when two threads take
/// them in turn, and a `Vec` that grows visits them in order, loading each descriptor's
/// `free` from the same instruction. With descriptors in page order those loads were a run
/// at a constant stride of 128 or 256 bytes, which the processor's prefetchers continue
/// past the thread's own pages into the descriptors of the next ones, another thread's,
/// whose owner writes them on every allocation and free: each prefetch took the line away
/// from its owner. On the 2-core Intel Xeon of these sessions, two threads growing `Vec`s
/// ran 20–70% slower than one alone whenever their pages were neighbours
/// (`docs/notes/alloc-bench.md`, fourteenth session). A multiplicative scramble (`index × 37
/// mod 64`) fixed neighbouring runs but not every-other-page ones (it maps any arithmetic
/// progression to another one); this table is irregular: no three pages spaced 1 to 4 apart
/// have descriptors at one stride of 2 KiB or less, and neighbouring pages' descriptors are
/// at least three entries apart. It costs the free path one load from a 64-byte table.
#[inline(always)]
const fn descriptor_entry(index: usize) -> usize {
    DESCRIPTOR_ENTRIES[index & (PAGES_PER_SEGMENT - 1)] as usize
}

/// The descriptor of the page holding `block`, a pointer into a small block.
///
/// # Safety
/// `block` points into a page of a segment (a small block this allocator handed out).
#[inline(always)]
pub(crate) unsafe fn page_of(block: *mut u8) -> *mut Page {
    let segment = block
        .map_addr(|a| a & !(SEGMENT_SIZE - 1))
        .cast::<Segment>();
    let index = (block.addr() >> 16) & (PAGES_PER_SEGMENT - 1);
    // SAFETY: the segment header lies at the start of the segment, and `index < 64`.
    unsafe {
        (&raw mut (*segment).pages)
            .cast::<Page>()
            .add(descriptor_entry(index))
    }
}

/// The descriptor of page number `number` (segment * 64 + page), which must have been handed
/// out before (so its segment is recorded).
#[inline]
pub(crate) fn page_by_number(number: u32) -> *mut Page {
    let segment = SEGMENTS[number as usize / PAGES_PER_SEGMENT].load(Ordering::Acquire);
    debug_assert!(!segment.is_null());
    // SAFETY: the segment is recorded and never unmapped; the page index is below 64.
    unsafe {
        (&raw mut (*segment).pages)
            .cast::<Page>()
            .add(descriptor_entry(number as usize % PAGES_PER_SEGMENT))
    }
}

/// Visits every page descriptor of every segment mapped so far (for statistics and sweeps).
pub(crate) fn for_each_page(mut visit: impl FnMut(&Page)) {
    let count = SEGMENT_COUNT.load(Ordering::Acquire);
    for slot in &SEGMENTS[..count] {
        let segment = slot.load(Ordering::Acquire);
        if segment.is_null() {
            continue;
        }
        // SAFETY: recorded segments are mapped for the life of the process.
        let segment = unsafe { &*segment };
        segment.pages[1..].iter().for_each(&mut visit);
    }
}

/// How many segments are mapped.
pub(crate) fn segment_count() -> usize {
    SEGMENT_COUNT.load(Ordering::Acquire)
}

/// The segment that fresh pages are carved from, and the next fresh page in it; guarded by
/// [`FRESH_LOCK`].
struct Fresh {
    segment: Cell<*mut Segment>,
    next_page: Cell<usize>,
}

// SAFETY: only touched under FRESH_LOCK.
unsafe impl Sync for Fresh {}

static FRESH: Fresh = Fresh {
    segment: Cell::new(ptr::null_mut()),
    next_page: Cell::new(PAGES_PER_SEGMENT),
};

/// Guards [`FRESH`] and the mapping of new segments; taken around `fork` too.
pub(crate) static FRESH_LOCK: crate::lock::SpinLock = crate::lock::SpinLock::new();

/// A never-used page, from the current segment or a newly mapped one; `None` when the OS
/// refuses memory or [`MAX_SEGMENTS`] are mapped.
#[cold]
pub(crate) fn fresh_page() -> Option<NonNull<Page>> {
    let _guard = FRESH_LOCK.lock();
    if FRESH.next_page.get() >= PAGES_PER_SEGMENT {
        let segment = new_segment()?;
        FRESH.segment.set(segment);
        FRESH.next_page.set(1);
    }
    let index = FRESH.next_page.get();
    FRESH.next_page.set(index + 1);
    // SAFETY: the current segment is mapped and `index < 64`.
    NonNull::new(unsafe {
        (&raw mut (*FRESH.segment.get()).pages)
            .cast::<Page>()
            .add(descriptor_entry(index))
    })
}

/// Maps and records a segment, its descriptors initialised. Under [`FRESH_LOCK`].
fn new_segment() -> Option<*mut Segment> {
    let number = SEGMENT_COUNT.load(Ordering::Relaxed);
    if number >= MAX_SEGMENTS {
        return None;
    }
    let base = os::map_aligned(SEGMENT_SIZE, SEGMENT_SIZE, true)?.as_ptr();
    if !crate::raw::note_segment(base) {
        // Beyond the addresses `raw::in_segment` knows: its blocks would be taken for large
        // ones by a free given only their pointer.
        os::unmap(base, SEGMENT_SIZE);
        return None;
    }
    Counters::get()
        .mapped
        .fetch_add(SEGMENT_SIZE, Ordering::Relaxed);
    let segment = base.cast::<Segment>();
    for index in 0..PAGES_PER_SEGMENT {
        // SAFETY: fresh zeroed memory of the header page, large enough for the header
        // (checked at compile time); nobody else can see it yet.
        unsafe {
            let page = (&raw mut (*segment).pages)
                .cast::<Page>()
                .add(descriptor_entry(index));
            page.write(Page::empty());
            (*page).start.set(base.add(index * PAGE_SIZE));
            (*page)
                .number
                .set((number * PAGES_PER_SEGMENT + index) as u32);
        }
    }
    SEGMENTS[number].store(segment, Ordering::Release);
    SEGMENT_COUNT.store(number + 1, Ordering::Release);
    Some(segment)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_entries_are_a_permutation_that_keeps_the_header_at_zero() {
        let mut seen = [false; PAGES_PER_SEGMENT];
        for index in 0..PAGES_PER_SEGMENT {
            let entry = descriptor_entry(index);
            assert!(entry < PAGES_PER_SEGMENT);
            assert!(!seen[entry], "entry {entry} taken twice");
            seen[entry] = true;
        }
        assert_eq!(
            descriptor_entry(0),
            0,
            "for_each_page skips entry 0 as the header's"
        );
    }

    #[test]
    fn pages_spaced_evenly_never_have_descriptors_at_one_short_stride() {
        let entry = |i: usize| descriptor_entry(i) as isize;
        let size = core::mem::size_of::<Page>() as isize;
        for step in 1..=4 {
            for first in 1..PAGES_PER_SEGMENT - 2 * step {
                let a = entry(first + step) - entry(first);
                let b = entry(first + 2 * step) - entry(first + step);
                assert!(
                    a != b || (a * size).abs() > 2048,
                    "pages {first}, +{step}, +{}: one stride of {} bytes",
                    2 * step,
                    a * size
                );
            }
        }
        for page in 1..PAGES_PER_SEGMENT - 1 {
            assert!(
                (entry(page + 1) - entry(page)).abs() >= 3,
                "pages {page} and {}",
                page + 1
            );
        }
    }
}
