//! Frees made late in a thread's exit, after the allocator's own key destructor has parked
//! the thread's heap: by the destructor of a `pthread` key created after the allocator's
//! (glibc runs key destructors in the order the keys were created, so in a C program under
//! `LD_PRELOAD`, where the allocator's key is one of the first, every other library's
//! thread-specific destructor runs after it). Such a free must reach the block's page (a
//! remote free published at once) and a large mapping must reach the shared cache: held
//! back in the thread's batch or stash, with no destructor left to flush them, they would be
//! lost with the thread (the page never empty again, the mapping never reused or unmapped).
//!
//! One test in its own binary, so that no other test's blocks move the figures.

use core::alloc::Layout;
use core::ffi::c_void;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PitlaneAlloc, class_stats, stats};

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

/// A size of the 12 KiB class, which nothing else in this binary uses.
const SMALL: usize = 12_000;
const SMALL_CLASS: usize = 12_288;
/// A large block that fits a thread's stash.
const LARGE: usize = 200 * 1024;

fn small() -> Layout {
    Layout::from_size_align(SMALL, 8).unwrap()
}

fn large() -> Layout {
    Layout::from_size_align(LARGE, 8).unwrap()
}

extern "C" fn free_small_late(block: *mut c_void) {
    let block = block.cast::<u8>();
    // SAFETY: the block the thread stored under the key, of `SMALL` bytes, freed once.
    unsafe {
        assert!((0..SMALL).all(|i| block.add(i).read() == 0x5A));
        PitlaneAlloc::new().deallocate(core::ptr::NonNull::new(block).unwrap(), small());
    }
}

extern "C" fn free_large_late(block: *mut c_void) {
    let block = block.cast::<u8>();
    // SAFETY: the block the thread stored under the key, of `LARGE` bytes, freed once.
    unsafe {
        assert!(
            (0..LARGE)
                .step_by(4096)
                .all(|i| block.add(i).read() == 0xA5)
        );
        PitlaneAlloc::new().deallocate(core::ptr::NonNull::new(block).unwrap(), large());
    }
}

fn small_blocks_in_use() -> usize {
    class_stats()
        .iter()
        .find(|c| c.block_size == SMALL_CLASS)
        .unwrap()
        .blocks_in_use
}

#[test]
fn frees_from_key_destructors_that_run_after_the_allocators_reach_their_pages() {
    // The allocator's key exists (it is made at the first allocation) before ours.
    drop(Box::new(1u8));
    let mut small_key: libc::pthread_key_t = 0;
    let mut large_key: libc::pthread_key_t = 0;
    // SAFETY: plain libc calls with valid arguments; the destructors never unwind (they
    // abort the process if an assertion fails, which fails the test).
    unsafe {
        assert_eq!(
            libc::pthread_key_create(&mut small_key, Some(free_small_late)),
            0
        );
        assert_eq!(
            libc::pthread_key_create(&mut large_key, Some(free_large_late)),
            0
        );
    }
    pitlane_alloc::collect();
    let small_before = small_blocks_in_use();
    let cached_before = stats().large_cached;

    for _ in 0..4 {
        std::thread::spawn(move || {
            let a = PitlaneAlloc::new();
            let s = a.allocate(small()).unwrap().cast::<u8>().as_ptr();
            let l = a.allocate(large()).unwrap().cast::<u8>().as_ptr();
            // SAFETY: live blocks of these sizes, handed to the key destructors.
            unsafe {
                s.write_bytes(0x5A, SMALL);
                l.write_bytes(0xA5, LARGE);
                libc::pthread_setspecific(small_key, s.cast());
                libc::pthread_setspecific(large_key, l.cast());
            }
        })
        .join()
        .unwrap();
    }

    // Gives back what no block uses: the exited threads' emptied pages and every cached
    // large mapping.
    pitlane_alloc::collect();
    assert_eq!(
        small_blocks_in_use(),
        small_before,
        "a block freed after the allocator's key destructor stayed in use"
    );
    assert_eq!(
        stats().large_cached,
        cached_before,
        "a large mapping freed after the allocator's key destructor was kept where no one \
         will find it"
    );
}
