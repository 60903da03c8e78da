//! The B-Queue: a bounded single-producer single-consumer queue whose two ends share no index.
//!
//! After Junchang Wang, Kai Zhang, Xinan Tang and Bei Hua, "B-Queue: Efficient and Practical
//! Queuing for Fast Core-to-Core Communication", *International Journal of Parallel Programming*
//! 41(1), 2013. The producer and the consumer keep their positions to themselves and coordinate
//! only through a state word in every slot, so the line that carries a value is the only line
//! that moves between their caches.
//!
//! ```
//! use pitlane_queue::spsc::{self, PopError};
//!
//! let (mut producer, mut consumer) = spsc::channel::<String>(4);
//! let worker = std::thread::spawn(move || {
//!     for word in ["never", "blocks"] {
//!         let mut word = word.to_string();
//!         // A full queue hands the value back; try again later.
//!         while let Err(full) = producer.try_push(word) {
//!             word = full.into_inner();
//!             std::thread::yield_now();
//!         }
//!     }
//! });
//! let mut received = Vec::new();
//! while received.len() < 2 {
//!     match consumer.try_pop() {
//!         Ok(word) => received.push(word),
//!         // The only failure of this queue: nothing to pop yet.
//!         Err(PopError::Empty | PopError::Transient) => std::thread::yield_now(),
//!     }
//! }
//! worker.join().unwrap();
//! assert_eq!(received, ["never", "blocks"]);
//! assert!(consumer.is_abandoned());
//! ```
//!
//! # The protocol
//!
//! The queue is a ring of `capacity` slots. Each slot holds room for one `T` and a state word,
//! *full* or *empty*; the paper uses a null value as "empty", which a generic `T` cannot spare,
//! so the state lives beside the value, in the same cache line for small `T`.
//!
//! - The **producer** writes the value, then stores *full* with `Release`. It only writes into
//!   slots it has seen *empty*.
//! - The **consumer** reads the value, then stores *empty* with `Release`. It only reads slots
//!   it has seen *full*.
//!
//! Because each end walks the ring in order, one observation covers a whole run of slots: if
//! the slot `d - 1` places ahead of the producer is empty, the consumer has already taken every
//! value up to it, so all `d` slots are free; if the slot `d - 1` places ahead of the consumer is
//! full, the producer has already written all `d` values, and the `Acquire` load of that one
//! state made all of them visible. Each end therefore probes once per *batch* and then runs
//! through the batch touching only the slots themselves (the paper's **batching**, used on both
//! ends).
//!
//! When the probe finds nothing at distance `d`, the end halves `d` and probes again, down to
//! one slot (the paper's **backtracking**). A batch-sized gap is thus never needed for progress:
//! a single value is found as soon as it is there, and no garbage or timer is needed to flush a
//! half-filled batch, which is the deadlock the paper cures in MCRingBuffer. The size that
//! succeeded becomes the starting point of the next search, which grows it back by `increment`
//! each time (**self-adaptive backtracking**, the paper's Fig. 10).
//!
//! Two departures from the paper, both in what an end *reports*:
//!
//! - The search starts by looking at the very next slot. If it is not usable, the end reports
//!   *empty* (or *full*) at once; the authors' C code never reports empty once its batch size
//!   reaches zero, and the paper's search would reach the same verdict after `log2(batch)`
//!   probes. Looking at the next slot costs nothing extra when it is usable: the end is about to
//!   touch that line anyway.
//! - The producer backtracks too. The paper's producer says "full" whenever the slot a batch
//!   ahead is taken; here [`Producer::try_push`] fails only when the queue really holds
//!   `capacity` values.
//!
//! And one shortcut in how it searches: when the last search settled on a run of one (values
//! come one at a time, as in a ping-pong) and the slot after the usable one is not usable
//! either, the run is that one slot, found with one load of the neighbour instead of the
//! halving probes of far lines; as soon as the neighbour is usable the adaptive search runs as
//! above. With adaptation off every search starts from the whole batch, as the paper's plain
//! backtracking does.
//!
//! The paper's search waits `spin_wait(TICKS)` before each shorter probe, so that an end that
//! has caught up with the other lets it get ahead instead of sharing cache lines with it item
//! by item. Here that wait is kept only where it pays and bounded: when an end *streams* (its
//! previous search found a run, so the other end is producing or consuming right ahead of it)
//! and the far end of the new batch is not ready yet, it spins up to 32 spin hints watching
//! that one slot, then backtracks as usual. An end that has just reported "empty" (or "full")
//! never waits, so a lone value is handed over without delay. No call ever blocks.
//!
//! A batch never wraps around the end of the ring, so the fast path of a push or a pop is one
//! slot access, one state store and one pointer bump, with no modulo and no shared load.
//!
//! # Linearization points
//!
//! - A successful push takes effect at its `Release` store of *full* into the slot.
//! - A push that fails takes effect at its `Acquire` load that read *full* from the slot at the
//!   producer's position: that slot still holds the value pushed `capacity` places earlier, so
//!   the queue holds `capacity` values.
//! - A successful pop takes effect at its `Release` store of *empty* into the slot (after it has
//!   read the value out); a successful peek at the load that found the slot full, or, inside a
//!   batch, at the probe that covered it.
//! - A pop that fails takes effect at its `Acquire` load that read *empty* from the slot at the
//!   consumer's position: the value that would come next has not been pushed.
//! - A chunk commit of `k` slots is not one atomic step but `k` pushes (pops), each taking
//!   effect at its own store, first slot first; the other end may see any prefix of them, and
//!   never a later slot without the earlier ones. Getting a chunk changes nothing in the queue
//!   (nor does filling a [`WriteChunk`] with defaults, or changing a chunk's values in place);
//!   a chunk that could not be had takes effect at the instant that the count in its
//!   [`ChunkError`] describes, a snapshot taken after the probe of its far slot failed, and
//!   always below the size asked for: if the other end brought the count up to that size
//!   meanwhile, the chunk is had after all.
//!   `pop_entire_slice_uninit` is the commit of a read chunk and `pop_partial_slice_uninit`
//!   a run of single pops: one pop per value, each at its own store of *empty*.
//! - `cached_slots` reads nothing the other end writes, so it is no snapshot of the queue: it
//!   counts the slots this end has already claimed, and the other end only adds free slots
//!   (or values) beyond them, so it never exceeds what `slots` would count at any instant of
//!   the call.
//!
//! # Chunks: values written and read in place
//!
//! [`Producer::write_chunk_uninit`] reserves `n` free slots at once and lets the caller write
//! each value where it will sit ([`WriteChunkUninit::slot`]); [`WriteChunkUninit::commit`]
//! publishes them. [`Producer::write_chunk`] does the same for a `T: Default` without `unsafe`:
//! it fills the slots with `T::default()`, lends the values to change in place
//! ([`WriteChunk::get_mut`], [`WriteChunk::iter_mut`]), and [`WriteChunk::commit`] publishes
//! some or all of them and drops the rest. [`Consumer::read_chunk`] lends `n` queued values in
//! place ([`ReadChunk::get`], [`ReadChunk::iter`], and [`ReadChunk::get_mut`],
//! [`ReadChunk::iter_mut`] to change them); [`ReadChunk::commit`] takes them out, and the
//! chunk's iterator moves them out one by one. [`Consumer::pop_entire_slice_uninit`] and
//! [`Consumer::pop_partial_slice_uninit`] copy values out into memory that need not be
//! initialised. Getting a chunk is one probe, as for a batch:
//! the far slot of the stretch is empty (full), so every slot before it is; only when that
//! probe fails does the end count the slots there are (for the error, or for the chunk, if
//! the other end has made the stretch ready meanwhile). A chunk may wrap
//! around the ring's end. After a chunk, the end starts over with a fresh probe where the chunk
//! ended. `std::io::Write` for `Producer<u8>` and `std::io::Read` for `Consumer<u8>` move bytes
//! without blocking.
//!
//! Slots are reached by index, not lent as slices as [`rtrb`](https://docs.rs/rtrb) does:
//! values are not contiguous, because each sits beside its own state so that one cache line
//! carries both from one end to the other. Keeping states in an array apart from the values
//! (which slices need) was measured slower on every workload where the two ends work close
//! together, up to 1.6× per round trip; `docs/notes/spsc-layout.md` has the figures.
//!
//! A write chunk's commit of `k` slots is `k` pushes in a row, a read chunk's `k` pops: one
//! `Release` store of the slot's new state per slot, in ring order, after the value was
//! written (moved out). The order matters, and it is the one the single operations use: the
//! consumer takes a full far slot as proof that the whole stretch before it is full, and starts
//! emptying those slots at once. Were the producer to store the states of a chunk from its last
//! slot backwards, the consumer could see the last one full, take the first slot while its
//! state was still empty, and have its store of empty overwritten by the producer's late store
//! of full: a value popped twice. Forwards, each `Release` store orders every earlier one, and
//! the `Acquire` load that sees the far slot full sees them all.
//!
//! # Capacity and batch size
//!
//! Any capacity of one or more works, with no slot wasted. The batch size is the longest run one
//! probe can claim; it may be anything from 1 to `capacity`. Each end holds at most one batch
//! claimed ahead of it, so with a batch of at most `capacity / 4` (the default caps it there)
//! both ends find work while the other is halfway through its own batch. The defaults need no
//! tuning ([`default_batch`], [`default_increment`]): a batch of `min(256, max(1, capacity / 4))`
//! slots, as in the paper's evaluation (2048 slots, batch 256, up to rounding), and an increment
//! of a quarter batch. [`Builder`] sets both, and can turn the adaptation off.
//!
//! # Ends and values
//!
//! Values still in the queue when both ends are gone are dropped, exactly once and oldest first
//! (as rtrb's), by whichever end is dropped last. Each end can ask
//! [`Producer::is_abandoned`] / [`Consumer::is_abandoned`] whether the other is gone. Neither
//! end is `Clone`; both are `Send` when `T` is, and both are `UnwindSafe` and
//! `RefUnwindSafe`: a panic in user code (an iterator, a `Clone`, a `Default`, a `Drop`) leaves
//! an end consistent, with every value it had taken in or out accounted for.
//!
//! # Coming from rtrb
//!
//! Most operations of [`rtrb`](https://docs.rs/rtrb) are here, some under other names:
//! `RingBuffer::new(n)` is [`channel`]`(n)` (or [`try_channel`] for an error instead of a
//! panic), `push`/`pop` are [`Producer::try_push`]/[`Consumer::try_pop`] (the crate's
//! vocabulary keeps `push`/`pop` for calls that retry transient failures),
//! `buffer().capacity()` is `capacity()`, `push_partial_slice`/`pop_partial_slice` are
//! [`Producer::push_slice`]/[`Consumer::pop_slice`] (they return a count, not the two halves
//! of the slice), `ReadChunkIntoIter::iterated` is [`ReadChunk::iterated`] (a read chunk is
//! its own iterator), and `PeekError` is [`PopError`]; `peek`, `slots`, `cached_slots`,
//! `is_full`, `is_empty`, `is_abandoned`, `push_entire_slice`, `pop_entire_slice`,
//! `pop_entire_slice_uninit`, `pop_partial_slice_uninit`, `write_chunk`, `write_chunk_uninit`,
//! `fill_from_iter`, `read_chunk`, `commit`, `commit_all`, [`WriteChunk`] and [`ChunkError`]
//! keep their names.
//! The capacity is exact, as rtrb's: a queue of `n` slots holds exactly `n` values, whatever
//! the batch size (batches are how far one probe looks, never a unit of allocation).
//!
//! rtrb's own test files run against this module in CI (`.ci/rtrb-conformance.py`, through an
//! adapter that only renames). What they check holds, except where the two differ on purpose:
//!
//! - A capacity of 0 is an error ([`ChannelError::ZeroCapacity`]); rtrb makes a queue that is
//!   always full and always empty.
//! - Chunks lend slots by index ([`WriteChunkUninit::slot`], [`WriteChunk::get_mut`],
//!   [`ReadChunk::get`], [`ReadChunk::get_mut`], and the chunks' `iter`/`iter_mut`), not as
//!   the two slices of rtrb's `as_slices`/`as_mut_slices`: see "Chunks" above for why the
//!   values are not contiguous.
//! - `cached_slots` keeps rtrb's promise (a lower bound of `slots`, read without touching
//!   what the other end writes), not rtrb's numbers: rtrb's counts from indices that every
//!   `slots()` refreshes, this one is the run the end's last probe claimed, and is often 0.
//! - A zero-sized `T` still costs each slot its state byte, so `usize::MAX / 2` slots of `()`,
//!   which rtrb allocates as nothing, fail with [`ChannelError::OutOfMemory`].
//! - `io::Write` on a producer whose consumer is gone fails with `BrokenPipe`, and `io::Read`
//!   on an empty queue whose producer is gone returns `Ok(0)`, the end of the stream; rtrb
//!   reports `WouldBlock` in both cases.
//! - The errors' `Debug` and `Display` texts are the crate's own, and the ends do not
//!   implement `PartialEq`.
//! - Not here: `as_slices`/`as_mut_slices` (above), rtrb's `From<WriteChunkUninit>` for
//!   `WriteChunk` (get the [`WriteChunk`] from [`Producer::write_chunk`]), and the
//!   `ReadChunkIntoIter` type (a [`ReadChunk`] iterates itself).
//!
//! `tests/differential_rtrb.rs` runs random scripts of these operations on rtrb and on this
//! module side by side and compares every result, every query and every value dropped, in
//! order, at every step.

use alloc::boxed::Box;
#[cfg(pitlane_loom)]
use alloc::vec::Vec;
use core::fmt;
use core::iter::FusedIterator;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::panic::{RefUnwindSafe, UnwindSafe};
use core::ptr::NonNull;

pub use crate::error::{PopError, PushError};
use pitlane_sync::shim::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use pitlane_sync::shim::cell::UnsafeCell;
use pitlane_sync::shim::hint::spin_loop;

/// The longest batch the defaults choose, whatever the capacity.
///
/// ```
/// use pitlane_queue::spsc::{MAX_DEFAULT_BATCH, default_batch};
///
/// assert_eq!(default_batch(1 << 20), MAX_DEFAULT_BATCH);
/// ```
pub const MAX_DEFAULT_BATCH: usize = 256;

/// How many spin hints an end that streams right behind the other waits, at most, for a whole
/// batch before it settles for less (see [`Ring::wait_for_far_end`]).
#[cfg(not(pitlane_loom))]
const PATIENCE: u32 = 32;
/// Under loom a spin hint is a yield: two keep the models small and still cover the wait.
#[cfg(pitlane_loom)]
const PATIENCE: u32 = 2;

/// The state of a slot that holds a value.
const FULL: bool = true;
/// The state of a slot that holds none.
const EMPTY: bool = false;

/// The batch size a queue of `capacity` slots gets unless [`Builder::batch`] says otherwise:
/// `min(256, max(1, capacity / 4))`.
///
/// ```
/// assert_eq!(pitlane_queue::spsc::default_batch(2048), 256);
/// assert_eq!(pitlane_queue::spsc::default_batch(16), 4);
/// assert_eq!(pitlane_queue::spsc::default_batch(2), 1);
/// ```
pub const fn default_batch(capacity: usize) -> usize {
    let quarter = capacity / 4;
    if quarter == 0 {
        1
    } else if quarter > MAX_DEFAULT_BATCH {
        MAX_DEFAULT_BATCH
    } else {
        quarter
    }
}

/// The increment of self-adaptive backtracking for a batch of `batch` slots unless
/// [`Builder::increment`] says otherwise: `max(1, batch / 4)`.
///
/// ```
/// assert_eq!(pitlane_queue::spsc::default_increment(256), 64);
/// assert_eq!(pitlane_queue::spsc::default_increment(2), 1);
/// ```
pub const fn default_increment(batch: usize) -> usize {
    if batch < 4 { 1 } else { batch / 4 }
}

/// Creates a queue of `capacity` slots with the default batch size, and returns its two ends.
///
/// # Panics
///
/// If `capacity` is zero, or so large that the slots do not fit in memory. Use [`try_channel`]
/// to get an error instead.
///
/// ```
/// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u64>(2);
/// producer.try_push(1).unwrap();
/// producer.try_push(2).unwrap();
/// assert!(producer.try_push(3).is_err());
/// assert_eq!(consumer.try_pop(), Ok(1));
/// ```
#[track_caller]
pub fn channel<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    match try_channel(capacity) {
        Ok(ends) => ends,
        Err(error) => panic!("pitlane_queue::spsc::channel({capacity}): {error}"),
    }
}

/// Creates a queue of `capacity` slots with the default batch size, or says why it cannot.
///
/// ```
/// use pitlane_queue::spsc::{self, ChannelError};
///
/// assert_eq!(spsc::try_channel::<u8>(0).unwrap_err(), ChannelError::ZeroCapacity);
/// let (producer, _consumer) = spsc::try_channel::<u8>(3)?;
/// assert_eq!(producer.capacity(), 3);
/// # Ok::<(), ChannelError>(())
/// ```
pub fn try_channel<T>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), ChannelError> {
    Builder::new(capacity).build()
}

/// Sets up a queue with a chosen batch size and adaptation.
///
/// ```
/// use pitlane_queue::spsc::Builder;
///
/// let (mut producer, mut consumer) = Builder::new(1024).batch(64).increment(16).build::<u32>()?;
/// assert_eq!(producer.push_iter(0..10), 10);
/// assert_eq!(consumer.try_iter().sum::<u32>(), 45);
/// # Ok::<(), pitlane_queue::spsc::ChannelError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    capacity: usize,
    batch: Option<usize>,
    increment: Option<usize>,
    adaptive: bool,
}

impl Builder {
    /// A queue of `capacity` slots with the default batch size and adaptive backtracking.
    ///
    /// ```
    /// let (producer, _consumer) = pitlane_queue::spsc::Builder::new(8).build::<u8>().unwrap();
    /// assert_eq!(producer.capacity(), 8);
    /// ```
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            batch: None,
            increment: None,
            adaptive: true,
        }
    }

    /// The longest run of slots one probe may claim, on both ends (`1..=capacity`; anything
    /// else makes [`build`](Self::build) fail).
    ///
    /// ```
    /// use pitlane_queue::spsc::{Builder, ChannelError};
    ///
    /// assert!(Builder::new(8).batch(8).build::<u8>().is_ok());
    /// assert_eq!(
    ///     Builder::new(8).batch(9).build::<u8>().unwrap_err(),
    ///     ChannelError::BatchOutOfRange { batch: 9, capacity: 8 }
    /// );
    /// ```
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = Some(batch);
        self
    }

    /// How much the starting distance of a search grows after each search (at least 1; any
    /// larger value, up to `usize::MAX`, only makes searches start from the full batch).
    ///
    /// ```
    /// use pitlane_queue::spsc::{Builder, ChannelError};
    ///
    /// assert!(Builder::new(8).increment(usize::MAX).build::<u8>().is_ok());
    /// assert_eq!(Builder::new(8).increment(0).build::<u8>().unwrap_err(), ChannelError::ZeroIncrement);
    /// ```
    pub fn increment(mut self, increment: usize) -> Self {
        self.increment = Some(increment);
        self
    }

    /// Whether a search starts from the size that last succeeded (`true`, the default, the
    /// paper's self-adaptive backtracking) or always from the full batch (`false`, its plain
    /// backtracking).
    ///
    /// ```
    /// let (mut producer, mut consumer) =
    ///     pitlane_queue::spsc::Builder::new(4).adaptive(false).build::<u8>().unwrap();
    /// producer.try_push(1).unwrap();
    /// assert_eq!(consumer.try_pop(), Ok(1));
    /// ```
    pub fn adaptive(mut self, adaptive: bool) -> Self {
        self.adaptive = adaptive;
        self
    }

    /// Allocates the ring and returns the two ends, or says why it cannot (a bad setting, or
    /// an allocation the allocator refused: never an abort).
    ///
    /// ```
    /// use pitlane_queue::spsc::{Builder, ChannelError};
    ///
    /// assert_eq!(Builder::new(0).build::<u8>().unwrap_err(), ChannelError::ZeroCapacity);
    /// assert!(matches!(
    ///     Builder::new(usize::MAX).build::<u64>(),
    ///     Err(ChannelError::CapacityOverflow)
    /// ));
    /// // 4 EiB: within the address space's size, beyond any machine's memory.
    /// # #[cfg(target_pointer_width = "64")]
    /// assert!(matches!(
    ///     Builder::new(1 << 58).build::<u64>(),
    ///     Err(ChannelError::OutOfMemory { .. })
    /// ));
    /// ```
    pub fn build<T>(self) -> Result<(Producer<T>, Consumer<T>), ChannelError> {
        let capacity = self.capacity;
        if capacity == 0 {
            return Err(ChannelError::ZeroCapacity);
        }
        if core::alloc::Layout::array::<Slot<T>>(capacity).is_err() {
            return Err(ChannelError::CapacityOverflow);
        }
        let batch = self.batch.unwrap_or(default_batch(capacity));
        if batch == 0 || batch > capacity {
            return Err(ChannelError::BatchOutOfRange { batch, capacity });
        }
        let increment = self.increment.unwrap_or(default_increment(batch));
        if increment == 0 {
            return Err(ChannelError::ZeroIncrement);
        }
        let batching = Batching {
            max: batch,
            increment: if self.adaptive { increment } else { 0 },
            history: batch,
            streaming: false,
        };

        let slots = allocate_slots::<T>(capacity)?;
        // The box both ends share, allocated fallibly too: `Box::new` would abort the process
        // if the allocator refused these few bytes. Refused, the slots are freed as `slots`
        // drops here (a slot has no drop glue of its own; no value is in them yet).
        let Some(shared) = allocate_shared::<T>() else {
            return Err(out_of_memory::<T>(capacity));
        };
        // SAFETY: `shared` is a fresh allocation with the layout of a `Shared<T>`, which this
        // write initialises; nothing else refers to it yet.
        unsafe {
            shared.as_ptr().write(Shared {
                slots,
                gone: AtomicU8::new(0),
                consumer_at: AtomicUsize::new(0),
            });
        }
        let ring = Ring {
            // SAFETY: `shared` was just initialised above, and is freed only when both ends
            // leave.
            slots: NonNull::from(&*unsafe { shared.as_ref() }.slots).cast::<Slot<T>>(),
            capacity,
            _values: PhantomData,
        };
        let producer = Producer {
            ring,
            run: Run::empty_at(ring.slots),
            batching: batching.clone(),
            shared,
        };
        let consumer = Consumer {
            ring,
            run: Run::empty_at(ring.slots),
            batching,
            shared,
        };
        Ok((producer, consumer))
    }
}

/// `capacity` empty slots, or [`ChannelError::OutOfMemory`] if the allocator cannot provide
/// them (never an abort).
///
/// The slots come from a zeroed allocation, which is what an empty slot is (the state word
/// [`EMPTY`] is `false`, the value uninitialised): nothing is written, so a large ring costs
/// no page until the producer reaches it, and a capacity the allocator grants under
/// overcommit cannot bring the out-of-memory killer at creation.
#[cfg(not(pitlane_loom))]
fn allocate_slots<T>(capacity: usize) -> Result<Box<[Slot<T>]>, ChannelError> {
    const { assert!(!EMPTY, "a zeroed slot must be an empty one") };
    let layout = core::alloc::Layout::array::<Slot<T>>(capacity)
        .map_err(|_| ChannelError::CapacityOverflow)?;
    if layout.size() == 0 {
        // Unreachable (a slot holds a state byte and the capacity is at least 1), but an
        // allocation of size 0 would be undefined behaviour, so it is refused here too.
        return Err(ChannelError::ZeroCapacity);
    }
    // SAFETY: the layout's size is not zero.
    let first = unsafe { alloc::alloc::alloc_zeroed(layout) }.cast::<Slot<T>>();
    if first.is_null() {
        return Err(out_of_memory::<T>(capacity));
    }
    // SAFETY: `first` is a live allocation of the global allocator with the layout of
    // `capacity` slots, which is the layout `Box<[Slot<T>]>` frees with; all-zero bytes are a
    // valid `Slot<T>` (an `AtomicBool` holding `false`, which is `EMPTY`, and a `MaybeUninit`
    // that may hold anything), so every element is initialised.
    Ok(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(first, capacity)) })
}

/// Under loom the atomics and cells are model objects that zeroed bytes are not: build each.
#[cfg(pitlane_loom)]
fn allocate_slots<T>(capacity: usize) -> Result<Box<[Slot<T>]>, ChannelError> {
    let mut slots = Vec::new();
    if slots.try_reserve_exact(capacity).is_err() {
        return Err(out_of_memory::<T>(capacity));
    }
    slots.extend((0..capacity).map(|_| Slot::new()));
    Ok(slots.into_boxed_slice())
}

/// Uninitialised memory for the box both ends share, from the global allocator with the layout
/// `Box<Shared<T>>` frees with (the last end to leave rebuilds the box: [`Shared::leave`]), or
/// `None` if the allocator refuses it (never an abort).
fn allocate_shared<T>() -> Option<NonNull<Shared<T>>> {
    let layout = core::alloc::Layout::new::<Shared<T>>();
    // SAFETY: a `Shared<T>` holds a boxed slice, so its size is not zero.
    NonNull::new(unsafe { alloc::alloc::alloc(layout) }.cast::<Shared<T>>())
}

/// The error for `capacity` slots the allocator refused.
fn out_of_memory<T>(capacity: usize) -> ChannelError {
    ChannelError::OutOfMemory {
        capacity,
        bytes: capacity.saturating_mul(core::mem::size_of::<Slot<T>>()),
    }
}

/// Why a queue could not be created.
///
/// ```
/// use pitlane_queue::spsc::{self, Builder, ChannelError};
///
/// assert_eq!(spsc::try_channel::<u8>(0).unwrap_err(), ChannelError::ZeroCapacity);
/// let error = Builder::new(4).batch(0).build::<u8>().unwrap_err();
/// assert_eq!(error, ChannelError::BatchOutOfRange { batch: 0, capacity: 4 });
/// assert_eq!(error.to_string(), "the batch size 0 is not in 1..=4");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelError {
    /// A queue needs at least one slot.
    ZeroCapacity,
    /// The slots would not fit in the address space.
    CapacityOverflow,
    /// The batch size must be at least 1 and at most the capacity.
    BatchOutOfRange {
        /// The batch size asked for.
        batch: usize,
        /// The capacity asked for.
        capacity: usize,
    },
    /// The increment of adaptive backtracking must be at least 1.
    ZeroIncrement,
    /// The allocator could not provide the slots, or the few bytes beside them that the two
    /// ends share (`bytes` counts the slots alone).
    OutOfMemory {
        /// The capacity asked for.
        capacity: usize,
        /// The bytes its slots need.
        bytes: usize,
    },
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCapacity => f.write_str("the capacity must be at least 1"),
            Self::CapacityOverflow => f.write_str("the capacity is too large to allocate"),
            Self::BatchOutOfRange { batch, capacity } => {
                write!(f, "the batch size {batch} is not in 1..={capacity}")
            }
            Self::ZeroIncrement => f.write_str("the backtracking increment must be at least 1"),
            Self::OutOfMemory { capacity, bytes } => write!(
                f,
                "out of memory: {capacity} slots need {bytes} bytes, which the allocator refused"
            ),
        }
    }
}

impl core::error::Error for ChannelError {}

/// One place in the ring.
struct Slot<T> {
    /// [`FULL`] while `value` holds a value the consumer has not taken, [`EMPTY`] otherwise.
    /// Only the producer turns it full and only the consumer turns it empty, each with
    /// `Release` after its access to `value`; each reads it with `Acquire` before its access.
    state: AtomicBool,
    /// Initialised exactly while `state` is full.
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Slot<T> {
    /// An empty slot (the loom build makes each; the others allocate them zeroed).
    #[cfg(pitlane_loom)]
    fn new() -> Self {
        Self {
            state: AtomicBool::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

/// What both ends own together: the slots and the news of each end's departure. It lives in a
/// box of its own that the last end to leave frees.
struct Shared<T> {
    slots: Box<[Slot<T>]>,
    /// [`PRODUCER_GONE`] and [`CONSUMER_GONE`], each set once, with `AcqRel`, by the end
    /// leaving. This is the reference count of the box as well: an end that finds the other's
    /// bit already set is the last and frees it. (A `std::sync::Arc` would do, but its fence
    /// is invisible to ThreadSanitizer, which then reports the free as a race.)
    gone: AtomicU8,
    /// The slot the consumer would have popped next, stored by the consumer as it leaves
    /// (before its update of `gone`, which publishes it), so that the values left are dropped
    /// oldest first, as rtrb, `VecDeque` and crossbeam's `ArrayQueue` drop theirs.
    consumer_at: AtomicUsize,
}

/// The bit of [`Shared::gone`] the producer sets when it is dropped.
const PRODUCER_GONE: u8 = 1;
/// The bit of [`Shared::gone`] the consumer sets when it is dropped.
const CONSUMER_GONE: u8 = 2;

impl<T> Shared<T> {
    /// Whether the end with bit `end` has left.
    fn has_left(&self, end: u8) -> bool {
        self.gone.load(Ordering::Acquire) & end != 0
    }

    /// The end with bit `end` leaves; the last of the two frees the box.
    ///
    /// # Safety
    /// `shared` points to the box made by [`Builder::build`], which this end has not left.
    unsafe fn leave(shared: NonNull<Self>, end: u8) {
        // SAFETY: this end has not left, so the box is still alive.
        let before = unsafe { shared.as_ref() }
            .gone
            .fetch_or(end, Ordering::AcqRel);
        if before != 0 {
            // SAFETY: the other end has left too (and its `AcqRel` update is ordered before
            // ours), so nothing else refers to the box; it was allocated by `allocate_shared`
            // with the global allocator and `Box<Shared<T>>`'s layout, and initialised by
            // `Builder::build`, which is what `Box::from_raw` needs.
            drop(unsafe { Box::from_raw(shared.as_ptr()) });
        }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        /// The slots not yet visited. If a value's `drop` panics, dropping this guard during
        /// the unwinding drops the values after it (as `Vec` does); a second panic aborts.
        struct Rest<'a, T> {
            slots:
                core::iter::Chain<core::slice::Iter<'a, Slot<T>>, core::slice::Iter<'a, Slot<T>>>,
        }

        impl<T> Rest<'_, T> {
            fn drop_values(&mut self) {
                for slot in self.slots.by_ref() {
                    if slot.state.load(Ordering::Acquire) == FULL {
                        // SAFETY: a full slot holds an initialised value that no end took;
                        // nothing else can reach it any more, and the iterator has moved past
                        // it, so it is dropped once (`slots` itself goes next).
                        slot.value
                            .with_mut(|value| unsafe { value.cast::<T>().drop_in_place() });
                    }
                }
            }
        }

        impl<T> Drop for Rest<'_, T> {
            fn drop(&mut self) {
                self.drop_values();
            }
        }

        // Values that need no drop need no visit (and a large ring's untouched pages stay
        // untouched).
        if !core::mem::needs_drop::<T>() {
            return;
        }
        // Both ends are gone, and the last one's `AcqRel` update of `gone` synchronised with
        // everything the other did, so every state word, and `consumer_at`, is final. The
        // values left are the full slots from the consumer's place on, around the ring: in the
        // order they were pushed.
        let (behind, ahead) = self.slots.split_at(
            self.consumer_at
                .load(Ordering::Relaxed)
                .min(self.slots.len()),
        );
        Rest {
            slots: ahead.iter().chain(behind),
        }
        .drop_values();
    }
}

/// The slots as seen by one end: a pointer into `Shared::slots`, valid until the end leaves.
struct Ring<T> {
    slots: NonNull<Slot<T>>,
    capacity: usize,
    _values: PhantomData<T>,
}

impl<T> Clone for Ring<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Ring<T> {}

impl<T> Ring<T> {
    /// The slot at `index`.
    ///
    /// # Safety
    /// `index < self.capacity`, and the end calling has not left.
    #[inline(always)]
    unsafe fn slot(&self, index: usize) -> &Slot<T> {
        debug_assert!(index < self.capacity);
        // SAFETY: by the caller, `index` is in bounds of the live boxed slice.
        unsafe { self.slots.add(index).as_ref() }
    }

    /// Claims the next run of slots in state `wanted` for an end whose `run` is used up; false
    /// (and `run` still used up) when the very next slot is not `wanted`, which means full
    /// (for the producer) or empty (for the consumer).
    ///
    /// # Safety
    /// `run` is this end's, used up, and the end has not left.
    #[inline(always)]
    unsafe fn claim(&self, run: &mut Run<T>, wanted: bool, batching: &mut Batching) -> bool {
        // The next slot, wrapping from one past the last slot to the first.
        // SAFETY: `capacity` is one past the last slot of the same allocation.
        let next = if run.next == unsafe { self.slots.add(self.capacity) } {
            self.slots
        } else {
            run.next
        };
        // Whether the next slot is usable decides between "a run of at least one" and
        // "full"/"empty"; this load is the linearization point of the failing operation.
        // SAFETY: `next` points at a slot of the live ring.
        if unsafe { next.as_ref() }.state.load(Ordering::Acquire) != wanted {
            batching.streaming = false;
            run.next = next;
            run.end = next;
            return false;
        }
        // SAFETY: as for this function, and the slot at `next` is `wanted`.
        unsafe { self.claim_from(next, run, wanted, batching) };
        true
    }

    /// The rest of [`Ring::claim`] once the next slot is known to be usable: out of line, so
    /// that a poll of an empty (or full) queue stays a few instructions. Not `#[cold]`: a
    /// streaming end comes here once per batch.
    ///
    /// # Safety
    /// As for `claim`, and `next` points at a slot of the ring seen `wanted`.
    #[inline(never)]
    unsafe fn claim_from(
        &self,
        next: NonNull<Slot<T>>,
        run: &mut Run<T>,
        wanted: bool,
        batching: &mut Batching,
    ) {
        // SAFETY: both point into the slots.
        let start = unsafe { next.offset_from(self.slots) } as usize;
        // SAFETY: `start < capacity` and its slot is `wanted`.
        let len = unsafe { self.probe_run(start, wanted, batching) };
        *run = self.run(start, len);
    }

    /// Searches for a run of slots in state `wanted` starting at `start`, whose own slot is
    /// known to be `wanted`: the batching and backtracking of the paper (Fig. 10), for either
    /// end. Returns the length of the run, at least 1; the run ends at or before the ring's end.
    ///
    /// # Safety
    /// `start < self.capacity`, the slot at `start` was seen `wanted`, and the end calling has
    /// not left.
    #[inline]
    unsafe fn probe_run(&self, start: usize, wanted: bool, batching: &mut Batching) -> usize {
        // Slot states change in ring order only, so a usable far end makes the whole run
        // usable, and its `Acquire` load synchronises with the other end's `Release` store
        // covering the run.
        let usable = |size: usize| {
            // SAFETY: callers pass `1 <= size <= capacity - start`, so the index is in bounds.
            unsafe { self.slot(start + size - 1) }
                .state
                .load(Ordering::Acquire)
                == wanted
        };
        // A lone slot: the last search settled on a run of one and the slot after this one
        // is not usable either, so this run is one slot. The halving search would probe the
        // far lines only to say so again (six loads and branches at the default batch, on
        // every pop of a ping-pong); one load of the neighbour, in the line just read or the
        // next, says it here. Not with adaptation off, whose searches always start at `max`.
        if batching.history == 1
            && batching.increment != 0
            && (start + 1 == self.capacity || !usable(2))
        {
            batching.streaming = true;
            return 1;
        }
        let first = batching.start().min(self.capacity - start);
        let mut size = first;
        if size > 1
            && !usable(size)
            && !(batching.streaming && self.wait_for_far_end(size, &usable))
        {
            // Halve the distance until the far end is usable; one slot always is.
            size /= 2;
            while size > 1 && !usable(size) {
                size /= 2;
            }
        }
        batching.streaming = true;
        if size < first {
            batching.history = size;
        }
        size
    }

    /// The paper's `spin_wait(TICKS)`: this end is streaming right behind the other, which is
    /// about to make the far end usable; a short bounded wait for it makes the next batch
    /// whole instead of touching the lines the other end is writing. Gives up after
    /// [`PATIENCE`] spin hints.
    #[cold]
    fn wait_for_far_end(&self, size: usize, usable: &impl Fn(usize) -> bool) -> bool {
        (0..PATIENCE).any(|_| {
            spin_loop();
            usable(size)
        })
    }

    /// Counts slots in state `wanted` from `start` onwards, by binary search; the states read
    /// run `wanted` … `wanted`, then the other state to the end of a lap, at any instant and
    /// the boundary only moves away from `start` while the calling end stands still.
    ///
    /// # Safety
    /// `start < self.capacity`, and the end calling has not left.
    unsafe fn count_run(&self, start: usize, known: usize, wanted: bool) -> usize {
        let (mut low, mut high) = (known, self.capacity);
        // Invariant: the first `low` slots were seen `wanted`; slot `high` (if < capacity) not.
        while low < high {
            let middle = low + (high - low) / 2;
            let mut index = start + middle;
            if index >= self.capacity {
                index -= self.capacity;
            }
            // SAFETY: `index < capacity`, wrapped above.
            if unsafe { self.slot(index) }.state.load(Ordering::Acquire) == wanted {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low
    }
}

impl<T> Ring<T> {
    /// The run of `len` slots from `start`.
    ///
    /// `start + len <= capacity`: runs never wrap (`probe_run` ensures it).
    #[inline]
    fn run(&self, start: usize, len: usize) -> Run<T> {
        assert!(start + len <= self.capacity);
        // SAFETY: both offsets are at most `capacity`, in or one past the end of the slots.
        unsafe {
            Run {
                next: self.slots.add(start),
                end: self.slots.add(start + len),
            }
        }
    }

    /// The index of `run`'s next slot, wrapped into `0..capacity` (a used-up run may end
    /// one past the last slot).
    #[inline(always)]
    fn position_of(&self, run: &Run<T>) -> usize {
        // SAFETY: `run.next` points into the slots or one past their end (see `Ring::run`).
        let index = unsafe { run.next.offset_from(self.slots) } as usize;
        if index == self.capacity { 0 } else { index }
    }
}

/// The slots one end has claimed: `next` up to, not including, `end`. Both point into the
/// ring or one past its last slot, with `next <= end`.
struct Run<T> {
    next: NonNull<Slot<T>>,
    end: NonNull<Slot<T>>,
}

impl<T> Run<T> {
    /// No slot claimed, positioned at `at`.
    fn empty_at(at: NonNull<Slot<T>>) -> Self {
        Self { next: at, end: at }
    }

    /// Whether every claimed slot has been used.
    #[inline(always)]
    fn is_used_up(&self) -> bool {
        self.next == self.end
    }

    /// How many claimed slots are left.
    #[inline]
    fn len(&self) -> usize {
        // SAFETY: both point into the same slots, `next <= end`.
        unsafe { self.end.offset_from(self.next) as usize }
    }

    /// The next slot, without using it.
    ///
    /// # Safety
    /// The run is not used up, and the ring is alive.
    #[inline(always)]
    unsafe fn peek(&self) -> &Slot<T> {
        debug_assert!(!self.is_used_up());
        // SAFETY: by the caller, `next` points at a live slot.
        unsafe { self.next.as_ref() }
    }

    /// The next slot; the run moves past it.
    ///
    /// # Safety
    /// The run is not used up, and the ring is alive (for the lifetime chosen by the caller).
    #[inline(always)]
    unsafe fn take<'a>(&mut self) -> &'a Slot<T> {
        debug_assert!(!self.is_used_up());
        let slot = self.next;
        // SAFETY: `next < end`, so one more is at most `end`, in or one past the slots.
        self.next = unsafe { slot.add(1) };
        // SAFETY: by the caller, `slot` points at a live slot.
        unsafe { slot.as_ref() }
    }
}

/// The state of one end's search (the paper's `batch_history`).
#[derive(Clone, Debug)]
struct Batching {
    /// The longest run a probe claims.
    max: usize,
    /// How far `history` grows before each search; 0 when adaptation is off.
    increment: usize,
    /// The size the last search settled on, in `1..=max`.
    history: usize,
    /// Whether the last search found a run: this end is keeping pace with the other, not
    /// waiting for it.
    streaming: bool,
}

impl Batching {
    /// The distance the next search starts from.
    #[inline(always)]
    fn start(&mut self) -> usize {
        if self.increment == 0 {
            return self.max;
        }
        // Saturating: any increment a builder accepts (up to `usize::MAX`) only caps the
        // distance at `max`; a wrapped sum would start a search at 0 and claim an empty run.
        self.history = self.max.min(self.history.saturating_add(self.increment));
        self.history
    }
}

/// The pushing end of a queue made by [`channel`].
///
/// There is exactly one; it is not `Clone`:
///
/// ```compile_fail
/// let (producer, _consumer) = pitlane_queue::spsc::channel::<u8>(1);
/// let second = producer.clone();
/// ```
pub struct Producer<T> {
    ring: Ring<T>,
    /// The empty slots this end has claimed; `run.next` is the paper's `head`.
    run: Run<T>,
    batching: Batching,
    /// This end's share of the box holding the slots.
    shared: NonNull<Shared<T>>,
}

// SAFETY: the producer moves `T`s into the ring, which the consumer then owns; its pointers are
// only used by this end, under the protocol, and the box lives until both ends leave.
unsafe impl<T: Send> Send for Producer<T> {}

impl<T> Producer<T> {
    /// Pushes `value`, or gives it back inside [`PushError::Full`] if the queue holds
    /// `capacity` values. Never waits.
    ///
    /// ```
    /// use pitlane_queue::spsc::{self, PushError};
    ///
    /// let (mut producer, _consumer) = spsc::channel(1);
    /// assert_eq!(producer.try_push('a'), Ok(()));
    /// assert_eq!(producer.try_push('b'), Err(PushError::Full('b')));
    /// ```
    #[inline]
    pub fn try_push(&mut self, value: T) -> Result<(), PushError<T>> {
        if self.run.is_used_up() && !self.claim() {
            return Err(PushError::Full(value));
        }
        // SAFETY: the run is not used up: its next slot is empty and reserved for this end.
        unsafe { self.write_next(value) };
        Ok(())
    }

    /// Pushes values taken from `values` until it runs out or the queue is full, and returns
    /// how many were pushed. A value is taken from the iterator only once there is room for it,
    /// so nothing is lost: pass `iter.by_ref()` to keep the rest.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// let mut numbers = 1..=6;
    /// assert_eq!(producer.push_iter(numbers.by_ref()), 4);
    /// assert_eq!(numbers.next(), Some(5));
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [1, 2, 3, 4]);
    /// ```
    pub fn push_iter<I: IntoIterator<Item = T>>(&mut self, values: I) -> usize {
        let mut values = values.into_iter();
        let mut pushed = 0;
        loop {
            if self.run.is_used_up() && !self.claim() {
                return pushed;
            }
            while !self.run.is_used_up() {
                let Some(value) = values.next() else {
                    return pushed;
                };
                // SAFETY: the run is not used up, as in `try_push`.
                unsafe { self.write_next(value) };
                pushed += 1;
            }
        }
    }

    /// Pushes clones of a prefix of `values`, as many as fit, and returns how many.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(3);
    /// assert_eq!(producer.push_slice(&[7, 8, 9, 10]), 3);
    /// assert_eq!(consumer.try_pop(), Ok(7));
    /// ```
    pub fn push_slice(&mut self, values: &[T]) -> usize
    where
        T: Clone,
    {
        self.push_iter(values.iter().cloned())
    }

    /// Pushes copies of all of `values`, or, if fewer slots are free, none of them, with the
    /// free slots in the error (rtrb's `push_entire_slice`).
    ///
    /// # Errors
    /// [`ChunkError::TooFewSlots`] with the number of free slots.
    ///
    /// ```
    /// use pitlane_queue::spsc::{self, ChunkError};
    ///
    /// let (mut producer, mut consumer) = spsc::channel(3);
    /// assert_eq!(producer.push_entire_slice(&[1, 2]), Ok(()));
    /// assert_eq!(producer.push_entire_slice(&[3, 4]), Err(ChunkError::TooFewSlots(1)));
    /// assert_eq!(consumer.len(), 2);
    /// ```
    pub fn push_entire_slice(&mut self, values: &[T]) -> Result<(), ChunkError>
    where
        T: Copy,
    {
        let written = self
            .write_chunk_uninit(values.len())?
            .fill_from_iter(values.iter().copied());
        debug_assert_eq!(written, values.len());
        Ok(())
    }

    /// The number of slots in the ring.
    ///
    /// ```
    /// let (producer, _consumer) = pitlane_queue::spsc::channel::<u8>(5);
    /// assert_eq!(producer.capacity(), 5);
    /// ```
    pub fn capacity(&self) -> usize {
        self.ring.capacity
    }

    /// How many values are in the queue: a snapshot taken during the call, exact when the
    /// consumer is idle. Reads `O(log capacity)` slot states.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel(8);
    /// producer.push_slice(&[1, 2, 3]);
    /// assert_eq!(producer.len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.capacity() - self.free_slots()
    }

    /// Whether the queue looked empty during the call.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel(2);
    /// assert!(producer.is_empty());
    /// producer.try_push(1).unwrap();
    /// assert!(!producer.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many values could be pushed now: a snapshot, never more than there is room for
    /// (the consumer only makes more room).
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel(4);
    /// producer.try_push(1).unwrap();
    /// assert_eq!(producer.free_slots(), 3);
    /// ```
    pub fn free_slots(&self) -> usize {
        let start = self.position();
        // SAFETY: `position() < capacity`, and this end has not left.
        unsafe { self.ring.count_run(start, self.run.len(), EMPTY) }
    }

    /// Whether the queue is full now, that is whether [`try_push`](Self::try_push) would fail.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel(1);
    /// assert!(!producer.is_full());
    /// producer.try_push(1).unwrap();
    /// assert!(producer.is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        // SAFETY: `position() < capacity`, and this end has not left.
        self.run.is_used_up()
            && unsafe { self.ring.slot(self.position()) }
                .state
                .load(Ordering::Acquire)
                == FULL
    }

    /// Whether the consumer has been dropped. Once it has, nothing pushed will be popped (the
    /// values are dropped when this end is).
    ///
    /// ```
    /// let (producer, consumer) = pitlane_queue::spsc::channel::<u8>(1);
    /// assert!(!producer.is_abandoned());
    /// drop(consumer);
    /// assert!(producer.is_abandoned());
    /// ```
    pub fn is_abandoned(&self) -> bool {
        self.shared().has_left(CONSUMER_GONE)
    }

    /// The paper's `head`, in `0..capacity`.
    #[inline(always)]
    fn position(&self) -> usize {
        self.ring.position_of(&self.run)
    }

    fn shared(&self) -> &Shared<T> {
        // SAFETY: the box lives until this end leaves, in `drop`.
        unsafe { self.shared.as_ref() }
    }

    /// Writes `value` into the next slot of the run and publishes it.
    ///
    /// # Safety
    /// The run is not used up.
    #[inline(always)]
    unsafe fn write_next(&mut self, value: T) {
        // SAFETY: by the caller, the run has a next slot.
        let slot = unsafe { self.run.take() };
        // SAFETY: the slot is empty (probed with `Acquire`, after the consumer's `Release`
        // store of empty), so the consumer no longer reads it and will not until it sees the
        // store of full below.
        slot.value
            .with_mut(|cell| unsafe { cell.cast::<T>().write(value) });
        slot.state.store(FULL, Ordering::Release);
    }

    /// Claims the next run of empty slots; false if the queue is full.
    #[inline(always)]
    fn claim(&mut self) -> bool {
        // SAFETY: the run is this end's and used up (callers check), and this end has not left.
        unsafe { self.ring.claim(&mut self.run, EMPTY, &mut self.batching) }
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        // SAFETY: the box is this end's until now, and it is dropped once.
        unsafe { Shared::leave(self.shared, PRODUCER_GONE) };
    }
}

impl<T> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.ring.capacity)
            .field("head", &self.position())
            .field("claimed", &self.run.len())
            .finish_non_exhaustive()
    }
}

/// The popping end of a queue made by [`channel`].
///
/// There is exactly one; it is not `Clone`:
///
/// ```compile_fail
/// let (_producer, consumer) = pitlane_queue::spsc::channel::<u8>(1);
/// let second = consumer.clone();
/// ```
pub struct Consumer<T> {
    ring: Ring<T>,
    /// The full slots this end has claimed; `run.next` is the paper's `tail`.
    run: Run<T>,
    batching: Batching,
    /// This end's share of the box holding the slots.
    shared: NonNull<Shared<T>>,
}

// SAFETY: the consumer moves `T`s out of the ring (and lends `&T` or `&mut T` only while
// borrowed itself: `peek`, a read chunk; it is not `Sync`, and the producer does not touch a
// full slot); its pointers are only used by this end, under the protocol, and the box lives
// until both ends leave.
unsafe impl<T: Send> Send for Consumer<T> {}

impl<T> Consumer<T> {
    /// Pops the oldest value, or says [`PopError::Empty`]. Never waits.
    ///
    /// ```
    /// use pitlane_queue::spsc::{self, PopError};
    ///
    /// let (mut producer, mut consumer) = spsc::channel(2);
    /// assert_eq!(consumer.try_pop(), Err(PopError::Empty));
    /// producer.try_push(5).unwrap();
    /// assert_eq!(consumer.try_pop(), Ok(5));
    /// ```
    #[inline]
    pub fn try_pop(&mut self) -> Result<T, PopError> {
        if self.run.is_used_up() && !self.claim() {
            return Err(PopError::Empty);
        }
        // SAFETY: the run is not used up: its next slot is full and reserved for this end.
        Ok(unsafe { self.read_next() })
    }

    /// The oldest value, left in the queue, or [`PopError::Empty`]. Takes `&self`: looking
    /// changes nothing, so a peeked value can be compared with others held meanwhile.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(2);
    /// producer.try_push(String::from("front")).unwrap();
    /// assert_eq!(consumer.peek().map(String::as_str), Ok("front"));
    /// assert_eq!(consumer.try_pop().as_deref(), Ok("front"));
    /// ```
    pub fn peek(&self) -> Result<&T, PopError> {
        let slot = if self.run.is_used_up() {
            // SAFETY: `position() < capacity`, and this end has not left.
            let next = unsafe { self.ring.slot(self.position()) };
            // The linearization point of a peek outside a claimed run: this `Acquire` load
            // synchronises with the producer's `Release` store of full, so the value is there.
            if next.state.load(Ordering::Acquire) != FULL {
                return Err(PopError::Empty);
            }
            next
        } else {
            // SAFETY: the run is not used up, so its next slot is full and reserved for this
            // end.
            unsafe { self.run.peek() }
        };
        // SAFETY: the slot is full, so its value is initialised; only this end empties it, and
        // it cannot while the returned borrow of `self` lives; the producer does not write a
        // full slot.
        Ok(slot.value.with(|cell| unsafe { &*cell.cast::<T>() }))
    }

    /// An iterator that pops values until the queue is empty. Values it has not yielded stay
    /// in the queue. `Vec::extend(consumer.try_iter().take(n))` moves up to `n` values into a
    /// buffer at once.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(8);
    /// producer.push_iter(0..5);
    /// let mut buffer = Vec::new();
    /// buffer.extend(consumer.try_iter().take(3));
    /// assert_eq!(buffer, [0, 1, 2]);
    /// assert_eq!(consumer.len(), 2);
    /// ```
    pub fn try_iter(&mut self) -> TryIter<'_, T> {
        TryIter { consumer: self }
    }

    /// Pops values into `buf`, oldest first, until it is full or the queue is empty, and
    /// returns how many: the counterpart of [`Producer::push_slice`] (rtrb's
    /// `pop_partial_slice`). Each popped value replaces the element at its place in `buf`,
    /// which is dropped after the new value is in place, so a panicking `Drop` loses nothing
    /// popped. The rest of `buf` is left as it was.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(8);
    /// producer.push_slice(&[1, 2, 3]);
    /// let mut buffer = [0; 2];
    /// assert_eq!(consumer.pop_slice(&mut buffer), 2);
    /// assert_eq!(buffer, [1, 2]);
    /// let mut buffer = [0; 4];
    /// assert_eq!(consumer.pop_slice(&mut buffer), 1);
    /// assert_eq!(buffer, [3, 0, 0, 0]);
    /// ```
    pub fn pop_slice(&mut self, buf: &mut [T]) -> usize {
        let mut popped = 0;
        // `zip` asks `buf` first: no value is popped once there is no place for it.
        for (place, value) in buf.iter_mut().zip(self.try_iter()) {
            let old = core::mem::replace(place, value);
            popped += 1;
            drop(old);
        }
        popped
    }

    /// Pops exactly `buf.len()` values into `buf`, oldest first, or, if fewer are queued,
    /// none, with the number queued in the error (rtrb's `pop_entire_slice`).
    ///
    /// # Errors
    /// [`ChunkError::TooFewSlots`] with the number of values queued.
    ///
    /// ```
    /// use pitlane_queue::spsc::{self, ChunkError};
    ///
    /// let (mut producer, mut consumer) = spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let mut buffer = [0; 4];
    /// assert_eq!(consumer.pop_entire_slice(&mut buffer), Err(ChunkError::TooFewSlots(3)));
    /// assert_eq!(consumer.pop_entire_slice(&mut buffer[..2]), Ok(()));
    /// assert_eq!(buffer, [1, 2, 0, 0]);
    /// ```
    pub fn pop_entire_slice(&mut self, buf: &mut [T]) -> Result<(), ChunkError>
    where
        T: Copy,
    {
        let chunk = self.read_chunk(buf.len())?;
        for (place, value) in buf.iter_mut().zip(chunk) {
            *place = value;
        }
        Ok(())
    }

    /// Pops exactly `buf.len()` values into `buf`, a buffer that need not be initialised,
    /// oldest first, and returns it as the initialised slice it now is; or, if fewer values
    /// are queued, pops none and leaves `buf` untouched (rtrb's `pop_entire_slice_uninit`).
    /// The buffer may be the spare capacity of a `Vec` ([`Vec::spare_capacity_mut`]) or
    /// memory handed over by foreign code. Each value is one pop, first value first, taking
    /// effect at its slot's store of *empty*.
    ///
    /// # Errors
    /// [`ChunkError::TooFewSlots`] with the number of values queued.
    ///
    /// ```
    /// use std::mem::MaybeUninit;
    /// use pitlane_queue::spsc::{self, ChunkError};
    ///
    /// let (mut producer, mut consumer) = spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let mut buffer = [MaybeUninit::<i32>::uninit(); 4];
    /// assert_eq!(consumer.pop_entire_slice_uninit(&mut buffer), Err(ChunkError::TooFewSlots(3)));
    /// let popped = consumer.pop_entire_slice_uninit(&mut buffer[..2])?;
    /// assert_eq!(popped, [1, 2]);
    ///
    /// // Straight into a vector's spare capacity.
    /// let mut values = Vec::with_capacity(8);
    /// assert_eq!(consumer.pop_entire_slice_uninit(values.spare_capacity_mut())
    ///     .unwrap_err(), ChunkError::TooFewSlots(1));
    /// let popped = consumer.pop_entire_slice_uninit(&mut values.spare_capacity_mut()[..1])?;
    /// assert_eq!(popped, [3]);
    /// // SAFETY: the first element of the spare capacity was initialised just above.
    /// unsafe { values.set_len(1) };
    /// assert_eq!(values, [3]);
    /// # Ok::<(), ChunkError>(())
    /// ```
    pub fn pop_entire_slice_uninit<'a>(
        &mut self,
        buf: &'a mut [MaybeUninit<T>],
    ) -> Result<&'a mut [T], ChunkError>
    where
        T: Copy,
    {
        let len = buf.len();
        let mut chunk = self.read_chunk(len)?;
        // The chunk holds exactly `len` values, so each place gets one: `take_next` is called
        // `len` times, never past the chunk's end. `T: Copy`, so nothing here can panic and no
        // `Drop` runs.
        for place in buf.iter_mut() {
            place.write(chunk.take_next());
        }
        // SAFETY: each of the `len` elements of `buf` was written just above;
        // `MaybeUninit<T>` has the size, alignment and ABI of `T`, so `len` initialised
        // elements are `len` valid `T`s; the pointer is derived from `buf` (no integer cast)
        // and the new slice takes over its exclusive borrow for `'a`.
        Ok(unsafe { core::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<T>(), len) })
    }

    /// Pops values into `buf`, a buffer that need not be initialised, oldest first, until it
    /// is full or the queue is empty, and returns the two parts of `buf`: the values popped,
    /// now initialised, and the rest, untouched (rtrb's `pop_partial_slice_uninit`; the
    /// counterpart of [`pop_slice`](Self::pop_slice) for uninitialised memory). Each value is
    /// one pop, taking effect at its slot's store of *empty*; no value is popped once there
    /// is no place left for it.
    ///
    /// ```
    /// use std::mem::MaybeUninit;
    ///
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let mut values: Vec<i32> = Vec::with_capacity(5);
    /// let (popped, rest) = consumer.pop_partial_slice_uninit(values.spare_capacity_mut());
    /// assert_eq!(popped, [1, 2, 3]);
    /// popped[0] = -1; // the popped part is an ordinary `&mut [i32]`
    /// rest[0] = MaybeUninit::new(4); // the rest is still uninitialised memory
    /// // SAFETY: the three values popped and the one written into the rest are initialised.
    /// unsafe { values.set_len(4) };
    /// assert_eq!(values, [-1, 2, 3, 4]);
    ///
    /// producer.push_slice(&[5, 6]);
    /// let mut short = [MaybeUninit::uninit(); 1];
    /// let (popped, rest) = consumer.pop_partial_slice_uninit(&mut short);
    /// assert_eq!((popped.len(), rest.len()), (1, 0));
    /// assert_eq!(popped, [5]);
    /// assert_eq!(consumer.try_pop(), Ok(6));
    /// ```
    #[must_use = "the first slice holds the values popped; without it they are lost to the caller"]
    pub fn pop_partial_slice_uninit<'a>(
        &mut self,
        buf: &'a mut [MaybeUninit<T>],
    ) -> (&'a mut [T], &'a mut [MaybeUninit<T>])
    where
        T: Copy,
    {
        let mut popped = 0;
        // `zip` asks `buf` first: no value is popped once there is no place for it.
        for (place, value) in buf.iter_mut().zip(self.try_iter()) {
            place.write(value);
            popped += 1;
        }
        let (values, rest) = buf.split_at_mut(popped);
        // SAFETY: the first `popped` elements of `buf`, which are `values`, were written just
        // above; `MaybeUninit<T>` has the layout of `T`; the pointer is derived from `values`
        // (no integer cast) and the new slice takes over its exclusive borrow for `'a`.
        let values =
            unsafe { core::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<T>(), popped) };
        (values, rest)
    }

    /// The number of slots in the ring.
    ///
    /// ```
    /// let (_producer, consumer) = pitlane_queue::spsc::channel::<u8>(5);
    /// assert_eq!(consumer.capacity(), 5);
    /// ```
    pub fn capacity(&self) -> usize {
        self.ring.capacity
    }

    /// How many values are in the queue: a snapshot taken during the call, exact when the
    /// producer is idle, and never more than this end can pop. Reads `O(log capacity)` slot
    /// states.
    ///
    /// ```
    /// let (mut producer, consumer) = pitlane_queue::spsc::channel(8);
    /// producer.push_slice(&[1, 2, 3]);
    /// assert_eq!(consumer.len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        let start = self.position();
        // SAFETY: `position() < capacity`, and this end has not left.
        unsafe { self.ring.count_run(start, self.run.len(), FULL) }
    }

    /// Whether the queue is empty now, that is whether [`try_pop`](Self::try_pop) would fail.
    ///
    /// ```
    /// let (mut producer, consumer) = pitlane_queue::spsc::channel(2);
    /// assert!(consumer.is_empty());
    /// producer.try_push(1).unwrap();
    /// assert!(!consumer.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        // SAFETY: `position() < capacity`, and this end has not left.
        self.run.is_used_up()
            && unsafe { self.ring.slot(self.position()) }
                .state
                .load(Ordering::Acquire)
                == EMPTY
    }

    /// Whether the producer has been dropped. Once it has, what is still queued can be popped
    /// and nothing more will come.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(2);
    /// producer.try_push(1).unwrap();
    /// drop(producer);
    /// assert!(consumer.is_abandoned());
    /// assert_eq!(consumer.try_pop(), Ok(1));
    /// ```
    pub fn is_abandoned(&self) -> bool {
        self.shared().has_left(PRODUCER_GONE)
    }

    /// The paper's `tail`, in `0..capacity`.
    #[inline(always)]
    fn position(&self) -> usize {
        self.ring.position_of(&self.run)
    }

    fn shared(&self) -> &Shared<T> {
        // SAFETY: the box lives until this end leaves, in `drop`.
        unsafe { self.shared.as_ref() }
    }

    /// Moves the value out of the next slot of the run and hands the slot back to the
    /// producer.
    ///
    /// # Safety
    /// The run is not used up.
    #[inline(always)]
    unsafe fn read_next(&mut self) -> T {
        // SAFETY: by the caller, the run has a next slot.
        let slot = unsafe { self.run.take() };
        // SAFETY: the slot is full (covered by an `Acquire` probe that saw the producer's
        // `Release` store of full), so it holds an initialised value the producer no longer
        // touches; the store of empty below gives it up, so it is moved out exactly once.
        let value = slot.value.with(|cell| unsafe { cell.cast::<T>().read() });
        slot.state.store(EMPTY, Ordering::Release);
        value
    }

    /// Claims the next run of full slots; false if the queue is empty.
    #[inline(always)]
    fn claim(&mut self) -> bool {
        // SAFETY: the run is this end's and used up (callers check), and this end has not left.
        unsafe { self.ring.claim(&mut self.run, FULL, &mut self.batching) }
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        // Where the values left start, for whichever end drops them (`Shared`'s `drop`).
        self.shared()
            .consumer_at
            .store(self.position(), Ordering::Relaxed);
        // SAFETY: the box is this end's until now, and it is dropped once.
        unsafe { Shared::leave(self.shared, CONSUMER_GONE) };
    }
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.ring.capacity)
            .field("tail", &self.position())
            .field("claimed", &self.run.len())
            .finish_non_exhaustive()
    }
}

/// Pops values until the queue is empty; made by [`Consumer::try_iter`].
///
/// Not fused: a later `next` finds what the producer pushed since.
///
/// ```
/// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
/// producer.push_slice(&[1, 2]);
/// let mut values = consumer.try_iter();
/// assert_eq!((values.next(), values.next(), values.next()), (Some(1), Some(2), None));
/// producer.try_push(3).unwrap();
/// assert_eq!(values.next(), Some(3));
/// ```
#[derive(Debug)]
pub struct TryIter<'a, T> {
    consumer: &'a mut Consumer<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        self.consumer.try_pop().ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // The claimed run is there for sure; the producer may add any number more meanwhile.
        (self.consumer.run.len(), None)
    }
}

/// Why a chunk could not be had: fewer slots than asked for were free (for
/// [`Producer::write_chunk_uninit`]) or full (for [`Consumer::read_chunk`]).
///
/// ```
/// use pitlane_queue::spsc::{self, ChunkError};
///
/// let (mut producer, _consumer) = spsc::channel::<u8>(4);
/// let error = producer.write_chunk_uninit(5).unwrap_err();
/// assert_eq!(error, ChunkError::TooFewSlots(4));
/// assert_eq!(error.to_string(), "too few slots: 4 available");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChunkError {
    /// How many slots were available when the call looked (free ones for a write chunk, full
    /// ones for a read chunk): a snapshot, which the other end only makes larger, and always
    /// fewer than the chunk asked for.
    TooFewSlots(usize),
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooFewSlots(available) => write!(f, "too few slots: {available} available"),
        }
    }
}

impl core::error::Error for ChunkError {}

impl<T> Ring<T> {
    /// Whether the `n` slots from `start` (wrapping around the ring's end) are all in state
    /// `wanted`, for `1 <= n <= capacity`: slot states change in ring order only, so the last
    /// one decides for all, and its `Acquire` load synchronises with the other end's `Release`
    /// store that covered them.
    ///
    /// # Safety
    /// `start < capacity`, and the end calling has not left.
    unsafe fn run_is(&self, start: usize, n: usize, wanted: bool) -> bool {
        debug_assert!(n >= 1 && n <= self.capacity);
        let last = (start + n - 1) % self.capacity;
        // SAFETY: `last < capacity`.
        unsafe { self.slot(last) }.state.load(Ordering::Acquire) == wanted
    }

    /// The `i`-th slot from `start`, wrapping around the ring's end.
    ///
    /// # Safety
    /// `start < capacity`, `i < capacity`, and the end calling has not left.
    #[inline]
    unsafe fn slot_from(&self, start: usize, i: usize) -> &Slot<T> {
        let mut index = start + i;
        if index >= self.capacity {
            index -= self.capacity;
        }
        // SAFETY: `index < capacity` by the wrap above.
        unsafe { self.slot(index) }
    }

    /// A used-up run positioned at slot `index` (`< capacity`).
    fn empty_run_at(&self, index: usize) -> Run<T> {
        debug_assert!(index < self.capacity);
        // SAFETY: `index < capacity`, inside the slots.
        Run::empty_at(unsafe { self.slots.add(index) })
    }
}

impl<T> Producer<T> {
    /// Reserves the next `n` free slots, in place, to be written and then published together
    /// with [`WriteChunkUninit::commit`] (or filled from an iterator by
    /// [`WriteChunkUninit::fill_from_iter`]), with no probe per value. A chunk may wrap around
    /// the ring's end; its slots are reached by index. `n = 0` gives an empty chunk.
    ///
    /// Fails with [`ChunkError::TooFewSlots`] if fewer than `n` slots are free.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u32>(4);
    /// let mut chunk = producer.write_chunk_uninit(3)?;
    /// for i in 0..chunk.len() {
    ///     chunk.slot(i).write(10 * i as u32);
    /// }
    /// // SAFETY: all three slots were written just above.
    /// unsafe { chunk.commit_all() };
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [0, 10, 20]);
    /// # Ok::<(), pitlane_queue::spsc::ChunkError>(())
    /// ```
    pub fn write_chunk_uninit(&mut self, n: usize) -> Result<WriteChunkUninit<'_, T>, ChunkError> {
        let start = self.position();
        if n > 0 {
            // SAFETY: `start < capacity`, and this end has not left.
            if n > self.ring.capacity || !unsafe { self.ring.run_is(start, n, EMPTY) } {
                // The count comes after the refusal, and the consumer may have freed slots
                // meanwhile: a count of `n` or more means the `n` slots are free now (and stay
                // free: only this end fills them), so the chunk is had after all, and an error
                // always counts fewer slots than asked for. The count's `Acquire` load that
                // saw a slot at or past the chunk's last one empty synchronises with the
                // consumer's store of empty there, which came after its moves out of every
                // slot before it, as the far slot's load would have.
                let free = self.free_slots();
                if free < n {
                    return Err(ChunkError::TooFewSlots(free));
                }
            }
        }
        Ok(WriteChunkUninit {
            producer: self,
            start,
            len: n,
        })
    }

    /// How many values could be pushed now: the name [`rtrb`](https://docs.rs/rtrb) gives
    /// [`free_slots`](Self::free_slots).
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel(4);
    /// producer.try_push(1).unwrap();
    /// assert_eq!(producer.slots(), 3);
    /// ```
    pub fn slots(&self) -> usize {
        self.free_slots()
    }

    /// Publishes the `n` slots from `start` that a chunk reserved and wrote: stores *full*
    /// into each, in ring order, with `Release` (each store the linearization point of that
    /// value's push, and it hands the value to the consumer), then moves this end just past
    /// them.
    ///
    /// # Safety
    /// `start < capacity`, `n <= capacity`, and the `n` slots from `start` are empty, reserved
    /// by a chunk of this end, and hold initialised values.
    #[inline]
    unsafe fn publish(&mut self, start: usize, n: usize) {
        let ring = self.ring;
        for i in 0..n {
            // SAFETY: by the caller, `start < capacity` and `i < n <= capacity`, and the slot
            // holds a value the consumer may now take.
            unsafe { ring.slot_from(start, i) }
                .state
                .store(FULL, Ordering::Release);
        }
        self.run = ring.empty_run_at((start + n) % ring.capacity);
    }

    /// How many values this end knows it can push without reading any shared state: the free
    /// slots it has already claimed (the rest of the run its last probe found), with no
    /// atomic load at all (rtrb's `cached_slots`).
    ///
    /// It is a lower bound of [`slots`](Self::slots) at every instant (the consumer only
    /// frees more), and often a much lower one: it can be 0 while `slots()` is not, since
    /// this end claims free slots only when a push finds none claimed, at most a batch at a
    /// time, and a chunk gives its claim up. When it is not 0, that many pushes will succeed.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(8);
    /// // Nothing claimed yet, though the whole ring is free.
    /// assert_eq!((producer.cached_slots(), producer.slots()), (0, 8));
    /// producer.try_push(1).unwrap(); // this push claims a run of free slots
    /// let known = producer.cached_slots();
    /// assert!(known <= producer.slots());
    /// assert_eq!(producer.push_iter(std::iter::repeat(2).take(known)), known);
    /// ```
    pub fn cached_slots(&self) -> usize {
        self.run.len()
    }

    /// Reserves the next `n` free slots, as [`write_chunk_uninit`](Self::write_chunk_uninit)
    /// does, and fills each with `T::default()`, so that the values can be changed in place
    /// ([`WriteChunk::get_mut`], [`WriteChunk::iter_mut`]) without `unsafe` and then published
    /// together with [`WriteChunk::commit`] (rtrb's `write_chunk`). The chunk's slots are
    /// reached by index, as a [`WriteChunkUninit`]'s are. `n = 0` gives an empty chunk.
    ///
    /// Nothing is published until a commit: getting the chunk changes nothing in the queue. If
    /// `T::default()` panics, the values it made before are dropped and the producer is as it
    /// was.
    ///
    /// # Errors
    /// [`ChunkError::TooFewSlots`] with the number of free slots, if fewer than `n` are free.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<String>(4);
    /// let mut chunk = producer.write_chunk(3)?;
    /// for (i, value) in chunk.iter_mut().enumerate() {
    ///     value.push_str(&"ab"[..i.min(2)]);
    /// }
    /// chunk.commit(2); // the third value (`"ab"`) is dropped, never published
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), ["", "a"]);
    /// # Ok::<(), pitlane_queue::spsc::ChunkError>(())
    /// ```
    pub fn write_chunk(&mut self, n: usize) -> Result<WriteChunk<'_, T>, ChunkError>
    where
        T: Default,
    {
        let WriteChunkUninit {
            producer,
            start,
            len,
        } = self.write_chunk_uninit(n)?;
        // Holds the values written so far (`chunk.len` of them, from the first slot): if
        // `T::default()` panics, the unwinding drops `chunk`, and with it exactly those values;
        // nothing is published and the producer has not moved.
        let mut chunk = WriteChunk {
            producer,
            start,
            len: 0,
            published: 0,
        };
        let ring = chunk.producer.ring;
        while chunk.len < len {
            let value = T::default();
            // SAFETY: `start < capacity` and `chunk.len < len <= capacity`; the producer has
            // not left while the chunk borrows it.
            let slot = unsafe { ring.slot_from(start, chunk.len) };
            // SAFETY: the slot is empty (the chunk's last slot was seen empty with `Acquire`,
            // and states change in ring order), so the consumer does not touch its value; the
            // chunk borrows the producer mutably, so nothing else of this end reaches it.
            slot.value.with_mut(|cell| unsafe { (*cell).write(value) });
            chunk.len += 1;
        }
        Ok(chunk)
    }
}

/// Free slots of a queue reserved by [`Producer::write_chunk_uninit`], written in place and
/// published together. Dropping it without a commit publishes nothing (and drops nothing: the
/// slots are uninitialized as far as the queue knows).
///
/// Publishing `n` slots stores *full* into each, in ring order, with `Release`: the consumer,
/// which takes slots in the same order, sees a value only once it is written, and each value's
/// store is the linearization point of its push.
///
/// ```
/// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u32>(8);
/// let mut chunk = producer.write_chunk_uninit(3).unwrap();
/// for i in 0..chunk.len() {
///     chunk.slot(i).write(10 * i as u32);
/// }
/// // SAFETY: every slot of the chunk was written.
/// unsafe { chunk.commit_all() };
/// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [0, 10, 20]);
/// ```
pub struct WriteChunkUninit<'a, T> {
    producer: &'a mut Producer<T>,
    start: usize,
    len: usize,
}

impl<T> WriteChunkUninit<'_, T> {
    /// How many slots the chunk holds.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// assert_eq!(producer.write_chunk_uninit(2).unwrap().len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chunk holds no slot.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// assert!(producer.write_chunk_uninit(0).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th slot of the chunk, to write in place.
    ///
    /// # Panics
    /// If `i >= len()`.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// let mut chunk = producer.write_chunk_uninit(1).unwrap();
    /// chunk.slot(0).write(7);
    /// // SAFETY: slot 0 was written.
    /// unsafe { chunk.commit(1) };
    /// assert_eq!(consumer.try_pop(), Ok(7));
    /// ```
    pub fn slot(&mut self, i: usize) -> &mut MaybeUninit<T> {
        assert!(i < self.len, "slot {i} of a chunk of {}", self.len);
        // SAFETY: `start < capacity` and `i < len <= capacity`; the producer has not left while
        // the chunk borrows it.
        let slot = unsafe { self.producer.ring.slot_from(self.start, i) };
        // SAFETY: the slot is empty (the chunk's last slot was seen empty with `Acquire`, and
        // states change in ring order), so the consumer does not touch its value until it
        // sees it full; the chunk borrows the producer mutably, so nothing else of this end
        // reaches it.
        slot.value.with_mut(|cell| unsafe { &mut *cell })
    }

    /// Publishes the first `n` slots of the chunk; the others stay free. Nothing else is
    /// pushed meanwhile: the chunk borrows the producer.
    ///
    /// # Panics
    /// If `n > len()`, as [`rtrb`](https://docs.rs/rtrb)'s commit does; nothing is published
    /// then.
    ///
    /// # Safety
    /// The first `n` slots were written (through [`slot`](Self::slot)).
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// let mut chunk = producer.write_chunk_uninit(3).unwrap();
    /// chunk.slot(0).write(1);
    /// chunk.slot(1).write(2);
    /// // SAFETY: the first two slots were written.
    /// unsafe { chunk.commit(2) };
    /// assert_eq!(consumer.len(), 2);
    /// ```
    pub unsafe fn commit(self, n: usize) {
        assert!(
            n <= self.len,
            "commit of {n} slots of a chunk of {}",
            self.len
        );
        // SAFETY: the chunk reserved its slots (empty, this end's), `n <= len`, and the caller
        // wrote the first `n`.
        unsafe { self.producer.publish(self.start, n) };
    }

    /// Publishes every slot of the chunk.
    ///
    /// # Safety
    /// Every slot was written.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(2);
    /// let mut chunk = producer.write_chunk_uninit(2).unwrap();
    /// chunk.slot(0).write(1);
    /// chunk.slot(1).write(2);
    /// // SAFETY: both slots were written.
    /// unsafe { chunk.commit_all() };
    /// assert!(consumer.len() == 2);
    /// ```
    pub unsafe fn commit_all(self) {
        let n = self.len;
        // SAFETY: forwarded from the caller.
        unsafe { self.commit(n) }
    }

    /// Writes values from `values` into the chunk's slots, in order, until either runs out,
    /// publishes what it wrote, and returns how many. Safe: only written slots are published.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(8);
    /// let chunk = producer.write_chunk_uninit(5).unwrap();
    /// assert_eq!(chunk.fill_from_iter(["a", "b"]), 2);
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), ["a", "b"]);
    /// ```
    pub fn fill_from_iter<I: IntoIterator<Item = T>>(self, values: I) -> usize {
        /// Moves the producer past the slots published so far, also when the iterator panics.
        struct Published<'p, T> {
            producer: &'p mut Producer<T>,
            start: usize,
            count: usize,
        }
        impl<T> Drop for Published<'_, T> {
            fn drop(&mut self) {
                let ring = self.producer.ring;
                self.producer.run = ring.empty_run_at((self.start + self.count) % ring.capacity);
            }
        }
        let (start, len) = (self.start, self.len);
        let ring = self.producer.ring;
        let mut published = Published {
            producer: self.producer,
            start,
            count: 0,
        };
        for value in values.into_iter().take(len) {
            // SAFETY: `start < capacity` and `count < len <= capacity`; the chunk's slots are
            // empty and reserved for this end (see `slot`).
            let slot = unsafe { ring.slot_from(start, published.count) };
            // SAFETY: as in `slot`: the consumer does not touch an empty slot's value.
            slot.value.with_mut(|cell| unsafe { (*cell).write(value) });
            // Published one by one, in ring order, as `commit` does: a panic in the iterator
            // leaves every value so far pushed and the producer just past them.
            slot.state.store(FULL, Ordering::Release);
            published.count += 1;
        }
        published.count
    }
}

impl<T> fmt::Debug for WriteChunkUninit<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteChunkUninit")
            .field("len", &self.len)
            .finish()
    }
}

/// Free slots of a queue reserved by [`Producer::write_chunk`], each holding a value (made by
/// `T::default()`) to be changed in place and then published together.
///
/// The chunk owns its values until a commit publishes them: dropping it uncommitted drops
/// every value and publishes nothing, and [`commit(n)`](Self::commit) publishes the first `n`
/// and drops the others. Publishing stores *full* into each slot, in ring order, with
/// `Release`, as [`WriteChunkUninit::commit`] does; each store is the linearization point of
/// that value's push. Forgetting the chunk (`mem::forget`) publishes nothing and leaks its
/// values: their slots stay free, and later pushes write over them without dropping them.
///
/// ```
/// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u32>(8);
/// let mut chunk = producer.write_chunk(3).unwrap();
/// *chunk.get_mut(0).unwrap() = 7;
/// assert_eq!(chunk.get(1), Some(&0)); // `u32::default()`
/// chunk.commit_all();
/// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [7, 0, 0]);
/// ```
pub struct WriteChunk<'a, T> {
    producer: &'a mut Producer<T>,
    start: usize,
    /// How many slots, from the first, hold a value: all of them once
    /// [`Producer::write_chunk`] has returned.
    len: usize,
    /// How many slots, from the first, a commit has published. The chunk owns the values of
    /// the others (`published..len`), and its `drop` drops them.
    published: usize,
}

impl<T> WriteChunk<'_, T> {
    /// How many slots the chunk holds.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// assert_eq!(producer.write_chunk(3).unwrap().len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chunk holds no slot.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// assert!(producer.write_chunk(0).unwrap().is_empty());
    /// assert!(!producer.write_chunk(1).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value in the `i`-th slot of the chunk, if `i < len()`.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<String>(4);
    /// let chunk = producer.write_chunk(2).unwrap();
    /// assert_eq!((chunk.get(1).map(String::as_str), chunk.get(2)), (Some(""), None));
    /// ```
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        // SAFETY: `start < capacity` and `i < len <= capacity`; the producer has not left while
        // the chunk borrows it.
        let slot = unsafe { self.producer.ring.slot_from(self.start, i) };
        // SAFETY: the slot is empty, so the consumer does not touch its value, and it holds the
        // value the chunk wrote (`i < len`, nothing published yet); only the chunk reaches it,
        // and it cannot change it while `self` is borrowed.
        Some(slot.value.with(|cell| unsafe { &*cell.cast::<T>() }))
    }

    /// The value in the `i`-th slot of the chunk, to change in place, if `i < len()`.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// let mut chunk = producer.write_chunk(2).unwrap();
    /// *chunk.get_mut(1).unwrap() = 9;
    /// assert!(chunk.get_mut(2).is_none());
    /// chunk.commit_all();
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [0, 9]);
    /// ```
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        // SAFETY: as in `get`.
        let slot = unsafe { self.producer.ring.slot_from(self.start, i) };
        // SAFETY: as in `get`: the slot is empty, so the consumer does not touch it until a
        // commit's `Release` store of full, which takes the chunk by value and so comes after
        // this borrow of `self` ends; the value is initialised; and the borrow of `self` is
        // exclusive, so no other reference to it exists meanwhile.
        Some(
            slot.value
                .with_mut(|cell| unsafe { &mut *cell.cast::<T>() }),
        )
    }

    /// The values of the chunk, in slot order.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// let mut chunk = producer.write_chunk(3).unwrap();
    /// *chunk.get_mut(2).unwrap() = 7;
    /// assert_eq!(chunk.iter().copied().collect::<Vec<_>>(), [0, 0, 7]);
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &T> + '_ {
        (0..self.len).map(|i| self.get(i).expect("inside the chunk"))
    }

    /// The values of the chunk, in slot order, to change in place.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u32>(4);
    /// let mut chunk = producer.write_chunk(4).unwrap();
    /// for (value, square) in chunk.iter_mut().zip((1..).map(|i| i * i)) {
    ///     *value = square;
    /// }
    /// chunk.commit_all();
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [1, 4, 9, 16]);
    /// ```
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = &mut T> + '_ {
        let (ring, start) = (self.producer.ring, self.start);
        (0..self.len).map(move |i| {
            // SAFETY: as in `get`: `i < len`.
            let slot = unsafe { ring.slot_from(start, i) };
            // SAFETY: as in `get_mut`, for the whole life of the iterator, which borrows `self`
            // exclusively; each index comes once, so the references handed out are disjoint.
            slot.value
                .with_mut(|cell| unsafe { &mut *cell.cast::<T>() })
        })
    }

    /// Publishes the values of the first `n` slots of the chunk and drops the others, whose
    /// slots stay free. Nothing else is pushed meanwhile: the chunk borrows the producer.
    ///
    /// # Panics
    /// If `n > len()`, as [`rtrb`](https://docs.rs/rtrb)'s commit does in debug builds (it
    /// publishes `len()` in release builds): nothing is published then, and every value of the
    /// chunk is dropped, as when it is dropped uncommitted. If a dropped value's `Drop`
    /// panics, the first `n` are published all the same, the producer is just past them, and
    /// the other values are dropped too (a second panic aborts, as in a `Vec`).
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// let mut chunk = producer.write_chunk(3).unwrap();
    /// chunk.iter_mut().for_each(|value| *value = 5);
    /// chunk.commit(2);
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [5, 5]);
    /// assert_eq!(producer.slots(), 4);
    /// ```
    pub fn commit(mut self, n: usize) {
        // A panic here drops `self` during the unwinding: every value, nothing published.
        assert!(
            n <= self.len,
            "commit of {n} slots of a chunk of {}",
            self.len
        );
        // SAFETY: the chunk reserved its slots (empty, this end's), `n <= len`, and each of
        // the first `n` holds the value the chunk wrote. The producer moves past them here,
        // before any user code (a value's `Drop`) runs, so that a panic there leaves it
        // consistent.
        unsafe { self.producer.publish(self.start, n) };
        // From here the consumer may take and drop the first `n` values: the chunk no longer
        // owns them.
        self.published = n;
        // `self` is dropped here, and with it the values of the slots from `n` on.
    }

    /// Publishes every value of the chunk.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(2);
    /// producer.write_chunk(2).unwrap().commit_all();
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [0, 0]);
    /// ```
    pub fn commit_all(self) {
        let n = self.len;
        self.commit(n);
    }
}

/// Drops the values the chunk still owns: all of them if it was not committed, and nothing is
/// published; the producer does not move. A value whose `Drop` panics does not stop the
/// others from being dropped.
impl<T> Drop for WriteChunk<'_, T> {
    fn drop(&mut self) {
        if !core::mem::needs_drop::<T>() {
            return;
        }
        let mut rest = OwnedValues {
            ring: self.producer.ring,
            start: self.start,
            next: self.published,
            end: self.len,
        };
        rest.drop_values();
    }
}

impl<T> fmt::Debug for WriteChunk<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteChunk")
            .field("len", &self.len)
            .finish()
    }
}

/// The values in the slots `next..end` from `start` (wrapping around the ring's end), which
/// the producer holds in free slots (a [`WriteChunk`]'s) and must drop. If a value's `drop`
/// panics, dropping this guard during the unwinding drops the values after it (as `Vec`
/// does); a second panic aborts.
///
/// Invariant: `start < capacity`, `end <= capacity`, the producer has not left, and each slot
/// of `next..end` is free (so the consumer does not touch it) and holds an initialised value
/// that nothing else will drop or read.
struct OwnedValues<T> {
    ring: Ring<T>,
    start: usize,
    next: usize,
    end: usize,
}

impl<T> OwnedValues<T> {
    fn drop_values(&mut self) {
        while self.next < self.end {
            let i = self.next;
            // Moved past before the drop, so that a panicking drop is not run again.
            self.next += 1;
            // SAFETY: by the invariant, `start < capacity` and `i < end <= capacity`.
            let slot = unsafe { self.ring.slot_from(self.start, i) };
            // SAFETY: by the invariant the slot holds an initialised value that only this
            // guard drops, and the guard has moved past it, so it is dropped once.
            slot.value
                .with_mut(|cell| unsafe { cell.cast::<T>().drop_in_place() });
        }
    }
}

impl<T> Drop for OwnedValues<T> {
    fn drop(&mut self) {
        self.drop_values();
    }
}

impl<T> Consumer<T> {
    /// The next `n` values, in place, to be read where they lie and then taken out together
    /// with [`ReadChunk::commit`] (or moved out one by one by its iterator), with no probe per
    /// value. A chunk may wrap around the ring's end. `n = 0` gives an empty chunk.
    ///
    /// Fails with [`ChunkError::TooFewSlots`] if fewer than `n` values are queued.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let chunk = consumer.read_chunk(2)?;
    /// assert_eq!(chunk.iter().sum::<i32>(), 3);
    /// chunk.commit_all();
    /// assert_eq!(consumer.try_pop(), Ok(3));
    /// # Ok::<(), pitlane_queue::spsc::ChunkError>(())
    /// ```
    pub fn read_chunk(&mut self, n: usize) -> Result<ReadChunk<'_, T>, ChunkError> {
        let start = self.position();
        if n > 0 {
            // SAFETY: `start < capacity`, and this end has not left.
            if n > self.ring.capacity || !unsafe { self.ring.run_is(start, n, FULL) } {
                // As in `write_chunk_uninit`: a count of `n` or more, taken after the refusal,
                // means the producer has pushed the `n` values meanwhile (and only this end
                // takes them out), so the chunk is had after all; the count's `Acquire` load
                // that saw a slot at or past the chunk's last one full synchronises with the
                // producer's store of full there, which came after every value before it.
                let queued = self.len();
                if queued < n {
                    return Err(ChunkError::TooFewSlots(queued));
                }
            }
        }
        // The run this end had claimed (if any) may cover the chunk's slots: drop the claim
        // now, so that a chunk that is forgotten (never dropped) after moving values out
        // cannot leave a run over slots already emptied. Each value taken out moves the
        // position on (`take_next`).
        self.run = self.ring.empty_run_at(start);
        Ok(ReadChunk {
            consumer: self,
            start,
            len: n,
            taken: 0,
        })
    }

    /// How many values could be popped now: the name [`rtrb`](https://docs.rs/rtrb) gives
    /// [`len`](Self::len).
    ///
    /// ```
    /// let (mut producer, consumer) = pitlane_queue::spsc::channel(4);
    /// producer.try_push(1).unwrap();
    /// assert_eq!(consumer.slots(), 1);
    /// ```
    pub fn slots(&self) -> usize {
        self.len()
    }

    /// How many values this end knows it can pop without reading any shared state: the full
    /// slots it has already claimed (the rest of the run its last probe found), with no
    /// atomic load at all (rtrb's `cached_slots`).
    ///
    /// It is a lower bound of [`slots`](Self::slots) at every instant (the producer only adds
    /// values), and often a much lower one: it can be 0 while `slots()` is not, since this
    /// end claims values only when a pop finds none claimed, at most a batch at a time, and a
    /// read chunk gives its claim up. When it is not 0, that many pops will succeed.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(8);
    /// producer.push_slice(&[1, 2, 3, 4]);
    /// // Four queued, none claimed yet.
    /// assert_eq!((consumer.cached_slots(), consumer.slots()), (0, 4));
    /// assert_eq!(consumer.try_pop(), Ok(1)); // this pop claims a run of values
    /// let known = consumer.cached_slots();
    /// assert!(known <= consumer.slots());
    /// assert_eq!(consumer.try_iter().take(known).count(), known);
    /// ```
    pub fn cached_slots(&self) -> usize {
        self.run.len()
    }
}

/// Queued values reserved by [`Consumer::read_chunk`], read (or changed: [`get_mut`],
/// [`iter_mut`]) in place and taken out together. Dropping (or forgetting) it leaves queued
/// the values that were neither committed nor moved out by its iterator, with any change made
/// to them.
///
/// [`get_mut`]: Self::get_mut
/// [`iter_mut`]: Self::iter_mut
///
/// Taking `n` values out stores *empty* into each slot, in ring order, with `Release`, after
/// the value was moved or dropped: the producer reuses a slot only once it sees it empty. Each
/// store is the linearization point of that value's pop.
///
/// ```
/// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(8);
/// producer.push_slice(&[1, 2, 3, 4]);
/// let chunk = consumer.read_chunk(3).unwrap();
/// assert_eq!(chunk.iter().sum::<i32>(), 6); // read in place
/// chunk.commit(2); // take the first two out; the third stays queued
/// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [3, 4]);
/// ```
pub struct ReadChunk<'a, T> {
    consumer: &'a mut Consumer<T>,
    start: usize,
    len: usize,
    /// How many values, from the first, the iterator has moved out.
    taken: usize,
}

impl<T> ReadChunk<'_, T> {
    /// How many values the chunk holds (not yet taken out).
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2]);
    /// assert_eq!(consumer.read_chunk(2).unwrap().len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.len - self.taken
    }

    /// Whether the chunk holds no value.
    ///
    /// ```
    /// let (_producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// assert!(consumer.read_chunk(0).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th value of the chunk, if `i < len()`.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&['x', 'y']);
    /// let chunk = consumer.read_chunk(2).unwrap();
    /// assert_eq!((chunk.get(1), chunk.get(2)), (Some(&'y'), None));
    /// ```
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len() {
            return None;
        }
        // SAFETY: `start < capacity`, `taken + i < len <= capacity`; the consumer has not left
        // while the chunk borrows it.
        let slot = unsafe { self.consumer.ring.slot_from(self.start, self.taken + i) };
        // SAFETY: the slot is full (the chunk's last slot was seen full with `Acquire`, and
        // states change in ring order), so its value is initialised and the producer does not
        // write it; only this end empties it, which it cannot while `self` is borrowed.
        Some(slot.value.with(|cell| unsafe { &*cell.cast::<T>() }))
    }

    /// The values of the chunk, in place, oldest first.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let chunk = consumer.read_chunk(3).unwrap();
    /// assert_eq!(chunk.iter().copied().collect::<Vec<_>>(), [1, 2, 3]);
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &T> + '_ {
        (0..self.len()).map(|i| self.get(i).expect("inside the chunk"))
    }

    /// The `i`-th value of the chunk, to change in place before it is committed or moved out,
    /// if `i < len()` (rtrb's `ReadChunk::as_mut_slices`, by index). A value changed and then
    /// left in the queue (the chunk dropped without a commit) stays changed.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2]);
    /// let mut chunk = consumer.read_chunk(2).unwrap();
    /// *chunk.get_mut(1).unwrap() *= 10;
    /// assert!(chunk.get_mut(2).is_none());
    /// drop(chunk); // nothing taken out
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [1, 20]);
    /// ```
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len() {
            return None;
        }
        // SAFETY: as in `get`.
        let slot = unsafe { self.consumer.ring.slot_from(self.start, self.taken + i) };
        // SAFETY: the slot is full, so its value is initialised, and the consumer owns it
        // alone: the producer writes only slots it has seen empty, and only this end empties
        // this one, which it cannot while `self` is borrowed exclusively (a commit or the
        // iterator needs `self`); that exclusive borrow also rules out any other reference to
        // the value from this end (`get`, `iter`, `Consumer::peek`).
        Some(
            slot.value
                .with_mut(|cell| unsafe { &mut *cell.cast::<T>() }),
        )
    }

    /// The values of the chunk, oldest first, to change in place before they are committed or
    /// moved out.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let mut chunk = consumer.read_chunk(3).unwrap();
    /// chunk.iter_mut().for_each(|value| *value *= 2);
    /// assert_eq!(chunk.collect::<Vec<_>>(), [2, 4, 6]);
    /// ```
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = &mut T> + '_ {
        let (ring, start) = (self.consumer.ring, self.start);
        (self.taken..self.len).map(move |i| {
            // SAFETY: as in `get`: `start < capacity` and `i < len <= capacity`.
            let slot = unsafe { ring.slot_from(start, i) };
            // SAFETY: as in `get_mut`, for the whole life of the iterator, which borrows
            // `self` exclusively; each index comes once, so the references are disjoint.
            slot.value
                .with_mut(|cell| unsafe { &mut *cell.cast::<T>() })
        })
    }

    /// How many values the chunk's iterator has moved out so far (rtrb's
    /// `ReadChunkIntoIter::iterated`: this chunk is its own iterator). [`len`](Self::len)
    /// counts the values still in it.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let mut chunk = consumer.read_chunk(3).unwrap();
    /// assert_eq!(chunk.iterated(), 0);
    /// assert_eq!(chunk.next(), Some(1));
    /// assert_eq!((chunk.iterated(), chunk.len()), (1, 2));
    /// chunk.by_ref().for_each(drop);
    /// assert_eq!(chunk.iterated(), 3);
    /// ```
    pub fn iterated(&self) -> usize {
        self.taken
    }

    /// Takes the first `n` values out of the queue and drops them; the others stay queued.
    ///
    /// # Panics
    /// If `n > len()`, as [`rtrb`](https://docs.rs/rtrb)'s commit does (nothing is taken out
    /// then), or if a value's `Drop` panics: the values before it are taken out, it is taken
    /// out too, and the ones after it stay queued.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// consumer.read_chunk(3).unwrap().commit(2);
    /// assert_eq!(consumer.try_pop(), Ok(3));
    /// ```
    pub fn commit(mut self, n: usize) {
        let len = self.len();
        assert!(n <= len, "commit of {n} values of a chunk of {len}");
        for _ in 0..n {
            drop(self.take_next());
        }
    }

    /// Takes every value of the chunk out of the queue and drops them.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2]);
    /// consumer.read_chunk(2).unwrap().commit_all();
    /// assert!(consumer.is_empty());
    /// ```
    pub fn commit_all(self) {
        let n = self.len();
        self.commit(n);
    }

    /// Moves the next value out and hands its slot back to the producer.
    fn take_next(&mut self) -> T {
        debug_assert!(self.taken < self.len);
        // SAFETY: as in `get`: the slot is full and reserved for this end.
        let slot = unsafe { self.consumer.ring.slot_from(self.start, self.taken) };
        // SAFETY: the value is initialised; the store of empty below gives the slot up, so it
        // is moved out exactly once.
        let value = slot.value.with(|cell| unsafe { cell.cast::<T>().read() });
        slot.state.store(EMPTY, Ordering::Release);
        self.taken += 1;
        // The consumer's position is just past the slot emptied, before any user code (the
        // value's `Drop`, the caller's loop) runs: a panic or a `mem::forget` of the chunk
        // leaves the consumer consistent.
        let ring = self.consumer.ring;
        let mut next = self.start + self.taken;
        if next >= ring.capacity {
            next -= ring.capacity;
        }
        self.consumer.run = ring.empty_run_at(next);
        value
    }
}

impl<T> Iterator for ReadChunk<'_, T> {
    type Item = T;

    /// Moves the next value out of the queue.
    fn next(&mut self) -> Option<T> {
        (self.taken < self.len).then(|| self.take_next())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len(), Some(self.len()))
    }
}

impl<T> ExactSizeIterator for ReadChunk<'_, T> {}

/// Once every value of the chunk is out, `next` keeps returning `None`.
impl<T> FusedIterator for ReadChunk<'_, T> {}

impl<T> fmt::Debug for ReadChunk<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadChunk")
            .field("len", &self.len())
            .finish()
    }
}

impl<'a, T> IntoIterator for &'a mut Consumer<T> {
    type Item = T;
    type IntoIter = TryIter<'a, T>;

    /// [`Consumer::try_iter`]: pops values until the queue is empty.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2]);
    /// let mut sum = 0;
    /// for value in &mut consumer {
    ///     sum += value;
    /// }
    /// assert_eq!(sum, 3);
    /// ```
    fn into_iter(self) -> TryIter<'a, T> {
        self.try_iter()
    }
}

/// Pops values until the queue is empty, owning the consumer; made by [`Consumer`]'s
/// [`IntoIterator`].
///
/// `next` returns `None` whenever the queue is empty at that moment, so the iterator is not
/// fused: while the producer lives, a later `next` may find more. To drain everything the
/// producer will ever send, loop until [`Consumer::is_abandoned`] holds and then drain once
/// more; [`into_inner`](Self::into_inner) gives the consumer back.
///
/// ```
/// let (mut producer, consumer) = pitlane_queue::spsc::channel(4);
/// producer.push_slice(&[1, 2, 3]);
/// drop(producer);
/// assert_eq!(consumer.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
/// ```
#[derive(Debug)]
pub struct IntoIter<T> {
    consumer: Consumer<T>,
}

impl<T> IntoIter<T> {
    /// The consumer, with whatever the iterator has not popped still in the queue.
    ///
    /// ```
    /// let (mut producer, consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2]);
    /// let mut values = consumer.into_iter();
    /// assert_eq!(values.next(), Some(1));
    /// let mut consumer = values.into_inner();
    /// assert_eq!(consumer.try_pop(), Ok(2));
    /// ```
    pub fn into_inner(self) -> Consumer<T> {
        self.consumer
    }
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        self.consumer.try_pop().ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.consumer.run.len(), None)
    }
}

impl<T> IntoIterator for Consumer<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    /// An iterator that owns the consumer and pops what is in the queue now: it yields
    /// values until the queue is empty, whether or not the producer is still there, and
    /// never waits (a library iterator that spun until the producer leaves could hang its
    /// caller). See [`IntoIter`].
    ///
    /// ```
    /// let (mut producer, consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// assert_eq!(consumer.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
    /// ```
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { consumer: self }
    }
}

// Every call leaves an end consistent at each point where user code can panic (an iterator's
// `next`, a `Clone`, a `Default`, a value's `Drop`): its position is just past the last slot
// whose state it stored. So an end observed after a panic is usable, as crossbeam's queues
// promise for theirs.
impl<T> UnwindSafe for Producer<T> {}
impl<T> RefUnwindSafe for Producer<T> {}
impl<T> UnwindSafe for Consumer<T> {}
impl<T> RefUnwindSafe for Consumer<T> {}

/// Bytes in, without blocking: `write` pushes as many bytes as fit and returns how many; a
/// full queue is [`WouldBlock`](std::io::ErrorKind::WouldBlock), and a queue whose consumer is
/// gone is [`BrokenPipe`](std::io::ErrorKind::BrokenPipe). `flush` has nothing to do: every
/// pushed byte is visible to the consumer.
///
/// ```
/// use std::io::{Read, Write};
///
/// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(4);
/// assert_eq!(producer.write(b"hello")?, 4);
/// assert_eq!(producer.write(b"o").unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
/// let mut buffer = [0; 8];
/// assert_eq!(consumer.read(&mut buffer)?, 4);
/// assert_eq!(&buffer[..4], b"hell");
/// # Ok::<(), std::io::Error>(())
/// ```
#[cfg(feature = "std")]
impl std::io::Write for Producer<u8> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.is_abandoned() {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        match self.push_slice(buf) {
            0 if !buf.is_empty() => Err(std::io::ErrorKind::WouldBlock.into()),
            pushed => Ok(pushed),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes out, without blocking: `read` pops as many bytes as are there (up to the buffer) and
/// returns how many; an empty queue is [`WouldBlock`](std::io::ErrorKind::WouldBlock) while the
/// producer lives, and the end of the stream (`Ok(0)`) once it is gone.
///
/// ```
/// use std::io::Read;
///
/// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(8);
/// producer.push_slice(b"bytes");
/// drop(producer);
/// let mut text = String::new();
/// consumer.read_to_string(&mut text)?;
/// assert_eq!(text, "bytes");
/// # Ok::<(), std::io::Error>(())
/// ```
#[cfg(feature = "std")]
impl std::io::Read for Consumer<u8> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // Seen before the pops: if the producer was gone then, an empty queue is the end.
        let abandoned = self.is_abandoned();
        let read = self.pop_slice(buf);
        if read == 0 && !buf.is_empty() && !abandoned {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(read)
    }
}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A small deterministic generator, so the sequences below are the same on every run.
    struct XorShift(u64);

    impl XorShift {
        fn below(&mut self, bound: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % bound as u64) as usize
        }
    }

    /// On one thread the queue must behave exactly like a bounded `VecDeque`: full exactly at
    /// `capacity`, empty exactly at zero, FIFO across every wrap, whatever the batch size.
    #[test]
    fn matches_a_bounded_deque_on_one_thread() {
        let mut random = XorShift(0x9E37_79B9_7F4A_7C15);
        for capacity in 1..=19 {
            for batch in 1..=capacity {
                for adaptive in [true, false] {
                    let (mut producer, mut consumer) = Builder::new(capacity)
                        .batch(batch)
                        .adaptive(adaptive)
                        .build::<usize>()
                        .unwrap();
                    let mut model = VecDeque::new();
                    let mut next = 0;
                    for _ in 0..400 {
                        match random.below(7) {
                            0..=2 => {
                                let expected = if model.len() < capacity {
                                    model.push_back(next);
                                    Ok(())
                                } else {
                                    Err(PushError::Full(next))
                                };
                                assert_eq!(producer.try_push(next), expected);
                                next += 1;
                            }
                            3..=4 => {
                                assert_eq!(consumer.try_pop().ok(), model.pop_front());
                            }
                            5 => {
                                assert_eq!(consumer.peek().ok(), model.front());
                            }
                            _ => {
                                assert_eq!(producer.len(), model.len());
                                assert_eq!(consumer.len(), model.len());
                                assert_eq!(producer.free_slots(), capacity - model.len());
                                assert_eq!(producer.is_full(), model.len() == capacity);
                                assert_eq!(consumer.is_empty(), model.is_empty());
                                assert_eq!(producer.is_empty(), model.is_empty());
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn batch_operations_match_single_ones() {
        let (mut producer, mut consumer) = Builder::new(10).batch(3).build::<u32>().unwrap();
        let mut expected = 0;
        let mut source = 0..1000;
        for round in 0..200 {
            let pushed = producer.push_iter(source.by_ref().take(round % 13));
            assert!(pushed <= round % 13);
            let got: Vec<u32> = consumer.try_iter().take(round % 7).collect();
            for value in got {
                assert_eq!(value, expected);
                expected += 1;
            }
        }
        let room = 10 - consumer.len();
        assert_eq!(producer.push_slice(&[1; 20]), room);
        assert_eq!(consumer.len(), 10);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert_eq!(
            try_channel::<u8>(0).unwrap_err(),
            ChannelError::ZeroCapacity
        );
        assert_eq!(
            try_channel::<u64>(usize::MAX).unwrap_err(),
            ChannelError::CapacityOverflow
        );
        assert_eq!(
            Builder::new(4).batch(5).build::<u8>().unwrap_err(),
            ChannelError::BatchOutOfRange {
                batch: 5,
                capacity: 4
            }
        );
        assert_eq!(
            Builder::new(4).batch(0).build::<u8>().unwrap_err(),
            ChannelError::BatchOutOfRange {
                batch: 0,
                capacity: 4
            }
        );
        assert_eq!(
            Builder::new(4).increment(0).build::<u8>().unwrap_err(),
            ChannelError::ZeroIncrement
        );
        // More slots than the address space holds.
        assert_eq!(
            try_channel::<u64>(usize::MAX / 4).map(|_| ()).unwrap_err(),
            ChannelError::CapacityOverflow
        );
        // Fits the address space but not the machine: an error, not an abort.
        #[cfg(target_pointer_width = "64")]
        match try_channel::<u64>(1 << 58) {
            Err(error @ ChannelError::OutOfMemory { capacity, bytes }) => {
                assert_eq!((capacity, bytes), (1 << 58, 1 << 62));
                assert!(
                    error.to_string().contains("288230376151711744 slots"),
                    "{error}"
                );
            }
            other => panic!("expected OutOfMemory, got {:?}", other.map(|_| ())),
        }
        assert_eq!(
            ChannelError::ZeroCapacity.to_string(),
            "the capacity must be at least 1"
        );
    }

    #[test]
    #[should_panic(expected = "spsc::channel(0): the capacity must be at least 1")]
    fn channel_panics_on_zero_capacity() {
        let _ = channel::<u8>(0);
    }

    #[test]
    fn adaptive_history_shrinks_then_grows_back() {
        let (mut producer, mut consumer) = Builder::new(64)
            .batch(16)
            .increment(4)
            .build::<u8>()
            .unwrap();
        producer.push_slice(&[0; 3]);
        // Starts from 16 (capped at the batch), backtracks to 2 and then the single slot
        // check covers the third.
        assert_eq!(consumer.try_pop(), Ok(0));
        assert_eq!(consumer.run.len(), 1);
        assert_eq!(consumer.batching.history, 2);
        assert_eq!(consumer.try_pop(), Ok(0));
        // From 2 + 4 = 6 down to the single remaining value.
        assert_eq!(consumer.try_pop(), Ok(0));
        assert_eq!(consumer.batching.history, 1);
        // An empty queue is reported by the first look, without a search.
        assert_eq!(consumer.try_pop(), Err(PopError::Empty));
        assert_eq!(consumer.batching.history, 1);
        producer.push_slice(&[0; 40]);
        assert_eq!(consumer.try_pop(), Ok(0));
        // The next search started from 1 + 4 = 5 and found 5 at once.
        assert_eq!(consumer.run.len(), 4);
        assert_eq!(consumer.batching.history, 5);
        consumer.try_iter().take(4).for_each(drop);
        assert_eq!(consumer.try_pop(), Ok(0));
        assert_eq!(consumer.batching.history, 9);
    }

    #[test]
    fn lone_values_are_claimed_one_at_a_time_and_a_burst_after_them_in_a_batch() {
        let (mut producer, mut consumer) = Builder::new(64)
            .batch(16)
            .increment(4)
            .build::<u32>()
            .unwrap();
        // Values one at a time, as in a ping-pong: every claim is the one slot.
        for value in 0..200 {
            assert_eq!(consumer.try_pop(), Err(PopError::Empty));
            producer.try_push(value).unwrap();
            assert_eq!(consumer.try_pop(), Ok(value));
            assert_eq!(consumer.run.len(), 0);
            assert_eq!(consumer.batching.history, 1);
        }
        // Past the ring's end too: the last slot's run is one, then the first slot's.
        assert_eq!(consumer.position(), 200 % 64);
        // A burst after lone values: the neighbour is full, so the adaptive search runs from
        // 1 + 4 and claims 5 at once.
        producer.push_slice(&(200..210).collect::<Vec<_>>());
        assert_eq!(consumer.try_pop(), Ok(200));
        assert_eq!(consumer.run.len(), 4);
        assert_eq!(consumer.batching.history, 5);
        let rest: Vec<u32> = consumer.try_iter().collect();
        assert_eq!(rest, (201..210).collect::<Vec<_>>());
        // Adaptation off: no shortcut, every search starts from the whole batch and halves.
        let (mut producer, mut consumer) = Builder::new(64)
            .batch(16)
            .adaptive(false)
            .build::<u32>()
            .unwrap();
        for value in 0..100 {
            producer.try_push(value).unwrap();
            assert_eq!(consumer.try_pop(), Ok(value));
            assert_eq!(consumer.run.len(), 0);
        }
    }

    #[test]
    fn ends_are_send() {
        fn send<S: Send>() {}
        send::<Producer<String>>();
        send::<Consumer<String>>();
    }
}
