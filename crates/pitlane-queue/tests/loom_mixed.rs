//! Loom models of plain calls and handles on the same structure at once. Under loom plain calls
//! have no seats: a stack's plain calls take single nodes off shared batches, give popped
//! nodes back as batches of one and count in the shared count beside the top, while a handle
//! refills its stash with whole batches (2 nodes under loom), spills batches back and counts
//! in its tally; both kinds on each thread, so that the free list takes batches of one, spills
//! of a stash and a dropped handle's stash from two threads at once. A queue's plain calls and
//! handles share the cell protocol and the segment hand-off (1-cell segments: every push links
//! a segment).
#![cfg(pitlane_loom)]

use loom::sync::Arc;
use loom::thread;

use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;

#[test]
fn a_stacks_plain_calls_and_handles_on_two_threads_trade_nodes_without_loss() {
    loom::model(|| {
        let stack = Arc::new(Stack::new());
        let side = |base: u32| {
            let stack = stack.clone();
            thread::spawn(move || {
                let handle = stack.handle();
                handle.push(base);
                stack.push(base + 1);
                // Whichever is on top: a handle pop passing the node to its stash, then a
                // plain pop giving its node to the shared list as a batch of one.
                let a = handle.pop();
                let b = stack.pop();
                // The stash (fresh nodes and the popped one) goes back as batches.
                drop(handle);
                [a, b]
            })
        };
        let one = side(10);
        let two = side(20);
        let mut all: Vec<u32> = one
            .join()
            .unwrap()
            .into_iter()
            .chain(two.join().unwrap())
            .flatten()
            .collect();
        // The shared count and the tallies add up once every operation has finished.
        assert_eq!(stack.len(), 4 - all.len());
        all.extend(std::iter::from_fn(|| stack.pop()));
        all.sort_unstable();
        assert_eq!(all, [10, 11, 20, 21]);
        assert_eq!(stack.len(), 0);
        // Every node came back: a handle and a plain push find nodes again.
        let handle = stack.handle();
        handle.push(1);
        stack.push(2);
        assert_eq!(stack.pop(), Some(2));
        assert_eq!(handle.pop(), Some(1));
    });
}

#[test]
fn a_queues_plain_calls_and_handles_on_two_threads_keep_each_pushers_order() {
    loom::model(|| {
        let queue = Arc::new(Queue::<u32, 1>::with_segment_size());
        let pusher = {
            let queue = queue.clone();
            thread::spawn(move || {
                let handle = queue.handle();
                queue.push(1);
                handle.push(2);
                queue.push(3);
            })
        };
        let popper = {
            let queue = queue.clone();
            thread::spawn(move || {
                let handle = queue.handle();
                [handle.pop(), queue.pop()]
            })
        };
        pusher.join().unwrap();
        let mut all: Vec<u32> = popper.join().unwrap().into_iter().flatten().collect();
        // One pusher: the popped values are its first ones, in order.
        assert_eq!(all, (1..=all.len() as u32).collect::<Vec<_>>());
        assert_eq!(queue.len(), 3 - all.len());
        let handle = queue.handle();
        all.extend(std::iter::from_fn(|| handle.pop()));
        assert_eq!(all, [1, 2, 3]);
        assert_eq!(queue.len(), 0);
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
