//! What pitlane's tests and benchmark suites share, kept out of the crates users depend on.
//!
//! This crate is never published and never a dependency of a product: the products take it as
//! a dev-dependency for their tests, and `pitlane-bench` uses it for its suites.
//!
//! - [`stress`]: POSIX threads for stress tests, so that ThreadSanitizer sees how a test hands
//!   data to its threads and back.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(unix)]
pub mod stress;
