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
}
