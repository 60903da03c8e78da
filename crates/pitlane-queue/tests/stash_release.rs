//! A stack handle's [`BagHandle::release`] keeps its stash of free nodes: releasing is what a
//! Bagpipe handle does to all its pipe handles every 256 operations (so that queue pipes let
//! their epoch pins go), and for stack pipes it must not throw the stashes away, which would
//! send every 256th operation to the shared free list for nothing.
//!
//! The stash is seen through the handle's `Debug` output (`stashed: N`).
#![cfg(not(pitlane_loom))]

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::stack::Stack;
use pitlane_queue::{BagHandle, mpmc::Queue};

/// The `stashed` count a stack handle's `Debug` output shows.
fn stashed(handle: &impl std::fmt::Debug) -> usize {
    let text = format!("{handle:?}");
    let (_, rest) = text
        .split_once("stashed: ")
        .unwrap_or_else(|| panic!("no stash count in {text}"));
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no stash count in {text}"))
}

#[test]
fn release_keeps_a_stack_handles_stash() {
    let stack = Stack::new();
    let handle = stack.handle();
    for i in 0..10 {
        handle.push(i);
    }
    for _ in 0..10 {
        assert!(handle.pop().is_some());
    }
    let before = stashed(&handle);
    assert!(before > 0, "popped nodes go to the stash: {handle:?}");
    handle.release();
    assert_eq!(stashed(&handle), before, "release gave the stash away");
    // Still usable, from the same stash.
    handle.push(42);
    assert_eq!(handle.pop(), Some(42));
    assert_eq!(stashed(&handle), before);
}

#[test]
fn bagpipe_handles_over_stacks_and_queues_survive_many_renewals() {
    // Well past several renewals (every 256 operations): items stay intact either way.
    let stacks: Bagpipe<Stack<u32>> = Bagpipe::with_pipes(2).unwrap();
    let queues: Bagpipe<Queue<u32>> = Bagpipe::with_pipes(2).unwrap();
    let (on_stacks, on_queues) = (stacks.handle(), queues.handle());
    let mut sums = (0_u64, 0_u64);
    for i in 0..2_000 {
        on_stacks.push(i);
        on_queues.push(i);
        sums.0 += u64::from(on_stacks.pop().unwrap());
        sums.1 += u64::from(on_queues.pop().unwrap());
    }
    let expected = (0..2_000_u64).sum::<u64>();
    assert_eq!(sums, (expected, expected));
    assert!(on_stacks.pop().is_none() && on_queues.pop().is_none());
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
