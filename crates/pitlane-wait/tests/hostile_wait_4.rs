//! A fourth hostile pass (after `adversarial.rs`, `hostile_wait.rs`, `hostile_wait_2.rs` and
//! `hostile_wait_3.rs`): the wakers a completed `Notified` keeps, on each path by which it
//! completes; what `enable` does to a `Notified` that a broadcast drained without covering it;
//! the public `WaitQueue` API used directly (its documented contracts, taken at their word);
//! and cases judged fine that no test pinned. Where tokio has the same thing, each case runs
//! on tokio's types too.

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[cfg(not(pitlane_loom))]
mod hostile {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Context, RawWaker, RawWakerVTable, Waker};

    use pitlane_testkit::wakers::{CountingWaker, on_wake};
    use pitlane_wait::queue::WAKE_BATCH;
    use pitlane_wait::{Notify, OwnedNotified};

    /// What a waker of `hook_waker` points at: its own clone of a counted waker (so that the
    /// counter's `live` counts every waker of the hook) and the action its `clone` runs.
    struct Hook {
        on_clone: Arc<dyn Fn() + Send + Sync>,
        inner: Waker,
    }

    static HOOK: RawWakerVTable = RawWakerVTable::new(
        |p| {
            // SAFETY: `p` is the `Box<Hook>` of a live waker (see `hook_waker`).
            let hook = unsafe { &*p.cast::<Hook>() };
            (hook.on_clone)();
            hook_raw(hook.on_clone.clone(), hook.inner.clone())
        },
        |p| {
            // SAFETY: as above; waking by value consumes the waker.
            let hook = unsafe { Box::from_raw(p.cast_mut().cast::<Hook>()) };
            hook.inner.wake_by_ref();
        },
        |p| {
            // SAFETY: as above.
            unsafe { &*p.cast::<Hook>() }.inner.wake_by_ref();
        },
        |p| {
            // SAFETY: as above; dropping consumes the waker.
            drop(unsafe { Box::from_raw(p.cast_mut().cast::<Hook>()) });
        },
    );

    fn hook_raw(on_clone: Arc<dyn Fn() + Send + Sync>, inner: Waker) -> RawWaker {
        let hook = Box::into_raw(Box::new(Hook { on_clone, inner }));
        RawWaker::new(hook.cast_const().cast(), &HOOK)
    }

    /// A waker counted by `counts` (each of its clones too) whose `clone` runs `on_clone`
    /// first.
    fn hook_waker(counts: &CountingWaker, on_clone: impl Fn() + Send + Sync + 'static) -> Waker {
        // SAFETY: the vtable keeps the `RawWaker` contract: each waker owns its `Box<Hook>`
        // (a clone makes a new one), freed when the waker is woken by value or dropped; `Hook`
        // is `Send + Sync`.
        unsafe { Waker::from_raw(hook_raw(Arc::new(on_clone), counts.waker())) }
    }

    /// A `Notified` whose first poll's waker broadcasts from its `clone` (which pitlane makes
    /// while deciding, tokio before it locks): the broadcast comes after the future was
    /// created, so the future completes at that poll. Returns whether it did and how many
    /// wakers are alive after (the counter's own, plus any the completed future kept).
    macro_rules! completes_on_a_broadcast_from_its_clone {
        ($notify:expr) => {{
            let notify = Arc::new($notify);
            let counts = CountingWaker::new();
            let fired = AtomicBool::new(false);
            let waker = {
                let notify = notify.clone();
                hook_waker(&counts, move || {
                    if !fired.swap(true, Ordering::SeqCst) {
                        notify.notify_waiters();
                    }
                })
            };
            let mut notified = Box::pin(notify.clone().notified_owned());
            let ready = notified
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready();
            drop(waker);
            let live = counts.live();
            drop(notified);
            (ready, live, counts.live())
        }};
    }

    /// Regression: a `Notified` that enqueued and then saw a broadcast made since its first
    /// read of the counter leaves the queue and completes; it kept the waker clone it had
    /// registered until it was dropped (`left: (true, 2, 1)`), where tokio's completed future
    /// holds no waker (its waiter checks the counter under its lock before it registers, and
    /// drops its clone). Now a `Notified` drops its registered waker when it completes.
    #[test]
    fn a_notified_completed_by_a_broadcast_during_its_first_poll_keeps_no_waker_like_tokio() {
        let tokio = completes_on_a_broadcast_from_its_clone!(tokio::sync::Notify::new());
        assert_eq!(
            tokio,
            (true, 1, 1),
            "tokio: (ready, live after, live once dropped)"
        );
        let pitlane = completes_on_a_broadcast_from_its_clone!(Notify::new());
        assert_eq!(pitlane, tokio);
    }

    /// `WAKE_BATCH + 2` waiters; a broadcast drains them, waking the first batch with the lock
    /// released. The first waiter's waker polls the last waiter (not reached by the drain yet)
    /// with the waker it registered: it completes (the broadcast covers it) and leaves the
    /// drain list. Returns whether it completed then and how many of its wakers are alive
    /// after the broadcast (the counter's own, plus any the completed future kept).
    macro_rules! completes_in_a_later_batch {
        ($notify:expr, $owned:ty) => {{
            let notify = Arc::new($notify);
            let last_counts = CountingWaker::new();
            let last: Arc<Mutex<Option<Pin<Box<$owned>>>>> = Arc::default();
            let seen = Arc::new(AtomicBool::new(false));
            let probe = {
                let (last, seen, last_counts) = (last.clone(), seen.clone(), last_counts.clone());
                on_wake(move || {
                    if let Some(f) = last.lock().unwrap().as_mut() {
                        let ready = last_counts
                            .with_context(|cx| f.as_mut().poll(cx))
                            .is_ready();
                        seen.store(ready, Ordering::SeqCst);
                    }
                })
            };
            let w = CountingWaker::new();
            let mut fs: Vec<Pin<Box<$owned>>> = (0..WAKE_BATCH + 1)
                .map(|_| Box::pin(notify.clone().notified_owned()))
                .collect();
            assert!(
                fs[0]
                    .as_mut()
                    .poll(&mut Context::from_waker(&probe))
                    .is_pending()
            );
            for f in &mut fs[1..] {
                assert!(w.with_context(|cx| f.as_mut().poll(cx)).is_pending());
            }
            let mut l = Box::pin(notify.clone().notified_owned());
            assert!(
                last_counts
                    .with_context(|cx| l.as_mut().poll(cx))
                    .is_pending()
            );
            *last.lock().unwrap() = Some(l);
            notify.notify_waiters();
            drop(probe); // holds a clone of `last_counts`
            let live = last_counts.live();
            (seen.load(Ordering::SeqCst), live)
        }};
    }

    /// Regression: a queued `Notified` polled while a broadcast that covers it has not drained
    /// it yet (its drain wakes a batch ahead with the lock released) leaves the drain list and
    /// completes; it kept its registered waker until dropped (`left: (true, 2)`), where
    /// tokio's, completing on the same path, takes its waker out and drops it.
    #[test]
    fn a_notified_completed_ahead_of_its_drain_keeps_no_waker_like_tokio() {
        let tokio = completes_in_a_later_batch!(
            tokio::sync::Notify::new(),
            tokio::sync::futures::OwnedNotified
        );
        assert_eq!(tokio, (true, 1), "tokio: (ready in the batch, live after)");
        let pitlane = completes_in_a_later_batch!(Notify::new(), OwnedNotified);
        assert_eq!(pitlane, tokio);
    }

    /// More than a batch of waiters, the first with a waker that panics: the waiters after the
    /// first batch are marked notified with their wakers left in them. Each completes when
    /// polled, and then holds its waker no more, as tokio's (which takes the waker of a
    /// notified waiter out at that poll). Returns the wakers alive after the broadcast and
    /// after every waiter was polled to completion (the counter's own, plus those kept).
    macro_rules! wakers_after_a_panicked_broadcast {
        ($notify:expr) => {{
            let notify = Arc::new($notify);
            let n = WAKE_BATCH + 4;
            let w = CountingWaker::new();
            let mut fs: Vec<_> = (0..n)
                .map(|_| Box::pin(notify.clone().notified_owned()))
                .collect();
            let panicking = on_wake(|| panic!("a waker panics"));
            assert!(
                fs[0]
                    .as_mut()
                    .poll(&mut Context::from_waker(&panicking))
                    .is_pending()
            );
            drop(panicking);
            for f in &mut fs[1..] {
                assert!(w.with_context(|cx| f.as_mut().poll(cx)).is_pending());
            }
            let panicked =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify.notify_waiters()));
            assert!(panicked.is_err());
            let after_broadcast = w.live();
            for f in &mut fs {
                assert!(w.with_context(|cx| f.as_mut().poll(cx)).is_ready());
            }
            (after_broadcast, w.live())
        }};
    }

    /// Pins (with the fix of the two tests above): the waiters a panicked broadcast left
    /// marked keep their wakers until they complete, then drop them, as tokio's.
    #[test]
    fn waiters_left_by_a_panicked_broadcast_drop_their_wakers_when_they_complete_like_tokio() {
        let tokio = wakers_after_a_panicked_broadcast!(tokio::sync::Notify::new());
        assert_eq!(
            tokio,
            (1 + 4, 1),
            "tokio: (after the broadcast, after completing)"
        );
        let pitlane = wakers_after_a_panicked_broadcast!(Notify::new());
        assert_eq!(pitlane, tokio);
    }
}
