//! The MPMC queue and the Bagpipe when the global allocator is hostile user code (the
//! thirty-second session's pass; `docs/notes/issue-checklist.md`): an allocator that refuses
//! on demand, and one that calls back into the structure being operated on, on the same
//! thread, from inside an allocation the structure makes (an allocator keeping free blocks
//! in a `static` queue or Bagpipe does so).
//!
//! This binary's global allocator forwards to `System`, with per-thread switches set by each
//! test: refuse every allocation of one exact layout, or run a hook (once) at the next
//! allocation aligned as a queue segment is. So it cannot also take pitlane-alloc as its
//! global allocator under `--cfg pitlane_alloc_global`. Scenarios that abort the process
//! when they fail run in a child process (this binary run again on one test, with
//! `HOSTILE_ALLOC_CHILD` set), so that the suite reports the abort instead of dying of it.
#![cfg(not(pitlane_loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::process::Command;

use pitlane_queue::mpmc::Queue;
use pitlane_queue::{PopError, PushError};

/// The alignment of a queue segment: that of its cache-padded counters.
const SEGMENT_ALIGN: usize = core::mem::align_of::<crossbeam_utils::CachePadded<u8>>();

/// The layout of a queue's segment pool: 64 places and an owner count, each a word.
const POOL_LAYOUT: (usize, usize) = (
    65 * core::mem::size_of::<usize>(),
    core::mem::align_of::<usize>(),
);

thread_local! {
    /// Allocations of exactly this (size, align) are refused on this thread while set.
    static REFUSE: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
    /// Run (once) at this thread's next allocation aligned as a queue segment, before it is
    /// served.
    static ON_SEGMENT: Cell<Option<fn()>> = const { Cell::new(None) };
}

struct Hostile;

// SAFETY: every call is forwarded to `System`, or refused with null (which `GlobalAlloc`
// allows); a test's hook runs before the forwarded call and allocates through this same
// allocator (it is taken first, so it does not run again inside itself).
unsafe impl GlobalAlloc for Hostile {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if REFUSE.try_with(Cell::get).ok().flatten() == Some((layout.size(), layout.align())) {
            return std::ptr::null_mut();
        }
        if layout.align() >= SEGMENT_ALIGN {
            if let Some(hook) = ON_SEGMENT.try_with(Cell::take).ok().flatten() {
                hook();
            }
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (refusals are never freed).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Hostile = Hostile;

/// Runs test `name` of this binary in a child process with `HOSTILE_ALLOC_CHILD` set, and
/// asserts that it exits successfully (the parent's copy of the test does nothing else).
/// Returns `true` in the child, which then runs the scenario.
fn in_child(name: &str) -> bool {
    if std::env::var_os("HOSTILE_ALLOC_CHILD").is_some() {
        return true;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("HOSTILE_ALLOC_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child running {name} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
    );
    false
}

// --- refused allocations on the push and pop paths ----------------------------------------------

static LOST_LINK: Queue<u64, 2> = Queue::with_segment_size();

/// Inside the allocation of the outer push's new segment: a nested push on the same thread
/// links a segment of its own first (so the outer push loses its link and must give its
/// segment back), and from then on the pool's allocation is refused.
fn link_first_then_refuse_the_pool() {
    LOST_LINK.push(100);
    REFUSE.set(Some(POOL_LAYOUT));
}

#[test]
fn a_try_push_that_loses_its_link_while_the_pool_is_refused_hands_back_no_abort() {
    if !in_child("a_try_push_that_loses_its_link_while_the_pool_is_refused_hands_back_no_abort") {
        return;
    }
    LOST_LINK.push(0);
    LOST_LINK.push(1);
    // The tail segment is full: the next push allocates segment 1, and the hook makes it lose
    // the link to the nested push's segment, with no pool made yet (nothing was retired).
    ON_SEGMENT.set(Some(link_first_then_refuse_the_pool));
    let result = LOST_LINK.try_push(2);
    REFUSE.set(None);
    assert!(ON_SEGMENT.take().is_none(), "the push did not allocate");
    match result {
        Ok(()) | Err(PushError::Transient(2)) => {}
        Err(error) => panic!("unexpected {error:?}"),
    }
    let _ = LOST_LINK.try_push(3);
    let drained: Vec<u64> = std::iter::from_fn(|| LOST_LINK.pop()).collect();
    assert!(
        drained.starts_with(&[0, 1, 100]) && drained.ends_with(&[3]),
        "{drained:?}"
    );
}

#[test]
fn pops_that_retire_segments_while_the_pool_is_refused_lose_nothing_and_do_not_abort() {
    if !in_child(
        "pops_that_retire_segments_while_the_pool_is_refused_lose_nothing_and_do_not_abort",
    ) {
        return;
    }
    let queue: Queue<u64, 2> = Queue::with_segment_size();
    // Enough one-segment retirements to move limbo (64 segments) twice, and the segments'
    // grace periods then need the pool, which the allocator refuses.
    let n = 2 * 2 * 130;
    (0..n).for_each(|i| queue.push(i));
    REFUSE.set(Some(POOL_LAYOUT));
    let mut popped = Vec::new();
    while let Some(v) = queue.pop() {
        popped.push(v);
    }
    // Pushes and pops go on while refused.
    (0..n).for_each(|i| queue.push(i));
    while let Some(v) = queue.pop() {
        popped.push(v);
    }
    REFUSE.set(None);
    let expected: Vec<u64> = (0..n).chain(0..n).collect();
    assert_eq!(popped, expected);
    assert_eq!(queue.try_pop(), Err(PopError::Empty));
}
