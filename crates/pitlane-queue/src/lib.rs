//! Lock-free lanes for values between threads.
//!
//! - [`spsc`]: the B-Queue single-producer single-consumer queue (Wang et al., 2013).
//! - [`weak_bag`]: the [`WeakBag`] trait — push and pop attempts that may fail transiently —
//!   spoken by the three structures below (after the Bagpipes seed).
//! - [`mpmc`]: an unbounded fetch-and-add segment queue, FIFO and linearizable (Ramalhete and
//!   Correia's FAAArrayQueue).
//! - [`stack`]: Treiber's lock-free stack, ABA-safe through generation-tagged indices.
//! - [`bagpipe`]: the Bagpipe, an array of weak bags walked in random order: scalable, never
//!   loses an item, keeps no order.
//! - [`revoke`]: taking a known item back out of any of those bags with one CAS on its cell.
//!
//! # `no_std`
//!
//! The default feature `std` brings in everything above. Without it the crate is `#![no_std]`
//! and needs only `alloc`: [`spsc`] and the error types are there, the bags (which stand on
//! an epoch collector and OS threads) are not. The target needs pointer-sized atomic
//! compare-and-swap (`target_has_atomic = "ptr"`, as `alloc::sync::Arc` does), not 64-bit
//! atomics: CI builds it so for the host and for `thumbv7em-none-eabihf` (a Cortex-M4F, with
//! no `std` and no `AtomicU64`) with `cargo clippy -p pitlane-sync -p pitlane-queue
//! --no-default-features [--target thumbv7em-none-eabihf]`. Targets with only atomic loads and
//! stores (`thumbv6m`) are not supported. (The tests cannot check the no_std build: a
//! dev-dependency, pitlane-testkit, depends on this crate with its default features, so
//! `cargo test --no-default-features` builds the crate with `std` all the same.)
#![cfg_attr(not(any(feature = "std", pitlane_loom, test)), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

extern crate alloc;

pub mod spsc;

#[cfg(doctest)]
mod auto_traits;
#[cfg(any(feature = "std", pitlane_loom))]
pub mod bagpipe;
#[cfg(any(feature = "std", pitlane_loom))]
mod barrier;
#[cfg(all(feature = "std", not(pitlane_loom)))]
mod era;
mod error;
#[cfg(any(feature = "std", pitlane_loom))]
pub mod mpmc;
#[cfg(any(feature = "std", pitlane_loom))]
pub mod revoke;
#[cfg(any(feature = "std", pitlane_loom))]
mod seat;
#[cfg(any(feature = "std", pitlane_loom))]
mod slot;
#[cfg(any(feature = "std", pitlane_loom))]
pub mod stack;
#[cfg(any(feature = "std", pitlane_loom))]
pub mod weak_bag;

pub use error::{PopError, PushError};
#[cfg(any(feature = "std", pitlane_loom))]
pub use weak_bag::{BagHandle, WeakBag};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is the unit tests' global
// allocator.
#[cfg(all(test, pitlane_alloc_global))]
extern crate pitlane_alloc;
