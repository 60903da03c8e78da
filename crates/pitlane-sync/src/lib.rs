//! The floor every pitlane crate stands on.
//!
//! - [`shim`]: atomics, an `UnsafeCell`, threads and `spin_loop`, taken from `core`/`std` in
//!   normal builds and from [`loom`](https://docs.rs/loom) when built with
//!   `RUSTFLAGS="--cfg pitlane_loom"`, so an algorithm's text is identical under model checking
//!   and in production.
//! - [`spin`]: the test-and-set family of spin locks from the "Racing to Win" talk — plain
//!   test-and-set ([`spin::RawTas`]), test-and-test-and-set ([`spin::RawTtas`]) and test-and-set
//!   with bounded exponential backoff ([`spin::RawTasBackoff`]) — as [`lock_api::RawMutex`]
//!   implementations.
//! - [`tagged`]: [`TaggedIndex`], an index and a generation packed in one `AtomicU64` (20 and
//!   44 bits unless the type says otherwise), the word an ABA-safe freelist compares and swaps.
//! - [`stress`]: POSIX threads for stress tests, so that ThreadSanitizer sees how a test
//!   hands data to its threads and back.
//!
//! Without the default feature `std` the crate is `#![no_std]`: the atomics, the cell, the
//! spin hint, the locks and [`TaggedIndex`] stay; `shim::sync`, `shim::thread` and `stress`
//! go (under loom, which needs `std` anyway, they stay).
#![cfg_attr(not(any(feature = "std", pitlane_loom, test)), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod shim;
pub mod spin;
#[cfg(all(unix, feature = "std", not(pitlane_loom)))]
pub mod stress;
pub mod tagged;

pub use tagged::{Tagged, TaggedIndex};
