//! The two things a [`WaitQueue`](crate::WaitQueue) asks of its platform: a lock for removals
//! and a way to wait out an enqueuer that has swung the tail but not yet linked its node.
//!
//! - [`Lock`]: a raw mutual-exclusion lock. Every [`lock_api::RawMutex`] is one (so
//!   `parking_lot::RawMutex`, pitlane-sync's spin locks and any lock of the `lock_api`
//!   family plug in as they are); [`DefaultLock`] is `parking_lot::RawMutex` with the `std`
//!   feature and pitlane-sync's test-and-test-and-set spin lock without it (and under loom).
//! - [`Parker`]: what a lock holder does while it waits for a lagging link. An enqueuer links
//!   its node a few instructions after its compare-and-swap on the tail, so the wait is short
//!   unless that thread was preempted in between; [`Yield`] (the `std` default) spins a little
//!   and then yields the processor to the OS so that the enqueuer can run, [`Spin`] (the
//!   `no_std` default) only spins.

/// A raw lock: [`lock`](Lock::lock) until held, [`unlock`](Lock::unlock) by the holder.
///
/// # Safety
/// At most one thread may hold the lock at a time, and `unlock` followed by another thread's
/// `lock` must make the first holder's writes visible to the second (release/acquire).
///
/// ```
/// use pitlane_wait::lock::Lock;
///
/// // Any `lock_api::RawMutex` is a `Lock`.
/// fn take_and_release<L: Lock>(lock: &L) {
///     lock.lock();
///     // SAFETY: this thread holds the lock.
///     unsafe { lock.unlock() };
/// }
/// take_and_release(&<parking_lot::RawMutex as lock_api::RawMutex>::INIT);
/// ```
pub unsafe trait Lock {
    /// Waits until this thread holds the lock.
    fn lock(&self);

    /// Releases the lock.
    ///
    /// # Safety
    /// The calling thread holds the lock.
    unsafe fn unlock(&self);
}

// SAFETY: `lock_api::RawMutex` promises mutual exclusion with acquire/release semantics.
unsafe impl<R: lock_api::RawMutex> Lock for R {
    #[inline]
    fn lock(&self) {
        lock_api::RawMutex::lock(self);
    }

    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: forwarded from the caller.
        unsafe { lock_api::RawMutex::unlock(self) }
    }
}

/// The lock a queue uses unless told otherwise: `parking_lot::RawMutex` (spins briefly, then
/// sleeps on a futex) with the `std` feature.
#[cfg(all(feature = "std", not(pitlane_loom)))]
pub type DefaultLock = parking_lot::RawMutex;

/// The lock a queue uses unless told otherwise: pitlane-sync's test-and-test-and-set spin lock
/// without the `std` feature.
#[cfg(all(not(feature = "std"), not(pitlane_loom)))]
pub type DefaultLock = pitlane_sync::spin::RawTtas;

/// Under loom, a lock that blocks in the model (see [`LoomLock`]).
#[cfg(pitlane_loom)]
pub type DefaultLock = LoomLock;

/// Under `cfg(pitlane_loom)` only: `loom::sync::Mutex` as a raw lock, so that a thread that
/// waits for the lock blocks in the model instead of spinning (a spinning waiter makes loom
/// explore the same spin again and again until it gives up on the branch count).
#[cfg(pitlane_loom)]
#[derive(Debug, Default)]
pub struct LoomLock {
    mutex: loom::sync::Mutex<()>,
    /// The guard of the current holder; only the holder touches it.
    guard: core::cell::UnsafeCell<Option<loom::sync::MutexGuard<'static, ()>>>,
}

#[cfg(pitlane_loom)]
// SAFETY: `guard` is only accessed by the thread that holds `mutex`.
unsafe impl Sync for LoomLock {}

#[cfg(pitlane_loom)]
// SAFETY: loom's mutex gives mutual exclusion with acquire/release semantics.
unsafe impl Lock for LoomLock {
    fn lock(&self) {
        let guard = self.mutex.lock().unwrap();
        // SAFETY: the guard borrows `self.mutex`, which outlives it: `unlock` (called by the
        // holder before the lock can go) drops it.
        let guard = unsafe {
            core::mem::transmute::<
                loom::sync::MutexGuard<'_, ()>,
                loom::sync::MutexGuard<'static, ()>,
            >(guard)
        };
        // SAFETY: we hold the mutex: nobody else touches `guard`.
        unsafe { *self.guard.get() = Some(guard) };
    }

    unsafe fn unlock(&self) {
        // SAFETY: the caller holds the mutex: nobody else touches `guard`.
        let guard = unsafe { (*self.guard.get()).take() };
        drop(guard);
    }
}

/// Builds the default lock (a `const fn` outside loom).
#[cfg(not(pitlane_loom))]
pub(crate) const fn default_lock() -> DefaultLock {
    <DefaultLock as lock_api::RawMutex>::INIT
}

#[cfg(pitlane_loom)]
pub(crate) fn default_lock() -> DefaultLock {
    LoomLock::default()
}

/// What a lock holder does, on its `attempt`-th try, while it waits for an enqueuer to link
/// its node (see the module doc).
///
/// ```
/// use pitlane_wait::lock::{Parker, Spin};
///
/// Spin::wait(0); // returns after a spin hint
/// ```
pub trait Parker {
    /// Waits a little; called with 0, 1, 2, … until the link appears.
    fn wait(attempt: u32);
}

/// Spins with the processor's spin-loop hint (under loom: yields to the model).
///
/// ```
/// use pitlane_wait::lock::{Parker, Spin};
///
/// for attempt in 0..3 {
///     Spin::wait(attempt);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Spin;

impl Parker for Spin {
    #[inline]
    fn wait(_attempt: u32) {
        pitlane_sync::shim::hint::spin_loop();
    }
}

/// Spins for the first 32 attempts, then yields the processor to the OS scheduler, so that a
/// preempted enqueuer gets to run.
///
/// ```
/// use pitlane_wait::lock::{Parker, Yield};
///
/// Yield::wait(100); // yields to the OS
/// ```
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Yield;

#[cfg(feature = "std")]
impl Parker for Yield {
    #[inline]
    fn wait(attempt: u32) {
        #[cfg(not(pitlane_loom))]
        if attempt >= 32 {
            std::thread::yield_now();
            return;
        }
        let _ = attempt;
        pitlane_sync::shim::hint::spin_loop();
    }
}

/// The parker a queue uses unless told otherwise: [`Yield`] with `std`, [`Spin`] without.
#[cfg(feature = "std")]
pub type DefaultParker = Yield;

/// The parker a queue uses unless told otherwise: [`Yield`] with `std`, [`Spin`] without.
#[cfg(not(feature = "std"))]
pub type DefaultParker = Spin;
