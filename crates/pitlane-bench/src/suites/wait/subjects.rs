//! The notifiers and semaphores the suite measures, behind one interface each.

use std::future::Future;
use std::sync::Arc;

/// Something tasks wait on and a thread wakes: one waiter, or all of them.
pub(super) trait NotifySubject: Send + Sync + 'static {
    /// The crate path a user would type.
    const NAME: &'static str;
    /// Whether this is a peer (not pitlane's).
    const PEER: bool;
    fn new() -> Self;
    fn notify_one(&self);
    fn notify_waiters(&self);
    /// Waits for one notification, borrowing the subject (a task of tokio's benchmark holds
    /// its `Arc` and awaits `notify.notified()` on it, with no clone per wait).
    fn wait(&self) -> impl Future<Output = ()> + Send + '_;
}

impl NotifySubject for pitlane_wait::Notify {
    const NAME: &'static str = "pitlane::wait::Notify";
    const PEER: bool = false;
    fn new() -> Self {
        pitlane_wait::Notify::new()
    }
    fn notify_one(&self) {
        pitlane_wait::Notify::notify_one(self);
    }
    fn notify_waiters(&self) {
        pitlane_wait::Notify::notify_waiters(self);
    }
    fn wait(&self) -> impl Future<Output = ()> + Send + '_ {
        self.notified()
    }
}

impl NotifySubject for tokio::sync::Notify {
    const NAME: &'static str = "tokio::sync::Notify";
    const PEER: bool = true;
    fn new() -> Self {
        tokio::sync::Notify::new()
    }
    fn notify_one(&self) {
        tokio::sync::Notify::notify_one(self);
    }
    fn notify_waiters(&self) {
        tokio::sync::Notify::notify_waiters(self);
    }
    fn wait(&self) -> impl Future<Output = ()> + Send + '_ {
        self.notified()
    }
}

/// event-listener's `Event`: `notify(1)` wakes one listener (it stores nothing when none
/// listens, so the benchmark loop simply notifies again), `notify(usize::MAX)` all of them.
impl NotifySubject for event_listener::Event {
    const NAME: &'static str = "event_listener::Event";
    const PEER: bool = true;
    fn new() -> Self {
        event_listener::Event::new()
    }
    fn notify_one(&self) {
        self.notify(1);
    }
    fn notify_waiters(&self) {
        self.notify(usize::MAX);
    }
    fn wait(&self) -> impl Future<Output = ()> + Send + '_ {
        self.listen()
    }
}

/// A counting semaphore tasks acquire one permit of and release it.
pub(super) trait SemaphoreSubject: Send + Sync + 'static {
    /// The crate path a user would type.
    const NAME: &'static str;
    /// Whether this is a peer (not pitlane's).
    const PEER: bool;
    fn new(permits: usize) -> Self;
    /// Acquires one permit and releases it.
    fn acquire_release(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static;
    /// The permits free now, where the semaphore can tell (for the end-of-run check).
    fn available(&self) -> Option<usize>;
}

impl SemaphoreSubject for pitlane_wait::Semaphore {
    const NAME: &'static str = "pitlane::wait::Semaphore";
    const PEER: bool = false;
    fn new(permits: usize) -> Self {
        pitlane_wait::Semaphore::new(permits)
    }
    fn acquire_release(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move {
            let permit = this.acquire().await.expect("never closed");
            drop(permit);
        }
    }
    fn available(&self) -> Option<usize> {
        Some(self.available_permits())
    }
}

impl SemaphoreSubject for tokio::sync::Semaphore {
    const NAME: &'static str = "tokio::sync::Semaphore";
    const PEER: bool = true;
    fn new(permits: usize) -> Self {
        tokio::sync::Semaphore::new(permits)
    }
    fn acquire_release(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move {
            let permit = this.acquire().await.expect("never closed");
            drop(permit);
        }
    }
    fn available(&self) -> Option<usize> {
        Some(self.available_permits())
    }
}

/// async-lock's `Semaphore` (not fair: a releasing task may take the permit back before a
/// waiter does).
impl SemaphoreSubject for async_lock::Semaphore {
    const NAME: &'static str = "async_lock::Semaphore";
    const PEER: bool = true;
    fn new(permits: usize) -> Self {
        async_lock::Semaphore::new(permits)
    }
    fn acquire_release(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move {
            let guard = this.acquire().await;
            drop(guard);
        }
    }
    fn available(&self) -> Option<usize> {
        None
    }
}
