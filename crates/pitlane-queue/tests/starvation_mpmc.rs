//! A polling consumer must not starve a producer of large values: a pop that finds the next
//! cell still being written waits for the writer instead of skipping its ticket. Before that,
//! writing a 64 KiB value (first touch of fresh pages) outlasted the pop's short patience, and
//! a polling consumer poisoned cell after cell: thousands of failed attempts for 64 pushes.
//!
//! Each run counts the failed `try_push` attempts of one producer while one consumer polls
//! `try_pop` in a tight loop, and checks that values arrive whole and in order.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::mpmc::Queue;
use pitlane_testkit::stress::run_threads;

/// Pushes of one run.
const PUSHES: usize = 256;

/// A value of `N` bytes, every byte holding (a function of) the sequence number.
#[derive(Clone)]
struct Value<const N: usize>([u8; N]);

impl<const N: usize> Value<N> {
    fn new(seq: usize) -> Self {
        Self([seq as u8; N])
    }

    fn seq_of_whole(&self) -> u8 {
        let first = self.0[0];
        assert!(self.0.iter().all(|&b| b == first), "a torn value");
        first
    }
}

/// Failed attempts of `PUSHES` pushes of `N`-byte values against a polling consumer.
fn failed_attempts<const N: usize>() -> usize {
    let queue: Queue<Value<N>, 64> = Queue::with_segment_size();
    let failures = AtomicUsize::new(0);
    run_threads(2, |t| {
        if t == 0 {
            let mut failed = 0;
            for seq in 0..PUSHES {
                let mut value = Value::new(seq);
                while let Err(back) = queue.try_push(value) {
                    failed += 1;
                    value = back.into_inner();
                }
            }
            failures.store(failed, Ordering::Relaxed);
        } else {
            let mut next = 0;
            while next < PUSHES {
                if let Ok(value) = queue.try_pop() {
                    assert_eq!(value.seq_of_whole(), next as u8, "out of order");
                    next += 1;
                }
            }
        }
    });
    failures.load(Ordering::Relaxed)
}

#[test]
fn a_polling_consumer_does_not_starve_pushes_of_any_size() {
    let runs = [
        ("64 B", failed_attempts::<64>()),
        ("4 KiB", failed_attempts::<4096>()),
        ("64 KiB", failed_attempts::<65536>()),
    ];
    for (size, failed) in runs {
        println!("{size}: {failed} failed attempts for {PUSHES} pushes");
    }
    for (size, failed) in runs {
        assert!(
            failed * 100 < PUSHES,
            "{size} values: {failed} failed attempts for {PUSHES} pushes"
        );
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
