//! What an mpmc queue of small values holds on to: about a mebibyte of retired segments in
//! limbo between two of its process-wide barriers, and about a mebibyte of spare segments in
//! its pool (see the module documentation of `mpmc`, "Reclamation"), whatever the length of
//! the run.
//!
//! One test in its own process, so that no other test's memory moves the resident set.
#![cfg(all(not(pitlane_loom), target_os = "linux"))]

use pitlane_queue::mpmc::Queue;
use pitlane_testkit::memory::resident_kib;

#[test]
fn one_thread_of_u64_pairs_holds_about_two_mebibytes_of_segments_however_long_it_runs() {
    const WARM_UP: u64 = 400_000;
    const PAIRS: u64 = 4_000_000;
    let queue: Queue<u64> = Queue::new();
    let start = resident_kib();
    // Plain calls: retired segments wait in limbo until a barrier lets them go. (One thread:
    // with two, a thread preempted inside a call holds back every segment retired meanwhile,
    // by design, which would make the resident set follow the scheduler.)
    for i in 0..WARM_UP {
        queue.push(i);
        assert_eq!(queue.pop(), Some(i));
    }
    let before = resident_kib();
    // The peak resident set over the first and over the second half of the run.
    let mut peaks = [before, before];
    for i in 0..PAIRS {
        queue.push(i);
        assert_eq!(queue.pop(), Some(i));
        if i % 4096 == 0 {
            let half = &mut peaks[(2 * i / PAIRS) as usize];
            *half = (*half).max(resident_kib());
        }
    }
    let peak = peaks[0].max(peaks[1]);
    println!(
        "resident at start {start} KiB, after warm-up {before} KiB, peaks {peaks:?} KiB \
         (one segment is about 16 KiB)"
    );
    // Limbo (up to 62 segments) and the pool (up to 62), the live segment and those in their
    // grace periods: about 2 MiB. The bound leaves room for the allocator's own slack.
    assert!(
        peak - start <= 4 * 1024,
        "holds {} KiB after {PAIRS} push/pop pairs",
        peak - start
    );
    // And nothing accumulates between the two halves of the run.
    assert!(
        peaks[1] <= peaks[0] + 256,
        "grew from {} to {} KiB between the two halves of {PAIRS} push/pop pairs",
        peaks[0],
        peaks[1]
    );
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
