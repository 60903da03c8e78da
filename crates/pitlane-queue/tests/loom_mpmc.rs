//! Loom models of the fetch-and-add queue: the cell protocol (publish against poison) and the
//! segment hand-off (linking, moving `tail` and `head`, retiring).
//!
//! Segments of two cells make every model cross segment boundaries after a few operations.
//! Under `cfg(pitlane_loom)` the queue keeps retired segments until it is dropped instead of
//! handing them to crossbeam-epoch (which loom cannot model), so these models check every
//! atomic of the protocol itself, and loom's `UnsafeCell` tracking checks that no two threads
//! ever touch a value at once.
//!
//! The operations that race each run in a spawned thread, never on the main thread right after
//! the spawn: loom does not run a spawned thread ahead of the main thread's first steps, so a
//! model with the racing operation on the main thread explored a single execution (see
//! docs/notes/loom-coverage.md).
//!
//! ```text
//! RUSTFLAGS="--cfg pitlane_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test --release -p pitlane-queue --test 'loom_*'
//! ```
#![cfg(pitlane_loom)]

use loom::sync::Arc;
use loom::thread;

use pitlane_queue::PopError;
use pitlane_queue::mpmc::Queue;

type Small = Queue<usize, 2>;

/// Pops everything left, with the retrying `pop`.
fn drain(queue: &Small) -> Vec<usize> {
    std::iter::from_fn(|| queue.pop()).collect()
}

#[test]
fn a_push_racing_a_pop_is_delivered_exactly_once() {
    loom::model(|| {
        let queue = Arc::new(Small::with_segment_size());
        let pusher = {
            let queue = queue.clone();
            thread::spawn(move || queue.push(7))
        };
        // One attempt: it may find the cell before the value (poisoning it) or nothing at all.
        // Both sides run in spawned threads (see the module doc).
        let popper = {
            let queue = queue.clone();
            thread::spawn(move || queue.try_pop())
        };
        pusher.join().unwrap();
        let first = popper.join().unwrap();
        let rest = drain(&queue);
        match first {
            Ok(value) => {
                assert_eq!(value, 7);
                assert!(rest.is_empty());
            }
            Err(PopError::Empty | PopError::Transient) => assert_eq!(rest, [7]),
        }
    });
}

#[test]
fn try_push_against_try_pop_loses_nothing() {
    loom::model(|| {
        let queue = Arc::new(Small::with_segment_size());
        let pusher = {
            let queue = queue.clone();
            // A single attempt: it fails only if the pop poisoned its cell.
            thread::spawn(move || queue.try_push(1).is_ok())
        };
        let popper = {
            let queue = queue.clone();
            thread::spawn(move || queue.try_pop())
        };
        let pushed = pusher.join().unwrap();
        let popped = popper.join().unwrap();
        let rest = drain(&queue);
        match (pushed, popped) {
            (true, Ok(1)) => assert!(rest.is_empty()),
            (true, Err(_)) => assert_eq!(rest, [1]),
            (false, Err(PopError::Transient)) => assert!(rest.is_empty()),
            other => panic!("impossible outcome {other:?} (then {rest:?})"),
        }
    });
}

#[test]
fn one_producer_crossing_segments_keeps_fifo_order() {
    loom::model(|| {
        let queue = Arc::new(Small::with_segment_size());
        let producer = {
            let queue = queue.clone();
            // Three pushes fill segment 0 and link segment 1.
            thread::spawn(move || (1..=3).for_each(|v| queue.push(v)))
        };
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || [queue.pop(), queue.pop()])
        };
        producer.join().unwrap();
        let mut got: Vec<usize> = consumer.join().unwrap().into_iter().flatten().collect();
        got.extend(drain(&queue));
        assert_eq!(got, [1, 2, 3]);
    });
}

#[test]
fn two_producers_linking_the_next_segment_lose_nothing() {
    loom::model(|| {
        let queue = Arc::new(Small::with_segment_size());
        queue.push(0);
        // Segment 0 has one free cell: the two pushes race for it and for linking segment 1.
        let producers: Vec<_> = [10, 20]
            .into_iter()
            .map(|value| {
                let queue = queue.clone();
                thread::spawn(move || queue.push(value))
            })
            .collect();
        for producer in producers {
            producer.join().unwrap();
        }
        let mut got = drain(&queue);
        assert_eq!(got[0], 0);
        got.sort_unstable();
        assert_eq!(got, [0, 10, 20]);
        assert_eq!(queue.len(), 0);
    });
}

#[test]
fn two_consumers_moving_head_share_the_values() {
    loom::model(|| {
        let queue = Arc::new(Small::with_segment_size());
        // Segment 0 full, segment 1 holds one value: the pops race over the head hand-off.
        (1..=3).for_each(|v| queue.push(v));
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                thread::spawn(move || [queue.pop(), queue.pop()])
            })
            .collect();
        let mut got: Vec<usize> = consumers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .flatten()
            .collect();
        got.sort_unstable();
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(queue.pop(), None);
    });
}

#[test]
fn a_pop_concurrent_with_a_segment_link_sees_the_value_or_empty() {
    loom::model(|| {
        let queue = Arc::new(Small::with_segment_size());
        queue.push(1);
        queue.push(2);
        assert_eq!(queue.pop(), Some(1));
        assert_eq!(queue.pop(), Some(2));
        // Segment 0 is exhausted: the push links segment 1 while the pop moves `head` to it.
        let pusher = {
            let queue = queue.clone();
            thread::spawn(move || queue.push(3))
        };
        let popper = {
            let queue = queue.clone();
            thread::spawn(move || queue.pop())
        };
        pusher.join().unwrap();
        let popped = popper.join().unwrap();
        match popped {
            Some(value) => {
                assert_eq!(value, 3);
                assert_eq!(queue.pop(), None);
            }
            None => assert_eq!(queue.pop(), Some(3)),
        }
    });
}

#[test]
fn poison_and_link_races_between_three_threads_lose_nothing() {
    loom::model(|| {
        let queue = Arc::new(Small::with_segment_size());
        queue.push(0);
        // One free cell left in segment 0: the two pushes race for it, for linking segment 1,
        // and with pops that may poison the cells they were promised.
        let producers: Vec<_> = [1, 2]
            .into_iter()
            .map(|value| {
                let queue = queue.clone();
                thread::spawn(move || queue.push(value))
            })
            .collect();
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || [queue.try_pop(), queue.try_pop()])
        };
        for producer in producers {
            producer.join().unwrap();
        }
        let mut got: Vec<usize> = consumer.join().unwrap().into_iter().flatten().collect();
        got.extend(drain(&queue));
        assert_eq!(
            got[0], 0,
            "FIFO: the value pushed before the race comes first"
        );
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2]);
    });
}

/// A value above the announcement threshold: its pusher marks the cell `WRITING` first.
type Large = [usize; 9];

#[test]
fn an_announced_push_racing_a_pop_is_delivered_exactly_once() {
    loom::model(|| {
        let queue = Arc::new(Queue::<Large, 2>::with_segment_size());
        let pusher = {
            let queue = queue.clone();
            // One attempt: it fails only if the pop poisoned its cell, before or during the
            // write.
            thread::spawn(move || queue.try_push([7; 9]).is_ok())
        };
        let popper = {
            let queue = queue.clone();
            thread::spawn(move || queue.try_pop())
        };
        let pushed = pusher.join().unwrap();
        let popped = popper.join().unwrap();
        let rest: Vec<Large> = std::iter::from_fn(|| queue.pop()).collect();
        match (pushed, popped) {
            (true, Ok(value)) => {
                assert_eq!(value, [7; 9]);
                assert!(rest.is_empty());
            }
            (true, Err(_)) => assert_eq!(rest, [[7; 9]]),
            (false, Err(PopError::Transient)) => assert!(rest.is_empty()),
            other => panic!("impossible outcome {other:?} (then {rest:?})"),
        }
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
