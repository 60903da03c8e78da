//! The one lock the allocator's rare paths use: pitlane-sync's test-and-test-and-set lock,
//! yielding the CPU after a short spin (a holder may be descheduled on a busy machine).

use pitlane_sync::spin::RawTtas;

/// A spin lock for the rare paths: mapping segments, the large-block cache, the heap
/// registry, the heap of exiting threads, one sweep at a time. `const`, allocation-free, and taken around `fork`.
///
/// Each lock has two cache lines to itself (the adjacent-line prefetcher moves lines in
/// pairs): the locks are statics, and the linker would otherwise place them beside other
/// statics that other threads write outside the lock (the statistics counters, which every
/// large allocation and free updates, sat on the large-block cache lock's line).
#[repr(align(128))]
pub(crate) struct SpinLock {
    raw: RawTtas,
}

/// Holds a [`SpinLock`] until dropped.
pub(crate) struct Guard<'a> {
    lock: &'a SpinLock,
}

impl SpinLock {
    pub(crate) const fn new() -> Self {
        Self {
            raw: RawTtas::new(),
        }
    }

    /// Takes the lock, spinning a little and then yielding between attempts.
    #[inline]
    pub(crate) fn lock(&self) -> Guard<'_> {
        if !self.raw.try_lock() {
            self.lock_contended();
        }
        Guard { lock: self }
    }

    /// Takes the lock if it is free; `None` if another thread (or this one, further up the
    /// stack) holds it.
    ///
    /// The guard is made only once the lock is taken: a guard built for a failed attempt
    /// (`bool::then_some(Guard { .. })`, which builds its argument either way) would be
    /// dropped at once and release the lock its holder still holds. That was how a sweep
    /// came to tidy the orphan heap while an orphan allocation was in it (`stress_purge`).
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Guard<'_>> {
        if self.raw.try_lock() {
            Some(Guard { lock: self })
        } else {
            None
        }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        while !self.raw.try_lock() {
            if spins < 64 {
                core::hint::spin_loop();
                spins += 1;
            } else {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }

    /// Takes the lock without a guard (for `fork`'s prepare handler).
    pub(crate) fn lock_raw(&self) {
        core::mem::forget(self.lock());
    }

    /// In a child after `fork`: releases the lock if a thread of the parent held it (that
    /// thread is not in the child, so nobody would ever release it).
    ///
    /// # Safety
    /// Called in the child after `fork`, on the thread that forked, which does not hold the
    /// lock, before the child's code can take it.
    pub(crate) unsafe fn release_in_child(&self) {
        if self.raw.is_locked() {
            // SAFETY: the holder was a thread of the parent, gone in the child; the caller
            // guarantees nobody in the child holds it.
            unsafe { self.raw.unlock() };
        }
    }

    /// Releases a lock taken by [`lock_raw`](Self::lock_raw).
    ///
    /// # Safety
    /// The calling thread holds the lock through `lock_raw` (or, in a child after `fork`, the
    /// parent's thread that became this one did).
    pub(crate) unsafe fn unlock_raw(&self) {
        // SAFETY: forwarded from the caller.
        unsafe { self.raw.unlock() };
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // SAFETY: the guard exists only while its thread holds the lock.
        unsafe { self.lock.raw.unlock() };
    }
}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_failed_try_lock_leaves_the_lock_held() {
        let lock = SpinLock::new();
        let held = lock.lock();
        assert!(lock.try_lock().is_none());
        // Had the failed attempt released the lock, this one would take it.
        assert!(lock.try_lock().is_none());
        assert!(lock.raw.is_locked());
        drop(held);
        assert!(!lock.raw.is_locked());
        let again = lock.try_lock();
        assert!(again.is_some());
        assert!(lock.try_lock().is_none());
        assert!(lock.raw.is_locked());
        drop(again);
        assert!(!lock.raw.is_locked());
    }

    #[test]
    fn a_failed_try_lock_from_another_thread_leaves_the_lock_held() {
        let lock = SpinLock::new();
        let held = lock.lock();
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..3 {
                    assert!(lock.try_lock().is_none());
                }
            });
        });
        assert!(lock.raw.is_locked());
        drop(held);
        assert!(!lock.raw.is_locked());
    }
}
