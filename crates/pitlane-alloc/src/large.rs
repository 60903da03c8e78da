//! Large blocks (over 16 KiB, or aligned to more than 16 KiB): each in its own mapping.
//!
//! ```text
//!  mapping (page-aligned)
//!  +---------------------+--------+---------------------------------+
//!  | (align - 64 bytes)  | Header | block ...                       |
//!  +---------------------+--------+---------------------------------+
//!  ^ base                         ^ pointer handed out (aligned to max(64, align))
//! ```
//!
//! The header (64 bytes, right before the block) records the mapping. A free knows a block is
//! large from its `Layout` (the class function says no small class fits), so it never has to
//! look the address up. `realloc` grows a block in place when its mapping has room, else moves
//! it with `mremap` (the kernel moves the page tables; nothing is copied). Freed mappings are
//! kept in a small cache, reused by requests of a similar size and unmapped after the purge
//! delay (see [`PurgePolicy`](crate::PurgePolicy)).

use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::heap::HeapCore;
use crate::lock::SpinLock;
use crate::os::{self, OS_PAGE};
use crate::stats::Counters;

/// Bytes reserved before each large block for its header.
const HEADER: usize = 64;

/// What a large block's mapping records, right before the block.
#[repr(C)]
pub(crate) struct Header {
    /// The start of the mapping.
    base: *mut u8,
    /// The length of the mapping.
    len: usize,
    /// The owned heap the block belongs to, or null for the global heap.
    owner: *mut HeapCore,
    /// Neighbours in the owner's list of large blocks.
    prev: *mut Header,
    next: *mut Header,
}

const _: () = assert!(core::mem::size_of::<Header>() <= HEADER);

/// The most bytes of freed mappings kept (see `PurgePolicy::large_cache_bytes`).
pub(crate) static LARGE_CACHE_BYTES: AtomicUsize =
    AtomicUsize::new(crate::PurgePolicy::DEFAULT_LARGE_CACHE_BYTES);

/// Entries in the cache of freed mappings.
const CACHE_SLOTS: usize = 32;

#[derive(Clone, Copy)]
struct Cached {
    base: *mut u8,
    len: usize,
    freed_at: u64,
}

struct Cache {
    slots: core::cell::UnsafeCell<[Cached; CACHE_SLOTS]>,
}
// SAFETY: only touched under CACHE_LOCK.
unsafe impl Sync for Cache {}

static CACHE: Cache = Cache {
    slots: core::cell::UnsafeCell::new(
        [Cached {
            base: ptr::null_mut(),
            len: 0,
            freed_at: 0,
        }; CACHE_SLOTS],
    ),
};
/// Guards [`CACHE`]; taken around `fork` too.
pub(crate) static CACHE_LOCK: SpinLock = SpinLock::new();

/// Where the block starts in a mapping whose base is page-aligned, for `align <= OS_PAGE`.
#[inline]
fn offset(align: usize) -> usize {
    align.max(HEADER)
}

/// The header of the large block at `ptr`.
#[inline]
fn header_of(ptr: *mut u8) -> *mut Header {
    ptr.wrapping_sub(HEADER).cast()
}

/// Allocates a large block of `size` bytes aligned to `align`, for `owner` (null: the global
/// heap). Null when the OS refuses or the size cannot be mapped. Zeroed if `zeroed`.
pub(crate) fn alloc(size: usize, align: usize, owner: *mut HeapCore, zeroed: bool) -> *mut u8 {
    let (base, len, ptr) = if align <= OS_PAGE {
        let off = offset(align);
        let Some(len) = mapping_len(off, size) else {
            return ptr::null_mut();
        };
        let (base, len, fresh) = match cache_take(len) {
            Some((base, cached_len)) => (base, cached_len, false),
            None => match os::map(len) {
                Some(base) => {
                    Counters::get().mapped.fetch_add(len, Ordering::Relaxed);
                    (base.as_ptr(), len, true)
                }
                None => return ptr::null_mut(),
            },
        };
        // SAFETY: `off + size <= len`.
        let ptr = unsafe { base.add(off) };
        if zeroed && !fresh {
            // SAFETY: the block lies inside the mapping.
            unsafe { ptr.write_bytes(0, size) };
        }
        (base, len, ptr)
    } else {
        // The block starts `align` bytes into a mapping aligned to `align`.
        let Some(len) = mapping_len(align, size) else {
            return ptr::null_mut();
        };
        let Some(base) = os::map_aligned(len, align, false) else {
            return ptr::null_mut();
        };
        Counters::get().mapped.fetch_add(len, Ordering::Relaxed);
        // SAFETY: `align + size <= len`.
        (base.as_ptr(), len, unsafe { base.as_ptr().add(align) })
    };
    let header = header_of(ptr);
    // SAFETY: the header's 64 bytes lie inside the mapping, before the block.
    unsafe {
        header.write(Header {
            base,
            len,
            owner,
            prev: ptr::null_mut(),
            next: ptr::null_mut(),
        });
        link(header);
    }
    Counters::get()
        .large_in_use
        .fetch_add(len, Ordering::Relaxed);
    ptr
}

/// The mapping length for a block of `size` bytes starting `off` bytes in: rounded up to whole
/// pages; `None` if that overflows `isize`.
fn mapping_len(off: usize, size: usize) -> Option<usize> {
    let len = off.checked_add(size)?.checked_next_multiple_of(OS_PAGE)?;
    (len <= isize::MAX as usize).then_some(len)
}

/// Frees the large block at `ptr`.
///
/// # Safety
/// `ptr` is a live large block of this allocator.
pub(crate) unsafe fn free(ptr: *mut u8) {
    let header = header_of(ptr);
    // SAFETY: a live large block has its header before it.
    let (base, len, aligned) = unsafe {
        unlink(header);
        (
            (*header).base,
            (*header).len,
            ptr.addr() - (*header).base.addr() <= OS_PAGE,
        )
    };
    Counters::get()
        .large_in_use
        .fetch_sub(len, Ordering::Relaxed);
    if aligned {
        cache_put(base, len);
    } else {
        Counters::get().mapped.fetch_sub(len, Ordering::Relaxed);
        os::unmap(base, len);
    }
}

/// Resizes the large block at `ptr` to `new_size` (still large): in place if its mapping has
/// room (giving back a tail of a megabyte or more when it shrinks), else by `mremap`. Null if
/// it cannot (the caller then allocates, copies and frees).
///
/// # Safety
/// `ptr` is a live large block of this allocator, and `new_size` is a large size.
pub(crate) unsafe fn realloc(ptr: *mut u8, new_size: usize) -> *mut u8 {
    let header = header_of(ptr);
    // SAFETY: a live large block has its header before it.
    let (base, len) = unsafe { ((*header).base, (*header).len) };
    let off = ptr.addr() - base.addr();
    let Some(need) = mapping_len(off, new_size) else {
        return ptr::null_mut();
    };
    let counters = Counters::get();
    if need <= len {
        if len - need >= 1 << 20 {
            // SAFETY: the tail past `need` holds nothing the block still uses.
            os::unmap(unsafe { base.add(need) }, len - need);
            // SAFETY: the header is ours.
            unsafe { (*header).len = need };
            counters.mapped.fetch_sub(len - need, Ordering::Relaxed);
            counters
                .large_in_use
                .fetch_sub(len - need, Ordering::Relaxed);
        }
        return ptr;
    }
    if off > OS_PAGE {
        // An over-aligned block: mremap would not keep the alignment.
        return ptr::null_mut();
    }
    // SAFETY: the block's list neighbours point at its header, which is about to move.
    unsafe { unlink(header) };
    let Some(moved) = os::remap(base, len, need) else {
        // SAFETY: the header has not moved.
        unsafe { link(header) };
        return ptr::null_mut();
    };
    counters.mapped.fetch_add(need - len, Ordering::Relaxed);
    counters
        .large_in_use
        .fetch_add(need - len, Ordering::Relaxed);
    // SAFETY: the mapping moved whole: the block and its header are at the same offsets.
    unsafe {
        let ptr = moved.as_ptr().add(off);
        let header = header_of(ptr);
        (*header).base = moved.as_ptr();
        (*header).len = need;
        link(header);
        ptr
    }
}

/// Frees every large block of an owned heap.
///
/// # Safety
/// The caller holds `owner`, and none of its large blocks is used again.
pub(crate) unsafe fn free_all(owner: &HeapCore) {
    loop {
        let header = owner.large.get();
        if header.is_null() {
            break;
        }
        // SAFETY: a live block of the owner: its pointer is `HEADER` bytes after its header.
        unsafe { free(header.cast::<u8>().add(HEADER)) };
    }
}

/// Adds a block to its owner's list (owned heaps only).
///
/// # Safety
/// `header` is a valid header; the caller holds its owner.
unsafe fn link(header: *mut Header) {
    // SAFETY: as promised.
    unsafe {
        let owner = (*header).owner;
        if owner.is_null() {
            return;
        }
        let head = (*owner).large.get();
        (*header).prev = ptr::null_mut();
        (*header).next = head;
        if !head.is_null() {
            (*head).prev = header;
        }
        (*owner).large.set(header);
    }
}

/// Takes a block out of its owner's list (owned heaps only).
///
/// # Safety
/// As [`link`], and the block is in the list.
unsafe fn unlink(header: *mut Header) {
    // SAFETY: as promised.
    unsafe {
        let owner = (*header).owner;
        if owner.is_null() {
            return;
        }
        let (prev, next) = ((*header).prev, (*header).next);
        if !next.is_null() {
            (*next).prev = prev;
        }
        if prev.is_null() {
            (*owner).large.set(next);
        } else {
            (*prev).next = next;
        }
    }
}

/// A cached mapping of at least `len` bytes and at most twice that, the smallest such.
fn cache_take(len: usize) -> Option<(*mut u8, usize)> {
    let _guard = CACHE_LOCK.lock();
    // SAFETY: under the lock.
    let slots = unsafe { &mut *CACHE.slots.get() };
    let mut best: Option<usize> = None;
    for (i, slot) in slots.iter().enumerate() {
        if !slot.base.is_null()
            && slot.len >= len
            && slot.len / 2 <= len
            && best.is_none_or(|b| slot.len < slots[b].len)
        {
            best = Some(i);
        }
    }
    let i = best?;
    let taken = slots[i];
    slots[i].base = ptr::null_mut();
    Counters::get()
        .large_cached
        .fetch_sub(taken.len, Ordering::Relaxed);
    Some((taken.base, taken.len))
}

/// Keeps a freed mapping for reuse, or unmaps it if it does not fit the cache's budget.
fn cache_put(base: *mut u8, len: usize) {
    let counters = Counters::get();
    let budget = LARGE_CACHE_BYTES.load(Ordering::Relaxed);
    if len <= budget {
        let now = os::now_ms();
        let guard = CACHE_LOCK.lock();
        // SAFETY: under the lock.
        let slots = unsafe { &mut *CACHE.slots.get() };
        // Make room: evict the oldest until the budget and a slot allow it.
        let mut evicted: [Cached; CACHE_SLOTS] = [Cached {
            base: ptr::null_mut(),
            len: 0,
            freed_at: 0,
        }; CACHE_SLOTS];
        let mut evictions = 0;
        loop {
            let cached = counters.large_cached.load(Ordering::Relaxed);
            let free_slot = slots.iter().position(|s| s.base.is_null());
            if cached + len <= budget && free_slot.is_some() {
                let slot = free_slot.unwrap_or(0);
                slots[slot] = Cached {
                    base,
                    len,
                    freed_at: now,
                };
                counters.large_cached.fetch_add(len, Ordering::Relaxed);
                break;
            }
            let oldest = slots
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.base.is_null())
                .min_by_key(|(_, s)| s.freed_at)
                .map(|(i, _)| i);
            let Some(oldest) = oldest else {
                break;
            };
            evicted[evictions] = slots[oldest];
            evictions += 1;
            counters
                .large_cached
                .fetch_sub(slots[oldest].len, Ordering::Relaxed);
            slots[oldest].base = ptr::null_mut();
        }
        drop(guard);
        for e in &evicted[..evictions] {
            counters.mapped.fetch_sub(e.len, Ordering::Relaxed);
            os::unmap(e.base, e.len);
        }
        crate::pool::maybe_sweep(now);
        return;
    }
    counters.mapped.fetch_sub(len, Ordering::Relaxed);
    os::unmap(base, len);
}

/// Unmaps cached mappings older than `delay` ms (all if `force`).
pub(crate) fn sweep(now: u64, delay: u64, force: bool) {
    let counters = Counters::get();
    let mut evicted: [Cached; CACHE_SLOTS] = [Cached {
        base: ptr::null_mut(),
        len: 0,
        freed_at: 0,
    }; CACHE_SLOTS];
    let mut evictions = 0;
    {
        let _guard = CACHE_LOCK.lock();
        // SAFETY: under the lock.
        let slots = unsafe { &mut *CACHE.slots.get() };
        for slot in slots.iter_mut() {
            if !slot.base.is_null() && (force || now.saturating_sub(slot.freed_at) >= delay) {
                evicted[evictions] = *slot;
                evictions += 1;
                counters.large_cached.fetch_sub(slot.len, Ordering::Relaxed);
                slot.base = ptr::null_mut();
            }
        }
    }
    for e in &evicted[..evictions] {
        counters.mapped.fetch_sub(e.len, Ordering::Relaxed);
        counters.purges.fetch_add(1, Ordering::Relaxed);
        os::unmap(e.base, e.len);
    }
}
