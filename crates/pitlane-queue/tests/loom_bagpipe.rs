//! Loom models of revocation against pop (on queue cells and on stack nodes), and of a Bagpipe
//! whose handles walk two pipes.
//!
//! Of a concurrent `revoke` and `pop` of the same item exactly one may win, and the item must
//! be dropped exactly once: the items here are loom `Arc`s, so loom also reports any copy the
//! bags leak. Under `cfg(pitlane_loom)` the queue keeps retired segments until it is dropped
//! (loom cannot model crossbeam-epoch), so what is checked is the slot protocol: the CAS
//! `H → REVOKED`, the popper's swap, and the handle updates around them.
#![cfg(pitlane_loom)]

use loom::sync::Arc;
use loom::thread;

use pitlane_queue::PushError;
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::Stack;

struct Page {
    handle: RevokeHandle,
    number: usize,
}

/// A shared page: the handle lives in the `Arc`'s allocation, outside the pointer.
#[derive(Clone)]
struct PageRef(Arc<Page>);

// SAFETY: every clone of the `Arc` reaches the same handle, which lives as long as any clone.
unsafe impl Revocable for PageRef {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.0.handle
    }
}

fn page(number: usize) -> PageRef {
    PageRef(Arc::new(Page {
        handle: RevokeHandle::new(),
        number,
    }))
}

/// The page is in the bag; one thread revokes it while another pops.
fn revoke_against_pop<B>(bag: B)
where
    B: RevocableBag<Item = PageRef> + Send + Sync + 'static,
{
    let bag = Arc::new(bag);
    let target = page(1);
    bag.push_revocable(target.clone());
    let revoker = {
        let (bag, target) = (bag.clone(), target.clone());
        thread::spawn(move || {
            let _alive = &bag;
            // SAFETY: the page was pushed into `bag`, which this thread keeps alive.
            unsafe { B::revoke(&target) }
        })
    };
    // The pop runs in a spawned thread too: loom does not run a spawned thread ahead of the
    // main thread's first steps (docs/notes/loom-coverage.md).
    let popper = {
        let bag = bag.clone();
        thread::spawn(move || bag.pop())
    };
    let revoked = revoker.join().unwrap();
    let popped = popper.join().unwrap();
    match popped {
        Some(page) => {
            assert!(!revoked, "popped and revoked");
            assert_eq!(page.0.number, 1);
        }
        None => assert!(revoked, "neither popped nor revoked"),
    }
    assert!(!target.0.handle.is_in_bag());
    assert!(bag.pop().is_none());
}

#[test]
fn revoke_against_pop_on_a_queue_cell() {
    loom::model(|| revoke_against_pop(Queue::<PageRef, 2>::with_segment_size()));
}

#[test]
fn revoke_against_pop_on_a_stack_node() {
    loom::model(|| revoke_against_pop(Stack::<PageRef>::new()));
}

/// Revoke races the push itself: it may find the item or not, but a revoked item is never
/// popped and one that was not revoked is.
///
/// Revoker and pusher are both spawned threads: loom does not run a spawned thread ahead of the
/// main thread's first steps, so with the revoke on the main thread (as this model first had
/// it) the revoke always ran before the push and only one execution was explored; with the
/// push on the main thread, 11.
fn revoke_against_push<B>(bag: B)
where
    B: RevocableBag<Item = PageRef> + Send + Sync + 'static,
{
    let bag = Arc::new(bag);
    let target = page(2);
    let revoker = {
        let (bag, target) = (bag.clone(), target.clone());
        thread::spawn(move || {
            let _alive = &bag;
            // SAFETY: the page is pushed only into `bag`, which this thread keeps alive.
            unsafe { B::revoke(&target) }
        })
    };
    // The push runs in a spawned thread too, so that either side may start first.
    let pusher = {
        let (bag, target) = (bag.clone(), target.clone());
        thread::spawn(move || bag.push_revocable(target))
    };
    pusher.join().unwrap();
    let revoked = revoker.join().unwrap();
    let popped = bag.pop();
    assert_eq!(popped.is_some(), !revoked);
    assert!(!target.0.handle.is_in_bag());
    drop(popped);
    assert!(bag.pop().is_none());
}

#[test]
fn revoke_against_push_on_a_queue_cell() {
    loom::model(|| revoke_against_push(Queue::<PageRef, 2>::with_segment_size()));
}

#[test]
fn revoke_against_push_on_a_stack_node() {
    loom::model(|| revoke_against_push(Stack::<PageRef>::new()));
}

#[test]
fn pops_skip_a_revoked_cell_while_another_pop_races() {
    loom::model(|| {
        let bag = Arc::new(Queue::<PageRef, 2>::with_segment_size());
        let (first, second) = (page(1), page(2));
        bag.push_revocable(first.clone());
        bag.push_revocable(second.clone());
        let revoker = {
            let (bag, first) = (bag.clone(), first.clone());
            thread::spawn(move || {
                let _alive = &bag;
                // SAFETY: `first` was pushed into `bag`, which this thread keeps alive.
                unsafe { Queue::<PageRef, 2>::revoke(&first) }
            })
        };
        // The pop runs in a spawned thread too (see `revoke_against_pop`).
        let popper = {
            let bag = bag.clone();
            thread::spawn(move || bag.pop().map(|p| p.0.number))
        };
        let revoked = revoker.join().unwrap();
        let got = popper.join().unwrap();
        let rest: Vec<usize> = std::iter::from_fn(|| bag.pop())
            .map(|p| p.0.number)
            .collect();
        if revoked {
            assert_eq!(got, Some(2));
            assert!(rest.is_empty());
        } else {
            assert_eq!(got, Some(1));
            assert_eq!(rest, [2]);
        }
    });
}

/// The plain bounded calls (`Bagpipe::push_bounded`, `pop_bounded`: the bail-out without a
/// handle, walking from the thread's own position) against a plain push and pop: an item
/// handed back by a bounded push that gave up, and anything left in the pipes, account for
/// every value exactly once.
#[test]
fn plain_bounded_calls_walking_two_pipes_lose_nothing() {
    loom::model(|| {
        let bag = Arc::new(Bagpipe::<Queue<usize, 2>>::with_pipes(2).unwrap());
        let other = {
            let bag = bag.clone();
            thread::spawn(move || {
                let handed_back = bag.push_bounded(1, 1).err().map(PushError::into_inner);
                (handed_back, bag.pop_bounded(2).ok())
            })
        };
        let mine = {
            let bag = bag.clone();
            thread::spawn(move || {
                bag.push(2);
                bag.try_pop().ok()
            })
        };
        let (handed_back, theirs) = other.join().unwrap();
        let mine = mine.join().unwrap();
        let mut all: Vec<usize> = mine.into_iter().chain(theirs).chain(handed_back).collect();
        all.extend(std::iter::from_fn(|| bag.pop()));
        all.sort_unstable();
        assert_eq!(all, [1, 2]);
        assert_eq!(bag.size_guess(), 0);
    });
}

#[test]
fn bagpipe_handles_walking_two_pipes_lose_nothing() {
    loom::model(|| {
        let bag = Arc::new(Bagpipe::<Queue<usize, 2>>::with_pipes(2).unwrap());
        let other = {
            let bag = bag.clone();
            thread::spawn(move || {
                let handle = bag.handle();
                handle.push(1);
                handle.pop_bounded(2).ok()
            })
        };
        // This side runs in a spawned thread too: loom does not run a spawned thread ahead of
        // the main thread's first steps, so on the main thread it explored only 4 executions.
        let mine = {
            let bag = bag.clone();
            thread::spawn(move || {
                let handle = bag.handle();
                handle.push(2);
                // Empty or a lost race: the value is then drained below.
                handle.try_pop().ok()
            })
        };
        let theirs = other.join().unwrap();
        let mine = mine.join().unwrap();
        let mut all: Vec<usize> = mine.into_iter().chain(theirs).collect();
        all.extend(std::iter::from_fn(|| bag.pop()));
        all.sort_unstable();
        assert_eq!(all, [1, 2]);
        assert_eq!(bag.size_guess(), 0);
    });
}

#[test]
fn bagpipe_revoke_finds_the_item_in_whichever_pipe() {
    loom::model(|| {
        let bag = Arc::new(Bagpipe::<Stack<PageRef>>::with_pipes(2).unwrap());
        let target = page(3);
        let pusher = {
            let (bag, target) = (bag.clone(), target.clone());
            thread::spawn(move || bag.handle().push_revocable(target))
        };
        pusher.join().unwrap();
        let popper = {
            let bag = bag.clone();
            thread::spawn(move || bag.handle().pop().map(|p| p.0.number))
        };
        // The revoke runs in a spawned thread too: loom does not run a spawned thread ahead of
        // the main thread's first steps (docs/notes/loom-coverage.md).
        let revoker = {
            let (bag, target) = (bag.clone(), target.clone());
            // SAFETY: the page was pushed into `bag`, which this thread keeps alive.
            thread::spawn(move || unsafe { bag.revoke(&target) })
        };
        let popped = popper.join().unwrap();
        let revoked = revoker.join().unwrap();
        assert_ne!(revoked, popped == Some(3));
        assert!(bag.pop().is_none());
    });
}

/// Two tracked pushes race to link the next one-cell segment while a revoker goes after one of
/// the two items. The push that loses the link must not have exposed the cell of a segment it
/// then frees (the revoker would mark a cell of freed memory and "win" an item that the retried
/// push then publishes): a revoked page is never popped, and every page not revoked is popped.
#[test]
fn revoke_against_pushes_racing_to_link_a_segment() {
    loom::model(|| {
        let queue = Arc::new(Queue::<PageRef, 1>::with_segment_size());
        // Fill segment 0: both pushes below go past the end of it.
        queue.push_revocable(page(0));
        let (first, second) = (page(1), page(2));
        let pushers: Vec<_> = [first.clone(), second]
            .into_iter()
            .map(|page| {
                let queue = queue.clone();
                thread::spawn(move || queue.push_revocable(page))
            })
            .collect();
        // SAFETY: `first` is pushed only into `queue`, alive here.
        let revoked = unsafe { Queue::<PageRef, 1>::revoke(&first) };
        for pusher in pushers {
            pusher.join().unwrap();
        }
        let mut popped: Vec<usize> = std::iter::from_fn(|| queue.pop())
            .map(|p| p.0.number)
            .collect();
        popped.sort_unstable();
        if revoked {
            assert_eq!(popped, [0, 2], "a revoked page was popped");
        } else {
            assert_eq!(popped, [0, 1, 2]);
        }
        assert!(!first.0.handle.is_in_bag());
    });
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// A revoke that wins its CAS on a stack node and clears the handle late, after a pop has
/// skipped the revoked node, recycled it, and a push has put the same page (another copy) into
/// that very node: the revoker's late clear must not erase the new push's tracking (the
/// handle's word carries the new push's stamp, so it differs from the word the revoker read).
/// Afterwards `is_in_bag` agrees with whether a pop finds the page.
///
/// Without stamps (the defect the queue audit found), the revoker's clear matched the new
/// push's address: `is_in_bag` said false though a pop returned the page.
#[test]
fn a_late_revoker_does_not_untrack_the_page_pushed_again_into_its_node() {
    loom::model(|| {
        let stack = Arc::new(Stack::<PageRef>::new());
        let target = page(3);
        stack.push_revocable(target.clone());
        let revoker = {
            let (stack, target) = (stack.clone(), target.clone());
            thread::spawn(move || {
                let _alive = &stack;
                // SAFETY: the page is pushed only into `stack`, which this thread keeps alive.
                unsafe { Stack::revoke(&target) }
            })
        };
        // Pop (skipping the node if it was revoked), then push the page again, in a thread of
        // its own: loom does not run a spawned thread ahead of the main thread's first steps
        // (docs/notes/loom-coverage.md).
        let repusher = {
            let (stack, target) = (stack.clone(), target.clone());
            thread::spawn(move || {
                let popped = stack.pop();
                stack.push_revocable(target);
                popped
            })
        };
        let _revoked = revoker.join().unwrap();
        drop(repusher.join().unwrap());
        let in_bag = target.0.handle.is_in_bag();
        let rest: Vec<PageRef> = std::iter::from_fn(|| stack.pop()).collect();
        assert_eq!(
            in_bag,
            !rest.is_empty(),
            "the handle says in the bag: {in_bag}, but {} copies were popped",
            rest.len()
        );
    });
}

/// Every copy of `target` pushed so far is popped or revoked exactly once, and the handle says
/// "in the bag" exactly when a copy is still in it: pops what is left and checks both.
fn copies_accounted_for<B: RevocableBag<Item = PageRef>>(
    bag: &B,
    target: &PageRef,
    pushed: usize,
    popped: usize,
    revoked: usize,
) {
    let in_bag = target.0.handle.is_in_bag();
    let rest: Vec<PageRef> = std::iter::from_fn(|| bag.pop()).collect();
    assert_eq!(
        popped + revoked + rest.len(),
        pushed,
        "{pushed} copies pushed: {popped} popped, {revoked} revoked, {} left",
        rest.len()
    );
    assert_eq!(
        in_bag,
        !rest.is_empty(),
        "the handle says in the bag: {in_bag}, but {} copies were left",
        rest.len()
    );
}

/// Two revokers of the same page race a pop that may skip the revoked node and a push of
/// another copy of the page, which may land in the node just recycled: whichever revoker wins,
/// and whenever each clears the handle, the second copy stays tracked, and each copy is taken
/// out once.
#[test]
fn two_revokers_race_a_pop_and_a_push_of_another_copy_into_the_recycled_node() {
    loom::model(|| {
        let stack = Arc::new(Stack::<PageRef>::new());
        let target = page(4);
        stack.push_revocable(target.clone());
        let revokers: Vec<_> = (0..2)
            .map(|_| {
                let (stack, target) = (stack.clone(), target.clone());
                thread::spawn(move || {
                    let _alive = &stack;
                    // SAFETY: the page is pushed only into `stack`, kept alive by this thread.
                    unsafe { Stack::revoke(&target) }
                })
            })
            .collect();
        let popped = stack.pop().is_some();
        stack.push_revocable(target.clone());
        let revoked = revokers
            .into_iter()
            .map(|revoker| revoker.join().unwrap())
            .filter(|&won| won)
            .count();
        copies_accounted_for(&*stack, &target, 2, usize::from(popped), revoked);
    });
}

/// The same race on a Bagpipe of stacks, whose handle pops and pushes walk the pipes.
#[test]
fn a_late_revoker_on_a_bagpipe_of_stacks_leaves_the_new_copy_tracked() {
    loom::model(|| {
        let bag = Arc::new(Bagpipe::<Stack<PageRef>>::with_pipes(1).unwrap());
        let target = page(5);
        bag.push_revocable(target.clone());
        let revoker = {
            let (bag, target) = (bag.clone(), target.clone());
            thread::spawn(move || {
                // SAFETY: the page is pushed only into `bag`, kept alive by this thread.
                unsafe { bag.revoke(&target) }
            })
        };
        // The pop and the push again race the revoker from a thread of their own (see the
        // model above).
        let repusher = {
            let (bag, target) = (bag.clone(), target.clone());
            thread::spawn(move || {
                let popped = bag.pop().is_some();
                bag.push_revocable(target);
                popped
            })
        };
        let revoked = usize::from(revoker.join().unwrap());
        let popped = repusher.join().unwrap();
        copies_accounted_for(&*bag, &target, 2, usize::from(popped), revoked);
    });
}

/// A revoker races a tracked push into a queue cell whose publishing CAS a popper may make
/// fail (the popper poisons the cell it finds empty: in 74 of the executions explored with
/// two preemptions): the push then takes its page back, forgets the cell in the handle and
/// pushes again into a later cell. The revoker may read either cell's address; the page is
/// popped or revoked exactly once, and the handle agrees with what is left.
#[test]
fn a_revoke_racing_a_tracked_push_whose_publish_fails_on_a_queue() {
    loom::model(|| {
        let queue = Arc::new(Queue::<PageRef, 2>::with_segment_size());
        let target = page(6);
        let revoker = {
            let (queue, target) = (queue.clone(), target.clone());
            thread::spawn(move || {
                let _alive = &queue;
                // SAFETY: the page is pushed only into `queue`, kept alive by this thread.
                unsafe { Queue::<PageRef, 2>::revoke(&target) }
            })
        };
        // One attempt: it may poison the pusher's cell before the page is published.
        let popper = {
            let queue = queue.clone();
            thread::spawn(move || usize::from(queue.try_pop().is_ok()))
        };
        // The pusher is the main thread, whose steps loom interleaves with the others'.
        queue.push_revocable(target.clone());
        let popped = popper.join().unwrap();
        let revoked = usize::from(revoker.join().unwrap());
        copies_accounted_for(&*queue, &target, 1, popped, revoked);
    });
}
