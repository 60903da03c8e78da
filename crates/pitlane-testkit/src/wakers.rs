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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Wake, Waker};

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
