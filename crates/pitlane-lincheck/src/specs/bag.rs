use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use super::{ContainerOp, ContainerRet};
use crate::history::History;
use crate::spec::SequentialSpec;

/// A bag (multiset): no order at all.
///
/// `Push(v)` returns `Pushed` and adds one `v`; `Pop` returns `Popped(v)` for any `v`
/// present and removes one of it, or `Empty` exactly when the bag is empty. `Full` and
/// `Transient` are never allowed. The state is the sorted multiset, so values need `Ord`.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{BagSpec, ContainerOp::*, ContainerRet::*};
///
/// let mut history = History::new();
/// history.add(0, 0..1, Push(1), Pushed)?;
/// history.add(0, 2..3, Push(2), Pushed)?;
/// history.add(1, 4..5, Pop, Popped(2))?;
/// history.add(1, 6..7, Pop, Popped(2))?; // 2 was in the bag once
/// assert!(!check(&BagSpec::new(), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct BagSpec<T> {
    values: PhantomData<fn() -> T>,
}

impl<T> BagSpec<T> {
    /// The specification of an unbounded bag.
    pub fn new() -> Self {
        BagSpec {
            values: PhantomData,
        }
    }
}

impl<T> Default for BagSpec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + Ord + Hash + Debug> SequentialSpec for BagSpec<T> {
    type Op = ContainerOp<T>;
    type Ret = ContainerRet<T>;
    /// The values present, sorted.
    type State = Vec<T>;

    fn init(&self) -> Vec<T> {
        Vec::new()
    }

    fn step(&self, bag: &Vec<T>, op: &ContainerOp<T>, ret: &ContainerRet<T>) -> Option<Vec<T>> {
        match (op, ret) {
            (ContainerOp::Push(v), ContainerRet::Pushed) => Some(multiset_insert(bag, v)),
            (ContainerOp::Pop, ContainerRet::Popped(v)) => multiset_remove(bag, v),
            (ContainerOp::Pop, ContainerRet::Empty) if bag.is_empty() => Some(Vec::new()),
            _ => None,
        }
    }

    fn state_heap_bytes(&self, bag: &Vec<T>) -> usize {
        bag.capacity() * std::mem::size_of::<T>()
    }

    fn canonical(
        &self,
        history: &History<ContainerOp<T>, ContainerRet<T>>,
    ) -> Option<History<ContainerOp<T>, ContainerRet<T>>> {
        super::merge_unpopped(history)
    }
}

/// `bag` (sorted) with one more `v`.
pub(super) fn multiset_insert<T: Clone + Ord>(bag: &[T], v: &T) -> Vec<T> {
    let at = bag.partition_point(|x| x <= v);
    let mut next = Vec::with_capacity(bag.len() + 1);
    next.extend_from_slice(&bag[..at]);
    next.push(v.clone());
    next.extend_from_slice(&bag[at..]);
    next
}

/// `bag` (sorted) with one `v` fewer, or `None` when `v` is not in it.
pub(super) fn multiset_remove<T: Clone + Ord>(bag: &[T], v: &T) -> Option<Vec<T>> {
    let at = bag.binary_search(v).ok()?;
    let mut next = Vec::with_capacity(bag.len() - 1);
    next.extend_from_slice(&bag[..at]);
    next.extend_from_slice(&bag[at + 1..]);
    Some(next)
}
