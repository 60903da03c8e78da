//! One switch between `std` and `loom`.
//!
//! Every pitlane crate takes its atomics, cells, threads and spin hints from here instead of
//! from `core::sync` directly. In a normal build these are the `core`/`std` items (the
//! [`cell::UnsafeCell`] is a zero-cost wrapper with loom's closure API); under
//! `cfg(pitlane_loom)` they are loom's, so `cargo test` with `RUSTFLAGS="--cfg pitlane_loom"`
//! model-checks the very same code.
//!
//! ```
//! use pitlane_sync::shim::atomic::{AtomicUsize, Ordering};
//! use pitlane_sync::shim::cell::UnsafeCell;
//!
//! let counter = AtomicUsize::new(0);
//! counter.fetch_add(1, Ordering::Relaxed);
//! let cell = UnsafeCell::new(5);
//! // SAFETY: no other reference to the cell's contents exists.
//! cell.with_mut(|p| unsafe { *p += counter.load(Ordering::Relaxed) });
//! assert_eq!(cell.into_inner(), 6);
//! ```

/// Atomic types and orderings.
pub mod atomic {
    #[cfg(not(pitlane_loom))]
    pub use core::sync::atomic::{
        AtomicBool, AtomicI32, AtomicIsize, AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicUsize,
        Ordering, fence,
    };
    // Targets without 64-bit atomics (32-bit microcontrollers such as `thumbv7em`,
    // `riscv32imac`) have no `AtomicU64`; what needs one (`TaggedIndex`) is left out there.
    #[cfg(all(not(pitlane_loom), target_has_atomic = "64"))]
    pub use core::sync::atomic::{AtomicI64, AtomicU64};
    #[cfg(pitlane_loom)]
    pub use loom::sync::atomic::{
        AtomicBool, AtomicI32, AtomicI64, AtomicIsize, AtomicPtr, AtomicU8, AtomicU16, AtomicU32,
        AtomicU64, AtomicUsize, Ordering, fence,
    };
}

/// `Arc`, so that loom can track reference counts in models.
#[cfg(any(feature = "std", pitlane_loom))]
pub mod sync {
    #[cfg(pitlane_loom)]
    pub use loom::sync::Arc;
    #[cfg(not(pitlane_loom))]
    pub use std::sync::Arc;
}

/// Threads: `spawn`, `yield_now`, `JoinHandle`.
#[cfg(any(feature = "std", pitlane_loom))]
pub mod thread {
    #[cfg(pitlane_loom)]
    pub use loom::thread::{JoinHandle, spawn, yield_now};
    #[cfg(not(pitlane_loom))]
    pub use std::thread::{JoinHandle, spawn, yield_now};
}

/// The spin-wait hint. Under loom it yields, so that spin loops let the model make progress.
pub mod hint {
    #[cfg(not(pitlane_loom))]
    pub use core::hint::spin_loop;
    #[cfg(pitlane_loom)]
    pub use loom::hint::spin_loop;
}

/// An `UnsafeCell` with loom's access API.
pub mod cell {
    #[cfg(pitlane_loom)]
    pub use loom::cell::UnsafeCell;

    /// A thin wrapper over [`core::cell::UnsafeCell`] whose accessors take closures, the API
    /// of `loom::cell::UnsafeCell`, so that loom can check every access in models.
    ///
    /// ```
    /// use pitlane_sync::shim::cell::UnsafeCell;
    ///
    /// let cell = UnsafeCell::new(1_u32);
    /// // SAFETY: no other access to the cell runs meanwhile.
    /// cell.with_mut(|p| unsafe { *p += 1 });
    /// // SAFETY: as above.
    /// assert_eq!(cell.with(|p| unsafe { *p }), 2);
    /// ```
    #[cfg(not(pitlane_loom))]
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub struct UnsafeCell<T: ?Sized>(core::cell::UnsafeCell<T>);

    #[cfg(not(pitlane_loom))]
    impl<T> UnsafeCell<T> {
        /// Wraps `value`.
        ///
        /// ```
        /// let cell = pitlane_sync::shim::cell::UnsafeCell::new(5);
        /// assert_eq!(cell.into_inner(), 5);
        /// ```
        #[inline(always)]
        pub const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }

        /// Unwraps the value.
        ///
        /// ```
        /// let cell = pitlane_sync::shim::cell::UnsafeCell::new("x");
        /// assert_eq!(cell.into_inner(), "x");
        /// ```
        #[inline(always)]
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    #[cfg(not(pitlane_loom))]
    impl<T: ?Sized> UnsafeCell<T> {
        /// Calls `f` with a shared raw pointer to the contents.
        ///
        /// ```
        /// let cell = pitlane_sync::shim::cell::UnsafeCell::new(5);
        /// // SAFETY: nothing writes the cell meanwhile.
        /// assert_eq!(cell.with(|p| unsafe { *p }), 5);
        /// ```
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Calls `f` with a mutable raw pointer to the contents.
        ///
        /// ```
        /// let cell = pitlane_sync::shim::cell::UnsafeCell::new(5);
        /// // SAFETY: nothing else reads or writes the cell meanwhile.
        /// cell.with_mut(|p| unsafe { *p = 6 });
        /// assert_eq!(cell.into_inner(), 6);
        /// ```
        #[inline(always)]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}
