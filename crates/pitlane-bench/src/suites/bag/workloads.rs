//! The workloads of the `bag` suite: `pairs`, `pairs_prefilled`, `pairs_latency` and
//! `producer_consumer`, each a function monomorphised per subject.
//!
//! The helpers here, the checks' `Tally::add` and `mix`, and every subject's `Worker` methods
//! are `#[inline(always)]`, for every subject alike: left to the compiler, the retrying push
//! and the pop of the larger subjects (pitlane's stacks) were called out of line, a call and
//! saved registers around each operation, while the peers' were inlined, so the loop measured
//! the compiler's inlining budget as much as the structures (`docs/notes/plain-calls.md`,
//! sixteenth session).

use super::*;

/// Pushes, retrying a full or contended structure (spinning, then yielding now and then).
#[inline(always)]
pub(super) fn push_until_done(worker: &impl Worker, item: u64) {
    let mut item = item;
    let mut spins = 0;
    while let Err(back) = worker.try_push(item) {
        item = back;
        spins += 1;
        if spins % SPINS_BEFORE_YIELD == 0 {
            thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Mops/s from the operations done between the first thread's start and the last one's end.
pub(super) fn rate(operations: u64, outcomes: &[Outcome]) -> RunResult {
    let started = outcomes.iter().map(|o| o.started).min();
    let ended = outcomes.iter().map(|o| o.ended).max();
    match (started, ended) {
        (Some(s), Some(e)) if e > s => Ok(vec![operations as f64 / (e - s).as_secs_f64() / 1e6]),
        _ => Err("no worker ran".into()),
    }
}

/// `threads` threads each push an item then pop one until `run_for` has passed: the Mops/s,
/// and with two threads or more the [`balance`] of their operations.
pub(super) fn run_pairs<S: BagSubject>(
    threads: usize,
    prefill: usize,
    run_for: Duration,
) -> RunResult {
    let run = pairs_run::<S>(threads, prefill, run_for, false)?;
    let mut figures = rate(run.operations, &run.outcomes)?;
    if threads >= 2 {
        figures.push(balance(&run.outcomes));
    }
    Ok(figures)
}

/// `pairs` from empty with every push and every pop timed: the p50, p99, p99.9 and max of one
/// operation, in ns.
pub(super) fn run_pairs_latency<S: BagSubject>(threads: usize, run_for: Duration) -> RunResult {
    let run = pairs_run::<S>(threads, 0, run_for, true)?;
    let latency = run.latency.ok_or("no latency was recorded")?;
    Ok([0.5, 0.99, 0.999]
        .iter()
        .map(|&q| latency.value_at_quantile(q) as f64)
        .chain([latency.max() as f64])
        .collect())
}

/// What a checked `pairs` run did.
pub(super) struct PairsRun {
    /// Successful pushes plus pops of all threads.
    pub(super) operations: u64,
    /// Each thread's.
    pub(super) outcomes: Vec<Outcome>,
    /// With `timed`, every thread's single-operation latencies, in ns.
    pub(super) latency: Option<Histogram<u64>>,
}

/// Runs `pairs` and checks the bag.
pub(super) fn pairs_run<S: BagSubject>(
    threads: usize,
    prefill: usize,
    run_for: Duration,
    timed: bool,
) -> Result<PairsRun, String> {
    let bag = S::make();
    let mut prefilled = Tally::default();
    {
        // The prefill comes from a producer number no worker uses.
        let worker = bag.worker();
        for seq in 0..prefill as u64 {
            let item = item(threads, seq);
            push_until_done(&worker, item);
            prefilled.add(item);
        }
    }
    let stop = AtomicBool::new(false);
    let start = StartLine::new(threads + 1);
    let results = thread::scope(|s| {
        let bodies = (0..threads).map(|t| {
            let (bag, stop, start) = (&bag, &stop, &start);
            move || pairs_worker(bag, t, threads + 1, stop, start, timed)
        });
        let workers = spawn_each(s, threads, bodies, |_| {
            stop.store(true, Ordering::Relaxed);
            start.abandon();
        })?;
        start.wait();
        thread::sleep(run_for);
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("worker panicked".into())))
            .collect::<Result<Vec<_>, String>>()
    })?;
    let mut latency = timed.then(super::super::new_histogram);
    let mut outcomes = Vec::with_capacity(results.len());
    for (outcome, histogram) in results {
        if let (Some(total), Some(histogram)) = (latency.as_mut(), histogram) {
            total
                .add(&histogram)
                .map_err(|e| format!("histogram merge: {e}"))?;
        }
        outcomes.push(outcome);
    }
    let operations = drain_and_check(&bag, prefilled, &outcomes)?;
    Ok(PairsRun {
        operations,
        outcomes,
        latency,
    })
}

/// Pops until an item comes. This thread's own push is not popped yet, so the structure is
/// not empty: a miss is a lost race (or a Bagpipe's walk passing an item by), and is retried.
#[inline(always)]
pub(super) fn pop_until_got(worker: &impl Worker) -> u64 {
    let mut misses = 0_u32;
    loop {
        if let Some(got) = worker.try_pop() {
            return got;
        }
        misses += 1;
        if misses.is_multiple_of(SPINS_BEFORE_YIELD) {
            thread::yield_now();
        }
    }
}

/// One thread of `pairs`; with `timed`, each push and each pop goes into a histogram of its
/// own, which it returns.
pub(super) fn pairs_worker<S: BagSubject>(
    bag: &S,
    id: usize,
    producers: usize,
    stop: &AtomicBool,
    start: &StartLine,
    timed: bool,
) -> Result<(Outcome, Option<Histogram<u64>>), String> {
    let worker = bag.worker();
    let mut order = OrderCheck::new(S::FIFO, producers);
    let (mut pushed, mut popped) = (Tally::default(), Tally::default());
    let mut latency = timed.then(super::super::new_histogram);
    let mut seq = 0;
    start.wait();
    let started = Instant::now();
    // A round at least, checked after it, so that a thread that starts only after the window
    // (a loaded machine) still makes pairs.
    loop {
        for _ in 0..ROUND {
            let item = item(id, seq);
            seq += 1;
            let got = match latency.as_mut() {
                None => {
                    push_until_done(&worker, item);
                    pop_until_got(&worker)
                }
                Some(latency) => {
                    let t0 = Instant::now();
                    push_until_done(&worker, item);
                    let t1 = Instant::now();
                    let got = pop_until_got(&worker);
                    let t2 = Instant::now();
                    latency.saturating_record((t1 - t0).as_nanos() as u64);
                    latency.saturating_record((t2 - t1).as_nanos() as u64);
                    got
                }
            };
            pushed.add(item);
            order.see(got)?;
            popped.add(got);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let outcome = Outcome {
        pushed,
        popped,
        started,
        ended: Instant::now(),
    };
    Ok((outcome, latency))
}

/// How far `producer_consumer`'s producers may run ahead of its consumers, for a subject that
/// holds at most [`BagSubject::HOLDS_AT_MOST`] items and whose push panics past that (a
/// producer on one core outruns a consumer on the other: the stack's backlog passes its two
/// million items within a full-length run). Producers and consumers add their counts here
/// every few thousand and every [`BACKLOG_CHECK`] operations; a producer that finds the
/// backlog at the limit waits for the consumers, as it does on a full bounded queue. For the
/// other subjects nothing is counted: the workload tests `S::HOLDS_AT_MOST`, a constant, so
/// their loops are compiled without the counting.
pub(super) struct Backlog {
    /// `HOLDS_AT_MOST` less [`Self::headroom`]; `None`: no limit.
    limit: Option<u64>,
    /// Pushes the producers have added here.
    pushed: AtomicU64,
    /// Pops the consumers have added here.
    popped: AtomicU64,
}

impl Backlog {
    /// Pushes a producer makes between two looks at the backlog.
    pub(super) const PUSHES_BETWEEN_LOOKS: u64 = 4096;
    /// What the limit keeps below `HOLDS_AT_MOST` with `producers` producers among
    /// `threads`: the pushes producers make between two looks, the free nodes the stack keeps
    /// aside (at most 65 in the stash of each of its 128 seats and of each thread's handle),
    /// and room to spare, which also covers the pops consumers have not added yet. With so
    /// many threads that nothing is left, producers wait from the start until the deadline.
    pub(super) const fn headroom(producers: usize, threads: usize) -> u64 {
        const SPARE: u64 = 1 << 16;
        const NODES_A_STASH_KEEPS: u64 = 65;
        const SEATS: u64 = 128;
        SPARE
            + producers as u64 * Self::PUSHES_BETWEEN_LOOKS
            + (SEATS + threads as u64) * NODES_A_STASH_KEEPS
    }

    pub(super) fn new(holds_at_most: Option<usize>, producers: usize, threads: usize) -> Self {
        let headroom = Self::headroom(producers, threads);
        Self {
            limit: holds_at_most.map(|most| (most as u64).saturating_sub(headroom)),
            pushed: AtomicU64::new(0),
            popped: AtomicU64::new(0),
        }
    }

    /// A producer made `pushes` more: waits, unless `stop` is set, while the backlog is at
    /// the limit.
    #[cold]
    pub(super) fn pushed(&self, pushes: u64, stop: &AtomicBool) {
        let Some(limit) = self.limit else { return };
        let pushed = self.pushed.fetch_add(pushes, Ordering::Relaxed) + pushes;
        while pushed.saturating_sub(self.popped.load(Ordering::Relaxed)) >= limit
            && !stop.load(Ordering::Relaxed)
        {
            thread::yield_now();
        }
    }

    /// A consumer made `pops` more.
    #[cold]
    pub(super) fn popped(&self, pops: u64) {
        self.popped.fetch_add(pops, Ordering::Relaxed);
    }
}

/// Leaves the count of producers still producing when dropped, so that consumers stop
/// waiting for a producer that panicked (the run then reports the panic).
struct Producing<'a>(&'a AtomicUsize);

impl Drop for Producing<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// Half the threads push until `run_for` has passed; the other half pop until the producers
/// are done and the structure is empty.
pub(super) fn run_producer_consumer<S: BagSubject>(threads: usize, run_for: Duration) -> RunResult {
    let producers = (threads / 2).max(1);
    let consumers = (threads - producers).max(1);
    let bag = S::make();
    let stop = AtomicBool::new(false);
    let producing = AtomicUsize::new(producers);
    // Pops that each consumer made before it saw that every producer had stopped.
    let popped_while_producing = AtomicU64::new(0);
    let backlog_limit = Backlog::new(S::HOLDS_AT_MOST, producers, producers + consumers);
    // A constant of the subject: without a limit, the checks below compile to nothing.
    let limited = S::HOLDS_AT_MOST.is_some();
    const {
        assert!(Backlog::PUSHES_BETWEEN_LOOKS.is_multiple_of(ROUND as u64));
    }
    let start = StartLine::new(producers + consumers + 1);
    let outcomes = thread::scope(|s| {
        type Body<'a> = Box<dyn FnOnce() -> Result<Outcome, String> + Send + 'a>;
        let mut bodies: Vec<Body<'_>> = Vec::with_capacity(producers + consumers);
        for p in 0..producers {
            let (bag, stop, start, producing) = (&bag, &stop, &start, &producing);
            let backlog_limit = &backlog_limit;
            bodies.push(Box::new(move || {
                let leaving = Producing(producing);
                let worker = bag.worker();
                let mut pushed = Tally::default();
                let mut seq = 0;
                start.wait();
                let started = Instant::now();
                // A round at least, checked after it, so that a producer that starts only
                // after the window (a loaded machine) still puts items through.
                loop {
                    for _ in 0..ROUND {
                        let item = item(p, seq);
                        seq += 1;
                        push_until_done(&worker, item);
                        pushed.add(item);
                    }
                    if limited && pushed.count % Backlog::PUSHES_BETWEEN_LOOKS == 0 {
                        backlog_limit.pushed(Backlog::PUSHES_BETWEEN_LOOKS, stop);
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                drop(leaving);
                Ok(Outcome {
                    pushed,
                    popped: Tally::default(),
                    started,
                    ended: Instant::now(),
                })
            }));
        }
        for _ in 0..consumers {
            let (bag, start, producing) = (&bag, &start, &producing);
            let (popped_while_producing, backlog_limit) = (&popped_while_producing, &backlog_limit);
            bodies.push(Box::new(move || {
                let worker = bag.worker();
                let mut order = OrderCheck::new(S::FIFO, producers);
                let mut popped = Tally::default();
                let mut popped_when_producers_done = None;
                let mut misses = 0_u32;
                start.wait();
                let started = Instant::now();
                loop {
                    if let Some(got) = worker.try_pop() {
                        order.see(got)?;
                        popped.add(got);
                        if limited && popped.count % BACKLOG_CHECK == 0 {
                            backlog_limit.popped(BACKLOG_CHECK);
                        }
                        if popped_when_producers_done.is_none()
                            && popped.count % BACKLOG_CHECK == 0
                            && producing.load(Ordering::Relaxed) == 0
                        {
                            popped_when_producers_done = Some(popped.count);
                        }
                        continue;
                    }
                    // Empty: done once every producer has stopped and nothing is left.
                    if producing.load(Ordering::Acquire) == 0 {
                        popped_when_producers_done.get_or_insert(popped.count);
                        match worker.try_pop() {
                            Some(got) => {
                                order.see(got)?;
                                popped.add(got);
                                continue;
                            }
                            None => break,
                        }
                    }
                    misses += 1;
                    if misses.is_multiple_of(SPINS_BEFORE_YIELD) {
                        thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                let ended = Instant::now();
                popped_while_producing.fetch_add(
                    popped_when_producers_done.unwrap_or(popped.count),
                    Ordering::Relaxed,
                );
                Ok(Outcome {
                    pushed: Tally::default(),
                    popped,
                    started,
                    ended,
                })
            }));
        }
        let workers = spawn_each(s, producers + consumers, bodies, |started| {
            // Producers that never started never count themselves out.
            producing.fetch_sub(producers.saturating_sub(started), Ordering::AcqRel);
            stop.store(true, Ordering::Relaxed);
            start.abandon();
        })?;
        start.wait();
        thread::sleep(run_for);
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("worker panicked".into())))
            .collect::<Result<Vec<_>, String>>()
    })?;
    let operations = drain_and_check(&bag, Tally::default(), &outcomes)?;
    let pushed: u64 = outcomes.iter().map(|o| o.pushed.count).sum();
    let backlog = pushed.saturating_sub(popped_while_producing.into_inner());
    let mut figures = rate(operations, &outcomes)?;
    figures.push(backlog as f64);
    Ok(figures)
}
