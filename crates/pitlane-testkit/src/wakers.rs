//! Wakers that count how often they were woken and how many of their clones are alive, for
//! the tests of async primitives (a lost wake-up shows as a count that stays at 0, a leaked
//! waker as a clone count that does not fall back to 1).
//!
//! ```
//! use pitlane_testkit::wakers::CountingWaker;
//!
//! let counter = CountingWaker::new();
//! let waker = counter.waker();
//! assert_eq!(counter.live(), 2); // the counter itself and `waker`
//! waker.wake_by_ref();
//! waker.wake();
//! assert_eq!(counter.wakes(), 2);
//! assert_eq!(counter.live(), 1);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::task::{Context, RawWaker, RawWakerVTable, Wake, Waker};

/// Shared counters behind wakers made by [`CountingWaker::waker`].
#[derive(Debug, Default)]
struct Counts {
    wakes: AtomicUsize,
}

impl Wake for Counts {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

/// A source of counted wakers.
#[derive(Debug, Clone, Default)]
pub struct CountingWaker {
    counts: Arc<Counts>,
}

impl CountingWaker {
    /// A fresh counter (no wakes, no waker made yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// A waker that counts into this counter.
    pub fn waker(&self) -> Waker {
        Waker::from(self.counts.clone())
    }

    /// Runs `f` with a context whose waker counts into this counter.
    pub fn with_context<R>(&self, f: impl FnOnce(&mut Context<'_>) -> R) -> R {
        let waker = self.waker();
        f(&mut Context::from_waker(&waker))
    }

    /// How many times any of its wakers was woken.
    pub fn wakes(&self) -> usize {
        self.counts.wakes.load(Ordering::SeqCst)
    }

    /// How many references to the counts are alive: this counter (and its clones) plus every
    /// waker not yet dropped.
    pub fn live(&self) -> usize {
        Arc::strong_count(&self.counts)
    }
}

/// A waker that runs `action` each time it is woken (by value or by reference), for tests
/// that act from inside a wake-up: re-enter the primitive, poll another waiter, panic.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let woken = Arc::new(AtomicUsize::new(0));
/// let waker = pitlane_testkit::wakers::on_wake({
///     let woken = woken.clone();
///     move || {
///         woken.fetch_add(1, Ordering::SeqCst);
///     }
/// });
/// waker.wake_by_ref();
/// waker.wake();
/// assert_eq!(woken.load(Ordering::SeqCst), 2);
/// ```
pub fn on_wake(action: impl Fn() + Send + Sync + 'static) -> Waker {
    Waker::from(Arc::new(OnWake(action)))
}

/// The record behind [`on_wake`].
struct OnWake<F>(F);

impl<F: Fn() + Send + Sync + 'static> Wake for OnWake<F> {
    fn wake(self: Arc<Self>) {
        (self.0)();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        (self.0)();
    }
}

/// A gate that holds up the `clone` of the wakers it makes until it is opened, so that a test
/// can keep a primitive inside the code that clones a waker (a queued future polled with a
/// new waker clones it under the primitive's lock) for as long as it needs. Such a waker does
/// nothing when woken or dropped; its clones are plain no-op wakers.
///
/// ```
/// use pitlane_testkit::wakers::CloneGate;
///
/// static GATE: CloneGate = CloneGate::new();
/// let waker = GATE.waker();
/// std::thread::scope(|s| {
///     let cloner = s.spawn(|| drop(waker.clone()));
///     GATE.wait_until_cloning(); // the clone has begun, and waits
///     GATE.open();
///     cloner.join().unwrap();
/// });
/// GATE.reset(); // closed again, for the next test
/// ```
#[derive(Debug)]
pub struct CloneGate {
    /// Set when a clone has begun.
    cloning: AtomicBool,
    /// Set by `open`: clones return.
    open: AtomicBool,
}

impl CloneGate {
    /// A closed gate.
    pub const fn new() -> Self {
        CloneGate {
            cloning: AtomicBool::new(false),
            open: AtomicBool::new(false),
        }
    }

    /// A waker whose `clone` waits until the gate is open.
    pub fn waker(&'static self) -> Waker {
        fn noop(_: *const ()) {}
        fn plain_clone(_: *const ()) -> RawWaker {
            RawWaker::new(std::ptr::null(), &PLAIN)
        }
        fn gated_clone(gate: *const ()) -> RawWaker {
            // SAFETY: the data pointer of a `GATED` waker is a `&'static CloneGate` (below).
            let gate = unsafe { &*gate.cast::<CloneGate>() };
            gate.cloning.store(true, Ordering::SeqCst);
            while !gate.open.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            plain_clone(std::ptr::null())
        }
        static PLAIN: RawWakerVTable = RawWakerVTable::new(plain_clone, noop, noop, noop);
        static GATED: RawWakerVTable = RawWakerVTable::new(gated_clone, noop, noop, noop);
        let data = std::ptr::from_ref(self).cast::<()>();
        // SAFETY: `GATED` reads its data pointer as the `&'static CloneGate` it is, and the
        // plain vtable does nothing with its (null) one.
        unsafe { Waker::from_raw(RawWaker::new(data, &GATED)) }
    }

    /// Waits until a clone of one of this gate's wakers has begun.
    pub fn wait_until_cloning(&self) {
        while !self.cloning.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }

    /// Lets every clone waiting at the gate return, and those made later pass.
    pub fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
    }

    /// Closes the gate again and forgets that a clone began.
    pub fn reset(&self) {
        self.cloning.store(false, Ordering::SeqCst);
        self.open.store(false, Ordering::SeqCst);
    }
}

impl Default for CloneGate {
    fn default() -> Self {
        Self::new()
    }
}

/// Polls `future` to completion on this thread, parking the thread between polls.
///
/// Its waker points at a heap record (a wake-up state and a count of the wakers that point
/// at it), freed with the last of them, and the thread sleeps in `parking_lot_core`'s parking
/// lot keyed by the record's address: no `Thread` handle and no `Arc` (whose last drop
/// synchronizes through a fence ThreadSanitizer cannot follow), so the stress tests can block
/// on futures under the sanitizer, and nothing outlives the call and the wakers a notifier
/// kept. The same protocol as pitlane-wait's `blocking_*` forms (`src/blocking.rs` there).
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::task::Poll;
///
/// // Pending until another thread sets the flag and wakes the waker it was given.
/// let flag = Arc::new(AtomicBool::new(false));
/// let value = pitlane_testkit::wakers::block_on(std::future::poll_fn(|cx| {
///     if flag.load(Ordering::SeqCst) {
///         return Poll::Ready(7);
///     }
///     let (flag, waker) = (flag.clone(), cx.waker().clone());
///     std::thread::spawn(move || {
///         flag.store(true, Ordering::SeqCst);
///         waker.wake();
///     });
///     Poll::Pending
/// }));
/// assert_eq!(value, 7);
/// ```
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let record = Box::into_raw(Box::new(ThreadWaker {
        refs: AtomicUsize::new(1),
        state: AtomicU8::new(IDLE),
    }));
    // SAFETY: the vtable upholds the `RawWaker` contract: the record lives while a waker holds
    // a count of it, clones share it, and the record is `Send + Sync`.
    let waker =
        unsafe { Waker::from_raw(RawWaker::new(record.cast_const().cast(), &THREAD_WAKER)) };
    // SAFETY: `waker` holds a count until the end of this function.
    let record = unsafe { &*record };
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        if record
            .state
            .compare_exchange(IDLE, PARKED, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the key is our own record's address; the callbacks neither panic nor
            // call into the parking lot.
            unsafe {
                parking_lot_core::park(
                    record.key(),
                    || record.state.load(Ordering::Relaxed) == PARKED,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    None,
                )
            };
        }
        record.state.swap(IDLE, Ordering::Acquire);
    }
}

const IDLE: u8 = 0;
const WOKEN: u8 = 1;
const PARKED: u8 = 2;

/// The record behind [`block_on`]'s wakers.
struct ThreadWaker {
    refs: AtomicUsize,
    state: AtomicU8,
}

impl ThreadWaker {
    fn key(&self) -> usize {
        std::ptr::from_ref(self).addr()
    }
}

static THREAD_WAKER: RawWakerVTable = RawWakerVTable::new(
    thread_waker_clone,
    thread_waker_wake,
    thread_waker_wake_by_ref,
    thread_waker_drop,
);

/// # Safety
/// `data` is the record of a live waker.
unsafe fn thread_waker_record<'a>(data: *const ()) -> &'a ThreadWaker {
    // SAFETY: the caller's waker holds a count.
    unsafe { &*data.cast::<ThreadWaker>() }
}

fn thread_waker_clone(data: *const ()) -> RawWaker {
    // SAFETY: called through a live waker.
    let record = unsafe { thread_waker_record(data) };
    if record.refs.fetch_add(1, Ordering::Relaxed) > isize::MAX as usize {
        std::process::abort();
    }
    RawWaker::new(data, &THREAD_WAKER)
}

fn thread_waker_wake(data: *const ()) {
    thread_waker_wake_by_ref(data);
    thread_waker_drop(data);
}

fn thread_waker_wake_by_ref(data: *const ()) {
    // SAFETY: called through a live waker.
    let record = unsafe { thread_waker_record(data) };
    if record.state.swap(WOKEN, Ordering::Release) == PARKED {
        // SAFETY: the key is a record of ours, alive while this waker is.
        unsafe {
            parking_lot_core::unpark_one(record.key(), |_| parking_lot_core::DEFAULT_UNPARK_TOKEN)
        };
    }
}

fn thread_waker_drop(data: *const ()) {
    // SAFETY: called through a live waker, whose count this gives up.
    if unsafe { thread_waker_record(data) }
        .refs
        .fetch_sub(1, Ordering::AcqRel)
        == 1
    {
        // SAFETY: the last count: no waker points at the record, and the acquire-release
        // decrements ordered every other holder's use of it before this.
        drop(unsafe { Box::from_raw(data.cast_mut().cast::<ThreadWaker>()) });
    }
}
