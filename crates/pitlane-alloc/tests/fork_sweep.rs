//! `fork()` while another thread is in the middle of a sweep (the purge policy's pass over
//! the parked heaps, the large cache and the free pages, which runs one at a time): the
//! child must still be able to sweep, so that `collect()` and the purge policy give memory
//! back there. A sweep cut short by the fork belongs to a thread the child does not have.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use allocator_api2::alloc::Allocator;
use core::alloc::Layout;
use pitlane_alloc::{PitlaneAlloc, stats};
use pitlane_testkit::child::wait_for_child;

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

/// In the child: a freed 2 MiB block goes to the shared large cache (too long for the
/// thread's stash), and `collect()` must unmap it. Returns whether it did.
fn child_can_sweep() -> bool {
    const SIZE: usize = 2 << 20;
    let a = PitlaneAlloc::new();
    let layout = Layout::from_size_align(SIZE, 8).unwrap();
    let Ok(block) = a.allocate(layout) else {
        return false;
    };
    // SAFETY: allocated just above with `layout`, freed once.
    unsafe { a.deallocate(block.cast(), layout) };
    let cached = stats().large_cached;
    pitlane_alloc::collect();
    stats().large_cached + SIZE <= cached
}

#[test]
fn the_child_of_a_fork_during_a_sweep_can_sweep() {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Sweeps back to back (each `collect` is a forced sweep), with blocks to sweep.
        s.spawn(|| {
            let a = PitlaneAlloc::new();
            let layout = Layout::from_size_align(3 << 20, 8).unwrap();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(b) = a.allocate(layout) {
                    // SAFETY: allocated just above, freed once.
                    unsafe { a.deallocate(b.cast(), layout) };
                }
                pitlane_alloc::collect();
            }
        });
        let (mut failed, mut first_failure) = (0, None);
        for _ in 0..200 {
            // SAFETY: the child only allocates, frees and reads the allocator's figures, and
            // exits with `_exit`.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                failed += 1;
                first_failure.get_or_insert("fork failed".to_string());
                break;
            }
            if pid == 0 {
                let ok = child_can_sweep();
                // SAFETY: ends the child without running the parent's test harness.
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            // A child stuck on a lock the fork left held is killed and counted, not waited
            // for forever.
            if let Err(failure) = wait_for_child(pid, Duration::from_secs(60)) {
                failed += 1;
                first_failure.get_or_insert(failure);
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert_eq!(
            failed, 0,
            "children that could not sweep, of 200; the first: {first_failure:?}"
        );
    });
}
