//! Threads that exit while other threads are freeing their blocks: short-lived producers
//! allocate blocks (each filled with a pattern), hand them to long-lived freers through a
//! ring of slots, and exit at once, so that their heaps are parked while remote frees into
//! their pages are in flight, and the next producers take those heaps over (with their remote
//! lists) while the frees go on. Every block's pattern is checked at its free, and once all
//! is freed and swept, the bytes in use are back where they started. PitlaneAlloc serves
//! only the blocks here (it is not the global allocator), so the figures are this test's.
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use allocator_api2::alloc::Allocator;
use pitlane_alloc::PitlaneAlloc;
use pitlane_testkit::stress::run_threads;

const SLOTS: usize = 4096;

/// Sets its flag when dropped, on a panic too.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn size_of_block(seed: u64) -> usize {
    match seed % 64 {
        0 => 20_000 + (seed as usize % 50_000),
        _ => 16 + (seed as usize % 3000),
    }
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

/// A block of `size` bytes: its seed in the first word, then bytes of the pattern.
fn make(seed: u64) -> *mut u8 {
    let size = size_of_block(seed);
    let p = PitlaneAlloc::new()
        .allocate(layout(size))
        .unwrap()
        .cast::<u8>()
        .as_ptr();
    // SAFETY: a fresh block of `size >= 16` bytes, 8-aligned.
    unsafe {
        p.cast::<u64>().write(seed);
        for i in 8..size {
            p.add(i).write((seed as u8).wrapping_add(i as u8));
        }
    }
    p
}

fn check_and_free(p: *mut u8) {
    // SAFETY: a block made by `make`, live until freed here.
    unsafe {
        let seed = p.cast::<u64>().read();
        let size = size_of_block(seed);
        for i in 8..size {
            assert_eq!(
                p.add(i).read(),
                (seed as u8).wrapping_add(i as u8),
                "byte {i} of a block of {size}"
            );
        }
        PitlaneAlloc::new().deallocate(NonNull::new(p).unwrap(), layout(size));
    }
}

#[test]
fn producers_exit_while_their_blocks_are_freed_and_new_ones_take_their_heaps() {
    // (Release counts are kept modest: CI runs this under ThreadSanitizer too, where 600
    // producers of 5,000 blocks took two minutes.)
    let producers = if cfg!(debug_assertions) { 120 } else { 240 };
    let per_producer: u64 = if cfg!(debug_assertions) { 1500 } else { 3000 };
    pitlane_alloc::collect();
    let before = pitlane_alloc::stats().in_use;
    let slots: Vec<AtomicPtr<u8>> = (0..SLOTS)
        .map(|_| AtomicPtr::new(std::ptr::null_mut()))
        .collect();
    let done = AtomicBool::new(false);
    let freed = AtomicUsize::new(0);
    // POSIX threads the sanitizers see (pitlane-testkit): two freers, and a driver that runs
    // the producers two at a time, each pair exiting as soon as its blocks are handed over.
    run_threads(3, |t| {
        if t < 2 {
            let mut at = t;
            loop {
                let p = slots[at % SLOTS].swap(std::ptr::null_mut(), Ordering::AcqRel);
                if p.is_null() {
                    if done.load(Ordering::Acquire)
                        && slots.iter().all(|s| s.load(Ordering::Acquire).is_null())
                    {
                        break;
                    }
                    std::thread::yield_now();
                } else {
                    check_and_free(p);
                    freed.fetch_add(1, Ordering::Relaxed);
                }
                at += 1;
            }
            return;
        }
        // Ends the freers however the driver ends (a failed check included).
        let _done = SetOnDrop(&done);
        for wave in 0..producers / 2 {
            run_threads(2, |t| {
                let base = ((wave * 2 + t) as u64) << 32;
                for i in 0..per_producer {
                    let p = make(base | i);
                    let mut at = (base as usize >> 32) * 7 + i as usize;
                    loop {
                        let slot = &slots[at % SLOTS];
                        if slot
                            .compare_exchange(
                                std::ptr::null_mut(),
                                p,
                                Ordering::AcqRel,
                                Ordering::Relaxed,
                            )
                            .is_ok()
                        {
                            break;
                        }
                        at += 1;
                        if at % SLOTS == 0 {
                            std::thread::yield_now();
                        }
                    }
                }
            });
        }
    });
    assert_eq!(
        freed.load(Ordering::Relaxed) as u64,
        producers as u64 / 2 * 2 * per_producer
    );
    pitlane_alloc::collect();
    let after = pitlane_alloc::stats().in_use;
    assert!(
        after <= before + (1 << 20),
        "in use before {before}, after {after}: blocks freed into exited threads' heaps stayed \
         counted"
    );
}
