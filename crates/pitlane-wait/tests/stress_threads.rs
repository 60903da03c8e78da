//! Stress on threads that ThreadSanitizer sees (started by `pitlane_testkit::stress`): the
//! blocking acquires of the semaphore with partial permits and releases, and Notify hand-offs
//! between threads that block on their futures. Checks that the permits held never exceed
//! the semaphore's, that all come back, and that every notification is received exactly once.
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::thread::Thread;

use pitlane_testkit::stress::run_threads;
use pitlane_wait::{Notify, Semaphore};

fn rounds() -> usize {
    if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    }
}

/// Polls `future` to completion on this thread, parking between polls (`Notify` has no
/// blocking form; the semaphore's `blocking_acquire` does the same inside the crate).
fn block_on<F: Future>(future: F) -> F::Output {
    let waker = waker();
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

/// A waker that unparks this thread and points at a per-thread record that is never freed,
/// so no reference count (whose last drop ThreadSanitizer cannot follow) is involved.
fn waker() -> Waker {
    static VTABLE: RawWakerVTable = RawWakerVTable::new(
        |data| RawWaker::new(data, &VTABLE),
        // SAFETY: `data` is a leaked `Thread`.
        |data| unsafe { &*data.cast::<Thread>() }.unpark(),
        // SAFETY: as above.
        |data| unsafe { &*data.cast::<Thread>() }.unpark(),
        |_| {},
    );
    thread_local! {
        static ME: &'static Thread = Box::leak(Box::new(std::thread::current()));
    }
    let me: *const Thread = ME.with(|me| *me);
    // SAFETY: the vtable upholds the RawWaker contract: the data is valid for ever, clones
    // share it, drops do nothing, waking unparks a thread.
    unsafe { Waker::from_raw(RawWaker::new(me.cast(), &VTABLE)) }
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

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
