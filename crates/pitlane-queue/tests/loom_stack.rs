//! Loom models of the Treiber stack: the tagged top against concurrent pushes and pops, and the
//! node stashes of handles moving batches through the shared free list (under loom a batch is 2
//! nodes, so a handle refills and spills after a few operations), and a handle's guess of the top
//! going stale. Plain calls have no seats under loom (they use the shared free list and count
//! and load the top), so the guess is modelled through handles, which run the same code.
#![cfg(pitlane_loom)]

use loom::sync::Arc;
use loom::thread;

use pitlane_queue::stack::Stack;

#[test]
fn pushes_and_pops_race_on_the_top_without_loss() {
    loom::model(|| {
        let stack = Arc::new(Stack::new());
        stack.push(1);
        let other = {
            let stack = stack.clone();
            thread::spawn(move || {
                stack.push(2);
                stack.pop()
            })
        };
        // The main thread's side runs in a spawned thread too: loom does not run a spawned
        // thread ahead of the main thread's first steps (docs/notes/loom-coverage.md).
        let mine = {
            let stack = stack.clone();
            thread::spawn(move || stack.pop())
        };
        let theirs = other.join().unwrap();
        let mine = mine.join().unwrap();
        let mut all: Vec<u32> = [mine, theirs].into_iter().flatten().collect();
        // The count beside the top is exact once every operation has finished.
        assert_eq!(stack.len(), 2 - all.len());
        all.extend(std::iter::from_fn(|| stack.pop()));
        all.sort_unstable();
        assert_eq!(all, [1, 2]);
        assert_eq!(stack.len(), 0);
    });
}

#[test]
fn a_handle_stash_and_the_shared_free_list_trade_batches() {
    loom::model(|| {
        let stack = Arc::new(Stack::new());
        let with_handle = {
            let stack = stack.clone();
            thread::spawn(move || {
                let handle = stack.handle();
                // Fresh batches come in, popped nodes go to the stash, and the handle's drop
                // spills them back as batches.
                handle.push(10);
                handle.push(11);
                handle.push(12);
                let popped = [handle.pop(), handle.pop()];
                drop(handle);
                popped
            })
        };
        // A thread without a stash takes single nodes off shared batches meanwhile.
        stack.push(20);
        let mine = stack.pop();
        let theirs = with_handle.join().unwrap();
        let mut all: Vec<u32> = theirs.into_iter().chain([mine]).flatten().collect();
        all.extend(std::iter::from_fn(|| stack.pop()));
        all.sort_unstable();
        assert_eq!(all, [10, 11, 12, 20]);
        // Every node is free again and reusable by a new handle.
        let handle = stack.handle();
        handle.push(1);
        assert_eq!(handle.pop(), Some(1));
    });
}

#[test]
fn handles_count_in_tallies_that_later_handles_inherit() {
    loom::model(|| {
        let stack = Arc::new(Stack::new());
        let other = {
            let stack = stack.clone();
            thread::spawn(move || {
                // Races with the main thread's handle to add or take a tally.
                let handle = stack.handle();
                handle.push(1);
                handle.push(2);
                handle.pop()
            })
        };
        let handle = stack.handle();
        handle.push(3);
        let mine = handle.pop();
        drop(handle);
        let theirs = other.join().unwrap();
        let popped = [mine, theirs].into_iter().flatten().count();
        // The handles' tallies add up to the exact count once every operation has finished.
        assert_eq!(stack.len(), 3 - popped);
        // A new handle inherits a dropped handle's tally, count and all.
        let handle = stack.handle();
        let drained = std::iter::from_fn(|| handle.pop()).count();
        assert_eq!(drained, 3 - popped);
        assert_eq!(stack.len(), 0);
    });
}

#[test]
fn a_stale_guess_of_the_top_fails_and_the_operation_goes_on_from_the_real_top() {
    loom::model(|| {
        let stack = Arc::new(Stack::new());
        let handle = stack.handle();
        // The main thread's guess is now the top it installed: the node holding 1.
        handle.push(1);
        let other = {
            let stack = stack.clone();
            thread::spawn(move || {
                let handle = stack.handle();
                // If this pop takes 1, its node goes to this handle's stash and the push below
                // reuses it: the same index back on top under a newer generation, the case a
                // guess compared by index alone would get wrong.
                let got = handle.pop();
                handle.push(3);
                got
            })
        };
        // Each compares against its guess first; a wrong one must neither report a lost race
        // nor lose or duplicate anything.
        let mine = handle.pop();
        handle.push(4);
        let theirs = other.join().unwrap();
        drop(handle);
        let mut all: Vec<u32> = [mine, theirs].into_iter().flatten().collect();
        assert_eq!(stack.len(), 3 - all.len());
        all.extend(std::iter::from_fn(|| stack.pop()));
        all.sort_unstable();
        assert_eq!(all, [1, 3, 4]);
    });
}

#[test]
fn a_guess_made_by_a_pop_and_the_empty_guess_of_a_first_push_hold_up() {
    loom::model(|| {
        let stack = Arc::new(Stack::new());
        let handle = stack.handle();
        handle.push(1);
        handle.push(2);
        let other = {
            let stack = stack.clone();
            thread::spawn(move || {
                let handle = stack.handle();
                // A new handle's first push compares against the empty word the stack started
                // with: right only if nothing was pushed yet, which is not the case here.
                handle.push(3);
                handle.pop()
            })
        };
        // The first pop's guess comes with the node its push installed; the second compares
        // against the word the first pop installed and looks its node up by index.
        let first = handle.pop();
        let second = handle.pop();
        let theirs = other.join().unwrap();
        drop(handle);
        let mut all: Vec<u32> = [first, second, theirs].into_iter().flatten().collect();
        assert_eq!(
            all.len(),
            3,
            "three pops on a stack of three items that none else pops"
        );
        assert_eq!(stack.len(), 0);
        assert_eq!(stack.pop(), None);
        all.sort_unstable();
        assert_eq!(all, [1, 2, 3]);
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
