//! The free-page pool: empty pages shared between all heaps through two Bagpipes, and the
//! purge policy that gives their memory back to the OS.
//!
//! # Pipes that cannot recurse
//!
//! The pool is pitlane-queue's [`Bagpipe`] over [`PageStack`]s, a [`WeakBag`] written here: a
//! Treiber stack whose links live *inside the page descriptors* (`Page::pool_next`) and whose
//! top is a [`TaggedIndex`] of 21 index bits (a global page number) and a 43-bit generation
//! against ABA. A push or pop allocates nothing, takes no lock and needs no epoch, so the pool
//! can serve the allocator's own slow paths. (pitlane-queue's own `Stack` and `Queue` allocate
//! their nodes from the global allocator and pin crossbeam-epoch, which would call back into
//! this allocator from inside it.) Page descriptors are never unmapped, so a pop that read a
//! stale top reads a valid `pool_next` and then fails its compare-and-swap.
//!
//! - try_push: link the page to the top seen, CAS the top; a lost CAS is `Transient`.
//! - try_pop: read the top and its `pool_next`, CAS the top to it; an empty top is `Empty`,
//!   a lost CAS `Transient`. Linearization points: the successful CAS, or the load that saw an
//!   empty top.
//!
//! The Bagpipe walks its pipes (twice the CPUs, rounded up to a power of two) from a per-thread
//! position. Taking a page uses the Bagpipe's bail-out ([`Bagpipe::pop_bounded`]): a pop that
//! finds every pipe empty, or has lost as many races as there are pipes, gives up, and the next
//! source serves (dirty pages, then clean ones, then a never-used page). Giving a page back
//! walks until a pipe takes it: the page has nowhere else to go, and a push loses a race only
//! to another thread's success. The Bagpipe itself is built once, on the allocator's first use;
//! its array of pipes is the one allocation the allocator makes through the global allocator,
//! and while it is being built (possibly by a nested call into this very allocator) pages go to
//! and come from a single boot [`PageStack`] instead.
//!
//! No revocation is used: a page enters the pool only when it holds no block, and leaves it
//! only through a pop, so nothing ever needs to be pulled out of the middle of a pipe.
//!
//! # Purging (the policy)
//!
//! A page that becomes empty goes to the *dirty* Bagpipe with the time it arrived. At most
//! every half [`purge delay`](crate::PurgePolicy::delay_ms), a slow path (a page release, a
//! large free) sweeps: the heaps of exited threads and the orphan heap (see `heap`) are
//! visited and their empty pages released; then free memory older than the delay is given
//! back until what is left free and mapped (dirty pages and cached large runs) is at most
//! [`retain_bytes`](crate::PurgePolicy::retain_bytes) — cached large runs first, oldest
//! first (unmapped), then dirty pages (purged with `madvise(MADV_DONTNEED)`, their memory
//! back to the OS at once, and moved to the *clean* Bagpipe); whatever is older than
//! [`retain_ms`](crate::PurgePolicy::retain_ms) goes whatever the budget. Heaps take dirty
//! pages first (their memory is still warm), then clean ones, then fresh ones.
//! [`collect`](crate::collect) sweeps at once and gives everything back.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::{PopError, PushError, WeakBag};
use pitlane_sync::{Tagged, TaggedIndex};

use crate::lock::SpinLock;
use crate::os;
use crate::segment::{self, PAGE_SIZE, Page};
use crate::stats::Counters;

/// Index bits of a page number in a stack's top word.
const INDEX_BITS: u32 = 21;
/// The page number that means "no page".
const NIL: u32 = Tagged::<INDEX_BITS>::NIL;

/// A lock-free intrusive stack of pages (by global page number), linked through their
/// descriptors: one pipe of the pool's Bagpipes. See the [module documentation](self).
pub(crate) struct PageStack {
    top: TaggedIndex<INDEX_BITS>,
    len: AtomicUsize,
}

impl PageStack {
    pub(crate) const fn new() -> Self {
        Self {
            top: TaggedIndex::new(NIL),
            len: AtomicUsize::new(0),
        }
    }
}

impl Default for PageStack {
    fn default() -> Self {
        Self::new()
    }
}

impl WeakBag for PageStack {
    type Item = u32;

    fn try_push(&self, number: u32) -> Result<(), PushError<u32>> {
        let page = segment::page_by_number(number);
        let top = self.top.load(Ordering::Acquire);
        // SAFETY: the page is ours to push (in no heap, no pool); descriptors are never freed.
        unsafe { (*page).pool_next.store(top.index(), Ordering::Relaxed) };
        match self
            .top
            .compare_exchange(top, number, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => {
                self.len.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => Err(PushError::Transient(number)),
        }
    }

    fn try_pop(&self) -> Result<u32, PopError> {
        let top = self.top.load(Ordering::Acquire);
        if top.is_nil() {
            return Err(PopError::Empty);
        }
        let page = segment::page_by_number(top.index());
        // SAFETY: descriptors are never freed; if the page left the stack since the load, the
        // value read is stale and the CAS below fails on the generation.
        let next = unsafe { (*page).pool_next.load(Ordering::Relaxed) };
        match self
            .top
            .compare_exchange(top, next, Ordering::Acquire, Ordering::Acquire)
        {
            Ok(_) => {
                self.len.fetch_sub(1, Ordering::Relaxed);
                Ok(top.index())
            }
            Err(_) => Err(PopError::Transient),
        }
    }

    fn size_guess(&self) -> usize {
        // Pushes count after their CAS and pops after theirs, so the difference may dip below
        // zero for a moment; read that as empty.
        let len = self.len.load(Ordering::Relaxed);
        if len > isize::MAX as usize { 0 } else { len }
    }

    type Handle<'a> = &'a PageStack;

    fn handle(&self) -> &PageStack {
        self
    }
}

/// The two Bagpipes of free pages.
struct Pool {
    dirty: Bagpipe<PageStack>,
    clean: Bagpipe<PageStack>,
}

/// The pool, once built.
static POOL: AtomicPtr<Pool> = AtomicPtr::new(core::ptr::null_mut());
/// Where free pages go while the pool is being built.
static BOOT: PageStack = PageStack::new();

/// Builds the pool (once, from the allocator's initialisation). Allocates the Bagpipes'
/// pipes and the pool itself through the global allocator; a nested call into this allocator
/// meanwhile finds `POOL` null and uses `BOOT`.
///
/// Under `LD_PRELOAD` or as the `#[global_allocator]` those allocations are served by this
/// allocator, which may need memory from the OS for them (a segment, or a mapping for pipes of
/// more than 16 KiB). So each is made fallibly: when one is refused (an address-space limit
/// at the process's first allocation), the pool is not built and `BOOT` serves for the life of
/// the process (pitlane-malloc's `tests/c_programs.rs`, the first `malloc` under an
/// address-space limit), never an abort from the standard library's allocation-error handler.
pub(crate) fn init() {
    let pipes = (2 * os::cpus()).next_power_of_two();
    let (Ok(dirty), Ok(clean)) = (
        Bagpipe::<PageStack>::with_pipes(pipes),
        Bagpipe::<PageStack>::with_pipes(pipes),
    ) else {
        return;
    };
    let layout = std::alloc::Layout::new::<Pool>();
    // SAFETY: `Pool` is not zero-sized.
    let pool = unsafe { std::alloc::alloc(layout) }.cast::<Pool>();
    if pool.is_null() {
        return;
    }
    // SAFETY: `pool` is a fresh allocation of `Pool`'s layout, written once here; it is never
    // freed (the pool lives as long as the process).
    unsafe { pool.write(Pool { dirty, clean }) };
    POOL.store(pool, Ordering::Release);
}

#[inline]
fn pool() -> Option<&'static Pool> {
    let pool = POOL.load(Ordering::Acquire);
    // SAFETY: a published pool is never freed.
    (!pool.is_null()).then(|| unsafe { &*pool })
}

/// Takes a free page: a dirty one, else a clean (purged) one, else a never-used one (for
/// which, if the OS refuses a new segment, the large cache's mappings are given back and
/// the segment asked for once more). The page's memory may hold old contents (dirty) or
/// zeroes.
///
/// Each Bagpipe pop bails out (the seed's bail-out) after as many lost races as the Bagpipe
/// has pipes, and the next source serves instead: a thread that keeps losing to others, or
/// keeps being preempted mid-attempt, takes memory elsewhere rather than wait on a contended
/// pool. A lost race means another thread's push or pop succeeded, so the pages it passed
/// over are still there for later pops.
pub(crate) fn acquire() -> Option<NonNull<Page>> {
    if let Some(pool) = pool() {
        let give_up_after = pool.dirty.pipe_count();
        if let Ok(number) = pool.dirty.pop_bounded(give_up_after) {
            return NonNull::new(segment::page_by_number(number));
        }
        if let Ok(number) = pool.clean.pop_bounded(give_up_after) {
            Counters::get()
                .purged
                .fetch_sub(PAGE_SIZE, Ordering::Relaxed);
            return NonNull::new(segment::page_by_number(number));
        }
    }
    if let Some(number) = BOOT.pop() {
        return NonNull::new(segment::page_by_number(number));
    }
    // A new segment the OS refuses may fit once the large cache's mappings are given back.
    segment::fresh_page().or_else(|| {
        crate::large::give_back_cached();
        segment::fresh_page()
    })
}

/// Gives an empty page (in no heap) back to the pool, then sweeps if one is due.
pub(crate) fn release(page: &Page) {
    let now = os::now_ms();
    page.released_at.store(now, Ordering::Relaxed);
    match pool() {
        Some(pool) => pool.dirty.push(page.number.get()),
        None => BOOT.push(page.number.get()),
    }
    maybe_sweep(now);
}

/// The purge delay in milliseconds (see [`crate::PurgePolicy`]).
pub(crate) static PURGE_DELAY_MS: AtomicU64 = AtomicU64::new(crate::PurgePolicy::DEFAULT_DELAY_MS);
/// The most free memory kept past the delay (see [`crate::PurgePolicy`]).
pub(crate) static RETAIN_BYTES: AtomicUsize =
    AtomicUsize::new(crate::PurgePolicy::DEFAULT_RETAIN_BYTES);
/// How long memory is kept under [`RETAIN_BYTES`] at most.
pub(crate) static RETAIN_MS: AtomicU64 = AtomicU64::new(crate::PurgePolicy::DEFAULT_RETAIN_MS);
/// When the next sweep is due.
static NEXT_SWEEP: AtomicU64 = AtomicU64::new(0);
/// Held while a thread sweeps: one sweep at a time.
static SWEEP_LOCK: SpinLock = SpinLock::new();

/// After `fork`, in the child: a sweep that another thread of the parent was making is cut
/// short (that thread is not in the child), so the lock it took would stay held and no sweep
/// would ever run in the child. What the cut sweep held is lost to the child, not
/// inconsistent: a parked heap it was tidying stays held (never adopted), pages it had
/// taken from the dirty pool and runs it had taken from the large cache (under the cache's
/// lock, which `fork` waits for) are leaked.
pub(crate) fn after_fork_child() {
    // SAFETY: the fork handler of the child, on the forking thread, which was not sweeping
    // (a sweep does not fork), before the child's code runs.
    unsafe { SWEEP_LOCK.release_in_child() };
}

/// Sweeps if one is due and no other thread is sweeping.
#[inline]
pub(crate) fn maybe_sweep(now: u64) {
    if now < NEXT_SWEEP.load(Ordering::Relaxed) {
        return;
    }
    sweep_now(now, false);
}

/// One sweep (see the module documentation); `force` gives back everything, whatever the
/// delay and the budget. Returns without sweeping if another thread is sweeping, unless
/// `force`: then it waits for that sweep to end and sweeps after it.
///
/// A forced sweep is [`collect`](crate::collect)'s, which promises every free page purged and
/// every cached large mapping unmapped when it returns. Had it returned beside another
/// thread's ordinary sweep (due on any slow path, and keeping young memory), `collect` would
/// have given back nothing (`tests/collect_beside_sweeps.rs`: a freed 2 MiB mapping still
/// cached after `collect()`, in about one run of four beside two busy loops). Waiting cannot
/// deadlock: `collect` is called from outside the allocator, so its thread holds no lock of
/// it and is not the sweeping one.
#[cold]
pub(crate) fn sweep_now(now: u64, force: bool) {
    let _sweeping = if force {
        SWEEP_LOCK.lock()
    } else {
        let Some(guard) = SWEEP_LOCK.try_lock() else {
            return;
        };
        guard
    };
    let delay = PURGE_DELAY_MS.load(Ordering::Relaxed);
    NEXT_SWEEP.store(now + (delay / 2).max(1), Ordering::Relaxed);
    crate::heap::reclaim_parked(force);
    let ages = Ages {
        now,
        delay,
        retain: RETAIN_MS.load(Ordering::Relaxed).max(delay),
        force,
    };
    // What is free and mapped now, beyond the budget: the most this sweep gives back among
    // what is older than the delay.
    let dirty = pool().map_or(0, |pool| pool.dirty.size_guess() * PAGE_SIZE);
    let held = dirty + Counters::get().large_cached.load(Ordering::Relaxed);
    let mut excess = held.saturating_sub(RETAIN_BYTES.load(Ordering::Relaxed));
    crate::large::sweep(&ages, &mut excess);
    if let Some(pool) = pool() {
        purge_dirty(pool, &ages, &mut excess);
    }
}

/// The ages that decide what a sweep gives back (see [`crate::PurgePolicy`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ages {
    /// The sweep's time (coarse milliseconds).
    pub(crate) now: u64,
    /// The purge delay: younger memory is kept.
    pub(crate) delay: u64,
    /// Older memory is given back whatever the budget (at least `delay`).
    pub(crate) retain: u64,
    /// Give back everything.
    pub(crate) force: bool,
}

impl Ages {
    /// Whether memory freed at `then` goes back, `excess` bytes being over the budget; takes
    /// `len` off `excess` if so.
    pub(crate) fn give_back(&self, then: u64, len: usize, excess: &mut usize) -> bool {
        let age = self.now.saturating_sub(then);
        if self.force || age >= self.retain || (age >= self.delay && *excess > 0) {
            *excess = excess.saturating_sub(len);
            true
        } else {
            false
        }
    }
}

/// Purges the dirty pages that [`Ages::give_back`] says go back, moving them to the clean
/// Bagpipe; the others go back to the dirty one.
fn purge_dirty(pool: &Pool, ages: &Ages, excess: &mut usize) {
    let mut young: *mut Page = core::ptr::null_mut();
    let budget = pool.dirty.size_guess();
    let counters = Counters::get();
    for _ in 0..budget {
        let Some(number) = pool.dirty.pop() else {
            break;
        };
        let page = segment::page_by_number(number);
        // SAFETY: popped, so this thread has the page alone until it pushes it again.
        let page = unsafe { &*page };
        if ages.give_back(page.released_at.load(Ordering::Relaxed), PAGE_SIZE, excess) {
            if os::purge(page.start.get(), PAGE_SIZE) {
                counters.purged.fetch_add(PAGE_SIZE, Ordering::Relaxed);
                counters.purges.fetch_add(1, Ordering::Relaxed);
                pool.clean.push(number);
            } else {
                pool.dirty.push(number);
            }
        } else {
            // Keep it aside (linked through the heap link, unused while in the pool) so that
            // this sweep does not pop it again.
            page.delayed_next.store(young, Ordering::Relaxed);
            young = core::ptr::from_ref(page).cast_mut();
        }
    }
    while !young.is_null() {
        // SAFETY: pages set aside above, still ours.
        let page = unsafe { &*young };
        young = page.delayed_next.load(Ordering::Relaxed);
        pool.dirty.push(page.number.get());
    }
}

/// Pages in the pool now (dirty, clean), for statistics and tests.
pub(crate) fn pool_pages() -> (usize, usize) {
    match pool() {
        Some(pool) => (pool.dirty.size_guess(), pool.clean.size_guess()),
        None => (BOOT.size_guess(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU8;

    /// Fresh page numbers for a test (the pages are leaked to it).
    fn fresh_numbers(count: usize) -> Vec<u32> {
        (0..count)
            .map(|_| {
                let page = segment::fresh_page().expect("a fresh page");
                // SAFETY: a fresh page is ours alone.
                unsafe { page.as_ref() }.number.get()
            })
            .collect()
    }

    #[test]
    fn the_ages_keep_young_memory_and_old_memory_within_the_budget() {
        let ages = Ages {
            now: 10_000,
            delay: 100,
            retain: 5_000,
            force: false,
        };
        // Younger than the delay: kept, whatever the excess.
        let mut excess = 1 << 30;
        assert!(!ages.give_back(9_950, PAGE_SIZE, &mut excess));
        assert_eq!(excess, 1 << 30);
        // Past the delay and over the budget: given back until the excess is used up.
        let mut excess = PAGE_SIZE + 1;
        assert!(ages.give_back(9_000, PAGE_SIZE, &mut excess));
        assert_eq!(excess, 1);
        assert!(ages.give_back(9_000, PAGE_SIZE, &mut excess));
        assert_eq!(excess, 0);
        assert!(!ages.give_back(9_000, PAGE_SIZE, &mut excess));
        // Past `retain`: given back even within the budget.
        assert!(ages.give_back(5_000, PAGE_SIZE, &mut excess));
        assert_eq!(excess, 0);
        // Forced: everything, the youngest too.
        let forced = Ages {
            force: true,
            ..ages
        };
        let mut none = 0;
        assert!(forced.give_back(10_000, PAGE_SIZE, &mut none));
        // A clock that went backwards counts as age 0.
        let mut all = usize::MAX;
        assert!(!ages.give_back(20_000, PAGE_SIZE, &mut all));
    }

    #[test]
    fn a_page_stack_is_lifo_and_reports_empty() {
        let stack = PageStack::new();
        assert_eq!(stack.try_pop(), Err(PopError::Empty));
        let numbers = fresh_numbers(3);
        for &n in &numbers {
            assert!(stack.try_push(n).is_ok());
        }
        assert_eq!(stack.size_guess(), 3);
        for &n in numbers.iter().rev() {
            assert_eq!(stack.try_pop(), Ok(n));
        }
        assert_eq!(stack.try_pop(), Err(PopError::Empty));
        assert_eq!(stack.size_guess(), 0);
    }

    #[test]
    fn a_bagpipe_of_page_stacks_loses_and_duplicates_no_page_under_contention() {
        let pages = 4096;
        let numbers = fresh_numbers(pages);
        let first = *numbers.iter().min().unwrap();
        let last = *numbers.iter().max().unwrap();
        let bag = Bagpipe::<PageStack>::with_pipes(4).unwrap();
        let seen: Vec<AtomicU8> = (first..=last).map(|_| AtomicU8::new(0)).collect();
        // Four threads each push their quarter, popping and pushing back as they go; then
        // everything is popped once and counted.
        std::thread::scope(|s| {
            for chunk in numbers.chunks(pages / 4) {
                let bag = &bag;
                s.spawn(move || {
                    for (i, &n) in chunk.iter().enumerate() {
                        bag.push(n);
                        // (A pop may miss while others move pages between pipes: the
                        // Bagpipe's emptiness is not linearizable, so `None` is allowed.)
                        if i % 3 == 0 {
                            if let Some(back) = bag.pop() {
                                bag.push(back);
                            }
                        }
                    }
                });
            }
        });
        let mut popped = 0;
        while let Some(n) = bag.pop() {
            assert!((first..=last).contains(&n));
            assert_eq!(
                seen[(n - first) as usize].fetch_add(1, Ordering::Relaxed),
                0,
                "page {n} twice"
            );
            popped += 1;
        }
        assert_eq!(popped, pages, "pages lost");
        for &n in &numbers {
            assert_eq!(seen[(n - first) as usize].load(Ordering::Relaxed), 1);
        }
    }
}
