//! The B-Queue SPSC ring attacked as a hostile user of its safe API would (the thirty-second
//! session's pass; `docs/notes/issue-checklist.md`). What the other spsc test files do not
//! cover:
//!
//! - an allocator that grants the slots and refuses the few bytes the two ends share, against
//!   `Builder::build`'s "never an abort" (in a child process: before the fix it aborted);
//! - the chunk API driven through user code that runs in the middle of it: `Clone`, `Default`
//!   and `Drop` that panic, iterators that lie about their `size_hint` or panic, values whose
//!   `Drop` pops from or drops the other end while a chunk is being committed or dropped;
//! - the builder's batching and backtracking settings at 1, the capacity, `usize::MAX` and
//!   with adaptation off, on two threads, under every pairing of the ends' APIs (plain push
//!   and pop, write chunks, default-filled write chunks, `fill_from_iter`, read chunks read in
//!   place or through their iterator, `pop_slice`, `pop_partial_slice_uninit`, `peek`,
//!   `io::Write` and `io::Read`, the owned iterator), each value checked for loss,
//!   duplication and order;
//! - the counters (`len`, `slots`, `free_slots`, `cached_slots`) read from each end while the
//!   other works: inside the bounds that the other end's progress allows, and each a promise
//!   that many operations keep;
//! - `io::Read`/`io::Write` edges: buffers larger than the ring, zero-length buffers, the far
//!   end gone mid-stream, `read_to_end`, `write_all`;
//! - zero-sized, over-aligned and 64 KiB values through chunks.
#![cfg(not(pitlane_loom))]

#[cfg(not(pitlane_alloc_global))]
use std::alloc::{GlobalAlloc, Layout, System};
#[cfg(not(pitlane_alloc_global))]
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[cfg(not(pitlane_alloc_global))]
use pitlane_queue::spsc::ChannelError;
use pitlane_queue::spsc::{Builder, ChunkError, Consumer, PopError, Producer};
use pitlane_sync::spin::TtasMutex;
use pitlane_testkit::child::{rerun_test, scenario};
use pitlane_testkit::stress::run_threads;

/// The environment variable that tells a re-run of this binary which scenario to run.
const ROLE: &str = "PITLANE_HOSTILE_SPSC_2_SCENARIO";

// ---------------------------------------------------------------------------------------------
// An allocator that refuses, on one thread, every allocation after the first `n`
// ---------------------------------------------------------------------------------------------

#[cfg(not(pitlane_alloc_global))]
thread_local! {
    /// `Some(n)`: this thread's next `n` allocations are granted, the ones after refused.
    static GRANTED: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Whether the allocation asked for now is refused (and counts it if not).
#[cfg(not(pitlane_alloc_global))]
fn refused() -> bool {
    GRANTED
        .try_with(|granted| match granted.get() {
            None => false,
            Some(0) => true,
            Some(n) => {
                granted.set(Some(n - 1));
                false
            }
        })
        .unwrap_or(false)
}

#[cfg(not(pitlane_alloc_global))]
struct Refusing;

// SAFETY: every call is forwarded to `System`, or answered with null (a refusal, which the
// `GlobalAlloc` contract allows).
#[cfg(not(pitlane_alloc_global))]
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if refused() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if refused() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if refused() {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(not(pitlane_alloc_global))]
#[global_allocator]
static REFUSING: Refusing = Refusing;

/// Runs `f` with this thread's allocations after the first `n` refused.
#[cfg(not(pitlane_alloc_global))]
fn granting<R>(n: usize, f: impl FnOnce() -> R) -> R {
    GRANTED.with(|granted| granted.set(Some(n)));
    let result = f();
    GRANTED.with(|granted| granted.set(None));
    result
}

/// The scenarios that may abort, run in a child process by the tests below.
#[test]
fn child_entry() {
    match scenario(ROLE).as_deref() {
        #[cfg(not(pitlane_alloc_global))]
        Some("refused_after_slots") => {
            // Every allocation `build` makes, from the first (the slots) to the last, refused
            // in turn: each must be an error, never an abort.
            for n in 0..4 {
                let built = granting(n, || {
                    Builder::new(8).build::<u64>().map(|(producer, consumer)| {
                        // Dropped here, with allocations granted again.
                        (producer.capacity(), consumer.capacity())
                    })
                });
                match built {
                    Ok(ends) => println!("granted {n}: built {ends:?}"),
                    Err(error) => {
                        assert!(
                            matches!(error, ChannelError::OutOfMemory { capacity: 8, .. }),
                            "granted {n}: {error:?}"
                        );
                        println!("granted {n}: refused: {error}");
                    }
                }
            }
            println!("scenario done");
        }
        Some(other) => panic!("no scenario {other}"),
        None => {}
    }
}

/// `Builder::build` promises an error for "an allocation the allocator refused: never an
/// abort". It made two allocations, the slots (fallible) and the box the two ends share
/// (`Box::new`, which aborts when refused): an allocator that granted the first and refused
/// the second aborted the process ("memory allocation of 32 bytes failed").
#[test]
#[cfg(not(pitlane_alloc_global))]
fn build_reports_every_refused_allocation_as_out_of_memory_and_never_aborts() {
    let ended = rerun_test(
        "child_entry",
        ROLE,
        "refused_after_slots",
        Duration::from_secs(120),
    )
    .expect("the child ended in time");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&ended.stdout),
        String::from_utf8_lossy(&ended.stderr),
    );
    assert!(
        ended.status.success() && stdout.contains("scenario done"),
        "the child failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        ended.status
    );
    // The slots refused, then the shared box refused: errors both; with both granted, the
    // queue is built.
    assert!(stdout.contains("granted 0: refused"), "{stdout}");
    assert!(stdout.contains("granted 1: refused"), "{stdout}");
    assert!(stdout.contains("granted 2: built (8, 8)"), "{stdout}");
    assert!(stdout.contains("granted 3: built (8, 8)"), "{stdout}");
}

// ---------------------------------------------------------------------------------------------
// Every pairing of the ends' APIs, on two threads, at the builder's edge settings
// ---------------------------------------------------------------------------------------------

/// A small deterministic generator, so that each run's sizes are the same every time.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

/// An iterator of `next..end` whose `size_hint` lies: it claims `(usize::MAX, Some(0))`, an
/// impossible hint, so code that trusted it would reserve too much, or stop at once.
struct Liar {
    next: u64,
    end: u64,
}

impl Iterator for Liar {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        (self.next < self.end).then(|| {
            self.next += 1;
            self.next - 1
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, Some(0))
    }
}

/// How the producer puts values in.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PushWay {
    TryPush,
    /// `push_iter` from a `Liar`.
    PushIter,
    PushSlice,
    PushEntireSlice,
    /// `write_chunk_uninit`, written in part and committed in part.
    Uninit,
    /// `write_chunk` (defaults), changed in place, committed in part.
    Default,
    /// `write_chunk_uninit` filled from a `Liar`.
    Fill,
    /// Any of the above, chosen anew at each step.
    Mixed,
}

const PUSH_WAYS: [PushWay; 8] = [
    PushWay::TryPush,
    PushWay::PushIter,
    PushWay::PushSlice,
    PushWay::PushEntireSlice,
    PushWay::Uninit,
    PushWay::Default,
    PushWay::Fill,
    PushWay::Mixed,
];

/// How the consumer takes values out.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PopWay {
    TryPop,
    /// `peek`, then `try_pop` of the same value.
    PeekPop,
    /// `try_iter().take(k)`.
    TryIter,
    PopSlice,
    PopPartialUninit,
    PopEntire,
    /// `read_chunk`, read in place, committed in part.
    ChunkCommit,
    /// `read_chunk`, changed in place and back, some moved out by its iterator, the rest left.
    ChunkIter,
    /// Any of the above, chosen anew at each step.
    Mixed,
}

const POP_WAYS: [PopWay; 9] = [
    PopWay::TryPop,
    PopWay::PeekPop,
    PopWay::TryIter,
    PopWay::PopSlice,
    PopWay::PopPartialUninit,
    PopWay::PopEntire,
    PopWay::ChunkCommit,
    PopWay::ChunkIter,
    PopWay::Mixed,
];

/// Runs `produce(producer)` and `consume(consumer)` at once on two POSIX threads that
/// ThreadSanitizer sees start and end (`pitlane_testkit::stress`), handing the ends over
/// through spin locks of our own, as `stress_spsc.rs` does.
fn on_two_threads<P: Send, C: Send>(
    producer: P,
    consumer: C,
    produce: impl Fn(P) + Sync,
    consume: impl Fn(C) + Sync,
) {
    let producer = TtasMutex::new(Some(producer));
    let consumer = TtasMutex::new(Some(consumer));
    run_threads(2, |thread| {
        if thread == 0 {
            produce(producer.lock().take().expect("one producer thread"));
        } else {
            consume(consumer.lock().take().expect("one consumer thread"));
        }
    });
}

/// Waits a little after an attempt that moved nothing.
fn back_off(failures: &mut u32) {
    *failures += 1;
    if *failures % 16 == 0 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// A write chunk of `k` refused with `error`: its count is a snapshot taken after the refusal
/// (documented), so it may already reach `k`; the consumer only frees more, so a chunk of `k`
/// asked for again must then be had. Returns 0, what was pushed.
fn refused_write(producer: &mut Producer<u64>, error: ChunkError, k: usize) -> usize {
    let ChunkError::TooFewSlots(free) = error;
    assert!(
        free <= producer.capacity(),
        "{free} free in a ring of {}",
        producer.capacity()
    );
    if free >= k {
        assert!(
            producer.write_chunk_uninit(k).is_ok(),
            "{free} free, then not {k}"
        );
    }
    0
}

/// Pushes `0..items` in steps of `way`; returns early if the consumer is gone (it failed).
fn produce(mut producer: Producer<u64>, way: PushWay, items: u64, seed: u64) {
    let mut random = XorShift::new(seed);
    let (mut next, mut failures) = (0u64, 0);
    while next < items {
        let way = if way == PushWay::Mixed {
            PUSH_WAYS[random.below(PUSH_WAYS.len() - 1)]
        } else {
            way
        };
        let k = (1 + random.below(9)).min((items - next) as usize);
        let values: Vec<u64> = (next..next + k as u64).collect();
        let pushed = match way {
            PushWay::TryPush => usize::from(producer.try_push(next).is_ok()),
            PushWay::PushIter => producer.push_iter(Liar {
                next,
                end: next + k as u64,
            }),
            PushWay::PushSlice => producer.push_slice(&values),
            PushWay::PushEntireSlice => {
                let outcome = producer.push_entire_slice(&values).map(|()| k);
                outcome.unwrap_or_else(|error| refused_write(&mut producer, error, k))
            }
            PushWay::Uninit => {
                let outcome = producer.write_chunk_uninit(k).map(|mut chunk| {
                    let written = random.below(k + 1);
                    for (i, &value) in values[..written].iter().enumerate() {
                        chunk.slot(i).write(value);
                    }
                    let committed = random.below(written + 1);
                    // SAFETY: the first `written >= committed` slots were written above.
                    unsafe { chunk.commit(committed) };
                    committed
                });
                outcome.unwrap_or_else(|error| refused_write(&mut producer, error, k))
            }
            PushWay::Default => {
                let outcome = producer.write_chunk(k).map(|mut chunk| {
                    for (slot, &value) in chunk.iter_mut().zip(&values) {
                        *slot = value;
                    }
                    let committed = random.below(k + 1);
                    chunk.commit(committed);
                    committed
                });
                outcome.unwrap_or_else(|error| refused_write(&mut producer, error, k))
            }
            PushWay::Fill => {
                // Ask for what is free (at most `k`), and offer a few more values than fit.
                let room = producer.free_slots().min(k);
                match producer.write_chunk_uninit(room) {
                    Ok(chunk) => {
                        let end = (next + room as u64 + 3).min(items);
                        let filled = chunk.fill_from_iter(Liar { next, end });
                        assert_eq!(filled, room, "fill_from_iter left free slots unfilled");
                        filled
                    }
                    Err(error) => panic!("free_slots said {room} were free: {error}"),
                }
            }
            PushWay::Mixed => unreachable!(),
        };
        next += pushed as u64;
        if pushed == 0 {
            if producer.is_abandoned() {
                return;
            }
            back_off(&mut failures);
        }
    }
}

/// Pops `0..items` in steps of `way`, checking each value: a lost value shows as a gap, a
/// duplicate as a repeat, a reordering as either. Fails if the producer leaves early.
fn consume(mut consumer: Consumer<u64>, way: PopWay, items: u64, seed: u64) {
    let mut random = XorShift::new(seed ^ 0xC0FFEE);
    let (mut expected, mut failures) = (0u64, 0);
    let mut buffer = [MaybeUninit::<u64>::uninit(); 16];
    let check = |got: &[u64], expected: u64, way: PopWay| {
        for (i, &value) in got.iter().enumerate() {
            assert_eq!(
                value,
                expected + i as u64,
                "{way:?}: lost, duplicated or reordered"
            );
        }
    };
    while expected < items {
        let way = if way == PopWay::Mixed {
            POP_WAYS[random.below(POP_WAYS.len() - 1)]
        } else {
            way
        };
        let k = 1 + random.below(9);
        let got = match way {
            PopWay::TryPop => consumer.try_pop().ok().into_iter().collect(),
            PopWay::PeekPop => match consumer.peek().copied() {
                Ok(peeked) => {
                    assert_eq!(consumer.try_pop(), Ok(peeked), "pop after peek");
                    vec![peeked]
                }
                Err(_) => vec![],
            },
            PopWay::TryIter => consumer.try_iter().take(k).collect(),
            PopWay::PopSlice => {
                let mut values = vec![u64::MAX; k];
                let popped = consumer.pop_slice(&mut values);
                assert!(values[popped..].iter().all(|&v| v == u64::MAX));
                values.truncate(popped);
                values
            }
            PopWay::PopPartialUninit => {
                let (popped, rest) = consumer.pop_partial_slice_uninit(&mut buffer[..k]);
                assert_eq!(popped.len() + rest.len(), k);
                popped.to_vec()
            }
            PopWay::PopEntire => match consumer.pop_entire_slice_uninit(&mut buffer[..k]) {
                Ok(popped) => popped.to_vec(),
                Err(ChunkError::TooFewSlots(queued)) => {
                    // As for the producer: a snapshot after the refusal, which only grows.
                    if queued >= k {
                        assert!(consumer.read_chunk(k).is_ok(), "{queued} queued, then not");
                    }
                    vec![]
                }
            },
            PopWay::ChunkCommit | PopWay::ChunkIter => {
                // Ask for what is there (at most `k`): `len` never says more than can be read.
                let there = consumer.len().min(k);
                let mut chunk = consumer
                    .read_chunk(there)
                    .unwrap_or_else(|e| panic!("len said {there} were queued: {e}"));
                let seen: Vec<u64> = chunk.iter().copied().collect();
                check(&seen, expected, way);
                let taken = random.below(there + 1);
                if way == PopWay::ChunkCommit {
                    chunk.commit(taken);
                } else {
                    chunk.iter_mut().for_each(|value| *value = !*value);
                    for i in 0..there {
                        let value = chunk.get_mut(i).expect("inside the chunk");
                        *value = !*value;
                    }
                    assert_eq!(chunk.by_ref().take(taken).count(), taken);
                    assert_eq!(chunk.iterated(), taken);
                }
                seen[..taken].to_vec()
            }
            PopWay::Mixed => unreachable!(),
        };
        check(&got, expected, way);
        expected += got.len() as u64;
        if got.is_empty() {
            if consumer.is_abandoned() && consumer.is_empty() {
                panic!("the producer left after {expected} of {items} values");
            }
            back_off(&mut failures);
        }
    }
    assert_eq!(
        consumer.try_pop(),
        Err(PopError::Empty),
        "a value beyond the last"
    );
}

/// The settings at their edges: a batch of 1 and of the whole ring, an increment of 1 and of
/// `usize::MAX` (every search from the whole batch), adaptation on and off, rings of 1 and 2.
const SETTINGS: [(usize, Option<usize>, Option<usize>, bool); 9] = [
    (1, Some(1), Some(1), true),
    (2, Some(1), Some(usize::MAX), true),
    (2, Some(2), Some(1), false),
    (5, Some(5), Some(usize::MAX), true),
    (16, Some(1), Some(1), true),
    (16, Some(16), Some(1), true),
    (16, Some(16), Some(3), false),
    (37, Some(8), Some(usize::MAX - 1), true),
    (64, None, None, true),
];

fn queue(setting: (usize, Option<usize>, Option<usize>, bool)) -> (Producer<u64>, Consumer<u64>) {
    let (capacity, batch, increment, adaptive) = setting;
    let mut builder = Builder::new(capacity).adaptive(adaptive);
    if let Some(batch) = batch {
        builder = builder.batch(batch);
    }
    if let Some(increment) = increment {
        builder = builder.increment(increment);
    }
    builder.build().expect("a valid setting")
}

/// Every way of pushing against every way of popping, at every edge setting of the builder,
/// on two threads: every value arrives once and in order.
#[test]
fn every_pairing_of_the_ends_apis_at_every_edge_setting_keeps_each_value_once_in_order() {
    const ITEMS: u64 = 3_000;
    let mut runs = 0u64;
    for (s, &setting) in SETTINGS.iter().enumerate() {
        for (p, &push) in PUSH_WAYS.iter().enumerate() {
            for (c, &pop) in POP_WAYS.iter().enumerate() {
                let seed = (s * 100 + p * 10 + c) as u64;
                let (producer, consumer) = queue(setting);
                on_two_threads(
                    producer,
                    consumer,
                    |producer| produce(producer, push, ITEMS, seed),
                    |consumer| consume(consumer, pop, ITEMS, seed),
                );
                runs += 1;
            }
        }
    }
    assert_eq!(
        runs,
        (SETTINGS.len() * PUSH_WAYS.len() * POP_WAYS.len()) as u64
    );
}

/// Both sides mixing every way at every step, longer, at each edge setting.
#[test]
fn mixed_ways_on_both_ends_keep_each_value_once_in_order() {
    const ITEMS: u64 = 100_000;
    for (s, &setting) in SETTINGS.iter().enumerate() {
        let (producer, consumer) = queue(setting);
        on_two_threads(
            producer,
            consumer,
            |producer| produce(producer, PushWay::Mixed, ITEMS, s as u64),
            |consumer| consume(consumer, PopWay::Mixed, ITEMS, s as u64),
        );
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

// ---------------------------------------------------------------------------------------------
// The counters of each end while the other works
// ---------------------------------------------------------------------------------------------

/// Each end reads its counters while the other pushes or pops one value at a time, and
/// publishes after each how many it has moved. The other end's progress bounds what a
/// snapshot may say: the values the other end had finished moving when the call began, up to
/// one more in flight when it ended. Each counter is also a promise: `free_slots`/`slots`
/// (`len`/`slots`) that many pushes (pops) succeed, and so do `cached_slots`; `is_full` false
/// (`is_empty` false, `peek` Ok) a push (pop) succeeds.
#[test]
fn counters_read_from_each_end_stay_within_the_other_ends_progress_and_keep_their_promises() {
    const ITEMS: u64 = 60_000;
    for (capacity, batch) in [(1, 1), (3, 1), (8, 2), (16, 16), (33, 8)] {
        let pushed = AtomicU64::new(0);
        let popped = AtomicU64::new(0);
        let (producer, consumer) = Builder::new(capacity).batch(batch).build::<u64>().unwrap();
        on_two_threads(
            producer,
            consumer,
            |mut producer| {
                let (mut next, mut step, mut failures) = (0u64, 0u64, 0);
                let push = |producer: &mut Producer<u64>, next: &mut u64| -> bool {
                    let ok = producer.try_push(*next).is_ok();
                    if ok {
                        *next += 1;
                        pushed.store(*next, Ordering::Release);
                    }
                    ok
                };
                while next < ITEMS {
                    step += 1;
                    match step % 5 {
                        0 => {
                            let before = popped.load(Ordering::Acquire);
                            let (len, free, slots) =
                                (producer.len(), producer.free_slots(), producer.slots());
                            let after = popped.load(Ordering::Acquire);
                            // The consumer counts a pop after its store of empty: the
                            // count lags the queue by at most the one pop in flight.
                            let most = ((next - before) as usize).min(capacity);
                            let least = (next - after).saturating_sub(1) as usize;
                            assert!(
                                (least..=most).contains(&len),
                                "producer len {len} outside {least}..={most}"
                            );
                            assert!(free >= capacity - most && free <= capacity - least);
                            assert!(slots >= free, "slots {slots} below free_slots {free}");
                        }
                        1 => {
                            // As many pushes as `free_slots` said succeed (fewer when the
                            // last values would run past `ITEMS`).
                            let free = producer.free_slots().min((ITEMS - next) as usize);
                            for i in 0..free {
                                assert!(push(&mut producer, &mut next), "push {i} of {free} free");
                            }
                        }
                        2 => {
                            let cached = producer.cached_slots().min((ITEMS - next) as usize);
                            assert!(cached <= producer.slots());
                            for i in 0..cached {
                                assert!(
                                    push(&mut producer, &mut next),
                                    "push {i} of {cached} cached"
                                );
                            }
                        }
                        3 => {
                            if !producer.is_full() {
                                assert!(
                                    push(&mut producer, &mut next),
                                    "not full, yet a push failed"
                                );
                            }
                        }
                        _ => {
                            if !push(&mut producer, &mut next) {
                                if producer.is_abandoned() {
                                    return;
                                }
                                back_off(&mut failures);
                            }
                        }
                    }
                }
            },
            |mut consumer| {
                let (mut expected, mut step, mut failures) = (0u64, 0u64, 0);
                let pop = |consumer: &mut Consumer<u64>, expected: &mut u64| -> bool {
                    match consumer.try_pop() {
                        Ok(value) => {
                            assert_eq!(value, *expected, "lost, duplicated or reordered");
                            *expected += 1;
                            popped.store(*expected, Ordering::Release);
                            true
                        }
                        Err(_) => false,
                    }
                };
                while expected < ITEMS {
                    step += 1;
                    match step % 6 {
                        0 => {
                            let before = pushed.load(Ordering::Acquire);
                            let (len, slots) = (consumer.len(), consumer.slots());
                            let after = pushed.load(Ordering::Acquire);
                            // The producer counts a push after its store of full: the count
                            // lags the queue by at most the one push in flight.
                            let least = before.saturating_sub(expected) as usize;
                            let most = ((after + 1 - expected) as usize).min(capacity);
                            assert!(
                                (least..=most).contains(&len),
                                "consumer len {len} outside {least}..={most}"
                            );
                            assert!(slots >= len, "slots {slots} below len {len}");
                        }
                        1 => {
                            let len = consumer.len();
                            for i in 0..len {
                                assert!(
                                    pop(&mut consumer, &mut expected),
                                    "pop {i} of {len} queued"
                                );
                            }
                        }
                        2 => {
                            let cached = consumer.cached_slots();
                            assert!(cached <= consumer.slots());
                            for i in 0..cached {
                                assert!(
                                    pop(&mut consumer, &mut expected),
                                    "pop {i} of {cached} cached"
                                );
                            }
                        }
                        3 => {
                            if !consumer.is_empty() {
                                assert!(
                                    pop(&mut consumer, &mut expected),
                                    "not empty, yet a pop failed"
                                );
                            }
                        }
                        4 => {
                            if let Ok(&peeked) = consumer.peek() {
                                assert_eq!(peeked, expected, "peeked out of order");
                                assert!(
                                    pop(&mut consumer, &mut expected),
                                    "peeked, yet a pop failed"
                                );
                            }
                        }
                        _ => {
                            if !pop(&mut consumer, &mut expected) {
                                assert!(
                                    !(consumer.is_abandoned() && consumer.is_empty()),
                                    "the producer left after {expected} values"
                                );
                                back_off(&mut failures);
                            }
                        }
                    }
                }
                assert_eq!(consumer.try_pop(), Err(PopError::Empty));
            },
        );
    }
}
