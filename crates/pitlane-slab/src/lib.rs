//! A lock-free slab of fixed-size objects, in one process or shared by several processes
//! through a file, with recovery of what crashed processes held.
//!
//! Source: Fastly's persistent shared-state slab allocator from the talk "Racing to Win"
//! (Nathan Taylor, Surge 2015; published as `uslab`), with three changes taken from iceoryx2's
//! `UniqueIndexSet` / `RobustUniqueIndexSet` design: handles are **indices, never addresses**
//! (so each process may map the file anywhere, where uslab needs a fixed address); the ABA
//! generation shares the head word with the index (one 64-bit CAS on
//! [`pitlane_sync::Tagged`], where uslab needs a double-width CAS); and every allocated object
//! records an **owner**, so that the objects of a dead process can be reclaimed (uslab leaks
//! them).
//!
//! # Layout and protocol
//!
//! A region (heap memory, an anonymous shared mapping or a file) holds a header, a bump word,
//! one tagged head per shard, attachment epochs, intent records ("lanes"), a `u32` link per
//! object, a `u64` state word per object (generation and owner), and the objects. The links live apart from the objects, so what a user writes
//! into an object never races with the freelist.
//!
//! - **alloc**: while the bump word is below the capacity, take the next never-used object by
//!   incrementing it (compare-exchange; never-used objects are zero). The `n`-th object bumped
//!   is `n * spread mod capacity`, `spread` coprime to the capacity and near capacity / 1.618,
//!   so that objects handed out one after the other — which threads then keep recycling from
//!   their own shards — share no cache line of objects, links or owner words. Then pop the thread's
//!   home shard (shards are dealt to threads round-robin, offset by a file handle's
//!   attachment slot so that processes start apart), then steal from the others
//!   (see [`freelist`]). Finally record the owner tag in the object's state word. The
//!   [`ObjectId`] handed out carries the object's generation.
//! - **free**: exchange the state word from (the id's generation, an owner) to (the next
//!   generation, free) — finding it free or at another generation is a double free or a stale
//!   id, reported — then push the index onto the home shard with release ordering.
//!
//! A file-backed slab also announces each step in an intent record of the calling thread
//! before taking it, so that recovery can finish what a killed process left half done (see
//! the `protocol` module's source docs and [`ShmSlab::recover`]).
//!
//! **Linearization points.** A successful alloc takes effect at its bump exchange or at the
//! head exchange of its pop; a free at the exchange that clears the owner word (the push that
//! follows only makes the object available again, which the pool specification allows to
//! happen later). An alloc returning `None` takes effect at the load that found the last shard
//! empty; with one shard that is a moment when every object is allocated, with several shards
//! it may be transient (see [`Slab::alloc`]).
//!
//! # Untrusted memory
//!
//! Everything in a shared region may be written at any time by another process, possibly a
//! buggy or hostile one. The crate upholds, and its tests check:
//! - **No Rust reference to plain data in the region.** The words of the protocol are only
//!   touched through `&AtomicU64` / `&AtomicU32` made with `from_ptr` (atomics are
//!   interior-mutable, so a shared reference to one is sound while others write it); object
//!   bytes only through copies made of relaxed atomic accesses to the aligned 8-byte words
//!   they touch ([`Slab::read`], [`Slab::write`], [`TypedSlab`]), so that they may race with
//!   each other and with [`Slab::atomic_u64`] without a data race (values may tear across
//!   words, never within one), or through a raw pointer handed to the user
//!   ([`Slab::object_ptr`]).
//! - **Every index read from the region is bounds-checked** before it addresses memory: head
//!   and link indices against the capacity, the bump word clamped to it. A bad index makes the
//!   operation fail with [`SlabError::Corrupt`] (or `alloc` return `None`).
//! - **The header is validated on open** (magic, version, checksum, each field's range, the
//!   file's length) and the geometry is recomputed from it, never read from the file.
//!
//! What a hostile peer can still do: make operations fail, leak objects, hand the same object
//! to two users (a logic error for them, not undefined behaviour here) — for instance by
//! forging a valid-looking intent record that makes recovery list an object twice — or
//! truncate the file (see [`ShmSlab`] on `SIGBUS`). File permissions (0600 by default) decide
//! who is a peer.
//!
//! # Crash recovery
//!
//! See [`ShmSlab`]: owners are attachment slots with epochs, liveness is an advisory
//! open-file-description lock held while attached, and [`ShmSlab::recover`] reclaims the
//! objects of dead owners and the objects a killed process was taking or giving back (named
//! by its intent records), on a busy slab. [`Slab::check`] verifies a quiescent slab.
//!
//! What recovery cannot undo: a recoverer killed between detaching a shard's chain and
//! putting it back (microseconds) leaks that chain; [`Slab::check`] reports the objects as
//! lost and [`Slab::reclaim_lost`] returns them on a quiescent slab.
//!
//! ```
//! use pitlane_slab::{Config, Slab};
//!
//! let slab = Slab::heap(Config::new(64, 1024))?;
//! std::thread::scope(|s| {
//!     for _ in 0..2 {
//!         s.spawn(|| {
//!             for _ in 0..1000 {
//!                 let id = slab.alloc().unwrap();
//!                 slab.write(id, 0, &[1; 64]).unwrap();
//!                 slab.free(id).unwrap();
//!             }
//!         });
//!     }
//! });
//! assert!(slab.check().is_consistent());
//! # Ok::<(), pitlane_slab::OpenError>(())
//! ```
//!
//! # Platforms
//!
//! 64-bit Linux only (`memfd_create`, open-file-description locks, 64-bit offsets and
//! atomics in the shared mapping); elsewhere the crate does not compile, with a message that
//! says so, and the `pitlane` facade leaves its `slab` module out.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

// Say so plainly rather than with a page of unresolved names from `libc`.
#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
compile_error!(
    "pitlane-slab supports 64-bit Linux only: it stands on memfd_create, open-file-description \
     locks and 64-bit atomics in a shared mapping (the `pitlane` facade leaves it out elsewhere)"
);

#[cfg(doctest)]
mod auto_traits;
pub mod freelist;
#[cfg(pitlane_loom)]
pub mod protocol;
#[cfg(not(pitlane_loom))]
mod protocol;

#[cfg(not(pitlane_loom))]
mod config;
#[cfg(not(pitlane_loom))]
mod layout;
#[cfg(not(pitlane_loom))]
mod region;
#[cfg(not(pitlane_loom))]
mod shm;
#[cfg(not(pitlane_loom))]
mod slab;
#[cfg(not(pitlane_loom))]
mod typed;

#[cfg(not(pitlane_loom))]
pub use layout::{
    FORMAT_VERSION, MAX_ALIGN, MAX_ATTACHED, MAX_CAPACITY, MAX_OBJECT_SIZE, MAX_SHARDS,
};
#[cfg(not(pitlane_loom))]
pub use region::RegionKind;
#[cfg(not(pitlane_loom))]
pub use shm::{RecoverReport, ShmSlab};
#[cfg(not(pitlane_loom))]
pub use slab::{CheckReport, ObjectId, Slab};
#[cfg(not(pitlane_loom))]
pub use typed::{Plain, TypedSlab};

#[cfg(not(pitlane_loom))]
pub use config::{Config, OpenError, SlabError};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is the unit tests' global
// allocator.
#[cfg(all(test, pitlane_alloc_global))]
extern crate pitlane_alloc;
