//! Stress tests for the weak bags: per-value counters catch a lost or duplicated value, and for
//! the FIFO queue, per-producer sequence numbers catch a reordered one.
//!
//! Each structure gets a short run that `cargo test` always does, and a `#[ignore]`d run of
//! 10^7 operations (half pushes, half pops) for release builds:
//!
//! ```text
//! cargo test --release -p pitlane-queue --test stress_bag -- --include-ignored
//! ```
//!
//! Only our own atomics synchronize the threads here (no `std::sync::Mutex`), and the threads
//! are started with `pitlane_testkit::stress::run_threads` (`pthread_create`/`pthread_join`, which
//! ThreadSanitizer sees), so that ThreadSanitizer runs judge the structures and nothing else.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::thread;

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::RevocableBag;
use pitlane_queue::stack::Stack;
use pitlane_queue::{BagHandle, WeakBag};
use pitlane_testkit::pages::Page;
use pitlane_testkit::stress::{epoch_ready, run_threads};

/// Threads per run; more than the two cores of the test machines, on purpose.
const THREADS: usize = 4;
/// Operations (pushes plus pops) of the full, ignored runs.
const FULL_OPS: usize = 10_000_000;

/// Items per thread (or per kind) of the one-cell-segment runs `cargo test` always does.
fn short_items() -> usize {
    if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    }
}

/// Operations of the runs `cargo test` always does.
fn short_ops() -> usize {
    if cfg!(debug_assertions) {
        200_000
    } else {
        600_000
    }
}

/// Bits of a value that hold the producer's sequence number.
const SEQ_BITS: u32 = 40;

/// One counter per value that may be pushed; a second arrival is a duplicate.
struct Ledger {
    per_producer: usize,
    seen: Vec<AtomicU8>,
}

impl Ledger {
    fn new(producers: usize, per_producer: usize) -> Self {
        Self {
            per_producer,
            seen: (0..producers * per_producer)
                .map(|_| AtomicU8::new(0))
                .collect(),
        }
    }

    fn value(producer: usize, seq: usize) -> u64 {
        ((producer as u64) << SEQ_BITS) | seq as u64
    }

    fn record(&self, value: u64) {
        let producer = (value >> SEQ_BITS) as usize;
        let seq = (value & ((1 << SEQ_BITS) - 1)) as usize;
        assert!(seq < self.per_producer, "value {value:#x} was never pushed");
        let before = self.seen[producer * self.per_producer + seq].fetch_add(1, Ordering::Relaxed);
        assert_eq!(before, 0, "value {value:#x} popped twice");
    }

    fn assert_complete(&self) {
        for (index, count) in self.seen.iter().enumerate() {
            let count = count.load(Ordering::Relaxed);
            assert_eq!(count, 1, "value #{index} popped {count} times");
        }
    }
}

/// What a thread of a test works through: the bag itself, or a handle it made.
type Worker<'a> = dyn BagHandle<Item = u64> + 'a;

/// A bag under test, and how its threads reach it.
trait Bag: WeakBag<Item = u64> + Sync {
    /// With `handles`, a handle made by the calling thread; else the bag itself.
    fn worker(&self, handles: bool) -> Box<Worker<'_>>;
}

impl<B: WeakBag<Item = u64> + Sync> Bag for B {
    fn worker(&self, handles: bool) -> Box<Worker<'_>> {
        if handles {
            Box::new(self.handle())
        } else {
            Box::new(self)
        }
    }
}

/// Values the producers of [`producers_consumers`] let wait in the bag before they wait for
/// the consumers: well below a stack's [`MAX_ITEMS`](pitlane_queue::stack::MAX_ITEMS), whose
/// `push` panics by contract. With four threads on two cores the scheduler can leave the
/// consumers off the CPU long enough for two producers to push millions of values (a full run
/// once stopped at a stack's limit that way).
const BACKLOG: usize = 1 << 20;

/// How many pushes a producer makes between two updates of the shared count of pushes.
const PUSHED_EVERY: usize = 1024;

/// Half the threads push `ops / 2` distinct values, half pop until all have arrived (mixing
/// `try_pop` and `pop`). With `fifo`, each consumer checks that every producer's values reach
/// it in the order they were pushed. Producers keep at most about [`BACKLOG`] values in the
/// bag; a thread that panics makes the others give up, so that the run fails instead of
/// waiting forever for it.
fn producers_consumers<B: Bag>(bag: &B, ops: usize, fifo: bool, handles: bool) {
    let producers = THREADS / 2;
    let per_producer = ops / 2 / producers;
    let ledger = Ledger::new(producers, per_producer);
    let pushed = AtomicUsize::new(0);
    let popped = AtomicUsize::new(0);
    let abandoned = AtomicBool::new(false);
    let total = producers * per_producer;
    let progress = Progress {
        popped: &popped,
        total,
        abandoned: &abandoned,
    };
    run_threads(THREADS, |t| {
        let worker = bag.worker(handles);
        let _abandon = AbandonOnPanic(&abandoned);
        if t < producers {
            produce(&*worker, t, per_producer, &pushed, &progress);
        } else {
            consume(&*worker, &ledger, &progress, producers, t, fifo);
        }
    });
    assert_eq!(bag.pop(), None, "values left over");
    ledger.assert_complete();
}

/// Sets its flag if the thread unwinds while it is alive.
struct AbandonOnPanic<'a>(&'a AtomicBool);

impl Drop for AbandonOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// What the threads of [`producers_consumers`] share: how many values were popped, how many
/// there are, and whether a thread gave up.
struct Progress<'a> {
    popped: &'a AtomicUsize,
    total: usize,
    abandoned: &'a AtomicBool,
}

fn produce(
    bag: &Worker<'_>,
    producer: usize,
    per_producer: usize,
    pushed: &AtomicUsize,
    progress: &Progress<'_>,
) {
    for seq in 0..per_producer {
        if seq % PUSHED_EVERY == 0 && seq > 0 {
            let all = pushed.fetch_add(PUSHED_EVERY, Ordering::Relaxed) + PUSHED_EVERY;
            while all.saturating_sub(progress.popped.load(Ordering::Relaxed)) > BACKLOG {
                if progress.abandoned.load(Ordering::Relaxed) {
                    return;
                }
                thread::yield_now();
            }
        }
        let value = Ledger::value(producer, seq);
        if seq % 2 == 0 {
            bag.push(value);
        } else {
            let mut value = value;
            while let Err(back) = bag.try_push(value) {
                value = back.into_inner();
            }
        }
    }
}

fn consume(
    bag: &Worker<'_>,
    ledger: &Ledger,
    progress: &Progress<'_>,
    producers: usize,
    consumer: usize,
    fifo: bool,
) {
    let mut last = vec![None::<u64>; producers];
    let mut turn = consumer;
    while progress.popped.load(Ordering::Relaxed) < progress.total
        && !progress.abandoned.load(Ordering::Relaxed)
    {
        turn += 1;
        // Either kind of failure (empty, or a lost race) means: look again later.
        let got = if turn % 2 == 0 {
            bag.pop()
        } else {
            bag.try_pop().ok()
        };
        let Some(value) = got else {
            thread::yield_now();
            continue;
        };
        ledger.record(value);
        if fifo {
            let producer = (value >> SEQ_BITS) as usize;
            let seq = value & ((1 << SEQ_BITS) - 1);
            if let Some(before) = last[producer] {
                assert!(
                    seq > before,
                    "producer {producer}: {seq} arrived after {before}"
                );
            }
            last[producer] = Some(seq);
        }
        progress.popped.fetch_add(1, Ordering::Relaxed);
    }
}

/// Every thread pushes a distinct value, then pops one, `ops / 2 / THREADS` times; then the
/// leftovers are drained.
fn pairs<B: Bag>(bag: &B, ops: usize, handles: bool) {
    let per_thread = ops / 2 / THREADS;
    let ledger = Ledger::new(THREADS, per_thread);
    run_threads(THREADS, |thread_id| {
        let worker = bag.worker(handles);
        for seq in 0..per_thread {
            worker.push(Ledger::value(thread_id, seq));
            if let Some(value) = worker.pop() {
                ledger.record(value);
            }
        }
    });
    assert_eq!(bag.size_guess(), ledger.seen.len() - count_seen(&ledger));
    while let Some(value) = bag.pop() {
        ledger.record(value);
    }
    ledger.assert_complete();
}

fn count_seen(ledger: &Ledger) -> usize {
    ledger
        .seen
        .iter()
        .filter(|c| c.load(Ordering::Relaxed) > 0)
        .count()
}

/// Pages go in with tracking; one thread revokes pages at random while the others pop. Each
/// page must end up either popped once or revoked once — never both, never neither.
fn revoke_against_pop<'p, B>(bag: &B, pages: &'p [Page])
where
    B: RevocableBag<Item = &'p Page> + Sync,
{
    let outcome: Vec<AtomicU8> = (0..pages.len()).map(|_| AtomicU8::new(0)).collect();
    const POPPED: u8 = 1;
    const REVOKED: u8 = 2;
    for page in pages {
        bag.push_revocable(page);
    }
    let poppers_done = AtomicUsize::new(0);
    run_threads(THREADS, |t| {
        if t == 0 {
            // The revoker: a cheap deterministic xorshift walk over the pages, until the
            // poppers are done.
            let mut x = 0x9e37_79b9_u64;
            while poppers_done.load(Ordering::Relaxed) < THREADS - 1 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let page = &pages[x as usize % pages.len()];
                // SAFETY: every page was last pushed into `bag`, which outlives the threads.
                if unsafe { B::revoke(&page) } {
                    let before = outcome[page.number].swap(REVOKED, Ordering::Relaxed);
                    assert_eq!(before, 0, "page {} revoked after {before}", page.number);
                }
            }
            return;
        }
        let mut idle = 0;
        while idle < 1000 {
            match bag.pop() {
                Some(page) => {
                    idle = 0;
                    // The pop took the item out of the bag, and said so.
                    assert!(!page.handle.is_in_bag());
                    let before = outcome[page.number].swap(POPPED, Ordering::Relaxed);
                    assert_eq!(before, 0, "page {} popped after {before}", page.number);
                }
                None => {
                    idle += 1;
                    thread::yield_now();
                }
            }
        }
        poppers_done.fetch_add(1, Ordering::Relaxed);
    });
    for (number, state) in outcome.iter().enumerate() {
        let state = state.load(Ordering::Relaxed);
        assert!(
            state == POPPED || state == REVOKED,
            "page {number} neither popped nor revoked"
        );
        assert!(!pages[number].handle.is_in_bag());
    }
}

#[test]
fn mpmc_producers_consumers_keep_every_value_in_order() {
    epoch_ready();
    for handles in [false, true] {
        let queue = Queue::<u64, 64>::with_segment_size();
        producers_consumers(&queue, short_ops(), true, handles);
    }
}

#[test]
fn mpmc_pairs_keep_every_value() {
    epoch_ready();
    for handles in [false, true] {
        pairs(&Queue::<u64, 64>::with_segment_size(), short_ops(), handles);
    }
}

#[test]
fn stack_producers_consumers_keep_every_value() {
    epoch_ready();
    for handles in [false, true] {
        producers_consumers(&Stack::new(), short_ops(), false, handles);
    }
}

#[test]
fn stack_pairs_keep_every_value() {
    epoch_ready();
    for handles in [false, true] {
        pairs(&Stack::new(), short_ops(), handles);
    }
}

#[test]
fn bagpipe_of_queues_keeps_every_value() {
    epoch_ready();
    for handles in [false, true] {
        let bag = Bagpipe::<Queue<u64, 64>>::with_pipes(4).unwrap();
        producers_consumers(&bag, short_ops(), false, handles);
        pairs(&bag, short_ops(), handles);
    }
}

#[test]
fn bagpipe_of_stacks_keeps_every_value() {
    epoch_ready();
    for handles in [false, true] {
        let bag = Bagpipe::<Stack<u64>>::with_pipes(4).unwrap();
        producers_consumers(&bag, short_ops(), false, handles);
        pairs(&bag, short_ops(), handles);
    }
}

fn pages() -> Vec<Page> {
    Page::numbered(short_ops() / 20)
}

#[test]
fn mpmc_revoke_against_pop_has_one_winner() {
    epoch_ready();
    let pages = pages();
    revoke_against_pop(&Queue::<&Page, 16>::with_segment_size(), &pages);
}

#[test]
fn stack_revoke_against_pop_has_one_winner() {
    epoch_ready();
    let pages = pages();
    revoke_against_pop(&Stack::new(), &pages);
}

#[test]
fn bagpipe_revoke_against_pop_has_one_winner() {
    epoch_ready();
    let pages = pages();
    let bag = Bagpipe::<Queue<&Page, 16>>::with_pipes(4).unwrap();
    revoke_against_pop(&bag, &pages);
    let pages = self::pages();
    let bag = Bagpipe::<Stack<&Page>>::with_pipes(4).unwrap();
    revoke_against_pop(&bag, &pages);
}

#[test]
#[ignore = "10^7 operations per structure; run with --release --include-ignored"]
fn full_mpmc() {
    epoch_ready();
    producers_consumers(&Queue::<u64>::new(), FULL_OPS, true, false);
    producers_consumers(&Queue::<u64>::new(), FULL_OPS, true, true);
    pairs(&Queue::<u64>::new(), FULL_OPS, true);
}

#[test]
#[ignore = "10^7 operations per structure; run with --release --include-ignored"]
fn full_stack() {
    epoch_ready();
    producers_consumers(&Stack::new(), FULL_OPS, false, false);
    producers_consumers(&Stack::new(), FULL_OPS, false, true);
    pairs(&Stack::new(), FULL_OPS, true);
}

#[test]
#[ignore = "10^7 operations per structure; run with --release --include-ignored"]
fn full_bagpipe() {
    epoch_ready();
    producers_consumers(&Bagpipe::<Queue<u64>>::new(), FULL_OPS, false, true);
    producers_consumers(&Bagpipe::<Stack<u64>>::new(), FULL_OPS, false, true);
    pairs(&Bagpipe::<Queue<u64>>::new(), FULL_OPS, true);
    pairs(&Bagpipe::<Stack<u64>>::new(), FULL_OPS, false);
}

/// Pushers of revocable pages race to link one-cell segments (so every push links one, and
/// half the links are lost), one thread revokes the pages being pushed, one pops. A revoke
/// must never win for a page that is then popped, and no revoker may touch a segment freed
/// under it: each page ends popped once or revoked once.
fn revoke_racing_segment_links(pages: &[Page]) {
    const PUSHERS: usize = 2;
    const POPPED: u8 = 1;
    const REVOKED: u8 = 2;
    let queue = Queue::<&Page, 1>::with_segment_size();
    let outcome: Vec<AtomicU8> = (0..pages.len()).map(|_| AtomicU8::new(0)).collect();
    let record = |page: &Page, how: u8| {
        let before = outcome[page.number].swap(how, Ordering::Relaxed);
        assert_eq!(before, 0, "page {} ended {how} after {before}", page.number);
    };
    let pushers_done = AtomicUsize::new(0);
    // The next page to push: pushers draw pages from it, so the revoker knows which pages
    // are being pushed right now.
    let next_page = AtomicUsize::new(0);
    run_threads(PUSHERS + 2, |t| {
        if t < PUSHERS {
            loop {
                let number = next_page.fetch_add(1, Ordering::Relaxed);
                let Some(page) = pages.get(number) else { break };
                queue.push_revocable(page);
            }
            pushers_done.fetch_add(1, Ordering::Release);
        } else if t == PUSHERS {
            // The revoker aims at the pages whose pushes are in flight.
            while pushers_done.load(Ordering::Acquire) < PUSHERS {
                let next = next_page.load(Ordering::Relaxed);
                let in_flight = next.saturating_sub(PUSHERS)..next.min(pages.len());
                for page in &pages[in_flight] {
                    // SAFETY: every page is pushed into `queue`, which outlives the threads.
                    if unsafe { Queue::<&Page, 1>::revoke(&page) } {
                        record(page, REVOKED);
                    }
                }
            }
        } else {
            loop {
                match queue.pop() {
                    Some(page) => record(page, POPPED),
                    None if pushers_done.load(Ordering::Acquire) == PUSHERS => break,
                    None => thread::yield_now(),
                }
            }
        }
    });
    while let Some(page) = queue.pop() {
        record(page, POPPED);
    }
    for (number, state) in outcome.iter().enumerate() {
        assert_ne!(state.load(Ordering::Relaxed), 0, "page {number} lost");
        assert!(
            !pages[number].handle.is_in_bag(),
            "page {number} still in a bag"
        );
    }
}

#[test]
fn mpmc_revoke_racing_a_lost_segment_link_has_one_winner() {
    epoch_ready();
    revoke_racing_segment_links(&pages());
}

#[test]
#[ignore = "10^6 revocable pushes over one-cell segments; run with --release --include-ignored"]
fn full_mpmc_revoke_racing_segment_links() {
    epoch_ready();
    let pages = Page::numbered(1_000_000);
    revoke_racing_segment_links(&pages);
}

/// A queue of one-cell segments that carries only plain values at first (its retired segments
/// then need one grace period of the epoch) and tracked ones from some moment on (three): a
/// plain pusher, a popper, and, once the plain pusher is under way, a tracked pusher and a
/// revoker aiming at the pages being pushed. The switch happens once per queue, so each round
/// takes a new queue. Plain pages end popped once; tracked pages popped once or revoked once.
/// This runs the switch under load and would catch a lost or doubled page; it does not show
/// that the extra periods are taken once tracking starts (a build that always took one passed
/// it, as it passed the other revocation stress tests): that rests on the argument of
/// `recycle_after_grace` and on the unit test of the flag.
fn plain_then_tracked_on_one_cell_segments(rounds: usize, per_kind: usize) {
    const POPPED: u8 = 1;
    const REVOKED: u8 = 2;
    let plain_pages = Page::numbered(per_kind);
    let tracked_pages = Page::numbered(per_kind);
    for _ in 0..rounds {
        let queue = Queue::<&Page, 1>::with_segment_size();
        let plain_seen: Vec<AtomicU8> = (0..per_kind).map(|_| AtomicU8::new(0)).collect();
        let outcome: Vec<AtomicU8> = (0..per_kind).map(|_| AtomicU8::new(0)).collect();
        let record = |page: &Page, how: u8| {
            let before = outcome[page.number].swap(how, Ordering::Relaxed);
            assert_eq!(before, 0, "page {} ended {how} after {before}", page.number);
        };
        let popped = |page: &Page| {
            if std::ptr::eq(page, &plain_pages[page.number]) {
                let before = plain_seen[page.number].fetch_add(1, Ordering::Relaxed);
                assert_eq!(before, 0, "plain page {} popped twice", page.number);
            } else {
                record(page, POPPED);
            }
        };
        let plain_pushed = AtomicUsize::new(0);
        let next_tracked = AtomicUsize::new(0);
        let pushers_done = AtomicUsize::new(0);
        run_threads(4, |t| match t {
            0 => {
                for page in &plain_pages {
                    queue.push(page);
                    plain_pushed.fetch_add(1, Ordering::Release);
                }
                pushers_done.fetch_add(1, Ordering::Release);
            }
            1 => {
                // Start tracking while plain segments are still being retired.
                while plain_pushed.load(Ordering::Acquire) < per_kind / 4 {
                    thread::yield_now();
                }
                loop {
                    let number = next_tracked.fetch_add(1, Ordering::Relaxed);
                    let Some(page) = tracked_pages.get(number) else {
                        break;
                    };
                    queue.push_revocable(page);
                }
                pushers_done.fetch_add(1, Ordering::Release);
            }
            2 => {
                while pushers_done.load(Ordering::Acquire) < 2 {
                    let next = next_tracked.load(Ordering::Relaxed);
                    let in_flight = next.saturating_sub(2)..next.min(per_kind);
                    for page in &tracked_pages[in_flight] {
                        // SAFETY: every tracked page is pushed into `queue`, which outlives
                        // the threads.
                        if unsafe { Queue::<&Page, 1>::revoke(&page) } {
                            record(page, REVOKED);
                        }
                    }
                }
            }
            _ => loop {
                match queue.pop() {
                    Some(page) => popped(page),
                    None if pushers_done.load(Ordering::Acquire) == 2 => break,
                    None => thread::yield_now(),
                }
            },
        });
        std::iter::from_fn(|| queue.pop()).for_each(popped);
        for number in 0..per_kind {
            assert_eq!(
                plain_seen[number].load(Ordering::Relaxed),
                1,
                "plain page {number}"
            );
            assert_ne!(
                outcome[number].load(Ordering::Relaxed),
                0,
                "page {number} lost"
            );
            assert!(!tracked_pages[number].handle.is_in_bag());
        }
    }
}

#[test]
fn mpmc_a_queue_that_starts_tracking_mid_life_keeps_one_winner() {
    epoch_ready();
    plain_then_tracked_on_one_cell_segments(8, short_items());
}

#[test]
#[ignore = "long: run in release (CI does)"]
fn full_mpmc_a_queue_that_starts_tracking_mid_life() {
    epoch_ready();
    plain_then_tracked_on_one_cell_segments(100, 20_000);
}

/// Plain calls on a queue of one-cell segments: every push links a segment and every pop
/// retires one, so segments go through limbo, the grace periods and the pool all the time,
/// while plain calls are inside them (protected by eras, not pins). Each value is four copies
/// of one number, so a pop that read a recycled cell would see them disagree; a ledger catches
/// a lost or duplicated value. Threads are started afresh each round, so seats (and the era
/// announcements on them) pass from exited threads to new ones.
fn plain_calls_on_one_cell_segments(rounds: usize, per_thread: usize) {
    epoch_ready();
    let queue = Queue::<[u64; 4], 1>::with_segment_size();
    let seen: Vec<AtomicU8> = (0..rounds * THREADS * per_thread)
        .map(|_| AtomicU8::new(0))
        .collect();
    let popped = AtomicUsize::new(0);
    for round in 0..rounds {
        run_threads(THREADS, |t| {
            for i in 0..per_thread {
                let value = ((round * THREADS + t) * per_thread + i) as u64;
                queue.push([value; 4]);
                // Every thread pops as much as it pushes, so nothing piles up.
                let words = loop {
                    if let Some(words) = queue.pop() {
                        break words;
                    }
                    thread::yield_now();
                };
                assert!(
                    words.iter().all(|&w| w == words[0]),
                    "a torn value {words:?}"
                );
                let before = seen[words[0] as usize].fetch_add(1, Ordering::Relaxed);
                assert_eq!(before, 0, "value {} popped twice", words[0]);
                popped.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    assert_eq!(queue.pop(), None);
    assert_eq!(popped.load(Ordering::Relaxed), seen.len());
    assert!(seen.iter().all(|count| count.load(Ordering::Relaxed) == 1));
}

#[test]
fn mpmc_plain_calls_on_one_cell_segments_from_threads_that_come_and_go() {
    plain_calls_on_one_cell_segments(8, short_items());
}

#[test]
#[ignore = "long: run in release (CI does)"]
fn full_mpmc_plain_calls_on_one_cell_segments() {
    plain_calls_on_one_cell_segments(40, FULL_OPS / (40 * THREADS * 2));
}

/// Threads that make a few plain calls and exit, one batch after another, while two
/// long-lived threads keep every segment of a one-cell-segment queue moving (each of their
/// pops retires one, and every 64 retirements the retiring thread scans the announcement words
/// of every seated thread). An exiting thread takes its word out of that registry and waits
/// for any scan in progress before its thread-local storage goes; the run must neither hang
/// nor lose, duplicate or tear a value.
fn threads_exit_while_segments_are_reclaimed(batches: usize, per_short_thread: usize) {
    epoch_ready();
    const SHORT_THREADS: usize = 2;
    const LONG_THREADS: usize = 2;
    let queue = Queue::<[u64; 2], 1>::with_segment_size();
    let short_values = batches * SHORT_THREADS * per_short_thread;
    let seen: Vec<AtomicU8> = (0..short_values).map(|_| AtomicU8::new(0)).collect();
    let batches_done = AtomicBool::new(false);
    // The long-lived threads' values: thread `t` pushes `long_value(t, 0)`, `long_value(t, 1)`,
    // ..., all above the short threads' values.
    let long_value = |t: usize, n: u64| short_values as u64 + ((t as u64) << 32) + n;
    // Checks a popped value: short ones in the ledger, long ones returned to be counted.
    let check = |words: [u64; 2], long: &mut Vec<u64>| {
        assert_eq!(words[0], words[1], "a torn value {words:?}");
        if words[0] < short_values as u64 {
            let before = seen[words[0] as usize].fetch_add(1, Ordering::Relaxed);
            assert_eq!(before, 0, "value {} popped twice", words[0]);
        } else {
            long.push(words[0]);
        }
    };
    let outcomes = run_threads(LONG_THREADS + 1, |t| {
        let mut long = Vec::new();
        if t == LONG_THREADS {
            for batch in 0..batches {
                run_threads(SHORT_THREADS, |s| {
                    for i in 0..per_short_thread {
                        let value = ((batch * SHORT_THREADS + s) * per_short_thread + i) as u64;
                        queue.push([value; 2]);
                    }
                });
            }
            batches_done.store(true, Ordering::Release);
            return (0, long);
        }
        let mut pushed = 0_u64;
        while !batches_done.load(Ordering::Acquire) {
            queue.push([long_value(t, pushed); 2]);
            pushed += 1;
            if let Some(words) = queue.pop() {
                check(words, &mut long);
            }
        }
        (pushed, long)
    });
    let mut long: Vec<u64> = Vec::new();
    for (_, popped) in &outcomes {
        long.extend(popped);
    }
    // Whatever is left: short values not popped yet, long ones pushed but not popped.
    while let Some(words) = queue.pop() {
        check(words, &mut long);
    }
    let missing = seen
        .iter()
        .filter(|c| c.load(Ordering::Relaxed) == 0)
        .count();
    assert_eq!(missing, 0, "{missing} of {short_values} short values lost");
    let mut expected: Vec<u64> = (0..LONG_THREADS)
        .flat_map(|t| (0..outcomes[t].0).map(move |n| long_value(t, n)))
        .collect();
    assert!(!expected.is_empty(), "the long-lived threads never ran");
    expected.sort_unstable();
    long.sort_unstable();
    assert_eq!(long.len(), expected.len(), "long values lost or duplicated");
    assert!(long == expected, "long values lost or duplicated");
}

#[test]
fn mpmc_threads_exit_while_segments_are_reclaimed() {
    threads_exit_while_segments_are_reclaimed(100, short_items() / 40);
}

#[test]
#[ignore = "long: run in release (CI does)"]
fn full_mpmc_threads_exit_while_segments_are_reclaimed() {
    threads_exit_while_segments_are_reclaimed(2_000, 200);
}

/// More threads alive at once than there are seats (128): the threads without one take the
/// shared paths (the stack's shared free list and count, the queue's epoch pin, a Bagpipe of
/// stacks whose pipes send a seatless call to their own plain calls) beside threads with seats
/// (stashes, eras), on the same structures at the same time.
#[test]
fn more_threads_than_seats_mix_seated_and_unseated_calls() {
    epoch_ready();
    const CROWD: usize = 150;
    const EACH: usize = 200;
    let queue = Queue::<u64, 2>::with_segment_size();
    let stack = Stack::new();
    let bag: Bagpipe<Stack<u64>> = Bagpipe::with_pipes(4).unwrap();
    let arrived = AtomicUsize::new(0);
    let seen_queue: Vec<AtomicU8> = (0..CROWD * EACH).map(|_| AtomicU8::new(0)).collect();
    let seen_stack: Vec<AtomicU8> = (0..CROWD * EACH).map(|_| AtomicU8::new(0)).collect();
    let seen_bag: Vec<AtomicU8> = (0..CROWD * EACH).map(|_| AtomicU8::new(0)).collect();
    run_threads(CROWD, |t| {
        // Every thread makes its first call only once all of them are alive, so that seats
        // run out.
        arrived.fetch_add(1, Ordering::AcqRel);
        while arrived.load(Ordering::Acquire) < CROWD {
            thread::yield_now();
        }
        for i in 0..EACH {
            let value = (t * EACH + i) as u64;
            queue.push(value);
            stack.push(value);
            if let Some(v) = queue.pop() {
                assert_eq!(seen_queue[v as usize].fetch_add(1, Ordering::Relaxed), 0);
            }
            if let Some(v) = stack.pop() {
                assert_eq!(seen_stack[v as usize].fetch_add(1, Ordering::Relaxed), 0);
            }
            bag.push(value);
            if let Some(v) = bag.pop() {
                assert_eq!(seen_bag[v as usize].fetch_add(1, Ordering::Relaxed), 0);
            }
        }
    });
    for v in std::iter::from_fn(|| queue.pop()) {
        assert_eq!(seen_queue[v as usize].fetch_add(1, Ordering::Relaxed), 0);
    }
    assert_eq!(
        stack.len(),
        seen_stack
            .iter()
            .filter(|c| c.load(Ordering::Relaxed) == 0)
            .count()
    );
    for v in std::iter::from_fn(|| stack.pop()) {
        assert_eq!(seen_stack[v as usize].fetch_add(1, Ordering::Relaxed), 0);
    }
    for v in std::iter::from_fn(|| bag.pop()) {
        assert_eq!(seen_bag[v as usize].fetch_add(1, Ordering::Relaxed), 0);
    }
    for seen in [&seen_queue, &seen_stack, &seen_bag] {
        assert!(
            seen.iter().all(|c| c.load(Ordering::Relaxed) == 1),
            "a value lost"
        );
    }
    assert_eq!(stack.len(), 0);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
