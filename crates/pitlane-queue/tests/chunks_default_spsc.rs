//! The SPSC queue's chunks of `Default` values (`Producer::write_chunk`, `WriteChunk`), the
//! in-place access of read chunks (`ReadChunk::get_mut`, `iter_mut`, `iterated`), the pops into
//! uninitialised memory (`Consumer::pop_entire_slice_uninit`, `pop_partial_slice_uninit`) and
//! `cached_slots` on both ends:
//!
//! - every value a `WriteChunk` makes is dropped exactly once, whether the chunk is committed
//!   whole, in part or not at all, and none when the chunk is forgotten (leaked, never dropped
//!   twice, and the slots reused);
//! - a `Default` that panics at its k-th call: the k values made are dropped, nothing is
//!   published, the producer has not moved and the queue works on;
//! - a `Drop` that panics among the values a commit (or a drop) of a `WriteChunk` discards: the
//!   other values are dropped all the same, what was committed is published, and the producer
//!   stands just after it;
//! - values of 64 KiB, zero-sized values, over-aligned values (their references aligned);
//! - chunks and pops across the ring's end, at capacities 1 and 2^16, with `n` = 0, the
//!   capacity, the capacity + 1 and `usize::MAX` (errors, never a panic or an overflow);
//! - `cached_slots() <= slots()` at every step of random scripts, against a `VecDeque` model.
//!
//! The same operations on two threads are in `tests/stress_spsc.rs`
//! (`default_chunks_and_in_place_reads_across_two_threads_keep_order`), which CI also runs
//! under ThreadSanitizer and AddressSanitizer.
#![cfg(not(pitlane_loom))]
// Dropping a read chunk (which has no `Drop`) uncommitted is what some tests check.
#![allow(clippy::drop_non_drop)]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pitlane_queue::spsc::{self, Builder, ChunkError, Consumer, PopError, Producer};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// A value that counts its drops, and can be told to panic in `Default` or in `Drop`

thread_local! {
    /// Drops per value id, of the test running on this thread.
    static DROPS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    /// If set, how many more `Tracked::default` calls succeed; the next one panics.
    static DEFAULTS_LEFT: Cell<Option<usize>> = const { Cell::new(None) };
    /// The id of the value whose drop panics (after it is counted), if any.
    static BOMB: Cell<Option<usize>> = const { Cell::new(None) };
}

/// A value with an id, whose drops are counted per id (a second drop of one fails the test).
#[derive(Debug, PartialEq)]
struct Tracked(usize);

impl Default for Tracked {
    fn default() -> Self {
        DEFAULTS_LEFT.with(|left| match left.get() {
            Some(0) => panic!("planned: Default gives up"),
            Some(n) => left.set(Some(n - 1)),
            None => {}
        });
        DROPS.with(|drops| {
            let mut drops = drops.borrow_mut();
            drops.push(0);
            Tracked(drops.len() - 1)
        })
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let count = DROPS.with(|drops| {
            let mut drops = drops.borrow_mut();
            drops[self.0] += 1;
            drops[self.0]
        });
        assert_eq!(count, 1, "value {} dropped twice", self.0);
        if BOMB.with(Cell::get) == Some(self.0) {
            panic!("planned: Drop of {}", self.0);
        }
    }
}

/// How many `Tracked` values this thread has made.
fn made() -> usize {
    DROPS.with(|drops| drops.borrow().len())
}

/// How often the value `id` was dropped.
fn drops_of(id: usize) -> u32 {
    DROPS.with(|drops| drops.borrow()[id])
}

/// The ids made from `from` on that have not been dropped.
fn alive_since(from: usize) -> Vec<usize> {
    DROPS.with(|drops| {
        drops.borrow()[from..]
            .iter()
            .enumerate()
            .filter(|&(_, &count)| count == 0)
            .map(|(i, _)| from + i)
            .collect()
    })
}

/// Keeps the planned panics out of the output; any other panic is reported.
fn quiet_planned_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .is_some_and(|message| message.starts_with("planned"));
            if !planned {
                report(info);
            }
        }));
    });
}

/// Moves both ends to position `offset` (mod capacity) of an empty queue.
fn advance<T: Default>(producer: &mut Producer<T>, consumer: &mut Consumer<T>, offset: usize) {
    for _ in 0..offset {
        assert!(producer.try_push(T::default()).is_ok(), "room for one");
        drop(consumer.try_pop().expect("the value just pushed"));
    }
}

// ---------------------------------------------------------------------------------------------
// WriteChunk: values, drops, panics

#[test]
fn write_chunk_lends_default_values_by_index_and_publishes_what_is_committed() {
    let (mut producer, mut consumer) = spsc::channel::<u32>(6);
    let mut chunk = producer.write_chunk(4).unwrap();
    assert_eq!((chunk.len(), chunk.is_empty()), (4, false));
    assert_eq!(
        (0..5).map(|i| chunk.get(i).copied()).collect::<Vec<_>>(),
        [Some(0), Some(0), Some(0), Some(0), None]
    );
    *chunk.get_mut(3).unwrap() = 30;
    assert!(chunk.get_mut(4).is_none());
    let values = chunk.iter_mut();
    assert_eq!(values.len(), 4);
    for (value, add) in values.zip(1..) {
        *value += add;
    }
    assert_eq!(chunk.get(3), Some(&34));
    let values = chunk.iter();
    assert_eq!(values.len(), 4);
    assert_eq!(values.copied().collect::<Vec<_>>(), [1, 2, 3, 34]);
    // Getting and changing the chunk published nothing.
    assert_eq!(consumer.slots(), 0);
    chunk.commit(3);
    assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(producer.slots(), 6);
    // An empty chunk: nothing to lend, nothing to publish.
    let mut chunk = producer.write_chunk(0).unwrap();
    assert!(chunk.is_empty() && chunk.get(0).is_none() && chunk.iter_mut().len() == 0);
    assert_eq!(chunk.iter().len(), 0);
    chunk.commit_all();
    assert_eq!(consumer.slots(), 0);
    assert!(format!("{:?}", producer.write_chunk(2).unwrap()).starts_with("WriteChunk {"));
}

#[test]
fn every_value_of_a_write_chunk_is_dropped_once_however_it_ends() {
    let first = made();
    {
        let (mut producer, mut consumer) = spsc::channel::<Tracked>(8);
        // Committed whole: nothing dropped until the consumer drops the values.
        let chunk = producer.write_chunk(3).unwrap();
        let ids: Vec<usize> = (0..3).map(|i| chunk.get(i).unwrap().0).collect();
        chunk.commit_all();
        assert!(ids.iter().all(|&id| drops_of(id) == 0));
        consumer.read_chunk(3).unwrap().commit_all();
        assert!(ids.iter().all(|&id| drops_of(id) == 1));

        // Committed in part: the rest is dropped at once, in order, and its slots stay free.
        let chunk = producer.write_chunk(4).unwrap();
        let ids: Vec<usize> = (0..4).map(|i| chunk.get(i).unwrap().0).collect();
        chunk.commit(1);
        assert_eq!(
            ids.iter().map(|&id| drops_of(id)).collect::<Vec<_>>(),
            [0, 1, 1, 1]
        );
        assert_eq!((consumer.slots(), producer.slots()), (1, 7));
        assert_eq!(consumer.try_pop().map(|value| value.0), Ok(ids[0]));

        // A value replaced through `get_mut` is dropped by the assignment, its replacement
        // published.
        let mut chunk = producer.write_chunk(2).unwrap();
        let old = chunk.get(0).unwrap().0;
        let new = Tracked::default();
        let new_id = new.0;
        *chunk.get_mut(0).unwrap() = new;
        assert_eq!(drops_of(old), 1);
        chunk.commit(1);
        assert_eq!(drops_of(new_id), 0);
        assert_eq!(consumer.peek().map(|value| value.0), Ok(new_id));

        // Dropped uncommitted: every value dropped, nothing published, the producer unmoved.
        let free = producer.slots();
        let chunk = producer.write_chunk(5).unwrap();
        let ids: Vec<usize> = (0..5).map(|i| chunk.get(i).unwrap().0).collect();
        drop(chunk);
        assert!(ids.iter().all(|&id| drops_of(id) == 1));
        assert_eq!((producer.slots(), consumer.slots()), (free, 1));

        // Forgotten: nothing dropped (leaked, which is safe), nothing published; the slots
        // stay free and are written over later without dropping the leaked values.
        let chunk = producer.write_chunk(3).unwrap();
        let leaked: Vec<usize> = (0..3).map(|i| chunk.get(i).unwrap().0).collect();
        std::mem::forget(chunk);
        assert!(leaked.iter().all(|&id| drops_of(id) == 0));
        assert_eq!((producer.slots(), consumer.slots()), (free, 1));
        producer.write_chunk(free).unwrap().commit_all();
        assert!(leaked.iter().all(|&id| drops_of(id) == 0));
        assert_eq!(consumer.slots(), 8);
        // Four popped and dropped here, the other four left queued for the ends' drop.
        drop(consumer.read_chunk(4).unwrap().collect::<Vec<_>>());
        assert_eq!(consumer.slots(), 4);
    }
    // Everything made is dropped exactly once (a second drop fails in `Drop`), but for the
    // three values of the forgotten chunk.
    let alive = alive_since(first);
    assert_eq!(
        alive.len(),
        3,
        "only the forgotten chunk's values leak: {alive:?}"
    );
}

#[test]
fn a_panicking_default_drops_what_it_made_and_publishes_nothing() {
    quiet_planned_panics();
    for capacity in [1, 2, 3, 8] {
        for offset in 0..capacity {
            for n in 1..=capacity {
                for k in 0..n {
                    let (mut producer, mut consumer) =
                        Builder::new(capacity).batch(capacity).build().unwrap();
                    advance(&mut producer, &mut consumer, offset);
                    // A value queued before (when there is room), so that the producer holds a
                    // claimed run across the chunk's slots.
                    let queued = usize::from(n < capacity);
                    let before = (queued == 1).then(|| {
                        let value = Tracked::default();
                        let id = value.0;
                        producer.try_push(value).unwrap();
                        id
                    });
                    let first = made();
                    DEFAULTS_LEFT.with(|left| left.set(Some(k)));
                    let result = catch_unwind(AssertUnwindSafe(|| {
                        producer.write_chunk(n).map(|chunk| chunk.len())
                    }));
                    DEFAULTS_LEFT.with(|left| left.set(None));
                    assert!(result.is_err(), "Default panics at call {k}");
                    assert_eq!(made() - first, k, "k values made");
                    assert!(alive_since(first).is_empty(), "and each dropped");
                    assert_eq!(consumer.slots(), queued, "nothing published");
                    assert_eq!(producer.slots(), capacity - queued, "the producer unmoved");
                    // The queue works on: the whole free space, after the value queued before.
                    let chunk = producer.write_chunk(capacity - queued).unwrap();
                    let ids: Vec<usize> =
                        (0..chunk.len()).map(|i| chunk.get(i).unwrap().0).collect();
                    chunk.commit_all();
                    let popped: Vec<usize> = consumer.try_iter().map(|value| value.0).collect();
                    assert_eq!(popped, before.into_iter().chain(ids).collect::<Vec<_>>());
                    assert!(alive_since(first).is_empty());
                }
            }
        }
    }
}

#[test]
fn a_panicking_drop_among_the_discarded_values_does_not_stop_the_others() {
    quiet_planned_panics();
    // A commit of 1 of 5 slots that wrap around the ring's end (slots 4, 5, 0, 1, 2 of 6); the
    // third value's drop panics.
    let (mut producer, mut consumer) = spsc::channel::<Tracked>(6);
    advance(&mut producer, &mut consumer, 4);
    let first = made();
    let chunk = producer.write_chunk(5).unwrap();
    let ids: Vec<usize> = (0..5).map(|i| chunk.get(i).unwrap().0).collect();
    BOMB.with(|bomb| bomb.set(Some(ids[2])));
    let result = catch_unwind(AssertUnwindSafe(|| chunk.commit(1)));
    BOMB.with(|bomb| bomb.set(None));
    assert!(result.is_err(), "the drop of the third value panics");
    assert_eq!(
        ids.iter().map(|&id| drops_of(id)).collect::<Vec<_>>(),
        [0, 1, 1, 1, 1],
        "the committed value kept, the four others dropped (the panicking one too)"
    );
    // Published, and the producer just after it.
    assert_eq!((consumer.slots(), producer.slots()), (1, 5));
    let next = Tracked::default();
    let next_id = next.0;
    producer.try_push(next).unwrap();
    let popped: Vec<usize> = consumer.try_iter().map(|value| value.0).collect();
    assert_eq!(popped, [ids[0], next_id]);

    // Dropped uncommitted, with the panicking value in the middle: the others are dropped,
    // nothing is published.
    let chunk = producer.write_chunk(4).unwrap();
    let ids: Vec<usize> = (0..4).map(|i| chunk.get(i).unwrap().0).collect();
    BOMB.with(|bomb| bomb.set(Some(ids[1])));
    let result = catch_unwind(AssertUnwindSafe(|| drop(chunk)));
    BOMB.with(|bomb| bomb.set(None));
    assert!(result.is_err());
    assert!(ids.iter().all(|&id| drops_of(id) == 1));
    assert_eq!((consumer.slots(), producer.slots()), (0, 6));

    // A commit of more than the chunk panics before anything is published, and drops every
    // value, as a chunk dropped uncommitted does.
    let chunk = producer.write_chunk(2).unwrap();
    let ids: Vec<usize> = (0..2).map(|i| chunk.get(i).unwrap().0).collect();
    assert!(catch_unwind(AssertUnwindSafe(|| chunk.commit(3))).is_err());
    assert!(ids.iter().all(|&id| drops_of(id) == 1));
    assert_eq!((consumer.slots(), producer.slots()), (0, 6));
    producer.write_chunk(6).unwrap().commit_all();
    assert_eq!(consumer.try_iter().count(), 6);
    assert!(alive_since(first).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Read chunks changed in place

#[test]
fn read_chunk_values_change_in_place_and_iterated_counts_the_values_moved_out() {
    let first = made();
    {
        let (mut producer, mut consumer) = spsc::channel::<Tracked>(5);
        advance(&mut producer, &mut consumer, 3);
        // Slots 3, 4, 0, 1: across the ring's end.
        producer.write_chunk(4).unwrap().commit_all();
        let mut chunk = consumer.read_chunk(4).unwrap();
        assert_eq!(chunk.iterated(), 0);
        // Replace the last value: the old one is dropped, the new one queued in its place.
        let old = chunk.get(3).unwrap().0;
        let new = Tracked::default();
        let new_id = new.0;
        *chunk.get_mut(3).unwrap() = new;
        assert_eq!(drops_of(old), 1);
        assert!(chunk.get_mut(4).is_none());
        let ids: Vec<usize> = chunk.iter_mut().map(|value| value.0).collect();
        assert_eq!(ids[3], new_id);
        // Move two out: `iterated` counts them, and indices now start at the third.
        let moved: Vec<usize> = chunk.by_ref().take(2).map(|value| value.0).collect();
        assert_eq!(moved, ids[..2]);
        assert_eq!((chunk.iterated(), chunk.len()), (2, 2));
        assert_eq!(chunk.get_mut(0).map(|value| value.0), Some(ids[2]));
        assert!(chunk.get_mut(2).is_none());
        assert_eq!(chunk.iter_mut().len(), 2);
        // Dropped: the two left stay queued, the replacement among them.
        drop(chunk);
        let rest: Vec<usize> = consumer.try_iter().map(|value| value.0).collect();
        assert_eq!(rest, [ids[2], new_id]);
    }
    assert!(alive_since(first).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Kinds of values

/// 64 KiB, larger than any cache and than a page.
#[derive(Clone, PartialEq)]
struct Big([u8; 1 << 16]);

impl Default for Big {
    fn default() -> Self {
        Big([0; 1 << 16])
    }
}

#[test]
fn values_of_64_kib() {
    let (mut producer, mut consumer) = spsc::channel::<Big>(3);
    advance(&mut producer, &mut consumer, 2);
    let mut chunk = producer.write_chunk(3).unwrap();
    assert!(chunk.get(2).unwrap().0.iter().all(|&byte| byte == 0));
    for (i, value) in chunk.iter_mut().enumerate() {
        value.0.fill(i as u8 + 1);
    }
    chunk.get_mut(1).unwrap().0[12345] = 99;
    chunk.commit(2);
    let mut chunk = consumer.read_chunk(2).unwrap();
    chunk.get_mut(0).unwrap().0[65535] = 7;
    let values: Vec<Big> = chunk.collect();
    assert!(values[0].0[..65535].iter().all(|&byte| byte == 1) && values[0].0[65535] == 7);
    assert_eq!(values[1].0[12345], 99);
    assert_eq!(values[1].0.iter().filter(|&&byte| byte == 2).count(), 65535);
    assert!(consumer.is_empty());
}

thread_local! {
    static UNITS_MADE: Cell<usize> = const { Cell::new(0) };
    static UNITS_DROPPED: Cell<usize> = const { Cell::new(0) };
}

/// A zero-sized value that counts how many are made and dropped.
struct Unit;

impl Default for Unit {
    fn default() -> Self {
        UNITS_MADE.with(|made| made.set(made.get() + 1));
        Unit
    }
}

impl Drop for Unit {
    fn drop(&mut self) {
        UNITS_DROPPED.with(|dropped| dropped.set(dropped.get() + 1));
    }
}

#[test]
fn zero_sized_values() {
    let counts = || (UNITS_MADE.with(Cell::get), UNITS_DROPPED.with(Cell::get));
    {
        let (mut producer, mut consumer) = spsc::channel::<Unit>(3);
        producer.write_chunk(3).unwrap().commit(1);
        assert_eq!(counts(), (3, 2));
        drop(producer.write_chunk(2).unwrap());
        assert_eq!(counts(), (5, 4));
        std::mem::forget(producer.write_chunk(2).unwrap());
        assert_eq!(counts(), (7, 4));
        let mut chunk = producer.write_chunk(2).unwrap();
        assert!(chunk.get_mut(1).is_some() && chunk.iter_mut().len() == 2);
        chunk.commit_all();
        assert_eq!((consumer.slots(), counts()), (3, (9, 4)));
        let mut chunk = consumer.read_chunk(3).unwrap();
        // Through `Default`, which counts the values made.
        #[allow(clippy::default_constructed_unit_structs)]
        let replacement = Unit::default();
        *chunk.get_mut(0).unwrap() = replacement;
        assert_eq!(counts(), (10, 5));
        assert_eq!(chunk.next().map(drop), Some(()));
        assert_eq!((chunk.iterated(), counts()), (1, (10, 6)));
    }
    // The two left queued are dropped with the ends; the two forgotten ones never are.
    assert_eq!(counts(), (10, 8));

    // `()` pops into buffers of any length, `usize::MAX` included (a zero-sized buffer).
    let (mut producer, mut consumer) = spsc::channel::<()>(1 << 16);
    assert_eq!(producer.push_iter(std::iter::repeat_n((), 1000)), 1000);
    let mut whole = Vec::<()>::new();
    assert_eq!(whole.spare_capacity_mut().len(), usize::MAX);
    assert_eq!(
        consumer.pop_entire_slice_uninit(whole.spare_capacity_mut()),
        Err(ChunkError::TooFewSlots(1000))
    );
    assert_eq!(
        consumer
            .pop_entire_slice_uninit(&mut whole.spare_capacity_mut()[..10])
            .map(|popped| popped.len()),
        Ok(10)
    );
    let (popped, rest) = consumer.pop_partial_slice_uninit(whole.spare_capacity_mut());
    assert_eq!((popped.len(), rest.len()), (990, usize::MAX - 990));
    assert!(consumer.is_empty());
}

/// Aligned beyond any cache line.
#[repr(align(128))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Aligned(u64);

#[test]
fn over_aligned_values() {
    let aligned = |value: &Aligned| std::ptr::from_ref(value).is_aligned();
    let (mut producer, mut consumer) = spsc::channel::<Aligned>(5);
    advance(&mut producer, &mut consumer, 3);
    let mut chunk = producer.write_chunk(5).unwrap();
    assert!((0..5).all(|i| aligned(chunk.get(i).unwrap())));
    for (value, i) in chunk.iter_mut().zip(0..) {
        assert!(aligned(value));
        value.0 = i;
    }
    chunk.commit_all();
    let mut chunk = consumer.read_chunk(5).unwrap();
    assert!(chunk.iter_mut().all(|value| aligned(value)));
    chunk.get_mut(4).unwrap().0 = 40;
    drop(chunk);
    let mut buffer = [MaybeUninit::<Aligned>::uninit(); 3];
    let popped = consumer.pop_entire_slice_uninit(&mut buffer).unwrap();
    assert_eq!(popped, [Aligned(0), Aligned(1), Aligned(2)]);
    let (popped, rest) = consumer.pop_partial_slice_uninit(&mut buffer);
    assert_eq!(
        (popped, rest.len()),
        (&mut [Aligned(3), Aligned(40)][..], 1)
    );
}

// ---------------------------------------------------------------------------------------------
// Wrapping, sizes and limits

#[test]
fn chunks_and_uninit_pops_wrap_around_the_rings_end() {
    let (mut producer, mut consumer) = spsc::channel::<u32>(5);
    for offset in 0..5 {
        advance(&mut producer, &mut consumer, offset);
        let mut chunk = producer.write_chunk(5).unwrap();
        for i in 0..5 {
            *chunk.get_mut(i).unwrap() = 10 + i as u32;
        }
        chunk.commit_all();
        let mut chunk = consumer.read_chunk(5).unwrap();
        chunk.iter_mut().for_each(|value| *value *= 2);
        *chunk.get_mut(4).unwrap() += 1;
        assert_eq!(chunk.next(), Some(20));
        assert_eq!(chunk.iterated(), 1);
        drop(chunk);
        let mut buffer = [MaybeUninit::new(0xEE); 3];
        assert_eq!(
            consumer.pop_entire_slice_uninit(&mut buffer[..2]),
            Ok(&mut [22, 24][..])
        );
        let (popped, rest) = consumer.pop_partial_slice_uninit(&mut buffer);
        assert_eq!((&*popped, rest.len()), (&[26, 29][..], 1));
        // SAFETY: the buffer was initialised with the marker, which the call left untouched.
        assert_eq!(unsafe { buffer[2].assume_init() }, 0xEE);
        assert_eq!(consumer.pop_partial_slice_uninit(&mut buffer).0.len(), 0);
    }
}

#[test]
fn sizes_zero_capacity_and_beyond_at_capacity_1_and_65536() {
    for capacity in [1, 1 << 16] {
        let (mut producer, mut consumer) = spsc::channel::<u32>(capacity);
        for _ in 0..2 {
            // Nothing queued: a chunk of 0 works, one of the capacity too, anything more is an
            // error with the free count, never a panic or an overflow.
            let mut chunk = producer.write_chunk(0).unwrap();
            assert!(chunk.is_empty() && chunk.get_mut(0).is_none());
            chunk.commit_all();
            assert_eq!(consumer.slots(), 0);
            for n in [capacity + 1, usize::MAX] {
                assert_eq!(
                    producer.write_chunk(n).unwrap_err(),
                    ChunkError::TooFewSlots(capacity)
                );
            }
            let mut chunk = producer.write_chunk(capacity).unwrap();
            chunk.iter_mut().zip(0..).for_each(|(value, i)| *value = i);
            chunk.commit_all();
            for n in [1, capacity, usize::MAX] {
                assert_eq!(
                    producer.write_chunk(n).unwrap_err(),
                    ChunkError::TooFewSlots(0)
                );
            }
            // All queued: reading more than the capacity is an error with the queued count.
            for n in [capacity + 1, usize::MAX] {
                assert_eq!(
                    consumer.read_chunk(n).unwrap_err(),
                    ChunkError::TooFewSlots(capacity)
                );
            }
            let mut too_long = vec![MaybeUninit::new(7); capacity + 1];
            assert_eq!(
                consumer.pop_entire_slice_uninit(&mut too_long),
                Err(ChunkError::TooFewSlots(capacity))
            );
            assert!(too_long.iter().all(|byte| {
                // SAFETY: initialised with 7 above; the failed call wrote nothing.
                unsafe { byte.assume_init() == 7 }
            }));
            let mut chunk = consumer.read_chunk(capacity).unwrap();
            assert_eq!(chunk.iter_mut().len(), capacity);
            *chunk.get_mut(capacity - 1).unwrap() += 1;
            assert!(chunk.get_mut(capacity).is_none());
            drop(chunk);
            let mut buffer = vec![MaybeUninit::uninit(); capacity];
            let popped = consumer.pop_entire_slice_uninit(&mut buffer).unwrap();
            assert_eq!(popped.len(), capacity);
            assert!(
                popped
                    .iter()
                    .zip(0..)
                    .all(|(&value, i)| value == i + u32::from(i + 1 == capacity as u32))
            );
            // Empty: chunks and pops of 0 work, anything more is an error (or pops nothing).
            assert_eq!(consumer.read_chunk(0).unwrap().len(), 0);
            assert_eq!(consumer.pop_entire_slice_uninit(&mut []), Ok(&mut [][..]));
            assert_eq!(
                consumer.pop_entire_slice_uninit(&mut buffer[..1]),
                Err(ChunkError::TooFewSlots(0))
            );
            let (popped, rest) = consumer.pop_partial_slice_uninit(&mut buffer);
            assert_eq!((popped.len(), rest.len()), (0, capacity));
            assert_eq!(consumer.try_pop(), Err(PopError::Empty));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// cached_slots against a model

#[test]
fn cached_slots_counts_the_run_an_end_has_claimed() {
    let (mut producer, mut consumer) = Builder::new(64).batch(8).build::<u32>().unwrap();
    assert_eq!((producer.cached_slots(), consumer.cached_slots()), (0, 0));
    producer.try_push(0).unwrap();
    let known = producer.cached_slots();
    assert!(
        known > 0 && known <= producer.slots(),
        "a push claims a run"
    );
    // Each push inside the run uses one of it.
    producer.try_push(1).unwrap();
    assert_eq!(producer.cached_slots(), known - 1);
    // A chunk gives the claim up: nothing known until the next probe, though slots are free.
    producer.write_chunk(3).unwrap().commit_all();
    assert_eq!(producer.cached_slots(), 0);
    assert!(producer.slots() > 0);
    assert_eq!(consumer.cached_slots(), 0);
    assert_eq!(consumer.try_pop(), Ok(0));
    let known = consumer.cached_slots();
    assert!(known > 0 && known <= consumer.slots());
    let _ = consumer.read_chunk(1).unwrap();
    assert_eq!(consumer.cached_slots(), 0);
}

#[derive(Clone, Debug)]
enum Op {
    Push,
    Pop,
    /// `write_chunk(n)`, `commit(k)` with `k` = `.1` of `n` (`None`: dropped uncommitted).
    Write(usize, Option<u16>),
    /// `write_chunk_uninit(n)` filled from an iterator of `.1` values.
    Fill(usize, usize),
    /// `read_chunk(n)`, values changed through `iter_mut`, `.1` moved out by the iterator, then
    /// `commit(k)` of `.2` of the rest (`None`: dropped).
    Read(usize, usize, Option<u16>),
    PopEntireUninit(usize),
    PopPartialUninit(usize),
}

fn part_of(part: u16, n: usize) -> usize {
    (n as u128 * u128::from(part) / u128::from(u16::MAX)) as usize
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Push),
        3 => Just(Op::Pop),
        3 => (0usize..12, proptest::option::of(any::<u16>())).prop_map(|(n, k)| Op::Write(n, k)),
        2 => (0usize..12, 0usize..12).prop_map(|(n, items)| Op::Fill(n, items)),
        3 => (0usize..12, 0usize..12, proptest::option::of(any::<u16>()))
            .prop_map(|(n, out, k)| Op::Read(n, out, k)),
        1 => (0usize..12).prop_map(Op::PopEntireUninit),
        1 => (0usize..12).prop_map(Op::PopPartialUninit),
    ]
}

/// Both ends' `cached_slots` are at most their `slots`, which the model gives exactly.
fn check_cached(
    producer: &Producer<u32>,
    consumer: &Consumer<u32>,
    capacity: usize,
    model: &VecDeque<u32>,
) -> Result<(), TestCaseError> {
    let (cached_free, cached_queued) = (producer.cached_slots(), consumer.cached_slots());
    prop_assert_eq!(producer.slots(), capacity - model.len());
    prop_assert_eq!(consumer.slots(), model.len());
    prop_assert!(
        cached_free <= capacity - model.len(),
        "producer: {} cached",
        cached_free
    );
    prop_assert!(
        cached_queued <= model.len(),
        "consumer: {} cached",
        cached_queued
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn cached_slots_never_exceed_slots(
        capacity in 1usize..=24,
        batch in any::<u16>(),
        adaptive in any::<bool>(),
        ops in proptest::collection::vec(op(), 0..120),
    ) {
        let batch = 1 + part_of(batch, capacity - 1);
        let (mut producer, mut consumer) =
            Builder::new(capacity).batch(batch).adaptive(adaptive).build::<u32>().unwrap();
        let mut model = VecDeque::new();
        let mut next = 0u32;
        for op in ops {
            match op {
                Op::Push => {
                    let pushed = producer.try_push(next).is_ok();
                    prop_assert_eq!(pushed, model.len() < capacity);
                    if pushed {
                        model.push_back(next);
                    }
                    next += 1;
                }
                Op::Pop => prop_assert_eq!(consumer.try_pop().ok(), model.pop_front()),
                Op::Write(n, commit) => match producer.write_chunk(n) {
                    Ok(mut chunk) => {
                        prop_assert!(n <= capacity - model.len());
                        for value in chunk.iter_mut() {
                            *value = next;
                            next += 1;
                        }
                        match commit {
                            Some(part) => {
                                let k = part_of(part, n);
                                model.extend((0..k).map(|i| *chunk.get(i).unwrap()));
                                chunk.commit(k);
                            }
                            None => drop(chunk),
                        }
                    }
                    Err(error) => {
                        prop_assert_eq!(error, ChunkError::TooFewSlots(capacity - model.len()));
                        prop_assert!(n > capacity - model.len());
                    }
                },
                Op::Fill(n, items) => {
                    if let Ok(chunk) = producer.write_chunk_uninit(n) {
                        let filled = chunk.fill_from_iter(next..next + items as u32);
                        prop_assert_eq!(filled, n.min(items));
                        model.extend(next..next + filled as u32);
                        next += items as u32;
                    }
                }
                Op::Read(n, out, commit) => match consumer.read_chunk(n) {
                    Ok(mut chunk) => {
                        chunk.iter_mut().for_each(|value| *value = !*value);
                        for place in model.iter_mut().take(n) {
                            *place = !*place;
                        }
                        for _ in 0..out.min(n) {
                            prop_assert_eq!(chunk.next(), model.pop_front());
                        }
                        prop_assert_eq!(chunk.iterated(), out.min(n));
                        if let Some(part) = commit {
                            let k = part_of(part, chunk.len());
                            chunk.commit(k);
                            model.drain(..k);
                        }
                    }
                    Err(error) => {
                        prop_assert_eq!(error, ChunkError::TooFewSlots(model.len()));
                    }
                },
                Op::PopEntireUninit(len) => {
                    let mut buffer = vec![MaybeUninit::uninit(); len];
                    match consumer.pop_entire_slice_uninit(&mut buffer) {
                        Ok(popped) => {
                            let expected: Vec<u32> = model.drain(..len).collect();
                            prop_assert_eq!(&*popped, &expected[..]);
                        }
                        Err(error) => {
                            prop_assert_eq!(error, ChunkError::TooFewSlots(model.len()));
                            prop_assert!(len > model.len());
                        }
                    }
                }
                Op::PopPartialUninit(len) => {
                    let mut buffer = vec![MaybeUninit::uninit(); len];
                    let (popped, rest) = consumer.pop_partial_slice_uninit(&mut buffer);
                    let expected: Vec<u32> = model.drain(..len.min(model.len())).collect();
                    prop_assert_eq!(&*popped, &expected[..]);
                    prop_assert_eq!(rest.len(), len - expected.len());
                }
            }
            check_cached(&producer, &consumer, capacity, &model)?;
        }
    }
}

#[test]
fn write_chunk_is_send_when_values_are() {
    fn send<T: Send>() {}
    send::<spsc::WriteChunk<'_, String>>();
    send::<spsc::ReadChunk<'_, String>>();
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
