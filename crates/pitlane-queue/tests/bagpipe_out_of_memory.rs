//! `Bagpipe::with_pipes` when the allocator refuses the pipes: an error that says what was
//! asked for, never an abort. This test binary's global allocator refuses every request of
//! 1 MiB or more while `REFUSE_LARGE` is set (so it cannot also take pitlane-alloc as its
//! global allocator, as the other test binaries do under `--cfg pitlane_alloc_global`).
#![cfg(not(pitlane_loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_utils::CachePadded;
use pitlane_queue::bagpipe::{Bagpipe, BagpipeError, MAX_PIPES};
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;

/// While set, allocations of 1 MiB or more fail.
static REFUSE_LARGE: AtomicBool = AtomicBool::new(false);

struct Refusing;

// SAFETY: forwards to `System`, or returns null (a refusal, which `GlobalAlloc` allows).
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= 1 << 20 && REFUSE_LARGE.load(Ordering::Relaxed) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (refusals return null, never freed).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Refusing = Refusing;

#[test]
fn pipes_the_allocator_refuses_are_an_error_not_an_abort() {
    REFUSE_LARGE.store(true, Ordering::Relaxed);
    let queues = Bagpipe::<Queue<u64>>::with_pipes(MAX_PIPES).map(|bag| bag.pipe_count());
    let stacks = Bagpipe::<Stack<u64>>::with_pipes(MAX_PIPES).map(|bag| bag.pipe_count());
    // Small Bagpipes are still made while large requests are refused.
    let small = Bagpipe::<Queue<u64>>::with_pipes(3).map(|bag| bag.pipe_count());
    REFUSE_LARGE.store(false, Ordering::Relaxed);

    let expected = |size: usize| BagpipeError::OutOfMemory {
        pipes: MAX_PIPES,
        bytes: MAX_PIPES * size,
    };
    assert_eq!(queues, Err(expected(size_of::<CachePadded<Queue<u64>>>())));
    assert_eq!(stacks, Err(expected(size_of::<CachePadded<Stack<u64>>>())));
    assert_eq!(small, Ok(4));
    let message = queues.unwrap_err().to_string();
    assert!(
        message.starts_with("out of memory: 65536 pipes need "),
        "{message}"
    );

    // With the allocator willing again, the same request is served.
    let bag = Bagpipe::<Stack<u64>>::with_pipes(MAX_PIPES).unwrap();
    bag.push(7);
    assert_eq!(bag.pop(), Some(7));
}
