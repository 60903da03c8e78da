//! Drop counting of wakers: every waker a Notify or Semaphore clones is dropped exactly once,
//! whether its waiter is notified, served, cancelled, closed on, drained, or re-polled with
//! another waker; and each waiter is woken at most once per notification.
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use pitlane_testkit::wakers::CountingWaker;
use pitlane_wait::{Notify, Semaphore};

fn poll<F: Future>(future: Pin<&mut F>, waker: &CountingWaker) -> Poll<F::Output> {
    waker.with_context(|cx| future.poll(cx))
}

#[test]
fn notify_wakers_are_dropped_on_every_path() {
    let w = CountingWaker::new();
    let other = CountingWaker::new();
    {
        let notify = Notify::new();
        let mut fs: Vec<_> = (0..50).map(|_| Box::pin(notify.notified())).collect();
        for f in &mut fs {
            assert!(poll(f.as_mut(), &w).is_pending());
        }
        // Re-polled with another waker: the first clone is dropped.
        assert!(poll(fs[1].as_mut(), &other).is_pending());
        notify.notify_one(); // fs[0]
        notify.notify_last(); // fs[49]
        drop(fs.remove(10)); // cancelled while queued
        drop(fs.remove(0)); // notified, never returned: forwards to fs[1] (now first)
        assert_eq!(other.wakes(), 1);
        notify.notify_waiters(); // the rest
        assert_eq!(w.wakes(), 2 + 46); // fs[0], fs[49], then the 46 left besides fs[1]
        for f in &mut fs {
            assert!(poll(f.as_mut(), &w).is_ready());
        }
    }
    assert_eq!(w.live(), 1, "a waker clone leaked or was dropped twice");
    assert_eq!(other.live(), 1);
}

#[test]
fn semaphore_wakers_are_dropped_on_every_path() {
    let w = CountingWaker::new();
    {
        let semaphore = Semaphore::new(0);
        let mut fs: Vec<_> = (0..40).map(|_| Box::pin(semaphore.acquire())).collect();
        for f in &mut fs {
            assert!(poll(f.as_mut(), &w).is_pending());
        }
        semaphore.add_permits(5); // serves 5
        drop(fs.remove(20)); // cancelled while queued
        drop(fs.remove(0)); // served, never returned: gives its permit back (to the next)
        assert_eq!(w.wakes(), 6);
        semaphore.close(); // the rest fail
        assert_eq!(w.wakes(), 6 + 33);
        let mut ok = 0;
        for f in &mut fs {
            if let Poll::Ready(result) = poll(f.as_mut(), &w) {
                ok += usize::from(result.is_ok());
            }
        }
        // Polled after the close, the five served ones fail too (as tokio's) and give their
        // permits back.
        assert_eq!(ok, 0);
        assert_eq!(semaphore.available_permits(), 5);
    }
    assert_eq!(w.live(), 1, "a waker clone leaked or was dropped twice");
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
