//! An owned `Heap` made when the OS refuses memory has no core: every request through it
//! must fail with `AllocError`, `grow` from a zero-sized (dangling) block included, and its
//! drop must do nothing. Memory is refused here by lowering the process's address-space
//! limit (`RLIMIT_AS`) to what it uses, then making heaps until their records need a new
//! mapping. One test in its own binary: the limit is the whole process's while it lasts
//! (and not under `--cfg pitlane_alloc_global`, where the test's own allocations would need
//! new segments of 4 MiB under the limit).
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::Heap;
use pitlane_testkit::memory::with_address_space_limit;

#[test]
fn a_heap_made_without_memory_fails_every_request_cleanly() {
    // Room for every heap this test keeps, made before memory is refused.
    let mut heaps: Vec<Heap> = Vec::with_capacity(100_000);
    let outcome = with_address_space_limit(1 << 20, || {
        // Heap records come 64 KiB at a time; a few hundred heaps need more than the 1 MiB
        // left.
        let mut without_core = None;
        for _ in 0..100_000 {
            let heap = Heap::new();
            if format!("{heap:?}").contains("usable: false") {
                without_core = Some(heap);
                break;
            }
            heaps.push(heap);
        }
        without_core.map(|heap| {
            let small = Layout::from_size_align(16, 8).unwrap();
            let zero = Layout::from_size_align(0, 8).unwrap();
            let allocate = (&heap).allocate(small).is_err();
            let zeroed = (&heap).allocate_zeroed(small).is_err();
            let dangling = (&heap).allocate(zero).unwrap().cast::<u8>();
            // SAFETY: a zero-sized block of this heap, grown to 16 bytes.
            let grow = unsafe { (&heap).grow(dangling, zero, small) }.is_err();
            // SAFETY: as above.
            let grow_zeroed =
                unsafe { (&heap).grow_zeroed(NonNull::dangling(), zero, small) }.is_err();
            drop(heap);
            (allocate, zeroed, grow, grow_zeroed)
        })
    });
    drop(heaps);
    let outcome = outcome.expect("no heap went without a core under the limit");
    assert_eq!(
        outcome,
        (true, true, true, true),
        "(allocate, allocate_zeroed, grow, grow_zeroed) failed"
    );
}
