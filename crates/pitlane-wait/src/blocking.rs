//! Blocking a thread on a future, for the `blocking_*` forms.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

/// Wakes a thread parked in [`block_on`].
struct Unparker(Thread);

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
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
    let waker = Waker::from(Arc::new(Unparker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}
