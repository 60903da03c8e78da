//! The sequential specification a history is checked against.

use std::fmt::Debug;
use std::hash::Hash;

use crate::history::{History, OpId};

/// What a structure does when its operations run one at a time.
///
/// A specification is a state machine. [`step`](SequentialSpec::step) is asked about one
/// operation *together with the result it was observed to return*: it answers with the next
/// state when that result is allowed from `state`, and `None` when it is not. A step may
/// allow several results (a bag's pop may return any element present; a weak bag's try
/// operations may also fail); the next state must follow from the state, the operation and
/// the result.
///
/// States are compared and hashed by the checker's memo cache, so two states that behave the
/// same should be equal (keep them canonical: a bag's state is a sorted vector, not the order
/// of insertion).
///
/// # Examples
///
/// A flag that can be set once:
///
/// ```
/// use pitlane_lincheck::{History, SequentialSpec, check};
///
/// struct OnceFlag;
///
/// #[derive(Debug)]
/// enum FlagOp { TrySet }
///
/// impl SequentialSpec for OnceFlag {
///     type Op = FlagOp;
///     type Ret = bool; // whether this call set it
///     type State = bool; // whether it is set
///
///     fn init(&self) -> bool {
///         false
///     }
///
///     fn step(&self, set: &bool, _op: &FlagOp, won: &bool) -> Option<bool> {
///         (*won != *set).then_some(true)
///     }
/// }
///
/// let mut history = History::new();
/// history.add(0, 0..3, FlagOp::TrySet, true)?;
/// history.add(1, 1..2, FlagOp::TrySet, true)?;
/// assert!(!check(&OnceFlag, &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
pub trait SequentialSpec {
    /// An operation as it is called, with its arguments.
    type Op: Debug;
    /// What an operation returns.
    type Ret: Debug;
    /// The abstract state of the structure.
    type State: Clone + Eq + Hash + Debug;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// The state after `op` returned `ret` from `state`, or `None` when `ret` is not a result
    /// `op` may return from `state`.
    fn step(&self, state: &Self::State, op: &Self::Op, ret: &Self::Ret) -> Option<Self::State>;

    /// An estimate of the bytes `state` holds on the heap (beyond `size_of::<Self::State>()`),
    /// 0 by default.
    ///
    /// The checker uses this only to keep its search within its memory budget
    /// ([`Checker::with_memory`](crate::Checker::with_memory)): it adds it up over the states
    /// it keeps. Nothing else depends on it, and a rough figure (the capacity of the
    /// collection the state holds, not counting what its values hold in turn) is enough; a
    /// specification whose states hold collections should give one, or a search with many
    /// large states may use more memory than the budget says.
    fn state_heap_bytes(&self, state: &Self::State) -> usize {
        let _ = state;
        0
    }

    /// An equivalent history for the checker to search instead, or `None` to search `history`
    /// as it is (the default).
    ///
    /// "Equivalent" means: linearizable exactly when `history` is, by the same orders, with
    /// the same operation ids. A specification uses this to make more states equal, so that
    /// the memo cache finds more of them: the containers of [`crate::specs`] give every value
    /// that is pushed but never popped one name, since such a value never reaches the end a
    /// pop takes from, and orders that differ only in where those values sit are the same.
    fn canonical(
        &self,
        history: &History<Self::Op, Self::Ret>,
    ) -> Option<History<Self::Op, Self::Ret>> {
        let _ = history;
        None
    }

    /// Pairs `(a, b)` of operation ids such that `a` takes effect before `b` in *every*
    /// linearization of `history`, beyond what real-time order already says; none by default.
    ///
    /// The checker only tries orders that respect them, which cuts its search without
    /// changing its verdict (a pair that does not hold in every linearization would make it
    /// wrong). The FIFO queue specs use this: with distinct values, values leave in the order
    /// they came in, so a pop that returned before another was called fixes the order of the
    /// two pushes, and two pushes in real-time order fix the order of their pops.
    fn implied_order(&self, history: &History<Self::Op, Self::Ret>) -> Vec<(OpId, OpId)> {
        let _ = history;
        Vec::new()
    }

    /// Both aids to the search for `history`, which is what the checker asks for: by
    /// default [`canonical`](SequentialSpec::canonical) and then
    /// [`implied_order`](SequentialSpec::implied_order), each of the history as given.
    ///
    /// A specification whose two aids start from the same work (the FIFO queues of
    /// [`crate::specs`] pair pushes with pops by value for both) can do that work once here;
    /// the answer must be the same as the two methods'.
    fn search_aids(
        &self,
        history: &History<Self::Op, Self::Ret>,
    ) -> SearchAids<Self::Op, Self::Ret> {
        SearchAids {
            canonical: self.canonical(history),
            implied_order: self.implied_order(history),
        }
    }
}

/// What a specification offers the checker to shorten its search of one history
/// ([`SequentialSpec::search_aids`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchAids<Op, Ret> {
    /// [`SequentialSpec::canonical`] of the history.
    pub canonical: Option<History<Op, Ret>>,
    /// [`SequentialSpec::implied_order`] of the history.
    pub implied_order: Vec<(OpId, OpId)>,
}

impl<S: SequentialSpec + ?Sized> SequentialSpec for &S {
    type Op = S::Op;
    type Ret = S::Ret;
    type State = S::State;

    fn init(&self) -> Self::State {
        (**self).init()
    }

    fn step(&self, state: &Self::State, op: &Self::Op, ret: &Self::Ret) -> Option<Self::State> {
        (**self).step(state, op, ret)
    }

    fn state_heap_bytes(&self, state: &Self::State) -> usize {
        (**self).state_heap_bytes(state)
    }

    fn canonical(
        &self,
        history: &History<Self::Op, Self::Ret>,
    ) -> Option<History<Self::Op, Self::Ret>> {
        (**self).canonical(history)
    }

    fn implied_order(&self, history: &History<Self::Op, Self::Ret>) -> Vec<(OpId, OpId)> {
        (**self).implied_order(history)
    }

    fn search_aids(
        &self,
        history: &History<Self::Op, Self::Ret>,
    ) -> SearchAids<Self::Op, Self::Ret> {
        (**self).search_aids(history)
    }
}
