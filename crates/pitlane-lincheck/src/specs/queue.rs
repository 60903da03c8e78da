use std::collections::HashMap;
use std::collections::VecDeque;
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use foldhash::fast::FixedState;

use super::{ContainerOp, ContainerRet};
use crate::history::{History, OpId};
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

    fn implied_order(
        &self,
        history: &History<ContainerOp<T>, ContainerRet<T>>,
    ) -> Vec<(OpId, OpId)> {
        fifo_implied_order(history)
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

    fn implied_order(
        &self,
        history: &History<ContainerOp<T>, ContainerRet<T>>,
    ) -> Vec<(OpId, OpId)> {
        fifo_implied_order(history)
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

/// The orders every linearization of a FIFO queue history with distinct values respects.
///
/// Values leave a queue in the order they entered it. So say value `x` comes before `y` when
/// `push(x)` returned before `push(y)` was called, or both were popped and `pop(x)` returned
/// before `pop(y)` was called; in every linearization, then, `push(x)` takes effect before
/// `push(y)`, and `pop(x)` before `pop(y)` when both were popped. The same holds along chains
/// of such steps, so the relation is closed transitively first. Nothing is implied when a
/// value is pushed or popped twice.
fn fifo_implied_order<T: Eq + Hash>(
    history: &History<ContainerOp<T>, ContainerRet<T>>,
) -> Vec<(OpId, OpId)> {
    let ops = history.operations();
    // The push and the pop of each value.
    let mut ends: HashMap<&T, (Option<OpId>, Option<OpId>), FixedState> =
        HashMap::with_capacity_and_hasher(ops.len(), FixedState::default());
    for (id, o) in ops.iter().enumerate() {
        let (value, end) = match (&o.op, &o.result) {
            (ContainerOp::Push(v), ContainerRet::Pushed) => (v, 0),
            (ContainerOp::Pop, ContainerRet::Popped(v)) => (v, 1),
            _ => continue,
        };
        let slot = ends.entry(value).or_default();
        let slot = if end == 0 { &mut slot.0 } else { &mut slot.1 };
        if slot.replace(id).is_some() {
            return Vec::new();
        }
    }
    // (push, pop) of each value pushed, in the order of the pushes in the history.
    let mut values: Vec<(OpId, Option<OpId>)> = ends
        .into_values()
        .filter_map(|(push, pop)| Some((push?, pop)))
        .collect();
    values.sort_unstable();
    let k = values.len();
    // Each value's push and pop intervals; a value never popped gets a pop that is neither
    // before nor after another (called at the start of time, returning at its end).
    let push_call: Vec<u64> = values.iter().map(|&(push, _)| ops[push].call).collect();
    let push_ret: Vec<u64> = values.iter().map(|&(push, _)| ops[push].ret).collect();
    let pop_call: Vec<u64> = values
        .iter()
        .map(|&(_, pop)| pop.map_or(0, |p| ops[p].call))
        .collect();
    let pop_ret: Vec<u64> = values
        .iter()
        .map(|&(_, pop)| pop.map_or(u64::MAX, |p| ops[p].ret))
        .collect();
    let mut implied = Vec::new();
    let mut imply = |i: usize, j: usize| {
        // Only what real-time order does not already say.
        if push_ret[i] >= push_call[j] {
            implied.push((values[i].0, values[j].0));
        }
        if let (Some(a), Some(b)) = (values[i].1, values[j].1) {
            if pop_ret[i] >= pop_call[j] {
                implied.push((a, b));
            }
        }
    };
    if k <= 64 {
        // Bit j of before[i]: value i comes before value j.
        let mut before: Vec<u64> = (0..k)
            .map(|i| {
                let (push_ret, pop_ret) = (push_ret[i], pop_ret[i]);
                push_call.iter().zip(&pop_call).enumerate().fold(
                    0,
                    |row, (j, (&push_call, &pop_call))| {
                        let first = (push_ret < push_call) | (pop_ret < pop_call);
                        row | (u64::from(first) << j)
                    },
                )
            })
            .collect();
        // Warshall: whatever comes after m comes after everything before m.
        for m in 0..k {
            let (bit, reach) = (1u64 << m, before[m]);
            for row in &mut before {
                if *row & bit != 0 {
                    *row |= reach;
                }
            }
        }
        for (i, &row) in before.iter().enumerate() {
            let mut later = row;
            while later != 0 {
                imply(i, later.trailing_zeros() as usize);
                later &= later - 1;
            }
        }
    } else {
        let mut before: Vec<Vec<bool>> = (0..k)
            .map(|i| {
                (0..k)
                    .map(|j| push_ret[i] < push_call[j] || pop_ret[i] < pop_call[j])
                    .collect()
            })
            .collect();
        for m in 0..k {
            let reach = before[m].clone();
            for row in &mut before {
                if row[m] {
                    for (cell, &r) in row.iter_mut().zip(&reach) {
                        *cell |= r;
                    }
                }
            }
        }
        for (i, row) in before.iter().enumerate() {
            for (j, &later) in row.iter().enumerate() {
                if later {
                    imply(i, j);
                }
            }
        }
    }
    implied
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::ContainerOp::{Pop, Push};
    use crate::specs::ContainerRet::{Popped, Pushed};

    #[test]
    fn pops_in_real_time_order_fix_the_order_of_overlapping_pushes() {
        let mut h = History::new();
        h.add(0, 0..10, Push('a'), Pushed).unwrap();
        h.add(1, 1..11, Push('b'), Pushed).unwrap();
        h.add(0, 12..13, Pop, Popped('a')).unwrap();
        h.add(1, 14..15, Pop, Popped('b')).unwrap();
        assert_eq!(QueueSpec::new().implied_order(&h), vec![(0, 1)]);
    }

    #[test]
    fn order_follows_chains_through_values_never_popped() {
        // a before c (pushes in real time), c before b (pushes in real time): so a's push
        // comes before b's, and as both were popped, a's pop before b's, though the pops
        // overlap and c was never popped. (The history is not linearizable, since c was
        // never popped but b was; only the implied order is under test.)
        let mut h = History::new();
        h.add(0, 0..1, Push('a'), Pushed).unwrap();
        h.add(1, 2..3, Push('c'), Pushed).unwrap();
        h.add(2, 4..5, Push('b'), Pushed).unwrap();
        h.add(0, 6..9, Pop, Popped('a')).unwrap();
        h.add(1, 7..8, Pop, Popped('b')).unwrap();
        assert_eq!(QueueSpec::new().implied_order(&h), vec![(3, 4)]);
    }

    #[test]
    fn nothing_is_implied_when_a_value_repeats() {
        let mut h = History::new();
        h.add(0, 0..1, Push('a'), Pushed).unwrap();
        h.add(1, 0..1, Push('a'), Pushed).unwrap();
        assert!(QueueSpec::new().implied_order(&h).is_empty());
    }
}
