//! `Consumer::pop_slice` (rtrb's `pop_partial_slice`) and the fused `ReadChunk` iterator:
//! buffers of every length against a `VecDeque` model, across wraps of the ring; a value is
//! never popped without a place for it; a panicking `Drop` of a buffer element loses nothing
//! popped.
#![cfg(not(pitlane_loom))]

use std::cell::Cell;
use std::collections::VecDeque;
use std::iter::FusedIterator;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

use pitlane_queue::spsc::{self, Builder, PopError, ReadChunk};
use proptest::prelude::*;

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[test]
fn an_empty_buffer_pops_nothing() {
    let (mut producer, mut consumer) = spsc::channel(4);
    producer.push_slice(&[1, 2]);
    assert_eq!(consumer.pop_slice(&mut []), 0);
    assert_eq!(consumer.len(), 2);
    assert_eq!(consumer.try_pop(), Ok(1));
}

#[test]
fn an_empty_queue_leaves_the_buffer_alone() {
    let (_producer, mut consumer) = spsc::channel::<u8>(4);
    let mut buffer = [7; 3];
    assert_eq!(consumer.pop_slice(&mut buffer), 0);
    assert_eq!(buffer, [7; 3]);
}

#[test]
fn a_short_buffer_takes_a_prefix_and_leaves_the_rest_queued() {
    let (mut producer, mut consumer) = spsc::channel(8);
    producer.push_slice(&[1, 2, 3, 4, 5]);
    let mut buffer = [0; 3];
    assert_eq!(consumer.pop_slice(&mut buffer), 3);
    assert_eq!(buffer, [1, 2, 3]);
    assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [4, 5]);
}

#[test]
fn pops_across_the_ring_s_end() {
    let (mut producer, mut consumer) = spsc::channel(3);
    for round in 0..10u32 {
        assert_eq!(producer.push_slice(&[round, round + 100]), 2);
        let mut buffer = [0; 5];
        assert_eq!(consumer.pop_slice(&mut buffer), 2);
        assert_eq!(buffer[..2], [round, round + 100]);
    }
}

#[test]
fn replaced_elements_are_dropped_once_and_popped_values_stay_in_the_buffer() {
    struct Counted(Rc<Cell<usize>>, u32);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    let drops = Rc::new(Cell::new(0));
    let (mut producer, mut consumer) = spsc::channel(4);
    for i in 0..3 {
        producer.try_push(Counted(drops.clone(), i)).ok().unwrap();
    }
    let mut buffer: Vec<_> = (10..14).map(|i| Counted(drops.clone(), i)).collect();
    assert_eq!(consumer.pop_slice(&mut buffer), 3);
    assert_eq!(drops.get(), 3, "the three replaced elements");
    let held: Vec<u32> = buffer.iter().map(|value| value.1).collect();
    assert_eq!(held, [0, 1, 2, 13]);
    drop(buffer);
    assert_eq!(drops.get(), 7);
}

#[test]
fn a_panicking_drop_of_a_replaced_element_loses_no_popped_value() {
    struct PanicsOnDrop(u32);
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            if self.0 == 99 {
                panic!("element {} refuses to go", self.0);
            }
        }
    }
    let (mut producer, mut consumer) = spsc::channel(4);
    for i in 0..3 {
        producer.try_push(PanicsOnDrop(i)).ok().unwrap();
    }
    let mut buffer = vec![PanicsOnDrop(10), PanicsOnDrop(99), PanicsOnDrop(12)];
    let unwound = catch_unwind(AssertUnwindSafe(|| consumer.pop_slice(&mut buffer)));
    assert!(unwound.is_err());
    // The first two values were popped into their places before the panic; the third waits.
    let held: Vec<u32> = buffer.iter().map(|value| value.0).collect();
    assert_eq!(held, [0, 1, 12]);
    assert_eq!(consumer.try_pop().map(|value| value.0), Ok(2));
    assert_eq!(
        consumer.try_pop().map(|value| value.0),
        Err(PopError::Empty)
    );
}

#[test]
fn a_used_up_read_chunk_keeps_returning_none() {
    fn fused<I: FusedIterator>(iterator: I) -> I {
        iterator
    }
    let (mut producer, mut consumer) = spsc::channel(4);
    producer.push_slice(&[1, 2]);
    {
        let mut chunk: ReadChunk<'_, i32> = fused(consumer.read_chunk(2).unwrap());
        assert_eq!((chunk.next(), chunk.next()), (Some(1), Some(2)));
        for _ in 0..100 {
            assert_eq!(chunk.next(), None);
        }
        producer.try_push(3).unwrap();
        assert_eq!(
            chunk.next(),
            None,
            "a value pushed later is not the chunk's"
        );
    }
    assert_eq!(consumer.try_pop(), Ok(3));
}

#[derive(Clone, Debug)]
enum Step {
    Push(usize),
    Pop(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..12usize).prop_map(Step::Push),
        (0..12usize).prop_map(Step::Pop)
    ]
}

proptest! {
    /// `push_slice` and `pop_slice` with buffers of every length behave as a bounded deque,
    /// for every capacity and batch size.
    #[test]
    fn pop_slice_matches_a_bounded_deque(
        capacity in 1..10usize,
        batch_seed in 0..10usize,
        steps in prop::collection::vec(step(), 0..60),
    ) {
        let batch = 1 + batch_seed % capacity;
        let (mut producer, mut consumer) =
            Builder::new(capacity).batch(batch).build::<u64>().unwrap();
        let mut model = VecDeque::new();
        let mut next = 0u64;
        for step in steps {
            match step {
                Step::Push(n) => {
                    let values: Vec<u64> = (next..next + n as u64).collect();
                    let expected = n.min(capacity - model.len());
                    prop_assert_eq!(producer.push_slice(&values), expected);
                    model.extend(&values[..expected]);
                    next += n as u64;
                }
                Step::Pop(n) => {
                    let mut buffer = vec![u64::MAX; n];
                    let popped = consumer.pop_slice(&mut buffer);
                    prop_assert_eq!(popped, n.min(model.len()));
                    let expected: Vec<u64> = model.drain(..popped).collect();
                    prop_assert_eq!(&buffer[..popped], &expected[..]);
                    prop_assert!(buffer[popped..].iter().all(|&untouched| untouched == u64::MAX));
                }
            }
            prop_assert_eq!(consumer.len(), model.len());
        }
    }
}
