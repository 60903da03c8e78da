//! The B-Queue against the behaviours rtrb's own tests check: capacity, push and pop, chunk
//! commits (partial, wrapping, dropped uncommitted), drop counts through chunks, zero-sized
//! values, a panicking `Drop` or iterator in the middle of a commit, `io::Read`/`io::Write`,
//! the iterators and the trait implementations.
#![cfg(not(pitlane_loom))]
// Dropping and forgetting chunks (which have no `Drop`) is what some tests check.
#![allow(clippy::drop_non_drop, clippy::forget_non_drop)]

use std::cell::Cell;
use std::io::{ErrorKind, Read, Write};
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, RefUnwindSafe, UnwindSafe, catch_unwind};
use std::rc::Rc;

use pitlane_queue::spsc::{self, Builder, ChunkError, Consumer, PopError, Producer, PushError};

/// A value that counts its drops in a shared cell.
struct Counted(Rc<Cell<usize>>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn capacity_is_exact_for_every_size() {
    for capacity in 1..=9 {
        let (mut producer, mut consumer) = spsc::channel(capacity);
        assert_eq!(producer.capacity(), capacity);
        assert_eq!(consumer.capacity(), capacity);
        assert_eq!(producer.push_iter(0..), capacity);
        assert_eq!(producer.try_push(0), Err(PushError::Full(0)));
        assert_eq!(producer.slots(), 0);
        assert_eq!(consumer.slots(), capacity);
        assert_eq!(consumer.try_iter().count(), capacity);
        assert_eq!(consumer.try_pop(), Err(PopError::Empty));
    }
}

#[test]
fn write_chunk_too_large_reports_what_is_free() {
    let (mut producer, mut consumer) = spsc::channel::<u32>(4);
    assert_eq!(
        producer.write_chunk_uninit(5).unwrap_err(),
        ChunkError::TooFewSlots(4)
    );
    producer.push_slice(&[1, 2, 3]);
    assert_eq!(
        producer.write_chunk_uninit(2).unwrap_err(),
        ChunkError::TooFewSlots(1)
    );
    assert_eq!(
        consumer.read_chunk(4).unwrap_err(),
        ChunkError::TooFewSlots(3)
    );
    assert_eq!(
        format!("{:?}", consumer.read_chunk(9).unwrap_err()),
        "TooFewSlots(3)"
    );
    assert_eq!(producer.write_chunk_uninit(1).unwrap().len(), 1);
}

/// Chunks of every length at every offset of small rings, against a model: commits are pushes
/// and pops in ring order, including across the ring's end, and uncommitted slots stay.
#[test]
fn chunks_at_every_offset_match_a_model() {
    for capacity in 1..=7 {
        for batch in [1, capacity] {
            let (mut producer, mut consumer) = Builder::new(capacity)
                .batch(batch)
                .build::<usize>()
                .unwrap();
            let mut model = std::collections::VecDeque::new();
            let mut next = 0;
            for step in 0..200 {
                let want = step % (capacity + 2);
                let commit = step % 3;
                match producer.write_chunk_uninit(want) {
                    Ok(mut chunk) => {
                        assert!(want <= capacity - model.len());
                        assert_eq!(chunk.len(), want);
                        let n = commit.min(want);
                        for i in 0..n {
                            chunk.slot(i).write(next);
                            model.push_back(next);
                            next += 1;
                        }
                        // SAFETY: the first `n` slots were written above.
                        unsafe { chunk.commit(n) };
                    }
                    Err(ChunkError::TooFewSlots(free)) => {
                        assert_eq!(free, capacity - model.len());
                        assert!(want > free);
                    }
                }
                let want = (step / 2) % (capacity + 1);
                match consumer.read_chunk(want) {
                    Ok(chunk) => {
                        let seen: Vec<usize> = chunk.iter().copied().collect();
                        let expected: Vec<usize> = model.iter().take(want).copied().collect();
                        assert_eq!(seen, expected);
                        let n = (step % 4).min(want);
                        chunk.commit(n);
                        model.drain(..n);
                    }
                    Err(ChunkError::TooFewSlots(queued)) => {
                        assert_eq!(queued, model.len());
                        assert!(want > queued);
                    }
                }
                assert_eq!(consumer.peek().ok(), model.front());
            }
            let rest: Vec<usize> = consumer.into_iter().collect();
            assert_eq!(rest, model.into_iter().collect::<Vec<_>>());
        }
    }
}

#[test]
fn chunks_wrap_around_the_rings_end() {
    let (mut producer, mut consumer) = spsc::channel::<u8>(4);
    producer.push_slice(&[1, 2, 3]);
    assert_eq!(consumer.try_iter().take(3).count(), 3);
    // Slot 3 of the ring, then slots 0 to 2.
    let mut chunk = producer.write_chunk_uninit(4).unwrap();
    for (i, value) in (0..4).zip(10..) {
        chunk.slot(i).write(value);
    }
    // SAFETY: all four were written.
    unsafe { chunk.commit_all() };
    let chunk = consumer.read_chunk(4).unwrap();
    assert_eq!(chunk.iter().copied().collect::<Vec<_>>(), [10, 11, 12, 13]);
    assert_eq!(
        (chunk.get(0), chunk.get(3), chunk.get(4)),
        (Some(&10), Some(&13), None)
    );
    chunk.commit_all();
    assert!(consumer.is_empty());
}

#[test]
fn fill_from_iter_commits_only_what_it_wrote() {
    let (mut producer, consumer) = spsc::channel(4);
    let chunk = producer.write_chunk_uninit(3).unwrap();
    assert_eq!(chunk.fill_from_iter([1, 2]), 2);
    let chunk = producer.write_chunk_uninit(2).unwrap();
    assert_eq!(chunk.fill_from_iter(3..), 2);
    assert_eq!(producer.slots(), 0);
    assert_eq!(consumer.into_iter().collect::<Vec<_>>(), [1, 2, 3, 4]);
}

#[test]
fn drop_counts_through_chunks() {
    let drops = Rc::new(Cell::new(0));
    {
        let (mut producer, mut consumer) = spsc::channel::<Counted>(4);
        let chunk = producer.write_chunk_uninit(3).unwrap();
        assert_eq!(
            chunk.fill_from_iter((0..3).map(|_| Counted(Rc::clone(&drops)))),
            3
        );
        assert_eq!(drops.get(), 0);
        // Looking at a chunk and dropping it moves nothing.
        drop(consumer.read_chunk(3).unwrap());
        assert_eq!(drops.get(), 0);
        // A commit drops what it pops.
        consumer.read_chunk(2).unwrap().commit(1);
        assert_eq!(drops.get(), 1);
        // Values moved out through the iterator are the caller's.
        let mut values = consumer.read_chunk(1).unwrap();
        let value = values.next().unwrap();
        drop(values);
        assert_eq!(drops.get(), 1);
        drop(value);
        assert_eq!(drops.get(), 2);
        // Written but uncommitted slots are forgotten, not dropped, and stay free.
        let mut chunk = producer.write_chunk_uninit(2).unwrap();
        chunk.slot(0).write(Counted(Rc::clone(&drops)));
        drop(chunk);
        assert_eq!(drops.get(), 2);
        assert_eq!(producer.slots(), 3);
        // The forgotten value is still in its free slot: the next chunk starts there. Take it
        // back and drop it here, so that the test leaks nothing (LeakSanitizer runs it).
        let mut chunk = producer.write_chunk_uninit(1).unwrap();
        // SAFETY: the slot holds the value written above: the slot stayed free, and nothing
        // but this producer writes a free slot.
        drop(unsafe { chunk.slot(0).assume_init_read() });
        drop(chunk);
        assert_eq!(drops.get(), 3);
        // One more queued, left for the ends' drop.
        producer.try_push(Counted(Rc::clone(&drops))).ok().unwrap();
    }
    // Five made, each dropped once: the one forgotten in the uncommitted chunk by hand.
    assert_eq!(drops.get(), 5);
}

#[test]
fn read_chunk_iterator_pops_even_when_forgotten() {
    let (mut producer, mut consumer) = spsc::channel(8);
    producer.try_push(Box::new(10)).unwrap();
    producer.try_push(Box::new(11)).unwrap();
    let mut values = consumer.read_chunk(2).unwrap();
    assert_eq!(values.len(), 2);
    assert_eq!(*values.next().unwrap(), 10);
    std::mem::forget(values);
    // The yielded value is gone, the other still queued: no double drop, no leak.
    assert_eq!(consumer.try_pop().as_deref(), Ok(&11));
    assert_eq!(consumer.try_pop(), Err(PopError::Empty));
}

#[test]
fn panicking_drop_in_a_read_commit_pops_exactly_the_values_before_it() {
    struct PanicsOnTwo(u32);
    impl Drop for PanicsOnTwo {
        fn drop(&mut self) {
            if self.0 == 2 {
                panic!("drop of 2");
            }
        }
    }
    let (mut producer, mut consumer) = spsc::channel(3);
    for value in 1..=3 {
        producer.try_push(PanicsOnTwo(value)).ok().unwrap();
    }
    let chunk = consumer.read_chunk(3).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| chunk.commit_all())).is_err());
    // 1 popped and dropped, 2 popped (its drop panicked), 3 still queued.
    assert_eq!(consumer.len(), 1);
    assert_eq!(consumer.try_pop().map(|value| value.0).ok(), Some(3));
    assert_eq!(producer.slots(), 3);
}

#[test]
fn panicking_iterator_in_fill_from_iter_keeps_what_was_written() {
    let (mut producer, mut consumer) = spsc::channel(4);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let chunk = producer.write_chunk_uninit(4).unwrap();
        chunk.fill_from_iter((1..).inspect(|&value| assert!(value < 3, "iterator gives up")))
    }));
    assert!(result.is_err());
    assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [1, 2]);
    assert_eq!(producer.slots(), 4);
    assert_eq!(producer.push_iter(10..), 4);
    assert_eq!(consumer.len(), 4);
}

#[test]
fn zero_sized_values() {
    let (mut producer, mut consumer) = spsc::channel::<()>(3);
    assert_eq!(producer.push_iter(std::iter::repeat(())), 3);
    assert_eq!(producer.try_push(()), Err(PushError::Full(())));
    assert_eq!(consumer.peek(), Ok(&()));
    let chunk = consumer.read_chunk(2).unwrap();
    assert_eq!(chunk.iter().count(), 2);
    chunk.commit_all();
    assert_eq!(
        producer
            .write_chunk_uninit(2)
            .unwrap()
            .fill_from_iter([(), ()]),
        2
    );
    assert_eq!(consumer.into_iter().count(), 3);
}

#[test]
fn zero_sized_values_with_a_large_capacity() {
    let (mut producer, mut consumer) = spsc::channel::<()>(1 << 20);
    assert_eq!(producer.push_iter(std::iter::repeat_n((), 1000)), 1000);
    assert_eq!(consumer.len(), 1000);
    assert_eq!(consumer.try_iter().count(), 1000);
}

#[test]
fn io_write_and_read_move_bytes_in_order() {
    let (mut producer, mut consumer) = spsc::channel::<u8>(5);
    assert_eq!(producer.write(b"").unwrap(), 0);
    assert_eq!(producer.write(b"abc").unwrap(), 3);
    let mut buf = [0; 2];
    assert_eq!(consumer.read(&mut buf).unwrap(), 2);
    assert_eq!(&buf, b"ab");
    // Wraps: 1 queued + 4 written, the last 3 past the ring's end.
    assert_eq!(producer.write(b"defgh").unwrap(), 4);
    assert_eq!(
        producer.write(b"h").unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    producer.flush().unwrap();
    let mut all = [0; 8];
    assert_eq!(consumer.read(&mut all).unwrap(), 5);
    assert_eq!(&all[..5], b"cdefg");
    assert_eq!(consumer.read(&mut []).unwrap(), 0);
    assert_eq!(
        consumer.read(&mut all).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

#[test]
fn io_across_threads() {
    let (mut producer, mut consumer) = spsc::channel::<u8>(7);
    let message: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let sent = message.clone();
    let writer = std::thread::spawn(move || {
        let mut rest = &sent[..];
        while !rest.is_empty() {
            match producer.write(rest) {
                Ok(n) => rest = &rest[n..],
                Err(error) if error.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(error) => panic!("{error}"),
            }
        }
    });
    let mut received = Vec::new();
    let mut buf = [0; 13];
    while received.len() < message.len() {
        match consumer.read(&mut buf) {
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(error) if error.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(error) => panic!("{error}"),
        }
    }
    writer.join().unwrap();
    assert_eq!(received, message);
}

/// Chunks of varying sizes on both ends, across threads, with an in-order check.
#[test]
fn chunks_across_threads() {
    const ITEMS: u64 = 200_000;
    let (mut producer, mut consumer) = Builder::new(64).batch(8).build::<u64>().unwrap();
    let writer = std::thread::spawn(move || {
        let mut next = 0;
        let mut size = 1;
        while next < ITEMS {
            size = size % 13 + 1;
            let want = size.min((ITEMS - next) as usize);
            match producer.write_chunk_uninit(want) {
                Ok(chunk) => next += chunk.fill_from_iter(next..) as u64,
                Err(_) => std::thread::yield_now(),
            }
        }
    });
    let mut expected = 0;
    let mut size = 1;
    while expected < ITEMS {
        size = size % 11 + 1;
        match consumer.read_chunk(size) {
            Ok(chunk) => {
                for &value in chunk.iter() {
                    assert_eq!(value, expected);
                    expected += 1;
                }
                chunk.commit_all();
            }
            Err(ChunkError::TooFewSlots(_)) => std::thread::yield_now(),
        }
    }
    writer.join().unwrap();
    assert!(consumer.is_abandoned());
    assert_eq!(consumer.try_pop(), Err(PopError::Empty));
}

#[test]
fn consumer_iterators() {
    let (mut producer, mut consumer) = spsc::channel(4);
    producer.push_slice(&[1, 2]);
    assert_eq!((&mut consumer).into_iter().collect::<Vec<_>>(), [1, 2]);
    producer.push_slice(&[3]);
    let mut values = consumer.into_iter();
    assert_eq!(values.next(), Some(3));
    assert_eq!(values.next(), None);
    // Not fused: the producer is still there and pushes more.
    producer.push_slice(&[4]);
    assert_eq!(values.next(), Some(4));
    let consumer = values.into_inner();
    assert!(consumer.is_empty());
}

#[test]
fn peek_takes_a_shared_reference() {
    let (mut producer, consumer) = spsc::channel(2);
    let consumer: &Consumer<String> = &consumer;
    assert_eq!(consumer.peek(), Err(PopError::Empty));
    producer.try_push("a".to_string()).unwrap();
    // Two shared borrows at once.
    let (first, second) = (consumer.peek().unwrap(), consumer.peek().unwrap());
    assert_eq!((first.as_str(), second.as_str()), ("a", "a"));
}

#[test]
fn trait_impls() {
    fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}
    fn send<T: Send>() {}
    unwind_safe::<Producer<Rc<u8>>>();
    unwind_safe::<Consumer<Rc<u8>>>();
    send::<Producer<String>>();
    send::<Consumer<String>>();
    send::<spsc::IntoIter<String>>();

    let (mut producer, mut consumer) = spsc::channel::<u8>(2);
    assert!(format!("{producer:?}").starts_with("Producer {"));
    assert!(format!("{consumer:?}").starts_with("Consumer {"));
    assert!(
        format!("{:?}", producer.write_chunk_uninit(1).unwrap()).starts_with("WriteChunkUninit {")
    );
    let chunk = consumer.read_chunk(0).unwrap();
    assert!(format!("{chunk:?}").starts_with("ReadChunk {"));
    assert!(format!("{:?}", consumer.try_iter()).starts_with("TryIter {"));
    assert!(format!("{:?}", consumer.into_iter()).starts_with("IntoIter {"));
    assert_eq!(
        ChunkError::TooFewSlots(0).to_string(),
        "too few slots: 0 available"
    );
    let error: Box<dyn std::error::Error> = Box::new(ChunkError::TooFewSlots(1));
    assert!(error.to_string().contains('1'));
}

#[test]
fn commit_more_than_the_chunk_panics() {
    let (mut producer, mut consumer) = spsc::channel::<u8>(4);
    let chunk = producer.write_chunk_uninit(2).unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: never reached past the assertion: 3 > 2 panics first.
        unsafe { chunk.commit(3) }
    }));
    assert!(result.is_err());
    producer.push_slice(&[1]);
    let chunk = consumer.read_chunk(1).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| chunk.commit(2))).is_err());
    assert_eq!(consumer.try_pop(), Ok(1));
}

#[test]
fn uninit_slots_are_writable_through_maybe_uninit_new() {
    let (mut producer, consumer) = spsc::channel(2);
    let mut chunk = producer.write_chunk_uninit(2).unwrap();
    *chunk.slot(0) = MaybeUninit::new(String::from("x"));
    *chunk.slot(1) = MaybeUninit::new(String::from("y"));
    // SAFETY: both written.
    unsafe { chunk.commit_all() };
    assert_eq!(consumer.into_iter().collect::<String>(), "xy");
}

/// A consumer that had claimed a run of values (one probe covered several) and then lends a
/// chunk over the same slots: values moved out through a chunk that is then forgotten are
/// never popped again, whatever the run covered.
#[test]
fn a_forgotten_read_chunk_over_a_claimed_run_pops_nothing_twice() {
    let (mut producer, mut consumer) = Builder::new(16).batch(8).build::<Box<u32>>().unwrap();
    for value in 0..8 {
        producer.try_push(Box::new(value)).unwrap();
    }
    // This pop claims a run over the next values too.
    assert_eq!(*consumer.try_pop().unwrap(), 0);
    let mut chunk = consumer.read_chunk(3).unwrap();
    assert_eq!(chunk.next().as_deref(), Some(&1));
    assert_eq!(chunk.next().as_deref(), Some(&2));
    std::mem::forget(chunk);
    let rest: Vec<u32> = consumer.try_iter().map(|value| *value).collect();
    assert_eq!(rest, [3, 4, 5, 6, 7]);
    // A chunk that is dropped after a panic in the caller's loop leaves the same state.
    for value in 10..14 {
        producer.try_push(Box::new(value)).unwrap();
    }
    assert_eq!(*consumer.try_pop().unwrap(), 10);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let chunk = consumer.read_chunk(3).unwrap();
        for value in chunk {
            assert!(*value < 12, "the caller gives up at {value}");
        }
    }));
    assert!(result.is_err());
    // 11 and 12 were moved out (12 dropped by the unwinding), 13 stays.
    assert_eq!(consumer.try_pop().as_deref(), Ok(&13));
    assert_eq!(consumer.try_pop(), Err(PopError::Empty));
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
