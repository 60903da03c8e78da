//! Suite `spsc`: the B-Queue paper's evaluation (Wang et al., IJPP 2013, Section 5), fitted to
//! two cores.
//!
//! Subjects: `pitlane::spsc` (the B-Queue), the SPSC queues a Rust user would pick instead
//! (`rtrb`, `ringbuf`, `crossbeam_queue::ArrayQueue`, `std::sync::mpsc::sync_channel`), and the
//! paper's baselines written from its figures ([`baselines`]: Lamport, FastForward,
//! MCRingBuffer in its deadlock-prone and its "sane" form). Every item is a `u64`.
//!
//! Workloads:
//! - `throughput`: one producer, one consumer, ns per item, at capacity 2048 (batch 256, the
//!   paper's dummy testbed) and 65536.
//! - `multi_queue`: the paper's real testbed fitted to two cores: one producer thread deals
//!   items round-robin into N queues, one consumer thread polls them round-robin.
//! - `rtt`: ping-pong over two queues, ns per round trip.
//! - `backtracking`: a producer that pauses between pushes; push-to-pop latency.
//! - `batch_size`: the paper's sweep of batch sizes for `pitlane::spsc` (Fig. 14), beside rtrb.
//!
//! Correctness inside every run: each queue must deliver exactly the values pushed into it, in
//! order (the consumer checks every value against the next one it expects), and nothing after
//! the last; a run that stalls for 10 s is a failure too. Either aborts the benchmark.
//!
//! Timing: a run is timed in parts (16 equal parts of its items, or blocks of 64 round
//! trips) and reports the median part, which keeps the time slices a shared machine gives to
//! other processes out of the figure.

pub mod baselines;

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use pitlane_queue::spsc as pitlane;

use self::baselines::{FastForward, Lamport, McRingBuffer, Ticker};
use super::{Suite, Workload};
use crate::results::{Better, Goal, Metric, params};
use crate::runner::{Bench, BenchError, Case, RunResult, Subject};

/// The suite.
pub struct Spsc;

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "throughput",
        about: "1 producer, 1 consumer, u64 items, ns per item at capacity 2048 (batch 256) and 65536",
    },
    Workload {
        name: "multi_queue",
        about: "1 producer deals round-robin into N = 1..16 queues, 1 consumer polls them; ns per item",
    },
    Workload {
        name: "rtt",
        about: "ping-pong over two queues, ns per round trip",
    },
    Workload {
        name: "backtracking",
        about: "a producer pausing 1 us between pushes; push-to-pop latency p50/p99",
    },
    Workload {
        name: "batch_size",
        about: "pitlane::spsc throughput at capacity 2048 for batch 1..1024 (the paper's Fig. 14)",
    },
];

/// The paper's queue size and batch size.
const PAPER_CAPACITY: usize = 2048;
const PAPER_BATCH: usize = 256;
/// The large capacity of `throughput`.
const LARGE_CAPACITY: usize = 65536;
/// The queue counts of `multi_queue`.
const QUEUE_COUNTS: [usize; 5] = [1, 2, 4, 8, 16];
/// The batch sizes of `batch_size`.
const BATCH_SIZES: [usize; 6] = [1, 4, 16, 64, 256, 1024];
/// The producer's pause in `backtracking`.
const PAUSE: Duration = Duration::from_micros(1);
/// Failed attempts a waiting thread spins through before it yields its core once.
const SPINS_BEFORE_YIELD: u32 = 1024;
/// Parts of a run timed separately (see [`Segments`]).
const SEGMENTS: u64 = 16;
/// Round trips timed together in `rtt`.
const ROUNDS_PER_BLOCK: u64 = 64;
/// A run that makes no progress for this long has deadlocked.
const STALL_LIMIT: Duration = Duration::from_secs(10);

impl Suite for Spsc {
    fn name(&self) -> &'static str {
        "spsc"
    }

    fn about(&self) -> &'static str {
        "the B-Queue beside rtrb, ringbuf, ArrayQueue, sync_channel and the paper's baselines"
    }

    fn workloads(&self) -> &'static [Workload] {
        WORKLOADS
    }

    /// Issue 4: the B-Queue at most 0.8x rtrb's ns per item in `throughput` at both
    /// capacities, at most 0.7x in `multi_queue` at 8 and 16 queues, at most 1.1x in `rtt`.
    fn goals(&self) -> Vec<Goal> {
        let ours = PitlaneSpsc::<true>::NAME;
        let peer = Rtrb::NAME;
        let throughput = [PAPER_CAPACITY, LARGE_CAPACITY].map(|capacity| {
            Goal::ratio(
                "throughput",
                params! {"capacity" => capacity},
                &ns_per_item(),
                ours,
                peer,
                0.8,
            )
        });
        let multi = [8, 16].map(|queues| {
            Goal::ratio(
                "multi_queue",
                params! {"queues" => queues},
                &ns_per_item(),
                ours,
                peer,
                0.7,
            )
        });
        let rtt = Goal::ratio("rtt", params! {}, &rtt_metric(), ours, peer, 1.1);
        throughput
            .into_iter()
            .chain(multi)
            .chain([rtt])
            .map(|g| g.from_issue(4))
            .collect()
    }

    fn run(&self, bench: &mut Bench) -> Result<(), BenchError> {
        let config = bench.config().clone();
        let throughput_items: u64 = config.pick(1 << 24, 1 << 21);
        let multi_items: u64 = config.pick(1 << 23, 1 << 20);
        let sweep_items: u64 = config.pick(1 << 23, 1 << 20);
        let latency_items: u64 = config.pick(256 * 256, 256 * 32);
        let rtt_for = config.duration(100);

        bench.note(format!(
            "Two threads (producer, consumer) on a machine with {} cores, not pinned. A thread \
             that finds its queue full or empty spins ({SPINS_BEFORE_YIELD} spin hints) and then \
             yields once; every subject runs the same loop. Items are `u64`; every consumer \
             checks that each queue delivers exactly 0, 1, 2, … (or its share of them) in order.",
            crate::env::cores()
        ));
        bench.note(format!(
            "Time per item (`throughput`, `multi_queue`, `batch_size`) is the median over the \
             {SEGMENTS} equal parts of a run, each timed by the consumer; time per round trip \
             (`rtt`) is the median over blocks of {ROUNDS_PER_BLOCK} round trips. On a shared \
             two-core machine a run's total time mostly counts how often another process took \
             one of the cores; the median part is the rate while both threads ran."
        ));
        bench.note(
            "Baselines (`baseline::…`) are written from the B-Queue paper's figures, not the \
             authors' code: Lamport (head and tail in one cache line), FastForward with temporal \
             slipping (DANGER 2, GOOD 6 cache lines, checked every 256 dequeues), MCRingBuffer \
             with batched index updates (batch as for pitlane), plain (`deadlock`) and with an \
             auxiliary thread that ticks every 10 µs (`thread::sleep`, so in practice every \
             ~60 µs or more) after which the producer fills its partial batch with garbage the \
             consumer discards (`sane`). `rtt` leaves out MCRingBuffer(deadlock): a single \
             item never completes a batch, so ping-pong deadlocks (the paper's Section 2.5); in \
             `rtt` and `backtracking` the sane form's producer also checks the tick while it \
             waits.",
        );
        bench.note(format!(
            "`backtracking` timestamps each item with `Instant::now()` just before the push and \
             just after the pop (two clock reads, ~20-40 ns, are inside every figure); the \
             producer pauses {} µs between pushes. `pitlane::spsc (adaptive off)` is the same \
             queue with the paper's plain backtracking (every search starts from the full \
             batch).",
            PAUSE.as_micros()
        ));

        for (capacity, batch) in [
            (PAPER_CAPACITY, PAPER_BATCH),
            (LARGE_CAPACITY, pitlane::default_batch(LARGE_CAPACITY)),
        ] {
            let mut case = Case::new(
                "throughput",
                params! {"threads" => 2, "capacity" => capacity, "batch" => batch, "items" => throughput_items},
                vec![ns_per_item()],
            );
            for subject in all_lanes(Shape::Throughput {
                capacity,
                batch,
                items: throughput_items,
            }) {
                case.push(subject);
            }
            bench.measure(case)?;
        }

        for queues in QUEUE_COUNTS {
            let mut case = Case::new(
                "multi_queue",
                params! {"threads" => 2, "queues" => queues, "capacity" => PAPER_CAPACITY, "batch" => PAPER_BATCH, "items" => multi_items},
                vec![ns_per_item()],
            );
            for subject in all_lanes(Shape::MultiQueue {
                queues,
                items: multi_items,
            }) {
                case.push(subject);
            }
            bench.measure(case)?;
        }

        let mut case = Case::new(
            "rtt",
            params! {"threads" => 2, "capacity" => PAPER_CAPACITY, "batch" => PAPER_BATCH},
            vec![rtt_metric()],
        );
        for subject in all_lanes(Shape::RoundTrip { run_for: rtt_for }) {
            case.push(subject);
        }
        bench.measure(case)?;

        let mut case = Case::new(
            "backtracking",
            params! {"threads" => 2, "capacity" => PAPER_CAPACITY, "batch" => PAPER_BATCH, "items" => latency_items},
            vec![
                Metric::new("latency_p50_ns", "ns", Better::Lower),
                Metric::new("latency_p99_ns", "ns", Better::Lower),
            ],
        );
        for subject in all_lanes(Shape::Backtracking {
            items: latency_items,
        }) {
            case.push(subject);
        }
        bench.measure(case)?;

        for batch in BATCH_SIZES {
            let shape = Shape::Throughput {
                capacity: PAPER_CAPACITY,
                batch,
                items: sweep_items,
            };
            let case = Case::new(
                "batch_size",
                params! {"threads" => 2, "capacity" => PAPER_CAPACITY, "batch" => batch, "items" => sweep_items},
                vec![ns_per_item()],
            )
            .subject(subject::<PitlaneSpsc<true>>(shape))
            .subject(subject::<Rtrb>(shape));
            bench.measure(case)?;
        }
        Ok(())
    }
}

fn rtt_metric() -> Metric {
    Metric::new("ns_per_round_trip", "ns", Better::Lower)
}

fn ns_per_item() -> Metric {
    Metric::new("ns_per_item", "ns", Better::Lower)
}

// ---------------------------------------------------------------------------------------------
// Subjects

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

/// A workload at one set of parameters.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Throughput {
        capacity: usize,
        batch: usize,
        items: u64,
    },
    MultiQueue {
        queues: usize,
        items: u64,
    },
    RoundTrip {
        run_for: Duration,
    },
    Backtracking {
        items: u64,
    },
}

/// Runs `shape` once on lane `L`.
fn run_shape<L: Lane>(shape: Shape) -> RunResult {
    match shape {
        Shape::Throughput {
            capacity,
            batch,
            items,
        } => throughput::<L>(capacity, batch, items),
        Shape::MultiQueue { queues, items } => {
            multi_queue::<L>(queues, PAPER_CAPACITY, PAPER_BATCH, items)
        }
        Shape::RoundTrip { run_for } => round_trip::<L>(PAPER_CAPACITY, PAPER_BATCH, run_for),
        Shape::Backtracking { items } => backtracking::<L>(PAPER_CAPACITY, PAPER_BATCH, items),
    }
}

/// A subject running `shape` on lane `L`.
fn subject<L: Lane>(shape: Shape) -> Subject<'static> {
    let run = move || run_shape::<L>(shape);
    if L::PEER {
        Subject::peer(L::NAME, run)
    } else {
        Subject::ours(L::NAME, run)
    }
}

/// Every subject that can run `shape`.
fn all_lanes(shape: Shape) -> Vec<Subject<'static>> {
    let mut subjects = vec![
        subject::<PitlaneSpsc<true>>(shape),
        subject::<Rtrb>(shape),
        subject::<Ringbuf>(shape),
        subject::<ArrayQueue>(shape),
        subject::<SyncChannel>(shape),
        subject::<Lamport>(shape),
        subject::<FastForward>(shape),
        subject::<McRingBuffer<true>>(shape),
    ];
    // A lone item never completes a batch: ping-pong deadlocks.
    if !matches!(shape, Shape::RoundTrip { .. }) {
        subjects.push(subject::<McRingBuffer<false>>(shape));
    }
    if matches!(shape, Shape::Backtracking { .. }) {
        subjects.insert(1, subject::<PitlaneSpsc<false>>(shape));
    }
    subjects
}

// ---------------------------------------------------------------------------------------------
// Workloads

/// Spins, then yields the core now and then; gives up when the run has stalled.
struct Backoff {
    failures: u32,
    since: Option<Instant>,
}

impl Backoff {
    fn new() -> Self {
        Self {
            failures: 0,
            since: None,
        }
    }

    #[inline]
    fn reset(&mut self) {
        self.failures = 0;
    }

    /// Waits a little; an error once nothing has moved for [`STALL_LIMIT`].
    #[inline]
    fn wait(&mut self) -> Result<(), String> {
        self.failures += 1;
        if self.failures < SPINS_BEFORE_YIELD {
            std::hint::spin_loop();
            return Ok(());
        }
        self.failures = 0;
        thread::yield_now();
        self.check_stall()
    }

    #[cold]
    fn check_stall(&mut self) -> Result<(), String> {
        // Only consecutive yields without a `reset` in between count as a stall.
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() > STALL_LIMIT {
            return Err(format!("no progress for {STALL_LIMIT:?}: deadlock"));
        }
        Ok(())
    }

    #[inline]
    fn progress(&mut self) {
        self.failures = 0;
        self.since = None;
    }
}

/// Pushes `value`, waiting while the queue is full; false if `abort` was raised meanwhile.
#[inline]
fn push_waiting<T: Tx>(tx: &mut T, value: u64, backoff: &mut Backoff, abort: &AtomicBool) -> bool {
    while !tx.try_push(value) {
        tx.idle();
        if backoff.wait().is_err() || abort.load(Ordering::Relaxed) {
            return false;
        }
    }
    backoff.reset();
    true
}

/// The producer's tail end: lanes that flush on a tick keep being offered idle time until the
/// consumer is done.
fn idle_until<T: Tx>(txs: &mut [T], needs_ticks: bool, done: &AtomicBool) {
    if !needs_ticks {
        return;
    }
    while !done.load(Ordering::Relaxed) {
        for tx in txs.iter_mut() {
            tx.idle();
        }
        thread::yield_now();
    }
}

/// Times a run in [`SEGMENTS`] equal parts; its figure is the median part's time per item, so
/// that time slices the machine gives to other processes stay out of it.
struct Segments {
    every: u64,
    next_mark: u64,
    last: Instant,
    per_item_ns: Vec<f64>,
}

impl Segments {
    /// Starts the clock for a run of `items` items.
    fn start(items: u64) -> Self {
        let every = (items / SEGMENTS).max(1);
        Self {
            every,
            next_mark: every,
            last: Instant::now(),
            per_item_ns: Vec::with_capacity(SEGMENTS as usize + 1),
        }
    }

    /// Notes that `done` items are through.
    #[inline]
    fn tick(&mut self, done: u64) {
        if done == self.next_mark {
            self.mark(self.every);
        }
    }

    #[cold]
    fn mark(&mut self, items: u64) {
        let now = Instant::now();
        self.per_item_ns
            .push((now - self.last).as_nanos() as f64 / items as f64);
        self.last = now;
        self.next_mark += self.every;
    }

    /// The median segment's ns per item.
    fn median(&self) -> Result<f64, String> {
        crate::stats::median(&self.per_item_ns).ok_or_else(|| "no segment was timed".into())
    }
}

/// Receives `0..items` from `rx`, checking every value.
fn receive_in_order<R: Rx>(rx: &mut R, items: u64, clock: &mut Segments) -> Result<(), String> {
    let mut expected = 0;
    let mut backoff = Backoff::new();
    while expected < items {
        match rx.try_pop() {
            Some(value) => {
                if value != expected {
                    return Err(format!("expected value {expected}, received {value}"));
                }
                expected += 1;
                clock.tick(expected);
                backoff.progress();
            }
            None => backoff.wait()?,
        }
    }
    match rx.try_pop() {
        Some(extra) => Err(format!("received {extra} after the last value")),
        None => Ok(()),
    }
}

/// One producer, one consumer, `items` values; ns per item.
fn throughput<L: Lane>(capacity: usize, batch: usize, items: u64) -> RunResult {
    let ticker = Ticker::start(L::NEEDS_TICKER);
    let (mut tx, mut rx) = L::pair(capacity, batch, &ticker);
    let start = Barrier::new(2);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        let producer = s.spawn(|| {
            let mut backoff = Backoff::new();
            start.wait();
            for value in 0..items {
                if !push_waiting(&mut tx, value, &mut backoff, &done) {
                    return;
                }
            }
            idle_until(std::slice::from_mut(&mut tx), L::NEEDS_TICKER, &done);
        });
        start.wait();
        let mut clock = Segments::start(items);
        let received = receive_in_order(&mut rx, items, &mut clock);
        done.store(true, Ordering::Relaxed);
        producer.join().map_err(|_| "the producer panicked")?;
        received?;
        Ok(vec![clock.median()?])
    })
}

/// One producer dealing `items` values round-robin into `queues` queues, one consumer polling
/// them round-robin; ns per item. Queue `q` carries `q, q + queues, q + 2 queues, …`.
fn multi_queue<L: Lane>(queues: usize, capacity: usize, batch: usize, items: u64) -> RunResult {
    let ticker = Ticker::start(L::NEEDS_TICKER);
    let (mut txs, mut rxs): (Vec<L::Tx>, Vec<L::Rx>) = (0..queues)
        .map(|_| L::pair(capacity, batch, &ticker))
        .unzip();
    let start = Barrier::new(2);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        let producer = s.spawn(|| {
            let mut backoff = Backoff::new();
            start.wait();
            let mut queue = 0;
            for value in 0..items {
                if !push_waiting(&mut txs[queue], value, &mut backoff, &done) {
                    return;
                }
                queue += 1;
                if queue == queues {
                    queue = 0;
                }
            }
            idle_until(&mut txs, L::NEEDS_TICKER, &done);
        });
        start.wait();
        let mut clock = Segments::start(items);
        let received = poll_round_robin(&mut rxs, items, &mut clock);
        done.store(true, Ordering::Relaxed);
        producer.join().map_err(|_| "the producer panicked")?;
        received?;
        Ok(vec![clock.median()?])
    })
}

/// The consumer of `multi_queue`: one attempt per queue per turn.
fn poll_round_robin<R: Rx>(rxs: &mut [R], items: u64, clock: &mut Segments) -> Result<(), String> {
    let queues = rxs.len();
    let mut expected: Vec<u64> = (0..queues as u64).collect();
    let mut received = 0;
    let mut backoff = Backoff::new();
    let mut queue = 0;
    while received < items {
        match rxs[queue].try_pop() {
            Some(value) => {
                if value != expected[queue] {
                    return Err(format!(
                        "queue {queue}: expected value {}, received {value}",
                        expected[queue]
                    ));
                }
                expected[queue] += queues as u64;
                received += 1;
                clock.tick(received);
                backoff.progress();
            }
            None => backoff.wait()?,
        }
        queue += 1;
        if queue == queues {
            queue = 0;
        }
    }
    for (queue, rx) in rxs.iter_mut().enumerate() {
        if let Some(extra) = rx.try_pop() {
            return Err(format!(
                "queue {queue}: received {extra} after the last value"
            ));
        }
    }
    Ok(())
}

/// Ping-pong: one thread sends `n` and waits for `n` back; ns per round trip, over `run_for`.
fn round_trip<L: Lane>(capacity: usize, batch: usize, run_for: Duration) -> RunResult {
    let ticker = Ticker::start(L::NEEDS_TICKER);
    let (mut ping_tx, mut ping_rx) = L::pair(capacity, batch, &ticker);
    let (mut pong_tx, mut pong_rx) = L::pair(capacity, batch, &ticker);
    let start = Barrier::new(2);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        let echo = s.spawn(|| -> Result<(), String> {
            let mut backoff = Backoff::new();
            start.wait();
            while !done.load(Ordering::Relaxed) {
                match ping_rx.try_pop() {
                    Some(value) => {
                        backoff.progress();
                        if !push_waiting(&mut pong_tx, value, &mut backoff, &done) {
                            break;
                        }
                    }
                    None => {
                        pong_tx.idle();
                        backoff.wait()?;
                    }
                }
            }
            Ok(())
        });
        start.wait();
        let began = Instant::now();
        let mut block_began = began;
        let mut per_round_ns = Vec::new();
        let mut rounds = 0_u64;
        let mut backoff = Backoff::new();
        let outcome = 'run: loop {
            for _ in 0..ROUNDS_PER_BLOCK {
                if !push_waiting(&mut ping_tx, rounds, &mut backoff, &done) {
                    break 'run Err("the ping queue stayed full".to_string());
                }
                let back = loop {
                    match pong_rx.try_pop() {
                        Some(value) => break value,
                        None => {
                            ping_tx.idle();
                            if let Err(stall) = backoff.wait() {
                                break 'run Err(stall);
                            }
                        }
                    }
                };
                backoff.progress();
                if back != rounds {
                    break 'run Err(format!("sent {rounds}, received {back} back"));
                }
                rounds += 1;
            }
            let now = Instant::now();
            per_round_ns.push((now - block_began).as_nanos() as f64 / ROUNDS_PER_BLOCK as f64);
            block_began = now;
            if now - began >= run_for {
                break Ok(());
            }
        };
        done.store(true, Ordering::Relaxed);
        let echoed = echo.join().map_err(|_| "the echo thread panicked")?;
        outcome?;
        echoed?;
        let median = crate::stats::median(&per_round_ns).ok_or("no round trip was timed")?;
        Ok(vec![median])
    })
}

/// A producer pausing [`PAUSE`] between pushes of `0..items`; the p50 and p99 of the time from
/// just before a push to just after the pop of the same value.
fn backtracking<L: Lane>(capacity: usize, batch: usize, items: u64) -> RunResult {
    let ticker = Ticker::start(L::NEEDS_TICKER);
    let (mut tx, mut rx) = L::pair(capacity, batch, &ticker);
    let start = Barrier::new(2);
    let done = AtomicBool::new(false);
    let epoch = Instant::now();
    let nanos = move || epoch.elapsed().as_nanos() as u64;
    thread::scope(|s| {
        let producer = s.spawn(|| {
            let mut pushed_at = Vec::with_capacity(items as usize);
            let mut backoff = Backoff::new();
            start.wait();
            for value in 0..items {
                pushed_at.push(nanos());
                if !push_waiting(&mut tx, value, &mut backoff, &done) {
                    break;
                }
                let resume = Instant::now() + PAUSE;
                while Instant::now() < resume {
                    tx.idle();
                    std::hint::spin_loop();
                }
            }
            idle_until(std::slice::from_mut(&mut tx), L::NEEDS_TICKER, &done);
            pushed_at
        });
        start.wait();
        let mut popped_at = Vec::with_capacity(items as usize);
        let mut backoff = Backoff::new();
        let received = (|| {
            while (popped_at.len() as u64) < items {
                match rx.try_pop() {
                    Some(value) => {
                        popped_at.push(nanos());
                        let expected = popped_at.len() as u64 - 1;
                        if value != expected {
                            return Err(format!("expected value {expected}, received {value}"));
                        }
                        backoff.progress();
                    }
                    None => backoff.wait()?,
                }
            }
            match rx.try_pop() {
                Some(extra) => Err(format!("received {extra} after the last value")),
                None => Ok(()),
            }
        })();
        done.store(true, Ordering::Relaxed);
        let pushed_at = producer.join().map_err(|_| "the producer panicked")?;
        received?;
        let mut latencies: Vec<u64> = pushed_at
            .iter()
            .zip(&popped_at)
            .map(|(pushed, popped)| popped.saturating_sub(*pushed))
            .collect();
        latencies.sort_unstable();
        let quantile =
            |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize] as f64;
        Ok(vec![quantile(0.5), quantile(0.99)])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subject of every workload runs correctly at a small size.
    #[test]
    fn every_subject_passes_its_own_checks() {
        let shapes = [
            Shape::Throughput {
                capacity: 64,
                batch: 16,
                items: 20_000,
            },
            Shape::MultiQueue {
                queues: 3,
                items: 3 * 256 * 4,
            },
            Shape::RoundTrip {
                run_for: Duration::from_millis(5),
            },
            Shape::Backtracking { items: 512 },
        ];
        fn check<L: Lane>(shape: Shape) {
            let values =
                run_shape::<L>(shape).unwrap_or_else(|e| panic!("{} on {shape:?}: {e}", L::NAME));
            assert!(
                values.iter().all(|v| *v > 0.0),
                "{} on {shape:?}: {values:?}",
                L::NAME
            );
        }
        for shape in shapes {
            // The same subjects as `all_lanes`.
            assert_eq!(
                all_lanes(shape).len(),
                match shape {
                    Shape::RoundTrip { .. } => 8,
                    Shape::Backtracking { .. } => 10,
                    _ => 9,
                }
            );
            check::<PitlaneSpsc<true>>(shape);
            check::<PitlaneSpsc<false>>(shape);
            check::<Rtrb>(shape);
            check::<Ringbuf>(shape);
            check::<ArrayQueue>(shape);
            check::<SyncChannel>(shape);
            check::<Lamport>(shape);
            check::<FastForward>(shape);
            check::<McRingBuffer<true>>(shape);
            if !matches!(shape, Shape::RoundTrip { .. }) {
                check::<McRingBuffer<false>>(shape);
            }
        }
    }

    /// A queue that loses a value is caught.
    #[test]
    fn a_lost_value_aborts_the_run() {
        struct Leaky;
        struct LeakyTx(pitlane::Producer<u64>);
        impl Tx for LeakyTx {
            fn try_push(&mut self, value: u64) -> bool {
                value == 77 || self.0.try_push(value).is_ok()
            }
        }
        impl Lane for Leaky {
            const NAME: &'static str = "leaky";
            type Tx = LeakyTx;
            type Rx = pitlane::Consumer<u64>;
            fn pair(capacity: usize, batch: usize, ticker: &Ticker) -> (LeakyTx, Self::Rx) {
                let (tx, rx) = PitlaneSpsc::<true>::pair(capacity, batch, ticker);
                (LeakyTx(tx), rx)
            }
        }
        let error = throughput::<Leaky>(64, 8, 1000).unwrap_err();
        assert!(error.contains("expected value 77, received 78"), "{error}");
    }
}
