//! Property tests of the SPSC queue's builder: every combination of settings gives a queue that
//! behaves like a `VecDeque` of the same capacity, or a clear error — never a queue that writes
//! past its ring (an overflowing `history + increment` once did exactly that).
#![cfg(not(pitlane_loom))]

use std::collections::VecDeque;

use pitlane_queue::spsc::{Builder, ChannelError, ChunkError, PopError, PushError};
use proptest::prelude::*;

/// A setting drawn from the edges (0, 1, the capacity and its neighbours, `usize::MAX` and
/// its neighbours) and from anywhere in between.
fn setting(capacity: usize) -> impl Strategy<Value = Option<usize>> {
    prop_oneof![
        Just(None),
        Just(Some(0)),
        Just(Some(1)),
        Just(Some(capacity.saturating_sub(1))),
        Just(Some(capacity)),
        Just(Some(capacity.saturating_add(1))),
        Just(Some(usize::MAX / 2 + 1)),
        Just(Some(usize::MAX - 1)),
        Just(Some(usize::MAX)),
        (0..=2 * capacity + 2).prop_map(Some),
        any::<usize>().prop_map(Some),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Push(u32),
    Pop,
    Peek,
    PushIter(u8),
    /// Reserve a chunk of `.0` slots, write and publish `.1` of them.
    WriteChunk(u8, u8),
    /// Read a chunk of `.0` values, take `.1` of them out (then iterate the rest).
    ReadChunk(u8, u8),
}

fn script() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        prop_oneof![
            4 => any::<u32>().prop_map(Op::Push),
            4 => Just(Op::Pop),
            1 => Just(Op::Peek),
            1 => any::<u8>().prop_map(Op::PushIter),
            1 => (0u8..50, 0u8..50).prop_map(|(n, k)| Op::WriteChunk(n, k)),
            1 => (0u8..50, 0u8..50).prop_map(|(n, k)| Op::ReadChunk(n, k)),
        ],
        0..200,
    )
}

fn case() -> impl Strategy<Value = (usize, Option<usize>, Option<usize>, bool, Vec<Op>)> {
    (0usize..=40).prop_flat_map(|capacity| {
        (
            Just(capacity),
            setting(capacity),
            setting(capacity),
            any::<bool>(),
            script(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_builder_gives_a_working_queue_or_an_error(
        (capacity, batch, increment, adaptive, ops) in case()
    ) {
        let mut builder = Builder::new(capacity).adaptive(adaptive);
        if let Some(batch) = batch {
            builder = builder.batch(batch);
        }
        if let Some(increment) = increment {
            builder = builder.increment(increment);
        }
        let (mut producer, mut consumer) = match builder.build::<u32>() {
            Ok(ends) => ends,
            Err(error) => {
                // Exactly the documented refusals, and nothing else.
                let expected = if capacity == 0 {
                    ChannelError::ZeroCapacity
                } else if batch.is_some_and(|b| b == 0 || b > capacity) {
                    ChannelError::BatchOutOfRange { batch: batch.unwrap(), capacity }
                } else {
                    prop_assert_eq!(increment, Some(0));
                    ChannelError::ZeroIncrement
                };
                prop_assert_eq!(error, expected);
                return Ok(());
            }
        };
        prop_assert!(capacity > 0);
        prop_assert_eq!(producer.capacity(), capacity);
        let mut model = VecDeque::new();
        for op in ops {
            match op {
                Op::Push(value) => match producer.try_push(value) {
                    Ok(()) => {
                        prop_assert!(model.len() < capacity, "pushed into a full queue");
                        model.push_back(value);
                    }
                    Err(PushError::Full(back)) => {
                        prop_assert_eq!(back, value);
                        prop_assert_eq!(model.len(), capacity, "full before capacity");
                    }
                    Err(PushError::Transient(_)) => prop_assert!(false, "a transient spsc push"),
                },
                Op::Pop => match consumer.try_pop() {
                    Ok(value) => prop_assert_eq!(Some(value), model.pop_front()),
                    Err(PopError::Empty) => prop_assert!(model.is_empty()),
                    Err(PopError::Transient) => prop_assert!(false, "a transient spsc pop"),
                },
                Op::Peek => match consumer.peek() {
                    Ok(value) => prop_assert_eq!(Some(value), model.front()),
                    Err(PopError::Empty) => prop_assert!(model.is_empty()),
                    Err(PopError::Transient) => prop_assert!(false, "a transient spsc peek"),
                },
                Op::WriteChunk(n, k) => {
                    let (n, k) = (usize::from(n), usize::from(k));
                    match producer.write_chunk_uninit(n) {
                        Ok(mut chunk) => {
                            prop_assert!(n <= capacity - model.len(), "a chunk beyond the free slots");
                            prop_assert_eq!(chunk.len(), n);
                            let k = k.min(n);
                            for i in 0..k {
                                chunk.slot(i).write(1000 + i as u32);
                            }
                            // SAFETY: the first `k` slots were written just above.
                            unsafe { chunk.commit(k) };
                            model.extend((0..k).map(|i| 1000 + i as u32));
                        }
                        Err(ChunkError::TooFewSlots(free)) => {
                            prop_assert!(n > capacity - model.len(), "refused a chunk that fits");
                            prop_assert_eq!(free, capacity - model.len());
                        }
                    }
                }
                Op::ReadChunk(n, k) => {
                    let (n, k) = (usize::from(n), usize::from(k));
                    match consumer.read_chunk(n) {
                        Ok(chunk) => {
                            prop_assert!(n <= model.len(), "a chunk beyond the queued values");
                            let seen: Vec<u32> = chunk.iter().copied().collect();
                            let expected: Vec<u32> = model.iter().take(n).copied().collect();
                            prop_assert_eq!(seen, expected);
                            if k % 2 == 0 {
                                chunk.commit(k.min(n));
                                for _ in 0..k.min(n) {
                                    model.pop_front();
                                }
                            } else {
                                // Move some out through the iterator, leave the rest queued.
                                let mut chunk = chunk;
                                for _ in 0..k.min(n) {
                                    prop_assert_eq!(chunk.next(), model.pop_front());
                                }
                            }
                        }
                        Err(ChunkError::TooFewSlots(queued)) => {
                            prop_assert!(n > model.len(), "refused a chunk that is there");
                            prop_assert_eq!(queued, model.len());
                        }
                    }
                }
                Op::PushIter(count) => {
                    let values: Vec<u32> = (0..u32::from(count)).collect();
                    let pushed = producer.push_iter(values.iter().copied());
                    prop_assert_eq!(pushed, usize::from(count).min(capacity - model.len()));
                    model.extend(&values[..pushed]);
                }
            }
            prop_assert_eq!(producer.len(), model.len());
            prop_assert_eq!(consumer.len(), model.len());
        }
        let rest: Vec<u32> = consumer.try_iter().collect();
        prop_assert_eq!(rest, Vec::from(model));
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
