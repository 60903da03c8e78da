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
//!
//! Without the default `std` feature the crate is `no_std` (no `shim::sync`, no
//! `shim::thread`). On targets without 64-bit atomics (`thumbv7em`, `riscv32imac`), the shim
//! has no `AtomicU64`/`AtomicI64` and `TaggedIndex` is left out; the spin locks need atomic
//! compare-and-swap.
#![cfg_attr(not(any(feature = "std", pitlane_loom)), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(doctest)]
mod auto_traits;
pub mod shim;
pub mod spin;
pub mod tagged;

pub use tagged::Tagged;
#[cfg(any(pitlane_loom, target_has_atomic = "64"))]
pub use tagged::TaggedIndex;

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is the unit tests' global
// allocator.
#[cfg(all(test, pitlane_alloc_global))]
extern crate pitlane_alloc;
