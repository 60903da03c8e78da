//! Loom models of Notify: notify_one against a waiter's enqueue, two waiters, notify_waiters
//! against a waiter created before it, a chosen waiter dropped while a notification is
//! under way (the notification must reach the other waiter or the permit, never vanish), and
//! a notify_one that coalesces with a stored permit (it still happens before the wake-up that
//! takes the permit), and a waiter that finds a broadcast after it enqueued while a drain and
//! a notify_one race to take it out (it waits for its own status before it locks), and a
//! waiter that waits before it decides (behind queued waiters, or for a permit): it keeps its
//! place behind the waiters and sees a broadcast that comes during the wait; a waiter that
//! takes the permit on a retry of its decision keeps no clone of its waker.
#![cfg(pitlane_loom)]

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Waker};

use loom::future::block_on;
use std::sync::Arc as StdArc;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use pitlane_wait::{Notify, OwnedNotified};

/// A thread that creates a waiter of `notify` and enables it (its first poll), handing back
/// the waiter and whether that completed it.
fn newcomer(notify: &StdArc<Notify>) -> thread::JoinHandle<(Pin<Box<OwnedNotified>>, bool)> {
    let notify = notify.clone();
    thread::spawn(move || {
        let mut late = Box::pin(notify.notified_owned());
        let ready = late.as_mut().enable();
        (late, ready)
    })
}

#[test]
fn notify_one_reaches_a_waiter_that_enqueues_concurrently() {
    loom::model(|| {
        let notify = Arc::new(Notify::new());
        let waiter = {
            let notify = notify.clone();
            thread::spawn(move || block_on(notify.notified()))
        };
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_one())
        };
        waiter.join().unwrap();
        notifier.join().unwrap();
    });
}

#[test]
fn two_notify_one_reach_two_enabled_waiters() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        // Both registered first: two notify_one calls then wake both, whatever the interleaving
        // of the notifications with the waiters' polls (a second permit is never stored, so
        // waiters that were not registered could legitimately miss one).
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let mut notified = Box::pin(notify.clone().notified_owned());
                assert!(!notified.as_mut().enable());
                thread::spawn(move || block_on(notified))
            })
            .collect();
        notify.notify_one();
        notify.notify_one();
        for waiter in waiters {
            waiter.join().unwrap();
        }
    });
}

#[test]
fn notify_last_and_notify_one_reach_two_enabled_waiters() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        let mut futures: Vec<_> = (0..2)
            .map(|_| Box::pin(notify.clone().notified_owned()))
            .collect();
        for notified in &mut futures {
            assert!(!notified.as_mut().enable());
        }
        let waiter = thread::spawn(move || {
            for notified in futures {
                block_on(notified);
            }
        });
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_last())
        };
        notify.notify_one();
        waiter.join().unwrap();
        notifier.join().unwrap();
    });
}

#[test]
fn notify_waiters_reaches_a_notified_created_before_it() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        // Created before the broadcast, first polled in a thread of its own while the
        // broadcast runs (loom does not run a spawned thread ahead of the main thread's first
        // steps, docs/notes/loom-coverage.md): it must complete whichever comes first.
        let notified = Box::pin(notify.clone().notified_owned());
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_waiters())
        };
        let waiter = thread::spawn(move || block_on(notified));
        waiter.join().unwrap();
        notifier.join().unwrap();
    });
}

#[test]
fn notify_waiters_stores_no_permit_against_a_racing_enable() {
    loom::model(|| {
        let notify = Arc::new(Notify::new());
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_waiters())
        };
        // Created concurrently with the broadcast: it may or may not see it, but no permit
        // is left behind either way. It runs in a spawned thread: loom does not run a spawned
        // thread ahead of the main thread's first steps (docs/notes/loom-coverage.md).
        let enabler = {
            let notify = notify.clone();
            thread::spawn(move || {
                let mut notified = pin!(notify.notified());
                let _ = notified.as_mut().enable();
            })
        };
        notifier.join().unwrap();
        enabler.join().unwrap();
        let mut after = pin!(notify.notified());
        assert!(!after.as_mut().enable(), "notify_waiters stored a permit");
    });
}

#[test]
fn a_dropped_chosen_waiter_forwards_the_notification() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        let mut first = Box::pin(notify.clone().notified_owned());
        let mut second = Box::pin(notify.clone().notified_owned());
        assert!(!first.as_mut().enable());
        assert!(!second.as_mut().enable());
        let dropper = thread::spawn(move || drop(first));
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_one())
        };
        dropper.join().unwrap();
        notifier.join().unwrap();
        // The notification went to `second` (directly, or forwarded by the dropped `first`).
        assert!(second.as_mut().enable(), "a notification was lost");
        let mut third = pin!(notify.notified());
        assert!(!third.as_mut().enable(), "a notification was duplicated");
    });
}

#[test]
fn a_dropped_sole_waiter_leaves_the_notification_as_a_permit() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        let mut only = Box::pin(notify.clone().notified_owned());
        assert!(!only.as_mut().enable());
        let dropper = thread::spawn(move || drop(only));
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_one())
        };
        dropper.join().unwrap();
        notifier.join().unwrap();
        let mut next = pin!(notify.notified());
        assert!(next.as_mut().enable(), "a notification was lost");
    });
}

#[test]
fn a_waiter_dropped_during_notify_waiters_leaves_safely() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        let mut a = Box::pin(notify.clone().notified_owned());
        let mut b = Box::pin(notify.clone().notified_owned());
        assert!(!a.as_mut().enable());
        assert!(!b.as_mut().enable());
        let dropper = thread::spawn(move || drop(a));
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_waiters())
        };
        dropper.join().unwrap();
        notifier.join().unwrap();
        assert!(b.as_mut().enable());
        let mut after = pin!(notify.notified());
        assert!(!after.as_mut().enable());
    });
}

#[test]
fn a_waiter_enqueued_during_notify_waiters_is_drained_or_stays_reachable() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        let mut queued = Box::pin(notify.clone().notified_owned());
        assert!(!queued.as_mut().enable());
        let newcomer = newcomer(&notify);
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_waiters())
        };
        let (mut late, ready) = newcomer.join().unwrap();
        notifier.join().unwrap();
        assert!(
            queued.as_mut().enable(),
            "the queued waiter missed the broadcast"
        );
        if !ready && !late.as_mut().enable() {
            // It enqueued after the drain: it must be in the new queue, reachable by
            // notify_one (a lost head would leave it unreachable).
            notify.notify_one();
            assert!(late.as_mut().enable(), "the newcomer is not reachable");
        }
        let mut after = pin!(notify.notified());
        assert!(!after.as_mut().enable());
    });
}

#[test]
fn a_waiter_leaving_after_a_broadcast_races_the_drain_and_a_notify_one() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        // Queued first: the head a notify_one takes unless the drain took it already.
        let mut first = Box::pin(notify.clone().notified_owned());
        assert!(!first.as_mut().enable());
        // Created before the broadcast, polled while it and a notify_one run: it may find
        // the counter moved only after it enqueued, and then be drained, dequeued by the
        // notify_one (and pass that on), or still queued when it leaves.
        let late = notify.clone().notified_owned();
        let broadcaster = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_waiters())
        };
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_one())
        };
        block_on(late);
        broadcaster.join().unwrap();
        notifier.join().unwrap();
        assert!(
            first.as_mut().enable(),
            "the first waiter missed the broadcast"
        );
        drop(first);
        // At most one permit, whichever way the notify_one went.
        let mut a = pin!(notify.notified());
        let mut b = pin!(notify.notified());
        assert!(
            !(a.as_mut().enable() && b.as_mut().enable()),
            "a notification was duplicated"
        );
    });
}

#[test]
fn a_coalesced_notify_one_happens_before_the_wake_up_that_takes_the_permit() {
    loom::model(|| {
        let notify = Arc::new(Notify::new());
        let data = Arc::new(AtomicUsize::new(0));
        notify.notify_one(); // a permit is stored
        let notifier = {
            let notify = notify.clone();
            let data = data.clone();
            thread::spawn(move || {
                data.store(1, Ordering::Relaxed);
                notify.notify_one();
            })
        };
        let taker = {
            let (notify, data) = (notify.clone(), data.clone());
            thread::spawn(move || {
                let mut notified = pin!(notify.notified());
                assert!(notified.as_mut().enable(), "a permit was stored");
                data.load(Ordering::Relaxed)
            })
        };
        notifier.join().unwrap();
        let seen = taker.join().unwrap();
        // No permit left: the notifier's notify_one coalesced with the permit taken above, so
        // its write must have been visible when the permit was taken (as with tokio's, whose
        // notify_one writes NOTIFIED over NOTIFIED for this, and `Thread::unpark`).
        let mut again = pin!(notify.notified());
        if !again.as_mut().enable() {
            assert_eq!(
                seen, 1,
                "a coalesced notify_one did not happen before the take"
            );
        }
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[test]
fn a_waiter_that_waits_behind_queued_waiters_keeps_their_order() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        let mut first = Box::pin(notify.clone().notified_owned());
        assert!(!first.as_mut().enable());
        // Polled while a notify_one takes `first` out: it waits behind `first`, then enqueues
        // (the queue may be empty by then, but no permit is stored: the notify_one went to
        // `first`).
        // Both racing sides in spawned threads: loom does not run a spawned thread ahead of
        // the main thread's first steps (docs/notes/loom-coverage.md).
        let newcomer = newcomer(&notify);
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_one())
        };
        let (mut late, ready) = newcomer.join().unwrap();
        notifier.join().unwrap();
        assert!(
            !ready,
            "the newcomer took a notification meant for the first waiter"
        );
        assert!(
            first.as_mut().enable(),
            "the first waiter missed its notify_one"
        );
        // The newcomer is queued and reachable.
        notify.notify_one();
        assert!(late.as_mut().enable(), "the newcomer is not reachable");
        let mut after = pin!(notify.notified());
        assert!(!after.as_mut().enable(), "a notification was duplicated");
    });
}

#[test]
fn a_waiter_waiting_before_it_decides_sees_a_broadcast_from_after_its_creation() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        let mut first = Box::pin(notify.clone().notified_owned());
        assert!(!first.as_mut().enable());
        // Created before the broadcast, polled while it runs, with a waiter queued: the
        // broadcast completes it during its wait, before it enqueues, or after (drained, or
        // it leaves).
        let mut late = Box::pin(notify.clone().notified_owned());
        let newcomer = thread::spawn(move || {
            let ready = late.as_mut().enable();
            (late, ready)
        });
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_waiters())
        };
        let (mut late, ready) = newcomer.join().unwrap();
        notifier.join().unwrap();
        assert!(
            ready || late.as_mut().enable(),
            "the newcomer missed the broadcast"
        );
        assert!(
            first.as_mut().enable(),
            "the first waiter missed the broadcast"
        );
        let mut after = pin!(notify.notified());
        assert!(!after.as_mut().enable(), "notify_waiters stored a permit");
    });
}

/// A queued waiter enabled again on one thread while another broadcasts: it completes
/// either at that `enable` (leaving the queue, or the drain list, under the lock) or
/// through the drain; no permit is left behind.
#[test]
fn a_queued_waiter_polled_during_a_broadcast_leaves_or_is_drained() {
    loom::model(|| {
        let notify = StdArc::new(Notify::new());
        let mut waiter = Box::pin(notify.clone().notified_owned());
        assert!(!waiter.as_mut().enable());
        let mut other = Box::pin(notify.clone().notified_owned());
        assert!(!other.as_mut().enable());
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_waiters())
        };
        let poller = thread::spawn(move || {
            let ready = waiter.as_mut().enable();
            (waiter, ready)
        });
        let (mut waiter, _) = poller.join().unwrap();
        notifier.join().unwrap();
        assert!(waiter.as_mut().enable());
        assert!(other.as_mut().enable());
        let mut after = Box::pin(notify.notified());
        assert!(!after.as_mut().enable(), "a broadcast stored a permit");
    });
}

/// A waker that does nothing; its `Arc`'s count says how many clones are alive.
struct Idle;

impl std::task::Wake for Idle {
    fn wake(self: StdArc<Self>) {}
}

/// A waiter whose first try decides to enqueue (no permit) and loses its compare-and-swap to
/// a `notify_one` that stores the permit, then takes it on the retry: it completes holding no
/// clone of the waker (the first try kept one to be woken with), as tokio's does not.
#[test]
fn a_waiter_completed_on_a_retry_keeps_no_waker() {
    loom::model(|| {
        let notify = Arc::new(Notify::new());
        let notifier = {
            let notify = notify.clone();
            thread::spawn(move || notify.notify_one())
        };
        let idle = StdArc::new(Idle);
        let waker = Waker::from(idle.clone());
        let mut notified = pin!(notify.notified());
        let polled = notified.as_mut().poll(&mut Context::from_waker(&waker));
        if polled.is_ready() {
            // `idle` and `waker`: no clone left in the completed future.
            assert_eq!(StdArc::strong_count(&idle), 2);
        } else {
            block_on(notified);
        }
        notifier.join().unwrap();
    });
}
