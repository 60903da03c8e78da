//! The Bagpipe: an array of weak bags ("pipes") that threads walk in random order, trading
//! FIFO consistency for scalability.
//!
//! After Eli Rosenthal's bagpipe crate and its note "Bagpipes: Scalable Concurrent Bags"
//! (`shared/seeds/bagpipes-scalable-concurrent-bags.txt`), itself close to scalloc's span pool
//! and the Distributed Queues of Haas et al. A single queue, however scalable its fetch-and-add,
//! serializes every thread on two counters. A Bagpipe gives each operation a choice of
//! `pipes.len()` queues (or stacks), and an attempt that loses a race on one pipe — a
//! [`PopError::Transient`] or a failed [`WeakBag::try_push`] — simply moves on to the next, so
//! threads drift away from loaded pipes towards idle ones without any coordination beyond the
//! pipes' own.
//!
//! ```
//! use pitlane_queue::bagpipe::Bagpipe;
//! use pitlane_queue::mpmc::Queue;
//!
//! let bag: Bagpipe<Queue<u64>> = Bagpipe::new();
//! std::thread::scope(|s| {
//!     for t in 0..4 {
//!         let bag = &bag;
//!         s.spawn(move || {
//!             let handle = bag.handle();
//!             (0..100).for_each(|i| handle.push(t * 100 + i));
//!         });
//!     }
//! });
//! let mut all: Vec<u64> = std::iter::from_fn(|| bag.pop()).collect();
//! all.sort();
//! assert_eq!(all, (0..400).collect::<Vec<_>>());
//! ```
//!
//! # The walk
//!
//! There are a power of two of pipes (by default twice the available parallelism, rounded
//! up). Each [`Handle`] holds an odd stride; adding an odd stride modulo a power of two visits
//! every pipe once per round, so a walk is a permutation of the pipes, different for each
//! handle. Handles start on consecutive pipes, so the first `pipe_count()` handles each have a
//! home pipe of their own. A push starts at the handle's push position and moves it on only
//! when a push there loses a race, so a thread keeps pushing into a pipe as long as nobody
//! contends with it there. A pop starts at the pipe that last gave the handle an item and walks
//! on from there. Calls on the [`Bagpipe`] itself use a walk kept per thread; over pipes that
//! keep state per thread for their own plain calls (stacks keep a stash of nodes per seat), such
//! a call looks the thread's seat up once and hands it to every pipe it tries.
//!
//! # What each operation reports
//!
//! - [`Bagpipe::try_push`] visits each pipe at most once and fails only if every pipe's
//!   `try_push` failed (each lost a race). [`Bagpipe::push`] keeps walking until a pipe takes
//!   the item. [`Bagpipe::push_bounded`] and [`Handle::push_bounded`] give up after a number of
//!   transient failures (the seed's *bail-out*), so that a caller such as an allocator can fall
//!   back to another source.
//! - [`Bagpipe::try_pop`] visits each pipe at most once: an item if some pipe gave one,
//!   [`PopError::Empty`] only if every pipe reported empty, otherwise
//!   [`PopError::Transient`]. [`Bagpipe::pop`] keeps walking and returns `None` only after
//!   `pipes.len()` consecutive pipes reported empty. [`Bagpipe::pop_bounded`] and
//!   [`Handle::pop_bounded`] also give up (with `Transient`) after a number of transient
//!   failures.
//!
//! # Guarantees, and the ordering it does not give
//!
//! A Bagpipe never loses or duplicates an item: each successful push places the item in
//! exactly one pipe, at that pipe's linearization point, and each successful pop removes it
//! from there at the pipe's linearization point; items left at drop time are dropped with the
//! pipes. That is the one guarantee it makes, and the only one the seed asks for. Against a
//! sequential bag it is linearizable for pushes and item-returning pops. It gives **no order**:
//! not FIFO, not LIFO, not even per thread — two items pushed one after the other by one
//! thread may land in different pipes and be popped in either order. And its **emptiness is
//! not linearizable**: `Empty` means each pipe was seen empty at some moment of the call, not
//! all at the same moment, so an item pushed during the call into a pipe already visited is
//! missed. An item that sat in the bag for the whole call is never missed.
//!
//! [`size_guess`](Bagpipe::size_guess) sums the pipes' guesses; it is exact only when nothing
//! is in flight.
//!
//! # Revocation
//!
//! When the pipes are [`RevocableBag`]s, [`Bagpipe::revoke`] removes a tracked item with one
//! CAS on the cell it sits in, whatever pipe that is (the item's handle names the cell); see
//! [`revoke`](crate::revoke).

use core::cell::Cell;
use core::fmt;

use crossbeam_utils::CachePadded;
use pitlane_sync::shim::atomic::{AtomicUsize, Ordering};

use crate::revoke::{Revocable, RevocableBag};
use crate::seat::Held;
use crate::weak_bag::{BagHandle, IntoIter, PopError, PushError, WeakBag};

/// The most pipes a Bagpipe may have.
///
/// ```
/// use pitlane_queue::bagpipe::{Bagpipe, MAX_PIPES};
/// use pitlane_queue::stack::Stack;
///
/// assert!(Bagpipe::<Stack<u8>>::with_pipes(MAX_PIPES + 1).is_err());
/// ```
pub const MAX_PIPES: usize = 1 << 16;

/// An array of weak bags walked in a random permutation per handle.
///
/// See the [module documentation](self). Dropping the Bagpipe drops its pipes in turn, as a
/// `Vec` of bags would: if a value's drop panics in one pipe, the later pipes are still
/// dropped while that panic unwinds, and a second panicking drop there aborts the process.
///
/// ```
/// use pitlane_queue::{bagpipe::Bagpipe, mpmc::Queue};
///
/// let bag: Bagpipe<Queue<u32>> = Bagpipe::new();
/// std::thread::scope(|s| {
///     for t in 0..2 {
///         let bag = &bag;
///         s.spawn(move || (0..100).for_each(|i| bag.push(t * 100 + i)));
///     }
/// });
/// // No order among the pipes; every item comes out once.
/// let mut all: Vec<u32> = bag.into_iter().collect();
/// all.sort();
/// assert_eq!(all, (0..200).collect::<Vec<_>>());
/// ```
pub struct Bagpipe<B> {
    /// The pipes; a power of two of them.
    pipes: Box<[CachePadded<B>]>,
    /// `pipes.len() - 1`: positions are reduced with it.
    mask: usize,
    /// How many handles have been made; mixed into each new handle's walk.
    handles: AtomicUsize,
}

/// Why [`Bagpipe::with_pipes`] made no Bagpipe.
///
/// ```
/// use pitlane_queue::bagpipe::{Bagpipe, BagpipeError};
/// use pitlane_queue::stack::Stack;
///
/// let error = Bagpipe::<Stack<u8>>::with_pipes(0).unwrap_err();
/// assert_eq!(error, BagpipeError::PipeCount { requested: 0 });
/// assert_eq!(error.to_string(), "a Bagpipe needs between 1 and 65536 pipes, not 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BagpipeError {
    /// The count asked for is 0 or more than [`MAX_PIPES`].
    PipeCount {
        /// The count asked for.
        requested: usize,
    },
    /// The allocator could not provide the pipes.
    OutOfMemory {
        /// The pipes to be made (the count asked for, rounded up to a power of two).
        pipes: usize,
        /// The bytes they need.
        bytes: usize,
    },
}

impl fmt::Display for BagpipeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PipeCount { requested } => write!(
                f,
                "a Bagpipe needs between 1 and {MAX_PIPES} pipes, not {requested}"
            ),
            Self::OutOfMemory { pipes, bytes } => write!(
                f,
                "out of memory: {pipes} pipes need {bytes} bytes, which the allocator refused"
            ),
        }
    }
}

impl std::error::Error for BagpipeError {}

/// Where a thread pushes and pops next, and the odd stride that walks it on. Positions are
/// reduced by each Bagpipe's mask when used.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Walk {
    /// The pipe pushes start at: the thread's home, left only when a push there loses a race.
    push_at: usize,
    /// The pipe pops start at: the last one that gave an item.
    pop_at: usize,
    /// Odd, so that adding it visits every pipe once per round.
    stride: usize,
}

impl Walk {
    /// A thread's walk before it is made: a valid walk (from pipe 0, stride 1), so that a
    /// Bagpipe's plain call over stacks can use it without a test (see [`Bagpipe::plain`]);
    /// its stride of 1 marks it as not made yet. A made walk's stride is 1 only with odds of
    /// 2^-63, and such a walk would only be made again, which changes where it starts.
    #[cfg_attr(pitlane_loom, allow(dead_code))]
    pub(crate) const UNMADE: Walk = Walk {
        push_at: 0,
        pop_at: 0,
        stride: 1,
    };

    /// A walk from pipe `start` with a stride chosen by `seed`.
    fn new(start: usize, seed: u64) -> Self {
        Walk {
            push_at: start,
            pop_at: start,
            stride: (splitmix64(seed) as usize) << 1 | 1,
        }
    }
}

/// Sebastiano Vigna's SplitMix64 finalizer: spreads consecutive seeds over the whole word.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Seeds for per-thread walks.
#[cfg(not(pitlane_loom))]
static THREAD_WALKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs `f` with this thread's walk, making it on first use. The walk is kept in the seat
/// module's thread-local `Local`, beside the seat, and serves every Bagpipe (positions are
/// reduced by each Bagpipe's mask).
///
/// `f` runs outside `LocalKey::with`: given the whole walk as its closure, `with` was
/// compiled out of line, and reached the thread-local through an indirect call on every
/// operation (a call, an indirect call and six saved registers more than a handle's
/// operation; `docs/notes/plain-calls.md`, fifth session). Only the address is taken inside.
#[cfg(not(pitlane_loom))]
#[inline(always)]
fn with_thread_walk<R>(f: impl FnOnce(&Cell<Walk>) -> R) -> R {
    // SAFETY: the seat module's thread-local `Local` is initialized by a constant and has no
    // destructor, so its storage is the calling thread's for the thread's whole life, never
    // moved nor freed before the thread ends, and this call runs on that thread; its fields are
    // `Cell`s, only ever shared by reference, so re-entrant calls from `f` (a value's `Drop`
    // that uses a Bagpipe) are fine.
    let walk = unsafe { &(*crate::seat::local()).walk };
    if walk.get().stride == Walk::UNMADE.stride {
        make_walk(walk);
    }
    f(walk)
}

/// Makes the first walk of the calling thread, in `walk`: consecutive threads start on
/// consecutive pipes.
#[cfg(not(pitlane_loom))]
#[cold]
#[inline(never)]
fn make_walk(walk: &Cell<Walk>) {
    let n = THREAD_WALKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    walk.set(Walk::new(n as usize, n));
}

/// Makes the walk of a thread that takes its seat, if it has none yet. The seat is taken by a
/// stack's plain call, which may be the first attempt of a Bagpipe's plain call over stacks
/// that started with the unmade walk: the walk then changes under that call, whose first
/// attempt was on the unmade walk's pipe, not on the new walk's. The rest of such a call
/// (`push_walk_contended`, `pop_walk_contended`) sees that the walk is no longer the one its
/// first attempt started from, and does not count that attempt in its run of full or empty
/// pipes, so that the call still sees every pipe on the walk it goes on with.
#[cfg(not(pitlane_loom))]
#[cold]
pub(crate) fn make_walk_on_sitting_down(local: &crate::seat::Local) {
    if local.walk.get().stride == Walk::UNMADE.stride {
        make_walk(&local.walk);
    }
}

/// Under loom: a fixed walk for every call, because a model must behave the same way in every
/// execution, and thread-locals and counters outside the model would outlive an execution.
#[cfg(pitlane_loom)]
#[inline]
fn with_thread_walk<R>(f: impl FnOnce(&Cell<Walk>) -> R) -> R {
    f(&Cell::new(Walk::new(0, 0)))
}

impl<B: WeakBag + Default> Bagpipe<B> {
    /// A Bagpipe of twice the available parallelism in pipes, rounded up to a power of two.
    /// Like `Box::new`, it aborts the process if the allocator cannot provide the pipes (a few
    /// cache lines per pipe); [`Bagpipe::with_pipes`] returns an error instead.
    ///
    /// ```
    /// use pitlane_queue::bagpipe::Bagpipe;
    /// use pitlane_queue::stack::Stack;
    ///
    /// let bag: Bagpipe<Stack<u32>> = Bagpipe::new();
    /// assert!(bag.pipe_count().is_power_of_two());
    /// ```
    pub fn new() -> Self {
        let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
        let count = (2 * parallelism).clamp(1, MAX_PIPES).next_power_of_two();
        Self::build(count).unwrap_or_else(|_| {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::array::<CachePadded<B>>(count)
                    .unwrap_or(std::alloc::Layout::new::<CachePadded<B>>()),
            )
        })
    }

    /// A Bagpipe of `pipes` pipes, rounded up to a power of two.
    ///
    /// # Errors
    /// [`BagpipeError::PipeCount`] if `pipes` is 0 or more than [`MAX_PIPES`];
    /// [`BagpipeError::OutOfMemory`] if the allocator cannot provide the pipes.
    ///
    /// ```
    /// use pitlane_queue::bagpipe::Bagpipe;
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let bag = Bagpipe::<Queue<u8>>::with_pipes(6).unwrap();
    /// assert_eq!(bag.pipe_count(), 8);
    /// assert!(Bagpipe::<Queue<u8>>::with_pipes(0).is_err());
    /// ```
    pub fn with_pipes(pipes: usize) -> Result<Self, BagpipeError> {
        if pipes == 0 || pipes > MAX_PIPES {
            return Err(BagpipeError::PipeCount { requested: pipes });
        }
        Self::build(pipes.next_power_of_two())
    }

    /// Makes `count` (a power of two) empty pipes, allocated fallibly.
    fn build(count: usize) -> Result<Self, BagpipeError> {
        debug_assert!(count.is_power_of_two());
        let mut pipes = Vec::new();
        if pipes.try_reserve_exact(count).is_err() {
            return Err(BagpipeError::OutOfMemory {
                pipes: count,
                bytes: count.saturating_mul(size_of::<CachePadded<B>>()),
            });
        }
        pipes.extend((0..count).map(|_| CachePadded::new(B::default())));
        // No reallocation: an exact reservation of `count` holds `count` pipes.
        Ok(Self {
            pipes: pipes.into_boxed_slice(),
            mask: count - 1,
            handles: AtomicUsize::new(0),
        })
    }
}

impl<B: WeakBag + Default> Default for Bagpipe<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: WeakBag> Bagpipe<B> {
    /// Runs a plain call: where the pipes keep state per seat, `seated` with this thread's walk
    /// and its seat as it stands (`Held`, read once for the whole call and handed to each pipe
    /// tried, so that a stack pipe finds its stash for the seat without looking the seat up
    /// again); otherwise `unseated` with the walk alone, whose pipes then make their own plain
    /// calls.
    ///
    /// The seated case tests nothing here, so that its code is as short as a handle's (and
    /// callers' loops keep it in line, as they keep a handle's): the walk is always a valid one
    /// (see [`Walk::UNMADE`]; a thread's walk is made when it takes its seat), and a pipe
    /// itself sends a call whose seat is none, or has no state in it yet, to its own plain
    /// call, out of line (a thread's first call, a thread past [`SEATS`](crate::seat)
    /// threads, a call from a thread-local destructor at thread exit).
    #[cfg(not(pitlane_loom))]
    #[inline(always)]
    fn plain<A, R>(
        &self,
        arg: A,
        unseated: impl FnOnce(&Cell<Walk>, A) -> R,
        seated: impl FnOnce(&Cell<Walk>, Held<'_>, A) -> R,
    ) -> R {
        if !B::SEATED {
            return with_thread_walk(|walk| unseated(walk, arg));
        }
        // SAFETY: as in `with_thread_walk`.
        let local = unsafe { &*crate::seat::local() };
        // The walk and the seat from one thread-local: one computation of its address.
        seated(&local.walk, Held::now_in(local), arg)
    }

    /// Under loom no thread holds a seat.
    #[cfg(pitlane_loom)]
    #[inline]
    fn plain<A, R>(
        &self,
        arg: A,
        unseated: impl FnOnce(&Cell<Walk>, A) -> R,
        _seated: impl FnOnce(&Cell<Walk>, Held<'_>, A) -> R,
    ) -> R {
        with_thread_walk(|walk| unseated(walk, arg))
    }

    /// How many pipes there are (a power of two).
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag = Bagpipe::<Stack<u8>>::with_pipes(3).unwrap();
    /// assert_eq!(bag.pipe_count(), 4);
    /// ```
    pub fn pipe_count(&self) -> usize {
        self.pipes.len()
    }

    /// A handle with its own walk through the pipes; give each thread its own. It holds a
    /// handle of each pipe, in one allocation: like [`Bagpipe::new`], it aborts the process if
    /// the allocator cannot provide that (a few words per pipe).
    ///
    /// ```
    /// use pitlane_queue::bagpipe::Bagpipe;
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let bag: Bagpipe<Queue<&str>> = Bagpipe::new();
    /// let handle = bag.handle();
    /// handle.push("page");
    /// assert_eq!(handle.pop(), Some("page"));
    /// ```
    pub fn handle(&self) -> Handle<'_, B> {
        let made = self.handles.fetch_add(1, Ordering::Relaxed);
        // Consecutive handles start on consecutive pipes, from an offset and with strides
        // that depend on the Bagpipe's address (not under loom: a model must not depend on
        // addresses), so the first `pipe_count()` handles each get a pipe of their own.
        let salt = if cfg!(pitlane_loom) {
            0
        } else {
            splitmix64(core::ptr::from_ref(self).addr() as u64)
        };
        Handle {
            bagpipe: self,
            walk: Cell::new(Walk::new(
                (salt as usize).wrapping_add(made),
                salt ^ made as u64,
            )),
            pipes: self.pipes.iter().map(|pipe| pipe.handle()).collect(),
            operations: Cell::new(0),
        }
    }

    /// One round: each pipe gets at most one attempt; fails only if all of them failed:
    /// [`PushError::Full`] if every pipe was full, else [`PushError::Transient`].
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, mpmc::Queue};
    ///
    /// let bag: Bagpipe<Queue<i32>> = Bagpipe::new();
    /// assert!(bag.try_push(5).is_ok());
    /// ```
    #[inline]
    pub fn try_push(&self, item: B::Item) -> Result<(), PushError<B::Item>> {
        let pipes = self.pipes.len();
        self.plain(
            item,
            |walk, item| self.push_walk(walk, item, pipes, |i, item| self.pipes[i].try_push(item)),
            |walk, seat, item| {
                self.push_walk(walk, item, pipes, move |i, item| {
                    self.pipes[i].try_push_seated(seat, item)
                })
            },
        )
    }

    /// Pushes `item`, walking the pipes until one takes it.
    ///
    /// # Panics
    /// If every pipe is full (see [`PushError::Full`]).
    ///
    /// ```
    /// use pitlane_queue::bagpipe::Bagpipe;
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let bag: Bagpipe<Queue<i32>> = Bagpipe::new();
    /// bag.push(5);
    /// assert_eq!(bag.size_guess(), 1);
    /// ```
    #[inline]
    pub fn push(&self, item: B::Item) {
        self.plain(
            item,
            |walk, item| {
                self.push_walk_until_taken(walk, item, |i, item| self.pipes[i].try_push(item))
            },
            |walk, seat, item| {
                // Forced in line: left to the compiler, this attempt (a whole stack push) was
                // a call of its own on every push (`docs/notes/plain-calls.md`, sixteenth
                // session). Forcing the queue pipes' and the handles' attempts in line as well
                // measured no better.
                self.push_walk_until_taken(
                    walk,
                    item,
                    #[inline(always)]
                    move |i, item| self.pipes[i].try_push_seated(seat, item),
                )
            },
        )
    }

    /// One round: an item from the first pipe that gives one; [`PopError::Empty`] only if
    /// every pipe reported empty; [`PopError::Transient`] otherwise.
    ///
    /// ```
    /// use pitlane_queue::{PopError, bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<i32>> = Bagpipe::new();
    /// assert_eq!(bag.try_pop(), Err(PopError::Empty));
    /// ```
    #[inline]
    pub fn try_pop(&self) -> Result<B::Item, PopError> {
        self.plain(
            (),
            |walk, ()| self.pop_round(walk, |i| self.pipes[i].try_pop()),
            |walk, seat, ()| self.pop_round(walk, move |i| self.pipes[i].try_pop_seated(seat)),
        )
    }

    /// Pops an item, walking the pipes; `None` once `pipe_count()` consecutive pipes reported
    /// empty.
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, mpmc::Queue};
    ///
    /// let bag: Bagpipe<Queue<i32>> = Bagpipe::new();
    /// bag.push(1);
    /// assert_eq!(bag.pop(), Some(1));
    /// assert_eq!(bag.pop(), None);
    /// ```
    #[inline]
    pub fn pop(&self) -> Option<B::Item> {
        self.plain(
            (),
            |walk, ()| {
                self.pop_walk(walk, usize::MAX, |i| self.pipes[i].try_pop())
                    .ok()
            },
            |walk, seat, ()| {
                // Forced in line, as in `push`.
                self.pop_walk(
                    walk,
                    usize::MAX,
                    #[inline(always)]
                    move |i| self.pipes[i].try_pop_seated(seat),
                )
                .ok()
            },
        )
    }

    /// The bail-out push: walks until a pipe takes `item`, `give_up_after` attempts have lost
    /// races (0 counts as 1; then [`PushError::Transient`]), or every pipe was full in a row
    /// ([`PushError::Full`]), and then hands the item back, so that a caller with somewhere
    /// else to go (an allocator's fresh memory) need not wait on contended pipes. It walks as
    /// [`push`](Self::push) does, from the calling thread's position; [`Handle::push_bounded`]
    /// is the same on a handle's walk.
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u32>> = Bagpipe::new();
    /// // Alone, no attempt loses a race: the push goes in whatever the budget.
    /// assert_eq!(bag.push_bounded(3, 0), Ok(()));
    /// assert_eq!(bag.pop(), Some(3));
    /// ```
    #[inline]
    pub fn push_bounded(
        &self,
        item: B::Item,
        give_up_after: usize,
    ) -> Result<(), PushError<B::Item>> {
        self.plain(
            item,
            |walk, item| {
                self.push_walk(walk, item, give_up_after, |i, item| {
                    self.pipes[i].try_push(item)
                })
            },
            |walk, seat, item| {
                self.push_walk(walk, item, give_up_after, move |i, item| {
                    self.pipes[i].try_push_seated(seat, item)
                })
            },
        )
    }

    /// The bail-out pop: walks until an item comes, `pipe_count()` consecutive pipes report
    /// empty ([`PopError::Empty`]), or `give_up_after` attempts have lost races
    /// ([`PopError::Transient`]; 0 counts as 1), so that a caller with a fallback can take it
    /// instead of waiting on contended pipes. It walks as [`pop`](Self::pop) does;
    /// [`Handle::pop_bounded`] is the same on a handle's walk.
    ///
    /// ```
    /// use pitlane_queue::{PopError, bagpipe::Bagpipe, mpmc::Queue};
    ///
    /// let bag: Bagpipe<Queue<u32>> = Bagpipe::new();
    /// assert_eq!(bag.pop_bounded(4), Err(PopError::Empty));
    /// bag.push(9);
    /// assert_eq!(bag.pop_bounded(4), Ok(9));
    /// ```
    #[inline]
    pub fn pop_bounded(&self, give_up_after: usize) -> Result<B::Item, PopError> {
        self.plain(
            (),
            |walk, ()| self.pop_walk(walk, give_up_after, |i| self.pipes[i].try_pop()),
            |walk, seat, ()| {
                self.pop_walk(walk, give_up_after, move |i| {
                    self.pipes[i].try_pop_seated(seat)
                })
            },
        )
    }

    /// About how many items the Bagpipe holds: the sum of the pipes' lengths, each read at a
    /// different moment, so a guess while operations are in flight (exact when none are, but
    /// for revoked items that no pop has passed over yet, which the pipes still count).
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u8>> = Bagpipe::new();
    /// (0..3).for_each(|i| bag.push(i));
    /// assert_eq!(bag.size_guess(), 3);
    /// ```
    pub fn size_guess(&self) -> usize {
        self.pipes.iter().map(|pipe| pipe.size_guess()).sum()
    }

    /// Walks from the push position, giving `item` to `attempt` on each pipe, until one takes
    /// it, `budget` attempts have lost races (a budget of 0 counts as 1), or `pipe_count()`
    /// pipes in a row were full. A failure moves the push position on: the thread leaves a
    /// contended (or full) pipe.
    #[inline]
    fn push_walk(
        &self,
        walk: &Cell<Walk>,
        item: B::Item,
        budget: usize,
        attempt: impl Fn(usize, B::Item) -> Result<(), PushError<B::Item>>,
    ) -> Result<(), PushError<B::Item>> {
        let first_pipe = walk.get().push_at & self.mask;
        match attempt(first_pipe, item) {
            Ok(()) => Ok(()),
            Err(first) => self.push_walk_contended(walk, first_pipe, first, budget, attempt),
        }
    }

    /// [`push_walk`](Self::push_walk) with no budget: it ends when a pipe takes the item, or
    /// panics when every pipe is full.
    #[inline]
    fn push_walk_until_taken(
        &self,
        walk: &Cell<Walk>,
        item: B::Item,
        attempt: impl Fn(usize, B::Item) -> Result<(), PushError<B::Item>>,
    ) {
        if let Err(error) = self.push_walk(walk, item, usize::MAX, attempt) {
            crate::weak_bag::full(error.into_inner())
        }
    }

    /// The rest of a walk whose first attempt, on `first_pipe`, failed with `first`. Not
    /// `#[cold]`: under contention it runs often; it is only kept out of line.
    #[inline(never)]
    fn push_walk_contended(
        &self,
        walk: &Cell<Walk>,
        first_pipe: usize,
        first: PushError<B::Item>,
        budget: usize,
        attempt: impl Fn(usize, B::Item) -> Result<(), PushError<B::Item>>,
    ) -> Result<(), PushError<B::Item>> {
        let mut current = walk.get();
        let (mut transients, mut full_run) = match first {
            PushError::Transient(_) => (1, 0),
            PushError::Full(_) => (0, 1),
        };
        if current.push_at & self.mask != first_pipe {
            // The walk moved under the first attempt, which was then not where `current`
            // starts: the thread took its seat and made its walk inside it (see
            // `make_walk_on_sitting_down`), or a value's `Drop` run inside it made a plain
            // call of its own on a Bagpipe, which moves the same walk. (A walk made or moved
            // to start on the pipe just tried goes on from there as if it had tried it.)
            full_run = 0;
        }
        let mut item = first.into_inner();
        let outcome = loop {
            current.push_at = current.push_at.wrapping_add(current.stride);
            if full_run >= self.pipes.len() {
                break Err(PushError::Full(item));
            }
            if transients >= budget.max(1) {
                break Err(PushError::Transient(item));
            }
            match attempt(current.push_at & self.mask, item) {
                Ok(()) => break Ok(()),
                Err(PushError::Transient(back)) => {
                    item = back;
                    transients += 1;
                    full_run = 0;
                }
                Err(PushError::Full(back)) => {
                    item = back;
                    full_run += 1;
                }
            }
        };
        walk.set(current);
        outcome
    }

    /// One round of pops from the pop position: each pipe at most once.
    #[inline]
    fn pop_round(
        &self,
        walk: &Cell<Walk>,
        attempt: impl Fn(usize) -> Result<B::Item, PopError>,
    ) -> Result<B::Item, PopError> {
        let mut current = walk.get();
        let mut empty = 0;
        for _ in 0..self.pipes.len() {
            match attempt(current.pop_at & self.mask) {
                Ok(item) => {
                    // Only the position: the walk may have been made meanwhile (see
                    // `make_walk_on_sitting_down`); this round went on with the one it found.
                    walk.set(Walk {
                        pop_at: current.pop_at,
                        ..walk.get()
                    });
                    return Ok(item);
                }
                Err(PopError::Empty) => empty += 1,
                Err(PopError::Transient) => {}
            }
            current.pop_at = current.pop_at.wrapping_add(current.stride);
        }
        Err(if empty == self.pipes.len() {
            PopError::Empty
        } else {
            PopError::Transient
        })
    }

    /// Pops, walking from the pop position until an item comes, `pipe_count()` consecutive
    /// pipes report empty, or `budget` transient failures have been seen (a budget of 0 counts
    /// as 1). The pipe that gives an item becomes the next pop position.
    #[inline]
    fn pop_walk(
        &self,
        walk: &Cell<Walk>,
        budget: usize,
        attempt: impl Fn(usize) -> Result<B::Item, PopError>,
    ) -> Result<B::Item, PopError> {
        let first_pipe = walk.get().pop_at & self.mask;
        match attempt(first_pipe) {
            Ok(item) => Ok(item),
            Err(first) => self.pop_walk_contended(walk, first_pipe, first, budget, attempt),
        }
    }

    /// The rest of a pop walk whose first attempt failed. Not `#[cold]`: under contention, and
    /// whenever the pop position's pipe is empty, it runs often; it is only kept out of line.
    #[inline(never)]
    fn pop_walk_contended(
        &self,
        walk: &Cell<Walk>,
        first_pipe: usize,
        first: PopError,
        budget: usize,
        attempt: impl Fn(usize) -> Result<B::Item, PopError>,
    ) -> Result<B::Item, PopError> {
        let mut current = walk.get();
        let (mut empty_run, mut transients) = match first {
            PopError::Empty => (1, 0),
            PopError::Transient => (0, 1),
        };
        if current.pop_at & self.mask != first_pipe {
            // As in `push_walk_contended`.
            empty_run = 0;
        }
        loop {
            if empty_run >= self.pipes.len() {
                return Err(PopError::Empty);
            }
            if transients >= budget.max(1) {
                return Err(PopError::Transient);
            }
            current.pop_at = current.pop_at.wrapping_add(current.stride);
            match attempt(current.pop_at & self.mask) {
                Ok(item) => {
                    walk.set(current);
                    return Ok(item);
                }
                Err(PopError::Empty) => empty_run += 1,
                Err(PopError::Transient) => {
                    empty_run = 0;
                    transients += 1;
                }
            }
        }
    }
}

impl<B: RevocableBag> Bagpipe<B>
where
    B::Item: Revocable,
{
    /// Pushes `item` like [`push`](Self::push) and records in its handle where it landed, so
    /// that [`revoke`](Self::revoke) can take it back.
    ///
    /// # Panics
    /// As [`push`](Self::push): if every pipe is full (see [`PushError::Full`]).
    ///
    /// ```
    /// use pitlane_queue::bagpipe::Bagpipe;
    /// use pitlane_queue::mpmc::Queue;
    /// use pitlane_queue::revoke::{Revocable, RevokeHandle};
    ///
    /// struct Page(RevokeHandle);
    /// // SAFETY: the handle lives in the page, outside the reference.
    /// unsafe impl Revocable for &Page {
    ///     fn revoke_handle(&self) -> &RevokeHandle {
    ///         &self.0
    ///     }
    /// }
    ///
    /// let page = Page(RevokeHandle::new());
    /// let bag: Bagpipe<Queue<&Page>> = Bagpipe::new();
    /// bag.push_revocable(&page);
    /// assert!(page.0.is_in_bag());
    /// ```
    pub fn push_revocable(&self, item: B::Item) {
        with_thread_walk(|walk| {
            self.push_walk_until_taken(walk, item, |i, item| self.pipes[i].try_push_revocable(item))
        })
    }

    /// One round of [`try_push_revocable`](RevocableBag::try_push_revocable) over the pipes.
    ///
    /// ```
    /// use pitlane_queue::bagpipe::Bagpipe;
    /// use pitlane_queue::mpmc::Queue;
    /// use pitlane_queue::revoke::{Revocable, RevokeHandle};
    ///
    /// struct Page(RevokeHandle);
    /// // SAFETY: the handle lives in the page, outside the reference.
    /// unsafe impl Revocable for &Page {
    ///     fn revoke_handle(&self) -> &RevokeHandle {
    ///         &self.0
    ///     }
    /// }
    ///
    /// let page = Page(RevokeHandle::new());
    /// let bag: Bagpipe<Queue<&Page>> = Bagpipe::new();
    /// assert!(bag.try_push_revocable(&page).is_ok());
    /// // SAFETY: the page was pushed into `bag`, alive here.
    /// assert!(unsafe { bag.revoke(&&page) });
    /// ```
    pub fn try_push_revocable(&self, item: B::Item) -> Result<(), PushError<B::Item>> {
        with_thread_walk(|walk| {
            self.push_walk(walk, item, self.pipes.len(), |i, item| {
                self.pipes[i].try_push_revocable(item)
            })
        })
    }

    /// Removes `item`, wherever it sits, with one CAS on its cell: `true` if this call removed
    /// it, `false` if it is not in a bag or a concurrent pop or revoke got it first.
    ///
    /// # Safety
    ///
    /// The item was last pushed with tracking into `self` (or never): see
    /// [`RevocableBag::revoke`].
    ///
    /// ```
    /// use pitlane_queue::bagpipe::Bagpipe;
    /// use pitlane_queue::mpmc::Queue;
    /// use pitlane_queue::revoke::{Revocable, RevokeHandle};
    ///
    /// struct Page {
    ///     handle: RevokeHandle,
    /// }
    /// // SAFETY: the handle lives in the page, outside the reference.
    /// unsafe impl Revocable for &Page {
    ///     fn revoke_handle(&self) -> &RevokeHandle {
    ///         &self.handle
    ///     }
    /// }
    ///
    /// let (a, b) = (Page { handle: RevokeHandle::new() }, Page { handle: RevokeHandle::new() });
    /// let bag: Bagpipe<Queue<&Page>> = Bagpipe::new();
    /// bag.push_revocable(&a);
    /// bag.push_revocable(&b);
    /// // SAFETY: `a` was pushed into `bag`, which outlives the call.
    /// assert!(unsafe { bag.revoke(&&a) });
    /// assert!(!unsafe { bag.revoke(&&a) });
    /// assert!(std::ptr::eq(bag.pop().unwrap(), &b));
    /// assert!(bag.pop().is_none());
    /// ```
    pub unsafe fn revoke(&self, item: &B::Item) -> bool {
        // SAFETY: forwarded: the bag that holds the item is a pipe of `self`.
        unsafe { B::revoke(item) }
    }
}

/// Operations between two releases of the pipe handles' pins.
const REFRESH_EVERY: u32 = 256;

/// One thread's walk through a [`Bagpipe`]: its positions and an odd stride, and a
/// [`BagHandle`] on every pipe (for queue pipes an epoch pin, so that no operation pins on its
/// own; for stack pipes a stash of free nodes). Every 256 operations it
/// [releases](BagHandle::release) the pipe handles, which lets queue pipes' pins go (so that
/// retired memory can be reclaimed) and keeps stack pipes' stashes.
///
/// A handle is cheap to make and not `Sync` (nor `Send` when its pipes' handles are not, as
/// for queues): make one per thread, and drop it when the thread stops using the Bagpipe for a
/// while (a queue pipe's pin held by an idle thread delays the reclamation of retired memory
/// process-wide).
///
/// ```
/// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
///
/// let bag: Bagpipe<Stack<u64>> = Bagpipe::new();
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             let handle = bag.handle(); // one per thread
///             for i in 0..1000 {
///                 handle.push(i);
///                 assert!(handle.pop().is_some());
///             }
///         });
///     }
/// });
/// assert_eq!(bag.size_guess(), 0);
/// ```
pub struct Handle<'a, B: WeakBag + 'a> {
    bagpipe: &'a Bagpipe<B>,
    walk: Cell<Walk>,
    /// One handle per pipe.
    pipes: Box<[B::Handle<'a>]>,
    operations: Cell<u32>,
}

impl<B: WeakBag> Handle<'_, B> {
    /// Counts an operation, releasing the pipe handles every [`REFRESH_EVERY`].
    #[inline]
    fn tick(&self) {
        let done = self.operations.get().wrapping_add(1);
        self.operations.set(done);
        if done % REFRESH_EVERY == 0 {
            self.release_pipes();
        }
    }

    #[cold]
    fn release_pipes(&self) {
        self.pipes.iter().for_each(BagHandle::release);
    }

    /// One round of pushes: fails only if every pipe's attempt failed.
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u32>> = Bagpipe::new();
    /// assert!(bag.handle().try_push(1).is_ok());
    /// ```
    #[inline]
    pub fn try_push(&self, item: B::Item) -> Result<(), PushError<B::Item>> {
        self.tick();
        let pipes = self.bagpipe.pipes.len();
        self.bagpipe.push_walk(&self.walk, item, pipes, |i, item| {
            self.pipes[i].try_push(item)
        })
    }

    /// Pushes `item`, walking until a pipe takes it.
    ///
    /// # Panics
    /// If every pipe is full (see [`PushError::Full`]).
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u32>> = Bagpipe::new();
    /// bag.handle().push(1);
    /// assert_eq!(bag.pop(), Some(1));
    /// ```
    #[inline]
    pub fn push(&self, item: B::Item) {
        self.tick();
        self.bagpipe
            .push_walk_until_taken(&self.walk, item, |i, item| self.pipes[i].try_push(item))
    }

    /// The bail-out push: walks until a pipe takes `item`, `give_up_after` attempts have lost
    /// races (0 counts as 1; then [`PushError::Transient`]), or every pipe was full in a row
    /// ([`PushError::Full`]), and then hands the item back so the caller can use a fallback.
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, mpmc::Queue};
    ///
    /// let bag: Bagpipe<Queue<u32>> = Bagpipe::new();
    /// let handle = bag.handle();
    /// assert_eq!(handle.push_bounded(3, 4), Ok(()));
    /// ```
    #[inline]
    pub fn push_bounded(
        &self,
        item: B::Item,
        give_up_after: usize,
    ) -> Result<(), PushError<B::Item>> {
        self.tick();
        self.bagpipe
            .push_walk(&self.walk, item, give_up_after, |i, item| {
                self.pipes[i].try_push(item)
            })
    }

    /// One round of pops: an item, or [`PopError::Empty`] if every pipe reported empty, or
    /// [`PopError::Transient`].
    ///
    /// ```
    /// use pitlane_queue::{PopError, bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u32>> = Bagpipe::new();
    /// assert_eq!(bag.handle().try_pop(), Err(PopError::Empty));
    /// ```
    #[inline]
    pub fn try_pop(&self) -> Result<B::Item, PopError> {
        self.tick();
        self.bagpipe
            .pop_round(&self.walk, |i| self.pipes[i].try_pop())
    }

    /// Pops, walking until an item comes; `None` after `pipe_count()` consecutive empty pipes.
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u32>> = Bagpipe::new();
    /// bag.push(8);
    /// assert_eq!(bag.handle().pop(), Some(8));
    /// ```
    #[inline]
    pub fn pop(&self) -> Option<B::Item> {
        self.tick();
        self.bagpipe
            .pop_walk(&self.walk, usize::MAX, |i| self.pipes[i].try_pop())
            .ok()
    }

    /// The bail-out pop: walks until an item comes, `pipe_count()` consecutive pipes report
    /// empty ([`PopError::Empty`]), or `give_up_after` attempts have lost races
    /// ([`PopError::Transient`]; 0 counts as 1).
    ///
    /// ```
    /// use pitlane_queue::{PopError, bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u32>> = Bagpipe::new();
    /// let handle = bag.handle();
    /// assert_eq!(handle.pop_bounded(4), Err(PopError::Empty));
    /// handle.push(9);
    /// assert_eq!(handle.pop_bounded(4), Ok(9));
    /// ```
    #[inline]
    pub fn pop_bounded(&self, give_up_after: usize) -> Result<B::Item, PopError> {
        self.tick();
        self.bagpipe
            .pop_walk(&self.walk, give_up_after, |i| self.pipes[i].try_pop())
    }

    /// The Bagpipe this handle walks.
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u8>> = Bagpipe::new();
    /// assert!(std::ptr::eq(bag.handle().bagpipe(), &bag));
    /// ```
    pub fn bagpipe(&self) -> &Bagpipe<B> {
        self.bagpipe
    }
}

impl<B: RevocableBag> Handle<'_, B>
where
    B::Item: Revocable,
{
    /// Pushes `item` with tracking, walking until a pipe takes it.
    ///
    /// # Panics
    /// If every pipe is full (see [`PushError::Full`]), as [`Handle::push`].
    ///
    /// ```
    /// use pitlane_queue::bagpipe::Bagpipe;
    /// use pitlane_queue::revoke::{Revocable, RevokeHandle};
    /// use pitlane_queue::stack::Stack;
    ///
    /// struct Page(RevokeHandle);
    /// // SAFETY: the handle lives in the page, outside the reference.
    /// unsafe impl Revocable for &Page {
    ///     fn revoke_handle(&self) -> &RevokeHandle {
    ///         &self.0
    ///     }
    /// }
    ///
    /// let page = Page(RevokeHandle::new());
    /// let bag: Bagpipe<Stack<&Page>> = Bagpipe::new();
    /// bag.handle().push_revocable(&page);
    /// assert!(page.0.is_in_bag());
    /// ```
    pub fn push_revocable(&self, item: B::Item) {
        self.tick();
        self.bagpipe
            .push_walk_until_taken(&self.walk, item, |i, item| {
                self.bagpipe.pipes[i].try_push_revocable(item)
            })
    }
}

impl<B: WeakBag> fmt::Debug for Handle<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let walk = self.walk.get();
        let mask = self.bagpipe.mask;
        f.debug_struct("Handle")
            .field("push_at", &(walk.push_at & mask))
            .field("pop_at", &(walk.pop_at & mask))
            .field("stride", &(walk.stride & mask))
            .finish()
    }
}

impl<B: WeakBag> fmt::Debug for Bagpipe<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bagpipe")
            .field("pipes", &self.pipes.len())
            .field("size_guess", &self.size_guess())
            .finish()
    }
}

impl<B: WeakBag> BagHandle for Handle<'_, B> {
    type Item = B::Item;

    #[inline]
    fn try_push(&self, item: B::Item) -> Result<(), PushError<B::Item>> {
        Handle::try_push(self, item)
    }

    #[inline]
    fn try_pop(&self) -> Result<B::Item, PopError> {
        Handle::try_pop(self)
    }

    #[inline]
    fn push(&self, item: B::Item) {
        Handle::push(self, item)
    }

    #[inline]
    fn pop(&self) -> Option<B::Item> {
        Handle::pop(self)
    }

    /// Releases every pipe's handle.
    fn release(&self) {
        self.release_pipes();
    }
}

impl<B: WeakBag> WeakBag for Bagpipe<B> {
    type Item = B::Item;

    #[inline]
    fn try_push(&self, item: B::Item) -> Result<(), PushError<B::Item>> {
        Bagpipe::try_push(self, item)
    }

    #[inline]
    fn try_pop(&self) -> Result<B::Item, PopError> {
        Bagpipe::try_pop(self)
    }

    #[inline]
    fn push(&self, item: B::Item) {
        Bagpipe::push(self, item)
    }

    #[inline]
    fn pop(&self) -> Option<B::Item> {
        Bagpipe::pop(self)
    }

    fn size_guess(&self) -> usize {
        Bagpipe::size_guess(self)
    }

    type Handle<'a>
        = Handle<'a, B>
    where
        Self: 'a;

    fn handle(&self) -> Handle<'_, B> {
        Bagpipe::handle(self)
    }
}

impl<B: RevocableBag> RevocableBag for Bagpipe<B>
where
    B::Item: Revocable,
{
    fn try_push_revocable(&self, item: B::Item) -> Result<(), PushError<B::Item>> {
        Bagpipe::try_push_revocable(self, item)
    }

    fn push_revocable(&self, item: B::Item) {
        Bagpipe::push_revocable(self, item)
    }

    unsafe fn revoke(item: &B::Item) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { B::revoke(item) }
    }
}

impl<B: WeakBag> IntoIterator for Bagpipe<B> {
    type Item = B::Item;
    type IntoIter = IntoIter<Self>;

    /// Drains the Bagpipe it consumes, in no particular order.
    ///
    /// ```
    /// use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
    ///
    /// let bag: Bagpipe<Stack<u32>> = Bagpipe::new();
    /// (0..4).for_each(|i| bag.push(i));
    /// let mut all: Vec<u32> = bag.into_iter().collect();
    /// all.sort();
    /// assert_eq!(all, [0, 1, 2, 3]);
    /// ```
    fn into_iter(self) -> IntoIter<Self> {
        IntoIter::new(self)
    }
}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_seated_by_another_structure_walks_every_pipe_of_a_bagpipe_of_stacks() {
        use crate::stack::Stack;
        let bag: Bagpipe<Stack<u32>> = Bagpipe::with_pipes(8).unwrap();
        for (i, pipe) in bag.pipes.iter().enumerate() {
            pipe.push(i as u32);
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                // The thread takes its seat in a plain call on a lone stack, before it ever
                // calls the Bagpipe: its first Bagpipe call is already a seated one, which
                // makes the thread's walk before it tries a pipe.
                let lone = Stack::new();
                lone.push(0_u8);
                assert!(crate::seat::as_held() < crate::seat::SEATS);
                let mut got: Vec<u32> = core::iter::from_fn(|| bag.pop()).collect();
                got.sort_unstable();
                assert_eq!(got, (0..8).collect::<Vec<_>>());
            });
        });
    }

    #[test]
    fn a_threads_first_call_takes_its_seat_midway_walks_every_pipe_and_keeps_the_made_walk() {
        use crate::stack::Stack;
        let bag: Bagpipe<Stack<u32>> = Bagpipe::with_pipes(8).unwrap();
        // One item in one pipe of eight.
        bag.pipes[5].push(5);
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(
                    crate::seat::as_held() >= crate::seat::SEATS,
                    "a new thread holds no seat yet"
                );
                // SAFETY: as in `with_thread_walk`.
                let walk = unsafe { &(*crate::seat::local()).walk };
                assert_eq!(walk.get().stride, Walk::UNMADE.stride);
                // The call makes the walk, then its first attempt takes the seat; whatever pipe
                // it starts on, it walks every pipe and reaches pipe 5.
                assert_eq!(bag.pop(), Some(5));
                assert!(crate::seat::as_held() < crate::seat::SEATS);
                assert_ne!(
                    walk.get().stride,
                    Walk::UNMADE.stride,
                    "the made walk was kept"
                );
                assert_eq!(bag.pop(), None);
            });
        });
        std::thread::scope(|s| {
            s.spawn(|| {
                // The same for a first push, which lands on the first pipe it tries.
                // SAFETY: as in `with_thread_walk`.
                let walk = unsafe { &(*crate::seat::local()).walk };
                assert_eq!(walk.get().stride, Walk::UNMADE.stride);
                bag.push(7);
                assert_ne!(
                    walk.get().stride,
                    Walk::UNMADE.stride,
                    "the made walk was kept"
                );
            });
        });
        assert_eq!(bag.pop(), Some(7));
    }

    #[test]
    fn a_threads_first_pop_finds_an_item_on_the_pipe_its_new_walk_starts_on() {
        use crate::stack::Stack;
        use std::sync::atomic::Ordering::Relaxed;
        // A new thread's first pop tries pipe 0 on the unmade walk, takes its seat there (which
        // makes its walk, starting on pipe `n % 8` for the `n`-th walk made) and walks on with
        // the new walk: it must still see every pipe, the new walk's start included. Other
        // tests' threads may take a walk number meanwhile, so each round guesses `n`; the pop
        // must find the item in any case.
        for _ in 0..16 {
            let bag: Bagpipe<Stack<u32>> = Bagpipe::with_pipes(8).unwrap();
            let start = THREAD_WALKS.load(Relaxed) as usize & 7;
            bag.pipes[start].push(1);
            let got = std::thread::scope(|s| s.spawn(|| bag.pop()).join().unwrap());
            assert_eq!(got, Some(1), "item on pipe {start}");
        }
    }

    #[test]
    fn a_walk_visits_every_pipe_once_per_round() {
        for pipes in [1_usize, 2, 8, 64] {
            for seed in 0..50 {
                let walk = Walk::new(seed as usize * 7, seed);
                let mut seen = vec![false; pipes];
                let mut at = walk.pop_at;
                for _ in 0..pipes {
                    let pipe = at & (pipes - 1);
                    assert!(!seen[pipe], "pipe {pipe} of {pipes} visited twice");
                    seen[pipe] = true;
                    at = at.wrapping_add(walk.stride);
                }
                assert!(seen.iter().all(|&s| s));
            }
        }
    }
}
