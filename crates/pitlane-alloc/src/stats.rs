//! Statistics: what the allocator holds, as `stats()` reports it.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::class::{CLASS_SIZES, CLASSES};
use crate::segment::{self, PAGE_SIZE, Page, SEGMENT_SIZE};

/// The process-wide counters the slow paths keep (the fast paths count nothing: bytes in use
/// are read from the page descriptors when asked). Every large allocation and free updates
/// them from whichever thread makes it, so they have two cache lines to themselves, apart
/// from the locks and the read-mostly statics the linker would put beside them.
#[repr(align(128))]
pub(crate) struct Counters {
    /// Bytes mapped from the OS and not unmapped: segments, large blocks, cached large blocks.
    pub(crate) mapped: AtomicUsize,
    /// Bytes of large blocks handed out and not freed (whole mappings, header included).
    pub(crate) large_in_use: AtomicUsize,
    /// Bytes of freed large mappings kept for reuse.
    pub(crate) large_cached: AtomicUsize,
    /// Bytes of free pages purged and not reused since.
    pub(crate) purged: AtomicUsize,
    /// Pages purged and large mappings unmapped by the purge policy, ever.
    pub(crate) purges: AtomicU64,
}

static COUNTERS: Counters = Counters {
    mapped: AtomicUsize::new(0),
    large_in_use: AtomicUsize::new(0),
    large_cached: AtomicUsize::new(0),
    purged: AtomicUsize::new(0),
    purges: AtomicU64::new(0),
};

impl Counters {
    #[inline]
    pub(crate) fn get() -> &'static Counters {
        &COUNTERS
    }
}

/// A snapshot of the allocator's memory, process-wide.
///
/// Taken without stopping other threads, so each figure is read at a slightly different
/// moment; exact when no other thread allocates meanwhile. `in_use` never exceeds `mapped`
/// (capped, should a racing unmap fall between the two reads). Blocks freed by a thread other
/// than the one whose heap owns their page count as in use until that heap collects them (its
/// next allocation that finds its current page empty), or until they leave their page with no
/// block in use, which then goes back to the pool (at `collect()` on the heap's thread, its
/// exit, or a sweep of an exited thread's heap or of the heap that serves threads in their
/// exit).
///
/// ```
/// let stats = pitlane_alloc::stats();
/// assert!(stats.in_use <= stats.mapped);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Bytes of blocks handed out and not freed: small blocks at their class size, large
    /// blocks at the size of their mapping.
    pub in_use: usize,
    /// Bytes of address space mapped from the OS (segments and large mappings, cached ones
    /// included). Purged pages stay mapped but hold no memory.
    pub mapped: usize,
    /// Bytes of free pages purged (given back with `madvise`) and not reused since.
    pub purged: usize,
    /// Pages purged and large mappings unmapped by the purge policy since the process began.
    pub purges: u64,
    /// Bytes of freed large mappings kept for reuse (part of `mapped`).
    pub large_cached: usize,
    /// 4 MiB segments mapped for small blocks.
    pub segments: usize,
    /// Pages (64 KiB) that heaps own.
    pub pages_owned: usize,
    /// Empty pages in the pool, ready for any heap: not yet purged, and purged.
    pub free_pages: (usize, usize),
}

/// One size class in [`class_stats`].
///
/// ```
/// let classes = pitlane_alloc::class_stats();
/// assert_eq!(classes[0].block_size, 8);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassStats {
    /// The size of the class's blocks.
    pub block_size: usize,
    /// Pages holding blocks of this class.
    pub pages: usize,
    /// Blocks handed out and not freed.
    pub blocks_in_use: usize,
    /// `blocks_in_use * block_size`.
    pub bytes_in_use: usize,
}

/// What the allocator holds now, process-wide: bytes in use, mapped, purged (see [`Stats`]).
/// Walks the page descriptors (a few microseconds per GiB of small blocks).
///
/// ```
/// use pitlane_alloc::PitlaneAlloc;
/// use allocator_api2::boxed::Box;
///
/// let before = pitlane_alloc::stats().in_use;
/// let block = Box::new_in([0u8; 100_000], PitlaneAlloc::new());
/// assert!(pitlane_alloc::stats().in_use >= before + 100_000);
/// drop(block);
/// ```
pub fn stats() -> Stats {
    let c = Counters::get();
    let mut small = 0;
    let mut pages_owned = 0;
    segment::for_each_page(|page| {
        if let Some((class, used)) = owned_page(page) {
            pages_owned += 1;
            small += used * CLASS_SIZES[class] as usize;
        }
    });
    let segments = segment::segment_count();
    let in_use = small + c.large_in_use.load(Ordering::Relaxed);
    let mapped = c.mapped.load(Ordering::Relaxed);
    Stats {
        // What is in use is always mapped; figures read at different moments while other
        // threads free and unmap could say otherwise, so the snapshot keeps that invariant.
        in_use: in_use.min(mapped),
        mapped,
        purged: c.purged.load(Ordering::Relaxed),
        purges: c.purges.load(Ordering::Relaxed),
        large_cached: c.large_cached.load(Ordering::Relaxed),
        segments,
        pages_owned,
        free_pages: crate::pool::pool_pages(),
    }
}

/// Per size class: pages and blocks in use, smallest class first (one entry per class).
///
/// ```
/// use pitlane_alloc::PitlaneAlloc;
/// use allocator_api2::boxed::Box;
///
/// let block = Box::new_in(7u64, PitlaneAlloc::new());
/// let classes = pitlane_alloc::class_stats();
/// let eight = classes.iter().find(|c| c.block_size == 8).unwrap();
/// assert!(eight.blocks_in_use >= 1);
/// drop(block);
/// ```
pub fn class_stats() -> Vec<ClassStats> {
    let mut classes: Vec<ClassStats> = (0..CLASSES)
        .map(|c| ClassStats {
            block_size: CLASS_SIZES[c] as usize,
            ..ClassStats::default()
        })
        .collect();
    segment::for_each_page(|page| {
        if let Some((class, used)) = owned_page(page) {
            let entry = &mut classes[class];
            entry.pages += 1;
            entry.blocks_in_use += used;
        }
    });
    for entry in &mut classes {
        entry.bytes_in_use = entry.blocks_in_use * entry.block_size;
    }
    classes
}

/// The class of `page` and its blocks in use, if a heap owns it, read so that the two belong
/// to one life of the page and the count is at most what the page holds.
///
/// Read naively (owner, class, used), a page released and taken again for another class
/// between the loads of its class and its count (the reading thread descheduled between
/// them) paired the old class with the new class's count: thousands of 8-byte blocks
/// counted at 16 KiB each, far above what is mapped. So the owner and the class are read
/// again after the count, and the page is read again if either changed (then skipped after a
/// few tries). And the count is capped at the page's capacity: a block that a remote free
/// pushed can be collected and handed out again before that free adds it to the page's
/// remote count, and is counted twice until then (`tests/stress_stats.rs` saw 106 blocks of
/// 12 KiB in 21 pages of 5).
fn owned_page(page: &Page) -> Option<(usize, usize)> {
    for _ in 0..4 {
        let owner = page.owner.load(Ordering::Acquire);
        if owner.is_null() {
            return None;
        }
        // Acquire: the loads after each stay after it.
        let class = page.class.load(Ordering::Acquire) as usize;
        let used = page.used.load(Ordering::Acquire) as usize;
        if page.class.load(Ordering::Relaxed) as usize == class
            && page.owner.load(Ordering::Relaxed) == owner
        {
            let capacity = PAGE_SIZE / CLASS_SIZES[class] as usize;
            return Some((class, used.min(capacity)));
        }
    }
    None
}

const _: () = assert!(SEGMENT_SIZE % PAGE_SIZE == 0);
