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
//! search reached 446 configurations on average (at most 46,327) with neither, 153 with the
//! renaming, and 40 (at most 704) with both, where 32 is the least possible; at 3 x 20, 3077
//! (at most 1,279,918), 345, and 65 (at most 320).
//!
//! # Cost of one check
//!
//! A check of a small history (a few threads, a few dozen operations) is a few dozen
//! configurations, so what surrounds the search weighs as much as the search itself. Where
//! the work goes was measured with `valgrind --tool=callgrind` (counts of instructions, the
//! same whatever the load of the machine), and these choices follow from it; none changes
//! which configurations the search visits, in which order, or any verdict:
//!
//! - Lowe's cache records a configuration when the search backs out of it, not when it
//!   arrives ([`FailedConfigs`]): a configuration is only ever reached again after its first
//!   visit failed, so this prunes the same, and a linearizable history, which the search
//!   mostly crosses without backing out, records almost nothing. A filter on linearized sets
//!   tells most new configurations from failed ones without hashing their state, and no
//!   state is hashed twice.
//! - Events are put in time order by a counting sort over the stamps when they are dense, as
//!   recorded stamps are ([`time_order`]), rather than by sorting.
//! - Operations are numbered by the order of their returns, so the candidates at each step
//!   are the bits of one set (those called before the earliest return still to come, less
//!   those linearized), already in the order to try them ([`Search`]): no list of events to
//!   walk, sort and relink.
//! - States live in an arena and are named by index (never cloned); the queue and stack
//!   specifications keep a state of a few values inline ([`crate::specs::QueueState`]), so
//!   a step allocates nothing and a state is hashed and compared as one slice.
//! - The FIFO specs' aids ([`crate::specs::QueueSpec`]) pair values through small numbers
//!   (given by one table on the stack, for both aids at once:
//!   [`SequentialSpec::search_aids`]) instead of hash tables of values, and find the
//!   transitively closed implied order from the orders of the calls, in time linear in the
//!   values (plus the pairs found), where closing a matrix of all pairs was a quarter of a
//!   check.
//! - The buffers that do not depend on the specification (the event list, the ranks,
//!   the stack of choices) are kept by each thread from one check to the next, so checking
//!   many small histories does not allocate them every time.
//!
//! The search is deterministic: the same history and specification give the same verdict and
//! the same order. It stops after a budget of steps (one step per candidate tried) and
//! answers [`Verdict::Unknown`] rather than run for ever on a history too large to decide.
//!
//! # Memory
//!
//! The step budget bounds time, not memory: a search keeps a state per configuration it
//! reaches and an entry per configuration that failed, some 70 bytes a step on large queue
//! histories, so 50 million steps would hold 3-4 GB. A memory budget
//! ([`Checker::with_memory`], 1 GiB by default) bounds what it holds, estimated as it goes
//! (a few additions per step; the states' own heap bytes from
//! [`SequentialSpec::state_heap_bytes`]). When the memo and the states it keeps would pass
//! the budget, the search forgets them and goes on with the states of its current path only:
//! forgetting failures costs re-exploration, never a different verdict. It answers
//! [`Verdict::Unknown`] for want of memory only when the history's own tables (`n²/4` bytes
//! of masks beyond 128 operations) do not fit, or when they and the current path still take
//! more than half the budget after forgetting; the tables are allocated fallibly, so a
//! system that refuses memory within the budget gets `Unknown` too rather than an abort.

use std::fmt;
use std::hash::{BuildHasher, Hash};

use foldhash::fast::FixedState;
use hashbrown::hash_table::HashTable;

use crate::history::{History, OpId, Operation};
use crate::spec::{SearchAids, SequentialSpec};

/// The answer of the checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The history is linearizable; this is one order in which its operations can take
    /// effect (every operation once, respecting real time, each result allowed).
    Linearizable(Vec<OpId>),
    /// No order works.
    NotLinearizable(Counterexample),
    /// The search stopped before it decided: its step budget ran out, or the memory it needs
    /// would pass its memory budget even with Lowe's cache forgotten (the history's tables and
    /// the states on the current path alone take too much; `steps` is 0 when the tables
    /// could not even be made). See [`Checker`].
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

/// Decides linearizability; holds the step budget, the memory budget and whether to memoize.
///
/// # Budgets
///
/// The *step budget* ([`Checker::with_budget`]) bounds the time of a check: each candidate
/// tried is a step, and a search that runs out of steps answers [`Verdict::Unknown`].
///
/// The *memory budget* ([`Checker::with_memory`], [`Checker::DEFAULT_MEMORY`] by default)
/// bounds the bytes a search holds, as it estimates them: the tables made from the history
/// (two bitsets of `n` bits per operation, `n²/4` bytes beyond 128 operations), the arena
/// of specification states (`size_of` each plus
/// [`SequentialSpec::state_heap_bytes`]) and Lowe's cache of failed configurations. The
/// cache only saves work, so when it and the states it keeps would pass the budget, the
/// search forgets them and goes on from where it is with only the states of its current path:
/// what was pruned may be explored again (the step budget still bounds that), but no verdict
/// changes, nor the order or counterexample given. The search answers [`Verdict::Unknown`]
/// for want of memory only when the history's tables alone pass the budget (at once, with
/// `steps: 0`, before allocating them), or when the tables and the current path still take
/// more than half the budget once the cache is forgotten (so that each forgetting frees room
/// for many steps). Tables are allocated fallibly, so a budget above what the system grants
/// also ends in `Unknown` rather than an abort there. What the specification's aids
/// ([`SequentialSpec::search_aids`]) allocate is not counted.
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
    memory: usize,
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

    /// The memory budget of [`Checker::new`], in bytes (1 GiB): far more than a history of a
    /// few threads and a few dozen operations needs (a few hundred bytes per configuration
    /// reached), and what a search of [`Checker::DEFAULT_BUDGET`] steps reaches after about a
    /// third of its steps on histories too large to decide (it would hold 3-4 GB at the end
    /// without the bound).
    pub const DEFAULT_MEMORY: usize = 1 << 30;

    /// A memoizing checker with [`Checker::DEFAULT_BUDGET`] and [`Checker::DEFAULT_MEMORY`].
    pub fn new() -> Self {
        Checker {
            budget: Self::DEFAULT_BUDGET,
            memory: Self::DEFAULT_MEMORY,
            memoize: true,
        }
    }

    /// The same checker with a memory budget of `bytes` bytes (see [`Checker`]'s "Budgets").
    ///
    /// ```
    /// use pitlane_lincheck::specs::QueueSpec;
    /// use pitlane_lincheck::synthetic::queue_history;
    /// use pitlane_lincheck::{Checker, Shape, Verdict};
    ///
    /// let history = queue_history(Shape { threads: 4, ops_per_thread: 8 }, 1);
    /// let tight = Checker::new().with_memory(64 << 10);
    /// assert_eq!(tight.check(&QueueSpec::new(), &history), Checker::new().check(&QueueSpec::new(), &history));
    /// // Too little for the history's own tables: undecided at once.
    /// let starved = Checker::new().with_memory(1 << 10);
    /// assert_eq!(starved.check(&QueueSpec::new(), &history), Verdict::Unknown { steps: 0 });
    /// ```
    pub fn with_memory(self, bytes: usize) -> Self {
        Checker {
            memory: bytes,
            ..self
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
        let undecided = (Verdict::Unknown { steps: 0 }, SearchStats::default());
        let n = history.len();
        if n >= (u32::MAX / 2) as usize {
            // Event numbers are `u32`; no search of two billion operations would end anyway.
            return undecided;
        }
        // The tables of the search are known from `n` alone: refuse before making them (or
        // the aids) when they would not fit.
        let fixed = if n <= 64 {
            fixed_bytes::<S, u64>(n)
        } else if n <= 128 {
            fixed_bytes::<S, u128>(n)
        } else {
            fixed_bytes::<S, WideBits>(n)
        };
        if fixed.saturating_add(path_bytes::<S>(n)) > self.memory {
            return undecided;
        }
        let SearchAids {
            canonical,
            implied_order: implied,
        } = spec.search_aids(history);
        let history = canonical.as_ref().unwrap_or(history);
        let mut scratch = Scratch::take();
        let result = if n <= 64 {
            Search::<S, u64>::new(spec, history, &implied, *self, fixed, &mut scratch)
                .map(|search| search.run(&mut scratch))
        } else if n <= 128 {
            Search::<S, u128>::new(spec, history, &implied, *self, fixed, &mut scratch)
                .map(|search| search.run(&mut scratch))
        } else {
            Search::<S, WideBits>::new(spec, history, &implied, *self, fixed, &mut scratch)
                .map(|search| search.run(&mut scratch))
        };
        scratch.give_back();
        result.unwrap_or(undecided)
    }
}

/// The buffers of a search that do not depend on the specification, kept by each thread
/// from one check to the next so that checking many small histories does not allocate them
/// every time.
#[derive(Default)]
struct Scratch {
    /// The events in time order ([`time_order`]).
    slots: Vec<u32>,
    /// Each operation's rank (the place of its return among the returns).
    ranks: Vec<u32>,
    /// The operations by rank.
    by_rank: Vec<u32>,
    /// The stack of choices: (rank, state before it).
    taken: Vec<(u32, u32)>,
    /// The longest prefix the search linearized, by rank.
    longest: Vec<u32>,
}

thread_local! {
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
}

impl Scratch {
    /// Buffers kept beyond this many entries are let go rather than kept for the next check.
    const KEEP_UP_TO: usize = 1 << 12;

    /// This thread's buffers (empty ones if a check on this thread is already using them,
    /// or the thread is being torn down).
    fn take() -> Self {
        SCRATCH.try_with(std::cell::Cell::take).unwrap_or_default()
    }

    /// Returns the buffers to this thread for its next check, if they are not large.
    fn give_back(self) {
        if self.slots.capacity() <= Self::KEEP_UP_TO && self.ranks.capacity() <= Self::KEEP_UP_TO {
            let _ = SCRATCH.try_with(|scratch| scratch.set(self));
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
    /// Configurations (linearized set and state) the search reached, each once; with the
    /// memo this is the count of operations made to take effect, without it 0.
    pub configurations: u64,
    /// Times the search forgot Lowe's cache (and the states only it kept) to stay within its
    /// memory budget ([`Checker::with_memory`]).
    pub memo_forgotten: u64,
}

/// What the tables of a search of `n` operations take, known before the search starts: the
/// masks (two sets per operation), the copy of the history a specification's aids may make,
/// and the per-operation buffers. (The arena of states, which starts with room for a full
/// path, is counted apart.)
fn fixed_bytes<S: SequentialSpec, B: Bits>(n: usize) -> usize {
    /// The per-operation buffers of [`Scratch`], of [`time_order`]'s sort and of `Search`.
    const PER_OPERATION: usize = 64;
    let masks = n.saturating_mul(2).saturating_mul(B::bytes(n));
    let copy = n.saturating_mul(std::mem::size_of::<Operation<S::Op, S::Ret>>());
    masks
        .saturating_add(copy)
        .saturating_add(n.saturating_mul(PER_OPERATION))
}

/// The bytes of the arena's first block, room for a full path of `n` operations.
fn path_bytes<S: SequentialSpec>(n: usize) -> usize {
    (n + 1).saturating_mul(std::mem::size_of::<(S::State, Option<u64>)>())
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

/// A set of operations (by rank): the operations linearized so far, and the sets the search
/// works them out from.
trait Bits: Clone + Eq + Hash {
    fn empty(operations: usize) -> Self;
    /// [`Bits::empty`], or `None` if the system refuses the memory.
    fn try_empty(operations: usize) -> Option<Self> {
        Some(Self::empty(operations))
    }
    /// The bytes a set of `operations` operations takes, itself and on the heap (with the
    /// allocator's header), for the memory budget.
    fn bytes(operations: usize) -> usize {
        let _ = operations;
        std::mem::size_of::<Self>()
    }
    fn set(&mut self, op: usize);
    fn clear(&mut self, op: usize);
    /// Whether every member of `other` is a member of `self`.
    fn contains_all(&self, other: &Self) -> bool;
    /// The least member of `self` not in `except` and at least `from`.
    fn next_member(&self, except: &Self, from: usize) -> Option<usize>;
    /// The least number that is not a member.
    fn lowest_absent(&self) -> usize;
    /// The numbers below `operations` that are not members.
    fn complement(&self, operations: usize) -> Self;
}

/// The bits of a word at `from` and above.
fn from_bit(from: usize) -> u64 {
    if from >= 64 { 0 } else { !0 << from }
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
    fn next_member(&self, except: &Self, from: usize) -> Option<usize> {
        let members = self & !except & from_bit(from);
        (members != 0).then(|| members.trailing_zeros() as usize)
    }
    fn lowest_absent(&self) -> usize {
        self.trailing_ones() as usize
    }
    fn complement(&self, operations: usize) -> Self {
        !self & !from_bit(operations)
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
    fn next_member(&self, except: &Self, from: usize) -> Option<usize> {
        let above = if from >= 128 { 0 } else { !0 << from };
        let members = self & !except & above;
        (members != 0).then(|| members.trailing_zeros() as usize)
    }
    fn lowest_absent(&self) -> usize {
        self.trailing_ones() as usize
    }
    fn complement(&self, operations: usize) -> Self {
        let below = if operations >= 128 {
            !0
        } else {
            !(!0 << operations)
        };
        !self & below
    }
}

/// A bitset for histories of more than 128 operations.
#[derive(Clone, PartialEq, Eq, Hash)]
struct WideBits(Box<[u64]>);

impl Bits for WideBits {
    fn empty(operations: usize) -> Self {
        WideBits(vec![0; operations.div_ceil(64)].into_boxed_slice())
    }
    fn try_empty(operations: usize) -> Option<Self> {
        let mut words = Vec::new();
        words.try_reserve_exact(operations.div_ceil(64)).ok()?;
        words.resize(operations.div_ceil(64), 0);
        Some(WideBits(words.into_boxed_slice()))
    }
    fn bytes(operations: usize) -> usize {
        std::mem::size_of::<Self>() + 8 * operations.div_ceil(64) + ALLOCATION_HEADER
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
    fn next_member(&self, except: &Self, from: usize) -> Option<usize> {
        let mut above = from_bit(from % 64);
        for word in from / 64..self.0.len() {
            let members = self.0[word] & !except.0[word] & above;
            if members != 0 {
                return Some(64 * word + members.trailing_zeros() as usize);
            }
            above = !0;
        }
        None
    }
    fn lowest_absent(&self) -> usize {
        let full = self.0.iter().take_while(|&&word| word == !0).count();
        64 * full
            + self
                .0
                .get(full)
                .map_or(0, |word| word.trailing_ones() as usize)
    }
    fn complement(&self, operations: usize) -> Self {
        let words = self.0.iter().enumerate();
        let below = |i: usize| !from_bit(operations.saturating_sub(64 * i));
        WideBits(words.map(|(i, word)| !word & below(i)).collect())
    }
}

/// The events of `ops` (`2 * op` its call, `2 * op + 1` its return) in time order, with
/// gaps ([`NIL`]) to skip; at equal stamps a call comes before a return, so that touching
/// operations count as overlapping, and otherwise the lower event number first.
///
/// Recorded histories take every stamp from one counter, so their stamps are distinct and
/// lie close together: then each event goes straight to its slot in a table indexed by stamp
/// (a counting sort, linear in the events, where a comparison sort was a large share of a
/// small check). Sparse stamps, or two events with the same stamp, take the sort.
fn time_order<Op, Ret>(ops: &[Operation<Op, Ret>], into: &mut Vec<u32>) {
    let events = 2 * ops.len();
    let earliest = ops.iter().map(|o| o.call).min().unwrap_or(0);
    let latest = ops.iter().map(|o| o.ret).max().unwrap_or(0);
    if events > 0 && latest.saturating_sub(earliest) < events as u64 {
        let span = (latest - earliest + 1) as usize;
        into.clear();
        into.resize(span, NIL);
        let mut clash = false;
        for (id, op) in ops.iter().enumerate() {
            for (stamp, event) in [(op.call, 2 * id), (op.ret, 2 * id + 1)] {
                // (A stamp out of range, from a return before its call, counts as a clash.)
                let offset = stamp.wrapping_sub(earliest).min(span as u64);
                match into.get_mut(offset as usize) {
                    Some(slot) if *slot == NIL => *slot = event as u32,
                    _ => clash = true,
                }
            }
        }
        if !clash {
            return;
        }
    }
    let mut timed: Vec<(u64, bool, u32)> = Vec::with_capacity(events);
    for (id, op) in ops.iter().enumerate() {
        timed.push((op.call, false, 2 * id as u32));
        timed.push((op.ret, true, 2 * id as u32 + 1));
    }
    timed.sort_unstable();
    into.clear();
    into.extend(timed.into_iter().map(|(_, _, event)| event));
}

/// Marks a gap in the list of events.
const NIL: u32 = u32::MAX;

/// What the allocator is taken to add to each block, for the memory budget.
const ALLOCATION_HEADER: usize = 16;

/// One run of the search over one history.
///
/// The search numbers operations by *rank*, the position of their return among all returns
/// in time order, and works on sets of ranks. At each point the operation that must take
/// effect next at the latest is the one not yet linearized whose return comes first: the
/// lowest rank missing from the linearized set. The candidates are the operations not yet
/// linearized that were called before that return, one set worked out beforehand per
/// operation (`called`), less the linearized set; in rank order, which is the order of their
/// returns, most urgent first. So a step of the search walks the bits of one word (for up to
/// 64 operations) where a list of events would be walked, sorted and relinked.
///
/// States live in an arena and are named by their index there: the memo cache, the stack of
/// choices and the current state all hold indices, so a state is never cloned; each
/// successful step makes one new state.
struct Search<'a, S: SequentialSpec, B> {
    spec: &'a S,
    history: &'a History<S::Op, S::Ret>,
    checker: Checker,
    /// `by_rank[rank]`: the operation of that rank.
    by_rank: Vec<u32>,
    /// `called[rank]` (the first half) is the set of the operations called before the
    /// return of the operation of that rank (its own call among them); `after[rank]` (the
    /// second half) those that must take effect before it beyond real-time order
    /// ([`SequentialSpec::implied_order`]); all by rank.
    masks: Vec<B>,
    /// [`fixed_bytes`] of the search, for the memory budget.
    fixed: usize,
}

impl<'a, S: SequentialSpec, B: Bits> Search<'a, S, B> {
    fn new(
        spec: &'a S,
        history: &'a History<S::Op, S::Ret>,
        implied: &[(OpId, OpId)],
        checker: Checker,
        fixed: usize,
        scratch: &mut Scratch,
    ) -> Option<Self> {
        let operations = history.operations();
        let n = operations.len();
        time_order(operations, &mut scratch.slots);
        let mut by_rank = std::mem::take(&mut scratch.by_rank);
        by_rank.clear();
        by_rank.resize(n, 0);
        let rank = &mut scratch.ranks;
        rank.clear();
        rank.resize(n, 0);
        // (Within the memory budget, checked by the caller, but perhaps not what the system
        // grants: allocated fallibly, each set too.)
        let mut masks = Vec::new();
        masks.try_reserve_exact(2 * n).ok()?;
        for _ in 0..2 * n {
            masks.push(B::try_empty(n)?);
        }
        let (called, after) = masks.split_at_mut(n);
        // Backwards in time, the returns come in falling rank, known as they come; and the
        // operations called after a return, whose ranks are known by then (they return later
        // still), are the ones not called before it.
        let mut called_later = B::empty(n);
        let mut returns = n;
        for &event in scratch.slots.iter().rev().filter(|&&e| e != NIL) {
            let op = event as usize / 2;
            if event % 2 == 1 {
                returns -= 1;
                rank[op] = returns as u32;
                by_rank[returns] = op as u32;
                called[returns] = called_later.complement(n);
            } else {
                called_later.set(rank[op] as usize);
            }
        }
        for &(first, then) in implied {
            if first < n && then < n {
                after[rank[then] as usize].set(rank[first] as usize);
            }
        }
        Some(Search {
            spec,
            history,
            checker,
            by_rank,
            masks,
            fixed,
        })
    }

    fn run(mut self, scratch: &mut Scratch) -> (Verdict, SearchStats) {
        let mut taken = std::mem::take(&mut scratch.taken);
        let mut longest = std::mem::take(&mut scratch.longest);
        taken.clear();
        longest.clear();
        let result = self.search(&mut taken, &mut longest);
        (scratch.taken, scratch.longest) = (taken, longest);
        scratch.by_rank = self.by_rank;
        result
    }

    /// The search; `taken` and `longest` are empty buffers for the stack of choices and the
    /// longest prefix seen.
    ///
    /// The memory budget ([`Checker::with_memory`]) is kept by a running estimate of the
    /// bytes held ([`Held`]): a few additions per step, and a look at the sizes of the arena
    /// and the cache only when one of them must grow. When the estimate would pass the budget,
    /// the search forgets the cache ([`forget`]) and goes on.
    fn search(
        &mut self,
        taken: &mut Vec<(u32, u32)>,
        longest: &mut Vec<u32>,
    ) -> (Verdict, SearchStats) {
        let ops = self.history.operations();
        let n = ops.len();
        let (called, after) = self.masks.split_at(n);
        let memoize = self.checker.memoize;
        let mut stats = SearchStats::default();
        // The states on the current path and (with the memo) those of failed configurations,
        // each with the hash of its configuration if the memo had to work it out.
        let mut states: Vec<(S::State, Option<u64>)> = Vec::new();
        if states.try_reserve_exact(n + 1).is_err() {
            return (Verdict::Unknown { steps: 0 }, stats);
        }
        let init = self.spec.init();
        let mut held = Held {
            limit: self.checker.memory,
            fixed: self.fixed,
            entry: std::mem::size_of::<(S::State, Option<u64>)>(),
            state_heap: self.spec.state_heap_bytes(&init),
        };
        states.push((init, None));
        let mut failed = FailedConfigs::<B>::new(n);
        // The operations linearized (by rank), in order, each with the state before it:
        // `taken`.
        let mut state: u32 = 0;
        let mut linearized = B::empty(n);
        // The operation that could not take effect after the prefix in `longest`.
        let mut stuck: Option<u32> = None;
        // After undoing a choice, the search resumes with the candidates after it.
        let mut resume_from = 0;
        // Every configuration reached is new (the memo skips the others), so with the memo
        // the count of configurations is the count of successful steps.
        let configurations = |stats: &SearchStats| if memoize { stats.linearized } else { 0 };
        macro_rules! out_of_memory {
            () => {{
                stats.configurations = configurations(&stats);
                return (Verdict::Unknown { steps: stats.steps }, stats);
            }};
        }
        // Over budget (or no room to record a failed configuration): forget the memo and keep
        // the current path, or stop if even that does not fit.
        macro_rules! forget_or_stop {
            () => {{
                stats.memo_forgotten += 1;
                let path = Path {
                    taken,
                    state: &mut state,
                };
                if !forget(self.spec, &mut states, path, &mut failed, &mut held, n) {
                    out_of_memory!();
                }
            }};
        }
        while taken.len() < n {
            let urgent = linearized.lowest_absent();
            let candidates = &called[urgent];
            let mut next = std::mem::take(&mut resume_from);
            let mut chosen = None;
            while let Some(candidate) = candidates.next_member(&linearized, next) {
                next = candidate + 1;
                stats.steps += 1;
                if stats.steps > self.checker.budget {
                    stats.steps -= 1;
                    stats.configurations = configurations(&stats);
                    return (Verdict::Unknown { steps: stats.steps }, stats);
                }
                if !linearized.contains_all(&after[candidate]) {
                    continue;
                }
                let op = &ops[self.by_rank[candidate] as usize];
                let Some(after) = self
                    .spec
                    .step(&states[state as usize].0, &op.op, &op.result)
                else {
                    continue;
                };
                let mut with_op = linearized.clone();
                with_op.set(candidate);
                let hash = if memoize {
                    match failed.lookup(&with_op, &after, &states) {
                        Lookup::Failed => continue,
                        Lookup::New { hash } => hash,
                    }
                } else {
                    None
                };
                if states.len() == states.capacity()
                    && !held.grow_arena(&mut states, failed.bytes())
                {
                    forget_or_stop!();
                }
                held.state_heap += self.spec.state_heap_bytes(&after);
                states.push((after, hash));
                chosen = Some((candidate, with_op));
                break;
            }
            if let Some((candidate, with_op)) = chosen {
                stats.linearized += 1;
                taken.push((candidate as u32, state));
                state = states.len() as u32 - 1;
                linearized = with_op;
                if held.total(states.capacity(), failed.bytes()) > held.limit {
                    forget_or_stop!();
                }
                continue;
            }
            // No candidate leads anywhere new: `urgent` cannot take effect from here.
            if stuck.is_none() || longest.len() < taken.len() {
                longest.clear();
                longest.extend(taken.iter().map(|&(rank, _)| rank));
                stuck = Some(urgent as u32);
            }
            let Some((undone, before)) = taken.pop() else {
                stats.configurations = configurations(&stats);
                let op_of = |rank: u32| self.by_rank[rank as usize] as OpId;
                let counterexample = Counterexample {
                    longest_prefix: longest.iter().map(|&rank| op_of(rank)).collect(),
                    stuck: op_of(stuck.expect("a dead end was recorded just above")),
                };
                return (Verdict::NotLinearizable(counterexample), stats);
            };
            stats.backtracks += 1;
            let recorded = if memoize {
                let room = held
                    .limit
                    .saturating_sub(held.total(states.capacity(), failed.bytes()));
                failed.insert(&linearized, state, &states, room)
            } else {
                // Without the cache nothing refers to the abandoned state any more.
                let heap = self.spec.state_heap_bytes(&states[state as usize].0);
                held.state_heap = held.state_heap.saturating_sub(heap);
                states.truncate(state as usize);
                true
            };
            state = before;
            linearized.clear(undone as usize);
            resume_from = undone as usize + 1;
            if !recorded {
                // The cache has no room for the configuration that just failed: forget it
                // all (this one included) and go on.
                forget_or_stop!();
            }
        }
        stats.configurations = configurations(&stats);
        let order = taken
            .iter()
            .map(|&(rank, _)| self.by_rank[rank as usize] as OpId)
            .collect();
        (Verdict::Linearizable(order), stats)
    }
}

/// The bytes a search holds, as estimated for its memory budget ([`Checker::with_memory`]).
/// The arena's and the cache's shares are worked out from their sizes when asked
/// ([`Held::total`]: a few additions), so only the states' heap bytes are counted as they
/// come and go.
struct Held {
    /// The budget.
    limit: usize,
    /// The tables whose size the history fixes ([`fixed_bytes`]).
    fixed: usize,
    /// The size of one entry of the arena.
    entry: usize,
    /// What the arena's states hold on the heap ([`SequentialSpec::state_heap_bytes`]).
    state_heap: usize,
}

impl Held {
    /// All the search holds, with an arena of `arena` entries and a cache of `memo` bytes.
    fn total(&self, arena: usize, memo: usize) -> usize {
        self.fixed
            .saturating_add(arena.saturating_mul(self.entry))
            .saturating_add(self.state_heap)
            .saturating_add(memo)
    }

    /// Doubles the room of the full arena `states` if the old and the new block fit in the
    /// budget together (the moment of the move) and the system grants it; whether it did.
    fn grow_arena<T>(&self, states: &mut Vec<T>, memo: usize) -> bool {
        let more = states.capacity().max(4);
        let moving = self
            .total(states.capacity(), memo)
            .saturating_add(more.saturating_mul(2).saturating_mul(self.entry));
        moving <= self.limit && states.try_reserve_exact(more).is_ok()
    }
}

/// The current path of a search: the stack of choices, each with the state (index in the
/// arena) before it, and the current state.
struct Path<'a> {
    taken: &'a mut Vec<(u32, u32)>,
    state: &'a mut u32,
}

/// Forgets Lowe's cache, and with it the states of failed configurations: only the states on
/// `path` stay in the arena (moved to its front, in order, and their indices in `path`
/// changed to match), and the arena gives back the room beyond a full path. Whether the
/// search may go on: not when what is left still takes more than half the budget, as each
/// forgetting must leave room for many steps before the next.
///
/// Forgetting failures never changes a verdict: the cache only prunes configurations that
/// were explored before and failed, and exploring them again fails again the same way, so the
/// search reaches the same order or the same counterexample, in more steps.
fn forget<S: SequentialSpec, B: Bits>(
    spec: &S,
    states: &mut Vec<(S::State, Option<u64>)>,
    path: Path<'_>,
    failed: &mut FailedConfigs<B>,
    held: &mut Held,
    n: usize,
) -> bool {
    failed.forget();
    // The states on a path were made in its order, so their indices rise along it and each
    // is at least its place on the path: moving each to its place never overwrites a state
    // still to move.
    let mut kept = 0;
    let indices = path.taken.iter_mut().map(|(_, before)| before);
    for index in indices.chain(std::iter::once(path.state)) {
        debug_assert!(*index as usize >= kept);
        states.swap(kept, *index as usize);
        *index = kept as u32;
        kept += 1;
    }
    states.truncate(kept);
    states.shrink_to(n + 1);
    held.state_heap = states
        .iter()
        .map(|(state, _)| spec.state_heap_bytes(state))
        .sum();
    held.total(states.capacity(), failed.bytes()) <= held.limit / 2
}

/// Lowe's cache, holding the configurations found to lead nowhere.
///
/// The search reaches a configuration a second time only after it has explored everything
/// beyond the first visit: every configuration beyond has more operations linearized, and
/// the search is depth first. So recording a configuration when the search backs out of it
/// prunes exactly what recording it on arrival would, and costs far less when the history is
/// linearizable: the search then mostly goes straight through and records almost nothing.
///
/// Before a configuration's state is hashed, a filter on linearized sets (a bit per set
/// hash, modulo its size) says whether any failed configuration could have the same set; most
/// configurations are then known to be new without hashing their state. A false alarm costs
/// only the full lookup. No state is hashed twice: a hash worked out for a lookup stays
/// beside the state in the arena for when its configuration fails.
struct FailedConfigs<B> {
    hasher: FixedState,
    /// How many configurations to make room for at the first failure.
    expected: usize,
    /// Bit `set_hash % FILTER_BITS` is set for the linearized set of every failed
    /// configuration.
    filter: [u64; FILTER_BITS / 64],
    /// The failed configurations: (hash of set and state, the set, the state's index).
    configs: HashTable<(u64, B, u32)>,
    /// The bytes of `configs`' table, for the memory budget.
    table_bytes: usize,
    /// The bytes each set in `configs` holds on the heap.
    set_heap: usize,
}

/// The size of [`FailedConfigs::filter`]: small beside a search's other work, and sparse
/// while few configurations have failed (when it saves the most).
const FILTER_BITS: usize = 4096;

/// What the cache knows of a configuration.
enum Lookup {
    /// It failed before.
    Failed,
    /// It is new; here is its hash if working out the answer needed it.
    New { hash: Option<u64> },
}

impl<B: Bits> FailedConfigs<B> {
    /// An empty cache (allocating nothing until the first failure) for a history of
    /// `operations` operations.
    fn new(operations: usize) -> Self {
        FailedConfigs {
            hasher: FixedState::default(),
            expected: 2 * operations,
            filter: [0; FILTER_BITS / 64],
            configs: HashTable::new(),
            table_bytes: 0,
            set_heap: B::bytes(operations) - std::mem::size_of::<B>(),
        }
    }

    /// The bytes the cache holds: its table, and the sets its entries keep on the heap.
    fn bytes(&self) -> usize {
        self.table_bytes + self.configs.len() * self.set_heap
    }

    /// The bytes of a table with room for `capacity` entries, as hashbrown lays it out: a
    /// power of two of buckets, at most 7/8 of them full, each an entry and a control byte.
    fn table_bytes_for(capacity: usize) -> usize {
        let buckets = if capacity < 8 {
            if capacity < 4 { 4 } else { 8 }
        } else {
            capacity.saturating_mul(8).div_ceil(7).next_power_of_two()
        };
        let entry = std::mem::size_of::<(u64, B, u32)>() + 1;
        buckets.saturating_mul(entry) + 16 + ALLOCATION_HEADER
    }

    /// Forgets every failed configuration, and gives back the table.
    fn forget(&mut self) {
        self.configs = HashTable::new();
        self.filter = [0; FILTER_BITS / 64];
        self.table_bytes = 0;
    }

    /// The set's hash, and its bit in the filter as (word, mask).
    fn set_hash(&self, set: &B) -> (u64, usize, u64) {
        let hash = self.hasher.hash_one(set);
        let bit = hash as usize % FILTER_BITS;
        (hash, bit / 64, 1 << (bit % 64))
    }

    fn config_hash<T: Hash>(&self, set_hash: u64, state: &T) -> u64 {
        self.hasher.hash_one((set_hash, state))
    }

    /// Whether the configuration of `set` and `state` failed before; `states` is the arena.
    fn lookup<T: Eq + Hash>(&self, set: &B, state: &T, states: &[(T, Option<u64>)]) -> Lookup {
        if self.configs.is_empty() {
            return Lookup::New { hash: None };
        }
        let (set_hash, word, mask) = self.set_hash(set);
        if self.filter[word] & mask == 0 {
            return Lookup::New { hash: None };
        }
        let hash = self.config_hash(set_hash, state);
        let seen = self.configs.find(hash, |(h, s, i)| {
            *h == hash && s == set && states[*i as usize].0 == *state
        });
        match seen {
            Some(_) => Lookup::Failed,
            None => Lookup::New { hash: Some(hash) },
        }
    }

    /// Records that the configuration of `set` and `states[state]` leads nowhere (it must
    /// not be recorded already), if that takes at most `room` more bytes (counting, when the
    /// table must grow, the old and the new table at once) and the system grants them;
    /// whether it did.
    fn insert<T: Hash>(
        &mut self,
        set: &B,
        state: u32,
        states: &[(T, Option<u64>)],
        room: usize,
    ) -> bool {
        let on_heap = self.set_heap;
        if on_heap > room {
            return false;
        }
        if self.configs.len() == self.configs.capacity() {
            let more = self.configs.capacity().max(self.expected);
            let wanted = Self::table_bytes_for(self.configs.len() + more);
            if wanted.saturating_add(on_heap) > room
                || self.configs.try_reserve(more, |&(h, _, _)| h).is_err()
            {
                return false;
            }
            self.table_bytes = Self::table_bytes_for(self.configs.capacity());
        }
        let (set_hash, word, mask) = self.set_hash(set);
        self.filter[word] |= mask;
        let (reached, hash) = &states[state as usize];
        let hash = hash.unwrap_or_else(|| self.config_hash(set_hash, reached));
        self.configs
            .insert_unique(hash, (hash, set.clone(), state), |&(h, _, _)| h);
        true
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

    #[test]
    fn events_in_time_order_whether_counted_or_sorted() {
        // Dense stamps take the counting sort; the same history with its stamps spread out,
        // or with touching operations (a clash of stamps), takes the sort: the same events in
        // the same order either way, and the same search.
        use crate::runner::Shape;
        use crate::synthetic::queue_history;
        for seed in 0..40 {
            let dense = queue_history(
                Shape {
                    threads: 4,
                    ops_per_thread: 8,
                },
                seed,
            );
            let spread = History::from_recorded(
                dense
                    .operations()
                    .iter()
                    .map(|o| Operation {
                        call: 1000 * o.call + 7,
                        ret: 1000 * o.ret + 7,
                        ..o.clone()
                    })
                    .collect(),
            );
            assert_eq!(order_of(&dense), order_of(&spread), "seed {seed}");
            let spec = QueueSpec::new();
            assert_eq!(
                Checker::new().check_with_stats(&spec, &dense),
                Checker::new().check_with_stats(&spec, &spread)
            );
        }
        let mut touching = History::new();
        touching.add(0, 1..2, Push(1), Pushed).unwrap();
        touching.add(1, 2..3, Pop, Popped(1)).unwrap();
        touching.add(2, 2..4, Push(2), Pushed).unwrap();
        // Two calls at stamp 2 (a clash, so the sort): calls before the return at the same
        // stamp, and among calls the lower event number first.
        assert_eq!(order_of(&touching), vec![0, 2, 4, 1, 3, 5]);
    }

    /// The three bitsets answer alike, across the boundaries of their words.
    #[test]
    fn bitsets_agree_on_members_and_gaps() {
        fn answers<B: Bits>(
            width: usize,
            members: &[usize],
            except: &[usize],
        ) -> Vec<Option<usize>> {
            let (mut set, mut other) = (B::empty(128), B::empty(128));
            members.iter().for_each(|&m| set.set(m));
            except.iter().for_each(|&m| other.set(m));
            let mut seen: Vec<_> = (0..=130)
                .map(|from| set.next_member(&other, from))
                .collect();
            seen.push(Some(set.lowest_absent()));
            seen.push(Some(other.lowest_absent()));
            for operations in [0, 3, 63, 64, 65, 100, 128].map(|o| o.min(width)) {
                let outside = set.complement(operations);
                let inside = (0..width).filter(|&m| m < operations && !members.contains(&m));
                let mut expected = B::empty(128);
                inside.for_each(|m| expected.set(m));
                assert!(outside == expected, "complement below {operations}");
            }
            seen
        }
        let members = [0, 1, 2, 5, 63, 64, 65, 100, 127];
        let except = [0, 1, 2, 3, 5, 64];
        let wide = answers::<WideBits>(128, &members, &except);
        assert_eq!(wide, answers::<u128>(128, &members, &except));
        assert_eq!(wide[6], Some(63));
        assert_eq!(wide[64], Some(65));
        assert_eq!(wide[128], None);
        assert_eq!(wide[131..], [Some(3), Some(4)]);
        let low: Vec<_> = members.iter().copied().filter(|&m| m < 64).collect();
        let narrow = answers::<u64>(64, &low, &except[..5]);
        assert_eq!(
            narrow[..=64],
            answers::<WideBits>(64, &low, &except[..5])[..=64]
        );
        assert_eq!(narrow[3], Some(63));
    }

    fn order_of<Op, Ret>(h: &History<Op, Ret>) -> Vec<u32> {
        let mut events = Vec::new();
        time_order(h.operations(), &mut events);
        events.into_iter().filter(|&e| e != NIL).collect()
    }
}
