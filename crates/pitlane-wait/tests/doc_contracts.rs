//! The documented contracts of the public API, each checked as the rustdoc states it: the
//! bounds of `Semaphore` (`MAX_PERMITS` at `new`, `const_new` and `add_permits`, with the
//! panic messages), `try_acquire`'s order of errors and fairness, `available_permits` while
//! tasks wait, `forget_permits` on a closed semaphore, `Notify`'s single stored permit, and
//! `WaitQueue`'s `MAX_STATE` panics.
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use pitlane_testkit::panics::message_of;
use pitlane_wait::queue::{MAX_STATE, Node};
use pitlane_wait::{Notify, Semaphore, TryAcquireError, WaitQueue};

/// `new` and `const_new` accept `MAX_PERMITS` and panic past it; `add_permits` panics when
/// what is left "exceeds MAX_PERMITS, or would make the free permits exceed it", and then
/// adds nothing. `add_permits(0)` changes nothing.
#[test]
fn max_permits_bounds() {
    let max = Semaphore::MAX_PERMITS;
    assert_eq!(Semaphore::new(max).available_permits(), max);
    assert_eq!(Semaphore::const_new(max).available_permits(), max);
    assert_eq!(
        message_of(|| {
            let _ = Semaphore::new(max + 1);
        }),
        format!("a semaphore may not have more than MAX_PERMITS permits ({max})")
    );
    assert_eq!(
        message_of(|| {
            let _ = Semaphore::const_new(usize::MAX);
        }),
        "assertion failed: permits <= Self::MAX_PERMITS"
    );

    let full = Semaphore::new(max);
    full.add_permits(0);
    assert_eq!(
        message_of(|| full.add_permits(1)),
        format!("number of added permits (1) would overflow MAX_PERMITS ({max})")
    );
    assert_eq!(full.available_permits(), max);

    let empty = Semaphore::new(0);
    assert_eq!(
        message_of(|| empty.add_permits(usize::MAX)),
        format!("cannot add more than MAX_PERMITS permits ({max})")
    );
    assert_eq!(empty.available_permits(), 0);
    empty.add_permits(max);
    assert_eq!(empty.available_permits(), max);
}

/// `try_acquire*`: `Closed` "if closed (checked first)", else `NoPermits`; permits are taken
/// only "if that many are free and nobody waits"; `available_permits` is "0 while tasks
/// wait"; a waiter asking for many holds back smaller requests.
#[test]
fn try_acquire_order_of_errors_and_fairness() {
    let semaphore = Semaphore::new(3);
    assert_eq!(
        semaphore.try_acquire_many(4).err(),
        Some(TryAcquireError::NoPermits)
    );
    let mut cx = Context::from_waker(Waker::noop());
    {
        let mut big = pin!(semaphore.acquire_many(5));
        assert!(big.as_mut().poll(&mut cx).is_pending());
        // It holds the three it was given; nothing is free while it waits.
        assert_eq!(semaphore.available_permits(), 0);
        semaphore.add_permits(1);
        assert_eq!(semaphore.available_permits(), 0);
        assert_eq!(
            semaphore.try_acquire().err(),
            Some(TryAcquireError::NoPermits)
        );
        semaphore.add_permits(2);
        let Poll::Ready(Ok(permit)) = big.as_mut().poll(&mut cx) else {
            panic!("the waiter was given its permits");
        };
        assert_eq!(permit.num_permits(), 5);
        assert_eq!(semaphore.available_permits(), 1);
    }
    assert_eq!(semaphore.available_permits(), 6);
    semaphore.close();
    assert_eq!(semaphore.try_acquire().err(), Some(TryAcquireError::Closed));
    assert_eq!(
        semaphore.try_acquire_many(100).err(),
        Some(TryAcquireError::Closed)
    );
    // "Removes up to `n` free permits ... A closed semaphore stays closed."
    assert_eq!(semaphore.forget_permits(2), 2);
    assert_eq!(semaphore.forget_permits(usize::MAX), 4);
    assert!(semaphore.is_closed());
    // "Works on a closed semaphore too."
    semaphore.add_permits(1);
    assert_eq!(semaphore.available_permits(), 1);
    assert!(semaphore.is_closed());
}

/// `SemaphorePermit::split`: "`None` (and no change) if this one holds fewer than `n`";
/// `merge` panics for permits of different semaphores.
#[test]
fn permit_split_and_merge() {
    let other = Semaphore::new(1);
    let semaphore = Semaphore::new(2);
    let mut permit = semaphore.try_acquire_many(2).unwrap();
    assert!(permit.split(3).is_none());
    assert!(permit.split(usize::MAX).is_none());
    assert_eq!(permit.num_permits(), 2);
    let zero = permit.split(0).unwrap();
    assert_eq!((permit.num_permits(), zero.num_permits()), (2, 0));
    drop(zero);
    assert_eq!(semaphore.available_permits(), 0);
    let foreign = other.try_acquire().unwrap();
    assert_eq!(
        message_of(|| permit.merge(foreign)),
        "merging permits from different semaphore instances"
    );
}

/// `Notify`: "at most one stored permit", and `notify_waiters` stores none.
#[test]
fn notify_stores_at_most_one_permit() {
    let notify = Notify::new();
    notify.notify_waiters();
    assert!(!pin!(notify.notified()).as_mut().enable());
    notify.notify_one();
    notify.notify_one();
    notify.notify_last();
    assert!(pin!(notify.notified()).as_mut().enable());
    assert!(!pin!(notify.notified()).as_mut().enable());
}

/// `WaitQueue`: the state is "at most MAX_STATE"; each method that takes a state panics past
/// it, as its `# Panics` says. `Node::reset` panics on a queued node (and leaves an
/// unqueued node unqueued).
#[test]
fn wait_queue_state_bounds() {
    let queue: WaitQueue<()> = WaitQueue::new(MAX_STATE);
    assert_eq!(queue.state(), Some(MAX_STATE));
    assert_eq!(
        message_of(|| {
            let _ = WaitQueue::<()>::new(MAX_STATE + 1);
        }),
        "a wait queue's state is at most MAX_STATE"
    );
    assert_eq!(
        message_of(|| {
            let _ = queue.compare_exchange_state(MAX_STATE, MAX_STATE + 1);
        }),
        "a wait queue's state is at most MAX_STATE"
    );
    assert_eq!(
        message_of(|| {
            let _ = queue.compare_exchange_state(usize::MAX, 0);
        }),
        "a wait queue's state is at most MAX_STATE"
    );
    assert_eq!(
        message_of(|| {
            let _ = queue.fetch_update_state(|_| Some(usize::MAX));
        }),
        "a wait queue's state is at most MAX_STATE"
    );
    // Nothing changed.
    assert_eq!(queue.state(), Some(MAX_STATE));
    assert_eq!(queue.compare_exchange_state(MAX_STATE, 0), Ok(MAX_STATE));
    let node = Node::new(());
    node.reset();
    assert_eq!(node.status(), pitlane_wait::queue::NodeStatus::Unqueued);
}
