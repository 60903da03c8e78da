//! The purge policy: when free memory goes back to the operating system.

use core::sync::atomic::Ordering;

use crate::large::LARGE_CACHE_BYTES;
use crate::pool::{PURGE_DELAY_MS, RETAIN_BYTES, RETAIN_MS};

/// When the allocator gives free memory back to the OS.
///
/// Free memory is of two kinds: 64 KiB pages that hold no block (*dirty*: their memory still
/// mapped and resident, ready for reuse without page faults), and freed large blocks (over
/// 16 KiB), kept whole as runs of mapped address space for later large requests.
///
/// - For `delay_ms` after it was freed, free memory is always kept.
/// - Past `delay_ms`, it is given back — a page purged with `madvise(MADV_DONTNEED)` (its
///   memory back to the OS at once, its address range still reserved), a large run
///   unmapped — until the free memory still held, of every age, is at most `retain_bytes`.
///   Large runs go oldest first, then dirty pages (in the pool's order).
/// - Past `retain_ms` (or `delay_ms` if that is longer), it is given back whatever the budget.
/// - At most `large_cache_bytes` of large runs are kept at any time (the oldest are unmapped
///   first when a new one would exceed that).
///
/// So a program that frees a lot gives all but `retain_bytes` back after `delay_ms`, and the
/// rest after `retain_ms`; one that frees and allocates again in bursts (a server between
/// requests, a loop of phases) finds up to `retain_bytes` still mapped at its next burst
/// instead of faulting it in again. `retain_bytes: 0` purges everything after `delay_ms`.
///
/// There is no background thread: the clock is checked on the allocator's slow paths (a page
/// released, a large block freed), at most every `delay_ms / 2`. A process that stops
/// allocating altogether keeps what it freed last until its next slow path or a call to
/// [`collect`](crate::collect), which gives everything back at once.
///
/// The defaults are `delay_ms` 100, `retain_bytes` 64 MiB, `retain_ms` 10 s and
/// `large_cache_bytes` 64 MiB; the environment variables `PITLANE_ALLOC_PURGE_DELAY_MS`,
/// `PITLANE_ALLOC_RETAIN_MB`, `PITLANE_ALLOC_RETAIN_MS` and `PITLANE_ALLOC_LARGE_CACHE_MB`,
/// read once at the first allocation, override them, and [`set_purge_policy`] changes them at
/// any time.
///
/// ```
/// use pitlane_alloc::{PurgePolicy, purge_policy, set_purge_policy};
///
/// let old = purge_policy();
/// set_purge_policy(PurgePolicy { delay_ms: 0, retain_bytes: 0, ..old }); // purge at every sweep
/// assert_eq!(purge_policy().delay_ms, 0);
/// set_purge_policy(old);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PurgePolicy {
    /// How long free pages and freed large mappings are kept before they go back to the OS.
    pub delay_ms: u64,
    /// The most bytes of free memory (dirty pages and large runs) kept past `delay_ms`.
    pub retain_bytes: usize,
    /// How long memory kept under `retain_bytes` is kept at most.
    pub retain_ms: u64,
    /// The most bytes of freed large mappings kept for reuse.
    pub large_cache_bytes: usize,
}

impl PurgePolicy {
    /// The default delay: 100 ms.
    ///
    /// ```
    /// use pitlane_alloc::PurgePolicy;
    ///
    /// assert_eq!(PurgePolicy::default().delay_ms, PurgePolicy::DEFAULT_DELAY_MS);
    /// ```
    pub const DEFAULT_DELAY_MS: u64 = 100;
    /// The default budget of free memory kept past the delay: 64 MiB (as much as glibc's
    /// dynamic trim threshold lets it keep at the top of its heap).
    ///
    /// ```
    /// use pitlane_alloc::PurgePolicy;
    ///
    /// // Keep twice the default budget past the delay.
    /// let policy = PurgePolicy {
    ///     retain_bytes: 2 * PurgePolicy::DEFAULT_RETAIN_BYTES,
    ///     ..PurgePolicy::default()
    /// };
    /// assert_eq!(policy.retain_bytes, 128 << 20);
    /// ```
    pub const DEFAULT_RETAIN_BYTES: usize = 64 << 20;
    /// The default longest time memory is kept under that budget: 10 s.
    ///
    /// ```
    /// use pitlane_alloc::PurgePolicy;
    ///
    /// assert_eq!(PurgePolicy::default().retain_ms, PurgePolicy::DEFAULT_RETAIN_MS);
    /// ```
    pub const DEFAULT_RETAIN_MS: u64 = 10_000;
    /// The default cache of freed large mappings: 64 MiB.
    ///
    /// ```
    /// use pitlane_alloc::PurgePolicy;
    ///
    /// let p = PurgePolicy::default();
    /// assert_eq!(p.large_cache_bytes, PurgePolicy::DEFAULT_LARGE_CACHE_BYTES);
    /// ```
    pub const DEFAULT_LARGE_CACHE_BYTES: usize = 64 << 20;
}

impl Default for PurgePolicy {
    /// The defaults: `delay_ms` 100, `retain_bytes` 64 MiB, `retain_ms` 10,000,
    /// `large_cache_bytes` 64 MiB.
    ///
    /// ```
    /// let p = pitlane_alloc::PurgePolicy::default();
    /// assert_eq!((p.delay_ms, p.large_cache_bytes), (100, 64 << 20));
    /// assert_eq!((p.retain_bytes, p.retain_ms), (64 << 20, 10_000));
    /// ```
    fn default() -> Self {
        Self {
            delay_ms: Self::DEFAULT_DELAY_MS,
            retain_bytes: Self::DEFAULT_RETAIN_BYTES,
            retain_ms: Self::DEFAULT_RETAIN_MS,
            large_cache_bytes: Self::DEFAULT_LARGE_CACHE_BYTES,
        }
    }
}

/// The purge policy in force.
///
/// ```
/// let policy = pitlane_alloc::purge_policy();
/// pitlane_alloc::set_purge_policy(policy);
/// assert_eq!(pitlane_alloc::purge_policy(), policy);
/// ```
pub fn purge_policy() -> PurgePolicy {
    PurgePolicy {
        delay_ms: PURGE_DELAY_MS.load(Ordering::Relaxed),
        retain_bytes: RETAIN_BYTES.load(Ordering::Relaxed),
        retain_ms: RETAIN_MS.load(Ordering::Relaxed),
        large_cache_bytes: LARGE_CACHE_BYTES.load(Ordering::Relaxed),
    }
}

/// Changes the purge policy for the whole process, from the next sweep on.
///
/// ```
/// let p = pitlane_alloc::purge_policy();
/// pitlane_alloc::set_purge_policy(pitlane_alloc::PurgePolicy { large_cache_bytes: 0, ..p });
/// assert_eq!(pitlane_alloc::purge_policy().large_cache_bytes, 0);
/// pitlane_alloc::set_purge_policy(p);
/// ```
pub fn set_purge_policy(policy: PurgePolicy) {
    PURGE_DELAY_MS.store(policy.delay_ms, Ordering::Relaxed);
    RETAIN_BYTES.store(policy.retain_bytes, Ordering::Relaxed);
    RETAIN_MS.store(policy.retain_ms, Ordering::Relaxed);
    LARGE_CACHE_BYTES.store(policy.large_cache_bytes, Ordering::Relaxed);
}

/// Reads the environment overrides (at initialisation; `getenv` does not allocate).
pub(crate) fn init_from_env() {
    if let Some(ms) = env_number(c"PITLANE_ALLOC_PURGE_DELAY_MS") {
        PURGE_DELAY_MS.store(ms, Ordering::Relaxed);
    }
    if let Some(mb) = env_number(c"PITLANE_ALLOC_RETAIN_MB") {
        RETAIN_BYTES.store((mb as usize).saturating_mul(1 << 20), Ordering::Relaxed);
    }
    if let Some(ms) = env_number(c"PITLANE_ALLOC_RETAIN_MS") {
        RETAIN_MS.store(ms, Ordering::Relaxed);
    }
    if let Some(mb) = env_number(c"PITLANE_ALLOC_LARGE_CACHE_MB") {
        LARGE_CACHE_BYTES.store((mb as usize).saturating_mul(1 << 20), Ordering::Relaxed);
    }
}

/// A decimal number from the environment, if the variable is set and is one.
fn env_number(name: &core::ffi::CStr) -> Option<u64> {
    // SAFETY: `name` is NUL-terminated; the result is null or a NUL-terminated string that we
    // only read right away.
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: as above.
    let bytes = unsafe { core::ffi::CStr::from_ptr(value) }.to_bytes();
    if bytes.is_empty() || bytes.len() > 18 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        bytes
            .iter()
            .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')),
    )
}

/// Gives free memory back to the OS now: the calling thread's empty pages go to the pool,
/// every free page is purged, every cached large mapping unmapped, and the heaps of exited
/// threads (and the one shared by threads in their exit) are visited — whatever the delay.
/// (Each other live thread keeps the few freed large mappings of its own stash, at most 16 of
/// at most 1 MiB each and 4 MiB in all, until it calls `collect` or exits.) If another thread
/// is sweeping meanwhile (the purge policy's pass, from one of its slow paths), `collect`
/// waits for that sweep to end and then sweeps; likewise it waits for an allocation from the
/// heap shared by exiting threads, if one is in progress, before it visits that heap.
///
/// ```
/// pitlane_alloc::collect();
/// assert_eq!(pitlane_alloc::stats().large_cached, 0);
/// ```
pub fn collect() {
    crate::heap::tidy_mine();
    crate::pool::sweep_now(crate::os::now_ms(), true);
}
