//! Loom models of the queue's own protocol under a parker that misbehaves: a lock holder
//! whose `park` unwinds while it waits for an enqueuer's link (`Parker` is a safe trait, so
//! such a parker is allowed), after which another lock holder reads that link.
#![cfg(pitlane_loom)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use loom::sync::Arc;
use loom::thread;

use loom::sync::atomic::{AtomicBool, Ordering};
use pitlane_wait::lock::{Lock, Parker};
use pitlane_wait::queue::{Decision, Node, NodeStatus, WaitQueue};

/// A lock that waits by yielding to the model. (The crate's `LoomLock` is loom's mutex,
/// which a guard dropped while unwinding poisons for good; a raw lock does not poison.)
struct YieldLock(AtomicBool);

// SAFETY: a compare-and-swap lock: one holder at a time, acquire on lock, release on unlock.
unsafe impl Lock for YieldLock {
    fn lock(&self) {
        while self
            .0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            thread::yield_now();
        }
    }

    unsafe fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Marks a missing link as waited for at once, then parks, which panics.
struct PanickingPark;

impl Parker for PanickingPark {
    const SPINS: u32 = 0;

    fn park(_key: usize, _still_waiting: impl FnOnce() -> bool) {
        panic!("park panics");
    }

    fn unpark(_key: usize) {}
}

#[test]
fn a_lock_holder_whose_park_panics_leaves_no_mark_in_the_link() {
    // The parker's panics are expected; their messages would flood the output. Any other
    // panic is reported.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"park panics") {
            report(info);
        }
    }));
    loom::model(|| {
        let queue: Arc<WaitQueue<u8, YieldLock, PanickingPark>> =
            Arc::new(WaitQueue::with_lock(0, YieldLock(AtomicBool::new(false))));
        let first = Box::pin(Node::new(1));
        // SAFETY: dequeued below (the loop ends only then) before it is dropped.
        unsafe { queue.enqueue_or_update(first.as_ref(), |_| Decision::Enqueue) };
        let enqueuer = {
            let queue = queue.clone();
            thread::spawn(move || {
                let node = Box::pin(Node::new(2));
                // SAFETY: the node is only enqueued here, and not dropped before the lock
                // holder has marked it dequeued.
                unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
                while node.status() != NodeStatus::Dequeued {
                    thread::yield_now();
                }
            })
        };
        // The lock holder dequeues both. Dequeuing the first while the second's enqueuer has
        // swapped the tail but not linked it, it marks the first's `next` as waited for and
        // its `park` panics; it tries again at once (then after a yield, so that the model
        // ends), and must then wait for that link again, never take the mark for a node.
        let mut retried_at_once = false;
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let result = catch_unwind(AssertUnwindSafe(|| {
                queue.lock().dequeue(0, |value| {
                    seen.push(*value);
                    None
                })
            }));
            match result {
                Ok(Some(_)) => {}
                Err(_) if !retried_at_once => retried_at_once = true,
                Ok(None) | Err(_) => thread::yield_now(),
            }
        }
        assert_eq!(seen, [1, 2]);
        assert_eq!(first.status(), NodeStatus::Dequeued);
        enqueuer.join().unwrap();
        assert_eq!(queue.state(), Some(0));
    });
    drop(std::panic::take_hook());
}
