//! `fork()` while other threads allocate small and large blocks, free each other's, exit and
//! are replaced, use owned heaps and `collect()`: the child frees blocks that the parent's
//! threads allocated (their heaps stay held in the child), allocates and frees every kind of
//! block, runs threads, uses an owned heap, and forks again.

use std::alloc::Layout;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::time::Duration;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{Heap, PitlaneAlloc};
use pitlane_testkit::child::wait_for_child;
use pitlane_testkit::stress::run_threads;

const A: PitlaneAlloc = PitlaneAlloc::new();

/// Blocks in flight between threads: slot `i` holds a block of `layout(i)` or null.
static SLOTS: [AtomicPtr<u8>; 256] = [const { AtomicPtr::new(ptr::null_mut()) }; 256];

fn layout(i: usize) -> Layout {
    match i % 8 {
        0 => Layout::from_size_align(300_000, 8).unwrap(),
        1 => Layout::from_size_align(50_000, 1 << 16).unwrap(),
        2 => Layout::from_size_align(20_000, 64).unwrap(),
        _ => Layout::from_size_align(64 + (i % 4096) * 97 % 3000, 8).unwrap(),
    }
}

fn make(i: usize) -> *mut u8 {
    let l = layout(i);
    let p = A.allocate(l).expect("allocation").cast::<u8>().as_ptr();
    // SAFETY: a fresh block of `l.size()` bytes: its first and last 64 bytes.
    unsafe {
        p.write_bytes(i as u8, 64);
        p.add(l.size() - 64).write_bytes(i as u8, 64);
    }
    p
}

/// Checks and frees a block of slot `i`; false if its contents changed.
fn check_and_free(i: usize, p: *mut u8) -> bool {
    let l = layout(i);
    // SAFETY: a live block of slot `i`, freed once.
    unsafe {
        let ok = *p == i as u8 && *p.add(l.size() - 1) == i as u8;
        A.deallocate(NonNull::new_unchecked(p), l);
        ok
    }
}

/// One step of a worker: swap a fresh block into a slot, free what was there.
fn step(x: &mut u64) -> bool {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    let i = (*x % 256) as usize;
    let old = SLOTS[i].swap(make(i), Ordering::AcqRel);
    old.is_null() || check_and_free(i, old)
}

fn child_work() -> bool {
    let mut ok = true;
    // Blocks the parent's threads allocated, freed here.
    for (i, slot) in SLOTS.iter().enumerate() {
        let p = slot.swap(ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            ok &= check_and_free(i, p);
        }
    }
    let mut x = 0x1234_5678_9abc_def1u64;
    for _ in 0..5000 {
        ok &= step(&mut x);
    }
    // A POSIX thread, not `std::thread::spawn`, whose start takes a process-wide lock of the
    // standard library that the fork may have left held (see `pitlane_testkit::child`).
    ok &= run_threads(1, |_| {
        let mut x = 77u64;
        (0..5000).all(|_| step(&mut x))
    }) == [true];
    let heap = Heap::new();
    let mut v = allocator_api2::vec::Vec::new_in(&heap);
    v.extend(0..200_000u64);
    ok &= v.iter().sum::<u64>() == 199_999 * 100_000;
    drop(v);
    drop(heap);
    pitlane_alloc::collect();
    ok
}

/// How long a child (or grandchild) may take before it counts as stuck.
const CHILD_LIMIT: Duration = Duration::from_secs(120);

#[test]
fn the_child_of_a_fork_among_busy_threads_frees_their_blocks_and_works() {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let stop = &stop;
            s.spawn(move || {
                let mut x = t * 0x9E37 + 1;
                while !stop.load(Ordering::Relaxed) {
                    // Short-lived threads: their heaps are parked and taken over.
                    let alive = std::thread::spawn(move || {
                        let mut x = x;
                        let heap = Heap::new();
                        let l = layout(x as usize);
                        let b = (&heap).allocate(l).unwrap();
                        let ok = (0..300).all(|_| step(&mut x));
                        // SAFETY: the heap's own block, with its layout.
                        unsafe { (&heap).deallocate(b.cast(), l) };
                        ok
                    })
                    .join()
                    .unwrap();
                    assert!(alive, "a block changed in the parent");
                    x = x.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
                    if x % 16 == 0 {
                        pitlane_alloc::collect();
                    }
                }
            });
        }
        let forks = (0..40).try_for_each(|_| {
            std::thread::sleep(Duration::from_millis(5));
            // SAFETY: the child uses the allocator and threads, then leaves with `_exit`.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err("fork failed".to_string());
            }
            if pid == 0 {
                let ok = std::panic::catch_unwind(|| {
                    let mut ok = child_work();
                    // SAFETY: as above, one generation further.
                    let grandchild = unsafe { libc::fork() };
                    if grandchild == 0 {
                        let ok = std::panic::catch_unwind(child_work).unwrap_or(false);
                        // SAFETY: ends the grandchild without the harness.
                        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
                    }
                    ok &= grandchild > 0 && wait_for_child(grandchild, CHILD_LIMIT).is_ok();
                    ok
                });
                // SAFETY: ends the child without running the parent's test harness.
                unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
            }
            wait_for_child(pid, CHILD_LIMIT)
        });
        // The workers stop whatever happened, so that a failure ends the test instead of
        // leaving the scope waiting for them.
        stop.store(true, Ordering::Relaxed);
        if let Err(failure) = forks {
            panic!("the child of a fork failed: {failure}");
        }
    });
    for (i, slot) in SLOTS.iter().enumerate() {
        let p = slot.swap(ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            assert!(check_and_free(i, p));
        }
    }
}
