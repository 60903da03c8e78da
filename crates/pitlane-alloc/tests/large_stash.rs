//! The freed large mappings a thread keeps in its own stash go back to the shared cache when
//! the thread exits (its key destructor), so `collect` can unmap them: none is lost with the
//! thread. One test in its own binary, so that no other test's large blocks move the figures.

use allocator_api2::alloc::Allocator;
use core::alloc::Layout;
use pitlane_alloc::{PitlaneAlloc, stats};

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

#[test]
fn an_exiting_threads_stash_goes_back_to_the_cache() {
    const SIZE: usize = 300 * 1024;
    pitlane_alloc::collect();
    // What other threads (the harness's) keep in their stashes; unchanged while they wait.
    let before = stats().large_cached;
    std::thread::spawn(move || {
        let a = PitlaneAlloc::new();
        let layout = Layout::from_size_align(SIZE, 8).unwrap();
        let blocks: Vec<_> = (0..3).map(|_| a.allocate(layout).unwrap()).collect();
        for b in &blocks {
            // SAFETY: a live block of `SIZE` bytes.
            unsafe { b.cast::<u8>().as_ptr().write_bytes(7, SIZE) };
        }
        for b in blocks {
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { a.deallocate(b.cast(), layout) };
        }
        // Freed, kept for reuse: counted as cached, whether stashed or in the shared cache.
        assert!(stats().large_cached >= before + 3 * SIZE);
        // The thread's next large block of that size reuses one of them.
        let again = a.allocate(layout).unwrap();
        assert!(stats().large_cached >= before + 2 * SIZE);
        // SAFETY: allocated just above, freed once.
        unsafe { a.deallocate(again.cast(), layout) };
    })
    .join()
    .unwrap();
    pitlane_alloc::collect();
    assert_eq!(
        stats().large_cached,
        before,
        "the exited thread's stash was not given back"
    );
}
