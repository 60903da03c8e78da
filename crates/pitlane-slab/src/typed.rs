//! Typed objects over a slab: `TypedSlab<T>` stores plain-data values by copy.

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::slab::{atomic_copy_in, atomic_copy_out};
use crate::{ObjectId, Slab, SlabError};

/// Plain data that may live in memory shared with other processes.
///
/// pitlane uses its own marker instead of `bytemuck::Pod` because shared memory asks for a
/// contract Pod does not spell out: a value read from the slab may have been written by any
/// process, even a hostile one, and must still be a valid `T`, and an address stored in one
/// process means nothing in another. (It also keeps the crate free of a dependency.)
///
/// # Safety
/// Implement it only for `Copy` types that
/// - are valid for every bit pattern of their size (no `bool`, `char`, enums, references,
///   `NonZero*`),
/// - have no padding bytes (their bytes are copied out as initialised bytes),
/// - hold no pointers or references (they would dangle in another process), and
/// - need no `Drop` (a crashed process never runs one).
///
/// The trait also asks for `Send` and `Sync`, which the compiler checks: a [`TypedSlab`] is
/// shared by threads (and processes) whatever `T` is, and hands each reader a copy of what
/// another thread stored, so a type tied to its thread must not be plain.
///
/// It is implemented for the integer and float types and arrays of `Plain` types.
///
/// ```
/// use pitlane_slab::Plain;
///
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// #[repr(C)]
/// struct Session { id: u64, bytes_in: u64, bytes_out: u64 }
/// // SAFETY: three u64 fields, no padding, no pointers, any bits valid.
/// unsafe impl Plain for Session {}
/// ```
pub unsafe trait Plain: Copy + Send + Sync + 'static {}

macro_rules! plain {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number: every bit pattern valid, no padding, no pointer.
        unsafe impl Plain for $t {}
    )* };
}
plain!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64
);
// SAFETY: an array of plain values has no padding between elements and no pointers.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

/// A slab of `T` values: each object holds one `T`, read and written by copy.
///
/// `S` is any handle that borrows a [`Slab`]: a `Slab`, a [`ShmSlab`](crate::ShmSlab), an
/// `Arc<Slab>`, a `&Slab`. Each access borrows the slab once and checks, on the slab it got,
/// that its objects hold a `T` (two compares), so a `Borrow` implementation that returns
/// different slabs at different calls gets errors, never an access past an object.
///
/// Values are copied in and out with relaxed atomic accesses, as [`Slab::read`] and
/// [`Slab::write`] copy bytes.
///
/// ```
/// use pitlane_slab::{Config, Slab, TypedSlab};
///
/// let slab = TypedSlab::<[u32; 4], _>::new(Slab::heap(TypedSlab::<[u32; 4], Slab>::config(8))?)?;
/// let id = slab.alloc_with([1, 2, 3, 4]).unwrap();
/// assert_eq!(slab.get(id)?, [1, 2, 3, 4]);
/// slab.set(id, [5; 4])?;
/// assert_eq!(slab.get(id)?, [5; 4]);
/// slab.free(id)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TypedSlab<T: Plain, S: Borrow<Slab> = Slab> {
    slab: S,
    _values: PhantomData<fn(T) -> T>,
}

impl<T: Plain, S: Borrow<Slab>> std::fmt::Debug for TypedSlab<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedSlab")
            .field("type", &std::any::type_name::<T>())
            .field("slab", self.slab.borrow())
            .finish()
    }
}

impl<T: Plain, S: Borrow<Slab>> TypedSlab<T, S> {
    /// A configuration fitting `T`: its size and alignment, `capacity` objects.
    ///
    /// ```
    /// let c = pitlane_slab::TypedSlab::<u64>::config(10);
    /// assert_eq!((c.object_size, c.align, c.capacity), (8, 8, 10));
    /// ```
    pub fn config(capacity: u32) -> crate::Config {
        crate::Config::new(size_of::<T>(), capacity).with_align(align_of::<T>())
    }

    /// Wraps `slab`, whose objects must be large and aligned enough for `T`.
    ///
    /// # Errors
    /// [`SlabError::TypeMismatch`] when they are not.
    ///
    /// ```
    /// use pitlane_slab::{Config, Slab, TypedSlab};
    /// assert!(TypedSlab::<u64, _>::new(Slab::heap(Config::new(4, 1))?).is_err());
    /// # Ok::<(), pitlane_slab::OpenError>(())
    /// ```
    pub fn new(slab: S) -> Result<Self, SlabError> {
        fits::<T>(slab.borrow())?;
        Ok(Self {
            slab,
            _values: PhantomData,
        })
    }

    /// Allocates an object and stores `value` in it; `None` when none is free (or when the
    /// slab `S` borrows now does not hold a `T`, which only a `Borrow` implementation that
    /// returns different slabs can make happen).
    ///
    /// ```
    /// let s = pitlane_slab::TypedSlab::<u8>::new(pitlane_slab::Slab::heap(pitlane_slab::TypedSlab::<u8>::config(1))?)?;
    /// assert!(s.alloc_with(1).is_some());
    /// assert!(s.alloc_with(2).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alloc_with(&self, value: T) -> Option<ObjectId> {
        let slab = self.slab.borrow();
        fits::<T>(slab).ok()?;
        let id = slab.alloc()?;
        // Cannot fail: `id` was just allocated in `slab`, whose objects hold a `T`.
        store(slab, id, value).ok()?;
        Some(id)
    }

    /// A copy of the value in `id`.
    ///
    /// # Errors
    /// [`SlabError::OutOfRange`], [`SlabError::NotAllocated`] (a stale id), or
    /// [`SlabError::TypeMismatch`] when the slab `S` borrows now does not hold a `T`.
    ///
    /// ```
    /// let s = pitlane_slab::TypedSlab::<u32>::new(pitlane_slab::Slab::heap(pitlane_slab::TypedSlab::<u32>::config(1))?)?;
    /// let id = s.alloc_with(7).unwrap();
    /// assert_eq!(s.get(id)?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, id: ObjectId) -> Result<T, SlabError> {
        let p = object::<T>(self.slab.borrow(), id)?;
        // All zero: every byte initialised, so the bytes may be viewed as a `[u8]`.
        let mut value = MaybeUninit::<T>::zeroed();
        // SAFETY: `value` is `size_of::<T>()` initialised bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(value.as_mut_ptr().cast::<u8>(), size_of::<T>())
        };
        // SAFETY: `object` checked, on this very slab, that the object holds at least
        // `size_of::<T>()` bytes (so the words they touch lie in its region); atomic loads,
        // because other threads and processes may write them meanwhile.
        unsafe { atomic_copy_out(bytes, p.as_ptr()) };
        // SAFETY: any bytes make a valid `T` (the `Plain` contract).
        Ok(unsafe { value.assume_init() })
    }

    /// Stores `value` in `id`.
    ///
    /// # Errors
    /// As [`TypedSlab::get`].
    ///
    /// ```
    /// let s = pitlane_slab::TypedSlab::<u32>::new(pitlane_slab::Slab::heap(pitlane_slab::TypedSlab::<u32>::config(1))?)?;
    /// let id = s.alloc_with(7).unwrap();
    /// s.set(id, 8)?;
    /// assert_eq!(s.get(id)?, 8);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set(&self, id: ObjectId, value: T) -> Result<(), SlabError> {
        store(self.slab.borrow(), id, value)
    }

    /// Frees `id` (see [`Slab::free`]).
    ///
    /// # Errors
    /// As [`Slab::free`].
    ///
    /// ```
    /// let s = pitlane_slab::TypedSlab::<u32>::new(pitlane_slab::Slab::heap(pitlane_slab::TypedSlab::<u32>::config(1))?)?;
    /// let id = s.alloc_with(7).unwrap();
    /// s.free(id)?;
    /// assert!(s.free(id).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn free(&self, id: ObjectId) -> Result<(), SlabError> {
        self.slab.borrow().free(id)
    }

    /// The untyped slab underneath.
    ///
    /// ```
    /// let s = pitlane_slab::TypedSlab::<u32>::new(pitlane_slab::Slab::heap(pitlane_slab::TypedSlab::<u32>::config(3))?)?;
    /// assert_eq!(s.slab().capacity(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn slab(&self) -> &Slab {
        self.slab.borrow()
    }
}

/// Checks that the objects of `slab` are large and aligned enough for a `T`.
#[inline]
fn fits<T: Plain>(slab: &Slab) -> Result<(), SlabError> {
    let c = slab.config();
    if c.object_size < size_of::<T>() || c.align < align_of::<T>() {
        return Err(SlabError::TypeMismatch);
    }
    Ok(())
}

/// The address of `id` in `slab`, checked to hold a `T`. The check is made on the very slab
/// the address comes from: `S::borrow` is safe code and may return another slab at each call.
#[inline]
fn object<T: Plain>(slab: &Slab, id: ObjectId) -> Result<NonNull<u8>, SlabError> {
    fits::<T>(slab)?;
    slab.object_ptr(id)
}

/// Stores `value` in `id` of `slab`.
#[inline]
fn store<T: Plain>(slab: &Slab, id: ObjectId, value: T) -> Result<(), SlabError> {
    let p = object::<T>(slab, id)?;
    // SAFETY: `T` has no padding (the `Plain` contract), so its `size_of::<T>()` bytes are
    // initialised; `value` lives to the end of the function.
    let bytes =
        unsafe { std::slice::from_raw_parts((&raw const value).cast::<u8>(), size_of::<T>()) };
    // SAFETY: `object` checked, on this very slab, that the object holds at least
    // `size_of::<T>()` bytes (so the words they touch lie in its region); atomic accesses,
    // because other threads and processes may read and write them meanwhile.
    unsafe { atomic_copy_in(p.as_ptr(), bytes) };
    Ok(())
}
