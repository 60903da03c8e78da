//! An owned heap gives back everything it handed out when dropped. Alone in its binary, so
//! that no other test's blocks move the process-wide figures it reads.

use std::alloc::Layout;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::Heap;

fn fill(p: *mut u8, len: usize, seed: u8) {
    for i in 0..len {
        // SAFETY: the caller's block holds `len` bytes.
        unsafe { p.add(i).write(seed.wrapping_add(i as u8)) };
    }
}

#[test]
fn an_owned_heap_frees_everything_when_dropped() {
    let before = pitlane_alloc::stats();
    for _ in 0..20 {
        let heap = Heap::new();
        for i in 0..5000usize {
            let layout = Layout::from_size_align(1 + i % 3000, 8).unwrap();
            let b = (&heap).allocate(layout).unwrap();
            fill(b.cast::<u8>().as_ptr(), layout.size(), i as u8);
        }
        for _ in 0..10 {
            (&heap)
                .allocate(Layout::from_size_align(1 << 20, 4096).unwrap())
                .unwrap();
        }
        (&heap)
            .allocate(Layout::from_size_align(100_000, 1 << 20).unwrap())
            .unwrap();
        drop(heap);
    }
    pitlane_alloc::collect();
    let after = pitlane_alloc::stats();
    // Twenty heaps of 5000 small blocks and 10 MiB of large ones each: had they leaked,
    // in_use would have grown by over 300 MiB.
    assert!(
        after.in_use < before.in_use + (16 << 20),
        "before {before:?} after {after:?}"
    );
}
