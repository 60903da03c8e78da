use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use super::{ContainerOp, ContainerRet, StackState};
use crate::history::History;
use crate::spec::SequentialSpec;

/// A last-in first-out stack without a bound.
///
/// `Push(v)` returns `Pushed` and puts `v` on top; `Pop` returns `Popped(top)` and removes
/// it, or `Empty` exactly when the stack is empty. `Full` and `Transient` are never allowed.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet::*, StackSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..1, Push(1), Pushed)?;
/// history.add(0, 2..3, Push(2), Pushed)?;
/// history.add(1, 4..5, Pop, Popped(2))?;
/// assert!(check(&StackSpec::new(), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StackSpec<T> {
    values: PhantomData<fn() -> T>,
}

impl<T> StackSpec<T> {
    /// The specification of an unbounded LIFO stack.
    pub fn new() -> Self {
        StackSpec {
            values: PhantomData,
        }
    }
}

impl<T> Default for StackSpec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + Eq + Hash + Debug> SequentialSpec for StackSpec<T> {
    type Op = ContainerOp<T>;
    type Ret = ContainerRet<T>;
    type State = StackState<T>;

    fn init(&self) -> StackState<T> {
        StackState::new()
    }

    fn step(
        &self,
        stack: &StackState<T>,
        op: &ContainerOp<T>,
        ret: &ContainerRet<T>,
    ) -> Option<StackState<T>> {
        match (op, ret) {
            (ContainerOp::Push(v), ContainerRet::Pushed) => Some(stack.pushed(v)),
            (ContainerOp::Pop, ContainerRet::Popped(v)) if stack.top() == Some(v) => {
                Some(stack.popped())
            }
            (ContainerOp::Pop, ContainerRet::Empty) if stack.is_empty() => Some(StackState::new()),
            _ => None,
        }
    }

    fn state_heap_bytes(&self, stack: &StackState<T>) -> usize {
        stack.heap_bytes()
    }

    fn canonical(
        &self,
        history: &History<ContainerOp<T>, ContainerRet<T>>,
    ) -> Option<History<ContainerOp<T>, ContainerRet<T>>> {
        super::merge_unpopped(history)
    }
}
