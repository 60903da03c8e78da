//! Stress tests of the B-Queue on two real threads: every value arrives once, in order.
//!
//! The consumer checks that it receives exactly `0, 1, 2, …`: a lost value shows as a gap, a
//! duplicate as a repeat, a reordering as either. The default set takes a few seconds in
//! release and is also run under ThreadSanitizer; the 10^8-value run is ignored by default:
//! `cargo test --release -p pitlane-queue --test stress_spsc -- --ignored`.
#![cfg(not(pitlane_loom))]

use std::mem::MaybeUninit;
use std::thread;

use pitlane_queue::spsc::{Builder, ChunkError, Consumer, PopError, Producer, PushError};
use pitlane_sync::spin::TtasMutex;
use pitlane_testkit::stress::run_threads;

/// Runs `produce(producer)` and `consume(consumer)` at once on two POSIX threads, which
/// ThreadSanitizer sees start and end (see `pitlane_testkit::stress`). The ends are handed over
/// through spin locks of our own, for the same reason.
fn on_two_threads<P: Send, C: Send>(
    producer: P,
    consumer: C,
    produce: impl Fn(P) + Sync,
    consume: impl Fn(C) + Sync,
) {
    let producer = TtasMutex::new(Some(producer));
    let consumer = TtasMutex::new(Some(consumer));
    run_threads(2, |thread| {
        if thread == 0 {
            produce(producer.lock().take().expect("one producer thread"));
        } else {
            consume(consumer.lock().take().expect("one consumer thread"));
        }
    });
}

/// Moves `0..items` through a ring of `capacity` slots with batch `batch` (the default when
/// `None`), pausing the producer every `pause_every` values (never when 0) so that the consumer
/// has to backtrack and report empty.
fn transfer(capacity: usize, batch: Option<usize>, items: u64, pause_every: u64) {
    let mut builder = Builder::new(capacity);
    if let Some(batch) = batch {
        builder = builder.batch(batch);
    }
    let (producer, consumer) = builder.build::<u64>().unwrap();
    on_two_threads(
        producer,
        consumer,
        |producer| push_all(producer, items, pause_every),
        |consumer| pop_all(consumer, items),
    );
}

/// Waits a little after a failed attempt: spins, and yields now and then so that the test
/// also progresses when more threads run than there are cores.
fn back_off(failures: &mut u32) {
    *failures += 1;
    if *failures % 64 == 0 {
        thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

fn push_all(mut producer: Producer<u64>, items: u64, pause_every: u64) {
    let mut failures = 0;
    for value in 0..items {
        let mut pending = value;
        while let Err(PushError::Full(back)) = producer.try_push(pending) {
            pending = back;
            back_off(&mut failures);
        }
        if pause_every != 0 && value % pause_every == 0 {
            for _ in 0..200 {
                std::hint::spin_loop();
            }
        }
    }
}

fn pop_all(mut consumer: Consumer<u64>, items: u64) {
    let mut expected = 0;
    let mut failures = 0;
    while expected < items {
        match consumer.try_pop() {
            Ok(value) => {
                assert_eq!(value, expected, "lost, duplicated or reordered value");
                expected += 1;
            }
            Err(_) => back_off(&mut failures),
        }
    }
    assert!(consumer.try_pop().is_err(), "a value beyond the last one");
}

#[test]
fn paper_shape_capacity_2048_batch_256() {
    transfer(2048, Some(256), 2_000_000, 0);
}

#[test]
fn default_batch_at_capacity_65536() {
    transfer(65536, None, 2_000_000, 0);
}

#[test]
fn tiny_rings() {
    for capacity in 1..=5 {
        transfer(capacity, None, 200_000, 0);
        transfer(capacity, Some(capacity), 200_000, 0);
    }
}

#[test]
fn odd_capacity_and_batch() {
    transfer(1000, Some(77), 1_000_000, 0);
    transfer(7, Some(3), 500_000, 0);
}

#[test]
fn slow_producer_makes_the_consumer_backtrack() {
    transfer(2048, Some(256), 300_000, 3);
    transfer(64, Some(16), 300_000, 17);
}

/// Batch operations on both ends, with chunk sizes that keep changing.
#[test]
fn batch_operations_keep_order() {
    let items = 2_000_000_u64;
    let (producer, consumer) = Builder::new(512).batch(64).build::<u64>().unwrap();
    let produce = |mut producer: Producer<u64>| {
        let mut failures = 0;
        let mut next = 0;
        let mut chunk = 1;
        while next < items {
            chunk = chunk * 7 % 301 + 1;
            let end = (next + chunk).min(items);
            let pushed = producer.push_iter(next..end) as u64;
            if pushed == 0 {
                back_off(&mut failures);
            }
            next += pushed;
        }
    };
    let consume = |mut consumer: Consumer<u64>| {
        let mut expected = 0;
        let mut buffer = Vec::with_capacity(512);
        let mut chunk = 1;
        let mut failures = 0;
        while expected < items {
            chunk = chunk * 5 % 257 + 1;
            buffer.clear();
            buffer.extend(consumer.try_iter().take(chunk));
            if buffer.is_empty() {
                back_off(&mut failures);
            }
            for &value in &buffer {
                assert_eq!(value, expected, "lost, duplicated or reordered value");
                expected += 1;
            }
        }
    };
    on_two_threads(producer, consumer, produce, consume);
}

/// Values that own heap memory, so that a torn or doubled move would show (and, under
/// ThreadSanitizer, a racy one).
#[test]
fn owned_values_arrive_intact() {
    let items = 200_000_usize;
    let (producer, consumer) = Builder::new(128).batch(16).build::<Vec<usize>>().unwrap();
    let produce = |mut producer: Producer<Vec<usize>>| {
        let mut failures = 0;
        for value in 0..items {
            let mut pending = vec![value; value % 5];
            while let Err(PushError::Full(back)) = producer.try_push(pending) {
                pending = back;
                back_off(&mut failures);
            }
        }
    };
    let consume = |mut consumer: Consumer<Vec<usize>>| {
        let mut expected = 0;
        let mut failures = 0;
        while expected < items {
            match consumer.try_pop() {
                Ok(got) => {
                    assert_eq!(got, vec![expected; expected % 5]);
                    expected += 1;
                }
                Err(_) => back_off(&mut failures),
            }
        }
    };
    on_two_threads(producer, consumer, produce, consume);
}

/// The full-size run: 10^8 values through the paper's shape. About half a second in
/// release and five to twenty seconds in debug on the project's shared two-core machines, and
/// a minute under ThreadSanitizer, so it only runs when asked for:
/// `cargo test --release -p pitlane-queue --test stress_spsc -- --ignored`.
#[test]
#[ignore = "10^8 values: run in release with --ignored"]
fn hundred_million_values_in_order() {
    transfer(2048, Some(256), 100_000_000, 0);
}

/// Chunks of varying sizes on both ends (including chunks that wrap around the ring's end,
/// partial commits and values moved out through the chunk's iterator), mixed with single
/// pushes and pops: every value arrives once, in order, and every owned value is dropped once.
#[test]
fn chunks_on_both_ends_keep_order_and_drop_each_value_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const ITEMS: usize = 100_000;
    let dropped = AtomicUsize::new(0);
    struct Counted<'a>(usize, &'a AtomicUsize);
    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    let (producer, consumer) = Builder::new(37).batch(8).build::<Counted<'_>>().unwrap();
    on_two_threads(
        producer,
        consumer,
        |mut producer| {
            let (mut next, mut failures, mut size) = (0, 0, 1);
            while next < ITEMS {
                size = size % 13 + 1;
                let wanted = size.min(ITEMS - next);
                if size % 5 == 0 {
                    let mut value = Counted(next, &dropped);
                    while let Err(full) = producer.try_push(value) {
                        value = full.into_inner();
                        back_off(&mut failures);
                    }
                    next += 1;
                    continue;
                }
                match producer.write_chunk_uninit(wanted) {
                    Ok(chunk) => {
                        // Publish all but (sometimes) the last of the chunk.
                        let take = if size % 3 == 0 { wanted - 1 } else { wanted };
                        let written =
                            chunk.fill_from_iter((next..next + take).map(|i| Counted(i, &dropped)));
                        assert_eq!(written, take);
                        next += written;
                    }
                    Err(_) => back_off(&mut failures),
                }
            }
        },
        |mut consumer| {
            let (mut expected, mut failures, mut size) = (0, 0, 1);
            while expected < ITEMS {
                size = size % 11 + 1;
                let wanted = size.min(ITEMS - expected);
                match consumer.read_chunk(wanted) {
                    Ok(mut chunk) => {
                        for (i, value) in chunk.iter().enumerate() {
                            assert_eq!(value.0, expected + i, "lost, duplicated or reordered");
                        }
                        if size % 2 == 0 {
                            chunk.commit(wanted);
                            expected += wanted;
                        } else {
                            // Move some out through the iterator; the rest stays queued.
                            for _ in 0..wanted / 2 {
                                let value = chunk.next().expect("inside the chunk");
                                assert_eq!(value.0, expected);
                                expected += 1;
                            }
                        }
                    }
                    Err(_) => back_off(&mut failures),
                }
            }
            assert!(consumer.try_pop().is_err(), "a value beyond the last");
        },
    );
    assert_eq!(dropped.load(Ordering::Relaxed), ITEMS);
}

/// The producer writes `Default` chunks through `get_mut` and commits all or half of each; the
/// consumer takes values through read chunks changed in place (`iter_mut`, `get_mut`, then a
/// commit or the chunk's iterator, with `iterated`), `pop_partial_slice_uninit` and
/// `pop_entire_slice_uninit`, in turn. Every value arrives once, in order.
#[test]
fn default_chunks_and_in_place_reads_across_two_threads_keep_order() {
    const ITEMS: u64 = 100_000;
    const MASK: u64 = 0x5A5A_5A5A_5A5A_5A5A;
    let (producer, consumer) = Builder::new(61).batch(8).build::<u64>().unwrap();
    on_two_threads(
        producer,
        consumer,
        |mut producer| {
            let (mut next, mut size, mut failures) = (0, 1, 0);
            while next < ITEMS {
                size = size % 17 + 1;
                let wanted = size.min((ITEMS - next) as usize);
                let full = match producer.write_chunk(wanted) {
                    Ok(mut chunk) => {
                        for i in 0..wanted {
                            *chunk.get_mut(i).expect("inside the chunk") = next + i as u64;
                        }
                        let commit = if size % 4 == 0 { wanted / 2 } else { wanted };
                        chunk.commit(commit);
                        next += commit as u64;
                        false
                    }
                    Err(ChunkError::TooFewSlots(_)) => true,
                };
                if full {
                    // A consumer that failed its checks is gone: stop, so that its panic is
                    // reported instead of this loop waiting for room forever.
                    if producer.is_abandoned() {
                        return;
                    }
                    back_off(&mut failures);
                }
            }
        },
        |mut consumer| {
            let (mut expected, mut size, mut failures) = (0, 1, 0);
            let mut buffer = [MaybeUninit::<u64>::uninit(); 16];
            while expected < ITEMS {
                size = size % 13 + 1;
                let wanted = size.min((ITEMS - expected) as usize);
                let got = match size % 3 {
                    0 => match consumer.read_chunk(wanted) {
                        Ok(mut chunk) => {
                            chunk.iter_mut().for_each(|value| *value ^= MASK);
                            for i in 0..wanted {
                                let value = chunk.get_mut(i).expect("inside the chunk");
                                assert_eq!(*value ^ MASK, expected + i as u64, "lost or reordered");
                                *value ^= MASK;
                            }
                            if size % 2 == 0 {
                                chunk.commit_all();
                            } else {
                                for (i, value) in chunk.by_ref().enumerate() {
                                    assert_eq!(value, expected + i as u64, "lost or reordered");
                                }
                                assert_eq!(chunk.iterated(), wanted);
                            }
                            wanted
                        }
                        Err(ChunkError::TooFewSlots(_)) => 0,
                    },
                    1 => {
                        let (popped, _) = consumer.pop_partial_slice_uninit(&mut buffer[..wanted]);
                        for (i, &value) in popped.iter().enumerate() {
                            assert_eq!(value, expected + i as u64, "lost or reordered");
                        }
                        popped.len()
                    }
                    _ => match consumer.pop_entire_slice_uninit(&mut buffer[..wanted]) {
                        Ok(popped) => {
                            for (i, &value) in popped.iter().enumerate() {
                                assert_eq!(value, expected + i as u64, "lost or reordered");
                            }
                            wanted
                        }
                        Err(ChunkError::TooFewSlots(_)) => 0,
                    },
                };
                if got == 0 {
                    back_off(&mut failures);
                }
                expected += got as u64;
            }
            assert_eq!(
                consumer.try_pop(),
                Err(PopError::Empty),
                "a value beyond the last"
            );
        },
    );
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
