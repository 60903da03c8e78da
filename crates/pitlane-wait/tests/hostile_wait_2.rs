//! A second hostile pass over `Notify`, `Semaphore` and `WaitQueue`, after `adversarial.rs`
//! and `hostile_wait.rs`: waiters polled or enabled from a waker of a broadcast (or close)
//! whose drain has released its lock between batches, compared with tokio side by side where
//! tokio's behaviour is observable.
//!
//! The loom models of the paths those fixes added (a queued waiter that leaves a drain list it
//! has not been reached in, against a concurrent `notify_waiters` / `close`) are in
//! `loom_notify.rs` and `loom_semaphore.rs`.

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[cfg(not(pitlane_loom))]
mod hostile {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, Waker};

    use pitlane_testkit::wakers::{CountingWaker, on_wake};
    use pitlane_wait::queue::WAKE_BATCH;
    use pitlane_wait::{Notify, OwnedNotified, Semaphore};
    use tokio::sync::futures::OwnedNotified as TokioOwned;

    fn poll<F: Future + ?Sized>(future: Pin<&mut F>, waker: &CountingWaker) -> Poll<F::Output> {
        waker.with_context(|cx| future.poll(cx))
    }

    /// What an owned acquire returns.
    type Acquired = Result<pitlane_wait::OwnedSemaphorePermit, pitlane_wait::AcquireError>;

    /// An owned acquire, boxed.
    type BoxAcquire = Pin<Box<dyn Future<Output = Acquired> + Send>>;

    /// How many waiters: more than a batch, so that the drain releases its lock once.
    const WAITERS: usize = WAKE_BATCH + 8;

    /// What the probing waker saw: `(polled, ready)` for each probe of the last waiter.
    type Seen = Arc<Mutex<Vec<bool>>>;

    /// `notify_waiters` over `WAITERS` waiters; the first waiter's waker (woken in the first batch,
    /// with the lock released) polls the last waiter, which the broadcast's increment already
    /// covers but whose batch is not woken yet. tokio's waiter, polled while its `notify_waiters`
    /// is under way, completes (it checks the broadcast counter under the lock); ours must too.
    macro_rules! broadcast_probe {
        ($notify:expr, $fut:ty, $probe:ident) => {{
            let notify = $notify;
            let last: Arc<Mutex<Option<Pin<Box<$fut>>>>> = Arc::default();
            let seen: Seen = Arc::default();
            let w = CountingWaker::new();
            let probe_waker = {
                let last = last.clone();
                let seen = seen.clone();
                let w = w.waker();
                on_wake(move || {
                    if let Some(f) = last.lock().unwrap().as_mut() {
                        let ready = $probe(f.as_mut(), &w);
                        seen.lock().unwrap().push(ready);
                    }
                })
            };
            let mut waiters: Vec<Pin<Box<$fut>>> = (0..WAITERS)
                .map(|_| Box::pin(notify.clone().notified_owned()))
                .collect();
            assert!(
                waiters[0]
                    .as_mut()
                    .poll(&mut Context::from_waker(&probe_waker))
                    .is_pending()
            );
            for f in &mut waiters[1..] {
                assert!(poll(f.as_mut(), &w).is_pending());
            }
            *last.lock().unwrap() = waiters.pop();
            notify.notify_waiters();
            let seen = seen.lock().unwrap().clone();
            let mut last = last.lock().unwrap().take().unwrap();
            assert!(poll(last.as_mut(), &w).is_ready());
            assert!(waiters.iter_mut().all(|f| poll(f.as_mut(), &w).is_ready()));
            seen
        }};
    }

    fn poll_ready<F: Future>(f: Pin<&mut F>, w: &Waker) -> bool {
        f.poll(&mut Context::from_waker(w)).is_ready()
    }

    fn enable_pitlane(f: Pin<&mut OwnedNotified>, _: &Waker) -> bool {
        f.enable()
    }

    fn enable_tokio(f: Pin<&mut TokioOwned>, _: &Waker) -> bool {
        f.enable()
    }

    /// Regression: a queued `Notified` that a running `notify_waiters` has not reached yet (its
    /// batch comes after the lock was released to wake the first one) returned `Pending` when
    /// polled, and `false` when enabled, although the broadcast, which it must see, had begun:
    /// tokio's returns `Ready` (`true`), since it reads the broadcast counter under the lock.
    #[test]
    fn a_waiter_polled_during_a_broadcasts_later_batch_completes_like_tokio() {
        let tokio_polled =
            broadcast_probe!(Arc::new(tokio::sync::Notify::new()), TokioOwned, poll_ready);
        let tokio_enabled = broadcast_probe!(
            Arc::new(tokio::sync::Notify::new()),
            TokioOwned,
            enable_tokio
        );
        assert_eq!((tokio_polled, tokio_enabled), (vec![true], vec![true]));
        let polled = broadcast_probe!(Arc::new(Notify::new()), OwnedNotified, poll_ready);
        let enabled = broadcast_probe!(Arc::new(Notify::new()), OwnedNotified, enable_pitlane);
        assert_eq!(
            (polled, enabled),
            (vec![true], vec![true]),
            "polled / enabled while the broadcast's later batch was still queued"
        );
    }

    /// Regression: the same for `close`: an acquire drained by a running `close` but not yet
    /// reached (its batch comes after the lock was released to wake the first) returned `Pending`
    /// when polled from the first batch's waker, although the semaphore was closed; the crate's
    /// doc (and tokio's) says a drained waiter fails when next polled. (tokio's `close` wakes its
    /// waiters with its lock held, so the same probe deadlocks there: no side-by-side run.) The
    /// probed acquire gives back the part it had been given.
    #[test]
    fn an_acquire_polled_during_a_closes_later_batch_fails_at_once() {
        let sem = Arc::new(Semaphore::new(0));
        let last: Arc<Mutex<Option<BoxAcquire>>> = Arc::default();
        let seen: Arc<Mutex<Vec<(bool, bool, usize)>>> = Arc::default();
        let w = CountingWaker::new();
        let probe_waker = {
            let last = last.clone();
            let seen = seen.clone();
            let sem = sem.clone();
            let w = w.waker();
            on_wake(move || {
                if let Some(f) = last.lock().unwrap().as_mut() {
                    let polled = f.as_mut().poll(&mut Context::from_waker(&w));
                    let failed = matches!(polled, Poll::Ready(Err(_)));
                    seen.lock()
                        .unwrap()
                        .push((sem.is_closed(), failed, sem.available_permits()));
                }
            })
        };
        // The first waiter asks for 2 and gets 1 of them before the close.
        let mut waiters: Vec<BoxAcquire> = vec![Box::pin(sem.clone().acquire_many_owned(2))];
        assert!(
            waiters[0]
                .as_mut()
                .poll(&mut Context::from_waker(&probe_waker))
                .is_pending()
        );
        for _ in 1..WAITERS {
            let mut f: BoxAcquire = Box::pin(sem.clone().acquire_owned());
            assert!(poll(f.as_mut(), &w).is_pending());
            waiters.push(f);
        }
        *last.lock().unwrap() = waiters.pop();
        sem.add_permits(1); // partly serves the first
        sem.close();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![(true, true, 0)],
            "(closed, failed, free) seen by the probe"
        );
        let mut gave_back = false;
        for f in &mut waiters {
            assert!(matches!(poll(f.as_mut(), &w), Poll::Ready(Err(_))));
            gave_back = true;
        }
        assert!(gave_back);
        assert_eq!(sem.available_permits(), 1, "the first's part came back");
        drop(last.lock().unwrap().take());
        assert_eq!(sem.available_permits(), 1);
    }

    /// Threads keep polling their queued waiters while the main thread broadcasts (more than a
    /// batch of waiters, so the drain releases its lock): a waiter polled in a later batch
    /// leaves the drain list itself (the path the fix above added) while the drainer goes on.
    /// Every waiter completes, and no permit is left.
    #[test]
    fn waiters_polled_on_threads_during_a_broadcast_all_complete() {
        for _ in 0..20 {
            let notify = Arc::new(Notify::new());
            let mut groups: Vec<Vec<Pin<Box<OwnedNotified>>>> = (0..4)
                .map(|_| {
                    (0..WAKE_BATCH / 2 + 3)
                        .map(|_| {
                            let mut f = Box::pin(notify.clone().notified_owned());
                            assert!(!f.as_mut().enable());
                            f
                        })
                        .collect()
                })
                .collect();
            let started = Arc::new(std::sync::Barrier::new(groups.len() + 1));
            let handles: Vec<_> = groups
                .drain(..)
                .map(|mut group| {
                    let started = started.clone();
                    std::thread::spawn(move || {
                        let w = CountingWaker::new();
                        started.wait();
                        while !group.is_empty() {
                            group.retain_mut(|f| poll(f.as_mut(), &w).is_pending());
                        }
                    })
                })
                .collect();
            started.wait();
            notify.notify_waiters();
            for h in handles {
                h.join().unwrap();
            }
            let mut after = Box::pin(notify.notified());
            assert!(!after.as_mut().enable(), "a broadcast stored a permit");
        }
    }

    /// Threads keep polling their queued acquires while the main thread closes (more than a
    /// batch, so the drain releases its lock); the head was partly served. Every acquire fails,
    /// and the part comes back exactly once.
    #[test]
    fn acquires_polled_on_threads_during_a_close_all_fail_and_conserve_permits() {
        for _ in 0..20 {
            let sem = Arc::new(Semaphore::new(0));
            let w = CountingWaker::new();
            let mut head: BoxAcquire = Box::pin(sem.clone().acquire_many_owned(3));
            assert!(poll(head.as_mut(), &w).is_pending());
            sem.add_permits(2);
            let mut groups: Vec<Vec<BoxAcquire>> = (0..4)
                .map(|_| {
                    (0..WAKE_BATCH / 2 + 3)
                        .map(|_| {
                            let mut f: BoxAcquire = Box::pin(sem.clone().acquire_owned());
                            assert!(poll(f.as_mut(), &w).is_pending());
                            f
                        })
                        .collect()
                })
                .collect();
            groups[0].push(head);
            let started = Arc::new(std::sync::Barrier::new(groups.len() + 1));
            let handles: Vec<_> = groups
                .drain(..)
                .map(|mut group| {
                    let started = started.clone();
                    std::thread::spawn(move || {
                        let w = CountingWaker::new();
                        started.wait();
                        while !group.is_empty() {
                            group.retain_mut(|f| match poll(f.as_mut(), &w) {
                                Poll::Pending => true,
                                Poll::Ready(Err(_)) => false,
                                Poll::Ready(Ok(_)) => panic!("an acquire succeeded"),
                            });
                        }
                    })
                })
                .collect();
            started.wait();
            sem.close();
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(sem.available_permits(), 2);
        }
    }
}
