//! When the OS refuses memory (here: the process's address-space limit, `RLIMIT_AS`, lowered
//! to what it uses plus 48 MiB), every interface fails cleanly — null or `AllocError`, never
//! an abort, a panic or a block handed out twice — a failed resize leaves its block as it
//! was, and once memory is freed the allocator serves again. One test in its own binary
//! (the limit is the whole process's), PitlaneAlloc not the global allocator.
#![cfg(not(pitlane_alloc_global))]

use core::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{PitlaneAlloc, raw};
use pitlane_testkit::memory::with_address_space_limit;

fn size_of(i: usize) -> usize {
    match i % 16 {
        0 => 100_000 + i % 300_000,
        _ => 8 + (i * 131) % 12_000,
    }
}

fn fill(p: *mut u8, size: usize, seed: u8) {
    // SAFETY: the block holds `size` bytes.
    unsafe {
        p.write(seed);
        p.add(size / 2).write(seed ^ 0x55);
        p.add(size - 1).write(!seed);
    }
}

fn holds(p: *mut u8, size: usize, seed: u8) -> bool {
    // SAFETY: as in `fill`.
    unsafe {
        p.read() == seed && p.add(size / 2).read() == seed ^ 0x55 && p.add(size - 1).read() == !seed
    }
}

#[derive(Debug, PartialEq)]
struct Outcome {
    filled_until_refused: bool,
    contents_kept: bool,
    distinct: bool,
    failed_grow_kept_block: bool,
    serves_again_after_free: bool,
}

fn exhaust() -> Outcome {
    let a = PitlaneAlloc::new();
    let mut blocks: Vec<(*mut u8, usize)> = Vec::with_capacity(1 << 20);
    let mut refused = false;
    for i in 0..(1 << 20) {
        let size = size_of(i);
        let p = match i % 3 {
            0 => raw::malloc(size, 8),
            1 => a
                .allocate(Layout::from_size_align(size, 8).unwrap())
                .map_or(std::ptr::null_mut(), |b| b.cast::<u8>().as_ptr()),
            // SAFETY: a non-zero layout.
            _ => unsafe { a.alloc(Layout::from_size_align(size, 8).unwrap()) },
        };
        if p.is_null() {
            refused = true;
            break;
        }
        fill(p, size, i as u8);
        blocks.push((p, size));
    }
    let contents_kept = blocks
        .iter()
        .enumerate()
        .all(|(i, &(p, size))| holds(p, size, i as u8));
    let mut starts: Vec<usize> = blocks.iter().map(|b| b.0.addr()).collect();
    starts.sort_unstable();
    starts.dedup();
    let distinct = starts.len() == blocks.len();

    // A large block that must grow beyond what is left: refused, and left as it was.
    let failed_grow_kept_block = match blocks.iter().position(|b| b.1 > 16_384) {
        Some(k) => {
            let (p, size) = blocks[k];
            // SAFETY: a live block of ours; on failure it is left as it was.
            let grown = unsafe { raw::realloc(p, 256 << 20) };
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: the same block, through the Allocator interface: `p` is a raw block
            // of size `size`, which `grow` may treat as one with this layout (same class
            // function, alignment 8).
            let grown2 = unsafe {
                a.grow(
                    NonNull::new(p).unwrap(),
                    layout,
                    Layout::from_size_align(256 << 20, 8).unwrap(),
                )
            };
            grown.is_null() && grown2.is_err() && holds(p, size, k as u8)
        }
        None => false,
    };

    for (p, _) in blocks.drain(..) {
        // SAFETY: live blocks of ours, each freed once.
        unsafe { raw::free(p) };
    }
    pitlane_alloc::collect();
    let again = raw::malloc(1 << 20, 8);
    let small = raw::malloc(100, 8);
    let serves_again_after_free = !again.is_null() && !small.is_null();
    // SAFETY: live blocks of ours (or null, skipped), freed once.
    unsafe {
        if !again.is_null() {
            raw::free(again);
        }
        if !small.is_null() {
            raw::free(small);
        }
    }
    Outcome {
        filled_until_refused: refused,
        contents_kept,
        distinct,
        failed_grow_kept_block,
        serves_again_after_free,
    }
}

#[test]
fn refused_memory_fails_cleanly_and_the_allocator_recovers() {
    // Warm up: the allocator's own structures exist before the limit.
    // SAFETY: a live block of ours, freed once.
    unsafe { raw::free(raw::malloc(10, 8)) };
    // The test's own vector of blocks (16 MiB) comes first, then 48 MiB to fill.
    let outcome = with_address_space_limit(64 << 20, exhaust);
    assert_eq!(
        outcome,
        Outcome {
            filled_until_refused: true,
            contents_kept: true,
            distinct: true,
            failed_grow_kept_block: true,
            serves_again_after_free: true,
        }
    );
}
