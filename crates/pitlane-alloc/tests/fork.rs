//! `fork()` while other threads allocate leaves a working allocator in the child.

use pitlane_alloc::PitlaneAlloc;
use std::sync::atomic::{AtomicBool, Ordering};

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
        for _ in 0..10 {
            // SAFETY: the child only allocates, runs threads and exits with `_exit`.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                let ok = std::panic::catch_unwind(|| {
                    let here = churn(7);
                    let there = std::thread::spawn(|| churn(8)).join().unwrap();
                    here > 0 && there > 0
                });
                // SAFETY: ends the child without running the parent's test harness.
                unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
            }
            let mut status = 0;
            // SAFETY: waits for our own child.
            let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(waited, pid);
            assert!(libc::WIFEXITED(status), "child died: status {status}");
            assert_eq!(libc::WEXITSTATUS(status), 0, "child failed");
        }
        stop.store(true, Ordering::Relaxed);
    });
}
