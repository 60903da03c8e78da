//! The mpmc `Queue` and the `Stack` used as a hostile user would use the safe API (the SPSC
//! ring and the Bagpipe have `hostile_use.rs`): per-thread handles dropped on another thread or
//! leaked with `mem::forget` (a leaked queue handle pins its thread to the epoch for good,
//! which must cost memory and nothing else: run in a child process, so that the pin does not
//! outlive the test); `static` structures used, plainly and through handles made on the spot,
//! from thread-local destructors that run before and after the thread gives its seat back;
//! more threads than seats mixing plain calls and handles; `len` read during pushes and pops,
//! never above the pushes begun; revocation racing an `into_iter` drain; and a `Stack` at its
//! capacity through each of its fallible pushes. Every value is counted: none lost, none
//! handed out twice.
#![cfg(not(pitlane_loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::RevocableBag;
use pitlane_queue::stack::{MAX_ITEMS, Stack};
use pitlane_queue::{BagHandle, PopError, PushError, WeakBag};
use pitlane_testkit::child::{rerun_test, scenario};
use pitlane_testkit::pages::Page;
use pitlane_testkit::stress::{epoch_ready, run_threads};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// Set in a child process: the name of the scenario it runs.
const CHILD_ENV: &str = "PITLANE_HOSTILE_MPMC_STACK_CHILD";

/// How many times each value `0..n` was seen.
struct Seen(Vec<AtomicUsize>);

impl Seen {
    fn new(n: usize) -> Self {
        Self((0..n).map(|_| AtomicUsize::new(0)).collect())
    }

    fn saw(&self, value: usize) {
        self.0[value].fetch_add(1, Ordering::Relaxed);
    }

    #[track_caller]
    fn assert_each_once(&self) {
        for (value, count) in self.0.iter().enumerate() {
            assert_eq!(count.load(Ordering::Relaxed), 1, "value {value}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handles dropped elsewhere or leaked
// ---------------------------------------------------------------------------------------------

/// A stack handle (which is `Send`) dropped on another thread gives its stash back there; one
/// leaked with `mem::forget` keeps its nodes and its tally: `len` stays exact, every item comes
/// out once, and later handles and plain calls work.
#[test]
fn stack_handles_dropped_on_another_thread_or_forgotten_lose_no_item() {
    let stack: Stack<usize> = Stack::new();
    let seen = Seen::new(300);
    let sent = stack.handle();
    (0..100).for_each(|i| sent.push(i));
    // Forty pops leave forty free nodes in the handle's stash.
    (0..40).for_each(|_| seen.saw(sent.pop().unwrap()));
    std::thread::scope(|s| {
        s.spawn(move || {
            sent.push(100);
            drop(sent);
        });
    });
    assert_eq!(stack.len(), 61);
    let forgotten = stack.handle();
    (101..200).for_each(|i| forgotten.push(i));
    (0..30).for_each(|_| seen.saw(forgotten.pop().unwrap()));
    std::mem::forget(forgotten);
    assert_eq!(stack.len(), 130);
    let later = stack.handle();
    (200..250).for_each(|i| later.push(i));
    drop(later);
    (250..300).for_each(|i| stack.push(i));
    assert_eq!(stack.len(), 230);
    for item in stack {
        seen.saw(item);
    }
    seen.assert_each_once();
}

const FORGOTTEN_QUEUE_HANDLE: &str = "a_forgotten_queue_handle_costs_memory_and_nothing_else";

/// A queue handle leaked with `mem::forget` (on a thread that then exits, and on the thread
/// that keeps using the queue) leaves its thread pinned to the epoch for good, so retired
/// segments are never recycled again; the queue must still take and give every value, in
/// order, through plain calls and new handles, without hanging. In a child process, so that
/// the leaked pins do not stay in the test binary.
#[test]
fn a_forgotten_queue_handle_costs_memory_and_nothing_else() {
    if scenario(CHILD_ENV).as_deref() == Some(FORGOTTEN_QUEUE_HANDLE) {
        let queue: Queue<usize, 4> = Queue::with_segment_size();
        std::thread::scope(|s| {
            s.spawn(|| {
                let handle = queue.handle();
                (0..10).for_each(|i| handle.push(i));
                std::mem::forget(handle);
            });
        });
        let handle = queue.handle();
        handle.push(10);
        std::mem::forget(handle);
        let mut next_out = 0;
        for i in 11..40_000 {
            queue.push(i);
            if i % 3 == 0 {
                assert_eq!(queue.pop(), Some(next_out));
                next_out += 1;
            }
        }
        let handle = queue.handle();
        while let Some(value) = handle.pop() {
            assert_eq!(value, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, 40_000);
        assert!(queue.is_empty());
        return;
    }
    let ended = rerun_test(
        FORGOTTEN_QUEUE_HANDLE,
        CHILD_ENV,
        FORGOTTEN_QUEUE_HANDLE,
        Duration::from_secs(120),
    );
    assert!(
        ended.as_ref().is_some_and(|ended| ended.status.success()),
        "child: {ended:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Static structures from thread-local destructors
// ---------------------------------------------------------------------------------------------

static TLS_QUEUE: Queue<usize, 2> = Queue::with_segment_size();
static TLS_STACK: Stack<usize> = Stack::new();
/// What the thread-local destructors popped.
static TLS_POPPED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Values of thread `thread`, phase `phase`: 100 each.
fn tls_values(thread: usize, phase: usize) -> std::ops::Range<usize> {
    let base = (thread * 3 + phase) * 100;
    base..base + 100
}

/// Pushes `values` into the static queue and stack, half plainly and half through handles made
/// on the spot, and pops a few back out through each way.
fn use_the_statics(values: std::ops::Range<usize>) {
    let mut popped = Vec::new();
    let queue_handle = TLS_QUEUE.handle();
    let stack_handle = TLS_STACK.handle();
    for value in values {
        match value % 4 {
            0 => TLS_QUEUE.push(value),
            1 => queue_handle.push(value),
            2 => TLS_STACK.push(value),
            _ => stack_handle.push(value),
        }
        if value % 10 == 9 {
            popped.extend(TLS_QUEUE.pop());
            popped.extend(queue_handle.pop());
            popped.extend(TLS_STACK.pop());
            popped.extend(stack_handle.pop());
        }
    }
    drop((queue_handle, stack_handle));
    TLS_POPPED.lock().unwrap().extend(popped);
}

struct Phase(usize, usize);

impl Drop for Phase {
    fn drop(&mut self) {
        use_the_statics(tls_values(self.0, self.1));
    }
}

std::thread_local! {
    /// Registered before the seat's destructor, so run after it: no seat any more.
    static AFTER_THE_SEAT: std::cell::RefCell<Option<Phase>> =
        const { std::cell::RefCell::new(None) };
    /// Registered after the seat's destructor, so run before it: still seated.
    static BEFORE_THE_SEAT: std::cell::RefCell<Option<Phase>> =
        const { std::cell::RefCell::new(None) };
}

/// A `static` queue and stack used from many threads at once, in their bodies and from their
/// thread-local destructors on both sides of the seat's return, with handles made and dropped
/// in those destructors: every value comes out once.
#[test]
fn static_structures_from_thread_local_destructors_on_both_sides_of_the_seat() {
    const THREADS: usize = 8;
    epoch_ready();
    run_threads(THREADS, |t| {
        AFTER_THE_SEAT.with(|slot| *slot.borrow_mut() = Some(Phase(t, 0)));
        // Takes the seat (registering its destructor), in the thread's body.
        use_the_statics(tls_values(t, 1));
        BEFORE_THE_SEAT.with(|slot| *slot.borrow_mut() = Some(Phase(t, 2)));
    });
    let mut all = std::mem::take(&mut *TLS_POPPED.lock().unwrap());
    all.extend(std::iter::from_fn(|| TLS_QUEUE.pop()));
    all.extend(std::iter::from_fn(|| TLS_STACK.pop()));
    all.sort_unstable();
    assert_eq!(all, (0..THREADS * 300).collect::<Vec<_>>());
    assert_eq!((TLS_QUEUE.len(), TLS_STACK.len()), (0, 0));
}

// ---------------------------------------------------------------------------------------------
// More threads than seats, plain calls and handles at once
// ---------------------------------------------------------------------------------------------

/// More than the 128 seats.
const CROWD: usize = 140;
const EACH: usize = 150;

fn crowd_of_plain_calls_and_handles<B: WeakBag<Item = usize> + Sync>(bag: &B) {
    let seen = Seen::new(CROWD * EACH);
    let arrived = AtomicUsize::new(0);
    run_threads(CROWD, |t| {
        let base = t * EACH;
        bag.push(base);
        arrived.fetch_add(1, Ordering::AcqRel);
        while arrived.load(Ordering::Acquire) < CROWD {
            std::thread::yield_now();
        }
        // Every thread is alive: some without a seat. Odd threads go through handles, remade
        // every 50 values; even ones alternate plain calls with a handle's.
        let mut handle = Some(bag.handle());
        for i in 1..EACH {
            if i % 50 == 0 {
                handle = Some(bag.handle());
            }
            let through = handle.as_ref().unwrap();
            if t % 2 == 1 || i % 2 == 0 {
                through.push(base + i);
            } else {
                bag.push(base + i);
            }
            if i % 3 == 0 {
                let popped = if t % 2 == 1 { through.pop() } else { bag.pop() };
                if let Some(value) = popped {
                    seen.saw(value);
                }
            }
        }
    });
    while let Some(value) = bag.pop() {
        seen.saw(value);
    }
    seen.assert_each_once();
    assert_eq!(bag.size_guess(), 0);
}

#[test]
fn a_crowd_past_the_seats_mixing_plain_calls_and_handles_loses_nothing() {
    epoch_ready();
    crowd_of_plain_calls_and_handles(&Stack::new());
    crowd_of_plain_calls_and_handles(&Queue::<usize, 2>::with_segment_size());
}

// ---------------------------------------------------------------------------------------------
// len under concurrent use
// ---------------------------------------------------------------------------------------------

/// `len` is a snapshot, but never above the pushes begun: on a stack with pushers and poppers
/// (plain and through handles), and on a queue with pushers only (where no pop can skip a
/// ticket and make its push draw another). `is_empty` never says empty once every push has
/// returned and no pop runs.
#[test]
fn len_read_during_pushes_and_pops_never_exceeds_the_pushes_begun() {
    fn watch<B: WeakBag<Item = usize> + Sync>(
        bag: &B,
        len: impl Fn(&B) -> usize + Sync,
        pops: bool,
    ) {
        const PUSHERS: usize = 3;
        const EACH: usize = 20_000;
        let begun = AtomicUsize::new(0);
        let done = AtomicBool::new(false);
        let popped = AtomicUsize::new(0);
        let readings = AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let seen = len(bag);
                    let bound = begun.load(Ordering::SeqCst);
                    assert!(seen <= bound, "len {seen} with {bound} pushes begun");
                    readings.fetch_add(1, Ordering::Release);
                    if finished {
                        break;
                    }
                }
            });
            let pushers: Vec<_> = (0..PUSHERS)
                .map(|t| {
                    let (begun, popped) = (&begun, &popped);
                    let readings = &readings;
                    s.spawn(move || {
                        // Start once the reader reads.
                        while readings.load(Ordering::Acquire) == 0 {
                            std::thread::yield_now();
                        }
                        let handle = bag.handle();
                        for i in 0..EACH {
                            begun.fetch_add(1, Ordering::SeqCst);
                            if (t + i) % 2 == 0 {
                                handle.push(i);
                            } else {
                                bag.push(i);
                            }
                            if pops && i % 2 == 1 && bag.pop().is_some() {
                                popped.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    })
                })
                .collect();
            pushers.into_iter().for_each(|t| t.join().unwrap());
            done.store(true, Ordering::Release);
        });
        assert!(readings.load(Ordering::Relaxed) > 0);
        let left = PUSHERS * EACH - popped.load(Ordering::Relaxed);
        assert_eq!(bag.size_guess(), left);
    }
    epoch_ready();
    watch(&Stack::new(), Stack::len, true);
    watch(&Stack::new(), |stack| usize::from(!stack.is_empty()), true);
    watch(&Queue::<usize, 16>::with_segment_size(), Queue::len, false);
}

// ---------------------------------------------------------------------------------------------
// Revocation racing an into_iter drain
// ---------------------------------------------------------------------------------------------

/// A revoker takes pages back while another thread drains the bag through `into_iter`: each
/// page is either revoked (and never yielded) or yielded (and its revoke fails), never both,
/// never neither; the iterator's upper bound always covers what it yields.
#[test]
fn revoke_racing_an_into_iter_drain_takes_each_page_exactly_once() {
    fn drain_while_revoking<'p, B>(bag: B, pages: &'p [Page])
    where
        B: RevocableBag<Item = &'p Page> + IntoIterator<Item = &'p Page> + Send,
        B::IntoIter: Send,
    {
        pages.iter().for_each(|page| bag.push_revocable(page));
        let mut items = bag.into_iter();
        let revoked: Vec<AtomicBool> = pages.iter().map(|_| AtomicBool::new(false)).collect();
        let mut yielded = vec![false; pages.len()];
        std::thread::scope(|s| {
            let revoked = &revoked;
            s.spawn(move || {
                // From the far end of the drain, towards it.
                for page in pages.iter().rev().step_by(2) {
                    // SAFETY: every page was pushed into the bag that `items` holds, which is
                    // dropped only after this thread is joined.
                    if unsafe { B::revoke(&page) } {
                        revoked[page.number].store(true, Ordering::Relaxed);
                    }
                }
            });
            loop {
                let (_, upper) = items.size_hint();
                let Some(page) = items.next() else { break };
                assert!(upper.unwrap() >= 1);
                assert!(!yielded[page.number], "page {} yielded twice", page.number);
                yielded[page.number] = true;
            }
        });
        drop(items);
        for (page, yielded) in pages.iter().zip(yielded) {
            let revoked = revoked[page.number].load(Ordering::Relaxed);
            assert!(
                yielded != revoked,
                "page {}: yielded {yielded}, revoked {revoked}",
                page.number
            );
            assert!(!page.handle.is_in_bag());
        }
    }
    epoch_ready();
    for _ in 0..5 {
        let pages = Page::numbered(2_000);
        drain_while_revoking(Queue::<&Page, 1>::with_segment_size(), &pages);
        let pages = Page::numbered(2_000);
        drain_while_revoking(Queue::<&Page, 64>::with_segment_size(), &pages);
        let pages = Page::numbered(2_000);
        drain_while_revoking(Stack::new(), &pages);
    }
}

// ---------------------------------------------------------------------------------------------
// A stack at its capacity
// ---------------------------------------------------------------------------------------------

/// A `Stack` holding `MAX_ITEMS`: every fallible push hands the item back in
/// `PushError::Full` (plain, through a handle, tracked), the infallible ones panic as
/// documented, and nothing changes; after a pop, a plain push (whose seat's stash holds the
/// node) fits again.
#[test]
fn a_stack_at_its_capacity_says_full_through_every_fallible_push() {
    let pages = Page::numbered(1);
    let stack: Stack<&Page> = Stack::new();
    for _ in 0..MAX_ITEMS {
        stack.push(&pages[0]);
    }
    assert_eq!(stack.len(), MAX_ITEMS);
    let is_full = |outcome: Result<(), PushError<&Page>>| matches!(outcome, Err(PushError::Full(page)) if std::ptr::eq(page, &pages[0]));
    assert!(is_full(stack.try_push(&pages[0])));
    assert!(is_full(stack.handle().try_push(&pages[0])));
    assert!(is_full(stack.try_push_revocable(&pages[0])));
    assert!(!pages[0].handle.is_in_bag());
    assert!(catch_unwind(AssertUnwindSafe(|| stack.push(&pages[0]))).is_err());
    assert!(catch_unwind(AssertUnwindSafe(|| stack.handle().push(&pages[0]))).is_err());
    assert!(catch_unwind(AssertUnwindSafe(|| stack.push_revocable(&pages[0]))).is_err());
    assert_eq!(stack.len(), MAX_ITEMS);
    assert!(stack.pop().is_some());
    assert!(stack.try_push(&pages[0]).is_ok());
    assert_eq!(stack.len(), MAX_ITEMS);
    assert_eq!(stack.try_pop().map(|_| ()), Ok(()));
    assert_ne!(stack.try_pop().map(|_| ()), Err(PopError::Empty));
}
