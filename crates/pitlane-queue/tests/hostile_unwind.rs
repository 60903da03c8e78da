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

/// Keeps the deliberate panics out of the test output (`LOUD=1` shows them); any other panic
/// is reported as usual.
fn quiet() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Deliberate>().is_none()
                || std::env::var_os("LOUD").is_some()
            {
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
            assert!(
                self.count(id) <= 1,
                "item {id} dropped {} times",
                self.count(id)
            );
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
        assert_eq!(
            popped, expected,
            "the pop passed the revoked item and dropped it"
        );
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
    let mut lost = Vec::new();
    for via in [Via::Plain, Via::Handle] {
        let calm = room_after_revoked_pops(make(), via, 3, false);
        let panicky = room_after_revoked_pops(make(), via, 3, true);
        assert!(calm + 100 > MAX_ITEMS, "{via:?}: room for {calm} only");
        if panicky != calm {
            lost.push(format!(
                "{via:?}: after 3 pops whose revoked item panicked the bag took {panicky} \
                 items, {calm} without the panics"
            ));
        }
    }
    assert!(
        lost.is_empty(),
        "each panicking pop lost its node: {lost:#?}"
    );
}

#[test]
fn a_stack_pop_whose_revoked_item_panics_gives_its_node_back() {
    no_room_lost(Stack::new);
}

#[test]
fn a_bagpipe_of_stacks_pop_whose_revoked_item_panics_gives_its_node_back() {
    no_room_lost(|| Bagpipe::<Stack<Item>>::with_pipes(1).unwrap());
}

// --- a structure dropped, whole or through `into_iter`, with a panic at the k-th drop --------

/// A FIFO that can be torn down: `Queue` and crossbeam's `SegQueue`, compared below.
trait Fifo: Sized {
    fn put(&self, item: Item);
    fn take(&self) -> Option<Item>;
    fn drain(self) -> Box<dyn Iterator<Item = Item>>;
}

impl<const SEGMENT: usize> Fifo for Queue<Item, SEGMENT> {
    fn put(&self, item: Item) {
        self.push(item);
    }
    fn take(&self) -> Option<Item> {
        self.pop()
    }
    fn drain(self) -> Box<dyn Iterator<Item = Item>> {
        Box::new(self.into_iter())
    }
}

impl Fifo for SegQueue<Item> {
    fn put(&self, item: Item) {
        self.push(item);
    }
    fn take(&self) -> Option<Item> {
        self.pop()
    }
    fn drain(self) -> Box<dyn Iterator<Item = Item>> {
        Box::new(self.into_iter())
    }
}

/// What a teardown did: the id whose drop panicked (or none), the ids dropped, the ids
/// dropped twice.
#[derive(Debug, PartialEq)]
struct Teardown {
    panicked: Option<usize>,
    dropped: BTreeSet<usize>,
    twice: Vec<usize>,
    len_before: usize,
}

/// Pushes items `0..n`, pops `popped` of them (dropped at once), then ends the FIFO: dropped
/// whole (`drained` none) or through `into_iter` after `drained` items were taken (kept until
/// after the iterator is dropped), the `k`-th of the teardown's drops panicking.
fn teardown<Q: Fifo>(
    fifo: Q,
    n: usize,
    popped: usize,
    drained: Option<usize>,
    k: usize,
) -> Teardown {
    let ledger = Ledger::new(n);
    (0..n).for_each(|id| fifo.put(ledger.item(id)));
    for _ in 0..popped {
        drop(fifo.take().expect("an item"));
    }
    let len_before = n - popped;
    let mut kept = Vec::new();
    let panicked = match drained {
        None => {
            ledger.panic_in(k);
            panicked(move || drop(fifo)).err()
        }
        Some(taken) => {
            let mut items = fifo.drain();
            kept.extend(items.by_ref().take(taken));
            ledger.panic_in(k);
            panicked(move || drop(items)).err()
        }
    };
    ledger.panic_at.store(usize::MAX, Ordering::Relaxed);
    drop(kept);
    Teardown {
        panicked,
        dropped: ledger.dropped(),
        twice: (0..n).filter(|&id| ledger.count(id) > 1).collect(),
        len_before,
    }
}

/// Every `k` of the teardown, after 0, 1 and 5 pops, whole or drained part-way: the `Queue`
/// drops, panics and leaks exactly as a `SegQueue` does (oldest first, stopping at the panic:
/// the items after the panicking one are leaked, none is dropped twice).
fn queue_teardowns_match_segqueue<const SEGMENT: usize>() {
    let n = 12;
    for popped in [0, 1, 5] {
        for drained in [None, Some(0), Some(2)] {
            let left = n - popped - drained.unwrap_or(0);
            for k in 0..left {
                let ours = teardown(
                    Queue::<Item, SEGMENT>::with_segment_size(),
                    n,
                    popped,
                    drained,
                    k,
                );
                let theirs = teardown(SegQueue::new(), n, popped, drained, k);
                let context =
                    format!("segment {SEGMENT}, {popped} popped, {drained:?} drained, k {k}");
                assert_eq!(ours, theirs, "{context}");
                // And what that is, spelled out: the k-th oldest left panicked, everything up to
                // it was dropped once, everything after it leaked.
                let at = popped + drained.unwrap_or(0) + k;
                assert_eq!(ours.panicked, Some(at), "{context}");
                assert_eq!(ours.dropped, (0..=at).collect(), "{context}");
                assert!(ours.twice.is_empty(), "{context}");
            }
        }
    }
}

#[test]
fn a_queue_torn_down_with_a_panic_at_every_position_leaks_what_segqueue_leaks() {
    queue_teardowns_match_segqueue::<1>();
    queue_teardowns_match_segqueue::<2>();
    queue_teardowns_match_segqueue::<3>();
    queue_teardowns_match_segqueue::<32>();
    queue_teardowns_match_segqueue::<1024>();
}

/// Pushes `0..n` into `bag` (through `handles` handles in turn, so that a Bagpipe spreads them
/// over its pipes), takes `drained` through `into_iter` if given, and drops the rest with the
/// `k`-th drop panicking: the panic comes out, no item is dropped twice, at least the `k + 1`
/// drops up to the panic happened, and exactly those if `exact`.
fn bag_teardown<B>(bag: B, n: usize, handles: usize, drained: Option<usize>, k: usize, exact: bool)
where
    B: WeakBag<Item = Item> + IntoIterator<Item = Item>,
{
    let ledger = Ledger::new(n);
    {
        let handles: Vec<_> = (0..handles).map(|_| bag.handle()).collect();
        for id in 0..n {
            handles[id % handles.len()].push(ledger.item(id));
        }
    }
    assert_eq!(bag.size_guess(), n);
    let mut kept = Vec::new();
    let outcome = match drained {
        None => {
            ledger.panic_in(k);
            panicked(move || drop(bag))
        }
        Some(taken) => {
            let mut items = bag.into_iter();
            kept.extend(items.by_ref().take(taken));
            ledger.panic_in(k);
            panicked(move || drop(items))
        }
    };
    ledger.panic_at.store(usize::MAX, Ordering::Relaxed);
    let context = format!("{drained:?} drained, k {k}");
    assert!(outcome.is_err(), "{context}: the panic came out");
    drop(kept);
    ledger.assert_none_twice();
    let total = ledger.dropped().len();
    let before = drained.unwrap_or(0) + k + 1;
    if exact {
        assert_eq!(total, before, "{context}");
    } else {
        assert!(total >= before, "{context}: {total} dropped");
    }
}

#[test]
fn a_stack_or_bagpipe_torn_down_with_a_panic_at_every_position_drops_nothing_twice() {
    let n = 12;
    for drained in [None, Some(0), Some(3)] {
        for k in 0..n - drained.unwrap_or(0) {
            // A stack drops its nodes in index order and stops at the panic.
            bag_teardown(Stack::new(), n, 1, drained, k, true);
            bag_teardown(Stack::new(), n, 3, drained, k, true);
            // A Bagpipe goes on with its other pipes while the panic unwinds.
            let bag = Bagpipe::<Queue<Item, 2>>::with_pipes(2).unwrap();
            bag_teardown(bag, n, 2, drained, k, false);
            let bag = Bagpipe::<Stack<Item>>::with_pipes(4).unwrap();
            bag_teardown(bag, n, 4, drained, k, false);
        }
    }
}

// --- pops that pass revoked items whose drops panic ----------------------------------------

/// The order a bag's pops give its items in.
#[derive(Clone, Copy, Debug)]
enum Order {
    Fifo,
    Lifo,
    None,
}

/// How the items are taken out.
#[derive(Clone, Copy, Debug)]
enum Out {
    Plain,
    Handle,
    /// A handle made for each pop, and dropped while a panic from that pop unwinds.
    FreshHandle,
    IntoIter,
}

/// Pushes items `0..n` with tracking, revokes those in `revoked` (each armed: its drop panics),
/// and takes everything out `how`. Every call that passes a revoked item panics with it, once
/// per revoked item, in the bag's order; the others come out in the bag's order; `size_guess`
/// is exact after every call; the bag then takes and gives three more items; and every item is
/// dropped exactly once.
fn pops_past_panicking_revoked<B>(
    bag: B,
    n: usize,
    revoked: &BTreeSet<usize>,
    order: Order,
    how: Out,
) where
    B: RevocableBag<Item = Item> + IntoIterator<Item = Item>,
{
    let ledger = Ledger::new(n + 3);
    (0..n).for_each(|id| bag.push_revocable(ledger.item(id)));
    for &id in revoked {
        // SAFETY: `bag` is alive.
        assert!(unsafe { revoke::<B>(ledger, id) });
        ledger.arm(id);
    }
    assert_eq!(ledger.dropped().len(), 0);
    let (mut out, mut panics) = (Vec::new(), Vec::new());
    let context = format!("{order:?} {how:?}, revoked {revoked:?}");
    let mut check = |bag: Option<&B>, step: Result<Option<usize>, usize>| -> bool {
        match step {
            Ok(Some(id)) => out.push(id),
            Ok(None) => return false,
            Err(id) => {
                assert_eq!(ledger.count(id), 1, "{context}: {id}");
                panics.push(id);
            }
        }
        if let Some(bag) = bag {
            assert_eq!(bag.size_guess(), n - out.len() - panics.len(), "{context}");
        }
        assert!(out.len() + panics.len() <= n, "{context}: too many");
        true
    };
    let bag = match how {
        Out::Plain => {
            while check(Some(&bag), panicked(|| bag.pop().map(|item| item.id))) {}
            Some(bag)
        }
        Out::Handle => {
            let handle = bag.handle();
            while check(Some(&bag), panicked(|| handle.pop().map(|item| item.id))) {}
            drop(handle);
            Some(bag)
        }
        Out::FreshHandle => {
            while check(
                Some(&bag),
                panicked(|| bag.handle().pop().map(|item| item.id)),
            ) {}
            Some(bag)
        }
        Out::IntoIter => {
            let mut items = bag.into_iter();
            while check(None, panicked(|| items.next().map(|item| item.id))) {}
            // Fused, even after panics.
            assert!(items.next().is_none(), "{context}");
            None
        }
    };
    let mut kept: Vec<usize> = (0..n).filter(|id| !revoked.contains(id)).collect();
    let mut gone: Vec<usize> = revoked.iter().copied().collect();
    match order {
        Order::Fifo => {}
        Order::Lifo => {
            kept.reverse();
            gone.reverse();
        }
        Order::None => {
            out.sort_unstable();
            panics.sort_unstable();
        }
    }
    assert_eq!(out, kept, "{context}");
    assert_eq!(panics, gone, "{context}");
    if let Some(bag) = bag {
        // Still a working bag.
        (n..n + 3).for_each(|id| bag.push(ledger.item(id)));
        assert_eq!(bag.size_guess(), 3, "{context}");
        let mut more: Vec<usize> = std::iter::from_fn(|| bag.pop().map(|item| item.id)).collect();
        more.sort_unstable();
        assert_eq!(more, [n, n + 1, n + 2], "{context}");
        assert_eq!(bag.size_guess(), 0, "{context}");
        drop(bag);
        ledger.assert_each_once();
    } else {
        ledger.assert_none_twice();
        assert_eq!(ledger.dropped(), (0..n).collect(), "{context}");
    }
    assert!(
        ledger.handles[..n].iter().all(|handle| !handle.is_in_bag()),
        "{context}"
    );
}

/// Sets of revoked items among `0..n`: each alone, each pair of neighbours, every other one,
/// all of them.
fn revoked_sets(n: usize) -> Vec<BTreeSet<usize>> {
    let mut sets: Vec<BTreeSet<usize>> = (0..n).map(|id| [id].into()).collect();
    sets.extend((0..n - 1).map(|id| [id, id + 1].into()));
    sets.push((0..n).step_by(2).collect());
    sets.push((0..n).collect());
    sets
}

#[test]
fn pops_past_revoked_items_that_panic_at_every_position_leave_queues_consistent() {
    let n = 10;
    for revoked in revoked_sets(n) {
        for how in [Out::Plain, Out::Handle, Out::FreshHandle, Out::IntoIter] {
            pops_past_panicking_revoked(
                Queue::<Item, 1>::with_segment_size(),
                n,
                &revoked,
                Order::Fifo,
                how,
            );
            pops_past_panicking_revoked(
                Queue::<Item, 2>::with_segment_size(),
                n,
                &revoked,
                Order::Fifo,
                how,
            );
            pops_past_panicking_revoked(
                Queue::<Item, 3>::with_segment_size(),
                n,
                &revoked,
                Order::Fifo,
                how,
            );
            pops_past_panicking_revoked(Queue::<Item>::new(), n, &revoked, Order::Fifo, how);
        }
    }
}

#[test]
fn pops_past_revoked_items_that_panic_at_every_position_leave_stacks_consistent() {
    let n = 10;
    for revoked in revoked_sets(n) {
        for how in [Out::Plain, Out::Handle, Out::FreshHandle, Out::IntoIter] {
            pops_past_panicking_revoked(Stack::new(), n, &revoked, Order::Lifo, how);
        }
    }
}

#[test]
fn pops_past_revoked_items_that_panic_at_every_position_leave_bagpipes_consistent() {
    let n = 10;
    for revoked in revoked_sets(n) {
        for how in [Out::Plain, Out::Handle, Out::FreshHandle, Out::IntoIter] {
            let bag = Bagpipe::<Queue<Item, 2>>::with_pipes(2).unwrap();
            pops_past_panicking_revoked(bag, n, &revoked, Order::None, how);
            let bag = Bagpipe::<Stack<Item>>::with_pipes(2).unwrap();
            pops_past_panicking_revoked(bag, n, &revoked, Order::None, how);
            let bag = Bagpipe::<Queue<Item, 3>>::with_pipes(1).unwrap();
            pops_past_panicking_revoked(bag, n, &revoked, Order::Fifo, how);
        }
    }
}

// --- the same, between threads ---------------------------------------------------------------

/// What became of each item in [`revoked_panics_between_threads`].
const POPPED: usize = 1;
const PASSED_BY_A_POP: usize = 2;
const DROPPED_BY_ITS_PUSH: usize = 3;

/// Two threads push items `0..n` with tracking (`try_push_revocable`, retried), a third
/// revokes them as they come, and two more pop (one plainly, one through a handle) until all
/// is done. Every item's drop panics, wherever it runs: in the popper that got it, in a pop
/// that passes it revoked, or in a push that finds its item revoked before it was linked.
/// Each item must end exactly one of those ways, the revoked ones exactly as many as the
/// revoker won, each dropped once, and the bag empty.
fn revoked_panics_between_threads<B>(bag: B, n: usize)
where
    B: RevocableBag<Item = Item> + Sync,
{
    let ledger = Ledger::new(n);
    (0..n).for_each(|id| ledger.arm(id));
    let fate: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
    let settle = |id: usize, how: usize| {
        let before = fate[id].swap(how, Ordering::Relaxed);
        assert_eq!(before, 0, "item {id} ended twice ({before}, then {how})");
    };
    let pushed = AtomicUsize::new(0);
    let pushers_left = AtomicUsize::new(2);
    let revoker_done = AtomicBool::new(false);
    let won = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for first in 0..2 {
            let (bag, ledger, pushed, pushers_left, settle) =
                (&bag, ledger, &pushed, &pushers_left, &settle);
            s.spawn(move || {
                for id in (first..n).step_by(2) {
                    let mut item = ledger.item(id);
                    loop {
                        match panicked(|| bag.try_push_revocable(item)) {
                            Ok(Ok(())) => break,
                            Ok(Err(PushError::Transient(back))) => item = back,
                            Ok(Err(PushError::Full(_))) => panic!("full"),
                            Err(dropped) => {
                                assert_eq!(dropped, id);
                                settle(id, DROPPED_BY_ITS_PUSH);
                                break;
                            }
                        }
                    }
                    pushed.fetch_add(1, Ordering::Release);
                }
                pushers_left.fetch_sub(1, Ordering::Release);
            });
        }
        {
            let (won, revoker_done, pushers_left, pushed) =
                (&won, &revoker_done, &pushers_left, &pushed);
            s.spawn(move || {
                let mut next = 0;
                while next < n {
                    // Every third item, once about that many are pushed, tried a few times.
                    while pushed.load(Ordering::Acquire) < next
                        && pushers_left.load(Ordering::Acquire) > 0
                    {
                        std::thread::yield_now();
                    }
                    for _ in 0..4 {
                        // SAFETY: `bag`, the only bag the items go into, outlives the scope.
                        if unsafe { revoke::<B>(ledger, next) } {
                            won.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        if pushers_left.load(Ordering::Acquire) == 0 {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                    next += 3;
                }
                revoker_done.store(true, Ordering::Release);
            });
        }
        for popper in 0..2 {
            let (bag, pushers_left, revoker_done, settle) =
                (&bag, &pushers_left, &revoker_done, &settle);
            s.spawn(move || {
                let handle = bag.handle();
                loop {
                    let finished = pushers_left.load(Ordering::Acquire) == 0
                        && revoker_done.load(Ordering::Acquire);
                    let step = panicked(|| if popper == 0 { bag.pop() } else { handle.pop() });
                    match step {
                        Ok(Some(item)) => {
                            let id = item.id;
                            settle(id, POPPED);
                            assert_eq!(panicked(move || drop(item)), Err(id));
                        }
                        Ok(None) if finished => break,
                        Ok(None) => std::thread::yield_now(),
                        Err(id) => settle(id, PASSED_BY_A_POP),
                    }
                }
            });
        }
    });
    assert_eq!(pushed.load(Ordering::Relaxed), n);
    assert_eq!(bag.size_guess(), 0);
    let count = |how| {
        fate.iter()
            .filter(|f| f.load(Ordering::Relaxed) == how)
            .count()
    };
    let (popped, passed, at_push) = (
        count(POPPED),
        count(PASSED_BY_A_POP),
        count(DROPPED_BY_ITS_PUSH),
    );
    assert_eq!(
        popped + passed + at_push,
        n,
        "{popped} popped, {passed} passed, {at_push} at push"
    );
    assert_eq!(passed + at_push, won.load(Ordering::Relaxed));
    assert!(passed > 0, "no revoke won");
    drop(bag);
    ledger.assert_each_once();
    assert!(ledger.handles.iter().all(|handle| !handle.is_in_bag()));
}

#[test]
fn revoked_items_that_panic_between_threads_end_once_each() {
    let n = if cfg!(debug_assertions) {
        3_000
    } else {
        30_000
    };
    revoked_panics_between_threads(Queue::<Item, 8>::with_segment_size(), n);
    revoked_panics_between_threads(Stack::new(), n);
    revoked_panics_between_threads(Bagpipe::<Queue<Item, 8>>::with_pipes(4).unwrap(), n);
    revoked_panics_between_threads(Bagpipe::<Stack<Item>>::with_pipes(4).unwrap(), n);
}
