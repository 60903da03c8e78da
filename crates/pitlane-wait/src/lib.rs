//! Waiting, for async code: an intrusive waiter queue whose enqueue takes no lock, and the
//! [`Notify`] and [`Semaphore`] built on it, which behave as tokio's do.
//!
//! - [`WaitQueue`] (module [`queue`]): waiters are nodes pinned inside the futures that wait;
//!   enqueue is a compare-and-swap on the tail, every removal happens under a lock, and while
//!   the queue is empty its tail word holds a state, so that "no waiter: store a permit" and
//!   "take the permits, else enqueue" are single atomic steps. The algorithm is aiq's
//!   (wyfo/aiq); the module doc gives the protocol and its linearization points. The lock and
//!   the way a lock holder waits for a lagging link are parameters ([`lock`]).
//! - [`Notify`] (module [`notify`]): tokio's `Notify` — `notify_one`, `notify_last`,
//!   `notify_waiters`, `notified`, `notified_owned`, `Notified::enable` — with the same
//!   semantics: at most one stored permit, `notify_waiters` seen by every `Notified` created
//!   before it and storing no permit, FIFO and LIFO wake-ups, a dropped chosen waiter passing
//!   its notification on, fused futures.
//! - [`Semaphore`] (module [`semaphore`]): tokio's `Semaphore` — strictly fair (FIFO, a large
//!   request at the head holds back smaller ones), `acquire`/`acquire_many`/`try_*`, the
//!   `_owned` variants, the `blocking_*` forms, `close`, `add_permits`, `forget_permits`,
//!   permits with `forget`, `merge`, `split`, `num_permits`.
//!
//! Moving from tokio is a change of path: `tokio::sync::{Notify, Semaphore,
//! SemaphorePermit, OwnedSemaphorePermit, AcquireError, TryAcquireError}` become the same
//! names here, and `tokio::sync::futures::{Notified, OwnedNotified}` become
//! [`notify::Notified`] and [`notify::OwnedNotified`]. Signatures (`u32` for
//! `acquire_many`/`try_acquire_many`, `usize` elsewhere, as in tokio), `Send`/`Sync`/`Unpin`
//! of futures and permits, `UnwindSafe` of `Notify`, panics and their messages are the same
//! (tokio's own tests check it, see below). The crate does not depend on a runtime; tokio is
//! only an optional feature (see below).
//!
//! ```
//! use std::sync::Arc;
//! use pitlane_wait::{Notify, Semaphore};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() {
//! let pool = Arc::new(Semaphore::new(2)); // two connections
//! let done = Arc::new(Notify::new());
//! let mut tasks = Vec::new();
//! for _ in 0..8 {
//!     let pool = pool.clone();
//!     tasks.push(tokio::spawn(async move {
//!         let _connection = pool.acquire().await.unwrap();
//!         assert!(pool.available_permits() <= 1);
//!     }));
//! }
//! let waiter = {
//!     let done = done.clone();
//!     tokio::spawn(async move { done.notified().await })
//! };
//! for task in tasks {
//!     task.await.unwrap();
//! }
//! done.notify_one();
//! waiter.await.unwrap();
//! assert_eq!(pool.available_permits(), 2);
//! # }
//! ```
//!
//! # Checked against tokio's own tests
//!
//! CI runs tokio's own test files for these types against this crate: `tests/sync_notify.rs`,
//! `sync_notify_owned.rs`, `sync_semaphore.rs` and `sync_semaphore_owned.rs` whole, and the
//! lines of `async_send_sync.rs` (`Send`, `Sync`, `Unpin`, `!Unpin` of the types and the
//! `acquire*` futures) and `unwindsafe.rs` (`Notify: UnwindSafe + RefUnwindSafe`) that name
//! them. They are taken from the cargo registry at the tokio version `Cargo.lock` pins and
//! copied into a scratch crate outside the workspace with only the paths of the replaced
//! types changed (`tokio::sync::Notify` to `pitlane_wait::Notify` and so on); nothing else
//! in them is edited. To run it locally, from the repository root:
//!
//! ```sh
//! cargo fetch && python3 .ci/tokio-conformance.py
//! ```
//!
//! No test is skipped. Four are compiled out by tokio's own `cfg(target_pointer_width =
//! "32")` on 64-bit machines (`acquire_many*_exceeds_maxpermits` and
//! `acquire_many*_top_bit_exceeds_maxpermits`, plain and owned: a `u32` count above
//! [`Semaphore::MAX_PERMITS`] exists only where `usize` is 32 bits). The script lists the
//! tests it would skip, each with its reason, should a later tokio need one.
//!
//! `tests/differential_tokio.rs` goes further: property tests run the same random scripts of
//! calls (acquires polled, cancelled and dropped, `try_acquire*`, `add_permits`,
//! `forget_permits`, `close`, permits dropped, forgotten, split and merged; `notified`,
//! `enable`, `notify_one`, `notify_last`, `notify_waiters`) on tokio's types and on these,
//! and compare every result, the free permits and every waker's wake-ups at every step. Two
//! differences are kept on purpose, each pinned by a test there: after `add_permits` panics
//! on overflow, tokio's semaphore is left holding more than `MAX_PERMITS` and this one adds
//! nothing (and wakes the waiters it served before the panic, which tokio leaves unwoken);
//! and `Debug` shows these types' own fields, not tokio's internals.
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `std` | yes | `parking_lot`'s lock as the default lock, a parker that sleeps in `parking_lot_core`'s parking lot, the `blocking_*` forms; implies `alloc` |
//! | `alloc` | via `std` | `Arc`-owned futures and permits (`notified_owned`, `acquire_owned`, `OwnedSemaphorePermit`) |
//! | `tokio` | no | the acquires spend tokio's cooperative budget, as tokio's do; the `blocking_*` forms panic, as tokio's do, when called on a thread that drives a tokio runtime (enables tokio's `sync` and `rt` features) |
//!
//! The cooperative budget: on a tokio runtime, tokio's `Semaphore::acquire*` futures spend a
//! unit of the task's budget each time they complete, and once it is spent they return
//! `Pending` (holding the permits they took, so that they keep their place) until the task has
//! yielded to the runtime; a task that keeps acquiring free permits thus lets the other tasks
//! of its thread run. With the `tokio` feature, this crate's acquires do the same (through
//! `tokio::task::coop::poll_proceed`). Without it they know no budget: they complete as soon
//! as the permits are there, and such a task holds its thread until it awaits something else
//! that yields. Neither crate's `Notified` spends the budget.
//!
//! Without `std` the crate is `no_std` (with `alloc` optional); its default lock is then
//! pitlane-sync's test-and-test-and-set spin lock. Any `lock_api::RawMutex` can serve as the
//! lock of a [`WaitQueue`]. The target needs atomic compare-and-swap, not 64-bit atomics: CI
//! builds the `no_std` forms for `thumbv7em-none-eabihf` (no `std`, no `AtomicU64`) as well as
//! for the host.
//!
//! Under `RUSTFLAGS="--cfg pitlane_loom"` the crate takes its atomics from loom (through
//! pitlane-sync's shim) so that the tests in `tests/loom_*.rs` model-check this very code; the
//! `const` constructors are not available then.
#![cfg_attr(not(any(feature = "std", pitlane_loom)), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

#[cfg(doctest)]
mod auto_traits;
#[cfg(all(feature = "std", not(pitlane_loom)))]
mod blocking;
pub mod lock;
pub mod notify;
pub mod queue;
pub mod semaphore;
mod waker_slot;

#[cfg(feature = "alloc")]
pub use notify::OwnedNotified;
pub use notify::{Notified, Notify};
pub use queue::WaitQueue;
#[cfg(feature = "alloc")]
pub use semaphore::OwnedSemaphorePermit;
pub use semaphore::{AcquireError, Semaphore, SemaphorePermit, TryAcquireError};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is the unit tests' global
// allocator.
#[cfg(all(test, pitlane_alloc_global))]
extern crate pitlane_alloc;
