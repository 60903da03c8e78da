//! The workloads of the `spsc` suite (`throughput`, `multi_queue`, `rtt`, `backtracking`) and
//! the in-order checks every run makes.

use super::*;
use crossbeam_utils::CachePadded;

/// A workload at one set of parameters.
#[derive(Clone, Copy, Debug)]
pub(super) enum Shape {
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
pub(super) fn run_shape<L: Lane>(shape: Shape) -> RunResult {
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
pub(super) fn subject<L: Lane>(shape: Shape) -> Subject<'static> {
    let run = move || run_shape::<L>(shape);
    if L::PEER {
        Subject::peer(L::NAME, run)
    } else {
        Subject::ours(L::NAME, run)
    }
}

/// Every subject that can run `shape`.
pub(super) fn all_lanes(shape: Shape) -> Vec<Subject<'static>> {
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
pub(super) struct Backoff {
    pub(super) failures: u32,
    pub(super) since: Option<Instant>,
}

impl Backoff {
    pub(super) fn new() -> Self {
        Self {
            failures: 0,
            since: None,
        }
    }

    #[inline]
    pub(super) fn reset(&mut self) {
        self.failures = 0;
    }

    /// Waits a little; an error once nothing has moved for [`STALL_LIMIT`].
    #[inline]
    pub(super) fn wait(&mut self) -> Result<(), String> {
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
    pub(super) fn check_stall(&mut self) -> Result<(), String> {
        // Only consecutive yields without a `reset` in between count as a stall.
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() > STALL_LIMIT {
            return Err(format!("no progress for {STALL_LIMIT:?}: deadlock"));
        }
        Ok(())
    }

    #[inline]
    pub(super) fn progress(&mut self) {
        self.failures = 0;
        self.since = None;
    }
}

/// Pushes `value`, waiting while the queue is full; false if `abort` was raised meanwhile.
#[inline]
pub(super) fn push_waiting<T: Tx>(
    tx: &mut T,
    value: u64,
    backoff: &mut Backoff,
    abort: &AtomicBool,
) -> bool {
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
pub(super) fn idle_until<T: Tx>(txs: &mut [T], needs_ticks: bool, done: &AtomicBool) {
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
pub(super) struct Segments {
    pub(super) every: u64,
    pub(super) next_mark: u64,
    pub(super) last: Instant,
    pub(super) per_item_ns: Vec<f64>,
}

impl Segments {
    /// Starts the clock for a run of `items` items.
    pub(super) fn start(items: u64) -> Self {
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
    pub(super) fn tick(&mut self, done: u64) {
        if done == self.next_mark {
            self.mark(self.every);
        }
    }

    #[cold]
    pub(super) fn mark(&mut self, items: u64) {
        let now = Instant::now();
        self.per_item_ns
            .push((now - self.last).as_nanos() as f64 / items as f64);
        self.last = now;
        self.next_mark += self.every;
    }

    /// The median segment's ns per item.
    pub(super) fn median(&self) -> Result<f64, String> {
        crate::stats::median(&self.per_item_ns).ok_or_else(|| "no segment was timed".into())
    }
}

/// Receives `0..items` from `rx`, checking every value.
pub(super) fn receive_in_order<R: Rx>(
    rx: &mut R,
    items: u64,
    clock: &mut Segments,
) -> Result<(), String> {
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
pub(super) fn throughput<L: Lane>(capacity: usize, batch: usize, items: u64) -> RunResult {
    let ticker = Ticker::start(L::NEEDS_TICKER)?;
    let (tx, rx) = L::pair(capacity, batch, &ticker);
    // Each end, and the flag the producer polls, on lines of its own (see `round_trip`).
    let (mut tx, mut rx) = (CachePadded::new(tx), CachePadded::new(rx));
    let start = Barrier::new(2);
    let done = CachePadded::new(AtomicBool::new(false));
    thread::scope(|s| {
        let producer = spawn_one(s, || {
            let mut backoff = Backoff::new();
            start.wait();
            for value in 0..items {
                if !push_waiting(&mut *tx, value, &mut backoff, &done) {
                    return;
                }
            }
            idle_until(std::slice::from_mut(&mut *tx), L::NEEDS_TICKER, &done);
        })?;
        start.wait();
        let mut clock = Segments::start(items);
        let received = receive_in_order(&mut *rx, items, &mut clock);
        done.store(true, Ordering::Relaxed);
        producer.join().map_err(|_| "the producer panicked")?;
        received?;
        Ok(vec![clock.median()?])
    })
}

/// One producer dealing `items` values round-robin into `queues` queues, one consumer polling
/// them round-robin; ns per item. Queue `q` carries `q, q + queues, q + 2 queues, …`.
pub(super) fn multi_queue<L: Lane>(
    queues: usize,
    capacity: usize,
    batch: usize,
    items: u64,
) -> RunResult {
    let ticker = Ticker::start(L::NEEDS_TICKER)?;
    let (mut txs, mut rxs): (Vec<L::Tx>, Vec<L::Rx>) = (0..queues)
        .map(|_| L::pair(capacity, batch, &ticker))
        .unzip();
    let start = Barrier::new(2);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        let producer = spawn_one(s, || {
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
        })?;
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
pub(super) fn poll_round_robin<R: Rx>(
    rxs: &mut [R],
    items: u64,
    clock: &mut Segments,
) -> Result<(), String> {
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
pub(super) fn round_trip<L: Lane>(capacity: usize, batch: usize, run_for: Duration) -> RunResult {
    let ticker = Ticker::start(L::NEEDS_TICKER)?;
    let (ping_tx, ping_rx) = L::pair(capacity, batch, &ticker);
    let (pong_tx, pong_rx) = L::pair(capacity, batch, &ticker);
    // Each end on lines of its own, and the flag the echo thread reads on every turn too: the
    // four ends and the flag lived side by side in this frame, where one thread's writes to
    // its end (a position kept in the end) took lines the other thread read, and an end's
    // round trip depended on where the stack put them (docs/notes/spsc-layout.md).
    let (mut ping_tx, mut ping_rx) = (CachePadded::new(ping_tx), CachePadded::new(ping_rx));
    let (mut pong_tx, mut pong_rx) = (CachePadded::new(pong_tx), CachePadded::new(pong_rx));
    let start = Barrier::new(2);
    let done = CachePadded::new(AtomicBool::new(false));
    thread::scope(|s| {
        let echo = spawn_one(s, || -> Result<(), String> {
            let mut backoff = Backoff::new();
            start.wait();
            while !done.load(Ordering::Relaxed) {
                match ping_rx.try_pop() {
                    Some(value) => {
                        backoff.progress();
                        if !push_waiting(&mut *pong_tx, value, &mut backoff, &done) {
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
        })?;
        start.wait();
        let began = Instant::now();
        let mut block_began = began;
        let mut per_round_ns = Vec::new();
        let mut rounds = 0_u64;
        let mut backoff = Backoff::new();
        let outcome = 'run: loop {
            for _ in 0..ROUNDS_PER_BLOCK {
                if !push_waiting(&mut *ping_tx, rounds, &mut backoff, &done) {
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
pub(super) fn backtracking<L: Lane>(capacity: usize, batch: usize, items: u64) -> RunResult {
    let ticker = Ticker::start(L::NEEDS_TICKER)?;
    let (tx, rx) = L::pair(capacity, batch, &ticker);
    // Each end, and the flag, on lines of its own (see `round_trip`).
    let (mut tx, mut rx) = (CachePadded::new(tx), CachePadded::new(rx));
    let start = Barrier::new(2);
    let done = CachePadded::new(AtomicBool::new(false));
    let epoch = Instant::now();
    let nanos = move || epoch.elapsed().as_nanos() as u64;
    thread::scope(|s| {
        let producer = spawn_one(s, || {
            let mut pushed_at = Vec::with_capacity(items as usize);
            let mut backoff = Backoff::new();
            start.wait();
            for value in 0..items {
                pushed_at.push(nanos());
                if !push_waiting(&mut *tx, value, &mut backoff, &done) {
                    break;
                }
                let resume = Instant::now() + PAUSE;
                while Instant::now() < resume {
                    tx.idle();
                    std::hint::spin_loop();
                }
            }
            idle_until(std::slice::from_mut(&mut *tx), L::NEEDS_TICKER, &done);
            pushed_at
        })?;
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
