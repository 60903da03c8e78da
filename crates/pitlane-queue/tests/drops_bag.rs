//! Drop counting for the weak bags: every item is dropped exactly once — by whoever popped it,
//! by the bag when it is dropped with items left in it, or by the bag after a revoke — and a
//! failed attempt hands its item back instead of dropping it.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::Stack;
use pitlane_queue::{PopError, WeakBag};
use pitlane_testkit::drops::Counted;

/// Pushes `pushed` items, pops `popped` of them, drops the bag: every item dropped once.
fn leftovers_are_dropped_with_the_bag<'a, B: WeakBag<Item = Counted<'a>>>(
    bag: B,
    drops: &'a AtomicUsize,
    pushed: usize,
    popped: usize,
) {
    for id in 0..pushed {
        bag.push(Counted::new(id, drops));
    }
    assert_eq!(bag.size_guess(), pushed);
    for _ in 0..popped {
        let item = bag.pop().expect("an item");
        assert!(item.id < pushed);
    }
    assert_eq!(drops.load(Ordering::Relaxed), popped);
    drop(bag);
    assert_eq!(drops.load(Ordering::Relaxed), pushed);
}

#[test]
fn mpmc_drops_leftovers_across_segments() {
    let drops = AtomicUsize::new(0);
    // 4-cell segments: leftovers span many segments, and popped ones were retired.
    leftovers_are_dropped_with_the_bag(Queue::<_, 4>::with_segment_size(), &drops, 103, 41);
    let drops = AtomicUsize::new(0);
    leftovers_are_dropped_with_the_bag(Queue::new(), &drops, 3000, 0);
}

#[test]
fn stack_drops_leftovers_across_chunks() {
    let drops = AtomicUsize::new(0);
    leftovers_are_dropped_with_the_bag(Stack::new(), &drops, 1000, 313);
}

#[test]
fn bagpipes_drop_leftovers() {
    let drops = AtomicUsize::new(0);
    let bag = Bagpipe::<Queue<_, 8>>::with_pipes(4).unwrap();
    leftovers_are_dropped_with_the_bag(bag, &drops, 500, 123);
    let drops = AtomicUsize::new(0);
    let bag = Bagpipe::<Stack<_>>::with_pipes(4).unwrap();
    leftovers_are_dropped_with_the_bag(bag, &drops, 500, 499);
}

#[test]
fn an_empty_pop_drops_nothing() {
    let drops = AtomicUsize::new(0);
    let queue: Queue<Counted> = Queue::new();
    assert_eq!(queue.try_pop().unwrap_err(), PopError::Empty);
    queue.push(Counted::new(0, &drops));
    drop(queue.pop());
    assert_eq!(queue.try_pop().unwrap_err(), PopError::Empty);
    assert_eq!(drops.load(Ordering::Relaxed), 1);
}

/// Threads push and pop concurrently, then the bag is dropped with what is left: every item is
/// dropped exactly once, whichever way it went (and failed `try_push`es handed items back).
fn concurrent_drops<'a, B: WeakBag<Item = Counted<'a>> + Sync>(bag: B, drops: &'a AtomicUsize) {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 5_000;
    thread::scope(|s| {
        for t in 0..THREADS {
            let bag = &bag;
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    let mut item = Counted::new(t * PER_THREAD + i, drops);
                    // Lost races hand the very item back, undropped.
                    while let Err(back) = bag.try_push(item) {
                        item = back.into_inner();
                    }
                    if i % 3 != 0 {
                        drop(bag.pop());
                    }
                }
            });
        }
    });
    let left = bag.size_guess();
    let dropped = drops.load(Ordering::Relaxed);
    assert_eq!(left + dropped, THREADS * PER_THREAD);
    drop(bag);
    assert_eq!(drops.load(Ordering::Relaxed), THREADS * PER_THREAD);
}

#[test]
fn concurrent_pushes_and_pops_drop_each_item_once() {
    let drops = AtomicUsize::new(0);
    concurrent_drops(Queue::<_, 16>::with_segment_size(), &drops);
    let drops = AtomicUsize::new(0);
    concurrent_drops(Stack::new(), &drops);
    let drops = AtomicUsize::new(0);
    concurrent_drops(Bagpipe::<Queue<_, 16>>::with_pipes(2).unwrap(), &drops);
    let drops = AtomicUsize::new(0);
    concurrent_drops(Bagpipe::<Stack<_>>::with_pipes(2).unwrap(), &drops);
}

/// A revocable item that counts drops; the handle lives in the page it points to.
struct Page {
    handle: RevokeHandle,
}

struct PageRef<'a> {
    page: &'a Page,
    drops: &'a AtomicUsize,
}

impl Drop for PageRef<'_> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: the handle lives in the `Page`, outside the `PageRef`, and outlives it.
unsafe impl Revocable for PageRef<'_> {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.page.handle
    }
}

/// Ten tracked pages; three revoked; the rest popped or left in the bag. The bag's copies of
/// revoked items are dropped by the pops that pass them or by the bag's drop, and every handle
/// ends up clear.
fn revoked_copies_are_dropped<'a, B>(bag: B, pages: &'a [Page], drops: &'a AtomicUsize)
where
    B: RevocableBag<Item = PageRef<'a>>,
{
    for page in pages {
        bag.push_revocable(PageRef { page, drops });
        assert!(page.handle.is_in_bag());
    }
    let probe = |i: usize| PageRef {
        page: &pages[i],
        drops,
    };
    for i in [1, 4, 7] {
        let item = probe(i);
        // SAFETY: every page was pushed into `bag`, alive here.
        assert!(unsafe { B::revoke(&item) });
        // SAFETY: as above.
        assert!(!unsafe { B::revoke(&item) }, "revoked twice");
        assert!(!pages[i].handle.is_in_bag());
    }
    // Our three probes are gone; no copy in the bag has been dropped yet.
    assert_eq!(drops.load(Ordering::Relaxed), 3);
    // Pop four: the revoked pages are never returned; those passed over are dropped.
    let mut popped = Vec::new();
    for _ in 0..4 {
        let item = bag.pop().expect("seven pages are still in the bag");
        assert!(![1, 4, 7].contains(&page_index(pages, item.page)));
        assert!(!item.page.handle.is_in_bag());
        popped.push(page_index(pages, item.page));
    }
    // A popped page is in no bag: revoking it fails.
    // SAFETY: as above.
    assert!(!unsafe { B::revoke(&probe(popped[0])) });
    drop(bag);
    // 10 pushed + 4 probes, each dropped exactly once.
    assert_eq!(drops.load(Ordering::Relaxed), 10 + 4);
    for page in pages {
        assert!(!page.handle.is_in_bag());
    }
}

fn page_index(pages: &[Page], page: &Page) -> usize {
    pages.iter().position(|p| std::ptr::eq(p, page)).unwrap()
}

fn ten_pages() -> Vec<Page> {
    (0..10)
        .map(|_| Page {
            handle: RevokeHandle::new(),
        })
        .collect()
}

#[test]
fn mpmc_drops_revoked_copies_once() {
    let (pages, drops) = (ten_pages(), AtomicUsize::new(0));
    revoked_copies_are_dropped(Queue::<_, 2>::with_segment_size(), &pages, &drops);
}

#[test]
fn stack_drops_revoked_copies_once() {
    let (pages, drops) = (ten_pages(), AtomicUsize::new(0));
    revoked_copies_are_dropped(Stack::new(), &pages, &drops);
}

#[test]
fn bagpipe_drops_revoked_copies_once() {
    let (pages, drops) = (ten_pages(), AtomicUsize::new(0));
    revoked_copies_are_dropped(
        Bagpipe::<Queue<_, 2>>::with_pipes(2).unwrap(),
        &pages,
        &drops,
    );
}

/// Through handles (a stack's stash of free nodes, a queue's pin, a Bagpipe's sessions), every
/// item is still dropped exactly once.
#[test]
fn handles_drop_each_item_once() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 3_000;
    let drops = AtomicUsize::new(0);
    let stack = Stack::new();
    let queue = Queue::<_, 16>::with_segment_size();
    let bagpipe = Bagpipe::<Stack<_>>::with_pipes(2).unwrap();
    thread::scope(|s| {
        for t in 0..THREADS {
            let (stack, queue, bagpipe, drops) = (&stack, &queue, &bagpipe, &drops);
            s.spawn(move || {
                let (on_stack, on_queue, on_bagpipe) =
                    (stack.handle(), queue.handle(), bagpipe.handle());
                for i in 0..PER_THREAD {
                    let id = t * PER_THREAD + i;
                    on_stack.push(Counted::new(id, drops));
                    on_queue.push(Counted::new(id, drops));
                    on_bagpipe.push(Counted::new(id, drops));
                    if i % 3 != 0 {
                        drop((on_stack.pop(), on_queue.pop(), on_bagpipe.pop()));
                    }
                }
            });
        }
    });
    let left = stack.size_guess() + queue.size_guess() + bagpipe.size_guess();
    assert_eq!(
        left + drops.load(Ordering::Relaxed),
        3 * THREADS * PER_THREAD
    );
    drop((stack, queue, bagpipe));
    assert_eq!(drops.load(Ordering::Relaxed), 3 * THREADS * PER_THREAD);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
