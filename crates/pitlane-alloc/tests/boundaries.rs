//! Every size-class boundary and large threshold, at every alignment from 1 byte to 8 MiB,
//! through `raw`, `GlobalAlloc`, `Allocator` and owned `Heap`s: alignment, usable size,
//! zeroing, contents kept across `realloc`/`grow`/`shrink` that also change the alignment,
//! impossible sizes refused with the block untouched, `Heap`s dropped with live blocks, and
//! frees racing the exit of the allocating thread. PitlaneAlloc is *not* the global allocator
//! here.

use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{Heap, PitlaneAlloc, raw};

const A: PitlaneAlloc = PitlaneAlloc::new();

/// Every class size, with its neighbours, and the large thresholds the code uses (the small
/// maximum, the stash's 1 MiB, the split minimum of 64 KiB, whole pages).
fn sizes() -> Vec<usize> {
    let classes = [
        8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512,
        640, 768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168,
        8192, 10240, 12288, 14336, 16384,
    ];
    let mut v = vec![0, 1, 2, 7];
    for c in classes {
        v.extend([c - 1, c, c + 1]);
    }
    for t in [
        4096 * 5,
        64 << 10,
        (64 << 10) + 4096 - 64,
        (1 << 20) - 4096 - 64,
        (1 << 20) - 64,
        1 << 20,
        (1 << 20) + 1,
        (4 << 20) - 1,
        4 << 20,
        (4 << 20) + 1,
    ] {
        v.extend([t - 1, t, t + 1]);
    }
    v.sort_unstable();
    v.dedup();
    v
}

fn fill(p: *mut u8, len: usize, seed: u8) {
    for i in 0..len {
        // SAFETY: the caller's block holds `len` bytes.
        unsafe { p.add(i).write(seed.wrapping_add((i % 251) as u8)) };
    }
}

fn holds(p: *const u8, len: usize, seed: u8) -> bool {
    // SAFETY: as in `fill`.
    (0..len).all(|i| unsafe { p.add(i).read() } == seed.wrapping_add((i % 251) as u8))
}

/// PASSES. `raw::malloc`/`calloc` at every class boundary ±1 and every alignment from 1 to
/// 8 MiB (past the page, the small maximum and the segment size): aligned, usable to the
/// last byte, `usable_size` at least the request, `calloc` zeroed over dirty reused memory.
#[test]
fn raw_every_boundary_size_at_every_alignment() {
    for align_log in 0..=23 {
        let align = 1usize << align_log;
        for &size in &sizes() {
            if align >= 1 << 20 && size > 64 << 10 && size % 4096 != 1 {
                continue; // keep the run short: one large size per huge alignment suffices
            }
            let p = raw::malloc(size, align);
            assert!(!p.is_null(), "malloc({size}, {align})");
            assert_eq!(p.addr() % align, 0, "malloc({size}, {align}) misaligned");
            // SAFETY: a live block of ours.
            let usable = unsafe { raw::usable_size(p) };
            assert!(usable >= size, "usable {usable} < {size} at align {align}");
            fill(p, usable, 0xA5);
            // SAFETY: freed once; the next calloc likely reuses the dirty memory.
            unsafe { raw::free(p) };
            let z = raw::calloc(size, align);
            assert!(!z.is_null() && z.addr() % align == 0);
            assert!(
                // SAFETY: `size` bytes of a live block.
                (0..size).all(|i| unsafe { z.add(i).read() } == 0),
                "calloc({size}, {align}) not zeroed"
            );
            // SAFETY: freed once.
            unsafe { raw::free(z) };
        }
    }
}

/// PASSES. `raw::realloc` of blocks aligned from 16 B to 8 MiB (small classes, page-aligned
/// large blocks that may move, over-aligned ones that may not), to every boundary size: the
/// contents up to the smaller of the usable size and the new size are kept, and the usable
/// size is at least the new size. This is the C `realloc` of a `memalign`'d block.
#[test]
fn raw_realloc_of_aligned_blocks_keeps_what_the_block_held() {
    let targets = sizes();
    for align_log in [4, 6, 7, 12, 13, 14, 15, 16, 20, 22, 23] {
        let align = 1usize << align_log;
        for &first in &[1usize, 100, 16384, 20000, 300_000] {
            for &size in targets.iter().step_by(3) {
                let p = raw::malloc(first, align);
                assert!(!p.is_null() && p.addr() % align == 0);
                // SAFETY: a live block.
                let usable = unsafe { raw::usable_size(p) };
                // A C program may use all of `malloc_usable_size`.
                fill(p, usable, 3);
                // SAFETY: a live block, replaced by the result.
                let q = unsafe { raw::realloc(p, size) };
                assert!(!q.is_null(), "realloc({first}@{align} -> {size})");
                // SAFETY: a live block.
                let now = unsafe { raw::usable_size(q) };
                assert!(now >= size.max(1), "usable {now} < {size}");
                assert!(
                    holds(q, usable.min(size), 3),
                    "realloc {first}@{align} -> {size} lost data"
                );
                // SAFETY: freed once.
                unsafe { raw::free(q) };
            }
        }
    }
}

/// PASSES. `raw::realloc` to sizes that cannot be served (`usize::MAX`, `isize::MAX`, the
/// exact threshold `isize::MAX - 16` and just under) fails with the block untouched.
#[test]
fn raw_realloc_to_impossible_sizes_leaves_the_block() {
    for (first, align) in [(24, 8), (100_000, 8), (100_000, 1 << 16), (5000, 4096)] {
        let p = raw::malloc(first, align);
        fill(p, first, 9);
        for size in [
            usize::MAX,
            isize::MAX as usize,
            isize::MAX as usize - 15,
            isize::MAX as usize - 16,
            isize::MAX as usize - 17,
            isize::MAX as usize - 4096 - 64,
            (isize::MAX as usize >> 1) + 1,
        ] {
            // SAFETY: a live block; it stays ours when the result is null.
            let q = unsafe { raw::realloc(p, size) };
            assert!(q.is_null(), "realloc to {size} gave a block");
            assert!(
                holds(p, first, 9),
                "a failed realloc to {size} changed the block"
            );
        }
        // SAFETY: freed once.
        unsafe { raw::free(p) };
    }
}

/// PASSES. `Allocator::grow`, `grow_zeroed` and `shrink` chains over every boundary size, the
/// alignment changing at each step through 1, 16, 4096, 16 KiB, 64 KiB and 4 MiB (past the
/// segment), for the global handle and an owned heap: contents kept, additions zeroed,
/// results aligned; a final shrink to 0 frees.
fn chains<T: Allocator>(a: T) {
    let aligns = [1usize, 16, 4096, 16384, 1 << 16, 1 << 22, 8];
    let sizes = sizes();
    for (k, window) in sizes.windows(2).enumerate().step_by(2) {
        let mut layout = Layout::from_size_align(window[0], aligns[k % aligns.len()]).unwrap();
        let mut p = a.allocate(layout).unwrap().cast::<u8>();
        fill(p.as_ptr(), layout.size(), k as u8);
        // Grow to the next size, at another alignment, zeroed.
        let grown = Layout::from_size_align(window[1], aligns[(k + 1) % aligns.len()]).unwrap();
        // SAFETY: a live block of `a` with `layout`.
        let q = unsafe { a.grow_zeroed(p, layout, grown) }.unwrap();
        assert!(q.len() >= grown.size());
        p = q.cast();
        assert_eq!(p.as_ptr().addr() % grown.align(), 0);
        assert!(
            holds(p.as_ptr(), layout.size(), k as u8),
            "grow_zeroed lost data"
        );
        assert!(
            // SAFETY: the grown block's bytes.
            (layout.size()..grown.size()).all(|i| unsafe { p.as_ptr().add(i).read() } == 0),
            "grow_zeroed {layout:?} -> {grown:?} left garbage"
        );
        let kept = layout.size();
        layout = grown;
        // Shrink back at a third alignment.
        let back = Layout::from_size_align(kept / 2, aligns[(k + 2) % aligns.len()]).unwrap();
        // SAFETY: a live block of `a` with `layout`.
        let r = unsafe { a.shrink(p, layout, back) }.unwrap();
        p = r.cast();
        assert_eq!(p.as_ptr().addr() % back.align(), 0);
        assert!(holds(p.as_ptr(), back.size(), k as u8), "shrink lost data");
        layout = back;
        // Shrink to 0 frees: the result is dangling and aligned.
        let zero = Layout::from_size_align(0, layout.align()).unwrap();
        // SAFETY: as above.
        let z = unsafe { a.shrink(p, layout, zero) }.unwrap();
        assert_eq!(z.len(), 0);
        assert_eq!(z.cast::<u8>().as_ptr().addr() % zero.align(), 0);
        // And growing from that zero-sized block allocates anew.
        // SAFETY: a zero-sized block of `a`.
        let g =
            unsafe { a.grow(z.cast(), zero, Layout::from_size_align(100, 64).unwrap()) }.unwrap();
        // SAFETY: a live block with that layout.
        unsafe { a.deallocate(g.cast(), Layout::from_size_align(100, 64).unwrap()) };
    }
}

#[test]
fn allocator_chains_change_alignment_across_every_boundary_global() {
    chains(A);
}

#[test]
fn allocator_chains_change_alignment_across_every_boundary_owned_heap() {
    let heap = Heap::new();
    chains(&heap);
}

/// PASSES. `GlobalAlloc::realloc` with the alignment kept (the only kind it has) from every
/// boundary size to every other boundary size in steps, at alignments 1 to 8 MiB; and to size
/// 0 and back at those alignments.
#[test]
fn global_realloc_across_boundaries_at_every_alignment() {
    let sizes = sizes();
    for align_log in [0, 3, 4, 6, 12, 14, 15, 16, 21, 23] {
        let align = 1usize << align_log;
        for (i, &from) in sizes.iter().enumerate().step_by(5) {
            for &to in sizes.iter().skip(i % 7).step_by(11) {
                let layout = Layout::from_size_align(from, align).unwrap();
                // SAFETY: GlobalAlloc on a valid layout (size 0 served with a real block).
                unsafe {
                    let p = A.alloc(layout);
                    assert!(!p.is_null() && p.addr() % align == 0);
                    fill(p, from, 77);
                    let q = A.realloc(p, layout, to);
                    assert!(
                        !q.is_null() && q.addr() % align == 0,
                        "{from} -> {to} @ {align}"
                    );
                    assert!(
                        holds(q, from.min(to), 77),
                        "{from} -> {to} @ {align} lost data"
                    );
                    fill(q, to, 78);
                    A.dealloc(q, Layout::from_size_align(to, align).unwrap());
                }
            }
        }
    }
}

/// PASSES. A `Heap` dropped with live small, large and over-aligned blocks, while another
/// heap and the global handle hold blocks of the same classes: theirs stay intact, and the
/// next `Heap` (which reuses the dropped one's record) hands out blocks that overlap none.
#[test]
fn heap_dropped_with_live_blocks_of_every_kind_leaves_others_intact() {
    let keep = Heap::new();
    let mut others: Vec<(NonNull<u8>, Layout, u8, bool)> = Vec::new();
    for round in 0..20u8 {
        let doomed = Heap::new();
        for (k, &size) in sizes().iter().enumerate() {
            if size == 0 {
                continue;
            }
            let layout = Layout::from_size_align(size, [8, 64, 4096, 1 << 16][k % 4]).unwrap();
            let d = (&doomed).allocate(layout).unwrap().cast::<u8>();
            fill(d.as_ptr(), size.min(4096), 0xEE);
            if k % 5 == round as usize % 5 && size <= 200_000 {
                let seed = round.wrapping_mul(31).wrapping_add(k as u8);
                let owned = k % 2 == 0;
                let p = if owned {
                    (&keep).allocate(layout)
                } else {
                    A.allocate(layout)
                }
                .unwrap()
                .cast::<u8>();
                fill(p.as_ptr(), size, seed);
                others.push((p, layout, seed, owned));
            }
        }
        drop(doomed);
        // The next heap's blocks, written all over, must not land on the survivors.
        let next = Heap::new();
        for &size in &sizes() {
            if size == 0 || size > 200_000 {
                continue;
            }
            let p = (&next)
                .allocate(Layout::from_size_align(size, 8).unwrap())
                .unwrap();
            fill(p.cast::<u8>().as_ptr(), size, 0x11);
        }
        drop(next);
        for &(p, l, seed, _) in &others {
            assert!(
                holds(p.as_ptr(), l.size(), seed),
                "a survivor of {l:?} overwritten"
            );
        }
    }
    for (p, l, _, owned) in others {
        // SAFETY: each block freed once, through the allocator that made it.
        unsafe {
            if owned {
                (&keep).deallocate(p, l);
            } else {
                A.deallocate(p, l);
            }
        }
    }
    drop(keep);
}

/// PASSES. Threads allocate small and large blocks and exit while other threads free those
/// blocks (and `realloc` them through `raw`) at the same moment: no block is lost or shared,
/// and the in-use total comes back.
#[test]
fn frees_race_the_exit_of_the_allocating_thread() {
    use std::sync::mpsc;
    for _round in 0..30 {
        let (tx, rx) = mpsc::channel::<Vec<(Block, usize, u8)>>();
        let producers: Vec<_> = (0..3)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut v = Vec::new();
                    for (k, &size) in sizes().iter().enumerate() {
                        if size > 300_000 {
                            continue;
                        }
                        let p = raw::malloc(size, 8);
                        let seed = (t * 50 + k) as u8;
                        fill(p, size, seed);
                        v.push((Block(p), size, seed));
                    }
                    tx.send(v).unwrap();
                    // Exit at once, while the consumer frees.
                })
            })
            .collect();
        drop(tx);
        let consumer = std::thread::spawn(move || {
            for batch in rx {
                for (Block(p), size, seed) in batch {
                    assert!(holds(p, size, seed), "a block changed before its free");
                    // SAFETY: a live block of ours, resized then freed once.
                    unsafe {
                        let q = raw::realloc(p, size + 1);
                        assert!(holds(q, size, seed));
                        raw::free(q);
                    }
                }
            }
        });
        for p in producers {
            p.join().unwrap();
        }
        consumer.join().unwrap();
    }
}

/// A block handed to another thread.
struct Block(*mut u8);
// SAFETY: a block of the process-wide allocator may be freed on any thread.
unsafe impl Send for Block {}

/// A block of size 0 is 16-aligned, as the C `malloc(0)` promises (0 is a multiple of 16):
/// size 0 once took the 8-byte class, and every other block was only 8-aligned.
#[test]
fn zero_sized_raw_blocks_are_16_aligned() {
    let blocks: Vec<*mut u8> = (0..64)
        .flat_map(|_| [raw::malloc(0, 8), raw::calloc(0, 8)])
        .collect();
    for &block in &blocks {
        assert!(!block.is_null());
        assert_eq!(block.addr() % 16, 0, "{block:p}");
        // SAFETY: a live block of ours, freed once.
        assert!(unsafe { raw::usable_size(block) } >= 16);
    }
    for block in blocks {
        // SAFETY: as above.
        unsafe { raw::free(block) };
    }
}
