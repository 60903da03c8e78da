//! An unbounded multi-producer multi-consumer FIFO queue in which threads claim cells with
//! fetch-and-add.
//!
//! The FAAArrayQueue of Pedro Ramalhete and Andreia Correia (2016, ConcurrencyFreaks), the
//! portable descendant of Morrison and Afek's LCRQ (PPoPP 2013) that the Bagpipes seed builds on
//! (`shared/seeds/bagpipes-scalable-concurrent-bags.txt`). Instead of racing on a head or tail
//! with compare-and-swap, each push and pop takes a *ticket* with one `fetch_add`, which always
//! succeeds, and the ticket names the cell it works on. Cells live in fixed-size *segments*
//! linked into a list.
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
//! ticket counter `enq`, a pop ticket counter `deq`, and a link to the next segment. A cell is a
//! value and a state word (see the `slot` module): *empty*, *full*, *taken*, or the handle of
//! a revocable value.
//!
//! - **Push**: `i = tail.enq.fetch_add(1)`. If `i < SEGMENT`, write the value into cell `i` and
//!   CAS its state *empty → full*. If the CAS fails, a pop took ticket `i` first, found the cell
//!   empty and *poisoned* it (see below): the attempt lost a race. If `i ≥ SEGMENT` the segment
//!   is full: link a fresh segment whose first cell already holds the value (CAS on `next`),
//!   or help move `tail` to the successor that another push linked.
//! - **Pop**: if the cell of ticket `head.deq` holds no value, `head.deq ≥ head.enq` and `head`
//!   has no successor, the queue is empty. Else
//!   `i = head.deq.fetch_add(1)`. If `i < SEGMENT` and the cell is full, take the value. If it is
//!   still empty, wait a moment for the pusher holding ticket `i`, then swap the state to
//!   *taken*: if it was still empty, the cell is poisoned and the pop lost a race (the pusher's
//!   CAS will fail and it will retry with a new ticket). If `i ≥ SEGMENT`, every cell of the
//!   segment has been handed out: move `tail` off it if needed, move `head` to the successor
//!   and retire the old segment.
//!
//! Every cell is used at most once, which is what makes a single CAS on its state enough: a
//! state never returns to *empty*, so there is no ABA on cells.
//!
//! Three details keep the threads off each other's cache lines. Ticket `i` does not live in
//! cell `i`: consecutive tickets are spread over different 64-byte lines (a line of four
//! 16-byte cells is reused only `SEGMENT / 4` tickets later), so a push and a pop working on
//! neighbouring tickets do not fight over one line. A pop first looks at the cell of the next
//! ticket: if it already holds a value the queue is not empty, and the pop skips reading `enq`,
//! the line every push writes. And a pop that takes a plain value leaves the state *full*
//! rather than writing *taken*: a cell whose ticket is below `deq` is consumed whatever its
//! state says (only tracked and revoked cells, which a revoker may race for, are swapped).
//!
//! # When the try operations fail
//!
//! [`Queue::try_push`] returns `Err(item)` in exactly two cases: its cell was poisoned by a pop
//! that held the same ticket and arrived first, or it found the tail segment full and another
//! push linked the next segment before it. [`Queue::try_pop`] returns [`PopError::Transient`]
//! exactly when the cell its ticket names was still empty after a short wait (it poisons the
//! cell), and [`PopError::Empty`] when it found no pushed value that no pop has claimed.
//! Revoked cells are skipped without failing.
//!
//! A pop fails transiently only while a push or another pop runs beside it. A push can fail
//! after its rival has returned: when two pops race for the last value, the loser may draw a
//! ticket that no push holds yet and poison that cell; the next push to draw the ticket then
//! fails once, even if nothing runs beside it. (This is the fetch-and-add design's price for
//! tickets that never fail; every such cell costs one retry, once.)
//!
//! # Linearization points
//!
//! Successful pushes and pops are ordered by the ticket of the cell they meet in (segment
//! number × `SEGMENT` + ticket), the order of the two ticket counters: a push takes effect with
//! its publishing CAS (*empty → full*, or the CAS on `next` that links a segment holding the
//! value in its first cell), at the position its ticket gave it; a pop takes effect at the
//! ticket that meets a published value. A pop that returns [`PopError::Empty`] takes effect at
//! its last load (of `enq`, or of `next` after it found the segment exhausted), which saw no
//! unclaimed published value. The ticket counters and these loads are `SeqCst`.
//!
//! # Reclamation: why crossbeam-epoch
//!
//! A thread reads `head` or `tail` and then does its `fetch_add` *inside* the segment, so a
//! segment must stay allocated as long as any thread may still hold its address — even a
//! thread whose ticket turns out to be useless. Crossbeam's `SegQueue` avoids reclamation
//! schemes by claiming slots with a CAS on a combined index that validates the block before it
//! is touched; a fetch-and-add cannot validate first. Hazard pointers would cost a `SeqCst`
//! store and a re-read of the pointer on every operation; an epoch pin costs one uncontended
//! read-modify-write on a thread-local word, and retiring happens once per segment. So retired
//! segments go to [crossbeam-epoch](https://docs.rs/crossbeam-epoch), the well-kept collector
//! the house rules prefer to anything home-made. Revocation needs a retired segment to outlive
//! three grace periods instead of one; the argument is in the [`revoke`] module.
//! Under `cfg(pitlane_loom)` retired segments are kept on a list and freed when the queue is
//! dropped, so that loom checks the cell protocol and the segment hand-off without the epoch
//! machinery, which loom cannot model.
//!
//! # Choosing the segment size
//!
//! Each segment costs one allocation of `SEGMENT` cells (a cell is a `usize` state plus the
//! value: 16 bytes for a `usize`, so 16 KiB at the default size). Larger segments allocate less
//! often; smaller ones waste less memory in a mostly empty queue, which matters when many
//! queues sit side by side in a [`Bagpipe`](crate::bagpipe::Bagpipe). The FAAArrayQueue paper
//! uses 1024.

use core::cell::{Cell, RefCell};
use core::fmt;
use core::marker::PhantomData;
use core::ptr;

use crossbeam_utils::CachePadded;
use pitlane_sync::shim::atomic::{AtomicPtr, AtomicUsize, Ordering};
#[cfg(not(pitlane_loom))]
use pitlane_sync::shim::hint::spin_loop;

use crate::revoke::{self, Revocable, RevocableBag};
use crate::slot::{self, EMPTY, FULL, REVOKED, Slot, TAKEN};
use crate::weak_bag::{PopError, WeakBag};

/// Cells per segment unless the type says otherwise.
pub const DEFAULT_SEGMENT: usize = 1024;

/// How many times a pop re-reads an empty cell whose pusher has taken its ticket before it
/// poisons the cell. A pusher is between its ticket and its publish for a few instructions,
/// unless it was preempted, so a short wait saves both threads a retry. The wait is only an
/// optimization; under loom there is no wait, because loom schedules away from a thread that
/// spins, which would hide the interleavings where the poison and the publish race.
#[cfg(not(pitlane_loom))]
const PATIENCE: u32 = 32;

/// Epoch pinning, or nothing under loom (retired segments are then freed on drop).
#[cfg(not(pitlane_loom))]
mod reclaim {
    pub(super) use crossbeam_epoch::{Guard, pin};
}

#[cfg(pitlane_loom)]
mod reclaim {
    /// Stands for an epoch guard; segments are not freed before the queue is dropped.
    pub(super) struct Guard;

    pub(super) fn pin() -> Guard {
        Guard
    }
}

use reclaim::{Guard, pin};

/// An unbounded lock-free MPMC FIFO queue of `T`, with `SEGMENT` cells per segment.
///
/// See the [module documentation](self) for the algorithm and its guarantees.
pub struct Queue<T, const SEGMENT: usize = DEFAULT_SEGMENT> {
    /// The segment pops take tickets from. Never null; it is `tail` or a predecessor of it.
    head: CachePadded<AtomicPtr<Segment<T, SEGMENT>>>,
    /// The segment pushes take tickets from. Never null; it is the last segment or the one
    /// before it (between the link of a new segment and the CAS that moves `tail`).
    tail: CachePadded<AtomicPtr<Segment<T, SEGMENT>>>,
    /// Segments retired under loom, freed on drop; linked through `Segment::retired_next`.
    #[cfg(pitlane_loom)]
    retired: AtomicPtr<Segment<T, SEGMENT>>,
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
    /// The next retired segment, under loom.
    #[cfg(pitlane_loom)]
    retired_next: AtomicPtr<Segment<T, SEGMENT>>,
}

impl<T, const SEGMENT: usize> Segment<T, SEGMENT> {
    /// The cell of `ticket`, if the ticket falls inside the segment.
    ///
    /// Consecutive tickets are spread over different cache lines (ticket `t` lives in cell
    /// `(t mod L) * W + t / L`, for `W` cells per 64 bytes and `L = SEGMENT / W` lines), so that
    /// threads working on neighbouring tickets at the same moment do not share a line; a line is
    /// revisited only `L` tickets later. Segments whose size is not a multiple of `W` keep the
    /// plain order.
    #[inline]
    fn cell(&self, ticket: usize) -> Option<&Slot<T>> {
        if ticket >= SEGMENT {
            return None;
        }
        // SAFETY: `cell_index` maps tickets below `SEGMENT` to indices below `SEGMENT`.
        Some(unsafe { self.cells.get_unchecked(Self::cell_index(ticket)) })
    }

    /// Where ticket `ticket < SEGMENT` lives in `cells` (see [`cell`](Self::cell)); always
    /// below `SEGMENT`: for the spread order, `ticket % lines < lines` and
    /// `ticket / lines < per_line` since `ticket < SEGMENT = lines * per_line`.
    #[inline]
    fn cell_index(ticket: usize) -> usize {
        let per_line = Self::CELLS_PER_LINE;
        if per_line > 1 && SEGMENT % per_line == 0 {
            let lines = SEGMENT / per_line;
            (ticket % lines) * per_line + ticket / lines
        } else {
            ticket
        }
    }

    /// Cells that share one 64-byte line.
    const CELLS_PER_LINE: usize = {
        let size = core::mem::size_of::<Slot<T>>();
        if size == 0 || size >= 64 {
            1
        } else {
            64 / size
        }
    };

    /// A segment with no cell used, numbered `number`.
    fn new(number: usize) -> Box<Self> {
        const { assert!(SEGMENT > 0, "a segment needs at least one cell") };
        #[cfg(not(pitlane_loom))]
        let mut segment = {
            let layout = std::alloc::Layout::new::<Self>();
            // SAFETY: `layout` has a non-zero size (at least the padded counters).
            let memory = unsafe { std::alloc::alloc(layout) }.cast::<Self>();
            if memory.is_null() {
                std::alloc::handle_alloc_error(layout);
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
                retired_next: AtomicPtr::new(ptr::null_mut()),
            }),
            cells: core::array::from_fn(|_| Slot::new()),
        });
        segment.link.number = number;
        segment
    }

    /// A segment numbered `number` whose first cell already holds `item`, published with
    /// state `tag`; the handle of a tracked item is pointed at that cell.
    fn with_first(number: usize, item: T, tag: usize) -> *mut Self {
        let segment = Box::into_raw(Self::new(number));
        // SAFETY: freshly allocated and not shared yet.
        let first = unsafe { (*segment).cell(0) }.expect("a segment has a cell");
        // SAFETY: nobody else can reach the cell.
        unsafe { first.write(item) };
        if tag != FULL {
            // SAFETY: `tag` is the handle of `item`, alive while the item is.
            unsafe { slot::handle_of(tag) }.set(first as *const Slot<T> as usize);
        }
        first.state.store(tag, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { (*segment).enq.store(1, Ordering::Relaxed) };
        segment
    }

    /// Takes the item back out of a segment made by [`with_first`](Self::with_first) that was
    /// never shared, and frees the segment.
    ///
    /// # Safety
    /// `segment` came from `with_first` and no other thread ever saw it.
    unsafe fn unmake(segment: *mut Self, tag: usize) -> T {
        // SAFETY: by the caller's contract we own the whole segment.
        let segment = unsafe { Box::from_raw(segment) };
        let first = segment.cell(0).expect("a segment has a cell");
        if tag != FULL {
            // SAFETY: the item is alive (we are about to hand it back), so is its handle.
            unsafe { slot::handle_of(tag) }.clear_if(first as *const Slot<T> as usize);
        }
        first.state.store(TAKEN, Ordering::Relaxed);
        // SAFETY: `with_first` wrote the value and nobody took it.
        unsafe { first.read() }
    }
}

/// What a pop found in a cell that was not simply full.
enum Contended<T> {
    /// A value, now ours.
    Taken(T),
    /// The cell was still empty; we poisoned it.
    Poisoned,
    /// The cell's value was revoked; we dropped it. Skip the cell.
    Revoked,
}

impl<T> Queue<T> {
    /// An empty queue with [`DEFAULT_SEGMENT`] cells per segment (one segment is allocated at
    /// once).
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// queue.push(1);
    /// assert_eq!(queue.pop(), Some(1));
    /// ```
    pub fn new() -> Self {
        Self::with_segment_size()
    }
}

impl<T, const SEGMENT: usize> Queue<T, SEGMENT> {
    /// An empty queue with the segment size its type names (one segment is allocated at once).
    /// A segment size of 0 is a compile-time error.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let small: Queue<u8, 64> = Queue::with_segment_size();
    /// small.push(1);
    /// assert_eq!(small.pop(), Some(1));
    /// ```
    pub fn with_segment_size() -> Self {
        let first = Box::into_raw(Segment::new(0));
        Self {
            head: CachePadded::new(AtomicPtr::new(first)),
            tail: CachePadded::new(AtomicPtr::new(first)),
            #[cfg(pitlane_loom)]
            retired: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// One attempt to append `item`. Fails, handing the item back, only when it lost a race:
    /// a pop poisoned the cell it was given (perhaps a pop that has returned already, see
    /// the [module documentation](self)), or another push linked the next segment first.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// assert!(queue.try_push("alone, so no race to lose").is_ok());
    /// ```
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), T> {
        self.try_push_tagged(item, FULL, &pin())
    }

    /// Appends `item`, retrying lost races.
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
    /// `Err(PopError::Transient)` if the cell it was given had no value yet (it then poisons
    /// that cell, and the push meant for it retries elsewhere).
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
        self.try_pop_pinned(&pin())
    }

    /// [`try_pop`](Self::try_pop) for a thread pinned by `guard`.
    #[inline]
    fn try_pop_pinned(&self, guard: &Guard) -> Result<T, PopError> {
        loop {
            let segment_ptr = self.head.load(Ordering::Acquire);
            // SAFETY: `head` is never null, and the segment it named is not freed while we are
            // pinned.
            let segment = unsafe { &*segment_ptr };
            // Give up at once if there is nothing to claim.
            let next_ticket = segment.deq.load(Ordering::SeqCst);
            if !Self::published(segment, next_ticket) && Self::exhausted(segment, next_ticket) {
                return Err(PopError::Empty);
            }
            let ticket = segment.deq.fetch_add(1, Ordering::SeqCst);
            if let Some(cell) = segment.cell(ticket) {
                // A full plain cell can only be left by its ticket holder: take it. The state
                // stays `FULL` (no write to a line the pushers share): a cell whose ticket is
                // below `deq` is consumed whatever its state says, and nobody reads it again.
                if cell.state.load(Ordering::Acquire) == FULL {
                    // SAFETY: the state was `FULL` and ticket `ticket` is ours alone, so the
                    // value is initialized, visible (Acquire), and ours to move, once.
                    return Ok(unsafe { cell.read() });
                }
                match Self::take_contended(segment, ticket) {
                    Contended::Taken(item) => return Ok(item),
                    Contended::Poisoned => return Err(PopError::Transient),
                    Contended::Revoked => continue,
                }
            }
            if !self.advance_head(segment_ptr, guard) {
                return Err(PopError::Empty);
            }
        }
    }

    /// Whether the cell of the next pop ticket already holds a value (or a revoked one): then
    /// the queue is not empty, and the pop need not read the push ticket counter, the line
    /// every push writes.
    #[inline]
    fn published(segment: &Segment<T, SEGMENT>, next_ticket: usize) -> bool {
        segment
            .cell(next_ticket)
            .is_some_and(|cell| cell.state.load(Ordering::Relaxed) != EMPTY)
    }

    /// Whether every push ticket of `segment` below `next_ticket` has gone to a pop and no
    /// segment follows: the queue is empty.
    #[cold]
    fn exhausted(segment: &Segment<T, SEGMENT>, next_ticket: usize) -> bool {
        next_ticket >= segment.enq.load(Ordering::SeqCst)
            && segment.link.next.load(Ordering::SeqCst).is_null()
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

    /// About how many items the queue holds: exact when no operation is in flight.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue: Queue<u32, 4> = Queue::with_segment_size();
    /// (0..10).for_each(|i| queue.push(i));
    /// queue.pop();
    /// assert_eq!(queue.size_guess(), 9);
    /// ```
    pub fn size_guess(&self) -> usize {
        let _guard = pin();
        let head_ptr = self.head.load(Ordering::Acquire);
        let tail_ptr = self.tail.load(Ordering::Acquire);
        // SAFETY: neither pointer is null, and we are pinned.
        let (head, tail) = unsafe { (&*head_ptr, &*tail_ptr) };
        let popped = head.link.number * SEGMENT + head.deq.load(Ordering::Relaxed).min(SEGMENT);
        let pushed = tail.link.number * SEGMENT + tail.enq.load(Ordering::Relaxed).min(SEGMENT);
        pushed.saturating_sub(popped)
    }

    /// Pins the calling thread for as long as the returned [`Session`] lives, so that the
    /// operations it makes meanwhile (on any queue) skip the fence of their own pin: on the
    /// machines pitlane is measured on, that fence is about a third of an uncontended push
    /// and pop. Hold it only while the thread keeps using queues, and call
    /// [`Session::refresh`] every few hundred operations: while a session lives, memory retired
    /// by any thread since it began cannot be reclaimed.
    ///
    /// ```
    /// use pitlane_queue::mpmc::Queue;
    ///
    /// let queue = Queue::new();
    /// let mut session = queue.session();
    /// for round in 0..1000 {
    ///     queue.push(round);
    ///     assert_eq!(queue.pop(), Some(round));
    ///     if round % 256 == 255 {
    ///         session.refresh();
    ///     }
    /// }
    /// ```
    pub fn session(&self) -> Session {
        Session(pin())
    }

    /// A handle for the calling thread: the queue's operations with the thread pinned by a
    /// [`Session`] the handle holds and refreshes every 256 operations, so that no operation
    /// pays for a pin of its own. Drop it when the thread stops using the queue for a while.
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
            session: RefCell::new(self.session()),
            operations: Cell::new(0),
        }
    }

    /// The push of `item` whose cell state becomes `tag` (`FULL`, or its handle's address), for
    /// a thread pinned by `guard`.
    #[inline]
    fn try_push_tagged(&self, item: T, tag: usize, guard: &Guard) -> Result<(), T> {
        let segment_ptr = self.tail.load(Ordering::Acquire);
        // SAFETY: `tail` is never null, and we are pinned.
        let segment = unsafe { &*segment_ptr };
        let ticket = segment.enq.fetch_add(1, Ordering::SeqCst);
        match segment.cell(ticket) {
            Some(cell) => Self::publish(cell, item, tag),
            None => self.push_past_full(segment_ptr, item, tag, guard),
        }
    }

    /// Writes `item` into the cell our ticket named and tries to publish it.
    #[inline]
    fn publish(cell: &Slot<T>, item: T, tag: usize) -> Result<(), T> {
        // SAFETY: our push ticket is the only one for this cell, so nobody else writes or reads
        // the value until the state says it is full.
        unsafe { cell.write(item) };
        let at = cell as *const Slot<T> as usize;
        if tag != FULL {
            // SAFETY: `tag` is the handle of the item we just wrote; it lives while the item does.
            unsafe { slot::handle_of(tag) }.set(at);
        }
        match cell
            .state
            .compare_exchange(EMPTY, tag, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            Err(_) => Err(Self::unpublish(cell, tag)),
        }
    }

    /// The publishing CAS failed: a pop poisoned the cell. Take the value back.
    #[cold]
    fn unpublish(cell: &Slot<T>, tag: usize) -> T {
        // SAFETY: the pop that poisoned the cell never touches the value; we wrote it and still
        // own it.
        let item = unsafe { cell.read() };
        if tag != FULL {
            // SAFETY: `item` is alive, so is its handle.
            unsafe { slot::handle_of(tag) }.clear_if(cell as *const Slot<T> as usize);
        }
        item
    }

    /// Our ticket fell past the end of the tail segment: link a new segment holding `item`, or
    /// move to the one another push linked and take a ticket there.
    #[cold]
    fn push_past_full(
        &self,
        mut segment_ptr: *mut Segment<T, SEGMENT>,
        item: T,
        tag: usize,
        _guard: &Guard,
    ) -> Result<(), T> {
        loop {
            // SAFETY: `segment_ptr` was read from `tail` while pinned.
            let segment = unsafe { &*segment_ptr };
            let next = segment.link.next.load(Ordering::Acquire);
            if next.is_null() {
                let fresh = Segment::with_first(segment.link.number + 1, item, tag);
                return match segment.link.next.compare_exchange(
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
                        // Another push linked a segment first; help it along and report the
                        // lost race.
                        let _ = self.tail.compare_exchange(
                            segment_ptr,
                            linked,
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        );
                        // SAFETY: the CAS failed, so nobody else ever saw `fresh`.
                        Err(unsafe { Segment::unmake(fresh, tag) })
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
                return Self::publish(cell, item, tag);
            }
        }
    }

    /// The cell of pop ticket `ticket` was not simply full: wait briefly for its pusher, then
    /// settle the cell's fate with one swap.
    #[cold]
    fn take_contended(segment: &Segment<T, SEGMENT>, ticket: usize) -> Contended<T> {
        let cell = segment.cell(ticket).expect("a ticket inside the segment");
        // Wait only if a push holds this ticket: otherwise no value is on its way.
        #[cfg(not(pitlane_loom))]
        if ticket < segment.enq.load(Ordering::Relaxed) {
            for _ in 0..PATIENCE {
                if cell.state.load(Ordering::Relaxed) != EMPTY {
                    break;
                }
                spin_loop();
            }
        }
        let state = cell.state.swap(TAKEN, Ordering::AcqRel);
        match state {
            EMPTY => Contended::Poisoned,
            REVOKED => {
                // SAFETY: a revoked cell still holds its value, and our swap made it ours; the
                // handle is not touched (the revoker cleared it).
                drop(unsafe { cell.read() });
                Contended::Revoked
            }
            _ => {
                debug_assert!(state == FULL || slot::is_tracked(state), "state {state}");
                // SAFETY: we moved the state out of a full state, so the value is ours, and the
                // Acquire half of the swap made the pusher's write visible.
                let item = unsafe { cell.read() };
                if state != FULL {
                    // SAFETY: we own `item`, whose handle `state` names.
                    unsafe { revoke::release_handle(state, cell as *const Slot<T> as usize) };
                }
                Contended::Taken(item)
            }
        }
    }

    /// Every cell of the head segment has been handed to a pop. Move `head` to the successor
    /// and retire the old segment; `false` if there is no successor (the queue is empty).
    #[cold]
    fn advance_head(&self, segment_ptr: *mut Segment<T, SEGMENT>, guard: &Guard) -> bool {
        // SAFETY: read from `head` while pinned.
        let segment = unsafe { &*segment_ptr };
        let next = segment.link.next.load(Ordering::SeqCst);
        if next.is_null() {
            return false;
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
            unsafe { self.retire(segment_ptr, guard) };
        }
        true
    }

    /// Frees an unlinked segment once no thread can touch it.
    ///
    /// # Safety
    /// `segment` is reachable from neither `head` nor `tail`, and is retired once.
    #[cfg(not(pitlane_loom))]
    unsafe fn retire(&self, segment: *mut Segment<T, SEGMENT>, guard: &Guard) {
        // Three grace periods: one for the threads that may hold the segment, two more for
        // revokers that may hold a stale cell address (see `revoke`).
        // SAFETY: forwarded from the caller.
        unsafe { defer_free(SegmentPtr(segment), 3, guard) };
    }

    /// Under loom: keep the unlinked segment until the queue is dropped.
    ///
    /// # Safety
    /// As for the epoch version.
    #[cfg(pitlane_loom)]
    unsafe fn retire(&self, segment: *mut Segment<T, SEGMENT>, _guard: &Guard) {
        loop {
            let top = self.retired.load(Ordering::Acquire);
            // SAFETY: the segment is still allocated; only its retirer writes `retired_next`.
            let link = unsafe { &(*segment).link };
            link.retired_next.store(top, Ordering::Relaxed);
            if self
                .retired
                .compare_exchange(top, segment, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// A thread's pin on the epoch, held across operations; see [`Queue::session`].
pub struct Session(Guard);

/// One thread's pinned access to a [`Queue`]; see [`Queue::handle`]. Neither `Send` nor `Sync`.
pub struct Handle<'q, T, const SEGMENT: usize = DEFAULT_SEGMENT> {
    queue: &'q Queue<T, SEGMENT>,
    session: RefCell<Session>,
    operations: Cell<u32>,
}

/// Operations between two refreshes of a handle's session.
const REFRESH_EVERY: u32 = 256;

impl<T, const SEGMENT: usize> Handle<'_, T, SEGMENT> {
    /// Counts an operation, refreshing the session every [`REFRESH_EVERY`].
    #[inline]
    fn tick(&self) {
        let done = self.operations.get().wrapping_add(1);
        self.operations.set(done);
        if done % REFRESH_EVERY == 0 {
            self.refresh();
        }
    }

    #[cold]
    fn refresh(&self) {
        self.session.borrow_mut().refresh();
    }

    /// [`Queue::try_push`] without a pin of its own.
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), T> {
        self.tick();
        self.queue.try_push_in(item, &self.session.borrow())
    }

    /// [`Queue::push`] without a pin of its own.
    #[inline]
    pub fn push(&self, item: T) {
        crate::weak_bag::retry_push(item, |item| self.try_push(item))
    }

    /// [`Queue::try_pop`] without a pin of its own.
    #[inline]
    pub fn try_pop(&self) -> Result<T, PopError> {
        self.tick();
        self.queue.try_pop_in(&self.session.borrow())
    }

    /// [`Queue::pop`] without a pin of its own.
    #[inline]
    pub fn pop(&self) -> Option<T> {
        crate::weak_bag::retry_pop(|| self.try_pop())
    }

    /// The queue this handle works on.
    pub fn queue(&self) -> &Queue<T, SEGMENT> {
        self.queue
    }
}

impl<T, const SEGMENT: usize> fmt::Debug for Handle<'_, T, SEGMENT> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle").field("queue", self.queue).finish()
    }
}

impl Session {
    /// Renews the pin, letting memory retired since it began be reclaimed.
    pub fn refresh(&mut self) {
        #[cfg(not(pitlane_loom))]
        self.0.repin();
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Session")
    }
}

/// A segment address that a deferred function may carry to another thread.
#[cfg(not(pitlane_loom))]
struct SegmentPtr<T, const SEGMENT: usize>(*mut Segment<T, SEGMENT>);

/// Frees `segment` after `rounds` grace periods, each deferred from the previous one.
///
/// # Safety
/// `segment` is unlinked, retired once, and every cell's value has been moved out (the
/// segment holds no `T`), so freeing it on any thread is sound.
#[cfg(not(pitlane_loom))]
unsafe fn defer_free<T, const SEGMENT: usize>(
    segment: SegmentPtr<T, SEGMENT>,
    rounds: u32,
    guard: &Guard,
) {
    let run = move || {
        if rounds > 1 {
            // SAFETY: same segment, same contract, one round fewer.
            unsafe { defer_free(segment, rounds - 1, &pin()) };
        } else {
            // SAFETY: the last grace period has passed; no thread can reach the segment.
            drop(unsafe { Box::from_raw(segment.0) });
        }
    };
    // SAFETY: the function only frees memory that holds no `T` (every cell was taken,
    // poisoned or revoked before the head moved past it), which any thread may do.
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
                segment.cells[Segment::<T, SEGMENT>::cell_index(ticket)].drop_in_place();
            }
            segment_ptr = segment.link.next.load(Ordering::Relaxed);
        }
        #[cfg(pitlane_loom)]
        {
            let mut retired = self.retired.load(Ordering::Relaxed);
            while !retired.is_null() {
                // SAFETY: retired segments are owned by the queue under loom and hold no value.
                let segment = unsafe { Box::from_raw(retired) };
                retired = segment.link.retired_next.load(Ordering::Relaxed);
            }
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
            .field("size_guess", &self.size_guess())
            .finish()
    }
}

impl<T, const SEGMENT: usize> WeakBag for Queue<T, SEGMENT> {
    type Item = T;

    #[inline]
    fn try_push(&self, item: T) -> Result<(), T> {
        Queue::try_push(self, item)
    }

    #[inline]
    fn try_pop(&self) -> Result<T, PopError> {
        Queue::try_pop(self)
    }

    #[inline]
    fn try_push_in(&self, item: T, session: &Session) -> Result<(), T> {
        self.try_push_tagged(item, FULL, &session.0)
    }

    #[inline]
    fn try_pop_in(&self, session: &Session) -> Result<T, PopError> {
        self.try_pop_pinned(&session.0)
    }

    fn size_guess(&self) -> usize {
        Queue::size_guess(self)
    }

    type Session<'a>
        = Session
    where
        Self: 'a;

    fn session(&self) -> Session {
        Queue::session(self)
    }
}

impl<T: Revocable, const SEGMENT: usize> RevocableBag for Queue<T, SEGMENT> {
    fn try_push_revocable(&self, item: T) -> Result<(), T> {
        let tag = item.revoke_handle().tag();
        self.try_push_tagged(item, tag, &pin())
    }

    unsafe fn revoke(item: &T) -> bool {
        let _guard = pin();
        // SAFETY: we are pinned from before the handle is read until the last access to the
        // slot, and the segment protocol keeps the slot's segment allocated that long (see the
        // `revoke` module); the bag itself is alive by the caller's contract.
        unsafe { revoke::revoke_slot(item) }
    }
}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    fn spread_is_a_permutation<const N: usize>() {
        let mut seen = [false; N];
        for ticket in 0..N {
            let index = Segment::<u64, N>::cell_index(ticket);
            assert!(index < N, "ticket {ticket} of {N} maps to {index}");
            assert!(!seen[index], "two tickets of {N} map to cell {index}");
            seen[index] = true;
        }
    }

    #[test]
    fn tickets_map_to_distinct_cells() {
        spread_is_a_permutation::<1>();
        spread_is_a_permutation::<2>();
        spread_is_a_permutation::<3>();
        spread_is_a_permutation::<8>();
        spread_is_a_permutation::<12>();
        spread_is_a_permutation::<1024>();
    }

    #[test]
    fn neighbouring_tickets_use_different_lines() {
        let line = |ticket| Segment::<u64, 1024>::cell_index(ticket) * size_of::<Slot<u64>>() / 64;
        for ticket in 0..1023 {
            assert_ne!(
                line(ticket),
                line(ticket + 1),
                "tickets {ticket} and {}",
                ticket + 1
            );
        }
    }
}
