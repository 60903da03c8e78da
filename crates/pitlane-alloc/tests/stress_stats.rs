//! `stats()` and `class_stats()` read while other threads allocate, free (locally and
//! remotely), map and unmap large blocks, exit and hand their heaps over, and `collect()`:
//! every snapshot stays sane — bytes in use never above bytes mapped, purged and cached memory
//! within what is mapped, no figure that wrapped below zero, and per class no more blocks in
//! use than the class's pages can hold. Threads are POSIX threads started by the testkit and
//! blocks change hands through atomics only, so ThreadSanitizer sees every hand-over (CI runs
//! the `stress_*` tests under it).

use std::alloc::Layout;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PAGE_SIZE, PitlaneAlloc, class_stats, stats};
use pitlane_testkit::stress::run_threads;

const A: PitlaneAlloc = PitlaneAlloc::new();

/// Blocks between threads: slot `i` holds a block of `layout(i)` or null.
static SLOTS: [AtomicPtr<u8>; 512] = [const { AtomicPtr::new(ptr::null_mut()) }; 512];

fn layout(i: usize) -> Layout {
    match i % 16 {
        // Over-aligned large blocks: mapped and unmapped on every allocation and free.
        0 => Layout::from_size_align(1 << 20, 1 << 21).unwrap(),
        1 => Layout::from_size_align(200_000 + i * 100, 8).unwrap(),
        _ => Layout::from_size_align(1 + (i * 131) % 16_000, 8).unwrap(),
    }
}

fn free(i: usize, p: *mut u8) {
    // SAFETY: a live block of slot `i`, with its layout, freed once.
    unsafe {
        assert_eq!(*p, i as u8);
        A.deallocate(NonNull::new_unchecked(p), layout(i));
    }
}

/// Swaps fresh blocks into random slots (freeing what was there, often another thread's)
/// for `steps` steps.
fn churn(seed: u64, steps: usize) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % 512) as usize;
        let p = A
            .allocate(layout(i))
            .expect("allocation")
            .cast::<u8>()
            .as_ptr();
        // SAFETY: a fresh block of at least one byte.
        unsafe { p.write(i as u8) };
        let old = SLOTS[i].swap(p, Ordering::AcqRel);
        if !old.is_null() {
            free(i, old);
        }
    }
}

#[test]
fn snapshots_stay_consistent_under_concurrent_use() {
    let stop = AtomicBool::new(false);
    let snapshots = run_threads(4, |t| {
        if t > 0 {
            // Threads come and go: their heaps are parked and taken over.
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                run_threads(1, |_| churn(t as u64 * 1000 + round, 2000));
                round += 1;
                if round % 4 == 0 {
                    pitlane_alloc::collect();
                }
            }
            return 0u64;
        }
        // The others stop when this thread ends, even by a failed check (else they would
        // churn for ever and the failure would never be reported).
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        let mut snapshots = 0;
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(3) {
            let st = stats();
            assert!(st.in_use <= st.mapped, "in use above mapped: {st:?}");
            assert!(st.large_cached <= st.mapped, "{st:?}");
            assert!(st.purged <= st.mapped, "{st:?}");
            assert!(
                st.mapped < 1 << 40 && st.in_use < 1 << 40,
                "a figure wrapped: {st:?}"
            );
            assert!(
                st.free_pages.0 < 1 << 30 && st.free_pages.1 < 1 << 30,
                "{st:?}"
            );
            assert!(st.pages_owned <= st.segments * 64, "{st:?}");
            for c in class_stats() {
                let per_page = PAGE_SIZE / c.block_size;
                assert!(
                    c.blocks_in_use <= c.pages * per_page,
                    "class {}: {} blocks in use in {} pages",
                    c.block_size,
                    c.blocks_in_use,
                    c.pages
                );
            }
            snapshots += 1;
        }
        snapshots
    });
    for (i, slot) in SLOTS.iter().enumerate() {
        let p = slot.swap(ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            free(i, p);
        }
    }
    assert!(snapshots[0] > 10, "only {} snapshots", snapshots[0]);
}
