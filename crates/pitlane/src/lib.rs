//! pitlane: lock-free lanes for values between threads, each one measured against the crate
//! its users would otherwise pick and checked for linearizability.
//!
//! This crate is the one dependency to add; it re-exports the product crates, each behind a
//! feature of the same name (all on by default):
//!
//! | module | feature | crate | what it holds |
//! |---|---|---|---|
//! | [`queue`] | `queue` | `pitlane-queue` | the B-Queue SPSC, a fetch-and-add MPMC queue, a Treiber stack, the Bagpipe bag |
//! | [`sync`] | `sync` | `pitlane-sync` | test-and-set spin locks, an ABA-safe tagged index, the loom shim |
//! | [`wait`] | `wait` | `pitlane-wait` | the intrusive waiter queue, `Notify` and `Semaphore` as tokio's |
//! | [`slab`] | `slab` | `pitlane-slab` | a lock-free slab of fixed-size objects, shared between processes through a file, crash-proof |
//! | [`alloc`] | `alloc` | `pitlane-alloc` | a general-purpose allocator: `#[global_allocator]` on stable, `allocator_api2::Allocator`, owned heaps |
//!
//! `slab` and `alloc` are there on 64-bit Linux only; on other targets those two features add
//! nothing, and the rest builds wherever `std` does (CI type-checks it for macOS and Windows,
//! and runs the queue, wait, sync and lincheck tests on 32-bit Linux). Without `std`,
//! `pitlane-queue`'s SPSC queue, `pitlane-wait` and `pitlane-sync` build on their own.
//!
//! ```
//! use pitlane::queue::mpmc::Queue;
//! use pitlane::sync::spin::TasMutex;
//!
//! let queue = Queue::new();
//! let total = TasMutex::new(0_u64);
//! std::thread::scope(|s| {
//!     s.spawn(|| (1..=100).for_each(|i| queue.push(i)));
//!     s.spawn(|| {
//!         let mut taken = 0;
//!         while taken < 100 {
//!             if let Some(i) = queue.pop() {
//!                 *total.lock() += i;
//!                 taken += 1;
//!             }
//!         }
//!     });
//! });
//! assert_eq!(*total.lock(), 5050);
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// Lock-free lanes for values between threads (the `pitlane-queue` crate).
///
/// ```
/// let (mut tx, mut rx) = pitlane::queue::spsc::channel::<u32>(16);
/// tx.try_push(7).unwrap();
/// assert_eq!(rx.try_pop(), Ok(7));
/// ```
#[cfg(feature = "queue")]
pub use pitlane_queue as queue;

/// The floor: spin locks, the tagged index, the loom shim (the `pitlane-sync` crate).
///
/// ```
/// let lock = pitlane::sync::spin::TasBackoffMutex::new(vec![1, 2]);
/// lock.lock().push(3);
/// assert_eq!(lock.lock().len(), 3);
/// ```
#[cfg(feature = "sync")]
pub use pitlane_sync as sync;

/// Fixed-size objects from a lock-free slab, in one process or shared by several through a
/// file, with crash recovery (the `pitlane-slab` crate).
///
/// ```
/// let slab = pitlane::slab::Slab::heap(pitlane::slab::Config::new(32, 64))?;
/// let id = slab.alloc().unwrap();
/// slab.write(id, 0, b"session")?;
/// slab.free(id)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(all(feature = "slab", target_os = "linux", target_pointer_width = "64"))]
pub use pitlane_slab as slab;
/// Waiting for async code: the intrusive waiter queue, and `Notify` and `Semaphore` with
/// tokio's API (the `pitlane-wait` crate).
///
/// ```
/// let semaphore = pitlane::wait::Semaphore::new(2);
/// let permit = semaphore.try_acquire_many(2).unwrap();
/// assert_eq!(semaphore.available_permits(), 0);
/// drop(permit);
/// assert_eq!(semaphore.available_permits(), 2);
/// ```
#[cfg(feature = "wait")]
pub use pitlane_wait as wait;

/// The general-purpose allocator: thread-local heaps, pages shared through a Bagpipe, memory
/// given back to the OS after a delay (the `pitlane-alloc` crate).
///
/// ```
/// use pitlane::alloc::allocator_api2::{boxed::Box, vec::Vec};
/// use pitlane::alloc::{Heap, PitlaneAlloc};
///
/// // As the global allocator: `#[global_allocator] static A: PitlaneAlloc = PitlaneAlloc::new();`
/// let mut v = Vec::new_in(PitlaneAlloc::new());
/// v.push(1u32);
/// let heap = Heap::new();
/// let b = Box::new_in([7u8; 100], &heap);
/// assert_eq!((v[0], b[99]), (1, 7));
/// ```
#[cfg(all(feature = "alloc", target_os = "linux", target_pointer_width = "64"))]
pub use pitlane_alloc as alloc;

/// The README's examples, compiled and run as doctests so that they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is the unit tests' global
// allocator (with the `alloc` feature, the re-export above links it already).
#[cfg(all(
    test,
    pitlane_alloc_global,
    not(all(feature = "alloc", target_os = "linux", target_pointer_width = "64"))
))]
extern crate pitlane_alloc;
