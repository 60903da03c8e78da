//! More threads alive at once than there are seats (128): the threads without one take the
//! shared paths (the stack's shared free list and count with a loaded top, the queue's epoch
//! pins instead of eras) while the seated ones use their stashes, guesses and eras, on the same
//! structure at the same time. Per-value counters catch a lost or duplicated value; the queue has
//! 2-cell segments, so segments are retired and recycled all along, with some of the threads
//! protected by eras and the others by the epoch.
//!
//! The threads are started with `pitlane_testkit::stress::run_threads` (seen by
//! ThreadSanitizer), and only our own atomics synchronize them.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::WeakBag;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;
use pitlane_testkit::stress::run_threads;

/// More than the 128 seats, so that at least 12 threads hold none while all are alive.
const THREADS: usize = 140;
const EACH: usize = 300;

fn all_alive_some_without_a_seat<B: WeakBag<Item = usize> + Sync>(bag: &B) {
    let seen: Vec<AtomicUsize> = (0..THREADS * EACH).map(|_| AtomicUsize::new(0)).collect();
    let arrived = AtomicUsize::new(0);
    let take = |value: usize| {
        seen[value].fetch_add(1, Ordering::Relaxed);
    };
    run_threads(THREADS, |t| {
        let base = t * EACH;
        // The first plain call takes a seat, or finds none left.
        bag.push(base);
        // Every thread is alive (and keeps its seat, or its lack of one) from here on.
        arrived.fetch_add(1, Ordering::AcqRel);
        while arrived.load(Ordering::Acquire) < THREADS {
            std::thread::yield_now();
        }
        for i in 1..EACH {
            bag.push(base + i);
            if i % 2 == 0 {
                if let Some(value) = bag.pop() {
                    take(value);
                }
            }
        }
    });
    let mut drained = 0;
    while let Some(value) = bag.pop() {
        take(value);
        drained += 1;
    }
    assert!(drained > 0);
    for (value, count) in seen.iter().enumerate() {
        assert_eq!(count.load(Ordering::Relaxed), 1, "value {value}");
    }
    assert_eq!(bag.size_guess(), 0);
}

#[test]
fn a_stack_with_more_threads_than_seats_loses_and_duplicates_nothing() {
    all_alive_some_without_a_seat(&Stack::new());
}

#[test]
fn a_queue_with_more_threads_than_seats_loses_and_duplicates_nothing() {
    all_alive_some_without_a_seat(&Queue::<usize, 2>::with_segment_size());
}
