//! The subjects of the `bag` suite: pitlane's structures (plain and through handles) and
//! the peers, each behind the [`BagSubject`] and [`Worker`] traits the workloads run.

use super::*;

/// A structure under test, as the workloads use it.
pub(super) trait BagSubject: Send + Sync + Sized + 'static {
    /// The path a user would type.
    const NAME: &'static str;
    /// Whether it is a peer (not pitlane's).
    const PEER: bool;
    /// Whether it promises FIFO order (then checked per producer).
    const FIFO: bool;
    /// The most items it can hold where its retrying push panics past that (the stack's
    /// [`MAX_ITEMS`](pitlane_queue::stack::MAX_ITEMS)); `None` for structures that grow until
    /// memory runs out, and for bounded ones whose push reports a full structure, which the
    /// workloads retry. `producer_consumer` keeps its backlog below it (see
    /// [`Backlog`](super::workloads::Backlog)).
    const HOLDS_AT_MOST: Option<usize> = None;
    /// An empty structure.
    fn make() -> Self;
    /// What one thread works through (a Bagpipe handle, or the structure itself).
    fn worker(&self) -> impl Worker + '_;
}

/// One thread's access to a structure.
pub(super) trait Worker {
    /// One attempt to push; `Err` hands the item back (a full bounded structure, or a lost
    /// race).
    fn try_push(&self, item: u64) -> Result<(), u64>;
    /// One attempt to pop.
    fn try_pop(&self) -> Option<u64>;
}

impl<W: Worker> Worker for &W {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        (**self).try_push(item)
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        (**self).try_pop()
    }
}

impl<B: pitlane_queue::WeakBag<Item = u64>> Worker for bagpipe::Handle<'_, B> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.push(item);
        Ok(())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.pop()
    }
}

impl BagSubject for Bagpipe<mpmc::Queue<u64>> {
    const NAME: &'static str = "pitlane::bagpipe::Handle<mpmc::Queue>";
    const PEER: bool = false;
    const FIFO: bool = false;
    fn make() -> Self {
        Bagpipe::new()
    }
    fn worker(&self) -> impl Worker + '_ {
        self.handle()
    }
}

impl BagSubject for Bagpipe<Stack<u64>> {
    const NAME: &'static str = "pitlane::bagpipe::Handle<stack::Stack>";
    const PEER: bool = false;
    const FIFO: bool = false;
    // At least one pipe's worth: kept below it, no pipe can fill up.
    const HOLDS_AT_MOST: Option<usize> = Some(pitlane_queue::stack::MAX_ITEMS);
    fn make() -> Self {
        Bagpipe::new()
    }
    fn worker(&self) -> impl Worker + '_ {
        self.handle()
    }
}

impl Worker for mpmc::Handle<'_, u64> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.push(item);
        Ok(())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.pop()
    }
}

impl BagSubject for mpmc::Queue<u64> {
    const NAME: &'static str = "pitlane::mpmc::Handle";
    const PEER: bool = false;
    const FIFO: bool = true;
    fn make() -> Self {
        mpmc::Queue::new()
    }
    fn worker(&self) -> impl Worker + '_ {
        self.handle()
    }
}

impl Worker for pitlane_queue::stack::Handle<'_, u64> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.push(item);
        Ok(())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.pop()
    }
}

impl BagSubject for Stack<u64> {
    const NAME: &'static str = "pitlane::stack::Handle";
    const PEER: bool = false;
    const FIFO: bool = false;
    const HOLDS_AT_MOST: Option<usize> = Some(pitlane_queue::stack::MAX_ITEMS);
    fn make() -> Self {
        Stack::new()
    }
    fn worker(&self) -> impl Worker + '_ {
        self.handle()
    }
}

impl Worker for crossbeam_queue::SegQueue<u64> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.push(item);
        Ok(())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.pop()
    }
}

impl BagSubject for crossbeam_queue::SegQueue<u64> {
    const NAME: &'static str = "crossbeam_queue::SegQueue";
    const PEER: bool = true;
    const FIFO: bool = true;
    fn make() -> Self {
        crossbeam_queue::SegQueue::new()
    }
    fn worker(&self) -> impl Worker + '_ {
        self
    }
}

impl Worker for crossbeam_queue::ArrayQueue<u64> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.push(item)
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.pop()
    }
}

impl BagSubject for crossbeam_queue::ArrayQueue<u64> {
    const NAME: &'static str = "crossbeam_queue::ArrayQueue";
    const PEER: bool = true;
    const FIFO: bool = true;
    fn make() -> Self {
        crossbeam_queue::ArrayQueue::new(CAPACITY)
    }
    fn worker(&self) -> impl Worker + '_ {
        self
    }
}

/// One of pitlane's structures used through its plain methods (`queue.push(..)`), with no
/// handle: what a user calls first.
pub(super) struct Plain<B>(B);

impl<B: pitlane_queue::WeakBag<Item = u64>> Worker for Plain<B> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.0.push(item);
        Ok(())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.0.pop()
    }
}

macro_rules! plain_subject {
    ($($bag:ty => $name:literal, fifo: $fifo:literal, holds: $holds:expr;)*) => {$(
        impl BagSubject for Plain<$bag> {
            const NAME: &'static str = $name;
            const PEER: bool = false;
            const FIFO: bool = $fifo;
            const HOLDS_AT_MOST: Option<usize> = $holds;
            fn make() -> Self {
                Plain(<$bag>::new())
            }
            fn worker(&self) -> impl Worker + '_ {
                self
            }
        }
    )*};
}

plain_subject! {
    Bagpipe<mpmc::Queue<u64>> => "pitlane::bagpipe::Bagpipe<mpmc::Queue>", fifo: false, holds: None;
    Bagpipe<Stack<u64>> => "pitlane::bagpipe::Bagpipe<stack::Stack>", fifo: false,
        holds: Some(pitlane_queue::stack::MAX_ITEMS);
    mpmc::Queue<u64> => "pitlane::mpmc::Queue", fifo: true, holds: None;
    Stack<u64> => "pitlane::stack::Stack", fifo: false, holds: Some(pitlane_queue::stack::MAX_ITEMS);
}

/// `concurrent_queue::ConcurrentQueue::bounded(CAPACITY)`.
pub(super) struct BoundedConcurrentQueue(concurrent_queue::ConcurrentQueue<u64>);
/// `concurrent_queue::ConcurrentQueue::unbounded()`.
pub(super) struct UnboundedConcurrentQueue(concurrent_queue::ConcurrentQueue<u64>);

impl Worker for concurrent_queue::ConcurrentQueue<u64> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.push(item).map_err(|e| e.into_inner())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.pop().ok()
    }
}

impl BagSubject for BoundedConcurrentQueue {
    const NAME: &'static str = "concurrent_queue::ConcurrentQueue::bounded";
    const PEER: bool = true;
    const FIFO: bool = true;
    fn make() -> Self {
        Self(concurrent_queue::ConcurrentQueue::bounded(CAPACITY))
    }
    fn worker(&self) -> impl Worker + '_ {
        &self.0
    }
}

impl BagSubject for UnboundedConcurrentQueue {
    const NAME: &'static str = "concurrent_queue::ConcurrentQueue::unbounded";
    const PEER: bool = true;
    const FIFO: bool = true;
    fn make() -> Self {
        Self(concurrent_queue::ConcurrentQueue::unbounded())
    }
    fn worker(&self) -> impl Worker + '_ {
        &self.0
    }
}

impl Worker for std::sync::Mutex<VecDeque<u64>> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(item);
        Ok(())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
    }
}

impl BagSubject for std::sync::Mutex<VecDeque<u64>> {
    const NAME: &'static str = "std::sync::Mutex<VecDeque>";
    const PEER: bool = true;
    const FIFO: bool = true;
    fn make() -> Self {
        std::sync::Mutex::new(VecDeque::new())
    }
    fn worker(&self) -> impl Worker + '_ {
        self
    }
}

impl Worker for parking_lot::Mutex<VecDeque<u64>> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.lock().push_back(item);
        Ok(())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.lock().pop_front()
    }
}

impl BagSubject for parking_lot::Mutex<VecDeque<u64>> {
    const NAME: &'static str = "parking_lot::Mutex<VecDeque>";
    const PEER: bool = true;
    const FIFO: bool = true;
    fn make() -> Self {
        parking_lot::Mutex::new(VecDeque::new())
    }
    fn worker(&self) -> impl Worker + '_ {
        self
    }
}

impl Worker for parking_lot::Mutex<Vec<u64>> {
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), u64> {
        self.lock().push(item);
        Ok(())
    }
    #[inline(always)]
    fn try_pop(&self) -> Option<u64> {
        self.lock().pop()
    }
}

impl BagSubject for parking_lot::Mutex<Vec<u64>> {
    const NAME: &'static str = "parking_lot::Mutex<Vec>";
    const PEER: bool = true;
    const FIFO: bool = false;
    fn make() -> Self {
        parking_lot::Mutex::new(Vec::new())
    }
    fn worker(&self) -> impl Worker + '_ {
        self
    }
}
