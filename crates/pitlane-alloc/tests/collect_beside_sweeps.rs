//! `collect()` gives everything back even while another thread is sweeping.
//!
//! `collect` ends in a forced sweep, and only one sweep runs at a time: a thread that finds
//! another one sweeping returns at once. Were the forced sweep of `collect` to return that
//! way, beside an ordinary sweep of another thread's slow path (which keeps young memory),
//! `collect` would give back nothing, though it promises every cached large mapping and
//! every free page whatever the delay.
//!
//! Here two threads release small pages all the time under a short purge delay, so that their
//! slow paths sweep every millisecond, and many parked heaps make each sweep long; the test
//! thread frees a large block (a mapping too long for its stash, so it goes to the shared
//! cache) and calls `collect()`, again and again. No other thread makes large blocks, so
//! after each `collect()` the cache must be empty. With the forced sweep returning beside
//! another one (before the fix in `pool::sweep_now`), the release binary failed 14 of 50 runs
//! beside two busy loops (runs of up to ten calls in a row that left the 2 MiB mapping
//! cached: a sweeping thread preempted); with the fix, 0 of 200.
//!
//! One test in its own binary (the policy is the whole process's); PitlaneAlloc is not the
//! global allocator here.
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;
use std::sync::atomic::{AtomicBool, Ordering};

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PitlaneAlloc, PurgePolicy};
use pitlane_testkit::stress::run_threads;

/// Sets its flag when dropped, on a panic too.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn small(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

#[test]
fn collect_empties_the_large_cache_while_other_threads_sweep() {
    let a = PitlaneAlloc::new();
    // Sweeps due every millisecond; young memory kept by an ordinary sweep (64 MiB budget,
    // ten seconds), so only a forced one empties the cache.
    pitlane_alloc::set_purge_policy(PurgePolicy {
        delay_ms: 2,
        ..PurgePolicy::default()
    });
    // Parked heaps for every sweep to visit, many, so that a sweep takes a while: threads
    // that leave a block of each class live (leaked), so that their pages stay with their
    // parked heaps.
    run_threads(256, |_| {
        for size in (8usize..=16384)
            .step_by(8)
            .filter(|&s| s.is_power_of_two() || s % 1024 == 0)
        {
            let _leaked = a.allocate(small(size)).unwrap();
        }
    });
    let rounds = if cfg!(debug_assertions) { 300 } else { 2000 };
    let large = Layout::from_size_align(2 << 20, 8).unwrap();
    let stop = AtomicBool::new(false);
    let missed = run_threads(3, |t| {
        if t > 0 {
            // Churn: fill a few pages of one class and free them all, so that the pages
            // other than the current one go back to the pool (a slow path that sweeps).
            let layout = small(1024);
            let mut blocks = Vec::with_capacity(256);
            while !stop.load(Ordering::Acquire) {
                for _ in 0..256 {
                    blocks.push(a.allocate(layout).unwrap().cast::<u8>());
                }
                for p in blocks.drain(..) {
                    // SAFETY: allocated above with this layout, freed once.
                    unsafe { a.deallocate(p, layout) };
                }
            }
            return Vec::new();
        }
        let _stop = SetOnDrop(&stop);
        let mut missed = Vec::new();
        for round in 0..rounds {
            let p = a.allocate(large).unwrap().cast::<u8>();
            // SAFETY: allocated above with this layout, freed once.
            unsafe { a.deallocate(p, large) };
            pitlane_alloc::collect();
            let cached = pitlane_alloc::stats().large_cached;
            if cached != 0 {
                missed.push((round, cached));
            }
        }
        missed
    });
    let missed = &missed[0];
    assert!(
        missed.is_empty(),
        "{} of {rounds} calls of collect() left the large cache holding bytes \
         (round, bytes): {:?}",
        missed.len(),
        &missed[..missed.len().min(10)]
    );
}
