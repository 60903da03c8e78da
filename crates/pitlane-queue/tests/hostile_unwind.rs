//! Panics out of user code inside the bags, swept over where they happen: `mpmc::Queue`,
//! `stack::Stack` and `Bagpipe` over each, plain and through handles.
//!
//! The only user code these structures run is `T::drop` (none of them clones, and none takes
//! an iterator: there is no `Extend` or `FromIterator`; the allocator was covered before). It
//! runs in three places, each swept here with a panic at every position of a small range:
//!
//! - the structure's own drop (and the drop of an owned `into_iter`, which drops the
//!   structure): a `Queue` must leak exactly what crossbeam's `SegQueue` leaks (the values
//!   after the panicking one), checked against a `SegQueue` doing the same; a `Stack` and a
//!   `Bagpipe` must drop no value twice;
//! - a pop (or an `into_iter`'s `next`) that passes over a revoked value and drops it: the
//!   panic comes out of that call, and afterwards the structure works on, with every other
//!   value popped once and in order, `len` right, and each value dropped once at the end;
//! - and, for a `Stack`, the node the panicking pop had unlinked must go back to the free
//!   nodes: otherwise every such panic lowers the stack's capacity for good (a stack that held
//!   `MAX_ITEMS - 1` items refused one more), and its memory grows with each one.
//!
//! (`kinds_of_t.rs` has one armed item per case; `differential_segqueue.rs` random scripts.)
#![cfg(not(pitlane_loom))]

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

use std::collections::BTreeSet;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crossbeam_queue::SegQueue;
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::{MAX_ITEMS, Stack};
use pitlane_queue::{BagHandle, PushError, WeakBag};

/// The payload of a deliberate panic: the id of the item whose drop panicked.
struct Deliberate(usize);

/// Keeps the deliberate panics out of the test output; any other panic is reported as usual.
fn quiet() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Deliberate>().is_none() || std::env::var_os("LOUD").is_some() {
                previous(info);
            }
        }));
    });
}

/// Drop counts per item id, the order of drops, and which drops panic.
struct Ledger {
    counts: Vec<AtomicUsize>,
    handles: Vec<RevokeHandle>,
    armed: Vec<AtomicBool>,
    /// Drops so far, all items together.
    ordinal: AtomicUsize,
    /// The drop (by ordinal) that panics, if any (`usize::MAX`: none).
    panic_at: AtomicUsize,
    /// Ids in the order they were dropped.
    order: std::sync::Mutex<Vec<usize>>,
}

impl Ledger {
    fn new(items: usize) -> &'static Ledger {
        quiet();
        Box::leak(Box::new(Ledger {
            counts: (0..items).map(|_| AtomicUsize::new(0)).collect(),
            handles: (0..items).map(|_| RevokeHandle::new()).collect(),
            armed: (0..items).map(|_| AtomicBool::new(false)).collect(),
            ordinal: AtomicUsize::new(0),
            panic_at: AtomicUsize::new(usize::MAX),
            order: std::sync::Mutex::new(Vec::new()),
        }))
    }

    fn item(&'static self, id: usize) -> Item {
        Item { id, ledger: self }
    }

    fn arm(&self, id: usize) {
        self.armed[id].store(true, Ordering::Relaxed);
    }

    /// The `k`-th drop from now (0: the next one) panics.
    fn panic_in(&self, k: usize) {
        let now = self.ordinal.load(Ordering::Relaxed);
        self.panic_at.store(now + k, Ordering::Relaxed);
    }

    fn count(&self, id: usize) -> usize {
        self.counts[id].load(Ordering::Relaxed)
    }

    fn dropped(&self) -> BTreeSet<usize> {
        (0..self.counts.len())
            .filter(|&id| self.count(id) > 0)
            .collect()
    }

    fn assert_none_twice(&self) {
        for id in 0..self.counts.len() {
            assert!(self.count(id) <= 1, "item {id} dropped {} times", self.count(id));
        }
    }

    fn assert_each_once(&self) {
        for id in 0..self.counts.len() {
            assert_eq!(self.count(id), 1, "item {id}");
        }
    }
}

/// An item that counts its drop in its ledger and panics if its id is armed or its drop is
/// the ledger's chosen one. Revocable: its handle is in the ledger, outside the item.
struct Item {
    id: usize,
    ledger: &'static Ledger,
}

impl Drop for Item {
    fn drop(&mut self) {
        let ledger = self.ledger;
        ledger.counts[self.id].fetch_add(1, Ordering::Relaxed);
        ledger.order.lock().unwrap().push(self.id);
        let ordinal = ledger.ordinal.fetch_add(1, Ordering::Relaxed);
        let chosen = ordinal == ledger.panic_at.load(Ordering::Relaxed);
        // Never a second panic while unwinding (that would abort the test binary).
        if (chosen || ledger.armed[self.id].load(Ordering::Relaxed)) && !std::thread::panicking() {
            std::panic::panic_any(Deliberate(self.id));
        }
    }
}

// SAFETY: the handle lives in the leaked ledger, outside the item's bytes, for ever; every
// move of the item reaches the same one.
unsafe impl Revocable for Item {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.ledger.handles[self.id]
    }
}

/// Revokes item `id` from the bag it was pushed into with tracking.
///
/// # Safety
/// That bag is alive.
unsafe fn revoke<B: RevocableBag<Item = Item>>(ledger: &'static Ledger, id: usize) -> bool {
    // A stand-in with the same handle; never dropped, so the ledger does not count it.
    let probe = ManuallyDrop::new(ledger.item(id));
    // SAFETY: by the caller's contract.
    unsafe { B::revoke(&probe) }
}

/// Whether `f` panicked with a deliberate panic (any other panic goes on unwinding).
fn panicked<R>(f: impl FnOnce() -> R) -> Result<R, usize> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| match payload.downcast::<Deliberate>() {
        Ok(deliberate) => deliberate.0,
        Err(other) => std::panic::resume_unwind(other),
    })
}

// --- a stack's node, unlinked by a pop whose revoked item panics ---------------------------

/// How a test reaches the stack: plain calls, or through a handle.
#[derive(Clone, Copy, Debug)]
enum Via {
    Plain,
    Handle,
}

/// Pushes an item with tracking, revokes it and pops `cycles` times (the pop passes over the
/// revoked item and drops it, which panics if `armed`), then fills the bag until it is full:
/// how many items it took. A panic in the pop must cost no capacity: the count is the same
/// armed or not. (Counting to full rather than to `MAX_ITEMS`: free nodes in stashes count
/// against `MAX_ITEMS`, and tracked pushes do not use the thread's stash.)
fn room_after_revoked_pops<B>(bag: B, via: Via, cycles: usize, armed: bool) -> usize
where
    B: RevocableBag<Item = Item>,
{
    // Id 0: every filler; id 1: the revoked item, each cycle.
    let ledger = Ledger::new(2);
    if armed {
        ledger.arm(1);
    }
    let handle = bag.handle();
    for _ in 0..cycles {
        bag.push_revocable(ledger.item(1));
        // SAFETY: `bag` is alive.
        assert!(unsafe { revoke::<B>(ledger, 1) });
        let popped = panicked(|| match via {
            Via::Plain => bag.pop().map(|item| item.id),
            Via::Handle => handle.pop().map(|item| item.id),
        });
        let expected = if armed { Err(1) } else { Ok(None) };
        assert_eq!(popped, expected, "the pop passed the revoked item and dropped it");
        assert_eq!(bag.size_guess(), 0);
    }
    assert_eq!(ledger.count(1), cycles);
    let mut room = 0;
    loop {
        let pushed = match via {
            Via::Plain => bag.try_push(ledger.item(0)),
            Via::Handle => handle.try_push(ledger.item(0)),
        };
        match pushed {
            Ok(()) => room += 1,
            Err(PushError::Full(item)) => {
                drop(item);
                break;
            }
            Err(PushError::Transient(_)) => panic!("a lone thread lost a race"),
        }
    }
    assert_eq!(bag.size_guess(), room);
    drop(handle);
    drop(bag);
    assert_eq!(ledger.count(0), room + 1);
    assert_eq!(ledger.count(1), cycles);
    room
}

/// [`room_after_revoked_pops`] with and without panics, through plain calls and a handle.
fn no_room_lost<B: RevocableBag<Item = Item>>(make: impl Fn() -> B) {
    for via in [Via::Plain, Via::Handle] {
        let calm = room_after_revoked_pops(make(), via, 3, false);
        let panicky = room_after_revoked_pops(make(), via, 3, true);
        assert!(calm + 100 > MAX_ITEMS, "{via:?}: room for {calm} only");
        assert_eq!(
            panicky, calm,
            "{via:?}: after 3 pops whose revoked item panicked the bag took {panicky} items, \
             {calm} without the panics: each panicking pop lost its node"
        );
    }
}

#[test]
fn a_stack_pop_whose_revoked_item_panics_gives_its_node_back() {
    no_room_lost(Stack::new);
}

#[test]
fn a_bagpipe_of_stacks_pop_whose_revoked_item_panics_gives_its_node_back() {
    no_room_lost(|| Bagpipe::<Stack<Item>>::with_pipes(1).unwrap());
}
