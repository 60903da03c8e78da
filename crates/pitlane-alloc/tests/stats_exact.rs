//! `stats()` and `class_stats()` are exact when nothing else allocates: per class, the
//! blocks handed out are counted one by one, and once they are freed — by their thread or,
//! after `collect`, by other threads — the figures return to where they started. Alone in its
//! binary, with PitlaneAlloc not the global allocator, so that nothing else moves them (and
//! so left out of CI's run with `--cfg pitlane_alloc_global`, where the test's own vectors
//! and the harness's allocations would be counted too).
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PitlaneAlloc, class_stats, stats};

const PER_CLASS: usize = 300;

struct Blocks(Vec<(NonNull<u8>, Layout)>);
// SAFETY: blocks of the global heap may be freed from any thread.
unsafe impl Send for Blocks {}

fn per_class() -> Vec<usize> {
    class_stats().iter().map(|c| c.blocks_in_use).collect()
}

fn allocate_every_class() -> Blocks {
    let a = PitlaneAlloc::new();
    let mut blocks = Vec::new();
    for class in class_stats() {
        let layout = Layout::from_size_align(class.block_size, 8).unwrap();
        for _ in 0..PER_CLASS {
            blocks.push((a.allocate(layout).unwrap().cast::<u8>(), layout));
        }
    }
    Blocks(blocks)
}

fn free(blocks: Blocks) {
    let a = PitlaneAlloc::new();
    for (b, l) in blocks.0 {
        // SAFETY: a live block with its layout, freed once.
        unsafe { a.deallocate(b, l) };
    }
}

#[test]
fn figures_count_every_block_and_come_back_after_frees() {
    // Touch the allocator once so that its own start-up is out of the figures.
    free(Blocks(vec![(
        PitlaneAlloc::new()
            .allocate(Layout::new::<u64>())
            .unwrap()
            .cast(),
        Layout::new::<u64>(),
    )]));
    pitlane_alloc::collect();
    let start = per_class();
    let start_in_use = stats().in_use;

    // Freed by the thread that allocated them.
    let blocks = allocate_every_class();
    let during = per_class();
    for (c, (s, d)) in start.iter().zip(&during).enumerate() {
        assert_eq!(d - s, PER_CLASS, "class {c}");
    }
    let bytes: usize = class_stats().iter().map(|c| c.block_size * PER_CLASS).sum();
    assert_eq!(stats().in_use, start_in_use + bytes);
    free(blocks);
    assert_eq!(per_class(), start);
    assert_eq!(stats().in_use, start_in_use);

    // Allocated by a thread that exits, freed by another thread: counted in use until the
    // exited thread's heap is swept, then back to the start.
    let blocks = std::thread::spawn(allocate_every_class).join().unwrap();
    std::thread::spawn(move || free(blocks)).join().unwrap();
    pitlane_alloc::collect();
    assert_eq!(per_class(), start);
    assert_eq!(stats().in_use, start_in_use);
    assert!(stats().in_use <= stats().mapped);
}
