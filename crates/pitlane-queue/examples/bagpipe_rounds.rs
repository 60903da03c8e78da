//! Rounds of the `bag` suite's `pairs` on a `Bagpipe<Queue<u64>>` at two threads, plain calls
//! and handles, with what each thread did on each pipe: the probe of the Bagpipe<Queue>'s slow
//! rounds (`docs/notes/plain-calls.md`, sixth session).
//!
//! Each round, as the suite does it: a new Bagpipe, `prefill` items pushed by the main thread
//! (through a handle for the handle subject, plainly for the plain one), two fresh threads, a
//! start barrier, `ms` milliseconds of push+pop pairs (`Bagpipe::push`/`pop` or the handle's),
//! then the threads are joined and the rest drained. Between the Bagpipe rounds, with `FILL`
//! set, the suite's other subjects of the same run go too (a `Bagpipe<Stack>`, an
//! `mpmc::Queue`, a `Stack`, plain and through handles), so that thread counters, seats and
//! the heap move on between rounds as they do in the suite.
//!
//! With `COUNT` set the pipes are `Counted<Queue<u64>>`: a queue that counts, per thread and
//! per pipe, the pushes and pops that succeeded and failed, and how often a thread's successful
//! push or pop landed on another pipe than its previous one. Each round then prints, per
//! thread, `pipe:pushes/pops` and the moves.
//!
//! ```sh
//! cargo build --release -p pitlane-queue --example bagpipe_rounds
//! FILL=1 COUNT=1 target/release/examples/bagpipe_rounds 0 250 20   # prefill, ms, rounds
//! ```
use std::cell::Cell;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::{self, Queue};
use pitlane_queue::stack::Stack;
use pitlane_queue::{BagHandle, PopError, PushError, WeakBag};

/// Pipes counted per thread (a Bagpipe here has 4 on two cores).
const PIPES: usize = 16;

/// One thread's counts.
#[derive(Clone, Copy, Default)]
struct Counts {
    pushes: [u64; PIPES],
    pops: [u64; PIPES],
    push_failures: u64,
    pop_transients: u64,
    pop_empties: u64,
    push_moves: u64,
    pop_moves: u64,
    last_push: usize,
    last_pop: usize,
}

thread_local! {
    static COUNTS: Cell<Counts> = Cell::new(Counts::default());
}

/// The number the next `Counted` pipe takes; reset before each Bagpipe is built, so that pipe
/// `i` of the Bagpipe is numbered `i`.
static NEXT_PIPE: AtomicUsize = AtomicUsize::new(0);

/// A queue that counts what each thread does on it.
struct Counted {
    pipe: usize,
    queue: Queue<u64>,
}

impl Default for Counted {
    fn default() -> Self {
        Counted {
            pipe: NEXT_PIPE.fetch_add(1, Ordering::Relaxed) % PIPES,
            queue: Queue::new(),
        }
    }
}

#[inline(always)]
fn count_push(pipe: usize, ok: bool) {
    COUNTS.with(|c| {
        let mut n = c.get();
        if ok {
            n.pushes[pipe] += 1;
            if n.last_push != pipe {
                n.push_moves += 1;
                n.last_push = pipe;
            }
        } else {
            n.push_failures += 1;
        }
        c.set(n);
    })
}

#[inline(always)]
fn count_pop(pipe: usize, outcome: Result<(), PopError>) {
    COUNTS.with(|c| {
        let mut n = c.get();
        match outcome {
            Ok(()) => {
                n.pops[pipe] += 1;
                if n.last_pop != pipe {
                    n.pop_moves += 1;
                    n.last_pop = pipe;
                }
            }
            Err(PopError::Empty) => n.pop_empties += 1,
            Err(PopError::Transient) => n.pop_transients += 1,
        }
        c.set(n);
    })
}

struct CountedHandle<'a> {
    pipe: usize,
    handle: mpmc::Handle<'a, u64>,
}

impl BagHandle for CountedHandle<'_> {
    type Item = u64;
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), PushError<u64>> {
        let r = self.handle.try_push(item);
        count_push(self.pipe, r.is_ok());
        r
    }
    #[inline(always)]
    fn try_pop(&self) -> Result<u64, PopError> {
        let r = self.handle.try_pop();
        count_pop(self.pipe, r.as_ref().map(|_| ()).map_err(|e| *e));
        r
    }
    fn release(&self) {
        BagHandle::release(&self.handle)
    }
}

impl WeakBag for Counted {
    type Item = u64;
    #[inline(always)]
    fn try_push(&self, item: u64) -> Result<(), PushError<u64>> {
        let r = self.queue.try_push(item);
        count_push(self.pipe, r.is_ok());
        r
    }
    #[inline(always)]
    fn try_pop(&self) -> Result<u64, PopError> {
        let r = self.queue.try_pop();
        count_pop(self.pipe, r.as_ref().map(|_| ()).map_err(|e| *e));
        r
    }
    fn size_guess(&self) -> usize {
        self.queue.len()
    }
    type Handle<'a> = CountedHandle<'a>;
    fn handle(&self) -> CountedHandle<'_> {
        CountedHandle {
            pipe: self.pipe,
            handle: self.queue.handle(),
        }
    }
}

/// What one thread of a round did.
struct Thread {
    pairs: u64,
    started: Instant,
    ended: Instant,
    counts: Counts,
    cpu_first: i32,
    cpu_last: i32,
    switches: (libc::c_long, libc::c_long),
}

fn cpu() -> i32 {
    // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
    unsafe { libc::sched_getcpu() }
}

/// Involuntary context switches and minor page faults of the calling thread so far.
fn switches() -> (libc::c_long, libc::c_long) {
    // SAFETY: an all-zero `rusage` is a valid value (integers and timevals), which
    // `getrusage` overwrites.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage`; RUSAGE_THREAD asks for this thread's.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    (usage.ru_nivcsw, usage.ru_minflt)
}

/// One thread of a round: set-up done by the caller (its worker made), waits at `start`,
/// then runs `pair` until `stop`.
fn thread_of(start: &Barrier, stop: &AtomicBool, mut pair: impl FnMut(u64)) -> Thread {
    let before = switches();
    start.wait();
    let cpu_first = cpu();
    let started = Instant::now();
    let mut pairs = 0;
    while !stop.load(Ordering::Relaxed) {
        for i in 0..64 {
            pair(i);
        }
        pairs += 64;
    }
    let ended = Instant::now();
    let after = switches();
    Thread {
        pairs,
        started,
        ended,
        counts: COUNTS.with(Cell::get),
        cpu_first,
        cpu_last: cpu(),
        switches: (after.0 - before.0, after.1 - before.1),
    }
}

/// A round of `pairs` at two threads, each running `body` (which makes its worker and calls
/// [`thread_of`]).
fn round(ms: u64, body: impl Fn(&Barrier, &AtomicBool) -> Thread + Sync) -> Vec<Thread> {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(3);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    COUNTS.with(|c| {
                        c.set(Counts {
                            last_push: usize::MAX,
                            last_pop: usize::MAX,
                            ..Counts::default()
                        })
                    });
                    body(&start, &stop)
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(Duration::from_millis(ms));
        stop.store(true, Ordering::Relaxed);
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// The round of a structure through handles (`handle`) or plainly.
macro_rules! pairs_round {
    ($ms:expr, $bag:expr, handle) => {
        round($ms, |start, stop| {
            let h = $bag.handle();
            thread_of(start, stop, |i| {
                h.push(i);
                while h.pop().is_none() {}
            })
        })
    };
    ($ms:expr, $bag:expr, plain) => {
        round($ms, |start, stop| {
            thread_of(start, stop, |i| {
                $bag.push(i);
                while $bag.pop().is_none() {}
            })
        })
    };
}

/// The median of 5 measures of a cache-line round trip between two fresh threads, in ns (2,000
/// round trips each): about 130 ns between the two cores of this machine; much less when the
/// two threads share a core's caches.
fn round_trip_ns() -> f64 {
    let mut samples: Vec<f64> = (0..5)
        .map(|_| {
            let line = AtomicUsize::new(0);
            const TRIPS: usize = 2_000;
            let began = std::thread::scope(|s| {
                s.spawn(|| {
                    for i in 0..TRIPS {
                        while line.load(Ordering::Acquire) != 2 * i + 1 {
                            std::hint::spin_loop();
                        }
                        line.store(2 * i + 2, Ordering::Release);
                    }
                });
                let began = Instant::now();
                for i in 0..TRIPS {
                    line.store(2 * i + 1, Ordering::Release);
                    while line.load(Ordering::Acquire) != 2 * i + 2 {
                        std::hint::spin_loop();
                    }
                }
                began.elapsed()
            });
            began.as_secs_f64() * 1e9 / TRIPS as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[2]
}

/// Mops/s as the suite counts them (pushes plus pops, first start to last end).
fn mops(threads: &[Thread]) -> f64 {
    let started = threads.iter().map(|t| t.started).min().unwrap();
    let ended = threads.iter().map(|t| t.ended).max().unwrap();
    let ops: u64 = threads.iter().map(|t| 2 * t.pairs).sum();
    ops as f64 / (ended - started).as_secs_f64() / 1e6
}

fn describe(threads: &[Thread]) -> String {
    let mut out = String::new();
    let min = threads.iter().map(|t| t.pairs).min().unwrap() as f64;
    let max = threads.iter().map(|t| t.pairs).max().unwrap() as f64;
    out += &format!("bal {:.2}", min / max);
    for (i, t) in threads.iter().enumerate() {
        let c = &t.counts;
        out += &format!(
            " | t{i} cpu {}->{} preempted {} faults {}",
            t.cpu_first, t.cpu_last, t.switches.0, t.switches.1
        );
        if c.pushes.iter().sum::<u64>() > 0 {
            out += " push";
            for (p, &n) in c.pushes.iter().enumerate().filter(|(_, n)| **n > 0) {
                out += &format!(" {p}:{}", share(n, t.pairs));
            }
            out += " pop";
            for (p, &n) in c.pops.iter().enumerate().filter(|(_, n)| **n > 0) {
                out += &format!(" {p}:{}", share(n, t.pairs));
            }
            out += &format!(
                " moves {}/{} fail {}/{}t/{}e",
                c.push_moves, c.pop_moves, c.push_failures, c.pop_transients, c.pop_empties
            );
        }
    }
    out
}

fn share(n: u64, of: u64) -> String {
    if n == of {
        "all".into()
    } else {
        format!("{:.3}", n as f64 / of.max(1) as f64)
    }
}

/// The handle round and the plain round of a Bagpipe of pipes `B`.
fn bagpipe_rounds<B: WeakBag<Item = u64> + Default + Sync>(prefill: u64, ms: u64) -> [String; 2] {
    NEXT_PIPE.store(0, Ordering::Relaxed);
    let bag: Bagpipe<B> = Bagpipe::new();
    {
        let handle = bag.handle();
        (0..prefill).for_each(|i| handle.push(i));
    }
    let trip_handle = round_trip_ns();
    let handle = pairs_round!(ms, bag, handle);
    while bag.pop().is_some() {}
    drop(bag);
    NEXT_PIPE.store(0, Ordering::Relaxed);
    let bag: Bagpipe<B> = Bagpipe::new();
    (0..prefill).for_each(|i| bag.push(i));
    let trip_plain = round_trip_ns();
    let plain = pairs_round!(ms, bag, plain);
    while bag.pop().is_some() {}
    [
        format!(
            "handle {:6.1} trip {trip_handle:4.0} ns {}",
            mops(&handle),
            describe(&handle)
        ),
        format!(
            "plain  {:6.1} trip {trip_plain:4.0} ns {}",
            mops(&plain),
            describe(&plain)
        ),
    ]
}

/// The suite's other subjects of a `--subjects "mpmc,stack,Mutex<Vec>"` run, for their side
/// effects between the Bagpipe rounds.
fn fill(prefill: u64, ms: u64) {
    let _ = bagpipe_rounds_of::<Stack<u64>>(prefill, ms);
    let queue: Queue<u64> = Queue::new();
    (0..prefill).for_each(|i| queue.push(i));
    pairs_round!(ms, queue, handle);
    pairs_round!(ms, queue, plain);
    let stack: Stack<u64> = Stack::new();
    (0..prefill).for_each(|i| stack.push(i));
    pairs_round!(ms, stack, handle);
    pairs_round!(ms, stack, plain);
}

fn bagpipe_rounds_of<B: WeakBag<Item = u64> + Default + Sync>(
    prefill: u64,
    ms: u64,
) -> [String; 2] {
    bagpipe_rounds::<B>(prefill, ms)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let prefill: u64 = args.next().map_or(0, |s| s.parse().expect("a count"));
    let ms: u64 = args
        .next()
        .map_or(250, |s| s.parse().expect("milliseconds"));
    let rounds: usize = args.next().map_or(10, |s| s.parse().expect("rounds"));
    let filler = std::env::var_os("FILL").is_some();
    let counted = std::env::var_os("COUNT").is_some();
    for r in 0..rounds {
        let [handle, plain] = if counted {
            bagpipe_rounds::<Counted>(prefill, ms)
        } else {
            bagpipe_rounds::<Queue<u64>>(prefill, ms)
        };
        println!("round {r:2} {handle}");
        println!("round {r:2} {plain}");
        if filler {
            fill(prefill, ms);
        }
    }
}
