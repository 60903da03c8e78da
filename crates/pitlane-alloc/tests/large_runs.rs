//! Which cached run of freed address space a large block takes: a thread's own runs first,
//! then the runs of threads that exited, and only then the runs of threads still running
//! (whose blocks may want to grow into them again); and where a growing block moves. Tests of
//! their own binary, one at a time (`SERIAL`), so that no other test's large blocks are in the
//! cache.

use allocator_api2::alloc::Allocator;
use core::alloc::Layout;
use pitlane_alloc::{PitlaneAlloc, PurgePolicy};
use std::sync::{Mutex, mpsc};

/// Held by each test: the cache is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
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

/// Keeps every cached run for the whole test, whatever the clock; returns the policy to put
/// back at the end.
fn keep_every_run() -> PurgePolicy {
    let old = pitlane_alloc::purge_policy();
    pitlane_alloc::set_purge_policy(PurgePolicy {
        delay_ms: 1 << 40,
        retain_ms: 1 << 40,
        ..old
    });
    old
}

#[test]
fn a_large_block_takes_an_exited_threads_run_before_a_running_threads() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let old = keep_every_run();
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

#[test]
fn a_block_that_grows_out_of_its_run_moves_to_the_longest_run_and_grows_there_in_place() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let old = keep_every_run();
    std::thread::spawn(|| {
        let a = PitlaneAlloc::new();
        let mib = |n: usize| Layout::from_size_align(n << 20, 8).unwrap();
        // Three runs of this thread's, kept apart by live blocks so that they do not merge:
        // 2 MiB, 6 MiB and 16 MiB.
        let mut runs = Vec::new();
        let mut fences = Vec::new();
        for n in [2, 6, 16] {
            runs.push((a.allocate(mib(n)).unwrap().cast::<u8>(), n));
            fences.push(a.allocate(mib(2)).unwrap().cast::<u8>());
        }
        let long = runs[2].0.as_ptr().addr();
        for &(block, n) in &runs {
            // SAFETY: allocated above with `mib(n)`, freed once.
            unsafe { a.deallocate(block, mib(n)) };
        }
        // A 1 MiB block takes the front of the shortest run; grown to 5 MiB it must move: to
        // the 16 MiB run (the 6 MiB one would hold it too, but not its next growth).
        let block = a.allocate(mib(1)).unwrap().cast::<u8>();
        // SAFETY: a live block of `mib(1)`, grown to a larger size of the same alignment.
        let moved = unsafe { a.grow(block, mib(1), mib(5)) }
            .unwrap()
            .cast::<u8>();
        let at = moved.as_ptr().addr();
        assert!(
            (long - 4096..long + (16 << 20)).contains(&at),
            "moved to {at:#x}, not into the 16 MiB run at {long:#x}"
        );
        // SAFETY: as above.
        let grown = unsafe { a.grow(moved, mib(5), mib(12)) }
            .unwrap()
            .cast::<u8>();
        assert_eq!(grown.as_ptr().addr(), at, "the block moved again");
        // SAFETY: the grown block and the fences, each freed once.
        unsafe {
            a.deallocate(grown, mib(12));
            for fence in fences {
                a.deallocate(fence, mib(2));
            }
        }
    })
    .join()
    .unwrap();
    pitlane_alloc::set_purge_policy(old);
    pitlane_alloc::collect();
}
