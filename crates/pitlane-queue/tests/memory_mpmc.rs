//! What an mpmc queue holds on to: retired segments go back to a small pool of the queue once
//! the epoch allows, so one thread pushing and popping large values runs in bounded memory
//! (it once grew the resident set by ~30 MiB for 4 KiB values: three chained epoch deferrals
//! per segment, each segment 4 MiB, all waiting in the thread's deferred-function bag).
//!
//! One test in its own process, so that no other test's memory moves the resident set.
#![cfg(all(not(pitlane_loom), target_os = "linux"))]

use pitlane_queue::mpmc::Queue;

/// The resident set of this process, in KiB.
fn resident_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("a VmRSS line");
    line.split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("VmRSS in kB")
}

#[test]
fn one_thread_pushing_and_popping_4_kib_values_runs_in_bounded_memory() {
    const PAIRS: usize = 200_000;
    let start = resident_kib();
    let queue: Queue<[u8; 4096]> = Queue::new();
    // Warm up: the first segments, the epoch's own structures.
    for i in 0..4096 {
        queue.push([i as u8; 4096]);
        assert_eq!(queue.pop().map(|v| v[4095]), Some(i as u8));
    }
    let before = resident_kib();
    let mut peak = before;
    for i in 0..PAIRS {
        queue.push([i as u8; 4096]);
        assert_eq!(queue.pop().map(|v| v[0]), Some(i as u8));
        if i % 1024 == 0 {
            peak = peak.max(resident_kib());
        }
    }
    let segment_kib = 1024 * (4096 + 8) / 1024;
    println!(
        "resident at start {start} KiB, after warm-up {before} KiB, peak {peak} KiB \
         (one segment is {segment_kib} KiB)"
    );
    // The live segment, the two pooled ones, and the ones still waiting for the epoch.
    assert!(
        peak - start <= 5 * segment_kib,
        "holds {} KiB after {PAIRS} push/pop pairs",
        peak - start
    );
    // And nothing accumulates once the pool is warm.
    assert!(
        peak - before <= segment_kib,
        "grew by {} KiB over {PAIRS} push/pop pairs",
        peak - before
    );
}
