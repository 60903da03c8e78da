//! Records concurrent histories and decides whether they are linearizable.
//!
//! A concurrent structure is *linearizable* (Herlihy & Wing, 1990) when every operation
//! seems to take effect at one instant between its call and its return, in an order that a
//! sequential version of the structure could have produced. This crate checks that on real
//! executions:
//!
//! 1. **Record** ([`Recorder`], [`ThreadLog`]): each thread logs its own operations, each
//!    between two stamps of one global clock; no lock on the way. The logs merge into a
//!    [`History`] once the threads have joined.
//! 2. **Specify** ([`SequentialSpec`]): what the structure does one operation at a time. A
//!    step may allow several results. [`specs`] has FIFO queues (bounded or not), a LIFO
//!    stack, a bag, the weak bag of the Bagpipes design, an object pool, a counting
//!    semaphore, a register and a counter.
//! 3. **Check** ([`check`], [`Checker`]): Wing & Gong's search with Lowe's memoization,
//!    deterministic and bounded by a step budget and a memory budget (see [`Checker`]):
//!    [`Verdict::Linearizable`] with an order, [`Verdict::NotLinearizable`] with what went
//!    wrong, or [`Verdict::Unknown`]. Beside it,
//!    [`queue_patterns`] looks for the known bad patterns of FIFO queues with distinct
//!    values, without any search.
//! 4. **Run** ([`Runner`], [`Subject`]): many rounds of a few threads running a few random
//!    operations against a fresh structure; the first failure is shrunk and drawn as a
//!    timeline with the seed that replays its scripts.
//!
//! Histories of queues and stacks cannot be split into independent parts, so the search is
//! exponential in the worst case: keep rounds small (3 or 4 threads, 5 to 20 operations
//! each) and run many of them.
//!
//! # Checking a structure of your own
//!
//! Say your queue has `push(&self, T)` and `pop(&self) -> Option<T>` and is shared by
//! reference (here a `Mutex<VecDeque>` stands in for it). Put this in
//! `tests/lincheck_my_queue.rs`:
//!
//! ```
//! use std::collections::VecDeque;
//! use std::sync::Mutex;
//!
//! use pitlane_lincheck::specs::{ContainerOp, ContainerRet, QueueSpec};
//! use pitlane_lincheck::{Runner, Shared, workload};
//!
//! struct MyQueue(Mutex<VecDeque<u64>>);
//!
//! impl MyQueue {
//!     fn new() -> Self {
//!         MyQueue(Mutex::new(VecDeque::new()))
//!     }
//!     fn push(&self, value: u64) {
//!         self.0.lock().unwrap().push_back(value);
//!     }
//!     fn pop(&self) -> Option<u64> {
//!         self.0.lock().unwrap().pop_front()
//!     }
//! }
//!
//! # fn main() {
//! // #[test]
//! // fn my_queue_is_a_linearizable_fifo() {
//! let subject = Shared::new(MyQueue::new, |queue: &MyQueue, op: &ContainerOp<u64>| match op {
//!     ContainerOp::Push(value) => {
//!         queue.push(*value);
//!         ContainerRet::Pushed
//!     }
//!     ContainerOp::Pop => queue.pop().into(), // Some(v) => Popped(v), None => Empty
//! });
//! Runner::new(QueueSpec::new(), subject, workload::push_pop)
//!     .threads(3) // threads per round
//!     .ops(6) // operations per thread
//!     .rounds(200) // a fresh queue each round
//!     .seed(1)
//!     .assert_linearizable(); // panics with a timeline on failure
//! // }
//! # }
//! ```
//!
//! On failure the panic message reads like this (here `pitlane lincheck
//! broken-racy-tail-queue --seed 5`, a queue whose racing pushes overwrite each other):
//!
//! ```text
//! NOT LINEARIZABLE: 2 threads x 2 ops, seed 0xc6dd9df42e8e3c22 (found after 0.00 s in round 0 as 4 threads x 8 ops, seed 0x5)
//! t0  [#0 Push(1): Pushed-------------------][#1 Pop: Empty]
//! t1 [#2 Push(3): Pushed][#3 Pop: Popped(3)]
//! longest linearizable prefix: #2 #3 #0; then #1 cannot take effect before it returns
//! replay the scripts with: seed 0xc6dd9df42e8e3c22, 2 threads, 2 ops per thread
//! ```
//!
//! Structures whose threads need handles of their own (the two ends of an SPSC queue)
//! implement [`Subject`] directly. Histories can also be recorded by hand with a
//! [`Recorder`], or written out with [`History::add`] and passed to [`check`].
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod checker;
mod history;
pub mod queue_patterns;
mod recorder;
mod rng;
mod runner;
mod spec;
pub mod specs;
pub mod subjects;
pub mod synthetic;
mod timeline;
pub mod workload;

pub use checker::{Checker, Counterexample, SearchStats, Verdict, check};
pub use history::{History, HistoryError, OpId, Operation};
pub use recorder::{Recorder, ThreadLog};
pub use rng::SplitMix64;
pub use runner::{
    Failure, FailureSummary, MAX_OPERATIONS, MAX_THREADS, OpSlot, RunReport, Runner, Settings,
    SettingsError, Shape, Shared, Subject, Summary,
};
pub use spec::{SearchAids, SequentialSpec};
pub use timeline::Timeline;

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is the unit tests' global
// allocator.
#[cfg(all(test, pitlane_alloc_global))]
extern crate pitlane_alloc;
