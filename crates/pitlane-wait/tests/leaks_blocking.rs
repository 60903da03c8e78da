//! The `blocking_*` forms leave nothing behind when threads come and go: a counting global
//! allocator checks that the live allocations after hundreds of threads have each blocked
//! (and been woken by another thread, which held and woke a clone of their waker) are what
//! they were before. The thread wakers' records are freed with their last waker.
//!
//! One test in this binary, so that no other test allocates while it counts.
#![cfg(not(pitlane_loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use pitlane_wait::Semaphore;

/// `System`, counting the allocations alive.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to `System`, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(1, Ordering::SeqCst);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(1, Ordering::SeqCst);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded; a reallocation keeps the count.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `threads` threads, 8 at a time, each blocking three times: twice until the main thread
/// serves it (after seeing it queued), once on a free permit.
fn churn(threads: usize) {
    for _ in 0..threads / 8 {
        let batch: Vec<_> = (0..8)
            .map(|_| {
                let semaphore = Arc::new(Semaphore::new(1));
                let waiter = {
                    let semaphore = semaphore.clone();
                    std::thread::spawn(move || {
                        for _ in 0..2 {
                            // Takes the free permit and waits, queued, for a second one.
                            let permit = semaphore.blocking_acquire_many(2).unwrap();
                            permit.forget();
                        }
                        drop(semaphore.blocking_acquire().unwrap());
                    })
                };
                (semaphore, waiter)
            })
            .collect();
        for (semaphore, waiter) in batch {
            for _ in 0..2 {
                // The waiter took the free permit when it queued itself.
                while semaphore.available_permits() != 0 {
                    std::thread::yield_now();
                }
                // Serves it: the release takes its waker (a clone of the thread's) and wakes
                // it, and leaves one free permit for the next round (which the waiter takes
                // when it queues itself again).
                semaphore.add_permits(2);
            }
            waiter.join().unwrap();
            assert_eq!(semaphore.available_permits(), 1);
        }
    }
}

#[test]
fn thread_churn_leaves_no_waker_records_behind() {
    // Let the first threads make whatever the process keeps for good (thread-id counters,
    // the main thread's handle).
    churn(16);
    let before = LIVE.load(Ordering::SeqCst);
    churn(400);
    let after = LIVE.load(Ordering::SeqCst);
    // A record kept per thread (the old scheme leaked its record and the thread handle in
    // it) would leave hundreds of allocations here.
    assert!(
        after - before < 16,
        "{} allocations more after 400 threads blocked and exited",
        after - before
    );
}
