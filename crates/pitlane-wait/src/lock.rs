//! The two things a [`WaitQueue`](crate::WaitQueue) asks of its platform: a lock for removals
//! and a way to wait out an enqueuer that has swung the tail but not yet linked its node.
//!
//! - [`Lock`]: a raw mutual-exclusion lock. Every [`lock_api::RawMutex`] is one (so
//!   `parking_lot::RawMutex`, pitlane-sync's spin locks and any lock of the `lock_api`
//!   family plug in as they are); [`DefaultLock`] is `parking_lot::RawMutex` with the `std`
//!   feature and pitlane-sync's test-and-test-and-set spin lock without it (and under loom).
//! - [`Parker`]: how a lock holder waits for a lagging link, and how the enqueuer wakes it. An
//!   enqueuer links its node a few instructions after its compare-and-swap on the tail, so
//!   the wait is short unless that thread was preempted in between; `Park` (the `std`
//!   default) spins a little and then sleeps in `parking_lot_core`'s parking lot until the
//!   enqueuer, seeing the lock holder's mark on the link, unparks it (so that the preempted
//!   enqueuer can have the processor), [`Spin`] (the `no_std` default) only spins.

/// A raw lock: [`lock`](Lock::lock) until held, [`unlock`](Lock::unlock) by the holder.
///
/// # Safety
/// At most one holder at a time: `lock` does not return while the lock is held, by another
/// thread or by the caller itself (a reentrant lock is not a `Lock`: two guards of one queue
/// on one thread would let one remove, and its owner free, a node the other still reads, e.g.
/// through [`Locked::front`](crate::queue::Locked::front)). `unlock` followed by another
/// thread's `lock` must make the first holder's writes visible to the second
/// (release/acquire). The queue releases the lock on the thread that took it (its guard is
/// not `Send`). Every `lock_api::RawMutex` meets this (its own contract, on which
/// `lock_api::Mutex` hands out `&mut T`, is the same).
///
/// `lock` and `unlock` should not panic (no lock of `std`, `parking_lot` or `lock_api` does).
/// One that does breaks no memory safety, but may lose the wake-ups the guard was about to
/// give (an `unlock` that panics as a guard is dropped), or leave a drain waiting for ever on a
/// lock that stays held.
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
    ///
    /// ```
    /// use pitlane_sync::spin::RawTtas;
    /// use pitlane_wait::lock::Lock;
    ///
    /// let raw = RawTtas::new();
    /// Lock::lock(&raw);
    /// assert!(raw.is_locked());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { Lock::unlock(&raw) };
    /// ```
    fn lock(&self);

    /// Releases the lock.
    ///
    /// # Safety
    /// The calling thread holds the lock.
    ///
    /// ```
    /// use pitlane_sync::spin::RawTtas;
    /// use pitlane_wait::lock::Lock;
    ///
    /// let raw = RawTtas::new();
    /// Lock::lock(&raw);
    /// // SAFETY: this thread holds the lock.
    /// unsafe { Lock::unlock(&raw) };
    /// assert!(!raw.is_locked());
    /// ```
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
///
/// ```
/// use pitlane_wait::lock::{DefaultLock, Lock};
///
/// let lock: DefaultLock = <DefaultLock as lock_api::RawMutex>::INIT;
/// lock.lock();
/// // SAFETY: this thread holds the lock.
/// unsafe { lock.unlock() };
/// ```
#[cfg(all(feature = "std", not(pitlane_loom)))]
pub type DefaultLock = parking_lot::RawMutex;

/// The lock a queue uses unless told otherwise: pitlane-sync's test-and-test-and-set spin lock
/// without the `std` feature.
///
/// ```
/// use pitlane_wait::lock::{DefaultLock, Lock};
///
/// let lock: DefaultLock = <DefaultLock as lock_api::RawMutex>::INIT;
/// lock.lock();
/// // SAFETY: this thread holds the lock.
/// unsafe { lock.unlock() };
/// ```
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
// SAFETY: `guard` is `Some` only while the lock is held, and this crate holds it only within a
// call that borrows the lock, so a `LoomLock` that moves to another thread carries no guard.
// (Without this, `Notify` and `Semaphore` would be `!Send` under loom but `Send` in production.)
unsafe impl Send for LoomLock {}

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

/// How a lock holder waits for an enqueuer to link its node, and how the enqueuer wakes it
/// (see the module doc).
///
/// The queue's protocol: the lock holder reads the link `SPINS` times (with a spin-loop hint
/// between reads); then it marks the empty link as waited for, by a compare-and-swap, and
/// calls [`park`](Parker::park) with the link's address as the key, again and again until
/// the link is there. The enqueuer writes its link by a swap, and if that swap replaced the
/// mark, calls [`unpark`](Parker::unpark) with the same key. A parker may return from `park`
/// at any time (spuriously): the lock holder checks again.
///
/// The trait is safe to implement: a wrong parker can make a lock holder wait for ever, or
/// burn a processor, but not break the queue. `park` is only called before the lock holder
/// has changed anything, so a `park` that panics leaves the queue as it was (the lock holder
/// takes its mark back out of the link as it unwinds; tests/loom_queue.rs models that);
/// `unpark` is called after the enqueue is
/// complete, so one that panics leaves the node queued (see
/// [`WaitQueue::enqueue_or_update`](crate::WaitQueue::enqueue_or_update)). A `park` that
/// panics while a drain is finishing its nodes after another panic aborts (a panic during
/// unwinding).
///
/// ```
/// use pitlane_wait::lock::{Parker, Spin};
///
/// Spin::park(0x1000, || true); // returns after a spin hint
/// Spin::unpark(0x1000); // nothing to wake
/// ```
pub trait Parker {
    /// How many times the lock holder reads the link before it parks.
    ///
    /// ```
    /// use pitlane_wait::lock::{Park, Parker, Spin};
    ///
    /// assert_eq!(Spin::SPINS, 0); // never parks, so nothing to spin before
    /// assert!(Park::SPINS > 0);
    /// ```
    const SPINS: u32;

    /// Sleeps until [`unpark`](Parker::unpark) is called with `key`, or returns spuriously;
    /// does not sleep if `still_waiting` returns `false`. An `unpark` with `key` called after
    /// the condition `still_waiting` reads was made false is not lost between the check and
    /// the sleep: the call returns, at once or when woken.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use pitlane_wait::lock::{Park, Parker};
    ///
    /// let waiting = AtomicBool::new(true);
    /// let key = std::ptr::from_ref(&waiting).addr();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         // A wake-up may be spurious: check again after each.
    ///         while waiting.load(Ordering::Acquire) {
    ///             Park::park(key, || waiting.load(Ordering::Acquire));
    ///         }
    ///     });
    ///     waiting.store(false, Ordering::Release);
    ///     Park::unpark(key);
    /// });
    /// ```
    fn park(key: usize, still_waiting: impl FnOnce() -> bool);

    /// Wakes the thread parked with `key`, if any.
    ///
    /// ```
    /// use pitlane_wait::lock::{Park, Parker};
    ///
    /// Park::unpark(0x1000); // nobody parked there: nothing happens
    /// ```
    fn unpark(key: usize);
}

/// Never sleeps: `park` is a spin-loop hint (under loom: yields to the model), `unpark` does
/// nothing. The `no_std` default.
///
/// ```
/// use pitlane_wait::lock::{Parker, Spin};
///
/// for _ in 0..3 {
///     Spin::park(0x1000, || true);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Spin;

impl Parker for Spin {
    const SPINS: u32 = 0;

    #[inline]
    fn park(_key: usize, _still_waiting: impl FnOnce() -> bool) {
        pitlane_sync::shim::hint::spin_loop();
    }

    #[inline]
    fn unpark(_key: usize) {}
}

/// Spins a little, then sleeps in `parking_lot_core`'s parking lot (a futex or the platform's
/// equivalent) until the enqueuer unparks it: a lagging enqueuer that was preempted gets the
/// processor, and the lock holder burns none while it waits. The `std` default.
///
/// The key (the address of the link waited for, from the queue) is not parked on as it is:
/// the parking lot is shared by every `parking_lot` primitive of the process, each parking
/// on addresses of its own, so `Park` maps each key to one of 64 addresses of a private
/// static and parks there, and `unpark` wakes every thread parked on the key's
/// address (two keys may share one; a thread woken for the other key finds its link still
/// missing and parks again). So neither method, whatever key a caller gives it, wakes or
/// takes the wake-up of another primitive's thread.
///
/// `park` runs `still_waiting` before it takes any lock of the parking lot (so the closure
/// may panic, park or unpark as any code may); what keeps an `unpark` from slipping in between
/// that check and the sleep is a count of the unparks made on the key's address, read before
/// the check and compared under the parking lot's lock. This asks of the caller what the
/// trait does: the condition is made false before `unpark` is called.
///
/// ```
/// use pitlane_wait::lock::{Park, Parker};
///
/// Park::park(0x1000, || false); // nothing to wait for: returns at once
/// Park::unpark(0x1000); // nobody parked: does nothing
/// ```
#[cfg(all(feature = "std", not(pitlane_loom)))]
#[derive(Clone, Copy, Debug, Default)]
pub struct Park;

#[cfg(all(feature = "std", not(pitlane_loom)))]
use core::sync::atomic::{AtomicUsize, Ordering};

/// How many parking addresses [`Park`] maps its keys to (a power of two).
#[cfg(all(feature = "std", not(pitlane_loom)))]
const PARK_SLOTS: usize = 64;

/// What `Park` parks on: the address of each slot is a parking address no other primitive
/// parks on (they are private), and its value counts the unparks made on it, wrapping.
#[cfg(all(feature = "std", not(pitlane_loom)))]
static PARK_SLOTS_OF_KEYS: [AtomicUsize; PARK_SLOTS] = [const { AtomicUsize::new(0) }; PARK_SLOTS];

/// The parking slot of `key` (a Fibonacci hash of it into `PARK_SLOTS_OF_KEYS`).
#[cfg(all(feature = "std", not(pitlane_loom)))]
fn park_slot(key: usize) -> &'static AtomicUsize {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    // Truncated on 32-bit targets: still odd, still a fine multiplier.
    #[allow(clippy::cast_possible_truncation)]
    let mixed = key.wrapping_mul(GOLDEN as usize);
    &PARK_SLOTS_OF_KEYS[mixed >> (usize::BITS - PARK_SLOTS.trailing_zeros())]
}

#[cfg(all(feature = "std", not(pitlane_loom)))]
impl Parker for Park {
    const SPINS: u32 = 64;

    fn park(key: usize, still_waiting: impl FnOnce() -> bool) {
        let slot = park_slot(key);
        // The unparks made on the slot so far, read before the caller's condition: an
        // `unpark` that comes after the condition was made false (as the caller's protocol
        // has it) counts itself on the slot before it wakes anyone. So either this load sees
        // that count, and then (acquire, against its release) the condition reads false; or
        // the count is still to come, and then the check under the parking lot's lock below
        // sees it (no sleep) or the unpark's `unpark_all`, which takes that lock after its
        // count, finds this thread parked and wakes it.
        let unparks = slot.load(Ordering::Acquire);
        // The caller's code runs here, outside the parking lot: it may panic, or park or
        // unpark itself, as any code may.
        if !still_waiting() {
            return;
        }
        // SAFETY: `validate` is an atomic load and `before_sleep` and `timed_out` do nothing:
        // none panics or calls into the parking lot. The address is a slot of
        // `PARK_SLOTS_OF_KEYS`, which only `Park` parks on and unparks.
        unsafe {
            parking_lot_core::park(
                core::ptr::from_ref(slot).addr(),
                || slot.load(Ordering::Acquire) == unparks,
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                None,
            )
        };
    }

    fn unpark(key: usize) {
        let slot = park_slot(key);
        // Counted before the wake-up: see `park`.
        slot.fetch_add(1, Ordering::Release);
        // SAFETY: the address is a slot of `PARK_SLOTS_OF_KEYS` (as in `park`), and no
        // callback runs. Every thread parked there is woken: another key may share the slot,
        // and a thread woken for it checks its own condition before it parks again.
        unsafe {
            parking_lot_core::unpark_all(
                core::ptr::from_ref(slot).addr(),
                parking_lot_core::DEFAULT_UNPARK_TOKEN,
            )
        };
    }
}

/// The parker a queue uses unless told otherwise: [`Park`] with `std`, [`Spin`] without (and
/// under loom, where parking is modelled as yielding to the model).
///
/// ```
/// use pitlane_wait::lock::{DefaultParker, Parker};
///
/// DefaultParker::park(0x1000, || false); // nothing to wait for: returns at once
/// DefaultParker::unpark(0x1000); // nobody parked: does nothing
/// ```
#[cfg(all(feature = "std", not(pitlane_loom)))]
pub type DefaultParker = Park;

/// The parker a queue uses unless told otherwise: [`Park`] with `std`, [`Spin`] without (and
/// under loom, where parking is modelled as yielding to the model).
///
/// ```
/// use pitlane_wait::lock::{DefaultParker, Parker};
///
/// DefaultParker::park(0x1000, || false); // nothing to wait for: returns at once
/// DefaultParker::unpark(0x1000); // nobody parked: does nothing
/// ```
#[cfg(any(not(feature = "std"), pitlane_loom))]
pub type DefaultParker = Spin;
