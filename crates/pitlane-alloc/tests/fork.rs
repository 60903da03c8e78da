//! `fork()` while other threads allocate leaves a working allocator in the child.

use pitlane_alloc::PitlaneAlloc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pitlane_testkit::child::wait_for_child;
use pitlane_testkit::stress::run_threads;

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

fn churn(seed: usize) -> usize {
    let mut keep = Vec::new();
    let mut total = 0;
    for i in 0..20_000usize {
        let v = vec![seed as u8; 1 + (i * 31 + seed) % 5000];
        total += v.len();
        if i % 3 == 0 {
            keep.push(v);
        }
        if keep.len() > 500 {
            keep.clear();
        }
    }
    let big = vec![1u8; 8 << 20];
    total + big.len()
}

#[test]
fn the_child_of_a_fork_during_allocation_can_allocate() {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..3 {
            let stop = &stop;
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    churn(t);
                }
            });
        }
        let forks = (0..10).try_for_each(|_| {
            // SAFETY: the child only allocates, runs threads and exits with `_exit`.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err("fork failed".to_string());
            }
            if pid == 0 {
                let ok = std::panic::catch_unwind(|| {
                    let here = churn(7);
                    // A POSIX thread: `std::thread::spawn`'s start takes a process-wide
                    // lock of the standard library that the fork may have left held (see
                    // `pitlane_testkit::child`).
                    let there = run_threads(1, |_| churn(8))[0];
                    here > 0 && there > 0
                });
                // SAFETY: ends the child without running the parent's test harness.
                unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
            }
            wait_for_child(pid, Duration::from_secs(120))
        });
        // The workers stop whatever happened, so that a failure ends the test instead of
        // leaving the scope waiting for them.
        stop.store(true, Ordering::Relaxed);
        if let Err(failure) = forks {
            panic!("the child of a fork failed: {failure}");
        }
    });
}
