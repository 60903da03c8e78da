//! Which cached run of freed address space a large block takes: a thread's own runs first,
//! then the runs of threads that exited, and only then the runs of threads still running
//! (whose blocks may want to grow into them again). One test in its own binary, so that no
//! other test's large blocks are in the cache.

use allocator_api2::alloc::Allocator;
use core::alloc::Layout;
use pitlane_alloc::{PitlaneAlloc, PurgePolicy};
use std::sync::mpsc;

#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

/// Past the per-thread stash (1 MiB), so a free goes to the shared cache.
const SMALLER: usize = 2 << 20;
const LARGER: usize = 4 << 20;

/// Allocates `size` bytes, writes them, frees them; the block's address.
fn alloc_and_free(size: usize) -> usize {
    let a = PitlaneAlloc::new();
    let layout = Layout::from_size_align(size, 8).unwrap();
    let block = a.allocate(layout).unwrap().cast::<u8>();
    // SAFETY: a live block of `size` bytes.
    unsafe { block.as_ptr().write_bytes(1, size) };
    // SAFETY: allocated above with `layout`, freed once.
    unsafe { a.deallocate(block, layout) };
    block.as_ptr().addr()
}

#[test]
fn a_large_block_takes_an_exited_threads_run_before_a_running_threads() {
    // Keep every run for the whole test, whatever the clock.
    let old = pitlane_alloc::purge_policy();
    pitlane_alloc::set_purge_policy(PurgePolicy {
        delay_ms: 1 << 40,
        retain_ms: 1 << 40,
        ..old
    });
    pitlane_alloc::collect();

    // A running thread frees the smaller run and waits.
    let (freed_tx, freed_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let running = std::thread::spawn(move || {
        freed_tx.send(alloc_and_free(SMALLER)).unwrap();
        done_rx.recv().unwrap();
    });
    let runnings = freed_rx.recv().unwrap();
    // A thread frees the larger run and exits.
    let exiteds = std::thread::spawn(|| alloc_and_free(LARGER))
        .join()
        .unwrap();

    // The smallest run that fits is the running thread's; the block takes the exited one's.
    let a = PitlaneAlloc::new();
    let layout = Layout::from_size_align(SMALLER - 4096, 8).unwrap();
    let block = a.allocate(layout).unwrap().cast::<u8>();
    let at = block.as_ptr().addr();
    assert!(
        (exiteds..exiteds + LARGER).contains(&at),
        "took {at:#x}: not from the exited thread's run at {exiteds:#x} (the running thread's \
         is at {runnings:#x})"
    );
    // The rest of that run is now this thread's: its block grows into it in place.
    // SAFETY: a live block of `layout`; grown to a larger size of the same alignment.
    let grown = unsafe {
        a.grow(
            block,
            layout,
            Layout::from_size_align(LARGER - 8192, 8).unwrap(),
        )
    }
    .unwrap();
    assert_eq!(grown.cast::<u8>().as_ptr().addr(), at, "the block moved");
    // SAFETY: the grown block, freed once.
    unsafe {
        a.deallocate(
            grown.cast(),
            Layout::from_size_align(LARGER - 8192, 8).unwrap(),
        )
    };

    done_tx.send(()).unwrap();
    running.join().unwrap();
    pitlane_alloc::set_purge_policy(old);
    pitlane_alloc::collect();
}
