//! Stress on threads that ThreadSanitizer sees (started by `pitlane_testkit::stress`): the
//! blocking acquires of the semaphore with partial permits and releases (and a close racing
//! them and cancelled partial acquires), and Notify hand-offs
//! between threads that block on their futures, and a lock holder that parks on lagging
//! links. Checks that the permits held never exceed
//! the semaphore's, that all come back, and that every notification is received exactly once.
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use pitlane_testkit::stress::run_threads;
use pitlane_testkit::wakers::block_on;
use pitlane_wait::lock::{DefaultLock, Park, Parker};
use pitlane_wait::queue::{Decision, Node, NodeStatus, WaitQueue};
use pitlane_wait::{Notify, Semaphore};

fn rounds() -> usize {
    if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    }
}

#[test]
fn blocking_acquires_conserve_permits() {
    const PERMITS: usize = 4;
    let semaphore = Semaphore::new(PERMITS);
    let in_use = AtomicUsize::new(0);
    run_threads(4, |t| {
        for i in 0..rounds() {
            let n = 1 + ((i + t) % 3) as u32;
            let permit = semaphore.blocking_acquire_many(n).unwrap();
            let now = in_use.fetch_add(n as usize, Ordering::SeqCst) + n as usize;
            assert!(now <= PERMITS, "{now} permits held of {PERMITS}");
            in_use.fetch_sub(n as usize, Ordering::SeqCst);
            drop(permit);
        }
    });
    assert_eq!(semaphore.available_permits(), PERMITS);
}

#[test]
fn cancelled_acquires_pass_their_partial_permits_on() {
    const PERMITS: usize = 3;
    let semaphore = Semaphore::new(PERMITS);
    run_threads(4, |t| {
        for i in 0..rounds() {
            if (i + t) % 2 == 0 {
                // One poll, then cancelled: it may have taken some permits and queued.
                let mut acquire = pin!(semaphore.acquire_many(2));
                let mut cx = Context::from_waker(Waker::noop());
                if let Poll::Ready(permit) = acquire.as_mut().poll(&mut cx) {
                    drop(permit.unwrap());
                }
            } else {
                drop(semaphore.blocking_acquire().unwrap());
            }
        }
    });
    assert_eq!(semaphore.available_permits(), PERMITS);
}

#[test]
fn notify_one_hand_offs_are_received_exactly_once() {
    let notify = Notify::new();
    let received = AtomicUsize::new(0);
    let sent = AtomicUsize::new(0);
    let total = rounds() / 2;
    run_threads(4, |t| {
        if t < 2 {
            // Waiters.
            for _ in 0..total / 2 {
                block_on(notify.notified());
                received.fetch_add(1, Ordering::SeqCst);
            }
        } else {
            // Two notifiers race to send the next notification once the previous one was
            // received, so that at most one is ever in flight (two in flight with nobody
            // queued would rightly collapse into the single permit).
            loop {
                let so_far = sent.load(Ordering::SeqCst);
                if so_far == total {
                    break;
                }
                if received.load(Ordering::SeqCst) == so_far
                    && sent
                        .compare_exchange(so_far, so_far + 1, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                {
                    if (so_far + t) % 2 == 0 {
                        notify.notify_one();
                    } else {
                        notify.notify_last();
                    }
                } else {
                    std::thread::yield_now();
                }
            }
        }
    });
    assert_eq!(received.load(Ordering::SeqCst), total);
    let mut after = pin!(notify.notified());
    assert!(!after.as_mut().enable(), "a notification was duplicated");
}

/// `Park`, but parking at the first missing link (no spinning), so that the lock holder
/// sleeps as often as the race allows (rarely on two cores: the window is the few
/// instructions between an enqueuer's two steps) and a lost unpark would hang.
struct EagerPark;

impl Parker for EagerPark {
    const SPINS: u32 = 0;

    fn park(key: usize, still_waiting: impl FnOnce() -> bool) {
        Park::park(key, still_waiting);
    }

    fn unpark(key: usize) {
        Park::unpark(key);
    }
}

#[test]
fn nodes_enqueued_on_threads_are_each_dequeued_once_by_a_lock_holder_that_parks() {
    let queue: WaitQueue<usize, DefaultLock, EagerPark> =
        WaitQueue::with_lock(0, <DefaultLock as lock_api::RawMutex>::INIT);
    const ENQUEUERS: usize = 8;
    let per = rounds();
    let served: Vec<AtomicUsize> = (0..ENQUEUERS).map(|_| AtomicUsize::new(0)).collect();
    run_threads(ENQUEUERS + 1, |t| {
        if t == ENQUEUERS {
            // The lock holder: dequeues every node, waiting out enqueuers that have swapped
            // the tail but not linked yet.
            let mut dequeued = 0;
            while dequeued < ENQUEUERS * per {
                let mut locked = queue.lock();
                if locked
                    .dequeue(0, |&owner| {
                        served[owner].fetch_add(1, Ordering::Relaxed);
                        None
                    })
                    .is_some()
                {
                    dequeued += 1;
                } else {
                    drop(locked);
                    std::thread::yield_now();
                }
            }
        } else {
            for _ in 0..per {
                let node = pin!(Node::new(t));
                // SAFETY: the node is only enqueued here, and not dropped before the lock
                // holder has marked it dequeued.
                unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
                while node.status() != NodeStatus::Dequeued {
                    std::thread::yield_now();
                }
            }
        }
    });
    for count in &served {
        assert_eq!(count.load(Ordering::Relaxed), per);
    }
    assert!(queue.is_empty());
}

#[test]
fn park_sleeps_until_unparked() {
    let key = 0x5eed_0000_usize;
    let linked = std::sync::atomic::AtomicBool::new(false);
    let returns = AtomicUsize::new(0);
    run_threads(2, |t| {
        if t == 0 {
            // The protocol of the queue: park while the condition holds, checked where an
            // unpark cannot slip in between; re-check after every return.
            while !linked.load(Ordering::Acquire) {
                Park::park(key, || !linked.load(Ordering::Relaxed));
                returns.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(20));
            linked.store(true, Ordering::Release);
            Park::unpark(key);
        }
    });
    // It slept: it did not come back over and over while the other thread slept.
    assert!(returns.load(Ordering::Relaxed) <= 2);
}

#[test]
fn close_racing_blocking_acquires_with_partial_permits_conserves_permits() {
    // Threads take 1 to 3 of 3 permits (partially, while others hold some), some cancel
    // after one poll; one thread closes the semaphore part-way. Every permit comes back.
    const PERMITS: usize = 3;
    let rounds = if cfg!(debug_assertions) { 50 } else { 300 };
    for round in 0..rounds {
        let semaphore = Semaphore::new(PERMITS);
        let in_use = AtomicUsize::new(0);
        run_threads(4, |t| {
            for i in 0.. {
                if t == 0 && i == 100 + round % 50 {
                    semaphore.close();
                    return;
                }
                let n = 1 + ((i + t) % 3) as u32;
                if (i + t) % 4 == 0 {
                    let mut acquire = pin!(semaphore.acquire_many(n));
                    let mut cx = Context::from_waker(Waker::noop());
                    match acquire.as_mut().poll(&mut cx) {
                        Poll::Ready(Ok(permit)) => drop(permit),
                        Poll::Ready(Err(_)) => return,
                        Poll::Pending => {} // cancelled while queued
                    }
                    continue;
                }
                let Ok(permit) = semaphore.blocking_acquire_many(n) else {
                    return;
                };
                let now = in_use.fetch_add(n as usize, Ordering::SeqCst) + n as usize;
                assert!(now <= PERMITS, "{now} permits held of {PERMITS}");
                in_use.fetch_sub(n as usize, Ordering::SeqCst);
                drop(permit);
            }
        });
        assert!(semaphore.is_closed());
        assert_eq!(semaphore.available_permits(), PERMITS, "round {round}");
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
