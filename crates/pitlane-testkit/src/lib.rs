//! What pitlane's tests and benchmark suites share, kept out of the crates users depend on.
//!
//! This crate is never published and never a dependency of a product: the products take it as
//! a dev-dependency for their tests, and `pitlane-bench` uses it for its suites.
//!
//! - [`stress`]: POSIX threads for stress tests, so that ThreadSanitizer sees how a test hands
//!   data to its threads and back (and for threads in a forked child: see [`child`]).
//! - [`child`]: waiting for a forked child, or for a re-run of the test binary, with a
//!   deadline.
//! - [`drops`]: values that count their drops.
//! - [`memory`]: the process's address space, and a limit on it (Linux).
//! - [`pages`]: revocable pages for the revocation tests of the bags.
//! - [`panics`]: the message of a panic.
//! - [`scratch`]: scratch directories, removed on drop.
//! - [`wakers`]: wakers that count their wake-ups and their live clones.
//!
//! The per-thread worker the tests drive a bag through is the library's own
//! `pitlane_queue::BagHandle` (implemented by every handle and by `&bag`); the bench keeps a
//! `Worker` of its own because it also drives the peers.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod drops;
#[cfg(target_os = "linux")]
pub mod memory;
#[cfg(not(pitlane_loom))]
pub mod pages;
pub mod panics;
pub mod scratch;

#[cfg(unix)]
pub mod child;
#[cfg(unix)]
pub mod stress;
pub mod wakers;

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is the unit tests' global
// allocator.
#[cfg(all(test, pitlane_alloc_global))]
extern crate pitlane_alloc;
