//! The linearizability checker: Wing & Gong's search with Lowe's memoization.
//!
//! Wing & Gong (1993) search for a linearization by walking the history's events in time
//! order: the operations called before the first return still pending are the candidates to
//! take effect next (the specification must allow each one's observed result from the
//! current state); take one, lift it out of the history and start again; when no candidate
//! works, no order of what remains can work from here, so undo the last choice and try the
//! next candidate. Lowe ("Testing for linearizability", 2017) adds a cache of the
//! configurations already explored, each a pair of the set of operations linearized (a
//! bitset) and the specification state reached: a configuration seen before is never
//! explored again.
//!
//! Three choices of this implementation keep the search short without changing verdicts:
//! candidates are tried most urgent first (in the order of their returns); the specification
//! may rename values so that more states coincide ([`SequentialSpec::canonical`]); and it may
//! impose orders every linearization respects ([`SequentialSpec::implied_order`]). The FIFO
//! queue specs do both. On 1000 synthetic queue histories of 4 threads x 8 operations the
//! memo cache held 446 configurations on average (at most 46,327) with neither, 153 with the
//! renaming, and 40 (at most 704) with both, where 32 is the least possible; at 3 x 20, 3077
//! (at most 1,279,918), 345, and 65 (at most 320).
//!
//! The search is deterministic: the same history and specification give the same verdict and
//! the same order. It stops after a budget of steps (one step per candidate tried) and
//! answers [`Verdict::Unknown`] rather than run for ever on a history too large to decide.

use std::fmt;
use std::hash::{BuildHasher, Hash};

use foldhash::fast::FixedState;
use hashbrown::hash_table::{Entry, HashTable};

use crate::history::{History, OpId};
use crate::spec::SequentialSpec;

/// The answer of the checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The history is linearizable; this is one order in which its operations can take
    /// effect (every operation once, respecting real time, each result allowed).
    Linearizable(Vec<OpId>),
    /// No order works.
    NotLinearizable(Counterexample),
    /// The step budget ran out before the search decided.
    Unknown {
        /// The steps taken.
        steps: u64,
    },
}

impl Verdict {
    /// Whether the history was found linearizable.
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Verdict::Linearizable(_))
    }

    /// Whether the history was found not linearizable.
    pub fn is_violation(&self) -> bool {
        matches!(self, Verdict::NotLinearizable(_))
    }
}

/// What the search learned about a history that is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counterexample {
    /// The longest sequence of operations the search could make take effect, in order.
    pub longest_prefix: Vec<OpId>,
    /// The operation that then had to take effect (its return came next in time) but could
    /// not: the specification allows its result from no state the remaining orders reach.
    pub stuck: OpId,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "longest linearizable prefix:")?;
        if self.longest_prefix.is_empty() {
            write!(f, " (none)")?;
        }
        for id in &self.longest_prefix {
            write!(f, " #{id}")?;
        }
        write!(
            f,
            "; then #{} cannot take effect before it returns",
            self.stuck
        )
    }
}

/// Decides linearizability; holds the step budget and whether to memoize.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::{Checker, History, Verdict};
/// use pitlane_lincheck::specs::{CounterOp::*, CounterRet::*, CounterSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..3, FetchAdd(1), Value(1))?;
/// history.add(1, 1..2, FetchAdd(1), Value(0))?;
/// // The second call returned first but the first may have taken effect after it.
/// assert_eq!(Checker::new().check(&CounterSpec::new(), &history), Verdict::Linearizable(vec![1, 0]));
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Checker {
    budget: u64,
    memoize: bool,
}

impl Default for Checker {
    fn default() -> Self {
        Self::new()
    }
}

impl Checker {
    /// The step budget of [`Checker::new`]: far more than a history of a few threads and a few
    /// dozen operations needs, small enough to answer within seconds.
    pub const DEFAULT_BUDGET: u64 = 50_000_000;

    /// A memoizing checker with [`Checker::DEFAULT_BUDGET`].
    pub fn new() -> Self {
        Checker {
            budget: Self::DEFAULT_BUDGET,
            memoize: true,
        }
    }

    /// The same checker with a budget of `steps` steps.
    pub fn with_budget(self, steps: u64) -> Self {
        Checker {
            budget: steps,
            ..self
        }
    }

    /// The same checker, with or without Lowe's cache. Without it the search is plain Wing &
    /// Gong, exponential on histories where many orders reach the same state; this is only
    /// useful to measure what the cache buys.
    pub fn memoize(self, memoize: bool) -> Self {
        Checker { memoize, ..self }
    }

    /// Decides whether `history` is linearizable with respect to `spec`.
    pub fn check<S: SequentialSpec>(&self, spec: &S, history: &History<S::Op, S::Ret>) -> Verdict {
        self.check_with_stats(spec, history).0
    }

    /// As [`Checker::check`], with counts of the work the search did.
    pub fn check_with_stats<S: SequentialSpec>(
        &self,
        spec: &S,
        history: &History<S::Op, S::Ret>,
    ) -> (Verdict, SearchStats) {
        let implied = spec.implied_order(history);
        let canonical = spec.canonical(history);
        let history = canonical.as_ref().unwrap_or(history);
        let n = history.len();
        if n <= 64 {
            Search::<S, u64>::new(spec, history, &implied, *self).run()
        } else if n <= 128 {
            Search::<S, u128>::new(spec, history, &implied, *self).run()
        } else if n < (u32::MAX / 2) as usize {
            Search::<S, WideBits>::new(spec, history, &implied, *self).run()
        } else {
            // Event numbers are `u32`; no search of two billion operations would end anyway.
            (Verdict::Unknown { steps: 0 }, SearchStats::default())
        }
    }
}

/// The work one search did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Candidates tried (what the budget counts).
    pub steps: u64,
    /// Operations made to take effect, counting those later undone.
    pub linearized: u64,
    /// Choices undone.
    pub backtracks: u64,
    /// Configurations (linearized set and state) in the memo cache at the end.
    pub configurations: u64,
}

/// Decides whether `history` is linearizable with respect to `spec`, with [`Checker::new`].
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet::*, QueueSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..4, Push(1), Pushed)?;
/// history.add(1, 1..2, Pop, Popped(1))?; // inside the push: it may have taken effect first
/// assert!(check(&QueueSpec::new(), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
pub fn check<S: SequentialSpec>(spec: &S, history: &History<S::Op, S::Ret>) -> Verdict {
    Checker::new().check(spec, history)
}

/// The set of operations linearized so far.
trait Bits: Clone + Eq + Hash {
    fn empty(operations: usize) -> Self;
    fn set(&mut self, op: usize);
    fn clear(&mut self, op: usize);
    /// Whether every member of `other` is a member of `self`.
    fn contains_all(&self, other: &Self) -> bool;
}

impl Bits for u64 {
    fn empty(_: usize) -> Self {
        0
    }
    fn set(&mut self, op: usize) {
        *self |= 1 << op;
    }
    fn clear(&mut self, op: usize) {
        *self &= !(1 << op);
    }
    fn contains_all(&self, other: &Self) -> bool {
        other & !self == 0
    }
}

impl Bits for u128 {
    fn empty(_: usize) -> Self {
        0
    }
    fn set(&mut self, op: usize) {
        *self |= 1 << op;
    }
    fn clear(&mut self, op: usize) {
        *self &= !(1 << op);
    }
    fn contains_all(&self, other: &Self) -> bool {
        other & !self == 0
    }
}

/// A bitset for histories of more than 128 operations.
#[derive(Clone, PartialEq, Eq, Hash)]
struct WideBits(Box<[u64]>);

impl Bits for WideBits {
    fn empty(operations: usize) -> Self {
        WideBits(vec![0; operations.div_ceil(64)].into_boxed_slice())
    }
    fn set(&mut self, op: usize) {
        self.0[op / 64] |= 1 << (op % 64);
    }
    fn clear(&mut self, op: usize) {
        self.0[op / 64] &= !(1 << (op % 64));
    }
    fn contains_all(&self, other: &Self) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| b & !a == 0)
    }
}

/// Marks the end of the event list.
const NIL: u32 = u32::MAX;

/// One run of the search over one history.
///
/// Events are numbered `2 * op` (call) and `2 * op + 1` (return); they sit in a doubly
/// linked list in time order, with a head sentinel numbered `2 * n`. Linearizing an
/// operation unlinks both of its events; undoing it links them back (in reverse order, so
/// the list is restored exactly, as in Knuth's dancing links).
///
/// States live in an arena and are named by their index there: the memo cache, the stack of
/// choices and the current state all hold indices, so a state is never cloned; each
/// successful step makes one new state.
struct Search<'a, S: SequentialSpec, B> {
    spec: &'a S,
    history: &'a History<S::Op, S::Ret>,
    checker: Checker,
    next: Vec<u32>,
    prev: Vec<u32>,
    head: u32,
    /// `rank[op]`: the position of the operation's return among all returns, in time order.
    rank: Vec<u32>,
    /// `after[op]`: the operations that must take effect before it, beyond real-time order
    /// ([`SequentialSpec::implied_order`]).
    after: Vec<B>,
}

impl<'a, S: SequentialSpec, B: Bits> Search<'a, S, B> {
    fn new(
        spec: &'a S,
        history: &'a History<S::Op, S::Ret>,
        implied: &[(OpId, OpId)],
        checker: Checker,
    ) -> Self {
        let ops = history.operations();
        let mut after = vec![B::empty(ops.len()); ops.len()];
        for &(first, then) in implied {
            if first < ops.len() && then < ops.len() {
                after[then].set(first);
            }
        }
        let events = 2 * ops.len();
        // Time order; at equal stamps a call comes before a return, so that touching
        // operations count as overlapping.
        let mut timed: Vec<(u64, bool, u32)> = Vec::with_capacity(events);
        for (id, op) in ops.iter().enumerate() {
            timed.push((op.call, false, 2 * id as u32));
            timed.push((op.ret, true, 2 * id as u32 + 1));
        }
        timed.sort_unstable();
        let order = timed.iter().map(|&(_, _, e)| e);
        let head = events as u32;
        let mut next = vec![NIL; events + 1];
        let mut prev = vec![NIL; events + 1];
        let mut rank = vec![0; ops.len()];
        let mut last = head;
        let mut returns = 0;
        for e in order {
            next[last as usize] = e;
            prev[e as usize] = last;
            last = e;
            if e % 2 == 1 {
                rank[e as usize / 2] = returns;
                returns += 1;
            }
        }
        Search {
            spec,
            history,
            checker,
            next,
            prev,
            head,
            rank,
            after,
        }
    }

    fn unlink(&mut self, e: u32) {
        let (p, n) = (self.prev[e as usize], self.next[e as usize]);
        self.next[p as usize] = n;
        if n != NIL {
            self.prev[n as usize] = p;
        }
    }

    fn relink(&mut self, e: u32) {
        let (p, n) = (self.prev[e as usize], self.next[e as usize]);
        self.next[p as usize] = e;
        if n != NIL {
            self.prev[n as usize] = e;
        }
    }

    fn lift(&mut self, op: u32) {
        self.unlink(2 * op);
        self.unlink(2 * op + 1);
    }

    fn unlift(&mut self, op: u32) {
        self.relink(2 * op + 1);
        self.relink(2 * op);
    }

    /// The operations that may take effect next, most urgent first: those called before the
    /// earliest return still in the list (whose operation must take effect before it), in
    /// order of their returns. Returns the operation of that earliest return.
    fn candidates(&self, into: &mut Vec<u32>) -> u32 {
        into.clear();
        let mut event = self.next[self.head as usize];
        while event % 2 == 0 {
            into.push(event / 2);
            event = self.next[event as usize];
        }
        into.sort_unstable_by_key(|&op| self.rank[op as usize]);
        event / 2
    }

    fn run(mut self) -> (Verdict, SearchStats) {
        let ops = self.history.operations();
        let memoize = self.checker.memoize;
        let hasher = FixedState::default();
        // Every state reached (with the memo) or the states on the current path (without).
        let mut states: Vec<S::State> = Vec::with_capacity(2 * ops.len() + 1);
        states.push(self.spec.init());
        // The memo cache: configurations seen, as (linearized set, index of the state).
        let mut seen: HashTable<(B, u32)> =
            HashTable::with_capacity(if memoize { 2 * ops.len() } else { 0 });
        // The operations linearized, in order, each with the state before it.
        let mut taken: Vec<(u32, u32)> = Vec::with_capacity(ops.len());
        let mut state: u32 = 0;
        let mut linearized = B::empty(ops.len());
        let mut longest: Option<Counterexample> = None;
        let mut stats = SearchStats::default();
        let mut candidates = Vec::with_capacity(16);
        // After undoing a choice, the search resumes with the candidate after it.
        let mut resume_after: Option<u32> = None;
        while self.next[self.head as usize] != NIL {
            let urgent = self.candidates(&mut candidates);
            let first = match resume_after.take() {
                None => 0,
                Some(undone) => {
                    1 + candidates
                        .iter()
                        .position(|&c| c == undone)
                        .expect("an undone operation is a candidate again")
                }
            };
            let mut chosen = None;
            for &candidate in &candidates[first..] {
                stats.steps += 1;
                if stats.steps > self.checker.budget {
                    stats.steps -= 1;
                    stats.configurations = seen.len() as u64;
                    return (Verdict::Unknown { steps: stats.steps }, stats);
                }
                if !linearized.contains_all(&self.after[candidate as usize]) {
                    continue;
                }
                let op = &ops[candidate as usize];
                let Some(after) = self.spec.step(&states[state as usize], &op.op, &op.result)
                else {
                    continue;
                };
                let mut with_op = linearized.clone();
                with_op.set(candidate as usize);
                if memoize {
                    let hash = hasher.hash_one((&with_op, &after));
                    let entry = seen.entry(
                        hash,
                        |(bits, s)| *bits == with_op && states[*s as usize] == after,
                        |(bits, s)| hasher.hash_one((bits, &states[*s as usize])),
                    );
                    let Entry::Vacant(vacant) = entry else {
                        continue;
                    };
                    vacant.insert((with_op.clone(), states.len() as u32));
                }
                states.push(after);
                chosen = Some((candidate, with_op));
                break;
            }
            if let Some((candidate, with_op)) = chosen {
                stats.linearized += 1;
                taken.push((candidate, state));
                state = states.len() as u32 - 1;
                linearized = with_op;
                self.lift(candidate);
                continue;
            }
            // No candidate leads anywhere new: `urgent` cannot take effect from here.
            if longest
                .as_ref()
                .is_none_or(|c| c.longest_prefix.len() < taken.len())
            {
                longest = Some(Counterexample {
                    longest_prefix: taken.iter().map(|(id, _)| *id as OpId).collect(),
                    stuck: urgent as OpId,
                });
            }
            let Some((undone, before)) = taken.pop() else {
                stats.configurations = seen.len() as u64;
                let counterexample = longest.expect("a dead end was recorded just above");
                return (Verdict::NotLinearizable(counterexample), stats);
            };
            stats.backtracks += 1;
            if !memoize {
                // Without the cache nothing refers to the abandoned state any more.
                states.truncate(state as usize);
            }
            state = before;
            linearized.clear(undone as usize);
            self.unlift(undone);
            resume_after = Some(undone);
        }
        stats.configurations = seen.len() as u64;
        let order = taken.into_iter().map(|(id, _)| id as OpId).collect();
        (Verdict::Linearizable(order), stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::{
        ContainerOp::*, ContainerRet::*, QueueSpec, RegisterOp, RegisterRet, RegisterSpec,
    };

    #[test]
    fn an_empty_history_is_linearizable() {
        let history = History::new();
        assert_eq!(
            check(&QueueSpec::<u8>::new(), &history),
            Verdict::Linearizable(vec![])
        );
    }

    #[test]
    fn the_order_respects_real_time_and_results() {
        let mut h = History::new();
        h.add(0, 0..10, Push(1), Pushed).unwrap();
        h.add(1, 1..2, Push(2), Pushed).unwrap();
        h.add(1, 3..4, Pop, Popped(2)).unwrap();
        h.add(0, 11..12, Pop, Popped(1)).unwrap();
        assert_eq!(
            check(&QueueSpec::new(), &h),
            Verdict::Linearizable(vec![1, 2, 0, 3])
        );
    }

    #[test]
    fn a_violation_names_the_stuck_operation() {
        let mut h = History::new();
        h.add(0, 0..1, Push(1), Pushed).unwrap();
        h.add(1, 2..3, Pop, Popped(2)).unwrap();
        assert_eq!(
            check(&QueueSpec::new(), &h),
            Verdict::NotLinearizable(Counterexample {
                longest_prefix: vec![0],
                stuck: 1
            })
        );
    }

    #[test]
    fn the_budget_stops_the_search() {
        // Many concurrent writes of distinct values, then a read of a value nobody wrote:
        // every subset of the writes is a configuration, so the search is long.
        let mut h = History::new();
        for t in 0..12u64 {
            h.add(
                t as usize,
                0..100,
                RegisterOp::Write(t + 1),
                RegisterRet::Written,
            )
            .unwrap();
        }
        h.add(12, 200..201, RegisterOp::Read, RegisterRet::Value(99))
            .unwrap();
        let verdict = Checker::new()
            .with_budget(1000)
            .check(&RegisterSpec::new(0), &h);
        assert_eq!(verdict, Verdict::Unknown { steps: 1000 });
        assert!(
            Checker::new()
                .check(&RegisterSpec::new(0), &h)
                .is_violation()
        );
    }

    #[test]
    fn wide_histories_use_the_wide_bitset() {
        let mut h = History::new();
        for i in 0..150u64 {
            h.add(0, 2 * i..2 * i + 1, Push(i), Pushed).unwrap();
        }
        for i in 0..150u64 {
            h.add(1, 1000 + 2 * i..1001 + 2 * i, Pop, Popped(i))
                .unwrap();
        }
        assert!(check(&QueueSpec::new(), &h).is_linearizable());
        h.add(1, 5000..5001, Pop, Popped(7)).unwrap();
        assert!(check(&QueueSpec::new(), &h).is_violation());
    }

    #[test]
    fn memoization_does_not_change_the_verdict() {
        let mut h = History::new();
        for t in 0..6u64 {
            h.add(t as usize, 0..50, Push(t), Pushed).unwrap();
        }
        for t in 0..6u64 {
            h.add(t as usize, 60..70, Pop, Popped(5 - t)).unwrap();
        }
        let plain = Checker::new().memoize(false).check(&QueueSpec::new(), &h);
        let memo = Checker::new().check(&QueueSpec::new(), &h);
        assert!(memo.is_linearizable());
        assert_eq!(plain, memo);
    }
}
