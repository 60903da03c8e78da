//! The behaviours crossbeam-queue's `SegQueue` tests check, checked of `mpmc::Queue` (written
//! for pitlane; `peer_behaviours.rs` has the first round of these, and this file goes at them
//! harder): smoke through every door, `len`/`is_empty` through pushes and pops, FIFO order
//! across segment boundaries of every small size, `into_iter` of partly consumed queues, drops
//! after random runs of pushes and pops, `static` queues shared by threads, and one- and
//! many-producer order checks on segments of one and two cells, where every push or every
//! other push links a segment.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::mpmc::{DEFAULT_SEGMENT, Queue};
use pitlane_queue::{BagHandle, PopError, PushError, WeakBag};
use pitlane_testkit::drops::Counted;
use pitlane_testkit::stress::run_threads;

/// A small deterministic generator (xorshift), for the random runs.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

#[test]
fn smoke_through_every_door() {
    let queue: Queue<i32> = Queue::default();
    queue.push(1);
    assert_eq!(WeakBag::try_push(&queue, 2), Ok(()));
    BagHandle::push(&&queue, 3);
    queue.handle().push(4);
    assert_eq!(queue.len(), 4);
    assert_eq!(queue.handle().try_pop(), Ok(1));
    assert_eq!(BagHandle::try_pop(&&queue), Ok(2));
    assert_eq!(WeakBag::pop(&queue), Some(3));
    assert_eq!(queue.try_pop(), Ok(4));
    assert_eq!(queue.try_pop(), Err(PopError::Empty));
    assert_eq!(queue.handle().pop(), None);
    assert!(format!("{queue:?}").contains("Queue"));
}

fn len_follows<const S: usize>() {
    let queue: Queue<usize, S> = Queue::with_segment_size();
    let mut model = std::collections::VecDeque::new();
    let mut next = 0;
    // Waves: push a few more than are popped, then drain, so that head and tail segments
    // are apart and together in turn.
    for wave in 0..30 {
        for _ in 0..(wave % 7 + 3) {
            queue.push(next);
            model.push_back(next);
            next += 1;
            assert_eq!(queue.len(), model.len());
            assert!(!queue.is_empty());
            for _ in 0..(wave % 3) {
                assert_eq!(queue.pop(), model.pop_front());
                assert_eq!(queue.len(), model.len());
                assert_eq!(queue.is_empty(), model.is_empty());
            }
        }
        if wave % 4 == 3 {
            while let Some(value) = queue.pop() {
                assert_eq!(Some(value), model.pop_front());
                assert_eq!(queue.len(), model.len());
            }
            assert!(queue.is_empty());
            assert_eq!(queue.try_pop(), Err(PopError::Empty));
        }
    }
    assert_eq!(queue.into_iter().collect::<Vec<_>>(), Vec::from(model));
}

#[test]
fn len_and_is_empty_follow_pushes_and_pops_on_every_small_segment() {
    len_follows::<1>();
    len_follows::<2>();
    len_follows::<3>();
    len_follows::<5>();
    len_follows::<8>();
    len_follows::<DEFAULT_SEGMENT>();
}

#[test]
fn len_never_counts_more_than_was_pushed_while_threads_work() {
    const COUNT: usize = 20_000;
    let queue: Queue<usize, 4> = Queue::with_segment_size();
    let popped = AtomicUsize::new(0);
    run_threads(3, |t| match t {
        0 => (0..COUNT).for_each(|i| queue.push(i)),
        1 => {
            let mut next = 0;
            while next < COUNT {
                if let Some(value) = queue.pop() {
                    assert_eq!(value, next);
                    next += 1;
                    popped.store(next, Ordering::Relaxed);
                }
            }
        }
        _ => {
            while popped.load(Ordering::Relaxed) < COUNT {
                let len = queue.len();
                assert!(len <= COUNT, "len {len} of a queue of at most {COUNT}");
            }
        }
    });
    assert_eq!(queue.len(), 0);
    assert!(queue.is_empty());
}

fn order_across_segments<const S: usize>() {
    let queue: Queue<usize, S> = Queue::with_segment_size();
    let handle = queue.handle();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ S as u64);
    let (mut pushed, mut popped) = (0, 0);
    while popped < 2000 {
        for _ in 0..rng.below(3 * S + 2) {
            if rng.below(2) == 0 {
                queue.push(pushed);
            } else {
                handle.push(pushed);
            }
            pushed += 1;
        }
        for _ in 0..rng.below(3 * S + 2) {
            let value = if rng.below(2) == 0 {
                queue.try_pop()
            } else {
                handle.try_pop()
            };
            match value {
                Ok(value) => {
                    assert_eq!(value, popped, "segment size {S}");
                    popped += 1;
                }
                Err(error) => {
                    assert_eq!(error, PopError::Empty);
                    assert_eq!(popped, pushed);
                }
            }
        }
    }
    drop(handle);
    let rest: Vec<usize> = queue.into_iter().collect();
    assert_eq!(rest, (popped..pushed).collect::<Vec<_>>());
}

#[test]
fn fifo_across_segment_boundaries() {
    order_across_segments::<1>();
    order_across_segments::<2>();
    order_across_segments::<3>();
    order_across_segments::<4>();
    order_across_segments::<7>();
    order_across_segments::<64>();
}

#[test]
fn into_iter_of_a_partly_consumed_queue() {
    for consumed in [0, 1, 2, 3, 4, 5, 9] {
        let queue: Queue<usize, 3> = Queue::with_segment_size();
        (0..10).for_each(|i| queue.push(i));
        (0..consumed).for_each(|i| assert_eq!(queue.pop(), Some(i)));
        let mut items = queue.into_iter();
        assert_eq!(items.size_hint(), (0, Some(10 - consumed)));
        assert_eq!(
            items.by_ref().collect::<Vec<_>>(),
            (consumed..10).collect::<Vec<_>>()
        );
        assert_eq!(items.next(), None);
        assert_eq!(items.size_hint(), (0, Some(0)));
    }
    // Never pushed to: no segment at all.
    let empty: Queue<String> = Queue::new();
    let mut items = empty.into_iter();
    assert_eq!(items.size_hint(), (0, Some(0)));
    assert!(items.next().is_none());
}

#[test]
fn random_runs_of_pushes_and_pops_drop_everything_once() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for _ in 0..40 {
        let drops = AtomicUsize::new(0);
        let queue: Queue<Counted<'_>, 5> = Queue::with_segment_size();
        let (mut pushed, mut popped) = (0, 0);
        for _ in 0..rng.below(6) {
            for _ in 0..rng.below(60) {
                queue.push(Counted::new(pushed, &drops));
                pushed += 1;
            }
            for _ in 0..rng.below(60) {
                if let Some(item) = queue.pop() {
                    assert_eq!(item.id, popped);
                    popped += 1;
                }
            }
        }
        assert_eq!(drops.load(Ordering::Relaxed), popped);
        assert_eq!(queue.len(), pushed - popped);
        if rng.below(2) == 0 {
            drop(queue);
        } else {
            let mut items = queue.into_iter();
            for _ in 0..rng.below(10) {
                drop(items.next());
            }
            drop(items);
        }
        assert_eq!(drops.load(Ordering::Relaxed), pushed);
    }
}

#[test]
fn failed_tries_hand_the_item_back_undropped() {
    // Alone, nothing fails; the error type still hands the value back when something does.
    let drops = AtomicUsize::new(0);
    let item = Counted::new(9, &drops);
    let error = PushError::Transient(item);
    assert!(error.is_transient());
    let item = error.into_inner();
    assert_eq!((item.id, drops.load(Ordering::Relaxed)), (9, 0));
    let queue: Queue<Counted<'_>, 1> = Queue::with_segment_size();
    assert!(queue.try_push(item).is_ok());
    assert_eq!(drops.load(Ordering::Relaxed), 0);
}

/// Queues that are `static`, made by the `const` constructors, shared by threads without an
/// `Arc`.
static JOBS: Queue<usize> = Queue::new();
static SMALL_JOBS: Queue<usize, 2> = Queue::with_segment_size();

#[test]
fn static_queues_shared_by_threads() {
    const PER_THREAD: usize = 2_000;
    run_threads(4, |t| {
        let handle = SMALL_JOBS.handle();
        for i in 0..PER_THREAD {
            JOBS.push(t * PER_THREAD + i);
            handle.push(t * PER_THREAD + i);
        }
    });
    assert_eq!(
        (JOBS.len(), SMALL_JOBS.len()),
        (4 * PER_THREAD, 4 * PER_THREAD)
    );
    let seen: Vec<AtomicUsize> = (0..4 * PER_THREAD).map(|_| AtomicUsize::new(0)).collect();
    run_threads(4, |_| {
        let mut last = [None::<usize>; 4];
        while let Some(value) = JOBS.pop() {
            seen[value].fetch_add(1, Ordering::Relaxed);
            let producer = value / PER_THREAD;
            assert!(last[producer].is_none_or(|before| before < value));
            last[producer] = Some(value);
        }
        while let Some(value) = SMALL_JOBS.pop() {
            seen[value].fetch_add(1, Ordering::Relaxed);
        }
    });
    assert!(seen.iter().all(|count| count.load(Ordering::Relaxed) == 2));
    assert!(JOBS.is_empty() && SMALL_JOBS.is_empty());
}

/// One producer, one consumer, through handles and `try_` calls that retry by hand.
fn spsc_order<const S: usize>(count: usize) {
    let queue: Queue<usize, S> = Queue::with_segment_size();
    run_threads(2, |t| {
        let handle = queue.handle();
        if t == 0 {
            for i in 0..count {
                let mut item = i;
                while let Err(back) = handle.try_push(item) {
                    item = back.into_inner();
                }
            }
        } else {
            let mut next = 0;
            while next < count {
                match handle.try_pop() {
                    Ok(value) => {
                        assert_eq!(value, next, "segment size {S}");
                        next += 1;
                    }
                    Err(PopError::Empty | PopError::Transient) => {}
                }
            }
            assert_eq!(handle.try_pop(), Err(PopError::Empty));
        }
    });
    assert!(queue.is_empty());
}

#[test]
fn spsc_keeps_order_on_the_smallest_segments() {
    spsc_order::<1>(20_000);
    spsc_order::<2>(20_000);
    spsc_order::<3>(20_000);
}

/// `PRODUCERS` producers and `CONSUMERS` consumers; each consumer sees each producer's values
/// in the order they were pushed, and every value arrives once.
fn mpmc_order<const S: usize>(producers: usize, consumers: usize, per_producer: usize) {
    let queue: Queue<usize, S> = Queue::with_segment_size();
    let seen: Vec<AtomicUsize> = (0..producers * per_producer)
        .map(|_| AtomicUsize::new(0))
        .collect();
    let arrived = AtomicUsize::new(0);
    run_threads(producers + consumers, |t| {
        if t < producers {
            let handle = queue.handle();
            for i in 0..per_producer {
                if i % 2 == 0 {
                    handle.push(t * per_producer + i);
                } else {
                    queue.push(t * per_producer + i);
                }
            }
        } else {
            let mut last = vec![None::<usize>; producers];
            let handle = queue.handle();
            while arrived.load(Ordering::Relaxed) < seen.len() {
                let value = if t % 2 == 0 {
                    handle.pop()
                } else {
                    queue.pop()
                };
                if let Some(value) = value {
                    let producer = value / per_producer;
                    assert!(
                        last[producer].is_none_or(|before| before < value),
                        "producer {producer}: {value} after {:?}",
                        last[producer]
                    );
                    last[producer] = Some(value);
                    assert_eq!(seen[value].fetch_add(1, Ordering::Relaxed), 0);
                    arrived.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    assert!(seen.iter().all(|count| count.load(Ordering::Relaxed) == 1));
    assert!(queue.is_empty());
}

#[test]
fn mpmc_keeps_each_producers_order_on_small_segments() {
    mpmc_order::<1>(2, 2, 5_000);
    mpmc_order::<2>(3, 1, 3_000);
    mpmc_order::<3>(1, 3, 8_000);
    mpmc_order::<DEFAULT_SEGMENT>(2, 2, 5_000);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
