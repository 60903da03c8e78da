//! The purge policy at its most eager — no delay, no retained budget, no large cache — with a
//! thread calling `collect()` back to back: pages go to the pool, are purged and come back,
//! and large mappings are unmapped, all while other threads allocate, free and pass blocks
//! to each other. A purge or an unmapping of memory still in use would zero or unmap a live
//! block: every block carries a pattern checked at its free. Alone in its binary (the policy
//! is the whole process's); PitlaneAlloc is not the global allocator.
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PitlaneAlloc, PurgePolicy};
use pitlane_testkit::stress::run_threads;

/// Takes one off its counter when dropped, on a panic too.
struct CountOnDrop<'a>(&'a AtomicUsize);

impl Drop for CountOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

fn size_of_block(seed: u64) -> usize {
    match seed % 32 {
        0 => 17_000 + (seed as usize % 200_000),
        _ => 24 + (seed as usize % 4000),
    }
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

fn make(seed: u64) -> *mut u8 {
    let size = size_of_block(seed);
    let p = PitlaneAlloc::new()
        .allocate(layout(size))
        .unwrap()
        .cast::<u8>()
        .as_ptr();
    // SAFETY: a fresh block of `size >= 24` bytes, 8-aligned: the first word, the last eight
    // bytes (unaligned) and the middle byte, which lies between them (`size / 2 < size - 8`).
    unsafe {
        p.cast::<u64>().write(seed);
        p.add(size - 8).cast::<u64>().write_unaligned(!seed);
        p.add(size / 2).write(seed as u8 ^ 0x3C);
    }
    p
}

fn check_and_free(p: *mut u8) {
    // SAFETY: a block made by `make`, live until freed here. Its size comes from its first
    // word; should that word have changed (the failure this test looks for), the size is
    // wrong too and the reads may go past the block, even fault: the test fails either way.
    unsafe {
        let seed = p.cast::<u64>().read();
        let size = size_of_block(seed);
        let last = p.add(size - 8).cast::<u64>().read_unaligned();
        assert_eq!(
            last, !seed,
            "a live block at {p:p} changed: its first word reads {seed:#x}, its last word \
             (for the size that seed gives, {size} bytes) {last:#x}, not {:#x}",
            !seed
        );
        assert_eq!(
            p.add(size / 2).read(),
            seed as u8 ^ 0x3C,
            "a live block of {size} bytes at {p:p} changed in its middle"
        );
        PitlaneAlloc::new().deallocate(NonNull::new(p).unwrap(), layout(size));
    }
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn eager_purging_and_collecting_never_touch_a_live_block() {
    pitlane_alloc::set_purge_policy(PurgePolicy {
        delay_ms: 0,
        retain_bytes: 0,
        retain_ms: 0,
        large_cache_bytes: 0,
    });
    let ops = if cfg!(debug_assertions) {
        30_000
    } else {
        300_000
    };
    let slots: Vec<AtomicPtr<u8>> = (0..512)
        .map(|_| AtomicPtr::new(std::ptr::null_mut()))
        .collect();
    let workers_left = AtomicUsize::new(3);
    let checked = AtomicUsize::new(0);
    // POSIX threads the sanitizers see (pitlane-testkit): one collects back to back until the
    // three workers are done.
    run_threads(4, |t| {
        if t == 0 {
            while workers_left.load(Ordering::Acquire) > 0 {
                pitlane_alloc::collect();
                std::thread::yield_now();
            }
            return;
        }
        // Counts this worker out however it ends (a failed check included), so that the
        // collecting thread stops and the test ends.
        let _left = CountOnDrop(&workers_left);
        let mut rng = (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut mine: Vec<*mut u8> = Vec::new();
        for _ in 0..ops {
            let r = xorshift(&mut rng);
            match r % 6 {
                0 | 1 => mine.push(make(r)),
                2 | 3 => {
                    if let Some(p) = mine.pop() {
                        check_and_free(p);
                        checked.fetch_add(1, Ordering::Relaxed);
                    }
                }
                _ => {
                    let slot = &slots[(r >> 20) as usize % slots.len()];
                    let old = slot.swap(make(r), Ordering::AcqRel);
                    if !old.is_null() {
                        check_and_free(old);
                        checked.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if mine.len() > 300 {
                for p in mine.drain(..) {
                    check_and_free(p);
                }
            }
        }
        for p in mine {
            check_and_free(p);
        }
    });
    for slot in &slots {
        let p = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            check_and_free(p);
        }
    }
    assert!(checked.load(Ordering::Relaxed) > 0);
    pitlane_alloc::set_purge_policy(PurgePolicy::default());
}
