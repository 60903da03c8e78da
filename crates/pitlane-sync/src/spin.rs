//! Test-and-set spin locks, after the "Racing to Win" talk.
//!
//! Three raw locks over one `AtomicBool`, each a [`lock_api::RawMutex`] so that
//! [`lock_api::Mutex`] gives them guards and data:
//!
//! | lock | acquire loop |
//! |---|---|
//! | [`RawTas`] | test-and-set until the flag was clear |
//! | [`RawTtas`] | test-and-set; on failure, spin on plain loads until the lock looks free, then test-and-set again |
//! | [`RawTasBackoff`] | test-and-set; on failure, wait 1, 2, 4 … up to [`MAX_BACKOFF_SPINS`] spin hints, then test-and-set again |
//!
//! The test-and-set is an `Acquire` compare-exchange of the flag from `false` to `true` (see
//! the private `test_and_set` for why not a swap).
//!
//! **Linearization points.** `lock` takes effect at the test-and-set that finds the flag
//! clear; `try_lock` at its single test-and-set; `unlock` at the `Release` store of
//! `false`. The `Acquire`/`Release` pair makes everything written inside one critical section
//! visible to the next holder.
//!
//! These locks never park a thread: a waiter burns its core until the holder releases. They
//! suit very short critical sections on threads that are not preempted; under
//! oversubscription a preempted holder stalls every waiter for a whole time slice.
//!
//! **No poisoning**, as `parking_lot`'s locks: a thread that panics while it holds a guard
//! releases the lock as the guard is dropped during unwinding, and the next holder sees the
//! data as the panicking thread left it (`std::sync::Mutex` would report it as poisoned).
//!
//! ```
//! use pitlane_sync::spin::TasMutex;
//!
//! let cell = TasMutex::new(vec![1]);
//! let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
//!     let mut held = cell.lock();
//!     held.push(2);
//!     panic!("inside the critical section");
//! }));
//! assert_eq!(*cell.lock(), [1, 2]); // released, not poisoned
//! ```
//!
//! ```
//! use pitlane_sync::spin::TtasMutex;
//!
//! let counter = TtasMutex::new(0_u64);
//! std::thread::scope(|s| {
//!     for _ in 0..2 {
//!         s.spawn(|| {
//!             for _ in 0..1000 {
//!                 *counter.lock() += 1;
//!             }
//!         });
//!     }
//! });
//! assert_eq!(*counter.lock(), 2000);
//! ```

use crate::shim::atomic::{AtomicBool, Ordering};
use crate::shim::hint::spin_loop;

/// The longest wait, in spin hints, between two attempts of [`RawTasBackoff`].
///
/// ```
/// assert!(pitlane_sync::spin::MAX_BACKOFF_SPINS.is_power_of_two());
/// ```
pub const MAX_BACKOFF_SPINS: u32 = 1 << 10;

macro_rules! raw_lock_common {
    ($name:ident) => {
        impl $name {
            /// An unlocked lock.
            ///
            /// ```
            #[doc = concat!("let lock = pitlane_sync::spin::", stringify!($name), "::new();")]
            /// assert!(!lock.is_locked());
            /// ```
            #[cfg(not(pitlane_loom))]
            pub const fn new() -> Self {
                Self {
                    locked: AtomicBool::new(false),
                }
            }

            /// An unlocked lock.
            #[cfg(pitlane_loom)]
            pub fn new() -> Self {
                Self {
                    locked: AtomicBool::new(false),
                }
            }

            /// Takes the lock if it is free, with a single test-and-set; never waits.
            ///
            /// ```
            #[doc = concat!("let lock = pitlane_sync::spin::", stringify!($name), "::new();")]
            /// assert!(lock.try_lock());
            /// assert!(!lock.try_lock()); // held
            /// // SAFETY: this thread holds the lock.
            /// unsafe { lock.unlock() };
            /// ```
            #[inline]
            pub fn try_lock(&self) -> bool {
                !self.test_and_set()
            }

            /// The atomic test-and-set: sets the flag and returns whether it was already set.
            ///
            /// Done as a compare-exchange from `false` to `true`: the same instruction class as
            /// a swap (`lock cmpxchg` against `xchg` on x86-64), but a failed attempt writes
            /// nothing. That also lets loom model it: loom 0.7 can order the holder's releasing
            /// store before a waiter's failed swap, reporting a lock that stays taken.
            #[inline(always)]
            fn test_and_set(&self) -> bool {
                self.locked
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
            }

            /// Releases the lock.
            ///
            /// # Safety
            /// The caller holds the lock (its last `lock` or successful `try_lock` has not been
            /// followed by an `unlock`).
            ///
            /// ```
            #[doc = concat!("let lock = pitlane_sync::spin::", stringify!($name), "::new();")]
            /// lock.lock();
            /// // SAFETY: this thread holds the lock.
            /// unsafe { lock.unlock() };
            /// assert!(!lock.is_locked());
            /// ```
            #[inline]
            pub unsafe fn unlock(&self) {
                self.locked.store(false, Ordering::Release);
            }

            /// Whether some thread holds the lock right now (a snapshot, for diagnostics).
            ///
            /// ```
            #[doc = concat!("let lock = pitlane_sync::spin::", stringify!($name), "::new();")]
            /// assert!(!lock.is_locked());
            /// lock.lock();
            /// assert!(lock.is_locked());
            /// # unsafe { lock.unlock() };
            /// ```
            #[inline]
            pub fn is_locked(&self) -> bool {
                self.locked.load(Ordering::Relaxed)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        // `lock_api` needs a `const INIT`, which loom's atomics cannot give; under loom the
        // inherent methods above (the same code) are what the models drive.
        #[cfg(not(pitlane_loom))]
        // SAFETY: `lock`/`try_lock` succeed only on the test-and-set that moves `locked` from false to
        // true, so at most one holder exists; `unlock` is called only by the holder.
        unsafe impl lock_api::RawMutex for $name {
            #[allow(clippy::declare_interior_mutable_const)]
            const INIT: Self = Self::new();
            type GuardMarker = lock_api::GuardSend;

            #[inline]
            fn lock(&self) {
                $name::lock(self)
            }

            #[inline]
            fn try_lock(&self) -> bool {
                $name::try_lock(self)
            }

            #[inline]
            unsafe fn unlock(&self) {
                // SAFETY: forwarded from the caller of `RawMutex::unlock`.
                unsafe { $name::unlock(self) }
            }

            #[inline]
            fn is_locked(&self) -> bool {
                $name::is_locked(self)
            }
        }
    };
}

/// Test-and-set: every attempt is an atomic read-modify-write of the flag.
///
/// The simplest lock, and the one that hurts most under contention: each waiting core keeps
/// pulling the lock's cache line in exclusive mode.
/// ```
/// use lock_api::RawMutex;
/// use pitlane_sync::spin::{RawTas, TasMutex};
///
/// let raw = RawTas::INIT; // a `lock_api::RawMutex`
/// assert!(raw.try_lock());
/// assert!(!raw.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { raw.unlock() };
/// let counter: TasMutex<u32> = TasMutex::new(0); // `lock_api::Mutex<RawTas, u32>`
/// *counter.lock() += 1;
/// assert_eq!(counter.into_inner(), 1);
/// ```
#[derive(Debug)]
pub struct RawTas {
    /// `true` while some thread holds the lock.
    locked: AtomicBool,
}

impl RawTas {
    /// Waits until the lock is taken by this thread.
    ///
    /// ```
    /// let lock = pitlane_sync::spin::RawTas::new();
    /// lock.lock();
    /// assert!(lock.is_locked());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { lock.unlock() };
    /// ```
    #[inline]
    pub fn lock(&self) {
        while self.test_and_set() {
            spin_loop();
        }
    }
}
raw_lock_common!(RawTas);

/// Test-and-test-and-set: after a failed test-and-set, wait on plain loads, which keep the cache line
/// shared until the holder's release invalidates it.
/// ```
/// use lock_api::RawMutex;
/// use pitlane_sync::spin::{RawTtas, TtasMutex};
///
/// let raw = RawTtas::INIT; // a `lock_api::RawMutex`
/// assert!(raw.try_lock());
/// assert!(!raw.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { raw.unlock() };
/// let counter: TtasMutex<u32> = TtasMutex::new(0); // `lock_api::Mutex<RawTtas, u32>`
/// *counter.lock() += 1;
/// assert_eq!(counter.into_inner(), 1);
/// ```
#[derive(Debug)]
pub struct RawTtas {
    /// `true` while some thread holds the lock.
    locked: AtomicBool,
}

impl RawTtas {
    /// Waits until the lock is taken by this thread.
    ///
    /// ```
    /// let lock = pitlane_sync::spin::RawTtas::new();
    /// lock.lock();
    /// assert!(lock.is_locked());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { lock.unlock() };
    /// ```
    #[inline]
    pub fn lock(&self) {
        if !self.test_and_set() {
            return;
        }
        self.lock_contended();
    }

    #[cold]
    fn lock_contended(&self) {
        loop {
            // Wait for the lock to look free without writing to its line.
            while self.locked.load(Ordering::Relaxed) {
                spin_loop();
            }
            if !self.test_and_set() {
                return;
            }
        }
    }
}
raw_lock_common!(RawTtas);

/// Test-and-set with bounded exponential backoff: after the k-th failed test-and-set, wait
/// `min(2^k, MAX_BACKOFF_SPINS)` spin hints before the next one.
/// ```
/// use lock_api::RawMutex;
/// use pitlane_sync::spin::{RawTasBackoff, TasBackoffMutex};
///
/// let raw = RawTasBackoff::INIT; // a `lock_api::RawMutex`
/// assert!(raw.try_lock());
/// assert!(!raw.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { raw.unlock() };
/// let counter: TasBackoffMutex<u32> = TasBackoffMutex::new(0); // `lock_api::Mutex<RawTasBackoff, u32>`
/// *counter.lock() += 1;
/// assert_eq!(counter.into_inner(), 1);
/// ```
#[derive(Debug)]
pub struct RawTasBackoff {
    /// `true` while some thread holds the lock.
    locked: AtomicBool,
}

impl RawTasBackoff {
    /// Waits until the lock is taken by this thread.
    ///
    /// ```
    /// let lock = pitlane_sync::spin::RawTasBackoff::new();
    /// lock.lock();
    /// assert!(lock.is_locked());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { lock.unlock() };
    /// ```
    #[inline]
    pub fn lock(&self) {
        if !self.test_and_set() {
            return;
        }
        self.lock_contended();
    }

    #[cold]
    fn lock_contended(&self) {
        let mut backoff = 1_u32;
        loop {
            for _ in 0..backoff {
                spin_loop();
            }
            if !self.test_and_set() {
                return;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF_SPINS);
        }
    }
}
raw_lock_common!(RawTasBackoff);

/// A mutex over [`RawTas`].
///
/// ```
/// use pitlane_sync::spin::TasMutex;
///
/// static LOG: TasMutex<Vec<&str>> = TasMutex::new(Vec::new()); // `const`
/// LOG.lock().push("first");
/// assert_eq!(LOG.lock().len(), 1);
/// ```
pub type TasMutex<T> = lock_api::Mutex<RawTas, T>;
/// The guard of a [`TasMutex`].
///
/// ```
/// use pitlane_sync::spin::{TasMutex, TasMutexGuard};
///
/// let lock = TasMutex::new(1);
/// let mut guard: TasMutexGuard<'_, i32> = lock.lock();
/// *guard += 1;
/// assert!(lock.try_lock().is_none()); // held while the guard lives
/// drop(guard);
/// assert_eq!(*lock.lock(), 2);
/// ```
pub type TasMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawTas, T>;
/// A mutex over [`RawTtas`].
///
/// ```
/// use pitlane_sync::spin::TtasMutex;
///
/// static LOG: TtasMutex<Vec<&str>> = TtasMutex::new(Vec::new()); // `const`
/// LOG.lock().push("first");
/// assert_eq!(LOG.lock().len(), 1);
/// ```
pub type TtasMutex<T> = lock_api::Mutex<RawTtas, T>;
/// The guard of a [`TtasMutex`].
///
/// ```
/// use pitlane_sync::spin::{TtasMutex, TtasMutexGuard};
///
/// let lock = TtasMutex::new(1);
/// let mut guard: TtasMutexGuard<'_, i32> = lock.lock();
/// *guard += 1;
/// assert!(lock.try_lock().is_none()); // held while the guard lives
/// drop(guard);
/// assert_eq!(*lock.lock(), 2);
/// ```
pub type TtasMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawTtas, T>;
/// A mutex over [`RawTasBackoff`].
///
/// ```
/// use pitlane_sync::spin::TasBackoffMutex;
///
/// static LOG: TasBackoffMutex<Vec<&str>> = TasBackoffMutex::new(Vec::new()); // `const`
/// LOG.lock().push("first");
/// assert_eq!(LOG.lock().len(), 1);
/// ```
pub type TasBackoffMutex<T> = lock_api::Mutex<RawTasBackoff, T>;
/// The guard of a [`TasBackoffMutex`].
///
/// ```
/// use pitlane_sync::spin::{TasBackoffMutex, TasBackoffMutexGuard};
///
/// let lock = TasBackoffMutex::new(1);
/// let mut guard: TasBackoffMutexGuard<'_, i32> = lock.lock();
/// *guard += 1;
/// assert!(lock.try_lock().is_none()); // held while the guard lives
/// drop(guard);
/// assert_eq!(*lock.lock(), 2);
/// ```
pub type TasBackoffMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawTasBackoff, T>;

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    #[test]
    fn try_lock_fails_while_held_and_succeeds_after_unlock() {
        let raw = RawTtas::new();
        assert!(raw.try_lock());
        assert!(raw.is_locked());
        assert!(!raw.try_lock());
        // SAFETY: this thread holds the lock.
        unsafe { raw.unlock() };
        assert!(!raw.is_locked());
        assert!(raw.try_lock());
    }

    #[test]
    fn mutex_aliases_guard_data() {
        let m = TasBackoffMutex::new(vec![1]);
        m.lock().push(2);
        assert!(m.try_lock().is_some());
        let g = m.lock();
        assert!(m.try_lock().is_none());
        assert_eq!(*g, vec![1, 2]);
    }
}
