//! Loom models of the B-Queue protocol: small rings, small batches, every interleaving (up to
//! the preemption bound) of one producer and one consumer.
//!
//! Run with
//! `RUSTFLAGS="--cfg pitlane_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom cargo test --release -p pitlane-queue --test loom_spsc`.
#![cfg(pitlane_loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use pitlane_queue::spsc::{Builder, ChunkError, Consumer, PopError, Producer, PushError};

/// One producer pushes `0..items`, one consumer pops until it has them all, on a ring of
/// `capacity` slots with batch `batch`. Checks order and completeness, and that every "full" and
/// "empty" was true: before each attempt an end reads how many operations the other end had
/// completed; a "full" with fewer than `capacity` values certainly queued at that time, or an
/// "empty" with a value certainly queued, is a lie.
fn transfer(capacity: usize, batch: usize, adaptive: bool, items: usize) {
    loom::model(move || {
        let (mut producer, mut consumer) = Builder::new(capacity)
            .batch(batch)
            .increment(1)
            .adaptive(adaptive)
            .build::<usize>()
            .unwrap();
        let pushed = Arc::new(AtomicUsize::new(0));
        let popped = Arc::new(AtomicUsize::new(0));

        let producer_thread = {
            let (pushed, popped) = (Arc::clone(&pushed), Arc::clone(&popped));
            thread::spawn(move || {
                let mut next = 0;
                while next < items {
                    let popped_before = popped.load(Ordering::SeqCst);
                    match producer.try_push(next) {
                        Ok(()) => {
                            next += 1;
                            pushed.store(next, Ordering::SeqCst);
                        }
                        Err(PushError::Full(value)) => {
                            assert_eq!(value, next, "the value came back");
                            assert!(
                                next - popped_before >= capacity,
                                "full with only {} of {capacity} values queued",
                                next - popped_before
                            );
                            thread::yield_now();
                        }
                        Err(PushError::Transient(_)) => panic!("a transient spsc push"),
                    }
                }
            })
        };

        let mut expected = 0;
        while expected < items {
            let pushed_before = pushed.load(Ordering::SeqCst);
            match consumer.try_pop() {
                Ok(value) => {
                    assert_eq!(value, expected, "lost, duplicated or reordered");
                    expected += 1;
                    popped.store(expected, Ordering::SeqCst);
                }
                Err(PopError::Empty) => {
                    assert!(
                        pushed_before <= expected,
                        "empty with value {expected} pushed"
                    );
                    thread::yield_now();
                }
                Err(PopError::Transient) => panic!("a transient spsc pop"),
            }
        }
        producer_thread.join().unwrap();
        assert_eq!(consumer.try_pop(), Err(PopError::Empty));
        assert!(consumer.is_abandoned());
    });
}

#[test]
fn capacity_2_batch_1() {
    transfer(2, 1, true, 5);
}

#[test]
fn capacity_2_batch_2() {
    transfer(2, 2, true, 5);
}

#[test]
fn capacity_3_batch_2() {
    transfer(3, 2, true, 6);
}

#[test]
fn capacity_4_batch_2_adaptive() {
    transfer(4, 2, true, 7);
}

#[test]
fn capacity_4_batch_2_plain_backtracking() {
    transfer(4, 2, false, 7);
}

#[test]
fn capacity_4_batch_4() {
    transfer(4, 4, true, 7);
}

/// `len` on the consumer promises values it can pop; `free_slots` on the producer promises
/// room it can fill; `peek` shows what `try_pop` returns.
#[test]
fn len_and_peek_keep_their_promises() {
    loom::model(|| {
        let (mut producer, mut consumer) = Builder::new(3)
            .batch(2)
            .increment(1)
            .build::<usize>()
            .unwrap();
        producer.try_push(0).unwrap();
        let producer_thread = thread::spawn(move || {
            let room = producer.free_slots();
            // One value is queued and the consumer only makes room.
            assert!((2..=3).contains(&room), "{room} free slots");
            for value in 1..=room {
                producer.try_push(value).unwrap();
            }
            room
        });
        // The consumer runs in a thread of its own: loom does not run a spawned thread ahead
        // of the main thread's first steps (docs/notes/loom-coverage.md).
        let consumer_thread = thread::spawn(move || {
            let queued = consumer.len();
            assert!(queued >= 1);
            for expected in 0..queued {
                assert_eq!(consumer.peek(), Ok(&expected));
                assert_eq!(consumer.try_pop(), Ok(expected));
            }
            (consumer, queued)
        });
        let room = producer_thread.join().unwrap();
        let (mut consumer, queued) = consumer_thread.join().unwrap();
        let rest: Vec<usize> = consumer.try_iter().collect();
        assert_eq!(rest, (queued..=room).collect::<Vec<_>>());
    });
}

/// A value that counts its drops in a shared counter.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn push_counted(producer: &mut Producer<Counted>, drops: &Arc<AtomicUsize>) -> bool {
    producer.try_push(Counted(Arc::clone(drops))).is_ok()
}

fn pop_counted(consumer: &mut Consumer<Counted>) -> bool {
    consumer.try_pop().is_ok()
}

/// Both ends drop concurrently with values in flight: every value pushed is dropped exactly
/// once, by the consumer's pop or by whichever end goes last.
#[test]
fn queued_values_dropped_once_by_last_end() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut producer, mut consumer) = Builder::new(2).batch(1).build::<Counted>().unwrap();
        let producer_thread = {
            let drops = Arc::clone(&drops);
            // A push that finds the ring full drops the value it gets back.
            thread::spawn(move || {
                (0..3)
                    .filter(|_| push_counted(&mut producer, &drops))
                    .count()
            })
        };
        let consumer_thread = thread::spawn(move || pop_counted(&mut consumer));
        let pushed = producer_thread.join().unwrap();
        let popped = consumer_thread.join().unwrap();
        assert!(
            (2..=3).contains(&pushed),
            "2 slots, at most one pop: {pushed} pushed"
        );
        assert!(!popped || pushed >= 1);
        // Three values were made; each is dropped once, whether it was refused, popped, or
        // left in the ring when the last end went.
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    });
}

/// A chunk commit of two values races a chunk read and a pop on a ring of three slots (the
/// chunk wraps around the ring's end on the second lap): the consumer sees values only once
/// they are published, in order, each once.
#[test]
fn a_chunk_commit_racing_a_chunk_read_delivers_in_order() {
    loom::model(|| {
        let (mut producer, mut consumer) = Builder::new(3).batch(1).build::<usize>().unwrap();
        // Move both ends to slot 2, so that the chunk below wraps.
        producer.try_push(0).unwrap();
        producer.try_push(1).unwrap();
        assert_eq!(consumer.try_pop(), Ok(0));
        assert_eq!(consumer.try_pop(), Ok(1));
        let pusher = thread::spawn(move || {
            let chunk = producer.write_chunk_uninit(2).unwrap();
            assert_eq!(chunk.fill_from_iter([2, 3]), 2);
            producer
        });
        // The read runs in a spawned thread too: loom does not run a spawned thread ahead of
        // the main thread's first steps (docs/notes/loom-coverage.md).
        let reader = thread::spawn(move || {
            let mut got = Vec::new();
            if let Ok(chunk) = consumer.read_chunk(2) {
                got.extend(chunk);
            } else if let Ok(value) = consumer.try_pop() {
                got.push(value);
            }
            (consumer, got)
        });
        let _producer = pusher.join().unwrap();
        let (mut consumer, mut got) = reader.join().unwrap();
        got.extend(consumer.try_iter());
        assert_eq!(got, [2, 3]);
    });
}

/// A write chunk whose probe of its far slot fails while the consumer frees that slot, so
/// that the chunk comes from the count (the path a refusal whose count reached the size
/// takes): the producer's writes into the chunk's slots come after the consumer's moves
/// out of them (loom checks each slot's accesses), and the values arrive in order.
#[test]
fn a_write_chunk_had_through_its_count_races_the_pops_that_free_it() {
    loom::model(|| {
        let (mut producer, mut consumer) = Builder::new(2).batch(1).build::<usize>().unwrap();
        producer.try_push(0).unwrap();
        producer.try_push(1).unwrap();
        let popper = thread::spawn(move || {
            let mut got = Vec::new();
            while got.len() < 2 {
                match consumer.try_pop() {
                    Ok(value) => got.push(value),
                    Err(_) => thread::yield_now(),
                }
            }
            (consumer, got)
        });
        let writer = thread::spawn(move || {
            let written = match producer.write_chunk_uninit(2) {
                Ok(chunk) => chunk.fill_from_iter([2, 3]),
                Err(ChunkError::TooFewSlots(free)) => {
                    assert!(free < 2, "refused 2 with {free} free");
                    0
                }
            };
            (producer, written)
        });
        let (_producer, written) = writer.join().unwrap();
        let (mut consumer, mut got) = popper.join().unwrap();
        got.extend(consumer.try_iter());
        let expected: Vec<usize> = (0..2 + written).collect();
        assert_eq!(got, expected);
    });
}

/// The same on the consumer's side: a read chunk whose probe fails while the producer
/// pushes the values one by one, had through its count; the consumer's reads of the
/// values come after the producer's writes, and an error counts fewer than asked for.
#[test]
fn a_read_chunk_had_through_its_count_races_the_pushes_that_fill_it() {
    loom::model(|| {
        let (mut producer, mut consumer) = Builder::new(2).batch(1).build::<usize>().unwrap();
        let pusher = thread::spawn(move || {
            producer.try_push(10).unwrap();
            producer.try_push(11).unwrap();
            producer
        });
        let reader = thread::spawn(move || {
            let got: Vec<usize> = match consumer.read_chunk(2) {
                Ok(chunk) => chunk.collect(),
                Err(ChunkError::TooFewSlots(queued)) => {
                    assert!(queued < 2, "refused 2 with {queued} queued");
                    Vec::new()
                }
            };
            (consumer, got)
        });
        let _producer = pusher.join().unwrap();
        let (mut consumer, mut got) = reader.join().unwrap();
        got.extend(consumer.try_iter());
        assert_eq!(got, [10, 11]);
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
