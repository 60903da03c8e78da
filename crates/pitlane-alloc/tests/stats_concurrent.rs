//! `stats()` and `class_stats()` read while other threads allocate, free (locally and
//! remotely), map and unmap large blocks, exit and hand their heaps over: every snapshot stays
//! sane — bytes in use never above bytes mapped, purged and cached memory within what is
//! mapped, no figure that wrapped below zero, and per class no more blocks in use than the
//! class's pages can hold.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PAGE_SIZE, PitlaneAlloc, class_stats, stats};

const A: PitlaneAlloc = PitlaneAlloc::new();

struct Blocks(Vec<(NonNull<u8>, Layout)>);
// SAFETY: blocks of the global heap may be freed from any thread.
unsafe impl Send for Blocks {}

fn churn(seed: usize, stop: &AtomicBool, out: &std::sync::Mutex<Vec<Blocks>>) {
    let mut x = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut mine = Blocks(Vec::new());
    while !stop.load(Ordering::Relaxed) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let layout = match x % 16 {
            // Over-aligned large blocks: mapped and unmapped on every allocation and free.
            0 => Layout::from_size_align(1 << 20, 1 << 21).unwrap(),
            1 => Layout::from_size_align(200_000 + (x as usize % 100_000), 8).unwrap(),
            _ => Layout::from_size_align(1 + (x as usize >> 8) % 16_000, 8).unwrap(),
        };
        let block = A.allocate(layout).expect("allocation").cast::<u8>();
        mine.0.push((block, layout));
        if mine.0.len() > 64 {
            // Half stay here, half go to another thread (remote frees).
            let keep = mine.0.split_off(32);
            out.lock()
                .unwrap()
                .push(Blocks(std::mem::replace(&mut mine.0, keep)));
            let theirs = out.lock().unwrap().pop();
            for (b, l) in theirs.into_iter().flat_map(|b| b.0) {
                // SAFETY: a live block with its layout, freed once.
                unsafe { A.deallocate(b, l) };
            }
            for (b, l) in mine.0.drain(..16) {
                // SAFETY: as above.
                unsafe { A.deallocate(b, l) };
            }
        }
    }
    out.lock().unwrap().push(mine);
}

#[test]
fn snapshots_stay_consistent_under_concurrent_use() {
    let stop = AtomicBool::new(false);
    let out = std::sync::Mutex::new(Vec::new());
    let mut snapshots = 0u64;
    std::thread::scope(|s| {
        for t in 0..3 {
            let (stop, out) = (&stop, &out);
            s.spawn(move || {
                // Threads come and go: their heaps are parked and taken over.
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::scope(|inner| {
                        inner.spawn(|| churn(t * 1000 + round, stop, out));
                    });
                    round += 1;
                    if round % 4 == 0 {
                        pitlane_alloc::collect();
                    }
                }
            });
        }
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
        stop.store(true, Ordering::Relaxed);
    });
    for (b, l) in out.into_inner().unwrap().into_iter().flat_map(|b| b.0) {
        // SAFETY: live blocks with their layouts, freed once.
        unsafe { A.deallocate(b, l) };
    }
    assert!(snapshots > 10, "only {snapshots} snapshots");
}
