//! Edge parameters of the bags: Bagpipe pipe counts at and past their limits (0, 1,
//! `MAX_PIPES`, `MAX_PIPES + 1`, `usize::MAX`), the bounded push and pop of a Bagpipe and of
//! its handles with budgets 0, 1 and `usize::MAX` (alone, against a full Bagpipe of stacks,
//! and under contention, where a lost race must hand the item back whole), and queues of one-cell
//! segments, where every push links a segment and every pop retires one.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::bagpipe::{Bagpipe, BagpipeError, MAX_PIPES};
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::{MAX_ITEMS, Stack};
use pitlane_queue::{PopError, PushError};
use pitlane_testkit::drops::Counted;
use pitlane_testkit::stress::run_threads;

#[test]
fn pipe_counts_outside_one_to_max_pipes_are_errors() {
    for bad in [0, MAX_PIPES + 1, 2 * MAX_PIPES, usize::MAX] {
        let error = Bagpipe::<Queue<u8>>::with_pipes(bad).unwrap_err();
        assert_eq!(error, BagpipeError::PipeCount { requested: bad });
        let message = error.to_string();
        assert!(message.contains(&bad.to_string()), "{message}");
        assert!(message.contains(&MAX_PIPES.to_string()), "{message}");
        assert_eq!(
            Bagpipe::<Stack<u8>>::with_pipes(bad).unwrap_err(),
            BagpipeError::PipeCount { requested: bad }
        );
    }
}

#[test]
fn pipe_counts_round_up_to_a_power_of_two() {
    for (asked, made) in [
        (1, 1),
        (2, 2),
        (3, 4),
        (5, 8),
        (8, 8),
        (9, 16),
        (1000, 1024),
    ] {
        assert_eq!(
            Bagpipe::<Stack<u8>>::with_pipes(asked)
                .unwrap()
                .pipe_count(),
            made
        );
    }
    let bag: Bagpipe<Queue<u8>> = Bagpipe::new();
    assert!(bag.pipe_count().is_power_of_two());
    assert!(bag.pipe_count() <= MAX_PIPES);
}

#[test]
fn max_pipes_is_allowed_and_works() {
    for asked in [MAX_PIPES / 2 + 1, MAX_PIPES] {
        let bag = Bagpipe::<Queue<u32, 2>>::with_pipes(asked).unwrap();
        assert_eq!(bag.pipe_count(), MAX_PIPES);
        assert_eq!(bag.try_pop(), Err(PopError::Empty));
        let handle = bag.handle();
        assert_eq!(handle.pop_bounded(0), Err(PopError::Empty));
        handle.push(1);
        bag.push(2);
        assert_eq!(bag.size_guess(), 2);
        let mut got = [handle.pop().unwrap(), bag.pop().unwrap()];
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert_eq!(handle.pop(), None);
    }
}

#[test]
fn one_pipe_is_the_pipe_itself() {
    let queues = Bagpipe::<Queue<u32, 2>>::with_pipes(1).unwrap();
    let stacks = Bagpipe::<Stack<u32>>::with_pipes(1).unwrap();
    assert_eq!((queues.pipe_count(), stacks.pipe_count()), (1, 1));
    let (on_queues, on_stacks) = (queues.handle(), stacks.handle());
    for i in 0..10 {
        if i % 2 == 0 {
            queues.push(i);
            stacks.push(i);
        } else {
            on_queues.push(i);
            on_stacks.push(i);
        }
    }
    // With one pipe every item is in it, so pops follow its order.
    let from_queues: Vec<u32> = std::iter::from_fn(|| on_queues.pop()).collect();
    let from_stacks: Vec<u32> = std::iter::from_fn(|| stacks.pop()).collect();
    assert_eq!(from_queues, (0..10).collect::<Vec<_>>());
    assert_eq!(from_stacks, (0..10).rev().collect::<Vec<_>>());
    assert_eq!(on_queues.try_pop(), Err(PopError::Empty));
    assert_eq!(on_stacks.pop_bounded(usize::MAX), Err(PopError::Empty));
}

#[test]
fn bounded_operations_alone_with_every_budget() {
    for pipes in [1, 2, 5] {
        let bag = Bagpipe::<Queue<usize, 2>>::with_pipes(pipes).unwrap();
        let handle = bag.handle();
        for budget in [0, 1, 2, usize::MAX] {
            // Alone nothing loses a race: an empty bag is Empty whatever the budget (0 counts
            // as 1, and empties do not use the budget up), and every push goes in.
            assert_eq!(handle.pop_bounded(budget), Err(PopError::Empty));
            for i in 0..10 {
                assert_eq!(handle.push_bounded(i, budget), Ok(()));
            }
            let mut got: Vec<usize> = (0..10)
                .map(|_| handle.pop_bounded(budget).unwrap())
                .collect();
            got.sort_unstable();
            assert_eq!(got, (0..10).collect::<Vec<_>>());
            assert_eq!(handle.pop_bounded(budget), Err(PopError::Empty));
        }
        // An item in a pipe the handle does not start at is still found with a budget of 0.
        let other = bag.handle();
        other.push(77);
        assert_eq!(handle.pop_bounded(0), Ok(77));
        // The same through the Bagpipe's own bounded calls (the thread's walk, no handle).
        for budget in [0, 1, 2, usize::MAX] {
            assert_eq!(bag.pop_bounded(budget), Err(PopError::Empty));
            for i in 0..10 {
                assert_eq!(bag.push_bounded(i, budget), Ok(()));
            }
            let mut got: Vec<usize> = (0..10).map(|_| bag.pop_bounded(budget).unwrap()).collect();
            got.sort_unstable();
            assert_eq!(got, (0..10).collect::<Vec<_>>());
            assert_eq!(bag.pop_bounded(budget), Err(PopError::Empty));
        }
        other.push(78);
        assert_eq!(bag.pop_bounded(0), Ok(78));
    }
}

#[test]
fn a_full_bagpipe_of_stacks_says_full_and_push_panics() {
    let bag = Bagpipe::<Stack<u32>>::with_pipes(1).unwrap();
    let handle = bag.handle();
    for i in 0..MAX_ITEMS as u32 {
        handle.push(i);
    }
    for budget in [0, 1, usize::MAX] {
        assert_eq!(handle.push_bounded(7, budget), Err(PushError::Full(7)));
        assert_eq!(bag.push_bounded(7, budget), Err(PushError::Full(7)));
    }
    assert_eq!(handle.try_push(8), Err(PushError::Full(8)));
    assert_eq!(bag.try_push(9), Err(PushError::Full(9)));
    let push = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bag.push(10)));
    assert!(push.is_err(), "a push into a full Bagpipe panics");
    // One pop makes room for one push, through any door.
    assert!(handle.pop_bounded(1).is_ok());
    assert_eq!(handle.push_bounded(11, 0), Ok(()));
    assert_eq!(bag.size_guess(), MAX_ITEMS);
}

#[test]
fn bounded_operations_under_contention_hand_items_back_whole() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 3_000;
    let drops = AtomicUsize::new(0);
    let bag = Bagpipe::<Stack<Counted<'_>>>::with_pipes(2).unwrap();
    let (handed_back, popped) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let kept: Vec<Vec<Counted<'_>>> = run_threads(THREADS, |t| {
        // Odd threads call the Bagpipe's own bounded operations, even ones a handle's.
        let handle = (t % 2 == 0).then(|| bag.handle());
        let push = |item, budget| match &handle {
            Some(handle) => handle.push_bounded(item, budget),
            None => bag.push_bounded(item, budget),
        };
        let pop = |budget| match &handle {
            Some(handle) => handle.pop_bounded(budget),
            None => bag.pop_bounded(budget),
        };
        let mut fallback = Vec::new();
        for i in 0..PER_THREAD {
            let id = t * PER_THREAD + i;
            match push(Counted::new(id, &drops), i % 2) {
                Ok(()) => {}
                Err(PushError::Transient(item)) => {
                    assert_eq!(item.id, id, "the very item comes back");
                    handed_back.fetch_add(1, Ordering::Relaxed);
                    fallback.push(item);
                }
                Err(PushError::Full(_)) => panic!("a stack far from full said Full"),
            }
            match pop(i % 3) {
                Ok(item) => {
                    assert!(item.id < THREADS * PER_THREAD);
                    popped.fetch_add(1, Ordering::Relaxed);
                }
                Err(PopError::Empty | PopError::Transient) => {}
            }
        }
        fallback
    });
    let kept: usize = kept.iter().map(Vec::len).sum();
    assert_eq!(kept, handed_back.load(Ordering::Relaxed));
    assert_eq!(
        drops.load(Ordering::Relaxed),
        popped.load(Ordering::Relaxed)
    );
    assert_eq!(
        bag.size_guess() + kept + popped.load(Ordering::Relaxed),
        THREADS * PER_THREAD
    );
    drop(bag);
    assert_eq!(drops.load(Ordering::Relaxed), THREADS * PER_THREAD - kept);
}

#[test]
fn one_cell_segments_alone() {
    let queue: Queue<usize, 1> = Queue::with_segment_size();
    // Every push links a segment, every pop retires one; the pool of spare segments turns.
    for round in 0..500 {
        queue.push(round);
        queue.push(round + 1);
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.pop(), Some(round));
        assert_eq!(queue.pop(), Some(round + 1));
        assert_eq!(queue.try_pop(), Err(PopError::Empty));
        assert!(queue.is_empty());
    }
    let handle = queue.handle();
    (0..1000).for_each(|i| handle.push(i));
    assert_eq!(queue.len(), 1000);
    assert_eq!(
        std::iter::from_fn(|| handle.pop()).collect::<Vec<_>>(),
        (0..1000).collect::<Vec<_>>()
    );
}

#[test]
fn one_cell_segments_between_threads() {
    // Every push races the others to link the next segment; most lose and retry.
    const PER_THREAD: usize = 5_000;
    let queue: Queue<usize, 1> = Queue::with_segment_size();
    let seen: Vec<AtomicUsize> = (0..2 * PER_THREAD).map(|_| AtomicUsize::new(0)).collect();
    let arrived = AtomicUsize::new(0);
    run_threads(4, |t| {
        if t < 2 {
            for i in 0..PER_THREAD {
                let mut item = t * PER_THREAD + i;
                while let Err(back) = queue.try_push(item) {
                    item = back.into_inner();
                }
            }
        } else {
            let mut last = [None::<usize>; 2];
            while arrived.load(Ordering::Relaxed) < seen.len() {
                if let Ok(value) = queue.try_pop() {
                    let producer = value / PER_THREAD;
                    assert!(last[producer].is_none_or(|before| before < value));
                    last[producer] = Some(value);
                    seen[value].fetch_add(1, Ordering::Relaxed);
                    arrived.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    assert!(seen.iter().all(|count| count.load(Ordering::Relaxed) == 1));
    assert!(queue.is_empty());
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
