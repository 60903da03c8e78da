//! Thread lifecycles against the per-thread state behind the plain calls: seats, the stack's
//! per-seat caches and its one-entry thread cache, the era words of the MPMC queue, and the
//! Bagpipe's per-thread walk.
//!
//! - Thousands of short-lived threads, a few plain calls and a handle each, on one stack, one
//!   queue and two Bagpipes: every value comes out once, `len` is exact whenever the
//!   structures are quiet, and the bytes live (a counting global allocator) do not grow with
//!   the number of threads that came and went.
//! - The one-entry cache: two stacks alternated on one thread, and a stack dropped and a new
//!   one made at the same address while another thread's entry still names the old one.
//! - Plain calls and handles of Bagpipes from thread-local destructors on both sides of the
//!   seat's return, alternating two stacks there too.
//! - `fork` while other threads hold seats, stashes and eras: the child goes on using the
//!   structures, on its own thread and on threads of its own.
//!
//! Threads are started with `pitlane_testkit::stress::run_threads` (seen by
//! ThreadSanitizer). The tests of this file run one at a time (`alone`): the allocator's
//! count is process-wide.
#![cfg(not(pitlane_loom))]

#[cfg(not(pitlane_alloc_global))]
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;
use pitlane_queue::{BagHandle, WeakBag};
use pitlane_testkit::stress::{epoch_ready, run_threads};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global
// allocator, and the memory checks are skipped.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// Bytes live through the global allocator (0 under `pitlane_alloc_global`).
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The system allocator, counting the bytes live.
#[cfg(not(pitlane_alloc_global))]
struct Counting;

// SAFETY: every call is forwarded to `System` unchanged; the count is a side effect.
#[cfg(not(pitlane_alloc_global))]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
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

/// One counter per value: how many times it came out.
struct Ledger(Vec<AtomicUsize>);

impl Ledger {
    fn new(n: usize) -> Self {
        Self((0..n).map(|_| AtomicUsize::new(0)).collect())
    }

    fn saw(&self, value: usize) {
        self.0[value].fetch_add(1, Ordering::Relaxed);
    }

    fn assert_each_once(&self, what: &str) {
        for (value, count) in self.0.iter().enumerate() {
            let count = count.load(Ordering::Relaxed);
            assert_eq!(count, 1, "{what}: value {value} came out {count} times");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Thousands of short-lived threads
// ---------------------------------------------------------------------------------------------

/// Threads started together in one wave, and waves (so `WAVE * WAVES` threads in all).
const WAVE: usize = 16;
const WAVES: usize = if cfg!(debug_assertions) { 100 } else { 250 };
/// The first waves, after which the bytes live are taken as the base line.
const WARM_WAVES: usize = 10;
/// Plain pushes of each thread on each structure, and pops (as many, plainly and through a
/// handle, so that the structures stay small).
const PER_THREAD: usize = 6;

/// One structure for the short-lived threads: plain calls and handles.
trait Subject: Sync {
    fn plain_push(&self, value: usize);
    fn plain_pop(&self) -> Option<usize>;
    /// Makes a handle, pushes `value` through it and pops one value through it.
    fn through_a_handle(&self, value: usize) -> Option<usize>;
    fn len(&self) -> usize;
}

impl<B: WeakBag<Item = usize> + Sync> Subject for B {
    fn plain_push(&self, value: usize) {
        self.push(value);
    }
    fn plain_pop(&self) -> Option<usize> {
        self.pop()
    }
    fn through_a_handle(&self, value: usize) -> Option<usize> {
        let handle = self.handle();
        handle.push(value);
        handle.pop()
    }
    fn len(&self) -> usize {
        self.size_guess()
    }
}

/// Runs the waves on `subjects`, checking after each that `len` is exact and every value
/// pushed so far came out once (at the end), and returns the bytes live after the warm-up
/// waves and after the last.
fn waves_of_short_lived_threads(subjects: &[&dyn Subject]) -> (isize, isize) {
    let values_per_thread = PER_THREAD + 1;
    let threads = WAVE * WAVES;
    let ledgers: Vec<Ledger> = subjects
        .iter()
        .map(|_| Ledger::new(threads * values_per_thread))
        .collect();
    let mut base = 0;
    for wave in 0..WAVES {
        // Per subject: values pushed minus values taken out by the threads of this wave.
        let left: Vec<AtomicIsize> = subjects.iter().map(|_| AtomicIsize::new(0)).collect();
        run_threads(WAVE, |t| {
            let thread = wave * WAVE + t;
            let first = thread * values_per_thread;
            for (k, (subject, ledger)) in subjects.iter().zip(&ledgers).enumerate() {
                let mut taken = 0;
                for i in 0..PER_THREAD {
                    subject.plain_push(first + i);
                    if i % 2 == 1 {
                        if let Some(value) = subject.plain_pop() {
                            ledger.saw(value);
                            taken += 1;
                        }
                    }
                }
                if let Some(value) = subject.through_a_handle(first + PER_THREAD) {
                    ledger.saw(value);
                    taken += 1;
                }
                left[k].fetch_add(PER_THREAD as isize + 1 - taken, Ordering::Relaxed);
            }
        });
        for ((subject, ledger), left) in subjects.iter().zip(&ledgers).zip(&left) {
            // Quiet: every thread of the wave has exited.
            let left = left.load(Ordering::Relaxed);
            assert_eq!(
                subject.len() as isize,
                left,
                "wave {wave}: len after the threads exited"
            );
            // Drain, so that the structures hold nothing between waves.
            let mut drained = 0;
            while let Some(value) = subject.plain_pop() {
                ledger.saw(value);
                drained += 1;
            }
            assert_eq!(drained, left, "wave {wave}: values drained");
            assert_eq!(subject.len(), 0, "wave {wave}: len after the drain");
        }
        if wave + 1 == WARM_WAVES {
            base = LIVE.load(Ordering::Relaxed);
        }
    }
    for (k, ledger) in ledgers.iter().enumerate() {
        ledger.assert_each_once(&format!("subject {k}"));
    }
    (base, LIVE.load(Ordering::Relaxed))
}

/// Thousands of threads, each pushing and popping a few values plainly and through a handle it
/// makes and drops, on a stack, a queue of 4-cell segments (segments retired all along,
/// under eras and pins) and two Bagpipes, then exiting; 16 at a time, so every seat is given
/// back and taken again dozens of times, with per-seat stashes and tallies left behind for
/// the next holder. No value is lost or duplicated, `len` is exact after each wave, and the
/// bytes live after the last wave are those after the tenth, give or take a few segments:
/// nothing is kept per thread that ever was.
#[test]
fn thousands_of_short_lived_threads_lose_nothing_and_keep_nothing() {
    let _alone = alone();
    epoch_ready();
    let stack: Stack<usize> = Stack::new();
    let queue: Queue<usize, 4> = Queue::with_segment_size();
    let of_stacks: Bagpipe<Stack<usize>> = Bagpipe::new();
    let of_queues: Bagpipe<Queue<usize, 4>> = Bagpipe::new();
    let (base, end) = waves_of_short_lived_threads(&[&stack, &queue, &of_stacks, &of_queues]);
    if cfg!(pitlane_alloc_global) {
        return;
    }
    // A few segments and deferred bags of crossbeam-epoch may be live at either point; one
    // kilobyte per thread that came and went after the base line would be 2.4 MB or more.
    let threads_after = (WAVES - WARM_WAVES) * WAVE;
    eprintln!("bytes live: {base} after the warm-up, {end} after {threads_after} more threads");
    assert!(
        end - base < 128 * 1024,
        "{} bytes more live after {threads_after} more threads came and went ({base} -> {end})",
        end - base
    );
}

// ---------------------------------------------------------------------------------------------
// The one-entry cache
// ---------------------------------------------------------------------------------------------

/// Two stacks alternated call by call on each of several threads, plain calls only: each
/// call misses the thread's one-entry cache and switches it. Each thread's values come back
/// from the stack it pushed them on (values carry their stack), each once, and both lengths
/// are exact when the threads have exited.
#[test]
fn two_stacks_alternated_on_one_thread_keep_their_values_and_counts_apart() {
    let _alone = alone();
    const THREADS: usize = 6;
    const EACH: usize = 4000;
    let stacks = [Stack::<usize>::new(), Stack::<usize>::new()];
    let ledger = Ledger::new(THREADS * EACH);
    let kept: Vec<AtomicUsize> = (0..2).map(|_| AtomicUsize::new(0)).collect();
    run_threads(THREADS, |t| {
        let mut held = [0_isize; 2];
        for i in 0..EACH {
            let value = t * EACH + i;
            let which = value % 2;
            stacks[which].push(value);
            held[which] += 1;
            if i % 3 == 2 {
                // Pop the other stack than the last push: another switch.
                let other = 1 - which;
                if let Some(popped) = stacks[other].pop() {
                    assert_eq!(popped % 2, other, "a value of the other stack");
                    ledger.saw(popped);
                    held[other] -= 1;
                }
            }
        }
        for (k, held) in held.iter().enumerate() {
            kept[k].fetch_add(*held as usize, Ordering::Relaxed);
        }
    });
    for (k, stack) in stacks.iter().enumerate() {
        assert_eq!(stack.len(), kept[k].load(Ordering::Relaxed), "stack {k}");
        while let Some(value) = stack.pop() {
            assert_eq!(value % 2, k, "a value of the other stack");
            ledger.saw(value);
        }
        assert_eq!(stack.len(), 0);
    }
    ledger.assert_each_once("two stacks");
}

/// A stack is dropped while another (live, seated) thread's one-entry cache names it, and a
/// new stack is made, at the same address whenever the allocator reuses it (it does, most of
/// the time: same size, freed just before). That thread's next plain calls on the new stack
/// must not take the old stack's cache (freed with it): the new stack's `len` counts exactly
/// what that thread pushed, and its values come out once.
#[test]
fn a_new_stack_at_a_dropped_stacks_address_is_not_the_old_one_to_a_threads_cache() {
    let _alone = alone();
    const ROUNDS: usize = 300;
    const EACH: usize = 40;
    // The current stack, handed to the other thread by address.
    let current: std::sync::atomic::AtomicPtr<Stack<usize>> =
        std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
    // Round the other thread is to run (set by the test thread), and the last it finished.
    let go = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let reused = AtomicUsize::new(0);
    let last_address = AtomicUsize::new(0);
    // What the other thread found wrong, if anything (it then stops; so does the test thread).
    let failure: Mutex<Option<String>> = Mutex::new(None);
    run_threads(2, |t| {
        if t == 1 {
            // The other thread: keeps its seat for the whole test, and its one-entry cache
            // names each round's stack when that stack is dropped.
            let mut seen = 0;
            loop {
                let round = loop {
                    let round = go.load(Ordering::Acquire);
                    if round != seen || stop.load(Ordering::Acquire) {
                        break round;
                    }
                    std::hint::spin_loop();
                };
                if round == seen {
                    return;
                }
                seen = round;
                // SAFETY: the test thread keeps this round's stack alive until we say `done`.
                let stack = unsafe { &*current.load(Ordering::Acquire) };
                let len_before = stack.len();
                for i in 0..EACH {
                    stack.push(round * 1000 + i);
                }
                // Pop one back and push it again: a pop through the cache too.
                match stack.pop() {
                    Some(top) => stack.push(top),
                    None => *failure.lock().unwrap() = Some(format!("round {round}: empty")),
                }
                let len = stack.len();
                if len != len_before + EACH {
                    *failure.lock().unwrap() = Some(format!(
                        "round {round}: the new stack's len is {len}, not {} (this thread's \
                         pushes counted elsewhere)",
                        len_before + EACH
                    ));
                }
                done.store(round, Ordering::Release);
            }
        }
        // The test thread; however it leaves, the other thread stops too.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let _stop = StopOnDrop(&stop);
        for round in 1..=ROUNDS {
            let stack = Box::new(Stack::<usize>::new());
            let address = std::ptr::from_ref::<Stack<usize>>(&stack).addr();
            if last_address.swap(address, Ordering::Relaxed) == address {
                reused.fetch_add(1, Ordering::Relaxed);
            }
            // Our own plain calls first, half the rounds: the stack gets its id from either
            // thread.
            if round % 2 == 0 {
                stack.push(round * 1000 + 999);
            }
            current.store(Box::into_raw(stack), Ordering::Release);
            go.store(round, Ordering::Release);
            while done.load(Ordering::Acquire) != round {
                std::hint::spin_loop();
            }
            // SAFETY: made by `Box::into_raw` above; the other thread is done with it.
            let stack = unsafe { Box::from_raw(current.load(Ordering::Acquire)) };
            if let Some(failure) = failure.lock().unwrap().take() {
                panic!("{failure}");
            }
            let mut values: Vec<usize> = std::iter::from_fn(|| stack.pop()).collect();
            values.sort_unstable();
            let mut expected: Vec<usize> = (0..EACH).map(|i| round * 1000 + i).collect();
            if round % 2 == 0 {
                expected.push(round * 1000 + 999);
            }
            assert_eq!(values, expected, "round {round}: the values");
            // Dropped with values in it half the time (nodes in the other thread's stash).
            if round % 3 == 0 {
                stack.push(1);
            }
            drop(stack);
        }
    });
    eprintln!(
        "the address came back in {} of {ROUNDS} rounds",
        reused.load(Ordering::Relaxed)
    );
    // The test means little if the address never came back; glibc's malloc hands the same
    // chunk back at once.
    assert!(
        reused.load(Ordering::Relaxed) > 0 || cfg!(pitlane_alloc_global),
        "the allocator never reused a dropped stack's address"
    );
}

// ---------------------------------------------------------------------------------------------
// Thread-local destructors
// ---------------------------------------------------------------------------------------------

static TLS_OF_STACKS: std::sync::OnceLock<Bagpipe<Stack<usize>>> = std::sync::OnceLock::new();
static TLS_OF_QUEUES: std::sync::OnceLock<Bagpipe<Queue<usize, 2>>> = std::sync::OnceLock::new();
static TLS_STACKS: [Stack<usize>; 2] = [Stack::new(), Stack::new()];
static TLS_POPPED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Values of thread `thread`, phase `phase`: 200 each.
fn tls_values(thread: usize, phase: usize) -> std::ops::Range<usize> {
    let base = (thread * 3 + phase) * 200;
    base..base + 200
}

/// Pushes `values` into the two Bagpipes (plainly and through handles made on the spot) and
/// the two static stacks (alternated, plain), popping some back out each way.
fn use_the_statics(values: std::ops::Range<usize>) {
    let of_stacks = TLS_OF_STACKS.get().expect("made by the test");
    let of_queues = TLS_OF_QUEUES.get().expect("made by the test");
    let mut popped = Vec::new();
    let stacks_handle = of_stacks.handle();
    let queues_handle = of_queues.handle();
    for value in values {
        match value % 6 {
            0 => of_stacks.push(value),
            1 => stacks_handle.push(value),
            2 => of_queues.push(value),
            3 => queues_handle.push(value),
            4 => TLS_STACKS[0].push(value),
            _ => TLS_STACKS[1].push(value),
        }
        if value % 12 == 11 {
            popped.extend(of_stacks.pop());
            popped.extend(stacks_handle.pop());
            popped.extend(of_queues.pop());
            popped.extend(queues_handle.pop());
            popped.extend(TLS_STACKS[0].pop());
            popped.extend(TLS_STACKS[1].pop());
        }
    }
    drop((stacks_handle, queues_handle));
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

/// Bagpipes of stacks and of queues, and two stacks alternated, used from many threads'
/// bodies and from their thread-local destructors on both sides of the seat's return, with
/// handles made and dropped in those destructors: every value comes out once, every `len` is
/// 0 at the end. Rounds of threads, so that later threads take the seats (and the stacks'
/// per-seat caches) that earlier ones gave back from inside their destructors.
#[test]
fn bagpipes_and_alternated_stacks_from_thread_local_destructors_on_both_sides_of_the_seat() {
    let _alone = alone();
    const THREADS: usize = 8;
    const ROUNDS: usize = 4;
    epoch_ready();
    TLS_OF_STACKS.get_or_init(Bagpipe::new);
    TLS_OF_QUEUES.get_or_init(Bagpipe::new);
    for round in 0..ROUNDS {
        run_threads(THREADS, |t| {
            let thread = round * THREADS + t;
            AFTER_THE_SEAT.with(|slot| *slot.borrow_mut() = Some(Phase(thread, 0)));
            // Takes the seat (registering its destructor), in the thread's body.
            use_the_statics(tls_values(thread, 1));
            BEFORE_THE_SEAT.with(|slot| *slot.borrow_mut() = Some(Phase(thread, 2)));
        });
    }
    let of_stacks = TLS_OF_STACKS.get().unwrap();
    let of_queues = TLS_OF_QUEUES.get().unwrap();
    let mut all = std::mem::take(&mut *TLS_POPPED.lock().unwrap());
    all.extend(std::iter::from_fn(|| of_stacks.pop()));
    all.extend(std::iter::from_fn(|| of_queues.pop()));
    for stack in &TLS_STACKS {
        all.extend(std::iter::from_fn(|| stack.pop()));
    }
    all.sort_unstable();
    assert_eq!(all, (0..ROUNDS * THREADS * 600).collect::<Vec<_>>());
    assert_eq!(
        (
            of_stacks.size_guess(),
            of_queues.size_guess(),
            TLS_STACKS[0].len(),
            TLS_STACKS[1].len()
        ),
        (0, 0, 0, 0)
    );
}
