//! The `raw` interface (what the C `malloc` builds on) at its edges: alignments that are not
//! powers of two, pointers that are not ours but look like a large block, and large blocks
//! freed twice. PitlaneAlloc is *not* the global allocator here.

use pitlane_alloc::raw;

#[test]
fn an_alignment_that_is_not_a_power_of_two_is_refused_at_every_size() {
    for align in [0, 3, 5, 6, 7, 9, 12, 24, 48, 100, 4097, usize::MAX] {
        for size in [0, 1, 8, 100, pitlane_alloc::SMALL_MAX, 1 << 20] {
            let block = raw::malloc(size, align);
            assert!(block.is_null(), "malloc({size}, {align}) gave a block");
            let block = raw::calloc(size, align);
            assert!(block.is_null(), "calloc({size}, {align}) gave a block");
        }
    }
}

#[test]
fn a_foreign_pointer_whose_preceding_bytes_name_a_mapping_is_not_taken_for_ours() {
    // The 64 bytes before a pointer into this foreign memory (three OS pages mapped here,
    // not by the allocator) hold what a large block's header holds: the page-aligned start of
    // a region before the pointer and a length that covers it (a struct of a buffer and its
    // length, say, as any program may keep in memory).
    const LEN: usize = 3 * 4096;
    // SAFETY: a fresh anonymous mapping.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let base = base.cast::<u8>();
    // SAFETY: offsets inside the mapping.
    let (inner, words) = unsafe { (base.add(4096 + 256), base.add(4096 + 256 - 64)) };
    // SAFETY: the 64 bytes before `inner`, inside the mapping, 8-aligned.
    unsafe {
        let words = words.cast::<usize>();
        words.write(base.addr() + 4096);
        words.add(1).write(8192);
        for i in 2..8 {
            words.add(i).write(0);
        }
    }
    assert!(!raw::in_segment(inner));
    assert!(
        !raw::owns(inner),
        "a pointer into a foreign mapping was taken for a large block of ours"
    );
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(base.cast(), LEN) };
}

#[test]
fn a_large_block_freed_is_no_longer_ours_while_its_mapping_is_kept() {
    // Sizes whose mappings the allocator keeps for reuse after the free (in the thread's
    // stash or the shared cache), so the header's bytes are still readable: a C program's
    // second `free` of the block must be refused, not put the mapping in the cache twice
    // (which would hand the same memory to two later blocks).
    for size in [20_000usize, 100_000, 500_000, 3 << 20] {
        let block = raw::malloc(size, 8);
        assert!(!block.is_null());
        assert!(!raw::in_segment(block) && raw::owns(block));
        // SAFETY: a live block of ours, freed once.
        unsafe { raw::free(block) };
        assert!(
            !raw::owns(block),
            "size {size}: a freed large block still looks live"
        );
        // Its mapping is reused by the next block of the size, which is ours again.
        let again = raw::malloc(size, 8);
        assert!(raw::owns(again));
        // SAFETY: as above.
        unsafe { raw::free(again) };

        // Page-aligned: `owns` takes it as ours unread, `owns_block` reads its header.
        let aligned = raw::malloc(size, 4096);
        assert_eq!(aligned.addr() % 4096, 0);
        // SAFETY: a live block of ours (its header is readable), freed once; after the free
        // its mapping is kept, so the header is still readable.
        unsafe {
            assert!(raw::owns_block(aligned));
            raw::free(aligned);
            assert!(
                !raw::owns_block(aligned),
                "size {size}: a freed page-aligned block still looks live"
            );
        }
    }
}

#[test]
fn resized_large_blocks_stay_ours_at_their_new_place() {
    // In place (shrink giving a tail back, growth into a cached run), moved into a cached
    // run, and moved by `mremap`: each time the header moves or changes, `owns` still
    // recognises the block and its contents are kept.
    let mut block = raw::malloc(40_000, 8);
    // SAFETY: a live block of 40,000 bytes.
    unsafe { block.write_bytes(0x33, 40_000) };
    let mut size = 40_000;
    for next in [3 << 20, 100_000, 8 << 20, 30_000, 64 << 20, 20_000] {
        // SAFETY: a live block of ours; the old pointer is not used after a successful
        // realloc except to ask `owns` about it.
        let moved = unsafe { raw::realloc(block, next) };
        assert!(!moved.is_null());
        assert!(raw::owns(moved), "{size} -> {next}");
        let kept = size.min(next);
        // SAFETY: the first `kept` bytes of the live block.
        unsafe {
            assert!((0..kept).step_by(997).all(|i| moved.add(i).read() == 0x33));
            moved.write_bytes(0x33, next);
        }
        block = moved;
        size = next;
    }
    // SAFETY: a live block of ours, freed once.
    unsafe { raw::free(block) };
}

#[test]
fn alignments_up_to_512_mib_and_the_largest_layouts_allow() {
    use allocator_api2::alloc::Allocator;
    use core::alloc::{GlobalAlloc, Layout};
    use pitlane_alloc::PitlaneAlloc;

    let a = PitlaneAlloc::new();
    for align_log in 23..=29 {
        let align = 1usize << align_log;
        for size in [1, 4096, align + 1] {
            let layout = Layout::from_size_align(size, align).unwrap();
            let block = a.allocate(layout).unwrap().cast::<u8>().as_ptr();
            assert_eq!(block.addr() % align, 0, "size {size} align {align}");
            // SAFETY: the first and last bytes of the block.
            unsafe {
                block.write(1);
                block.add(size - 1).write(2);
                assert_eq!(
                    block.read() + block.add(size - 1).read(),
                    if size == 1 { 4 } else { 3 }
                );
                a.deallocate(core::ptr::NonNull::new(block).unwrap(), layout);
            }
            // Through GlobalAlloc and raw, zeroed.
            // SAFETY: a non-zero layout; the block is freed once.
            unsafe {
                let z = a.alloc_zeroed(layout);
                assert!(!z.is_null() && z.addr() % align == 0);
                assert_eq!(z.add(size - 1).read(), 0);
                a.dealloc(z, layout);
            }
            let r = raw::calloc(size, align);
            assert!(!r.is_null() && r.addr() % align == 0);
            // SAFETY: a live block of ours, freed once.
            unsafe { raw::free(r) };
        }
    }
    // Every alignment up to the largest `Layout` allows, with sizes that, rounded up to it,
    // reach `isize::MAX` (or half of it): a clean failure, never an overflow in the rounding
    // of the size or of the mapping's length (which adds the alignment).
    for align_log in 0..=62 {
        let align = 1usize << align_log;
        for size in [
            isize::MAX as usize - align + 1,
            (isize::MAX as usize >> 1) + 1,
        ] {
            let Ok(layout) = Layout::from_size_align(size, align) else {
                continue;
            };
            assert!(a.allocate(layout).is_err(), "size {size} align {align}");
            // SAFETY: a non-zero layout.
            assert!(unsafe { a.alloc(layout) }.is_null());
            assert!(raw::malloc(size, align).is_null());
        }
    }
}
