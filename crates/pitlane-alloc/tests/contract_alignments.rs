//! The `Allocator` contract at the alignments and paths the property tests do not reach:
//! every operation (allocate, allocate_zeroed, grow, grow_zeroed, shrink, deallocate) at
//! alignments 2^17 to 2^22 and 2^30, the alignment changing both ways between the old and
//! the new layout, sizes 0 on either side; alignments no mapping can serve (2^62, 2^63 with
//! size 0 through `GlobalAlloc`) fail with `AllocError` / null; and `grow_zeroed` on each
//! path of a large block (in place in its mapping, into the cached run after it, moved into
//! a cached run, moved by `mremap`, over-aligned and moved), each over memory left dirty.
//! Through `PitlaneAlloc` and an owned `Heap`.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{Heap, PitlaneAlloc, PurgePolicy};

fn fill(p: NonNull<u8>, len: usize, seed: u8) {
    // SAFETY: `len` bytes of a live block.
    unsafe { p.as_ptr().write_bytes(seed, len) };
}

fn holds(p: NonNull<u8>, len: usize, seed: u8) -> bool {
    // SAFETY: `len` bytes of a live block.
    unsafe { core::slice::from_raw_parts(p.as_ptr(), len) }
        .iter()
        .all(|&b| b == seed)
}

fn zero_from(p: NonNull<u8>, from: usize, to: usize) -> bool {
    // SAFETY: bytes of a live block.
    unsafe { core::slice::from_raw_parts(p.as_ptr().add(from), to - from) }
        .iter()
        .all(|&b| b == 0)
}

fn l(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

fn every_operation<A: Allocator>(a: A) {
    let aligns = [
        1usize,
        8,
        4096,
        1 << 16,
        1 << 17,
        1 << 18,
        1 << 20,
        1 << 21,
        1 << 22,
        1 << 30,
    ];
    let sizes = [0usize, 1, 100, 16_384, 16_385, 300_000];
    for &align in &aligns {
        for &size in &sizes {
            let old = l(size, align);
            let b = a.allocate_zeroed(old).unwrap();
            assert!(b.len() >= size);
            let p = b.cast::<u8>();
            assert_eq!(p.as_ptr().addr() % align, 0, "size {size} align {align}");
            assert!(zero_from(p, 0, size));
            fill(p, b.len(), 0xA5);
            // Grow to every larger size at every alignment (both directions of change).
            for &align2 in &aligns {
                for &size2 in sizes.iter().filter(|&&s| s >= size) {
                    let new = l(size2, align2);
                    let c = a.allocate(old).unwrap().cast::<u8>();
                    fill(c, size, 0x3C);
                    // SAFETY: a live block of `old`; `new` is at least as large.
                    let g = unsafe { a.grow_zeroed(c, old, new) }.unwrap();
                    let q = g.cast::<u8>();
                    assert!(g.len() >= size2);
                    assert_eq!(q.as_ptr().addr() % align2, 0, "{old:?} -> {new:?}");
                    assert!(holds(q, size, 0x3C), "{old:?} -> {new:?} lost data");
                    assert!(zero_from(q, size, size2), "{old:?} -> {new:?} not zeroed");
                    fill(q, g.len(), 0x77);
                    // And back down, to every smaller size at every alignment.
                    let back = l(size, align);
                    // SAFETY: a live block of `new`; `back` is not larger.
                    let s = unsafe { a.shrink(q, new, back) }.unwrap();
                    assert!(s.len() >= size);
                    assert_eq!(s.cast::<u8>().as_ptr().addr() % align, 0);
                    assert!(holds(s.cast(), size, 0x77), "{new:?} -> {back:?} lost data");
                    // SAFETY: a live block of `back`.
                    unsafe { a.deallocate(s.cast(), back) };
                }
            }
            assert!(
                holds(p, size, 0xA5),
                "a block changed while others were resized"
            );
            // Shrink to size 0 (any alignment), then free the result with its layout.
            // SAFETY: a live block of `old`.
            let z = unsafe { a.shrink(p, old, l(0, 1 << 20)) }.unwrap();
            assert_eq!(z.len(), 0);
            assert_eq!(z.cast::<u8>().as_ptr().addr() % (1 << 20), 0);
            // SAFETY: the zero-sized block `shrink` gave.
            unsafe { a.deallocate(z.cast(), l(0, 1 << 20)) };
        }
    }
    // Alignments no mapping can serve.
    for layout in [l(1, 1 << 62), l(1 << 20, 1 << 62)] {
        assert!(a.allocate(layout).is_err());
        assert!(a.allocate_zeroed(layout).is_err());
    }
    let b = a.allocate(l(64, 8)).unwrap().cast::<u8>();
    fill(b, 64, 9);
    // SAFETY: a live block; the failed grow leaves it live.
    unsafe {
        assert!(a.grow(b, l(64, 8), l(64, 1 << 62)).is_err());
        assert!(
            a.grow_zeroed(b, l(64, 8), l(isize::MAX as usize - 7, 8))
                .is_err()
        );
        assert!(holds(b, 64, 9));
        a.deallocate(b, l(64, 8));
    }
}

#[test]
fn every_operation_at_every_alignment_through_the_global_handle() {
    every_operation(PitlaneAlloc::new());
}

#[test]
fn every_operation_at_every_alignment_through_an_owned_heap() {
    let heap = Heap::new();
    every_operation(&heap);
}

#[test]
fn global_alloc_fails_cleanly_where_no_mapping_can_serve() {
    let a = PitlaneAlloc::new();
    for layout in [l(0, 1 << 63), l(0, 1 << 62), l(1, 1 << 62)] {
        // SAFETY: valid layouts (size 0 is served by this allocator, see the crate doc).
        assert!(unsafe { a.alloc(layout) }.is_null(), "{layout:?}");
        // SAFETY: as above.
        assert!(unsafe { a.alloc_zeroed(layout) }.is_null(), "{layout:?}");
    }
    // realloc to sizes that no layout allows, or that round past `isize::MAX`, fails and
    // leaves the block (small, large, over-aligned) as it was.
    for old in [l(24, 8), l(100_000, 8), l(100, 1 << 21)] {
        // SAFETY: a valid layout; the block is freed once, after the failed reallocs.
        unsafe {
            let p = a.alloc(old);
            p.write_bytes(0x42, old.size());
            for new_size in [usize::MAX, isize::MAX as usize, isize::MAX as usize - 4095] {
                assert!(
                    a.realloc(p, old, new_size).is_null(),
                    "{old:?} to {new_size}"
                );
            }
            let p = NonNull::new(p).unwrap();
            assert!(holds(p, old.size(), 0x42));
            a.dealloc(p.as_ptr(), old);
        }
    }
}

/// `grow_zeroed` of `p` (`from`, its bytes written with `seed`) to `to`, checking that the
/// old bytes are kept and the added ones zero; `path` names the case in a failure.
///
/// # Safety
/// `p` is a live block of `a` with layout `from`.
unsafe fn grow_zeroed_checked<A: Allocator>(
    a: &A,
    p: NonNull<u8>,
    from: Layout,
    to: Layout,
    seed: u8,
    path: &str,
) -> NonNull<u8> {
    // SAFETY: forwarded from the caller.
    let p = unsafe { a.grow_zeroed(p, from, to) }.unwrap().cast::<u8>();
    assert!(
        holds(p, from.size(), seed) && zero_from(p, from.size(), to.size()),
        "{path}"
    );
    p
}

/// `grow_zeroed` of large blocks over dirty memory, on each of its paths.
fn large_paths<A: Allocator>(a: A) {
    const K: usize = 1024;
    // In place within the mapping: shrink by a little (the mapping keeps its tail), grow back.
    let p = a.allocate(l(100 * K, 8)).unwrap().cast::<u8>();
    fill(p, 100 * K, 0xAA);
    // SAFETY: live blocks with their layouts throughout.
    unsafe {
        let p = a
            .shrink(p, l(100 * K, 8), l(99 * K, 8))
            .unwrap()
            .cast::<u8>();
        let p = grow_zeroed_checked(&a, p, l(99 * K, 8), l(100 * K, 8), 0xAA, "in place");
        a.deallocate(p, l(100 * K, 8));
    }
    // Into the cached run right after it: shrink by much (the tail goes to the cache), grow.
    let p = a.allocate(l(900 * K, 8)).unwrap().cast::<u8>();
    fill(p, 900 * K, 0xBB);
    // SAFETY: as above.
    unsafe {
        let p = a
            .shrink(p, l(900 * K, 8), l(100 * K, 8))
            .unwrap()
            .cast::<u8>();
        let p = grow_zeroed_checked(&a, p, l(100 * K, 8), l(800 * K, 8), 0xBB, "cached tail");
        a.deallocate(p, l(800 * K, 8));
    }
    // Moved into a cached run (a big dirty block freed first), and on by mremap.
    let big = a.allocate(l(3 << 20, 8)).unwrap().cast::<u8>();
    fill(big, 3 << 20, 0xCC);
    let p = a.allocate(l(40 * K, 8)).unwrap().cast::<u8>();
    fill(p, 40 * K, 0xDD);
    // SAFETY: as above.
    unsafe {
        a.deallocate(big, l(3 << 20, 8));
        let p = grow_zeroed_checked(&a, p, l(40 * K, 8), l(2 << 20, 8), 0xDD, "moved");
        fill(p, 2 << 20, 0xEE);
        let p = grow_zeroed_checked(&a, p, l(2 << 20, 8), l(64 << 20, 8), 0xEE, "remapped");
        a.deallocate(p, l(64 << 20, 8));
    }
    // Over-aligned: shrunk in place, grown (moved: the alignment cannot follow a remap).
    let p = a.allocate(l(3 << 20, 2 << 20)).unwrap().cast::<u8>();
    fill(p, 3 << 20, 0x11);
    // SAFETY: as above.
    unsafe {
        let p = a
            .shrink(p, l(3 << 20, 2 << 20), l(K, 2 << 20))
            .unwrap()
            .cast::<u8>();
        let grown = l(5 << 20, 2 << 20);
        let p = grow_zeroed_checked(&a, p, l(K, 2 << 20), grown, 0x11, "over-aligned");
        assert_eq!(p.as_ptr().addr() % (2 << 20), 0);
        a.deallocate(p, grown);
    }
}

#[test]
fn grow_zeroed_zeroes_exactly_the_added_bytes_on_every_large_path() {
    // Keep every freed mapping (the default policy may unmap them between steps).
    let keep = PurgePolicy {
        delay_ms: 60_000,
        retain_ms: 60_000,
        ..pitlane_alloc::purge_policy()
    };
    pitlane_alloc::set_purge_policy(keep);
    large_paths(PitlaneAlloc::new());
    let heap = Heap::new();
    large_paths(&heap);
}
