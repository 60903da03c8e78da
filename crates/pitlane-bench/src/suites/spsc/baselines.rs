//! The B-Queue paper's baselines (Wang et al., IJPP 2013, Section 2), for `u64` items, written
//! from the paper's figures for this benchmark only; they are not part of pitlane's library.
//!
//! - [`Lamport`]: Fig. 1. Shared `head` and `tail`, read by both ends on every operation, kept
//!   in one cache line as the paper describes (the line "bouncing back and forth").
//! - [`FastForward`]: Fig. 2 and 3. No shared indices: an empty slot holds 0 (a value `v` is
//!   stored as `v + 1`); the consumer's temporal slipping (`adjust_slip`) waits while the
//!   producer is fewer than `DANGER` slots ahead until it is `GOOD` slots ahead, with the
//!   thresholds the FastForward authors suggest (2 and 6 cache lines of items).
//! - [`McRingBuffer`]: Fig. 4. Cache-line protected control variables with batched index
//!   updates: the producer publishes its index once per `batch` inserts and the consumer once
//!   per `batch` extracts. In its plain form a partial batch stays invisible until the batch
//!   fills, so two threads that wait on each other deadlock (Section 2.5; the suite leaves it
//!   out of the ping-pong workload for that reason). In its "sane" form (Section 5.3) an
//!   auxiliary thread ticks every 10 µs, the producer checks the tick on every insert and
//!   whenever it is idle, and after a tick it fills the partial batch with garbage that the
//!   consumer discards.
//!
//! Lamport's queue and MCRingBuffer waste one slot to tell full from empty; they get one slot
//! more than the capacity asked for, so that every subject holds `capacity` items. Slots are
//! `AtomicU64` accessed with `Relaxed` where the paper has a plain access: on x86-64 that is the
//! same instruction, and it keeps this file free of `unsafe`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::{Lane, Rx, Tx};

/// The slots of a ring.
fn slots(count: usize) -> Arc<[AtomicU64]> {
    (0..count).map(|_| AtomicU64::new(0)).collect()
}

/// `index + 1`, wrapped to `len`.
#[inline(always)]
fn next(index: usize, len: usize) -> usize {
    if index + 1 == len { 0 } else { index + 1 }
}

// ---------------------------------------------------------------------------------------------
// Lamport

/// Lamport's queue (the paper's Fig. 1).
pub struct Lamport;

/// Both indices in one cache line, as in the paper.
#[repr(C, align(64))]
struct LamportIndices {
    /// Next slot the producer writes.
    head: AtomicUsize,
    /// Next slot the consumer reads.
    tail: AtomicUsize,
}

/// Lamport's producing end.
pub struct LamportTx {
    indices: Arc<LamportIndices>,
    slots: Arc<[AtomicU64]>,
}

/// Lamport's consuming end.
pub struct LamportRx {
    indices: Arc<LamportIndices>,
    slots: Arc<[AtomicU64]>,
}

impl Lane for Lamport {
    const NAME: &'static str = "baseline::Lamport";
    type Tx = LamportTx;
    type Rx = LamportRx;

    fn pair(capacity: usize, _batch: usize, _ticker: &Ticker) -> (LamportTx, LamportRx) {
        let indices = Arc::new(LamportIndices {
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
        });
        let slots = slots(capacity + 1);
        (
            LamportTx {
                indices: Arc::clone(&indices),
                slots: Arc::clone(&slots),
            },
            LamportRx { indices, slots },
        )
    }
}

impl Tx for LamportTx {
    #[inline]
    fn try_push(&mut self, value: u64) -> bool {
        let head = self.indices.head.load(Ordering::Relaxed);
        let after = next(head, self.slots.len());
        if after == self.indices.tail.load(Ordering::Acquire) {
            return false;
        }
        self.slots[head].store(value, Ordering::Relaxed);
        self.indices.head.store(after, Ordering::Release);
        true
    }
}

impl Rx for LamportRx {
    #[inline]
    fn try_pop(&mut self) -> Option<u64> {
        let tail = self.indices.tail.load(Ordering::Relaxed);
        if tail == self.indices.head.load(Ordering::Acquire) {
            return None;
        }
        let value = self.slots[tail].load(Ordering::Relaxed);
        self.indices
            .tail
            .store(next(tail, self.slots.len()), Ordering::Release);
        Some(value)
    }
}

// ---------------------------------------------------------------------------------------------
// FastForward

/// FastForward with temporal slipping (the paper's Fig. 2 and 3).
pub struct FastForward;

/// Items per 64-byte cache line.
const ITEMS_PER_LINE: usize = 64 / 8;
/// Slip below this distance (2 cache lines of items, FastForward's suggestion) is dangerous.
const DANGER: usize = 2 * ITEMS_PER_LINE;
/// The slip `adjust_slip` waits for (6 cache lines of items, FastForward's suggestion).
const GOOD: usize = 6 * ITEMS_PER_LINE;
/// `adjust_slip` runs once every this many successful dequeues.
const SLIP_PERIOD: u32 = 256;
/// The paper's `avg_time`, the time to produce one item, in spin hints.
const AVG_TIME_SPINS: usize = 4;

/// Where each end is, for `adjust_slip` only (the queue itself needs neither).
struct FastForwardPositions {
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
}

/// FastForward's producing end.
pub struct FastForwardTx {
    slots: Arc<[AtomicU64]>,
    positions: Arc<FastForwardPositions>,
    head: usize,
}

/// FastForward's consuming end.
pub struct FastForwardRx {
    slots: Arc<[AtomicU64]>,
    positions: Arc<FastForwardPositions>,
    tail: usize,
    until_slip: u32,
}

impl Lane for FastForward {
    const NAME: &'static str = "baseline::FastForward";
    type Tx = FastForwardTx;
    type Rx = FastForwardRx;

    fn pair(capacity: usize, _batch: usize, _ticker: &Ticker) -> (FastForwardTx, FastForwardRx) {
        let slots = slots(capacity);
        let positions = Arc::new(FastForwardPositions {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
        });
        (
            FastForwardTx {
                slots: Arc::clone(&slots),
                positions: Arc::clone(&positions),
                head: 0,
            },
            FastForwardRx {
                slots,
                positions,
                tail: 0,
                until_slip: 0,
            },
        )
    }
}

impl Tx for FastForwardTx {
    #[inline]
    fn try_push(&mut self, value: u64) -> bool {
        let slot = &self.slots[self.head];
        if slot.load(Ordering::Acquire) != 0 {
            return false;
        }
        slot.store(value + 1, Ordering::Release);
        self.head = next(self.head, self.slots.len());
        self.positions.head.store(self.head, Ordering::Relaxed);
        true
    }
}

impl FastForwardRx {
    /// How far the producer is ahead (the paper's `distance(producer, consumer)`).
    fn distance(&self) -> usize {
        let head = self.positions.head.load(Ordering::Relaxed);
        (head + self.slots.len() - self.tail) % self.slots.len()
    }

    /// The paper's Fig. 3.
    #[cold]
    fn adjust_slip(&mut self) {
        let mut distance = self.distance();
        if distance < DANGER {
            loop {
                let old = distance;
                for _ in 0..AVG_TIME_SPINS * (GOOD + 1 - distance) {
                    std::hint::spin_loop();
                }
                distance = self.distance();
                if !(distance < GOOD && old < distance) {
                    break;
                }
            }
        }
    }
}

impl Rx for FastForwardRx {
    #[inline]
    fn try_pop(&mut self) -> Option<u64> {
        if self.until_slip == 0 {
            self.until_slip = SLIP_PERIOD;
            self.adjust_slip();
        }
        let slot = &self.slots[self.tail];
        let stored = slot.load(Ordering::Acquire);
        if stored == 0 {
            return None;
        }
        slot.store(0, Ordering::Release);
        self.tail = next(self.tail, self.slots.len());
        self.positions.tail.store(self.tail, Ordering::Relaxed);
        self.until_slip -= 1;
        Some(stored - 1)
    }
}

// ---------------------------------------------------------------------------------------------
// MCRingBuffer

/// The value the "sane" MCRingBuffer injects to flush a partial batch; the consumer drops it.
/// Benchmarks never send it.
pub const GARBAGE: u64 = u64::MAX;

/// MCRingBuffer with batched index updates (the paper's Fig. 4); `SANE` adds the garbage
/// injection of Section 5.3.
pub struct McRingBuffer<const SANE: bool>;

/// The shared control variables, each in its own cache line ("cache-line protection").
struct McShared {
    /// The consumer's published index (the paper's `head`, "read").
    read: CachePadded<AtomicUsize>,
    /// The producer's published index (the paper's `tail`, "write").
    write: CachePadded<AtomicUsize>,
}

/// MCRingBuffer's producing end.
pub struct McTx {
    slots: Arc<[AtomicU64]>,
    shared: Arc<McShared>,
    next_write: usize,
    local_read: usize,
    w_batch: usize,
    batch: usize,
    /// The auxiliary thread's tick and the last tick this end acted on (sane form only).
    tick: Option<(Arc<AtomicU64>, u64)>,
}

/// MCRingBuffer's consuming end.
pub struct McRx {
    slots: Arc<[AtomicU64]>,
    shared: Arc<McShared>,
    next_read: usize,
    local_write: usize,
    r_batch: usize,
    batch: usize,
}

impl<const SANE: bool> Lane for McRingBuffer<SANE> {
    const NAME: &'static str = if SANE {
        "baseline::MCRingBuffer(sane)"
    } else {
        "baseline::MCRingBuffer(deadlock)"
    };
    const NEEDS_TICKER: bool = SANE;
    type Tx = McTx;
    type Rx = McRx;

    fn pair(capacity: usize, batch: usize, ticker: &Ticker) -> (McTx, McRx) {
        let slots = slots(capacity + 1);
        let shared = Arc::new(McShared {
            read: CachePadded::new(AtomicUsize::new(0)),
            write: CachePadded::new(AtomicUsize::new(0)),
        });
        let tick = SANE.then(|| {
            let tick = ticker.tick();
            let seen = tick.load(Ordering::Relaxed);
            (tick, seen)
        });
        (
            McTx {
                slots: Arc::clone(&slots),
                shared: Arc::clone(&shared),
                next_write: 0,
                local_read: 0,
                w_batch: 0,
                batch,
                tick,
            },
            McRx {
                slots,
                shared,
                next_read: 0,
                local_write: 0,
                r_batch: 0,
                batch,
            },
        )
    }
}

impl McTx {
    /// The paper's `Insert`.
    #[inline]
    fn insert(&mut self, value: u64) -> bool {
        let len = self.slots.len();
        let after_next_write = next(self.next_write, len);
        if after_next_write == self.local_read {
            if after_next_write == self.shared.read.load(Ordering::Acquire) {
                return false;
            }
            self.local_read = self.shared.read.load(Ordering::Acquire);
        }
        self.slots[self.next_write].store(value, Ordering::Relaxed);
        self.next_write = after_next_write;
        self.w_batch += 1;
        if self.w_batch >= self.batch {
            self.shared.write.store(self.next_write, Ordering::Release);
            self.w_batch = 0;
        }
        true
    }

    /// The sane form's check: after a tick, complete the partial batch with garbage.
    #[inline]
    fn check_tick(&mut self) {
        let Some((tick, seen)) = &mut self.tick else {
            return;
        };
        let now = tick.load(Ordering::Relaxed);
        if now != *seen {
            *seen = now;
            self.inject_garbage();
        }
    }

    #[cold]
    fn inject_garbage(&mut self) {
        while self.w_batch != 0 {
            if !self.insert(GARBAGE) {
                // Full: the consumer has plenty to do; the next tick tries again.
                return;
            }
        }
    }
}

impl Tx for McTx {
    #[inline]
    fn try_push(&mut self, value: u64) -> bool {
        self.check_tick();
        self.insert(value)
    }

    fn idle(&mut self) {
        self.check_tick();
    }
}

impl Rx for McRx {
    /// The paper's `Extract`, skipping garbage.
    #[inline]
    fn try_pop(&mut self) -> Option<u64> {
        let len = self.slots.len();
        loop {
            if self.next_read == self.local_write {
                if self.next_read == self.shared.write.load(Ordering::Acquire) {
                    return None;
                }
                self.local_write = self.shared.write.load(Ordering::Acquire);
            }
            let value = self.slots[self.next_read].load(Ordering::Relaxed);
            self.next_read = next(self.next_read, len);
            self.r_batch += 1;
            if self.r_batch >= self.batch {
                self.shared.read.store(self.next_read, Ordering::Release);
                self.r_batch = 0;
            }
            if value != GARBAGE {
                return Some(value);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The auxiliary timer thread

/// The period of the sane MCRingBuffer's auxiliary thread: 10 µs, the paper's choice for a
/// 2048-item queue ("(12 cycles/datum * 2048) / 2.4 GHz").
pub const TICK_PERIOD: Duration = Duration::from_micros(10);

/// The auxiliary thread of the sane MCRingBuffer: bumps a counter every [`TICK_PERIOD`]
/// (as far as `thread::sleep` allows) while it lives. Lanes that do not need it get an idle
/// one that runs no thread.
pub struct Ticker {
    tick: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Ticker {
    /// Starts the auxiliary thread if `run`, else makes an idle ticker.
    ///
    /// # Errors
    /// The OS's refusal to start the thread, as [`crate::start::spawn_each`] words it.
    pub fn start(run: bool) -> Result<Self, String> {
        let tick = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = run
            .then(|| {
                let (tick, stop) = (Arc::clone(&tick), Arc::clone(&stop));
                std::thread::Builder::new().spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(TICK_PERIOD);
                        tick.fetch_add(1, Ordering::Relaxed);
                    }
                    tick.load(Ordering::Relaxed)
                })
            })
            .transpose()
            .map_err(|refused| format!("{} 1 of 1 (a ticker): {refused}", crate::start::REFUSAL))?;
        Ok(Self { tick, stop, thread })
    }

    /// The counter the producer watches.
    pub fn tick(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.tick)
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo_on_one_thread<L: Lane>() {
        let ticker = Ticker::start(false).unwrap();
        let (mut tx, mut rx) = L::pair(8, 2, &ticker);
        let mut expected = 0;
        let mut next_value = 0;
        for round in 0..50 {
            for _ in 0..round % 9 {
                if tx.try_push(next_value) {
                    next_value += 1;
                }
            }
            for _ in 0..round % 5 {
                if let Some(v) = rx.try_pop() {
                    assert_eq!(v, expected, "{}", L::NAME);
                    expected += 1;
                }
            }
        }
        assert!(
            expected > 20,
            "{}: only {expected} values went through",
            L::NAME
        );
    }

    #[test]
    fn each_baseline_is_fifo() {
        fifo_on_one_thread::<Lamport>();
        fifo_on_one_thread::<FastForward>();
        fifo_on_one_thread::<McRingBuffer<false>>();
        fifo_on_one_thread::<McRingBuffer<true>>();
    }

    #[test]
    fn each_baseline_holds_exactly_its_capacity() {
        fn fill<L: Lane>() -> usize {
            let ticker = Ticker::start(false).unwrap();
            let (mut tx, _rx) = L::pair(16, 4, &ticker);
            (0..100).take_while(|&v| tx.try_push(v)).count()
        }
        assert_eq!(fill::<Lamport>(), 16);
        assert_eq!(fill::<FastForward>(), 16);
        assert_eq!(fill::<McRingBuffer<false>>(), 16);
    }

    #[test]
    fn plain_mcringbuffer_hides_a_partial_batch_and_sane_flushes_it() {
        let ticker = Ticker::start(false).unwrap();
        let (mut tx, mut rx) = McRingBuffer::<false>::pair(64, 8, &ticker);
        assert!(tx.try_push(1));
        tx.idle();
        assert_eq!(
            rx.try_pop(),
            None,
            "the partial batch is invisible: the deadlock"
        );

        let ticker = Ticker::start(true).unwrap();
        let (mut tx, mut rx) = McRingBuffer::<true>::pair(64, 8, &ticker);
        assert!(tx.try_push(1));
        let start = std::time::Instant::now();
        let got = loop {
            tx.idle();
            if let Some(v) = rx.try_pop() {
                break v;
            }
            assert!(start.elapsed() < Duration::from_secs(5), "never flushed");
            std::thread::yield_now();
        };
        assert_eq!(got, 1);
        assert_eq!(rx.try_pop(), None, "the garbage is discarded");
    }
}
