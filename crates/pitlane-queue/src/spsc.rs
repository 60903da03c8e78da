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
//! The queue is a ring of `capacity` slots. Each slot holds room for one `T` and a state byte,
//! *full* or *empty*; the paper uses a null value as "empty", which a generic `T` cannot spare.
//! The states and the values live in two arrays, so that the values of consecutive slots are
//! contiguous and [chunks](#chunks) can lend them out as slices; a cache line of states covers
//! 64 slots, so the state lines move between the ends' caches far less often than the values.
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
//! # Chunks
//!
//! [`Producer::write_chunk_uninit`] lends `n` free slots in place, as at most two slices of
//! `MaybeUninit<T>` (two when the stretch wraps past the ring's end), and
//! [`Consumer::read_chunk`] lends `n` values as at most two slices of `T`, as
//! [`rtrb`](https://docs.rs/rtrb) does. Getting a chunk is one probe, as for a batch: the far
//! slot of the stretch is empty (full), so every slot before it is. A write chunk's commit of
//! `k` slots is `k` pushes in a row, a read chunk's `k` pops: one `Release` store of the
//! slot's new state per slot, in ring order, after the values were written (moved out).
//!
//! The order matters, and it is the one the single operations use: the consumer takes a full
//! far slot as proof that the whole stretch before it is full, and starts emptying those slots
//! at once. Were the producer to store the states of a chunk from its last slot backwards, the
//! consumer could see the last one full, take the first slot while its state was still empty,
//! and have its store of empty overwritten by the producer's late store of full: a value popped
//! twice. Forwards, each `Release` store orders every earlier one, and the `Acquire` load that
//! sees the far slot full sees them all. Relaxed stores after one `Release` fence would not do
//! either: a fence orders the values before the stores, not the stores among themselves.
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
//!   never a later slot without the earlier ones. Getting a chunk changes nothing in the queue;
//!   a chunk that could not be had takes effect at the `Acquire` load that found its far slot
//!   unusable, and the count in its [`ChunkError`] is a snapshot taken just after.
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
//! Values still in the queue when both ends are gone are dropped, exactly once, by whichever end
//! is dropped last. Each end can ask [`Producer::is_abandoned`] / [`Consumer::is_abandoned`]
//! whether the other is gone. Neither end is `Clone`; both are `Send` when `T` is, and both
//! are `UnwindSafe` and `RefUnwindSafe`: a panic in user code (an iterator, a `Clone`, a
//! `Drop`) leaves an end consistent, with every value it had taken in or out accounted for.

mod chunk;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::panic::{RefUnwindSafe, UnwindSafe};
use core::ptr::NonNull;

pub use crate::error::{PopError, PushError};
pub use chunk::{ChunkError, ReadChunk, ReadChunkIntoIter, WriteChunkUninit};
use core::alloc::Layout;
use core::cell::UnsafeCell;

use pitlane_sync::shim::atomic::{AtomicBool, AtomicU8, Ordering};
use pitlane_sync::shim::hint::spin_loop;

/// The longest batch the defaults choose, whatever the capacity.
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
    /// let (producer, _consumer) = pitlane_queue::spsc::Builder::new(8).build::<u8>()?;
    /// assert_eq!(producer.capacity(), 8);
    /// # Ok::<(), pitlane_queue::spsc::ChannelError>(())
    /// ```
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            batch: None,
            increment: None,
            adaptive: true,
        }
    }

    /// The longest run of slots one probe may claim, on both ends (`1..=capacity`).
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

    /// How much the starting distance of a search grows after each search (at least 1).
    ///
    /// ```
    /// use pitlane_queue::spsc::{Builder, ChannelError};
    ///
    /// assert!(Builder::new(64).increment(usize::MAX).build::<u8>().is_ok());
    /// assert_eq!(
    ///     Builder::new(64).increment(0).build::<u8>().unwrap_err(),
    ///     ChannelError::ZeroIncrement
    /// );
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
    ///     pitlane_queue::spsc::Builder::new(16).adaptive(false).build::<u8>()?;
    /// producer.try_push(1).unwrap();
    /// assert_eq!(consumer.try_pop(), Ok(1));
    /// # Ok::<(), pitlane_queue::spsc::ChannelError>(())
    /// ```
    pub fn adaptive(mut self, adaptive: bool) -> Self {
        self.adaptive = adaptive;
        self
    }

    /// Allocates the ring and returns the two ends, or says why it cannot.
    ///
    /// ```
    /// use pitlane_queue::spsc::{Builder, ChannelError};
    ///
    /// let (mut producer, mut consumer) = Builder::new(4).batch(2).build::<&str>()?;
    /// producer.try_push("built").unwrap();
    /// assert_eq!(consumer.try_pop(), Ok("built"));
    /// assert_eq!(Builder::new(0).build::<u8>().unwrap_err(), ChannelError::ZeroCapacity);
    /// # Ok::<(), ChannelError>(())
    /// ```
    pub fn build<T>(self) -> Result<(Producer<T>, Consumer<T>), ChannelError> {
        let capacity = self.capacity;
        if capacity == 0 {
            return Err(ChannelError::ZeroCapacity);
        }
        if Layout::array::<AtomicBool>(capacity).is_err()
            || Layout::array::<MaybeUninit<T>>(capacity).is_err()
        {
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

        let shared = NonNull::from(Box::leak(Box::new(Shared::allocate(capacity)?)));
        // SAFETY: `shared` was just made from a live box, freed only when both ends leave.
        let ring = Ring::new(unsafe { shared.as_ref() });
        let producer = Producer {
            ring,
            run: Run::empty_at(0),
            batching: batching.clone(),
            shared,
        };
        let consumer = Consumer {
            ring,
            run: Run::empty_at(0),
            batching,
            shared,
        };
        Ok((producer, consumer))
    }
}

/// Why a queue could not be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// The allocator could not provide the slots.
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

/// What both ends own together: the slots and the news of each end's departure. It lives in a
/// box of its own that the last end to leave frees.
///
/// Slot `i` is the pair `states[i]`, `values[i]`. The two live in separate arrays so that the
/// values of consecutive slots are contiguous and can be lent out as slices (see the chunks).
struct Shared<T> {
    /// [`FULL`] while the value of its slot holds a value the consumer has not taken, [`EMPTY`]
    /// otherwise. Only the producer turns a state full and only the consumer turns it empty,
    /// each with `Release` after its access to the value; each reads it with `Acquire` before
    /// its access.
    states: Box<[AtomicBool]>,
    /// Initialised exactly while the state of the same index is full.
    values: Box<[UnsafeCell<MaybeUninit<T>>]>,
    /// Loom's record of who touches which value (see [`Access`]); nothing in production.
    access: Box<[Access]>,
    /// [`PRODUCER_GONE`] and [`CONSUMER_GONE`], each set once, with `AcqRel`, by the end
    /// leaving. This is the reference count of the box as well: an end that finds the other's
    /// bit already set is the last and frees it. (A `std::sync::Arc` would do, but its fence
    /// is invisible to ThreadSanitizer, which then reports the free as a race.)
    gone: AtomicU8,
}

/// The bit of [`Shared::gone`] the producer sets when it is dropped.
const PRODUCER_GONE: u8 = 1;
/// The bit of [`Shared::gone`] the consumer sets when it is dropped.
const CONSUMER_GONE: u8 = 2;

impl<T> Shared<T> {
    /// `capacity` empty slots, or [`ChannelError::OutOfMemory`] if the allocator cannot provide
    /// them (never an abort).
    fn allocate(capacity: usize) -> Result<Self, ChannelError> {
        let out_of_memory = ChannelError::OutOfMemory {
            capacity,
            bytes: capacity
                .saturating_mul(core::mem::size_of::<AtomicBool>())
                .saturating_add(capacity.saturating_mul(core::mem::size_of::<T>())),
        };
        let mut states = Vec::new();
        let mut values = Vec::new();
        let mut access = Vec::new();
        if states.try_reserve_exact(capacity).is_err()
            || values.try_reserve_exact(capacity).is_err()
            || access.try_reserve_exact(capacity).is_err()
        {
            return Err(out_of_memory);
        }
        states.extend((0..capacity).map(|_| AtomicBool::new(EMPTY)));
        values.resize_with(capacity, || UnsafeCell::new(MaybeUninit::uninit()));
        access.resize_with(capacity, Access::new);
        Ok(Self {
            states: states.into_boxed_slice(),
            values: values.into_boxed_slice(),
            access: access.into_boxed_slice(),
            gone: AtomicU8::new(0),
        })
    }

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
            // ours), so nothing else refers to the box; it came from `Box::leak`.
            drop(unsafe { Box::from_raw(shared.as_ptr()) });
        }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // Both ends are gone, and the last one's `AcqRel` update of `gone` synchronised with
        // everything the other did, so every state word is final.
        let slots = self
            .states
            .iter()
            .zip(self.values.iter_mut())
            .zip(&self.access);
        for ((state, value), access) in slots {
            if state.load(Ordering::Acquire) == FULL {
                access.write();
                // SAFETY: a full slot holds an initialised value that no end took; nothing else
                // can reach it any more, and it is dropped once because `values` goes next.
                unsafe { value.get_mut().assume_init_drop() };
            }
        }
    }
}

/// Loom's view of the values: an empty cell per slot whose accesses loom checks for races,
/// touched wherever the value of the slot is written or read. The values themselves live in
/// plain cells, contiguous, so that chunks can lend them as slices; in production this is a
/// zero-sized type and every call is nothing.
#[cfg(pitlane_loom)]
struct Access(loom::cell::UnsafeCell<()>);

/// Loom's view of the values (see the loom build's documentation); nothing in production.
#[cfg(not(pitlane_loom))]
struct Access;

impl Access {
    fn new() -> Self {
        #[cfg(pitlane_loom)]
        return Self(loom::cell::UnsafeCell::new(()));
        #[cfg(not(pitlane_loom))]
        Self
    }

    /// Records a write of the slot's value.
    #[inline(always)]
    fn write(&self) {
        #[cfg(pitlane_loom)]
        self.0.with_mut(|_| ());
    }

    /// Records a read of the slot's value.
    #[inline(always)]
    fn read(&self) {
        #[cfg(pitlane_loom)]
        self.0.with(|_| ());
    }
}

/// The slots as seen by one end: pointers into [`Shared`]'s arrays, valid until the end
/// leaves.
struct Ring<T> {
    states: NonNull<AtomicBool>,
    values: NonNull<MaybeUninit<T>>,
    access: NonNull<Access>,
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
    /// The arrays of `shared`, for an end that will leave no earlier than `shared` is freed.
    fn new(shared: &Shared<T>) -> Self {
        Self {
            states: NonNull::from(&*shared.states).cast(),
            // Through the cells, so that the pointer may write the values.
            values: NonNull::from(&*shared.values).cast(),
            access: NonNull::from(&*shared.access).cast(),
            capacity: shared.states.len(),
            _values: PhantomData,
        }
    }

    /// The state of slot `index`.
    ///
    /// # Safety
    /// `index < self.capacity`, and the end calling has not left.
    #[inline(always)]
    unsafe fn state(&self, index: usize) -> &AtomicBool {
        debug_assert!(index < self.capacity);
        // SAFETY: by the caller, `index` is in bounds of the live boxed slice.
        unsafe { self.states.add(index).as_ref() }
    }

    /// The value of slot `index`, uninitialised or not.
    ///
    /// # Safety
    /// `index <= self.capacity` (one past the end only to form the end of a slice), and the end
    /// calling has not left.
    #[inline(always)]
    unsafe fn value(&self, index: usize) -> NonNull<MaybeUninit<T>> {
        debug_assert!(index <= self.capacity);
        // SAFETY: by the caller, in bounds or one past the end of the live boxed slice.
        unsafe { self.values.add(index) }
    }

    /// Loom's record of slot `index` (see [`Access`]).
    ///
    /// # Safety
    /// As for [`Ring::state`].
    #[inline(always)]
    unsafe fn access(&self, index: usize) -> &Access {
        // SAFETY: by the caller, `index` is in bounds of the live boxed slice.
        unsafe { self.access.add(index).as_ref() }
    }

    /// Moves `value` into slot `index`.
    ///
    /// # Safety
    /// `index < capacity`; the slot is empty and this end, the producer, has seen it so
    /// (`Acquire`), so the consumer no longer reads it and will not until it sees the slot
    /// full; the end has not left.
    #[inline(always)]
    unsafe fn write(&self, index: usize, value: T) {
        // SAFETY: by the caller.
        unsafe { self.access(index) }.write();
        // SAFETY: by the caller, the value is this end's to write.
        unsafe { self.value(index).cast::<T>().write(value) };
    }

    /// Moves the value out of slot `index`.
    ///
    /// # Safety
    /// `index < capacity`; the slot is full and this end, the consumer, has seen it so
    /// (`Acquire`), so the value is initialised and the producer no longer touches it; the
    /// caller marks the slot empty afterwards, so the value is moved out once.
    #[inline(always)]
    unsafe fn read(&self, index: usize) -> T {
        // SAFETY: by the caller.
        unsafe { self.access(index) }.read();
        // SAFETY: by the caller, the value is initialised and this end's to take.
        unsafe { self.value(index).cast::<T>().read() }
    }

    /// Claims the next run of slots in state `wanted` for an end whose `run` is used up; false
    /// (and `run` still used up) when the very next slot is not `wanted`, which means full
    /// (for the producer) or empty (for the consumer).
    ///
    /// # Safety
    /// `run` is this end's, used up, and the end has not left.
    #[inline(always)]
    unsafe fn claim(&self, run: &mut Run, wanted: bool, batching: &mut Batching) -> bool {
        // The next slot, wrapping from one past the last slot to the first.
        let next = if run.next == self.capacity {
            0
        } else {
            run.next
        };
        // Whether the next slot is usable decides between "a run of at least one" and
        // "full"/"empty"; this load is the linearization point of the failing operation.
        // SAFETY: `next < capacity`.
        if unsafe { self.state(next) }.load(Ordering::Acquire) != wanted {
            batching.streaming = false;
            *run = Run::empty_at(next);
            return false;
        }
        // SAFETY: as for this function, and the slot at `next` is `wanted`.
        unsafe { self.claim_from(next, run, wanted, batching) };
        true
    }

    /// The rest of [`Ring::claim`] once the next slot is known to be usable: out of line, so
    /// that a poll of an empty (or full) queue stays a few instructions.
    ///
    /// # Safety
    /// As for `claim`, and `start < capacity` is a slot seen `wanted`.
    #[inline(never)]
    unsafe fn claim_from(
        &self,
        start: usize,
        run: &mut Run,
        wanted: bool,
        batching: &mut Batching,
    ) {
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
            unsafe { self.state(start + size - 1) }.load(Ordering::Acquire) == wanted
        };
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
            if unsafe { self.state(index) }.load(Ordering::Acquire) == wanted {
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
    fn run(&self, start: usize, len: usize) -> Run {
        assert!(start + len <= self.capacity);
        Run {
            next: start,
            end: start + len,
        }
    }

    /// The index of `run`'s next slot, wrapped into `0..capacity` (a used-up run may end
    /// one past the last slot).
    #[inline(always)]
    fn position_of(&self, run: &Run) -> usize {
        if run.next == self.capacity {
            0
        } else {
            run.next
        }
    }
}

/// The slots one end has claimed: indices `next` up to, not including, `end`, with
/// `next <= end <= capacity`.
#[derive(Clone, Copy, Debug)]
struct Run {
    next: usize,
    end: usize,
}

impl Run {
    /// No slot claimed, positioned at `at`.
    fn empty_at(at: usize) -> Self {
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
        self.end - self.next
    }

    /// The index of the next slot; the run moves past it.
    #[inline(always)]
    fn take(&mut self) -> usize {
        debug_assert!(!self.is_used_up());
        let index = self.next;
        self.next = index + 1;
        index
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
    run: Run,
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
    /// (the consumer only makes more room). Reads `O(log capacity)` slot states.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// assert_eq!(producer.free_slots(), 1);
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
            && unsafe { self.ring.state(self.position()) }.load(Ordering::Acquire) == FULL
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
        let index = self.run.take();
        // SAFETY: by the caller, the run had a next slot: it is empty (probed with `Acquire`,
        // after the consumer's `Release` store of empty), and the consumer will not read it
        // until it sees the store of full below.
        unsafe { self.ring.write(index, value) };
        // SAFETY: `index < capacity`, in the run.
        unsafe { self.ring.state(index) }.store(FULL, Ordering::Release);
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
    run: Run,
    batching: Batching,
    /// This end's share of the box holding the slots.
    shared: NonNull<Shared<T>>,
}

// SAFETY: the consumer moves `T`s out of the ring (and lends `&T` only through `&mut self`);
// its pointers are only used by this end, under the protocol, and the box lives until both ends
// leave.
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

    /// The oldest value, left in the queue, or [`PopError::Empty`].
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(2);
    /// producer.try_push(String::from("front")).unwrap();
    /// assert_eq!(consumer.peek().map(String::as_str), Ok("front"));
    /// assert_eq!(consumer.try_pop().as_deref(), Ok("front"));
    /// ```
    pub fn peek(&self) -> Result<&T, PopError> {
        let tail = self.position();
        // A claimed run is full; otherwise one look at the next slot, claiming nothing (that
        // would need `&mut self`): the next `try_pop` claims as usual.
        // SAFETY: `tail < capacity`, and this end has not left.
        if self.run.is_used_up() && unsafe { self.ring.state(tail) }.load(Ordering::Acquire) != FULL
        {
            return Err(PopError::Empty);
        }
        // SAFETY: as above.
        unsafe { self.ring.access(tail) }.read();
        // SAFETY: the slot is full and seen so with `Acquire` (now or by the probe that claimed
        // the run), so the value is initialised and the producer does not touch it; only this
        // end may take it, which needs `&mut self`, not possible while the borrow lives.
        Ok(unsafe { self.ring.value(tail).cast::<T>().as_ref() })
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
            && unsafe { self.ring.state(self.position()) }.load(Ordering::Acquire) == EMPTY
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
        let index = self.run.take();
        // SAFETY: by the caller, the run had a next slot: it is full (covered by an `Acquire`
        // probe that saw the producer's `Release` store of full), and the store of empty below
        // gives it up, so the value is moved out exactly once.
        let value = unsafe { self.ring.read(index) };
        // SAFETY: `index < capacity`, in the run.
        unsafe { self.ring.state(index) }.store(EMPTY, Ordering::Release);
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
    /// drop(producer);
    /// assert_eq!(consumer.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
    /// ```
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { consumer: self }
    }
}

/// Pops values until the queue is empty, owning the consumer; made by [`Consumer`]'s
/// [`IntoIterator`].
///
/// `next` returns `None` whenever the queue is empty at that moment, so the iterator is not
/// fused: while the producer lives, a later `next` may find more. To drain everything the
/// producer will ever send, loop until [`Consumer::is_abandoned`] holds and then drain once
/// more; [`into_inner`](Self::into_inner) gives the consumer back.
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

// Every call leaves an end consistent at each point where user code can panic (an iterator's
// `next`, a `Clone`, a value's `Drop`): its position is just past the last slot whose state it
// stored, as the chunks' documentation explains. So an end observed after a panic is usable,
// as crossbeam's queues promise for theirs.
impl<T> UnwindSafe for Producer<T> {}
impl<T> RefUnwindSafe for Producer<T> {}
impl<T> UnwindSafe for Consumer<T> {}
impl<T> RefUnwindSafe for Consumer<T> {}

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
        // Fits the address space but not the machine: an error, not an abort.
        match try_channel::<u64>(1 << 58) {
            Err(error @ ChannelError::OutOfMemory { capacity, bytes }) => {
                // A state byte and a `u64` per slot.
                assert_eq!((capacity, bytes), (1 << 58, 9 << 58));
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
    fn ends_are_send() {
        fn send<S: Send>() {}
        send::<Producer<String>>();
        send::<Consumer<String>>();
    }
}
