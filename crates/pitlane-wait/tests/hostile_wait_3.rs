//! A third hostile pass over `Notify` and `Semaphore` (after `adversarial.rs`,
//! `hostile_wait.rs` and `hostile_wait_2.rs`), each case run on tokio's types and on these
//! side by side: what a waker run while a release or a broadcast has released its lock between
//! batches can observe of the waiters the operation has not woken yet.

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[cfg(not(pitlane_loom))]
mod hostile {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use pitlane_testkit::wakers::{CountingWaker, on_wake};
    use pitlane_wait::queue::WAKE_BATCH;

    /// An acquire, boxed: `Ok(permits held)` or `Err(())` once the semaphore is closed.
    type BoxAcquire = Pin<Box<dyn Future<Output = Result<usize, ()>> + Send>>;

    fn poll(
        future: Pin<&mut (dyn Future<Output = Result<usize, ()>> + Send)>,
        waker: &CountingWaker,
    ) -> Poll<Result<usize, ()>> {
        waker.with_context(|cx| future.poll(cx))
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
            let mut fs: Vec<BoxAcquire> = (0..n)
                .map(|_| {
                    let sem = sem.clone();
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
                .collect();
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
}
