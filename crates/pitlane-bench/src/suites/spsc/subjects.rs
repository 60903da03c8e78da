//! The subjects of the `spsc` suite: the [`Lane`] trait the workloads drive, pitlane's
//! B-Queue and the peers a Rust user would pick instead (the paper's baselines are in
//! `baselines`).

use super::*;

/// A kind of SPSC queue of `u64`s, as the workloads drive it.
pub trait Lane {
    /// The subject's name in the report.
    const NAME: &'static str;
    /// Whether it is a peer (everything but pitlane's own).
    const PEER: bool = true;
    /// Whether it needs the auxiliary timer thread (the sane MCRingBuffer).
    const NEEDS_TICKER: bool = false;
    /// The producing end.
    type Tx: Tx;
    /// The consuming end.
    type Rx: Rx;
    /// A queue holding `capacity` items; `batch` is for the queues that batch.
    fn pair(capacity: usize, batch: usize, ticker: &Ticker) -> (Self::Tx, Self::Rx);
}

/// A producing end.
pub trait Tx: Send {
    /// Pushes `value`; false if the queue is full.
    fn try_push(&mut self, value: u64) -> bool;
    /// Called while the producer waits or has nothing to push.
    fn idle(&mut self) {}
}

/// A consuming end.
pub trait Rx: Send {
    /// Pops the oldest value, `None` if there is none.
    fn try_pop(&mut self) -> Option<u64>;
}

/// `pitlane::spsc`, with self-adaptive backtracking (`ADAPTIVE`) or plain backtracking.
pub struct PitlaneSpsc<const ADAPTIVE: bool>;

impl<const ADAPTIVE: bool> Lane for PitlaneSpsc<ADAPTIVE> {
    const NAME: &'static str = if ADAPTIVE {
        "pitlane::spsc"
    } else {
        "pitlane::spsc (adaptive off)"
    };
    const PEER: bool = false;
    type Tx = pitlane::Producer<u64>;
    type Rx = pitlane::Consumer<u64>;

    fn pair(capacity: usize, batch: usize, _ticker: &Ticker) -> (Self::Tx, Self::Rx) {
        pitlane::Builder::new(capacity)
            .batch(batch)
            .adaptive(ADAPTIVE)
            .build()
            .expect("the suite asks for valid shapes")
    }
}

impl Tx for pitlane::Producer<u64> {
    #[inline]
    fn try_push(&mut self, value: u64) -> bool {
        pitlane::Producer::try_push(self, value).is_ok()
    }
}

impl Rx for pitlane::Consumer<u64> {
    #[inline]
    fn try_pop(&mut self) -> Option<u64> {
        pitlane::Consumer::try_pop(self).ok()
    }
}

/// `rtrb::RingBuffer`.
pub struct Rtrb;

impl Lane for Rtrb {
    const NAME: &'static str = "rtrb";
    type Tx = rtrb::Producer<u64>;
    type Rx = rtrb::Consumer<u64>;

    fn pair(capacity: usize, _batch: usize, _ticker: &Ticker) -> (Self::Tx, Self::Rx) {
        rtrb::RingBuffer::new(capacity)
    }
}

impl Tx for rtrb::Producer<u64> {
    #[inline]
    fn try_push(&mut self, value: u64) -> bool {
        self.push(value).is_ok()
    }
}

impl Rx for rtrb::Consumer<u64> {
    #[inline]
    fn try_pop(&mut self) -> Option<u64> {
        self.pop().ok()
    }
}

/// `ringbuf::HeapRb`, split into its caching endpoints (the crate's recommended setup).
pub struct Ringbuf;

impl Lane for Ringbuf {
    const NAME: &'static str = "ringbuf";
    type Tx = ringbuf::HeapProd<u64>;
    type Rx = ringbuf::HeapCons<u64>;

    fn pair(capacity: usize, _batch: usize, _ticker: &Ticker) -> (Self::Tx, Self::Rx) {
        use ringbuf::traits::Split;
        ringbuf::HeapRb::<u64>::new(capacity).split()
    }
}

impl Tx for ringbuf::HeapProd<u64> {
    #[inline]
    fn try_push(&mut self, value: u64) -> bool {
        ringbuf::traits::Producer::try_push(self, value).is_ok()
    }
}

impl Rx for ringbuf::HeapCons<u64> {
    #[inline]
    fn try_pop(&mut self) -> Option<u64> {
        ringbuf::traits::Consumer::try_pop(self)
    }
}

/// `crossbeam_queue::ArrayQueue`, shared by the two ends.
pub struct ArrayQueue;

/// One end of an `ArrayQueue`.
pub struct ArrayQueueEnd(std::sync::Arc<crossbeam_queue::ArrayQueue<u64>>);

impl Lane for ArrayQueue {
    const NAME: &'static str = "crossbeam_queue::ArrayQueue";
    type Tx = ArrayQueueEnd;
    type Rx = ArrayQueueEnd;

    fn pair(capacity: usize, _batch: usize, _ticker: &Ticker) -> (Self::Tx, Self::Rx) {
        let queue = std::sync::Arc::new(crossbeam_queue::ArrayQueue::new(capacity));
        (
            ArrayQueueEnd(std::sync::Arc::clone(&queue)),
            ArrayQueueEnd(queue),
        )
    }
}

impl Tx for ArrayQueueEnd {
    #[inline]
    fn try_push(&mut self, value: u64) -> bool {
        self.0.push(value).is_ok()
    }
}

impl Rx for ArrayQueueEnd {
    #[inline]
    fn try_pop(&mut self) -> Option<u64> {
        self.0.pop()
    }
}

/// `std::sync::mpsc::sync_channel`, used through `try_send` / `try_recv`.
pub struct SyncChannel;

impl Lane for SyncChannel {
    const NAME: &'static str = "std::sync::mpsc::sync_channel";
    type Tx = std::sync::mpsc::SyncSender<u64>;
    type Rx = std::sync::mpsc::Receiver<u64>;

    fn pair(capacity: usize, _batch: usize, _ticker: &Ticker) -> (Self::Tx, Self::Rx) {
        std::sync::mpsc::sync_channel(capacity)
    }
}

impl Tx for std::sync::mpsc::SyncSender<u64> {
    #[inline]
    fn try_push(&mut self, value: u64) -> bool {
        self.try_send(value).is_ok()
    }
}

impl Rx for std::sync::mpsc::Receiver<u64> {
    #[inline]
    fn try_pop(&mut self) -> Option<u64> {
        self.try_recv().ok()
    }
}
