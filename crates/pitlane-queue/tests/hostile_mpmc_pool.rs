//! The MPMC queue's segment pool, its hand-off of retired segments to the epoch, and revocation
//! against segments that come back from the pool, attacked as a hostile user would (the
//! thirty-first session's pass; `docs/notes/issue-checklist.md`). What the other files do not
//! cover:
//!
//! - user code that a retirement runs (other users' expired deferred functions, run by the
//!   retirement's flush) working through the popping thread's own handle, releasing it, and
//!   deferring more of itself;
//! - queues dropped while their retired segments still wait in their grace periods (the
//!   chains own the pool then), with a count of every byte the binary allocates, so that a
//!   pool or segment the chains fail to free shows as memory that does not come back;
//! - many pages sharing one queue of one-cell segments, recycled from the pool all along,
//!   with revokers whose handle words go stale as the cells they name are retired and reused
//!   for other pages;
//! - zero-sized, 64 KiB and page-aligned revocable values in one-cell segments;
//! - deferred functions of other users that panic inside a retirement (in its flush, or in its
//!   pin's collection) while it moves segments out of limbo, caught around the pop, with every
//!   byte of the queues' segments and pools counted back after they are dropped.
//!
//! The tests take one lock: the allocation count is global.
#![cfg(not(pitlane_loom))]

#[cfg(not(pitlane_alloc_global))]
use std::alloc::{GlobalAlloc, Layout, System};
#[cfg(not(pitlane_alloc_global))]
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};

use pitlane_queue::BagHandle;
use pitlane_queue::mpmc::{self, Queue};
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_testkit::pages::Page;
use pitlane_testkit::stress::epoch_ready;

/// The system allocator, counting the bytes live (not under `--cfg pitlane_alloc_global`,
/// where pitlane-alloc is the binary's allocator: the count stays 0 then).
#[cfg(not(pitlane_alloc_global))]
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The alignment of a queue segment: that of its cache-padded counters.
#[cfg(not(pitlane_alloc_global))]
const SEGMENT_ALIGN: usize = core::mem::align_of::<crossbeam_utils::CachePadded<u8>>();

#[cfg(not(pitlane_alloc_global))]
thread_local! {
    /// User code for this thread's next allocation aligned as a queue segment is (its
    /// counters are cache-padded: 128 bytes on x86-64, 64 on i686) to run (see
    /// `a_handle_released_by_the_allocator_during_a_push_leaves_the_rest_of_the_push_pinned`).
    static ON_ALLOC: Cell<Option<fn()>> = const { Cell::new(None) };
}

// SAFETY: every call is forwarded to `System` unchanged; the count (and a test's hook, which
// allocates through this same allocator) is a side effect.
#[cfg(not(pitlane_alloc_global))]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() >= SEGMENT_ALIGN {
            if let Some(hook) = ON_ALLOC.try_with(Cell::take).ok().flatten() {
                hook();
            }
        }
        // SAFETY: forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[cfg(not(pitlane_alloc_global))]
#[global_allocator]
static COUNTING: Counting = Counting;

static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

// --- user code run by a retirement's flush, through the popping thread's handle ----------------

static NESTED: Queue<u64, 2> = Queue::with_segment_size();

thread_local! {
    static NESTED_HANDLE: mpmc::Handle<'static, u64, 2> = NESTED.handle();
}

/// Values the deferred functions pushed, and took out, and how many of them ran.
static NESTED_PUSHED: AtomicUsize = AtomicUsize::new(0);
static NESTED_RAN: AtomicUsize = AtomicUsize::new(0);
static NESTED_DEFERRED: AtomicUsize = AtomicUsize::new(0);
/// Every value taken out, counted by value (each value is pushed once).
static TAKEN: Mutex<Vec<u64>> = Mutex::new(Vec::new());

const FROM_DEFERRED: u64 = 1 << 40;

/// A deferred function that, on whatever thread collects it (often inside a pop's
/// retirement), pushes a value and pops one through that thread's handle, releases the
/// handle, and, while `more` is set, defers another of itself. Copies still deferred when the
/// test ends run later, in any test's thread, also from a thread-local destructor at thread
/// exit (crossbeam-epoch's own registration collects as it goes): there the handle may be gone,
/// and a panic would abort the process ("thread local panicked on drop"), so they skip it.
fn nested_function(id: u64, more: &'static AtomicBool) -> impl FnOnce() + Send + 'static {
    move || {
        let _ = NESTED_HANDLE.try_with(|h| {
            h.push(FROM_DEFERRED + id);
            NESTED_PUSHED.fetch_add(1, Ordering::Relaxed);
            if let Some(v) = h.pop() {
                TAKEN.lock().unwrap().push(v);
            }
            h.release();
        });
        if more.load(Ordering::Relaxed) && id < 200_000 {
            NESTED_DEFERRED.fetch_add(1, Ordering::Relaxed);
            crossbeam_epoch::pin().defer(nested_function(id + 1_000, more));
        }
        NESTED_RAN.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn deferred_functions_run_by_retirements_work_through_the_popping_handle_and_lose_nothing() {
    let _alone = alone();
    epoch_ready();
    static MORE: AtomicBool = AtomicBool::new(true);
    const THREADS: u64 = 4;
    const EACH: u64 = 20_000;
    let seeded: u64 = 1_000;
    NESTED_DEFERRED.fetch_add(seeded as usize, Ordering::Relaxed);
    for id in 0..seeded {
        let guard = crossbeam_epoch::pin();
        guard.defer(nested_function(id, &MORE));
        guard.flush();
    }
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let mut taken = Vec::new();
                for i in 0..EACH {
                    NESTED_HANDLE.with(|h| {
                        h.push(t * EACH + i);
                        if let Some(v) = h.pop() {
                            taken.push(v);
                        }
                        if i % 97 == 0 {
                            h.release();
                        }
                    });
                }
                TAKEN.lock().unwrap().extend(taken);
            });
        }
    });
    MORE.store(false, Ordering::Relaxed);
    // Let every deferred function run: retirements flush (and drive the epoch), pins collect.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut i = 0_u64;
    while NESTED_RAN.load(Ordering::Relaxed) < NESTED_DEFERRED.load(Ordering::Relaxed) {
        assert!(
            std::time::Instant::now() < deadline,
            "deferred functions did not all run"
        );
        let spare: Queue<u8, 1> = Queue::with_segment_size();
        spare.push(0);
        spare.push(1);
        let _ = spare.pop();
        let _ = spare.pop();
        crossbeam_epoch::pin().flush();
        i += 1;
        if i % 64 == 0 {
            std::thread::yield_now();
        }
    }
    let mut taken = std::mem::take(&mut *TAKEN.lock().unwrap());
    taken.extend(std::iter::from_fn(|| NESTED.pop()));
    let from_deferred = taken.iter().filter(|&&v| v >= FROM_DEFERRED).count();
    taken.retain(|&v| v < FROM_DEFERRED);
    taken.sort_unstable();
    let before = taken.len();
    taken.dedup();
    assert_eq!(before, taken.len(), "a value was taken out twice");
    assert_eq!(
        taken,
        (0..THREADS * EACH).collect::<Vec<_>>(),
        "a value was lost"
    );
    assert_eq!(
        from_deferred,
        NESTED_PUSHED.load(Ordering::Relaxed),
        "a deferred function's value was lost or taken twice"
    );
}

// --- user code inside the allocation of a push's new segment ----------------------------------

#[cfg(not(pitlane_alloc_global))]
static LINKED: Queue<u64, 1> = Queue::with_segment_size();

#[cfg(not(pitlane_alloc_global))]
thread_local! {
    static LINKED_HANDLE: mpmc::Handle<'static, u64, 1> = LINKED.handle();
    static UNPINNED: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether a function another thread defers now runs while this thread stays as it is: true
/// only if this thread is not pinned (as in `handle_reentry.rs`).
#[cfg(not(pitlane_alloc_global))]
fn epoch_runs_past_this_thread() -> bool {
    let ran = std::sync::Arc::new(AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&ran);
    std::thread::spawn(move || {
        let local = crossbeam_epoch::default_collector().register();
        {
            let guard = local.pin();
            let set = std::sync::Arc::clone(&flag);
            guard.defer(move || set.store(true, Ordering::Release));
            guard.flush();
        }
        for _ in 0..10_000 {
            if flag.load(Ordering::Acquire) {
                return;
            }
            local.pin().flush();
        }
    })
    .join()
    .unwrap();
    ran.load(Ordering::Acquire)
}

/// A push that needs a new segment allocates it, and the allocator is user code: it may run
/// other code of the user's (pitlane-alloc, as this workspace's global allocator, pops from
/// queues of its own, and a pop that retires a segment runs every expired deferred function
/// of crossbeam-epoch's users, which `Guard::defer`, a safe call, can give it). Here that code
/// reaches the pushing thread's handle and releases it, in the middle of the push, which then
/// goes on to link the segment into the tail segment it read before the allocation. The
/// thread must still be pinned then.
#[cfg(not(pitlane_alloc_global))]
#[test]
fn a_handle_released_by_the_allocator_during_a_push_leaves_the_rest_of_the_push_pinned() {
    let _alone = alone();
    epoch_ready();
    fn release_and_look() {
        LINKED_HANDLE.with(BagHandle::release);
        UNPINNED.set(Some(epoch_runs_past_this_thread()));
    }
    assert!(
        epoch_runs_past_this_thread(),
        "the epoch does not move here at all"
    );
    // The thread's registrations (the queue crate's epoch participant, its seat) are made
    // now, not inside the pushes below.
    let scratch: Queue<u8, 1> = Queue::with_segment_size();
    scratch.handle().push(0);
    scratch.push(1);
    LINKED_HANDLE.with(|h| {
        // The first push makes segment 0; the next ones find their segment full and link a
        // new one, allocated (nothing was retired, so the pool is empty).
        for push in 0..3 {
            UNPINNED.set(None);
            h.release();
            ON_ALLOC.set(Some(release_and_look));
            h.push(push);
            ON_ALLOC.set(None);
            assert_eq!(
                UNPINNED.get(),
                Some(false),
                "push {push}: the allocation of its segment released the handle, and the \
                 rest of the push ran unpinned (None: the push did not allocate)"
            );
        }
        h.release();
    });
    assert_eq!(
        std::iter::from_fn(|| LINKED.pop()).collect::<Vec<_>>(),
        [0, 1, 2]
    );
}

// --- queues dropped while their segments wait in the grace periods ---------------------------

/// Runs retirements and collections on this thread until the live byte count stops falling.
fn settle_epoch() -> isize {
    let mut best = isize::MAX;
    let mut still = 0;
    while still < 20 {
        for _ in 0..200 {
            let spare: Queue<u8, 1> = Queue::with_segment_size();
            for i in 0..4 {
                spare.push(i);
            }
            while spare.pop().is_some() {}
            crossbeam_epoch::pin().flush();
        }
        let now = LIVE.load(Ordering::Relaxed);
        if now < best {
            best = now;
            still = 0;
        } else {
            still += 1;
        }
    }
    best
}

#[test]
fn queues_dropped_while_their_retired_segments_are_in_grace_give_every_byte_back() {
    let _alone = alone();
    epoch_ready();
    let pages = Page::numbered(64);
    let baseline = settle_epoch();
    // Each round: a tracked queue (three grace periods per segment) of two-cell segments,
    // hundreds of retirements, some on other threads, then the queue is dropped at once, its
    // chains still pending; some rounds leave items in it.
    for round in 0..300 {
        let queue: Queue<&Page, 2> = Queue::with_segment_size();
        std::thread::scope(|s| {
            for t in 0..2 {
                let (queue, pages) = (&queue, &pages);
                s.spawn(move || {
                    for i in 0..300 {
                        queue.push_revocable(&pages[(t * 32 + i) % 64]);
                        let _ = queue.pop();
                    }
                });
            }
        });
        if round % 3 == 0 {
            queue.push_revocable(&pages[0]);
            queue.push(&pages[1]);
        }
        drop(queue);
    }
    let after = settle_epoch();
    // The segments of 300 queues, their pools and chains would be megabytes; what is left is
    // the epoch's own bags and the thread-locals of this binary.
    assert!(
        after - baseline < 256 << 10,
        "{} bytes more live after 300 dropped queues than before ({baseline} -> {after})",
        after - baseline
    );
    for page in &pages {
        assert!(
            !page.handle.is_in_bag(),
            "page {} still named by a dropped queue",
            page.number
        );
    }
}

// --- a deferred function that panics inside a retirement ------------------------------------
// (Not under `--cfg pitlane_alloc_global`: the count is that of the system allocator, and a
// panic in a retirement of pitlane-alloc's own queues would unwind out of the allocator.)

/// Set while the test below wants its deferred function to panic; the run that sees it set
/// clears it and panics.
#[cfg(not(pitlane_alloc_global))]
static PANIC_ARMED: AtomicBool = AtomicBool::new(false);
/// While set, a run of the function that does not panic defers another of itself.
#[cfg(not(pitlane_alloc_global))]
static PANIC_KEPT: AtomicBool = AtomicBool::new(false);

#[cfg(not(pitlane_alloc_global))]
const PANIC_MESSAGE: &str = "a deferred function of another crate panics";

/// A deferred function of another user of the default collector that panics once, when armed,
/// on whatever thread collects it; until then each run defers another of itself.
#[cfg(not(pitlane_alloc_global))]
fn panicking_function() -> impl FnOnce() + Send + 'static {
    || {
        if PANIC_ARMED.swap(false, Ordering::Relaxed) {
            std::panic::panic_any(PANIC_MESSAGE);
        }
        if PANIC_KEPT.load(Ordering::Relaxed) {
            crossbeam_epoch::pin().defer(panicking_function());
        }
    }
}

/// The hook that was set, kept while a quiet one stands in for it.
#[cfg(not(pitlane_alloc_global))]
type SavedHook = std::sync::Arc<Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send>>;

/// Sets a hook that stays silent for the tests' expected panics ([`PANIC_MESSAGE`]) and passes
/// every other panic on to the hook it replaces, which it returns for [`restore_hook`].
#[cfg(not(pitlane_alloc_global))]
fn quiet_expected_panics() -> SavedHook {
    let previous = std::sync::Arc::new(std::panic::take_hook());
    let others = std::sync::Arc::clone(&previous);
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&PANIC_MESSAGE) {
            others(info);
        }
    }));
    previous
}

/// Puts back the hook [`quiet_expected_panics`] replaced.
#[cfg(not(pitlane_alloc_global))]
fn restore_hook(previous: SavedHook) {
    drop(std::panic::take_hook());
    std::panic::set_hook(Box::new(move |info| previous(info)));
}

/// A retirement flushes the thread's deferred functions, which runs other users' expired ones
/// (`Guard::defer` is safe): such a function may panic, and the panic unwinds out of the pop
/// (caught here). Where limbo is used, the retirement had taken the whole limbo list to move
/// its segments on; a panic in the middle must leave what it had not handed on in limbo, and
/// must not count a pool owner that will never let go. Four queues, each with one panic: two
/// go on for hundreds of retirements after it, two are dropped right after it. Then the epoch
/// is driven: every byte of their segments and pools comes back.
#[cfg(not(pitlane_alloc_global))]
#[test]
fn a_deferred_function_that_panics_inside_a_retirement_loses_no_segment() {
    let _alone = alone();
    epoch_ready();
    let baseline = settle_epoch();
    // The default hook would print the expected panics and, with `RUST_BACKTRACE` set, parse
    // this binary's debug information: tens of megabytes, kept for later backtraces.
    let previous = quiet_expected_panics();
    let mut caught = 0;
    for round in 0..4 {
        PANIC_KEPT.store(true, Ordering::Relaxed);
        {
            let guard = crossbeam_epoch::pin();
            guard.defer(panicking_function());
            guard.flush();
        }
        // 16 KiB segments: limbo lets 62 go at once.
        let queue: Queue<u64, 1024> = Queue::with_segment_size();
        let (mut pushed, mut popped) = (0_u64, 0_u64);
        let mut caught_here = 0;
        PANIC_ARMED.store(true, Ordering::Relaxed);
        // At most 500 retirements, so eight attempts to move segments out of limbo. A push that
        // links a segment pins, and that pin's collection may run the function too: the push
        // then unwinds and drops its value (its ticket, past the end of the full tail segment,
        // takes no cell).
        for _ in 0..500 * 1024 {
            let pop = match std::panic::catch_unwind(|| queue.push(pushed)) {
                Ok(()) => {
                    pushed += 1;
                    std::panic::catch_unwind(|| queue.pop())
                }
                Err(payload) => Err(payload),
            };
            match pop {
                Ok(value) => {
                    assert_eq!(
                        value,
                        Some(popped),
                        "round {round}: a value lost or out of order"
                    );
                    popped += 1;
                }
                Err(payload) => {
                    assert_eq!(
                        payload.downcast_ref::<&str>(),
                        Some(&PANIC_MESSAGE),
                        "round {round}: the deferred function's panic, and no other"
                    );
                    caught_here += 1;
                    if round % 2 == 1 {
                        break;
                    }
                }
            }
        }
        PANIC_ARMED.store(false, Ordering::Relaxed);
        PANIC_KEPT.store(false, Ordering::Relaxed);
        assert_eq!(
            std::iter::from_fn(|| queue.pop()).collect::<Vec<_>>(),
            (popped..pushed).collect::<Vec<_>>(),
            "round {round}: the values left after the panic"
        );
        assert_eq!(
            caught_here, 1,
            "round {round}: the deferred function did not panic inside a pop"
        );
        caught += caught_here;
    }
    restore_hook(previous);
    let after = settle_epoch();
    // A lost segment is 16 KiB; a pool that is never freed holds up to 62 of them.
    assert!(
        after - baseline < 64 << 10,
        "{} bytes more live after the queues were dropped than before ({baseline} -> {after}; \
         {caught} panics caught)",
        after - baseline
    );
}

#[cfg(not(pitlane_alloc_global))]
thread_local! {
    /// Whether a copy of `panic_once_here` run on this thread may panic.
    static PANIC_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
/// Set by the copy of `panic_once_here` that panicked.
#[cfg(not(pitlane_alloc_global))]
static PANICKED_ONCE: AtomicBool = AtomicBool::new(false);
/// Where that copy panicked (resolved only after the bytes are counted: symbolizing allocates
/// and keeps the parsed debug information).
#[cfg(not(pitlane_alloc_global))]
static PANICKED_AT: Mutex<Option<std::backtrace::Backtrace>> = Mutex::new(None);

/// A deferred function that panics if it is the first copy to run on a thread that set
/// `PANIC_HERE`, and does nothing otherwise.
#[cfg(not(pitlane_alloc_global))]
fn panic_once_here() {
    if PANIC_HERE.try_with(std::cell::Cell::get).unwrap_or(false)
        && !PANICKED_ONCE.swap(true, Ordering::Relaxed)
    {
        *PANICKED_AT.lock().unwrap() = Some(std::backtrace::Backtrace::force_capture());
        std::panic::panic_any(PANIC_MESSAGE);
    }
}

/// The same, with the panic in the retirement's own pin rather than its flush: a thread's first
/// pin collects (crossbeam-epoch collects at every 128th pin of a participant, the first
/// included), and a thread that only pops takes its first pin in its first retirement that
/// moves segments out of limbo. Expired bags wait for it, each with a copy of a function that
/// panics there: one collection runs at most eight bags. Before, the pin came after the
/// segment had been counted as a pool owner: the pool was never freed, nor the segment.
#[cfg(not(pitlane_alloc_global))]
#[test]
fn a_deferred_function_that_panics_inside_a_retirements_pin_loses_no_segment() {
    let _alone = alone();
    epoch_ready();
    let baseline = settle_epoch();
    let previous = quiet_expected_panics();
    PANICKED_ONCE.store(false, Ordering::Relaxed);
    *PANICKED_AT.lock().unwrap() = None;
    {
        // All the pushes here: a push that links a segment pins.
        let queue: Queue<u64, 1024> = Queue::with_segment_size();
        const VALUES: u64 = 200 * 1024;
        for i in 0..VALUES {
            queue.push(i);
        }
        // 64 bags of one copy each, in one epoch: a pinned thread holds the epoch back.
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _guard = crossbeam_epoch::pin();
            pinned_tx.send(()).unwrap();
            let _ = release_rx.recv();
        });
        pinned_rx.recv().unwrap();
        for _ in 0..64 {
            let guard = crossbeam_epoch::pin();
            guard.defer(panic_once_here);
            guard.flush();
        }
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        // Three advances: every bag has expired; these collections run at most 32 of them
        // (here, where the copies do nothing).
        for _ in 0..3 {
            crossbeam_epoch::pin().flush();
        }
        let (caught, popped) = std::thread::scope(|s| {
            s.spawn(|| {
                PANIC_HERE.set(true);
                let (mut caught, mut popped) = (0, 0_u64);
                while popped < VALUES {
                    match std::panic::catch_unwind(|| queue.pop()) {
                        Ok(value) => {
                            assert_eq!(value, Some(popped), "a value lost or out of order");
                            popped += 1;
                        }
                        Err(payload) => {
                            assert_eq!(payload.downcast_ref::<&str>(), Some(&PANIC_MESSAGE));
                            caught += 1;
                        }
                    }
                }
                PANIC_HERE.set(false);
                (caught, popped)
            })
            .join()
            .unwrap()
        });
        assert_eq!(
            (caught, popped),
            (1, VALUES),
            "panics caught, values popped"
        );
    }
    restore_hook(previous);
    let trace = PANICKED_AT.lock().unwrap().take();
    let after = settle_epoch();
    assert!(
        after - baseline < 64 << 10,
        "{} bytes more live after the queue was dropped than before ({baseline} -> {after})",
        after - baseline
    );
    // Where there are symbols to tell: the panic began in a pin's collection.
    let trace = trace.map(|trace| trace.to_string()).unwrap_or_default();
    assert!(
        !trace.contains("panic_once_here") || trace.contains("Local::pin"),
        "the panic did not begin in the retirement's pin:\n{trace}"
    );
}

// --- stale revokers against cells reused for other pages ------------------------------------

/// Pages cycling through one queue of one-cell segments, taken out by pops and revokes at
/// once: each copy pushed is popped or revoked exactly once, and a revoke that returns `true`
/// is never followed by a pop of that copy. A revoker's handle word goes stale the moment a
/// pop takes the copy; the cell it names is retired, pooled and reused for another page's copy
/// while other revokers run.
#[test]
fn revokers_of_pages_whose_cells_are_reused_for_other_pages_take_each_copy_at_most_once() {
    let _alone = alone();
    epoch_ready();
    const PAGES: usize = 64;
    const CYCLERS: usize = 2;
    const REVOKERS: usize = 2;
    let rounds: usize = if cfg!(debug_assertions) {
        20_000
    } else {
        300_000
    };
    let pages = Page::numbered(PAGES);
    // Per page: whether a copy is out of the queue and owned by someone (only the owner pushes).
    let owned: Vec<AtomicBool> = (0..PAGES).map(|_| AtomicBool::new(true)).collect();
    let popped = AtomicUsize::new(0);
    let revoked = AtomicUsize::new(0);
    let pushed = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let queue: Queue<&Page, 1> = Queue::with_segment_size();
    std::thread::scope(|s| {
        for c in 0..CYCLERS {
            let (queue, pages, owned, pushed, popped, stop) =
                (&queue, &pages, &owned, &pushed, &popped, &stop);
            s.spawn(move || {
                let mut next = c;
                for _ in 0..rounds {
                    // Push a page we own (claim it from `owned`), then pop one.
                    let p = next % PAGES;
                    next += CYCLERS;
                    if owned[p]
                        .compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                    {
                        queue.push_revocable(&pages[p]);
                        pushed.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Some(page) = queue.pop() {
                        popped.fetch_add(1, Ordering::Relaxed);
                        assert!(
                            !owned[page.number].swap(true, Ordering::AcqRel),
                            "page {} popped while it was already out of the queue",
                            page.number
                        );
                    }
                }
                stop.store(true, Ordering::Relaxed);
            });
        }
        for r in 0..REVOKERS {
            let (pages, owned, revoked, stop) = (&pages, &owned, &revoked, &stop);
            s.spawn(move || {
                let mut i = r * 7;
                while !stop.load(Ordering::Relaxed) {
                    let p = i % PAGES;
                    i += 13;
                    // SAFETY: the queue outlives this scope.
                    if unsafe { Queue::<&Page, 1>::revoke(&&pages[p]) } {
                        revoked.fetch_add(1, Ordering::Relaxed);
                        assert!(
                            !owned[p].swap(true, Ordering::AcqRel),
                            "page {p} revoked while it was already out of the queue"
                        );
                    }
                }
            });
        }
    });
    let mut left = 0;
    while let Some(page) = queue.pop() {
        left += 1;
        assert!(!owned[page.number].swap(true, Ordering::AcqRel));
    }
    assert_eq!(
        pushed.load(Ordering::Relaxed),
        popped.load(Ordering::Relaxed) + revoked.load(Ordering::Relaxed) + left,
        "copies pushed against copies popped, revoked and left"
    );
    assert!(owned.iter().all(|o| o.load(Ordering::Relaxed)));
    for page in &pages {
        assert!(!page.handle.is_in_bag());
    }
    eprintln!(
        "RESULT pushed {} popped {} revoked {} left {left}",
        pushed.load(Ordering::Relaxed),
        popped.load(Ordering::Relaxed),
        revoked.load(Ordering::Relaxed)
    );
}

// --- kinds of value in one-cell segments -----------------------------------------------------

static DROPS: AtomicUsize = AtomicUsize::new(0);

/// A revocable value of `N` bytes (and `ALIGN`-aligned through `A`), whose handle is a static.
struct Value<A, const N: usize> {
    handle: &'static RevokeHandle,
    _bytes: [u8; N],
    _align: [A; 0],
}

impl<A, const N: usize> Drop for Value<A, N> {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: the handle is a static, outside the value.
unsafe impl<A, const N: usize> Revocable for Value<A, N> {
    fn revoke_handle(&self) -> &RevokeHandle {
        self.handle
    }
}

#[repr(align(4096))]
struct Page4096;

/// Pushes values through one-cell segments (every push past the first links a segment from the
/// pool), revoking every third one, popping the rest, then leaving a few for the drop.
fn cycle_kind<A, const N: usize>(handles: &'static [RevokeHandle]) {
    DROPS.store(0, Ordering::Relaxed);
    let queue: Queue<Value<A, N>, 1> = Queue::with_segment_size();
    let mut made = 0;
    for round in 0..3_000 {
        let handle = &handles[round % handles.len()];
        if handle.is_in_bag() {
            continue;
        }
        queue.push_revocable(Value {
            handle,
            _bytes: [0; N],
            _align: [],
        });
        made += 1;
        if round % 3 == 0 {
            let probe = std::mem::ManuallyDrop::new(Value::<A, N> {
                handle,
                _bytes: [0; N],
                _align: [],
            });
            // SAFETY: the queue is alive.
            assert!(unsafe { Queue::<Value<A, N>, 1>::revoke(&probe) });
        } else if round % 3 == 1 {
            let value = queue.pop().expect("a value");
            assert!(std::ptr::eq(value.handle, handle) || !value.handle.is_in_bag());
        }
    }
    drop(queue);
    assert_eq!(
        DROPS.load(Ordering::Relaxed),
        made,
        "each value dropped once"
    );
    assert!(handles.iter().all(|h| !h.is_in_bag()));
}

/// A zero-sized revocable value: its one handle is a static.
struct Zst;

static ZST_HANDLE: RevokeHandle = RevokeHandle::new();

impl Drop for Zst {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: the handle is a static.
unsafe impl Revocable for Zst {
    fn revoke_handle(&self) -> &RevokeHandle {
        &ZST_HANDLE
    }
}

#[test]
fn zero_sized_64_kib_and_page_aligned_revocable_values_cycle_through_one_cell_segments() {
    let _alone = alone();
    epoch_ready();
    static HANDLES: [RevokeHandle; 5] = [const { RevokeHandle::new() }; 5];
    // 64 KiB values are copied on the stack several times over in a debug build.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            cycle_kind::<(), 0>(&HANDLES);
            cycle_kind::<Page4096, 0>(&HANDLES);
            cycle_kind::<u8, { 64 << 10 }>(&HANDLES);
            cycle_kind::<Page4096, 100>(&HANDLES);
        })
        .unwrap()
        .join()
        .unwrap();
    // The zero-sized value, alone with its handle: in, revoked or popped, in again.
    DROPS.store(0, Ordering::Relaxed);
    let queue: Queue<Zst, 1> = Queue::with_segment_size();
    for round in 0..3_000 {
        queue.push_revocable(Zst);
        if round % 2 == 0 {
            // SAFETY: the queue is alive.
            assert!(unsafe { Queue::<Zst, 1>::revoke(&std::mem::ManuallyDrop::new(Zst)) });
        } else {
            drop(queue.pop().expect("the value"));
        }
        assert!(!ZST_HANDLE.is_in_bag());
    }
    assert!(queue.pop().is_none());
    assert_eq!(DROPS.load(Ordering::Relaxed), 3_000);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
