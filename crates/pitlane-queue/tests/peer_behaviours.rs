//! What the test suites of `crossbeam-queue` (for `SegQueue`) and `rtrb` check of their
//! queues, checked here of pitlane's `mpmc::Queue` and `spsc` queue: written for pitlane, in the
//! same spirit (smoke, lengths, order across threads, drops, iterators, zero-sized values).
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::mpmc::Queue;
use pitlane_queue::spsc::{self, ChunkError};
use pitlane_queue::{PopError, PushError};
use pitlane_testkit::stress::run_threads;

/// A value that counts its drops in a shared counter.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

// --- mpmc::Queue, as SegQueue is tested -------------------------------------------------------

#[test]
fn mpmc_smoke() {
    let queue = Queue::new();
    queue.push(7);
    assert_eq!(queue.pop(), Some(7));
    queue.push(8);
    assert_eq!(queue.pop(), Some(8));
    assert_eq!(queue.pop(), None);
}

#[test]
fn mpmc_len_and_is_empty_follow_pushes_and_pops_across_segments() {
    let queue: Queue<usize, 4> = Queue::with_segment_size();
    assert!(queue.is_empty());
    for i in 0..50 {
        assert_eq!(queue.len(), i);
        queue.push(i);
        assert!(!queue.is_empty());
    }
    for i in 0..50 {
        assert_eq!(queue.pop(), Some(i));
        assert_eq!(queue.len(), 49 - i);
    }
    assert!(queue.is_empty());
}

#[test]
fn mpmc_one_producer_one_consumer_keep_order() {
    const COUNT: usize = 100_000;
    let queue: Queue<usize, 16> = Queue::with_segment_size();
    run_threads(2, |t| {
        if t == 0 {
            (0..COUNT).for_each(|i| queue.push(i));
        } else {
            let mut next = 0;
            while next < COUNT {
                if let Some(value) = queue.pop() {
                    assert_eq!(value, next);
                    next += 1;
                }
            }
        }
    });
    assert!(queue.is_empty());
}

#[test]
fn mpmc_many_producers_and_consumers_deliver_each_value_once() {
    const PER_THREAD: usize = 20_000;
    const THREADS: usize = 4;
    let queue: Queue<usize, 32> = Queue::with_segment_size();
    let seen: Vec<AtomicUsize> = (0..PER_THREAD * THREADS / 2)
        .map(|_| AtomicUsize::new(0))
        .collect();
    let popped = AtomicUsize::new(0);
    run_threads(THREADS, |t| {
        if t % 2 == 0 {
            let base = t / 2 * PER_THREAD;
            (base..base + PER_THREAD).for_each(|i| queue.push(i));
        } else {
            while popped.load(Ordering::Relaxed) < seen.len() {
                if let Some(value) = queue.pop() {
                    seen[value].fetch_add(1, Ordering::Relaxed);
                    popped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    assert!(seen.iter().all(|count| count.load(Ordering::Relaxed) == 1));
}

#[test]
fn mpmc_drops_what_is_left_once() {
    let drops = AtomicUsize::new(0);
    {
        let queue: Queue<Counted<'_>, 8> = Queue::with_segment_size();
        (0..100).for_each(|_| queue.push(Counted(&drops)));
        (0..30).for_each(|_| drop(queue.pop()));
        assert_eq!(drops.load(Ordering::Relaxed), 30);
    }
    assert_eq!(drops.load(Ordering::Relaxed), 100);
}

#[test]
fn mpmc_into_iter_yields_in_order_and_drops_the_rest() {
    let queue: Queue<usize, 3> = Queue::with_segment_size();
    (0..10).for_each(|i| queue.push(i));
    assert_eq!(
        queue.into_iter().collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    let drops = AtomicUsize::new(0);
    let queue: Queue<Counted<'_>, 3> = Queue::with_segment_size();
    (0..10).for_each(|_| queue.push(Counted(&drops)));
    let mut items = queue.into_iter();
    assert_eq!(items.size_hint(), (0, Some(10)));
    drop(items.next());
    drop(items);
    assert_eq!(drops.load(Ordering::Relaxed), 10);
}

#[test]
fn mpmc_zero_sized_values() {
    let queue: Queue<(), 2> = Queue::with_segment_size();
    (0..10).for_each(|_| queue.push(()));
    assert_eq!(queue.len(), 10);
    assert_eq!(std::iter::from_fn(|| queue.pop()).count(), 10);
    assert_eq!(queue.try_pop(), Err(PopError::Empty));
}

#[test]
fn mpmc_static_queue() {
    static QUEUE: Queue<u32> = Queue::new();
    QUEUE.push(1);
    assert!(QUEUE.try_push(2).is_ok());
    assert_eq!(
        (QUEUE.pop(), QUEUE.pop(), QUEUE.pop()),
        (Some(1), Some(2), None)
    );
}

// --- spsc, as rtrb's ring buffer is tested ----------------------------------------------------

#[test]
fn spsc_capacity_slots_and_full() {
    let (mut producer, mut consumer) = spsc::channel(3);
    assert_eq!((producer.capacity(), consumer.capacity()), (3, 3));
    assert_eq!(producer.free_slots(), 3);
    for i in 0..3 {
        producer.try_push(i).unwrap();
    }
    assert!(producer.is_full());
    assert_eq!(producer.try_push(3), Err(PushError::Full(3)));
    assert_eq!(consumer.len(), 3);
    assert_eq!(consumer.try_pop(), Ok(0));
    assert_eq!(producer.free_slots(), 1);
}

#[test]
fn spsc_zero_capacity_is_an_error() {
    assert_eq!(
        spsc::try_channel::<u8>(0).unwrap_err(),
        spsc::ChannelError::ZeroCapacity
    );
}

#[test]
fn spsc_abandonment_is_seen_by_the_other_end() {
    let (producer, consumer) = spsc::channel::<u8>(1);
    assert!(!consumer.is_abandoned());
    drop(producer);
    assert!(consumer.is_abandoned());
}

#[test]
fn spsc_chunks_report_what_is_there() {
    let (mut producer, mut consumer) = spsc::channel::<u8>(4);
    assert_eq!(
        consumer.read_chunk(1).unwrap_err(),
        ChunkError::TooFewSlots(0)
    );
    assert_eq!(
        producer.write_chunk_uninit(5).unwrap_err(),
        ChunkError::TooFewSlots(4)
    );
    assert_eq!(
        producer.write_chunk_uninit(4).unwrap().fill_from_iter(0..2),
        2
    );
    assert_eq!(
        consumer.read_chunk(3).unwrap_err(),
        ChunkError::TooFewSlots(2)
    );
    let chunk = consumer.read_chunk(2).unwrap();
    assert_eq!(chunk.iter().copied().collect::<Vec<_>>(), [0, 1]);
    chunk.commit(1);
    assert_eq!(consumer.try_pop(), Ok(1));
    assert_eq!(consumer.try_pop(), Err(PopError::Empty));
}

#[test]
fn spsc_drops_with_chunks_and_at_the_last_end_once() {
    let drops = AtomicUsize::new(0);
    let (mut producer, mut consumer) = spsc::channel(8);
    let chunk = producer.write_chunk_uninit(6).unwrap();
    assert_eq!(chunk.fill_from_iter((0..6).map(|_| Counted(&drops))), 6);
    // Two taken out and dropped by a commit, one moved out by the chunk's iterator.
    consumer.read_chunk(2).unwrap().commit_all();
    assert_eq!(drops.load(Ordering::Relaxed), 2);
    let mut chunk = consumer.read_chunk(3).unwrap();
    drop(chunk.next());
    // The chunk goes out of scope here, leaving its two other values queued.
    let _ = chunk;
    assert_eq!(drops.load(Ordering::Relaxed), 3);
    // A chunk written but not committed publishes (and drops) nothing.
    let mut chunk = producer.write_chunk_uninit(1).unwrap();
    chunk.slot(0).write(Counted(&drops));
    let _ = chunk; // not committed: the value written there leaks, as documented
    drop(producer);
    drop(consumer);
    assert_eq!(drops.load(Ordering::Relaxed), 6);
}

#[test]
fn spsc_zero_sized_values_through_chunks() {
    let (mut producer, mut consumer) = spsc::channel::<()>(5);
    assert_eq!(
        producer
            .write_chunk_uninit(5)
            .unwrap()
            .fill_from_iter(std::iter::repeat(())),
        5
    );
    assert_eq!(consumer.read_chunk(5).unwrap().count(), 5);
    assert!(consumer.is_empty());
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
