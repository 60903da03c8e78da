//! `grow`, `grow_zeroed` and `shrink` with a *different* alignment in the old and the new
//! layout (the `Allocator` trait allows it), across class boundaries and to and from large
//! blocks, and `GlobalAlloc::realloc`, run against a model: every live block's bytes (a
//! pattern, checked at both ends and every 61st byte), no two live blocks overlapping, and
//! the bytes `grow_zeroed` adds all zero even when the block it reuses was dirty (every
//! block is filled with 0xEE before it is freed). Through `PitlaneAlloc` and an owned `Heap`;
//! PitlaneAlloc is not the global allocator here.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{Heap, PitlaneAlloc, SMALL_MAX};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: usize,
        align_log: u32,
    },
    Free {
        which: usize,
    },
    Resize {
        which: usize,
        size: usize,
        align_log: u32,
        zeroed: bool,
    },
}

/// Sizes around the class and kind boundaries, and anything up to 2 MiB.
fn size() -> impl Strategy<Value = usize> {
    let edges = [
        0usize,
        1,
        7,
        8,
        9,
        16,
        24,
        56,
        57,
        64,
        65,
        128,
        129,
        1024,
        4095,
        4096,
        4097,
        16383,
        SMALL_MAX,
        SMALL_MAX + 1,
        65535,
        65536,
        65537,
        1 << 20,
    ];
    prop_oneof![
        3 => prop::sample::select(edges.to_vec()),
        3 => 0usize..=512,
        2 => 513usize..=40_000,
        1 => 40_001usize..=2 << 20,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (size(), 0u32..=16).prop_map(|(size, align_log)| Op::Alloc { size, align_log }),
        2 => any::<usize>().prop_map(|which| Op::Free { which }),
        3 => (any::<usize>(), size(), 0u32..=16, any::<bool>()).prop_map(
            |(which, size, align_log, zeroed)| Op::Resize { which, size, align_log, zeroed }
        ),
    ]
}

struct Live {
    ptr: NonNull<u8>,
    layout: Layout,
    seed: u8,
}

/// The offsets of a block of `size` bytes that the model writes and checks.
fn marked(size: usize) -> impl Iterator<Item = usize> {
    (0..size.min(64))
        .chain((64..size.saturating_sub(64)).step_by(61))
        .chain(size.saturating_sub(64).max(64.min(size))..size)
}

fn write_marks(ptr: NonNull<u8>, size: usize, seed: u8) {
    for i in marked(size) {
        // SAFETY: `i < size`, inside the block.
        unsafe { ptr.as_ptr().add(i).write(seed ^ (i as u8)) };
    }
}

fn marks_hold(ptr: NonNull<u8>, size: usize, seed: u8) -> bool {
    // SAFETY: inside the block.
    marked(size).all(|i| unsafe { ptr.as_ptr().add(i).read() } == seed ^ (i as u8))
}

/// Dirties a block whole before it is freed, so that a block reused later holds 0xEE.
fn dirty(ptr: NonNull<u8>, size: usize) {
    // SAFETY: the block holds `size` bytes.
    unsafe { ptr.as_ptr().write_bytes(0xEE, size) };
}

fn no_overlap(live: &[Live]) -> bool {
    let mut ranges: Vec<(usize, usize)> = live
        .iter()
        .filter(|b| b.layout.size() > 0)
        .map(|b| {
            (
                b.ptr.as_ptr().addr(),
                b.ptr.as_ptr().addr() + b.layout.size(),
            )
        })
        .collect();
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 <= w[1].0)
}

fn run<A: Allocator>(alloc: A, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut live: Vec<Live> = Vec::new();
    for (n, op) in ops.iter().enumerate() {
        let seed = (n as u8).wrapping_mul(37) | 1;
        match *op {
            Op::Alloc { size, align_log } => {
                let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
                let block = alloc
                    .allocate(layout)
                    .map_err(|_| TestCaseError::fail("allocation failed"))?;
                prop_assert!(block.len() >= size);
                let ptr = block.cast::<u8>();
                prop_assert_eq!(ptr.as_ptr().addr() % layout.align(), 0);
                write_marks(ptr, size, seed);
                live.push(Live { ptr, layout, seed });
            }
            Op::Free { which } => {
                if live.is_empty() {
                    continue;
                }
                let b = live.swap_remove(which % live.len());
                prop_assert!(marks_hold(b.ptr, b.layout.size(), b.seed));
                dirty(b.ptr, b.layout.size());
                // SAFETY: a live block with its layout.
                unsafe { alloc.deallocate(b.ptr, b.layout) };
            }
            Op::Resize {
                which,
                size,
                align_log,
                zeroed,
            } => {
                if live.is_empty() {
                    continue;
                }
                let k = which % live.len();
                let (old_ptr, old, old_seed) = (live[k].ptr, live[k].layout, live[k].seed);
                prop_assert!(marks_hold(old_ptr, old.size(), old_seed));
                let new = Layout::from_size_align(size, 1 << align_log).unwrap();
                // SAFETY: a live block with its layout; `grow` for a size at least the old
                // one, `shrink` for a smaller one, as the trait requires.
                let resized = unsafe {
                    if size >= old.size() {
                        if zeroed {
                            alloc.grow_zeroed(old_ptr, old, new)
                        } else {
                            alloc.grow(old_ptr, old, new)
                        }
                    } else {
                        alloc.shrink(old_ptr, old, new)
                    }
                }
                .map_err(|_| TestCaseError::fail("resize failed"))?;
                prop_assert!(resized.len() >= size);
                let ptr = resized.cast::<u8>();
                prop_assert_eq!(
                    ptr.as_ptr().addr() % new.align(),
                    0,
                    "{:?} -> {:?}",
                    old,
                    new
                );
                let kept = old.size().min(size);
                for i in marked(old.size()).filter(|&i| i < kept) {
                    // SAFETY: inside the block.
                    let byte = unsafe { ptr.as_ptr().add(i).read() };
                    prop_assert_eq!(
                        byte,
                        old_seed ^ (i as u8),
                        "byte {} of {:?} -> {:?}",
                        i,
                        old,
                        new
                    );
                }
                if zeroed && size >= old.size() {
                    // Every byte past the old size, the dirty bytes of a reused block too.
                    // SAFETY: inside the block.
                    let zero =
                        (old.size()..size).all(|i| unsafe { ptr.as_ptr().add(i).read() } == 0);
                    prop_assert!(zero, "grow_zeroed {:?} -> {:?} left a byte set", old, new);
                }
                write_marks(ptr, size, seed);
                live[k] = Live {
                    ptr,
                    layout: new,
                    seed,
                };
            }
        }
        prop_assert!(no_overlap(&live), "two live blocks overlap after {:?}", op);
    }
    for b in live {
        prop_assert!(marks_hold(b.ptr, b.layout.size(), b.seed));
        // SAFETY: a live block with its layout.
        unsafe { alloc.deallocate(b.ptr, b.layout) };
    }
    Ok(())
}

/// `GlobalAlloc::realloc` (same alignment, any size above 0), against the same model.
fn run_realloc(ops: &[Op]) -> Result<(), TestCaseError> {
    let a = PitlaneAlloc::new();
    let mut live: Vec<Live> = Vec::new();
    for (n, op) in ops.iter().enumerate() {
        let seed = (n as u8).wrapping_mul(37) | 1;
        match *op {
            Op::Alloc { size, align_log } => {
                let layout = Layout::from_size_align(size.max(1), 1 << align_log).unwrap();
                // SAFETY: a non-zero layout.
                let ptr = NonNull::new(unsafe { a.alloc(layout) })
                    .ok_or_else(|| TestCaseError::fail("alloc failed"))?;
                prop_assert_eq!(ptr.as_ptr().addr() % layout.align(), 0);
                write_marks(ptr, layout.size(), seed);
                live.push(Live { ptr, layout, seed });
            }
            Op::Free { which } => {
                if live.is_empty() {
                    continue;
                }
                let b = live.swap_remove(which % live.len());
                prop_assert!(marks_hold(b.ptr, b.layout.size(), b.seed));
                dirty(b.ptr, b.layout.size());
                // SAFETY: a live block with its layout.
                unsafe { a.dealloc(b.ptr.as_ptr(), b.layout) };
            }
            Op::Resize { which, size, .. } => {
                if live.is_empty() {
                    continue;
                }
                let k = which % live.len();
                let (old_ptr, old, old_seed) = (live[k].ptr, live[k].layout, live[k].seed);
                let size = size.max(1);
                // SAFETY: a live block with its layout; a non-zero size that, rounded to the
                // alignment, fits `isize`.
                let ptr = NonNull::new(unsafe { a.realloc(old_ptr.as_ptr(), old, size) })
                    .ok_or_else(|| TestCaseError::fail("realloc failed"))?;
                prop_assert_eq!(ptr.as_ptr().addr() % old.align(), 0);
                for i in marked(old.size()).filter(|&i| i < size.min(old.size())) {
                    // SAFETY: inside the block.
                    let byte = unsafe { ptr.as_ptr().add(i).read() };
                    prop_assert_eq!(byte, old_seed ^ (i as u8));
                }
                let layout = Layout::from_size_align(size, old.align()).unwrap();
                write_marks(ptr, size, seed);
                live[k] = Live { ptr, layout, seed };
            }
        }
        prop_assert!(no_overlap(&live));
    }
    for b in live {
        prop_assert!(marks_hold(b.ptr, b.layout.size(), b.seed));
        // SAFETY: a live block with its layout.
        unsafe { a.dealloc(b.ptr.as_ptr(), b.layout) };
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 48 } else { 512 }))]

    #[test]
    fn resizes_with_changing_alignments_on_the_global_heap(ops in prop::collection::vec(op(), 1..120)) {
        run(PitlaneAlloc::new(), &ops)?;
    }

    #[test]
    fn resizes_with_changing_alignments_on_an_owned_heap(ops in prop::collection::vec(op(), 1..120)) {
        let heap = Heap::new();
        run(&heap, &ops)?;
    }

    #[test]
    fn global_alloc_realloc_keeps_contents(ops in prop::collection::vec(op(), 1..120)) {
        run_realloc(&ops)?;
    }
}
