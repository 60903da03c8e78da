//! The SPSC ring, the Bagpipe and its revocation used as a hostile user would use the safe
//! API: chunks held across the other end's operations and dropped on another thread, values
//! whose `Drop` calls back into the structure that drops them, forgotten chunks, empty and
//! huge I/O buffers, over-aligned and zero-sized values, sizes at the layout limit, bounded
//! operations at every budget edge, and a Bagpipe call made from inside another's attempt.
#![cfg(not(pitlane_loom))]

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};

use pitlane_queue::bagpipe::{Bagpipe, MAX_PIPES};
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevokeHandle};
use pitlane_queue::spsc::{self, Builder, ChannelError, ChunkError, Consumer, Producer};
use pitlane_queue::stack::{MAX_ITEMS, Stack};
use pitlane_queue::{PopError, PushError};
use pitlane_sync::spin::TtasMutex;
use pitlane_testkit::stress::run_threads;

// ---------------------------------------------------------------------------------------------
// Bagpipe calls made inside a Bagpipe call's attempt
// ---------------------------------------------------------------------------------------------

struct Page {
    handle: RevokeHandle,
}

/// A revocable item; its drop runs `on_drop`.
struct Tracked {
    page: &'static Page,
    id: usize,
    on_drop: Option<fn()>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(on_drop) = self.on_drop {
            on_drop();
        }
    }
}

// SAFETY: the handle lives in the page, outside the item's bytes, the same for every move.
unsafe impl Revocable for Tracked {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.page.handle
    }
}

fn leaked_page() -> &'static Page {
    Box::leak(Box::new(Page {
        handle: RevokeHandle::new(),
    }))
}

/// The handle of `bag` whose push position is pipe `pipe`, among `bag.pipe_count()` fresh ones
/// (handles start on consecutive pipes; `Debug` shows the position).
fn handle_on<B: pitlane_queue::WeakBag>(
    bag: &Bagpipe<B>,
    pipe: usize,
) -> pitlane_queue::bagpipe::Handle<'_, B> {
    for _ in 0..bag.pipe_count() {
        let handle = bag.handle();
        if format!("{handle:?}").contains(&format!("push_at: {pipe},")) {
            return handle;
        }
    }
    panic!("no handle starts on pipe {pipe}");
}

/// A thread's first `Bagpipe::pop` over stacks must not miss an item that sat in the bag for
/// the whole call ("`None` only after `pipe_count()` consecutive pipes reported empty"), even
/// when a revoked item's `Drop`, run by that pop, makes a Bagpipe call of its own.
///
/// The path this guards: a thread's first plain call over stacks starts on the unmade walk
/// (pipe 0) and takes its seat inside the stack's call, which makes the thread's walk; the
/// rest of the call must then not count pipe 0's attempt in its run of empty pipes. That fact
/// was once a per-thread flag, cleared by whichever call read it first: here the `Drop` of the
/// revoked item the stack's pop passes (an `OTHER.pop()` that walks on past its first pipe).
/// The outer pop then tried only `pipe_count() - 1` pipes of its new walk and never its start:
/// with 2 pipes, the item in pipe 1 was missed for every other thread. Now the rest of a walk
/// compares the walk with the one its first attempt started from.
///
/// Input: `Bagpipe<Stack<Tracked>>` with 2 pipes; pipe 0 holds one tracked item, revoked (the
/// bag alive: `revoke`'s contract holds), whose drop calls `OTHER.pop()`; pipe 1 holds one
/// plain item. A fresh thread's first call is `bag.pop()`. Repeated on 8 fresh threads (the
/// walks' start alternates).
#[test]
fn a_threads_first_pop_finds_the_item_when_a_dropped_revoked_item_calls_a_bagpipe() {
    static OTHER: std::sync::LazyLock<Bagpipe<Queue<u8>>> =
        std::sync::LazyLock::new(|| Bagpipe::with_pipes(4).unwrap());
    fn reenter() {
        assert_eq!(OTHER.pop(), None);
    }
    std::sync::LazyLock::force(&OTHER);
    let mut missed = Vec::new();
    for round in 0..8 {
        let bag: &'static Bagpipe<Stack<Tracked>> =
            Box::leak(Box::new(Bagpipe::with_pipes(2).unwrap()));
        let revoked_page = leaked_page();
        handle_on(bag, 0).push_revocable(Tracked {
            page: revoked_page,
            id: 0,
            on_drop: Some(reenter),
        });
        let probe = Tracked {
            page: revoked_page,
            id: 0,
            on_drop: None,
        };
        // SAFETY: the item was pushed into `bag`, leaked, so alive for the call.
        assert!(unsafe { bag.revoke(&probe) });
        handle_on(bag, 1).push(Tracked {
            page: leaked_page(),
            id: 1,
            on_drop: None,
        });
        let (first, second) = std::thread::spawn(move || {
            let first = bag.pop().map(|item| item.id);
            let second = bag.pop().map(|item| item.id);
            (first, second)
        })
        .join()
        .unwrap();
        if first != Some(1) {
            missed.push((round, first, second));
        }
    }
    assert!(
        missed.is_empty(),
        "(round, first pop, second pop) where the first pop missed item 1 in pipe 1: {missed:?}"
    );
}

/// The same promise for a thread whose walk is made: a `Drop` run inside a pop's first
/// attempt that pops another Bagpipe successfully, past that Bagpipe's first pipe, moves the
/// thread's walk (one walk serves every plain call of the thread). The rest of the outer pop
/// must still try every pipe: counting its first attempt as one empty pipe of the moved walk
/// made it try only `pipe_count() - 1` pipes from the moved position, which with 2 pipes is
/// the first pipe again, so that the item in the other was missed.
///
/// With 2 pipes and the thread's pop position at parity `p`: the outer bag holds a revoked
/// item in pipe `p` (whose drop pops the inner bag) and a plain item in pipe `1 - p`; the
/// inner bag holds one item in pipe `1 - p`, so that the inner pop finds it on its second
/// attempt and moves the walk by one stride. Both parities, on 8 fresh threads each.
#[test]
fn a_pop_finds_the_item_when_a_dropped_revoked_item_moves_the_threads_walk() {
    thread_local! {
        static INNER: std::cell::Cell<Option<&'static Bagpipe<Queue<u8>>>> =
            const { std::cell::Cell::new(None) };
        static INNER_GOT: std::cell::Cell<Option<u8>> = const { std::cell::Cell::new(None) };
    }
    fn pop_inner() {
        let inner = INNER.get().expect("set before the outer pop");
        INNER_GOT.set(inner.pop());
    }
    let mut missed = Vec::new();
    for parity in 0..2 {
        for round in 0..8 {
            let outer: &'static Bagpipe<Stack<Tracked>> =
                Box::leak(Box::new(Bagpipe::with_pipes(2).unwrap()));
            let inner: &'static Bagpipe<Queue<u8>> =
                Box::leak(Box::new(Bagpipe::with_pipes(2).unwrap()));
            let revoked_page = leaked_page();
            handle_on(outer, parity).push_revocable(Tracked {
                page: revoked_page,
                id: 0,
                on_drop: Some(pop_inner),
            });
            let probe = Tracked {
                page: revoked_page,
                id: 0,
                on_drop: None,
            };
            // SAFETY: the item was pushed into `outer`, leaked, so alive for the call.
            assert!(unsafe { outer.revoke(&probe) });
            handle_on(outer, 1 - parity).push(Tracked {
                page: leaked_page(),
                id: 1,
                on_drop: None,
            });
            handle_on(inner, 1 - parity).push(7);
            let (first, inner_got, second) = std::thread::spawn(move || {
                // Make the thread's walk (its seat and walk come with its first plain call on
                // stacks), on a bag of its own.
                let warm: Bagpipe<Stack<u8>> = Bagpipe::with_pipes(2).unwrap();
                assert_eq!(warm.pop(), None);
                INNER.set(Some(inner));
                let first = outer.pop().map(|item| item.id);
                let second = outer.pop().map(|item| item.id);
                (first, INNER_GOT.get(), second)
            })
            .join()
            .unwrap();
            if first != Some(1) {
                missed.push((parity, round, first, inner_got, second));
            }
        }
    }
    assert!(
        missed.is_empty(),
        "(parity, round, first pop, inner pop, second pop) where the first pop missed item 1: \
         {missed:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// SPSC
// ---------------------------------------------------------------------------------------------

/// Counts drops per id.
struct Ledger(Vec<AtomicUsize>);

impl Ledger {
    fn new(n: usize) -> &'static Ledger {
        Box::leak(Box::new(Ledger(
            (0..n).map(|_| AtomicUsize::new(0)).collect(),
        )))
    }
    fn count(&self, id: usize) -> usize {
        self.0[id].load(Ordering::SeqCst)
    }
}

struct Counted {
    id: usize,
    ledger: &'static Ledger,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.ledger.0[self.id].fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs `a` and `b` at once on two threads that ThreadSanitizer sees (pitlane-testkit's).
fn on_two_threads<A: Send, B: Send>(a: A, b: B, fa: impl Fn(A) + Sync, fb: impl Fn(B) + Sync) {
    let a = TtasMutex::new(Some(a));
    let b = TtasMutex::new(Some(b));
    run_threads(2, |thread| {
        if thread == 0 {
            fa(a.lock().take().unwrap());
        } else {
            fb(b.lock().take().unwrap());
        }
    });
}

/// A read chunk held across the producer's pushes and its drop on another thread; then half
/// committed, the rest iterated; every value dropped once, in order.
#[test]
fn a_read_chunk_held_while_the_producer_pushes_and_leaves_on_another_thread() {
    const N: usize = 64;
    let ledger = Ledger::new(N);
    let (mut producer, consumer) = Builder::new(16).batch(4).build::<Counted>().unwrap();
    for id in 0..8 {
        assert!(producer.try_push(Counted { id, ledger }).is_ok());
    }
    let started = AtomicUsize::new(0);
    on_two_threads(
        producer,
        consumer,
        |mut producer: Producer<Counted>| {
            while started.load(Ordering::SeqCst) == 0 {
                std::hint::spin_loop();
            }
            let mut id = 8;
            while id < 16 {
                match producer.try_push(Counted { id, ledger }) {
                    Ok(()) => id += 1,
                    Err(full) => {
                        std::mem::forget(full.into_inner());
                        std::hint::spin_loop();
                    }
                }
            }
            drop(producer);
        },
        |mut consumer: Consumer<Counted>| {
            let mut chunk = consumer.read_chunk(8).unwrap();
            started.store(1, Ordering::SeqCst);
            assert_eq!(
                chunk.iter().map(|c| c.id).collect::<Vec<_>>(),
                (0..8).collect::<Vec<_>>()
            );
            let first = chunk.next().unwrap();
            assert_eq!(first.id, 0);
            drop(first);
            chunk.commit(3); // 1, 2, 3
            while !consumer.is_abandoned() {
                std::hint::spin_loop();
            }
            let rest: Vec<usize> = consumer.try_iter().map(|c| c.id).collect();
            assert_eq!(rest, (4..16).collect::<Vec<_>>());
        },
    );
    for id in 0..16 {
        assert_eq!(ledger.count(id), 1, "value {id}");
    }
}

#[derive(Default)]
struct DefaultCounted(Option<Counted>);

/// A write chunk of values held (uncommitted) while the consumer drains and leaves on another
/// thread; then a partial commit and the producer's drop: every value dropped once.
#[test]
fn a_write_chunk_held_while_the_consumer_drains_and_leaves_on_another_thread() {
    let ledger = Ledger::new(32);
    let (mut producer, consumer) = spsc::channel::<DefaultCounted>(8);
    for id in 0..3 {
        assert!(
            producer
                .try_push(DefaultCounted(Some(Counted { id, ledger })))
                .is_ok()
        );
    }
    let held = AtomicUsize::new(0);
    on_two_threads(
        producer,
        consumer,
        |mut producer: Producer<DefaultCounted>| {
            let mut chunk = producer.write_chunk(5).unwrap();
            for (i, value) in chunk.iter_mut().enumerate() {
                value.0 = Some(Counted { id: 10 + i, ledger });
            }
            held.store(1, Ordering::SeqCst);
            while !chunk_consumer_gone(&held) {
                std::hint::spin_loop();
            }
            chunk.commit(2); // 10, 11 published; 12, 13, 14 dropped here
            for id in 12..15 {
                assert_eq!(ledger.count(id), 1);
            }
            assert!(producer.is_abandoned());
            drop(producer); // drops 10, 11 (queued, the consumer gone)
        },
        |mut consumer: Consumer<DefaultCounted>| {
            while held.load(Ordering::SeqCst) == 0 {
                std::hint::spin_loop();
            }
            let got: Vec<usize> = consumer
                .try_iter()
                .map(|v| v.0.as_ref().unwrap().id)
                .collect();
            assert_eq!(got, [0, 1, 2]);
            drop(consumer);
            held.store(2, Ordering::SeqCst);
        },
    );
    for id in (0..3).chain(10..15) {
        assert_eq!(ledger.count(id), 1, "value {id}");
    }
}

fn chunk_consumer_gone(held: &AtomicUsize) -> bool {
    held.load(Ordering::SeqCst) == 2
}

thread_local! {
    static PRODUCER: RefCell<Option<Producer<Reentrant>>> = const { RefCell::new(None) };
    static CONSUMER: RefCell<Option<Consumer<Reentrant>>> = const { RefCell::new(None) };
}

/// A value whose drop pushes into (or pops from) its own queue through a thread-local end.
#[derive(Default)]
struct Reentrant {
    id: usize,
    push_on_drop: bool,
    pop_on_drop: bool,
    popped: Option<&'static RefCell<Vec<usize>>>,
}

impl Drop for Reentrant {
    fn drop(&mut self) {
        if self.push_on_drop {
            PRODUCER.with(|p| {
                let mut p = p.borrow_mut();
                let p = p.as_mut().unwrap();
                let value = Reentrant {
                    id: 1000 + self.id,
                    ..Reentrant::default()
                };
                assert!(p.try_push(value).is_ok());
            });
        }
        if self.pop_on_drop {
            CONSUMER.with(|c| {
                let mut c = c.borrow_mut();
                let c = c.as_mut().unwrap();
                while let Ok(mut value) = c.try_pop() {
                    // Dropped here, inside this borrow: it must not pop in turn.
                    value.pop_on_drop = false;
                    self.popped.unwrap().borrow_mut().push(value.id);
                }
            });
        }
    }
}

/// A value dropped by `ReadChunk::commit` pushes into the same queue (the producer in a
/// thread-local), into the very slot the commit has just emptied: in order, nothing lost.
#[test]
fn a_value_dropped_by_a_read_commit_pushes_into_its_own_queue() {
    let (mut producer, mut consumer) = Builder::new(4).batch(2).build::<Reentrant>().unwrap();
    for id in 0..4 {
        assert!(
            producer
                .try_push(Reentrant {
                    id,
                    push_on_drop: true,
                    ..Default::default()
                })
                .is_ok()
        );
    }
    PRODUCER.with(|p| *p.borrow_mut() = Some(producer));
    // The ring is full: each drop's push needs the slot the commit has just emptied.
    consumer.read_chunk(4).unwrap().commit_all();
    let got: Vec<usize> = consumer.try_iter().map(|v| v.id).collect();
    assert_eq!(got, [1000, 1001, 1002, 1003]);
    PRODUCER.with(|p| drop(p.borrow_mut().take()));
}

/// A value dropped uncommitted by a write chunk pops its own queue (the consumer in a
/// thread-local): it sees the published values only, never the chunk's own slots.
#[test]
fn a_value_dropped_by_a_write_chunk_pops_its_own_queue_and_sees_only_published_values() {
    let popped: &'static RefCell<Vec<usize>> = Box::leak(Box::new(RefCell::new(Vec::new())));
    let (mut producer, consumer) = spsc::channel::<Reentrant>(6);
    CONSUMER.with(|c| *c.borrow_mut() = Some(consumer));
    assert!(
        producer
            .try_push(Reentrant {
                id: 7,
                ..Default::default()
            })
            .is_ok()
    );
    let mut chunk = producer.write_chunk(5).unwrap();
    for (i, value) in chunk.iter_mut().enumerate() {
        value.id = 20 + i;
        value.pop_on_drop = true;
        value.popped = Some(popped);
    }
    chunk.commit(2); // 20, 21 published; 22..25 dropped, each popping what is there
    assert_eq!(*popped.borrow(), [7, 20, 21]);
    CONSUMER.with(|c| drop(c.borrow_mut().take()));
    drop(producer);
}

/// A forgotten write chunk of values (which leaks them), then pushes over its slots: the
/// consumer sees only pushed values; nothing is dropped twice, the leaked ones never.
#[test]
fn a_forgotten_write_chunk_then_pushes_over_its_slots() {
    let ledger = Ledger::new(32);
    let (mut producer, mut consumer) = spsc::channel::<DefaultCounted>(4);
    let mut chunk = producer.write_chunk(4).unwrap();
    for (i, value) in chunk.iter_mut().enumerate() {
        value.0 = Some(Counted { id: 20 + i, ledger });
    }
    std::mem::forget(chunk);
    assert_eq!(producer.slots(), 4);
    assert_eq!(consumer.len(), 0);
    assert!(consumer.peek().is_err());
    for id in 0..4 {
        assert!(
            producer
                .try_push(DefaultCounted(Some(Counted { id, ledger })))
                .is_ok()
        );
    }
    let got: Vec<usize> = consumer
        .try_iter()
        .map(|v| v.0.as_ref().unwrap().id)
        .collect();
    assert_eq!(got, [0, 1, 2, 3]);
    drop((producer, consumer));
    for id in 0..4 {
        assert_eq!(ledger.count(id), 1);
    }
    for id in 20..24 {
        assert_eq!(ledger.count(id), 0, "leaked, never dropped");
    }
}

/// `Read`/`Write` with empty and huge buffers, both ends alive and each gone.
#[test]
fn io_with_empty_and_huge_buffers() {
    use std::io::{ErrorKind, Read, Write};
    let (mut producer, mut consumer) = spsc::channel::<u8>(3);
    assert_eq!(producer.write(&[]).unwrap(), 0);
    assert_eq!(consumer.read(&mut []).unwrap(), 0);
    let huge = vec![7_u8; 16 << 20];
    assert_eq!(producer.write(&huge).unwrap(), 3);
    assert_eq!(
        producer.write(&huge).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert_eq!(producer.write(&[]).unwrap(), 0);
    let mut big = vec![0_u8; 16 << 20];
    assert_eq!(consumer.read(&mut big).unwrap(), 3);
    assert_eq!(&big[..4], [7, 7, 7, 0]);
    assert_eq!(
        consumer.read(&mut big).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert!(producer.write_all(&huge).is_err());
    drop(producer);
    let mut all = Vec::new();
    assert_eq!(consumer.read_to_end(&mut all).unwrap(), 3);
    assert_eq!(consumer.read(&mut big).unwrap(), 0);
    let (mut producer, consumer) = spsc::channel::<u8>(3);
    drop(consumer);
    assert_eq!(
        producer.write(&[]).unwrap_err().kind(),
        ErrorKind::BrokenPipe
    );
    assert_eq!(producer.flush().ok(), Some(()));
}

#[derive(Clone, Copy, Debug, PartialEq, Default)]
#[repr(align(4096))]
struct Page4k(u64);

/// Over-aligned values lent in place by a read chunk, and popped into uninitialised memory,
/// stay aligned, across the ring's end.
#[test]
fn over_aligned_values_in_place_and_through_uninit_pops() {
    let (mut producer, mut consumer) = spsc::channel::<Page4k>(3);
    for round in 0..4_u64 {
        assert!(
            producer
                .push_entire_slice(&[Page4k(round), Page4k(round + 10)])
                .is_ok()
        );
        {
            let mut chunk = consumer.read_chunk(2).unwrap();
            for value in chunk.iter_mut() {
                assert_eq!(std::ptr::from_mut(value).addr() % 4096, 0);
                value.0 += 100;
            }
            assert_eq!(std::ptr::from_ref(chunk.get(1).unwrap()).addr() % 4096, 0);
        }
        let mut buffer = [MaybeUninit::<Page4k>::uninit(); 2];
        let popped = consumer.pop_entire_slice_uninit(&mut buffer).unwrap();
        assert_eq!(popped, [Page4k(round + 100), Page4k(round + 110)]);
    }
}

/// Builder settings at and around what `Layout` accepts, for big values: errors, no panic.
#[test]
fn builder_sizes_at_the_layout_limit_for_big_values() {
    type Big = [u8; 1 << 16];
    let slot = std::mem::size_of::<Big>() + 1; // at least; the exact size is private
    for capacity in [
        isize::MAX as usize / slot - 1,
        isize::MAX as usize / slot,
        isize::MAX as usize / slot + 1,
        usize::MAX / slot,
        usize::MAX,
    ] {
        match Builder::new(capacity)
            .batch(capacity)
            .increment(usize::MAX)
            .build::<Big>()
        {
            Err(ChannelError::CapacityOverflow | ChannelError::OutOfMemory { .. }) => {}
            Err(other) => panic!("{capacity}: {other:?}"),
            // A 32-bit process may be given the 2 GiB that fit the layout: then it works.
            Ok((mut producer, mut consumer))
                if usize::BITS == 32 && capacity <= isize::MAX as usize / slot =>
            {
                assert!(producer.try_push([7; 1 << 16]).is_ok());
                assert_eq!(consumer.try_pop().map(|value| value[0]), Ok(7));
            }
            Ok(_) => panic!("{capacity}: built"),
        }
    }
    // Batch past the capacity, 0, and the largest.
    assert!(matches!(
        Builder::new(2).batch(usize::MAX).build::<u8>(),
        Err(ChannelError::BatchOutOfRange { .. })
    ));
    let (mut producer, mut consumer) = Builder::new(1)
        .batch(1)
        .increment(usize::MAX)
        .build::<Big>()
        .unwrap();
    assert!(producer.try_push([1; 1 << 16]).is_ok());
    assert_eq!(
        producer.write_chunk_uninit(1).unwrap_err(),
        ChunkError::TooFewSlots(0)
    );
    assert_eq!(
        consumer.read_chunk(2).unwrap_err(),
        ChunkError::TooFewSlots(1)
    );
    assert_eq!(
        consumer.read_chunk(usize::MAX).unwrap_err(),
        ChunkError::TooFewSlots(1)
    );
    assert_eq!(consumer.try_pop().map(|v| v[0]), Ok(1));
}

/// Zero-sized values with a panicking `Drop` through a write chunk's partial commit and a read
/// chunk: the panic comes out, the ends stay consistent, each value is dropped once.
#[test]
fn zero_sized_values_whose_drop_panics_through_chunks() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    /// Drop number `PANIC_AT` (counting from 0) panics.
    static PANIC_AT: AtomicUsize = AtomicUsize::new(usize::MAX);
    #[derive(Default)]
    struct Zst;
    impl Drop for Zst {
        fn drop(&mut self) {
            if DROPS.fetch_add(1, Ordering::SeqCst) == PANIC_AT.load(Ordering::SeqCst) {
                panic!("zst drop");
            }
        }
    }
    let (mut producer, mut consumer) = spsc::channel::<Zst>(5);
    let chunk = producer.write_chunk(5).unwrap();
    PANIC_AT.store(0, Ordering::SeqCst);
    // Three values dropped by the commit; the first drop panics, the others still run.
    assert!(catch_unwind(AssertUnwindSafe(|| chunk.commit(2))).is_err());
    assert_eq!(DROPS.load(Ordering::SeqCst), 3);
    assert_eq!(consumer.len(), 2);
    assert_eq!(producer.slots(), 3);
    PANIC_AT.store(3, Ordering::SeqCst);
    let chunk = consumer.read_chunk(2).unwrap();
    // The first value's drop panics: it is taken out, the second stays queued.
    assert!(catch_unwind(AssertUnwindSafe(|| chunk.commit_all())).is_err());
    assert_eq!(DROPS.load(Ordering::SeqCst), 4);
    assert_eq!(consumer.len(), 1);
    assert_eq!(producer.push_iter(std::iter::repeat_with(|| Zst)), 4);
    assert_eq!(consumer.len(), 5);
    drop(consumer.try_pop());
    assert_eq!(DROPS.load(Ordering::SeqCst), 5);
    drop((producer, consumer));
    assert_eq!(DROPS.load(Ordering::SeqCst), 9);
}

// ---------------------------------------------------------------------------------------------
// Bagpipe: bounded operations, drains, full pipes
// ---------------------------------------------------------------------------------------------

/// Bounded operations at budgets 0, 1 and `usize::MAX`, on 1 and `MAX_PIPES` pipes.
#[test]
fn bounded_operations_at_every_budget_edge() {
    for pipes in [1, MAX_PIPES] {
        let bag: Bagpipe<Stack<u32>> = Bagpipe::with_pipes(pipes).unwrap();
        for budget in [0, 1, usize::MAX] {
            assert_eq!(bag.pop_bounded(budget), Err(PopError::Empty));
            assert_eq!(bag.push_bounded(5, budget), Ok(()));
            assert_eq!(bag.pop_bounded(budget), Ok(5));
            let handle = bag.handle();
            assert_eq!(handle.pop_bounded(budget), Err(PopError::Empty));
            assert_eq!(handle.push_bounded(6, budget), Ok(()));
            assert_eq!(handle.pop_bounded(budget), Ok(6));
        }
        assert_eq!(bag.try_pop(), Err(PopError::Empty));
    }
}

/// The owned iterator's upper bound holds the items it will yield, after pushes by handles
/// and plain calls from several threads.
#[test]
fn into_iter_upper_bound_covers_what_it_yields() {
    let bag: Bagpipe<Queue<u32>> = Bagpipe::with_pipes(4).unwrap();
    std::thread::scope(|s| {
        for t in 0..3_u32 {
            let bag = &bag;
            s.spawn(move || {
                let handle = bag.handle();
                (0..50).for_each(|i| handle.push(t * 100 + i));
                (0..20).for_each(|_| assert!(handle.pop().is_some()));
                (0..10).for_each(|i| bag.push(t * 1000 + i));
            });
        }
    });
    let mut items = bag.into_iter();
    let mut yielded = 0;
    loop {
        let (_, upper) = items.size_hint();
        match items.next() {
            Some(_) => {
                yielded += 1;
                assert!(upper.unwrap() >= 1);
            }
            None => break,
        }
    }
    assert_eq!(yielded, 3 * 40);
}

/// `PushError::Full` from a Bagpipe whose pipes are all full hands the item back intact.
#[test]
fn a_bagpipe_of_full_stacks_hands_the_item_back() {
    let bag: Bagpipe<Stack<u8>> = Bagpipe::with_pipes(1).unwrap();
    for _ in 0..MAX_ITEMS {
        bag.push(0);
    }
    assert_eq!(bag.try_push(9), Err(PushError::Full(9)));
    assert_eq!(bag.push_bounded(8, 0), Err(PushError::Full(8)));
    assert_eq!(bag.handle().try_push(7), Err(PushError::Full(7)));
    assert!(catch_unwind(AssertUnwindSafe(|| bag.push(1))).is_err());
    assert_eq!(bag.size_guess(), MAX_ITEMS);
}
