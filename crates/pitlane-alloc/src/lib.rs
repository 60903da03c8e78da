//! pitlane-alloc: a scalable general-purpose allocator for Rust — usable as the
//! `#[global_allocator]` on stable Rust, and as an [`allocator_api2`] [`Allocator`].
//!
//! ```
//! use pitlane_alloc::PitlaneAlloc;
//!
//! #[global_allocator]
//! static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();
//!
//! let v: Vec<u64> = (0..1000).collect();
//! assert_eq!(v.iter().sum::<u64>(), 499_500);
//! ```
//!
//! Three things are offered: [`PitlaneAlloc`], a zero-sized handle to the process-wide heap
//! (`GlobalAlloc` and `Allocator`); [`Heap`], an owned heap that frees everything it handed out
//! when dropped (`&Heap: Allocator`); and [`stats`] / [`class_stats`] / [`PurgePolicy`] /
//! [`collect`] to see and steer what the allocator holds.
//!
//! # The layers: heap → page → block
//!
//! ```text
//!   thread A            thread B                       (thread-local pointer, no destructor)
//!      |                   |
//!   [heap A]            [heap B]      heaps: per class a list of pages, the head "current";
//!    | | |               | | |               a list of full pages; a `delayed` list
//!    v v v               v v v
//!   pages (64 KiB, one size class each, inside 4 MiB-aligned segments)
//!    +------------------------------------------+
//!    | free ->[blk]->[blk]->...   (owner only)   |   the owner allocates and frees here
//!    | remote ->[blk]->...        (atomic CAS)   |   other threads free here
//!    | untouched tail (carved 4 KiB at a time)   |
//!    +------------------------------------------+
//!            ^ empty pages go to / come from
//!   pool: Bagpipe<PageStack> dirty, Bagpipe<PageStack> clean (purged), then fresh segments
//!
//!   large blocks (> 16 KiB): one mapping each, 64-byte header before the block; a small
//!   cache of freed mappings; realloc by mremap
//! ```
//!
//! - **Blocks** of a size class (40 classes, 8 B to 16 KiB, see the `class` module) are
//!   carved from **pages** of 64 KiB. Each page has one owner heap, a `free` list only the
//!   owner touches, and an atomic `remote` list that every other thread pushes to.
//! - A **heap** holds pages per class. Each thread gets one on its first allocation; at thread
//!   exit a `pthread` key destructor parks it (its empty pages go to the pool, the rest waits,
//!   frees and all, for the next thread). See the `heap` module for full pages, the way they
//!   come back, `fork`, and exiting threads.
//! - **Empty pages** are shared between all heaps through pitlane-queue's
//!   [`Bagpipe`](pitlane_queue::bagpipe::Bagpipe), whose pipes here are lock-free stacks
//!   linked through the page descriptors, so they never allocate (see the `pool` module), and
//!   purged after a delay ([`PurgePolicy`]).
//!
//! # How a free finds its owner
//!
//! `dealloc(ptr, layout)`: the layout says whether the block is small (a class fits) or large
//! — no lookup. A small block's segment is `ptr & !(4 MiB - 1)`; its page is `(ptr >> 16) &
//! 63`, whose descriptor is the entry of the segment header that a fixed 64-entry permutation
//! gives (it keeps neighbouring pages' descriptors apart); the descriptor names the owner
//! heap. If that is the calling thread's heap, the block goes on the page's `free` list (no
//! atomic); otherwise on its `remote` list (one CAS). A large block's header sits 64 bytes
//! before it.
//!
//! # Where the design comes from
//!
//! - **mimalloc** (Leijen, Zorn and de Moura, "Mimalloc: Free List Sharding in Action",
//!   2019): a heap per thread reached through a thread-local pointer that starts at a static
//!   empty heap (so the fast path has no initialisation check), free lists sharded per page
//!   (the owner's `free` list and an atomic list for frees from other threads), a page's
//!   descriptor found by masking the block's address, full pages that come back through a
//!   delayed-free list, a `pthread` key destructor at thread exit, and purging after a delay.
//! - **elfmalloc** (the allocators-rs project; the seed `rust-alloc-trait-elfmalloc-post.txt`
//!   and its Vec workloads): empty pages shared between threads through a Bagpipe, a *dirty*
//!   one and a *clean* (purged) one, taken from with the Bagpipe's bail-out (after a few
//!   lost races a thread takes the next source, fresh memory last). Unlike elfmalloc, only
//!   empty pages enter it, so its revocation is not needed (see the `pool` module and
//!   `docs/notes/alloc-design.md`).
//! - **Treiber's stack**: each pipe of that Bagpipe, its top a generation-tagged index against
//!   ABA (`pitlane_sync::TaggedIndex`), and a heap's delayed list, which needs no tag since its
//!   owner only ever takes it whole, with one swap.
//!
//! The lock-free steps each take effect at one atomic instruction: a remote free at the CAS
//! that pushes its batch on a page's `remote` list, the owner's collection at the swap that
//! takes that list whole, a pool push or pop at the CAS on the pipe's top (see `heap` and
//! `pool` for each protocol).
//!
//! # Guarantees
//!
//! - Failure is a null pointer (`GlobalAlloc`) or [`AllocError`]: sizes near `isize::MAX`,
//!   a refused `mmap`, more than 128 GiB of small blocks. The allocator never panics or unwinds
//!   and never allocates through itself on its paths, except once: the pool's Bagpipes are
//!   built through the global allocator at the first allocation (a nested call meanwhile is
//!   served by the orphan heap).
//! - Alignments: any power of two that `Layout` allows; small classes serve up to 16 KiB,
//!   larger ones get a mapping aligned to them.
//! - `realloc` stays in place when the old and new sizes share a class, and for large blocks
//!   when the mapping has room; large blocks grow with `mremap`.
//! - `fork()` leaves a working allocator in the child. (The standard library is another
//!   matter: in the child of a threaded process, `std::thread::spawn` can block forever on a
//!   lock of std's own that another thread held at the fork, whatever the allocator; this
//!   crate's fork tests start their threads in the child with `pthread_create`.)
//! - Zero-sized requests through [`Allocator`] get a dangling, aligned pointer and no memory;
//!   through `GlobalAlloc` (where they are not allowed) a real block (8 bytes at alignments up
//!   to 8), `realloc` to and from size 0 included.
//! - Pointer provenance is kept by construction (`map_addr`, no integer-to-pointer casts).
//!
//! 64-bit Linux only (it maps memory with `mmap` and `mremap`, tracks threads with pthread
//! keys, and lays out its metadata for 64-bit addresses); elsewhere it does not compile, with
//! a message that says so.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

// Say so plainly rather than with a page of unresolved names from `libc`.
#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
compile_error!(
    "pitlane-alloc supports 64-bit Linux only: it stands on Linux's mmap, mremap and madvise \
     and on 64-bit addresses (the `pitlane` facade leaves it out elsewhere)"
);

use core::alloc::{GlobalAlloc, Layout};
use core::ptr::{self, NonNull};

use allocator_api2::alloc::{AllocError, Allocator};

#[cfg(doctest)]
mod auto_traits;
mod class;
mod heap;
mod large;
mod lock;
mod os;
mod owned;
mod policy;
mod pool;
pub mod raw;
mod segment;
mod stats;

pub use class::SMALL_MAX;
pub use owned::Heap;
pub use policy::{PurgePolicy, collect, purge_policy, set_purge_policy};
pub use segment::PAGE_SIZE;
pub use stats::{ClassStats, Stats, class_stats, stats};

use heap::HeapCore;

/// The allocator traits this crate implements (re-exported for convenience).
pub use allocator_api2;

/// Under `--cfg pitlane_alloc_global`, every binary that links this crate gets it as its
/// global allocator: CI builds the workspace's tests that way once (each crate links this one
/// there through a dev-dependency and an `extern crate` that exist only under that cfg).
#[cfg(pitlane_alloc_global)]
#[global_allocator]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

/// The process-wide allocator: a zero-sized handle whose every copy allocates from the calling
/// thread's heap. Use it as the `#[global_allocator]`, or as an [`Allocator`] beside another
/// global allocator.
///
/// ```
/// use allocator_api2::vec::Vec;
/// use pitlane_alloc::PitlaneAlloc;
///
/// let mut v = Vec::new_in(PitlaneAlloc::new());
/// v.extend_from_slice(b"pitlane");
/// assert_eq!(&v[..], b"pitlane");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PitlaneAlloc;

impl PitlaneAlloc {
    /// The handle; `const`, for `static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();`.
    ///
    /// ```
    /// static A: pitlane_alloc::PitlaneAlloc = pitlane_alloc::PitlaneAlloc::new();
    /// # let _ = A;
    /// ```
    pub const fn new() -> Self {
        Self
    }
}

/// A dangling, aligned, empty block for zero-sized requests.
#[inline]
pub(crate) fn dangling(layout: Layout) -> NonNull<[u8]> {
    // SAFETY: an alignment is never zero.
    let p = unsafe { NonNull::new_unchecked(ptr::without_provenance_mut::<u8>(layout.align())) };
    NonNull::slice_from_raw_parts(p, 0)
}

/// Allocates for `layout` from `heap` (held by the caller); large blocks are recorded for
/// `large_owner` (null: the global heap). Null on failure.
///
/// # Safety
/// The calling thread holds `heap`, or it is its thread heap (possibly the empty one).
#[inline(always)]
pub(crate) unsafe fn alloc_in(
    heap: *mut HeapCore,
    layout: Layout,
    large_owner: *mut HeapCore,
    zeroed: bool,
) -> *mut u8 {
    let size = layout.size();
    let class = if size <= SMALL_MAX && layout.align() <= 8 {
        class::class_of_small(size)
    } else {
        match class::class_of(size, layout.align()) {
            Some(class) => class,
            None => return large::alloc(size, layout.align(), large_owner, zeroed),
        }
    };
    // SAFETY: forwarded.
    let p = unsafe { heap::alloc_small(heap, class) };
    if zeroed && !p.is_null() {
        // SAFETY: the block holds at least `size` bytes.
        unsafe { p.write_bytes(0, size) };
    }
    p
}

/// Frees the block at `ptr` of `layout`.
///
/// # Safety
/// `ptr` is a live block of this allocator allocated with `layout` (or resized to it); the
/// calling thread holds `heap` or it is its thread heap.
#[inline(always)]
pub(crate) unsafe fn free_in(heap: *mut HeapCore, ptr: *mut u8, layout: Layout) {
    let small = if layout.size() <= SMALL_MAX && layout.align() <= 8 {
        true
    } else {
        class::class_of(layout.size(), layout.align()).is_some()
    };
    // SAFETY: forwarded; the class function routes the block where it was allocated.
    unsafe {
        if small {
            heap::free_small(heap, ptr);
        } else {
            large::free(ptr);
        }
    }
}

/// Resizes a block from `old` to `new`: in place when it can, else allocate, copy, free.
///
/// Zero sizes mean what they mean to the caller's interface. Through [`Allocator`] (`GLOBAL`
/// false) a zero-sized `old` names no block and a zero-sized `new` gets a dangling pointer.
/// Through [`GlobalAlloc`] (`GLOBAL` true), whose `alloc` serves a zero size with a real block
/// (its class's, or a mapping), both name real blocks: a `realloc` to size 0 frees the old
/// block and hands out such a block, one from size 0 frees it (`tests/global_zero_sized.rs`).
///
/// Never inlined: each caller makes one call, as before the two instances existed (inlined,
/// the `GlobalAlloc` one changed the code of a `Vec`-growing loop around it for the worse).
///
/// # Safety
/// As [`free_in`] for `ptr` and `old` (without `GLOBAL`, a zero-sized `old` names no block);
/// `new` is valid.
#[inline(never)]
pub(crate) unsafe fn resize_in<const GLOBAL: bool>(
    heap: *mut HeapCore,
    large_owner: *mut HeapCore,
    ptr: NonNull<u8>,
    old: Layout,
    new: Layout,
) -> Result<NonNull<[u8]>, AllocError> {
    if !GLOBAL && new.size() == 0 {
        if old.size() != 0 {
            // SAFETY: forwarded.
            unsafe { free_in(heap, ptr.as_ptr(), old) };
        }
        return Ok(dangling(new));
    }
    if (GLOBAL || old.size() != 0) && old.align() == new.align() {
        let align = old.align();
        match (
            class::class_of(old.size(), align),
            class::class_of(new.size(), align),
        ) {
            (Some(a), Some(b)) if a == b => {
                return Ok(NonNull::slice_from_raw_parts(ptr, new.size()));
            }
            (None, None) => {
                // SAFETY: a large block, resized to a size no class serves at its alignment
                // (with `GLOBAL`, possibly 0 at an alignment above the classes').
                let p = unsafe { large::realloc(ptr.as_ptr(), new.size()) };
                if let Some(p) = NonNull::new(p) {
                    return Ok(NonNull::slice_from_raw_parts(p, new.size()));
                }
            }
            _ => {}
        }
    }
    // SAFETY: forwarded.
    let fresh = unsafe { alloc_in(heap, new, large_owner, false) };
    let fresh = NonNull::new(fresh).ok_or(AllocError)?;
    if GLOBAL || old.size() != 0 {
        // SAFETY: both blocks hold at least the copied length (0 if either size is 0: a
        // zero-sized over-aligned block lies at the end of its mapping) and do not overlap.
        unsafe {
            ptr::copy_nonoverlapping(ptr.as_ptr(), fresh.as_ptr(), old.size().min(new.size()));
            free_in(heap, ptr.as_ptr(), old);
        }
    }
    Ok(NonNull::slice_from_raw_parts(fresh, new.size()))
}

// SAFETY: blocks are valid, aligned and distinct until freed; every path returns null on
// failure and never unwinds (no panicking code on these paths); `realloc` keeps the contents.
unsafe impl GlobalAlloc for PitlaneAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the thread heap is the calling thread's.
        unsafe { alloc_in(heap::thread_heap(), layout, ptr::null_mut(), false) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        unsafe { alloc_in(heap::thread_heap(), layout, ptr::null_mut(), true) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller passes a block of this allocator with its layout.
        unsafe { free_in(heap::thread_heap(), ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new) = Layout::from_size_align(new_size, layout.align()) else {
            return ptr::null_mut();
        };
        let Some(block) = NonNull::new(ptr) else {
            return ptr::null_mut();
        };
        // SAFETY: forwarded from the caller.
        match unsafe { resize_in::<true>(heap::thread_heap(), ptr::null_mut(), block, layout, new) }
        {
            Ok(p) => p.cast::<u8>().as_ptr(),
            Err(AllocError) => ptr::null_mut(),
        }
    }
}

// SAFETY: as for `GlobalAlloc`; zero-sized requests get a dangling pointer and no memory.
//
// Every method is `#[inline]`, the resizing ones too although they only forward to
// `resize_in`: a collection's growth path (`Vec::push` → `grow`) is inlined into the
// collection's loop, and a `grow` that stayed a call would take `&self`, the address of the
// handle inside the collection, so the collection's length and capacity would have to live
// in memory instead of registers for the whole loop (a load and a store per `push`).
unsafe impl Allocator for PitlaneAlloc {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling(layout));
        }
        // SAFETY: the thread heap is the calling thread's.
        let p = unsafe { alloc_in(heap::thread_heap(), layout, ptr::null_mut(), false) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
            .ok_or(AllocError)
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling(layout));
        }
        // SAFETY: as above.
        let p = unsafe { alloc_in(heap::thread_heap(), layout, ptr::null_mut(), true) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
            .ok_or(AllocError)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            // SAFETY: forwarded from the caller.
            unsafe { free_in(heap::thread_heap(), ptr.as_ptr(), layout) }
        }
    }

    #[inline]
    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded from the caller.
        unsafe { resize_in::<false>(heap::thread_heap(), ptr::null_mut(), ptr, old, new) }
    }

    #[inline]
    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded from the caller.
        let grown =
            unsafe { resize_in::<false>(heap::thread_heap(), ptr::null_mut(), ptr, old, new) }?;
        // SAFETY: the bytes past the old size belong to the grown block.
        unsafe {
            grown
                .cast::<u8>()
                .as_ptr()
                .add(old.size())
                .write_bytes(0, new.size() - old.size())
        };
        Ok(grown)
    }

    #[inline]
    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded from the caller.
        unsafe { resize_in::<false>(heap::thread_heap(), ptr::null_mut(), ptr, old, new) }
    }
}
