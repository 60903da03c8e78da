use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use super::{ContainerOp, ContainerRet, QueueState, ValueNames};
use crate::history::{History, OpId};
use crate::spec::{SearchAids, SequentialSpec};

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

    fn state_heap_bytes(&self, queue: &QueueState<T>) -> usize {
        queue.heap_bytes()
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

    fn search_aids(
        &self,
        history: &History<ContainerOp<T>, ContainerRet<T>>,
    ) -> SearchAids<ContainerOp<T>, ContainerRet<T>> {
        fifo_aids(history, true)
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

    fn state_heap_bytes(&self, queue: &QueueState<T>) -> usize {
        queue.heap_bytes()
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

    fn search_aids(
        &self,
        history: &History<ContainerOp<T>, ContainerRet<T>>,
    ) -> SearchAids<ContainerOp<T>, ContainerRet<T>> {
        fifo_aids(history, true)
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
/// The checker asks this of every history, so it is computed in one walk over the history's
/// events in time order and work linear in the values (plus the pairs returned), not by
/// closing a matrix of all pairs. Number the calls of pushes in time order, and those of pops
/// likewise. The values whose push was called after `push(x)` returned are those whose push
/// call has a number at least `a`, the count of push calls before that return: a suffix of
/// the push calls, `P(a)`; those popped after `pop(x)` returned are a suffix `Q(b)` of the pop
/// calls. The suffixes of one order are nested, so the union of `P(a)` over a set of values
/// is `P` of their least `a`. Hence what `x` comes before, directly or along chains, is
/// `P(a) ∪ Q(b)` for the least fixed point of: `a` and `b` start at `x`'s own counts and drop
/// to the least counts of any value in `P(a) ∪ Q(b)`. With the least counts of every suffix
/// worked out beforehand, each round of that is a few lookups, and there are few rounds.
fn fifo_implied_order<T: Clone + Eq + Hash>(
    history: &History<ContainerOp<T>, ContainerRet<T>>,
) -> Vec<(OpId, OpId)> {
    fifo_aids(history, false).implied_order
}

/// [`merge_unpopped`](super::merge_unpopped) of `history` if `canonical`, and
/// [`fifo_implied_order`], from one naming of the values.
fn fifo_aids<T: Clone + Eq + Hash>(
    history: &History<ContainerOp<T>, ContainerRet<T>>,
    canonical: bool,
) -> SearchAids<ContainerOp<T>, ContainerRet<T>> {
    let ops = history.operations();
    let mut names = Vec::with_capacity(ops.len());
    let k = ValueNames::name(ops, &mut names);
    // Per value (by name): its push and its pop ([`NO_OP`] if none), how many push calls came
    // before its push returned (`a`) and how many pop calls before its pop returned (`b`;
    // for a value never popped, all of them), its places in the orders of push calls and pop
    // calls; then those orders, as names; and whether any result popped it. One buffer for
    // all.
    let mut buffer = vec![NO_OP; 9 * k];
    let (push, rest) = buffer.split_at_mut(k);
    let (pop, rest) = rest.split_at_mut(k);
    let (push_count, rest) = rest.split_at_mut(k);
    let (pop_count, rest) = rest.split_at_mut(k);
    let (push_rank, rest) = rest.split_at_mut(k);
    let (pop_rank, rest) = rest.split_at_mut(k);
    let (push_order, rest) = rest.split_at_mut(k);
    let (pop_order, popped) = rest.split_at_mut(k);
    let mut repeated = false;
    for (id, (o, &name)) in ops.iter().zip(&names).enumerate() {
        let end = match (&o.op, &o.result) {
            (ContainerOp::Push(_), ContainerRet::Pushed) => &mut push[name as usize],
            (ContainerOp::Pop, ContainerRet::Popped(_)) => &mut pop[name as usize],
            (_, ContainerRet::Popped(_)) => {
                // (Not a pop, so not FIFO; but the value counts as popped.)
                popped[name as usize] = id as u32;
                continue;
            }
            _ => continue,
        };
        repeated |= *end != NO_OP;
        *end = id as u32;
    }
    let canonical = if canonical {
        let popped = |name: u32| pop[name as usize] != NO_OP || popped[name as usize] != NO_OP;
        super::rename_unpopped(ops, &names, popped)
    } else {
        None
    };
    if repeated {
        return SearchAids {
            canonical,
            implied_order: Vec::new(),
        };
    }
    let names = &names[..];
    // The calls of the pushes, then of the pops, as (stamp, name) in time order; at equal
    // stamps calls count as coming first (a push called at the stamp another returned does
    // not come after it), so the order among calls of one stamp does not matter.
    let mut calls: Vec<(u64, u32)> = Vec::with_capacity(2 * k);
    for (name, &id) in push.iter().enumerate() {
        if id != NO_OP {
            calls.push((ops[id as usize].call, name as u32));
        }
    }
    let kp = calls.len();
    if kp == 0 {
        return SearchAids {
            canonical,
            implied_order: Vec::new(),
        };
    }
    for (name, &id) in pop.iter().enumerate() {
        if id != NO_OP && push[name] != NO_OP {
            calls.push((ops[id as usize].call, name as u32));
        }
    }
    let kq = calls.len() - kp;
    let (push_calls, pop_calls) = calls.split_at_mut(kp);
    sort_by_stamp(push_calls);
    sort_by_stamp(pop_calls);
    for (order, rank, sorted) in [
        (&mut *push_order, &mut *push_rank, &*push_calls),
        (&mut *pop_order, &mut *pop_rank, &*pop_calls),
    ] {
        for (r, &(_, name)) in sorted.iter().enumerate() {
            order[r] = name;
            rank[name as usize] = r as u32;
        }
    }
    // How many calls came before each return (calls first at equal stamps): a pointer into
    // the sorted calls that moves forward while the returns come in order, as they mostly
    // do, and a binary search when one does not.
    let (mut p, mut q) = (Counter::default(), Counter::default());
    for (id, (o, &name)) in ops.iter().zip(names).enumerate() {
        if name == ValueNames::NONE || push[name as usize] == NO_OP {
            continue;
        }
        if push[name as usize] == id as u32 {
            push_count[name as usize] = p.calls_before(push_calls, o.ret);
        } else if pop[name as usize] == id as u32 {
            pop_count[name as usize] = q.calls_before(pop_calls, o.ret);
        }
    }
    let (push_order, pop_order) = (&push_order[..kp], &pop_order[..kq]);
    for count in pop_count.iter_mut() {
        *count = (*count).min(kq as u32);
    }
    // The least push count and the least pop count over each suffix of the push calls
    // (`at_p`) and of the pop calls (`at_q`); past the end, counts that name empty suffixes.
    let mut least = vec![(kp as u32, kq as u32); kp + kq + 2];
    let (at_p, at_q) = least.split_at_mut(kp + 1);
    for (at, order) in [(at_p, push_order), (at_q, pop_order)] {
        for (r, &v) in order.iter().enumerate().rev() {
            let (a, b) = at[r + 1];
            at[r] = (a.min(push_count[v as usize]), b.min(pop_count[v as usize]));
        }
    }
    let (at_p, at_q) = least.split_at(kp + 1);
    // What `v` comes before, as the counts `(a, b)` of `P(a) ∪ Q(b)`.
    let closure = |v: usize| {
        let (mut a, mut b) = (push_count[v], pop_count[v]);
        loop {
            let (pa, pb) = at_p[a as usize];
            let (qa, qb) = at_q[b as usize];
            let next = (a.min(pa).min(qa), b.min(pb).min(qb));
            if next == (a, b) {
                return (a as usize, b as usize);
            }
            (a, b) = next;
        }
    };
    let mut implied = Vec::with_capacity(k);
    // The values in the order of their pushes in the history.
    let pushes = names
        .iter()
        .enumerate()
        .filter(|&(id, &name)| name != ValueNames::NONE && push[name as usize] == id as u32)
        .map(|(_, &name)| name as usize);
    if k <= 64 {
        // Each suffix as a bit mask over the values' names.
        let (mut p, mut q) = ([0u64; 65], [0u64; 65]);
        for (masks, order) in [(&mut p, push_order), (&mut q, pop_order)] {
            for (r, &v) in order.iter().enumerate().rev() {
                masks[r] = masks[r + 1] | 1 << v;
            }
        }
        let popped = q[0];
        for v in pushes {
            let (a, b) = closure(v);
            // Those of `P(a) ∪ Q(b)` that real time does not already put after push(v).
            let after_push = p[push_count[v] as usize];
            for w in bits((p[a] & !after_push) | (q[b] & !p[a])) {
                implied.push((push[v] as OpId, push[w] as OpId));
            }
            if pop[v] != NO_OP {
                let after_pop = q[pop_count[v] as usize];
                for w in bits((q[b] & !after_pop) | (p[a] & popped & !q[b])) {
                    implied.push((pop[v] as OpId, pop[w] as OpId));
                }
            }
        }
    } else {
        // The same sets, as ranges of the call orders and filtered scans of them.
        for v in pushes {
            let (a, b) = closure(v);
            let to = |w: &u32| (push[v] as OpId, push[*w as usize] as OpId);
            implied.extend(push_order[a..push_count[v] as usize].iter().map(to));
            let not_in_p = pop_order[b..]
                .iter()
                .filter(|&&w| push_rank[w as usize] < a as u32);
            implied.extend(not_in_p.map(to));
            if pop[v] != NO_OP {
                let to = |w: &u32| (pop[v] as OpId, pop[*w as usize] as OpId);
                implied.extend(pop_order[b..pop_count[v] as usize].iter().map(to));
                let not_in_q = push_order[a..]
                    .iter()
                    .filter(|&&w| pop[w as usize] != NO_OP && pop_rank[w as usize] < b as u32);
                implied.extend(not_in_q.map(to));
            }
        }
    }
    SearchAids {
        canonical,
        implied_order: implied,
    }
}

/// Sorts `items` by their stamps. They come mostly in order (histories list operations about
/// in the order of their returns), so a short list takes an insertion sort.
fn sort_by_stamp(items: &mut [(u64, u32)]) {
    if items.len() > 64 {
        items.sort_unstable_by_key(|&(stamp, _)| stamp);
        return;
    }
    for i in 1..items.len() {
        let item = items[i];
        let mut j = i;
        while j > 0 && items[j - 1].0 > item.0 {
            items[j] = items[j - 1];
            j -= 1;
        }
        items[j] = item;
    }
}

/// Counts the calls before one return after another.
#[derive(Default)]
struct Counter {
    /// The last return asked about.
    last: u64,
    /// How many calls came before it.
    count: usize,
}

impl Counter {
    /// How many of `calls` (sorted by stamp) have a stamp at most `ret`.
    fn calls_before(&mut self, calls: &[(u64, u32)], ret: u64) -> u32 {
        if ret < self.last {
            self.count = calls.partition_point(|&(call, _)| call <= ret);
        } else {
            while calls.get(self.count).is_some_and(|&(call, _)| call <= ret) {
                self.count += 1;
            }
        }
        self.last = ret;
        self.count as u32
    }
}

/// The set bits of `mask`, lowest first.
fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        let bit = mask.trailing_zeros() as usize;
        mask &= mask.wrapping_sub(1);
        (bit < 64).then_some(bit)
    })
}

/// No operation.
const NO_OP: u32 = u32::MAX;

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
    fn both_aids_at_once_are_each_aid() {
        use crate::rng::SplitMix64;
        use crate::specs::tests::{odd_container_ops, odd_sizes};
        let mut rng = SplitMix64::new(3);
        for (len, spread) in odd_sizes() {
            for _ in 0..20 {
                let h = History::from_recorded(odd_container_ops(&mut rng, len, spread));
                let (queue, bounded) = (QueueSpec::new(), BoundedQueueSpec::new(3));
                let each = SearchAids {
                    canonical: queue.canonical(&h),
                    implied_order: queue.implied_order(&h),
                };
                assert_eq!(queue.search_aids(&h), each, "{len}");
                assert_eq!(bounded.search_aids(&h), each, "{len}");
            }
        }
        // And on histories a queue could give, with values distinct.
        for seed in 0..50 {
            use crate::runner::Shape;
            use crate::synthetic::{lose_one_push, queue_history};
            let h = queue_history(
                Shape {
                    threads: 3,
                    ops_per_thread: 8,
                },
                seed,
            );
            for h in [lose_one_push(&h), Some(h)].into_iter().flatten() {
                let spec = QueueSpec::new();
                let each = SearchAids {
                    canonical: spec.canonical(&h),
                    implied_order: spec.implied_order(&h),
                };
                assert_eq!(spec.search_aids(&h), each, "seed {seed}");
            }
        }
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
