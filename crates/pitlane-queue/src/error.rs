//! The errors of every structure in the crate: one vocabulary for the SPSC queue and the bags.
//!
//! A push that fails hands the value back inside [`PushError`], which says why: the structure
//! was [`Full`](PushError::Full), or the attempt lost a race and changed nothing
//! ([`Transient`](PushError::Transient)). A pop that fails says [`PopError::Empty`] or
//! [`PopError::Transient`]. Which structure can fail which way is in each one's documentation:
//! the SPSC queue is never transient, the unbounded bags are full only when they cannot grow
//! (a [`Stack`](crate::stack::Stack) at its [`MAX_ITEMS`](crate::stack::MAX_ITEMS), or a
//! queue or stack whose allocator refused the memory for more room).

use core::fmt;

/// A push that did not happen; the value comes back inside.
///
/// ```
/// use pitlane_queue::PushError;
/// use pitlane_queue::spsc;
///
/// let (mut producer, _consumer) = spsc::channel(1);
/// producer.try_push("first").unwrap();
/// let error = producer.try_push("second").unwrap_err();
/// assert!(error.is_full());
/// assert_eq!(error.to_string(), "the queue is full");
/// assert_eq!(error.into_inner(), "second");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushError<T> {
    /// There was no room: a bounded queue held its capacity, a stack its maximum, or an
    /// unbounded queue or stack needed memory to grow and the allocator refused it.
    Full(T),
    /// The attempt lost a race with a concurrent operation and changed nothing; trying again,
    /// here or on another bag, will succeed.
    Transient(T),
}

impl<T> PushError<T> {
    /// The value that was not pushed.
    ///
    /// ```
    /// assert_eq!(pitlane_queue::PushError::Transient(5).into_inner(), 5);
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(value) | Self::Transient(value) => value,
        }
    }

    /// Whether the structure had no room.
    ///
    /// ```
    /// assert!(pitlane_queue::PushError::Full(()).is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        matches!(self, Self::Full(_))
    }

    /// Whether the attempt lost a race.
    ///
    /// ```
    /// assert!(pitlane_queue::PushError::Transient(()).is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient(_))
    }
}

impl<T> fmt::Debug for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Full(_) => "Full(..)",
            Self::Transient(_) => "Transient(..)",
        })
    }
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Full(_) => "the queue is full",
            Self::Transient(_) => "lost a race with another thread; retry",
        })
    }
}

impl<T> core::error::Error for PushError<T> {}

/// Why a pop returned no value.
///
/// ```
/// use pitlane_queue::PopError;
/// use pitlane_queue::mpmc::Queue;
///
/// let queue: Queue<u8> = Queue::new();
/// assert_eq!(queue.try_pop(), Err(PopError::Empty));
/// assert_eq!(PopError::Empty.to_string(), "the queue is empty");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PopError {
    /// The structure held no value at the moment the attempt looked (for a
    /// [`Bagpipe`](crate::bagpipe::Bagpipe): every pipe held none when it was looked at).
    /// Retrying at once is pointless; it only fills again when someone pushes.
    Empty,
    /// The attempt lost a race with another thread — a failed compare-and-swap, or a cell
    /// reached before the value meant for it — and had no effect. The structure may well hold
    /// values; retrying, here or on another bag, will eventually succeed or see
    /// [`PopError::Empty`].
    Transient,
}

impl fmt::Display for PopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Empty => "the queue is empty",
            Self::Transient => "lost a race with another thread; retry",
        })
    }
}

impl core::error::Error for PopError {}
