//! User code that runs inside a bag's call and calls the bag again: a revoked item is dropped
//! by the pop that passes over it (in the middle of that pop, in the queue's era or the
//! stack's seat stash), and its `Drop` may push and pop on the same bag. Nothing may be lost,
//! handed out twice or dropped twice, and the bag must keep working.
#![cfg(not(pitlane_loom))]

use pitlane_queue::BagHandle;
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::Stack;
use pitlane_testkit::drops::Ledger;

const IDS: usize = 1 << 16;

struct Page {
    handle: RevokeHandle,
}

/// An item; when `reenter` is set, its drop calls it (with the bag in its closure).
struct Item {
    page: &'static Page,
    id: usize,
    ledger: &'static Ledger,
    reenter: Option<&'static (dyn Fn() + Sync)>,
}

impl Item {
    fn plain(ledger: &'static Ledger) -> Self {
        static PAGE: Page = Page {
            handle: RevokeHandle::new(),
        };
        Item::on(&PAGE, ledger, None)
    }

    /// A new item (its own ledger id) on `page`, doing `reenter` when dropped.
    fn on(
        page: &'static Page,
        ledger: &'static Ledger,
        reenter: Option<&'static (dyn Fn() + Sync)>,
    ) -> Self {
        Item {
            page,
            id: ledger.id(),
            ledger,
            reenter,
        }
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        self.ledger.dropped(self.id);
        if let Some(reenter) = self.reenter {
            reenter();
        }
    }
}

// SAFETY: the handle lives in the page, outside the item's bytes, the same for every move.
unsafe impl Revocable for Item {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.page.handle
    }
}

/// Pushes `n` tracked items whose drop pushes two plain items and pops one on `bag`, revokes
/// them all, then pops everything (each pop passing revoked items runs those drops inside it),
/// through plain calls or a handle.
fn revoked_drops_reenter<B>(bag: &'static B, ledger: &'static Ledger, n: usize, via_handle: bool)
where
    B: RevocableBag<Item = Item> + Sync,
{
    let reenter: &'static (dyn Fn() + Sync) = Box::leak(Box::new(move || {
        bag.push(Item::plain(ledger));
        bag.push(Item::plain(ledger));
        drop(bag.pop().expect("an item was just pushed"));
    }));
    let pages: Vec<&'static Page> = (0..n)
        .map(|_| {
            &*Box::leak(Box::new(Page {
                handle: RevokeHandle::new(),
            }))
        })
        .collect();
    for &page in &pages {
        bag.push_revocable(Item::on(page, ledger, Some(reenter)));
    }
    for &page in &pages {
        let probe = Item::on(page, ledger, None);
        // SAFETY: the bag is a leaked static.
        let revoked = unsafe { B::revoke(&probe) };
        assert!(revoked, "a tracked item in the bag is revoked");
    }
    let mut popped = 0;
    if via_handle {
        let handle = bag.handle();
        while let Some(item) = handle.pop() {
            assert!(item.reenter.is_none(), "a revoked item was popped");
            popped += 1;
        }
    } else {
        while let Some(item) = bag.pop() {
            assert!(item.reenter.is_none(), "a revoked item was popped");
            popped += 1;
        }
    }
    // Each revoked drop left one plain item more in the bag.
    assert_eq!(popped, n);
    assert_eq!(bag.pop().map(|item| item.id), None);
    ledger.assert_each_dropped_once();
}

fn leak<B>(bag: B) -> &'static B {
    Box::leak(Box::new(bag))
}

#[test]
fn queues_of_small_segments() {
    for via_handle in [false, true] {
        revoked_drops_reenter(
            leak(Queue::<Item, 1>::with_segment_size()),
            Ledger::leaked(IDS),
            300,
            via_handle,
        );
        revoked_drops_reenter(
            leak(Queue::<Item, 3>::with_segment_size()),
            Ledger::leaked(IDS),
            300,
            via_handle,
        );
        revoked_drops_reenter(
            leak(Queue::<Item>::new()),
            Ledger::leaked(IDS),
            300,
            via_handle,
        );
    }
}

#[test]
fn stacks() {
    for via_handle in [false, true] {
        revoked_drops_reenter(
            leak(Stack::<Item>::new()),
            Ledger::leaked(IDS),
            300,
            via_handle,
        );
    }
}

#[test]
fn bagpipes() {
    for via_handle in [false, true] {
        revoked_drops_reenter(
            leak(Bagpipe::<Stack<Item>>::with_pipes(4).unwrap()),
            Ledger::leaked(IDS),
            300,
            via_handle,
        );
        revoked_drops_reenter(
            leak(Bagpipe::<Queue<Item, 2>>::with_pipes(4).unwrap()),
            Ledger::leaked(IDS),
            300,
            via_handle,
        );
    }
}

#[test]
fn between_threads() {
    // Two threads do the same at once on one bag of each kind.
    fn both<B: RevocableBag<Item = Item> + Sync>(bag: &'static B) {
        let ledger = Ledger::leaked(IDS);
        std::thread::scope(|s| {
            for via_handle in [false, true] {
                s.spawn(move || {
                    for _ in 0..20 {
                        let reenter: &'static (dyn Fn() + Sync) = Box::leak(Box::new(move || {
                            bag.push(Item::plain(ledger));
                            drop(bag.pop());
                        }));
                        let page: &'static Page = Box::leak(Box::new(Page {
                            handle: RevokeHandle::new(),
                        }));
                        bag.push_revocable(Item::on(page, ledger, Some(reenter)));
                        let probe = Item::on(page, ledger, None);
                        // SAFETY: the bag is a leaked static.
                        let revoked = unsafe { B::revoke(&probe) };
                        // The other thread may have popped it first (and dropped it, which
                        // runs its `reenter` outside any revoke).
                        let _ = revoked;
                        if via_handle {
                            let handle = bag.handle();
                            for _ in 0..3 {
                                drop(handle.pop());
                            }
                        } else {
                            for _ in 0..3 {
                                drop(bag.pop());
                            }
                        }
                    }
                });
            }
        });
        while let Some(item) = bag.pop() {
            drop(item);
        }
        ledger.assert_each_dropped_once();
    }
    both(leak(Queue::<Item, 1>::with_segment_size()));
    both(leak(Stack::<Item>::new()));
    both(leak(Bagpipe::<Stack<Item>>::with_pipes(2).unwrap()));
    both(leak(Bagpipe::<Queue<Item, 2>>::with_pipes(2).unwrap()));
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
