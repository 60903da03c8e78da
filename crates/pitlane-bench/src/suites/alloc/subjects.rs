//! The allocators under test, each as an `allocator_api2::alloc::Allocator` so that one
//! generic workload runs them all in the same process.
//!
//! pitlane's `PitlaneAlloc` implements `Allocator` itself and is measured through it.
//! The peers (`system`, `jemalloc`, `mimalloc`) offer only `GlobalAlloc` on stable Rust
//! (`tikv-jemallocator`'s `alloc_trait` feature is the nightly `core::alloc::Allocator`, and
//! the `mimalloc` crate has none), so a macro (`via_global_alloc!`) puts each behind a zero-sized
//! handle that forwards to it: `allocate` to `alloc`, `deallocate` to `dealloc` (both crates
//! then free with the size: jemalloc's `sdallocx`, mimalloc's `mi_free_size`), and `grow` /
//! `shrink` at the same alignment to `realloc` (`rallocx`, `mi_realloc_aligned`, `realloc`),
//! so each peer resizes in place wherever it can. Zero-sized requests, which `GlobalAlloc`
//! forbids, get a dangling pointer of the right alignment and never reach the allocator.
//! The system allocator is reached through `std::alloc::System` rather than
//! `allocator_api2::alloc::Global`, which is whatever the program's global allocator is.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;

use allocator_api2::alloc::{AllocError, Allocator};

/// An allocator the suite measures: a zero-sized handle, named as in the report.
pub trait AllocSubject: Allocator + Clone + Send + Sync + 'static {
    /// The subject's name in the report.
    const NAME: &'static str;
    /// Whether it is a peer (not pitlane's).
    const PEER: bool;
    /// A handle.
    fn handle() -> Self;
}

/// pitlane's allocator: `pitlane_alloc::PitlaneAlloc` implements `Allocator` itself.
impl AllocSubject for pitlane_alloc::PitlaneAlloc {
    const NAME: &'static str = super::OURS;
    const PEER: bool = false;
    fn handle() -> Self {
        pitlane_alloc::PitlaneAlloc::new()
    }
}

/// A dangling, well-aligned, empty block for a zero-sized request.
#[inline]
fn empty_block(layout: Layout) -> NonNull<[u8]> {
    // `align` is a nonzero power of two, so the address is nonzero and aligned; nothing is
    // ever read or written through a zero-length block.
    let ptr = NonNull::<u8>::dangling().with_addr(
        std::num::NonZeroUsize::new(layout.align()).unwrap_or(std::num::NonZeroUsize::MIN),
    );
    NonNull::slice_from_raw_parts(ptr, 0)
}

/// Implements [`Allocator`] and [`AllocSubject`] for a zero-sized handle `$handle` over the
/// `GlobalAlloc` value `$global`.
macro_rules! via_global_alloc {
    ($(#[$doc:meta])* $handle:ident, $global:expr, $name:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $handle;

        impl $handle {
            #[inline]
            fn global() -> impl GlobalAlloc {
                $global
            }
        }

        // SAFETY: every block comes from the same process-wide `GlobalAlloc`, so any handle
        // (all are equal) may free or resize any block another handle allocated; blocks stay
        // valid until deallocated; zero-sized blocks never reach the allocator.
        unsafe impl Allocator for $handle {
            #[inline]
            fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
                if layout.size() == 0 {
                    return Ok(empty_block(layout));
                }
                // SAFETY: the size is nonzero, as `GlobalAlloc::alloc` requires.
                let ptr = unsafe { Self::global().alloc(layout) };
                let ptr = NonNull::new(ptr).ok_or(AllocError)?;
                Ok(NonNull::slice_from_raw_parts(ptr, layout.size()))
            }

            #[inline]
            fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
                if layout.size() == 0 {
                    return Ok(empty_block(layout));
                }
                // SAFETY: the size is nonzero.
                let ptr = unsafe { Self::global().alloc_zeroed(layout) };
                let ptr = NonNull::new(ptr).ok_or(AllocError)?;
                Ok(NonNull::slice_from_raw_parts(ptr, layout.size()))
            }

            #[inline]
            unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
                if layout.size() != 0 {
                    // SAFETY: the caller passes a block this allocator returned with this
                    // layout; a nonzero size means it came from `alloc`.
                    unsafe { Self::global().dealloc(ptr.as_ptr(), layout) };
                }
            }

            #[inline]
            unsafe fn grow(
                &self,
                ptr: NonNull<u8>,
                old: Layout,
                new: Layout,
            ) -> Result<NonNull<[u8]>, AllocError> {
                if old.size() == 0 || old.align() != new.align() {
                    let block = self.allocate(new)?;
                    // SAFETY: `ptr` holds `old.size()` readable bytes (the caller's contract),
                    // the new block at least as many, and the two are distinct blocks.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            ptr.as_ptr(),
                            block.as_ptr().cast::<u8>(),
                            old.size(),
                        );
                        self.deallocate(ptr, old);
                    }
                    return Ok(block);
                }
                // SAFETY: a live block of layout `old` (nonzero size); the new size is
                // nonzero and, rounded to the alignment, fits `isize` (it is a `Layout`).
                let p = unsafe { Self::global().realloc(ptr.as_ptr(), old, new.size()) };
                let p = NonNull::new(p).ok_or(AllocError)?;
                Ok(NonNull::slice_from_raw_parts(p, new.size()))
            }

            #[inline]
            unsafe fn shrink(
                &self,
                ptr: NonNull<u8>,
                old: Layout,
                new: Layout,
            ) -> Result<NonNull<[u8]>, AllocError> {
                if new.size() == 0 || old.align() != new.align() {
                    let block = self.allocate(new)?;
                    // SAFETY: `ptr` holds at least `new.size()` bytes, the new block as many,
                    // and the two are distinct blocks.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            ptr.as_ptr(),
                            block.as_ptr().cast::<u8>(),
                            new.size(),
                        );
                        self.deallocate(ptr, old);
                    }
                    return Ok(block);
                }
                // SAFETY: a live block of layout `old`; the new size is nonzero and no larger.
                let p = unsafe { Self::global().realloc(ptr.as_ptr(), old, new.size()) };
                let p = NonNull::new(p).ok_or(AllocError)?;
                Ok(NonNull::slice_from_raw_parts(p, new.size()))
            }
        }

        impl AllocSubject for $handle {
            const NAME: &'static str = $name;
            const PEER: bool = true;
            fn handle() -> Self {
                $handle
            }
        }
    };
}

via_global_alloc!(
    /// The C library's allocator (glibc's `malloc` here), through `std::alloc::System`.
    SystemAlloc,
    std::alloc::System,
    "system"
);
via_global_alloc!(
    /// jemalloc, through `tikv_jemallocator::Jemalloc` (its symbols are prefixed, so only what
    /// goes through this handle reaches it).
    JemallocAlloc,
    tikv_jemallocator::Jemalloc,
    "jemalloc"
);
via_global_alloc!(
    /// mimalloc, through `mimalloc::MiMalloc`.
    MimallocAlloc,
    mimalloc::MiMalloc,
    "mimalloc"
);

#[cfg(test)]
mod tests {
    use super::*;

    fn edges<A: AllocSubject>() {
        let a = A::handle();
        for align in [1, 8, 16, 64, 4096] {
            let zero = Layout::from_size_align(0, align).unwrap();
            let block = a.allocate(zero).unwrap();
            assert_eq!(block.len(), 0);
            assert_eq!(block.cast::<u8>().as_ptr().addr() % align, 0, "{}", A::NAME);
            // SAFETY: the block just allocated with this layout.
            unsafe { a.deallocate(block.cast(), zero) };
        }
        let small = Layout::from_size_align(24, 8).unwrap();
        let block = a.allocate_zeroed(small).unwrap().cast::<u8>();
        // SAFETY: 24 zeroed bytes.
        let bytes = unsafe { std::slice::from_raw_parts(block.as_ptr(), 24) };
        assert!(bytes.iter().all(|&b| b == 0), "{}", A::NAME);
        // SAFETY: the block is live, of layout `small`.
        unsafe { block.as_ptr().write_bytes(7, 24) };
        let big = Layout::from_size_align(100_000, 8).unwrap();
        // SAFETY: a live block of layout `small`, grown to a larger size at the same alignment.
        let grown = unsafe { a.grow(block, small, big) }.unwrap().cast::<u8>();
        // SAFETY: the first 24 bytes were carried over.
        let bytes = unsafe { std::slice::from_raw_parts(grown.as_ptr(), 24) };
        assert!(bytes.iter().all(|&b| b == 7), "{}", A::NAME);
        let over = Layout::from_size_align(10, 4096).unwrap();
        // SAFETY: a live block of layout `big`, shrunk with a new alignment.
        let moved = unsafe { a.shrink(grown, big, over) }.unwrap().cast::<u8>();
        assert_eq!(moved.as_ptr().addr() % 4096, 0);
        // SAFETY: the first 10 bytes were carried over.
        let bytes = unsafe { std::slice::from_raw_parts(moved.as_ptr(), 10) };
        assert!(bytes.iter().all(|&b| b == 7), "{}", A::NAME);
        // SAFETY: live, of layout `over`.
        unsafe { a.deallocate(moved, over) };
        let huge = Layout::from_size_align(isize::MAX as usize - 4095, 4096).unwrap();
        assert!(
            a.allocate(huge).is_err(),
            "{}: a huge request must fail",
            A::NAME
        );
    }

    #[test]
    fn every_handle_keeps_the_allocator_contract() {
        edges::<pitlane_alloc::PitlaneAlloc>();
        edges::<SystemAlloc>();
        edges::<JemallocAlloc>();
        edges::<MimallocAlloc>();
    }
}
