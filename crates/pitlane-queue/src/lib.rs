//! Lock-free lanes for values between threads.
//!
//! - [`spsc`]: the B-Queue single-producer single-consumer queue (Wang et al., 2013).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod spsc;
