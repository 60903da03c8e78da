//! rtrb's names for `pitlane_queue::spsc`, so that rtrb's own test files run against pitlane's
//! queue with their `use rtrb::...` lines untouched. `.ci/rtrb-conformance.py` builds this file
//! as the library of its scratch crate, under the library name `rtrb`.
//!
//! Only names and shapes change here; every behaviour is pitlane's. Each method forwards to one
//! pitlane method and, at most, reshapes its result:
//!
//! | rtrb                                  | pitlane_queue::spsc                                      |
//! |---------------------------------------|----------------------------------------------------------|
//! | `RingBuffer::new(n)`                  | `channel(n)` (panics as rtrb's does on a bad capacity)   |
//! | `Producer::push` / `Consumer::pop`    | `try_push` / `try_pop`                                   |
//! | `peek`, `slots`, `cached_slots`       | the same names                                           |
//! | `is_full`, `is_empty`, `is_abandoned` | the same names                                           |
//! | `buffer().capacity()`                 | `capacity()`, read once when the ends are made           |
//! | `write_chunk`, `write_chunk_uninit`   | the same names; the chunk types are pitlane's own        |
//! | `read_chunk`                          | the same name; pitlane's `ReadChunk` is its own iterator |
//! | `ReadChunkIntoIter::iterated`         | `ReadChunk::iterated`, reached through `into_iter()`     |
//! | `push_partial_slice(s)`               | `push_slice(s)`, its count turned into `s.split_at`      |
//! | `pop_partial_slice(s)`                | `pop_slice(s)`, its count turned into `s.split_at_mut`   |
//! | `pop_partial_slice_uninit`            | the same name                                            |
//! | `pop_entire_slice_uninit`             | the same name                                            |
//! | `PushError`, `PopError`, `PeekError`  | pitlane's `PushError`, `PopError`, `PopError`            |
//! | `chunks::ChunkError`                  | pitlane's `ChunkError` (the same shape)                  |
//! | `io::Write` / `io::Read` for `u8`     | pitlane's impls, forwarded                               |
//!
//! What rtrb has and pitlane has not (`as_slices`/`as_mut_slices` on any chunk, equality of
//! ends, a capacity of 0, ...) is not made up here: the tests that need it are skipped by the
//! script, each with its reason.
#![forbid(unsafe_code)]

use core::fmt;
use core::marker::PhantomData;

use pitlane_queue::spsc;
pub use pitlane_queue::spsc::{PopError, PushError};

/// rtrb's error of `peek`; pitlane's `peek` fails with its `PopError`.
pub type PeekError = PopError;

/// rtrb's `chunks` module: pitlane's chunk types under rtrb's path.
pub mod chunks {
    pub use pitlane_queue::spsc::{ChunkError, ReadChunk, WriteChunk, WriteChunkUninit};
}

/// What rtrb's ends share; here it only answers `capacity`, which pitlane's ends report.
pub struct RingBuffer<T> {
    capacity: usize,
    _values: PhantomData<T>,
}

impl<T> RingBuffer<T> {
    /// `pitlane_queue::spsc::channel(capacity)`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(capacity: usize) -> (Producer<T>, Consumer<T>) {
        let (producer, consumer) = spsc::channel(capacity);
        let producer = Producer {
            buffer: RingBuffer::of(producer.capacity()),
            inner: producer,
        };
        let consumer = Consumer {
            buffer: RingBuffer::of(consumer.capacity()),
            inner: consumer,
        };
        (producer, consumer)
    }

    fn of(capacity: usize) -> Self {
        Self {
            capacity,
            _values: PhantomData,
        }
    }

    /// The capacity pitlane's end reported.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// `pitlane_queue::spsc::Producer` under rtrb's method names.
pub struct Producer<T> {
    inner: spsc::Producer<T>,
    buffer: RingBuffer<T>,
}

impl<T> Producer<T> {
    pub fn push(&mut self, value: T) -> Result<(), PushError<T>> {
        self.inner.try_push(value)
    }

    pub fn slots(&self) -> usize {
        self.inner.slots()
    }

    pub fn cached_slots(&self) -> usize {
        self.inner.cached_slots()
    }

    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    pub fn is_abandoned(&self) -> bool {
        self.inner.is_abandoned()
    }

    pub fn buffer(&self) -> &RingBuffer<T> {
        &self.buffer
    }

    pub fn write_chunk(&mut self, n: usize) -> Result<chunks::WriteChunk<'_, T>, chunks::ChunkError>
    where
        T: Default,
    {
        self.inner.write_chunk(n)
    }

    pub fn write_chunk_uninit(
        &mut self,
        n: usize,
    ) -> Result<chunks::WriteChunkUninit<'_, T>, chunks::ChunkError> {
        self.inner.write_chunk_uninit(n)
    }

    pub fn push_partial_slice<'a>(&mut self, slice: &'a [T]) -> (&'a [T], &'a [T])
    where
        T: Copy,
    {
        let pushed = self.inner.push_slice(slice);
        slice.split_at(pushed)
    }
}

impl<T> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

#[cfg(feature = "std")]
impl std::io::Write for Producer<u8> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::Write::write(&mut self.inner, buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::Write::flush(&mut self.inner)
    }
}

/// `pitlane_queue::spsc::Consumer` under rtrb's method names.
pub struct Consumer<T> {
    inner: spsc::Consumer<T>,
    buffer: RingBuffer<T>,
}

impl<T> Consumer<T> {
    pub fn pop(&mut self) -> Result<T, PopError> {
        self.inner.try_pop()
    }

    pub fn peek(&self) -> Result<&T, PeekError> {
        self.inner.peek()
    }

    pub fn slots(&self) -> usize {
        self.inner.slots()
    }

    pub fn cached_slots(&self) -> usize {
        self.inner.cached_slots()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn is_abandoned(&self) -> bool {
        self.inner.is_abandoned()
    }

    pub fn buffer(&self) -> &RingBuffer<T> {
        &self.buffer
    }

    pub fn read_chunk(&mut self, n: usize) -> Result<chunks::ReadChunk<'_, T>, chunks::ChunkError> {
        self.inner.read_chunk(n)
    }

    pub fn pop_partial_slice<'a>(&mut self, slice: &'a mut [T]) -> (&'a mut [T], &'a mut [T])
    where
        T: Copy,
    {
        let popped = self.inner.pop_slice(slice);
        slice.split_at_mut(popped)
    }

    pub fn pop_partial_slice_uninit<'a>(
        &mut self,
        slice: &'a mut [core::mem::MaybeUninit<T>],
    ) -> (&'a mut [T], &'a mut [core::mem::MaybeUninit<T>])
    where
        T: Copy,
    {
        self.inner.pop_partial_slice_uninit(slice)
    }

    pub fn pop_entire_slice_uninit<'a>(
        &mut self,
        slice: &'a mut [core::mem::MaybeUninit<T>],
    ) -> Result<&'a mut [T], chunks::ChunkError>
    where
        T: Copy,
    {
        self.inner.pop_entire_slice_uninit(slice)
    }
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

#[cfg(feature = "std")]
impl std::io::Read for Consumer<u8> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::io::Read::read(&mut self.inner, buf)
    }
}
