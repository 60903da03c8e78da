//! A fast check for FIFO queue histories whose pushed values are all distinct: look for the
//! bad patterns instead of searching for an order.
//!
//! Henzinger, Sezgin & Vafeiadis ("Aspect-oriented linearizability proofs", CONCUR 2013)
//! show that a queue history in which every value is pushed at most once is linearizable
//! exactly when it contains none of a few patterns. This module looks for these:
//!
//! - **fresh**: a pop returns a value that was never pushed, or whose push was called only
//!   after the pop returned;
//! - **repeated**: two pops return the same value;
//! - **order**: `push(x)` returned before `push(y)` was called, `y` was popped, and `x` was
//!   either never popped or popped only after `y`'s pop returned;
//! - **empty**: a pop answers `Empty` although at every instant of its call some value was
//!   certainly inside (pushed by a push that had returned, and not yet popped by a pop that
//!   had been called).
//!
//! Every pattern found is a real violation (each one rules out all orders on its own). For
//! histories without `Empty` answers, finding none proves the history linearizable (the
//! theorem above). With `Empty` answers, the emptiness pattern here is the one written
//! above, which may not capture every way an empty answer can be wrong, so finding nothing
//! is not a proof: use [`check`](crate::check) for a verdict. The crate's tests compare
//! the two on thousands of histories.
//!
//! Cost: quadratic in the number of operations (every pair of pushes for the order
//! pattern), with no search: microseconds for the histories the runner makes.

use std::collections::HashMap;

use foldhash::fast::FixedState;
use std::hash::Hash;

use crate::history::{History, OpId, Operation};
use crate::specs::{ContainerOp, ContainerRet};

/// What [`check_queue`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueCheck {
    /// No pattern: linearizable when the history has no `Empty` answer (see the module
    /// documentation), undecided otherwise.
    NoPattern {
        /// Whether some pop answered `Empty` (then "no pattern" is not a proof).
        has_empty: bool,
    },
    /// A pattern that makes the history not linearizable.
    Violation(QueueViolation),
    /// The check does not apply: a value is pushed twice, or a result other than `Pushed`,
    /// `Popped` or `Empty` occurs (use [`check`](crate::check) with the right spec).
    NotApplicable(&'static str),
}

impl QueueCheck {
    /// Whether the history is proved linearizable: no pattern and no `Empty` answer.
    pub fn proves_linearizable(&self) -> bool {
        matches!(self, QueueCheck::NoPattern { has_empty: false })
    }
}

/// A bad pattern, naming the operations that form it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueViolation {
    /// `pop` returned a value never pushed, or pushed only after `pop` returned.
    Fresh {
        /// The pop.
        pop: OpId,
    },
    /// Two pops returned the same value.
    Repeated {
        /// The first pop, in the history's order.
        first: OpId,
        /// The other.
        second: OpId,
    },
    /// `earlier_push` returned before `later_push` was called, and `later_pop` took the later
    /// value while the earlier one was never popped (`earlier_pop` is `None`) or popped only
    /// after `later_pop` returned.
    Order {
        /// The push that finished first.
        earlier_push: OpId,
        /// The push that started after it.
        later_push: OpId,
        /// The pop of the later value.
        later_pop: OpId,
        /// The pop of the earlier value, if any.
        earlier_pop: Option<OpId>,
    },
    /// `pop` answered `Empty` while some value was certainly inside at every instant of it.
    Empty {
        /// The pop.
        pop: OpId,
    },
}

/// Looks for the bad patterns of a FIFO queue in `history`; see the module documentation.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::History;
/// use pitlane_lincheck::queue_patterns::{QueueCheck, QueueViolation, check_queue};
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet::*};
///
/// let mut history = History::new();
/// history.add(0, 0..1, Push(1), Pushed)?;
/// history.add(1, 2..3, Push(2), Pushed)?;
/// history.add(0, 4..5, Pop, Popped(2))?;
/// assert_eq!(
///     check_queue(&history),
///     QueueCheck::Violation(QueueViolation::Order {
///         earlier_push: 0,
///         later_push: 1,
///         later_pop: 2,
///         earlier_pop: None,
///     })
/// );
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
pub fn check_queue<T: Eq + Hash>(history: &History<ContainerOp<T>, ContainerRet<T>>) -> QueueCheck {
    let ops = history.operations();
    // The push and the pop of each value.
    let mut push_of: HashMap<&T, OpId, FixedState> =
        HashMap::with_capacity_and_hasher(ops.len(), FixedState::default());
    let mut pop_of: HashMap<&T, OpId, FixedState> =
        HashMap::with_capacity_and_hasher(ops.len(), FixedState::default());
    let mut empties: Vec<OpId> = Vec::new();
    // Reported only once every push is known to be of a distinct value: a value pushed twice
    // may well be popped twice (and an operation listed later may be that second push).
    let mut repeated = None;
    for (id, o) in ops.iter().enumerate() {
        match (&o.op, &o.result) {
            (ContainerOp::Push(v), ContainerRet::Pushed) => {
                if push_of.insert(v, id).is_some() {
                    return QueueCheck::NotApplicable("a value is pushed more than once");
                }
            }
            (ContainerOp::Pop, ContainerRet::Popped(v)) => {
                if let Some(first) = pop_of.insert(v, id) {
                    repeated.get_or_insert(QueueViolation::Repeated { first, second: id });
                }
            }
            (ContainerOp::Pop, ContainerRet::Empty) => empties.push(id),
            _ => {
                return QueueCheck::NotApplicable(
                    "only Push -> Pushed, Pop -> Popped and Pop -> Empty are checked",
                );
            }
        }
    }
    if let Some(repeated) = repeated {
        return QueueCheck::Violation(repeated);
    }
    for (id, o) in ops.iter().enumerate() {
        if let (ContainerOp::Pop, ContainerRet::Popped(v)) = (&o.op, &o.result) {
            match push_of.get(v) {
                Some(&push) if !o.precedes(&ops[push]) => {}
                _ => return QueueCheck::Violation(QueueViolation::Fresh { pop: id }),
            }
        }
    }
    // Pushes in order of their calls, so that for each push only the pushes that returned
    // before its call need looking at.
    let mut pushes: Vec<(OpId, &T)> = push_of.iter().map(|(v, &id)| (id, *v)).collect();
    pushes.sort_unstable_by_key(|&(id, _)| (ops[id].call, id));
    for &(later_push, later) in &pushes {
        let Some(&later_pop) = pop_of.get(later) else {
            continue;
        };
        for &(earlier_push, earlier) in &pushes {
            if ops[earlier_push].call >= ops[later_push].call {
                break;
            }
            if !ops[earlier_push].precedes(&ops[later_push]) {
                continue;
            }
            let earlier_pop = pop_of.get(earlier).copied();
            let out_of_order = match earlier_pop {
                None => true,
                Some(pop) => ops[later_pop].precedes(&ops[pop]),
            };
            if out_of_order {
                return QueueCheck::Violation(QueueViolation::Order {
                    earlier_push,
                    later_push,
                    later_pop,
                    earlier_pop,
                });
            }
        }
    }
    if let Some(pop) = empty_while_surely_full(ops, &push_of, &pop_of, &empties) {
        return QueueCheck::Violation(QueueViolation::Empty { pop });
    }
    QueueCheck::NoPattern {
        has_empty: !empties.is_empty(),
    }
}

/// The first `Empty` pop whose whole interval is covered by times at which some value is
/// certainly inside: after its push returned and before its pop (if any) was called.
fn empty_while_surely_full<T: Eq + Hash>(
    ops: &[Operation<ContainerOp<T>, ContainerRet<T>>],
    push_of: &HashMap<&T, OpId, FixedState>,
    pop_of: &HashMap<&T, OpId, FixedState>,
    empties: &[OpId],
) -> Option<OpId> {
    if empties.is_empty() {
        return None;
    }
    // Open intervals (from, until) of certain presence, by start.
    let mut inside: Vec<(u64, u64)> = push_of
        .iter()
        .map(|(v, &push)| {
            let until = pop_of.get(v).map_or(u64::MAX, |&pop| ops[pop].call);
            (ops[push].ret, until)
        })
        .filter(|(from, until)| from < until)
        .collect();
    inside.sort_unstable();
    empties.iter().copied().find(|&pop| {
        // Is every point of [call, ret] strictly inside some interval? Sweep: `reach` is the
        // first point not yet known to be covered.
        let (call, ret) = (ops[pop].call, ops[pop].ret);
        let mut reach = call;
        let mut next = 0;
        let mut best_until = None::<u64>;
        loop {
            while next < inside.len() && inside[next].0 < reach {
                let until = inside[next].1;
                if until > reach {
                    best_until = Some(best_until.map_or(until, |b| b.max(until)));
                }
                next += 1;
            }
            match best_until {
                Some(until) if until > reach => {
                    if until > ret {
                        return true;
                    }
                    reach = until;
                }
                _ => return false,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::ContainerOp::{Pop, Push};
    use crate::specs::ContainerRet::{Empty, Full, Popped, Pushed};

    type Queue = History<ContainerOp<u32>, ContainerRet<u32>>;

    #[test]
    fn fresh_and_repeated_values() {
        let mut h = Queue::new();
        h.add(0, 0..1, Pop, Popped(9)).unwrap();
        assert_eq!(
            check_queue(&h),
            QueueCheck::Violation(QueueViolation::Fresh { pop: 0 })
        );
        let mut h = Queue::new();
        h.add(0, 0..1, Pop, Popped(9)).unwrap();
        h.add(1, 2..3, Push(9), Pushed).unwrap();
        assert_eq!(
            check_queue(&h),
            QueueCheck::Violation(QueueViolation::Fresh { pop: 0 })
        );
        let mut h = Queue::new();
        h.add(0, 0..3, Push(9), Pushed).unwrap();
        h.add(1, 1..2, Pop, Popped(9)).unwrap();
        h.add(1, 4..5, Pop, Popped(9)).unwrap();
        assert_eq!(
            check_queue(&h),
            QueueCheck::Violation(QueueViolation::Repeated {
                first: 1,
                second: 2
            })
        );
    }

    #[test]
    fn empty_covered_by_two_values_in_turn() {
        // Neither value covers the empty pop alone; together they do.
        let mut h = Queue::new();
        h.add(0, 0..1, Push(1), Pushed).unwrap();
        h.add(1, 2..10, Pop, Empty).unwrap();
        h.add(2, 3..4, Push(2), Pushed).unwrap();
        h.add(0, 5..6, Pop, Popped(1)).unwrap();
        h.add(0, 12..13, Pop, Popped(2)).unwrap();
        assert_eq!(
            check_queue(&h),
            QueueCheck::Violation(QueueViolation::Empty { pop: 1 })
        );
        assert!(crate::check(&crate::specs::QueueSpec::new(), &h).is_violation());
        // With a gap between the two, the pop may be empty in it.
        let mut h = Queue::new();
        h.add(0, 0..1, Push(1), Pushed).unwrap();
        h.add(1, 2..10, Pop, Empty).unwrap();
        h.add(2, 6..7, Push(2), Pushed).unwrap();
        h.add(0, 4..5, Pop, Popped(1)).unwrap();
        h.add(0, 12..13, Pop, Popped(2)).unwrap();
        assert_eq!(check_queue(&h), QueueCheck::NoPattern { has_empty: true });
        assert!(crate::check(&crate::specs::QueueSpec::new(), &h).is_linearizable());
    }

    #[test]
    fn not_applicable_outside_unbounded_distinct_queues() {
        let mut h = Queue::new();
        h.add(0, 0..1, Push(1), Pushed).unwrap();
        h.add(0, 2..3, Push(1), Pushed).unwrap();
        assert!(matches!(check_queue(&h), QueueCheck::NotApplicable(_)));
        let mut h = Queue::new();
        h.add(0, 0..1, Push(1), Full).unwrap();
        assert!(matches!(check_queue(&h), QueueCheck::NotApplicable(_)));
    }

    #[test]
    fn overlap_allows_either_order() {
        let mut h = Queue::new();
        h.add(0, 0..3, Push(1), Pushed).unwrap();
        h.add(1, 1..4, Push(2), Pushed).unwrap();
        h.add(0, 5..6, Pop, Popped(2)).unwrap();
        h.add(1, 7..8, Pop, Popped(1)).unwrap();
        assert!(check_queue(&h).proves_linearizable());
    }
}
