//! Loom models of Semaphore: acquire against release, a partial acquire completed by a
//! release, close against a waiter, a cancelled waiter whose partial permits must go on,
//! FIFO service of two waiters, a queued acquire polled during a close, and a cancel racing
//! a partial release and a close; permits are counted at the end of every execution.
#![cfg(pitlane_loom)]

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Waker};

use loom::future::block_on;
use loom::sync::Arc;
use loom::thread;

use pitlane_wait::Semaphore;

#[test]
fn acquire_and_release_on_two_threads() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1));
        let other = {
            let semaphore = semaphore.clone();
            thread::spawn(move || {
                let permit = block_on(semaphore.acquire()).unwrap();
                drop(permit);
            })
        };
        // Both acquirers are spawned threads: loom does not run a spawned thread ahead of the
        // main thread's first steps (docs/notes/loom-coverage.md).
        let mine = {
            let semaphore = semaphore.clone();
            thread::spawn(move || {
                let permit = block_on(semaphore.acquire()).unwrap();
                drop(permit);
            })
        };
        mine.join().unwrap();
        other.join().unwrap();
        assert_eq!(semaphore.available_permits(), 1);
    });
}

#[test]
fn a_partial_acquire_is_completed_by_a_release() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1));
        let waiter = {
            let semaphore = semaphore.clone();
            thread::spawn(move || {
                let permit = block_on(semaphore.acquire_many(2)).unwrap();
                assert_eq!(permit.num_permits(), 2);
            })
        };
        let releaser = {
            let semaphore = semaphore.clone();
            thread::spawn(move || semaphore.add_permits(1))
        };
        releaser.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(semaphore.available_permits(), 2);
    });
}

#[test]
fn close_wakes_a_waiter_with_an_error() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(0));
        let waiter = {
            let semaphore = semaphore.clone();
            thread::spawn(move || block_on(semaphore.acquire()).is_err())
        };
        let closer = {
            let semaphore = semaphore.clone();
            thread::spawn(move || semaphore.close())
        };
        closer.join().unwrap();
        assert!(waiter.join().unwrap());
        assert!(semaphore.is_closed());
    });
}

#[test]
fn close_returns_partial_permits_and_a_late_release_still_counts() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1));
        let waiter = {
            let semaphore = semaphore.clone();
            thread::spawn(move || block_on(semaphore.acquire_many(3)).is_err())
        };
        let closer = {
            let semaphore = semaphore.clone();
            thread::spawn(move || semaphore.close())
        };
        semaphore.add_permits(1);
        closer.join().unwrap();
        let failed = waiter.join().unwrap();
        // Either the waiter was closed on (its partial permits came back when it failed) or
        // it never enqueued; in both cases the 2 permits are in the semaphore.
        assert!(failed);
        assert_eq!(semaphore.available_permits(), 2);
    });
}

#[test]
fn a_waiter_served_while_the_semaphore_closes_keeps_no_permit_it_does_not_report() {
    // The permit that serves the waiter and the close race. The waiter gets the permit only if
    // its poll sees the semaphore open; if it fails (closed on while queued, or served but
    // polled after the close, as tokio's), the permit is back in the semaphore.
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(0));
        let waiter = {
            let semaphore = semaphore.clone();
            thread::spawn(move || match block_on(semaphore.acquire()) {
                Ok(permit) => {
                    permit.forget();
                    true
                }
                Err(_) => false,
            })
        };
        let closer = {
            let semaphore = semaphore.clone();
            thread::spawn(move || semaphore.close())
        };
        semaphore.add_permits(1);
        closer.join().unwrap();
        let got = waiter.join().unwrap();
        assert!(semaphore.is_closed());
        assert_eq!(semaphore.available_permits(), usize::from(!got));
    });
}

#[test]
fn a_cancelled_waiter_passes_its_partial_permits_on() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1));
        let canceller = {
            let semaphore = semaphore.clone();
            thread::spawn(move || {
                let mut acquire = pin!(semaphore.acquire_many(3));
                let mut cx = Context::from_waker(Waker::noop());
                // One poll: takes the free permit (if still there) and queues for the rest.
                assert!(acquire.as_mut().poll(&mut cx).is_pending());
                // Dropped here: cancelled.
            })
        };
        let acquirer = {
            let semaphore = semaphore.clone();
            thread::spawn(move || {
                let permit = block_on(semaphore.acquire()).unwrap();
                permit.forget();
            })
        };
        semaphore.add_permits(1);
        canceller.join().unwrap();
        acquirer.join().unwrap();
        // 2 permits in all, 1 forgotten by the acquirer: 1 left, none lost to the cancel.
        assert_eq!(semaphore.available_permits(), 1);
    });
}

#[test]
fn waiters_are_served_in_fifo_order() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(0));
        let mut big = Box::pin(semaphore.acquire_many(2));
        let mut small = Box::pin(semaphore.acquire());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(big.as_mut().poll(&mut cx).is_pending());
        assert!(small.as_mut().poll(&mut cx).is_pending());
        // Both releases run in spawned threads: loom does not run a spawned thread ahead of the
        // main thread's first steps, so with one release on the main thread this model explored
        // only 6 executions.
        let releasers: Vec<_> = (0..2)
            .map(|_| {
                let semaphore = semaphore.clone();
                thread::spawn(move || semaphore.add_permits(1))
            })
            .collect();
        for releaser in releasers {
            releaser.join().unwrap();
        }
        // Two permits went to the head (the big request), none to the small one behind it.
        let Poll::Ready(Ok(permit)) = big.as_mut().poll(&mut cx) else {
            panic!("the head was not served")
        };
        assert!(small.as_mut().poll(&mut cx).is_pending());
        drop(permit);
        assert!(matches!(small.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// A partly served acquire polled on one thread while another closes: it stays pending
/// (polled before the close) or fails, and its part comes back exactly once.
#[test]
fn a_queued_acquire_polled_during_a_close_fails_and_gives_its_part_back_once() {
    loom::model(|| {
        let sem = StdArc::new(Semaphore::new(1));
        let mut waiter = Box::pin(sem.clone().acquire_many_owned(2));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        let closer = {
            let sem = sem.clone();
            thread::spawn(move || sem.close())
        };
        let poller = thread::spawn(move || {
            let polled = waiter
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
            let failed = matches!(polled, Poll::Ready(Err(_)));
            assert!(failed || polled.is_pending());
            (waiter, failed)
        });
        let (mut waiter, failed) = poller.join().unwrap();
        closer.join().unwrap();
        if !failed {
            let polled: Pin<&mut _> = waiter.as_mut();
            assert!(matches!(polled.poll(&mut cx), Poll::Ready(Err(_))));
        }
        drop(waiter);
        assert_eq!(sem.available_permits(), 1);
        assert!(sem.is_closed());
    });
}

/// A waiter holding part of its permits is dropped on one thread while another gives it more
/// (part or all of what it lacks) and a third closes: its permits — those it took when it
/// queued and those the release gave it — come back exactly once, whichever of the three
/// comes first (the release's go to the semaphore if the waiter left or was drained first).
/// 539 executions with `LOOM_MAX_PREEMPTIONS=2`.
#[test]
fn a_cancel_racing_a_partial_release_and_a_close_loses_no_permit() {
    loom::model(|| {
        let sem = StdArc::new(Semaphore::new(1));
        let mut waiter = Box::pin(sem.clone().acquire_many_owned(3));
        let mut cx = Context::from_waker(Waker::noop());
        // Takes the free permit, queues for 2 more.
        assert!(waiter.as_mut().poll(&mut cx).is_pending());
        let releaser = {
            let sem = sem.clone();
            thread::spawn(move || sem.add_permits(1))
        };
        let closer = {
            let sem = sem.clone();
            thread::spawn(move || sem.close())
        };
        let canceller = thread::spawn(move || drop(waiter));
        canceller.join().unwrap();
        releaser.join().unwrap();
        closer.join().unwrap();
        assert!(sem.is_closed());
        assert_eq!(sem.available_permits(), 2);
    });
}
