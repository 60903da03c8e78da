//! A hostile pass over `Semaphore` alone (after `adversarial.rs` and `hostile_wait*.rs`): user
//! code the semaphore runs in the middle of an operation — a waker whose `clone`, `wake` or
//! `drop` calls back into the same semaphore, or panics — and the parameters at their limits,
//! each checked against a count of the permits (free + held + given to waiters) and, where
//! tokio has the same thing, against tokio 1.x's semaphore run side by side.

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[cfg(not(pitlane_loom))]
mod hostile {
    use std::future::Future;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
    use std::time::Duration;

    use pitlane_testkit::wakers::{CountingWaker, on_wake};
    use pitlane_wait::Semaphore;

    /// An acquire, boxed: `Ok(permits held)` (the permit forgotten, its count given back by
    /// hand where a test needs it) or `Err(())` once the semaphore is closed.
    type BoxAcquire = Pin<Box<dyn Future<Output = Result<usize, ()>> + Send>>;

    /// A poll of a `BoxAcquire`.
    type Outcome = Poll<Result<usize, ()>>;

    /// What a waker of `hook_waker` points at: its own clone of a counted waker and the
    /// actions its `clone` and `drop` run (each a shared closure, so every clone runs them).
    struct Hook {
        on_clone: Arc<dyn Fn() + Send + Sync>,
        on_drop: Arc<dyn Fn() + Send + Sync>,
        inner: Waker,
    }

    static HOOK: RawWakerVTable = RawWakerVTable::new(
        |p| {
            // SAFETY: `p` is the `Box<Hook>` of a live waker (see `hook_waker`).
            let hook = unsafe { &*p.cast::<Hook>() };
            (hook.on_clone)();
            hook_raw(
                hook.on_clone.clone(),
                hook.on_drop.clone(),
                hook.inner.clone(),
            )
        },
        |p| {
            // SAFETY: as above; waking by value consumes the waker (no `on_drop`: it is woken).
            let hook = unsafe { Box::from_raw(p.cast_mut().cast::<Hook>()) };
            hook.inner.wake_by_ref();
        },
        |p| {
            // SAFETY: as above.
            unsafe { &*p.cast::<Hook>() }.inner.wake_by_ref();
        },
        |p| {
            // SAFETY: as above; dropping consumes the waker.
            let hook = unsafe { Box::from_raw(p.cast_mut().cast::<Hook>()) };
            (hook.on_drop)();
        },
    );

    fn hook_raw(
        on_clone: Arc<dyn Fn() + Send + Sync>,
        on_drop: Arc<dyn Fn() + Send + Sync>,
        inner: Waker,
    ) -> RawWaker {
        let hook = Box::into_raw(Box::new(Hook {
            on_clone,
            on_drop,
            inner,
        }));
        RawWaker::new(hook.cast_const().cast(), &HOOK)
    }

    /// A waker counted by `counts` (each of its clones too) whose `clone` runs `on_clone`
    /// first and whose `drop` (not a wake by value) runs `on_drop`.
    fn hook_waker(
        counts: &CountingWaker,
        on_clone: impl Fn() + Send + Sync + 'static,
        on_drop: impl Fn() + Send + Sync + 'static,
    ) -> Waker {
        // SAFETY: the vtable keeps the `RawWaker` contract: each waker owns its `Box<Hook>`
        // (a clone makes a new one), freed when the waker is woken by value or dropped; `Hook`
        // is `Send + Sync`.
        unsafe {
            Waker::from_raw(hook_raw(
                Arc::new(on_clone),
                Arc::new(on_drop),
                counts.waker(),
            ))
        }
    }

    /// An action that runs `f` the first time only (later calls do nothing).
    fn once(f: impl Fn() + Send + Sync + 'static) -> impl Fn() + Send + Sync + 'static {
        let fired = AtomicBool::new(false);
        move || {
            if !fired.swap(true, Ordering::SeqCst) {
                f();
            }
        }
    }

    fn poll_with(future: &mut BoxAcquire, waker: &Waker) -> Poll<Result<usize, ()>> {
        future.as_mut().poll(&mut Context::from_waker(waker))
    }

    fn poll(future: &mut BoxAcquire, counts: &CountingWaker) -> Poll<Result<usize, ()>> {
        poll_with(future, &counts.waker())
    }

    /// Runs `f` on a thread and gives its result back, or fails the test if it has not
    /// returned within ten seconds (a deadlock: the thread is left behind).
    fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(value)) => value,
            Ok(Err(payload)) => std::panic::resume_unwind(payload),
            Err(_) => panic!("{what}: no return within 10 s (a deadlock)"),
        }
    }

    /// An acquire of `n` permits of `sem` (an `Arc` of either semaphore), boxed.
    macro_rules! acquire {
        ($sem:expr, $n:expr) => {{
            let sem = $sem.clone();
            let n: u32 = $n;
            Box::pin(async move {
                match sem.acquire_many_owned(n).await {
                    Ok(p) => {
                        let held = p.num_permits();
                        p.forget();
                        Ok(held)
                    }
                    Err(_) => Err(()),
                }
            }) as BoxAcquire
        }};
    }

    /// What the first poll of an acquire of 3 permits (of a semaphore with 1 free) returns
    /// when its waker's first `clone` runs `reenter` on the same semaphore, then the free
    /// permits, then (if it waited) what it returns once 3 more permits are added, and the
    /// free permits once its permits (if any) are given back. pitlane clones that waker while
    /// it decides, outside its lock (tokio clones it under its lock and would hang on any call
    /// that locks); the decision is then made again against the new state.
    fn first_poll_with_a_reentrant_clone(
        reenter: impl Fn(&Arc<Semaphore>) + Send + Sync + 'static,
    ) -> (Outcome, usize, Option<Outcome>, usize) {
        within("a first poll whose waker's clone re-enters", move || {
            let sem = Arc::new(Semaphore::new(1));
            let counts = CountingWaker::new();
            let waker = {
                let sem = sem.clone();
                hook_waker(&counts, once(move || reenter(&sem)), || {})
            };
            let mut a = acquire!(sem, 3);
            let first = poll_with(&mut a, &waker);
            drop(waker);
            let free = sem.available_permits();
            let mut later = None;
            let mut held = match first {
                Poll::Ready(Ok(n)) => n,
                _ => 0,
            };
            if first.is_pending() {
                sem.add_permits(3);
                let second = poll(&mut a, &counts);
                if let Poll::Ready(Ok(n)) = second {
                    held = n;
                }
                later = Some(second);
            }
            drop(a);
            sem.add_permits(held);
            (first, free, later, sem.available_permits())
        })
    }

    #[test]
    fn a_first_polls_waker_clone_that_adds_the_missing_permits_gets_them_at_once() {
        assert_eq!(
            first_poll_with_a_reentrant_clone(|sem| sem.add_permits(2)),
            (Poll::Ready(Ok(3)), 0, None, 3)
        );
    }

    #[test]
    fn a_first_polls_waker_clone_that_closes_fails_at_once_and_takes_nothing() {
        assert_eq!(
            first_poll_with_a_reentrant_clone(|sem| sem.close()),
            (Poll::Ready(Err(())), 1, None, 1)
        );
    }

    #[test]
    fn a_first_polls_waker_clone_that_forgets_the_free_permit_waits_for_all_three() {
        // The decision made again sees no free permit: it waits for 3, and 3 added serve it.
        assert_eq!(
            first_poll_with_a_reentrant_clone(|sem| assert_eq!(sem.forget_permits(1), 1)),
            (Poll::Pending, 0, Some(Poll::Ready(Ok(3))), 3)
        );
    }

    #[test]
    fn a_first_polls_waker_clone_that_takes_and_forgets_the_free_permit_waits_for_all_three() {
        assert_eq!(
            first_poll_with_a_reentrant_clone(|sem| sem.try_acquire().unwrap().forget()),
            (Poll::Pending, 0, Some(Poll::Ready(Ok(3))), 3)
        );
    }

    #[test]
    fn a_first_polls_waker_clone_that_enqueues_another_acquire_waits_behind_it() {
        // The clone queues an acquire of 2 (it takes the free permit, lacks 1), which is then
        // ahead: of the 3 added, 1 completes it, 2 go to ours, which still lacks 1. So ours is
        // pending, and the other, once its permits are given back, completes ours.
        let result = within("a clone that enqueues another acquire", || {
            let sem = Arc::new(Semaphore::new(1));
            let counts = CountingWaker::new();
            let ahead: Arc<Mutex<Option<BoxAcquire>>> = Arc::default();
            let waker = {
                let sem = sem.clone();
                let ahead = ahead.clone();
                let counts = counts.clone();
                hook_waker(
                    &counts.clone(),
                    once(move || {
                        let mut other = acquire!(sem, 2);
                        assert!(poll(&mut other, &counts).is_pending());
                        *ahead.lock().unwrap() = Some(other);
                    }),
                    || {},
                )
            };
            let mut mine = acquire!(sem, 3);
            let first = poll_with(&mut mine, &waker);
            drop(waker);
            sem.add_permits(3);
            let mut other = ahead.lock().unwrap().take().unwrap();
            let theirs = poll(&mut other, &counts);
            let mine_then = poll(&mut mine, &counts);
            sem.add_permits(2); // the other's permits, given back
            let mine_after = poll(&mut mine, &counts);
            sem.add_permits(3);
            (
                first,
                theirs,
                mine_then,
                mine_after,
                sem.available_permits(),
            )
        });
        assert_eq!(
            result,
            (
                Poll::Pending,
                Poll::Ready(Ok(2)),
                Poll::Pending,
                Poll::Ready(Ok(3)),
                4
            )
        );
    }

    #[test]
    fn a_first_polls_waker_clone_that_cancels_a_partly_served_waiter_takes_its_permit() {
        // The queue holds an acquire of 2 with 1 permit given; ours (of 1) decides to wait;
        // its waker's clone drops that waiter, whose permit goes back free; the decision made
        // again takes it.
        let result = within("a clone that cancels the waiter ahead", || {
            let sem = Arc::new(Semaphore::new(1));
            let counts = CountingWaker::new();
            let ahead: Arc<Mutex<Option<BoxAcquire>>> = Arc::default();
            let mut other = acquire!(sem, 2);
            assert!(poll(&mut other, &counts).is_pending());
            *ahead.lock().unwrap() = Some(other);
            let waker = {
                let ahead = ahead.clone();
                hook_waker(
                    &counts,
                    once(move || drop(ahead.lock().unwrap().take())),
                    || {},
                )
            };
            let mut mine = acquire!(sem, 1);
            let first = poll_with(&mut mine, &waker);
            drop(waker);
            (first, sem.available_permits())
        });
        assert_eq!(result, (Poll::Ready(Ok(1)), 0));
    }

    /// A queued acquire (of 2, with 1 given) whose registered waker's `drop` runs `reenter`,
    /// polled again with a new waker (the old one is dropped) and then dropped itself (its
    /// new waker, with the same `drop`, goes with it). Returns the free permits after each
    /// step and whether the semaphore is closed at the end. Both semaphores drop those wakers
    /// with their lock released.
    macro_rules! reentrant_waker_drops {
        ($sem:ty, $reenter:expr) => {{
            within("wakers whose drop re-enters", || {
                let sem = Arc::new(<$sem>::new(1));
                let counts = CountingWaker::new();
                let reenter = {
                    let sem = sem.clone();
                    move || ($reenter)(&*sem)
                };
                let reenter = Arc::new(reenter);
                let hooked = || {
                    let reenter = reenter.clone();
                    hook_waker(&counts, || {}, move || reenter())
                };
                let mut a = acquire!(sem, 2);
                let w1 = hooked();
                let first = poll_with(&mut a, &w1);
                drop(w1);
                let after_first = sem.available_permits();
                let w2 = hooked();
                let second = poll_with(&mut a, &w2);
                drop(w2);
                let after_repoll = sem.available_permits();
                drop(a);
                (
                    first,
                    after_first,
                    second,
                    after_repoll,
                    sem.available_permits(),
                    sem.is_closed(),
                )
            })
        }};
    }

    #[test]
    fn queued_acquires_wakers_whose_drop_adds_permits_run_outside_the_lock_like_tokio() {
        // Every drop of a hooked waker (the poll's own, the replaced one, the cancelled
        // future's) adds a permit: each goes to the waiter while it waits.
        let tokio = reentrant_waker_drops!(tokio::sync::Semaphore, |s: &tokio::sync::Semaphore| {
            s.add_permits(0)
        });
        let pitlane = reentrant_waker_drops!(Semaphore, |s: &Semaphore| s.add_permits(0));
        assert_eq!(pitlane, tokio);
        let tokio = reentrant_waker_drops!(tokio::sync::Semaphore, |s: &tokio::sync::Semaphore| {
            if s.available_permits() < 5 {
                s.add_permits(1)
            }
        });
        let pitlane = reentrant_waker_drops!(Semaphore, |s: &Semaphore| {
            if s.available_permits() < 5 {
                s.add_permits(1)
            }
        });
        assert_eq!(pitlane, tokio);
    }

    #[test]
    fn queued_acquires_wakers_whose_drop_closes_run_outside_the_lock_like_tokio() {
        let tokio = reentrant_waker_drops!(tokio::sync::Semaphore, |s: &tokio::sync::Semaphore| {
            s.close()
        });
        let pitlane = reentrant_waker_drops!(Semaphore, |s: &Semaphore| s.close());
        assert_eq!(pitlane, tokio);
    }

    #[test]
    fn queued_acquires_wakers_whose_drop_takes_permits_run_outside_the_lock_like_tokio() {
        let tokio = reentrant_waker_drops!(tokio::sync::Semaphore, |s: &tokio::sync::Semaphore| {
            let _ = s.try_acquire().map(|p| p.forget());
            let _ = s.forget_permits(1);
        });
        let pitlane = reentrant_waker_drops!(Semaphore, |s: &Semaphore| {
            let _ = s.try_acquire().map(|p| p.forget());
            let _ = s.forget_permits(1);
        });
        assert_eq!(pitlane, tokio);
    }

    /// `WAKE_BATCH + 3` waiters (every third asks for 2 permits, the rest for 1) wait on an
    /// empty semaphore; the first one's waker runs `reenter` on the semaphore and the waiters
    /// (`&mut [Option<BoxAcquire>]`, its own slot empty by then: it is polled first, from the
    /// waker) when a single `add_permits` serves them all, which wakes the first batch with
    /// its lock released before it gives the next waiter anything (as tokio's does). Returns
    /// each waiter's outcome when polled after, the wake count, and the free permits once the
    /// permits held are given back, with the closed flag. tokio's release takes a waiter
    /// only when its wake list has room, so the same waiters are served on both.
    macro_rules! reenter_from_a_release {
        ($sem:ty, $reenter:expr) => {
            reenter_from_a_release!($sem, $reenter, |s: &$sem, total: usize| s
                .add_permits(total))
        };
        ($sem:ty, $reenter:expr, $trigger:expr) => {{
            within("a release or close whose first waker re-enters", || {
                let n = pitlane_wait::queue::WAKE_BATCH + 3;
                let sem = Arc::new(<$sem>::new(0));
                let counts = CountingWaker::new();
                let waiters: Arc<Mutex<Vec<Option<BoxAcquire>>>> = Arc::default();
                let first_outcome: Arc<Mutex<Option<Poll<Result<usize, ()>>>>> = Arc::default();
                let mut total = 0;
                for i in 0..n {
                    let want = if i % 3 == 2 { 2 } else { 1 };
                    total += want;
                    let mut a = acquire!(sem, want as u32);
                    assert!(poll(&mut a, &counts).is_pending());
                    waiters.lock().unwrap().push(Some(a));
                }
                let reentrant = {
                    let sem = sem.clone();
                    let waiters = waiters.clone();
                    let first_outcome = first_outcome.clone();
                    let counts = counts.clone();
                    on_wake(move || {
                        let mut first = waiters.lock().unwrap()[0].take().unwrap();
                        *first_outcome.lock().unwrap() = Some(poll(&mut first, &counts));
                        ($reenter)(&*sem, &mut waiters.lock().unwrap()[..]);
                    })
                };
                {
                    let mut list = waiters.lock().unwrap();
                    let first = list[0].as_mut().unwrap();
                    assert!(poll_with(first, &reentrant).is_pending());
                }
                drop(reentrant);
                ($trigger)(&*sem, total);
                let mut outcomes = vec![first_outcome.lock().unwrap().take()];
                let mut held = match outcomes[0] {
                    Some(Poll::Ready(Ok(k))) => k,
                    _ => 0,
                };
                let rest: Vec<Option<BoxAcquire>> = waiters
                    .lock()
                    .unwrap()
                    .iter_mut()
                    .skip(1)
                    .map(Option::take)
                    .collect();
                for waiter in rest {
                    let outcome = waiter.map(|mut w| poll(&mut w, &counts));
                    if let Some(Poll::Ready(Ok(k))) = outcome {
                        held += k % SEEN_EARLY;
                    }
                    outcomes.push(outcome);
                }
                sem.add_permits(held);
                (
                    outcomes,
                    counts.wakes(),
                    sem.available_permits(),
                    sem.is_closed(),
                )
            })
        }};
    }

    /// Added to the count of a waiter that a re-entrant waker saw complete.
    const SEEN_EARLY: usize = 1000;

    /// Runs `reenter_from_a_release!` on both semaphores and checks they agree.
    macro_rules! same_as_tokio_from_a_release {
        ($reenter:expr) => {{
            let tokio =
                reenter_from_a_release!(tokio::sync::Semaphore, |s: &tokio::sync::Semaphore,
                                                                 w: &mut [Option<
                    BoxAcquire,
                >]| {
                    ($reenter)(Sem::Tokio(s), w)
                });
            let pitlane = reenter_from_a_release!(
                Semaphore,
                |s: &Semaphore, w: &mut [Option<BoxAcquire>]| { ($reenter)(Sem::Pitlane(s), w) }
            );
            assert_eq!(pitlane, tokio);
            pitlane
        }};
    }

    /// Either semaphore, for the calls a re-entrant waker makes.
    enum Sem<'a> {
        Tokio(&'a tokio::sync::Semaphore),
        Pitlane(&'a Semaphore),
    }

    impl Sem<'_> {
        fn add_permits(&self, n: usize) {
            match self {
                Sem::Tokio(s) => s.add_permits(n),
                Sem::Pitlane(s) => s.add_permits(n),
            }
        }
        fn forget_permits(&self, n: usize) -> usize {
            match self {
                Sem::Tokio(s) => s.forget_permits(n),
                Sem::Pitlane(s) => s.forget_permits(n),
            }
        }
        fn close(&self) {
            match self {
                Sem::Tokio(s) => s.close(),
                Sem::Pitlane(s) => s.close(),
            }
        }
        /// `try_acquire_many(n)`, the permit forgotten: whether it was taken.
        fn take_and_forget(&self, n: u32) -> bool {
            match self {
                Sem::Tokio(s) => s.try_acquire_many(n).map(|p| p.forget()).is_ok(),
                Sem::Pitlane(s) => s.try_acquire_many(n).map(|p| p.forget()).is_ok(),
            }
        }
    }

    #[test]
    fn a_releases_first_waker_closing_the_semaphore_fails_the_rest_like_tokio() {
        let (outcomes, ..) =
            same_as_tokio_from_a_release!(|s: Sem<'_>, _: &mut [Option<BoxAcquire>]| s.close());
        assert!(
            outcomes
                .iter()
                .skip(1)
                .all(|o| *o == Some(Poll::Ready(Err(()))))
        );
    }

    #[test]
    fn a_releases_first_waker_adding_and_forgetting_permits_like_tokio() {
        same_as_tokio_from_a_release!(|s: Sem<'_>, _: &mut [Option<BoxAcquire>]| {
            s.add_permits(3);
            assert_eq!(
                s.forget_permits(usize::MAX),
                0,
                "waiters wait: nothing free"
            );
            assert!(s.take_and_forget(0), "zero permits are always there");
            assert!(!s.take_and_forget(1), "waiters wait: no barging");
        });
    }

    #[test]
    fn a_releases_first_waker_cancelling_waiters_of_both_batches_like_tokio() {
        // Drops a waiter of the first batch (served, not polled: its permits go back) and the
        // first of the next (not yet given anything), then one further on.
        same_as_tokio_from_a_release!(|_: Sem<'_>, w: &mut [Option<BoxAcquire>]| {
            let batch = pitlane_wait::queue::WAKE_BATCH;
            drop(w[2].take());
            drop(w[batch].take());
            drop(w[batch + 2].take());
        });
    }

    #[test]
    fn a_releases_first_waker_polling_waiters_of_both_batches_like_tokio() {
        let (outcomes, ..) =
            same_as_tokio_from_a_release!(|_: Sem<'_>, w: &mut [Option<BoxAcquire>]| {
                let batch = pitlane_wait::queue::WAKE_BATCH;
                let counts = CountingWaker::new();
                for i in [1, batch - 1, batch, batch + 2] {
                    if let Poll::Ready(r) = poll(w[i].as_mut().unwrap(), &counts) {
                        // Marked as seen ready from the waker (not polled again after).
                        w[i] = Some(Box::pin(std::future::ready(r.map(|k| k + SEEN_EARLY))));
                    }
                }
            });
        let batch = pitlane_wait::queue::WAKE_BATCH;
        for (i, outcome) in outcomes.iter().enumerate() {
            let seen_early = [1, batch - 1].contains(&i);
            let Some(Poll::Ready(Ok(k))) = outcome else {
                panic!("waiter {i}: {outcome:?}")
            };
            assert_eq!(*k >= SEEN_EARLY, seen_early, "waiter {i}: {k}");
        }
    }

    /// Runs `f`, turning a panic into its message.
    fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
        catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
            pitlane_testkit::panics::message(&*payload)
                .unwrap_or("<not a string>")
                .to_owned()
        })
    }

    /// Permit counts at their limits, on either semaphore: a waiter holding part of its
    /// permits when a release brings the free permits to exactly `MAX_PERMITS`, one more
    /// permit then, the waiter's permits given back on a full semaphore, `forget_permits`
    /// while a waiter holds part, and an acquire of `u32::MAX` permits (or `MAX_PERMITS`)
    /// served in parts.
    /// Returns a log of every result and count.
    macro_rules! at_the_limits {
        ($sem:ty) => {{
            let max = <$sem>::MAX_PERMITS;
            let mut log = Vec::new();
            let counts = CountingWaker::new();
            let sem = Arc::new(<$sem>::new(0));
            let mut a = acquire!(sem, 10);
            log.push(format!("{:?}", poll(&mut a, &counts)));
            sem.add_permits(4); // a holds 4, lacks 6
            log.push(format!("forgot {}", sem.forget_permits(usize::MAX)));
            sem.add_permits(max); // 6 to a, max - 6 free
            log.push(format!(
                "free {} (max - {})",
                sem.available_permits(),
                max - sem.available_permits()
            ));
            log.push(format!("{:?}", poll(&mut a, &counts)));
            sem.add_permits(6); // exactly max free
            log.push(format!("free {}", sem.available_permits() == max));
            // One more panics on both (tokio's is left holding it: not used after).
            log.push(format!("{:?}", guarded(|| sem.add_permits(1))));
            // Permits given back to a full semaphore: the permit's drop panics on both.
            let full = Arc::new(<$sem>::new(max));
            let five = full.clone().try_acquire_many_owned(5).unwrap();
            full.add_permits(5);
            log.push(format!("{:?}", guarded(|| drop(five))));
            // An acquire of u32::MAX permits (MAX_PERMITS where `usize` is 32 bits: more
            // panics there, on both), served in parts.
            let big_n = u32::try_from(max).unwrap_or(u32::MAX);
            let sem = Arc::new(<$sem>::new(1));
            let mut big = acquire!(sem, big_n);
            log.push(format!("{:?}", poll(&mut big, &counts)));
            sem.add_permits(big_n as usize - 2);
            log.push(format!(
                "{:?} free {}",
                poll(&mut big, &counts),
                sem.available_permits()
            ));
            log.push(format!("forgot {}", sem.forget_permits(usize::MAX)));
            sem.add_permits(2);
            log.push(format!(
                "{:?} free {}",
                poll(&mut big, &counts),
                sem.available_permits()
            ));
            log.push(format!("wakes {}", counts.wakes()));
            log
        }};
    }

    #[test]
    fn permit_counts_at_their_limits_behave_as_tokios() {
        let tokio = at_the_limits!(tokio::sync::Semaphore);
        let pitlane = at_the_limits!(Semaphore);
        assert_eq!(pitlane, tokio);
        assert_eq!(
            tokio[2],
            format!("free {} (max - 6)", Semaphore::MAX_PERMITS - 6)
        );
    }

    /// Waiters served and then dropped before they are polled (some after a `close`), one
    /// cancelled with part of its permits from inside a served waiter's `wake`, and a
    /// completed acquire polled again: the free permits after each step, and the panic of the
    /// last poll.
    macro_rules! served_then_dropped {
        ($sem:ty) => {{
            let mut log = Vec::new();
            let counts = CountingWaker::new();
            let sem = Arc::new(<$sem>::new(0));
            let mut a = acquire!(sem, 2);
            let mut b = acquire!(sem, 3);
            let c_slot: Arc<Mutex<Option<BoxAcquire>>> = Arc::default();
            let mut c = acquire!(sem, 4);
            log.push(format!("{:?}", poll(&mut a, &counts)));
            // b's waker cancels c (which will hold part of its permits by then).
            let cancels_c = {
                let c_slot = c_slot.clone();
                on_wake(move || drop(c_slot.lock().unwrap().take()))
            };
            log.push(format!("{:?}", poll_with(&mut b, &cancels_c)));
            log.push(format!("{:?}", poll(&mut c, &counts)));
            *c_slot.lock().unwrap() = Some(c);
            drop(cancels_c);
            sem.add_permits(6); // a: 2, b: 3, c: 1 of 4 (given back by b's waker)
            log.push(format!(
                "free {} closed {}",
                sem.available_permits(),
                sem.is_closed()
            ));
            drop(a); // served, never polled: its 2 go back
            log.push(format!("free {}", sem.available_permits()));
            log.push(format!("{:?}", poll(&mut b, &counts))); // its 3 forgotten
            let mut d = acquire!(sem, 5);
            let mut e = acquire!(sem, 1);
            log.push(format!("{:?}", poll(&mut d, &counts))); // takes 3, lacks 2
            log.push(format!("{:?}", poll(&mut e, &counts)));
            sem.add_permits(3); // d: 2, e: 1
            sem.close();
            drop(d); // served before the close, never polled: its 5 go back
            log.push(format!(
                "free {} closed {}",
                sem.available_permits(),
                sem.is_closed()
            ));
            log.push(format!("{:?}", poll(&mut e, &counts))); // served, polled after the close
            log.push(format!("free {}", sem.available_permits()));
            log.push(format!("{:?}", guarded(|| poll(&mut e, &counts))));
            log.push(format!(
                "free {} wakes {} live {}",
                sem.available_permits(),
                counts.wakes(),
                counts.live()
            ));
            log
        }};
    }

    #[test]
    fn served_waiters_dropped_before_their_poll_give_back_exactly_their_permits_like_tokio() {
        let tokio = served_then_dropped!(tokio::sync::Semaphore);
        let pitlane = served_then_dropped!(Semaphore);
        assert_eq!(pitlane, tokio);
    }

    /// A waiter holding part of its permits is cancelled; the permits go to the two waiters
    /// behind it, the first of which has a waker that panics: the cancel's `drop` panics (on
    /// both, with the lock released), the second waiter's waker is dropped unwoken (tokio's
    /// wake list does the same), and both complete when polled.
    macro_rules! cancel_waking_a_panicking_waker {
        ($sem:ty) => {{
            let counts = CountingWaker::new();
            let sem = Arc::new(<$sem>::new(2));
            let mut head = acquire!(sem, 3);
            let mut b = acquire!(sem, 1);
            let mut c = acquire!(sem, 1);
            let mut log = vec![format!("{:?}", poll(&mut head, &counts))];
            let panics = on_wake(|| panic!("a waker panics"));
            log.push(format!("{:?}", poll_with(&mut b, &panics)));
            drop(panics);
            log.push(format!("{:?}", poll(&mut c, &counts)));
            log.push(format!("{:?}", guarded(move || drop(head))));
            log.push(format!(
                "free {} wakes {} live {}",
                sem.available_permits(),
                counts.wakes(),
                counts.live()
            ));
            log.push(format!(
                "{:?} {:?}",
                poll(&mut b, &counts),
                poll(&mut c, &counts)
            ));
            sem.add_permits(2);
            log.push(format!("free {}", sem.available_permits()));
            log
        }};
    }

    #[test]
    fn a_cancel_whose_pass_on_wakes_a_panicking_waker_serves_what_tokio_serves() {
        let tokio = cancel_waking_a_panicking_waker!(tokio::sync::Semaphore);
        let pitlane = cancel_waking_a_panicking_waker!(Semaphore);
        assert_eq!(pitlane, tokio);
    }

    /// A small xorshift generator, seeded per thread.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Four threads acquire 1 to 5 permits (polling by hand, some with wakers whose `clone`
    /// takes and gives back a permit and whose `wake` adds and forgets one or polls nothing,
    /// giving up after a few polls, so some are cancelled holding part of their permits),
    /// split and merge what they hold, add permits, and forget free ones (adding back later
    /// what they forgot); halfway, one closes the semaphore. At the end every acquire has
    /// finished or been dropped, every permit was given back, and the free permits are
    /// exactly the first ones plus those added less those forgotten for good.
    #[test]
    fn threads_with_reentrant_wakers_conserve_permits() {
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 2000;
        let cancelled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for round in 0..3u64 {
            let cancelled = cancelled.clone();
            let sem = Arc::new(Semaphore::new(6));
            let added = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let gone = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let sem = sem.clone();
                    let added = added.clone();
                    let gone = gone.clone();
                    let cancelled = cancelled.clone();
                    std::thread::spawn(move || {
                        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((t + 1) * (round + 7)));
                        let counts = CountingWaker::new();
                        let hostile = {
                            let s1 = sem.clone();
                            let s2 = sem.clone();
                            hook_waker(
                                &counts,
                                move || drop(s1.try_acquire()),
                                move || {
                                    // Not run on wakes by value (see `HOOK`): drops only.
                                    let _ = s2.available_permits();
                                },
                            )
                        };
                        let waking = {
                            let sem = sem.clone();
                            let added = added.clone();
                            let gone = gone.clone();
                            on_wake(move || {
                                sem.add_permits(1);
                                added.fetch_add(1, Ordering::SeqCst);
                                let forgot = sem.forget_permits(1);
                                gone.fetch_add(forgot, Ordering::SeqCst);
                            })
                        };
                        let mut held = Vec::new();
                        for i in 0..ROUNDS {
                            if t == 0 && i == ROUNDS / 2 && round == 2 {
                                sem.close();
                            }
                            match rng.below(8) {
                                0..=3 => {
                                    let n = 1 + rng.below(5) as u32;
                                    let mut a = Box::pin(sem.acquire_many(n));
                                    let waker = match rng.below(3) {
                                        0 => hostile.clone(),
                                        1 => waking.clone(),
                                        _ => counts.waker(),
                                    };
                                    let mut pending = true;
                                    for _ in 0..1 + rng.below(20) {
                                        pending = false;
                                        match a.as_mut().poll(&mut Context::from_waker(&waker)) {
                                            Poll::Ready(Ok(p)) => {
                                                assert_eq!(p.num_permits(), n as usize);
                                                held.push(p);
                                                break;
                                            }
                                            Poll::Ready(Err(_)) => {
                                                assert!(sem.is_closed());
                                                break;
                                            }
                                            Poll::Pending => {
                                                pending = true;
                                                std::thread::yield_now();
                                            }
                                        }
                                    }
                                    if pending {
                                        cancelled.fetch_add(1, Ordering::SeqCst);
                                    }
                                }
                                4 => {
                                    if held.len() >= 2 {
                                        let other = held.pop().unwrap();
                                        held.last_mut().unwrap().merge(other);
                                    } else if let Some(p) = held.last_mut() {
                                        let k = rng.below(p.num_permits() as u64 + 1) as usize;
                                        let part = p.split(k).unwrap();
                                        held.push(part);
                                    }
                                }
                                5 => {
                                    let k = rng.below(3) as usize;
                                    sem.add_permits(k);
                                    added.fetch_add(k, Ordering::SeqCst);
                                }
                                6 => {
                                    let forgot = sem.forget_permits(rng.below(3) as usize);
                                    std::thread::yield_now();
                                    // Given back, but counted apart (a release, not the permits).
                                    sem.add_permits(forgot);
                                }
                                _ => {
                                    if !held.is_empty() {
                                        let k = rng.below(held.len() as u64) as usize;
                                        drop(held.swap_remove(k));
                                    }
                                }
                            }
                        }
                        drop(held);
                    })
                })
                .collect();
            for handle in handles {
                handle.join().unwrap();
            }
            let expected = 6 + added.load(Ordering::SeqCst) - gone.load(Ordering::SeqCst);
            assert_eq!(sem.available_permits(), expected, "round {round}");
            assert_eq!(sem.is_closed(), round == 2);
            if round < 2 {
                let all = sem.try_acquire_many(expected as u32).unwrap();
                assert_eq!(all.num_permits(), expected);
            }
        }
        assert!(
            cancelled.load(Ordering::SeqCst) > 0,
            "no acquire was cancelled waiting"
        );
    }

    /// The same waiters (none holding a permit) failed by a `close` that drains them in batches, waking the first batch with
    /// its lock released; the first waiter's waker cancels waiters of both batches, polls
    /// others, adds permits and closes again. tokio's `close` also wakes in batches with its
    /// lock released, taking a waiter only when its batch has room.
    macro_rules! same_as_tokio_from_a_close {
        ($reenter:expr) => {{
            let tokio = reenter_from_a_release!(
                tokio::sync::Semaphore,
                |s: &tokio::sync::Semaphore, w: &mut [Option<BoxAcquire>]| {
                    ($reenter)(Sem::Tokio(s), w)
                },
                |s: &tokio::sync::Semaphore, _| { s.close() }
            );
            let pitlane = reenter_from_a_release!(
                Semaphore,
                |s: &Semaphore, w: &mut [Option<BoxAcquire>]| { ($reenter)(Sem::Pitlane(s), w) },
                |s: &Semaphore, _| { s.close() }
            );
            assert_eq!(pitlane, tokio);
            pitlane
        }};
    }

    #[test]
    fn a_closes_first_waker_cancelling_polling_and_adding_like_tokio() {
        let (outcomes, _, free, closed) =
            same_as_tokio_from_a_close!(|s: Sem<'_>, w: &mut [Option<BoxAcquire>]| {
                let batch = pitlane_wait::queue::WAKE_BATCH;
                drop(w[2].take());
                drop(w[batch].take());
                let counts = CountingWaker::new();
                for i in [1, batch - 1, batch + 1] {
                    if let Poll::Ready(r) = poll(w[i].as_mut().unwrap(), &counts) {
                        w[i] = Some(Box::pin(std::future::ready(r.map(|k| k + SEEN_EARLY))));
                    }
                }
                s.add_permits(2);
                s.close();
                assert!(!s.take_and_forget(1), "closed");
            });
        assert!(closed);
        assert_eq!(free, 2, "the added permits; none was given to a waiter");
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, None | Some(Poll::Ready(Err(())))))
        );
    }
}
