//! Memory freed while the OS refuses new mappings (the process's address-space limit,
//! `RLIMIT_AS`, lowered to what it uses plus 48 MiB) must serve the next requests without a
//! call to `collect`: freed large mappings wait in the large cache (up to 64 MiB, up to 10 s)
//! and in the thread's stash, and a new mapping (a large block aligned to 1 MiB, or a segment
//! for small blocks) was refused while they held the address space. Through `raw`, the
//! `Allocator` interface and an owned `Heap`. One test in its own binary (the limit is the
//! whole process's), PitlaneAlloc not the global allocator.
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{Heap, PitlaneAlloc, raw};
use pitlane_testkit::memory::with_address_space_limit;

/// Large blocks of this size fill the limit.
const SIZE: usize = 300 << 10;

/// Fills the limit with large blocks, frees them all, then asks for what needs new mappings.
/// Returns how many blocks fitted and what was refused afterwards.
fn fill_free_and_ask() -> (usize, Vec<&'static str>) {
    let mut refused = Vec::new();
    let mut blocks = Vec::with_capacity(4096);
    while blocks.len() < 4096 {
        let p = raw::malloc(SIZE, 8);
        if p.is_null() {
            break;
        }
        // SAFETY: a live block of `SIZE` bytes.
        unsafe { p.write_bytes(1, SIZE) };
        blocks.push(p);
    }
    let filled = blocks.len();
    for &p in &blocks {
        // SAFETY: live blocks of ours, each freed once.
        unsafe { raw::free(p) };
    }
    let half = filled * SIZE / 2;
    // A mapping of its own (aligned beyond a page: never served from the cache).
    let aligned = raw::malloc(half, 1 << 20);
    if aligned.is_null() {
        refused.push("raw::malloc of half the freed memory aligned to 1 MiB");
    } else {
        // SAFETY: a live block of ours, freed once.
        unsafe { raw::free(aligned) };
    }
    let layout = Layout::from_size_align(half, 1 << 20).unwrap();
    match PitlaneAlloc::new().allocate(layout) {
        // SAFETY: the block just allocated with `layout`.
        Ok(p) => unsafe { PitlaneAlloc::new().deallocate(p.cast(), layout) },
        Err(_) => refused.push("Allocator::allocate of the same"),
    }
    {
        let heap = Heap::new();
        if (&heap).allocate(layout).is_err() {
            refused.push("an owned Heap's allocate of the same");
        }
    }
    // Large blocks again, freed, then small blocks of every class: pages of new segments.
    for block in &mut blocks {
        *block = raw::malloc(SIZE, 8);
    }
    for &p in &blocks {
        if !p.is_null() {
            // SAFETY: live blocks of ours, each freed once.
            unsafe { raw::free(p) };
        }
    }
    let mut small = Vec::with_capacity(1024);
    for i in 0..1024 {
        let p = raw::malloc((i % 40 + 1) * 400, 8);
        if p.is_null() {
            refused.push("small blocks needing a new segment");
            break;
        }
        small.push(p);
    }
    for p in small {
        // SAFETY: live blocks of ours, each freed once.
        unsafe { raw::free(p) };
    }
    (filled, refused)
}

#[test]
fn memory_freed_under_an_address_space_limit_serves_again_without_collect() {
    // Warm up: the allocator's own structures exist before the limit.
    // SAFETY: a live block of ours, freed once.
    unsafe { raw::free(raw::malloc(10, 8)) };
    let (filled, refused) = with_address_space_limit(48 << 20, fill_free_and_ask);
    assert!(
        filled > 32 && filled < 4096,
        "{filled} blocks: the limit was not reached"
    );
    assert_eq!(refused, Vec::<&str>::new());
}
