//! An unbounded lock-free LIFO stack: Treiber's stack over a pool of type-stable nodes, made
//! ABA-safe by generation-tagged indices.
//!
//! After R. Kent Treiber, "Systems Programming: Coping with Parallelism", IBM Research Report
//! RJ 5118 (1986), with the counted ("tagged") top-of-stack word of the IBM System/370
//! `CDS` idiom instead of a bare pointer; it is one of the weak bags the Bagpipes seed
//! (`shared/seeds/bagpipes-scalable-concurrent-bags.txt`) puts under a
//! [`Bagpipe`](crate::bagpipe::Bagpipe).
//!
//! ```
//! use pitlane_queue::stack::Stack;
//!
//! let stack = Stack::new();
//! std::thread::scope(|s| {
//!     s.spawn(|| (0..100).for_each(|i| stack.push(i)));
//! });
//! assert_eq!(stack.pop(), Some(99));
//! assert_eq!(stack.len(), 99);
//! ```
//!
//! # The protocol
//!
//! Nodes live in chunks that are allocated as the stack grows (chunk `k` holds 64 × 2^k
//! nodes) and freed only when it is dropped; a node is named by a 21-bit index, so a stack
//! holds at most [`MAX_ITEMS`] items. A push that needs a chunk the allocator refuses fails
//! like a push past [`MAX_ITEMS`]: [`Stack::try_push`] hands the item back in
//! [`PushError::Full`], and nothing else changes. The top of the stack and the list of free
//! nodes are each a [`TaggedIndex`]: an index and a generation that every successful exchange
//! advances.
//!
//! - **Push**: take a node from the free list (or a never-used one), write the value and its
//!   state, link it above the current top and CAS the top from that snapshot to the node.
//! - **Pop**: read the top and the index below it, CAS the top from that snapshot to the index
//!   below. The winner owns the node: it moves the value out, and returns the node to the free
//!   list.
//! - **Size**: each successful push or pop counts itself right after its CAS, in a *tally*
//!   (pushes minus pops, on its own cache line, written only by its owner with a plain load
//!   and store): a [`Handle`]'s own, or, for a plain call, the tally of the calling thread's
//!   *seat* (below). An operation of a thread without a seat counts with a `fetch_add` on a
//!   shared count beside the top word, on the line its CAS has just taken. [`Stack::len`] adds
//!   the shared count and every tally. Handle tallies form an append-only list; a dropped
//!   handle leaves its tally, count and all, to the next handle, so the list is only as long
//!   as the most handles alive at once.
//!
//!   How the count came to live there, with the figures: `docs/notes/stack-count.md`.
//!
//! The free list holds *batches*: chains of free nodes, linked through their `next` words, whose
//! first nodes are linked through a second word, `next_batch`. A *stash* is a private
//! magazine of free nodes (in Bonwick's slab terms): refilled with a whole batch, spilling 32
//! nodes at a time as one batch, so that a push and a pop touch only the top: two
//! compare-and-swaps per pair instead of four, and no shared count. A [`Handle`] has a stash
//! of its own. So do plain calls: each thread holds a *seat*, a small number unique among the
//! live threads (taken on the thread's first call, given back when it exits, then taken by a
//! later thread), and the stack keeps a stash and a tally per seat, made by the seat's first
//! plain call on it. A stash left by an exited thread is not handed back: it waits in the
//! stack, nodes, count and all, for the next thread to take that seat, and moving the stack
//! moves its stashes with it. In front of the array each thread keeps a one-entry cache: the
//! id of the stack it last called plainly (a number unique among all stacks of the process,
//! given on first use) and that stack's cache for its seat, so that a thread working on one
//! stack reaches its stash one load after its thread-local instead of two; the entry is
//! emptied before the thread gives its seat back. A thread without a seat (more than 128
//! threads at once, or a call from a thread-local destructor late in a thread's exit), or
//! whose seat's cache the allocator refused (it asks again on the seat's next call), takes a
//! batch's first node and gives the rest back (one node is a batch of one), and returns a
//! popped node as a batch of one.
//!
//! **The owner's guess.** An operation with a stash of its own (a handle's, or a seat's) does
//! not load the top first: it compares against the word its own latest successful exchange
//! installed, kept beside the stash, and loads nothing unless that guess is wrong. When no
//! other thread has touched the stack since, the guess is right, and a push and a pop become
//! two compare-and-swaps with nothing between them but registers and the node's `next`
//! (loading the top after the previous compare-and-swap completes was a quarter of a pair's
//! time on one thread; `docs/notes/plain-calls.md`). When the guess is wrong, the failed
//! compare-and-swap has read the current word, atomically, as the load would have: the
//! operation goes on from that word, and the wrong guess does not count as a lost race. A pop
//! still reads the `next` of the guessed top's node afresh before its compare-and-swap, so a
//! guess carries no more than the word itself (and, when a push made it, the address of the
//! node it names, which is a function of the index); a pop never uses a guess of an empty
//! top (it reports empty only from a load, or from a failed compare-and-swap's read). A push
//! needs only the word to be right, an empty one included: whatever made the top equal to
//! the guess, the node it links below is the node the top names.
//!
//! A stash keeps each free node's address beside its index, so that neither a push (which
//! takes its node from the stash) nor a pop right after a push (whose guess names the node
//! just pushed) computes where an index lies: on one thread that took a fifth of a pair's
//! instructions (`docs/notes/plain-calls.md`).
//!
//! **ABA.** A pop that read top `A` with `B` below, stalled while others popped `A` and `B` and
//! pushed `A` again, would swing the top to the stale `B`. Here the snapshot it compares
//! against carries `A`'s generation at the time it read it, and the top's generation has moved
//! on, so its CAS fails. Nodes are never freed while the stack lives, so a stale read of a
//! node's `next` reads a valid (if meaningless) index and never touches freed memory; the
//! generation check then discards it. The 43-bit generation repeats after 2^43 exchanges on
//! the same word, 2.4 hours even at 10^9 exchanges a second; a stale CAS succeeds only for a
//! thread stalled, between its read of a node's `next` and its CAS, across exactly a multiple
//! of that many, which then finds the very node it read back on top. An owner's guess may be
//! hours old, but it only stands in for the load of the top: a pop still reads `next` after
//! choosing the word, so a wrap before that read is harmless (if the top equals the guess from
//! that read to the CAS, the `next` read is the node's real one). What a guess changes is where
//! the count of exchanges starts: a loaded word was the top at the load, so a stale `next`
//! passes the CAS only after a whole wrap between the load and the CAS; a guess was the top
//! when its owner last exchanged, so an owner idle for almost a whole wrap (2^43 exchanges of
//! other threads, hours at any real rate) whose next pop reads `next` just before the last few
//! exchanges of that wrap bring the top back to the guessed word (same index, same generation)
//! would pass with a stale `next`. Both need the top's generation to come round exactly within
//! one operation's few instructions; the guess only trades "stalled for hours inside an
//! operation" for "idle for hours between two".
//!
//! # When the try operations fail
//!
//! [`Stack::try_pop`] returns [`PopError::Transient`] exactly when its CAS on the top fails
//! against a word it read (another push or pop changed the top since), and
//! [`PopError::Empty`] when it reads an empty top. [`Stack::try_push`] returns `Err(item)`
//! exactly when its CAS on the top fails against a word it read; the node it had prepared goes
//! back to the free list. A CAS against a wrong guess (above) is not such a failure: the
//! operation makes one more attempt from the word that CAS read. [`Stack::push`] does not give
//! the node back between attempts, so prefer it to a loop over `try_push`.
//!
//! # Linearization points
//!
//! A push takes effect at its successful CAS on the top; a pop that returns an item at its
//! successful CAS on the top (taking the node it had read); a pop that returns
//! [`PopError::Empty`] at its read of the top that found no node (a load, or the read of a
//! CAS against a wrong guess). Popping a node whose item was
//! revoked is skipped inside the same pop, which then starts over.

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;
use pitlane_sync::shim::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use pitlane_sync::{Tagged, TaggedIndex};

use crate::revoke::{self, Revocable, RevocableBag};
use crate::seat::{self, SEATS};
use crate::slot::{self, FULL, REVOKED, Slot, TAKEN};
use crate::weak_bag::{BagHandle, IntoIter, PopError, PushError, RetryPause, WeakBag};

/// Bits of a node index in the top and free-list words; the other 43 are the generation, which
/// then wraps after 2^43 exchanges (2.4 hours even at 10^9 exchanges a second; see
/// [`pitlane_sync::tagged`]).
const INDEX_BITS: u32 = 21;
/// The top and free-list words.
type TopWord = TaggedIndex<INDEX_BITS>;
/// What a load of a [`TopWord`] reads.
type TopValue = Tagged<INDEX_BITS>;
/// The index that names no node.
const NIL: u32 = Tagged::<INDEX_BITS>::NIL;
/// Nodes in the first chunk; chunk `k` holds `FIRST_CHUNK << k`.
const FIRST_CHUNK: usize = if cfg!(pitlane_loom) { 2 } else { 64 };
/// Enough chunks to hold every index below [`NIL`].
const CHUNKS: usize = INDEX_BITS as usize + 1 - FIRST_CHUNK.trailing_zeros() as usize;
/// The most nodes a stack can have: every index but [`NIL`].
const MAX_NODES: usize = NIL as usize;
/// Nodes a stash moves between itself and the shared free list at once.
const STASH_BATCH: usize = if cfg!(pitlane_loom) { 2 } else { 32 };
/// The most free nodes a stash holds: it spills a batch when it would hold more.
const STASH_CAPACITY: usize = 2 * STASH_BATCH + 1;

/// The most items a [`Stack`] holds: `2^21 - 1`, the node indices its 21-bit index field can
/// name (the other 43 bits of the word are the ABA generation). Free nodes kept in stashes
/// count against it too: those of live [`Handle`]s and of the seats of threads that made plain
/// calls on the stack, at most 65 each (so at most 8,320 for the 128 seats).
///
/// ```
/// assert_eq!(pitlane_queue::stack::MAX_ITEMS, 2_097_151);
/// ```
pub const MAX_ITEMS: usize = MAX_NODES;

/// A lock-free LIFO stack of `T`, holding up to [`MAX_ITEMS`] items.
///
/// See the [module documentation](self) for the algorithm and its guarantees. Dropping the
/// stack drops the values it holds; if one of those drops panics, the panic comes out of the
/// stack's drop and the values not yet dropped, and the stack's chunks of nodes, are leaked.
///
/// ```
/// use pitlane_queue::stack::Stack;
///
/// // `const`: a stack can be a `static`.
/// static FREE: Stack<usize> = Stack::new();
/// std::thread::scope(|s| {
///     s.spawn(|| (0..100).for_each(|i| FREE.push(i)));
///     s.spawn(|| (100..200).for_each(|i| FREE.push(i)));
/// });
/// assert_eq!(FREE.len(), 200);
/// let top = FREE.pop().unwrap();
/// assert!(top == 99 || top == 199); // the last push of one of the threads
/// ```
pub struct Stack<T> {
    /// The top node and its generation, and the node count, on one cache line.
    top: CachePadded<Top>,
    /// The free list: a Treiber stack of *batches* of free nodes, and its generation. A batch
    /// is a chain of nodes linked through `Node::next` and ended by [`NIL`]; batches
    /// are linked through the `Node::next_batch` of their first node.
    free: CachePadded<TopWord>,
    /// How many node indices have ever been handed out; the next never-used index.
    fresh: CachePadded<AtomicUsize>,
    /// Chunk `k` holds nodes `FIRST_CHUNK * (2^k - 1) ..` and is installed once, by CAS from
    /// null, by whoever first needs a node in it.
    chunks: [AtomicPtr<Node<T>>; CHUNKS],
    /// The tallies of handles, past and present: an append-only list, freed with the stack.
    tallies: AtomicPtr<Tally>,
    /// What plain calls keep per thread, indexed by the calling thread's seat (see the `seat`
    /// module): made by the seat's first plain call, used by the seat's holder alone, freed
    /// with the stack.
    seats: [AtomicPtr<SeatCache<T>>; SEATS],
    /// This stack's number among all stacks of the process, unique and never reused; 0 until
    /// a thread first keeps one of its seat caches in its one-entry cache (see
    /// [`thread_cache`](Stack::thread_cache)). Not modelled under loom, where no thread has a
    /// seat.
    #[cfg(not(pitlane_loom))]
    id: core::sync::atomic::AtomicU64,
    _owns: PhantomData<T>,
}

/// The next stack id to hand out (see `Stack::id`).
#[cfg(not(pitlane_loom))]
static NEXT_STACK_ID: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

// SAFETY: the stack moves `T` values between threads (so `T: Send`) and never hands out
// references to them; shared state is atomics and slots owned through the slot protocol.
unsafe impl<T: Send> Send for Stack<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Stack<T> {}

/// The word every push and pop exchanges, and the count of operations made without a handle.
struct Top {
    /// The top node and its generation; [`NIL`] when the stack is empty.
    word: TopWord,
    /// Successful pushes minus successful pops made without a [`Handle`] of this stack,
    /// wrapping. Each such operation counts itself just after its exchange of `word`, on the
    /// line that exchange has just taken exclusively, so the count costs no cache miss of its
    /// own. Between an exchange and its count the total is off by one, and this count or the
    /// total can dip below zero (a pop counted before the push it popped), which `len`
    /// reads as zero.
    nodes: AtomicUsize,
}

/// The pushes minus pops made through one [`Handle`] (wrapping), on a cache line of its own.
/// Only the handle that holds it writes it, with a plain load and store, so counting costs a
/// handle's operation no read-modify-write; [`Stack::len`] adds all tallies to the
/// shared count. A dropped handle leaves its tally to the next handle, count and all.
struct Tally {
    count: CachePadded<AtomicUsize>,
    /// Whether a live handle holds this tally.
    held: AtomicBool,
    /// The next tally of the list; set before the tally is published, never changed after.
    next: AtomicPtr<Tally>,
}

/// One element of the stack or of the free list.
struct Node<T> {
    /// The node below this one on the stack, or the next node of its free batch;
    /// [`NIL`] for none.
    next: AtomicU32,
    /// At the head of a free batch: the head of the next batch. Unused elsewhere.
    next_batch: AtomicU32,
    /// The value and its state.
    slot: Slot<T>,
}

impl<T> Node<T> {
    fn new() -> Self {
        Self {
            next: AtomicU32::new(NIL),
            next_batch: AtomicU32::new(NIL),
            slot: Slot::new(),
        }
    }
}

/// Free nodes owned by one user: a [`Handle`], or the holder of a seat for plain calls (a
/// magazine, in Bonwick's slab terms). Pushes take their nodes from it and pops put theirs
/// back, so that a push and a pop touch only the top; it meets the shared free list once per
/// [`STASH_BATCH`] nodes, to refill or to spill a batch.
///
/// Not synchronized: its methods are `unsafe`, and their callers promise that no other call on
/// the same stash runs meanwhile (a handle is not `Sync`; a seat is held by one thread). User
/// code that an operation runs between them (a revoked value's `Drop`) may call them again,
/// which is fine; the one piece of user code that runs *inside* one of them is the global
/// allocator, when a refill allocates a chunk, and the refill holds no borrow of the stash
/// across it (see [`Stash::refill`]).
struct Stash<T> {
    /// Free nodes, `nodes[..len]`.
    nodes: UnsafeCell<[FreeNode<T>; STASH_CAPACITY]>,
    len: UnsafeCell<usize>,
    /// The top word as the stash's user last left it: the word its latest successful exchange
    /// of the top installed. Its next operation compares against this word instead of loading
    /// the top first (see "The owner's guess" in the module documentation).
    guess: UnsafeCell<TopValue>,
    /// The node `guess` names (null when it names none), kept so that a pop whose guess is
    /// right finds the node without computing where its index lies.
    guess_node: UnsafeCell<*const Node<T>>,
}

/// A node of the stack, by index and by address (the address of an index never changes: the
/// stash keeps both so that a push finds the node without computing where its index lies).
struct FreeNode<T> {
    index: u32,
    node: NonNull<Node<T>>,
}

impl<T> Clone for FreeNode<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for FreeNode<T> {}

impl<T> FreeNode<T> {
    /// What an unused entry of a stash holds.
    const NONE: Self = Self {
        index: NIL,
        node: NonNull::dangling(),
    };
}

// SAFETY: the node addresses a stash holds are of nodes of the stack it serves, which every
// user of the stash reaches through a shared reference to that stack anyway (`Stack<T>` is
// `Sync` for `T: Send`); moving the stash to another thread moves nothing else.
unsafe impl<T: Send> Send for Stash<T> {}

impl<T> Stash<T> {
    const fn new() -> Self {
        Self {
            nodes: UnsafeCell::new([FreeNode::NONE; STASH_CAPACITY]),
            len: UnsafeCell::new(0),
            guess: UnsafeCell::new(TopValue::new(NIL, 0)),
            guess_node: UnsafeCell::new(ptr::null()),
        }
    }

    /// A free node of `stack`, refilled from the shared list (or with never-used nodes) when
    /// the stash is empty; `None` if the stack has no node left.
    ///
    /// # Safety
    /// No other call on this stash runs meanwhile, except calls that user code run by
    /// [`refill`](Self::refill) makes (see there), and the stash only ever holds nodes of
    /// `stack`.
    #[inline]
    unsafe fn take<'s>(&self, stack: &'s Stack<T>) -> Option<(u32, &'s Node<T>)> {
        // SAFETY: the caller gives us the stash alone for this call; a plain read, no borrow
        // kept.
        if unsafe { *self.len.get() } == 0 {
            // SAFETY: as for this call.
            unsafe { self.refill(stack) }?;
        }
        // SAFETY: the caller gives us the stash alone for this call, and `refill`, which may
        // have run user code that used the stash, has returned: no other borrow of it is live.
        let (nodes, len) = unsafe { (&mut *self.nodes.get(), &mut *self.len.get()) };
        // `refill` returns `Some` only with a node in the stash.
        *len -= 1;
        // SAFETY: `len` stays at most `STASH_CAPACITY` (`keep` spills before it would pass
        // it), so `len - 1` is in bounds.
        let free = unsafe { *nodes.get_unchecked(*len) };
        // SAFETY: `nodes[..len]` hold nodes of `stack` (the caller's promise), by the address
        // `Stack::node` gave for their index; nodes live until the stack is dropped.
        Some((free.index, unsafe { free.node.as_ref() }))
    }

    /// Fills the empty stash with a batch from the shared list, or with never-used nodes.
    /// `None` if neither has any; `Some` only with a node in the stash.
    ///
    /// Never-used nodes may need a chunk, and allocating it runs the global allocator: user
    /// code, which may call this stack on this thread, through this very stash (an allocator
    /// that keeps its free blocks in a `Stack` it pushes and pops through plain calls or a
    /// handle in a thread-local). So no borrow of the stash is held across the allocation, and
    /// a stash that such a call left holding nodes keeps them: the never-used nodes go to the
    /// shared list instead, as one batch.
    ///
    /// # Safety
    /// As for [`take`](Self::take), whose caller found the stash empty.
    #[inline(never)]
    unsafe fn refill(&self, stack: &Stack<T>) -> Option<()> {
        if let Some(first) = stack.take_batch() {
            // SAFETY: the caller gives us the stash alone for this call, and no user code has
            // run since it found the stash empty.
            let (nodes, len) = unsafe { (&mut *self.nodes.get(), &mut *self.len.get()) };
            // The batch is ours: walk it into the stash.
            let mut at = first;
            while at != NIL && *len < STASH_CAPACITY {
                let node = stack.node(at);
                nodes[*len] = FreeNode {
                    index: at,
                    node: NonNull::from(node),
                };
                *len += 1;
                at = node.next.load(Ordering::Relaxed);
            }
            if at != NIL {
                // Batches hold at most `STASH_BATCH` nodes; should one be longer, its
                // rest is still a batch, and goes back.
                stack.give_batch(at);
            }
            return Some(());
        }
        // May run the allocator (user code), which may use this stash meanwhile.
        let fresh = stack.allocate_fresh(STASH_BATCH);
        // SAFETY: the caller gives us the stash alone for this call, and the allocation has
        // returned: no other borrow of the stash is live.
        let (nodes, len) = unsafe { (&mut *self.nodes.get(), &mut *self.len.get()) };
        if *len != 0 {
            // A call made from inside the allocation left nodes here: they are the stash's.
            if let Some((first, granted)) = fresh {
                stack.give_fresh(first, granted);
            }
            return Some(());
        }
        let (first, granted) = fresh?;
        for (slot, index) in nodes.iter_mut().zip(first..).take(granted) {
            *slot = FreeNode {
                index,
                node: NonNull::from(stack.node(index)),
            };
        }
        *len = granted;
        Some(())
    }

    /// Keeps the free node `index` of `stack`, spilling a batch to the shared list when the
    /// stash is full. Runs no user code.
    ///
    /// # Safety
    /// No other call on this stash runs meanwhile, and the stash only ever holds nodes of
    /// `stack`.
    #[inline]
    unsafe fn keep(&self, stack: &Stack<T>, index: u32, node: &Node<T>) {
        // SAFETY: the caller gives us the stash alone for this call.
        let (nodes, len) = unsafe { (&mut *self.nodes.get(), &mut *self.len.get()) };
        if *len == STASH_CAPACITY {
            let start = STASH_CAPACITY - STASH_BATCH;
            stack.give_nodes(&nodes[start..]);
            *len = start;
        }
        // SAFETY: below `STASH_CAPACITY` after the spill above.
        unsafe {
            *nodes.get_unchecked_mut(*len) = FreeNode {
                index,
                node: NonNull::from(node),
            };
        }
        *len += 1;
    }
}

/// What the plain calls of one seat's holder keep in a stack: a stash of free nodes and a
/// tally of pushes minus pops (wrapping), which only the holder writes and [`Stack::len`]
/// reads.
struct SeatCache<T> {
    stash: Stash<T>,
    tally: CachePadded<AtomicUsize>,
}

// SAFETY: the stash is used only by the thread holding the seat (see `seat`: a seat changes
// hands through a release/acquire pair); its node addresses are of nodes of the stack that
// holds it, shared as the stack is (`T: Send`); the tally is an atomic.
unsafe impl<T: Send> Sync for SeatCache<T> {}

impl<T> SeatCache<T> {
    /// # Safety
    /// The caller holds the seat of this cache.
    #[inline]
    unsafe fn own(&self) -> Cache<'_, T> {
        Cache::Own {
            stash: &self.stash,
            tally: &self.tally,
        }
    }
}

/// Where an operation takes and returns its nodes and counts itself.
enum Cache<'s, T> {
    /// The shared free list and the shared count beside the top.
    Shared,
    /// A stash and a tally that the calling thread alone uses during the operation.
    Own {
        stash: &'s Stash<T>,
        tally: &'s AtomicUsize,
    },
}

impl<T> Clone for Cache<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Cache<'_, T> {}

/// The chunk holding node `index`, and the node's offset in it.
#[inline]
fn locate(index: u32) -> (usize, usize) {
    let block = index as usize / FIRST_CHUNK + 1;
    let chunk = (usize::BITS - 1 - block.leading_zeros()) as usize;
    (chunk, index as usize - FIRST_CHUNK * ((1 << chunk) - 1))
}

impl<T> Stack<T> {
    /// An empty stack. It allocates nothing until the first push.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack: Stack<u64> = Stack::new();
    /// assert_eq!(stack.pop(), None);
    ///
    /// // A stack can be a `static`.
    /// static FREE_PAGES: Stack<usize> = Stack::new();
    /// FREE_PAGES.push(4096);
    /// assert_eq!(FREE_PAGES.pop(), Some(4096));
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn new() -> Self {
        Self {
            top: CachePadded::new(Top {
                word: TopWord::new(NIL),
                nodes: AtomicUsize::new(0),
            }),
            free: CachePadded::new(TopWord::new(NIL)),
            fresh: CachePadded::new(AtomicUsize::new(0)),
            chunks: [const { AtomicPtr::new(ptr::null_mut()) }; CHUNKS],
            tallies: AtomicPtr::new(ptr::null_mut()),
            seats: [const { AtomicPtr::new(ptr::null_mut()) }; SEATS],
            id: core::sync::atomic::AtomicU64::new(0),
            _owns: PhantomData,
        }
    }

    /// An empty stack (not `const` under loom, whose atomics are not).
    #[cfg(pitlane_loom)]
    pub fn new() -> Self {
        Self {
            top: CachePadded::new(Top {
                word: TopWord::new(NIL),
                nodes: AtomicUsize::new(0),
            }),
            free: CachePadded::new(TopWord::new(NIL)),
            fresh: CachePadded::new(AtomicUsize::new(0)),
            chunks: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            tallies: AtomicPtr::new(ptr::null_mut()),
            seats: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            _owns: PhantomData,
        }
    }

    /// One attempt to push `item`: [`PushError::Transient`] if the top changed between reading
    /// it and the CAS (another push or pop won the race), [`PushError::Full`] if the stack
    /// already holds [`MAX_ITEMS`] or needed a new chunk of nodes and the allocator refused
    /// the memory for it; the item comes back inside either.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// assert!(stack.try_push(1).is_ok());
    /// ```
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        match self.thread_cache() {
            // SAFETY: we hold the seat of this cache until our thread exits, so this thread
            // alone uses its stash. User code can run inside the operation (a pop drops the
            // revoked values it passes) and call the stack again on this thread, but the stash
            // is only borrowed mutably inside `Stash::take` and `Stash::keep`, which run none,
            // so such a nested call never overlaps a borrow of ours.
            Some(cache) => self.try_push_tagged(item, FULL, unsafe { cache.own() }),
            None => self.try_push_by_seat(item),
        }
    }

    /// Pushes `item`, retrying lost races with the same node.
    ///
    /// # Panics
    /// If the stack already holds [`MAX_ITEMS`] (as `Vec::push` panics past its capacity), or
    /// needs a new chunk of nodes and the allocator refuses the memory for it (where
    /// `Vec::push` would abort the process); [`try_push`](Self::try_push) hands the item back
    /// instead.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// stack.push(1);
    /// stack.push(2);
    /// assert_eq!(stack.pop(), Some(2));
    /// ```
    #[inline(always)]
    pub fn push(&self, item: T) {
        match self.thread_cache() {
            // SAFETY: as in `try_push`.
            Some(cache) => self.push_tagged(item, FULL, unsafe { cache.own() }),
            None => self.push_by_seat(item),
        }
    }

    /// One attempt to pop the top item: `Err(PopError::Empty)` if the stack is empty,
    /// `Err(PopError::Transient)` if the top changed before the CAS.
    ///
    /// ```
    /// use pitlane_queue::{PopError, stack::Stack};
    ///
    /// let stack = Stack::new();
    /// assert_eq!(stack.try_pop(), Err(PopError::Empty));
    /// stack.push('x');
    /// assert_eq!(stack.try_pop(), Ok('x'));
    /// ```
    #[inline]
    pub fn try_pop(&self) -> Result<T, PopError> {
        match self.thread_cache() {
            // SAFETY: as in `try_push`.
            Some(cache) => self.try_pop_in(unsafe { cache.own() }),
            None => self.try_pop_by_seat(),
        }
    }

    /// [`pop`](Self::pop), recycling through `cache`: the loop of
    /// [`retry_pop`](crate::weak_bag::retry_pop) written out, so that the whole pop is
    /// compiled into its caller (a closure passed to `retry_pop` was left out of line).
    #[inline(always)]
    fn pop_in(&self, cache: Cache<'_, T>) -> Option<T> {
        let mut pause = RetryPause::new();
        loop {
            match self.try_pop_in(cache) {
                Ok(item) => return Some(item),
                Err(PopError::Empty) => return None,
                Err(PopError::Transient) => pause.pause(),
            }
        }
    }

    /// [`try_pop`](Self::try_pop), recycling through `cache`.
    #[inline(always)]
    fn try_pop_in(&self, cache: Cache<'_, T>) -> Result<T, PopError> {
        loop {
            let Some((mut top, mut node, mut guessed)) = self.pop_top(cache) else {
                return Err(PopError::Empty);
            };
            loop {
                // A stale read if the node was popped meanwhile; the CAS then fails.
                let below = node.next.load(Ordering::Relaxed);
                match self.top.word.compare_exchange(
                    top,
                    below,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(installed) => {
                        Self::remember(installed, None, cache);
                        break;
                    }
                    // A wrong guess is no lost race: go on from the word the CAS read.
                    Err(now) if guessed => {
                        if now.is_nil() {
                            return Err(PopError::Empty);
                        }
                        (top, node, guessed) = (now, self.node(now.index()), false);
                    }
                    Err(_) => return Err(PopError::Transient),
                }
            }
            self.count(1_usize.wrapping_neg(), cache);
            // The node is ours now.
            let state = node.slot.state.load(Ordering::Acquire);
            let taken = if state == FULL {
                node.slot.state.store(TAKEN, Ordering::Relaxed);
                // SAFETY: we unlinked the node, so we alone own its plain value (nobody else
                // moves a `FULL` state), and the Acquire loads made the pusher's write visible.
                Ok(unsafe { node.slot.read() })
            } else {
                Self::take_tracked(&node.slot)
            };
            // The node goes back before a revoked value is dropped: that drop is user code,
            // and a panic out of it must not lose the node (nor the stack its capacity).
            self.recycle_in(top.index(), node, cache);
            match taken {
                Ok(item) => return Ok(item),
                // The item was revoked: drop it and skip the node.
                Err(dead) => drop(dead),
            }
        }
    }

    /// Pops the top item, retrying lost races; `None` if the stack is empty.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack: Stack<&str> = Stack::new();
    /// stack.push("only");
    /// assert_eq!(stack.pop(), Some("only"));
    /// assert_eq!(stack.pop(), None);
    /// ```
    #[inline(always)]
    pub fn pop(&self) -> Option<T> {
        match self.thread_cache() {
            // SAFETY: as in `try_push`.
            Some(cache) => self.pop_in(unsafe { cache.own() }),
            None => self.pop_by_seat(),
        }
    }

    /// How many items the stack holds: a snapshot, exact when no operation is in flight. A
    /// revoked item (see [`RevocableBag::revoke`]) counts until a pop passes over its node:
    /// `revoke` does not know the stack. In the child of a `fork`, an operation that another
    /// thread of the parent was in the middle of stays in flight for good (the child has only
    /// the forking thread), so the count may stay off by one for each such operation.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// (0..5).for_each(|i| stack.push(i));
    /// assert_eq!(stack.len(), 5);
    /// ```
    pub fn len(&self) -> usize {
        // Below zero (a huge unsigned value) while a pop has counted itself before the push
        // of the node it popped.
        let seats = self.seats.iter().filter_map(|cache| {
            // SAFETY: a seat cache is published with a release store (seen by this acquire
            // load) and freed only when the stack is dropped, which `&self` outlives.
            unsafe { cache.load(Ordering::Acquire).as_ref() }.map(|cache| &*cache.tally)
        });
        let nodes = self
            .tally_list()
            .map(|tally| &*tally.count)
            .chain(seats)
            .fold(self.top.nodes.load(Ordering::Relaxed), |sum, count| {
                sum.wrapping_add(count.load(Ordering::Relaxed))
            });
        (nodes as isize).max(0) as usize
    }

    /// Whether the stack holds no item: a snapshot, from the top word itself.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// assert!(stack.is_empty());
    /// stack.push(1);
    /// assert!(!stack.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.top.word.load(Ordering::Acquire).is_nil()
    }

    /// A handle for the calling thread: the stack's operations with a private stash of free
    /// nodes, so that a push takes its node and a pop returns its node without touching the
    /// shared free list (which the handle visits once per 32 nodes, to refill or to spill).
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// let handle = stack.handle();
    /// handle.push('a');
    /// handle.push('b');
    /// assert_eq!(handle.pop(), Some('b'));
    /// drop(handle); // its stash goes back to the stack
    /// assert_eq!(stack.pop(), Some('a'));
    /// ```
    pub fn handle(&self) -> Handle<'_, T> {
        Handle {
            stack: self,
            stash: Stash::new(),
            tally: self.hold_tally(),
        }
    }

    /// The node at `index`.
    #[inline]
    fn node(&self, index: u32) -> &Node<T> {
        let (chunk, offset) = locate(index);
        let base = self.chunks[chunk].load(Ordering::Acquire);
        debug_assert!(!base.is_null(), "node {index} was never allocated");
        // SAFETY: an index is only used after `allocate` returned it, which installed its chunk
        // (a release CAS this acquire load sees, directly or through the top or free word that
        // published the index); chunk `k` holds `FIRST_CHUNK << k` nodes, and `offset` is
        // below that by `locate`; chunks live until the stack is dropped.
        unsafe { &*base.add(offset) }
    }

    /// Pops one batch off the shared free list: the index of its first node.
    #[inline]
    fn take_batch(&self) -> Option<u32> {
        let mut top = self.free.load(Ordering::Acquire);
        loop {
            if top.is_nil() {
                return None;
            }
            // A stale read if the batch was taken meanwhile; the CAS then fails.
            let below = self.node(top.index()).next_batch.load(Ordering::Relaxed);
            match self
                .free
                .compare_exchange_weak(top, below, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some(top.index()),
                Err(now) => top = now,
            }
        }
    }

    /// Pushes the batch that starts at node `first` (linked through `next`, ended by NIL)
    /// onto the shared free list.
    #[inline]
    fn give_batch(&self, first: u32) {
        let head = self.node(first);
        let mut top = self.free.load(Ordering::Relaxed);
        loop {
            head.next_batch.store(top.index(), Ordering::Relaxed);
            match self
                .free
                .compare_exchange_weak(top, first, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => top = now,
            }
        }
    }

    /// A node for a push by a thread without a stash: the first node of a free batch (the rest
    /// of the batch goes back), or a never-used one.
    #[inline]
    fn allocate(&self) -> Option<u32> {
        match self.take_batch() {
            Some(first) => {
                let rest = self.node(first).next.load(Ordering::Relaxed);
                if rest != NIL {
                    self.give_batch(rest);
                }
                Some(first)
            }
            None => self.allocate_fresh(1).map(|(first, _)| first),
        }
    }

    /// Hands out up to `count` never-used indices: the first and how many, installing their
    /// chunks first. `None` once all [`MAX_NODES`] have been handed out, or if the chunk of
    /// the first one is not installed and there is no memory for it (fewer than `count` if a
    /// later chunk could not be had).
    #[cold]
    fn allocate_fresh(&self, count: usize) -> Option<(u32, usize)> {
        let mut first = self.fresh.load(Ordering::Relaxed);
        let granted = loop {
            let mut granted = count.min(MAX_NODES.saturating_sub(first));
            if granted == 0 {
                return None;
            }
            // Install before handing out, so that an index is never handed out without its
            // node's memory. A chunk installed for indices another thread then takes serves
            // that thread.
            let (last_chunk, _) = locate((first + granted - 1) as u32);
            for chunk in locate(first as u32).0..=last_chunk {
                if self.chunks[chunk].load(Ordering::Acquire).is_null()
                    && !self.install_chunk(chunk)
                {
                    // Chunk `chunk` starts at index `FIRST_CHUNK * (2^chunk - 1)`.
                    granted = (FIRST_CHUNK * ((1 << chunk) - 1)).saturating_sub(first);
                    break;
                }
            }
            if granted == 0 {
                return None;
            }
            match self.fresh.compare_exchange_weak(
                first,
                first + granted,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break granted,
                Err(now) => first = now,
            }
        };
        Some((first as u32, granted))
    }

    /// Installs chunk `chunk` unless another thread did first; `false` if there is no memory
    /// for it.
    #[cold]
    fn install_chunk(&self, chunk: usize) -> bool {
        let len = FIRST_CHUNK << chunk;
        let mut nodes = Vec::new();
        if nodes.try_reserve_exact(len).is_err() {
            return false;
        }
        nodes.extend((0..len).map(|_| Node::<T>::new()));
        let base = Box::into_raw(nodes.into_boxed_slice()).cast::<Node<T>>();
        if self.chunks[chunk]
            .compare_exchange(ptr::null_mut(), base, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Another thread installed the chunk first.
            // SAFETY: `base` came from the boxed slice of that length just above and was never
            // shared.
            drop(unsafe {
                Box::from_raw(ptr::slice_from_raw_parts_mut(base, FIRST_CHUNK << chunk))
            });
        }
        true
    }

    /// Returns the node at `index`, whose value has been moved out, to the free list, as a
    /// batch of one.
    #[inline]
    fn recycle(&self, index: u32) {
        self.node(index).next.store(NIL, Ordering::Relaxed);
        self.give_batch(index);
    }

    /// Counts a successful push (`delta` 1) or pop (`delta` −1, wrapping): in the tally of
    /// `cache`, or in the shared count beside the top.
    #[inline]
    fn count(&self, delta: usize, cache: Cache<'_, T>) {
        match cache {
            Cache::Own { tally, .. } => {
                // Only the owner of the tally writes it: a plain load and store.
                let count = tally.load(Ordering::Relaxed);
                tally.store(count.wrapping_add(delta), Ordering::Relaxed);
            }
            Cache::Shared => {
                self.top.nodes.fetch_add(delta, Ordering::Relaxed);
            }
        }
    }

    /// The top word a push through `cache` compares against first, and whether it is the
    /// owner's guess (`true`) or a load of the top (`false`). A push uses an empty guess too:
    /// it only needs the word to be right.
    #[inline(always)]
    fn push_top(&self, cache: Cache<'_, T>) -> (TopValue, bool) {
        match cache {
            // SAFETY: a `Cache::Own` is only made for the stash's one user (see `Stash`).
            Cache::Own { stash, .. } => (unsafe { *stash.guess.get() }, true),
            // Relaxed: the push reads nothing through the top it found, it only links to it.
            Cache::Shared => (self.top.word.load(Ordering::Relaxed), false),
        }
    }

    /// The top word a pop through `cache` compares against first, its node, and whether the
    /// word is the owner's guess (`true`) or a load of the top (`false`); `None` if a load
    /// found the stack empty. An empty guess is not used, so that a pop never reports
    /// [`PopError::Empty`] from a guess; the guess's node is kept beside it when a push made
    /// the guess (the node it pushed), and computed from the index otherwise.
    #[inline(always)]
    fn pop_top(&self, cache: Cache<'_, T>) -> Option<(TopValue, &Node<T>, bool)> {
        if let Cache::Own { stash, .. } = cache {
            // SAFETY: a `Cache::Own` is only made for the stash's one user (see `Stash`).
            let (guess, known) = unsafe { (*stash.guess.get(), *stash.guess_node.get()) };
            // SAFETY: a non-null `guess_node` is the address of the node `guess` names, kept
            // by `remember`; nodes live until the stack is dropped.
            if let Some(node) = unsafe { known.as_ref() } {
                return Some((guess, node, true));
            }
            if !guess.is_nil() {
                return Some((guess, self.node(guess.index()), true));
            }
        }
        let top = self.top.word.load(Ordering::Acquire);
        (!top.is_nil()).then(|| (top, self.node(top.index()), false))
    }

    /// Keeps `installed`, the top word a successful exchange through `cache` just made, as
    /// the owner's next guess, with the node it names if the caller knows it (a push: its
    /// own node).
    #[inline(always)]
    fn remember(installed: TopValue, node: Option<&Node<T>>, cache: Cache<'_, T>) {
        if let Cache::Own { stash, .. } = cache {
            // SAFETY: as in `pop_top`.
            unsafe {
                *stash.guess.get() = installed;
                *stash.guess_node.get() = node.map_or(ptr::null(), ptr::from_ref);
            }
        }
    }

    // The plain calls match on `thread_cache` themselves rather than pass a closure to a
    // helper: the hit, the fast path, is then compiled for `Cache::Own` alone with the
    // operation inlined into the caller, as a handle's is; a closure holding the whole
    // operation was left out of line by the compiler (a call and six saved registers a push).
    // A miss calls one function out of line that does the whole operation, so that the fast
    // path tests nothing but the thread's entry.

    /// Runs `op`, the rest of a plain call that missed the thread's one-entry cache, through
    /// the seat's cache (kept in the entry for the next call), or, for a thread without a
    /// seat (past [`SEATS`] threads, or in a thread-local's destructor at thread exit), on the
    /// shared free list and count. Each of the four callers below is out of line.
    #[inline(always)]
    fn by_seat<R>(&self, op: impl FnOnce(Cache<'_, T>) -> R) -> R {
        match self.seat_cache() {
            // SAFETY: as in `try_push`.
            Some(cache) => op(unsafe { cache.own() }),
            None => op(Cache::Shared),
        }
    }

    /// [`push`](Self::push) that missed the thread's one-entry cache (see
    /// [`by_seat`](Self::by_seat)).
    #[inline(never)]
    fn push_by_seat(&self, item: T) {
        self.by_seat(|cache| self.push_tagged(item, FULL, cache))
    }

    /// [`try_push`](Self::try_push) that missed the thread's one-entry cache.
    #[inline(never)]
    fn try_push_by_seat(&self, item: T) -> Result<(), PushError<T>> {
        self.by_seat(|cache| self.try_push_tagged(item, FULL, cache))
    }

    /// [`pop`](Self::pop) that missed the thread's one-entry cache.
    #[inline(never)]
    fn pop_by_seat(&self) -> Option<T> {
        self.by_seat(|cache| self.pop_in(cache))
    }

    /// [`try_pop`](Self::try_pop) that missed the thread's one-entry cache.
    #[inline(never)]
    fn try_pop_by_seat(&self) -> Result<T, PopError> {
        self.by_seat(|cache| self.try_pop_in(cache))
    }

    /// This stack's cache for the calling thread's seat if the thread's one-entry cache
    /// (`seat::Local::stack_id` and `stack_cache`) names this stack; `None` otherwise (and
    /// always under loom, where no thread has a seat).
    ///
    /// Its three loads (the entry's two words and this stack's id) do not depend on each
    /// other, so the stash is reached one load after the thread-local's, where the seat's
    /// array would take two in a row (the seat, then the array's entry). A thread that
    /// alternates between stacks misses it and goes to the array.
    #[inline(always)]
    fn thread_cache(&self) -> Option<&SeatCache<T>> {
        #[cfg(not(pitlane_loom))]
        {
            // SAFETY: a thread's `Local` lives, unmoved, as long as the thread.
            let local = unsafe { &*seat::local() };
            if local.stack_id.get() == self.id.load(Ordering::Relaxed) {
                // SAFETY: the entry names this stack (ids are unique, never reused, and a
                // stack without one has 0, which no entry holds), so its cache is this
                // stack's `SeatCache<T>` for the seat this thread held when it kept it
                // (`keep_in_thread`), which it still holds: the entry is emptied before the
                // seat is given back. It lives until the stack is dropped, which `&self`
                // outlives.
                return Some(unsafe { local.stack_cache.get().cast::<SeatCache<T>>().as_ref() });
            }
        }
        None
    }

    /// The cache of the calling thread's seat, made on the seat's first call on this stack
    /// and kept in the thread's one-entry cache (see [`thread_cache`](Self::thread_cache));
    /// `None` for a thread without a seat.
    #[inline(always)]
    fn seat_cache(&self) -> Option<&SeatCache<T>> {
        let cache = match self.made_seat_cache(seat::as_held()) {
            Some(made) => made,
            None => self.seat_cache_first()?,
        };
        #[cfg(not(pitlane_loom))]
        self.keep_in_thread(cache);
        Some(cache)
    }

    /// Keeps `cache`, this stack's cache for the calling thread's seat, in the thread's
    /// one-entry cache, giving the stack its id first if it has none.
    #[cfg(not(pitlane_loom))]
    fn keep_in_thread(&self, cache: &SeatCache<T>) {
        let mut id = self.id.load(Ordering::Relaxed);
        if id == 0 {
            let new = NEXT_STACK_ID.fetch_add(1, Ordering::Relaxed);
            id = match self
                .id
                .compare_exchange(0, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => new,
                // Another thread gave the stack its id first.
                Err(theirs) => theirs,
            };
        }
        debug_assert!(id != 0 && id != seat::NO_STACK);
        // SAFETY: a thread's `Local` lives, unmoved, as long as the thread.
        let local = unsafe { &*seat::local() };
        local.stack_cache.set(NonNull::from(cache).cast());
        local.stack_id.set(id);
    }

    /// The cache of `seat` (the calling thread's seat as [`seat::as_held`] reads it) if the
    /// thread holds a seat and the seat has a cache here; `None` otherwise.
    #[inline(always)]
    fn made_seat_cache(&self, seat: usize) -> Option<&SeatCache<T>> {
        let cache = self.seats.get(seat)?;
        // SAFETY: published by a release store that this acquire load sees (made by this
        // thread or by an earlier holder of the seat, whose exit happens before our seat was
        // taken), freed only when the stack is dropped, which `&self` outlives.
        unsafe { cache.load(Ordering::Acquire).as_ref() }
    }

    /// [`seat_cache`](Self::seat_cache) for a thread without a seat yet (or any more), or
    /// whose seat has no cache in this stack yet; `None` also if the allocator refuses the
    /// memory for the cache (the call then takes the shared path, and the seat's next call
    /// tries again).
    #[cold]
    #[inline(never)]
    fn seat_cache_first(&self) -> Option<&SeatCache<T>> {
        let seat = seat::current()?;
        self.made_seat_cache(seat)
            .or_else(|| self.seat_cache_new(seat))
    }

    /// A Bagpipe's plain push over this stack whose seat is none, or has no cache here yet:
    /// the stack's own plain call (which takes a seat, makes its cache, or goes shared).
    #[cold]
    #[inline(never)]
    fn try_push_unseated(&self, item: T) -> Result<(), PushError<T>> {
        Stack::try_push(self, item)
    }

    /// The pop of [`try_push_unseated`](Self::try_push_unseated).
    #[cold]
    #[inline(never)]
    fn try_pop_unseated(&self) -> Result<T, PopError> {
        Stack::try_pop(self)
    }

    /// The first plain call of the holder of `seat` on this stack: make its cache. `None` if
    /// the allocator refuses the memory for it: a `try_push` must not abort where a refused
    /// chunk only makes it fail, so the call goes the shared way, as a seatless thread's.
    ///
    /// The allocation runs the global allocator, user code that may call this stack on this
    /// thread (an allocator that keeps its free blocks in a `Stack`): such a call makes the
    /// seat's cache first, counts in its tally and stashes nodes there. So the cache is
    /// installed by a compare-and-swap from null, and one found there is kept (ours freed).
    #[cold]
    fn seat_cache_new(&self, seat: usize) -> Option<&SeatCache<T>> {
        let layout = alloc::alloc::Layout::new::<SeatCache<T>>();
        // SAFETY: a `SeatCache` is not zero-sized (its stash holds an array of nodes).
        let cache = unsafe { alloc::alloc::alloc(layout) }.cast::<SeatCache<T>>();
        if cache.is_null() {
            // A call from inside the refused allocation may have made the cache all the same.
            return self.made_seat_cache(seat);
        }
        // SAFETY: `cache` is fresh memory of `SeatCache<T>`'s layout, which nothing else
        // names.
        unsafe {
            cache.write(SeatCache {
                stash: Stash::new(),
                tally: CachePadded::new(AtomicUsize::new(0)),
            })
        };
        // Only the holder of `seat` installs here; Release publishes the cache to `len`.
        match self.seats[seat].compare_exchange(
            ptr::null_mut(),
            cache,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            // SAFETY: allocated with the layout of a `SeatCache<T>` by the global allocator,
            // so `Stack::drop` frees it as a `Box`; freed only with the stack, which `&self`
            // outlives.
            Ok(_) => Some(unsafe { &*cache }),
            Err(made) => {
                // SAFETY: as above: ours, a `Box` by its allocation, and never shared.
                drop(unsafe { Box::from_raw(cache) });
                // SAFETY: installed by a call of this seat's holder, published with the
                // Release of that exchange (this thread's own) and freed only with the stack.
                Some(unsafe { &*made })
            }
        }
    }

    /// The tallies of handles, past and present, newest first.
    fn tally_list(&self) -> impl Iterator<Item = &Tally> {
        let first = self.tallies.load(Ordering::Acquire);
        core::iter::successors(
            // SAFETY: tallies are published with a release CAS (seen by this acquire load; a
            // tally's `next` was set before it was published) and freed only when the stack
            // is dropped, which the `&self` borrow outlives.
            unsafe { first.as_ref() },
            // SAFETY: as above.
            |tally| unsafe { tally.next.load(Ordering::Relaxed).as_ref() },
        )
    }

    /// A tally for a new handle: a free one from the list, or a new one added to it.
    fn hold_tally(&self) -> &Tally {
        self.tally_list()
            .find(|tally| {
                !tally.held.load(Ordering::Relaxed)
                    && tally
                        .held
                        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
            })
            .unwrap_or_else(|| self.add_tally())
    }

    #[cold]
    fn add_tally(&self) -> &Tally {
        let tally = Box::into_raw(Box::new(Tally {
            count: CachePadded::new(AtomicUsize::new(0)),
            held: AtomicBool::new(true),
            next: AtomicPtr::new(ptr::null_mut()),
        }));
        let mut head = self.tallies.load(Ordering::Relaxed);
        loop {
            // SAFETY: `tally` came from `Box::into_raw` just above and is freed only with the
            // stack.
            unsafe { &(*tally).next }.store(head, Ordering::Relaxed);
            match self.tallies.compare_exchange_weak(
                head,
                tally,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                // SAFETY: published now, and freed only when the stack is dropped, which the
                // `&self` borrow of the returned reference outlives.
                Ok(_) => return unsafe { &*tally },
                Err(now) => head = now,
            }
        }
    }

    /// A node for a push: from the stash of `cache`, or shared.
    #[inline]
    fn allocate_in(&self, cache: Cache<'_, T>) -> Option<(u32, &Node<T>)> {
        match cache {
            // SAFETY: a `Cache::Own` is only made for the stash's one user (see `Stash`), and
            // a stash serves one stack.
            Cache::Own { stash, .. } => unsafe { stash.take(self) },
            Cache::Shared => self.allocate().map(|index| (index, self.node(index))),
        }
    }

    /// Gives back a node: to the stash of `cache`, or to the shared list.
    #[inline]
    fn recycle_in(&self, index: u32, node: &Node<T>, cache: Cache<'_, T>) {
        match cache {
            // SAFETY: as in `allocate_in`; `node` is the node at `index`.
            Cache::Own { stash, .. } => unsafe { stash.keep(self, index, node) },
            Cache::Shared => self.recycle(index),
        }
    }

    /// A node for `item`, pushed with `tag` (`FULL`, or its handle's tag), not yet linked, and
    /// the state it was published with (`FULL`, or the handle's tag with this push's mark).
    /// `Err(item)` if the stack has no node left ([`MAX_NODES`] are in use). Inlined: a call
    /// of its own cost every push a tenth of its instructions.
    #[inline(always)]
    fn prepare(
        &self,
        item: T,
        tag: usize,
        cache: Cache<'_, T>,
    ) -> Result<(u32, &Node<T>, usize), T> {
        let Some((index, node)) = self.allocate_in(cache) else {
            return Err(item);
        };
        // SAFETY: the node came off the free list (or was never used): nobody else owns it, and
        // its value was moved out before it was recycled.
        unsafe { node.slot.write(item) };
        // SAFETY: `tag` is `FULL` or the handle of the item just written, alive while it is.
        let state = unsafe { node.slot.track(tag) };
        node.slot.state.store(state, Ordering::Relaxed);
        Ok((index, node, state))
    }

    #[inline(always)]
    fn try_push_tagged(
        &self,
        item: T,
        tag: usize,
        cache: Cache<'_, T>,
    ) -> Result<(), PushError<T>> {
        let (index, node, state) = self.prepare(item, tag, cache).map_err(PushError::Full)?;
        let (mut top, mut guessed) = self.push_top(cache);
        loop {
            node.next.store(top.index(), Ordering::Relaxed);
            match self
                .top
                .word
                .compare_exchange(top, index, Ordering::Release, Ordering::Relaxed)
            {
                Ok(installed) => {
                    Self::remember(installed, Some(node), cache);
                    self.count(1, cache);
                    return Ok(());
                }
                // A wrong guess is no lost race: go on from the word the CAS read.
                Err(now) if guessed => (top, guessed) = (now, false),
                Err(_) => return self.unprepare(index, node, state, cache),
            }
        }
    }

    /// The push's CAS failed: take the item back and recycle the node. If a revoker marked the
    /// (already findable) item meanwhile, the push counts as done and revoked at once.
    #[cold]
    fn unprepare(
        &self,
        index: u32,
        node: &Node<T>,
        state: usize,
        cache: Cache<'_, T>,
    ) -> Result<(), PushError<T>> {
        // The revoked value, if any, is dropped once the node is back: its drop is user code,
        // and a panic out of it must not lose the node.
        let (outcome, dead) = if node
            .slot
            .state
            .compare_exchange(state, TAKEN, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: the node was never linked and its state was ours to take back.
            let item = unsafe { node.slot.read() };
            // SAFETY: `item` is alive, so is its handle; `state` is what `track` returned.
            unsafe { node.slot.untrack(state) };
            (Err(PushError::Transient(item)), None)
        } else {
            debug_assert_eq!(node.slot.state.load(Ordering::Relaxed), REVOKED);
            node.slot.state.store(TAKEN, Ordering::Relaxed);
            // SAFETY: the revoker left the value in place; the node was never linked, so we
            // alone own it. The handle is not touched (the revoker clears it).
            (Ok(()), Some(unsafe { node.slot.read() }))
        };
        self.recycle_in(index, node, cache);
        drop(dead);
        outcome
    }

    #[inline(always)]
    fn push_tagged(&self, item: T, tag: usize, cache: Cache<'_, T>) {
        let (index, node, _) = match self.prepare(item, tag, cache) {
            Ok(prepared) => prepared,
            Err(item) => crate::weak_bag::full(item),
        };
        // Relaxed (here and on failure): the push only links to the top it found.
        let (mut top, mut guessed) = self.push_top(cache);
        let mut pause = RetryPause::new();
        loop {
            node.next.store(top.index(), Ordering::Relaxed);
            match self.top.word.compare_exchange_weak(
                top,
                index,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(installed) => {
                    Self::remember(installed, Some(node), cache);
                    self.count(1, cache);
                    return;
                }
                // A wrong guess is no lost race: retry at once with the word the CAS read.
                Err(now) if guessed => (top, guessed) = (now, false),
                Err(_) => {
                    pause.pause();
                    top = self.top.word.load(Ordering::Relaxed);
                }
            }
        }
    }

    /// A node we unlinked holds a tracked or revoked value: settle it with one swap.
    /// `Err(value)` for a revoked value, which the caller drops once the node is recycled.
    #[cold]
    fn take_tracked(slot: &Slot<T>) -> Result<T, T> {
        let state = slot.state.swap(TAKEN, Ordering::Acquire);
        // SAFETY: tracked or revoked, the slot holds a value, and the swap made it ours.
        let item = unsafe { slot.read() };
        if state == REVOKED {
            return Err(item);
        }
        debug_assert!(slot::is_tracked(state), "state {state}");
        // SAFETY: we own `item`, whose handle `state` names.
        unsafe { slot.untrack(state) };
        Ok(item)
    }
}

/// One thread's access to a [`Stack`], with a stash of free nodes; see [`Stack::handle`].
/// Not `Sync`: one thread uses it at a time. Dropping it gives its stash back to the stack.
///
/// ```
/// use pitlane_queue::stack::Stack;
///
/// let stack = Stack::new();
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         let handle = stack.handle();
///         (0..1000).for_each(|i| handle.push(i));
///     });
/// });
/// let handle = stack.handle();
/// assert_eq!(handle.pop(), Some(999));
/// assert_eq!(handle.stack().len(), 999);
/// ```
pub struct Handle<'a, T> {
    stack: &'a Stack<T>,
    /// Free nodes of `stack` owned by this handle alone.
    stash: Stash<T>,
    /// Where this handle counts its pushes and pops, held by it alone.
    tally: &'a Tally,
}

impl<T> Handle<'_, T> {
    /// [`Stack::try_push`], taking the node from the stash.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// assert!(stack.handle().try_push(1).is_ok());
    /// ```
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        self.stack.try_push_tagged(item, FULL, self.cache())
    }

    /// [`Stack::push`], taking the node from the stash.
    ///
    /// # Panics
    /// If the stack already holds [`MAX_ITEMS`].
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// stack.handle().push(1);
    /// assert_eq!(stack.pop(), Some(1));
    /// ```
    #[inline(always)]
    pub fn push(&self, item: T) {
        self.stack.push_tagged(item, FULL, self.cache())
    }

    /// [`Stack::try_pop`], keeping the node in the stash.
    ///
    /// ```
    /// use pitlane_queue::{PopError, stack::Stack};
    ///
    /// let stack: Stack<u8> = Stack::new();
    /// assert_eq!(stack.handle().try_pop(), Err(PopError::Empty));
    /// ```
    #[inline]
    pub fn try_pop(&self) -> Result<T, PopError> {
        self.stack.try_pop_in(self.cache())
    }

    /// [`Stack::pop`], keeping the nodes in the stash.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// stack.push(2);
    /// assert_eq!(stack.handle().pop(), Some(2));
    /// ```
    #[inline]
    pub fn pop(&self) -> Option<T> {
        crate::weak_bag::retry_pop(|| self.try_pop())
    }

    /// The stack this handle works on.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack: Stack<u8> = Stack::new();
    /// assert!(std::ptr::eq(stack.handle().stack(), &stack));
    /// ```
    pub fn stack(&self) -> &Stack<T> {
        self.stack
    }

    /// This handle's stash and tally.
    #[inline]
    fn cache(&self) -> Cache<'_, T> {
        Cache::Own {
            stash: &self.stash,
            tally: &self.tally.count,
        }
    }
}

impl<T> Stack<T> {
    /// Links the never-used nodes `first..first + count` (`count` from 1 to [`STASH_BATCH`],
    /// just handed out by `allocate_fresh`) into one batch and gives it to the shared list.
    #[cold]
    fn give_fresh(&self, first: u32, count: usize) {
        let last = first + count as u32 - 1;
        for index in first..last {
            self.node(index).next.store(index + 1, Ordering::Relaxed);
        }
        self.node(last).next.store(NIL, Ordering::Relaxed);
        self.give_batch(first);
    }

    /// Links `nodes` (free, owned by the caller) into one batch and gives it to the shared list.
    #[cold]
    fn give_nodes(&self, nodes: &[FreeNode<T>]) {
        let (Some(first), Some(last)) = (nodes.first(), nodes.last()) else {
            return;
        };
        for pair in nodes.windows(2) {
            // SAFETY: a stash holds nodes of this stack by their addresses, which live until
            // the stack is dropped.
            unsafe { pair[0].node.as_ref() }
                .next
                .store(pair[1].index, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { last.node.as_ref() }
            .next
            .store(NIL, Ordering::Relaxed);
        self.give_batch(first.index);
    }
}

impl<T> Drop for Handle<'_, T> {
    fn drop(&mut self) {
        for batch in self.stash.nodes.get_mut()[..*self.stash.len.get_mut()].chunks(STASH_BATCH) {
            self.stack.give_nodes(batch);
        }
        // The next holder continues from our count; Release orders it before that holder's
        // updates.
        self.tally.held.store(false, Ordering::Release);
    }
}

impl<T> BagHandle for Handle<'_, T> {
    type Item = T;

    #[inline]
    fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        Handle::try_push(self, item)
    }

    #[inline]
    fn try_pop(&self) -> Result<T, PopError> {
        Handle::try_pop(self)
    }

    #[inline]
    fn push(&self, item: T) {
        Handle::push(self, item)
    }

    /// Keeps the stash: it delays nobody, and giving it back would only cost the next
    /// operations a trip to the shared free list.
    fn release(&self) {}
}

impl<T> fmt::Debug for Handle<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("stack", self.stack)
            // SAFETY: a handle is not `Sync`, and no stash call is running while we format.
            .field("stashed", unsafe { &*self.stash.len.get() })
            .finish()
    }
}

impl<T> Drop for Stack<T> {
    fn drop(&mut self) {
        for cache in &self.seats {
            let cache = cache.load(Ordering::Relaxed);
            if !cache.is_null() {
                // SAFETY: made by `seat_cache_new` as a `Box` would be (the global allocator, the
                // layout of a `SeatCache<T>`), stored once; `&mut self`
                // excludes every other access. Its stash holds only indices into the chunks,
                // which are freed below.
                drop(unsafe { Box::from_raw(cache) });
            }
        }
        let mut at = self.tallies.load(Ordering::Relaxed);
        while !at.is_null() {
            // SAFETY: every tally was made by `add_tally` with `Box::into_raw` and is on the
            // list once; no handle outlives the stack it borrows, and `&mut self` excludes
            // every other access.
            let tally = unsafe { Box::from_raw(at) };
            at = tally.next.load(Ordering::Relaxed);
        }
        for (chunk, base) in self.chunks.iter().enumerate() {
            let base = base.load(Ordering::Relaxed);
            if base.is_null() {
                continue;
            }
            // SAFETY: installed chunks are boxed slices of `FIRST_CHUNK << chunk` nodes owned by
            // the stack; `&mut self` excludes every other access.
            let mut nodes =
                unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(base, FIRST_CHUNK << chunk)) };
            for node in nodes.iter_mut() {
                node.slot.drop_in_place();
            }
        }
    }
}

impl<T> Default for Stack<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for Stack<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stack").field("len", &self.len()).finish()
    }
}

impl<T> WeakBag for Stack<T> {
    type Item = T;

    #[inline(always)]
    fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        Stack::try_push(self, item)
    }

    #[inline(always)]
    fn try_pop(&self) -> Result<T, PopError> {
        Stack::try_pop(self)
    }

    const SEATED: bool = true;

    #[inline(always)]
    fn try_push_seated(&self, seat: seat::Held<'_>, item: T) -> Result<(), PushError<T>> {
        match self.made_seat_cache(seat.index()) {
            // SAFETY: the calling thread holds the seat of this cache for the whole call (see
            // `seat::Held`), so it alone uses its stash, as in `Stack::try_push`.
            Some(cache) => self.try_push_tagged(item, FULL, unsafe { cache.own() }),
            None => self.try_push_unseated(item),
        }
    }

    #[inline(always)]
    fn try_pop_seated(&self, seat: seat::Held<'_>) -> Result<T, PopError> {
        match self.made_seat_cache(seat.index()) {
            // SAFETY: as in `try_push_seated`.
            Some(cache) => self.try_pop_in(unsafe { cache.own() }),
            None => self.try_pop_unseated(),
        }
    }

    #[inline(always)]
    fn push(&self, item: T) {
        Stack::push(self, item)
    }

    #[inline(always)]
    fn pop(&self) -> Option<T> {
        Stack::pop(self)
    }

    fn size_guess(&self) -> usize {
        self.len()
    }

    type Handle<'a>
        = Handle<'a, T>
    where
        T: 'a;

    fn handle(&self) -> Handle<'_, T> {
        Stack::handle(self)
    }
}

impl<T: Revocable> RevocableBag for Stack<T> {
    fn try_push_revocable(&self, item: T) -> Result<(), PushError<T>> {
        let tag = item.revoke_handle().tag();
        self.try_push_tagged(item, tag, Cache::Shared)
    }

    fn push_revocable(&self, item: T) {
        let tag = item.revoke_handle().tag();
        self.push_tagged(item, tag, Cache::Shared)
    }

    unsafe fn revoke(item: &T) -> bool {
        // SAFETY: the structure whose slot the handle names (this stack's node memory lives
        // until the stack is dropped; a queue's segment while `revoke_slot` is pinned) is
        // alive by the caller's contract.
        unsafe { revoke::revoke_slot(item) }
    }
}

impl<T> IntoIterator for Stack<T> {
    type Item = T;
    type IntoIter = IntoIter<Self>;

    /// Drains the stack it consumes, top item first.
    ///
    /// ```
    /// use pitlane_queue::stack::Stack;
    ///
    /// let stack = Stack::new();
    /// stack.push(1);
    /// stack.push(2);
    /// assert_eq!(stack.into_iter().collect::<Vec<_>>(), [2, 1]);
    /// ```
    fn into_iter(self) -> IntoIter<Self> {
        IntoIter::new(self)
    }
}

// As for the queue: every change is one atomic step, so a stack seen again after a panic is
// consistent.
impl<T> core::panic::UnwindSafe for Stack<T> {}
impl<T> core::panic::RefUnwindSafe for Stack<T> {}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_guess_of_the_top_is_no_lost_race() {
        let stack = Stack::new();
        let (a, b) = (stack.handle(), stack.handle());
        a.push(1);
        assert_eq!(b.try_pop(), Ok(1));
        // `b` pushes into the node it popped: the same index back on top, a newer generation,
        // so `a`'s guess names the right node but is wrong.
        b.push(2);
        // Nothing raced `a`: its try operations must not report a lost race.
        assert_eq!(a.try_pop(), Ok(2));
        assert!(a.try_push(3).is_ok());
        b.push(4);
        assert!(a.try_push(5).is_ok());
        assert_eq!(b.try_pop(), Ok(5));
        assert_eq!(a.try_pop(), Ok(4));
        assert_eq!(stack.len(), 1);
        // A plain call of this thread guesses from its seat's stash, left by its last exchange.
        stack.push(6);
        b.push(7);
        assert_eq!(stack.try_pop(), Ok(7));
        assert_eq!(stack.try_pop(), Ok(6));
        assert_eq!(stack.try_pop(), Ok(3));
        assert_eq!(stack.try_pop(), Err(PopError::Empty));
    }

    #[test]
    fn the_top_word_generation_wraps_only_after_hours_at_a_billion_exchanges_a_second() {
        let seconds = Tagged::<INDEX_BITS>::GENERATIONS / 1_000_000_000;
        assert!(seconds >= 2 * 3600, "a wrap in {seconds} s");
    }

    #[test]
    fn a_full_stack_hands_the_item_back_and_push_panics_with_the_limit() {
        let stack = Stack::new();
        for i in 0..MAX_ITEMS {
            assert!(stack.try_push(i as u32).is_ok());
        }
        assert_eq!(stack.try_push(7), Err(PushError::Full(7)));
        // A handle finds no node either, shared or fresh.
        assert_eq!(stack.handle().try_push(8), Err(PushError::Full(8)));
        let full = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| stack.push(9)));
        let message = full.expect_err("push into a full stack panics");
        let message = message
            .downcast_ref::<String>()
            .expect("a formatted message");
        assert!(message.contains("2097151 items"), "{message}");
        // One pop frees one node, which the next push takes.
        assert_eq!(stack.pop(), Some(MAX_ITEMS as u32 - 1));
        stack.push(10);
        assert_eq!(stack.pop(), Some(10));
        assert_eq!(stack.len(), MAX_ITEMS - 1);
    }

    /// How many tallies the stack's list holds.
    fn tallies<T>(stack: &Stack<T>) -> usize {
        stack.tally_list().count()
    }

    #[test]
    fn size_guess_adds_the_handles_tallies_to_the_shared_count() {
        let stack = Stack::new();
        stack.push(0);
        let first = stack.handle();
        let second = stack.handle();
        first.push(1);
        first.push(2);
        second.push(3);
        assert_eq!(second.pop(), Some(3));
        // A pop through `second` of an item `first` pushed: `second`'s tally goes below zero.
        assert_eq!(second.pop(), Some(2));
        assert_eq!(stack.len(), 2);
        assert_eq!(stack.pop(), Some(1));
        assert_eq!(stack.len(), 1);
        assert_eq!(tallies(&stack), 2);
    }

    #[test]
    fn a_dropped_handles_tally_goes_to_the_next_handle_with_its_count() {
        let stack = Stack::new();
        for round in 0..10 {
            let handle = stack.handle();
            handle.push(round);
            handle.push(round);
            assert_eq!(handle.pop(), Some(round));
            assert_eq!(stack.len(), round + 1);
        }
        // One handle at a time: one tally, reused.
        assert_eq!(tallies(&stack), 1);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let handle = stack.handle();
                    (0..1000).for_each(|i| handle.push(i));
                    // Each thread pushed its 1000 first, so at least 500 are there.
                    (0..500).for_each(|_| assert!(handle.pop().is_some()));
                });
            }
        });
        assert_eq!(stack.len(), 10 + 4 * 500);
        assert!(tallies(&stack) <= 4, "{} tallies", tallies(&stack));
    }
}

#[cfg(all(test, not(pitlane_loom)))]
mod seat_tests {
    use super::*;

    #[test]
    fn plain_calls_of_exited_threads_leave_their_count_and_nodes_to_the_next_holder_of_the_seat() {
        let stack = Stack::new();
        // 300 threads one after another (more than the seats, so seats are taken again), each
        // pushing 100 and popping 50 with plain calls.
        for t in 0..300_u64 {
            std::thread::scope(|s| {
                s.spawn(|| {
                    (0..100).for_each(|i| stack.push(t * 100 + i));
                    (0..50).for_each(|_| assert!(stack.pop().is_some()));
                });
            });
            assert_eq!(stack.len(), (t as usize + 1) * 50);
        }
        // Nodes came back through the stashes: fewer were ever made than the 30,000 pushes.
        // At most the 15,000 items left plus a full stash per seat (other tests' threads hold
        // seats too, so our threads need not all sit on the same one).
        let made = stack.fresh.load(Ordering::Relaxed);
        assert!(
            made <= 300 * 50 + SEATS * STASH_CAPACITY,
            "{made} nodes made"
        );
        assert!(made < 300 * 100, "{made} nodes made: none reused");
        let mut all: Vec<u64> = std::iter::from_fn(|| stack.pop()).collect();
        assert_eq!(all.len(), 300 * 50);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 300 * 50, "an item popped twice");
        assert_eq!(stack.len(), 0);
    }

    #[test]
    fn threads_pushing_and_popping_plainly_at_once_lose_and_duplicate_nothing() {
        const THREADS: u64 = 4;
        const EACH: u64 = 20_000;
        let stack = Stack::new();
        let popped: Vec<Vec<u64>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let stack = &stack;
                    s.spawn(move || {
                        let mut got = Vec::new();
                        for i in 0..EACH {
                            stack.push(t * EACH + i);
                            if i % 3 != 0 {
                                got.extend(stack.pop());
                            }
                        }
                        got
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut all: Vec<u64> = popped.into_iter().flatten().collect();
        assert_eq!(stack.len(), (THREADS * EACH) as usize - all.len());
        all.extend(std::iter::from_fn(|| stack.pop()));
        all.sort_unstable();
        assert_eq!(all, (0..THREADS * EACH).collect::<Vec<_>>());
    }

    #[test]
    fn a_thread_alternating_between_stacks_keeps_each_ones_items_and_counts() {
        // Every call misses the thread's one-entry cache (the other stack's call replaced it)
        // and goes through the seat's array: nothing may be mixed up between the stacks.
        let (a, b) = (Stack::new(), Stack::new());
        for i in 0..1_000_u64 {
            a.push(i);
            b.push(i + 10_000);
            if i % 3 == 0 {
                assert_eq!(a.pop(), Some(i));
                assert_eq!(b.try_pop(), Ok(i + 10_000));
            }
        }
        assert_eq!((a.len(), b.len()), (666, 666));
        let from_a: Vec<u64> = a.into_iter().collect();
        let from_b: Vec<u64> = b.into_iter().collect();
        assert_eq!(from_a.len(), 666);
        assert!(from_a.iter().all(|&x| x < 10_000), "{from_a:?}");
        assert!(from_b.iter().all(|&x| x >= 10_000), "{from_b:?}");
        // LIFO within each stack: the items left come out newest first.
        assert!(from_a.windows(2).all(|w| w[0] > w[1]));
        // A stack made after another was dropped (perhaps at its address) is a new stack to
        // the cache: the entry the dropped one left names an id no stack has any more.
        let first = Box::new(Stack::new());
        first.push(1_u64);
        drop(first);
        let second = Box::new(Stack::new());
        assert_eq!(second.pop(), None);
        second.push(2);
        assert_eq!((second.len(), second.pop()), (1, Some(2)));
    }

    #[test]
    fn a_call_after_the_thread_gave_its_seat_back_takes_the_shared_path() {
        static STACK: Stack<u64> = Stack::new();
        let late = seat::after_the_seat_is_given_back(
            || {
                // Takes a seat and keeps `STACK`'s cache for it in the one-entry cache.
                STACK.push(1);
                assert!(STACK.thread_cache().is_some());
                assert_eq!(STACK.pop(), Some(1));
            },
            || {
                // The seat is given back, and the thread's one-entry cache, which named
                // `STACK`, must not be used any more (the seat's next holder owns that stash).
                let seated = seat::current().is_some();
                let cached = STACK.thread_cache().is_some();
                STACK.push(7);
                (seated, cached, STACK.pop())
            },
        );
        assert_eq!(late, (false, false, Some(7)));
        assert_eq!(STACK.len(), 0);
    }

    #[test]
    fn a_moved_stack_keeps_its_seat_stashes_and_count() {
        let stack = Stack::new();
        (0..10).for_each(|i| stack.push(i));
        assert_eq!(stack.pop(), Some(9));
        let boxed = Box::new(stack);
        assert_eq!(boxed.len(), 9);
        boxed.push(10);
        assert_eq!(boxed.pop(), Some(10));
        let moved = *boxed;
        assert_eq!(moved.len(), 9);
        assert_eq!(moved.into_iter().count(), 9);
    }
}
