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

use std::hash::{BuildHasher, Hash};

use foldhash::fast::FixedState;
use hashbrown::hash_table::{Entry, HashTable};

use crate::history::{History, Operation};

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
    let values = ValueNames::of(ops);
    let mut popped = vec![false; values.count];
    for (o, &name) in ops.iter().zip(&values.names) {
        if let ContainerRet::Popped(_) = o.result {
            popped[name as usize] = true;
        }
    }
    let unpopped = |o: &Operation<ContainerOp<T>, ContainerRet<T>>, name: u32| {
        matches!(
            (&o.op, &o.result),
            (ContainerOp::Push(_), ContainerRet::Pushed)
        ) && !popped[name as usize]
    };
    let mut named = ops.iter().zip(values.names.iter().copied());
    let (first, first_name) = named.find(|&(o, name)| unpopped(o, name))?;
    if !named.any(|(o, name)| unpopped(o, name) && name != first_name) {
        return None;
    }
    let ContainerOp::Push(value) = &first.op else {
        unreachable!("a value never popped comes from a push");
    };
    let renamed = ops
        .iter()
        .zip(&values.names)
        .map(|(o, &name)| {
            let mut renamed = o.clone();
            if unpopped(o, name) {
                renamed.op = ContainerOp::Push(value.clone());
            }
            renamed
        })
        .collect();
    Some(History::from_recorded(renamed))
}

/// Small numbers standing for the values of a container history, equal for equal values, so
/// that the aids to the search ([`merge_unpopped`], the FIFO specs' implied orders) pair
/// pushes with pops through arrays rather than tables of values.
pub(crate) struct ValueNames {
    /// `names[op]`: the name of the value the operation pushed successfully or got from a
    /// pop (`Popped`), or [`ValueNames::NONE`].
    pub(crate) names: Vec<u32>,
    /// How many distinct values there are; names run from 0 to `count - 1`.
    pub(crate) count: usize,
}

impl ValueNames {
    /// The name of no value.
    pub(crate) const NONE: u32 = u32::MAX;

    /// Up to this many operations a value is named by comparing it with the values named
    /// before it (a few hundred comparisons for 32 operations, cheaper than hashing them);
    /// beyond, through a hash table.
    const SCAN_UP_TO: usize = 64;

    pub(crate) fn of<T: Eq + Hash>(ops: &[Operation<ContainerOp<T>, ContainerRet<T>>]) -> Self {
        let mut names = Vec::with_capacity(ops.len());
        let mut count = 0;
        if ops.len() <= Self::SCAN_UP_TO {
            let mut distinct: Vec<&T> = Vec::with_capacity(ops.len());
            for o in ops {
                let name = match moved_value(o) {
                    None => Self::NONE,
                    Some(v) => match distinct.iter().position(|&seen| seen == v) {
                        Some(name) => name as u32,
                        None => {
                            distinct.push(v);
                            distinct.len() as u32 - 1
                        }
                    },
                };
                names.push(name);
            }
            count = distinct.len();
        } else {
            let hasher = FixedState::default();
            // (hash of the value, its name, an operation that moved it)
            let mut table: HashTable<(u64, u32, usize)> = HashTable::with_capacity(ops.len());
            for (id, o) in ops.iter().enumerate() {
                let Some(v) = moved_value(o) else {
                    names.push(Self::NONE);
                    continue;
                };
                let hash = hasher.hash_one(v);
                let entry = table.entry(
                    hash,
                    |&(h, _, op)| h == hash && moved_value(&ops[op]) == Some(v),
                    |&(h, _, _)| h,
                );
                let name = match entry {
                    Entry::Occupied(seen) => seen.get().1,
                    Entry::Vacant(slot) => {
                        slot.insert((hash, count as u32, id));
                        count += 1;
                        count as u32 - 1
                    }
                };
                names.push(name);
            }
        }
        ValueNames { names, count }
    }
}

/// The value a successful push put in, or a pop's result took out.
fn moved_value<T>(o: &Operation<ContainerOp<T>, ContainerRet<T>>) -> Option<&T> {
    match (&o.op, &o.result) {
        (_, ContainerRet::Popped(v)) | (ContainerOp::Push(v), ContainerRet::Pushed) => Some(v),
        _ => None,
    }
}
