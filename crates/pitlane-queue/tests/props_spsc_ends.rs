//! Property tests of the SPSC queue's chunk operations in every combination with plain pushes
//! and pops, against a `VecDeque`, with values that count their drops: chunks forgotten
//! (`mem::forget`) half-used, `fill_from_iter` whose iterator panics part-way, read chunks
//! whose iterator is dropped or forgotten half-consumed, `pop_slice`, and the ends' snapshots
//! (`len`, `free_slots`, `is_full`, `is_empty`) after each step. At the end both ends are
//! dropped (in either order) and every value made must have been dropped exactly once, except
//! the ones a forgotten chunk leaked on purpose (written into its slots, never committed).
#![cfg(not(pitlane_loom))]
// The chunks have no `Drop` today, so forgetting one is dropping it; the test forgets them all
// the same, so that it keeps checking the forgotten case should a chunk ever get a `Drop`.
#![allow(clippy::forget_non_drop)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pitlane_queue::spsc::{Builder, ChunkError, PopError};
use proptest::prelude::*;

thread_local! {
    /// Drops per value id, of the case running on this thread.
    static DROPS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// A value that counts its drops.
#[derive(Debug, PartialEq)]
struct V(usize);

impl V {
    fn new() -> Self {
        DROPS.with(|drops| {
            let mut drops = drops.borrow_mut();
            drops.push(0);
            V(drops.len() - 1)
        })
    }
}

impl Drop for V {
    fn drop(&mut self) {
        DROPS.with(|drops| drops.borrow_mut()[self.0] += 1);
    }
}

/// Keeps the planned panics of `Op::Fill` out of the output; any other panic is reported.
fn quiet_planned_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&"the iterator gives up") {
                report(info);
            }
        }));
    });
}

#[derive(Clone, Debug)]
enum Op {
    Push,
    Pop,
    /// Push from an iterator of `.0` values.
    PushIter(u8),
    /// `fill_from_iter` on a chunk of `.0` slots from `.1` values, panicking before value `.2`.
    Fill(u8, u8, Option<u8>),
    /// Reserve `.0` slots, write `.1` of them, then forget the chunk (the written ones leak).
    ForgetWrite(u8, u8),
    /// Read a chunk of `.0` values, move `.1` out through its iterator, then drop or forget it.
    ReadThenLeave(u8, u8, bool),
    /// `pop_slice` into a buffer of `.0` values.
    PopSlice(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Push),
        4 => Just(Op::Pop),
        1 => (0u8..12).prop_map(Op::PushIter),
        2 => (0u8..12, 0u8..12, proptest::option::of(0u8..12)).prop_map(|(n, k, p)| Op::Fill(n, k, p)),
        1 => (0u8..12, 0u8..12).prop_map(|(n, k)| Op::ForgetWrite(n, k)),
        2 => (0u8..12, 0u8..12, any::<bool>()).prop_map(|(n, k, f)| Op::ReadThenLeave(n, k, f)),
        1 => (0u8..12).prop_map(Op::PopSlice),
    ]
}

fn case() -> impl Strategy<Value = (usize, usize, bool, Vec<Op>, bool)> {
    (1usize..=12).prop_flat_map(|capacity| {
        (
            Just(capacity),
            1..=capacity,
            any::<bool>(),
            proptest::collection::vec(op(), 0..120),
            any::<bool>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn chunks_and_values_behave_like_a_vecdeque_and_drop_once(
        (capacity, batch, adaptive, ops, producer_last) in case()
    ) {
        quiet_planned_panics();
        DROPS.with(|drops| drops.borrow_mut().clear());
        let (mut producer, mut consumer) =
            Builder::new(capacity).batch(batch).adaptive(adaptive).build::<V>().unwrap();
        let mut model: VecDeque<usize> = VecDeque::new();
        let mut leaked = Vec::new();
        for op in ops {
            match op {
                Op::Push => {
                    let value = V::new();
                    let id = value.0;
                    match producer.try_push(value) {
                        Ok(()) => model.push_back(id),
                        Err(error) => {
                            prop_assert!(error.is_full());
                            prop_assert_eq!(model.len(), capacity);
                            prop_assert_eq!(error.into_inner().0, id);
                        }
                    }
                }
                Op::Pop => match consumer.try_pop() {
                    Ok(value) => prop_assert_eq!(Some(value.0), model.pop_front()),
                    Err(error) => {
                        prop_assert_eq!(error, PopError::Empty);
                        prop_assert!(model.is_empty());
                    }
                },
                Op::PushIter(count) => {
                    let mut values = (0..count).map(|_| V::new()).collect::<Vec<_>>().into_iter();
                    let ids: Vec<usize> = values.as_slice().iter().map(|v| v.0).collect();
                    let pushed = producer.push_iter(values.by_ref());
                    prop_assert_eq!(pushed, usize::from(count).min(capacity - model.len()));
                    model.extend(&ids[..pushed]);
                    // The rest were never taken from the iterator: they drop with it here.
                    prop_assert_eq!(values.len(), usize::from(count) - pushed);
                }
                Op::Fill(n, k, panic_at) => {
                    let n = usize::from(n);
                    match producer.write_chunk_uninit(n) {
                        Ok(chunk) => {
                            prop_assert!(n <= capacity - model.len());
                            let made: RefCell<Vec<usize>> = RefCell::new(Vec::new());
                            let values = (0..k).map(|i| {
                                if Some(i) == panic_at {
                                    panic!("the iterator gives up");
                                }
                                let value = V::new();
                                made.borrow_mut().push(value.0);
                                value
                            });
                            let result =
                                catch_unwind(AssertUnwindSafe(|| chunk.fill_from_iter(values)));
                            let made = made.into_inner();
                            // Exactly the values made before the panic (or the end of either)
                            // went in, in order.
                            let expected = n.min(usize::from(k)).min(
                                panic_at.map_or(usize::MAX, usize::from),
                            );
                            match result {
                                Ok(filled) => prop_assert_eq!(filled, expected),
                                Err(_) => prop_assert!(panic_at.is_some_and(|p| usize::from(p) < n.min(usize::from(k)))),
                            }
                            prop_assert_eq!(made.len(), expected);
                            model.extend(made);
                        }
                        Err(ChunkError::TooFewSlots(free)) => {
                            prop_assert!(n > capacity - model.len());
                            prop_assert_eq!(free, capacity - model.len());
                        }
                    }
                }
                Op::ForgetWrite(n, k) => {
                    if let Ok(mut chunk) = producer.write_chunk_uninit(usize::from(n)) {
                        for i in 0..usize::from(k).min(chunk.len()) {
                            let value = V::new();
                            leaked.push(value.0);
                            chunk.slot(i).write(value);
                        }
                        std::mem::forget(chunk);
                    }
                }
                Op::ReadThenLeave(n, k, forget) => {
                    let n = usize::from(n);
                    match consumer.read_chunk(n) {
                        Ok(mut chunk) => {
                            prop_assert!(n <= model.len());
                            for _ in 0..usize::from(k).min(n) {
                                let value = chunk.next().map(|v| v.0);
                                prop_assert_eq!(value, model.pop_front());
                            }
                            prop_assert_eq!(chunk.len(), n - usize::from(k).min(n));
                            if forget {
                                std::mem::forget(chunk);
                            }
                        }
                        Err(ChunkError::TooFewSlots(queued)) => {
                            prop_assert!(n > model.len());
                            prop_assert_eq!(queued, model.len());
                        }
                    }
                }
                Op::PopSlice(len) => {
                    let mut buffer: Vec<V> = (0..len).map(|_| V::new()).collect();
                    let popped = consumer.pop_slice(&mut buffer);
                    prop_assert_eq!(popped, usize::from(len).min(model.len()));
                    for value in &buffer[..popped] {
                        prop_assert_eq!(Some(value.0), model.pop_front());
                    }
                }
            }
            prop_assert_eq!(producer.len(), model.len());
            prop_assert_eq!(consumer.len(), model.len());
            prop_assert_eq!(producer.free_slots(), capacity - model.len());
            prop_assert_eq!(producer.is_full(), model.len() == capacity);
            prop_assert_eq!(consumer.is_empty(), model.is_empty());
            prop_assert_eq!(producer.is_empty(), model.is_empty());
            prop_assert_eq!(consumer.peek().ok().map(|v| v.0), model.front().copied());
        }
        if producer_last {
            drop(consumer);
            drop(producer);
        } else {
            drop(producer);
            drop(consumer);
        }
        DROPS.with(|drops| -> Result<(), TestCaseError> {
            for (id, &count) in drops.borrow().iter().enumerate() {
                let expected = u32::from(!leaked.contains(&id));
                prop_assert_eq!(count, expected, "value {} dropped {} times", id, count);
            }
            Ok(())
        })?;
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
