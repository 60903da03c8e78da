//! The documented contracts of the public API, each checked as the rustdoc states it: the
//! SPSC defaults and builder ranges (at 0, 1 and `usize::MAX`), the exact capacity and the
//! "never transient" promise of the SPSC queue, the order of the bags on one thread, the
//! Bagpipe's pipe counts, the error texts, and the panics of the pushes that must succeed
//! when a bag cannot grow.
#![cfg(not(pitlane_loom))]

use std::cell::RefCell;

use pitlane_queue::bagpipe::{Bagpipe, BagpipeError, MAX_PIPES};
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevokeHandle};
use pitlane_queue::spsc::{self, Builder, ChannelError, MAX_DEFAULT_BATCH};
use pitlane_queue::stack::Stack;
use pitlane_queue::{PopError, PushError};
use pitlane_testkit::panics::message_of;

/// Cells per segment that no machine can allocate: the segment's skip bitmap alone is 2^49
/// bytes (512 TiB, more than a 47-bit address space), so each push that needs a segment is
/// refused by the allocator, without any limit set on the process. (On a 32-bit target no
/// segment type is both too large to allocate and small enough to compile: the tests that use
/// it run on 64-bit targets only.)
#[cfg(target_pointer_width = "64")]
const HUGE: usize = 1 << 52;

/// `default_batch`: `min(256, max(1, capacity / 4))`; `default_increment`:
/// `max(1, batch / 4)`, at 0, 1 and the largest values.
#[test]
fn spsc_defaults_follow_their_formulas() {
    for capacity in [0, 1, 3, 4, 7, 8, 1023, 1024, 1027, 1028, 4096, usize::MAX] {
        assert_eq!(
            spsc::default_batch(capacity),
            (capacity / 4).clamp(1, MAX_DEFAULT_BATCH),
            "capacity {capacity}"
        );
    }
    for batch in [0, 1, 3, 4, 7, 8, 256, usize::MAX] {
        assert_eq!(
            spsc::default_increment(batch),
            (batch / 4).max(1),
            "batch {batch}"
        );
    }
}

/// `Builder::batch`: `1..=capacity`, anything else makes `build` fail;
/// `Builder::increment`: at least 1, anything up to `usize::MAX` works; a capacity whose
/// slots do not fit in the address space is `CapacityOverflow`.
#[test]
fn spsc_builder_ranges() {
    for capacity in [1, 2, 7] {
        for batch in [0, capacity + 1, usize::MAX] {
            assert_eq!(
                Builder::new(capacity)
                    .batch(batch)
                    .build::<u8>()
                    .unwrap_err(),
                ChannelError::BatchOutOfRange { batch, capacity }
            );
        }
        for batch in [1, capacity] {
            for increment in [1, usize::MAX] {
                for adaptive in [true, false] {
                    let (mut producer, mut consumer) = Builder::new(capacity)
                        .batch(batch)
                        .increment(increment)
                        .adaptive(adaptive)
                        .build::<usize>()
                        .unwrap();
                    // Several laps of the ring, in bursts of every length.
                    let mut next = 0;
                    let mut expected = 0;
                    for burst in 1..=3 * capacity {
                        let k = burst % capacity + 1;
                        for _ in 0..k {
                            producer.try_push(next).unwrap();
                            next += 1;
                        }
                        for _ in 0..k {
                            assert_eq!(consumer.try_pop(), Ok(expected));
                            expected += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(
            Builder::new(capacity)
                .increment(0)
                .build::<u8>()
                .unwrap_err(),
            ChannelError::ZeroIncrement
        );
    }
    // The capacity is checked first.
    assert_eq!(
        Builder::new(0)
            .batch(0)
            .increment(0)
            .build::<u8>()
            .unwrap_err(),
        ChannelError::ZeroCapacity
    );
    for error in [
        Builder::new(usize::MAX).build::<u8>().unwrap_err(),
        Builder::new(usize::MAX).build::<()>().unwrap_err(),
        Builder::new(usize::MAX / 2 + 1).build::<u64>().unwrap_err(),
    ] {
        assert_eq!(error, ChannelError::CapacityOverflow);
    }
}

/// Every `ChannelError`'s `Display`, and `channel`'s documented panic for capacity 0.
#[test]
fn spsc_error_texts_and_channel_panic() {
    let cases = [
        (
            ChannelError::ZeroCapacity,
            "the capacity must be at least 1",
        ),
        (
            ChannelError::CapacityOverflow,
            "the capacity is too large to allocate",
        ),
        (
            ChannelError::BatchOutOfRange {
                batch: 9,
                capacity: 8,
            },
            "the batch size 9 is not in 1..=8",
        ),
        (
            ChannelError::ZeroIncrement,
            "the backtracking increment must be at least 1",
        ),
        (
            ChannelError::OutOfMemory {
                capacity: 2,
                bytes: 32,
            },
            "out of memory: 2 slots need 32 bytes, which the allocator refused",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
    assert_eq!(
        message_of(|| drop(spsc::channel::<u8>(0))),
        "pitlane_queue::spsc::channel(0): the capacity must be at least 1"
    );
    assert_eq!(
        message_of(|| drop(spsc::channel::<u8>(usize::MAX))),
        format!(
            "pitlane_queue::spsc::channel({}): the capacity is too large to allocate",
            usize::MAX
        )
    );
}

/// "A queue of `n` slots holds exactly `n` values, whatever the batch size"; `try_push`
/// "fails only when the queue really holds `capacity` values"; the queue "is never
/// transient"; `len`, `free_slots`, `is_full` and `is_empty` are exact while the other end is
/// idle; `peek` shows the value `try_pop` returns next.
#[test]
fn spsc_capacity_is_exact_and_never_transient() {
    for capacity in 1..=9 {
        for batch in 1..=capacity {
            let (mut producer, mut consumer) =
                Builder::new(capacity).batch(batch).build::<u32>().unwrap();
            let mut next = 0_u32;
            let mut expected = 0_u32;
            for round in 0..4 {
                // Fill from wherever the ends stand.
                while producer.len() < capacity {
                    assert_eq!(producer.free_slots(), capacity - producer.len());
                    assert!(!producer.is_full());
                    producer.try_push(next).unwrap();
                    next += 1;
                }
                assert!(producer.is_full());
                assert_eq!(producer.free_slots(), 0);
                assert_eq!(consumer.len(), capacity);
                assert_eq!(producer.try_push(u32::MAX), Err(PushError::Full(u32::MAX)));
                // Drain part (or all) of it.
                let take = (round + batch) % capacity + 1;
                for _ in 0..take {
                    assert_eq!(consumer.peek(), Ok(&expected));
                    assert_eq!(consumer.try_pop(), Ok(expected));
                    expected += 1;
                }
                assert_eq!(consumer.len(), capacity - take);
                assert_eq!(producer.len(), capacity - take);
            }
            while let Ok(value) = consumer.try_pop() {
                assert_eq!(value, expected);
                expected += 1;
            }
            assert_eq!(expected, next);
            assert!(consumer.is_empty() && producer.is_empty());
            assert_eq!(consumer.try_pop(), Err(PopError::Empty));
            assert_eq!(consumer.peek(), Err(PopError::Empty));
        }
    }
}

thread_local! {
    static DROPPED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

struct Noisy(u32);

impl Drop for Noisy {
    fn drop(&mut self) {
        DROPPED.with(|d| d.borrow_mut().push(self.0));
    }
}

/// "Values still in the queue when both ends are gone are dropped, exactly once and oldest
/// first", after the ends have lapped the ring, whichever end goes last.
#[test]
fn spsc_leftovers_drop_once_oldest_first() {
    for consumer_first in [true, false] {
        DROPPED.with(|d| d.borrow_mut().clear());
        let (mut producer, mut consumer) = Builder::new(4).batch(2).build::<Noisy>().unwrap();
        for i in 0..6 {
            assert!(producer.try_push(Noisy(i)).is_ok());
            if i % 2 == 1 {
                drop(consumer.try_pop().unwrap());
            }
        }
        // Popped 0, 1, 2 (each dropped at once); 3, 4, 5 remain, wrapped round the ring.
        assert!(producer.try_push(Noisy(6)).is_ok());
        if consumer_first {
            drop(consumer);
            drop(producer);
        } else {
            drop(producer);
            drop(consumer);
        }
        DROPPED.with(|d| assert_eq!(*d.borrow(), [0, 1, 2, 3, 4, 5, 6]));
    }
}

/// `mpmc::Queue` is FIFO and its `len` exact with nothing in flight, even with one cell per
/// segment; `Stack` is LIFO with an exact `len`.
#[test]
fn single_thread_order_and_len() {
    let queue: Queue<u32, 1> = Queue::with_segment_size();
    let stack: Stack<u32> = Stack::new();
    for i in 0..100 {
        queue.push(i);
        stack.push(i);
        assert_eq!(queue.len(), i as usize + 1);
        assert_eq!(stack.len(), i as usize + 1);
    }
    for i in 0..50 {
        assert_eq!(queue.pop(), Some(i));
        assert_eq!(stack.pop(), Some(99 - i));
    }
    assert_eq!((queue.len(), stack.len()), (50, 50));
    let mut queue = queue;
    queue.push_mut(100);
    for i in 50..=100 {
        assert_eq!(queue.pop_mut(), Some(i));
    }
    assert!(queue.is_empty());
    assert_eq!(queue.try_pop(), Err(PopError::Empty));
    for i in (0..50).rev() {
        assert_eq!(stack.try_pop(), Ok(i));
    }
    assert!(stack.is_empty());
    assert_eq!(stack.try_pop(), Err(PopError::Empty));
}

/// `Bagpipe::with_pipes`: rounded up to a power of two; 0 or more than `MAX_PIPES` is
/// `PipeCount`, with the text the docs show. `pop`/`pop_bounded` return `None`/`Empty` on an
/// empty bag, a budget of 0 counting as 1.
#[test]
fn bagpipe_pipe_counts_and_empty_bag() {
    for (asked, made) in [
        (1, 1),
        (2, 2),
        (3, 4),
        (5, 8),
        (MAX_PIPES / 2 + 1, MAX_PIPES),
    ] {
        let bag = Bagpipe::<Stack<u8>>::with_pipes(asked).unwrap();
        assert_eq!(bag.pipe_count(), made, "asked {asked}");
    }
    for asked in [0, MAX_PIPES + 1, usize::MAX] {
        let error = Bagpipe::<Queue<u8>>::with_pipes(asked).unwrap_err();
        assert_eq!(error, BagpipeError::PipeCount { requested: asked });
        assert_eq!(
            error.to_string(),
            format!("a Bagpipe needs between 1 and 65536 pipes, not {asked}")
        );
    }
    assert_eq!(
        BagpipeError::OutOfMemory {
            pipes: 4,
            bytes: 512
        }
        .to_string(),
        "out of memory: 4 pipes need 512 bytes, which the allocator refused"
    );
    let bag = Bagpipe::<Queue<u8>>::with_pipes(4).unwrap();
    assert_eq!(bag.pop(), None);
    assert_eq!(bag.try_pop(), Err(PopError::Empty));
    assert_eq!(bag.pop_bounded(0), Err(PopError::Empty));
    assert_eq!(bag.push_bounded(1, 0), Ok(()));
    assert_eq!(bag.size_guess(), 1);
    assert_eq!(bag.pop_bounded(0), Ok(1));
}

/// The error vocabulary: `PushError`'s `Debug` hides the value, `Display` texts, accessors.
#[test]
fn error_texts() {
    assert_eq!(format!("{:?}", PushError::Full(String::new())), "Full(..)");
    assert_eq!(format!("{:?}", PushError::Transient(1)), "Transient(..)");
    assert_eq!(PushError::Full(()).to_string(), "the queue is full");
    assert_eq!(
        PushError::Transient(()).to_string(),
        "lost a race with another thread; retry"
    );
    assert_eq!(PopError::Empty.to_string(), "the queue is empty");
    assert_eq!(
        PopError::Transient.to_string(),
        "lost a race with another thread; retry"
    );
    let full = PushError::Full(3);
    assert!(full.is_full() && !full.is_transient());
    assert_eq!(full.into_inner(), 3);
}

struct Page(RevokeHandle);

// SAFETY: the handle lives in the page, outside the reference.
unsafe impl Revocable for &Page {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.0
    }
}

/// A queue whose segment the allocator refuses: `try_push` hands the item back in
/// `PushError::Full` and every push that must succeed panics, as `Queue::push`'s `# Panics`
/// says. The other pushes (`push_mut`, `Handle::push`, `push_revocable` on the queue and on a
/// Bagpipe of such queues) panic the same way, and their docs say so too.
#[cfg(target_pointer_width = "64")]
#[test]
fn pushes_that_must_succeed_panic_when_the_bag_cannot_grow() {
    use pitlane_queue::revoke::RevocableBag;

    const MESSAGE: &str = "could not be allocated";
    let mut queue: Queue<u8, HUGE> = Queue::with_segment_size();
    assert_eq!(queue.try_push(1), Err(PushError::Full(1)));
    assert!(message_of(|| queue.push(1)).contains(MESSAGE));
    assert!(message_of(|| queue.handle().push(1)).contains(MESSAGE));
    assert!(message_of(|| queue.push_mut(1)).contains(MESSAGE));
    assert!(queue.is_empty());

    let page = Page(RevokeHandle::new());
    let pages: Queue<&Page, HUGE> = Queue::with_segment_size();
    assert!(matches!(
        pages.try_push_revocable(&page),
        Err(PushError::Full(_))
    ));
    assert!(message_of(|| pages.push_revocable(&page)).contains(MESSAGE));
    assert!(!page.0.is_in_bag());

    let bag = Bagpipe::<Queue<&Page, HUGE>>::with_pipes(2).unwrap();
    assert!(matches!(bag.try_push(&page), Err(PushError::Full(_))));
    assert!(matches!(
        bag.try_push_revocable(&page),
        Err(PushError::Full(_))
    ));
    assert!(message_of(|| bag.push(&page)).contains(MESSAGE));
    assert!(message_of(|| bag.push_revocable(&page)).contains(MESSAGE));
    assert!(message_of(|| bag.handle().push_revocable(&page)).contains(MESSAGE));
    assert!(!page.0.is_in_bag());
    assert!(bag.pop().is_none());
}
