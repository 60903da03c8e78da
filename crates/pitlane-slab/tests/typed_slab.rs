//! Typed slabs: the size and alignment check made at every access, on the very slab the
//! access goes to; over-aligned and zero-sized types.
#![cfg(not(pitlane_loom))]

use std::borrow::Borrow;
use std::cell::Cell;

use pitlane_slab::{Config, OpenError, Plain, Slab, SlabError, TypedSlab};

/// A safe `Borrow<Slab>` that answers the first call (the one `TypedSlab::new` checks) with a
/// slab whose objects fit the type, and every later call with one whose objects are smaller.
struct Flip<'a> {
    fits: &'a Slab,
    small: &'a Slab,
    calls: Cell<u32>,
}

impl Borrow<Slab> for Flip<'_> {
    fn borrow(&self) -> &Slab {
        let n = self.calls.get();
        self.calls.set(n + 1);
        if n == 0 { self.fits } else { self.small }
    }
}

/// `Borrow` is a safe trait, so `S::borrow` may return a different slab at each call. A typed
/// slab checks the size and alignment of the slab each `get`, `set` and `alloc_with` borrows,
/// not only the one `new` saw: a 16-byte value is never written into (or read out of) an
/// 8-byte object, which would run into the neighbouring object or past the region.
#[test]
fn a_typed_slab_checks_every_slab_its_borrow_returns() {
    let fits = Slab::heap(Config::new(16, 2).with_shards(1)).unwrap();
    let small = Slab::heap(Config::new(8, 2).with_shards(1).with_align(8)).unwrap();
    let typed = TypedSlab::<[u8; 16], _>::new(Flip {
        fits: &fits,
        small: &small,
        calls: Cell::new(0),
    })
    .expect("checked against the first borrow");
    // Two objects of the small slab, side by side (capacity 2: the bump hands out 0 then 1).
    let mine = small.alloc().unwrap();
    let theirs = small.alloc().unwrap();
    assert_eq!((mine.index(), theirs.index()), (0, 1));
    small.write(theirs, 0, &[0xAA; 8]).unwrap();
    assert_eq!(typed.set(mine, [0x55; 16]), Err(SlabError::TypeMismatch));
    let mut back = [0; 8];
    small.read(theirs, 0, &mut back).unwrap();
    assert_eq!(
        back, [0xAA; 8],
        "set wrote past the end of {mine} into {theirs}"
    );
    small.read(mine, 0, &mut back).unwrap();
    assert_eq!(back, [0; 8], "set wrote into {mine}");
    assert_eq!(typed.get(mine), Err(SlabError::TypeMismatch));
    // `alloc_with` allocates nothing from a slab that does not fit.
    small.free(mine).unwrap();
    assert_eq!(typed.alloc_with([0x55; 16]), None);
    assert!(
        small.alloc().is_some(),
        "alloc_with took the small slab's free object"
    );
    assert!(small.check().is_consistent());
}

#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Page([u8; 4096]);
// SAFETY: 4096 bytes, no padding (size equals the alignment), any bits valid.
unsafe impl Plain for Page {}

#[derive(Clone, Copy)]
#[repr(C, align(8192))]
struct TwoPages([u8; 8192]);
// SAFETY: as `Page`.
unsafe impl Plain for TwoPages {}

/// Typed slabs of over-aligned types: a page-aligned type works at every index; a type aligned
/// above `MAX_ALIGN` is refused as a configuration error, not a panic; a slab of too-loosely
/// aligned objects is refused by `TypedSlab::new`; zero-sized `[u64; 0]` works.
#[test]
fn typed_slabs_of_over_aligned_and_zero_sized_types() {
    let typed = TypedSlab::<Page>::new(Slab::heap(TypedSlab::<Page>::config(3)).unwrap()).unwrap();
    for k in 0..3 {
        let id = typed.alloc_with(Page([k; 4096])).unwrap();
        assert_eq!(
            typed.slab().object_ptr(id).unwrap().as_ptr().addr() % 4096,
            0
        );
        assert!(typed.get(id).unwrap().0.iter().all(|&b| b == k));
    }
    assert!(matches!(
        Slab::heap(TypedSlab::<TwoPages>::config(1)),
        Err(OpenError::InvalidConfig(_))
    ));
    // Big enough but only 64-aligned: refused.
    let loose = Slab::heap(Config::new(4096, 1).with_align(64)).unwrap();
    assert_eq!(
        TypedSlab::<Page>::new(loose).unwrap_err(),
        SlabError::TypeMismatch
    );
    let zst =
        TypedSlab::<[u64; 0]>::new(Slab::heap(TypedSlab::<[u64; 0]>::config(1)).unwrap()).unwrap();
    let id = zst.alloc_with([]).unwrap();
    assert_eq!(zst.get(id).unwrap(), []);
    zst.free(id).unwrap();
    assert!(zst.get(id).is_err());
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
