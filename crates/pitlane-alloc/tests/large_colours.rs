//! Where large blocks start in their first page: a block of a whole number of pages at one of
//! the lines 1 to 63, a different one from one such block to the next; any other block right
//! after its 64-byte header; a block keeps its place when it grows.

use allocator_api2::alloc::Allocator;
use core::alloc::Layout;
use pitlane_alloc::PitlaneAlloc;
use std::collections::BTreeSet;

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

const PAGE: usize = 4096;

/// Allocates 63 live blocks of `size` bytes, writes every byte of each, frees them; their
/// offsets in their OS pages.
fn offsets(size: usize) -> Vec<usize> {
    let a = PitlaneAlloc::new();
    let layout = Layout::from_size_align(size, 8).unwrap();
    let blocks: Vec<_> = (0..63)
        .map(|_| a.allocate(layout).unwrap().cast::<u8>())
        .collect();
    let offsets = blocks.iter().map(|b| b.as_ptr().addr() % PAGE).collect();
    for &b in &blocks {
        // SAFETY: a live block of `size` bytes, freed once.
        unsafe {
            b.as_ptr().write_bytes(0xa5, size);
            assert_eq!(b.as_ptr().add(size - 1).read(), 0xa5);
            a.deallocate(b, layout);
        }
    }
    offsets
}

#[test]
fn blocks_of_whole_pages_start_at_different_lines_of_their_first_page() {
    for size in [32 << 10, 64 << 10, 3 << 20] {
        let offsets = offsets(size);
        for &o in &offsets {
            assert!(
                o % 64 == 0 && (64..=PAGE - 64).contains(&o),
                "a block of {size} bytes at page offset {o:#x}"
            );
        }
        let distinct = offsets.iter().collect::<BTreeSet<_>>().len();
        // 63 in a row get 63 lines (fewer only if another thread's blocks took some between).
        assert!(
            distinct >= 32,
            "63 blocks of {size} bytes started at only {distinct} different lines: {offsets:x?}"
        );
    }
}

#[test]
fn other_blocks_start_right_after_their_header() {
    for size in [(32 << 10) + 8, (64 << 10) - 8, 100_000] {
        assert!(
            offsets(size).iter().all(|&o| o == 64),
            "a block of {size} bytes not at page offset 0x40"
        );
    }
}

#[test]
fn a_growing_block_keeps_its_line() {
    let a = PitlaneAlloc::new();
    let l = |n: usize| Layout::from_size_align(n, 8).unwrap();
    let mut size = 32 << 10;
    let mut block = a.allocate(l(size)).unwrap().cast::<u8>();
    let line = block.as_ptr().addr() % PAGE;
    // SAFETY: a live block of `size` bytes.
    unsafe { block.as_ptr().write_bytes(7, size) };
    while size < (16 << 20) {
        // SAFETY: a live block of `l(size)`, grown to twice its size at the same alignment.
        block = unsafe { a.grow(block, l(size), l(2 * size)) }
            .unwrap()
            .cast::<u8>();
        // SAFETY: the grown block holds the old bytes.
        unsafe { assert_eq!(block.as_ptr().add(size - 1).read(), 7) };
        size *= 2;
        assert_eq!(
            block.as_ptr().addr() % PAGE,
            line,
            "moved to another line at {size}"
        );
        // SAFETY: a live block of `size` bytes.
        unsafe { block.as_ptr().write_bytes(7, size) };
    }
    // SAFETY: the block, freed once.
    unsafe { a.deallocate(block, l(size)) };
}
