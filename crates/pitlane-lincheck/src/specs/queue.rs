use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use super::{ContainerOp, ContainerRet, QueueState, ValueNames};
use crate::history::{History, OpId, Operation};
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
    type State = QueueState<T>;

    fn init(&self) -> QueueState<T> {
        QueueState::new()
    }

    fn step(
        &self,
        queue: &QueueState<T>,
        op: &ContainerOp<T>,
        ret: &ContainerRet<T>,
    ) -> Option<QueueState<T>> {
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
    type State = QueueState<T>;

    fn init(&self) -> QueueState<T> {
        QueueState::new()
    }

    fn step(
        &self,
        queue: &QueueState<T>,
        op: &ContainerOp<T>,
        ret: &ContainerRet<T>,
    ) -> Option<QueueState<T>> {
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
    queue: &QueueState<T>,
    op: &ContainerOp<T>,
    ret: &ContainerRet<T>,
    capacity: usize,
) -> Option<QueueState<T>> {
    match (op, ret) {
        (ContainerOp::Push(v), ContainerRet::Pushed) if queue.len() < capacity => {
            Some(queue.pushed(v))
        }
        (ContainerOp::Push(_), ContainerRet::Full) if queue.len() >= capacity => {
            Some(queue.clone())
        }
        (ContainerOp::Pop, ContainerRet::Popped(v)) if queue.front() == Some(v) => {
            Some(queue.popped())
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
///
/// The checker asks this of every history, so it is kept cheap: values are paired with their
/// pops through one hash table, and the relation is a bit matrix (a row of 64-bit words per
/// value) closed by Warshall's algorithm a word at a time.
fn fifo_implied_order<T: Eq + Hash>(
    history: &History<ContainerOp<T>, ContainerRet<T>>,
) -> Vec<(OpId, OpId)> {
    let values = match value_lifetimes(history.operations()) {
        Some(values) if !values.is_empty() => values,
        _ => return Vec::new(),
    };
    let k = values.len();
    let words = k.div_ceil(64);
    // Three bit matrices with a row of `words` words per value (bit j of row i in word
    // j / 64 of it): `by_push`, i's push returned before j's push was called; `by_pop`, i's
    // pop returned before j's pop was called; `before`, i comes before j.
    let mut matrices = vec![0u64; 3 * k * words];
    let (by_push, rest) = matrices.split_at_mut(k * words);
    let (by_pop, before) = rest.split_at_mut(k * words);
    // Bits 64 * w .. 64 * w + 63 of row `a`: which of `columns` come after `a`.
    let later = |a: &Lifetime, columns: &[Lifetime]| {
        columns.iter().rev().fold((0, 0), |(push, pop), b| {
            (
                (push << 1) | u64::from(a.push_ret < b.push_call),
                (pop << 1) | u64::from(a.pop_ret < b.pop_call),
            )
        })
    };
    if words == 1 {
        for (i, a) in values.iter().enumerate() {
            let (push, pop) = later(a, &values);
            (by_push[i], by_pop[i], before[i]) = (push, pop, push | pop);
        }
    } else {
        for (i, a) in values.iter().enumerate() {
            for (w, columns) in values.chunks(64).enumerate() {
                let (push, pop) = later(a, columns);
                let at = i * words + w;
                (by_push[at], by_pop[at], before[at]) = (push, pop, push | pop);
            }
        }
    }
    // Warshall: whatever comes after m comes after everything before m.
    if words == 1 {
        // The usual case (at most 64 values), branch-free so that it vectorizes.
        for m in 0..k {
            let reach = before[m];
            for row in before.iter_mut() {
                *row |= reach & ((*row >> m) & 1).wrapping_neg();
            }
        }
    } else {
        for m in 0..k {
            let (word, bit) = (m / 64, 1u64 << (m % 64));
            for i in 0..k {
                if before[i * words + word] & bit != 0 {
                    for w in 0..words {
                        before[i * words + w] |= before[m * words + w];
                    }
                }
            }
        }
    }
    // What real-time order does not already say: the bits of `before` missing from
    // `by_push` (for the pushes) and from `by_pop` (for the pops of values both popped).
    let mut implied = Vec::with_capacity(k);
    for (i, a) in values.iter().enumerate() {
        for w in 0..words {
            let at = i * words + w;
            let mut pushes = before[at] & !by_push[at];
            while pushes != 0 {
                let b = &values[w * 64 + pushes.trailing_zeros() as usize];
                pushes &= pushes - 1;
                implied.push((a.push, b.push));
            }
            let Some(a_pop) = a.pop else {
                continue;
            };
            let mut pops = before[at] & !by_pop[at];
            while pops != 0 {
                let b = &values[w * 64 + pops.trailing_zeros() as usize];
                pops &= pops - 1;
                if let Some(b_pop) = b.pop {
                    implied.push((a_pop, b_pop));
                }
            }
        }
    }
    implied
}

/// A value's time in the queue: its push and (if it was popped) its pop.
struct Lifetime {
    push: OpId,
    pop: Option<OpId>,
    push_call: u64,
    push_ret: u64,
    /// For a value never popped, 0: a pop neither before nor after any other.
    pop_call: u64,
    /// For a value never popped, `u64::MAX`.
    pop_ret: u64,
}

/// The lifetime of each value pushed successfully, in the order of the pushes in the
/// history; `None` when a value is pushed twice or popped twice.
fn value_lifetimes<T: Eq + Hash>(
    ops: &[Operation<ContainerOp<T>, ContainerRet<T>>],
) -> Option<Vec<Lifetime>> {
    const NO_OP: OpId = OpId::MAX;
    let values = ValueNames::of(ops);
    // The push and the pop of each value.
    let mut ends = vec![(NO_OP, NO_OP); values.count];
    for (id, (o, &name)) in ops.iter().zip(&values.names).enumerate() {
        let end = match (&o.op, &o.result) {
            (ContainerOp::Push(_), ContainerRet::Pushed) => &mut ends[name as usize].0,
            (ContainerOp::Pop, ContainerRet::Popped(_)) => &mut ends[name as usize].1,
            _ => continue,
        };
        if *end != NO_OP {
            return None;
        }
        *end = id;
    }
    let mut lifetimes = Vec::with_capacity(values.count);
    for (push, (o, &name)) in ops.iter().zip(&values.names).enumerate() {
        let (ContainerOp::Push(_), ContainerRet::Pushed) = (&o.op, &o.result) else {
            continue;
        };
        let pop = Some(ends[name as usize].1).filter(|&pop| pop != NO_OP);
        lifetimes.push(Lifetime {
            push,
            pop,
            push_call: o.call,
            push_ret: o.ret,
            pop_call: pop.map_or(0, |p| ops[p].call),
            pop_ret: pop.map_or(u64::MAX, |p| ops[p].ret),
        });
    }
    Some(lifetimes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::ContainerOp::{Pop, Push};
    use crate::specs::ContainerRet::{Empty, Full, Popped, Pushed};

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

    #[test]
    fn steps_push_at_the_back_and_pop_at_the_front() {
        let queue: QueueState<u32> = [1, 2, 3, 4].into_iter().collect();
        let spec = QueueSpec::new();
        let pushed = spec.step(&queue, &Push(5), &Pushed).unwrap();
        assert_eq!(pushed, [1, 2, 3, 4, 5].into_iter().collect());
        let popped = spec.step(&queue, &Pop, &Popped(1)).unwrap();
        assert_eq!(popped, [2, 3, 4].into_iter().collect());
        assert_eq!(spec.step(&queue, &Pop, &Popped(2)), None);
        assert_eq!(spec.step(&queue, &Pop, &Empty), None);
        let empty = QueueState::new();
        assert_eq!(spec.step(&empty, &Pop, &Empty), Some(QueueState::new()));
        let bounded = BoundedQueueSpec::new(4);
        assert_eq!(bounded.step(&queue, &Push(5), &Pushed), None);
        assert_eq!(bounded.step(&queue, &Push(5), &Full), Some(queue.clone()));
        assert_eq!(bounded.step(&popped, &Push(5), &Full), None);
    }

    /// The implied orders by their definition: value x before y when push(x) returned before
    /// push(y) was called or pop(x) returned before pop(y) was called, closed transitively
    /// (a fixed point, cubic), minus what real-time order says.
    fn implied_by_definition(
        h: &History<ContainerOp<u64>, ContainerRet<u64>>,
    ) -> Vec<(OpId, OpId)> {
        let ops = h.operations();
        let push_of = |v: u64| {
            ops.iter()
                .position(|o| o.op == Push(v) && o.result == Pushed)
        };
        let pop_of = |v: u64| {
            ops.iter()
                .position(|o| o.op == Pop && o.result == Popped(v))
        };
        let values: Vec<(usize, Option<usize>)> = ops
            .iter()
            .filter_map(|o| match (o.op, o.result) {
                (Push(v), Pushed) => Some((push_of(v).unwrap(), pop_of(v))),
                _ => None,
            })
            .collect();
        let k = values.len();
        let mut before = vec![vec![false; k]; k];
        for (i, &(pi, qi)) in values.iter().enumerate() {
            for (j, &(pj, qj)) in values.iter().enumerate() {
                before[i][j] = ops[pi].precedes(&ops[pj])
                    || matches!((qi, qj), (Some(a), Some(b)) if ops[a].precedes(&ops[b]));
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for i in 0..k {
                for j in 0..k {
                    for m in 0..k {
                        if before[i][m] && before[m][j] && !before[i][j] {
                            before[i][j] = true;
                            changed = true;
                        }
                    }
                }
            }
        }
        let mut implied = Vec::new();
        for (i, &(pi, qi)) in values.iter().enumerate() {
            for (j, &(pj, qj)) in values.iter().enumerate() {
                if !before[i][j] {
                    continue;
                }
                if !ops[pi].precedes(&ops[pj]) {
                    implied.push((pi, pj));
                }
                if let (Some(a), Some(b)) = (qi, qj) {
                    if !ops[a].precedes(&ops[b]) {
                        implied.push((a, b));
                    }
                }
            }
        }
        implied.sort_unstable();
        implied
    }

    #[test]
    fn implied_orders_match_their_definition_below_and_above_64_values() {
        use crate::runner::Shape;
        use crate::synthetic::queue_history;
        for (threads, ops_per_thread, seeds) in [(4, 8, 60), (3, 20, 20), (3, 50, 3)] {
            for seed in 0..seeds {
                let h = queue_history(
                    Shape {
                        threads,
                        ops_per_thread,
                    },
                    seed,
                );
                let mut implied = QueueSpec::new().implied_order(&h);
                implied.sort_unstable();
                assert_eq!(
                    implied,
                    implied_by_definition(&h),
                    "{threads}x{ops_per_thread} seed {seed}"
                );
            }
        }
    }
}
