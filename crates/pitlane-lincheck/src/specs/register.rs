use std::fmt::Debug;
use std::hash::Hash;

use crate::spec::SequentialSpec;

/// An operation on a register holding one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegisterOp<T> {
    /// Read the value.
    Read,
    /// Replace the value.
    Write(T),
    /// Replace the value with `new` if it equals `current` (like `compare_exchange`).
    CompareExchange {
        /// The value expected.
        current: T,
        /// The value to store.
        new: T,
    },
}

/// What a [`RegisterOp`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegisterRet<T> {
    /// The value read.
    Value(T),
    /// The write took effect.
    Written,
    /// As `compare_exchange`: `Ok(previous)` when it stored, `Err(actual)` when it did not.
    Exchanged(Result<T, T>),
}

/// A read/write register with compare-exchange, starting from a given value.
///
/// `Read` returns `Value(v)` for the current `v`; `Write(v)` returns `Written` and stores `v`;
/// `CompareExchange { current, new }` returns `Exchanged(Ok(current))` and stores `new` when
/// the value equals `current`, and `Exchanged(Err(v))` with the value `v` otherwise.
///
/// # Examples
///
/// A read that returns a value overwritten before it was called:
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{RegisterOp::*, RegisterRet::*, RegisterSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..1, Write(1), Written)?;
/// history.add(0, 2..3, Write(2), Written)?;
/// history.add(1, 4..5, Read, Value(1))?;
/// assert!(!check(&RegisterSpec::new(0), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RegisterSpec<T> {
    initial: T,
}

impl<T> RegisterSpec<T> {
    /// A register that starts out holding `initial`.
    pub fn new(initial: T) -> Self {
        RegisterSpec { initial }
    }
}

impl<T: Clone + Eq + Hash + Debug> SequentialSpec for RegisterSpec<T> {
    type Op = RegisterOp<T>;
    type Ret = RegisterRet<T>;
    /// The value held.
    type State = T;

    fn init(&self) -> T {
        self.initial.clone()
    }

    fn step(&self, value: &T, op: &RegisterOp<T>, ret: &RegisterRet<T>) -> Option<T> {
        match (op, ret) {
            (RegisterOp::Read, RegisterRet::Value(v)) if v == value => Some(value.clone()),
            (RegisterOp::Write(v), RegisterRet::Written) => Some(v.clone()),
            (
                RegisterOp::CompareExchange { current, new },
                RegisterRet::Exchanged(Ok(previous)),
            ) if value == current && previous == current => Some(new.clone()),
            (RegisterOp::CompareExchange { current, .. }, RegisterRet::Exchanged(Err(actual)))
                if value != current && actual == value =>
            {
                Some(value.clone())
            }
            _ => None,
        }
    }
}
