//! Threads whose first allocations race the allocator's one-time initialisation: a thread
//! that finds another thread initialising does not wait (see `heap`), it allocates from the
//! shared orphan heap until the initialisation is done. Those blocks, freed by another
//! thread, must leave nothing in use once `collect()` has run, the orphan heap's pages
//! included. (`tests/stress_handover.rs` failed now and then when one of its producers raced
//! the initialisation this way, before the sweep visited the orphan heap.)
//!
//! One test in its own binary, so that nothing else initialises the allocator first, and
//! `PitlaneAlloc` is not the global allocator here.
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Barrier;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::PitlaneAlloc;

const THREADS: usize = 8;
const BLOCKS: usize = 2000;

fn layout(i: usize) -> Layout {
    Layout::from_size_align(16 + (i * 37) % 4000, 8).unwrap()
}

#[test]
fn blocks_allocated_while_another_thread_initialises_leave_nothing_in_use_once_freed() {
    let start = Barrier::new(THREADS);
    let blocks: Vec<Vec<usize>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    (0..BLOCKS)
                        .map(|i| {
                            let block = PitlaneAlloc::new()
                                .allocate(layout(i))
                                .unwrap()
                                .cast::<u8>()
                                .as_ptr();
                            // SAFETY: a fresh block of at least 16 bytes.
                            unsafe { block.write_bytes(t as u8, 16) };
                            block.expose_provenance()
                        })
                        .collect()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    // This thread (which has no heap of its own yet) frees them all: remote frees.
    for (t, mine) in blocks.iter().enumerate() {
        for (i, &addr) in mine.iter().enumerate() {
            let block = std::ptr::with_exposed_provenance_mut::<u8>(addr);
            // SAFETY: a live block of `layout(i)` that thread `t` filled, freed once here.
            unsafe {
                assert!((0..16).all(|k| block.add(k).read() == t as u8));
                PitlaneAlloc::new().deallocate(NonNull::new(block).unwrap(), layout(i));
            }
        }
    }
    pitlane_alloc::collect();
    let stats = pitlane_alloc::stats();
    assert_eq!(
        (stats.in_use, stats.pages_owned),
        (0, 0),
        "blocks freed, yet still counted in use: {stats:?}"
    );
}
