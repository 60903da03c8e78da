//! The floor under the `alloc` suite's goals: how fast a workload can run when allocation
//! costs next to nothing.
//!
//! The suite's time goals ask pitlane-alloc for at most 0.9 of the best peer's time on every
//! workload. Where a workload spends nearly all its time in its own loop, no allocator can get
//! there. This probe measures that bound: it runs the suite's own passes
//! (`pitlane_bench::suites::alloc::Kind::pass`) with a *floor* allocator beside the suite's
//! subjects, in interleaved rounds with the order rotated, and prints per-round paired ratios
//! to the best peer of the same round.
//!
//! The floor allocator is a per-thread stack of memory (a 256 MiB region from the system
//! allocator, touched only as used, handed to the next thread when its thread exits so that
//! its pages stay mapped and resident between passes, as an allocator's memory does): an allocation bumps a pointer; freeing the newest block
//! pops it (any other free is ignored: the memory is not reused); growing the newest block
//! extends it in place, with no copy; any other growth allocates anew and copies. For a
//! workload with one live block per thread at a time (the `vec_*` workloads, and
//! `cache_scratch`, whose blocks are each freed before the next is allocated), that is the
//! least any allocator can do: every allocation is a few instructions, every growth is free,
//! and every thread's memory is its own (no false sharing) and reused while warm. It is not an
//! allocator for anything else (it never reuses freed memory that is not the newest block), so
//! the other workloads are not run here.
//!
//! ```text
//! cargo run --release -p pitlane-bench --example alloc_floor -- [ROUNDS]
//! ```
//! `docs/notes/alloc-floor.md` has what it printed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::process::ExitCode;
use std::ptr::{self, NonNull};
use std::sync::Mutex;

use allocator_api2::alloc::{AllocError, Allocator};
use pitlane_bench::suites::alloc::Kind;
use pitlane_bench::suites::alloc::subjects::{
    AllocSubject, JemallocAlloc, MimallocAlloc, SystemAlloc,
};

/// The size of each thread's region.
const REGION: usize = 256 << 20;

/// A thread's region: its base (null until first used) and how much of it is in use.
struct Region {
    base: Cell<*mut u8>,
    top: Cell<usize>,
}

/// Regions of exited threads, kept mapped (and their touched pages resident) for the next
/// thread, as an allocator keeps its memory between passes.
static SPARE: Mutex<Vec<Spare>> = Mutex::new(Vec::new());

/// A region of an exited thread.
struct Spare(NonNull<u8>);

// SAFETY: a spare region belongs to no thread until one takes it out of `SPARE`.
unsafe impl Send for Spare {}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(base) = NonNull::new(self.base.get()) {
            // Poisoning is impossible (nothing panics while holding the lock); were it to
            // happen, the region is leaked.
            if let Ok(mut spare) = SPARE.lock() {
                spare.push(Spare(base));
            }
        }
    }
}

fn region_layout() -> Layout {
    // A constant, valid layout: 256 MiB at page alignment.
    Layout::from_size_align(REGION, 4096).unwrap_or_else(|_| unreachable!())
}

thread_local! {
    static REGION_OF_THREAD: Region = const {
        Region { base: Cell::new(ptr::null_mut()), top: Cell::new(0) }
    };
}

/// The floor allocator: see the module documentation.
#[derive(Clone, Copy, Debug, Default)]
struct Floor;

impl Floor {
    /// Runs `f` with the calling thread's region (made on first use); `AllocError` if the
    /// system allocator refuses the region or the thread is exiting.
    fn with_region<R>(f: impl FnOnce(&Region) -> Result<R, AllocError>) -> Result<R, AllocError> {
        REGION_OF_THREAD
            .try_with(|region| {
                if region.base.get().is_null() {
                    let spare = SPARE.lock().ok().and_then(|mut spare| spare.pop());
                    let base = match spare {
                        Some(Spare(base)) => base.as_ptr(),
                        // SAFETY: a nonzero size. Never freed: spare regions stay mapped.
                        None => unsafe { System.alloc(region_layout()) },
                    };
                    if base.is_null() {
                        return Err(AllocError);
                    }
                    region.base.set(base);
                    region.top.set(0);
                }
                f(region)
            })
            .unwrap_or(Err(AllocError))
    }

    /// A new block of `layout` on top of the calling thread's stack.
    fn push(region: &Region, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let base = region.base.get();
        let start = (base.addr() + region.top.get())
            .checked_next_multiple_of(layout.align())
            .ok_or(AllocError)?
            - base.addr();
        let end = start.checked_add(layout.size()).ok_or(AllocError)?;
        if end > REGION {
            return Err(AllocError);
        }
        region.top.set(end);
        // SAFETY: `start <= end <= REGION`, inside the region's allocation.
        let p = unsafe { NonNull::new_unchecked(base.add(start)) };
        Ok(NonNull::slice_from_raw_parts(p, layout.size()))
    }

    /// Whether the block at `ptr` of `size` bytes is the newest of `region`.
    fn is_newest(region: &Region, ptr: NonNull<u8>, size: usize) -> bool {
        let base = region.base.get().addr();
        ptr.addr().get() >= base && ptr.addr().get() + size == base + region.top.get()
    }
}

// SAFETY: blocks come from regions that are never freed, and are distinct while allocated: a
// block's bytes are reused only after it was freed as the newest block of its region (or, in
// place, by its own growth), or once its thread has exited and its region has gone to another
// thread. The workloads run here free every block a worker allocates before the worker exits,
// and the main thread's blocks (cache_scratch's first objects) live in the main thread's
// region, which no other thread ever takes.
unsafe impl Allocator for Floor {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        Self::with_region(|region| Self::push(region, layout))
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        let _ = Self::with_region(|region| {
            if Self::is_newest(region, ptr, layout.size()) {
                region.top.set(ptr.addr().get() - region.base.get().addr());
            }
            Ok(())
        });
    }

    #[inline]
    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        Self::with_region(|region| {
            let offset = ptr.addr().get().wrapping_sub(region.base.get().addr());
            if Self::is_newest(region, ptr, old.size())
                && ptr.addr().get().is_multiple_of(new.align())
                && offset + new.size() <= REGION
            {
                region.top.set(offset + new.size());
                return Ok(NonNull::slice_from_raw_parts(ptr, new.size()));
            }
            let fresh = Self::push(region, new)?;
            // SAFETY: `ptr` holds `old.size()` bytes and `fresh` at least as many; they do not
            // overlap: `fresh` starts at or above the region's old top, where every block of
            // this region ends (or `ptr` lies in another thread's region).
            unsafe { ptr::copy_nonoverlapping(ptr.as_ptr(), fresh.cast().as_ptr(), old.size()) };
            Ok(fresh)
        })
    }
}

impl AllocSubject for Floor {
    const NAME: &'static str = "floor";
    const PEER: bool = false;
    fn handle() -> Self {
        Floor
    }
}

/// One subject: its name and a pass runner.
type Runner = fn(Kind, usize) -> Result<f64, String>;

fn ns_per_iter<A: AllocSubject>(kind: Kind, threads: usize) -> Result<f64, String> {
    let size = kind.size(true);
    let pass = kind.pass::<A>(&size, threads)?;
    Ok(pass.elapsed.as_nanos() as f64 / pass.iters as f64)
}

const SUBJECTS: [(&str, Runner); 5] = [
    ("floor", ns_per_iter::<Floor>),
    ("pitlane", ns_per_iter::<pitlane_alloc::PitlaneAlloc>),
    ("system", ns_per_iter::<SystemAlloc>),
    ("jemalloc", ns_per_iter::<JemallocAlloc>),
    ("mimalloc", ns_per_iter::<MimallocAlloc>),
];

/// The first subject that is a peer; the ones before it are not.
const FIRST_PEER: usize = 2;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> ExitCode {
    let rounds: usize = match std::env::args().nth(1).map(|r| r.parse()) {
        None => 7,
        Some(Ok(r)) if r > 0 => r,
        Some(_) => {
            eprintln!("alloc_floor: the argument is a number of rounds (at least 1)");
            return ExitCode::FAILURE;
        }
    };
    let kinds = [
        Kind::VecSmall,
        Kind::VecMedium,
        Kind::VecLarge,
        Kind::CacheScratch,
    ];
    println!(
        "quick sizes, {rounds} rounds after a warm-up; ns per iteration (median), then per-round \
         ratios to the best peer of the round: median [min-max]"
    );
    for kind in kinds {
        for threads in [1, 2] {
            let mut times = vec![Vec::new(); SUBJECTS.len()];
            for round in 0..=rounds {
                for k in 0..SUBJECTS.len() {
                    let at = (k + round) % SUBJECTS.len();
                    match (SUBJECTS[at].1)(kind, threads) {
                        Ok(ns) if round > 0 => times[at].push(ns),
                        Ok(_) => {}
                        Err(error) => {
                            eprintln!("alloc_floor: {} {}: {error}", kind.name(), SUBJECTS[at].0);
                            return ExitCode::FAILURE;
                        }
                    }
                }
            }
            let best: Vec<f64> = (0..rounds)
                .map(|r| {
                    times[FIRST_PEER..]
                        .iter()
                        .map(|t| t[r])
                        .fold(f64::INFINITY, f64::min)
                })
                .collect();
            let mut line = format!("{:14} threads={threads}:", kind.name());
            for (k, (name, _)) in SUBJECTS.iter().enumerate() {
                line += &format!(" {name} {:.0}", median(&mut times[k].clone()));
            }
            println!("{line}");
            for (k, (name, _)) in SUBJECTS.iter().enumerate().take(FIRST_PEER) {
                let mut ratios: Vec<f64> = times[k].iter().zip(&best).map(|(t, b)| t / b).collect();
                let m = median(&mut ratios);
                println!(
                    "    {name} / best peer: {m:.2} [{:.2}-{:.2}]",
                    ratios[0],
                    ratios[ratios.len() - 1]
                );
            }
        }
    }
    ExitCode::SUCCESS
}
