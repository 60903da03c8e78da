//! Plain calls and handles on the *same* structure, the pair the earlier passes rarely
//! combined: the plain calls keep per-seat state (a stack's seat stash, tally and guess; a
//! queue's era; a Bagpipe's walk and the seat it hands to its stacks), a handle keeps its own
//! (a stash, a tally and a guess; an epoch pin; pipe handles), and both meet on one structure,
//! on one thread (interleaved, a handle held while plain calls run, two handles of one
//! structure, a handle dropped and made again between plain calls) and across threads at once.
//! And calls made from inside a revoked value's `Drop`, which a pop runs in the middle of its
//! work, through the other kind of access than the pop's own, on the same structure and on a
//! second one.
//!
//! Checked: linearizability of mixed histories (pitlane-lincheck, as `lincheck_bag.rs` does, but
//! each thread holding two long-lived handles beside its plain calls), every value popped or
//! dropped exactly once, `len` exact whenever the structure is quiet, and memory: this binary's
//! global allocator counts live bytes, which must come back to where they were once a stack
//! is dropped, and must not grow with the number of rounds for a queue (whose retired segments
//! go back through the epoch, on its schedule).
//!
//! The allocator counts only the allocations and frees of threads a test marks as its own (the
//! test harness allocates on its own threads meanwhile), and every test here holds one lock for
//! its whole run.
#![cfg(not(pitlane_loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicIsize, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pitlane_lincheck::specs::{ContainerOp, ContainerRet, QueueSpec, StackSpec, WeakBagSpec};
use pitlane_lincheck::{Runner, Shape, Subject, workload};
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::Stack;
use pitlane_queue::{BagHandle, PopError, WeakBag};
use pitlane_testkit::drops::Ledger;

// ---------------------------------------------------------------------------------------------
// The counting allocator.

struct Counting;

/// Bytes allocated by marked threads minus bytes freed by marked threads.
static LIVE: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Whether this thread's allocations and frees count (no destructor: readable until the
    /// thread's very end).
    static MARKED: Cell<bool> = const { Cell::new(false) };
}

fn marked() -> bool {
    MARKED.try_with(Cell::get).unwrap_or(false)
}

/// Counts `bytes` (negative for a free) if the calling thread is marked.
fn count(bytes: isize) {
    if marked() {
        LIVE.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// A block size as a count (a `Layout`'s size is at most `isize::MAX`).
fn signed(bytes: usize) -> isize {
    isize::try_from(bytes).unwrap_or(isize::MAX)
}

// SAFETY: every call is passed to `System` unchanged; the count is only a side record.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            count(signed(layout.size()));
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let block = unsafe { System.alloc_zeroed(layout) };
        if !block.is_null() {
            count(signed(layout.size()));
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        count(-signed(layout.size()));
        // SAFETY: as above.
        unsafe { System.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let moved = unsafe { System.realloc(block, layout, new_size) };
        if !moved.is_null() {
            count(signed(new_size) - signed(layout.size()));
        }
        moved
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step) pitlane-alloc is the global allocator, and
// nothing counts: the memory checks then see no change.
#[cfg(not(pitlane_alloc_global))]
#[global_allocator]
static COUNTING: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// One test at a time, its thread marked for the count while it runs.
fn serial() -> Serial {
    static SERIAL: Mutex<()> = Mutex::new(());
    let lock = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    MARKED.set(true);
    Serial(lock)
}

/// The lock of [`serial`], which unmarks the thread when dropped.
struct Serial(#[allow(dead_code)] MutexGuard<'static, ()>);

impl Drop for Serial {
    fn drop(&mut self) {
        MARKED.set(false);
    }
}

// ---------------------------------------------------------------------------------------------
// A small deterministic generator.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---------------------------------------------------------------------------------------------
// One thread: plain calls, two handles and handle renewals, against a model.

/// What order a bag promises on one thread.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Order {
    Lifo,
    Fifo,
    /// A Bagpipe: some order, but on one thread a pop finds a value whenever there is one.
    Any,
}

/// Which way one operation goes.
#[derive(Clone, Copy, Debug)]
enum Route {
    Plain,
    First,
    Second,
}

/// Runs `steps` random operations on `bag` from this thread, each plain or through one of two
/// handles held all along (the first one dropped and made again now and then, or released),
/// and checks every result against a model of `order`, and `size_guess` after every step.
fn one_thread_mixed<B: WeakBag<Item = u64>>(bag: &B, order: Order, steps: usize, seed: u64) {
    let mut rng = Rng(seed | 1);
    let mut first = Some(bag.handle());
    let second = bag.handle();
    let mut model: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
    let mut next = 0u64;
    for step in 0..steps {
        let route = match rng.below(3) {
            0 => Route::Plain,
            1 => Route::First,
            _ => Route::Second,
        };
        let first_ref = first
            .as_ref()
            .expect("the first handle is held between steps");
        let handle: &dyn BagHandle<Item = u64> = match route {
            Route::Plain => &bag,
            Route::First => first_ref,
            Route::Second => &second,
        };
        let what = rng.below(10);
        // Pushes in runs, so that stashes fill and spill and segments fill and retire.
        let pushing = if model.len() < 40 { what < 6 } else { what < 4 };
        if pushing {
            let value = next;
            next += 1;
            if rng.below(2) == 0 {
                handle.push(value);
            } else {
                assert!(
                    handle.try_push(value).is_ok(),
                    "step {step}: a try_push {route:?} failed on one thread"
                );
            }
            model.push_back(value);
        } else {
            let got = if rng.below(2) == 0 {
                handle.pop()
            } else {
                match handle.try_pop() {
                    Ok(value) => Some(value),
                    Err(PopError::Empty) => None,
                    Err(PopError::Transient) => {
                        panic!("step {step}: a try_pop {route:?} failed transiently on one thread")
                    }
                }
            };
            let want = match order {
                Order::Lifo => model.pop_back(),
                Order::Fifo => model.pop_front(),
                Order::Any => got.and_then(|value| {
                    let at = model.iter().position(|&v| v == value);
                    let at = at.unwrap_or_else(|| {
                        panic!("step {step}: popped {value} {route:?}, which is not in the bag")
                    });
                    model.remove(at)
                }),
            };
            if order == Order::Any && got.is_none() {
                assert!(
                    model.is_empty(),
                    "step {step}: a pop {route:?} found no value in a bag of {}",
                    model.len()
                );
            }
            assert_eq!(got, want, "step {step}: pop {route:?}");
        }
        assert_eq!(
            bag.size_guess(),
            model.len(),
            "step {step}: size after {route:?} {}",
            if pushing { "push" } else { "pop" }
        );
        match rng.below(40) {
            0 => first = Some(bag.handle()),
            1 => {
                drop(first.take());
                first = Some(bag.handle());
            }
            2 => first_ref_release(first.as_ref()),
            _ => {}
        }
        assert_eq!(
            bag.size_guess(),
            model.len(),
            "step {step}: size after renewal"
        );
    }
    drop(first);
    drop(second);
    assert_eq!(bag.size_guess(), model.len(), "size after the handles went");
    // Drain plainly: everything left comes out, once.
    while let Some(value) = bag.pop() {
        let at = model.iter().position(|&v| v == value);
        model.remove(at.unwrap_or_else(|| panic!("drained {value}, which is not in the bag")));
    }
    assert!(
        model.is_empty(),
        "left in the bag but not drained: {model:?}"
    );
    assert_eq!(bag.size_guess(), 0);
}

fn first_ref_release<H: BagHandle>(handle: Option<&H>) {
    if let Some(handle) = handle {
        handle.release();
    }
}

/// Runs `round` `rounds` times, each on a structure of its own that it drops: after one
/// warming round (thread-locals, seats, the epoch's registration), each later round must
/// change the live count by `overhead` exactly (what starting its threads leaves: a thread's
/// start closure is allocated by the spawning thread, which counts, and freed by the new
/// thread before the test marks it).
fn no_leak_per_round(name: &str, rounds: usize, overhead: isize, mut round: impl FnMut(usize)) {
    round(0);
    for r in 1..rounds {
        let before = live();
        round(r);
        assert_eq!(
            live() - before,
            overhead,
            "{name}: round {r} left bytes allocated after its structure was dropped"
        );
    }
}

/// As [`no_leak_per_round`] for a structure whose memory may come back late (a queue's
/// segments go through the epoch): the count may move, but must not grow with the rounds.
fn no_growth_over_rounds(name: &str, rounds: usize, mut round: impl FnMut(usize)) {
    for r in 0..rounds / 4 {
        round(r);
    }
    let early = live();
    for r in rounds / 4..rounds {
        round(r);
    }
    let late = live();
    assert!(
        late - early < 64 * 1024,
        "{name}: {} bytes more live after {} more rounds",
        late - early,
        rounds - rounds / 4
    );
}

const STEPS: usize = 3_000;

#[test]
fn one_thread_stack_plain_and_two_handles() {
    let _serial = serial();
    no_leak_per_round("stack", 8, 0, |r| {
        let stack = Stack::new();
        one_thread_mixed(&stack, Order::Lifo, STEPS, 0x5EED_0000 + r as u64);
    });
}

#[test]
fn one_thread_queue_plain_and_two_handles() {
    let _serial = serial();
    no_growth_over_rounds("queue of 2-cell segments", 40, |r| {
        let queue = Queue::<u64, 2>::with_segment_size();
        one_thread_mixed(&queue, Order::Fifo, STEPS, 0x5EED_1000 + r as u64);
    });
    no_growth_over_rounds("queue", 12, |r| {
        let queue = Queue::<u64>::new();
        one_thread_mixed(&queue, Order::Fifo, STEPS, 0x5EED_2000 + r as u64);
    });
}

#[test]
fn one_thread_bagpipe_plain_and_two_handles() {
    let _serial = serial();
    no_leak_per_round("bagpipe of stacks", 8, 0, |r| {
        let bag = Bagpipe::<Stack<u64>>::with_pipes(4).unwrap();
        one_thread_mixed(&bag, Order::Any, STEPS, 0x5EED_3000 + r as u64);
    });
    no_growth_over_rounds("bagpipe of queues", 20, |r| {
        let bag = Bagpipe::<Queue<u64, 2>>::with_pipes(2).unwrap();
        one_thread_mixed(&bag, Order::Any, STEPS, 0x5EED_4000 + r as u64);
    });
}

// ---------------------------------------------------------------------------------------------
// Many threads, each mixing plain calls and two handles, every value counted.

/// Each of `threads` threads pushes `per_thread` distinct values and pops, each operation
/// plain or through one of its two handles (one of them renewed now and then); then the bag
/// is drained, partly plainly and partly through a handle. Every value must come out exactly
/// once, and the size must be exact once the threads have ended.
fn threads_mixed<B: WeakBag<Item = u64> + Sync>(bag: &B, threads: usize, per_thread: usize) {
    let seen: Vec<AtomicU8> = (0..threads * per_thread)
        .map(|_| AtomicU8::new(0))
        .collect();
    let take = |value: u64| {
        let before = seen[usize::try_from(value).unwrap()].fetch_add(1, Ordering::Relaxed);
        assert_eq!(before, 0, "value {value} popped twice");
    };
    // Joined one by one: a join waits for the thread's thread-local destructors too (the
    // scope's own wait does not), so that the memory count is settled after it.
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let take = &take;
                s.spawn(move || {
                    MARKED.set(true);
                    let mut rng = Rng(0xABCD_0000 + t as u64);
                    let mut first = bag.handle();
                    let second = bag.handle();
                    let mut pushed = 0;
                    while pushed < per_thread {
                        let handle: &dyn BagHandle<Item = u64> = match rng.below(3) {
                            0 => &bag,
                            1 => &first,
                            _ => &second,
                        };
                        if rng.below(2) == 0 {
                            let value = (t * per_thread + pushed) as u64;
                            if let Err(back) = handle.try_push(value) {
                                handle.push(back.into_inner());
                            }
                            pushed += 1;
                        } else if let Some(value) = handle.pop() {
                            take(value);
                        }
                        if rng.below(64) == 0 {
                            first = bag.handle();
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
    });
    let mut remaining = bag.size_guess();
    let handle = bag.handle();
    loop {
        let got = if remaining % 2 == 0 {
            bag.pop()
        } else {
            handle.pop()
        };
        let Some(value) = got else { break };
        take(value);
        remaining = remaining
            .checked_sub(1)
            .expect("more values than the size said");
    }
    assert_eq!(remaining, 0, "the size said more values than came out");
    drop(handle);
    assert_eq!(bag.size_guess(), 0);
    for (value, count) in seen.iter().enumerate() {
        assert_eq!(count.load(Ordering::Relaxed), 1, "value {value} lost");
    }
}

#[test]
fn threads_mix_plain_calls_and_handles_on_one_structure() {
    let _serial = serial();
    let per = if cfg!(debug_assertions) {
        3_000
    } else {
        30_000
    };
    // What starting and ending the threads leaves in the count by itself: the same round with
    // no values.
    threads_mixed(&Stack::new(), 4, 0);
    let before = live();
    threads_mixed(&Stack::new(), 4, 0);
    let overhead = live() - before;
    no_leak_per_round("stack across threads", 4, overhead, |_| {
        threads_mixed(&Stack::new(), 4, per);
    });
    no_leak_per_round("bagpipe of stacks across threads", 4, overhead, |_| {
        threads_mixed(&Bagpipe::<Stack<u64>>::with_pipes(2).unwrap(), 4, per);
    });
    threads_mixed(&Queue::<u64, 2>::with_segment_size(), 4, per);
    threads_mixed(&Queue::<u64>::new(), 3, per);
    threads_mixed(&Bagpipe::<Queue<u64, 4>>::with_pipes(2).unwrap(), 4, per);
}

// ---------------------------------------------------------------------------------------------
// Linearizability of mixed histories.

fn rounds() -> u64 {
    if cfg!(debug_assertions) { 1_000 } else { 5_000 }
}

/// A subject whose threads each hold two handles for the whole round beside their plain
/// calls, and pick the way of each operation from a per-thread generator; the first handle
/// is now and then dropped and made again.
struct Mixed<B> {
    make: fn() -> B,
    retrying: bool,
}

/// A Bagpipe's `Empty` is not linearizable (it visits its pipes one by one): reported as
/// `Transient`, as `lincheck_bag.rs` does.
fn empty_is_transient<B: WeakBag>(bag: &B) -> bool {
    std::any::type_name_of_val(bag).contains("Bagpipe")
}

/// What one thread of a round holds. The handles borrow `bag`, which the `Arc` keeps alive:
/// they are declared first, so they are dropped first. They are made by the thread's first
/// operation, on the thread that runs the script (a queue's handle is not `Send`), and the
/// runner drops this value at the end of that thread.
struct MixedThread<B: WeakBag + 'static> {
    first: Option<B::Handle<'static>>,
    second: Option<B::Handle<'static>>,
    bag: Arc<B>,
    rng: Rng,
    retrying: bool,
}

// SAFETY: a `MixedThread` is sent only by the runner, from `fresh` (handles not made yet) to
// the thread that runs its script; its handles are made there, by `apply`, and dropped there
// with it when the script ends. The bag is `Send + Sync`.
unsafe impl<B: WeakBag + Send + Sync + 'static> Send for MixedThread<B> {}

impl<B: WeakBag + 'static> MixedThread<B> {
    fn renew_first(&mut self) {
        self.first = None;
        // SAFETY: the reference is used only by this value's handles, which are dropped
        // before its `Arc` (field order), so the bag outlives them.
        let forever: &'static B = unsafe { &*Arc::as_ptr(&self.bag) };
        self.first = Some(forever.handle());
    }
}

impl<B> Subject for Mixed<B>
where
    B: WeakBag<Item = u64> + Send + Sync + 'static,
{
    type Op = ContainerOp<u64>;
    type Ret = ContainerRet<u64>;
    type Handle = MixedThread<B>;

    fn fresh(&self, shape: Shape) -> Vec<MixedThread<B>> {
        let bag = Arc::new((self.make)());
        (0..shape.threads)
            .map(|t| MixedThread {
                first: None,
                second: None,
                bag: bag.clone(),
                rng: Rng(0x1234_5678 + t as u64 * 0x9E37),
                retrying: self.retrying,
            })
            .collect()
    }

    fn apply(&self, thread: &mut MixedThread<B>, op: &ContainerOp<u64>) -> ContainerRet<u64> {
        if thread.second.is_none() {
            // SAFETY: as in `renew_first`.
            let forever: &'static B = unsafe { &*Arc::as_ptr(&thread.bag) };
            thread.second = Some(forever.handle());
        }
        if thread.first.is_none() || thread.rng.below(8) == 0 {
            thread.renew_first();
        }
        let bag: &B = &thread.bag;
        let handle: &dyn BagHandle<Item = u64> = match thread.rng.below(3) {
            0 => &bag,
            1 => thread.first.as_ref().unwrap(),
            _ => thread.second.as_ref().unwrap(),
        };
        match (op, thread.retrying) {
            (ContainerOp::Push(v), true) => {
                handle.push(*v);
                ContainerRet::Pushed
            }
            (ContainerOp::Pop, true) => handle.pop().into(),
            (ContainerOp::Push(v), false) => match handle.try_push(*v) {
                Ok(()) => ContainerRet::Pushed,
                Err(_) => ContainerRet::Transient,
            },
            (ContainerOp::Pop, false) => match handle.try_pop() {
                Ok(v) => ContainerRet::Popped(v),
                Err(PopError::Empty) if !empty_is_transient(bag) => ContainerRet::Empty,
                Err(_) => ContainerRet::Transient,
            },
        }
    }
}

#[test]
fn stack_mixed_history_is_a_linearizable_lifo() {
    let _serial = serial();
    let subject = Mixed {
        make: Stack::<u64>::new,
        retrying: true,
    };
    Runner::new(StackSpec::new(), subject, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x3131)
        .assert_linearizable();
}

#[test]
fn stack_mixed_attempts_are_a_weak_bag() {
    let _serial = serial();
    let subject = Mixed {
        make: Stack::<u64>::new,
        retrying: false,
    };
    Runner::new(WeakBagSpec::new(), subject, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x3132)
        .assert_linearizable();
}

#[test]
fn queue_mixed_history_is_a_linearizable_fifo() {
    let _serial = serial();
    let subject = Mixed {
        make: Queue::<u64, 2>::with_segment_size,
        retrying: true,
    };
    Runner::new(QueueSpec::new(), subject, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x3133)
        .assert_linearizable();
}

#[test]
fn queue_mixed_attempts_are_a_weak_bag() {
    let _serial = serial();
    let subject = Mixed {
        make: Queue::<u64, 2>::with_segment_size,
        retrying: false,
    };
    Runner::new(WeakBagSpec::new(), subject, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x3134)
        .assert_linearizable();
}

#[test]
fn bagpipe_mixed_attempts_are_a_weak_bag() {
    let _serial = serial();
    let stacks = Mixed {
        make: || Bagpipe::<Stack<u64>>::with_pipes(2).unwrap(),
        retrying: false,
    };
    Runner::new(WeakBagSpec::new(), stacks, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x3135)
        .assert_linearizable();
    let queues = Mixed {
        make: || Bagpipe::<Queue<u64, 2>>::with_pipes(2).unwrap(),
        retrying: false,
    };
    Runner::new(WeakBagSpec::new(), queues, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x3136)
        .assert_linearizable();
}

// ---------------------------------------------------------------------------------------------
// Calls from inside a revoked value's `Drop`, through the other kind of access.

const IDS: usize = 1 << 16;

struct Page {
    handle: RevokeHandle,
}

/// The page of items that are never pushed revocably.
static PLAIN_PAGE: Page = Page {
    handle: RevokeHandle::new(),
};

/// An item; when `reenter` is set, its drop calls it.
struct Item {
    page: &'static Page,
    id: usize,
    ledger: &'static Ledger,
    reenter: Option<&'static (dyn Fn() + Sync)>,
}

impl Item {
    fn plain(ledger: &'static Ledger) -> Self {
        Self {
            page: &PLAIN_PAGE,
            id: ledger.id(),
            ledger,
            reenter: None,
        }
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        let before = self.ledger.dropped(self.id);
        assert_eq!(before, 0, "item {} dropped twice", self.id);
        if let Some(reenter) = self.reenter {
            reenter();
        }
    }
}

// SAFETY: the handle lives in a leaked page, outside the item's bytes.
unsafe impl Revocable for Item {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.page.handle
    }
}

thread_local! {
    /// Long-lived handles of the bags under test, held by this thread, used by the revoked
    /// items' drops: `[0]` and `[1]` of the first bag, `[2]` of the second.
    static HANDLES: RefCell<Vec<Box<dyn BagHandle<Item = Item>>>> = const { RefCell::new(Vec::new()) };
}

/// Through the thread's long-lived handle `which`.
fn with_handle<R>(which: usize, f: impl FnOnce(&dyn BagHandle<Item = Item>) -> R) -> R {
    HANDLES.with(|handles| f(&*handles.borrow()[which]))
}

/// The ways the outer pops go.
#[derive(Clone, Copy, Debug)]
enum Outer {
    Plain,
    /// Through long-lived handle 0, which the drops use too.
    Handle,
}

/// Pushes `n` revocable items (`push_revocable`), each followed by a plain item pushed plainly
/// and one pushed through long-lived handle 1, revokes the revocable ones, and pops everything
/// the `outer` way. Each revoked item's drop, run inside a pop,
/// pushes and pops on this bag plainly, through the two long-lived handles (one of them the
/// outer pop's own), through a handle made and dropped inside the drop, and on a second bag
/// plainly and through its handle. Every item must be dropped once, the plain items popped,
/// and both sizes exact at the end.
fn revoked_drops_cross<A, B>(bag: &'static A, other: &'static B, n: usize, outer: Outer)
where
    A: RevocableBag<Item = Item> + Sync,
    B: RevocableBag<Item = Item> + Sync,
{
    let ledger = Ledger::leaked(IDS);
    let handles: Vec<Box<dyn BagHandle<Item = Item>>> = vec![
        Box::new(bag.handle()),
        Box::new(bag.handle()),
        Box::new(other.handle()),
    ];
    HANDLES.with(|slot| *slot.borrow_mut() = handles);
    let reenter: &'static (dyn Fn() + Sync) = Box::leak(Box::new(move || {
        // On the popped bag, each way once: three in, three out.
        bag.push(Item::plain(ledger));
        with_handle(0, |h| h.push(Item::plain(ledger)));
        with_handle(1, |h| h.push(Item::plain(ledger)));
        drop(with_handle(0, |h| h.pop()).expect("an item was just pushed"));
        drop(bag.pop().expect("an item was just pushed"));
        {
            let fresh = bag.handle();
            fresh.push(Item::plain(ledger));
            drop(fresh.pop().expect("an item was just pushed"));
        }
        drop(with_handle(1, |h| h.pop()).expect("an item was just pushed"));
        // One more left on this bag, for the outer pops to find.
        with_handle(1, |h| h.push(Item::plain(ledger)));
        // On the second bag: one in plainly, one through its handle, one out.
        other.push(Item::plain(ledger));
        with_handle(2, |h| h.push(Item::plain(ledger)));
        drop(other.pop().expect("an item was just pushed"));
    }));
    let pages: Vec<&'static Page> = (0..n)
        .map(|_| {
            &*Box::leak(Box::new(Page {
                handle: RevokeHandle::new(),
            }))
        })
        .collect();
    for &page in &pages {
        bag.push_revocable(Item {
            page,
            id: ledger.id(),
            ledger,
            reenter: Some(reenter),
        });
        // Plain values between the revocable ones, through each kind of access.
        bag.push(Item::plain(ledger));
        with_handle(1, |h| h.push(Item::plain(ledger)));
    }
    for &page in &pages {
        let probe = std::mem::ManuallyDrop::new(Item {
            page,
            id: usize::MAX,
            ledger,
            reenter: None,
        });
        // SAFETY: the bag is a leaked static.
        assert!(unsafe { A::revoke(&*probe) }, "a tracked item is revoked");
    }
    // 2 plain items per revocable one, and each revoked drop leaves one more.
    let expected = 3 * n;
    assert_eq!(bag.size_guess(), 3 * n, "before the pops ({outer:?})");
    let mut popped = 0;
    loop {
        let got = match outer {
            Outer::Plain => bag.pop(),
            Outer::Handle => with_handle(0, |h| h.pop()),
        };
        let Some(item) = got else { break };
        assert!(item.reenter.is_none(), "a revoked item was popped");
        popped += 1;
    }
    assert_eq!(popped, expected, "plain items popped ({outer:?})");
    assert_eq!(bag.size_guess(), 0, "size at the end ({outer:?})");
    assert_eq!(other.size_guess(), n, "second bag's size ({outer:?})");
    let mut others = 0;
    while with_handle(2, |h| h.pop()).is_some() {
        others += 1;
    }
    assert_eq!(others, n, "second bag's items ({outer:?})");
    HANDLES.with(|slot| slot.borrow_mut().clear());
    ledger.assert_each_dropped_once();
}

fn leak<B>(bag: B) -> &'static B {
    Box::leak(Box::new(bag))
}

#[test]
fn revoked_drops_call_the_popped_bag_and_another_through_the_other_kind_of_access() {
    let _serial = serial();
    for outer in [Outer::Plain, Outer::Handle] {
        revoked_drops_cross(
            leak(Stack::<Item>::new()),
            leak(Stack::<Item>::new()),
            400,
            outer,
        );
        revoked_drops_cross(
            leak(Queue::<Item, 2>::with_segment_size()),
            leak(Stack::<Item>::new()),
            400,
            outer,
        );
        revoked_drops_cross(
            leak(Stack::<Item>::new()),
            leak(Queue::<Item, 1>::with_segment_size()),
            400,
            outer,
        );
        revoked_drops_cross(
            leak(Bagpipe::<Stack<Item>>::with_pipes(2).unwrap()),
            leak(Bagpipe::<Queue<Item, 2>>::with_pipes(2).unwrap()),
            400,
            outer,
        );
        revoked_drops_cross(
            leak(Bagpipe::<Queue<Item, 2>>::with_pipes(2).unwrap()),
            leak(Bagpipe::<Stack<Item>>::with_pipes(2).unwrap()),
            400,
            outer,
        );
    }
}

#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// The memory checks above count something (not under `pitlane_alloc_global`, where nothing
/// is counted).
#[test]
#[cfg(not(pitlane_alloc_global))]
fn the_count_sees_this_threads_allocations() {
    let _serial = serial();
    let before = live();
    let block = std::hint::black_box(Box::new([7u8; 100]));
    assert_eq!(live() - before, 100, "a box of 100 bytes counted");
    drop(block);
    assert_eq!(live(), before, "and its free");
}
