//! The orphan heap: the shared heap that serves allocations made late in a thread's exit
//! (here, by the destructor of a `pthread` key created after the allocator's, which runs
//! after the allocator's own has parked the thread's heap) and allocations that race the
//! allocator's initialisation on another thread. No thread owns it, so every free of its
//! blocks is a remote free; once they are all freed, `collect()` must give its pages back to
//! the pool and `stats()` must stop counting them. Before the sweep visited the orphan heap,
//! they stayed owned and in use for good (`tests/stress_handover.rs` saw 4 MB of them, from a
//! producer that raced the initialisation under load).
//!
//! One test in its own binary, and `PitlaneAlloc` is not the global allocator here, so the
//! figures are this test's blocks.
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;
use core::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Mutex;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PitlaneAlloc, class_stats, stats};

/// A size of the 12 KiB class (five blocks to a 64 KiB page), which nothing else here uses.
const SIZE: usize = 12_000;
const CLASS: usize = 12_288;
/// Blocks each exiting thread allocates late: more than two pages' worth, so the orphan heap
/// has pages that are not the current page of the class, and full ones.
const BLOCKS: usize = 12;
const THREADS: usize = 3;

/// The blocks the late destructors allocated, for the test thread to free.
static LATE_BLOCKS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn layout() -> Layout {
    Layout::from_size_align(SIZE, 8).unwrap()
}

extern "C" fn allocate_late(_value: *mut c_void) {
    let mut made = Vec::with_capacity(BLOCKS);
    for i in 0..BLOCKS {
        let block = PitlaneAlloc::new()
            .allocate(layout())
            .expect("a late allocation")
            .cast::<u8>();
        // SAFETY: a fresh block of SIZE bytes.
        unsafe { block.as_ptr().write_bytes(i as u8, SIZE) };
        made.push(block.as_ptr().expose_provenance());
    }
    LATE_BLOCKS.lock().unwrap().extend(made);
}

fn class_in_use() -> (usize, usize) {
    let class = class_stats()
        .into_iter()
        .find(|c| c.block_size == CLASS)
        .unwrap();
    (class.pages, class.blocks_in_use)
}

#[test]
fn pages_of_blocks_allocated_in_a_late_thread_exit_go_back_to_the_pool_once_freed() {
    // The allocator's key exists (its first allocation makes it) before ours.
    let first = PitlaneAlloc::new().allocate(layout()).unwrap();
    // SAFETY: allocated just above with this layout.
    unsafe { PitlaneAlloc::new().deallocate(first.cast(), layout()) };
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a plain libc call with valid arguments; the destructor never unwinds (a failed
    // `expect` in it aborts the process, which fails the test).
    let made = unsafe { libc::pthread_key_create(&mut key, Some(allocate_late)) };
    assert_eq!(made, 0);
    pitlane_alloc::collect();
    let before = class_in_use();
    let in_use_before = stats().in_use;
    assert_eq!(before, (0, 0), "nothing of the class is in use yet");

    for _ in 0..THREADS {
        std::thread::spawn(move || {
            // A heap of its own first, so that the allocator's key destructor runs (and
            // parks it) before ours; ours then allocates from the orphan heap.
            let warm = Layout::new::<u64>();
            let block = PitlaneAlloc::new().allocate(warm).unwrap();
            // SAFETY: allocated just above with this layout.
            unsafe { PitlaneAlloc::new().deallocate(block.cast(), warm) };
            // A non-null value, so that the destructor runs at the thread's exit.
            // SAFETY: the key exists; the value is never dereferenced.
            unsafe { libc::pthread_setspecific(key, NonNull::<u8>::dangling().as_ptr().cast()) };
        })
        .join()
        .unwrap();
    }
    let blocks = std::mem::take(&mut *LATE_BLOCKS.lock().unwrap());
    assert_eq!(blocks.len(), THREADS * BLOCKS, "every late destructor ran");
    let (pages, in_use) = class_in_use();
    assert_eq!(
        in_use,
        THREADS * BLOCKS,
        "the late blocks are counted in use"
    );
    // Five blocks of the class to a 64 KiB page.
    assert!(pages >= (THREADS * BLOCKS).div_ceil(5), "{pages} pages");

    // This thread frees them all: remote frees into the orphan heap's pages.
    for (n, &addr) in blocks.iter().enumerate() {
        let block = std::ptr::with_exposed_provenance_mut::<u8>(addr);
        // SAFETY: a live block of SIZE bytes filled by `allocate_late`, freed once here.
        unsafe {
            let fill = (n % BLOCKS) as u8;
            assert!((0..SIZE).all(|i| block.add(i).read() == fill), "block {n}");
            PitlaneAlloc::new().deallocate(NonNull::new(block).unwrap(), layout());
        }
    }
    pitlane_alloc::collect();
    assert_eq!(
        class_in_use(),
        (0, 0),
        "the orphan heap's emptied pages stayed owned, their freed blocks counted in use"
    );
    assert!(stats().in_use <= in_use_before);
}
