use std::collections::VecDeque;
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use super::{ContainerOp, ContainerRet};
use crate::history::History;
use crate::spec::SequentialSpec;

/// A first-in first-out queue without a bound.
///
/// `Push(v)` returns `Pushed` and appends `v`; `Pop` returns `Popped(front)` and removes it,
/// or `Empty` exactly when the queue is empty. `Full` and `Transient` are never allowed.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet::*, QueueSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..1, Push(1), Pushed)?;
/// history.add(0, 2..3, Push(2), Pushed)?;
/// history.add(1, 4..5, Pop, Popped(2))?; // 1 went in first: not FIFO
/// assert!(!check(&QueueSpec::new(), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct QueueSpec<T> {
    values: PhantomData<fn() -> T>,
}

impl<T> QueueSpec<T> {
    /// The specification of an unbounded FIFO queue.
    pub fn new() -> Self {
        QueueSpec {
            values: PhantomData,
        }
    }
}

impl<T> Default for QueueSpec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + Eq + Hash + Debug> SequentialSpec for QueueSpec<T> {
    type Op = ContainerOp<T>;
    type Ret = ContainerRet<T>;
    type State = VecDeque<T>;

    fn init(&self) -> VecDeque<T> {
        VecDeque::new()
    }

    fn step(
        &self,
        queue: &VecDeque<T>,
        op: &ContainerOp<T>,
        ret: &ContainerRet<T>,
    ) -> Option<VecDeque<T>> {
        fifo_step(queue, op, ret, usize::MAX)
    }

    fn canonical(
        &self,
        history: &History<ContainerOp<T>, ContainerRet<T>>,
    ) -> Option<History<ContainerOp<T>, ContainerRet<T>>> {
        super::merge_unpopped(history)
    }
}

/// A first-in first-out queue holding at most `capacity` values.
///
/// As [`QueueSpec`], except that `Push(v)` returns `Full` (and changes nothing) exactly when
/// the queue holds `capacity` values, and `Pushed` exactly when it holds fewer.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{BoundedQueueSpec, ContainerOp::*, ContainerRet::*};
///
/// let mut history = History::new();
/// history.add(0, 0..1, Push(1), Pushed)?;
/// history.add(0, 2..3, Push(2), Full)?;
/// assert!(check(&BoundedQueueSpec::new(1), &history).is_linearizable());
/// assert!(!check(&BoundedQueueSpec::new(2), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct BoundedQueueSpec<T> {
    capacity: usize,
    values: PhantomData<fn() -> T>,
}

impl<T> BoundedQueueSpec<T> {
    /// The specification of a FIFO queue that holds at most `capacity` values.
    pub fn new(capacity: usize) -> Self {
        BoundedQueueSpec {
            capacity,
            values: PhantomData,
        }
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl<T: Clone + Eq + Hash + Debug> SequentialSpec for BoundedQueueSpec<T> {
    type Op = ContainerOp<T>;
    type Ret = ContainerRet<T>;
    type State = VecDeque<T>;

    fn init(&self) -> VecDeque<T> {
        VecDeque::new()
    }

    fn step(
        &self,
        queue: &VecDeque<T>,
        op: &ContainerOp<T>,
        ret: &ContainerRet<T>,
    ) -> Option<VecDeque<T>> {
        fifo_step(queue, op, ret, self.capacity)
    }

    fn canonical(
        &self,
        history: &History<ContainerOp<T>, ContainerRet<T>>,
    ) -> Option<History<ContainerOp<T>, ContainerRet<T>>> {
        super::merge_unpopped(history)
    }
}

fn fifo_step<T: Clone + Eq>(
    queue: &VecDeque<T>,
    op: &ContainerOp<T>,
    ret: &ContainerRet<T>,
    capacity: usize,
) -> Option<VecDeque<T>> {
    match (op, ret) {
        (ContainerOp::Push(v), ContainerRet::Pushed) if queue.len() < capacity => {
            // One allocation of the final size (a clone, then a push, would grow it again).
            let mut next = VecDeque::with_capacity(queue.len() + 1);
            next.extend(queue.iter().cloned());
            next.push_back(v.clone());
            Some(next)
        }
        (ContainerOp::Push(_), ContainerRet::Full) if queue.len() >= capacity => {
            Some(queue.clone())
        }
        (ContainerOp::Pop, ContainerRet::Popped(v)) if queue.front() == Some(v) => {
            Some(queue.iter().skip(1).cloned().collect())
        }
        (ContainerOp::Pop, ContainerRet::Empty) if queue.is_empty() => Some(queue.clone()),
        _ => None,
    }
}
