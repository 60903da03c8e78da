//! Compile-time checks of the auto traits and the variance of the crate's public types (built
//! only for doctests; the positive checks are in `tests/auto_traits.rs`).
//!
//! Each `compile_fail` example has a sibling just after it that compiles: the same code with
//! the one change that should make it pass, so that a typo cannot make the failing one pass
//! for the wrong reason.
//!
//! # The cell shim is an `UnsafeCell`: not `Sync`, invariant
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_sync::shim::cell::UnsafeCell<u8>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_sync::shim::cell::UnsafeCell<u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_sync::shim::cell::UnsafeCell<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_sync::shim::cell::UnsafeCell<std::sync::Arc<u8>>>();
//! ```
//!
//! ```compile_fail
//! use pitlane_sync::shim::cell::UnsafeCell;
//! fn shorten<'a, 'b>(cell: &'b UnsafeCell<&'static str>) -> &'b UnsafeCell<&'a str> {
//!     cell
//! }
//! ```
//!
//! ```
//! use pitlane_sync::shim::cell::UnsafeCell;
//! fn shorten<'b>(cell: &'b UnsafeCell<&'static str>) -> &'b UnsafeCell<&'static str> {
//!     cell
//! }
//! ```
//!
//! # The spin mutexes are `lock_api` mutexes: invariant, `Sync` for `Send` data
//!
//! ```compile_fail
//! use pitlane_sync::spin::TasMutex;
//! fn shorten<'a, 'b>(mutex: &'b TasMutex<&'static str>) -> &'b TasMutex<&'a str> {
//!     mutex
//! }
//! ```
//!
//! ```
//! use pitlane_sync::spin::TasMutex;
//! fn shorten<'b>(mutex: &'b TasMutex<&'static str>) -> &'b TasMutex<&'static str> {
//!     mutex
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_sync::spin::TtasMutex;
//! fn shorten<'a, 'b>(mutex: &'b TtasMutex<&'static str>) -> &'b TtasMutex<&'a str> {
//!     mutex
//! }
//! ```
//!
//! ```
//! use pitlane_sync::spin::TtasMutex;
//! fn shorten<'b>(mutex: &'b TtasMutex<&'static str>) -> &'b TtasMutex<&'static str> {
//!     mutex
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_sync::spin::TasBackoffMutex;
//! fn shorten<'a, 'b>(
//!     mutex: &'b TasBackoffMutex<&'static str>,
//! ) -> &'b TasBackoffMutex<&'a str> {
//!     mutex
//! }
//! ```
//!
//! ```
//! use pitlane_sync::spin::TasBackoffMutex;
//! fn shorten<'b>(
//!     mutex: &'b TasBackoffMutex<&'static str>,
//! ) -> &'b TasBackoffMutex<&'static str> {
//!     mutex
//! }
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_sync::spin::TtasMutex<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<pitlane_sync::spin::TtasMutex<std::cell::Cell<u8>>>();
//! ```
//!
//! A guard lends `&T`, so it is `Sync` only for `Sync` data; a spin lock may be released by
//! any thread, so it is `Send` (for `Send` data).
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_sync::spin::TtasMutexGuard<'static, std::cell::Cell<u8>>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<pitlane_sync::spin::TtasMutexGuard<'static, u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_sync::spin::TtasMutexGuard<'static, std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_sync::spin::TtasMutexGuard<'static, std::cell::Cell<u8>>>();
//! ```
