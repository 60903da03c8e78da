//! The workloads, each generic over the allocator, each checking its own result.
//!
//! Every workload runs `threads` threads that each do the same work; a pass returns the wall
//! time from the moment all threads are released (spawned and waiting at a barrier) until the
//! last one ends, and the suite reports that time divided by the iterations of one thread
//! (`ns_per_iter`): a subject that scales perfectly shows the same figure at 1 and 2 threads.
//! Sizes, seeds and random streams depend only on the workload, the thread index and the
//! [`Size`], never on the subject, so every allocator gets exactly the same requests.
//!
//! Each pass checks its answer and returns an error when it is wrong: the Vec workloads sum
//! what they pushed; the block workloads stamp every block with a value from their random
//! stream (its first word, one byte in each further 4 KiB page, its last byte) and check the
//! stamp when the block is freed, and the sum of the stamps read back must equal the sum of
//! the stamps written, replayed from the same random streams without allocating. An allocator
//! that handed one block to two owners, lost a block or skipped work cannot pass.

use std::alloc::Layout;
use std::hint::black_box;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use allocator_api2::vec::Vec as AVec;

use super::subjects::AllocSubject;
use crate::start::{StartLine, spawn_each};

/// How much work one pass does; what each field means depends on the workload (see
/// [`super::Kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Iterations of one thread (per generation in larson).
    pub iters: u64,
    /// Live blocks per thread (larson, random_churn), or 0.
    pub slots: u64,
    /// Generations (larson) or writes per object (cache_scratch), or 0.
    pub rounds: u64,
}

/// What one pass measured.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// Wall time from the threads' release until the last one ended.
    pub elapsed: Duration,
    /// Iterations of one thread in that time: what `ns_per_iter` divides by.
    pub iters: u64,
}

impl Pass {
    /// Nanoseconds per iteration of one thread.
    pub fn ns_per_iter(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.iters.max(1) as f64
    }
}

/// A SplitMix64 stream: small, fast, and the same on every run.
#[derive(Clone, Copy)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next();
        r
    }

    #[inline]
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `lo..=hi`.
    #[inline]
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// Runs `work(thread)` on `threads` threads released together; the wall time from the first
/// thread's start to the last one's end (each thread reads the clock itself, so a spawning
/// thread that is not scheduled at once cannot shorten it) and each thread's result. A
/// panic in a thread becomes an error.
fn timed_threads<R: Send>(
    threads: usize,
    work: impl Fn(usize) -> R + Sync,
) -> Result<(Duration, Vec<R>), String> {
    let start = StartLine::new(threads);
    let outcomes: Vec<(Instant, Instant, R)> = std::thread::scope(|scope| {
        let bodies = (0..threads).map(|t| {
            let (start, work) = (&start, &work);
            move || {
                start.wait();
                let t0 = Instant::now();
                let r = work(t);
                (t0, Instant::now(), r)
            }
        });
        // The threads started do their work and end (it is finite) once let go.
        let handles = spawn_each(scope, threads, bodies, |_| start.abandon())?;
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a worker thread panicked".to_string()))
            .collect::<Result<_, _>>()
    })?;
    let first = outcomes.iter().map(|o| o.0).min();
    let last = outcomes.iter().map(|o| o.1).max();
    let elapsed = match (first, last) {
        (Some(f), Some(l)) => l - f,
        _ => return Err("no thread ran".into()),
    };
    Ok((elapsed, outcomes.into_iter().map(|o| o.2).collect()))
}

fn expect_eq(what: &str, got: u64, want: u64) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got}, expected {want}"))
    }
}

// ---------------------------------------------------------------------------------------------
// The post's Vec workloads.

/// Elements of one `vec_small` Vec, and Vecs per iteration.
pub const SMALL_PUSHES: usize = 500;
/// Vecs per `vec_small` iteration (the post's inner loop).
pub const SMALL_REPEATS: usize = 8;
/// Elements of the `vec_medium` Vec before the pushes.
pub const MEDIUM_START: usize = 16 * 1024;
/// Pushes onto the `vec_medium` Vec.
pub const MEDIUM_PUSHES: usize = 500_000;
/// `[usize; 1024]` pushes of one `vec_large` iteration.
pub const LARGE_PUSHES: usize = 1000;

/// `vec_small`: eight times, a new Vec, 500 `usize` pushes, drop.
pub fn vec_small<A: AllocSubject>(size: &Size, threads: usize) -> Result<Pass, String> {
    let (elapsed, sums) = timed_threads(threads, |_| {
        let mut sum = 0_u64;
        for _ in 0..size.iters {
            for _ in 0..SMALL_REPEATS {
                let mut v = AVec::new_in(A::handle());
                for i in 0..SMALL_PUSHES {
                    v.push(black_box(i));
                }
                let v = black_box(v);
                sum = sum.wrapping_add(v.iter().sum::<usize>() as u64);
            }
        }
        sum
    })?;
    let want = size.iters * (SMALL_REPEATS * SMALL_PUSHES * (SMALL_PUSHES - 1) / 2) as u64;
    for s in sums {
        expect_eq("vec_small sum", s, want)?;
    }
    Ok(Pass {
        elapsed,
        iters: size.iters,
    })
}

/// `vec_medium`: a Vec of 16 Ki `usize`, then 500,000 pushes onto it, drop.
pub fn vec_medium<A: AllocSubject>(size: &Size, threads: usize) -> Result<Pass, String> {
    let (elapsed, sums) = timed_threads(threads, |_| {
        let mut sum = 0_u64;
        for _ in 0..size.iters {
            let mut v = AVec::with_capacity_in(MEDIUM_START, A::handle());
            v.extend(0..MEDIUM_START);
            let mut v = black_box(v);
            for i in MEDIUM_START..MEDIUM_START + MEDIUM_PUSHES {
                v.push(black_box(i));
            }
            let v = black_box(v);
            sum = sum.wrapping_add(v.iter().sum::<usize>() as u64);
        }
        sum
    })?;
    let n = (MEDIUM_START + MEDIUM_PUSHES) as u64;
    let want = size.iters * (n * (n - 1) / 2);
    for s in sums {
        expect_eq("vec_medium sum", s, want)?;
    }
    Ok(Pass {
        elapsed,
        iters: size.iters,
    })
}

/// `vec_large`: a new Vec, 1,000 pushes of `[usize; 1024]` (8 KiB each), drop.
pub fn vec_large<A: AllocSubject>(size: &Size, threads: usize) -> Result<Pass, String> {
    let (elapsed, sums) = timed_threads(threads, |_| {
        let mut sum = 0_u64;
        for _ in 0..size.iters {
            let mut v: AVec<[usize; 1024], A> = AVec::new_in(A::handle());
            for i in 0..LARGE_PUSHES {
                v.push(black_box([i; 1024]));
            }
            let v = black_box(v);
            // One element of each array, at a place that moves, and the last of each.
            for (i, a) in v.iter().enumerate() {
                sum = sum.wrapping_add((a[i % 1024] + a[1023]) as u64);
            }
        }
        sum
    })?;
    let n = LARGE_PUSHES as u64;
    let want = size.iters * n * (n - 1);
    for s in sums {
        expect_eq("vec_large sum", s, want)?;
    }
    Ok(Pass {
        elapsed,
        iters: size.iters,
    })
}

// ---------------------------------------------------------------------------------------------
// Blocks with stamps, for the C patterns.

/// A block from the allocator: its address and requested size (a multiple of 8, at least 8).
struct Block {
    ptr: NonNull<u8>,
    size: usize,
}

// SAFETY: a block is owned by one thread at a time (moved between threads by value, as a
// `Box` would be); every allocator here frees from any thread.
unsafe impl Send for Block {}

const PAGE: usize = 4096;

impl Block {
    /// Allocates `size` bytes (8-aligned) and writes `stamp` into its first word, a byte of
    /// it into each further page and into its last byte (when that is not in the first word).
    #[inline]
    fn new<A: AllocSubject>(a: &A, size: usize, stamp: u64) -> Result<Self, String> {
        let layout = Layout::from_size_align(size, 8).map_err(|e| e.to_string())?;
        let ptr = a
            .allocate(layout)
            .map_err(|_| format!("allocation of {size} bytes failed"))?
            .cast::<u8>();
        // SAFETY: `size` >= 8 fresh bytes, 8-aligned, owned by us.
        unsafe {
            ptr.as_ptr().cast::<u64>().write(stamp);
            let mut at = PAGE;
            while at < size {
                ptr.as_ptr().add(at).write(stamp as u8);
                at += PAGE;
            }
            if size > 8 {
                ptr.as_ptr().add(size - 1).write(stamp as u8);
            }
        }
        Ok(Block { ptr, size })
    }

    /// Checks the stamp, frees the block, returns the stamp.
    #[inline]
    fn free<A: AllocSubject>(self, a: &A) -> Result<u64, String> {
        // SAFETY: a live block of `self.size` bytes that `new` stamped.
        let (stamp, ok) = unsafe {
            let stamp = self.ptr.as_ptr().cast::<u64>().read();
            let mut ok =
                self.size == 8 || self.ptr.as_ptr().add(self.size - 1).read() == stamp as u8;
            let mut at = PAGE;
            while at < self.size {
                ok &= self.ptr.as_ptr().add(at).read() == stamp as u8;
                at += PAGE;
            }
            (stamp, ok)
        };
        // SAFETY: allocated by an `A` handle with this layout (checked in `new`), freed once.
        unsafe { a.deallocate(self.ptr, Layout::from_size_align_unchecked(self.size, 8)) };
        if ok {
            Ok(stamp)
        } else {
            Err(format!(
                "a {}-byte block's stamp {stamp:#x} was overwritten while it was live",
                self.size
            ))
        }
    }
}

/// Frees every block of `blocks`, checking each; the wrapping sum of their stamps.
fn free_all<A: AllocSubject>(a: &A, blocks: Vec<Option<Block>>) -> Result<u64, String> {
    let mut sum = 0_u64;
    for b in blocks.into_iter().flatten() {
        sum = sum.wrapping_add(b.free(a)?);
    }
    Ok(sum)
}

/// Sums `results` (each thread's sum of stamps read back) and compares with `want`.
fn check_stamps(
    what: &str,
    results: Vec<Result<u64, String>>,
    extra: u64,
    want: u64,
) -> Result<(), String> {
    let mut sum = extra;
    for r in results {
        sum = sum.wrapping_add(r?);
    }
    expect_eq(what, sum, want)
}

// ---------------------------------------------------------------------------------------------
// larson-like: server churn, blocks freed by threads other than the one that allocated them.

const LARSON_SEED: u64 = 4141;
const LARSON_MIN: u64 = 8;
const LARSON_MAX: u64 = 1000;

fn larson_size(r: &mut Rng) -> usize {
    (r.range(LARSON_MIN, LARSON_MAX) as usize + 7) & !7
}

/// `larson`: each thread owns an array of `slots` blocks of 8–1000 bytes, filled by the main
/// thread before the clock starts. In each of `rounds` generations a fresh set of threads
/// takes the arrays (thread `t` of generation `g` takes array `(t + g) % threads`) and
/// replaces `iters` random blocks each (check and free the old, allocate and stamp a new);
/// the arrays outlive their threads, so most frees are of blocks another thread allocated,
/// and each generation frees blocks of threads that have exited. `ns_per_iter` is per
/// replacement; thread creation is inside the clock, as in larson.
pub fn larson<A: AllocSubject>(size: &Size, threads: usize) -> Result<Pass, String> {
    let a = A::handle();
    let slots = size.slots as usize;
    let mut arrays: Vec<Mutex<Vec<Option<Block>>>> = Vec::with_capacity(threads);
    for k in 0..threads {
        let mut r = Rng::new(LARSON_SEED, k as u64);
        let mut blocks = Vec::with_capacity(slots);
        for _ in 0..slots {
            let n = larson_size(&mut r);
            blocks.push(Some(Block::new(&a, n, r.next())?));
        }
        arrays.push(Mutex::new(blocks));
    }
    let mut read_back = Vec::new();
    let t0 = Instant::now();
    for g in 0..size.rounds {
        let (_, sums) = timed_threads(threads, |t| -> Result<u64, String> {
            let k = (t + g as usize) % threads;
            let mut array = arrays[k].lock().map_err(|_| "poisoned array")?;
            let mut r = Rng::new(LARSON_SEED, (1 + g) << 20 | k as u64);
            let a = A::handle();
            let mut sum = 0_u64;
            for _ in 0..size.iters {
                let i = (r.next() % slots as u64) as usize;
                let n = larson_size(&mut r);
                if let Some(old) = array[i].take() {
                    sum = sum.wrapping_add(old.free(&a)?);
                }
                array[i] = Some(Block::new(&a, n, r.next())?);
            }
            Ok(sum)
        })?;
        read_back.extend(sums);
    }
    let elapsed = t0.elapsed();
    let mut rest = 0_u64;
    for array in arrays {
        let blocks = array.into_inner().map_err(|_| "poisoned array")?;
        rest = rest.wrapping_add(free_all(&a, blocks)?);
    }
    check_stamps("larson stamps", read_back, rest, larson_want(size, threads))?;
    Ok(Pass {
        elapsed,
        iters: size.iters * size.rounds,
    })
}

/// The sum of every stamp `larson` writes, from the random streams alone.
fn larson_want(size: &Size, threads: usize) -> u64 {
    let mut sum = 0_u64;
    for k in 0..threads {
        let mut r = Rng::new(LARSON_SEED, k as u64);
        for _ in 0..size.slots {
            larson_size(&mut r);
            sum = sum.wrapping_add(r.next());
        }
    }
    for g in 0..size.rounds {
        for t in 0..threads {
            let k = (t + g as usize) % threads;
            let mut r = Rng::new(LARSON_SEED, (1 + g) << 20 | k as u64);
            for _ in 0..size.iters {
                r.next();
                larson_size(&mut r);
                sum = sum.wrapping_add(r.next());
            }
        }
    }
    sum
}

// ---------------------------------------------------------------------------------------------
// xmalloc-like: allocating threads feed freeing threads through a queue.

const XMALLOC_SEED: u64 = 0x786d_616c;
/// Blocks per message from a producer to a consumer.
pub const XMALLOC_BATCH: usize = 64;
/// Messages a consumer's channel holds before its producers wait.
const XMALLOC_QUEUE: usize = 16;

/// A message from a producer: blocks in a Vec of the same allocator (so the batches, too,
/// are allocated by one thread and freed by another).
type Batch<A> = AVec<Block, A>;
/// A producer's channels, one per consumer.
type Senders<A> = Vec<mpsc::SyncSender<Batch<A>>>;

fn xmalloc_size(r: &mut Rng) -> usize {
    (r.range(2, 16) * 8) as usize
}

/// Producers and consumers of an `xmalloc` pass at `threads` threads: half (rounded down,
/// at least one) produce.
pub fn xmalloc_split(threads: usize) -> (usize, usize) {
    let producers = (threads / 2).max(1);
    (producers, threads.saturating_sub(producers).max(1))
}

/// `xmalloc`: producer threads allocate `iters` blocks each (16–128 bytes, stamped) and send
/// them in batches of 64 through bounded channels to consumer threads, which check and free
/// them: every free is of a block another thread allocated, in the producer-consumer pattern
/// where an allocator's per-thread caches fill on one side and drain on the other.
/// `ns_per_iter` is per block of one producer. Needs two threads or more.
pub fn xmalloc<A: AllocSubject>(size: &Size, threads: usize) -> Result<Pass, String> {
    let (producers, consumers) = xmalloc_split(threads);
    if producers + consumers != threads {
        return Err(format!("xmalloc needs at least 2 threads, not {threads}"));
    }
    let mut all = Vec::with_capacity(consumers);
    let mut receivers = Vec::with_capacity(consumers);
    for _ in 0..consumers {
        let (tx, rx) = mpsc::sync_channel::<Batch<A>>(XMALLOC_QUEUE);
        all.push(tx);
        receivers.push(Mutex::new(Some(rx)));
    }
    // Each producer gets its own senders before the clock starts; a consumer's channel
    // closes when the last producer ends.
    let senders: Vec<Mutex<Option<Senders<A>>>> = (0..producers)
        .map(|_| Mutex::new(Some(all.clone())))
        .collect();
    drop(all);
    let (elapsed, results) = timed_threads(threads, |t| -> Result<u64, String> {
        let a = A::handle();
        if t < producers {
            let tx = senders[t]
                .lock()
                .map_err(|_| "poisoned")?
                .take()
                .ok_or("producer senders taken twice")?;
            let mut r = Rng::new(XMALLOC_SEED, t as u64);
            let mut batch = AVec::with_capacity_in(XMALLOC_BATCH, a.clone());
            let mut next = t % consumers;
            for _ in 0..size.iters {
                let n = xmalloc_size(&mut r);
                batch.push(Block::new(&a, n, r.next())?);
                if batch.len() == XMALLOC_BATCH {
                    let fresh = AVec::with_capacity_in(XMALLOC_BATCH, a.clone());
                    let full = std::mem::replace(&mut batch, fresh);
                    tx[next].send(full).map_err(|_| "a consumer quit early")?;
                    next = (next + 1) % consumers;
                }
            }
            if !batch.is_empty() {
                tx[next].send(batch).map_err(|_| "a consumer quit early")?;
            }
            Ok(0)
        } else {
            let rx = receivers[t - producers]
                .lock()
                .map_err(|_| "poisoned")?
                .take()
                .ok_or("consumer channel taken twice")?;
            let mut sum = 0_u64;
            for batch in rx {
                for b in batch {
                    sum = sum.wrapping_add(b.free(&a)?);
                }
            }
            Ok(sum)
        }
    })?;
    let mut want = 0_u64;
    for p in 0..producers {
        let mut r = Rng::new(XMALLOC_SEED, p as u64);
        for _ in 0..size.iters {
            xmalloc_size(&mut r);
            want = want.wrapping_add(r.next());
        }
    }
    check_stamps("xmalloc stamps", results, 0, want)?;
    Ok(Pass {
        elapsed,
        iters: size.iters,
    })
}

// ---------------------------------------------------------------------------------------------
// cache-scratch-like: passive false sharing.

/// `cache_scratch`: the main thread allocates one 8-byte object per thread, one after the
/// other (so neighbours in memory, likely in one cache line), and hands object `t` to thread
/// `t`, which frees it and then, `iters` times, allocates an 8-byte object, writes and reads
/// it back `rounds` times (volatile), and frees it. An allocator that gives a thread memory
/// next to another thread's (the freed object itself, from a per-thread cache) makes every
/// write a cache-line transfer between cores; one that keeps threads' small objects apart
/// does not. `ns_per_iter` is per allocate-write-free iteration.
pub fn cache_scratch<A: AllocSubject>(size: &Size, threads: usize) -> Result<Pass, String> {
    let a = A::handle();
    let layout = Layout::new::<u64>();
    let mut handed = Vec::with_capacity(threads);
    for _ in 0..threads {
        let p = a
            .allocate(layout)
            .map_err(|_| "allocation of 8 bytes failed")?
            .cast::<u64>();
        handed.push(Mutex::new(Some(Block {
            ptr: p.cast(),
            size: 8,
        })));
    }
    let (elapsed, sums) = timed_threads(threads, |t| -> Result<u64, String> {
        let a = A::handle();
        let first = handed[t].lock().map_err(|_| "poisoned")?.take();
        if let Some(b) = first {
            // SAFETY: the 8-byte block the main thread allocated for this thread, freed once.
            unsafe { a.deallocate(b.ptr, layout) };
        }
        let tag = (t as u64 + 1) << 40;
        let mut sum = 0_u64;
        for _ in 0..size.iters {
            let p = a
                .allocate(layout)
                .map_err(|_| "allocation of 8 bytes failed")?
                .cast::<u64>();
            for k in 0..size.rounds {
                // SAFETY: a live, 8-aligned 8-byte block owned by this thread.
                let back = unsafe {
                    p.as_ptr().write_volatile(tag | k);
                    p.as_ptr().read_volatile()
                };
                if back != tag | k {
                    return Err(format!(
                        "thread {t} wrote {:#x} and read back {back:#x}",
                        tag | k
                    ));
                }
                sum = sum.wrapping_add(back & 0xFF_FFFF_FFFF);
            }
            // SAFETY: allocated just above with `layout`, freed once.
            unsafe { a.deallocate(p.cast(), layout) };
        }
        Ok(sum)
    })?;
    let per_thread = size
        .iters
        .wrapping_mul(size.rounds * size.rounds.saturating_sub(1) / 2);
    for s in sums {
        expect_eq("cache_scratch sum", s?, per_thread)?;
    }
    Ok(Pass {
        elapsed,
        iters: size.iters,
    })
}

// ---------------------------------------------------------------------------------------------
// Random-size churn.

const CHURN_SEED: u64 = 0xC4_0121;

/// Sizes of `random_churn`: three in four of 8–256 bytes, most of the rest up to 8 KiB, one
/// in thirty-three up to 128 KiB; multiples of 8.
fn churn_size(r: &mut Rng) -> usize {
    let pick = r.next() % 100;
    let n = if pick < 75 {
        r.range(8, 256)
    } else if pick < 97 {
        r.range(257, 8192)
    } else {
        r.range(8193, 128 * 1024)
    };
    (n as usize + 7) & !7
}

/// `random_churn`: each thread keeps `slots` live blocks of random sizes (see `churn_size`)
/// and `iters` times replaces a random one (check and free it, allocate and stamp a new one,
/// which touches each of its pages), starting empty and freeing the rest at the end. Threads
/// are independent: this is the steady state of a program with a mixed working set, where an
/// allocator's size classes, page reuse and fragmentation show. `ns_per_iter` is per
/// replacement.
pub fn random_churn<A: AllocSubject>(size: &Size, threads: usize) -> Result<Pass, String> {
    let slots = size.slots as usize;
    let (elapsed, sums) = timed_threads(threads, |t| -> Result<u64, String> {
        let a = A::handle();
        let mut r = Rng::new(CHURN_SEED, t as u64);
        let mut live: Vec<Option<Block>> = (0..slots).map(|_| None).collect();
        let mut sum = 0_u64;
        for _ in 0..size.iters {
            let i = (r.next() % slots as u64) as usize;
            let n = churn_size(&mut r);
            if let Some(old) = live[i].take() {
                sum = sum.wrapping_add(old.free(&a)?);
            }
            live[i] = Some(Block::new(&a, n, r.next())?);
        }
        Ok(sum.wrapping_add(free_all(&a, live)?))
    })?;
    let mut want = 0_u64;
    for t in 0..threads {
        let mut r = Rng::new(CHURN_SEED, t as u64);
        for _ in 0..size.iters {
            r.next();
            churn_size(&mut r);
            want = want.wrapping_add(r.next());
        }
    }
    check_stamps("random_churn stamps", sums, 0, want)?;
    Ok(Pass {
        elapsed,
        iters: size.iters,
    })
}
