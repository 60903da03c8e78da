//! Notify, item by item of tokio's semantics (the behaviours tokio's `tests/sync_notify.rs`
//! checks, and the checklist in the issue), polled by hand with counting wakers, and on a
//! multi-thread runtime.
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use pitlane_testkit::wakers::{CountingWaker, on_wake};
use pitlane_wait::Notify;
use pitlane_wait::notify::{Notified, OwnedNotified};

fn poll<F: Future>(future: Pin<&mut F>, waker: &CountingWaker) -> Poll<F::Output> {
    waker.with_context(|cx| future.poll(cx))
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn futures_are_send_and_sync_but_not_unpin_like_tokio() {
    assert_send_sync::<Notify>();
    assert_send_sync::<Notified<'static>>();
    assert_send_sync::<OwnedNotified>();
    static_assertions_not_unpin();
}

/// `Notified: !Unpin` checked at compile time through an auto-trait probe.
fn static_assertions_not_unpin() {
    struct Check<T: ?Sized>(std::marker::PhantomData<T>);
    trait AmbiguousIfUnpin<A> {
        fn some_item() {}
    }
    impl<T: ?Sized> AmbiguousIfUnpin<()> for T {}
    #[allow(dead_code)]
    struct Invalid;
    impl<T: ?Sized + Unpin> AmbiguousIfUnpin<Invalid> for T {}
    // If `Notified` were Unpin, this call would be ambiguous and fail to compile.
    let _ = Check::<Notified<'static>>(std::marker::PhantomData);
    <Notified<'static> as AmbiguousIfUnpin<_>>::some_item();
    <OwnedNotified as AmbiguousIfUnpin<_>>::some_item();
}

#[test]
fn notify_one_before_notified_stores_one_permit() {
    let notify = Notify::new();
    notify.notify_one();
    notify.notify_one(); // at most one permit
    let waker = CountingWaker::new();
    let mut first = pin!(notify.notified());
    assert!(poll(first.as_mut(), &waker).is_ready());
    let mut second = pin!(notify.notified());
    assert!(poll(second.as_mut(), &waker).is_pending());
}

#[test]
fn notify_one_wakes_a_polled_waiter_once() {
    let notify = Notify::new();
    let waker = CountingWaker::new();
    let mut notified = pin!(notify.notified());
    assert!(poll(notified.as_mut(), &waker).is_pending());
    notify.notify_one();
    assert_eq!(waker.wakes(), 1);
    assert!(poll(notified.as_mut(), &waker).is_ready());
    // The notification went to the waiter: no permit is left behind.
    let mut next = pin!(notify.notified());
    assert!(!next.as_mut().enable());
}

#[test]
fn notify_one_reaches_a_notified_only_once_polled_or_enabled() {
    let notify = Notify::new();
    let waker = CountingWaker::new();
    let mut old = pin!(notify.notified()); // created, not polled: not a waiter yet
    notify.notify_one(); // stored as the permit
    let mut young = pin!(notify.notified());
    assert!(poll(young.as_mut(), &waker).is_ready()); // whoever polls first takes it
    assert!(poll(old.as_mut(), &waker).is_pending());
}

#[test]
fn notify_waiters_reaches_every_notified_created_before_it() {
    let notify = Notify::new();
    let waker = CountingWaker::new();
    let mut polled = pin!(notify.notified());
    assert!(poll(polled.as_mut(), &waker).is_pending());
    let mut unpolled = pin!(notify.notified());
    notify.notify_waiters();
    let mut after = pin!(notify.notified());
    assert_eq!(waker.wakes(), 1);
    assert!(poll(polled.as_mut(), &waker).is_ready());
    assert!(poll(unpolled.as_mut(), &waker).is_ready());
    assert!(poll(after.as_mut(), &waker).is_pending());
}

#[test]
fn notify_waiters_stores_no_permit_and_keeps_an_existing_one() {
    let notify = Notify::new();
    notify.notify_waiters();
    let mut none = pin!(notify.notified());
    assert!(!none.as_mut().enable());

    let notify = Notify::new();
    notify.notify_one();
    notify.notify_waiters();
    let mut takes_permit = pin!(notify.notified());
    assert!(takes_permit.as_mut().enable());
}

#[test]
fn a_broadcast_is_seen_before_the_permit_is_taken() {
    // tokio-rs/tokio#7996: a Notified that saw a notify_waiters completes through it and
    // leaves the stored permit for someone else.
    let notify = Notify::new();
    let mut notified = pin!(notify.notified());
    notify.notify_one(); // the permit
    notify.notify_waiters();
    assert!(notified.as_mut().enable());
    let mut other = pin!(notify.notified());
    assert!(
        other.as_mut().enable(),
        "the permit was consumed by a broadcast waiter"
    );
}

#[test]
fn notify_one_is_fifo_and_notify_last_is_lifo() {
    let notify = Notify::new();
    let wakers: Vec<CountingWaker> = (0..4).map(|_| CountingWaker::new()).collect();
    let mut futures: Vec<Pin<Box<Notified<'_>>>> =
        (0..4).map(|_| Box::pin(notify.notified())).collect();
    for (future, waker) in futures.iter_mut().zip(&wakers) {
        assert!(poll(future.as_mut(), waker).is_pending());
    }
    notify.notify_one();
    assert_eq!(
        wakers.iter().map(CountingWaker::wakes).collect::<Vec<_>>(),
        [1, 0, 0, 0]
    );
    notify.notify_last();
    assert_eq!(
        wakers.iter().map(CountingWaker::wakes).collect::<Vec<_>>(),
        [1, 0, 0, 1]
    );
    notify.notify_one();
    assert_eq!(
        wakers.iter().map(CountingWaker::wakes).collect::<Vec<_>>(),
        [1, 1, 0, 1]
    );
    let ready: Vec<bool> = futures
        .iter_mut()
        .zip(&wakers)
        .map(|(f, w)| poll(f.as_mut(), w).is_ready())
        .collect();
    assert_eq!(ready, [true, true, false, true]);
}

#[test]
fn a_dropped_chosen_waiter_passes_its_notification_on() {
    // FIFO: the next waiter gets it.
    let notify = Notify::new();
    let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
    let mut a = Box::pin(notify.notified());
    let mut b = pin!(notify.notified());
    assert!(poll(a.as_mut(), &wa).is_pending());
    assert!(poll(b.as_mut(), &wb).is_pending());
    notify.notify_one();
    assert_eq!((wa.wakes(), wb.wakes()), (1, 0));
    drop(a); // chosen, never returned Ready
    assert_eq!(wb.wakes(), 1);
    assert!(poll(b.as_mut(), &wb).is_ready());

    // LIFO: the notification is passed on in LIFO order.
    let notify = Notify::new();
    let ws: Vec<CountingWaker> = (0..3).map(|_| CountingWaker::new()).collect();
    let mut fs: Vec<Pin<Box<Notified<'_>>>> = (0..3).map(|_| Box::pin(notify.notified())).collect();
    for (f, w) in fs.iter_mut().zip(&ws) {
        assert!(poll(f.as_mut(), w).is_pending());
    }
    notify.notify_last();
    assert_eq!(ws[2].wakes(), 1);
    drop(fs.pop());
    assert_eq!(
        ws.iter().map(CountingWaker::wakes).collect::<Vec<_>>(),
        [0, 1, 1]
    );

    // Nobody else waits: it becomes the permit.
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut only = Box::pin(notify.notified());
    assert!(poll(only.as_mut(), &w).is_pending());
    notify.notify_one();
    drop(only);
    let mut later = pin!(notify.notified());
    assert!(later.as_mut().enable());
}

#[test]
fn a_dropped_waiter_that_returned_ready_passes_nothing_on() {
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut a = Box::pin(notify.notified());
    assert!(poll(a.as_mut(), &w).is_pending());
    notify.notify_one();
    assert!(poll(a.as_mut(), &w).is_ready());
    drop(a);
    let mut later = pin!(notify.notified());
    assert!(!later.as_mut().enable());
}

#[test]
fn a_dropped_broadcast_waiter_stores_no_permit() {
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut a = Box::pin(notify.notified());
    assert!(poll(a.as_mut(), &w).is_pending());
    notify.notify_waiters();
    drop(a);
    let mut later = pin!(notify.notified());
    assert!(!later.as_mut().enable());
}

#[test]
fn a_dropped_waiting_notified_leaves_the_queue() {
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut a = Box::pin(notify.notified());
    assert!(poll(a.as_mut(), &w).is_pending());
    drop(a);
    notify.notify_one(); // nobody waits: stored
    let mut later = pin!(notify.notified());
    assert!(later.as_mut().enable());
    assert_eq!(w.wakes(), 0);
    assert_eq!(w.live(), 1, "the dropped waiter's waker was dropped");
}

#[test]
fn notified_is_fused() {
    let notify = Notify::new();
    let w = CountingWaker::new();
    notify.notify_one();
    let mut a = pin!(notify.notified());
    assert!(poll(a.as_mut(), &w).is_ready());
    notify.notify_one(); // a fresh permit: a fused future does not take it
    assert!(poll(a.as_mut(), &w).is_ready());
    assert!(a.as_mut().enable());
    let mut b = pin!(notify.notified());
    assert!(b.as_mut().enable(), "the fused future took a second permit");
}

#[test]
fn enable_registers_without_a_waker_and_poll_adds_one() {
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut a = pin!(notify.notified());
    assert!(!a.as_mut().enable());
    assert!(!a.as_mut().enable()); // idempotent
    assert!(poll(a.as_mut(), &w).is_pending());
    notify.notify_one();
    assert_eq!(w.wakes(), 1);
    assert!(a.as_mut().enable());
    assert!(poll(a.as_mut(), &w).is_ready());
}

#[test]
fn a_new_waker_replaces_the_old_one() {
    let notify = Notify::new();
    let (w1, w2) = (CountingWaker::new(), CountingWaker::new());
    let mut a = pin!(notify.notified());
    assert!(poll(a.as_mut(), &w1).is_pending());
    assert!(poll(a.as_mut(), &w2).is_pending());
    assert_eq!(w1.live(), 1, "the old waker was dropped");
    notify.notify_one();
    assert_eq!((w1.wakes(), w2.wakes()), (0, 1));
}

#[test]
fn notify_waiters_wakes_more_than_a_batch() {
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut fs: Vec<Pin<Box<Notified<'_>>>> =
        (0..100).map(|_| Box::pin(notify.notified())).collect();
    for f in &mut fs {
        assert!(poll(f.as_mut(), &w).is_pending());
    }
    notify.notify_waiters();
    assert_eq!(w.wakes(), 100);
    assert!(fs.iter_mut().all(|f| poll(f.as_mut(), &w).is_ready()));
    drop(fs);
    assert_eq!(w.live(), 1, "every waker was dropped");
}

#[test]
fn notify_waiters_is_atomic_waiters_registering_during_the_wakeups_are_not_woken() {
    let notify = Arc::new(Notify::new());
    let late: Arc<Mutex<Vec<Pin<Box<OwnedNotified>>>>> = Arc::default();
    let waker = {
        let notify = notify.clone();
        let late = late.clone();
        on_wake(move || {
            let mut again = Box::pin(notify.clone().notified_owned());
            assert!(!again.as_mut().enable());
            late.lock().unwrap().push(again);
        })
    };
    let mut cx = Context::from_waker(&waker);
    // More than one batch, so that wakers run while the drain is still under way.
    let mut fs: Vec<Pin<Box<Notified<'_>>>> =
        (0..70).map(|_| Box::pin(notify.notified())).collect();
    for f in &mut fs {
        assert!(f.as_mut().poll(&mut cx).is_pending());
    }
    notify.notify_waiters();
    assert!(fs.iter_mut().all(|f| f.as_mut().poll(&mut cx).is_ready()));
    let mut late = late.lock().unwrap();
    assert_eq!(late.len(), 70);
    assert!(
        late.iter_mut().all(|f| !f.as_mut().enable()),
        "a late waiter was woken"
    );
    // They are waiters now, and the next broadcast reaches them.
    let mut fresh: Vec<_> = late.drain(..).collect();
    notify.notify_waiters();
    assert!(fresh.iter_mut().all(|f| f.as_mut().enable()));
}

#[test]
fn notify_waiters_wakes_in_the_order_the_waiters_came_like_tokio() {
    let notify = Notify::new();
    let woken: Arc<Mutex<Vec<usize>>> = Arc::default();
    // More than two batches, so that the order holds within and across batches.
    let mut fs: Vec<Pin<Box<Notified<'_>>>> =
        (0..70).map(|_| Box::pin(notify.notified())).collect();
    for (i, f) in fs.iter_mut().enumerate() {
        let woken = woken.clone();
        let waker = on_wake(move || woken.lock().unwrap().push(i));
        assert!(
            f.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
    }
    notify.notify_waiters();
    assert_eq!(*woken.lock().unwrap(), (0..70).collect::<Vec<_>>());
}

#[test]
fn notify_waiters_is_panic_safe() {
    let notify = Notify::new();
    let w = CountingWaker::new();
    let panicking = on_wake(|| panic!("waker panics"));
    let mut fs: Vec<Pin<Box<Notified<'_>>>> =
        (0..80).map(|_| Box::pin(notify.notified())).collect();
    for (i, f) in fs.iter_mut().enumerate() {
        if i == 3 {
            assert!(
                f.as_mut()
                    .poll(&mut Context::from_waker(&panicking))
                    .is_pending()
            );
        } else {
            assert!(poll(f.as_mut(), &w).is_pending());
        }
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify.notify_waiters()));
    assert!(result.is_err());
    // Every waiter was notified even though a waker panicked; the queue still works.
    assert!(fs.iter_mut().all(|f| poll(f.as_mut(), &w).is_ready()));
    drop(fs);
    let mut a = pin!(notify.notified());
    assert!(poll(a.as_mut(), &w).is_pending());
    notify.notify_one();
    assert!(poll(a.as_mut(), &w).is_ready());
}

fn assert_unwind_safe<T: std::panic::UnwindSafe + std::panic::RefUnwindSafe>(value: T) -> T {
    value
}

#[test]
fn notify_is_unwind_safe_like_tokio() {
    // tokio's Notify is `UnwindSafe + RefUnwindSafe` (its tests/unwindsafe.rs): a `&Notify`
    // goes into `catch_unwind` without `AssertUnwindSafe`, and still works after the panic.
    let notify = assert_unwind_safe(Notify::new());
    let shared = assert_unwind_safe(&notify);
    let w = CountingWaker::new();
    let mut waiter = pin!(notify.notified());
    assert!(poll(waiter.as_mut(), &w).is_pending());
    let result = std::panic::catch_unwind(|| {
        shared.notify_one();
        panic!("after a notification");
    });
    assert!(result.is_err());
    assert!(poll(waiter.as_mut(), &w).is_ready());
}

#[test]
fn waiters_dropped_during_a_drain_leave_it_safely() {
    // Waiters woken in the first batch drop the others (still in the drain list) from their
    // wakers, while the drain has released the lock.
    let notify = Arc::new(Notify::new());
    let victims: Arc<Mutex<Vec<Pin<Box<OwnedNotified>>>>> = Arc::default();
    let waker = {
        let victims = victims.clone();
        on_wake(move || {
            victims.lock().unwrap().clear();
        })
    };
    let mut cx = Context::from_waker(&waker);
    let mut first: Vec<Pin<Box<Notified<'_>>>> =
        (0..40).map(|_| Box::pin(notify.notified())).collect();
    for f in &mut first {
        assert!(f.as_mut().poll(&mut cx).is_pending());
    }
    for _ in 0..60 {
        let mut f = Box::pin(notify.clone().notified_owned());
        assert!(!f.as_mut().enable());
        victims.lock().unwrap().push(f);
    }
    notify.notify_waiters();
    assert!(victims.lock().unwrap().is_empty());
    assert!(
        first
            .iter_mut()
            .all(|f| f.as_mut().poll(&mut cx).is_ready())
    );
    let mut after = pin!(notify.notified());
    assert!(!after.as_mut().enable());
}

#[test]
fn debug_output() {
    let notify = Notify::new();
    assert!(format!("{notify:?}").contains("Notify"));
    let notified = notify.notified();
    assert!(format!("{notified:?}").contains("Notified"));
    let _ = Notify::default();
}

#[test]
fn many_tasks_on_a_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    rt.block_on(async {
        let notify = Arc::new(Notify::new());
        for _ in 0..200 {
            let waiter = {
                let notify = notify.clone();
                tokio::spawn(async move { notify.notified().await })
            };
            notify.notify_one();
            waiter.await.unwrap();
        }
        // Broadcasts to tasks that registered before.
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let notify = notify.clone();
                let registered = Arc::new(Notify::new());
                let r2 = registered.clone();
                let handle = tokio::spawn(async move {
                    let notified = notify.notified();
                    let mut notified = pin!(notified);
                    notified.as_mut().enable();
                    r2.notify_one();
                    notified.await
                });
                (handle, registered)
            })
            .collect();
        let mut handles = Vec::new();
        for (handle, registered) in tasks {
            registered.notified().await;
            handles.push(handle);
        }
        notify.notify_waiters();
        for h in handles {
            h.await.unwrap();
        }
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
