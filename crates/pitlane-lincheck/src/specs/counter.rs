use crate::spec::SequentialSpec;

/// An operation on a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterOp {
    /// Add this amount, returning nothing.
    Add(u64),
    /// Add this amount, returning the value before.
    FetchAdd(u64),
    /// Read the value.
    Get,
}

/// What a [`CounterOp`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterRet {
    /// An `Add` took effect.
    Added,
    /// The value read (by `Get`), or the value before (by `FetchAdd`).
    Value(u64),
}

/// A counter of `u64` that wraps around on overflow, starting from 0.
///
/// `Add(n)` returns `Added` and adds `n`; `FetchAdd(n)` returns `Value(v)` with the value `v`
/// before, and adds `n`; `Get` returns `Value(v)` with the current value.
///
/// # Examples
///
/// Two increments that both saw 0 (a lost update):
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{CounterOp::*, CounterRet::*, CounterSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..2, FetchAdd(1), Value(0))?;
/// history.add(1, 1..3, FetchAdd(1), Value(0))?;
/// assert!(!check(&CounterSpec::new(), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CounterSpec;

impl CounterSpec {
    /// A counter starting at 0.
    pub fn new() -> Self {
        CounterSpec
    }
}

impl SequentialSpec for CounterSpec {
    type Op = CounterOp;
    type Ret = CounterRet;
    /// The value.
    type State = u64;

    fn init(&self) -> u64 {
        0
    }

    fn step(&self, value: &u64, op: &CounterOp, ret: &CounterRet) -> Option<u64> {
        match (op, ret) {
            (CounterOp::Add(n), CounterRet::Added) => Some(value.wrapping_add(*n)),
            (CounterOp::FetchAdd(n), CounterRet::Value(before)) if before == value => {
                Some(value.wrapping_add(*n))
            }
            (CounterOp::Get, CounterRet::Value(v)) if v == value => Some(*value),
            _ => None,
        }
    }
}
