//! An owned `Heap` is `Send`: made on one thread, used on a second (which frees there the
//! blocks the first allocated, and allocates more), dropped on a third, while every thread
//! also allocates from the global heap. Its blocks keep their contents across the moves, and
//! its drop gives everything back. Alone in its binary, so that no other test's blocks move
//! the process-wide figures it reads.

use std::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{Heap, PitlaneAlloc};

/// Blocks of a heap, moved with it (raw pointers are not `Send`).
struct Blocks(Vec<(NonNull<u8>, Layout, u8)>);
// SAFETY: the blocks belong to the heap that moves with them; only the thread that has the
// heap touches them.
unsafe impl Send for Blocks {}

fn layout(i: usize) -> Layout {
    // Small sizes of every class, a few large ones, some over-aligned.
    let size = match i % 50 {
        0 => 100_000 + i,
        1 => 40_000,
        _ => 1 + (i * 37) % 9000,
    };
    Layout::from_size_align(size, 1 << (i % 8)).unwrap()
}

fn fill(heap: &Heap, blocks: &mut Blocks, from: usize, count: usize) {
    for i in from..from + count {
        let l = layout(i);
        let b = heap.allocate_in(l);
        // SAFETY: a live block of `l.size()` bytes.
        unsafe { b.as_ptr().write_bytes(i as u8, l.size()) };
        blocks.0.push((b, l, i as u8));
    }
}

trait AllocateIn {
    fn allocate_in(&self, l: Layout) -> NonNull<u8>;
}

impl AllocateIn for Heap {
    fn allocate_in(&self, l: Layout) -> NonNull<u8> {
        let b = self.allocate(l).unwrap().cast::<u8>();
        assert_eq!(b.as_ptr().addr() % l.align(), 0);
        b
    }
}

fn check(b: NonNull<u8>, l: Layout, seed: u8) {
    // SAFETY: a live block of `l.size()` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), l.size()) };
    assert!(bytes.iter().all(|&x| x == seed), "a block of {l:?} changed");
}

/// Some global-heap traffic on the calling thread, beside the owned heap's.
fn churn_global() {
    let v: Vec<Vec<u8>> = (0..500).map(|i| vec![i as u8; i * 3]).collect();
    assert!(v.iter().enumerate().all(|(i, x)| x.len() == i * 3));
    let a = PitlaneAlloc::new();
    let l = Layout::from_size_align(3000, 8).unwrap();
    let b = a.allocate(l).unwrap();
    // SAFETY: allocated just above.
    unsafe { a.deallocate(b.cast(), l) };
}

#[test]
fn a_heap_moved_between_threads_keeps_its_blocks_and_gives_everything_back() {
    pitlane_alloc::collect();
    let before = pitlane_alloc::stats();
    for round in 0..10 {
        let (heap, blocks) = std::thread::spawn(move || {
            let heap = Heap::new();
            let mut blocks = Blocks(Vec::new());
            fill(&heap, &mut blocks, round, 3000);
            churn_global();
            (heap, blocks)
        })
        .join()
        .unwrap();
        let (heap, blocks) = std::thread::spawn(move || {
            let mut blocks = blocks;
            // Free every other block here (on a thread other than the one that allocated
            // them), after checking it; allocate more.
            let mut kept = Blocks(Vec::new());
            for (k, (b, l, seed)) in blocks.0.drain(..).enumerate() {
                check(b, l, seed);
                if k % 2 == 0 {
                    // SAFETY: a live block of the heap, with its layout, freed once.
                    unsafe { (&heap).deallocate(b, l) };
                } else {
                    kept.0.push((b, l, seed));
                }
            }
            fill(&heap, &mut kept, round + 7, 2000);
            churn_global();
            (heap, kept)
        })
        .join()
        .unwrap();
        std::thread::spawn(move || {
            for &(b, l, seed) in &blocks.0 {
                check(b, l, seed);
            }
            // Dropped here with its blocks still allocated: they go back with it.
            drop(blocks);
            drop(heap);
            churn_global();
        })
        .join()
        .unwrap();
    }
    pitlane_alloc::collect();
    let after = pitlane_alloc::stats();
    // Ten heaps of some 4000 live blocks (a few MiB each) at their drop: leaked, in_use would
    // have grown by tens of MiB.
    assert!(
        after.in_use < before.in_use + (4 << 20),
        "before {before:?} after {after:?}"
    );
}
