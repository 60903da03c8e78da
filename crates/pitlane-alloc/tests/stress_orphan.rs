//! The orphan heap under a sweep: threads whose late `pthread` key destructors (run after the
//! allocator's own has parked their heaps) allocate and free thousands of blocks from the
//! shared orphan heap, under its lock, while another thread calls `collect()` back to back,
//! whose sweep tidies the orphan heap whenever it can take that lock.
//!
//! A sweep that got into the orphan heap beside an allocation would release a page with live
//! blocks, or hand one block out twice: every block carries its seed in its first and last
//! words, checked at its free; every free is a remote free into the orphan heap (no thread
//! owns it), published at once (the thread is past its exit flush). Until the twenty-eighth
//! session the
//! allocator's `SpinLock::try_lock` released the lock on a *failed* attempt (it built, and
//! dropped, a guard either way), so the sweep's attempt that failed on an allocating thread
//! unlocked it for the next sweep: `stress_purge` saw it in about one run of two thousand,
//! this test in most runs.
//!
//! One test in its own binary; `PitlaneAlloc` is not the global allocator here.
#![cfg(not(pitlane_alloc_global))]

use core::alloc::Layout;
use core::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use allocator_api2::alloc::Allocator;
use pitlane_alloc::PitlaneAlloc;
use pitlane_testkit::stress::run_threads;

const WORKERS: usize = 3;

/// Late destructors that have finished.
static DONE: AtomicUsize = AtomicUsize::new(0);
/// Blocks checked at their free, all destructors together.
static CHECKED: AtomicUsize = AtomicUsize::new(0);
/// The first corruption found (a destructor cannot panic: it is an `extern "C"` function).
static FAILURE: Mutex<Option<String>> = Mutex::new(None);

fn ops() -> usize {
    if cfg!(debug_assertions) {
        4_000
    } else {
        40_000
    }
}

fn size_of_block(seed: u64) -> usize {
    16 + (seed as usize % 3000) / 8 * 8
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

fn make(seed: u64) -> *mut u8 {
    let size = size_of_block(seed);
    let p = PitlaneAlloc::new()
        .allocate(layout(size))
        .expect("a late allocation")
        .cast::<u8>()
        .as_ptr();
    // SAFETY: a fresh block of `size >= 16` bytes, 8-aligned, `size` a multiple of 8.
    unsafe {
        p.cast::<u64>().write(seed);
        p.add(size - 8).cast::<u64>().write(!seed);
    }
    p
}

/// Checks the block's seeds and frees it; `false` (the block leaked) if they changed.
fn check_and_free(p: *mut u8, seed: u64) -> bool {
    let size = size_of_block(seed);
    // SAFETY: a block made by `make(seed)`, live until freed here.
    unsafe {
        let first = p.cast::<u64>().read();
        let last = p.add(size - 8).cast::<u64>().read();
        if first != seed || last != !seed {
            let mut failure = FAILURE.lock().unwrap();
            failure.get_or_insert_with(|| {
                format!(
                    "a live block of {size} bytes at {p:p} changed: first word {first:#x} \
                     (was {seed:#x}), last word {last:#x} (was {:#x})",
                    !seed
                )
            });
            return false;
        }
        PitlaneAlloc::new().deallocate(NonNull::new(p).unwrap(), layout(size));
    }
    true
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The late destructor: allocations from the orphan heap, freed in a scattered order.
extern "C" fn churn_late(value: *mut c_void) {
    let mut rng = (value.addr() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    // (block, seed); a Vec of the system allocator's.
    let mut live: Vec<(*mut u8, u64)> = Vec::with_capacity(512);
    let mut healthy = true;
    for _ in 0..ops() {
        let r = xorshift(&mut rng);
        if r % 5 < 3 || live.is_empty() {
            live.push((make(r), r));
        } else {
            let i = (r >> 32) as usize % live.len();
            let (p, seed) = live.swap_remove(i);
            healthy &= check_and_free(p, seed);
            CHECKED.fetch_add(1, Ordering::Relaxed);
        }
        if live.len() > 400 {
            for (p, seed) in live.drain(..) {
                healthy &= check_and_free(p, seed);
            }
        }
        if !healthy {
            break;
        }
    }
    if healthy {
        for (p, seed) in live {
            check_and_free(p, seed);
        }
    }
    DONE.fetch_add(1, Ordering::Release);
}

#[test]
fn a_sweep_never_tidies_the_orphan_heap_beside_an_allocation_from_it() {
    // The allocator's key exists (its first allocation makes it) before ours.
    let first = PitlaneAlloc::new().allocate(layout(16)).unwrap();
    // SAFETY: allocated just above with this layout.
    unsafe { PitlaneAlloc::new().deallocate(first.cast(), layout(16)) };
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a plain libc call with valid arguments; the destructor never unwinds.
    let made = unsafe { libc::pthread_key_create(&mut key, Some(churn_late)) };
    assert_eq!(made, 0);

    let deadline = Instant::now() + Duration::from_secs(120);
    // POSIX threads the sanitizers see (pitlane-testkit); thread 0 collects until every
    // worker's late destructor has finished.
    run_threads(WORKERS + 1, |t| {
        if t == 0 {
            while DONE.load(Ordering::Acquire) < WORKERS {
                pitlane_alloc::collect();
                assert!(
                    Instant::now() < deadline,
                    "the late destructors did not finish"
                );
            }
            return;
        }
        // A heap of its own first, so that the allocator's key destructor runs (and parks
        // it) before ours; ours then allocates from the orphan heap.
        let warm = layout(8);
        let block = PitlaneAlloc::new().allocate(warm).unwrap();
        // SAFETY: allocated just above with this layout.
        unsafe { PitlaneAlloc::new().deallocate(block.cast(), warm) };
        // A non-null value (the destructor's seed, never dereferenced), so that the
        // destructor runs at the thread's exit.
        let value = std::ptr::without_provenance_mut::<c_void>(t * 0x1000);
        // SAFETY: the key exists.
        unsafe { libc::pthread_setspecific(key, value) };
    });
    if let Some(failure) = FAILURE.lock().unwrap().take() {
        panic!("{failure}");
    }
    assert_eq!(DONE.load(Ordering::Relaxed), WORKERS);
    assert!(CHECKED.load(Ordering::Relaxed) >= WORKERS * ops() / 5);
    pitlane_alloc::collect();
    let stats = pitlane_alloc::stats();
    assert_eq!(stats.in_use, 0, "every late block was freed: {stats:?}");
    assert_eq!(
        stats.pages_owned, 0,
        "the orphan heap kept emptied pages: {stats:?}"
    );
}
