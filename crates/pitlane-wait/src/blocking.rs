//! Blocking a thread on a future, for the `blocking_*` forms.
//!
//! The waker wakes the blocked thread by `Thread::unpark`. It points at a per-thread record
//! that is made once and never freed (one small allocation per thread that ever blocks here),
//! so it needs no reference count: a notifier may still hold a clone of it, and call it, after
//! the blocked thread has moved on, and a late call only unparks the thread spuriously, which
//! every park loop tolerates. (A reference-counted waker would also work, but its last drop
//! synchronizes through a fence that ThreadSanitizer cannot see, so CI's sanitizer run would
//! report it as a race.)

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::thread::{self, Thread};

/// What a waker made by [`thread_waker`] points at: the thread to unpark.
struct Unparker(Thread);

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop_waker);

fn clone(data: *const ()) -> RawWaker {
    RawWaker::new(data, &VTABLE)
}

fn wake(data: *const ()) {
    // SAFETY: `data` is a leaked, never freed `Unparker` (see `thread_waker`).
    let unparker = unsafe { &*data.cast::<Unparker>() };
    unparker.0.unpark();
}

fn drop_waker(_: *const ()) {}

/// A waker that unparks the calling thread, valid for ever.
fn thread_waker() -> Waker {
    thread_local! {
        static UNPARKER: &'static Unparker = Box::leak(Box::new(Unparker(thread::current())));
    }
    let unparker: *const Unparker = UNPARKER.with(|u| *u);
    // SAFETY: the vtable's functions uphold the `RawWaker` contract: `data` stays valid for
    // ever (leaked), clones are the same pointer, dropping does nothing, and waking only
    // unparks a thread, which is `Send + Sync`.
    unsafe { Waker::from_raw(RawWaker::new(unparker.cast(), &VTABLE)) }
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
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}
