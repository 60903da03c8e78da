//! Chunks: many slots written or read in place, then committed at once.
//!
//! A chunk is a stretch of the ring, possibly wrapping past its end, that one end has made
//! sure of with one probe: the producer that its far slot is empty, the consumer that it is
//! full. Slot states change in ring order only, so that one `Acquire` load vouches for every
//! slot before it, and for the consumer it also makes their values visible (see the module
//! documentation). The chunk then lends the values as at most two slices, the part before the
//! ring's end and the part after it.
//!
//! Committing `n` slots is `n` pushes (or pops) in a row: each slot gets its own `Release`
//! store of its new state, in ring order, the first slot first. The order is what the other
//! end relies on; see [the module documentation](super#chunks).
//!
//! While a chunk lives, the end's run covers the chunk's slots up to the ring's end (`wrapped`
//! counts the known slots past it), and every commit takes its slots through the run one by
//! one: whatever a panic interrupts (an iterator, a `Drop` of a value), the end's position
//! is always just past the last slot whose state was stored.

use core::fmt;
use core::mem::MaybeUninit;
use core::slice;

use super::{Consumer, EMPTY, FULL, Producer, Ring, Run};
use pitlane_sync::shim::atomic::Ordering;

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
    /// ones for a read chunk): a snapshot, which the other end only makes larger.
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

/// Points `run` at `known` slots from `start` that this end owns, as far as the ring's end;
/// returns how many of them lie past the end, from slot 0.
fn enter(capacity: usize, run: &mut Run, start: usize, known: usize) -> usize {
    let before_end = known.min(capacity - start);
    *run = Run {
        next: start,
        end: start + before_end,
    };
    known - before_end
}

/// The index of the run's next slot; the run moves past it, and on to slot 0 and the
/// `wrapped` slots there when it reaches the ring's end.
#[inline]
fn take_wrapping(run: &mut Run, wrapped: &mut usize) -> usize {
    let index = run.take();
    if run.is_used_up() && *wrapped > 0 {
        *run = Run {
            next: 0,
            end: *wrapped,
        };
        *wrapped = 0;
    }
    index
}

impl<T> Ring<T> {
    /// Whether the `n >= 1` slots from `start` (wrapping) are all in state `wanted`: one
    /// `Acquire` load of the last of them, since states change in ring order only.
    ///
    /// # Safety
    /// `start < capacity`, and the end calling has not left.
    unsafe fn has_run(&self, start: usize, n: usize, wanted: bool) -> bool {
        debug_assert!(n >= 1);
        if n > self.capacity {
            return false;
        }
        let mut far = start + n - 1;
        if far >= self.capacity {
            far -= self.capacity;
        }
        // SAFETY: `far < capacity`, wrapped above.
        unsafe { self.state(far) }.load(Ordering::Acquire) == wanted
    }

    /// The values of the `len` slots from `start`, wrapping: the part before the ring's end
    /// and the part after it.
    ///
    /// # Safety
    /// `start < capacity`, `len <= capacity`, the end calling has not left, and the slots are
    /// this end's for as long as the slices live (and, for `&mut`, no other reference to them
    /// exists).
    unsafe fn values_of<'a>(
        &self,
        start: usize,
        len: usize,
    ) -> (&'a mut [MaybeUninit<T>], &'a mut [MaybeUninit<T>]) {
        let first = len.min(self.capacity - start);
        // SAFETY: `start + first <= capacity` and `len - first <= start`, so both ranges are
        // in bounds and do not overlap; the values are this end's, by the caller. The pointer
        // came through the `UnsafeCell`s, so it may write.
        unsafe {
            (
                slice::from_raw_parts_mut(self.value(start).as_ptr(), first),
                slice::from_raw_parts_mut(self.value(0).as_ptr(), len - first),
            )
        }
    }

    /// Tells loom that this end touches the values of the `len` slots from `start`.
    ///
    /// # Safety
    /// As for [`Ring::values_of`].
    #[cfg_attr(not(pitlane_loom), allow(unused_variables))]
    unsafe fn touch(&self, start: usize, len: usize, write: bool) {
        #[cfg(pitlane_loom)]
        for offset in 0..len {
            let index = (start + offset) % self.capacity;
            // SAFETY: `index < capacity`.
            let access = unsafe { self.access(index) };
            if write { access.write() } else { access.read() }
        }
    }
}

impl<T> Producer<T> {
    /// Lends the next `n` free slots, uninitialised, to be written in place and then committed
    /// with [`WriteChunkUninit::commit`], [`commit_all`](WriteChunkUninit::commit_all) or
    /// [`fill_from_iter`](WriteChunkUninit::fill_from_iter); or says how many slots are free if
    /// fewer than `n`. `n` may be 0. Needs no shared access when the end has `n` slots claimed
    /// already, and one `Acquire` load otherwise.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u32>(4);
    /// let mut chunk = producer.write_chunk_uninit(3).unwrap();
    /// let (first, second) = chunk.as_mut_slices();
    /// assert_eq!(first.len() + second.len(), 3);
    /// for (slot, value) in first.iter_mut().chain(second).zip([10, 20, 30]) {
    ///     slot.write(value);
    /// }
    /// // SAFETY: all three slots were written just above.
    /// unsafe { chunk.commit_all() };
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [10, 20, 30]);
    /// ```
    pub fn write_chunk_uninit(&mut self, n: usize) -> Result<WriteChunkUninit<'_, T>, ChunkError> {
        let start = self.position();
        // SAFETY: `start < capacity`, and this end has not left.
        if n > self.run.len() && !unsafe { self.ring.has_run(start, n, EMPTY) } {
            return Err(ChunkError::TooFewSlots(self.free_slots()));
        }
        Ok(self.chunk_at(start, n))
    }

    /// A write chunk of `n` free slots from `start`, the position, once they are known free.
    fn chunk_at(&mut self, start: usize, n: usize) -> WriteChunkUninit<'_, T> {
        let known = n.max(self.run.len());
        let wrapped = enter(self.ring.capacity, &mut self.run, start, known);
        // SAFETY: the slots are free and this end's (claimed or probed), and the end is alive.
        unsafe { self.ring.touch(start, n, true) };
        WriteChunkUninit {
            producer: self,
            start,
            len: n,
            wrapped,
        }
    }

    /// A write chunk of as many free slots as there are, up to `n`.
    #[cfg(feature = "std")]
    fn write_chunk_up_to(&mut self, n: usize) -> WriteChunkUninit<'_, T> {
        let start = self.position();
        // SAFETY: as in `write_chunk_uninit`.
        let n = if n <= self.run.len() || unsafe { self.ring.has_run(start, n, EMPTY) } {
            n
        } else {
            self.free_slots().min(n)
        };
        self.chunk_at(start, n)
    }

    /// How many values could be pushed now: the name [`rtrb`](https://docs.rs/rtrb) gives
    /// [`free_slots`](Self::free_slots). Reads `O(log capacity)` slot states.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel(4);
    /// producer.try_push(1).unwrap();
    /// assert_eq!(producer.slots(), 3);
    /// ```
    pub fn slots(&self) -> usize {
        self.free_slots()
    }
}

impl<T> Consumer<T> {
    /// Lends the next `n` values in place, to be read and then committed (popped) with
    /// [`ReadChunk::commit`] or [`commit_all`](ReadChunk::commit_all), or moved out one by one
    /// through [`IntoIterator`]; or says how many values there are if fewer than `n`. `n` may
    /// be 0. Values not committed stay in the queue.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let chunk = consumer.read_chunk(2).unwrap();
    /// let (first, second) = chunk.as_slices();
    /// assert_eq!([first, second].concat(), [1, 2]);
    /// chunk.commit_all();
    /// assert_eq!(consumer.try_pop(), Ok(3));
    /// ```
    pub fn read_chunk(&mut self, n: usize) -> Result<ReadChunk<'_, T>, ChunkError> {
        let start = self.position();
        // SAFETY: `start < capacity`, and this end has not left.
        if n > self.run.len() && !unsafe { self.ring.has_run(start, n, FULL) } {
            return Err(ChunkError::TooFewSlots(self.len()));
        }
        Ok(self.chunk_at(start, n))
    }

    /// A read chunk of `n` full slots from `start`, the position, once they are known full.
    fn chunk_at(&mut self, start: usize, n: usize) -> ReadChunk<'_, T> {
        let known = n.max(self.run.len());
        let wrapped = enter(self.ring.capacity, &mut self.run, start, known);
        // SAFETY: the slots are full and this end's (claimed or probed), and the end is alive.
        unsafe { self.ring.touch(start, n, false) };
        ReadChunk {
            consumer: self,
            start,
            len: n,
            wrapped,
        }
    }

    /// A read chunk of as many values as there are, up to `n`.
    #[cfg(feature = "std")]
    fn read_chunk_up_to(&mut self, n: usize) -> ReadChunk<'_, T> {
        let start = self.position();
        // SAFETY: as in `read_chunk`.
        let n = if n <= self.run.len() || unsafe { self.ring.has_run(start, n, FULL) } {
            n
        } else {
            self.len().min(n)
        };
        self.chunk_at(start, n)
    }

    /// How many values could be popped now: the name [`rtrb`](https://docs.rs/rtrb) gives
    /// [`len`](Self::len). Reads `O(log capacity)` slot states.
    ///
    /// ```
    /// let (mut producer, consumer) = pitlane_queue::spsc::channel(4);
    /// producer.try_push(1).unwrap();
    /// assert_eq!(consumer.slots(), 1);
    /// ```
    pub fn slots(&self) -> usize {
        self.len()
    }
}

/// Free slots lent by [`Producer::write_chunk_uninit`], written in place.
///
/// Nothing reaches the consumer until a commit. Values written into slots that are not
/// committed are forgotten, not dropped (which only matters if `T` has a destructor): the slots
/// stay free.
pub struct WriteChunkUninit<'a, T> {
    producer: &'a mut Producer<T>,
    /// The first slot's index, the producer's position.
    start: usize,
    /// How many slots, from `start`, wrapping.
    len: usize,
    /// How many free slots the producer knows of from slot 0, past the ring's end.
    wrapped: usize,
}

impl<T> WriteChunkUninit<'_, T> {
    /// The slots: the part up to the ring's end and the part from its start. The first is
    /// empty only if the chunk is; the second is empty unless the chunk wraps.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// let mut chunk = producer.write_chunk_uninit(4).unwrap();
    /// let (first, second) = chunk.as_mut_slices();
    /// assert_eq!((first.len(), second.len()), (4, 0));
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [MaybeUninit<T>], &mut [MaybeUninit<T>]) {
        // SAFETY: the slots are free and the producer's until committed; the slices borrow the
        // chunk, which borrows the producer exclusively.
        unsafe { self.producer.ring.values_of(self.start, self.len) }
    }

    /// How many slots the chunk has.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// assert_eq!(producer.write_chunk_uninit(3).unwrap().len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chunk has no slots.
    ///
    /// ```
    /// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
    /// assert!(producer.write_chunk_uninit(0).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Hands the first `n` slots to the consumer, in order: `n` pushes.
    ///
    /// # Safety
    /// The first `n` slots have been initialised through
    /// [`as_mut_slices`](Self::as_mut_slices).
    ///
    /// # Panics
    /// If `n` is more than [`len`](Self::len).
    ///
    /// ```
    /// use std::mem::MaybeUninit;
    ///
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// let mut chunk = producer.write_chunk_uninit(3).unwrap();
    /// chunk.as_mut_slices().0[0] = MaybeUninit::new('a');
    /// // SAFETY: the first slot was written above.
    /// unsafe { chunk.commit(1) };
    /// assert_eq!(consumer.try_iter().collect::<String>(), "a");
    /// ```
    pub unsafe fn commit(mut self, n: usize) {
        assert!(
            n <= self.len,
            "commit({n}) of a chunk of {} slots",
            self.len
        );
        let ring = self.producer.ring;
        for _ in 0..n {
            let index = take_wrapping(&mut self.producer.run, &mut self.wrapped);
            // SAFETY: `index < capacity`, and the producer is alive.
            unsafe { ring.access(index) }.write();
            // The value is written (by the caller), so this store publishes it; stores go in
            // ring order, so a consumer that sees this slot full sees every earlier one full.
            // SAFETY: as above.
            unsafe { ring.state(index) }.store(FULL, Ordering::Release);
        }
    }

    /// Hands every slot to the consumer: [`commit`](Self::commit)`(len)`.
    ///
    /// # Safety
    /// Every slot has been initialised through [`as_mut_slices`](Self::as_mut_slices).
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(2);
    /// let mut chunk = producer.write_chunk_uninit(2).unwrap();
    /// let (first, _) = chunk.as_mut_slices();
    /// first[0].write(1);
    /// first[1].write(2);
    /// // SAFETY: both slots were written above.
    /// unsafe { chunk.commit_all() };
    /// assert_eq!(consumer.len(), 2);
    /// ```
    pub unsafe fn commit_all(self) {
        let len = self.len;
        // SAFETY: by the caller, every slot is initialised.
        unsafe { self.commit(len) }
    }

    /// Moves values from `values` into the slots, in order, until either runs out, and hands
    /// each to the consumer as it is written; returns how many. A value is taken from the
    /// iterator only when a slot is there for it. Safe: only written slots are committed, also
    /// if the iterator panics.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// let chunk = producer.write_chunk_uninit(3).unwrap();
    /// assert_eq!(chunk.fill_from_iter([7, 8]), 2);
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [7, 8]);
    /// ```
    pub fn fill_from_iter<I: IntoIterator<Item = T>>(mut self, values: I) -> usize {
        let ring = self.producer.ring;
        let mut values = values.into_iter();
        for filled in 0..self.len {
            let Some(value) = values.next() else {
                return filled;
            };
            let index = take_wrapping(&mut self.producer.run, &mut self.wrapped);
            // SAFETY: the slot is in the chunk: free, and this end's to write.
            unsafe { ring.write(index, value) };
            // SAFETY: `index < capacity`; the store publishes the value just written.
            unsafe { ring.state(index) }.store(FULL, Ordering::Release);
        }
        self.len
    }
}

impl<T> fmt::Debug for WriteChunkUninit<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteChunkUninit")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

/// Values lent in place by [`Consumer::read_chunk`].
///
/// Nothing leaves the queue until a commit, or until its [`IntoIterator`] yields it:
/// dropping the chunk leaves its values where they are (this is how to peek at many).
pub struct ReadChunk<'a, T> {
    consumer: &'a mut Consumer<T>,
    /// The first slot's index, the consumer's position.
    start: usize,
    /// How many slots, from `start`, wrapping.
    len: usize,
    /// How many full slots the consumer knows of from slot 0, past the ring's end.
    wrapped: usize,
}

impl<T> ReadChunk<'_, T> {
    /// The values: the part up to the ring's end and the part from its start. The first is
    /// empty only if the chunk is; the second is empty unless the chunk wraps.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(3);
    /// producer.push_slice(&[1, 2, 3]);
    /// consumer.read_chunk(2).unwrap().commit_all();
    /// producer.push_slice(&[4, 5]);
    /// let chunk = consumer.read_chunk(3).unwrap();
    /// assert_eq!(chunk.as_slices(), (&[3][..], &[4, 5][..]));
    /// ```
    pub fn as_slices(&self) -> (&[T], &[T]) {
        // SAFETY: the slots are full and the consumer's (only it may empty them, and it is
        // borrowed by the chunk); their values are initialised and visible (see `read_chunk`).
        let (first, second) = unsafe { self.consumer.ring.values_of(self.start, self.len) };
        // SAFETY: as above, initialised.
        unsafe { (assume_init(first), assume_init(second)) }
    }

    /// The values, to change in place before they are committed or left in the queue.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(3);
    /// producer.push_slice(&[1, 2]);
    /// let mut chunk = consumer.read_chunk(2).unwrap();
    /// chunk.as_mut_slices().0[1] *= 10;
    /// drop(chunk);
    /// assert_eq!(consumer.try_iter().collect::<Vec<_>>(), [1, 20]);
    /// ```
    pub fn as_mut_slices(&mut self) -> (&mut [T], &mut [T]) {
        // SAFETY: as in `as_slices`, and the chunk is borrowed exclusively.
        let (first, second) = unsafe { self.consumer.ring.values_of(self.start, self.len) };
        // SAFETY: as above, initialised.
        unsafe { (assume_init_mut(first), assume_init_mut(second)) }
    }

    /// How many values the chunk has.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(3);
    /// producer.push_slice(&[1, 2]);
    /// assert_eq!(consumer.read_chunk(2).unwrap().len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chunk has no values.
    ///
    /// ```
    /// let (_producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(3);
    /// assert!(consumer.read_chunk(0).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pops the first `n` values, in order, and drops them; the rest stay in the queue. If a
    /// value's `Drop` panics, the values before it are popped, it counts as popped, and the
    /// ones after it stay in the queue.
    ///
    /// # Panics
    /// If `n` is more than [`len`](Self::len).
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(3);
    /// producer.push_slice(&[1, 2, 3]);
    /// consumer.read_chunk(3).unwrap().commit(2);
    /// assert_eq!(consumer.try_pop(), Ok(3));
    /// ```
    pub fn commit(mut self, n: usize) {
        assert!(
            n <= self.len,
            "commit({n}) of a chunk of {} values",
            self.len
        );
        for _ in 0..n {
            drop(self.pop_next());
        }
    }

    /// Pops and drops every value of the chunk: [`commit`](Self::commit)`(len)`.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(3);
    /// producer.push_slice(&[1, 2]);
    /// consumer.read_chunk(2).unwrap().commit_all();
    /// assert!(consumer.is_empty());
    /// ```
    pub fn commit_all(self) {
        let len = self.len;
        self.commit(len);
    }

    /// Moves the next value of the chunk out and hands its slot back to the producer: one pop.
    /// The chunk must have a value left (callers count).
    #[inline]
    fn pop_next(&mut self) -> T {
        let ring = self.consumer.ring;
        let index = take_wrapping(&mut self.consumer.run, &mut self.wrapped);
        self.start = if index + 1 == ring.capacity {
            0
        } else {
            index + 1
        };
        self.len -= 1;
        // SAFETY: the slot is in the chunk: full, its value visible, and this end's; the store
        // of empty below gives it up, so the value is moved out once.
        let value = unsafe { ring.read(index) };
        // SAFETY: `index < capacity`, and the consumer is alive.
        unsafe { ring.state(index) }.store(EMPTY, Ordering::Release);
        value
    }
}

impl<T> fmt::Debug for ReadChunk<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadChunk")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl<'a, T> IntoIterator for ReadChunk<'a, T> {
    type Item = T;
    type IntoIter = ReadChunkIntoIter<'a, T>;

    /// An iterator that pops the chunk's values one by one as it yields them; those it does
    /// not yield stay in the queue, whether the iterator is dropped or forgotten.
    ///
    /// ```
    /// let (mut producer, mut consumer) = pitlane_queue::spsc::channel(4);
    /// producer.push_slice(&[1, 2, 3]);
    /// let mut values = consumer.read_chunk(3).unwrap().into_iter();
    /// assert_eq!(values.next(), Some(1));
    /// drop(values);
    /// assert_eq!(consumer.try_pop(), Ok(2));
    /// ```
    fn into_iter(self) -> Self::IntoIter {
        ReadChunkIntoIter { chunk: self }
    }
}

/// Pops a [`ReadChunk`]'s values as it yields them; made by its [`IntoIterator`].
pub struct ReadChunkIntoIter<'a, T> {
    chunk: ReadChunk<'a, T>,
}

impl<T> Iterator for ReadChunkIntoIter<'_, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        (self.chunk.len > 0).then(|| self.chunk.pop_next())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.chunk.len, Some(self.chunk.len))
    }
}

impl<T> ExactSizeIterator for ReadChunkIntoIter<'_, T> {}

impl<T> core::iter::FusedIterator for ReadChunkIntoIter<'_, T> {}

impl<T> fmt::Debug for ReadChunkIntoIter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadChunkIntoIter")
            .field("left", &self.chunk.len)
            .finish()
    }
}

/// `&[T]` of initialised values.
///
/// # Safety
/// Every element is initialised.
unsafe fn assume_init<T>(values: &[MaybeUninit<T>]) -> &[T] {
    // SAFETY: `MaybeUninit<T>` has the layout of `T`, and by the caller each is initialised.
    unsafe { slice::from_raw_parts(values.as_ptr().cast::<T>(), values.len()) }
}

/// `&mut [T]` of initialised values.
///
/// # Safety
/// Every element is initialised.
unsafe fn assume_init_mut<T>(values: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: `MaybeUninit<T>` has the layout of `T`, and by the caller each is initialised.
    unsafe { slice::from_raw_parts_mut(values.as_mut_ptr().cast::<T>(), values.len()) }
}

/// Writes as many bytes as there are free slots, in place, and returns how many; never waits.
/// When the queue is full and `buf` is not empty, nothing is written and the error is
/// [`WouldBlock`](std::io::ErrorKind::WouldBlock), as for a non-blocking socket (and as
/// [`rtrb`](https://docs.rs/rtrb) does); once the consumer is gone the error is
/// [`BrokenPipe`](std::io::ErrorKind::BrokenPipe), as for a pipe; an empty `buf` gives `Ok(0)`.
/// `flush` does nothing: every byte written is already in the queue.
///
/// ```
/// use std::io::{ErrorKind, Write};
///
/// let (mut producer, _consumer) = pitlane_queue::spsc::channel::<u8>(4);
/// assert_eq!(producer.write(b"hello").unwrap(), 4);
/// assert_eq!(producer.write(b"o").unwrap_err().kind(), ErrorKind::WouldBlock);
/// ```
#[cfg(feature = "std")]
impl std::io::Write for Producer<u8> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.is_abandoned() {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        let mut chunk = self.write_chunk_up_to(buf.len());
        if chunk.is_empty() {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        let (first, second) = chunk.as_mut_slices();
        for (slot, byte) in first.iter_mut().chain(second).zip(buf) {
            slot.write(*byte);
        }
        let written = chunk.len();
        // SAFETY: every slot of the chunk was written above (the chunk is no longer than
        // `buf`).
        unsafe { chunk.commit_all() };
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads as many bytes as are queued, up to `buf.len()`, and returns how many; never waits.
/// When the queue is empty and `buf` is not, nothing is read and the error is
/// [`WouldBlock`](std::io::ErrorKind::WouldBlock) while the producer lives, as
/// [`rtrb`](https://docs.rs/rtrb) does; once the producer is gone and the queue is drained,
/// `read` returns `Ok(0)`, the end of the stream, as a pipe does (rtrb keeps saying
/// `WouldBlock` there), so `read_to_end` finishes.
///
/// ```
/// use std::io::{ErrorKind, Read, Write};
///
/// let (mut producer, mut consumer) = pitlane_queue::spsc::channel::<u8>(8);
/// producer.write_all(b"bytes").unwrap();
/// let mut buf = [0; 8];
/// assert_eq!(consumer.read(&mut buf).unwrap(), 5);
/// assert_eq!(&buf[..5], b"bytes");
/// assert_eq!(consumer.read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
/// ```
#[cfg(feature = "std")]
impl std::io::Read for Consumer<u8> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Seen before the look at the queue: if the producer was gone then, an empty queue
        // is the end of the stream.
        let abandoned = self.is_abandoned();
        let chunk = self.read_chunk_up_to(buf.len());
        if chunk.is_empty() {
            if abandoned {
                return Ok(0);
            }
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        let (first, second) = chunk.as_slices();
        let (head, tail) = buf.split_at_mut(first.len());
        head.copy_from_slice(first);
        tail[..second.len()].copy_from_slice(second);
        let read = chunk.len();
        chunk.commit_all();
        Ok(read)
    }
}
