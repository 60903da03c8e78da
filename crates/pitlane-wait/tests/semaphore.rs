//! Semaphore, item by item of tokio's semantics (the behaviours tokio's
//! `tests/sync_semaphore.rs` and `sync_semaphore_owned.rs` check, and the checklist in the
//! issue), polled by hand with counting wakers, on threads, and on a multi-thread runtime.
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;

use pitlane_testkit::wakers::CountingWaker;
use pitlane_wait::{
    AcquireError, OwnedSemaphorePermit, Semaphore, SemaphorePermit, TryAcquireError,
};

fn poll<F: Future>(future: Pin<&mut F>, waker: &CountingWaker) -> Poll<F::Output> {
    waker.with_context(|cx| future.poll(cx))
}

fn assert_send_sync_unpin<T: Send + Sync + Unpin>() {}
fn assert_send_sync<T: Send + Sync>(_: &T) {}

#[test]
fn types_are_send_sync_and_permits_unpin_like_tokio() {
    assert_send_sync_unpin::<Semaphore>();
    assert_send_sync_unpin::<SemaphorePermit<'static>>();
    assert_send_sync_unpin::<OwnedSemaphorePermit>();
    assert_send_sync_unpin::<AcquireError>();
    assert_send_sync_unpin::<TryAcquireError>();
    let semaphore = Arc::new(Semaphore::new(1));
    assert_send_sync(&semaphore.acquire());
    assert_send_sync(&semaphore.acquire_many(2));
    assert_send_sync(&semaphore.clone().acquire_owned());
    assert_send_sync(&semaphore.clone().acquire_many_owned(2));
}

#[test]
fn try_acquire_takes_and_drop_gives_back() {
    let semaphore = Semaphore::new(1);
    {
        let permit = semaphore.try_acquire().unwrap();
        assert_eq!(permit.num_permits(), 1);
        assert_eq!(semaphore.available_permits(), 0);
        assert_eq!(
            semaphore.try_acquire().err(),
            Some(TryAcquireError::NoPermits)
        );
    }
    assert_eq!(semaphore.available_permits(), 1);
    let many = semaphore.try_acquire_many(1).unwrap();
    assert!(semaphore.try_acquire_many(1).is_err());
    drop(many);
    assert!(semaphore.try_acquire_many(2).is_err());
    assert!(semaphore.try_acquire_many(0).is_ok());
}

#[test]
fn try_acquire_checks_closed_before_no_permits() {
    let semaphore = Semaphore::new(0);
    semaphore.close();
    assert_eq!(semaphore.try_acquire().err(), Some(TryAcquireError::Closed));
    assert_eq!(
        semaphore.try_acquire_many(5).err(),
        Some(TryAcquireError::Closed)
    );
    // (Where `usize` is 32 bits, `u32::MAX` exceeds `MAX_PERMITS` and panics, as tokio's:
    // `hostile_wait.rs`.)
    #[cfg(target_pointer_width = "64")]
    assert_eq!(
        semaphore.try_acquire_many(u32::MAX).err(),
        Some(TryAcquireError::Closed)
    );
}

#[test]
fn errors_display_and_are_errors() {
    let closed: Box<dyn std::error::Error> = Box::new(TryAcquireError::Closed);
    assert_eq!(closed.to_string(), "semaphore closed");
    assert_eq!(
        TryAcquireError::NoPermits.to_string(),
        "no permits available"
    );
    let semaphore = Semaphore::new(0);
    semaphore.close();
    let waker = CountingWaker::new();
    let mut acquire = pin!(semaphore.acquire());
    let Poll::Ready(Err(error)) = poll(acquire.as_mut(), &waker) else {
        panic!("a closed semaphore's acquire must fail at once")
    };
    let error: Box<dyn std::error::Error> = Box::new(error);
    assert_eq!(error.to_string(), "semaphore closed");
}

#[test]
fn acquire_waits_and_a_release_wakes_it() {
    let semaphore = Semaphore::new(1);
    let waker = CountingWaker::new();
    let held = semaphore.try_acquire().unwrap();
    let mut acquire = pin!(semaphore.acquire());
    assert!(poll(acquire.as_mut(), &waker).is_pending());
    drop(held);
    assert_eq!(waker.wakes(), 1);
    assert_eq!(semaphore.available_permits(), 0);
    let Poll::Ready(Ok(permit)) = poll(acquire.as_mut(), &waker) else {
        panic!("the released permit must go to the waiter")
    };
    assert_eq!(permit.num_permits(), 1);
    drop(permit);
    assert_eq!(semaphore.available_permits(), 1);
}

#[test]
fn strict_fifo_a_large_request_at_the_head_holds_back_smaller_ones() {
    let semaphore = Semaphore::new(1);
    let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
    let mut big = pin!(semaphore.acquire_many(3));
    let mut small = pin!(semaphore.acquire());
    assert!(poll(big.as_mut(), &wa).is_pending()); // took the free permit, lacks 2
    assert_eq!(semaphore.available_permits(), 0);
    assert!(poll(small.as_mut(), &wb).is_pending());
    semaphore.add_permits(1); // to the head: lacks 1 now
    assert_eq!((wa.wakes(), wb.wakes()), (0, 0));
    assert!(poll(small.as_mut(), &wb).is_pending());
    // No barging: try_acquire fails while tasks wait, even with a permit in flight.
    assert_eq!(
        semaphore.try_acquire().err(),
        Some(TryAcquireError::NoPermits)
    );
    semaphore.add_permits(2); // head served, the rest goes to the next waiter
    assert_eq!((wa.wakes(), wb.wakes()), (1, 1));
    let Poll::Ready(Ok(b)) = poll(big.as_mut(), &wa) else {
        panic!()
    };
    let Poll::Ready(Ok(s)) = poll(small.as_mut(), &wb) else {
        panic!()
    };
    assert_eq!((b.num_permits(), s.num_permits()), (3, 1));
    assert_eq!(semaphore.available_permits(), 0);
    drop((b, s));
    assert_eq!(semaphore.available_permits(), 4);
}

#[test]
fn a_cancelled_waiter_returns_its_partial_permits_to_the_next() {
    let semaphore = Semaphore::new(2);
    let (wa, wb) = (CountingWaker::new(), CountingWaker::new());
    let mut big = Box::pin(semaphore.acquire_many(5)); // takes 2, lacks 3
    assert!(poll(big.as_mut(), &wa).is_pending());
    let mut small = pin!(semaphore.acquire_many(2));
    assert!(poll(small.as_mut(), &wb).is_pending());
    semaphore.add_permits(1); // big has 3, lacks 2
    drop(big); // its 3 go on: 2 to `small`, 1 to the state
    assert_eq!(wb.wakes(), 1);
    let Poll::Ready(Ok(permit)) = poll(small.as_mut(), &wb) else {
        panic!()
    };
    assert_eq!(permit.num_permits(), 2);
    assert_eq!(semaphore.available_permits(), 1);
    assert_eq!(wa.live(), 1, "the cancelled waiter's waker was dropped");
}

#[test]
fn a_cancelled_sole_waiter_returns_its_partial_permits_to_the_semaphore() {
    let semaphore = Semaphore::new(3);
    let w = CountingWaker::new();
    let mut big = Box::pin(semaphore.acquire_many(10));
    assert!(poll(big.as_mut(), &w).is_pending());
    assert_eq!(semaphore.available_permits(), 0);
    drop(big);
    assert_eq!(semaphore.available_permits(), 3);
}

#[test]
fn a_served_waiter_dropped_before_it_returned_gives_its_permits_back() {
    let semaphore = Semaphore::new(0);
    let w = CountingWaker::new();
    let mut acquire = Box::pin(semaphore.acquire_many(2));
    assert!(poll(acquire.as_mut(), &w).is_pending());
    semaphore.add_permits(2);
    assert_eq!(w.wakes(), 1);
    drop(acquire);
    assert_eq!(semaphore.available_permits(), 2);
}

#[test]
fn an_unpolled_acquire_takes_nothing() {
    let semaphore = Semaphore::new(1);
    let acquire = semaphore.acquire();
    assert_eq!(semaphore.available_permits(), 1);
    drop(acquire);
    assert_eq!(semaphore.available_permits(), 1);
}

#[test]
fn close_fails_every_waiter_and_later_acquires() {
    let semaphore = Semaphore::new(1);
    let w = CountingWaker::new();
    let mut waiters: Vec<_> = (0..40)
        .map(|_| Box::pin(semaphore.acquire_many(2)))
        .collect();
    for waiter in &mut waiters {
        assert!(poll(waiter.as_mut(), &w).is_pending());
    }
    assert_eq!(semaphore.available_permits(), 0); // the first took the free permit
    semaphore.close();
    assert_eq!(w.wakes(), 40);
    for waiter in &mut waiters {
        assert!(matches!(
            poll(waiter.as_mut(), &w),
            Poll::Ready(Err(AcquireError { .. }))
        ));
    }
    // The first waiter's partial permit went back to the (closed) semaphore.
    assert_eq!(semaphore.available_permits(), 1);
    assert!(semaphore.is_closed());
    let mut late = pin!(semaphore.acquire());
    assert!(matches!(poll(late.as_mut(), &w), Poll::Ready(Err(_))));
    drop(waiters);
    assert_eq!(w.live(), 1);
}

#[test]
fn add_permits_works_after_close_and_forget_keeps_it_closed() {
    let semaphore = Semaphore::new(0);
    semaphore.close();
    semaphore.add_permits(5);
    assert_eq!(semaphore.available_permits(), 5);
    assert!(semaphore.is_closed());
    assert_eq!(semaphore.forget_permits(7), 5); // saturates (tokio-rs/tokio#8020)
    assert!(
        semaphore.is_closed(),
        "forget_permits reopened a closed semaphore"
    );
    assert_eq!(semaphore.available_permits(), 0);
    assert_eq!(semaphore.try_acquire().err(), Some(TryAcquireError::Closed));
}

#[test]
fn forget_permits_saturates_and_is_zero_while_tasks_wait() {
    let semaphore = Semaphore::new(4);
    assert_eq!(semaphore.forget_permits(0), 0);
    assert_eq!(semaphore.forget_permits(3), 3);
    assert_eq!(semaphore.forget_permits(usize::MAX), 1);
    assert_eq!(semaphore.forget_permits(1), 0);
    let w = CountingWaker::new();
    let mut waiter = pin!(semaphore.acquire());
    assert!(poll(waiter.as_mut(), &w).is_pending());
    assert_eq!(semaphore.forget_permits(1), 0);
}

#[test]
fn acquire_zero_completes_at_once_unless_closed() {
    let semaphore = Semaphore::new(0);
    let w = CountingWaker::new();
    let mut blocked = pin!(semaphore.acquire());
    assert!(poll(blocked.as_mut(), &w).is_pending());
    let mut zero = pin!(semaphore.acquire_many(0));
    assert!(matches!(poll(zero.as_mut(), &w), Poll::Ready(Ok(_))));
    let closed = Semaphore::new(3);
    closed.close();
    let mut zero = pin!(closed.acquire_many(0));
    assert!(matches!(poll(zero.as_mut(), &w), Poll::Ready(Err(_))));
}

#[test]
#[should_panic(expected = "a semaphore may not have more than MAX_PERMITS permits")]
fn new_past_max_permits_panics() {
    let _ = Semaphore::new(Semaphore::MAX_PERMITS + 1);
}

#[test]
fn max_permits_is_accepted() {
    let semaphore = Semaphore::new(Semaphore::MAX_PERMITS);
    assert_eq!(semaphore.available_permits(), Semaphore::MAX_PERMITS);
    assert_eq!(semaphore.forget_permits(usize::MAX), Semaphore::MAX_PERMITS);
    semaphore.add_permits(Semaphore::MAX_PERMITS);
    assert_eq!(semaphore.available_permits(), Semaphore::MAX_PERMITS);
}

#[test]
#[should_panic(expected = "would overflow MAX_PERMITS")]
fn add_permits_past_max_panics() {
    let semaphore = Semaphore::new(Semaphore::MAX_PERMITS);
    semaphore.add_permits(1);
}

#[test]
#[should_panic(expected = "cannot add more than MAX_PERMITS permits")]
fn add_more_than_max_panics() {
    Semaphore::new(0).add_permits(usize::MAX);
}

#[test]
fn add_permits_past_max_leaves_the_count_unchanged() {
    let semaphore = Semaphore::new(Semaphore::MAX_PERMITS - 1);
    let caught =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| semaphore.add_permits(2)));
    assert!(caught.is_err());
    assert_eq!(semaphore.available_permits(), Semaphore::MAX_PERMITS - 1);
}

#[test]
fn permits_merge_split_forget() {
    let semaphore = Semaphore::new(5);
    let mut permit = semaphore.try_acquire_many(2).unwrap();
    permit.merge(semaphore.try_acquire_many(3).unwrap());
    assert_eq!(permit.num_permits(), 5);
    let split = permit.split(2).unwrap();
    assert_eq!((permit.num_permits(), split.num_permits()), (3, 2));
    assert!(permit.split(4).is_none());
    assert!(permit.split(usize::MAX).is_none());
    assert_eq!(permit.num_permits(), 3);
    let zero = permit.split(0).unwrap();
    assert_eq!(zero.num_permits(), 0);
    drop(zero);
    split.forget();
    assert_eq!(semaphore.available_permits(), 0);
    drop(permit);
    assert_eq!(semaphore.available_permits(), 3);
}

#[test]
fn a_permit_names_its_semaphore_and_a_split_one_the_same() {
    // tokio's `SemaphorePermit::semaphore` (its tests/sync_semaphore.rs calls it).
    let (semaphore, other) = (Semaphore::new(3), Semaphore::new(3));
    let mut permit = semaphore.try_acquire_many(3).unwrap();
    assert!(std::ptr::eq(permit.semaphore(), &semaphore));
    assert!(!std::ptr::eq(permit.semaphore(), &other));
    let split = permit.split(1).unwrap();
    assert!(std::ptr::eq(split.semaphore(), &semaphore));
    assert_eq!(split.semaphore().available_permits(), 0);
}

#[test]
#[cfg(target_pointer_width = "64")]
fn merged_permits_may_hold_more_than_u32_max() {
    // Permit counts are `usize`, as tokio's: two `u32`-sized acquisitions merge into one
    // permit of more than `u32::MAX` (a `u32` count overflowed here, or wrapped in release
    // builds and lost permits), split back, and are all given back.
    let semaphore = Semaphore::new(6_000_000_000);
    let mut a = semaphore.try_acquire_many(3_000_000_000).unwrap();
    a.merge(semaphore.try_acquire_many(3_000_000_000).unwrap());
    assert_eq!(a.num_permits(), 6_000_000_000);
    assert_eq!(semaphore.available_permits(), 0);
    let b = a.split(5_000_000_000).unwrap();
    assert_eq!(
        (a.num_permits(), b.num_permits()),
        (1_000_000_000, 5_000_000_000)
    );
    assert!(a.split(5_000_000_000).is_none());
    drop(b);
    assert_eq!(semaphore.available_permits(), 5_000_000_000);
    drop(a);
    assert_eq!(semaphore.available_permits(), 6_000_000_000);

    let semaphore = Arc::new(semaphore);
    let mut a = semaphore
        .clone()
        .try_acquire_many_owned(3_000_000_000)
        .unwrap();
    a.merge(
        semaphore
            .clone()
            .try_acquire_many_owned(3_000_000_000)
            .unwrap(),
    );
    assert_eq!(a.num_permits(), 6_000_000_000);
    let b = a.split(4_500_000_000).unwrap();
    assert_eq!(
        (a.num_permits(), b.num_permits()),
        (1_500_000_000, 4_500_000_000)
    );
    drop(a);
    drop(b);
    assert_eq!(semaphore.available_permits(), 6_000_000_000);
}

#[test]
#[should_panic(expected = "merging permits from different semaphore instances")]
fn merging_permits_of_two_semaphores_panics() {
    let (a, b) = (Semaphore::new(1), Semaphore::new(1));
    let mut pa = a.try_acquire().unwrap();
    pa.merge(b.try_acquire().unwrap());
}

#[test]
fn owned_permits_merge_split_forget() {
    let semaphore = Arc::new(Semaphore::new(4));
    let mut permit = semaphore.clone().try_acquire_many_owned(2).unwrap();
    permit.merge(semaphore.clone().try_acquire_owned().unwrap());
    assert_eq!(permit.num_permits(), 3);
    let one = permit.split(1).unwrap();
    assert!(Arc::ptr_eq(one.semaphore(), &semaphore));
    one.forget();
    drop(permit);
    assert_eq!(semaphore.available_permits(), 3);
}

#[test]
#[should_panic(expected = "merging permits from different semaphore instances")]
fn merging_owned_permits_of_two_semaphores_panics() {
    let (a, b) = (Arc::new(Semaphore::new(1)), Arc::new(Semaphore::new(1)));
    let mut pa = a.try_acquire_owned().unwrap();
    pa.merge(b.try_acquire_owned().unwrap());
}

#[test]
fn const_new_in_a_static() {
    static SEMAPHORE: Semaphore = Semaphore::const_new(2);
    let permit = SEMAPHORE.try_acquire_many(2).unwrap();
    assert_eq!(SEMAPHORE.available_permits(), 0);
    drop(permit);
    assert_eq!(SEMAPHORE.available_permits(), 2);
}

#[test]
fn blocking_acquire_waits_for_another_thread() {
    let semaphore = Arc::new(Semaphore::new(0));
    let releaser = {
        let semaphore = semaphore.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            semaphore.add_permits(3);
        })
    };
    let permit = semaphore.blocking_acquire_many(3).unwrap();
    assert_eq!(permit.num_permits(), 3);
    releaser.join().unwrap();
    drop(permit);
    let owned = semaphore.clone().blocking_acquire_owned().unwrap();
    let many = semaphore.clone().blocking_acquire_many_owned(2).unwrap();
    assert_eq!(owned.num_permits() + many.num_permits(), 3);
    drop((owned, many));
    semaphore.close();
    assert!(semaphore.blocking_acquire().is_err());
}

#[cfg(feature = "tokio")]
#[test]
#[should_panic(expected = "Cannot block the current thread from within a runtime")]
fn blocking_acquire_inside_a_runtime_panics_like_tokio() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let semaphore = Semaphore::new(1);
        let _ = semaphore.blocking_acquire();
    });
}

#[test]
fn debug_output() {
    let semaphore = Semaphore::new(3);
    assert_eq!(
        format!("{semaphore:?}"),
        "Semaphore { permits: 3, closed: false }"
    );
    let permit = semaphore.try_acquire().unwrap();
    assert!(format!("{permit:?}").contains("permits: 1"));
}

#[test]
fn waiters_on_threads_conserve_permits() {
    let semaphore = Arc::new(Semaphore::new(3));
    let in_use = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let semaphore = semaphore.clone();
            let in_use = in_use.clone();
            std::thread::spawn(move || {
                for i in 0..500 {
                    let n = 1 + ((t + i) % 3) as u32;
                    let permit = semaphore.blocking_acquire_many(n).unwrap();
                    let now = in_use.fetch_add(n as usize, std::sync::atomic::Ordering::SeqCst);
                    assert!(now + n as usize <= 3);
                    in_use.fetch_sub(n as usize, std::sync::atomic::Ordering::SeqCst);
                    drop(permit);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(semaphore.available_permits(), 3);
}

#[test]
fn many_tasks_on_a_multi_thread_runtime_with_cancellation() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let semaphore = Arc::new(Semaphore::new(5));
        let mut tasks = Vec::new();
        for i in 0..400_u32 {
            let semaphore = semaphore.clone();
            tasks.push(tokio::spawn(async move {
                let n = 1 + i % 4;
                if i % 5 == 0 {
                    // Cancelled while (maybe) queued.
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_micros(50),
                        semaphore.acquire_many(n),
                    )
                    .await;
                } else {
                    let permit = semaphore.clone().acquire_many_owned(n).await.unwrap();
                    tokio::task::yield_now().await;
                    drop(permit);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(semaphore.available_permits(), 5);
    });
}

#[test]
fn two_single_releases_serve_a_two_permit_head_before_a_one_permit_waiter() {
    let semaphore = Semaphore::new(0);
    let w = CountingWaker::new();
    let mut big = pin!(semaphore.acquire_many(2));
    let mut small = pin!(semaphore.acquire());
    assert!(poll(big.as_mut(), &w).is_pending());
    assert!(poll(small.as_mut(), &w).is_pending());
    semaphore.add_permits(1);
    semaphore.add_permits(1);
    let Poll::Ready(Ok(permit)) = poll(big.as_mut(), &w) else {
        panic!("the head was not served")
    };
    assert!(poll(small.as_mut(), &w).is_pending());
    drop(permit); // now the small one is served
    assert!(matches!(poll(small.as_mut(), &w), Poll::Ready(Ok(_))));
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
