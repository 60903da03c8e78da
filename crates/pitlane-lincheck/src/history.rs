//! A history: completed operations, each with the thread that ran it, the interval from its
//! call to its return on one logical clock, what it asked for and what it got back.
//!
//! Histories come from a [`Recorder`](crate::Recorder) (merged from per-thread logs after the
//! threads join) or are written by hand with [`History::add`], as in the tests below and in
//! the examples of Herlihy & Wing's paper.
//!
//! Time is a logical clock: only the order of stamps matters. When a return and a call carry
//! the same stamp, the two operations count as overlapping (the call is taken to come first);
//! recorded histories never have equal stamps.

use std::fmt;
use std::ops::Range;

use crate::timeline::Timeline;

/// The position of an operation in its [`History`]: `history.operations()[id]`.
pub type OpId = usize;

/// One completed operation of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation<Op, Ret> {
    /// The thread (or process) that ran it; operations of one thread never overlap.
    pub thread: usize,
    /// The stamp taken just before the call.
    pub call: u64,
    /// The stamp taken just after the return; always greater than `call`.
    pub ret: u64,
    /// What was asked for.
    pub op: Op,
    /// What came back.
    pub result: Ret,
}

impl<Op, Ret> Operation<Op, Ret> {
    /// Whether `self` returned before `other` was called: the real-time order that every
    /// linearization must respect.
    pub fn precedes<Op2, Ret2>(&self, other: &Operation<Op2, Ret2>) -> bool {
        self.ret < other.call
    }

    /// Whether the two intervals share an instant (neither precedes the other).
    pub fn overlaps<Op2, Ret2>(&self, other: &Operation<Op2, Ret2>) -> bool {
        !self.precedes(other) && !other.precedes(self)
    }
}

/// Why an operation could not be added to a [`History`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryError {
    /// The return stamp is not after the call stamp.
    EmptyInterval {
        /// The call stamp given.
        call: u64,
        /// The return stamp given.
        ret: u64,
    },
    /// The operation overlaps an earlier operation of the same thread; a thread runs one
    /// operation at a time.
    OverlapsOwnThread {
        /// The thread of both operations.
        thread: usize,
        /// The operation already in the history that it overlaps.
        existing: OpId,
    },
}

impl fmt::Display for HistoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HistoryError::EmptyInterval { call, ret } => write!(
                f,
                "an operation must return after its call, but it was called at {call} and returned at {ret}"
            ),
            HistoryError::OverlapsOwnThread { thread, existing } => write!(
                f,
                "thread {thread} would run two operations at once: this one overlaps operation #{existing}"
            ),
        }
    }
}

impl std::error::Error for HistoryError {}

/// A set of completed operations of several threads.
///
/// # Examples
///
/// A push that returned before a pop began, and a pop that found the value:
///
/// ```
/// use pitlane_lincheck::History;
/// use pitlane_lincheck::specs::{ContainerOp, ContainerRet};
///
/// let mut history = History::new();
/// history.add(0, 0..1, ContainerOp::Push(7), ContainerRet::Pushed)?;
/// history.add(1, 2..3, ContainerOp::Pop, ContainerRet::Popped(7))?;
/// assert_eq!(history.len(), 2);
/// assert!(history.operations()[0].precedes(&history.operations()[1]));
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History<Op, Ret> {
    operations: Vec<Operation<Op, Ret>>,
}

impl<Op, Ret> Default for History<Op, Ret> {
    fn default() -> Self {
        History {
            operations: Vec::new(),
        }
    }
}

impl<Op, Ret> History<Op, Ret> {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an operation of `thread` that was called at `span.start` and returned at
    /// `span.end`, and returns its id.
    ///
    /// # Errors
    ///
    /// [`HistoryError::EmptyInterval`] when `span.end <= span.start`, and
    /// [`HistoryError::OverlapsOwnThread`] when the interval overlaps another operation of the
    /// same thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use pitlane_lincheck::{History, HistoryError};
    /// use pitlane_lincheck::specs::{RegisterOp, RegisterRet};
    ///
    /// let mut history = History::new();
    /// history.add(0, 0..4, RegisterOp::Write(1), RegisterRet::Written)?;
    /// let overlapping = history.add(0, 3..5, RegisterOp::Read, RegisterRet::Value(1));
    /// assert_eq!(overlapping, Err(HistoryError::OverlapsOwnThread { thread: 0, existing: 0 }));
    /// # Ok::<(), HistoryError>(())
    /// ```
    pub fn add(
        &mut self,
        thread: usize,
        span: Range<u64>,
        op: Op,
        result: Ret,
    ) -> Result<OpId, HistoryError> {
        self.push(Operation {
            thread,
            call: span.start,
            ret: span.end,
            op,
            result,
        })
    }

    /// Adds a completed operation and returns its id; the checks are those of [`History::add`].
    ///
    /// # Errors
    ///
    /// As for [`History::add`].
    pub fn push(&mut self, operation: Operation<Op, Ret>) -> Result<OpId, HistoryError> {
        if operation.ret <= operation.call {
            return Err(HistoryError::EmptyInterval {
                call: operation.call,
                ret: operation.ret,
            });
        }
        let same_thread = self
            .operations
            .iter()
            .position(|o| o.thread == operation.thread && o.overlaps(&operation));
        if let Some(existing) = same_thread {
            return Err(HistoryError::OverlapsOwnThread {
                thread: operation.thread,
                existing,
            });
        }
        self.operations.push(operation);
        Ok(self.operations.len() - 1)
    }

    /// Builds a history from recorded operations without checking them; the recorder's
    /// clock guarantees what [`History::push`] would check.
    pub(crate) fn from_recorded(operations: Vec<Operation<Op, Ret>>) -> Self {
        History { operations }
    }

    /// The operations, indexed by [`OpId`].
    pub fn operations(&self) -> &[Operation<Op, Ret>] {
        &self.operations
    }

    /// The operation with this id, if there is one.
    pub fn get(&self, id: OpId) -> Option<&Operation<Op, Ret>> {
        self.operations.get(id)
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// Whether there are no operations.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// One more than the highest thread number (0 for an empty history; `usize::MAX` when
    /// the highest is `usize::MAX` itself).
    pub fn threads(&self) -> usize {
        self.operations
            .iter()
            .map(|o| o.thread.saturating_add(1))
            .max()
            .unwrap_or(0)
    }

    /// A drawing of the history, a line per thread and each operation as an interval with
    /// its result; see [`Timeline`].
    pub fn timeline(&self) -> Timeline<'_, Op, Ret> {
        Timeline::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_an_operation_that_returns_before_it_is_called() {
        let mut history: History<u8, u8> = History::new();
        assert_eq!(
            history.add(0, 5..5, 1, 1),
            Err(HistoryError::EmptyInterval { call: 5, ret: 5 })
        );
        assert_eq!(
            history.add(0, Range { start: 6, end: 2 }, 1, 1),
            Err(HistoryError::EmptyInterval { call: 6, ret: 2 })
        );
        assert!(history.is_empty());
    }

    #[test]
    fn a_thread_runs_one_operation_at_a_time() {
        let mut history: History<u8, u8> = History::new();
        history.add(0, 2..4, 1, 1).unwrap();
        assert_eq!(history.add(1, 3..5, 1, 1), Ok(1));
        assert_eq!(
            history.add(0, 4..6, 1, 1),
            Err(HistoryError::OverlapsOwnThread {
                thread: 0,
                existing: 0
            })
        );
        assert_eq!(history.add(0, 5..6, 1, 1), Ok(2));
        assert_eq!(history.threads(), 2);
    }

    #[test]
    fn precedence_is_strict_real_time_order() {
        let a = Operation {
            thread: 0,
            call: 0,
            ret: 2,
            op: (),
            result: (),
        };
        let b = Operation {
            thread: 1,
            call: 2,
            ret: 3,
            op: (),
            result: (),
        };
        let c = Operation {
            thread: 1,
            call: 3,
            ret: 4,
            op: (),
            result: (),
        };
        assert!(
            a.overlaps(&b),
            "touching at one stamp counts as overlapping"
        );
        assert!(a.precedes(&c));
        assert!(!c.precedes(&a));
    }
}
