//! Loom models of the spin locks and of `TaggedIndex`.
//!
//! Run with `RUSTFLAGS="--cfg pitlane_loom" cargo test --release -p pitlane-sync --test loom_spin`.
#![cfg(pitlane_loom)]

use loom::sync::Arc;
use pitlane_sync::shim::atomic::{AtomicU32, Ordering};
use pitlane_sync::shim::cell::UnsafeCell;
use pitlane_sync::shim::thread;
use pitlane_sync::spin::{RawTas, RawTasBackoff, RawTtas};
use pitlane_sync::{Tagged, TaggedIndex};

/// A counter guarded only by the lock: loom reports any access to the cell that the lock's
/// acquire/release does not order as a data race, and the final count proves that no
/// increment was lost. The first thread tries `try_lock` once before falling back to `lock`, so
/// both entry points race.
macro_rules! mutual_exclusion {
    ($name:ident, $lock:ty, $threads:expr) => {
        #[test]
        fn $name() {
            loom::model(|| {
                let shared = Arc::new((<$lock>::new(), UnsafeCell::new(0_u32)));
                let increment = |shared: Arc<($lock, UnsafeCell<u32>)>, try_first: bool| {
                    move || {
                        if !(try_first && shared.0.try_lock()) {
                            shared.0.lock();
                        }
                        // SAFETY: the lock is held.
                        shared.1.with_mut(|c| unsafe { *c += 1 });
                        // SAFETY: this thread holds the lock.
                        unsafe { shared.0.unlock() };
                    }
                };
                // Every increment runs in a spawned thread: loom does not run a spawned thread
                // ahead of the main thread's first steps (docs/notes/loom-coverage.md).
                let workers: Vec<_> = (0..$threads)
                    .map(|i| thread::spawn(increment(shared.clone(), i == 0)))
                    .collect();
                for w in workers {
                    w.join().unwrap();
                }
                assert!(!shared.0.is_locked());
                shared.0.lock();
                // SAFETY: the lock is held.
                let total = shared.1.with(|c| unsafe { *c });
                assert_eq!(total, $threads);
                assert!(!shared.0.try_lock());
                // SAFETY: this thread holds the lock.
                unsafe { shared.0.unlock() };
            });
        }
    };
}

/// The waiting loop of `lock` itself: a waiter that arrives while the lock is held gets it once
/// the holder releases, and sees the holder's write.
macro_rules! waiter_gets_the_lock {
    ($name:ident, $lock:ty) => {
        #[test]
        fn $name() {
            loom::model(|| {
                let shared = Arc::new((<$lock>::new(), UnsafeCell::new(0_u32)));
                shared.0.lock();
                let waiter = {
                    let shared = shared.clone();
                    thread::spawn(move || {
                        shared.0.lock();
                        // SAFETY: the lock is held.
                        let seen = shared.1.with_mut(|c| unsafe {
                            *c += 1;
                            *c
                        });
                        // SAFETY: this thread holds the lock.
                        unsafe { shared.0.unlock() };
                        seen
                    })
                };
                // SAFETY: the lock is held (taken before the waiter existed).
                shared.1.with_mut(|c| unsafe { *c = 10 });
                // SAFETY: this thread holds the lock.
                unsafe { shared.0.unlock() };
                assert_eq!(waiter.join().unwrap(), 11);
            });
        }
    };
}

waiter_gets_the_lock!(tas_waiter, RawTas);
waiter_gets_the_lock!(ttas_waiter, RawTtas);
waiter_gets_the_lock!(backoff_waiter, RawTasBackoff);

mutual_exclusion!(tas_two_threads, RawTas, 2);
mutual_exclusion!(ttas_two_threads, RawTtas, 2);
mutual_exclusion!(backoff_two_threads, RawTasBackoff, 2);
/// Test-and-set attempts per thread in the three-thread models.
///
/// With two threads spinning, loom explores schedules where the spinners hand the processor
/// back and forth and the holder never runs, and stops at its branch limit. The three-thread
/// models therefore acquire with a bounded number of `try_lock` attempts (the test-and-set
/// every `lock` loop ends on), yielding in between, and count the acquisitions.
const ATTEMPTS: usize = 3;

macro_rules! bounded_mutual_exclusion {
    ($name:ident, $lock:ty, $threads:expr) => {
        #[test]
        fn $name() {
            loom::model(|| {
                let shared = Arc::new((<$lock>::new(), UnsafeCell::new(0_u32)));
                let attempt = |shared: Arc<($lock, UnsafeCell<u32>)>| {
                    move || -> u32 {
                        for _ in 0..ATTEMPTS {
                            if shared.0.try_lock() {
                                // SAFETY: the lock is held.
                                shared.1.with_mut(|c| unsafe { *c += 1 });
                                // SAFETY: this thread holds the lock.
                                unsafe { shared.0.unlock() };
                                return 1;
                            }
                            thread::yield_now();
                        }
                        0
                    }
                };
                let workers: Vec<_> = (0..$threads - 1)
                    .map(|_| thread::spawn(attempt(shared.clone())))
                    .collect();
                let mut acquired = attempt(shared.clone())();
                for w in workers {
                    acquired += w.join().unwrap();
                }
                assert!(acquired >= 1, "some thread must get a free lock");
                shared.0.lock();
                // SAFETY: the lock is held.
                let total = shared.1.with(|c| unsafe { *c });
                assert_eq!(total, acquired);
                // SAFETY: this thread holds the lock.
                unsafe { shared.0.unlock() };
            });
        }
    };
}

bounded_mutual_exclusion!(tas_three_threads, RawTas, 3);
bounded_mutual_exclusion!(ttas_three_threads, RawTtas, 3);
bounded_mutual_exclusion!(backoff_three_threads, RawTasBackoff, 3);

/// A two-entry Treiber freelist over `TaggedIndex`: two threads each pop one entry and push it
/// back; no entry is handed out twice, and both are on the list at the end.
#[test]
fn tagged_index_freelist_hands_out_each_entry_once() {
    loom::model(|| {
        struct List {
            head: TaggedIndex,
            next: [AtomicU32; 2],
            held: [AtomicU32; 2],
        }
        impl List {
            fn pop(&self) -> Option<u32> {
                let mut head = self.head.load(Ordering::Acquire);
                loop {
                    if head.is_nil() {
                        return None;
                    }
                    let next = self.next[head.index() as usize].load(Ordering::Relaxed);
                    match self.head.compare_exchange(
                        head,
                        next,
                        Ordering::Acquire,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return Some(head.index()),
                        Err(seen) => head = seen,
                    }
                }
            }
            fn push(&self, index: u32) {
                let mut head = self.head.load(Ordering::Relaxed);
                loop {
                    self.next[index as usize].store(head.index(), Ordering::Relaxed);
                    match self.head.compare_exchange(
                        head,
                        index,
                        Ordering::Release,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return,
                        Err(seen) => head = seen,
                    }
                }
            }
        }
        let list = Arc::new(List {
            head: TaggedIndex::new(0),
            next: [AtomicU32::new(1), AtomicU32::new(<Tagged>::NIL)],
            held: [AtomicU32::new(0), AtomicU32::new(0)],
        });
        let take_and_return = |list: Arc<List>| {
            move || {
                // Pop, pop again (the ABA window), push both back.
                let a = list.pop();
                if let Some(a) = a {
                    assert_eq!(list.held[a as usize].fetch_add(1, Ordering::Relaxed), 0);
                }
                let b = list.pop();
                if let Some(b) = b {
                    assert_eq!(list.held[b as usize].fetch_add(1, Ordering::Relaxed), 0);
                }
                for x in [b, a].into_iter().flatten() {
                    list.held[x as usize].fetch_sub(1, Ordering::Relaxed);
                    list.push(x);
                }
            }
        };
        let t = thread::spawn(take_and_return(list.clone()));
        take_and_return(list.clone())();
        t.join().unwrap();
        let mut seen = Vec::new();
        while let Some(i) = list.pop() {
            seen.push(i);
        }
        seen.sort();
        assert_eq!(seen, [0, 1]);
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
