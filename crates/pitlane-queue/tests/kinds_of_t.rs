//! Every kind of item through `mpmc::Queue`, `Stack` and `Bagpipe`, with its drops counted:
//! zero-sized items, 64 KiB items (which a queue announces before writing), over-aligned
//! items (128 and 4096 bytes), and items whose `Drop` panics. For each: items popped, items
//! left in the structure when it is dropped, and items left in an `into_iter` that is dropped
//! half-way; every item must be dropped exactly once.
//!
//! # What a panicking `Drop` does
//!
//! - Dropping a `Queue` or a `Stack` that holds an item whose `Drop` panics: the panic
//!   propagates out of the structure's `drop`; the items the structure dropped before it were
//!   dropped once, the panicking one once, and the items it had not reached yet are leaked
//!   (never dropped, never dropped twice) along with the structure's memory. That is unlike a
//!   `Vec`, whose drop goes on dropping the other elements while it unwinds; it is sound.
//! - A `Bagpipe` holds its pipes in a boxed slice, whose drop glue goes on dropping the other
//!   pipes while the first panic unwinds (as a `Vec<Vec<T>>` does). So one panicking item
//!   leaks only the rest of its own pipe; a second panicking item in another pipe would be a
//!   panic during unwinding, which aborts the process (as it would for a `Vec<Vec<T>>`): these
//!   tests keep one armed item per Bagpipe.
//! - A popped item whose `Drop` panics panics in the caller's code; the structure is untouched.
//! - A *revoked* item stays in the structure until a pop passes over it, and that pop drops it:
//!   its panic comes out of `pop` (or `try_pop`, or an `into_iter`'s `next`). The structure
//!   is consistent afterwards: the other items come out as before, `len` is right, and every
//!   item is dropped once. (A stack's pop recycles the node it unlinked before it drops the
//!   revoked item: `hostile_unwind.rs`.)
#![cfg(not(pitlane_loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::Stack;
use pitlane_queue::{BagHandle, WeakBag};
use pitlane_testkit::pages::Page;
use pitlane_testkit::stress::run_threads;

/// One drop counter per item id.
struct Ledger(Vec<AtomicUsize>);

impl Ledger {
    fn new(items: usize) -> Self {
        Self((0..items).map(|_| AtomicUsize::new(0)).collect())
    }

    fn dropped(&self, id: usize) {
        self.0[id].fetch_add(1, Ordering::Relaxed);
    }

    fn count(&self, id: usize) -> usize {
        self.0[id].load(Ordering::Relaxed)
    }

    fn total(&self) -> usize {
        (0..self.0.len()).map(|id| self.count(id)).sum()
    }

    #[track_caller]
    fn assert_each_once(&self) {
        for id in 0..self.0.len() {
            assert_eq!(
                self.count(id),
                1,
                "item {id} dropped {} times",
                self.count(id)
            );
        }
    }

    #[track_caller]
    fn assert_none_twice(&self) {
        for id in 0..self.0.len() {
            assert!(
                self.count(id) <= 1,
                "item {id} dropped {} times",
                self.count(id)
            );
        }
    }
}

/// Items of one kind: how to make item `id`, and how to check that an item came out whole.
trait Kind<'a>: Sized {
    fn make(id: usize, ledger: &'a Ledger) -> Self;
    /// The id of an item that came out, after checking its contents.
    fn id(&self) -> usize;
}

/// Pushes `n` items (alternating the bag and a handle), pops `popped` of them (checking each),
/// drops the bag with the rest: each item dropped once. Then the same with `into_iter`: takes
/// `popped` and drops the iterator.
fn leftovers<'a, T: Kind<'a>, B>(make: impl Fn() -> B, ledger: &'a Ledger, n: usize, popped: usize)
where
    B: WeakBag<Item = T> + IntoIterator<Item = T>,
{
    assert_eq!(ledger.0.len(), 2 * n);
    let bag = make();
    {
        let handle = bag.handle();
        for id in 0..n {
            if id % 2 == 0 {
                bag.push(T::make(id, ledger));
            } else {
                handle.push(T::make(id, ledger));
            }
        }
        assert_eq!(bag.size_guess(), n);
        for i in 0..popped {
            let item = if i % 2 == 0 { bag.pop() } else { handle.pop() };
            let item = item.expect("an item");
            assert!(item.id() < n);
            assert_eq!(ledger.count(item.id()), 0);
        }
    }
    assert_eq!(ledger.total(), popped);
    drop(bag);
    assert_eq!(ledger.total(), n);
    let bag = make();
    (n..2 * n).for_each(|id| bag.push(T::make(id, ledger)));
    let mut items = bag.into_iter();
    for _ in 0..popped {
        let item = items.next().expect("an item");
        assert!((n..2 * n).contains(&item.id()));
    }
    drop(items);
    ledger.assert_each_once();
}

/// A ledger that lives as long as the test binary, so that item types can be `'static`.
fn ledger(items: usize) -> &'static Ledger {
    Box::leak(Box::new(Ledger::new(items)))
}

/// [`leftovers`] through a queue, a stack and Bagpipes of both.
fn everywhere<T: Kind<'static>>(n: usize, popped: usize) {
    leftovers::<T, _>(Queue::<T, 4>::with_segment_size, ledger(2 * n), n, popped);
    leftovers::<T, _>(Stack::<T>::new, ledger(2 * n), n, popped);
    let pipes = || Bagpipe::<Queue<T, 4>>::with_pipes(2).unwrap();
    leftovers::<T, _>(pipes, ledger(2 * n), n, popped);
    let pipes = || Bagpipe::<Stack<T>>::with_pipes(2).unwrap();
    leftovers::<T, _>(pipes, ledger(2 * n), n, popped);
}

// --- zero-sized items ------------------------------------------------------------------------

/// Drop counters of the zero-sized items, one per test (a zero-sized item cannot point to its
/// own counter).
static ZST_DROPS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// A zero-sized item that counts its drops in `ZST_DROPS[K]`.
struct Zst<const K: usize>;

impl<const K: usize> Drop for Zst<K> {
    fn drop(&mut self) {
        ZST_DROPS[K].fetch_add(1, Ordering::Relaxed);
    }
}

/// Pushes `n`, pops `popped`, drops the rest with the bag, then the same with `into_iter`.
fn zst_leftovers<const K: usize, B>(make: impl Fn() -> B, n: usize, popped: usize)
where
    B: WeakBag<Item = Zst<K>> + IntoIterator<Item = Zst<K>>,
{
    assert_eq!(size_of::<Zst<K>>(), 0);
    let drops = || ZST_DROPS[K].load(Ordering::Relaxed);
    let start = drops();
    let bag = make();
    {
        let handle = bag.handle();
        for i in 0..n {
            if i % 3 == 0 {
                handle.push(Zst);
            } else {
                assert!(bag.try_push(Zst).is_ok());
            }
        }
        assert_eq!(bag.size_guess(), n);
        for i in 0..popped {
            assert!(if i % 2 == 0 { bag.pop() } else { handle.pop() }.is_some());
            assert_eq!(bag.size_guess(), n - i - 1);
        }
    }
    assert_eq!(drops() - start, popped);
    drop(bag);
    assert_eq!(drops() - start, n);
    let bag = make();
    (0..n).for_each(|_| bag.push(Zst));
    let mut items = bag.into_iter();
    assert_eq!(items.size_hint(), (0, Some(n)));
    (0..popped).for_each(|_| assert!(items.next().is_some()));
    assert_eq!(items.size_hint(), (0, Some(n - popped)));
    drop(items);
    assert_eq!(drops() - start, 2 * n);
}

#[test]
fn zero_sized_items_in_queues() {
    zst_leftovers::<0, _>(Queue::<Zst<0>, 1>::with_segment_size, 300, 101);
    zst_leftovers::<0, _>(Queue::<Zst<0>, 3>::with_segment_size, 300, 299);
    zst_leftovers::<0, _>(Queue::<Zst<0>>::new, 3000, 1500);
}

#[test]
fn zero_sized_items_in_stacks() {
    zst_leftovers::<1, _>(Stack::<Zst<1>>::new, 3000, 1234);
    zst_leftovers::<1, _>(Stack::<Zst<1>>::new, 10, 10);
}

#[test]
fn zero_sized_items_in_bagpipes() {
    let queues = || Bagpipe::<Queue<Zst<2>, 2>>::with_pipes(5).unwrap();
    zst_leftovers::<2, _>(queues, 500, 250);
    let stacks = || Bagpipe::<Stack<Zst<3>>>::with_pipes(5).unwrap();
    zst_leftovers::<3, _>(stacks, 500, 250);
}

#[test]
fn zero_sized_items_through_threads() {
    // Zero-sized values still take a cell and a ticket each: none is lost or duplicated.
    let queue: Queue<(), 2> = Queue::with_segment_size();
    let stack: Stack<()> = Stack::new();
    let popped = AtomicUsize::new(0);
    run_threads(4, |t| {
        for _ in 0..2_000 {
            if t % 2 == 0 {
                queue.push(());
                stack.push(());
            } else {
                popped.fetch_add(
                    usize::from(queue.pop().is_some()) + usize::from(stack.pop().is_some()),
                    Ordering::Relaxed,
                );
            }
        }
    });
    assert_eq!(
        popped.load(Ordering::Relaxed) + queue.len() + stack.len(),
        2 * 2 * 2_000
    );
    assert_eq!(queue.into_iter().count() + stack.into_iter().count(), {
        2 * 2 * 2_000 - popped.load(Ordering::Relaxed)
    });
}

// --- 64 KiB items ----------------------------------------------------------------------------

const BIG: usize = 65536;

/// A 64 KiB item whose bytes spell its id, so that a torn or misplaced copy shows.
struct Big<'a> {
    id: usize,
    bytes: [u8; BIG],
    ledger: &'a Ledger,
}

fn big_byte(id: usize, at: usize) -> u8 {
    (id.wrapping_mul(131) ^ at ^ (at >> 8)) as u8
}

impl<'a> Kind<'a> for Big<'a> {
    fn make(id: usize, ledger: &'a Ledger) -> Self {
        Big {
            id,
            bytes: std::array::from_fn(|at| big_byte(id, at)),
            ledger,
        }
    }

    fn id(&self) -> usize {
        let whole = self
            .bytes
            .iter()
            .enumerate()
            .all(|(at, &b)| b == big_byte(self.id, at));
        assert!(whole, "item {} came out with other bytes", self.id);
        self.id
    }
}

impl Drop for Big<'_> {
    fn drop(&mut self) {
        self.ledger.dropped(self.id);
    }
}

/// Runs `body` on a thread with a 64 MiB stack. A 64 KiB item passed by value down the call
/// chain of a push is copied into many frames in an unoptimized build: a push through a queue
/// handle needs about 1.5 MiB of stack in a debug build (the retry loop's frame alone holds
/// seven copies), more than the 2 MiB of a test thread leaves once the test's own frame holds
/// a few. The default test thread overflows its stack here.
fn on_a_big_stack(body: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(body)
        .expect("a thread")
        .join()
        .expect("no panic");
}

#[test]
fn big_items_in_every_bag() {
    on_a_big_stack(|| everywhere::<Big<'static>>(40, 15));
}

#[test]
fn big_items_between_threads_arrive_whole() {
    // Values above 64 bytes are announced before their copy: pops wait for the copy instead of
    // skipping it. Two producers and two consumers on 4-cell segments.
    const PER_PRODUCER: usize = 150;
    let ledger = Ledger::new(2 * PER_PRODUCER);
    let queue: Queue<Big<'_>, 4> = Queue::with_segment_size();
    let popped = AtomicUsize::new(0);
    run_threads(4, |t| {
        if t < 2 {
            let handle = queue.handle();
            for i in 0..PER_PRODUCER {
                handle.push(Big::make(t * PER_PRODUCER + i, &ledger));
            }
        } else {
            let mut last = [None::<usize>; 2];
            while popped.load(Ordering::Relaxed) < 2 * PER_PRODUCER {
                if let Some(item) = queue.pop() {
                    let id = item.id();
                    // Each producer's items come out in its order.
                    let producer = id / PER_PRODUCER;
                    assert!(last[producer].is_none_or(|before| before < id));
                    last[producer] = Some(id);
                    popped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    assert!(queue.is_empty());
    ledger.assert_each_once();
}

// --- over-aligned items ----------------------------------------------------------------------

/// An item aligned to 128 bytes.
#[repr(align(128))]
struct Aligned128<'a> {
    id: usize,
    check: usize,
    ledger: &'a Ledger,
}

/// An item aligned to a page.
#[repr(align(4096))]
struct Aligned4096<'a> {
    id: usize,
    check: usize,
    ledger: &'a Ledger,
}

macro_rules! aligned {
    ($name:ident, $align:literal) => {
        impl<'a> Kind<'a> for $name<'a> {
            fn make(id: usize, ledger: &'a Ledger) -> Self {
                $name {
                    id,
                    check: !id,
                    ledger,
                }
            }

            fn id(&self) -> usize {
                assert_eq!(self.check, !self.id, "item {} came out torn", self.id);
                assert_eq!(std::ptr::from_ref(self).addr() % $align, 0);
                self.id
            }
        }

        impl Drop for $name<'_> {
            fn drop(&mut self) {
                assert_eq!(std::ptr::from_ref(self).addr() % $align, 0);
                assert_eq!(self.check, !self.id);
                self.ledger.dropped(self.id);
            }
        }
    };
}

aligned!(Aligned128, 128);
aligned!(Aligned4096, 4096);

#[test]
fn over_aligned_items_in_every_bag() {
    assert_eq!(align_of::<Aligned128<'_>>(), 128);
    everywhere::<Aligned128<'static>>(200, 77);
    assert_eq!(align_of::<Aligned4096<'_>>(), 4096);
    everywhere::<Aligned4096<'static>>(70, 33);
}

// --- items whose Drop panics -----------------------------------------------------------------

/// An item whose drop counts itself and then, if armed, panics.
struct Bomb<'a> {
    id: usize,
    armed: bool,
    ledger: &'a Ledger,
}

impl Drop for Bomb<'_> {
    fn drop(&mut self) {
        self.ledger.dropped(self.id);
        if self.armed {
            panic!("item {} explodes", self.id);
        }
    }
}

fn bomb(id: usize, armed: usize, ledger: &Ledger) -> Bomb<'_> {
    Bomb {
        id,
        armed: id == armed,
        ledger,
    }
}

/// Fills a bag with `n` items, item `armed` panicking on drop, and drops the bag: the panic
/// comes out, and no item is dropped twice. Returns how many items were dropped.
fn drop_with_a_bomb<'a, B: WeakBag<Item = Bomb<'a>>>(
    bag: B,
    ledger: &'a Ledger,
    armed: usize,
) -> usize {
    let n = ledger.0.len();
    (0..n).for_each(|id| bag.push(bomb(id, armed, ledger)));
    let outcome = catch_unwind(AssertUnwindSafe(move || drop(bag)));
    assert!(outcome.is_err(), "the panic of the item's drop propagates");
    ledger.assert_none_twice();
    assert_eq!(ledger.count(armed), 1);
    ledger.total()
}

#[test]
fn a_queue_dropped_with_a_panicking_item_propagates_the_panic_and_drops_nothing_twice() {
    let ledger = Ledger::new(10);
    let dropped = drop_with_a_bomb(Queue::<_, 4>::with_segment_size(), &ledger, 5);
    // Today the queue drops oldest first and stops at the panic: items 0..=5 are dropped, the
    // four after it leak.
    assert!(dropped >= 1, "{dropped}");
    let ledger = Ledger::new(10);
    drop_with_a_bomb(Queue::<_, 1>::with_segment_size(), &ledger, 0);
    let ledger = Ledger::new(10);
    drop_with_a_bomb(Queue::<_>::new(), &ledger, 9);
}

#[test]
fn a_stack_dropped_with_a_panicking_item_propagates_the_panic_and_drops_nothing_twice() {
    let ledger = Ledger::new(100);
    drop_with_a_bomb(Stack::new(), &ledger, 50);
    let ledger = Ledger::new(100);
    drop_with_a_bomb(Stack::new(), &ledger, 0);
}

#[test]
fn a_bagpipe_dropped_with_one_panicking_item_drops_the_other_pipes() {
    // Two pipes; the Bagpipe's pushes from one thread stay in one pipe unless a push loses a
    // race, so push through two handles, which start on different pipes.
    let ledger = Ledger::new(20);
    let bag = Bagpipe::<Queue<_, 4>>::with_pipes(2).unwrap();
    {
        let (first, second) = (bag.handle(), bag.handle());
        for id in 0..20 {
            let handle = if id < 10 { &first } else { &second };
            handle.push(bomb(id, 3, &ledger));
        }
    }
    assert!(catch_unwind(AssertUnwindSafe(move || drop(bag))).is_err());
    ledger.assert_none_twice();
    // The pipe without the armed item was dropped whole, while the panic unwound.
    let clean = if ledger.count(10) == 1 { 10..20 } else { 0..10 };
    for id in clean {
        assert_eq!(ledger.count(id), 1, "item {id}");
    }
    let ledger = Ledger::new(20);
    drop_with_a_bomb(Bagpipe::<Stack<_>>::with_pipes(1).unwrap(), &ledger, 7);
}

#[test]
fn a_popped_item_that_panics_leaves_the_bag_working() {
    fn check<'a, B: WeakBag<Item = Bomb<'a>>>(bag: B, ledger: &'a Ledger) {
        (0..10).for_each(|id| bag.push(bomb(id, 4, ledger)));
        let mut popped = 0;
        while let Some(item) = bag.handle().pop() {
            popped += 1;
            let armed = item.armed;
            let outcome = catch_unwind(AssertUnwindSafe(|| drop(item)));
            assert_eq!(outcome.is_err(), armed);
            assert_eq!(bag.size_guess(), 10 - popped);
        }
        assert_eq!(popped, 10);
        ledger.assert_each_once();
    }
    check(Queue::<_, 2>::with_segment_size(), &Ledger::new(10));
    check(Stack::new(), &Ledger::new(10));
    check(
        Bagpipe::<Queue<_, 2>>::with_pipes(2).unwrap(),
        &Ledger::new(10),
    );
}

#[test]
fn an_into_iter_dropped_with_a_panicking_item_left_propagates_the_panic() {
    fn check<'a, B>(bag: B, ledger: &'a Ledger)
    where
        B: WeakBag<Item = Bomb<'a>> + IntoIterator<Item = Bomb<'a>>,
    {
        (0..10).for_each(|id| bag.push(bomb(id, 5, ledger)));
        let mut items = bag.into_iter();
        // Take three, none of them the armed one.
        for _ in 0..3 {
            let item = items.next().unwrap();
            if item.armed {
                std::mem::forget(item);
                panic!("this test wants the armed item left in the iterator");
            }
        }
        assert!(catch_unwind(AssertUnwindSafe(move || drop(items))).is_err());
        ledger.assert_none_twice();
        assert_eq!(ledger.count(5), 1);
    }
    check(Queue::<_, 3>::with_segment_size(), &Ledger::new(10));
    check(Stack::new(), &Ledger::new(10));
}

// --- revoked items whose Drop panics, dropped by the pop that passes them ------------------

/// A revocable item whose handle is in its page, and whose drop may panic.
struct RevocableBomb<'a> {
    page: &'a Page,
    armed: bool,
    ledger: &'a Ledger,
}

impl Drop for RevocableBomb<'_> {
    fn drop(&mut self) {
        self.ledger.dropped(self.page.number);
        if self.armed {
            panic!("page {} explodes", self.page.number);
        }
    }
}

// SAFETY: the handle lives in the `Page`, outside the item, and outlives it.
unsafe impl Revocable for RevocableBomb<'_> {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.page.handle
    }
}

/// Pushes pages 0..10 with tracking (page 3 armed), revokes page 3 and page 6, then pops
/// everything, through `pop` (through a handle if `by_handle`): exactly one pop panics, with
/// page 3's drop; afterwards every other page but 6 comes out, `size_guess` is right, and every
/// item is dropped once.
fn revoked_bomb_passed_by_a_pop<'a, B>(
    bag: B,
    pages: &'a [Page],
    ledger: &'a Ledger,
    by_handle: bool,
) where
    B: RevocableBag<Item = RevocableBomb<'a>>,
{
    for page in pages {
        bag.push_revocable(RevocableBomb {
            page,
            armed: page.number == 3,
            ledger,
        });
    }
    for number in [3, 6] {
        let probe = RevocableBomb {
            page: &pages[number],
            armed: false,
            ledger,
        };
        // SAFETY: every page was pushed into `bag`, alive here.
        assert!(unsafe { B::revoke(&probe) });
        std::mem::forget(probe); // not the bag's copy: keep it out of the ledger
    }
    assert_eq!(
        ledger.total(),
        0,
        "the bag's copies of revoked items are still in it"
    );
    let handle = bag.handle();
    let mut out = Vec::new();
    let mut panics = 0;
    loop {
        let popped = catch_unwind(AssertUnwindSafe(|| {
            if by_handle { handle.pop() } else { bag.pop() }
        }));
        match popped {
            Err(_) => {
                panics += 1;
                assert_eq!(ledger.count(3), 1, "the panic was page 3's drop");
            }
            Ok(Some(item)) => {
                assert!(!item.page.handle.is_in_bag());
                out.push(item.page.number);
            }
            Ok(None) => break,
        }
    }
    assert_eq!(panics, 1);
    out.sort_unstable();
    assert_eq!(out, [0, 1, 2, 4, 5, 7, 8, 9]);
    assert_eq!(bag.size_guess(), 0);
    drop(handle);
    drop(bag);
    ledger.assert_each_once();
    assert!(pages.iter().all(|page| !page.handle.is_in_bag()));
}

#[test]
fn a_revoked_item_whose_drop_panics_leaves_the_bag_consistent() {
    for by_handle in [false, true] {
        let (pages, ledger) = (Page::numbered(10), Ledger::new(10));
        revoked_bomb_passed_by_a_pop(
            Queue::<_, 2>::with_segment_size(),
            &pages,
            &ledger,
            by_handle,
        );
        let (pages, ledger) = (Page::numbered(10), Ledger::new(10));
        revoked_bomb_passed_by_a_pop(
            Queue::<_, 1>::with_segment_size(),
            &pages,
            &ledger,
            by_handle,
        );
        let (pages, ledger) = (Page::numbered(10), Ledger::new(10));
        revoked_bomb_passed_by_a_pop(Stack::new(), &pages, &ledger, by_handle);
        let (pages, ledger) = (Page::numbered(10), Ledger::new(10));
        let bag = Bagpipe::<Queue<_, 2>>::with_pipes(2).unwrap();
        revoked_bomb_passed_by_a_pop(bag, &pages, &ledger, by_handle);
        let (pages, ledger) = (Page::numbered(10), Ledger::new(10));
        let bag = Bagpipe::<Stack<_>>::with_pipes(2).unwrap();
        revoked_bomb_passed_by_a_pop(bag, &pages, &ledger, by_handle);
    }
}

#[test]
fn a_revoked_item_whose_drop_panics_in_a_dropped_bag_propagates_the_panic() {
    let (pages, ledger) = (Page::numbered(6), Ledger::new(6));
    let queue: Queue<_, 2> = Queue::with_segment_size();
    for page in &pages {
        queue.push_revocable(RevocableBomb {
            page,
            armed: page.number == 4,
            ledger: &ledger,
        });
    }
    let probe = RevocableBomb {
        page: &pages[4],
        armed: false,
        ledger: &ledger,
    };
    // SAFETY: page 4 was pushed into `queue`, alive here.
    assert!(unsafe { Queue::<_, 2>::revoke(&probe) });
    std::mem::forget(probe);
    assert!(catch_unwind(AssertUnwindSafe(move || drop(queue))).is_err());
    ledger.assert_none_twice();
    assert_eq!(ledger.count(4), 1);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
