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
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod spsc;

pub mod bagpipe;
mod barrier;
mod error;
pub mod mpmc;
pub mod revoke;
mod slot;
pub mod stack;
pub mod weak_bag;

pub use error::{PopError, PushError};
pub use weak_bag::{BagHandle, WeakBag};
