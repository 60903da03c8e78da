//! Stress: a plain counter incremented under each lock ends exact. A lock that let two holders
//! in at once would lose increments (and ThreadSanitizer, which CI runs this file under, would
//! report the race).
#![cfg(not(pitlane_loom))]

use std::cell::UnsafeCell;

use lock_api::RawMutex;
use pitlane_sync::spin::{RawTas, RawTasBackoff, RawTtas};
use pitlane_testkit::stress::run_threads;

const THREADS: usize = 4;
const PER_THREAD: u64 = 200_000;

struct Counter<R: RawMutex> {
    lock: R,
    /// A deliberately non-atomic counter: only the lock orders its updates.
    value: UnsafeCell<u64>,
}

// SAFETY: `value` is only touched while `lock` is held.
unsafe impl<R: RawMutex + Sync> Sync for Counter<R> {}

impl<R: RawMutex> Counter<R> {
    /// One locked increment; `try_first` takes the lock by spinning on `try_lock`.
    fn increment(&self, try_first: bool) {
        if try_first {
            while !self.lock.try_lock() {
                std::hint::spin_loop();
            }
        } else {
            self.lock.lock();
        }
        // SAFETY: the lock is held; a read-modify-write in two steps widens the window a
        // second holder would need to lose an update.
        unsafe {
            let v = std::ptr::read_volatile(self.value.get());
            std::ptr::write_volatile(self.value.get(), v + 1);
        }
        // SAFETY: this thread holds the lock.
        unsafe { self.lock.unlock() };
    }
}

fn hammer<R: RawMutex + Sync>() -> u64 {
    let counter = Counter {
        lock: R::INIT,
        value: UnsafeCell::new(0),
    };
    run_threads(THREADS, |_| {
        for i in 0..PER_THREAD {
            counter.increment(i % 7 == 0);
        }
    });
    counter.value.into_inner()
}

#[test]
fn tas_counter_is_exact() {
    assert_eq!(hammer::<RawTas>(), THREADS as u64 * PER_THREAD);
}

#[test]
fn ttas_counter_is_exact() {
    assert_eq!(hammer::<RawTtas>(), THREADS as u64 * PER_THREAD);
}

#[test]
fn backoff_counter_is_exact() {
    assert_eq!(hammer::<RawTasBackoff>(), THREADS as u64 * PER_THREAD);
}

#[test]
fn tagged_mutexes_protect_data() {
    let m = pitlane_sync::spin::TasMutex::new(Vec::new());
    run_threads(THREADS, |t| {
        for i in 0..1000 {
            m.lock().push(t * 1000 + i);
        }
    });
    let mut v = m.into_inner();
    v.sort();
    assert_eq!(v, (0..THREADS * 1000).collect::<Vec<_>>());
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
