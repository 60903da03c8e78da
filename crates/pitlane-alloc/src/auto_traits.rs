//! Compile-time checks of the auto traits of the crate's public types (built only for
//! doctests; the positive checks are in `tests/auto_traits.rs`). No public type has a type or
//! lifetime parameter, so variance only concerns the borrow of a [`Heap`](crate::Heap) that
//! `&Heap: Allocator` collections hold, which may be shortened but never extended.
//!
//! Each `compile_fail` example has a sibling just after it that compiles: the same code with
//! the one change that should make it pass, so that a typo cannot make the failing one pass
//! for the wrong reason.
//!
//! # A `Heap` moves between threads but is not shared
//!
//! Its lists are touched without atomics (as `bumpalo::Bump`'s are).
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_alloc::Heap>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_alloc::Heap>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<&'static pitlane_alloc::Heap>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<&'static pitlane_alloc::PitlaneAlloc>();
//! ```
//!
//! A block of a `Heap` cannot be freed on another thread: a collection that allocates from one
//! stays on the heap's thread.
//!
//! ```compile_fail,E0277
//! use allocator_api2::boxed::Box;
//! fn send<T: Send>(_: T) {}
//! let heap = pitlane_alloc::Heap::new();
//! send(Box::new_in(1_u8, &heap));
//! ```
//!
//! ```
//! use allocator_api2::boxed::Box;
//! fn send<T: Send>(_: T) {}
//! let heap = pitlane_alloc::PitlaneAlloc::new();
//! send(Box::new_in(1_u8, &heap));
//! ```
//!
//! # A block cannot outlive its `Heap`
//!
//! ```compile_fail,E0597
//! use allocator_api2::boxed::Box;
//! let block;
//! {
//!     let heap = pitlane_alloc::Heap::new();
//!     block = Box::new_in(1_u8, &heap);
//! }
//! assert_eq!(*block, 1);
//! ```
//!
//! ```
//! use allocator_api2::boxed::Box;
//! let heap = pitlane_alloc::Heap::new();
//! let block;
//! {
//!     block = Box::new_in(1_u8, &heap);
//! }
//! assert_eq!(*block, 1);
//! ```
//!
//! Nor can memory leaked from it:
//!
//! ```compile_fail,E0597
//! use allocator_api2::vec::Vec;
//! let leaked: &mut [u8];
//! {
//!     let heap = pitlane_alloc::Heap::new();
//!     leaked = Vec::<u8, _>::with_capacity_in(8, &heap).leak();
//! }
//! assert!(leaked.is_empty());
//! ```
//!
//! ```
//! use allocator_api2::vec::Vec;
//! let heap = pitlane_alloc::Heap::new();
//! let leaked: &mut [u8];
//! {
//!     leaked = Vec::<u8, _>::with_capacity_in(8, &heap).leak();
//! }
//! assert!(leaked.is_empty());
//! ```
