//! Blocking a thread on a future, for the `blocking_*` forms.
//!
//! The blocked thread sleeps in `parking_lot_core`'s parking lot, keyed by the address of a
//! small heap record: a wake-up state and a count of the wakers that point at the record.
//! Each thread makes its record the first time it blocks here and keeps a waker of it in a
//! thread-local for its later blocking calls. The thread-local waker is dropped when the
//! thread exits; a notifier may still hold a clone then, and wake it (which finds nobody
//! parked and does nothing), and the last waker dropped frees the record. So nothing outlives
//! the thread and its wakers, however many threads come and go.
//!
//! The record holds no `Thread` handle (whose last drop, like any `Arc`'s, synchronizes
//! through a fence that ThreadSanitizer cannot follow), and its count is decremented by an
//! acquire-release `fetch_sub`, which the sanitizer follows; `parking_lot_core` builds for
//! ThreadSanitizer without fences.
//!
//! Wake-up protocol, on the record's `state` (`IDLE`, `WOKEN`, `PARKED`): a waker swaps in
//! `WOKEN` (release) and, if it replaced `PARKED`, unparks the key. The blocked thread, after
//! a poll that returned `Pending`, moves `IDLE` to `PARKED` and parks while the state is still
//! `PARKED` (checked under the parking lot's bucket lock, which an unpark also takes, so a
//! wake-up between the two is not missed); then it swaps `IDLE` back (acquire), which takes
//! every wake-up so far, and polls again.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

/// Not woken since the blocked thread last looked.
const IDLE: u8 = 0;
/// Woken since the blocked thread last looked.
const WOKEN: u8 = 1;
/// The blocked thread is parked (or about to be) until woken.
const PARKED: u8 = 2;

/// What a waker made by [`thread_waker`] points at.
struct ThreadWaker {
    /// How many wakers point at this record.
    refs: AtomicUsize,
    /// `IDLE`, `WOKEN` or `PARKED`.
    state: AtomicU8,
}

impl ThreadWaker {
    /// The parking lot key: the record's address.
    fn key(&self) -> usize {
        core::ptr::from_ref(self).addr()
    }

    fn wake(&self) {
        if self.state.swap(WOKEN, Ordering::Release) == PARKED {
            // SAFETY: the key is the address of a record this crate owns, which stays alive
            // (the caller's waker holds a count) until the call returns.
            unsafe {
                parking_lot_core::unpark_one(self.key(), |_| parking_lot_core::DEFAULT_UNPARK_TOKEN)
            };
        }
    }

    /// Sleeps until woken (or spuriously), unless woken since the last call.
    fn park(&self) {
        if self
            .state
            .compare_exchange(IDLE, PARKED, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the key is the address of our own record; the callbacks neither panic
            // nor call into the parking lot.
            unsafe {
                parking_lot_core::park(
                    self.key(),
                    || self.state.load(Ordering::Relaxed) == PARKED,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    None,
                )
            };
        }
        // Takes the wake-ups so far, and what their wakers did before them.
        self.state.swap(IDLE, Ordering::Acquire);
    }
}

/// Above this many wakers of one record, cloning aborts rather than let the count wrap (as
/// `Arc` does).
const MAX_REFS: usize = isize::MAX as usize;

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

/// A new record with one waker pointing at it.
fn new_waker() -> Waker {
    let record = Box::into_raw(Box::new(ThreadWaker {
        refs: AtomicUsize::new(1),
        state: AtomicU8::new(IDLE),
    }));
    // SAFETY: the vtable upholds the `RawWaker` contract: `data` is a live record for as long
    // as a waker points at it (each holds one count, the last to drop frees it), clones share
    // it, and the record is `Send + Sync`.
    unsafe { Waker::from_raw(RawWaker::new(record.cast_const().cast(), &VTABLE)) }
}

/// # Safety
/// `data` is the record of a live waker.
unsafe fn record<'a>(data: *const ()) -> &'a ThreadWaker {
    // SAFETY: the caller's waker holds a count, so the record is alive while it is used.
    unsafe { &*data.cast::<ThreadWaker>() }
}

fn clone(data: *const ()) -> RawWaker {
    // SAFETY: called through a live waker.
    let record = unsafe { record(data) };
    // A new count needs no ordering: the clone comes from a waker that already holds one.
    if record.refs.fetch_add(1, Ordering::Relaxed) > MAX_REFS {
        std::process::abort();
    }
    RawWaker::new(data, &VTABLE)
}

fn wake(data: *const ()) {
    wake_by_ref(data);
    drop_waker(data);
}

fn wake_by_ref(data: *const ()) {
    // SAFETY: called through a live waker.
    unsafe { record(data) }.wake();
}

fn drop_waker(data: *const ()) {
    // SAFETY: called through a live waker, whose count this gives up.
    let last = unsafe { record(data) }.refs.fetch_sub(1, Ordering::AcqRel) == 1;
    if last {
        // SAFETY: no waker points at the record any more, and the acquire-release decrement
        // ordered every earlier holder's use of it before this point.
        drop(unsafe { Box::from_raw(data.cast_mut().cast::<ThreadWaker>()) });
    }
}

/// A waker of the calling thread's record: a clone of the thread-local one (made on the
/// thread's first call), or of a fresh record while the thread-local is being torn down.
fn thread_waker() -> Waker {
    thread_local! {
        static WAKER: Waker = new_waker();
    }
    WAKER.try_with(Waker::clone).unwrap_or_else(|_| new_waker())
}

/// Polls `future` on this thread, parking it between polls, until it is ready.
///
/// With the `tokio` feature, panics as tokio's own blocking calls do when this thread drives
/// a tokio runtime.
#[track_caller]
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    #[cfg(feature = "tokio")]
    {
        // tokio's uncontended blocking lock returns at once outside a runtime and panics,
        // with tokio's message, on a thread that drives one: the same check tokio's
        // `blocking_*` methods make.
        let probe = tokio::sync::Mutex::const_new(());
        drop(probe.blocking_lock());
    }
    let waker = thread_waker();
    // SAFETY: `waker` was made with our vtable, so its data is a live record.
    let record = unsafe { record(waker.data()) };
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        record.park();
    }
}
