//! Compile-time checks of the auto traits and the variance of the crate's public types (built
//! only for doctests; the positive checks are in `tests/auto_traits.rs`).
//!
//! Each `compile_fail` example has a sibling just after it that compiles: the same code with
//! the one change that should make it pass, so that a typo cannot make the failing one pass
//! for the wrong reason.
//!
//! # A typed slab holds plain values only
//!
//! [`TypedSlab`](crate::TypedSlab) is invariant in `T` (it stores `T` values through `&self`),
//! and `T: Plain` is `'static` and holds no reference, so no lifetime can be shortened through
//! it: a slab of references is refused outright.
//!
//! ```compile_fail,E0277
//! use pitlane_slab::{Slab, TypedSlab};
//! fn slab_of_refs(slab: Slab) -> TypedSlab<&'static str> {
//!     TypedSlab::new(slab).unwrap()
//! }
//! ```
//!
//! ```
//! use pitlane_slab::{Slab, TypedSlab};
//! fn slab_of_numbers(slab: Slab) -> TypedSlab<u64> {
//!     TypedSlab::new(slab).unwrap()
//! }
//! ```
//!
//! # A plain type has no thread affinity
//!
//! A typed slab shared by threads (or processes) hands each reader a copy of what another
//! thread stored, and it is `Send` and `Sync` whatever `T` is, so `Plain` asks for `Send` and
//! `Sync`: a type that must stay on its thread (here, a token that should prove it was made on
//! the main thread) cannot be declared plain and smuggled to another thread through a slab.
//!
//! ```compile_fail,E0277
//! use std::marker::PhantomData;
//! use pitlane_slab::{Plain, Slab, TypedSlab};
//!
//! #[derive(Clone, Copy)]
//! #[repr(C)]
//! struct MainThreadToken(u64, PhantomData<*const ()>);
//! // SAFETY: one `u64`: no padding, no pointer, every bit pattern valid, no `Drop`.
//! unsafe impl Plain for MainThreadToken {}
//!
//! let config = TypedSlab::<MainThreadToken>::config(1);
//! let slab = TypedSlab::<MainThreadToken>::new(Slab::heap(config).unwrap()).unwrap();
//! let id = slab.alloc_with(MainThreadToken(1, PhantomData)).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| {
//!         let _token: MainThreadToken = slab.get(id).unwrap(); // on another thread
//!     });
//! });
//! ```
//!
//! ```
//! use std::marker::PhantomData;
//! use pitlane_slab::{Plain, Slab, TypedSlab};
//!
//! #[derive(Clone, Copy)]
//! #[repr(C)]
//! struct MainThreadToken(u64, PhantomData<()>);
//! // SAFETY: one `u64`: no padding, no pointer, every bit pattern valid, no `Drop`.
//! unsafe impl Plain for MainThreadToken {}
//!
//! let config = TypedSlab::<MainThreadToken>::config(1);
//! let slab = TypedSlab::<MainThreadToken>::new(Slab::heap(config).unwrap()).unwrap();
//! let id = slab.alloc_with(MainThreadToken(1, PhantomData)).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| {
//!         let _token: MainThreadToken = slab.get(id).unwrap(); // on another thread
//!     });
//! });
//! ```
//!
//! # A typed slab is shared as the handle it wraps is
//!
//! ```compile_fail,E0277
//! use pitlane_slab::{Slab, TypedSlab};
//! fn send<T: Send>() {}
//! send::<TypedSlab<u64, std::rc::Rc<Slab>>>();
//! ```
//!
//! ```
//! use pitlane_slab::{Slab, TypedSlab};
//! fn send<T: Send>() {}
//! send::<TypedSlab<u64, std::sync::Arc<Slab>>>();
//! ```
//!
//! ```compile_fail,E0277
//! use pitlane_slab::{Slab, TypedSlab};
//! fn sync<T: Sync>() {}
//! sync::<TypedSlab<u64, std::rc::Rc<Slab>>>();
//! ```
//!
//! ```
//! use pitlane_slab::{Slab, TypedSlab};
//! fn sync<T: Sync>() {}
//! sync::<TypedSlab<u64, std::sync::Arc<Slab>>>();
//! ```
//!
//! # A borrowing typed slab cannot outlive its slab
//!
//! ```compile_fail,E0597
//! use pitlane_slab::{Slab, TypedSlab};
//! let typed;
//! {
//!     let slab = Slab::heap(TypedSlab::<u64>::config(1)).unwrap();
//!     typed = TypedSlab::<u64, &Slab>::new(&slab).unwrap();
//! }
//! assert!(typed.alloc_with(1).is_some());
//! ```
//!
//! ```
//! use pitlane_slab::{Slab, TypedSlab};
//! let typed;
//! let slab = Slab::heap(TypedSlab::<u64>::config(1)).unwrap();
//! {
//!     typed = TypedSlab::<u64, &Slab>::new(&slab).unwrap();
//! }
//! assert!(typed.alloc_with(1).is_some());
//! ```
