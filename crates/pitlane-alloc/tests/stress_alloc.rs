//! Many threads allocate blocks of random sizes, fill them with a pattern, pass some to other
//! threads through a shared array of slots, and check the pattern when they free them; the
//! threads are created and joined in rounds, so blocks outlive the threads that allocated
//! them and heaps are parked and taken over.
//!
//! `PitlaneAlloc` is the global allocator of this test binary, so the test harness, the
//! threads' own bookkeeping and everything else here goes through it too.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use pitlane_alloc::PitlaneAlloc;
use pitlane_testkit::stress::run_threads;

#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

/// A block in flight: its size in the first word, its pattern seed in the second.
struct Slot(AtomicPtr<u8>);

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A size: mostly small, sometimes up to 64 KiB, rarely up to 1 MiB.
fn random_size(rng: &mut u64) -> usize {
    let r = xorshift(rng);
    match r % 100 {
        0 => 16 + (r >> 8) as usize % (1 << 20),
        1..=9 => 16 + (r >> 8) as usize % (64 << 10),
        _ => 16 + (r >> 8) as usize % 1024,
    }
}

fn layout_of(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

/// Allocates and fills a block: word 0 = size, then bytes derived from the seed.
fn make(size: usize, seed: u64) -> *mut u8 {
    // SAFETY: a non-zero size.
    let p = unsafe { GLOBAL.alloc(layout_of(size)) };
    assert!(!p.is_null());
    assert_eq!(p.addr() % 8, 0);
    // SAFETY: the block holds `size >= 16` bytes.
    unsafe {
        p.cast::<usize>().write(size);
        p.add(8).cast::<u64>().write(seed);
        for i in 16..size.min(256) {
            p.add(i).write((seed as u8).wrapping_add(i as u8));
        }
        if size > 256 {
            p.add(size - 1).write(seed as u8 ^ 0x5a);
        }
    }
    p
}

/// Checks a block's pattern and frees it.
fn check_and_free(p: *mut u8) {
    // SAFETY: `p` is a block made by `make`.
    unsafe {
        let size = p.cast::<usize>().read();
        let seed = p.add(8).cast::<u64>().read();
        for i in 16..size.min(256) {
            assert_eq!(
                p.add(i).read(),
                (seed as u8).wrapping_add(i as u8),
                "corrupt block"
            );
        }
        if size > 256 {
            assert_eq!(p.add(size - 1).read(), seed as u8 ^ 0x5a, "corrupt tail");
        }
        GLOBAL.dealloc(p, layout_of(size));
    }
}

#[test]
fn threads_allocate_pass_and_free_blocks_of_random_sizes() {
    let threads = 8;
    let rounds = if cfg!(debug_assertions) { 4 } else { 12 };
    let ops = if cfg!(debug_assertions) {
        20_000
    } else {
        100_000
    };
    let slots: Vec<Slot> = (0..1000)
        .map(|_| Slot(AtomicPtr::new(std::ptr::null_mut())))
        .collect();
    let checked = AtomicUsize::new(0);
    for round in 0..rounds {
        run_threads(threads, |t| {
            let mut rng = (round * 1000 + t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut mine: Vec<*mut u8> = Vec::new();
            for _ in 0..ops {
                let r = xorshift(&mut rng);
                match r % 8 {
                    0..=2 => mine.push(make(random_size(&mut rng), r)),
                    3..=5 => {
                        if let Some(p) = mine.pop() {
                            check_and_free(p);
                            checked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    _ => {
                        // Swap a block with a shared slot: the old one, allocated by any
                        // thread of any round, is freed here.
                        let p = make(random_size(&mut rng), r);
                        let slot = &slots[(r >> 16) as usize % slots.len()];
                        let old = slot.0.swap(p, Ordering::AcqRel);
                        if !old.is_null() {
                            check_and_free(old);
                            checked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            // Survivors: free half, leave the rest in slots for the next round's threads.
            for (i, p) in mine.into_iter().enumerate() {
                if i % 2 == 0 {
                    check_and_free(p);
                } else {
                    let old = slots[i % slots.len()].0.swap(p, Ordering::AcqRel);
                    if !old.is_null() {
                        check_and_free(old);
                    }
                }
            }
        });
    }
    for slot in &slots {
        let p = slot.0.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            check_and_free(p);
        }
    }
    assert!(checked.load(Ordering::Relaxed) > 0);
}

#[test]
fn producer_threads_feed_consumer_threads() {
    // xmalloc-like: half the threads only allocate, the other half only free.
    let pairs = 4;
    let per_producer = if cfg!(debug_assertions) {
        50_000
    } else {
        500_000
    };
    let channels: Vec<Slot> = (0..pairs * 64)
        .map(|_| Slot(AtomicPtr::new(std::ptr::null_mut())))
        .collect();
    let freed = AtomicUsize::new(0);
    run_threads(pairs * 2, |t| {
        let pair = t / 2;
        let lane = &channels[pair * 64..pair * 64 + 64];
        let mut rng = t as u64 * 7919 + 13;
        if t % 2 == 0 {
            for i in 0..per_producer {
                let p = make(16 + xorshift(&mut rng) as usize % 200, i as u64);
                let slot = &lane[i % 64];
                while slot
                    .0
                    .compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    std::thread::yield_now();
                }
            }
        } else {
            let mut got = 0;
            let mut i = 0;
            while got < per_producer {
                let p = lane[i % 64].0.swap(std::ptr::null_mut(), Ordering::AcqRel);
                if p.is_null() {
                    std::thread::yield_now();
                } else {
                    check_and_free(p);
                    got += 1;
                    i += 1;
                }
            }
            freed.fetch_add(got, Ordering::Relaxed);
        }
    });
    assert_eq!(freed.load(Ordering::Relaxed), pairs * per_producer);
}
