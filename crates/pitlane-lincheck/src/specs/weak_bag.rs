//! The weak bag of the Bagpipes design: a bag whose try operations may fail transiently.
//!
//! The Bagpipes seed (`shared/seeds/bagpipes-scalable-concurrent-bags.txt`) builds its bag
//! from "non-blocking data-structures with push and pop methods" that have "some notion of
//! transient failure that can be attributed to contention": `try_push(&self, T) ->
//! Result<(), T>` and `try_pop(&self) -> Result<T, PopError>` where the error is `Empty` or
//! `Transient`. pitlane's `WeakBag` speaks the same. [`WeakBagSpec`] states what such a
//! structure may answer, read as [`ContainerOp`] / [`ContainerRet`]:
//!
//! | call | result | allowed when | effect |
//! |---|---|---|---|
//! | `try_push(v)` | `Ok(())` → `Pushed` | always | one `v` is added |
//! | `try_push(v)` | `Err(v)` → `Transient` | always | none: `v` is handed back |
//! | `try_pop()` | `Ok(v)` → `Popped(v)` | `v` is present | one `v` is removed |
//! | `try_pop()` | `Err(Empty)` → `Empty` | the bag is empty | none |
//! | `try_pop()` | `Err(Transient)` → `Transient` | always | none |
//! | any | `Full` | never | — |
//!
//! Each operation takes effect at one instant between its call and its return, like any
//! linearizable object. So a checked history rules out a value popped that was never pushed,
//! a value popped more often than pushed, a push that was reported as failed yet later comes
//! out, and an `Empty` answer while some value was certainly inside for the whole call.
//! Order is not checked: a weak bag owes none.
//!
//! What this specification cannot rule out: a sequential specification cannot see
//! contention, so a transient failure is allowed in every state, and a structure that
//! always failed would pass. Whether failures really come from contention is a property of
//! the history; [`solo_transients`] finds the transient failures that overlapped no other
//! operation, for structures that promise an operation running alone succeeds. And a
//! structure whose `Empty` is not exact (the seed's Bagpipe, which visits its pipes one by
//! one) should report that answer as `Transient`: its history then still proves that
//! nothing was invented or duplicated, while loss has to be shown by draining it afterwards.

use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use super::bag::{multiset_insert, multiset_remove};
use super::{ContainerOp, ContainerRet};
use crate::history::{History, OpId};
use crate::spec::SequentialSpec;

/// A bag whose try operations may fail transiently; see the [module documentation](self)
/// for exactly what is allowed.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet::*, WeakBagSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..1, Push(1), Transient)?; // handed back
/// history.add(0, 2..3, Push(2), Pushed)?;
/// history.add(1, 4..5, Pop, Transient)?;
/// history.add(1, 6..7, Pop, Popped(2))?;
/// assert!(check(&WeakBagSpec::new(), &history).is_linearizable());
///
/// history.add(1, 8..9, Pop, Popped(1))?; // 1 was handed back, never pushed
/// assert!(!check(&WeakBagSpec::new(), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct WeakBagSpec<T> {
    values: PhantomData<fn() -> T>,
}

impl<T> WeakBagSpec<T> {
    /// The specification of an unbounded weak bag.
    pub fn new() -> Self {
        WeakBagSpec {
            values: PhantomData,
        }
    }
}

impl<T> Default for WeakBagSpec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + Ord + Hash + Debug> SequentialSpec for WeakBagSpec<T> {
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
            (_, ContainerRet::Transient) => Some(bag.clone()),
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

/// The operations that failed transiently while no other operation overlapped them.
///
/// A structure whose failures come only from contention returns none of these; the
/// sequential [`WeakBagSpec`] cannot tell (see the [module documentation](self)).
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::History;
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet, ContainerRet::*};
/// use pitlane_lincheck::specs::weak_bag::solo_transients;
///
/// let mut history = History::<_, ContainerRet<u32>>::new();
/// history.add(0, 0..3, Push(1), Pushed)?;
/// history.add(1, 2..4, Pop, Transient)?; // overlaps the push
/// history.add(1, 5..6, Pop, Transient)?; // ran alone
/// assert_eq!(solo_transients(&history), vec![2]);
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
pub fn solo_transients<T>(history: &History<ContainerOp<T>, ContainerRet<T>>) -> Vec<OpId> {
    let ops = history.operations();
    (0..ops.len())
        .filter(|&i| matches!(ops[i].result, ContainerRet::Transient))
        .filter(|&i| {
            !ops.iter()
                .enumerate()
                .any(|(j, other)| j != i && other.overlaps(&ops[i]))
        })
        .collect()
}
