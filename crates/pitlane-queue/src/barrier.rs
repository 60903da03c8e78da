//! An asymmetric handshake: a fast side that publishes with plain stores, and a rare slow side
//! that pays for both with a process-wide memory barrier.
//!
//! The mpmc queue needs a Dekker-style handshake between a pusher and a pop that gives up
//! waiting for it: the pusher stores its cell's state and then reads a *skip* word; the pop
//! marks the skip word and then reads the cell's state. At least one of them must see the
//! other's write. Ordinarily both sides need a full fence (on x86 a locked instruction), and
//! the pusher's would stall on every push until its store reaches the cache line, which the
//! consumer is usually reading. Linux's `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` makes
//! every running thread of the process execute a full barrier (threads that are not running
//! pass one when they are scheduled), so the slow side can issue that, and the fast side needs
//! only to keep the compiler from reordering its store and its load. This is the pairing
//! behind the `membarrier` system call's own documentation, Linux's userspace RCU, and the
//! "asymmetric fences" of folly's hazard pointers.
//!
//! [`init`] decides once per process whether the handshake is available: the kernel must
//! support the private expedited command and accept the registration. Where it is not
//! (another OS, an old kernel, a sandbox that filters the call), [`asymmetric`] stays false and
//! the queue publishes with a compare-and-swap instead; the decision never changes afterwards,
//! so every thread sees the same protocol.
//!
//! Under `cfg(pitlane_loom)` the handshake is modelled with read-modify-writes on the skip
//! word from both sides (a pusher's read is a `fetch_or(0)`), which gives exactly the guarantee
//! above in the C++ memory model, so that loom checks the protocol built on it.

use pitlane_sync::shim::atomic::{AtomicUsize, Ordering};

#[cfg(not(pitlane_loom))]
mod imp {
    use core::sync::atomic::{AtomicU8, Ordering, compiler_fence};

    const UNDECIDED: u8 = 0;
    const ASYMMETRIC: u8 = 1;
    const SYMMETRIC: u8 = 2;

    /// The process's protocol; set once by [`init`], from `UNDECIDED` only.
    static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

    /// Registers the era module's fork handler once.
    #[cfg(all(target_os = "linux", feature = "std"))]
    static FORK_HANDLER: std::sync::Once = std::sync::Once::new();

    /// Decides, once per process, whether the asymmetric handshake is available.
    #[cold]
    pub(crate) fn init() {
        if MODE.load(Ordering::Acquire) != UNDECIDED {
            return;
        }
        let mode = if os::register() {
            // Before any thread can announce an era (see `era`), so that a fork child never
            // inherits announcements it cannot clear.
            #[cfg(all(target_os = "linux", feature = "std"))]
            FORK_HANDLER.call_once(crate::era::forget_other_threads_after_fork);
            ASYMMETRIC
        } else {
            SYMMETRIC
        };
        // The first decision stands; a racing thread decided the same from the same kernel.
        let _ = MODE.compare_exchange(UNDECIDED, mode, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Whether [`init`] found the process-wide barrier. A structure calls [`init`] when it is
    /// made, which happens before any thread can use it, so every user sees the final answer.
    #[inline]
    pub(crate) fn asymmetric() -> bool {
        MODE.load(Ordering::Relaxed) == ASYMMETRIC
    }

    /// The fast side's barrier: nothing at run time, only the compiler's order.
    #[inline]
    pub(crate) fn light() {
        compiler_fence(Ordering::SeqCst);
    }

    /// The slow side's barrier: a full barrier on every running thread of the process.
    /// `false` if the kernel refused it (see `os::barrier`).
    #[cold]
    pub(crate) fn heavy() -> bool {
        #[cfg(test)]
        if REFUSE_NEXT.with(|refuse| refuse.replace(false)) {
            return false;
        }
        os::barrier()
    }

    #[cfg(test)]
    std::thread_local! {
        /// Makes this thread's next [`heavy`] report a refusal, for tests of the caller's
        /// fallback.
        pub(crate) static REFUSE_NEXT: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    #[cfg(target_os = "linux")]
    mod os {
        /// `membarrier(cmd, 0, 0)`.
        fn membarrier(cmd: libc::c_int) -> libc::c_long {
            // SAFETY: the membarrier system call takes a command and two integer arguments,
            // reads and writes no user memory, and reports failure through its return value.
            unsafe {
                libc::syscall(
                    libc::SYS_membarrier,
                    cmd,
                    0 as libc::c_uint,
                    0 as libc::c_int,
                )
            }
        }

        /// Whether the kernel offers the private expedited barrier and registered us for it.
        pub(super) fn register() -> bool {
            let commands = membarrier(libc::MEMBARRIER_CMD_QUERY);
            let needed = libc::c_long::from(
                libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED
                    | libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            );
            commands >= 0
                && commands & needed == needed
                && membarrier(libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
        }

        /// The barrier; `false` if the kernel refused it. Registration is per process and
        /// survives `fork`, so a refusal after a successful `register` means something changed
        /// the rules under us (a seccomp filter installed later, say). Registering again is
        /// tried once; if that fails too the caller must do without the barrier.
        pub(super) fn barrier() -> bool {
            membarrier(libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0
                || (register() && membarrier(libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        }
    }

    #[cfg(not(target_os = "linux"))]
    mod os {
        pub(super) fn register() -> bool {
            false
        }

        pub(super) fn barrier() -> bool {
            core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
            true
        }
    }
}

#[cfg(pitlane_loom)]
mod imp {
    /// Nothing to decide under loom.
    pub(crate) fn init() {}

    /// Loom models the asymmetric protocol (see the module documentation).
    pub(crate) fn asymmetric() -> bool {
        true
    }

    pub(crate) fn light() {}

    pub(crate) fn heavy() -> bool {
        true
    }
}

#[cfg(all(test, not(pitlane_loom)))]
pub(crate) use imp::REFUSE_NEXT;
// Under loom the eras, the only users of `heavy` and `light` outside this module, give way to
// pins.
#[cfg_attr(pitlane_loom, allow(unused_imports))]
pub(crate) use imp::{asymmetric, heavy, init, light};

/// The fast side's store of `value` into `word` (Release).
///
/// Under loom it is a swap whose result is ignored: loom (0.7) lets a plain store fall between
/// the read and the write of another thread's read-modify-write on the same word (tokio-rs/loom
/// issues 254 and 389), which no real machine and no C++-model execution does, and which would
/// make the models report lost values that cannot happen. A swap has the store's effect and
/// places it wholly before or after the other thread's RMW, as the memory model requires.
#[inline]
pub(crate) fn plain_store(word: &AtomicUsize, value: usize) {
    #[cfg(not(pitlane_loom))]
    word.store(value, Ordering::Release);
    #[cfg(pitlane_loom)]
    word.swap(value, Ordering::Release);
}

/// The fast side's read of `word`, after its own store: sees the slow side's mark whenever
/// the slow side, after [`mark`], did not see that store.
#[inline]
pub(crate) fn fast_load(word: &AtomicUsize) -> usize {
    imp::light();
    #[cfg(not(pitlane_loom))]
    return word.load(Ordering::Relaxed);
    #[cfg(pitlane_loom)]
    return word.fetch_or(0, Ordering::AcqRel);
}

/// The slow side's mark: sets `bits` in `word`, then makes every thread's earlier stores
/// visible to the caller's next loads. Returns `false` if the process-wide barrier was refused
/// (see `os::barrier`): the mark is set, but a fast side that stored before it may still read
/// the word without it, so the caller must not act as if the handshake had happened.
#[cold]
#[must_use]
pub(crate) fn mark(word: &AtomicUsize, bits: usize) -> bool {
    word.fetch_or(bits, Ordering::AcqRel);
    !asymmetric() || imp::heavy()
}
