//! The MPMC queue and the Bagpipe when the global allocator is hostile user code (the
//! thirty-second session's pass; `docs/notes/issue-checklist.md`): an allocator that refuses
//! on demand, and one that calls back into the structure being operated on, on the same
//! thread, from inside an allocation the structure makes (an allocator keeping free blocks
//! in a `static` queue or Bagpipe does so).
//!
//! This binary's global allocator forwards to `System`, with per-thread switches set by each
//! test: refuse every allocation of one exact layout, or run a hook (once) at the next
//! allocation aligned as a queue segment is. So it cannot also take pitlane-alloc as its
//! global allocator under `--cfg pitlane_alloc_global`. Scenarios that abort the process
//! when they fail run in a child process (this binary run again on one test, with
//! `HOSTILE_ALLOC_CHILD` set), so that the suite reports the abort instead of dying of it.
#![cfg(not(pitlane_loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::process::Command;

use pitlane_queue::mpmc::Queue;
use pitlane_queue::{BagHandle, PopError, PushError};

/// The alignment of a queue segment: that of its cache-padded counters.
const SEGMENT_ALIGN: usize = core::mem::align_of::<crossbeam_utils::CachePadded<u8>>();

/// The layout of a queue's segment pool: 64 places and an owner count, each a word.
const POOL_LAYOUT: (usize, usize) = (
    65 * core::mem::size_of::<usize>(),
    core::mem::align_of::<usize>(),
);

/// Below the size of crossbeam-epoch's node of a sealed bag of deferred functions (64 of
/// them, four words each): 2 KiB on a 64-bit target, 1 KiB on a 32-bit one.
const LARGE: usize = 256 * core::mem::size_of::<usize>();

thread_local! {
    /// Allocations of exactly this (size, align) are refused on this thread while set.
    static REFUSE: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
    /// Run (once) at this thread's next allocation aligned as a queue segment, before it is
    /// served.
    static ON_SEGMENT: Cell<Option<fn()>> = const { Cell::new(None) };
    /// Run (once) at this thread's next allocation of [`LARGE`] bytes or more, before it is
    /// served.
    static ON_LARGE: Cell<Option<fn()>> = const { Cell::new(None) };
}

struct Hostile;

// SAFETY: every call is forwarded to `System`, or refused with null (which `GlobalAlloc`
// allows); a test's hook runs before the forwarded call and allocates through this same
// allocator (it is taken first, so it does not run again inside itself).
unsafe impl GlobalAlloc for Hostile {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if REFUSE.try_with(Cell::get).ok().flatten() == Some((layout.size(), layout.align())) {
            return std::ptr::null_mut();
        }
        if layout.size() >= LARGE {
            if let Some(hook) = ON_LARGE.try_with(Cell::take).ok().flatten() {
                hook();
            }
        }
        if layout.align() >= SEGMENT_ALIGN {
            if let Some(hook) = ON_SEGMENT.try_with(Cell::take).ok().flatten() {
                hook();
            }
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (refusals are never freed).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Hostile = Hostile;

/// Runs test `name` of this binary in a child process with `HOSTILE_ALLOC_CHILD` set, and
/// asserts that it exits successfully (the parent's copy of the test does nothing else).
/// Returns `true` in the child, which then runs the scenario.
fn in_child(name: &str) -> bool {
    if std::env::var_os("HOSTILE_ALLOC_CHILD").is_some() {
        return true;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("HOSTILE_ALLOC_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child running {name} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
    );
    false
}

// --- refused allocations on the push and pop paths ----------------------------------------------

static LOST_LINK: Queue<u64, 2> = Queue::with_segment_size();

/// Inside the allocation of the outer push's new segment: a nested push on the same thread
/// links a segment of its own first (so the outer push loses its link and must give its
/// segment back), and from then on the pool's allocation is refused.
fn link_first_then_refuse_the_pool() {
    LOST_LINK.push(100);
    REFUSE.set(Some(POOL_LAYOUT));
}

#[test]
fn a_try_push_that_loses_its_link_while_the_pool_is_refused_hands_back_no_abort() {
    if !in_child("a_try_push_that_loses_its_link_while_the_pool_is_refused_hands_back_no_abort") {
        return;
    }
    LOST_LINK.push(0);
    LOST_LINK.push(1);
    // The tail segment is full: the next push allocates segment 1, and the hook makes it lose
    // the link to the nested push's segment, with no pool made yet (nothing was retired).
    ON_SEGMENT.set(Some(link_first_then_refuse_the_pool));
    let result = LOST_LINK.try_push(2);
    REFUSE.set(None);
    assert!(ON_SEGMENT.take().is_none(), "the push did not allocate");
    match result {
        Ok(()) | Err(PushError::Transient(2)) => {}
        Err(error) => panic!("unexpected {error:?}"),
    }
    let _ = LOST_LINK.try_push(3);
    let drained: Vec<u64> = std::iter::from_fn(|| LOST_LINK.pop()).collect();
    assert!(
        drained.starts_with(&[0, 1, 100]) && drained.ends_with(&[3]),
        "{drained:?}"
    );
}

#[test]
fn pops_that_retire_segments_while_the_pool_is_refused_lose_nothing_and_do_not_abort() {
    if !in_child(
        "pops_that_retire_segments_while_the_pool_is_refused_lose_nothing_and_do_not_abort",
    ) {
        return;
    }
    let queue: Queue<u64, 2> = Queue::with_segment_size();
    // Enough one-segment retirements to move limbo (64 segments) twice, and the segments'
    // grace periods then need the pool, which the allocator refuses.
    let n = 2 * 2 * 130;
    (0..n).for_each(|i| queue.push(i));
    REFUSE.set(Some(POOL_LAYOUT));
    let mut popped = Vec::new();
    while let Some(v) = queue.pop() {
        popped.push(v);
    }
    // Pushes and pops go on while refused.
    (0..n).for_each(|i| queue.push(i));
    while let Some(v) = queue.pop() {
        popped.push(v);
    }
    REFUSE.set(None);
    let expected: Vec<u64> = (0..n).chain(0..n).collect();
    assert_eq!(popped, expected);
    assert_eq!(queue.try_pop(), Err(PopError::Empty));
}

// --- an allocator that calls back into the queue on the same thread -----------------------------

/// Values put in by nested calls are tagged with this bit.
const NESTED_BIT: u64 = 1 << 40;

thread_local! {
    /// Values the nested calls of this thread pushed and took.
    static NESTED_PUSHED: Cell<u64> = const { Cell::new(0) };
    static NESTED_TAKEN: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
    static NESTED_RAN: Cell<u64> = const { Cell::new(0) };
}

/// Runs `push` twice and `pop` three times for the allocator, on the thread it is allocating
/// for, with values tagged [`NESTED_BIT`].
fn nested_calls(push: impl Fn(u64), pop: impl Fn() -> Option<u64>) {
    NESTED_RAN.set(NESTED_RAN.get() + 1);
    for _ in 0..2 {
        let n = NESTED_PUSHED.get();
        NESTED_PUSHED.set(n + 1);
        push(NESTED_BIT | n);
    }
    for _ in 0..3 {
        if let Some(v) = pop() {
            NESTED_TAKEN.with_borrow_mut(|taken| taken.push(v));
        }
    }
}

/// Checks that the outer and nested calls together took every value pushed, each once.
fn each_taken_once(outer_pushed: u64, mut taken: Vec<u64>) {
    taken.extend(NESTED_TAKEN.take());
    taken.sort_unstable();
    let mut expected: Vec<u64> = (0..outer_pushed)
        .chain((0..NESTED_PUSHED.get()).map(|n| NESTED_BIT | n))
        .collect();
    expected.sort_unstable();
    assert!(NESTED_RAN.get() > 0, "no allocation ran the nested calls");
    eprintln!("nested runs: {}, values: {}", NESTED_RAN.get(), taken.len());
    assert_eq!(taken.len(), expected.len(), "values lost or taken twice");
    assert_eq!(taken, expected);
}

static SAME_QUEUE: Queue<u64, 1> = Queue::with_segment_size();

thread_local! {
    static SAME_HANDLE: pitlane_queue::mpmc::Handle<'static, u64, 1> = SAME_QUEUE.handle();
}

fn nested_on_the_queue_plainly() {
    nested_calls(|v| SAME_QUEUE.push(v), || SAME_QUEUE.pop());
    // A look at the queue's length, and a queue dropped, from inside the allocation.
    let _ = SAME_QUEUE.len();
    let other: Queue<u64, 1> = Queue::with_segment_size();
    other.push(1);
    drop(other);
}

fn nested_through_the_handle() {
    SAME_HANDLE.with(|h| {
        nested_calls(|v| h.push(v), || h.pop());
        if NESTED_RAN.get() % 3 == 0 {
            h.release();
        }
    });
}

#[test]
fn an_allocator_that_pushes_and_pops_the_same_queue_inside_a_segment_allocation_loses_nothing() {
    // The epoch's collector and this thread's record in it are made first: the hook must not
    // run in their allocations (in the collector's, a call into the queue never returns, as
    // the `mpmc` module documentation says and the last test shows; the record's would take
    // the hook meant for a segment).
    SAME_HANDLE.with(|h| h.push(u64::MAX));
    assert_eq!(SAME_QUEUE.pop(), Some(u64::MAX));
    let mut taken = Vec::new();
    let n = 2000;
    for i in 0..n {
        // One-cell segments: most pushes allocate (those the pool serves do not).
        ON_SEGMENT.set(Some(if i % 2 == 0 {
            nested_on_the_queue_plainly
        } else {
            nested_through_the_handle
        }));
        match i % 4 {
            0 => SAME_QUEUE.push(i),
            1 => SAME_HANDLE.with(|h| h.push(i)),
            // A nested push may link the next segment first: a lost race, the item handed back.
            2 => match SAME_QUEUE.try_push(i) {
                Ok(()) => {}
                Err(PushError::Transient(back)) => SAME_QUEUE.push(back),
                Err(full) => panic!("{full:?}"),
            },
            _ => SAME_HANDLE.with(|h| match h.try_push(i) {
                Ok(()) => {}
                Err(PushError::Transient(back)) => h.push(back),
                Err(full) => panic!("{full:?}"),
            }),
        }
        ON_SEGMENT.set(None);
        let popped = if i % 3 == 0 {
            SAME_QUEUE.pop()
        } else {
            SAME_HANDLE.with(|h| h.pop())
        };
        taken.extend(popped);
    }
    taken.extend(std::iter::from_fn(|| SAME_QUEUE.pop()));
    each_taken_once(n, taken);
}

type Pipes = pitlane_queue::bagpipe::Bagpipe<Queue<u64, 1>>;

thread_local! {
    static BAG: &'static Pipes = Box::leak(Box::new(Pipes::with_pipes(4).unwrap()));
    static BAG_HANDLE: pitlane_queue::bagpipe::Handle<'static, Queue<u64, 1>> =
        BAG.with(|bag| bag.handle());
}

fn nested_on_the_bagpipe_plainly() {
    let bag = BAG.with(|bag| *bag);
    nested_calls(|v| bag.push(v), || bag.pop());
    let _ = bag.size_guess();
}

fn nested_through_the_bagpipe_handle() {
    BAG_HANDLE.with(|h| nested_calls(|v| h.push(v), || h.pop()));
}

#[test]
fn an_allocator_that_pushes_and_pops_the_same_bagpipe_inside_a_segment_allocation_loses_nothing() {
    let bag = BAG.with(|bag| *bag);
    // As above: the epoch's collector and this thread's record in it first.
    BAG_HANDLE.with(|h| h.push(u64::MAX));
    assert_eq!(bag.pop(), Some(u64::MAX));
    let mut taken = Vec::new();
    let n = 2000;
    for i in 0..n {
        ON_SEGMENT.set(Some(if i % 2 == 0 {
            nested_on_the_bagpipe_plainly
        } else {
            nested_through_the_bagpipe_handle
        }));
        match i % 4 {
            0 => bag.push(i),
            1 => BAG_HANDLE.with(|h| h.push(i)),
            2 => match bag.try_push(i) {
                Ok(()) => {}
                Err(PushError::Transient(back)) => bag.push(back),
                Err(full) => panic!("{full:?}"),
            },
            _ => BAG_HANDLE.with(|h| match h.push_bounded(i, 4) {
                Ok(()) => {}
                Err(PushError::Transient(back)) => h.push(back),
                Err(full) => panic!("{full:?}"),
            }),
        }
        ON_SEGMENT.set(None);
        // Every value pushed so far is in the bag or taken, and nothing runs beside this
        // thread: a pop finds one whenever one is left.
        let left = n_left(i + 1, taken.len());
        let popped = if i % 3 == 0 {
            bag.pop()
        } else {
            BAG_HANDLE.with(|h| h.pop())
        };
        assert_eq!(
            popped.is_some(),
            left > 0,
            "{left} values left, pop: {popped:?}"
        );
        taken.extend(popped);
    }
    taken.extend(std::iter::from_fn(|| bag.pop()));
    each_taken_once(n, taken);
}

/// Values in the bag: pushed (`outer` by the test, and the nested calls'), less those taken.
fn n_left(outer: u64, outer_taken: usize) -> usize {
    let pushed = outer + NESTED_PUSHED.get();
    let taken = outer_taken + NESTED_TAKEN.with_borrow(Vec::len);
    usize::try_from(pushed).unwrap() - taken
}

// --- the documented exception: the allocations of the epoch's collector -------------------------

static FIRST_EVER: Queue<u64> = Queue::new();

fn push_from_the_collectors_allocation() {
    FIRST_EVER.push(2);
}

#[test]
fn a_queue_call_from_inside_the_allocation_of_the_epochs_collector_never_returns_as_documented() {
    if std::env::var_os("HOSTILE_ALLOC_CHILD").is_some() {
        // The process's first pin: the first push of a queue makes the epoch's collector,
        // whose allocation (cache-padded) runs the hook.
        ON_SEGMENT.set(Some(push_from_the_collectors_allocation));
        FIRST_EVER.push(1);
        println!("RETURNED");
        return;
    }
    let name = "a_queue_call_from_inside_the_allocation_of_the_epochs_collector_never_returns_as_documented";
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("HOSTILE_ALLOC_CHILD", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > std::time::Duration::from_secs(3) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        exited.is_none(),
        "the push returned ({exited:?}): the mpmc module documentation says it never does, \
         and should now say otherwise"
    );
}

// --- a handle released at thread exit, after the thread's epoch record was dropped --------------

static EXIT_QUEUE: Queue<u64> = Queue::new();
static NESTED_AT_EXIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    /// The exiting thread's handle (leaked, so that it outlives every thread-local).
    static EXIT_HANDLE: Cell<Option<&'static pitlane_queue::mpmc::Handle<'static, u64>>> =
        const { Cell::new(None) };
    /// Releases the handle from its destructor: registered before the queue's record of the
    /// thread in the epoch, so it runs after that record is dropped.
    static RELEASER: Releaser = const { Releaser };
}

struct Releaser;

impl Drop for Releaser {
    fn drop(&mut self) {
        if let Some(handle) = EXIT_HANDLE.get() {
            ON_LARGE.set(Some(push_through_the_exiting_handle));
            // The handle's pin is the last one of the thread's epoch record, which is gone:
            // letting go of it finalizes the record, which hands its bag of deferred
            // functions to the global queue, an allocation of [`LARGE`] bytes or more.
            handle.release();
            ON_LARGE.set(None);
        }
    }
}

fn push_through_the_exiting_handle() {
    if let Some(handle) = EXIT_HANDLE.get() {
        handle.push(7);
        NESTED_AT_EXIT.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn an_allocator_that_uses_the_handle_being_released_at_thread_exit_is_served() {
    if !in_child("an_allocator_that_uses_the_handle_being_released_at_thread_exit_is_served") {
        return;
    }
    std::thread::spawn(|| {
        RELEASER.with(|_| ());
        let handle: &'static _ = Box::leak(Box::new(EXIT_QUEUE.handle()));
        EXIT_HANDLE.set(Some(handle));
        handle.push(1);
    })
    .join()
    .unwrap();
    assert!(
        NESTED_AT_EXIT.load(std::sync::atomic::Ordering::SeqCst),
        "the release made no allocation of LARGE bytes or more"
    );
    assert_eq!(EXIT_QUEUE.pop(), Some(1));
    assert_eq!(EXIT_QUEUE.pop(), Some(7));
    assert_eq!(EXIT_QUEUE.pop(), None);
}

// --- a handle that pins again at thread exit, with the allocator using it meanwhile ------------

static REPIN_QUEUE: Queue<u64> = Queue::new();
static REPIN_NESTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

thread_local! {
    static REPIN_HANDLE: Cell<Option<&'static pitlane_queue::mpmc::Handle<'static, u64>>> =
        const { Cell::new(None) };
    static REPINNER: Repinner = const { Repinner };
}

struct Repinner;

impl Drop for Repinner {
    fn drop(&mut self) {
        if let Some(handle) = REPIN_HANDLE.get() {
            handle.release();
            // The thread's records in the epoch are gone: the next pin registers the thread
            // again (a cache-padded allocation), and the allocator's hook uses the handle
            // there, which pins it with a record of its own.
            ON_SEGMENT.set(Some(push_through_the_repinning_handle));
            handle.push(3);
            ON_SEGMENT.set(None);
            ON_LARGE.set(None);
        }
    }
}

fn push_through_the_repinning_handle() {
    if let Some(handle) = REPIN_HANDLE.get() {
        handle.push(8);
        REPIN_NESTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // When the outer pin replaces the handle's pin made here, the record of that pin is
        // finalized, which allocates [`LARGE`] bytes or more: the hook uses the handle again.
        ON_LARGE.set(Some(push_again_through_the_repinning_handle));
    }
}

fn push_again_through_the_repinning_handle() {
    if let Some(handle) = REPIN_HANDLE.get() {
        handle.push(9);
        REPIN_NESTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn an_allocator_that_uses_the_handle_pinning_again_at_thread_exit_is_served() {
    if !in_child("an_allocator_that_uses_the_handle_pinning_again_at_thread_exit_is_served") {
        return;
    }
    std::thread::spawn(|| {
        REPINNER.with(|_| ());
        let handle: &'static _ = Box::leak(Box::new(REPIN_QUEUE.handle()));
        REPIN_HANDLE.set(Some(handle));
        handle.push(1);
    })
    .join()
    .unwrap();
    let mut got: Vec<u64> = std::iter::from_fn(|| REPIN_QUEUE.pop()).collect();
    got.sort_unstable();
    println!(
        "nested pushes: {}, values {got:?}",
        REPIN_NESTED.load(std::sync::atomic::Ordering::SeqCst)
    );
    assert_eq!(REPIN_NESTED.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(got, [1, 3, 8, 9]);
}

// --- Bagpipe::handle under a refusing allocator: the documented abort ---------------------------

#[test]
fn a_bagpipe_handle_whose_table_the_allocator_refuses_aborts_as_documented() {
    type Pipe = Queue<u64, 1>;
    let table = (
        4 * core::mem::size_of::<pitlane_queue::mpmc::Handle<'static, u64, 1>>(),
        core::mem::align_of::<pitlane_queue::mpmc::Handle<'static, u64, 1>>(),
    );
    if std::env::var_os("HOSTILE_ALLOC_CHILD").is_some() {
        let bag = pitlane_queue::bagpipe::Bagpipe::<Pipe>::with_pipes(4).unwrap();
        REFUSE.set(Some(table));
        let handle = bag.handle();
        REFUSE.set(None);
        println!("RETURNED {}", handle.bagpipe().pipe_count());
        return;
    }
    let name = "a_bagpipe_handle_whose_table_the_allocator_refuses_aborts_as_documented";
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("HOSTILE_ALLOC_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !output.status.success()
            && !stdout.contains("RETURNED")
            && stderr.contains(&format!("memory allocation of {} bytes failed", table.0)),
        "{}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
    );
}

// --- a Bagpipe handle's walk moved by the allocator inside its pop's first attempt --------------

type WalkedBag = pitlane_queue::bagpipe::Bagpipe<Queue<u64, 1>>;
type WalkedHandle = pitlane_queue::bagpipe::Handle<'static, Queue<u64, 1>>;

thread_local! {
    static WALKED: Cell<Option<&'static WalkedHandle>> = const { Cell::new(None) };
    static WALKED_NESTED: Cell<Option<Option<u64>>> = const { Cell::new(None) };
}

/// The pipe a handle pushes and pops at, and its stride, from its `Debug`.
fn walk_of(handle: &WalkedHandle) -> (usize, usize) {
    let text = format!("{handle:?}");
    let field = |name: &str| -> usize {
        let at = text.find(&format!("{name}: ")).unwrap() + name.len() + 2;
        text[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(field("push_at"), field("pop_at"), "{text}");
    (field("pop_at"), field("stride"))
}

fn pop_through_the_walked_handle() {
    let handle = WALKED.get().unwrap();
    WALKED_NESTED.set(Some(handle.pop()));
}

#[test]
fn a_bagpipe_handle_whose_walk_the_allocator_moves_inside_a_pops_first_attempt_misses_nothing() {
    let bag: &'static WalkedBag = Box::leak(Box::new(WalkedBag::with_pipes(4).unwrap()));
    // This thread pins first, so that the epoch's collector exists before the hook is set.
    let warm = bag.handle();
    warm.push(0);
    assert_eq!(warm.pop(), Some(0));
    let (to_main, from_worker) = std::sync::mpsc::channel();
    let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let handle: &'static WalkedHandle = Box::leak(Box::new(bag.handle()));
        WALKED.set(Some(handle));
        to_main.send(walk_of(handle)).unwrap();
        from_main.recv().unwrap();
        // The handle's first operation pins its first pipe's handle, and this thread's first
        // pin registers it with the epoch: a cache-padded allocation, inside the pop's first
        // attempt. There the hook pops through the same handle: its first pipe is empty, so
        // it walks on and takes one of the two values in the next pipe, moving the walk there.
        ON_SEGMENT.set(Some(pop_through_the_walked_handle));
        let outer = handle.pop();
        ON_SEGMENT.set(None);
        (WALKED_NESTED.take(), outer, handle.pop())
    });
    let (first, stride) = from_worker.recv().unwrap();
    let next = (first + stride) % 4;
    // Both values go to the pipe after the worker's first one; every other pipe is empty.
    let pusher = std::iter::repeat_with(|| bag.handle())
        .find(|h| h.bagpipe().pipe_count() == 4 && walk_of(h).0 == next)
        .unwrap();
    pusher.push(1);
    pusher.push(2);
    assert_eq!(bag.size_guess(), 2);
    to_worker.send(()).unwrap();
    let (nested, outer, after) = worker.join().unwrap();
    assert!(
        matches!(nested, Some(Some(1 | 2))),
        "the hook did not run inside the first attempt, or found nothing: {nested:?}"
    );
    assert!(
        matches!(outer, Some(1 | 2)) && outer != nested.flatten(),
        "the pop missed the value left in the pipe the nested pop moved the walk to: \
         nested {nested:?}, outer {outer:?}, then {after:?}"
    );
    assert_eq!(after, None);
}

// --- the same at a thread's first pin, not only at its exit -------------------------------------

static FIRST_PIN_QUEUE: Queue<u64> = Queue::new();

thread_local! {
    static FIRST_PIN_HANDLE: Cell<Option<&'static pitlane_queue::mpmc::Handle<'static, u64>>> =
        const { Cell::new(None) };
    static FIRST_PIN_NESTED: Cell<u32> = const { Cell::new(0) };
}

/// In the thread's registration with the epoch (inside the handle's first pin): pushes through
/// the handle, which pins it with a record registered by this nested call. The outer
/// registration then drops that record's handle, and the outer pin replaces the nested pin:
/// the record is finalized, an allocation of [`LARGE`] bytes or more, where the hook uses the
/// handle again.
fn push_inside_the_first_registration() {
    let handle = FIRST_PIN_HANDLE.get().unwrap();
    handle.push(8);
    FIRST_PIN_NESTED.set(FIRST_PIN_NESTED.get() + 1);
    ON_LARGE.set(Some(push_inside_the_finalization));
}

fn push_inside_the_finalization() {
    let handle = FIRST_PIN_HANDLE.get().unwrap();
    handle.push(9);
    FIRST_PIN_NESTED.set(FIRST_PIN_NESTED.get() + 1);
}

#[test]
fn an_allocator_that_uses_the_handle_during_the_threads_first_pin_is_served() {
    if !in_child("an_allocator_that_uses_the_handle_during_the_threads_first_pin_is_served") {
        return;
    }
    // The epoch's collector exists (the main thread pins first); the worker has no record yet.
    FIRST_PIN_QUEUE.push(0);
    assert_eq!(FIRST_PIN_QUEUE.pop(), Some(0));
    let nested = std::thread::spawn(|| {
        let handle: &'static _ = Box::leak(Box::new(FIRST_PIN_QUEUE.handle()));
        FIRST_PIN_HANDLE.set(Some(handle));
        ON_SEGMENT.set(Some(push_inside_the_first_registration));
        handle.push(1);
        ON_SEGMENT.set(None);
        ON_LARGE.set(None);
        FIRST_PIN_NESTED.get()
    })
    .join()
    .unwrap();
    let mut got: Vec<u64> = std::iter::from_fn(|| FIRST_PIN_QUEUE.pop()).collect();
    got.sort_unstable();
    assert_eq!((nested, got), (2, vec![1, 8, 9]));
}
