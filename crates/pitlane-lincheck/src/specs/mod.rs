//! Sequential specifications of the structures pitlane builds, ready to check against.
//!
//! | spec | operations | allows |
//! |---|---|---|
//! | [`QueueSpec`] | [`ContainerOp`] / [`ContainerRet`] | FIFO; `Empty` only when empty |
//! | [`BoundedQueueSpec`] | same | FIFO; `Full` exactly when full |
//! | [`StackSpec`] | same | LIFO; `Empty` only when empty |
//! | [`BagSpec`] | same | pop returns any present element; `Empty` only when empty |
//! | [`WeakBagSpec`] | same | a bag whose try operations may also fail transiently |
//! | [`PoolSpec`] | [`PoolOp`] / [`PoolRet`] | alloc hands out an object not allocated; free takes an allocated one |
//! | [`SemaphoreSpec`] | [`SemaphoreOp`] / [`SemaphoreRet`] | counting permits: acquire, try_acquire, release |
//! | [`RegisterSpec`] | [`RegisterOp`] / [`RegisterRet`] | read, write, compare-exchange of one value |
//! | [`CounterSpec`] | [`CounterOp`] / [`CounterRet`] | add, fetch-add and get of a wrapping `u64` |
//!
//! Queues, stacks and bags share one pair of operation types, so one adapter for a
//! structure can be checked against several specifications (a FIFO queue is also a bag).

mod bag;
mod counter;
mod pool;
mod queue;
mod register;
mod semaphore;
mod stack;
pub mod weak_bag;

pub use bag::BagSpec;
pub use counter::{CounterOp, CounterRet, CounterSpec};
pub use pool::{PoolOp, PoolRet, PoolSpec};
pub use queue::{BoundedQueueSpec, QueueSpec};
pub use register::{RegisterOp, RegisterRet, RegisterSpec};
pub use semaphore::{SemaphoreOp, SemaphoreRet, SemaphoreSpec};
pub use stack::StackSpec;
pub use weak_bag::WeakBagSpec;

use std::collections::HashSet;
use std::hash::Hash;

use foldhash::fast::FixedState;

use crate::history::History;

/// An operation on a container of values: a queue, a stack or a bag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContainerOp<T> {
    /// Put a value in (`push`, `try_push`, `enqueue`).
    Push(T),
    /// Take a value out (`pop`, `try_pop`, `dequeue`).
    Pop,
}

/// What a [`ContainerOp`] returned.
///
/// Which results a specification allows is documented on each spec; a result a spec never
/// allows (such as `Full` from an unbounded queue) makes every history containing it
/// non-linearizable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContainerRet<T> {
    /// The push took effect.
    Pushed,
    /// The push was refused because the container was full; it had no effect.
    Full,
    /// The pop took this value out.
    Popped(T),
    /// The pop found the container empty.
    Empty,
    /// A try operation failed transiently (contention) and had no effect; only weak bags
    /// return this.
    Transient,
}

impl<T> From<Option<T>> for ContainerRet<T> {
    /// A pop's `Option`: `Some(v)` is `Popped(v)`, `None` is `Empty`.
    fn from(popped: Option<T>) -> Self {
        match popped {
            Some(v) => ContainerRet::Popped(v),
            None => ContainerRet::Empty,
        }
    }
}

/// `history` with every value that is pushed (successfully) but never popped renamed to one
/// of them, or `None` when fewer than two distinct such values exist.
///
/// Sound for queues, stacks and bags, bounded or weak: a pop that finds the container
/// non-empty returns the value it takes, so a value never popped is never the one taken, and
/// which never-popped value sits where changes no result; only how many there are matters.
pub(crate) fn merge_unpopped<T: Clone + Eq + Hash>(
    history: &History<ContainerOp<T>, ContainerRet<T>>,
) -> Option<History<ContainerOp<T>, ContainerRet<T>>> {
    let ops = history.operations();
    let mut popped: HashSet<&T, FixedState> =
        HashSet::with_capacity_and_hasher(ops.len(), FixedState::default());
    popped.extend(ops.iter().filter_map(|o| match &o.result {
        ContainerRet::Popped(v) => Some(v),
        _ => None,
    }));
    // The value of each successful push whose value is never popped.
    let unpopped: Vec<Option<&T>> = ops
        .iter()
        .map(|o| match (&o.op, &o.result) {
            (ContainerOp::Push(v), ContainerRet::Pushed) if !popped.contains(v) => Some(v),
            _ => None,
        })
        .collect();
    let mut names = unpopped.iter().flatten();
    let name = *names.next()?;
    if names.all(|v| *v == name) {
        return None;
    }
    let renamed = ops
        .iter()
        .zip(&unpopped)
        .map(|(o, unpopped)| {
            let mut renamed = o.clone();
            if unpopped.is_some() {
                renamed.op = ContainerOp::Push(name.clone());
            }
            renamed
        })
        .collect();
    Some(History::from_recorded(renamed))
}
