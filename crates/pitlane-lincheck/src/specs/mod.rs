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
    let mut names = Vec::with_capacity(ops.len());
    let count = ValueNames::name(ops, &mut names);
    let mut popped = vec![false; count];
    for (o, &name) in ops.iter().zip(&names) {
        if let ContainerRet::Popped(_) = o.result {
            popped[name as usize] = true;
        }
    }
    rename_unpopped(ops, &names, |name| popped[name as usize])
}

/// [`merge_unpopped`] of the operations `ops`, whose values are named by `names`
/// ([`ValueNames::name`]) and were popped when `popped(name)`.
pub(crate) fn rename_unpopped<T: Clone>(
    ops: &[Operation<ContainerOp<T>, ContainerRet<T>>],
    names: &[u32],
    popped: impl Fn(u32) -> bool,
) -> Option<History<ContainerOp<T>, ContainerRet<T>>> {
    // The value of a successful push whose value is never popped.
    let unpopped = |o, name| unpopped_value(o, name, &popped);
    let mut values = ops
        .iter()
        .zip(names)
        .filter_map(|(o, &name)| Some((unpopped(o, name)?, name)));
    let (value, first) = values.next()?;
    if values.all(|(_, name)| name == first) {
        return None;
    }
    let renamed = ops
        .iter()
        .zip(names)
        .map(|(o, &name)| {
            let mut renamed = o.clone();
            if unpopped(o, name).is_some() {
                renamed.op = ContainerOp::Push(value.clone());
            }
            renamed
        })
        .collect();
    Some(History::from_recorded(renamed))
}

fn unpopped_value<T>(
    o: &Operation<ContainerOp<T>, ContainerRet<T>>,
    name: u32,
    popped: impl Fn(u32) -> bool,
) -> Option<&T> {
    match (&o.op, &o.result) {
        (ContainerOp::Push(v), ContainerRet::Pushed) if !popped(name) => Some(v),
        _ => None,
    }
}

/// Small numbers standing for the values of a container history, equal for equal values, so
/// that the aids to the search ([`merge_unpopped`], the FIFO specs' implied orders) pair
/// pushes with pops through arrays rather than tables of values.
pub(crate) struct ValueNames;

impl ValueNames {
    /// The name of no value.
    pub(crate) const NONE: u32 = u32::MAX;

    /// Up to this many operations, values are named through a table on the stack of
    /// [`ValueNames::SLOTS`] slots (at least twice as many, so probes are short); beyond,
    /// through a hash table on the heap.
    const SMALL_UP_TO: usize = 64;

    /// The slots of the table on the stack.
    const SLOTS: usize = 128;

    /// Appends to `names` (which must be empty) the name of the value each operation of
    /// `ops` pushed successfully or got from a pop (`Popped`), or [`ValueNames::NONE`];
    /// returns how many distinct values there are (names run from 0 to that count less one).
    pub(crate) fn name<T: Eq + Hash>(
        ops: &[Operation<ContainerOp<T>, ContainerRet<T>>],
        names: &mut Vec<u32>,
    ) -> usize {
        assert!(names.is_empty(), "names are appended to an empty list");
        if ops.len() <= Self::SMALL_UP_TO {
            Self::by_small_table(ops, names)
        } else {
            Self::by_hash_table(ops, names)
        }
    }

    fn by_small_table<T: Eq + Hash>(
        ops: &[Operation<ContainerOp<T>, ContainerRet<T>>],
        names: &mut Vec<u32>,
    ) -> usize {
        let hasher = FixedState::default();
        // Each slot: an operation that moved the value hashed there, or none; open
        // addressing with linear probes.
        let mut table = [Self::NONE; Self::SLOTS];
        let mut count = 0;
        for (id, o) in ops.iter().enumerate() {
            let Some(v) = moved_value(o) else {
                names.push(Self::NONE);
                continue;
            };
            let mut slot = hasher.hash_one(v) as usize % Self::SLOTS;
            let name = loop {
                let seen = table[slot];
                if seen == Self::NONE {
                    table[slot] = id as u32;
                    count += 1;
                    break count as u32 - 1;
                }
                if moved_value(&ops[seen as usize]) == Some(v) {
                    break names[seen as usize];
                }
                slot = (slot + 1) % Self::SLOTS;
            };
            names.push(name);
        }
        count
    }

    fn by_hash_table<T: Eq + Hash>(
        ops: &[Operation<ContainerOp<T>, ContainerRet<T>>],
        names: &mut Vec<u32>,
    ) -> usize {
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
        count
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
pub(crate) mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use std::collections::HashSet;

    /// Operations of one thread in turn, with values below `spread` (so repeated when it is
    /// small), every result, and now and then a result no container gives (a push that
    /// popped).
    pub(crate) fn odd_container_ops(
        rng: &mut SplitMix64,
        len: usize,
        spread: u64,
    ) -> Vec<Operation<ContainerOp<u64>, ContainerRet<u64>>> {
        (0..len as u64)
            .map(|i| {
                let value = rng.below(spread);
                let (op, result) = match rng.below(9) {
                    0..=2 => (ContainerOp::Push(value), ContainerRet::Pushed),
                    3 => (ContainerOp::Push(value), ContainerRet::Full),
                    4..=6 => (ContainerOp::Pop, ContainerRet::Popped(value)),
                    7 => (ContainerOp::Pop, ContainerRet::Empty),
                    _ => (ContainerOp::Push(value), ContainerRet::Popped(value)),
                };
                Operation {
                    thread: i as usize,
                    call: 2 * i,
                    ret: 2 * i + 1,
                    op,
                    result,
                }
            })
            .collect()
    }

    /// Few values repeated often, and (where the spread is large) mostly distinct values.
    pub(crate) fn odd_sizes() -> impl Iterator<Item = (usize, u64)> {
        let sizes = [0, 1, 5, 40, 64, 65, 200].map(|len| (len, len as u64 / 3 + 1));
        sizes
            .into_iter()
            .chain([(5, 1 << 40), (64, 1 << 40), (200, 1 << 40)])
    }

    #[test]
    fn unpopped_values_are_merged_by_their_definition() {
        let mut rng = SplitMix64::new(11);
        for (len, spread) in odd_sizes() {
            for _ in 0..20 {
                let ops = odd_container_ops(&mut rng, len, spread);
                // By definition: the values of successful pushes that no result popped, all
                // renamed to the first of them, if they are not all one value.
                let popped: HashSet<u64> = ops
                    .iter()
                    .filter_map(|o| match o.result {
                        ContainerRet::Popped(v) => Some(v),
                        _ => None,
                    })
                    .collect();
                let unpopped = |o: &Operation<ContainerOp<u64>, ContainerRet<u64>>| match o {
                    Operation {
                        op: ContainerOp::Push(v),
                        result: ContainerRet::Pushed,
                        ..
                    } if !popped.contains(v) => Some(*v),
                    _ => None,
                };
                let values: Vec<u64> = ops.iter().filter_map(unpopped).collect();
                let expected = (values.iter().any(|&v| v != values[0])).then(|| {
                    let renamed = ops.iter().map(|o| Operation {
                        op: unpopped(o).map_or(o.op, |_| ContainerOp::Push(values[0])),
                        ..o.clone()
                    });
                    History::from_recorded(renamed.collect())
                });
                let history = History::from_recorded(ops.clone());
                assert_eq!(merge_unpopped(&history), expected, "{len}");
            }
        }
    }

    #[test]
    fn values_are_named_alike_by_small_table_and_by_hash_table() {
        let mut rng = SplitMix64::new(5);
        for (len, spread) in odd_sizes() {
            let ops = odd_container_ops(&mut rng, len, spread);
            let mut by_hash_table = Vec::new();
            let count = ValueNames::by_hash_table(&ops, &mut by_hash_table);
            if len <= ValueNames::SMALL_UP_TO {
                let mut by_small_table = Vec::new();
                let small_count = ValueNames::by_small_table(&ops, &mut by_small_table);
                assert_eq!(
                    (&by_small_table, small_count),
                    (&by_hash_table, count),
                    "{len}"
                );
            }
            let names = by_hash_table;
            assert!(
                names
                    .iter()
                    .all(|&n| n == ValueNames::NONE || (n as usize) < count)
            );
            // Equal names exactly for equal values.
            for (a, &na) in ops.iter().zip(&names) {
                for (b, &nb) in ops.iter().zip(&names) {
                    if na != ValueNames::NONE && nb != ValueNames::NONE {
                        assert_eq!(na == nb, moved_value(a) == moved_value(b));
                    }
                }
                assert_eq!(na == ValueNames::NONE, moved_value(a).is_none());
            }
        }
    }
}
