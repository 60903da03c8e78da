//! More threads alive at once than there are seats (128): the threads without one take the
//! shared paths (the stack's shared free list and count with a loaded top, the queue's epoch
//! pins instead of eras) while the seated ones use their stashes, guesses and eras, on the same
//! structure at the same time. Per-value counters catch a lost or duplicated value; the queue has
//! 2-cell segments, so segments are retired and recycled all along, with some of the threads
//! protected by eras and the others by the epoch.
//!
//! A Bagpipe of stacks hands its seated threads' seat to each stack it tries, and lets the
//! others' calls find their own way: both kinds run on it at once too, and a plain call from a
//! thread-local destructor, after its thread gave its seat back, takes the seatless way.
//!
//! The threads are started with `pitlane_testkit::stress::run_threads` (seen by
//! ThreadSanitizer), and only our own atomics synchronize them.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::WeakBag;
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;
use pitlane_testkit::stress::run_threads;

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

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

#[test]
fn a_bagpipe_of_stacks_with_more_threads_than_seats_loses_and_duplicates_nothing() {
    all_alive_some_without_a_seat(&Bagpipe::<Stack<usize>>::with_pipes(4).unwrap());
}

#[test]
fn a_bagpipe_call_from_a_thread_local_destructor_after_the_seat_went_back_loses_nothing() {
    use std::sync::{Arc, mpsc};

    type Bag = Arc<Bagpipe<Stack<usize>>>;
    struct LateCalls(Bag, mpsc::Sender<Vec<usize>>);
    impl Drop for LateCalls {
        fn drop(&mut self) {
            // Runs after the seat's own destructor (registered later, so run earlier): these
            // plain calls find no seat, and must not touch the stash of the seat given back.
            (100..200).for_each(|i| self.0.push(i));
            let popped = (0..150).filter_map(|_| self.0.pop()).collect();
            let _ = self.1.send(popped);
        }
    }
    std::thread_local! {
        static LATE: std::cell::RefCell<Option<LateCalls>> = const { std::cell::RefCell::new(None) };
    }
    let bag: Bag = Arc::new(Bagpipe::with_pipes(4).unwrap());
    let (tell, told) = mpsc::channel();
    let in_thread = Arc::clone(&bag);
    std::thread::spawn(move || {
        // Registers `LATE`'s destructor before the seat's.
        LATE.with(|late| *late.borrow_mut() = Some(LateCalls(Arc::clone(&in_thread), tell)));
        // Takes a seat; its calls are seated from here on.
        (0..100).for_each(|i| in_thread.push(i));
        let popped = in_thread.pop().expect("an item");
        in_thread.push(popped);
    })
    .join()
    .unwrap();
    let late = told.recv().unwrap();
    let mut all: Vec<usize> = late.clone();
    all.extend(core::iter::from_fn(|| bag.pop()));
    all.sort_unstable();
    assert_eq!(late.len(), 150, "the late pops found every item");
    assert_eq!(all, (0..200).collect::<Vec<_>>());
}
