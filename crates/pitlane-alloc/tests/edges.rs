//! Edge cases through both interfaces, with PitlaneAlloc *not* the global allocator (so a
//! failure here cannot hide in the harness): zero sizes, huge sizes, every alignment, every
//! small size, and realloc across and within classes and mappings.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{Heap, PitlaneAlloc, SMALL_MAX};

const A: PitlaneAlloc = PitlaneAlloc::new();

fn fill(p: *mut u8, len: usize, seed: u8) {
    for i in 0..len {
        // SAFETY: the caller's block holds `len` bytes.
        unsafe { p.add(i).write(seed.wrapping_add(i as u8)) };
    }
}

fn check(p: *const u8, len: usize, seed: u8) {
    for i in 0..len {
        // SAFETY: as in `fill`.
        let byte = unsafe { p.add(i).read() };
        assert_eq!(byte, seed.wrapping_add(i as u8), "byte {i}");
    }
}

#[test]
fn zero_sized_requests() {
    for align in [1, 8, 64, 4096, 1 << 20] {
        let layout = Layout::from_size_align(0, align).unwrap();
        let block = A.allocate(layout).unwrap();
        assert_eq!(block.len(), 0);
        assert_eq!(block.cast::<u8>().as_ptr().addr() % align, 0);
        // SAFETY: the block came from `allocate` with this layout.
        unsafe { A.deallocate(block.cast(), layout) };
        // Through GlobalAlloc (where size 0 is not allowed) it still gets a real block.
        // SAFETY: nothing in this allocator relies on the size being non-zero.
        let p = unsafe { A.alloc(layout) };
        assert!(!p.is_null());
        assert_eq!(p.addr() % align, 0);
        // SAFETY: just allocated with this layout.
        unsafe { A.dealloc(p, layout) };
    }
}

#[test]
fn huge_requests_fail_cleanly() {
    for align in [1usize, 8, 4096, 1 << 16, 1 << 21] {
        for size in [
            isize::MAX as usize - (align - 1),
            isize::MAX as usize / 2,
            1 << 47,
        ] {
            let Ok(layout) = Layout::from_size_align(size, align) else {
                continue;
            };
            assert!(A.allocate(layout).is_err(), "size {size} align {align}");
            assert!(A.allocate_zeroed(layout).is_err());
            // SAFETY: a valid, non-zero layout.
            assert!(unsafe { A.alloc(layout) }.is_null());
            // SAFETY: as above.
            assert!(unsafe { A.alloc_zeroed(layout) }.is_null());
            let heap = Heap::new();
            assert!((&heap).allocate(layout).is_err());
        }
    }
    // A realloc to a huge size fails and leaves the block as it was.
    let layout = Layout::from_size_align(100, 8).unwrap();
    // SAFETY: valid layouts; the block is freed once.
    unsafe {
        let p = A.alloc(layout);
        fill(p, 100, 3);
        assert!(A.realloc(p, layout, isize::MAX as usize - 7).is_null());
        assert!(A.realloc(p, layout, 1 << 47).is_null());
        check(p, 100, 3);
        A.dealloc(p, layout);
    }
}

#[test]
fn every_alignment_up_to_4_mib() {
    for align_log in 0..=22 {
        let align = 1usize << align_log;
        for size in [
            1,
            7,
            align / 2 + 1,
            align,
            align + 1,
            3 * align / 2,
            20_000,
            100_000,
        ] {
            let layout = Layout::from_size_align(size.max(1), align).unwrap();
            let block = A.allocate(layout).unwrap();
            let p = block.cast::<u8>().as_ptr();
            assert_eq!(p.addr() % align, 0, "size {size} align {align}");
            fill(p, layout.size(), align_log as u8);
            check(p, layout.size(), align_log as u8);
            // SAFETY: allocated just above with `layout`.
            unsafe { A.deallocate(block.cast(), layout) };
            // Zeroed, through GlobalAlloc.
            // SAFETY: a valid layout; freed right after.
            unsafe {
                let z = A.alloc_zeroed(layout);
                assert_eq!(z.addr() % align, 0);
                assert!((0..layout.size()).all(|i| z.add(i).read() == 0));
                A.dealloc(z, layout);
            }
        }
    }
}

#[test]
fn every_small_size_is_usable_to_its_last_byte_and_blocks_do_not_overlap() {
    let mut live = Vec::new();
    for size in (1..=SMALL_MAX + 64).step_by(7) {
        let layout = Layout::from_size_align(size, 8).unwrap();
        // SAFETY: a valid layout.
        let p = unsafe { A.alloc(layout) };
        assert!(!p.is_null());
        fill(p, size, size as u8);
        live.push((p, layout));
    }
    for &(p, layout) in &live {
        check(p, layout.size(), layout.size() as u8);
    }
    for (p, layout) in live {
        // SAFETY: allocated above.
        unsafe { A.dealloc(p, layout) };
    }
}

#[test]
fn realloc_in_place_within_a_class_and_moving_across() {
    let l = |size| Layout::from_size_align(size, 8).unwrap();
    // SAFETY: every pointer is used with the layout it currently has.
    unsafe {
        // 20 and 24 bytes share the 24-byte class: in place.
        let p = A.alloc(l(20));
        fill(p, 20, 1);
        let q = A.realloc(p, l(20), 24);
        assert_eq!(p, q);
        check(q, 20, 1);
        // Grow across classes and up into large blocks, then back down.
        let mut p = q;
        let mut size = 24;
        fill(p, size, 9);
        for new in [100, 1000, 16_000, 16_385, 100_000, 3 << 20, 40 << 20] {
            let q = A.realloc(p, l(size), new);
            assert!(!q.is_null());
            check(q, size, 9);
            fill(q, new, 9);
            p = q;
            size = new;
        }
        for new in [39 << 20, 1 << 20, 20_000, 16_384, 500, 8] {
            let q = A.realloc(p, l(size), new);
            assert!(!q.is_null());
            check(q, new, 9);
            p = q;
            size = new;
        }
        A.dealloc(p, l(size));
        // A large block grown within its mapping stays put.
        let p = A.alloc(l(20_000));
        let q = A.realloc(p, l(20_000), 20_400);
        assert_eq!(p, q, "room left in the mapping's last page");
        A.dealloc(q, l(20_400));
    }
}

#[test]
fn allocator_grow_and_shrink_keep_contents_and_zero_what_they_add() {
    let l = |size, align| Layout::from_size_align(size, align).unwrap();
    // SAFETY: every block is used with its current layout.
    unsafe {
        let block = A.allocate(l(10, 16)).unwrap().cast::<u8>();
        fill(block.as_ptr(), 10, 4);
        let grown = A.grow_zeroed(block, l(10, 16), l(5000, 16)).unwrap();
        assert_eq!(grown.len(), 5000);
        let g = grown.cast::<u8>().as_ptr();
        check(g, 10, 4);
        assert!((10..5000).all(|i| g.add(i).read() == 0));
        // Growing to a larger alignment moves if it must, and keeps the bytes.
        let moved = A
            .grow(NonNull::new(g).unwrap(), l(5000, 16), l(6000, 4096))
            .unwrap();
        let m = moved.cast::<u8>().as_ptr();
        assert_eq!(m.addr() % 4096, 0);
        check(m, 10, 4);
        let shrunk = A
            .shrink(NonNull::new(m).unwrap(), l(6000, 4096), l(3, 4096))
            .unwrap();
        check(shrunk.cast::<u8>().as_ptr(), 3, 4);
        // Shrinking to zero frees the block and hands back a dangling one.
        let zero = A.shrink(shrunk.cast(), l(3, 4096), l(0, 4096)).unwrap();
        assert_eq!(zero.len(), 0);
        // Growing from a zero-sized (dangling) block allocates.
        let from_zero = A.grow(zero.cast(), l(0, 4096), l(64, 4096)).unwrap();
        A.deallocate(from_zero.cast(), l(64, 4096));
    }
}

#[test]
fn an_owned_heap_reuses_what_it_frees_and_serves_collections() {
    let heap = Heap::new();
    let layout = Layout::from_size_align(48, 8).unwrap();
    let a = (&heap).allocate(layout).unwrap();
    // SAFETY: allocated just above.
    unsafe { (&heap).deallocate(a.cast(), layout) };
    let b = (&heap).allocate(layout).unwrap();
    assert_eq!(
        a.cast::<u8>(),
        b.cast::<u8>(),
        "a freed block is the next one handed out"
    );
    let mut v = allocator_api2::vec::Vec::new_in(&heap);
    for i in 0..100_000u64 {
        v.push(i);
    }
    v.shrink_to_fit();
    assert_eq!(v.iter().sum::<u64>(), 4_999_950_000);
    let mut bx = allocator_api2::boxed::Box::new_in([0u8; 40_000], &heap);
    bx[39_999] = 1;
    assert_eq!(bx.iter().map(|&x| x as u32).sum::<u32>(), 1);
}

#[test]
fn stats_follow_large_blocks() {
    let layout = Layout::from_size_align(8 << 20, 8).unwrap();
    let before = pitlane_alloc::stats().in_use;
    let block = A.allocate(layout).unwrap();
    let during = pitlane_alloc::stats().in_use;
    // Other tests run at the same time; only this block is certain to be counted.
    assert!(during >= 8 << 20, "{before} -> {during}");
    // SAFETY: allocated just above.
    unsafe { A.deallocate(block.cast(), layout) };
    let classes = pitlane_alloc::class_stats();
    assert_eq!(classes.len(), 40);
    assert!(
        classes
            .windows(2)
            .all(|w| w[0].block_size < w[1].block_size)
    );
}

#[test]
fn the_raw_fast_paths_serve_or_decline_without_touching_what_they_decline() {
    use pitlane_alloc::raw;

    // Past the small sizes: declined, whatever the size.
    assert!(raw::malloc_fast(SMALL_MAX + 1).is_null());
    assert!(raw::malloc_fast(usize::MAX).is_null());
    // Null and a pointer outside our segments: declined without being read.
    // SAFETY: null and a stack address are outside our segments.
    unsafe {
        assert!(!raw::free_fast(std::ptr::null_mut()));
        let mut on_stack = 7u64;
        assert!(!raw::free_fast((&raw mut on_stack).cast()));
        assert_eq!(on_stack, 7);
    }
    // 0, 1 and the largest small size: a usable block, from the fast path or (on this thread's
    // first use of a class) from `malloc`; the fast free takes it or `free` does.
    for size in [0, 1, 8, 64, SMALL_MAX] {
        let mut blocks = Vec::new();
        for _ in 0..64 {
            let mut block = raw::malloc_fast(size);
            if block.is_null() {
                block = raw::malloc(size, 8);
            }
            assert!(!block.is_null() && block.addr() % 8 == 0, "size {size}");
            // SAFETY: a live block of at least `size` bytes (one byte for size 0).
            unsafe { assert!(raw::usable_size(block) >= size.max(1)) };
            fill(block, size, size as u8);
            blocks.push(block);
        }
        let mut distinct = blocks.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            blocks.len(),
            "size {size}: a block handed out twice"
        );
        for block in blocks {
            check(block, size, size as u8);
            // SAFETY: a live block of ours, freed once.
            unsafe {
                if !raw::free_fast(block) {
                    raw::free(block);
                }
            }
        }
    }
}

#[test]
fn frees_into_a_full_page_through_the_fast_path_keep_every_block_once() {
    use pitlane_alloc::raw;

    // A thread of its own, so that its heap starts empty: its first page of the class fills
    // and goes to the full list (with no free block) before the later pages are used.
    std::thread::spawn(|| {
        const SIZE: usize = 48;
        const COUNT: usize = 4_000; // about three 64 KiB pages of 48-byte blocks
        let blocks: Vec<*mut u8> = (0..COUNT)
            .map(|i| {
                let block = raw::malloc(SIZE, 8);
                assert!(!block.is_null());
                fill(block, SIZE, i as u8);
                block
            })
            .collect();
        // SAFETY: live blocks of ours, each freed once.
        unsafe {
            // The first blocks' page is full (unless this thread took over a parked heap
            // whose page got remote frees meanwhile): the fast path declines the first free
            // (its free list is empty), `free` takes it and moves the page back to its class
            // list, and the next frees into the page need only the push. A debug build
            // catches a count that goes wrong on the way (an overflow in `used`).
            for (i, &block) in blocks.iter().enumerate().take(2) {
                check(block, SIZE, i as u8);
                if !raw::free_fast(block) {
                    raw::free(block);
                }
            }
            // A block just freed is the head of its page's free list (or its page went back
            // to the pool): declined, nothing done.
            assert!(!raw::free_fast(blocks[1]));
            for (i, &block) in blocks.iter().enumerate().skip(2) {
                check(block, SIZE, i as u8);
                if !raw::free_fast(block) {
                    raw::free(block);
                }
            }
        }
        // Every block came back once: what is handed out again is distinct.
        let mut again: Vec<*mut u8> = (0..COUNT).map(|_| raw::malloc(SIZE, 8)).collect();
        again.sort();
        again.dedup();
        assert_eq!(again.len(), COUNT, "a block handed out twice");
        for block in again {
            // SAFETY: live blocks of ours, each freed once.
            unsafe { raw::free(block) };
        }
    })
    .join()
    .unwrap();
}
