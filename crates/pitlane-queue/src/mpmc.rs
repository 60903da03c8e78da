//! An unbounded multi-producer multi-consumer FIFO queue in which threads claim cells with
//! fetch-and-add.
//!
//! The FAAArrayQueue of Pedro Ramalhete and Andreia Correia (2016, ConcurrencyFreaks), the
//! portable descendant of Morrison and Afek's LCRQ (PPoPP 2013) that the Bagpipes seed builds on
//! (`shared/seeds/bagpipes-scalable-concurrent-bags.txt`). Instead of racing on a tail with
//! compare-and-swap, each push takes a *ticket* with one `fetch_add`, which always succeeds,
//! and the ticket names the cell it fills. Cells live in fixed-size *segments* linked into a
//! list. Two changes to the published algorithm make a push publish with a plain store instead
//! of a compare-and-swap (see "The protocol"); they are this crate's own.
//!
//! ```
//! use pitlane_queue::mpmc::Queue;
//!
//! let queue = Queue::new();
//! std::thread::scope(|s| {
//!     s.spawn(|| (0..1000).for_each(|i| queue.push(i)));
//! });
//! let drained: Vec<i32> = std::iter::from_fn(|| queue.pop()).collect();
//! assert_eq!(drained, (0..1000).collect::<Vec<_>>());
//! ```
//!
//! # The protocol
//!
//! A segment holds `SEGMENT` cells ([`DEFAULT_SEGMENT`] = 1024 unless chosen otherwise), a push
//! ticket counter `enq`, a pop counter `deq`, a bitmap of *skipped* tickets, and a link to the
//! next segment. A cell is a value and a state word (see the `slot` module): *empty*, *full*,
//! *taken*, or the handle of a revocable value. Ticket `i` uses cell `i`, so a producer fills
//! a cache line with consecutive values and a consumer close behind it reads them a line at a
//! time.
//!
//! - **Push**: `i = tail.enq.fetch_add(1)`. If `i < SEGMENT`, write the value into cell `i`,
//!   store the state *full* (a plain release store), then read the skip bit of `i`. If it is
//!   clear, the push is done. If it is set, a pop gave up on this push (below): CAS the state
//!   *full → taken*; if that succeeds the value is ours again and the attempt lost a race, if
//!   it fails the pop took the value and the push is done. If `i ≥ SEGMENT` the segment is
//!   full: link a fresh segment whose first cell already holds the value (CAS on `next`), or
//!   help move `tail` to the successor that another push linked. A tracked (revocable) value
//!   instead links an empty segment and takes a ticket in it: its handle may only ever name a
//!   cell of a segment that is reclaimed through the epoch, and a segment whose link CAS
//!   failed is freed at once.
//! - **Pop**: read `i = head.deq` and the state of cell `i`. If it is *full*, CAS `deq` from
//!   `i` to `i + 1`; success makes the value ours (the state stays *full*: a cell whose ticket
//!   is below `deq` is consumed whatever its state says, and not writing it keeps the pop off
//!   the line the producer is filling). If the cell is *empty* and `i ≥ enq`, the queue is
//!   empty. If it is *empty* but a push holds ticket `i`, wait a moment for it; if it still has
//!   not published, *skip* it: claim `i` with the same CAS on `deq`, set the skip bit of `i`,
//!   then CAS the state *empty → taken* (the cell is *poisoned*, and the pusher will take its
//!   value back and retry), or, if the value arrived meanwhile, take it with a swap. A tracked
//!   or revoked value is claimed the same way and settled with a swap against the revoker. If
//!   `i = SEGMENT`, every cell of the segment has been handed out: move `tail` off it if
//!   needed, move `head` to the successor and retire the old segment.
//!
//! The plain store and the skip bit form a Dekker handshake: the pusher stores and then reads
//! the bit, the skipping pop sets the bit and then reads the state, and at least one of them
//! must see the other's write, or a pop could poison a cell whose pusher believes it has
//! published. The pop pays for both sides with a process-wide memory barrier (Linux's
//! `membarrier`), so the pusher needs no fence at all; see the `barrier` module. Should the
//! kernel refuse the barrier after it registered the process (a seccomp filter installed
//! later, say), the skipping pop does not poison the cell: it waits for the pusher, which
//! holds the ticket and is about to publish, and then settles with it by the same swap and
//! CAS, so nothing is lost and nothing panics; pops then wait out a preempted pusher. On systems
//! without that barrier, plain values are published with a CAS *empty → full* instead, as
//! tracked values always are, which fails if the cell was poisoned. Skips are rare: a pusher
//! is only a few instructions from its publish unless it was preempted there.
//!
//! Pops claim cells with a CAS on `deq` rather than a `fetch_add`, so that a pop never holds
//! a ticket before a value is there to take (the fetch-and-add form poisons a cell whenever a
//! pop overtakes its pusher, and every such race would cost the barrier). Every cell is used at
//! most once, and a state never returns to *empty*, so there is no ABA on cells.
//!
//! # When the try operations fail
//!
//! [`Queue::try_push`] returns [`PushError::Transient`] (the item inside) in exactly two
//! cases, both only while another operation runs beside it:
//!
//! 1. A pop gave up waiting for it and skipped its ticket, poisoning the cell before the value
//!    was published. A pop waits 32 spin hints for a pusher that holds a ticket but
//!    has not begun writing (a few instructions, unless it was preempted right there), and up
//!    to a millisecond for a pusher that is writing a value larger than 64 bytes (such values
//!    are *announced*: the cell is marked *writing* before the copy, so that a large copy into
//!    fresh pages is waited for instead of skipped). So a push fails this way only when its
//!    thread was descheduled between drawing its ticket and publishing.
//! 2. It found the tail segment full and another push linked the next segment before it.
//!
//! [`Queue::push`] retries both. `try_push` returns [`PushError::Full`] in one case: it needed a new
//! segment (the first push of the queue's life, or a push that found the tail segment full)
//! and none was in the queue's pool and the allocator refused the memory for one (a segment
//! is `SEGMENT` cells, each a state word plus a `T`, and a bitmap of a bit per cell). The
//! queue is unchanged then, and pushes succeed again once memory is available;
//! [`Queue::push`] panics instead of aborting the process. The pool that keeps retired
//! segments is made on first use where the allocator allows (without it, segments are freed
//! instead of kept); crossbeam-epoch's deferred functions and its record of each thread are
//! small allocations that abort on failure as std's collections do. An allocator that calls
//! into these queues from inside its own allocations (a `#[global_allocator]` keeping free
//! blocks in a `static` queue) must not do so from the allocations crossbeam-epoch makes when
//! its default collector is created, at the first pin of the process (a queue's first push
//! pins, as does any call on a thread without a seat or on a system without the process-wide
//! barrier): a queue call there waits for that same collector to be made, on the same thread,
//! and never returns. Past that first pin, calls from inside the allocator are served.
//!
//! After `fork`, the child's queues work, but if another thread of the parent was pinned to
//! crossbeam-epoch's default collector at the fork (it held a [`Handle`], which stays pinned
//! across its operations, or was inside a call on a thread without a seat, or in any other use
//! of that collector), its pin stays in the child's copy of the collector, whose epoch then
//! never advances: the child's queues keep every segment they retire, and the child's memory
//! grows with the segments its queues pass through (`tests/hostile_threads.rs`, ignored test).
//! The eras of the parent's vanished threads are forgotten in the child, but crossbeam-epoch
//! has no way to forget a participant. A child that runs queues for long should be forked
//! while no other thread holds a handle or is inside a queue call, or should `exec`.
//!
//! [`Queue::try_pop`] returns
//! [`PopError::Transient`] when another pop moved `deq` past the ticket it was about to claim,
//! or when it skipped a cell whose pusher had not published in time (or whose pusher took the
//! value back), and [`PopError::Empty`] when it found no pushed value that no pop has claimed.
//! Revoked cells are passed over without failing.
//!
//! # Linearization points
//!
//! Successful pushes and pops are ordered by the ticket of the cell they meet in (segment
//! number × `SEGMENT` + ticket): a push takes effect when it publishes (its store or CAS of the
//! state, or the CAS on `next` that links a segment holding the value in its first cell), at
//! the position its ticket gave it; a pop takes effect with the CAS that moves `deq` past a
//! published value. A pop that returns [`PopError::Empty`] takes effect at its last load (of
//! `enq`, or of `next` after it found the segment exhausted), which saw no unclaimed published
//! value. The counters and these loads are `SeqCst`.
//!
//! # Reclamation: eras for plain calls, the epoch for the rest
//!
//! A thread reads `head` or `tail` and then does its `fetch_add` or CAS *inside* the segment, so a
//! segment must stay allocated as long as any thread may still hold its address — even a
//! thread whose ticket turns out to be useless. Crossbeam's `SegQueue` avoids reclamation
//! schemes by claiming slots with a CAS on a combined index that validates the block before it
//! is touched; a fetch-and-add cannot validate first. Hazard pointers would cost a `SeqCst`
//! store and a re-read of the pointer on every operation. So a retired segment passes two
//! gates before it is used again:
//!
//! 1. **Limbo** (plain calls). A plain `push`, `pop` or `try_*` call of a thread with a seat
//!    announces the era it entered in with a plain store and clears it when it leaves (see the
//!    `era` module: the reclaimer pays with a `membarrier` and a read of every registered
//!    thread's word). A retired segment records the era of its retirement and waits on the
//!    queue's limbo list until no call is inside an older era. Once about a mebibyte of
//!    segments has been retired since the last attempt (62 of a `u64` queue's 16 KiB
//!    segments; at most 64 segments, and every segment of a mebibyte or more), the retiring
//!    thread tries to move segments on.
//!    Each attempt's barrier interrupts every other core that runs a thread of the process,
//!    so attempts are kept rare: at one every eight `u64` segments, two threads of push+pop
//!    pairs on a Bagpipe of four queues lost 2–30% of their throughput (three alternated
//!    windows) to the barriers on a two-core virtual machine (`docs/notes/limbo-barrier.md`).
//! 2. **Three grace periods of [crossbeam-epoch](https://docs.rs/crossbeam-epoch)** (pinned
//!    threads and revokers): handles, revocable pushes, revokers, `len`, and plain calls of
//!    threads without a seat (or in a process without `membarrier`, where limbo is skipped)
//!    pin the epoch. Revocation needs a segment to outlive three grace periods instead of one;
//!    the argument is in the [`revoke`] module. A queue takes the three only once it has seen
//!    a tracked push (a flag the first one sets before it draws a ticket); before that no
//!    handle can name one of its cells, and one period is enough. With threads preempted while
//!    pinned (more threads than cores), the epoch advances slowly, and the shorter chain
//!    roughly halves the segments a queue must allocate afresh meanwhile. Limbo comes first so that a plain pop that
//!    takes a tracked value has cleared the item's handle before the first grace period
//!    starts, as that argument needs.
//!
//! When the last grace period has passed, the segment goes back to a pool of the queue (a
//! mebibyte of segments at most, and between 2 and 64 of them: 62 for a `u64` queue's 16 KiB
//! segments; any more are freed), from which the next link takes it: reusing a segment costs
//! resetting its state words, not an allocation with fresh pages to fault in and zero.
//! Segments come back in bursts, as large as what limbo lets go at once, which a smaller
//! pool could not keep. A queue therefore holds its live segments, up to a mebibyte of spare
//! ones once it has gone through that many, and the retired ones still in limbo (about a
//! mebibyte) or in their grace periods. Plain calls do not drive the epoch (only pins collect, every
//! 128), so each retirement flushes its thread's deferred functions and advances the epoch
//! itself: one step, or six for segments of 256 KiB or more, which then come back within
//! about one retirement. A flush runs whatever deferred functions of the epoch's users have
//! expired, which is user code (any of them may reach a handle of the popping thread and
//! release it), so the pop that retires a segment reads no segment after that: its attempt
//! ends, and the next one is protected afresh. Such a function may panic (so may one run by
//! a pin's collection, which crossbeam-epoch makes at a thread's first pin and every 128th):
//! the panic unwinds out of the call, and the segments the retirement had not yet handed to
//! the epoch go back to limbo, no pool owner counted for them. crossbeam-epoch itself drops the
//! functions after the panicking one in its bag without running them; a segment whose chain
//! step was among them, and its queue's pool, are never freed.
//! Under `cfg(pitlane_loom)` retired segments are kept in limbo until the queue is dropped, and
//! every call pins a stand-in, so that loom checks the cell protocol and the segment hand-off
//! without the reclamation machinery, which loom cannot model (the era protocol is checked by
//! a unit test of its rule and by a stress test of one-cell segments, which ThreadSanitizer
//! also runs).
//!
//! # Choosing the segment size
//!
//! Each segment costs one allocation of `SEGMENT` cells (a cell is a `usize` state plus the
//! value: 16 bytes for a `usize`, so 16 KiB at the default size). Larger segments allocate less
//! often; smaller ones waste less memory in a mostly empty queue, which matters when many
//! queues sit side by side in a [`Bagpipe`](crate::bagpipe::Bagpipe). The FAAArrayQueue paper
//! uses 1024.
//!
//! # Coming from crossbeam
//!
//! `crossbeam_queue::SegQueue` becomes [`Queue`] with no other change: `new` (a `const fn`,
//! so a queue can be a `static`), `push`, `pop`, `push_mut`, `pop_mut`, `len`, `is_empty`,
//! `into_iter` (an owned drain), `Default`, `Send`/`Sync` and the unwind-safety traits keep
//! their names and behaviour, and the values left in a dropped queue are dropped oldest first,
//! as `SegQueue`'s. What is added: single attempts that may fail ([`Queue::try_push`],
//! [`Queue::try_pop`], above), a choice of segment size ([`Queue::with_segment_size`]),
//! per-thread handles ([`Queue::handle`]) and revocable pushes ([`RevocableBag`]). What
//! differs: `push` panics where the allocator refuses a segment (`SegQueue`'s aborts the
//! process), `Debug` shows the segment size and the length, and `into_iter`'s `size_hint` has
//! an upper bound.
//! `tests/differential_segqueue.rs` runs random scripts on a `SegQueue` and on queues of
//! several segment sizes side by side and compares every result and every drop, in order;
//! crossbeam's own `SegQueue` test file runs against this type in CI
//! (`.ci/crossbeam-conformance.py`).

use core::cell::{Cell, RefCell};
use core::fmt;
use core::marker::PhantomData;
use core::ptr;

use crossbeam_utils::CachePadded;
use pitlane_sync::shim::atomic::{AtomicPtr, AtomicUsize, Ordering};
#[cfg(not(pitlane_loom))]
use pitlane_sync::shim::hint::spin_loop;

use crate::barrier;
use crate::revoke::{self, Revocable, RevocableBag};
use crate::slot::{self, EMPTY, FULL, REVOKED, Slot, TAKEN, WRITING};
use crate::weak_bag::{BagHandle, IntoIter, PopError, PushError, WeakBag};

/// Cells per segment unless the type says otherwise.
///
/// ```
/// use pitlane_queue::mpmc::{DEFAULT_SEGMENT, Queue};
///
/// // The default queue and one that names the default size are the same type.
/// let queue: Queue<u8, DEFAULT_SEGMENT> = Queue::new();
/// queue.push(1);
/// assert_eq!(queue.pop(), Some(1));
/// ```
pub const DEFAULT_SEGMENT: usize = 1024;

/// How many times a pop re-reads an empty cell whose pusher has taken its ticket before it
/// skips the ticket. A pusher is between its ticket and its publish for a few instructions,
/// unless it was preempted, so a short wait saves the skip's process-wide barrier and the
/// pusher's retry. The wait is only an optimization; under loom there is no wait, because loom
/// schedules away from a thread that spins, which would hide the interleavings where the skip
/// and the publish race.
#[cfg(not(pitlane_loom))]
const PATIENCE: u32 = 32;

/// Values larger than this many bytes are *announced*: their pusher marks the cell
/// [`WRITING`] before it copies the value in, so that a pop waits for the copy (which for a
/// large value that touches fresh pages takes far longer than [`PATIENCE`]) instead of
/// skipping the ticket and making the push start over with a new ticket, a new copy and new
/// pages, again and again. One cache line of value is written as fast as the mark itself.
const ANNOUNCE_ABOVE: usize = 64;

/// How long a pop waits for the pusher of an announced value to finish writing it before
/// it gives up on it (the pusher was preempted halfway) and skips its ticket. Writing even
/// a 64 KiB value into fresh pages takes tens of microseconds.
#[cfg(not(pitlane_loom))]
const WRITER_PATIENCE: std::time::Duration = std::time::Duration::from_millis(1);

/// Epoch pinning, or nothing under loom (retired segments are then freed on drop).
#[cfg(not(pitlane_loom))]
mod reclaim {
    pub(super) use crossbeam_epoch::Guard;

    std::thread_local! {
        /// This thread's registration with crossbeam-epoch's default collector, the one every
        /// queue uses. Reaching it directly costs about half of what `crossbeam_epoch::pin`
        /// costs per call, which a plain `push` or `pop` pays once.
        static LOCAL: crossbeam_epoch::LocalHandle =
            crossbeam_epoch::default_collector().register();
    }

    /// Pins the calling thread to the default collector's epoch.
    #[inline]
    pub(super) fn pin() -> Guard {
        // A thread whose thread-locals are being torn down (a queue used from another
        // thread-local's destructor) pins through crossbeam's own fallback.
        LOCAL
            .try_with(crossbeam_epoch::LocalHandle::pin)
            .unwrap_or_else(|_| crossbeam_epoch::pin())
    }

    /// Runs a plain call's body `f` protected: inside an era where the thread has a seat and
    /// the process the barrier, else pinned (kept out of line, so that the fast path carries
    /// no guard to drop).
    #[inline(always)]
    pub(super) fn protected<R>(f: impl FnOnce() -> R) -> R {
        crate::era::within(f, pinned)
    }

    #[inline(never)]
    fn pinned<R>(f: impl FnOnce() -> R) -> R {
        let _guard = pin();
        f()
    }

    /// Whether the calling thread is pinned, through this module's registration or through
    /// crossbeam's own (for the unit tests' check that no pop reads a segment unprotected).
    #[cfg(test)]
    pub(super) fn is_pinned() -> bool {
        LOCAL
            .try_with(crossbeam_epoch::LocalHandle::is_pinned)
            .unwrap_or(false)
            || crossbeam_epoch::is_pinned()
    }
}

#[cfg(pitlane_loom)]
mod reclaim {
    /// Stands for an epoch guard; segments are not freed before the queue is dropped.
    pub(super) struct Guard;

    pub(super) fn pin() -> Guard {
        Guard
    }

    /// Under loom a plain call pins (a stand-in) like any other.
    pub(super) fn protected<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

use reclaim::{Guard, pin, protected};

/// An unbounded lock-free MPMC FIFO queue of `T`, with `SEGMENT` cells per segment.
///
/// See the [module documentation](self) for the algorithm and its guarantees. Dropping the
/// queue drops its values front to back; if one of those drops panics, the panic comes out of
/// the queue's drop and the values behind it, and the queue's segments, are leaked (as
/// crossbeam's `SegQueue` does).
///
/// ```
/// use pitlane_queue::mpmc::Queue;
///
/// // `const`: a queue can be a `static`, as a `SegQueue` can.
/// static JOBS: Queue<u32> = Queue::new();
/// std::thread::scope(|s| {
///     for t in 0..2 {
///         s.spawn(move || (0..100).for_each(|i| JOBS.push(t * 100 + i)));
///     }
/// });
/// assert_eq!(JOBS.len(), 200);
/// let mut all: Vec<u32> = std::iter::from_fn(|| JOBS.pop()).collect();
/// all.sort();
/// assert_eq!(all, (0..200).collect::<Vec<_>>());
/// ```
pub struct Queue<T, const SEGMENT: usize = DEFAULT_SEGMENT> {
    /// The segment pops take tickets from: `tail` or a predecessor of it; null until the first
    /// push.
    head: CachePadded<AtomicPtr<Segment<T, SEGMENT>>>,
    /// The segment pushes take tickets from: the last segment or the one before it (between
    /// the link of a new segment and the CAS that moves `tail`); null until the first push.
    tail: CachePadded<AtomicPtr<Segment<T, SEGMENT>>>,
    /// Retired segments waiting until no plain call can be inside them (see the `era`
    /// module), linked through `Link::retired_next`; under loom, every retired segment, kept
    /// until the queue is dropped.
    limbo: AtomicPtr<Segment<T, SEGMENT>>,
    /// Retirements since the queue last tried to move segments out of `limbo`.
    #[cfg(not(pitlane_loom))]
    limbo_len: AtomicUsize,
    /// Retired segments waiting to be used again, made on the first retirement; shared with
    /// the epoch's deferred functions, which may outlive the queue (see [`Pool`]).
    #[cfg(not(pitlane_loom))]
    pool: AtomicPtr<Pool<T, SEGMENT>>,
    /// Set (for good) by the first tracked push, before it draws a ticket: until then no
    /// handle can name a cell of this queue, so a retired segment needs one grace period of
    /// the epoch instead of three (see [`recycle_after_grace`](Self::recycle_after_grace)).
    #[cfg(not(pitlane_loom))]
    tracked: core::sync::atomic::AtomicBool,
    _owns: PhantomData<T>,
}

// SAFETY: the queue moves `T` values between threads (so `T: Send`) and never hands out
// references to them; all shared state is atomics and cells owned through the slot protocol.
unsafe impl<T: Send, const SEGMENT: usize> Send for Queue<T, SEGMENT> {}
// SAFETY: as above; `&Queue` only allows moving values in and out.
unsafe impl<T: Send, const SEGMENT: usize> Sync for Queue<T, SEGMENT> {}

/// A fixed array of cells with its two ticket counters.
struct Segment<T, const SEGMENT: usize> {
    /// The next pop ticket. Every ticket below it has been handed to a pop; once it reaches
    /// `SEGMENT`, every cell has been.
    deq: CachePadded<AtomicUsize>,
    /// The next push ticket. Every ticket below it has been handed to a push.
    enq: CachePadded<AtomicUsize>,
    /// The successor and this segment's number.
    link: CachePadded<Link<T, SEGMENT>>,
    /// The cells; cell `i` is met by push ticket `i` and pop ticket `i`.
    cells: [Slot<T>; SEGMENT],
}

struct Link<T, const SEGMENT: usize> {
    /// The next segment; null until a push that found this one full links one. Set once.
    next: AtomicPtr<Segment<T, SEGMENT>>,
    /// Position in the queue's history: the first segment is 0, its successor 1, and so on.
    number: usize,
    /// One bit per ticket, set by a pop that gave up waiting for the ticket's pusher (see
    /// [`Queue::skip`]); read by each plain push after it publishes. Written rarely, so it
    /// stays in every core's cache.
    skips: Box<[AtomicUsize]>,
    /// The next segment in the queue's limbo.
    retired_next: AtomicPtr<Segment<T, SEGMENT>>,
    /// The era it was retired in (see the `era` module): plain calls that entered in this era
    /// or later cannot reach it.
    #[cfg(not(pitlane_loom))]
    retired_era: core::sync::atomic::AtomicU64,
}

impl<T, const SEGMENT: usize> Segment<T, SEGMENT> {
    /// The cell of `ticket`, if the ticket falls inside the segment. Tickets use the cells in
    /// order, so a producer fills a cache line with consecutive values and a consumer that
    /// follows it close behind reads them a line at a time.
    #[inline]
    fn cell(&self, ticket: usize) -> Option<&Slot<T>> {
        self.cells.get(ticket)
    }

    /// A segment with no cell used, numbered `number`; `None` if the memory for it cannot be
    /// allocated (a push then reports the queue full rather than aborting the process).
    fn new(number: usize) -> Option<Box<Self>> {
        const { assert!(SEGMENT > 0, "a segment needs at least one cell") };
        let skips = Self::no_skips()?;
        #[cfg(not(pitlane_loom))]
        let mut segment = {
            let layout = std::alloc::Layout::new::<Self>();
            // SAFETY: `layout` has a non-zero size (at least the padded counters).
            let memory = unsafe { std::alloc::alloc(layout) }.cast::<Self>();
            if memory.is_null() {
                return None;
            }
            // Initialize the counters, the link and every cell's state word; the values stay
            // uninitialized (`MaybeUninit`), which spares writing the whole segment.
            // SAFETY: `memory` is valid for writes of a `Self`, each write below targets a
            // distinct field through a raw pointer (no reference to uninitialized memory is
            // made), and after the loop every field that is not `MaybeUninit` is initialized.
            unsafe {
                ptr::addr_of_mut!((*memory).deq).write(CachePadded::new(AtomicUsize::new(0)));
                ptr::addr_of_mut!((*memory).enq).write(CachePadded::new(AtomicUsize::new(0)));
                ptr::addr_of_mut!((*memory).link).write(CachePadded::new(Link {
                    next: AtomicPtr::new(ptr::null_mut()),
                    number: 0,
                    skips,
                    retired_next: AtomicPtr::new(ptr::null_mut()),
                    retired_era: core::sync::atomic::AtomicU64::new(0),
                }));
                let cells = ptr::addr_of_mut!((*memory).cells).cast::<Slot<T>>();
                for i in 0..SEGMENT {
                    Slot::init_state(cells.add(i));
                }
                Box::from_raw(memory)
            }
        };
        #[cfg(pitlane_loom)]
        let mut segment = Box::new(Self {
            deq: CachePadded::new(AtomicUsize::new(0)),
            enq: CachePadded::new(AtomicUsize::new(0)),
            link: CachePadded::new(Link {
                next: AtomicPtr::new(ptr::null_mut()),
                number: 0,
                skips,
                retired_next: AtomicPtr::new(ptr::null_mut()),
            }),
            cells: core::array::from_fn(|_| Slot::new()),
        });
        segment.link.number = number;
        Some(segment)
    }

    /// Moves `deq` from `ticket` to the next ticket, making `ticket` the caller's alone: the
    /// one way a pop takes a cell, whether it found a value or skips a stalled pusher.
    /// `false` if another pop moved `deq` first.
    #[inline]
    fn claim(&self, ticket: usize) -> bool {
        self.deq
            .compare_exchange(ticket, ticket + 1, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// A skip bitmap with no bit set: one bit per ticket; `None` if it cannot be allocated.
    fn no_skips() -> Option<Box<[AtomicUsize]>> {
        let words = SEGMENT.div_ceil(usize::BITS as usize);
        let mut skips = Vec::new();
        skips.try_reserve_exact(words).ok()?;
        skips.extend((0..words).map(|_| AtomicUsize::new(0)));
        Some(skips.into_boxed_slice())
    }

    /// The skip word of `ticket` and its bit there.
    #[inline]
    fn skip_bit(&self, ticket: usize) -> (&AtomicUsize, usize) {
        let bits = usize::BITS as usize;
        (&self.link.skips[ticket / bits], 1 << (ticket % bits))
    }

    /// Whether a pop gave up on `ticket`, as seen by its pusher right after its plain publish
    /// (the fast side of the handshake in the `barrier` module).
    #[inline]
    fn skipped(&self, ticket: usize) -> bool {
        let (word, bit) = self.skip_bit(ticket);
        barrier::fast_load(word) & bit != 0
    }

    /// Makes the empty segment `segment` (not shared yet) one whose first cell already holds
    /// the plain value `item`. Only plain values travel this way: a tracked item's handle must
    /// never name a cell of a segment that may be discarded without waiting for the epoch (see
    /// [`Queue::push_past_full`]).
    ///
    /// # Safety
    /// `segment` is an empty segment that no other thread can reach.
    unsafe fn put_first(segment: *mut Self, item: T) {
        // SAFETY: by the caller's contract, the segment is ours alone.
        let first = unsafe { (*segment).cell(0) }.expect("a segment has a cell");
        // SAFETY: nobody else can reach the cell.
        unsafe { first.write(item) };
        first.state.store(FULL, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { (*segment).enq.store(1, Ordering::Relaxed) };
    }

    /// Takes the item back out of a segment made by [`put_first`](Self::put_first) that was
    /// never shared, leaving it empty again.
    ///
    /// # Safety
    /// `segment` got its first value from `put_first` and no other thread ever saw it (no
    /// handle names it: it only ever held a plain value).
    unsafe fn take_first(segment: *mut Self) -> T {
        // SAFETY: by the caller's contract we own the whole segment.
        let segment = unsafe { &*segment };
        let first = segment.cell(0).expect("a segment has a cell");
        first.state.store(EMPTY, Ordering::Relaxed);
        segment.enq.store(0, Ordering::Relaxed);
        // SAFETY: `put_first` wrote the value and nobody took it.
        unsafe { first.read() }
    }

    /// Makes a retired segment, which holds no value and which no thread can reach any more,
    /// an empty segment numbered `number`: every counter, link, skip bit and cell state as
    /// [`new`](Self::new) makes them.
    #[cfg(not(pitlane_loom))]
    fn reset(&mut self, number: usize) {
        *self.deq.get_mut() = 0;
        *self.enq.get_mut() = 0;
        *self.link.next.get_mut() = ptr::null_mut();
        self.link.number = number;
        for word in self.link.skips.iter_mut() {
            *word.get_mut() = 0;
        }
        for cell in &mut self.cells {
            *cell.state.get_mut() = EMPTY;
        }
    }
}

/// How many segments of this size a mebibyte holds, kept within `least ..= most`.
#[cfg(not(pitlane_loom))]
const fn segments_in_a_mebibyte<T, const SEGMENT: usize>(least: usize, most: usize) -> usize {
    let fit = (1 << 20) / size_of::<Segment<T, SEGMENT>>();
    if fit < least {
        least
    } else if fit > most {
        most
    } else {
        fit
    }
}

/// The most retirements between two attempts to move segments out of limbo (see
/// [`Queue::LIMBO_BATCH`]).
#[cfg(not(pitlane_loom))]
const LIMBO_SEGMENTS: usize = 64;

/// How many retired segments a queue can keep for reuse; [`Pool::LIMIT`] says how many of
/// these places one queue uses. As many as limbo lets go at once at most, so that the pool
/// can keep a whole burst.
#[cfg(not(pitlane_loom))]
const POOL_SEGMENTS: usize = LIMBO_SEGMENTS;

/// Retired segments of one queue, kept for its next links once the epoch has let every thread
/// that could still reach them go: a new segment then costs no allocation, no page faults and
/// no zeroing, and a queue that cycles through segments holds a bounded number of them.
///
/// The epoch's deferred functions, which hand segments in, may run after the queue is
/// dropped, so the pool counts its owners: the queue, and every retired segment on its way.
/// The last owner to let go frees it with the segments it holds.
#[cfg(not(pitlane_loom))]
struct Pool<T, const SEGMENT: usize> {
    spare: [AtomicPtr<Segment<T, SEGMENT>>; POOL_SEGMENTS],
    owners: AtomicUsize,
}

#[cfg(not(pitlane_loom))]
impl<T, const SEGMENT: usize> Pool<T, SEGMENT> {
    /// The segments one queue keeps at most: a mebibyte's worth, at least two and at most
    /// [`POOL_SEGMENTS`]. Retired segments come back from the epoch in bursts (a collection
    /// runs every deferred function that has expired, and limbo lets up to
    /// [`Queue::LIMBO_BATCH`] go at once), so a pool much smaller than a burst frees most of
    /// it and the next links allocate again: with two places, two threads pushing and popping
    /// `u64`s allocated about 80% of their segments afresh; with 32 places and limbo letting
    /// 62 go at once, about 45%; with this limit, under 1%.
    const LIMIT: usize = segments_in_a_mebibyte::<T, SEGMENT>(2, POOL_SEGMENTS);

    /// A spare segment, if the pool holds one; the caller owns it alone.
    #[inline]
    fn take(&self) -> Option<*mut Segment<T, SEGMENT>> {
        self.spare[..Self::LIMIT].iter().find_map(|spare| {
            if spare.load(Ordering::Relaxed).is_null() {
                return None;
            }
            let segment = spare.swap(ptr::null_mut(), Ordering::Acquire);
            (!segment.is_null()).then_some(segment)
        })
    }

    /// Keeps `segment` for reuse, or frees it if the pool is full.
    ///
    /// # Safety
    /// `segment` came from `Box::into_raw`, holds no value, and no other thread can reach it.
    unsafe fn offer(&self, segment: *mut Segment<T, SEGMENT>) {
        for spare in &self.spare[..Self::LIMIT] {
            if spare
                .compare_exchange(
                    ptr::null_mut(),
                    segment,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return;
            }
        }
        // SAFETY: by the caller's contract; a segment without values needs no per-cell drop.
        drop(unsafe { Box::from_raw(segment) });
    }

    /// One owner lets go; the last one frees the pool and what it holds.
    ///
    /// # Safety
    /// `pool` came from `Box::into_raw`, and the caller is one of its counted owners, which
    /// does not use it after this call.
    unsafe fn release(pool: *mut Self) {
        // SAFETY: the caller still owns the pool, so it is alive.
        if unsafe { &*pool }.owners.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: the last owner: no other thread can reach the pool any more, and the
            // `AcqRel` decrement ordered every other owner's use of it before this.
            drop(unsafe { Box::from_raw(pool) });
        }
    }
}

#[cfg(not(pitlane_loom))]
impl<T, const SEGMENT: usize> Drop for Pool<T, SEGMENT> {
    fn drop(&mut self) {
        for spare in &mut self.spare {
            let segment = *spare.get_mut();
            if !segment.is_null() {
                // SAFETY: pooled segments hold no value and are owned by the pool alone.
                drop(unsafe { Box::from_raw(segment) });
            }
        }
    }
}

/// How a pop's slow path ended.
enum Slow<T> {
    /// A value, now ours.
    Taken(T),
    /// The queue held no published value that no pop had claimed.
    Empty,
    /// Nothing was taken: another pop claimed the ticket first, or we skipped a pusher that
    /// had not published (poisoning its cell, or losing the value to its taking it back).
    Lost,
    /// Nothing was taken; look at `deq` again.
    Again,
    /// The cell held a revoked value, now ours to drop; look at `deq` again once it is dropped
    /// (outside the call's protection: see [`Miss::Revoked`]).
    Revoked(T),
}

/// What [`Queue::advance_head`] did.
enum Advance {
    /// The segment has no successor: the queue is empty.
    Last,
    /// Another pop moved `head` on (and retires the segment).
    Moved,
    /// This call moved `head` on and retired the segment.
    Retired,
}

/// Why a protected pop attempt returned no item.
enum Miss<T> {
    /// What the public call reports.
    Error(PopError),
    /// It passed a revoked value, which is ours to drop. The caller drops it only after the
    /// attempt has left its protection (era, or the handle's pin), and then tries again: the
    /// value's `Drop` is user code, which may reach this very queue or handle (release the
    /// handle, or run operations through it) and must not do so in the middle of an
    /// operation that still reads segments.
    Revoked(T),
    /// It moved `head` off an exhausted segment and retired that segment, and took nothing.
    /// A retirement hands segments to the epoch and flushes the thread's deferred functions,
    /// which runs every expired function of every user of crossbeam-epoch's default collector
    /// (`Guard::defer` is a safe call): user code, which may reach this very handle and
    /// release it, dropping the pin the attempt stands on. So the attempt reads no segment
    /// after a retirement: it ends there, and the caller tries again under a protection of
    /// its own (the handle pins again if it was released).
    Retired,
}

impl<T> Miss<T> {
    /// Runs protected pop `attempt`s until one takes an item or fails, dropping each revoked
    /// value an attempt hands out in between, after its protection has ended, and starting
    /// again after an attempt that retired a segment.
    #[inline(always)]
    fn retry_past_revoked(mut attempt: impl FnMut() -> Result<T, Self>) -> Result<T, PopError> {
        loop {
            match attempt() {
                Ok(item) => return Ok(item),
                Err(Miss::Error(error)) => return Err(error),
                Err(Miss::Revoked(dead)) => drop(dead),
                Err(Miss::Retired) => {}
            }
        }
    }
}

impl<T> Queue<T> {
    /// An empty queue with [`DEFAULT_SEGMENT`] cells per segment. It allocates nothing until
    /// the first push, and can be a `static`:
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// static JOBS: Queue<u32> = Queue::new();
    ///
    /// JOBS.push(1);
    /// assert_eq!(JOBS.pop(), Some(1));
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn new() -> Self {
        Self::with_segment_size()
    }

    /// An empty queue with [`DEFAULT_SEGMENT`] cells per segment.
    #[cfg(pitlane_loom)]
    pub fn new() -> Self {
        Self::with_segment_size()
    }
}

impl<T, const SEGMENT: usize> Queue<T, SEGMENT> {
    /// An empty queue with the segment size its type names; it allocates nothing until the
    /// first push. A segment size of 0 is a compile-time error.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let small: Queue<u8, 64> = Queue::with_segment_size();
    /// small.push(1);
    /// assert_eq!(small.pop(), Some(1));
    /// ```
    #[cfg(not(pitlane_loom))]
    pub const fn with_segment_size() -> Self {
        const { assert!(SEGMENT > 0, "a segment needs at least one cell") };
        Self {
            head: CachePadded::new(AtomicPtr::new(ptr::null_mut())),
            tail: CachePadded::new(AtomicPtr::new(ptr::null_mut())),
            pool: AtomicPtr::new(ptr::null_mut()),
            tracked: core::sync::atomic::AtomicBool::new(false),
            limbo: AtomicPtr::new(ptr::null_mut()),
            limbo_len: AtomicUsize::new(0),
            _owns: PhantomData,
        }
    }

    /// An empty queue with the segment size its type names.
    #[cfg(pitlane_loom)]
    pub fn with_segment_size() -> Self {
        Self {
            head: CachePadded::new(AtomicPtr::new(ptr::null_mut())),
            tail: CachePadded::new(AtomicPtr::new(ptr::null_mut())),
            limbo: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// The first push of the queue's life found no segment: make segment 0 (or help the push
    /// that is making it) and return it; `None` if there is no memory for it. Also decides,
    /// once per process, how plain values are published (see the `barrier` module).
    #[cold]
    #[inline(never)]
    fn first_segment(&self) -> Option<*mut Segment<T, SEGMENT>> {
        barrier::init();
        let mut first = self.head.load(Ordering::Acquire);
        if first.is_null() {
            let fresh = Box::into_raw(Segment::new(0)?);
            first = match self.head.compare_exchange(
                ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => fresh,
                Err(installed) => {
                    // SAFETY: the CAS failed, so no other thread ever saw `fresh`.
                    drop(unsafe { Box::from_raw(fresh) });
                    installed
                }
            };
        }
        // `tail` is null until it names segment 0 (it is set only here while null); from then
        // on it never goes back.
        Some(
            match self.tail.compare_exchange(
                ptr::null_mut(),
                first,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => first,
                Err(tail) => tail,
            },
        )
    }

    /// One attempt to append `item`. Fails, handing the item back, with
    /// [`PushError::Transient`] when it lost a race (a pop tired of waiting for it skipped its
    /// ticket and poisoned the cell, or another push linked the next segment first), and with
    /// [`PushError::Full`] when it needed a new segment and there was no memory for one (see
    /// the [module documentation](self#when-the-try-operations-fail)).
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// assert!(queue.try_push("alone, so no race to lose").is_ok());
    /// ```
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        protected(|| self.try_push_tagged(item, FULL))
    }

    /// Appends `item`, retrying lost races.
    ///
    /// # Panics
    /// If the queue needs a new segment and the allocator refuses the memory for it (where
    /// `Vec::push` would abort the process); [`try_push`](Self::try_push) hands the item back
    /// inside [`PushError::Full`] instead.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// queue.push('a');
    /// queue.push('b');
    /// assert_eq!(queue.pop(), Some('a'));
    /// ```
    #[inline]
    pub fn push(&self, item: T) {
        WeakBag::push(self, item)
    }

    /// One attempt to take the oldest item: `Err(PopError::Empty)` if the queue has none,
    /// `Err(PopError::Transient)` if another pop claimed the oldest first, or if the push that
    /// holds the oldest ticket had not published after a short wait (the pop then skips that
    /// ticket, and the push retries with a new one).
    ///
    /// ```
    /// use pitlane_queue::{PopError, mpmc::Queue};
    ///
    /// let queue = Queue::new();
    /// assert_eq!(queue.try_pop(), Err(PopError::Empty));
    /// queue.push(7);
    /// assert_eq!(queue.try_pop(), Ok(7));
    /// ```
    #[inline]
    pub fn try_pop(&self) -> Result<T, PopError> {
        Miss::retry_past_revoked(|| protected(|| self.try_pop_protected()))
    }

    /// One attempt of [`try_pop`](Self::try_pop) for a thread that is protected (pinned, or
    /// inside an era) for the whole call. It runs no user code while it reads segments: a
    /// revoked value it passes is handed out to be dropped after the protection ends
    /// ([`Miss::Revoked`]), and a retirement, which runs expired deferred functions of the
    /// epoch's other users, ends the attempt ([`Miss::Retired`]).
    #[inline]
    fn try_pop_protected(&self) -> Result<T, Miss<T>> {
        loop {
            // The unit tests check the rule every load of `head` below rests on.
            #[cfg(all(test, not(pitlane_loom)))]
            assert!(
                reclaim::is_pinned() || crate::era::is_inside(),
                "a pop reads the queue's segments neither pinned nor inside an era"
            );
            let segment_ptr = self.head.load(Ordering::Acquire);
            if segment_ptr.is_null() {
                // Nothing was ever pushed (a push makes segment 0 before it takes a ticket).
                return Err(Miss::Error(PopError::Empty));
            }
            // SAFETY: the segment `head` named is not recycled while we are protected.
            let segment = unsafe { &*segment_ptr };
            let ticket = segment.deq.load(Ordering::SeqCst);
            let Some(cell) = segment.cell(ticket) else {
                match self.advance_head(segment_ptr) {
                    Advance::Moved => continue,
                    // No segment may be read after the retirement ran user code.
                    Advance::Retired => return Err(Miss::Retired),
                    Advance::Last => return Err(Miss::Error(PopError::Empty)),
                }
            };
            let state = cell.state.load(Ordering::Acquire);
            if state == FULL {
                // A published plain value: whoever moves `deq` past its ticket owns it. The
                // state stays `FULL` (no write to the line the pushers fill): a cell whose
                // ticket is below `deq` is consumed whatever its state says.
                if !segment.claim(ticket) {
                    return Err(Miss::Error(PopError::Transient));
                }
                // SAFETY: the state was `FULL` (Acquire: the value is visible), and moving `deq`
                // from `ticket` made the ticket ours alone: its pusher only takes a value back
                // from a cell whose ticket a pop skipped, and skipping needs the same move.
                return Ok(unsafe { cell.read() });
            }
            match Self::pop_slow(segment, ticket, cell, state) {
                Slow::Taken(item) => return Ok(item),
                Slow::Empty => return Err(Miss::Error(PopError::Empty)),
                Slow::Lost => return Err(Miss::Error(PopError::Transient)),
                Slow::Again => continue,
                Slow::Revoked(dead) => return Err(Miss::Revoked(dead)),
            }
        }
    }

    /// The cell of `ticket`, the next to pop as far as we saw, did not hold a published plain
    /// value. Not `#[cold]`: a poll of an empty queue comes here every time; it is only kept
    /// out of line so that the fast path stays small.
    #[inline(never)]
    fn pop_slow(
        segment: &Segment<T, SEGMENT>,
        ticket: usize,
        cell: &Slot<T>,
        state: usize,
    ) -> Slow<T> {
        if state == EMPTY {
            // No value yet. If no push holds the ticket either, the queue is empty.
            if ticket >= segment.enq.load(Ordering::SeqCst) {
                return Slow::Empty;
            }
            // A push holds the ticket: it is a few instructions from publishing, unless it was
            // preempted. Wait a moment before giving up on it.
            #[cfg(not(pitlane_loom))]
            for _ in 0..PATIENCE {
                spin_loop();
                if cell.state.load(Ordering::Relaxed) != EMPTY {
                    return Slow::Again;
                }
            }
            return Self::skip(segment, ticket, cell);
        }
        if state == WRITING {
            return Self::await_writer(segment, ticket, cell);
        }
        if state == TAKEN {
            // Consumed: `deq` had moved on since we read it.
            return Slow::Again;
        }
        // A tracked or revoked value: claim the ticket, then race any revoker for the cell.
        if !segment.claim(ticket) {
            return Slow::Lost;
        }
        Self::settle(cell)
    }

    /// The pusher of `ticket` is writing a large value into its cell: wait for it, up to
    /// [`WRITER_PATIENCE`], and skip it only if it does not finish (it was preempted).
    #[cold]
    #[inline(never)]
    fn await_writer(segment: &Segment<T, SEGMENT>, ticket: usize, cell: &Slot<T>) -> Slow<T> {
        #[cfg(not(pitlane_loom))]
        {
            const SPINS_BETWEEN_CLOCK_READS: u32 = 64;
            let started = std::time::Instant::now();
            loop {
                for _ in 0..SPINS_BETWEEN_CLOCK_READS {
                    spin_loop();
                    if cell.state.load(Ordering::Relaxed) != WRITING {
                        return Slow::Again;
                    }
                }
                if started.elapsed() > WRITER_PATIENCE {
                    break;
                }
            }
        }
        Self::skip(segment, ticket, cell)
    }

    /// Gives up on the pusher of `ticket`, which has not published: claims the ticket, marks it
    /// skipped (the slow side of the handshake in the `barrier` module), and then either
    /// poisons the still-empty cell, or takes the value that arrived meanwhile.
    #[cold]
    fn skip(segment: &Segment<T, SEGMENT>, ticket: usize, cell: &Slot<T>) -> Slow<T> {
        if !segment.claim(ticket) {
            return Slow::Lost;
        }
        let (word, bit) = segment.skip_bit(ticket);
        if !barrier::mark(word, bit) {
            return Self::await_publish(cell);
        }
        let mut seen = EMPTY;
        loop {
            match cell
                .state
                .compare_exchange(seen, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            {
                // Poisoned. If its pusher publishes after all, the handshake makes it see the
                // mark and take its value back.
                Ok(_) => return Slow::Lost,
                // The pusher began writing (or finished announcing) meanwhile: still no value.
                Err(now) if now == EMPTY || now == WRITING => seen = now,
                Err(_) => return Self::settle(cell),
            }
        }
    }

    /// The kernel refused the barrier after we had claimed a ticket and marked it skipped, so
    /// poisoning the cell could lose a value whose pusher stored it and read the mark before it
    /// was set. Wait for the pusher instead (it holds the ticket, so it will publish), then
    /// settle with it as after any skip: it takes its value back if it saw the mark, else the
    /// value is ours. Pops then wait for a preempted pusher, as `SegQueue`'s do; this happens
    /// only in a process whose rules changed after the barrier was registered.
    #[cold]
    #[inline(never)]
    fn await_publish(cell: &Slot<T>) -> Slow<T> {
        const SPINS_BEFORE_YIELD: u32 = 64;
        let mut spins = 0_u32;
        while matches!(cell.state.load(Ordering::Acquire), EMPTY | WRITING) {
            spins = spins.wrapping_add(1);
            if spins % SPINS_BEFORE_YIELD == 0 {
                pitlane_sync::shim::thread::yield_now();
            } else {
                pitlane_sync::shim::hint::spin_loop();
            }
        }
        Self::settle(cell)
    }

    /// Takes the value of a cell whose ticket is ours and whose state is not `EMPTY`, with
    /// one swap: against a revoker for a tracked value, against the pusher taking its value
    /// back for a plain one whose ticket we skipped.
    fn settle(cell: &Slot<T>) -> Slow<T> {
        let state = cell.state.swap(TAKEN, Ordering::AcqRel);
        match state {
            // The pusher saw our skip mark and took its value back first.
            TAKEN => Slow::Lost,
            // SAFETY: a revoked cell still holds its value, and our swap made it ours; the
            // handle is not touched (the revoker cleared it).
            REVOKED => Slow::Revoked(unsafe { cell.read() }),
            _ => {
                debug_assert!(state == FULL || slot::is_tracked(state), "state {state}");
                // SAFETY: we moved the state out of a full state, so the value is ours, and the
                // Acquire half of the swap made the pusher's write visible.
                let item = unsafe { cell.read() };
                // SAFETY: we own `item`, whose handle `state` names if it is tracked.
                unsafe { cell.untrack(state) };
                Slow::Taken(item)
            }
        }
    }

    /// Takes the oldest item, retrying lost races; `None` if the queue is empty.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue: Queue<String> = Queue::new();
    /// assert_eq!(queue.pop(), None);
    /// ```
    #[inline]
    pub fn pop(&self) -> Option<T> {
        WeakBag::pop(self)
    }

    /// [`push`](Self::push) through an exclusive reference, as `SegQueue::push_mut`: the same
    /// operation (no other thread can race it, so it never retries), for code written against
    /// crossbeam's API.
    ///
    /// # Panics
    /// As [`push`](Self::push): if the queue needs a new segment and the allocator refuses the
    /// memory for it.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let mut queue = Queue::new();
    /// queue.push_mut(1);
    /// assert_eq!(queue.pop_mut(), Some(1));
    /// ```
    #[inline]
    pub fn push_mut(&mut self, item: T) {
        self.push(item);
    }

    /// [`pop`](Self::pop) through an exclusive reference, as `SegQueue::pop_mut`.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let mut queue: Queue<u8> = Queue::new();
    /// assert_eq!(queue.pop_mut(), None);
    /// ```
    #[inline]
    pub fn pop_mut(&mut self) -> Option<T> {
        self.pop()
    }

    /// How many items the queue holds: a snapshot, exact when no operation is in flight (like
    /// `SegQueue::len`); a push that has taken its ticket but not yet published counts, as
    /// does one a pop is about to skip. A revoked item (see [`RevocableBag::revoke`]) counts
    /// until a pop passes over its cell: `revoke` does not know the queue.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue: Queue<u32, 4> = Queue::with_segment_size();
    /// assert_eq!(queue.len(), 0);
    /// (0..10).for_each(|i| queue.push(i));
    /// queue.pop();
    /// assert_eq!(queue.len(), 9);
    /// ```
    pub fn len(&self) -> usize {
        let _guard = pin();
        let head_ptr = self.head.load(Ordering::Acquire);
        let tail_ptr = self.tail.load(Ordering::Acquire);
        if head_ptr.is_null() || tail_ptr.is_null() {
            return 0;
        }
        // SAFETY: neither pointer is null, and we are pinned.
        let (head, tail) = unsafe { (&*head_ptr, &*tail_ptr) };
        let popped = head.link.number * SEGMENT + head.deq.load(Ordering::Relaxed).min(SEGMENT);
        let pushed = tail.link.number * SEGMENT + tail.enq.load(Ordering::Relaxed).min(SEGMENT);
        pushed.saturating_sub(popped)
    }

    /// Whether the queue holds no item: a snapshot, like [`len`](Self::len).
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// assert!(queue.is_empty());
    /// queue.push(());
    /// assert!(!queue.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A handle for the calling thread: the queue's operations with the thread pinned (to the
    /// epoch that guards retired segments) by the handle, which renews the pin every 256
    /// operations, so that no operation pays for a pin of its own. Plain calls are about as
    /// cheap where the thread has a seat and the process `membarrier` (they announce an era
    /// instead of pinning; see the module documentation); a handle is the way to the same
    /// speed elsewhere. Drop it, or call [`BagHandle::release`], when the thread stops using
    /// the queue for a while: while a pin is held, memory retired by any thread since cannot
    /// be reclaimed. A handle leaked (`mem::forget`) holds its pin for the life of the
    /// process: nothing breaks, but from then on nothing retired through crossbeam-epoch's
    /// default collector is freed (no queue's segments, nor any other user's of that epoch).
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// let handle = queue.handle();
    /// handle.push(1);
    /// assert_eq!(handle.pop(), Some(1));
    /// assert_eq!(handle.pop(), None);
    /// ```
    pub fn handle(&self) -> Handle<'_, T, SEGMENT> {
        Handle {
            queue: self,
            guard: RefCell::new(None),
            operations: Cell::new(0),
        }
    }

    /// The push of `item` with `tag` (`FULL`, or its handle's tag, which the cell's state then
    /// carries with the push's mark), for a thread that is protected (pinned, or inside an era)
    /// for the whole call.
    #[inline]
    fn try_push_tagged(&self, item: T, tag: usize) -> Result<(), PushError<T>> {
        let segment_ptr = self.tail.load(Ordering::Acquire);
        if segment_ptr.is_null() {
            return self.push_first(item, tag);
        }
        // SAFETY: `tail` is not null, and we are protected.
        let segment = unsafe { &*segment_ptr };
        let ticket = segment.enq.fetch_add(1, Ordering::SeqCst);
        match segment.cell(ticket) {
            Some(cell) if Self::announce(cell, tag) => {
                Self::publish(segment, ticket, cell, item, tag).map_err(PushError::Transient)
            }
            Some(_) => Err(PushError::Transient(item)),
            None => self.push_past_full(segment_ptr, item, tag),
        }
    }

    /// The first push of the queue's life: make segment 0 (or find the one another push made),
    /// then push as any push does; [`PushError::Full`] if there is no memory for it.
    ///
    /// The push pins for itself first: segment 0 is allocated, and the allocator is user code,
    /// which may run other code of the user's (an allocator built on these queues retires
    /// segments, and a retirement runs expired deferred functions of the epoch's users) that
    /// reaches the caller's handle and releases it; the rest of the push reads segment 0.
    #[cold]
    #[inline(never)]
    fn push_first(&self, item: T, tag: usize) -> Result<(), PushError<T>> {
        let _pinned = pin();
        if self.first_segment().is_none() {
            return Err(PushError::Full(item));
        }
        // `tail` is not null now: this does not come back here.
        self.try_push_tagged(item, tag)
    }

    /// Whether pushes of `T` announce their write (see [`ANNOUNCE_ABOVE`]).
    const ANNOUNCED: bool = size_of::<T>() > ANNOUNCE_ABOVE;

    /// Right after drawing the ticket of `cell`, before the value is moved anywhere: marks the
    /// cell [`WRITING`] if `T` is announced. `false` if a pop poisoned the cell first (only
    /// possible where the mark is a CAS); nothing has been written then.
    #[inline(always)]
    fn announce(cell: &Slot<T>, tag: usize) -> bool {
        if !Self::ANNOUNCED {
            return true;
        }
        if tag == FULL && barrier::asymmetric() {
            // A pop that skips us meanwhile poisons the cell from `WRITING` as from `EMPTY`,
            // and the store of `FULL` in `publish` lands on its poison: the handshake then
            // shows us the skip mark, exactly as without the announcement.
            barrier::plain_store(&cell.state, WRITING);
            return true;
        }
        // Release: a pop that reads `WRITING` and then skips the ticket is ordered after our
        // ticket, and after the tracked flag a tracked push set before it (see
        // `recycle_after_grace`). On x86 the instruction is the same.
        cell.state
            .compare_exchange(EMPTY, WRITING, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Writes `item` into the cell of our `ticket`, which [`announce`](Self::announce) marked
    /// if `T` is announced, and publishes it: a plain value with a plain store where the process-wide barrier is available (then a pop that gave up on us
    /// is seen right after), anything else with a CAS that fails if a pop poisoned the cell.
    #[inline]
    fn publish(
        segment: &Segment<T, SEGMENT>,
        ticket: usize,
        cell: &Slot<T>,
        item: T,
        tag: usize,
    ) -> Result<(), T> {
        if tag == FULL && barrier::asymmetric() {
            // SAFETY: our push ticket is the only one for this cell, so nobody else writes or
            // reads the value until the state says it is full.
            unsafe { cell.write(item) };
            barrier::plain_store(&cell.state, FULL);
            if segment.skipped(ticket) {
                return Self::reclaim(cell);
            }
            return Ok(());
        }
        let from = if Self::ANNOUNCED { WRITING } else { EMPTY };
        // SAFETY: as above: the ticket makes the cell ours until we publish.
        unsafe { cell.write(item) };
        // SAFETY: `tag` is `FULL` or the handle of the item we just wrote, alive while it is.
        let state = unsafe { cell.track(tag) };
        match cell
            .state
            .compare_exchange(from, state, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            Err(_) => Err(Self::unpublish(cell, state)),
        }
    }

    /// A pop skipped our ticket while we published with a plain store: either it took the
    /// value (its swap got there first) or it poisoned the cell before our store, and then
    /// the value is ours to take back.
    #[cold]
    fn reclaim(cell: &Slot<T>) -> Result<(), T> {
        match cell
            .state
            .compare_exchange(FULL, TAKEN, Ordering::Acquire, Ordering::Relaxed)
        {
            // SAFETY: the pop that skipped us never touches a value it did not swap out, and
            // our CAS left none to take: the value we wrote is ours again.
            Ok(_) => Err(unsafe { cell.read() }),
            Err(_) => Ok(()),
        }
    }

    /// The publishing CAS of `state` failed: a pop poisoned the cell. Take the value back.
    #[cold]
    fn unpublish(cell: &Slot<T>, state: usize) -> T {
        // SAFETY: the pop that poisoned the cell never touches the value; we wrote it and still
        // own it.
        let item = unsafe { cell.read() };
        // SAFETY: `item` is alive, so is its handle; `state` is what `track` returned.
        unsafe { cell.untrack(state) };
        item
    }

    /// Our ticket fell past the end of the tail segment: link a new segment holding `item`, or
    /// move to the one another push linked and take a ticket there. [`PushError::Full`] if
    /// a new segment was needed and there is no memory for one.
    #[cold]
    fn push_past_full(
        &self,
        mut segment_ptr: *mut Segment<T, SEGMENT>,
        item: T,
        tag: usize,
    ) -> Result<(), PushError<T>> {
        // Pinned for ourselves: a new segment is allocated (or a lost one given to the pool,
        // which is allocated on first use), and the allocator is user code, which may reach the
        // caller's handle and release its pin (see `push_first`), while we go on to link the
        // segment into `segment_ptr`, read before.
        let _pinned = pin();
        loop {
            // SAFETY: `segment_ptr` was read from `tail` while protected.
            let segment = unsafe { &*segment_ptr };
            let mut next = segment.link.next.load(Ordering::Acquire);
            if next.is_null() {
                if tag == FULL {
                    return self.link_with_first(segment_ptr, item);
                }
                // A tracked item. Its handle may only name a cell that is reclaimed through the
                // epoch: were it to name the first cell of a fresh segment before the link CAS,
                // a revoker could mark that cell, and a lost link would free the segment under
                // the revoker and hand back an item the revoker believes it took. So link an
                // empty segment and take a ticket in it like any push.
                let Some(fresh) = self.fresh_segment(segment.link.number + 1) else {
                    return Err(PushError::Full(item));
                };
                next = match segment.link.next.compare_exchange(
                    ptr::null_mut(),
                    fresh,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => fresh,
                    Err(linked) => {
                        // SAFETY: the CAS failed, so no other thread ever saw `fresh`, and no
                        // handle names one of its cells.
                        unsafe { self.discard(fresh) };
                        linked
                    }
                };
            }
            // Help move `tail` to the successor, then take a ticket wherever `tail` now is.
            let _ =
                self.tail
                    .compare_exchange(segment_ptr, next, Ordering::AcqRel, Ordering::Relaxed);
            segment_ptr = self.tail.load(Ordering::Acquire);
            // SAFETY: as above.
            let segment = unsafe { &*segment_ptr };
            let ticket = segment.enq.fetch_add(1, Ordering::SeqCst);
            if let Some(cell) = segment.cell(ticket) {
                if !Self::announce(cell, tag) {
                    return Err(PushError::Transient(item));
                }
                return Self::publish(segment, ticket, cell, item, tag)
                    .map_err(PushError::Transient);
            }
        }
    }

    /// The tail segment `segment_ptr` is full and has no successor: link a fresh segment whose
    /// first cell holds the plain value `item`, or hand `item` back if another push linked one
    /// first ([`PushError::Transient`]) or there is no memory for a segment
    /// ([`PushError::Full`]).
    #[cold]
    fn link_with_first(
        &self,
        segment_ptr: *mut Segment<T, SEGMENT>,
        item: T,
    ) -> Result<(), PushError<T>> {
        // SAFETY: `segment_ptr` was read from `tail` while protected.
        let segment = unsafe { &*segment_ptr };
        let Some(fresh) = self.fresh_segment(segment.link.number + 1) else {
            return Err(PushError::Full(item));
        };
        // SAFETY: a fresh segment is empty and ours alone.
        unsafe { Segment::put_first(fresh, item) };
        match segment.link.next.compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                let _ = self.tail.compare_exchange(
                    segment_ptr,
                    fresh,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
                Ok(())
            }
            Err(linked) => {
                // Another push linked a segment first; help it along and report the lost race.
                let _ = self.tail.compare_exchange(
                    segment_ptr,
                    linked,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
                // SAFETY: the CAS failed, so nobody else ever saw `fresh`.
                let item = unsafe { Segment::take_first(fresh) };
                // SAFETY: as above, and `take_first` left it empty.
                unsafe { self.discard(fresh) };
                Err(PushError::Transient(item))
            }
        }
    }

    /// Every cell of the head segment has been handed to a pop. Move `head` to the successor
    /// and retire the old segment if this call moved it (which may run user code: see
    /// [`Miss::Retired`]); [`Advance::Last`] if there is no successor (the queue is empty).
    #[cold]
    fn advance_head(&self, segment_ptr: *mut Segment<T, SEGMENT>) -> Advance {
        // SAFETY: read from `head` while protected.
        let segment = unsafe { &*segment_ptr };
        let next = segment.link.next.load(Ordering::SeqCst);
        if next.is_null() {
            return Advance::Last;
        }
        // A retired segment must be unreachable, so `tail` may not stay on it.
        let _ = self
            .tail
            .compare_exchange(segment_ptr, next, Ordering::AcqRel, Ordering::Relaxed);
        if self
            .head
            .compare_exchange(segment_ptr, next, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: neither `head` nor `tail` names the segment any more, and only the thread
            // whose CAS moved `head` off it retires it.
            unsafe { self.retire(segment_ptr) };
            return Advance::Retired;
        }
        Advance::Moved
    }

    /// Recycles an unlinked segment once no thread can touch it: first the plain calls that
    /// may be inside it must have left (the segment waits in `limbo` for that), then the
    /// epoch's grace periods must pass for pinned threads and revokers.
    ///
    /// # Safety
    /// `segment` is reachable from neither `head` nor `tail`, and is retired once.
    #[cfg(not(pitlane_loom))]
    unsafe fn retire(&self, segment: *mut Segment<T, SEGMENT>) {
        if !barrier::asymmetric() {
            // No plain call is ever inside an era in this process: they all pin.
            // SAFETY: forwarded from the caller.
            unsafe { self.recycle_after_grace(segment) };
            return;
        }
        // SAFETY: the segment is still allocated (calls may still be reading it, through shared
        // references, so only its atomics are written); the push below publishes the era.
        unsafe { &(*segment).link }
            .retired_era
            .store(crate::era::retire(), Ordering::Relaxed);
        self.push_limbo(segment);
        if self.limbo_len.fetch_add(1, Ordering::Relaxed) + 1 >= Self::LIMBO_BATCH {
            self.limbo_len.store(0, Ordering::Relaxed);
            self.leave_limbo();
        }
    }

    /// Retirements between two attempts to move segments out of limbo, each of which costs a
    /// process-wide barrier: a mebibyte's worth of segments (at most [`LIMBO_SEGMENTS`], and
    /// one segment however large), so that limbo holds about a mebibyte between attempts. A
    /// barrier interrupts every other core running a thread of the process (an
    /// inter-processor interrupt, costly on a virtual machine), so fewer attempts are worth
    /// that memory: see `docs/notes/limbo-barrier.md`.
    #[cfg(not(pitlane_loom))]
    const LIMBO_BATCH: usize = segments_in_a_mebibyte::<T, SEGMENT>(1, LIMBO_SEGMENTS);

    /// Starts the grace periods of every segment in limbo that no plain call can be inside
    /// any more; the others go back to wait for the next attempt. Nothing moves if the
    /// process-wide barrier was refused (see the `barrier` module).
    #[cfg(not(pitlane_loom))]
    #[cold]
    fn leave_limbo(&self) {
        let Some(oldest) = crate::era::oldest_inside() else {
            return;
        };
        // Each hand-off runs user code that may panic (see `recycle_after_grace`): what is
        // still detached then goes back to limbo as the panic unwinds.
        let mut detached = Detached {
            queue: self,
            list: self.limbo.swap(ptr::null_mut(), Ordering::Acquire),
        };
        while let Some(at) = detached.pop() {
            // SAFETY: `pop` handed the segment, allocated, to us alone.
            let era = unsafe { &(*at).link }.retired_era.load(Ordering::Relaxed);
            if era <= oldest {
                // SAFETY: retired once, unreachable, and no plain call is inside it any more.
                unsafe { self.recycle_after_grace(at) };
            } else {
                self.push_limbo(at);
            }
        }
    }

    /// Hands an unlinked segment that no plain call can be inside to the grace periods of the
    /// epoch: one for pinned threads that may hold it, and, once the queue has seen a tracked
    /// push, two more for revokers that may hold a stale cell address (see `revoke`); then it
    /// goes to the pool.
    ///
    /// One period is enough while [`tracked`](Self::tracked) is clear. Only a push that drew
    /// the ticket of a cell of `segment` can write that cell's address into a handle, and a
    /// tracked push sets the flag before it draws a ticket. The segment is retired after
    /// `deq` passed every ticket, and each ticket was passed by the compare-and-swap of a pop
    /// that had first read, with `Acquire`, something its push wrote after drawing it: `enq`
    /// past the ticket (the `fetch_add` itself, or a later one of its release sequence), the
    /// published state (a `Release` CAS), `REVOKED` (written by a revoker that had read the
    /// published state) or `WRITING` (a `Release` CAS in [`announce`](Self::announce)). So
    /// the flag's store happens before the claim, the claims on `deq` happen before the load
    /// of `deq` that found the segment exhausted, and that happens before this load, which
    /// therefore sees the flag. Where no handle can name a cell of a queue, no revoker can
    /// touch one.
    ///
    /// # Safety
    /// `segment` is unlinked, retired once, and no plain call is inside it.
    #[cfg(not(pitlane_loom))]
    unsafe fn recycle_after_grace(&self, segment: *mut Segment<T, SEGMENT>) {
        // A pin may collect, running other users' expired deferred functions (user code, see
        // [`Miss::Retired`]), which may panic. Until the chain below owns the segment it is
        // ours, and goes to limbo if the panic unwinds (where limbo is never left, the queue's
        // drop frees it); no pool owner is counted before the chain exists.
        // SAFETY: the caller's contract: the segment is allocated and on no list, so only we
        // write its link.
        unsafe { &(*segment).link }
            .retired_next
            .store(ptr::null_mut(), Ordering::Relaxed);
        let unwinding = Detached {
            queue: self,
            list: segment,
        };
        let mut guard = pin();
        core::mem::forget(unwinding);
        // The chain below owns the pool until it hands the segment in; where the allocator
        // refused the pool, the chain frees the segment instead.
        let pool = self.pool().unwrap_or(ptr::null_mut());
        if !pool.is_null() {
            // SAFETY: `pool` is alive: the queue owns it.
            unsafe { &*pool }.owners.fetch_add(1, Ordering::Relaxed);
        }
        let rounds = if self.tracked.load(Ordering::SeqCst) {
            3
        } else {
            1
        };
        // SAFETY: forwarded from the caller; `pool` is null or the chain is a counted owner
        // of it; with one round, no handle can name a cell of `segment` (above).
        unsafe { defer_recycle(SegmentPtr(segment), PoolPtr(pool), rounds, &guard) };
        // Hand this thread's deferred functions (this chain's first step, and later steps of
        // chains its collections ran) to the global queue now, so that chains move on as soon
        // as the epoch does instead of waiting for the thread's bag to fill up: 64 functions,
        // which for segments of large values was hundreds of megabytes. Each flush also tries
        // to advance the epoch and runs what has expired. Plain calls no longer pin, so
        // nothing else drives the epoch as often as once every 128 pins: a chain of three
        // steps needs six advances, so this retirement drives a few.
        // Between two flushes the pin moves to the new epoch, or it would hold the next
        // advance back itself. A panic out of a flush's user code unwinds to the caller; the
        // chain already owns the segment and its share of the pool.
        for _ in 0..Self::CHAIN_DRIVE {
            guard.flush();
            guard.repin();
        }
    }

    /// How many times a retirement flushes and advances the epoch (see
    /// [`recycle_after_grace`](Self::recycle_after_grace)). Each costs a collection (a read
    /// of every thread's epoch line, microseconds in all), paid once per segment: for small
    /// segments once is enough (a few more of them on their way to the pool cost little),
    /// large ones (256 KiB and more) drive six, so that each comes back within its own
    /// retirement rather than six later.
    #[cfg(not(pitlane_loom))]
    const CHAIN_DRIVE: usize = if size_of::<Segment<T, SEGMENT>>() >= 256 << 10 {
        6
    } else {
        1
    };

    /// Puts a retired segment on the limbo list.
    fn push_limbo(&self, segment: *mut Segment<T, SEGMENT>) {
        let mut top = self.limbo.load(Ordering::Relaxed);
        loop {
            // SAFETY: the segment is allocated and not on the list: only we write its link.
            unsafe { &(*segment).link }
                .retired_next
                .store(top, Ordering::Relaxed);
            match self.limbo.compare_exchange_weak(
                top,
                segment,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => top = now,
            }
        }
    }

    /// The queue's pool, made on first use; `None` if it was not made yet and the allocator
    /// refuses its memory (the caller then frees what it meant to pool: the pool is reached
    /// from a `try_push`, which reports a refused allocation as an error, and from a pop,
    /// neither of which may abort for it).
    #[cfg(not(pitlane_loom))]
    #[cold]
    fn pool(&self) -> Option<*mut Pool<T, SEGMENT>> {
        let pool = self.pool.load(Ordering::Acquire);
        if !pool.is_null() {
            return Some(pool);
        }
        let layout = std::alloc::Layout::new::<Pool<T, SEGMENT>>();
        // SAFETY: `layout` has a non-zero size (64 pointers and a count).
        let made = unsafe { std::alloc::alloc(layout) }.cast::<Pool<T, SEGMENT>>();
        if made.is_null() {
            return None;
        }
        // SAFETY: `made` is valid for writes of a pool, allocated with its layout, which is
        // what `Box::from_raw` (the pool's release) frees.
        unsafe {
            made.write(Pool {
                spare: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
                owners: AtomicUsize::new(1),
            });
        }
        match self
            .pool
            .compare_exchange(ptr::null_mut(), made, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Some(made),
            Err(installed) => {
                // SAFETY: `made` was never shared.
                drop(unsafe { Box::from_raw(made) });
                Some(installed)
            }
        }
    }

    /// An empty segment numbered `number` that no other thread can reach: a pooled one if
    /// there is one, else a new one; `None` if there is none and no memory for one.
    fn fresh_segment(&self, number: usize) -> Option<*mut Segment<T, SEGMENT>> {
        #[cfg(not(pitlane_loom))]
        {
            let pool = self.pool.load(Ordering::Acquire);
            if !pool.is_null() {
                // SAFETY: a non-null pool is owned by the queue, alive while `self` is.
                if let Some(segment) = unsafe { &*pool }.take() {
                    // SAFETY: a pooled segment is ours alone once taken.
                    unsafe { (*segment).reset(number) };
                    return Some(segment);
                }
            }
        }
        Segment::new(number).map(Box::into_raw)
    }

    /// Gives back a segment from [`fresh_segment`](Self::fresh_segment) that was never
    /// shared.
    ///
    /// # Safety
    /// No other thread ever saw `segment`, and it holds no value.
    unsafe fn discard(&self, segment: *mut Segment<T, SEGMENT>) {
        #[cfg(not(pitlane_loom))]
        match self.pool() {
            // SAFETY: by the caller's contract; the pool is alive while the queue is.
            Some(pool) => unsafe { (*pool).offer(segment) },
            // No memory for a pool: free the segment instead of keeping it.
            // SAFETY: by the caller's contract (it came from `Box::into_raw`, holds no value
            // and no other thread saw it).
            None => drop(unsafe { Box::from_raw(segment) }),
        }
        #[cfg(pitlane_loom)]
        // SAFETY: by the caller's contract.
        drop(unsafe { Box::from_raw(segment) });
    }

    /// Under loom: keep the unlinked segment until the queue is dropped.
    ///
    /// # Safety
    /// As for the epoch version.
    #[cfg(pitlane_loom)]
    unsafe fn retire(&self, segment: *mut Segment<T, SEGMENT>) {
        self.push_limbo(segment);
    }
}

/// One thread's pinned access to a [`Queue`]; see [`Queue::handle`]. Neither `Send` nor `Sync`.
///
/// ```
/// use pitlane_queue::mpmc::Queue;
///
/// let queue = Queue::new();
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         let handle = queue.handle(); // one per thread, for a run of operations
///         (0..1000).for_each(|i| handle.push(i));
///     });
/// });
/// let handle = queue.handle();
/// assert_eq!(handle.pop(), Some(0));
/// assert_eq!(handle.queue().len(), 999);
/// ```
pub struct Handle<'q, T, const SEGMENT: usize = DEFAULT_SEGMENT> {
    queue: &'q Queue<T, SEGMENT>,
    /// The pin, taken by the first operation after the handle was made or released.
    guard: RefCell<Option<Guard>>,
    operations: Cell<u32>,
}

/// Operations between two renewals of a handle's pin.
const REFRESH_EVERY: u32 = 256;

impl<T, const SEGMENT: usize> Handle<'_, T, SEGMENT> {
    /// Runs `f` with the handle's pin, taking it if released and renewing it every
    /// [`REFRESH_EVERY`] operations.
    ///
    /// The pin must stay, unmoved, until `f` returns. Only `release` and the renewal touch it,
    /// and `f` cannot reach either while it still reads segments: it runs no user code until
    /// then (a pop hands a revoked value it passes out, to be dropped after `f` returns; a push
    /// moves values without dropping or cloning them), but a pop that retires a segment runs
    /// other users' expired deferred functions, which may reach this handle, and so reads no
    /// segment after that and returns ([`Miss::Retired`]); and a push that allocates a segment
    /// (the allocator is user code too) pins for itself first (`push_first`,
    /// `push_past_full`).
    #[inline(always)]
    fn pinned<R>(&self, f: impl FnOnce() -> R) -> R {
        let done = self.operations.get().wrapping_add(1);
        self.operations.set(done);
        if done % REFRESH_EVERY == 0 {
            self.renew();
        }
        if self.guard.borrow().is_none() {
            self.pin_again();
        }
        f()
    }

    /// Renews a pin held across many operations, so that memory retired since can be
    /// reclaimed.
    #[cold]
    fn renew(&self) {
        if let Some(guard) = self.guard.borrow_mut().as_mut() {
            #[cfg(not(pitlane_loom))]
            guard.repin();
            #[cfg(pitlane_loom)]
            let _ = guard;
        }
    }

    /// The first operation after the handle was made or released: pin.
    #[cold]
    fn pin_again(&self) {
        // Pinned before the borrow (registering the thread in the epoch allocates, and the
        // allocator may use this handle, which then pins it itself); and whatever pin that
        // left in the handle is dropped after the borrow ends, as in `release`: it may be the
        // last pin of an epoch record that was dropped (at thread exit), whose finalization
        // runs user code.
        let pinned = pin();
        // The borrow is a temporary of this statement; the replaced pin goes at the end of
        // the function.
        let _replaced = self.guard.borrow_mut().replace(pinned);
    }

    /// [`Queue::try_push`] without a pin of its own.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// assert!(queue.handle().try_push(1).is_ok());
    /// ```
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        self.pinned(|| self.queue.try_push_tagged(item, FULL))
    }

    /// [`Queue::push`] without a pin of its own.
    ///
    /// # Panics
    /// As [`Queue::push`]: if the queue needs a new segment and the allocator refuses the
    /// memory for it; [`try_push`](Self::try_push) hands the item back instead.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// queue.handle().push(1);
    /// assert_eq!(queue.pop(), Some(1));
    /// ```
    #[inline]
    pub fn push(&self, item: T) {
        crate::weak_bag::retry_push(item, |item| self.try_push(item))
    }

    /// [`Queue::try_pop`] without a pin of its own.
    ///
    /// ```
    /// use pitlane_queue::{PopError, mpmc::Queue};
    ///
    /// let queue: Queue<u8> = Queue::new();
    /// assert_eq!(queue.handle().try_pop(), Err(PopError::Empty));
    /// ```
    #[inline]
    pub fn try_pop(&self) -> Result<T, PopError> {
        Miss::retry_past_revoked(|| self.pinned(|| self.queue.try_pop_protected()))
    }

    /// [`Queue::pop`] without a pin of its own.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// queue.push(4);
    /// assert_eq!(queue.handle().pop(), Some(4));
    /// ```
    #[inline]
    pub fn pop(&self) -> Option<T> {
        crate::weak_bag::retry_pop(|| self.try_pop())
    }

    /// The queue this handle works on.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue: Queue<u8> = Queue::new();
    /// assert!(std::ptr::eq(queue.handle().queue(), &queue));
    /// ```
    pub fn queue(&self) -> &Queue<T, SEGMENT> {
        self.queue
    }
}

impl<T, const SEGMENT: usize> BagHandle for Handle<'_, T, SEGMENT> {
    type Item = T;

    #[inline]
    fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        Handle::try_push(self, item)
    }

    #[inline]
    fn try_pop(&self) -> Result<T, PopError> {
        Handle::try_pop(self)
    }

    /// Unpins; the next operation pins again. (No operation of the handle that still reads a
    /// segment is running when this is called: operations run no user code, but for a pop's
    /// retirement, which runs expired deferred functions and then ends its attempt; a pop
    /// drops the revoked values it passes between two attempts.)
    fn release(&self) {
        // The pin is dropped at the end of the function, after the borrow (a temporary of the
        // statement below) ends: unpinning may run user code. Where it is the last pin of a
        // thread whose epoch record was already dropped (a release from a thread-local
        // destructor at thread exit), the record is finalized, which pins and may collect
        // (other users' deferred functions) and allocates (the allocator), and either may use
        // this handle again.
        let _released = self.guard.borrow_mut().take();
    }
}

impl<T, const SEGMENT: usize> fmt::Debug for Handle<'_, T, SEGMENT> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("queue", self.queue)
            .field("pinned", &self.guard.borrow().is_some())
            .finish()
    }
}

/// Retired segments (linked through `retired_next`) taken off a queue's limbo list and not yet
/// handed on: whatever is still on it when it is dropped goes back to limbo. A retirement runs
/// user code (a pin's collection and a flush run other users' expired deferred functions), and
/// a panic there unwinds through the retirement to its caller; the segments it had not handed
/// on then wait in limbo for the next attempt, or for the queue's drop, instead of being lost.
#[cfg(not(pitlane_loom))]
struct Detached<'a, T, const SEGMENT: usize> {
    queue: &'a Queue<T, SEGMENT>,
    /// Segments of `queue`, allocated, unlinked and owned by this list alone.
    list: *mut Segment<T, SEGMENT>,
}

#[cfg(not(pitlane_loom))]
impl<T, const SEGMENT: usize> Detached<'_, T, SEGMENT> {
    /// Takes the first segment off the list; the caller owns it alone.
    fn pop(&mut self) -> Option<*mut Segment<T, SEGMENT>> {
        let at = self.list;
        if at.is_null() {
            return None;
        }
        // SAFETY: segments on the list are allocated and owned by it, and so by us.
        self.list = unsafe { &(*at).link }.retired_next.load(Ordering::Relaxed);
        Some(at)
    }
}

#[cfg(not(pitlane_loom))]
impl<T, const SEGMENT: usize> Drop for Detached<'_, T, SEGMENT> {
    fn drop(&mut self) {
        while let Some(at) = self.pop() {
            self.queue.push_limbo(at);
        }
    }
}

/// A segment address that a deferred function may carry to another thread.
#[cfg(not(pitlane_loom))]
struct SegmentPtr<T, const SEGMENT: usize>(*mut Segment<T, SEGMENT>);

/// A pool address that a deferred function may carry to another thread.
#[cfg(not(pitlane_loom))]
struct PoolPtr<T, const SEGMENT: usize>(*mut Pool<T, SEGMENT>);

/// Hands `segment` to `pool` after `rounds` grace periods, each deferred from the previous one,
/// and lets go of the pool; frees it instead where `pool` is null (the allocator refused the
/// queue's pool).
///
/// The caller flushes its thread's deferred functions afterwards (see [`Queue::retire`]).
/// The later steps do not: they run inside some thread's collection, and a flush there would
/// collect again, nesting collections as deep as the backlog (a stack overflow under load);
/// they wait in that thread's bag until its next retirement flushes it.
///
/// # Safety
/// `segment` is unlinked, retired once, and every cell's value has been moved out (the
/// segment holds no `T`), so recycling or freeing it on any thread is sound; it came from
/// `Box::into_raw`; `pool` is null or the chain is a counted owner of it.
#[cfg(not(pitlane_loom))]
unsafe fn defer_recycle<T, const SEGMENT: usize>(
    segment: SegmentPtr<T, SEGMENT>,
    pool: PoolPtr<T, SEGMENT>,
    rounds: u32,
    guard: &Guard,
) {
    let run = move || {
        if rounds > 1 {
            // SAFETY: same segment, same pool, same contract, one round fewer.
            unsafe { defer_recycle(segment, pool, rounds - 1, &pin()) };
        } else if pool.0.is_null() {
            // SAFETY: the last grace period has passed: no thread can reach the segment, which
            // holds no value and came from `Box::into_raw`.
            drop(unsafe { Box::from_raw(segment.0) });
        } else {
            // SAFETY: the last grace period has passed: no thread can reach the segment; the
            // chain owns the pool until `release`.
            unsafe {
                (*pool.0).offer(segment.0);
                Pool::release(pool.0);
            }
        }
    };
    // SAFETY: the function only recycles or frees memory that holds no `T` (every cell was
    // taken, poisoned or revoked before the head moved past it), which any thread may do.
    unsafe { guard.defer_unchecked(run) };
}

impl<T, const SEGMENT: usize> Drop for Queue<T, SEGMENT> {
    fn drop(&mut self) {
        let mut segment_ptr = self.head.load(Ordering::Relaxed);
        while !segment_ptr.is_null() {
            // SAFETY: `&mut self`: no other thread touches the queue; segments from `head` on
            // are live and owned by the queue.
            let mut segment = unsafe { Box::from_raw(segment_ptr) };
            // Tickets below `deq` went to pops, which all finished: those cells are consumed
            // (a popped plain cell still says `FULL`). The others hold what their state says.
            let consumed = segment.deq.load(Ordering::Relaxed).min(SEGMENT);
            for ticket in consumed..SEGMENT {
                segment.cells[ticket].drop_in_place();
            }
            segment_ptr = segment.link.next.load(Ordering::Relaxed);
        }
        #[cfg(not(pitlane_loom))]
        {
            let pool = *self.pool.get_mut();
            if !pool.is_null() {
                // SAFETY: the queue is one of the pool's owners and lets go of it here.
                unsafe { Pool::release(pool) };
            }
        }
        let mut retired = self.limbo.load(Ordering::Relaxed);
        while !retired.is_null() {
            // SAFETY: segments in limbo are owned by the queue, unlinked and empty of values;
            // `&mut self`: no call is inside one, and a revoker may not run once its bag is
            // being dropped (`RevocableBag::revoke`'s contract).
            let segment = unsafe { Box::from_raw(retired) };
            retired = segment.link.retired_next.load(Ordering::Relaxed);
        }
    }
}

impl<T, const SEGMENT: usize> Default for Queue<T, SEGMENT> {
    fn default() -> Self {
        Self::with_segment_size()
    }
}

impl<T, const SEGMENT: usize> fmt::Debug for Queue<T, SEGMENT> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("segment", &SEGMENT)
            .field("len", &self.len())
            .finish()
    }
}

impl<T, const SEGMENT: usize> WeakBag for Queue<T, SEGMENT> {
    type Item = T;

    #[inline(always)]
    fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        Queue::try_push(self, item)
    }

    #[inline(always)]
    fn try_pop(&self) -> Result<T, PopError> {
        Queue::try_pop(self)
    }

    fn size_guess(&self) -> usize {
        self.len()
    }

    type Handle<'a>
        = Handle<'a, T, SEGMENT>
    where
        Self: 'a;

    fn handle(&self) -> Handle<'_, T, SEGMENT> {
        Queue::handle(self)
    }
}

impl<T: Revocable, const SEGMENT: usize> RevocableBag for Queue<T, SEGMENT> {
    fn try_push_revocable(&self, item: T) -> Result<(), PushError<T>> {
        let tag = item.revoke_handle().tag();
        // Before any ticket: retired segments need three grace periods from now on (see
        // `recycle_after_grace`). A `SeqCst` load that sees the flag set is ordered after the
        // store that set it, and so before our ticket, as our own store would be.
        #[cfg(not(pitlane_loom))]
        if !self.tracked.load(Ordering::SeqCst) {
            self.tracked.store(true, Ordering::SeqCst);
        }
        let _guard = pin();
        self.try_push_tagged(item, tag)
    }

    unsafe fn revoke(item: &T) -> bool {
        // SAFETY: the bag is alive by the caller's contract; `revoke_slot` pins from before the
        // handle is read until the last access to the slot, and the segment protocol keeps the
        // slot's segment allocated that long (see the `revoke` module).
        unsafe { revoke::revoke_slot(item) }
    }
}

impl<T, const SEGMENT: usize> IntoIterator for Queue<T, SEGMENT> {
    type Item = T;
    type IntoIter = IntoIter<Self>;

    /// Drains the queue it consumes, oldest item first.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// queue.push(1);
    /// queue.push(2);
    /// assert_eq!(queue.into_iter().collect::<Vec<_>>(), [1, 2]);
    /// ```
    fn into_iter(self) -> IntoIter<Self> {
        IntoIter::new(self)
    }
}

// Like crossbeam's `SegQueue`: a panic never leaves a queue half-updated (every change is one
// atomic step, and a value is moved out only by the operation that owns it; a retirement that
// a panicking deferred function interrupts puts back in limbo what it had not handed on), so a
// queue seen again after a panic is consistent.
impl<T, const SEGMENT: usize> core::panic::UnwindSafe for Queue<T, SEGMENT> {}
impl<T, const SEGMENT: usize> core::panic::RefUnwindSafe for Queue<T, SEGMENT> {}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    /// The tail segment of `queue` and a ticket drawn there by a push that has not published.
    fn stalled_push<const N: usize>(queue: &Queue<u64, N>) -> (&Segment<u64, N>, usize) {
        let tail = queue.first_segment().expect("memory for a segment");
        // SAFETY: `first_segment` made `tail` non-null, and no segment is retired while the
        // test holds `queue` without popping past it.
        let segment = unsafe { &*tail };
        (segment, segment.enq.fetch_add(1, Ordering::SeqCst))
    }

    /// What the choice of grace periods in `recycle_after_grace` rests on: plain pushes and
    /// pops leave the queue untracked; a tracked push marks it, and the mark stays.
    #[test]
    fn a_tracked_push_marks_the_queue_before_its_ticket_and_for_good() {
        struct Page(crate::revoke::RevokeHandle);
        // SAFETY: the handle lives in the page, outside the reference.
        unsafe impl Revocable for &Page {
            fn revoke_handle(&self) -> &crate::revoke::RevokeHandle {
                &self.0
            }
        }
        let page = Page(crate::revoke::RevokeHandle::new());
        let queue: Queue<&Page, 2> = Queue::with_segment_size();
        for _ in 0..10 {
            queue.push(&page);
            assert!(queue.pop().is_some());
        }
        assert!(!queue.tracked.load(Ordering::SeqCst));
        queue.push_revocable(&page);
        assert!(queue.tracked.load(Ordering::SeqCst));
        assert!(queue.pop().is_some());
        assert!(!page.0.is_in_bag());
        queue.push(&page);
        assert!(queue.pop().is_some());
        assert!(queue.tracked.load(Ordering::SeqCst));
    }

    #[test]
    fn a_pop_skips_a_stalled_push_which_then_takes_its_value_back() {
        let queue: Queue<u64, 8> = Queue::with_segment_size();
        let (segment, ticket) = stalled_push(&queue);
        let cell = segment.cell(ticket).expect("a ticket inside the segment");
        // The pop waits a moment, gives up on the push and poisons its cell.
        assert_eq!(queue.try_pop(), Err(PopError::Transient));
        assert_eq!(segment.deq.load(Ordering::SeqCst), ticket + 1);
        // The late publish sees the skip and hands the value back, whichever way it publishes.
        assert_eq!(
            Queue::<u64, 8>::publish(segment, ticket, cell, 5, FULL),
            Err(5)
        );
        assert_eq!(cell.state.load(Ordering::SeqCst), TAKEN);
        queue.push(6);
        assert_eq!(queue.pop(), Some(6));
        assert_eq!(queue.try_pop(), Err(PopError::Empty));
    }

    #[test]
    fn a_skip_that_finds_the_value_arrived_takes_it_and_the_pusher_keeps_it_pushed() {
        let queue: Queue<u64, 8> = Queue::with_segment_size();
        let (segment, ticket) = stalled_push(&queue);
        let cell = segment.cell(ticket).expect("a ticket inside the segment");
        // The value lands after the pop decided to skip but before it looked again: the pop
        // takes it with its swap.
        // SAFETY: the ticket is ours (drawn above) and nothing else touches the cell yet.
        unsafe { cell.write(5) };
        cell.state.store(FULL, Ordering::Release);
        match Queue::<u64, 8>::skip(segment, ticket, cell) {
            Slow::Taken(value) => assert_eq!(value, 5),
            _ => panic!("the skip should have taken the value"),
        }
        // The pusher sees the mark, fails to take the value back, and counts the push as done.
        assert!(segment.skipped(ticket));
        assert!(Queue::<u64, 8>::reclaim(cell).is_ok());
        assert_eq!(queue.try_pop(), Err(PopError::Empty));
    }

    #[test]
    fn a_skip_whose_barrier_is_refused_waits_for_the_pusher_and_loses_nothing() {
        for round in 0..20 {
            let queue: Queue<u64, 8> = Queue::with_segment_size();
            let (segment, ticket) = stalled_push(&queue);
            let cell = segment.cell(ticket).expect("a ticket inside the segment");
            let (popped, pushed) = std::thread::scope(|s| {
                let popper = s.spawn(|| {
                    barrier::REFUSE_NEXT.with(|refuse| refuse.set(true));
                    let popped = queue.try_pop();
                    // The refusal was used: this pop went through the skip, not around it.
                    assert!(!barrier::REFUSE_NEXT.with(|refuse| refuse.get()));
                    popped
                });
                // The pop has claimed the ticket and marked it; let it reach its wait (or not,
                // in the rounds without a pause), then publish late.
                while !segment.skipped(ticket) {
                    std::thread::yield_now();
                }
                if round % 2 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    // Without the barrier the pop must not poison the cell and return: it
                    // waits for the value, which is not there yet.
                    assert!(!popper.is_finished(), "the pop gave up without the barrier");
                }
                let pushed = Queue::<u64, 8>::publish(segment, ticket, cell, 9, FULL);
                (popper.join().expect("the pop returns"), pushed)
            });
            // Exactly one side has the value: the pop took it and the push is done, or the
            // pusher took it back (to retry) and the pop lost its ticket.
            match (popped, pushed) {
                (Ok(9), Ok(())) | (Err(PopError::Transient), Err(9)) => {}
                other => panic!("value lost or duplicated: {other:?}"),
            }
            assert_eq!(cell.state.load(Ordering::SeqCst), TAKEN);
            assert_eq!(queue.try_pop(), Err(PopError::Empty));
        }
    }

    #[test]
    fn a_pop_that_lost_the_ticket_to_another_pop_says_transient() {
        let queue: Queue<u64, 8> = Queue::with_segment_size();
        queue.push(1);
        // SAFETY: as in `stalled_push`.
        let segment = unsafe { &*queue.head.load(Ordering::Acquire) };
        let cell = segment.cell(0).expect("cell 0");
        // Another pop claims ticket 0 between our look at `deq` and our claim.
        segment.deq.store(1, Ordering::SeqCst);
        assert!(matches!(
            Queue::<u64, 8>::skip(segment, 0, cell),
            Slow::Lost
        ));
        // Put things back as that pop would have left them: it took the value.
        // SAFETY: the value was published and is taken once, here.
        assert_eq!(unsafe { cell.read() }, 1);
        assert_eq!(queue.try_pop(), Err(PopError::Empty));
    }

    /// How many segments wait in the queue's limbo (no other thread may use the queue).
    fn limbo_len<const N: usize>(queue: &Queue<u64, N>) -> usize {
        let mut count = 0;
        let mut at = queue.limbo.load(Ordering::Acquire);
        while !at.is_null() {
            count += 1;
            // SAFETY: limbo segments are allocated until the queue drops or recycles them,
            // and only this thread uses the queue.
            at = unsafe { &(*at).link }.retired_next.load(Ordering::Acquire);
        }
        count
    }

    /// Taken by the tests that hold an era on purpose for a while, so that one of them never
    /// sees the other's stalled call as a plain call of its own queue's users.
    static ERA_HOLDERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A pop that retires a segment hands it to the epoch and flushes the thread's deferred
    /// functions, which runs whatever functions of any user of crossbeam-epoch's default
    /// collector have expired (`Guard::defer` is safe): user code, in the middle of the pop.
    /// Here such a function reaches the popping thread's handle (a thread-local) and releases
    /// it, dropping the pin the pop stands on. The rest of the pop must not read a segment
    /// unpinned: the check at the top of `try_pop_protected`'s loop sees to it.
    #[test]
    fn a_handle_released_by_a_deferred_function_that_a_retirement_runs_leaves_no_read_unpinned() {
        use core::cell::Cell as StdCell;
        use std::sync::atomic::AtomicUsize as Count;

        /// 32 KiB values in 32-cell segments: a segment is a mebibyte, so each retirement
        /// tries to move segments out of limbo (and on to the epoch) at once.
        type Value = [u64; 4096];
        static QUEUE: Queue<Value, 32> = Queue::with_segment_size();
        std::thread_local! {
            static HANDLE: Handle<'static, Value, 32> = QUEUE.handle();
            static IN_POP: StdCell<bool> = const { StdCell::new(false) };
        }
        /// Deferred functions that ran inside one of the test thread's pops.
        static HITS: Count = Count::new(0);

        let _alone = ERA_HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::Builder::new()
            .stack_size(16 << 20)
            .spawn(|| {
                for attempt in 0..2000_u64 {
                    // Fill segment `n` and start segment `n + 1`, then pop the segment through
                    // the handle, released (unpinned) beforehand: the last pop of segment `n`
                    // retires it.
                    (0..33).for_each(|i| QUEUE.push([attempt * 64 + i; 4096]));
                    HANDLE.with(BagHandle::release);
                    // A function that expires within the next two advances of the epoch: the
                    // pops' pin comes after this flush's advance, and the retirement's flush
                    // advances again and runs it (unless some other collection got there
                    // first, or another test's thread holds the epoch back: then try again).
                    let guard = crossbeam_epoch::pin();
                    guard.defer(|| {
                        if IN_POP.with(StdCell::get) {
                            HANDLE.with(BagHandle::release);
                            HITS.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    guard.flush();
                    drop(guard);
                    IN_POP.with(|p| p.set(true));
                    for i in 0..33 {
                        let popped = HANDLE.with(|h| h.pop()).expect("pushed");
                        assert_eq!(popped[0], attempt * 64 + i);
                    }
                    IN_POP.with(|p| p.set(false));
                    if HITS.load(Ordering::Relaxed) >= 3 {
                        return;
                    }
                }
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(
            HITS.load(Ordering::Relaxed) > 0,
            "no deferred function ran inside a retiring pop in 2000 attempts"
        );
    }

    #[test]
    fn a_retired_segment_stays_in_limbo_while_a_plain_call_may_be_inside_it() {
        let _alone = ERA_HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
        barrier::init();
        let queue = Queue::<u64, 1>::with_segment_size();
        queue.push(0);
        // Stand for a plain call stalled inside segment 0 (the calls below nest in it).
        let Some(inside) = crate::era::enter() else {
            // No membarrier (or no seat) here: every call pins, nothing goes to limbo.
            return;
        };
        // A pop that moves on from a one-cell segment retires it: 19 retirements (segments
        // 0 to 18) make two attempts to move segments out of limbo, and none may leave: each
        // was retired after our era began.
        for i in 1..=20 {
            queue.push(i);
            assert_eq!(queue.pop(), Some(i - 1));
        }
        assert_eq!(limbo_len(&queue), 19);
        drop(inside);
        // Once we left, later attempts move them on. Other tests' threads may be inside plain
        // calls of their own (and be descheduled there on a loaded machine), so keep trying
        // for a while rather than for a count of attempts.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut i = 21;
        while std::time::Instant::now() < deadline {
            queue.push(i);
            assert_eq!(queue.pop(), Some(i - 1));
            if limbo_len(&queue) < 8 {
                return;
            }
            i += 1;
            if i % 64 == 0 {
                std::thread::yield_now();
            }
        }
        panic!("{} segments still in limbo after 20 s", limbo_len(&queue));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_fork_child_is_not_held_back_by_calls_the_parent_had_in_flight() {
        use std::sync::atomic::AtomicBool;
        let _alone = ERA_HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
        barrier::init();
        if !barrier::asymmetric() {
            return;
        }
        // Another thread of the parent is inside a call (an era) when the process forks.
        let entered = AtomicBool::new(false);
        let forked = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let inside = crate::era::enter();
                entered.store(true, Ordering::Release);
                while !forked.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                drop(inside);
            });
            while !entered.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            // SAFETY: the child only runs the queue (atomics, malloc, which glibc makes safe
            // in a fork child) and then `_exit`s; no lock of the parent's is taken.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let queue = Queue::<u64, 1>::with_segment_size();
                queue.push(0);
                for i in 1..=200 {
                    queue.push(i);
                    if queue.pop() != Some(i - 1) {
                        // SAFETY: ends the child at once, as a fork child of a test should.
                        unsafe { libc::_exit(2) };
                    }
                }
                // At most the retirements since the last attempt (eight) wait in limbo; with
                // the parent's call counted, all 199 would.
                let code = if limbo_len(&queue) <= 8 { 0 } else { 1 };
                // SAFETY: as above.
                unsafe { libc::_exit(code) };
            }
            forked.store(true, Ordering::Release);
            assert!(pid > 0, "fork failed");
            let mut status = 0;
            // SAFETY: waits for the child just made; `status` is ours to write.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFEXITED(status), "child status {status}");
            assert_eq!(
                libc::WEXITSTATUS(status),
                0,
                "1: the child's retired segments stayed in limbo behind the parent's call"
            );
        });
    }
}
