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
mod state;
pub mod weak_bag;

pub use bag::BagSpec;
pub use counter::{CounterOp, CounterRet, CounterSpec};
pub use pool::{PoolOp, PoolRet, PoolSpec};
pub use queue::{BoundedQueueSpec, QueueSpec};
pub use register::{RegisterOp, RegisterRet, RegisterSpec};
pub use semaphore::{SemaphoreOp, SemaphoreRet, SemaphoreSpec};
pub use stack::StackSpec;
pub use state::{QueueState, StackState};
pub use weak_bag::WeakBagSpec;

use std::collections::HashSet;
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
    let popped = PoppedValues::of(ops);
    // The value of a successful push whose value is never popped.
    let unpopped = |o| unpopped_value(o, &popped);
    let mut values = ops.iter().filter_map(unpopped);
    let name = values.next()?;
    if values.all(|v| v == name) {
        return None;
    }
    let renamed = ops
        .iter()
        .map(|o| {
            let mut renamed = o.clone();
            if unpopped(o).is_some() {
                renamed.op = ContainerOp::Push(name.clone());
            }
            renamed
        })
        .collect();
    Some(History::from_recorded(renamed))
}

fn unpopped_value<'a, T: Eq + Hash>(
    o: &'a Operation<ContainerOp<T>, ContainerRet<T>>,
    popped: &PoppedValues<'_, T>,
) -> Option<&'a T> {
    match (&o.op, &o.result) {
        (ContainerOp::Push(v), ContainerRet::Pushed) if !popped.contains(v) => Some(v),
        _ => None,
    }
}

/// The values that pops of a container history returned.
enum PoppedValues<'a, T> {
    /// For a short history, a list to scan (cheaper than hashing every value).
    Few(Vec<&'a T>),
    Many(HashSet<&'a T, FixedState>),
}

impl<'a, T: Eq + Hash> PoppedValues<'a, T> {
    fn of(ops: &'a [Operation<ContainerOp<T>, ContainerRet<T>>]) -> Self {
        let popped = ops.iter().filter_map(|o| match &o.result {
            ContainerRet::Popped(v) => Some(v),
            _ => None,
        });
        if ops.len() <= ValueNames::SCAN_UP_TO {
            let mut values = Vec::with_capacity(ops.len());
            values.extend(popped);
            PoppedValues::Few(values)
        } else {
            let mut values = HashSet::with_capacity_and_hasher(ops.len(), FixedState::default());
            values.extend(popped);
            PoppedValues::Many(values)
        }
    }

    fn contains(&self, v: &T) -> bool {
        match self {
            PoppedValues::Few(values) => values.contains(&v),
            PoppedValues::Many(values) => values.contains(v),
        }
    }
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
        if ops.len() <= Self::SCAN_UP_TO {
            Self::by_scan(ops)
        } else {
            Self::by_hash(ops)
        }
    }

    fn by_scan<T: Eq>(ops: &[Operation<ContainerOp<T>, ContainerRet<T>>]) -> Self {
        let mut names = Vec::with_capacity(ops.len());
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
        let count = distinct.len();
        ValueNames { names, count }
    }

    fn by_hash<T: Eq + Hash>(ops: &[Operation<ContainerOp<T>, ContainerRet<T>>]) -> Self {
        let mut names = Vec::with_capacity(ops.len());
        let mut count = 0;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn values_are_named_alike_by_scan_and_by_hash() {
        let mut rng = SplitMix64::new(5);
        for len in [0, 1, 5, 40, 64, 65, 200] {
            let mut ops = Vec::new();
            for i in 0..len as u64 {
                let value = rng.below(len as u64 / 3 + 1);
                let (op, result) = match rng.below(4) {
                    0 => (ContainerOp::Push(value), ContainerRet::Pushed),
                    1 => (ContainerOp::Push(value), ContainerRet::Full),
                    2 => (ContainerOp::Pop, ContainerRet::Popped(value)),
                    _ => (ContainerOp::Pop, ContainerRet::Empty),
                };
                ops.push(Operation {
                    thread: i as usize,
                    call: 2 * i,
                    ret: 2 * i + 1,
                    op,
                    result,
                });
            }
            let (scan, hash) = (ValueNames::by_scan(&ops), ValueNames::by_hash(&ops));
            assert_eq!(
                (&scan.names, scan.count),
                (&hash.names, hash.count),
                "{len}"
            );
            // Equal names exactly for equal values.
            for (a, &na) in ops.iter().zip(&scan.names) {
                for (b, &nb) in ops.iter().zip(&scan.names) {
                    if na != ValueNames::NONE && nb != ValueNames::NONE {
                        assert_eq!(na == nb, moved_value(a) == moved_value(b));
                    }
                }
                assert_eq!(na == ValueNames::NONE, moved_value(a).is_none());
            }
        }
    }
}
