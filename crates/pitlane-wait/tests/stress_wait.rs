//! Stress: thousands of tasks on a multi-thread tokio runtime acquire, hold, cancel and
//! release semaphore permits, and wait on a Notify. Checks that permits are conserved (never
//! more held than exist, all back at the end), that mutual exclusion of the held permits
//! holds, and that no task is left waiting (every task finishes before a deadline).
//!
//! The test names start with `on_tokio_runtime_`: the ThreadSanitizer step of CI skips them,
//! because tokio's runtime parks its workers in the standard library's mutex and condition
//! variable, which that step's uninstrumented `std` hides from the sanitizer (it reports
//! races inside tokio's blocking pool). `stress_threads.rs` covers the same operations on
//! threads the sanitizer sees.
#![cfg(not(pitlane_loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pitlane_wait::{Notify, Semaphore};

/// Tasks per test (fewer in debug builds).
fn tasks() -> usize {
    if cfg!(debug_assertions) { 2_000 } else { 5_000 }
}

/// A stalled task (a lost wake-up) fails the test instead of hanging it.
const DEADLINE: Duration = Duration::from_secs(120);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn on_tokio_runtime_semaphore_permits_are_conserved_through_acquire_cancel_and_release() {
    const PERMITS: usize = 8;
    runtime().block_on(async {
        let semaphore = Arc::new(Semaphore::new(PERMITS));
        let in_use = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..tasks())
            .map(|i| {
                let semaphore = semaphore.clone();
                let in_use = in_use.clone();
                let served = served.clone();
                tokio::spawn(async move {
                    let n = 1 + (i % 3) as u32;
                    let acquire = semaphore.acquire_many(n);
                    let permit = if i % 4 == 0 {
                        // Cancelled if not served at once (partial permits must go on).
                        tokio::select! {
                            biased;
                            permit = acquire => permit.unwrap(),
                            () = tokio::task::yield_now() => return,
                        }
                    } else {
                        acquire.await.unwrap()
                    };
                    let now = in_use.fetch_add(n as usize, Ordering::SeqCst) + n as usize;
                    assert!(now <= PERMITS, "{now} permits held of {PERMITS}");
                    tokio::task::yield_now().await;
                    in_use.fetch_sub(n as usize, Ordering::SeqCst);
                    served.fetch_add(1, Ordering::Relaxed);
                    if i % 7 == 0 {
                        // Split and drop in two parts.
                        let mut permit = permit;
                        let part = permit.split(1).unwrap();
                        drop(part);
                    }
                })
            })
            .collect();
        let all = async {
            for handle in handles {
                handle.await.unwrap();
            }
        };
        tokio::time::timeout(DEADLINE, all)
            .await
            .expect("a task was left waiting");
        assert_eq!(semaphore.available_permits(), PERMITS);
        assert!(served.load(Ordering::Relaxed) >= tasks() * 3 / 4);
    });
}

#[test]
fn on_tokio_runtime_close_releases_every_waiting_task() {
    runtime().block_on(async {
        let semaphore = Arc::new(Semaphore::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..tasks())
            .map(|i| {
                let semaphore = semaphore.clone();
                let failed = failed.clone();
                tokio::spawn(async move {
                    // Permits are kept (forgotten), so at most 100 tasks are served and the
                    // rest are still waiting, or not yet polled, when the semaphore closes.
                    match semaphore.acquire_many(1 + (i % 2) as u32).await {
                        Ok(permit) => permit.forget(),
                        Err(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        // Hand out a few permits while tasks queue, then close on the rest.
        for _ in 0..100 {
            semaphore.add_permits(1);
            tokio::task::yield_now().await;
        }
        semaphore.close();
        let all = async {
            for handle in handles {
                handle.await.unwrap();
            }
        };
        tokio::time::timeout(DEADLINE, all)
            .await
            .expect("a task was left waiting after close");
        assert!(failed.load(Ordering::Relaxed) >= tasks() - 100);
        assert!(semaphore.is_closed());
    });
}

#[test]
fn on_tokio_runtime_every_notify_one_wakes_exactly_one_registered_task() {
    runtime().block_on(async {
        let notify = Arc::new(Notify::new());
        let registered = Arc::new(AtomicUsize::new(0));
        let woken = Arc::new(AtomicUsize::new(0));
        let n = tasks();
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let notify = notify.clone();
                let registered = registered.clone();
                let woken = woken.clone();
                tokio::spawn(async move {
                    let mut notified = std::pin::pin!(notify.notified());
                    notified.as_mut().enable();
                    registered.fetch_add(1, Ordering::SeqCst);
                    notified.await;
                    woken.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        while registered.load(Ordering::SeqCst) < n {
            tokio::task::yield_now().await;
        }
        // Two notifying tasks, n notifications in all, half FIFO, half LIFO.
        let notifiers: Vec<_> = (0..2)
            .map(|k| {
                let notify = notify.clone();
                tokio::spawn(async move {
                    for i in 0..n / 2 {
                        if (i + k) % 2 == 0 {
                            notify.notify_one();
                        } else {
                            notify.notify_last();
                        }
                        if i % 64 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        let all = async {
            for handle in notifiers.into_iter().chain(handles) {
                handle.await.unwrap();
            }
        };
        tokio::time::timeout(DEADLINE, all)
            .await
            .expect("a notified task was left waiting");
        assert_eq!(woken.load(Ordering::SeqCst), n);
        // Every notification went to a task: none is left over as a permit.
        let mut after = std::pin::pin!(notify.notified());
        assert!(!after.as_mut().enable());
    });
}

#[test]
fn on_tokio_runtime_notify_waiters_wakes_every_registered_task_while_others_register() {
    runtime().block_on(async {
        let notify = Arc::new(Notify::new());
        let registered = Arc::new(AtomicUsize::new(0));
        let n = tasks();
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let notify = notify.clone();
                let registered = registered.clone();
                tokio::spawn(async move {
                    // Created before it counts as registered: the broadcast must reach it.
                    let notified = notify.notified();
                    registered.fetch_add(1, Ordering::SeqCst);
                    notified.await;
                    // Wait again: a second broadcast, sent once all are back, must reach this.
                    let again = notify.notified();
                    registered.fetch_add(1, Ordering::SeqCst);
                    again.await;
                })
            })
            .collect();
        while registered.load(Ordering::SeqCst) < n {
            tokio::task::yield_now().await;
        }
        notify.notify_waiters();
        while registered.load(Ordering::SeqCst) < 2 * n {
            tokio::task::yield_now().await;
        }
        notify.notify_waiters();
        let all = async {
            for handle in handles {
                handle.await.unwrap();
            }
        };
        tokio::time::timeout(DEADLINE, all)
            .await
            .expect("a task missed a broadcast");
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
