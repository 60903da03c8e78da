//! Owned heaps where their lives get awkward: two heaps interleaved block by block (each
//! block freed through its own heap, grown across the small/large boundary), a heap kept in a
//! `thread_local!` (used by the thread, dropped by its exit with blocks live), a heap made
//! on a thread that exited before the heap was used elsewhere, and heaps made and dropped in
//! a loop of threads. Every block keeps its pattern until its heap frees it, and nothing is
//! left in use once the heaps are gone.

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use allocator_api2::vec::Vec as AVec;
use pitlane_alloc::Heap;

/// The tests take turns, so that the last one's figures are its own.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fill(p: NonNull<u8>, len: usize, seed: u8) {
    // SAFETY: `len` bytes of a live block.
    unsafe { p.as_ptr().write_bytes(seed, len) };
}

fn holds(p: NonNull<u8>, len: usize, seed: u8) -> bool {
    // SAFETY: `len` bytes of a live block.
    (0..len).all(|i| unsafe { p.as_ptr().add(i).read() } == seed)
}

fn layout(i: usize) -> Layout {
    let size = match i % 23 {
        0 => 70_000 + i,
        1 => 16_384,
        2 => 16_385,
        _ => 1 + (i * 131) % 5000,
    };
    Layout::from_size_align(size, 1 << (i % 13)).unwrap()
}

#[test]
fn two_heaps_interleaved_keep_their_blocks_apart() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let (h1, h2) = (Heap::new(), Heap::new());
    let heaps = [&h1, &h2];
    let mut live: Vec<(usize, NonNull<u8>, Layout, u8)> = Vec::new();
    for i in 0..4000 {
        let h = i % 2;
        let l = layout(i);
        let p = heaps[h].allocate(l).unwrap().cast::<u8>();
        assert_eq!(p.as_ptr().addr() % l.align(), 0);
        fill(p, l.size(), i as u8);
        live.push((h, p, l, i as u8));
        if i % 3 == 0 {
            // Grow (or shrink) an older block of either heap through its own heap, to a size
            // on the other side of the small/large boundary, with another alignment.
            let at = (i * 7) % live.len();
            let (h, p, l, seed) = live[at];
            assert!(holds(p, l.size(), seed), "block {at} of heap {h} changed");
            let new = layout(i + 11);
            // SAFETY: a live block of heap `h` with layout `l`.
            let q = unsafe {
                if new.size() >= l.size() {
                    heaps[h].grow_zeroed(p, l, new)
                } else {
                    heaps[h].shrink(p, l, new)
                }
            }
            .unwrap()
            .cast::<u8>();
            assert_eq!(q.as_ptr().addr() % new.align(), 0);
            let kept = l.size().min(new.size());
            assert!(holds(q, kept, seed), "resize lost the contents");
            if new.size() > l.size() {
                // SAFETY: the bytes grow_zeroed added.
                let added =
                    unsafe { core::slice::from_raw_parts(q.as_ptr().add(kept), new.size() - kept) };
                assert!(added.iter().all(|&b| b == 0), "grow_zeroed left a byte");
            }
            fill(q, new.size(), seed);
            live[at] = (h, q, new, seed);
        }
        if i % 5 == 0 {
            let (h, p, l, seed) = live.swap_remove((i * 13) % live.len());
            assert!(holds(p, l.size(), seed));
            // SAFETY: a live block of heap `h`, freed once.
            unsafe { heaps[h].deallocate(p, l) };
        }
    }
    for &(_, p, l, seed) in &live {
        assert!(holds(p, l.size(), seed));
    }
    // Drop the first heap with its blocks live: the second's blocks are untouched.
    drop(h1);
    for &(h, p, l, seed) in &live {
        if h == 1 {
            assert!(
                holds(p, l.size(), seed),
                "dropping one heap touched the other's block"
            );
        }
    }
}

/// A heap and its live blocks, kept by a thread.
type Kept = (Heap, Vec<(NonNull<u8>, Layout)>);

thread_local! {
    static LOCAL: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

#[test]
fn a_heap_in_a_thread_local_is_dropped_at_thread_exit_with_blocks_live() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    for round in 0..50 {
        std::thread::spawn(move || {
            LOCAL.with(|slot| {
                let heap = Heap::new();
                let mut blocks = Vec::new();
                for i in 0..200 {
                    let l = layout(i + round);
                    let p = (&heap).allocate(l).unwrap().cast::<u8>();
                    fill(p, l.size(), 7);
                    blocks.push((p, l));
                }
                *slot.borrow_mut() = Some((heap, blocks));
            });
            // Allocate from the global heap too, so the thread has one to park at exit.
            let v: Vec<u64> = (0..1000).collect();
            assert_eq!(v.iter().sum::<u64>(), 499_500);
            // Return with the heap and its blocks in the thread-local: its destructor drops it.
        })
        .join()
        .unwrap();
    }
}

/// A heap made (and used) on one thread, whose thread then exits; another thread goes on
/// using it and drops it.
#[test]
fn a_heap_outlives_the_thread_that_made_it() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    struct Moved(Heap, Vec<(NonNull<u8>, Layout)>);
    // SAFETY: the blocks move with their heap; one thread at a time uses them.
    unsafe impl Send for Moved {}
    let mut moved = std::thread::spawn(|| {
        let heap = Heap::new();
        let mut blocks = Vec::new();
        for i in 0..500 {
            let l = layout(i);
            let p = (&heap).allocate(l).unwrap().cast::<u8>();
            fill(p, l.size(), i as u8);
            blocks.push((p, l));
        }
        Moved(heap, blocks)
    })
    .join()
    .unwrap();
    // Threads come and go meanwhile, and take over the exited thread's parked heap.
    for _ in 0..20 {
        std::thread::spawn(|| drop((0..100).map(|i| vec![i as u8; 100 + i]).collect::<Vec<_>>()))
            .join()
            .unwrap();
    }
    std::thread::spawn(move || {
        let heap = &moved.0;
        for (i, &(p, l)) in moved.1.iter().enumerate() {
            assert!(
                holds(p, l.size(), i as u8),
                "block {i} changed after its thread exited"
            );
        }
        for (p, l) in moved.1.drain(..250) {
            // SAFETY: live blocks of this heap, freed once.
            unsafe { heap.deallocate(p, l) };
        }
        let mut v = AVec::new_in(heap);
        v.extend(0..100_000u32);
        assert_eq!(v.iter().map(|&x| u64::from(x)).sum::<u64>(), 4_999_950_000);
        drop(v);
        drop(moved);
    })
    .join()
    .unwrap();
}

#[test]
fn heaps_made_and_dropped_by_threads_in_a_loop_reuse_their_records() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let before = pitlane_alloc::stats();
    for round in 0..200 {
        std::thread::spawn(move || {
            let heap = Heap::new();
            let mut v = AVec::new_in(&heap);
            for i in 0..(1000 + round) {
                v.push([i as u64; 4]);
            }
            let leaked = AVec::<u8, _>::with_capacity_in(100_000, &heap).leak();
            leaked.len()
        })
        .join()
        .unwrap();
    }
    // Each heap's pages and its leaked 100 KB went back when it dropped (200 of them would
    // be 20 MB): the pages went to the pool for the next heap, a few segments at most.
    let after = pitlane_alloc::stats();
    assert!(
        after.in_use < before.in_use + (2 << 20),
        "{before:?} -> {after:?}"
    );
    assert!(
        after.segments <= before.segments + 4,
        "{before:?} -> {after:?}"
    );
}
