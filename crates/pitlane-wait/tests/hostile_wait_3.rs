//! A third hostile pass over `Notify`, `Semaphore` and the `Park` parker (after
//! `adversarial.rs`, `hostile_wait.rs` and `hostile_wait_2.rs`), each case run on tokio's types
//! and on these side by side where tokio has the same thing: what a waker run while a release
//! has released its lock between batches observes (or, panicking, leaves); a `Notified` created
//! while a broadcast waits for the lock to drain; the panics of `merge` and `const_new` at the
//! limits; a many-task script on tokio's `current_thread` runtime whose schedule must be
//! tokio's, line for line; and what safe calls of `Park` may do to the process-wide parking
//! lot.

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[cfg(not(pitlane_loom))]
mod hostile {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};
    use std::time::Duration;

    use pitlane_testkit::wakers::{CloneGate, CountingWaker, on_wake};
    use pitlane_wait::Notify;
    use pitlane_wait::queue::WAKE_BATCH;

    /// An acquire, boxed: `Ok(permits held)` or `Err(())` once the semaphore is closed.
    type BoxAcquire = Pin<Box<dyn Future<Output = Result<usize, ()>> + Send>>;

    fn poll(
        future: Pin<&mut (dyn Future<Output = Result<usize, ()>> + Send)>,
        waker: &CountingWaker,
    ) -> Poll<Result<usize, ()>> {
        waker.with_context(|cx| future.poll(cx))
    }

    /// `n` futures, each acquiring one permit of `sem` (an `Arc` of either semaphore) and
    /// giving back how many it held (forgetting them), or `Err(())` once the semaphore closed.
    macro_rules! acquires {
        ($sem:expr, $n:expr) => {
            (0..$n)
                .map(|_| {
                    let sem = $sem.clone();
                    Box::pin(async move {
                        match sem.acquire_owned().await {
                            Ok(p) => {
                                let held = p.num_permits();
                                p.forget();
                                Ok(held)
                            }
                            Err(_) => Err(()),
                        }
                    }) as BoxAcquire
                })
                .collect::<Vec<BoxAcquire>>()
        };
    }

    /// `WAKE_BATCH + 2` acquires of one permit wait; `add_permits` serves them all, releasing
    /// its lock to wake the first batch. The first waiter's waker (run then) polls the waiter
    /// just after the batch, which the release has not woken yet. tokio's release serves a
    /// waiter only when its batch has room for the waker (its wake list), so that waiter is
    /// still queued and pending then. Returns what the probe saw, then whether every waiter
    /// completed and the permits free at the end.
    macro_rules! release_probe {
        ($sem:ty) => {{
            let sem = Arc::new(<$sem>::new(0));
            let n = WAKE_BATCH + 2;
            let next: Arc<Mutex<Option<BoxAcquire>>> = Arc::default();
            let seen: Arc<Mutex<Vec<Poll<Result<usize, ()>>>>> = Arc::default();
            let w = CountingWaker::new();
            let probe = {
                let next = next.clone();
                let seen = seen.clone();
                let w2 = CountingWaker::new();
                on_wake(move || {
                    if let Some(f) = next.lock().unwrap().as_mut() {
                        seen.lock().unwrap().push(poll(f.as_mut(), &w2));
                    }
                })
            };
            let mut fs = acquires!(sem, n);
            assert!(
                fs[0]
                    .as_mut()
                    .poll(&mut Context::from_waker(&probe))
                    .is_pending()
            );
            for f in &mut fs[1..] {
                assert!(poll(f.as_mut(), &w).is_pending());
            }
            let probed = fs.remove(WAKE_BATCH);
            *next.lock().unwrap() = Some(probed);
            sem.add_permits(n);
            let seen = seen.lock().unwrap().clone();
            let mut probed = next.lock().unwrap().take().unwrap();
            let mut done = seen.contains(&Poll::Ready(Ok(1)))
                || matches!(poll(probed.as_mut(), &w), Poll::Ready(Ok(1)));
            for f in &mut fs {
                done &= matches!(poll(f.as_mut(), &w), Poll::Ready(Ok(1)));
            }
            (seen, done, sem.available_permits())
        }};
    }

    /// `WAKE_BATCH + 8` acquires of one permit wait, the first with a waker that panics;
    /// `add_permits` for all of them panics while it wakes the first batch. Returns how many
    /// waiters then complete when polled, how many stay pending, and the permits free. tokio's
    /// release served the first batch only (the rest of the permits go with the panic) and
    /// left the others queued; a waiter served but never woken would be a wake-up lost.
    macro_rules! release_batch_panics {
        ($sem:ty) => {{
            let sem = Arc::new(<$sem>::new(0));
            let n = WAKE_BATCH + 8;
            let w = CountingWaker::new();
            let mut fs = acquires!(sem, n);
            let panics = on_wake(|| panic!("a waker panics"));
            assert!(
                fs[0]
                    .as_mut()
                    .poll(&mut Context::from_waker(&panics))
                    .is_pending()
            );
            for f in &mut fs[1..] {
                assert!(poll(f.as_mut(), &w).is_pending());
            }
            let sem2 = sem.clone();
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || sem2.add_permits(n)));
            assert!(result.is_err());
            let (mut ready, mut pending) = (0, 0);
            for f in &mut fs {
                match poll(f.as_mut(), &w) {
                    Poll::Ready(Ok(1)) => ready += 1,
                    Poll::Pending => pending += 1,
                    other => panic!("{other:?}"),
                }
            }
            (ready, pending, sem.available_permits())
        }};
    }

    #[test]
    fn a_release_whose_first_batch_panics_serves_what_tokios_serves() {
        let tokio = release_batch_panics!(tokio::sync::Semaphore);
        assert_eq!(tokio, (WAKE_BATCH, 8, 0), "tokio");
        let pitlane = release_batch_panics!(pitlane_wait::Semaphore);
        assert_eq!(pitlane, tokio);
    }

    #[test]
    fn a_waiter_after_a_full_batch_is_not_served_before_that_batch_is_woken_like_tokio() {
        let tokio = release_probe!(tokio::sync::Semaphore);
        assert_eq!(tokio, (vec![Poll::Pending], true, 0), "tokio");
        let pitlane = release_probe!(pitlane_wait::Semaphore);
        assert_eq!(pitlane, tokio);
    }

    /// What merging permits of one semaphore past `usize::MAX` permits does: `Err(message)` of
    /// the panic, the permits held before the merge that panicked, and the permits free after
    /// (the merged-in permit, dropped as the panic unwinds, goes back).
    #[cfg(target_pointer_width = "32")]
    macro_rules! merge_past_usize_max {
        ($sem:ty) => {{
            use std::panic::{AssertUnwindSafe, catch_unwind};
            let max = <$sem>::MAX_PERMITS;
            let sem = <$sem>::new(max);
            let mut held = sem.try_acquire_many(max as u32).unwrap();
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                for _ in 0..64 {
                    sem.add_permits(max);
                    let more = sem.try_acquire_many(max as u32).unwrap();
                    held.merge(more);
                }
            }));
            let message = match outcome {
                Ok(()) => String::from("no panic"),
                Err(e) => e
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| e.downcast_ref::<String>().cloned())
                    .unwrap_or_default(),
            };
            let count = held.num_permits();
            // Dropped, a count past `MAX_PERMITS` would panic in its release.
            held.forget();
            (message, count, sem.available_permits())
        }};
    }

    /// Regression (32-bit targets, where `MAX_PERMITS` is 2^29 - 1 and nine merges of
    /// `MAX_PERMITS` permits each pass `usize::MAX`): tokio's `merge` panics with "number of
    /// permits overflowed" (`checked_add`); ours added with `+=`, which panics with another
    /// message in debug builds and wraps in release builds, leaving a permit that holds a few
    /// permits where its holder was given 2^32 - 9 (the rest lost to the semaphore for good).
    #[cfg(target_pointer_width = "32")]
    #[test]
    fn merging_past_usize_max_permits_panics_like_tokio() {
        let tokio = merge_past_usize_max!(tokio::sync::Semaphore);
        let max = tokio::sync::Semaphore::MAX_PERMITS;
        assert_eq!(
            tokio,
            ("number of permits overflowed".to_string(), 8 * max, max),
            "tokio"
        );
        let pitlane = merge_past_usize_max!(pitlane_wait::Semaphore);
        assert_eq!(pitlane, tokio);
    }

    /// Holds up the clone of its waker: a queued `Notified` polled with it (a new waker)
    /// clones it under the notify's lock, so the lock stays held until the gate opens.
    static GATE: CloneGate = CloneGate::new();

    /// Regression: `notify_waiters` increments its counter (its linearization point) and then
    /// takes the lock to drain the queue. A `Notified` created after the increment records
    /// the new count and is not covered by that broadcast; but if it was polled (queued)
    /// before the drain got the lock, the drain took it and it completed. So of two `Notified`
    /// created one after the other after the increment, the later completed and the earlier
    /// did not: no order of the calls explains that, and tokio (whose broadcast increments
    /// and takes its list under one hold of its lock) never does it. Now such a waiter, found
    /// drained while the counter still reads what it recorded, registers again (and receives
    /// the next `notify_one`).
    ///
    /// The drain is held back by a poll that clones a new waker under the lock; a sleep lets
    /// the broadcast reach its increment (checked: a `Notified` created before it is then
    /// complete).
    #[test]
    fn a_notified_created_after_a_broadcast_began_is_not_completed_by_its_drain() {
        let notify = Arc::new(Notify::new());
        let w = CountingWaker::new();
        let mut first = Box::pin(notify.clone().notified_owned());
        assert!(w.with_context(|cx| first.as_mut().poll(cx)).is_pending());
        let mut before = Box::pin(notify.clone().notified_owned());
        std::thread::scope(|s| {
            let holder = s.spawn(move || {
                let waker = GATE.waker();
                let _ = first.as_mut().poll(&mut Context::from_waker(&waker));
                first
            });
            GATE.wait_until_cloning();
            let broadcaster = s.spawn(|| notify.notify_waiters());
            std::thread::sleep(Duration::from_millis(200));
            assert!(
                before.as_mut().enable(),
                "the broadcast has incremented its counter"
            );
            let mut earlier = Box::pin(notify.clone().notified_owned());
            let mut later = Box::pin(notify.clone().notified_owned());
            assert!(w.with_context(|cx| later.as_mut().poll(cx)).is_pending());
            GATE.open();
            let mut first = holder.join().unwrap();
            broadcaster.join().unwrap();
            assert!(w.with_context(|cx| first.as_mut().poll(cx)).is_ready());
            let later_ready = w.with_context(|cx| later.as_mut().poll(cx)).is_ready();
            let earlier_ready = w.with_context(|cx| earlier.as_mut().poll(cx)).is_ready();
            assert_eq!(
                (later_ready, earlier_ready),
                (false, false),
                "(later, earlier) completed by a broadcast that began before both were created"
            );
            // `later` is registered again: the next notify_one is its.
            notify.notify_one();
            assert!(w.with_context(|cx| later.as_mut().poll(cx)).is_ready());
            assert!(w.with_context(|cx| earlier.as_mut().poll(cx)).is_pending());
        });
    }

    /// The message of the panic `f` raises.
    fn panic_message(f: impl FnOnce()) -> String {
        let error = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_err();
        error
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| error.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    }

    /// Regression: `const_new` past `MAX_PERMITS` (called at run time) panicked with "a
    /// semaphore may not have more than MAX_PERMITS permits", where tokio's panics with
    /// "assertion failed: permits <= Self::MAX_PERMITS" (its `const_new` asserts without a
    /// message; `new` has the formatted one, as ours).
    #[test]
    fn const_new_past_max_permits_panics_with_tokios_message() {
        let tokio = panic_message(|| {
            let _ = tokio::sync::Semaphore::const_new(usize::MAX);
        });
        let pitlane = panic_message(|| {
            let _ = pitlane_wait::Semaphore::const_new(usize::MAX);
        });
        assert_eq!(pitlane, tokio);
        let tokio = panic_message(|| {
            let _ = tokio::sync::Semaphore::new(usize::MAX);
        });
        let pitlane = panic_message(|| {
            let _ = pitlane_wait::Semaphore::new(usize::MAX);
        });
        assert_eq!(pitlane, tokio);
    }

    /// A script of tasks on tokio's `current_thread` runtime (whose scheduler runs woken tasks
    /// in the order they were woken): six tasks acquire 1-3 permits of a semaphore of 4 in
    /// rounds, some yielding while they hold them, some cancelling an acquire after a timer
    /// tick (`tokio::time` paused: the ticks are deterministic); a Notify passes a baton by
    /// `notify_one`, `notify_last` and `notify_waiters`; a closer closes the semaphore midway.
    /// Every task logs what it sees (permits free, `is_closed`, which notification arrived).
    /// Any difference in which waiter is served or woken, in how many wake-ups, or in their
    /// order changes the schedule and so the log.
    macro_rules! runtime_script {
        ($sem:ty, $notify:ty) => {{
            use std::cell::RefCell;
            use std::rc::Rc;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            let local = tokio::task::LocalSet::new();
            let log: Rc<RefCell<Vec<String>>> = Rc::default();
            local.block_on(&rt, async {
                let sem = Arc::new(<$sem>::new(4));
                let notify = Arc::new(<$notify>::new());
                let mut tasks = Vec::new();
                for t in 0..6_u32 {
                    let (sem, notify, log) = (sem.clone(), notify.clone(), log.clone());
                    tasks.push(tokio::task::spawn_local(async move {
                        for round in 0..12_u32 {
                            let n = (t + round) % 3 + 1;
                            if (t * 7 + round) % 5 == 0 {
                                // An acquire given up after a tick if not served by then.
                                let got = tokio::time::timeout(
                                    std::time::Duration::from_millis(1),
                                    sem.acquire_many(n),
                                )
                                .await;
                                let what = match got {
                                    Ok(Ok(p)) => format!("got {}", p.num_permits()),
                                    Ok(Err(_)) => "closed".to_string(),
                                    Err(_) => "gave up".to_string(),
                                };
                                log.borrow_mut().push(format!(
                                    "t{t} r{round} timed {what} free {}",
                                    sem.available_permits()
                                ));
                                continue;
                            }
                            match sem.acquire_many(n).await {
                                Ok(permit) => {
                                    log.borrow_mut().push(format!(
                                        "t{t} r{round} got {n} free {}",
                                        sem.available_permits()
                                    ));
                                    if round % 2 == 0 {
                                        tokio::task::yield_now().await;
                                    }
                                    if (t + round) % 4 == 0 {
                                        let wait = notify.notified();
                                        match round % 3 {
                                            0 => notify.notify_one(),
                                            1 => notify.notify_last(),
                                            _ => notify.notify_waiters(),
                                        }
                                        let done = tokio::time::timeout(
                                            std::time::Duration::from_millis(1),
                                            wait,
                                        )
                                        .await
                                        .is_ok();
                                        log.borrow_mut()
                                            .push(format!("t{t} r{round} notified {done}"));
                                    }
                                    drop(permit);
                                }
                                Err(_) => {
                                    log.borrow_mut().push(format!(
                                        "t{t} r{round} closed {} free {}",
                                        sem.is_closed(),
                                        sem.available_permits()
                                    ));
                                    break;
                                }
                            }
                        }
                    }));
                }
                for t in 0..3_u32 {
                    let (notify, log) = (notify.clone(), log.clone());
                    tasks.push(tokio::task::spawn_local(async move {
                        for round in 0..6_u32 {
                            let mut wait = std::pin::pin!(notify.notified());
                            if (t + round) % 2 == 0 {
                                wait.as_mut().enable();
                            }
                            tokio::task::yield_now().await;
                            let done =
                                tokio::time::timeout(std::time::Duration::from_millis(2), wait)
                                    .await
                                    .is_ok();
                            log.borrow_mut().push(format!("w{t} r{round} {done}"));
                        }
                    }));
                }
                {
                    let (sem, log) = (sem.clone(), log.clone());
                    tasks.push(tokio::task::spawn_local(async move {
                        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
                        sem.close();
                        log.borrow_mut()
                            .push(format!("closed free {}", sem.available_permits()));
                    }));
                }
                for task in tasks {
                    task.await.unwrap();
                }
                log.borrow_mut()
                    .push(format!("end free {}", sem.available_permits()));
            });
            Rc::try_unwrap(log).unwrap().into_inner()
        }};
    }

    #[test]
    fn a_runtime_script_of_many_tasks_runs_the_same_schedule_as_on_tokio() {
        let tokio = runtime_script!(tokio::sync::Semaphore, tokio::sync::Notify);
        assert!(tokio.len() > 40, "the script ran: {tokio:?}");
        assert!(tokio.iter().any(|l| l.contains("closed true")), "{tokio:?}");
        let pitlane = runtime_script!(pitlane_wait::Semaphore, pitlane_wait::Notify);
        for (i, (a, b)) in tokio.iter().zip(&pitlane).enumerate() {
            assert_eq!(b, a, "first difference at line {i}; tokio: {tokio:#?}");
        }
        assert_eq!(pitlane.len(), tokio.len());
    }

    /// Regression: `Park::park` (safe, public) ran its caller's `still_waiting` as
    /// `parking_lot_core::park`'s `validate`, under the parking lot's bucket lock, which that
    /// (unsafe) function requires not to panic. A closure that panicked unwound out with the
    /// bucket still locked: every later park or unpark whose key falls in that bucket (here
    /// the same key; in a program, any `parking_lot` lock that hashes there) hung for ever.
    /// Now the panic is caught there and resumed once the bucket lock is released (and, since
    /// the next fix, the closure runs outside the parking lot altogether).
    #[test]
    fn a_panicking_still_waiting_leaves_the_parking_lot_usable() {
        use pitlane_wait::lock::{Park, Parker};
        let (done, finished) = std::sync::mpsc::channel();
        let key = std::ptr::from_ref(&done).addr();
        std::thread::spawn(move || {
            let panicked = std::panic::catch_unwind(|| {
                Park::park(key, || panic!("still_waiting panics"));
            })
            .is_err();
            // Takes the bucket lock of `key`.
            Park::unpark(key);
            Park::park(key, || false);
            let _ = done.send(panicked);
        });
        let outcome = finished.recv_timeout(Duration::from_secs(10));
        assert_eq!(
            outcome,
            Ok(true),
            "the parking lot's bucket stayed locked after the panic"
        );
    }

    /// Regression: after the fix above, `Park::park` still ran its caller's `still_waiting`
    /// under the parking lot's bucket lock, where `parking_lot_core::park` (unsafe) asks that
    /// no code call into the parking lot: a closure that unparked the same key (or parked,
    /// or waited for a contended `parking_lot` lock hashed to that bucket) deadlocked on the
    /// bucket lock. Now the closure runs before any lock of the parking lot is taken.
    #[test]
    fn a_still_waiting_that_calls_into_the_parking_lot_does_not_deadlock() {
        use pitlane_wait::lock::{Park, Parker};
        let (done, finished) = std::sync::mpsc::channel();
        let key = std::ptr::from_ref(&done).addr();
        std::thread::spawn(move || {
            let mut ran = false;
            Park::park(key, || {
                // Takes the bucket lock of `key`'s parking address.
                Park::unpark(key);
                ran = true;
                false
            });
            let _ = done.send(ran);
        });
        assert_eq!(
            finished.recv_timeout(Duration::from_secs(10)),
            Ok(true),
            "a still_waiting that unparked its own key deadlocked"
        );
    }

    /// Regression: `Park::park`/`Park::unpark` (safe, public) parked and unparked on the key
    /// they were given, any address, in the process-wide parking lot, whose unsafe functions
    /// ask for "an address that you control": safe code could wake a thread another
    /// primitive had parked on its own address, handing it a token it did not send (a
    /// primitive that passes data through its unpark tokens would then read garbage). Now
    /// `Park` maps every key into addresses of its own.
    #[test]
    fn park_unpark_does_not_touch_another_primitives_key() {
        use pitlane_wait::lock::{Park, Parker};
        let (parked, is_parked) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            let own = Box::new(0_u64);
            let key = std::ptr::from_ref(&*own).addr();
            parked.send(key).unwrap();
            // SAFETY: the key is the address of this thread's own box, which lives through
            // the call; the callbacks neither panic nor call into the parking lot.
            let result = unsafe {
                parking_lot_core::park(
                    key,
                    || true,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    Some(std::time::Instant::now() + Duration::from_millis(500)),
                )
            };
            drop(own);
            result
        });
        let key = is_parked.recv().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        Park::unpark(key);
        assert_eq!(
            other.join().unwrap(),
            parking_lot_core::ParkResult::TimedOut,
            "Park::unpark woke a thread parked on another primitive's key"
        );
    }
}
