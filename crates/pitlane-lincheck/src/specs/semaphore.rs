use crate::spec::SequentialSpec;

/// An operation on a counting semaphore.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SemaphoreOp {
    /// Wait until this many permits are available and take them.
    Acquire(u64),
    /// Take this many permits if they are available now.
    TryAcquire(u64),
    /// Give this many permits back.
    Release(u64),
}

/// What a [`SemaphoreOp`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SemaphoreRet {
    /// The permits were taken.
    Acquired,
    /// A `TryAcquire` found too few permits and took none.
    WouldBlock,
    /// The permits were given back.
    Released,
}

/// A counting semaphore that starts with a number of permits.
///
/// `Acquire(n)` returns `Acquired` and takes `n` permits, at an instant when at least `n` are
/// available (it waited for them before that instant). `TryAcquire(n)` does the same when at
/// least `n` are available and returns `WouldBlock`, taking none, exactly when fewer are.
/// `Release(n)` returns `Released` and adds `n` permits (releasing more than were taken is
/// allowed, as with `tokio::sync::Semaphore::add_permits`).
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{SemaphoreOp::*, SemaphoreRet::*, SemaphoreSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..1, TryAcquire(1), Acquired)?;
/// history.add(1, 2..3, TryAcquire(1), Acquired)?; // only one permit, not released
/// assert!(!check(&SemaphoreSpec::new(1), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SemaphoreSpec {
    permits: u64,
}

impl SemaphoreSpec {
    /// A semaphore that starts with `permits` permits.
    pub fn new(permits: u64) -> Self {
        SemaphoreSpec { permits }
    }
}

impl SequentialSpec for SemaphoreSpec {
    type Op = SemaphoreOp;
    type Ret = SemaphoreRet;
    /// The permits available.
    type State = u64;

    fn init(&self) -> u64 {
        self.permits
    }

    fn step(&self, available: &u64, op: &SemaphoreOp, ret: &SemaphoreRet) -> Option<u64> {
        match (op, ret) {
            (SemaphoreOp::Acquire(n) | SemaphoreOp::TryAcquire(n), SemaphoreRet::Acquired) => {
                available.checked_sub(*n)
            }
            (SemaphoreOp::TryAcquire(n), SemaphoreRet::WouldBlock) if available < n => {
                Some(*available)
            }
            (SemaphoreOp::Release(n), SemaphoreRet::Released) => available.checked_add(*n),
            _ => None,
        }
    }
}
