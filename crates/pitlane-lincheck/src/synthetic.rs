//! Histories made without threads: a sequential model run by a simulated scheduler.
//!
//! Each simulated thread steps through call, effect and return of each operation of its
//! script; a seeded random choice picks which thread takes the next step, so operations
//! overlap as they do on a real machine, and every history is linearizable by construction
//! (the effects happen one at a time, each inside its operation's interval). The same seed
//! gives the same history on every machine, which is what the benchmark of the checker and
//! tests that compare checkers need. [`lose_one_push`] turns such a history into one that is
//! not linearizable.

use std::collections::VecDeque;

use crate::history::{History, Operation};
use crate::rng::SplitMix64;
use crate::runner::{OpSlot, Shape};
use crate::specs::{ContainerOp, ContainerRet};
use crate::workload;

/// Where a simulated thread is in its current operation.
#[derive(Clone, Copy)]
enum Step {
    /// About to call its next operation.
    Call,
    /// Called at this stamp; its effect has not happened yet.
    Effect { call: u64 },
    /// Called at this stamp and took effect with this result; about to return.
    Return {
        call: u64,
        result: ContainerRet<u64>,
    },
}

/// A linearizable history of a FIFO queue: `shape.threads` simulated threads each run
/// `shape.ops_per_thread` operations of [`workload::push_pop`], interleaved at random from
/// `seed`.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::specs::QueueSpec;
/// use pitlane_lincheck::synthetic::queue_history;
/// use pitlane_lincheck::{Shape, check};
///
/// let shape = Shape { threads: 4, ops_per_thread: 8 };
/// let history = queue_history(shape, 42);
/// assert_eq!(history.len(), 32);
/// assert_eq!(history, queue_history(shape, 42));
/// assert!(check(&QueueSpec::new(), &history).is_linearizable());
/// ```
pub fn queue_history(shape: Shape, seed: u64) -> History<ContainerOp<u64>, ContainerRet<u64>> {
    let mut rng = SplitMix64::new(seed);
    let scripts: Vec<Vec<ContainerOp<u64>>> = (0..shape.threads)
        .map(|thread| {
            (0..shape.ops_per_thread)
                .map(|index| {
                    workload::push_pop(&mut OpSlot {
                        thread,
                        index,
                        serial: (thread * shape.ops_per_thread + index) as u64,
                        rng: &mut rng,
                    })
                })
                .collect()
        })
        .collect();
    let mut next = vec![0usize; shape.threads];
    let mut step = vec![Step::Call; shape.threads];
    let mut queue = VecDeque::new();
    let mut clock = 0u64;
    let mut operations = Vec::with_capacity(shape.threads * shape.ops_per_thread);
    loop {
        let busy: Vec<usize> = (0..shape.threads)
            .filter(|&t| next[t] < shape.ops_per_thread)
            .collect();
        if busy.is_empty() {
            break;
        }
        let thread = busy[rng.below(busy.len() as u64) as usize];
        let op = scripts[thread][next[thread]];
        step[thread] = match step[thread] {
            Step::Call => {
                clock += 1;
                Step::Effect { call: clock }
            }
            Step::Effect { call } => {
                let result = match op {
                    ContainerOp::Push(v) => {
                        queue.push_back(v);
                        ContainerRet::Pushed
                    }
                    ContainerOp::Pop => queue.pop_front().into(),
                };
                Step::Return { call, result }
            }
            Step::Return { call, result } => {
                clock += 1;
                operations.push(Operation {
                    thread,
                    call,
                    ret: clock,
                    op,
                    result,
                });
                next[thread] += 1;
                Step::Call
            }
        };
    }
    History::from_recorded(operations)
}

/// The history with one value made to vanish: the first pop that took a value whose push
/// had returned before the pop was called answers `Empty` instead. That value was in the
/// queue for the whole of the pop (values are distinct and nobody else popped it), so the
/// result is never linearizable. `None` when no pop qualifies.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::specs::QueueSpec;
/// use pitlane_lincheck::synthetic::{lose_one_push, queue_history};
/// use pitlane_lincheck::{Shape, check};
///
/// let shape = Shape { threads: 3, ops_per_thread: 6 };
/// let broken = lose_one_push(&queue_history(shape, 7)).expect("some pop qualifies");
/// assert!(check(&QueueSpec::new(), &broken).is_violation());
/// ```
pub fn lose_one_push(
    history: &History<ContainerOp<u64>, ContainerRet<u64>>,
) -> Option<History<ContainerOp<u64>, ContainerRet<u64>>> {
    let mut operations = history.operations().to_vec();
    let pop = operations.iter().position(|pop| {
        let ContainerRet::Popped(v) = pop.result else {
            return false;
        };
        operations
            .iter()
            .any(|push| push.op == ContainerOp::Push(v) && push.precedes(pop))
    })?;
    operations[pop].result = ContainerRet::Empty;
    Some(History::from_recorded(operations))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;
    use crate::specs::QueueSpec;

    #[test]
    fn simulated_histories_are_linearizable_and_overlap() {
        for seed in 0..50 {
            let shape = Shape {
                threads: 4,
                ops_per_thread: 8,
            };
            let history = queue_history(shape, seed);
            assert!(check(&QueueSpec::new(), &history).is_linearizable());
            let ops = history.operations();
            let overlapping = (0..ops.len())
                .filter(|&i| (0..ops.len()).any(|j| j != i && ops[i].overlaps(&ops[j])))
                .count();
            assert!(overlapping > ops.len() / 2, "seed {seed}: {overlapping}");
        }
    }

    #[test]
    fn losing_a_push_breaks_linearizability() {
        let mut broken = 0;
        for seed in 0..50 {
            let shape = Shape {
                threads: 3,
                ops_per_thread: 6,
            };
            if let Some(history) = lose_one_push(&queue_history(shape, seed)) {
                assert!(
                    check(&QueueSpec::new(), &history).is_violation(),
                    "seed {seed}"
                );
                broken += 1;
            }
        }
        assert!(broken > 25, "{broken} of 50 histories had a pop to break");
    }
}
