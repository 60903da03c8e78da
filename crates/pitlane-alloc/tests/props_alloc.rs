//! Scripts of allocations, frees and reallocs of any size and alignment, run against a model
//! (the bytes each live block must hold), through `PitlaneAlloc` and through an owned `Heap`.

use std::alloc::Layout;
use std::ptr::NonNull;

use allocator_api2::alloc::Allocator;
use pitlane_alloc::{Heap, PitlaneAlloc};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: usize,
        align_log: u32,
        zeroed: bool,
    },
    Free {
        which: usize,
    },
    Resize {
        which: usize,
        size: usize,
    },
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..=256,
        3 => 257usize..=20_000,
        1 => 20_001usize..=3 << 20,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (size(), 0u32..=13, any::<bool>())
            .prop_map(|(size, align_log, zeroed)| Op::Alloc { size, align_log, zeroed }),
        2 => any::<usize>().prop_map(|which| Op::Free { which }),
        2 => (any::<usize>(), size()).prop_map(|(which, size)| Op::Resize { which, size }),
    ]
}

/// A live block and the bytes the model says it holds (a prefix pattern is enough: the first
/// and last 64 bytes are written and checked).
struct Live {
    ptr: NonNull<u8>,
    layout: Layout,
    seed: u8,
}

fn write_marks(ptr: NonNull<u8>, size: usize, seed: u8) {
    for i in (0..size.min(64)).chain(size.saturating_sub(64)..size) {
        // SAFETY: `i < size`, inside the block.
        unsafe { ptr.as_ptr().add(i).write(seed ^ i as u8) };
    }
}

fn check_marks(ptr: NonNull<u8>, size: usize, seed: u8) -> bool {
    (0..size.min(64))
        .chain(size.saturating_sub(64)..size)
        // SAFETY: inside the block.
        .all(|i| unsafe { ptr.as_ptr().add(i).read() } == seed ^ i as u8)
}

fn run<A: Allocator>(alloc: A, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut live: Vec<Live> = Vec::new();
    for (n, op) in ops.iter().enumerate() {
        let seed = n as u8;
        match *op {
            Op::Alloc {
                size,
                align_log,
                zeroed,
            } => {
                let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
                let block = if zeroed {
                    alloc.allocate_zeroed(layout)
                } else {
                    alloc.allocate(layout)
                }
                .map_err(|_| TestCaseError::fail("allocation failed"))?;
                prop_assert!(block.len() >= size);
                let ptr = block.cast::<u8>();
                prop_assert_eq!(ptr.as_ptr().addr() % layout.align(), 0);
                if zeroed {
                    // Every 61st byte and the last one (all of them would be slow in debug).
                    // SAFETY: the block holds `size` bytes.
                    let all_zero = (0..size)
                        .step_by(61)
                        .chain(size.checked_sub(1))
                        .all(|i| unsafe { ptr.as_ptr().add(i).read() } == 0);
                    prop_assert!(all_zero);
                }
                write_marks(ptr, size, seed);
                live.push(Live { ptr, layout, seed });
            }
            Op::Free { which } => {
                if live.is_empty() {
                    continue;
                }
                let b = live.swap_remove(which % live.len());
                prop_assert!(check_marks(b.ptr, b.layout.size(), b.seed));
                // SAFETY: a live block with its layout.
                unsafe { alloc.deallocate(b.ptr, b.layout) };
            }
            Op::Resize { which, size } => {
                if live.is_empty() {
                    continue;
                }
                let k = which % live.len();
                let b = &live[k];
                prop_assert!(check_marks(b.ptr, b.layout.size(), b.seed));
                let new = Layout::from_size_align(size, b.layout.align()).unwrap();
                // SAFETY: a live block with its layout; `new` has the same alignment.
                let moved = unsafe {
                    if size >= b.layout.size() {
                        alloc.grow(b.ptr, b.layout, new)
                    } else {
                        alloc.shrink(b.ptr, b.layout, new)
                    }
                }
                .map_err(|_| TestCaseError::fail("resize failed"))?;
                let ptr = moved.cast::<u8>();
                let kept = b.layout.size().min(size);
                // The kept prefix (up to 64 bytes) moved with the block.
                for i in 0..kept.min(64) {
                    // SAFETY: inside the block.
                    let byte = unsafe { ptr.as_ptr().add(i).read() };
                    prop_assert_eq!(byte, b.seed ^ i as u8);
                }
                write_marks(ptr, size, seed);
                live[k] = Live {
                    ptr,
                    layout: new,
                    seed,
                };
            }
        }
    }
    for b in live {
        prop_assert!(check_marks(b.ptr, b.layout.size(), b.seed));
        // SAFETY: a live block with its layout.
        unsafe { alloc.deallocate(b.ptr, b.layout) };
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 32 } else { 512 }))]

    #[test]
    fn scripts_on_the_global_heap(ops in prop::collection::vec(op(), 1..200)) {
        run(PitlaneAlloc::new(), &ops)?;
    }

    #[test]
    fn scripts_on_an_owned_heap(ops in prop::collection::vec(op(), 1..200), leak in any::<bool>()) {
        let heap = Heap::new();
        if leak {
            // Leave the blocks to the heap's drop: run everything but the final frees.
            let mut ops = ops;
            ops.retain(|op| !matches!(op, Op::Free { .. }));
            let result = run_without_final_free(&heap, &ops);
            drop(heap);
            result?;
        } else {
            run(&heap, &ops)?;
        }
    }
}

fn run_without_final_free(heap: &Heap, ops: &[Op]) -> Result<(), TestCaseError> {
    for op in ops {
        if let Op::Alloc {
            size, align_log, ..
        } = *op
        {
            let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
            let block = heap
                .allocate(layout)
                .map_err(|_| TestCaseError::fail("allocation failed"))?;
            write_marks(block.cast(), size, 1);
        }
    }
    Ok(())
}
