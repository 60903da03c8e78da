//! [`Heap`]: an owned heap that frees everything it handed out when it is dropped.

use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use allocator_api2::alloc::{AllocError, Allocator};

use crate::heap::{self, HeapCore, Kind};

/// An owned heap: an arena with the allocator's size classes, free lists and reuse, whose
/// every block — small or large, freed or not — goes back when the `Heap` is dropped.
///
/// Allocate through `&Heap`, which implements [`Allocator`]. A `Heap` is [`Send`] but not
/// [`Sync`] (as `bumpalo::Bump`): one thread at a time uses it, so its blocks are freed
/// without atomics, and all of them must be freed through the same `Heap` (or left for its
/// drop). Its pages come from, and go back to, the pool shared with the global heap.
///
/// As the [`Allocator`] contract says, a block is freed and resized only through the
/// allocator that made it: a block of a `Heap` handed to [`PitlaneAlloc`](crate::PitlaneAlloc)
/// or to another `Heap`, or a block of `PitlaneAlloc` handed to a `Heap` (whose `grow` would
/// then make it that heap's), is undefined behaviour, which nothing here detects: a block of
/// a heap freed elsewhere can be handed out again after the heap's drop, while still queued
/// as free in another thread.
///
/// ```
/// use allocator_api2::vec::Vec;
/// use pitlane_alloc::Heap;
///
/// let heap = Heap::new();
/// let mut v = Vec::new_in(&heap);
/// v.extend(0..1000_u32);
/// assert_eq!(v.iter().sum::<u32>(), 499_500);
/// let leaked = Vec::<u8, _>::with_capacity_in(1 << 20, &heap).leak();
/// assert_eq!(leaked.len(), 0);
/// drop(v);
/// drop(heap); // the leaked megabyte goes back too
/// ```
///
/// A `Heap` cannot be shared between threads (its blocks are freed without atomics):
///
/// ```compile_fail
/// fn shared<T: Sync>(_: &T) {}
/// shared(&pitlane_alloc::Heap::new());
/// ```
pub struct Heap {
    /// The core, or null if none could be made (every allocation then fails with
    /// `AllocError`, `grow` from a zero-sized block included; `tests/owned_heap_exhausted.rs`).
    core: *mut HeapCore,
    /// Not `Sync`: the core's lists are touched without atomics.
    _not_sync: PhantomData<core::cell::Cell<()>>,
}

// SAFETY: moving the heap moves the right to touch its core; no block can be outstanding in
// another thread's hands with a borrow of it, since `&Heap` is not `Send`.
unsafe impl Send for Heap {}

impl Heap {
    /// A new empty heap. It maps nothing until its first allocation, beyond a heap record
    /// (reused from a dropped `Heap` when there is one).
    ///
    /// ```
    /// let heap = pitlane_alloc::Heap::new();
    /// let b = allocator_api2::boxed::Box::new_in(5, &heap);
    /// assert_eq!(*b, 5);
    /// ```
    pub fn new() -> Self {
        heap::init();
        Self {
            core: heap::acquire(Kind::Owned).unwrap_or(ptr::null_mut()),
            _not_sync: PhantomData,
        }
    }

    fn alloc_raw(&self, layout: Layout) -> *mut u8 {
        if self.core.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: this `Heap` holds its core, and `&self` is on one thread only.
        unsafe { crate::alloc_in(self.core, layout, self.core, false) }
    }
}

impl Default for Heap {
    /// Same as [`Heap::new`].
    ///
    /// ```
    /// let heap = pitlane_alloc::Heap::default();
    /// # drop(heap);
    /// ```
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Heap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heap")
            .field("usable", &!self.core.is_null())
            .finish()
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        if self.core.is_null() {
            return;
        }
        // SAFETY: we hold the core; `&mut self` means no borrow of the heap, so no block is
        // used again.
        unsafe {
            crate::large::free_all(&*self.core);
            heap::release_owned(self.core);
        }
    }
}

// SAFETY: blocks are valid until deallocated or until the heap drops (a borrow of it outlives
// every use through `&Heap`); every method keeps the block's contents as the trait requires.
unsafe impl Allocator for &Heap {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(crate::dangling(layout));
        }
        NonNull::new(self.alloc_raw(layout))
            .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
            .ok_or(AllocError)
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(crate::dangling(layout));
        }
        if self.core.is_null() {
            return Err(AllocError);
        }
        // SAFETY: as in `alloc_raw`.
        let p = unsafe { crate::alloc_in(self.core, layout, self.core, true) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
            .ok_or(AllocError)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        // SAFETY: the caller passes a block of this heap with its layout.
        unsafe { crate::free_in(self.core, ptr.as_ptr(), layout) }
    }

    #[inline]
    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // A heap without a core has handed out zero-sized blocks only; growing one would
        // allocate from the missing core.
        if self.core.is_null() {
            return Err(AllocError);
        }
        // SAFETY: forwarded from the caller; the core exists.
        unsafe { crate::resize_in::<false>(self.core, self.core, ptr, old, new) }
    }

    #[inline]
    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // As in `grow`.
        if self.core.is_null() {
            return Err(AllocError);
        }
        // SAFETY: forwarded from the caller; the core exists.
        let grown = unsafe { crate::resize_in::<false>(self.core, self.core, ptr, old, new) }?;
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
        unsafe { crate::resize_in::<false>(self.core, self.core, ptr, old, new) }
    }
}
