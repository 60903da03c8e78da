//! The B-Queue is a linearizable bounded FIFO queue: histories of one producer thread and one
//! consumer thread, on real threads, checked by `pitlane-lincheck` against
//! [`BoundedQueueSpec`] (so a "full" or "empty" that was not true at some instant during the
//! call fails the check, as does a lost, duplicated or reordered value).
#![cfg(not(pitlane_loom))]

use pitlane_lincheck::specs::{BoundedQueueSpec, ContainerOp, ContainerRet};
use pitlane_lincheck::{OpSlot, Runner, Shape, Subject};
use pitlane_queue::spsc::{Builder, Consumer, Producer};

/// What a thread holds: thread 0 the producer, thread 1 the consumer.
enum End {
    Producer(Producer<u64>),
    Consumer(Consumer<u64>),
}

/// A fresh queue of `capacity` slots and batch `batch` each round.
struct Spsc {
    capacity: usize,
    batch: usize,
    adaptive: bool,
}

impl Subject for Spsc {
    type Op = ContainerOp<u64>;
    type Ret = ContainerRet<u64>;
    type Handle = End;

    fn fresh(&self, shape: Shape) -> Vec<End> {
        assert!(
            shape.threads <= 2,
            "an SPSC queue has one producer and one consumer"
        );
        let (producer, consumer) = Builder::new(self.capacity)
            .batch(self.batch)
            .increment(1)
            .adaptive(self.adaptive)
            .build()
            .expect("valid shape");
        // A shrunk failure may run the producer alone; the consumer then just goes away.
        [End::Producer(producer), End::Consumer(consumer)]
            .into_iter()
            .take(shape.threads)
            .collect()
    }

    fn apply(&self, end: &mut End, op: &ContainerOp<u64>) -> ContainerRet<u64> {
        match (end, op) {
            (End::Producer(producer), ContainerOp::Push(value)) => {
                match producer.try_push(*value) {
                    Ok(()) => ContainerRet::Pushed,
                    Err(error) => {
                        assert!(error.is_full(), "the SPSC queue is never transient");
                        ContainerRet::Full
                    }
                }
            }
            (End::Consumer(consumer), ContainerOp::Pop) => consumer.try_pop().ok().into(),
            (_, op) => panic!("{op:?} on the wrong end"),
        }
    }
}

/// Thread 0 pushes distinct values, thread 1 pops.
fn push_or_pop(slot: &mut OpSlot<'_>) -> ContainerOp<u64> {
    if slot.thread == 0 {
        ContainerOp::Push(slot.serial + 1)
    } else {
        ContainerOp::Pop
    }
}

fn check(capacity: usize, batch: usize, adaptive: bool, ops: usize, rounds: u64) {
    Runner::new(
        BoundedQueueSpec::new(capacity),
        Spsc {
            capacity,
            batch,
            adaptive,
        },
        push_or_pop,
    )
    .threads(2)
    .ops(ops)
    .rounds(rounds)
    .seed(0x5b5c_0001 + (capacity * 31 + batch) as u64)
    .assert_linearizable();
}

#[test]
fn tiny_rings_are_linearizable() {
    // Small rings meet "full" and "empty" all the time.
    for capacity in 1..=4 {
        for batch in 1..=capacity {
            check(capacity, batch, true, 12, 1000);
        }
    }
}

#[test]
fn plain_backtracking_is_linearizable() {
    check(3, 2, false, 12, 1000);
    check(4, 4, false, 12, 1000);
}

#[test]
fn batches_that_wrap_are_linearizable() {
    check(8, 4, true, 20, 1000);
    check(7, 3, true, 20, 1000);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
