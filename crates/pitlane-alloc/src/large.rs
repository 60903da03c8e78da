//! Large blocks (over 16 KiB, or aligned to more than 16 KiB): each in its own mapping.
//!
//! ```text
//!  mapping (page-aligned)
//!  +---------------------+--------+---------------------------------+
//!  | (offset - 64 bytes) | Header | block ...                       |
//!  +---------------------+--------+---------------------------------+
//!  ^ base                         ^ pointer handed out (aligned to max(64, align))
//! ```
//!
//! The offset is the alignment for a block aligned to more than 64 bytes, and 64 for the others,
//! but for blocks of a whole number of pages, which start at one of the lines 1 to 63 of their
//! first page, a different one from one such block to the next (see [`place`]).
//!
//! The header (64 bytes, right before the block) records the mapping, and a *seal*: a word
//! computed from the block's address and the mapping, written when the block is handed out
//! (and again whenever its header moves or changes) and cleared when it is freed. The C
//! `free`, which is given only a pointer, checks the seal before it takes a pointer outside
//! the segments for a large block of ours (see [`plausible`]): a foreign pointer whose
//! preceding bytes happen to look like a header, or a large block freed a second time while
//! its mapping is kept for reuse, is refused instead of putting someone else's memory (or the
//! same mapping twice) in the cache. A free knows a block is
//! large from its `Layout` (the class function says no small class fits), so it never has to
//! look the address up. `realloc` grows a block in place when its mapping has room, else moves
//! it: into a cached run, or with `mremap` (the kernel moves the page tables; nothing is
//! copied), or, for a mapping pieced together from runs that the kernel will not remap as
//! one, into a new mapping; a moved block keeps its offset in its page. Freed mappings are
//! kept in a cache of runs of address space shared by all threads (under one lock; each run
//! tagged with the thread that freed it, which takes its own runs first, then those of exited
//! threads), reused by later
//! blocks and unmapped by the purge policy (see [`PurgePolicy`](crate::PurgePolicy)); up
//! to 16 freed mappings of up to 1 MiB (4 MiB in all) wait first in the freeing thread's own
//! stash, for its next large blocks, without the lock.

use core::mem::MaybeUninit;
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::heap::HeapCore;
use crate::lock::SpinLock;
use crate::os::{self, OS_PAGE};
use crate::pool::Ages;
use crate::stats::Counters;

/// Bytes reserved before each large block for its header.
const HEADER: usize = 64;

/// What a large block's mapping records, right before the block.
#[repr(C)]
pub(crate) struct Header {
    /// The start of the mapping.
    base: *mut u8,
    /// The length of the mapping.
    len: usize,
    /// The owned heap the block belongs to, or null for the global heap.
    owner: *mut HeapCore,
    /// Neighbours in the owner's list of large blocks.
    prev: *mut Header,
    next: *mut Header,
    /// [`seal_of`] the block while it is live; 0 once it is freed.
    seal: usize,
}

const _: () = assert!(core::mem::size_of::<Header>() <= HEADER);

/// The seal of a live large block at `ptr` in the mapping `base .. base + len`: a mix of the
/// three, with a constant, so that neither zeros nor a copy of a header at another address
/// (nor a plausible base and length alone) match it. Not a secret: it guards against
/// accidents (a foreign pointer, a double free), not against a program forging headers.
#[inline]
fn seal_of(ptr: *mut u8, base: *mut u8, len: usize) -> usize {
    const KEY: usize = 0x9E37_79B9_7F4A_7C15;
    (ptr.addr() ^ KEY).rotate_left(23) ^ base.addr() ^ len.rotate_left(41) ^ KEY.rotate_left(7)
}

/// Writes the seal of the live block at `ptr` from its header's base and length (after the
/// header was written or changed).
///
/// # Safety
/// The header before `ptr` is valid and the caller's to write.
#[inline]
unsafe fn reseal(ptr: *mut u8) {
    let header = header_of(ptr);
    // SAFETY: as promised.
    unsafe { (*header).seal = seal_of(ptr, (*header).base, (*header).len) };
}

/// The most bytes of freed mappings kept (see `PurgePolicy::large_cache_bytes`).
pub(crate) static LARGE_CACHE_BYTES: AtomicUsize =
    AtomicUsize::new(crate::PurgePolicy::DEFAULT_LARGE_CACHE_BYTES);

/// Runs of freed address space kept in the cache, at most.
const CACHE_SLOTS: usize = 64;
/// The smallest remainder worth keeping when a cached run is split.
const MIN_SPLIT: usize = 64 << 10;

/// A run of mapped, page-aligned address space that no block uses.
#[derive(Clone, Copy)]
struct Cached {
    base: *mut u8,
    len: usize,
    freed_at: u64,
    /// The thread (its heap's address, used as a tag only) that freed it last.
    by: usize,
}

const NO_RUN: Cached = Cached {
    base: ptr::null_mut(),
    len: 0,
    freed_at: 0,
    by: 0,
};

/// The tag of runs whose thread exited.
const NOBODY: usize = 0;

std::thread_local! {
    /// A byte whose address tells the threads apart (see [`my_tag`]).
    static TAG: u8 = const { 0 };
}

/// The calling thread's tag for [`Cached::by`]: the address of its [`TAG`], distinct among
/// live threads. (Not its heap: a thread that allocated only large blocks has none yet.)
#[inline]
fn my_tag() -> usize {
    TAG.with(|t| core::ptr::from_ref(t).addr())
}

/// The cache of freed large mappings: runs of address space that are mapped (and mostly
/// resident), ready to serve large blocks without a system call or a page fault. Adjacent runs
/// are merged; a block takes the front of a run and leaves the rest; a block grows in place
/// when a run starts right where it ends.
struct Cache {
    runs: core::cell::UnsafeCell<[Cached; CACHE_SLOTS]>,
}
// SAFETY: only touched under CACHE_LOCK.
unsafe impl Sync for Cache {}

static CACHE: Cache = Cache {
    runs: core::cell::UnsafeCell::new([NO_RUN; CACHE_SLOTS]),
};
/// Guards [`CACHE`]; taken around `fork` too.
pub(crate) static CACHE_LOCK: SpinLock = SpinLock::new();

/// Runs of the cache, under its lock.
struct Runs<'a> {
    runs: &'a mut [Cached; CACHE_SLOTS],
    _guard: crate::lock::Guard<'a>,
}

fn runs() -> Runs<'static> {
    let guard = CACHE_LOCK.lock();
    Runs {
        // SAFETY: under the lock, held as long as the returned value.
        runs: unsafe { &mut *CACHE.runs.get() },
        _guard: guard,
    }
}

impl Runs<'_> {
    /// The slot of the run freed longest ago, if any run is cached.
    fn oldest(&self) -> Option<usize> {
        self.runs
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.base.is_null())
            .min_by_key(|(_, r)| r.freed_at)
            .map(|(i, _)| i)
    }

    /// Takes `len` bytes from the front of the smallest run that holds them (the whole run if
    /// less than [`MIN_SPLIT`] would be left), preferring the runs that thread `tag` freed,
    /// then those of exited threads; with `roomiest`, the *longest* of those instead (for a
    /// block that moves because it grows: it will grow into the rest in place). What is left
    /// of the run is tagged `tag`. Returns the base and the length taken.
    ///
    /// The preference keeps threads apart: a thread whose block grows (a `Vec` doubling) takes
    /// the front of the run its previous block left and grows into the rest of it in place;
    /// were another thread's block carved from the same run right behind it, the growth would
    /// have to move instead. Runs of threads still running go by best fit only.
    fn take_fit(&mut self, len: usize, tag: usize, roomiest: bool) -> Option<(*mut u8, usize)> {
        let mut best: Option<usize> = None;
        let mut mine: Option<usize> = None;
        let mut nobodys: Option<usize> = None;
        for (i, run) in self.runs.iter().enumerate() {
            if run.base.is_null() || run.len < len {
                continue;
            }
            let better = |at: Option<usize>, roomiest: bool| {
                at.is_none_or(|b| {
                    if roomiest {
                        run.len > self.runs[b].len
                    } else {
                        run.len < self.runs[b].len
                    }
                })
            };
            if better(best, false) {
                best = Some(i);
            }
            if run.by == tag && better(mine, roomiest) {
                mine = Some(i);
            }
            if run.by == NOBODY && better(nobodys, roomiest) {
                nobodys = Some(i);
            }
        }
        let i = mine.or(nobodys).or(best)?;
        Some(self.take_front(i, len, tag))
    }

    /// Takes at least `len` bytes from the front of the run that starts at `at`, if there is
    /// one that long.
    fn take_at(&mut self, at: *mut u8, len: usize, tag: usize) -> Option<usize> {
        let i = self
            .runs
            .iter()
            .position(|run| !run.base.is_null() && run.base == at && run.len >= len)?;
        Some(self.take_front(i, len, tag).1)
    }

    /// Takes `len` bytes from the front of run `i`; the rest (if kept) is tagged `tag`.
    fn take_front(&mut self, i: usize, len: usize, tag: usize) -> (*mut u8, usize) {
        let run = self.runs[i];
        let taken = if run.len - len >= MIN_SPLIT {
            // SAFETY: `len < run.len`: the rest of the run is still inside it.
            self.runs[i].base = unsafe { run.base.add(len) };
            self.runs[i].len = run.len - len;
            self.runs[i].by = tag;
            len
        } else {
            self.runs[i] = NO_RUN;
            run.len
        };
        Counters::get()
            .large_cached
            .fetch_sub(taken, Ordering::Relaxed);
        (run.base, taken)
    }

    /// Adds a run, merged with the runs right before and after it that the same thread freed
    /// (runs of different threads stay apart, so that each thread finds its own run whole
    /// again, see [`take_fit`](Self::take_fit)). If no slot is free, or the cache would
    /// exceed `budget`, the oldest runs are moved to `evicted` (to be unmapped once the lock
    /// is released); if the run alone exceeds the budget it is evicted itself.
    fn put(&mut self, mut run: Cached, budget: usize, evicted: &mut Evicted) {
        let counters = Counters::get();
        for i in 0..CACHE_SLOTS {
            let other = self.runs[i];
            if other.base.is_null() || other.by != run.by {
                continue;
            }
            if other.base.wrapping_add(other.len) == run.base {
                run.base = other.base;
                run.len += other.len;
            } else if run.base.wrapping_add(run.len) == other.base {
                run.len += other.len;
            } else {
                continue;
            }
            counters
                .large_cached
                .fetch_sub(other.len, Ordering::Relaxed);
            self.runs[i] = NO_RUN;
        }
        if run.len > budget {
            evicted.push(run);
            return;
        }
        loop {
            let cached = counters.large_cached.load(Ordering::Relaxed);
            let free = self.runs.iter().position(|r| r.base.is_null());
            if let Some(slot) = free.filter(|_| cached + run.len <= budget) {
                self.runs[slot] = run;
                counters.large_cached.fetch_add(run.len, Ordering::Relaxed);
                return;
            }
            let Some(oldest) = self.oldest() else {
                evicted.push(run);
                return;
            };
            evicted.push(self.runs[oldest]);
            counters
                .large_cached
                .fetch_sub(self.runs[oldest].len, Ordering::Relaxed);
            self.runs[oldest] = NO_RUN;
        }
    }
}

/// Runs to unmap after the cache lock is released. Left uninitialised past `count`: it is
/// made on every free of a large block, and zeroing its 2 KiB cost more than the rest of
/// the free.
struct Evicted {
    runs: [MaybeUninit<Cached>; CACHE_SLOTS + 1],
    count: usize,
}

impl Evicted {
    fn new() -> Self {
        Self {
            runs: [const { MaybeUninit::uninit() }; CACHE_SLOTS + 1],
            count: 0,
        }
    }

    fn push(&mut self, run: Cached) {
        if let Some(slot) = self.runs.get_mut(self.count) {
            slot.write(run);
            self.count += 1;
        }
    }

    /// Unmaps them (outside the lock).
    fn unmap(self, count_as_purges: bool) {
        let counters = Counters::get();
        for slot in &self.runs[..self.count] {
            // SAFETY: `push` wrote the first `count` slots.
            let run = unsafe { slot.assume_init_ref() };
            counters.mapped.fetch_sub(run.len, Ordering::Relaxed);
            if count_as_purges {
                counters.purges.fetch_add(1, Ordering::Relaxed);
            }
            os::unmap(run.base, run.len);
        }
    }
}

/// Keeps a freed run for reuse (or unmaps it when the budget says no), then sweeps if due.
fn cache_put(base: *mut u8, len: usize) {
    // Arms the thread's exit destructor, which disowns the thread's runs (if the thread is
    // already exiting, its runs stay under its tag, taken last by others).
    crate::heap::arm_exit_flush();
    let now = os::now_ms();
    let by = my_tag();
    let mut evicted = Evicted::new();
    {
        let mut runs = runs();
        runs.put(
            Cached {
                base,
                len,
                freed_at: now,
                by,
            },
            LARGE_CACHE_BYTES.load(Ordering::Relaxed),
            &mut evicted,
        );
    }
    evicted.unmap(false);
    crate::pool::maybe_sweep(now);
}

/// Freed mappings a thread keeps for itself, at most. Sixteen, so that a thread whose large
/// blocks vary in size (each taken from a stashed mapping of at least its length and at most
/// twice it) mostly finds one there: with four, a program replacing blocks of 16–128 KiB at
/// random at 2 threads spent an eighth of its time in the shared cache, under its lock, against
/// the other thread doing the same (`docs/notes/alloc-bench.md`, sixth session).
const STASH_SLOTS: usize = 16;
/// The largest mapping a thread keeps for itself.
const STASH_MAX_LEN: usize = 1 << 20;
/// The most bytes a thread keeps in its stash, all mappings together.
const STASH_MAX_BYTES: usize = 4 << 20;

thread_local! {
    /// The calling thread's stash: mappings of global-heap blocks it freed, which its next
    /// large blocks take without the cache's lock. Flushed to the cache at
    /// [`collect`](crate::collect) and at thread exit (the key destructor, which a stash put
    /// makes sure of); never more than [`STASH_SLOTS`] mappings of at most [`STASH_MAX_LEN`]
    /// each, [`STASH_MAX_BYTES`] in all, per thread.
    static STASH: [core::cell::Cell<Cached>; STASH_SLOTS] =
        const { [const { core::cell::Cell::new(NO_RUN) }; STASH_SLOTS] };
}

/// Keeps the freed mapping `base .. base + len` in the calling thread's stash; `false` if it
/// does not fit there (too long, stash full in slots or bytes, or the thread cannot flush
/// it at exit).
fn stash_put(base: *mut u8, len: usize) -> bool {
    if len > STASH_MAX_LEN || !crate::heap::arm_exit_flush() {
        return false;
    }
    let stashed = STASH.with(|slots| {
        let mut free = None;
        let mut held = 0;
        for slot in slots {
            let run = slot.get();
            if run.base.is_null() {
                free = free.or(Some(slot));
            } else {
                held += run.len;
            }
        }
        let Some(slot) = free else {
            return false;
        };
        if held + len > STASH_MAX_BYTES {
            return false;
        }
        slot.set(Cached {
            base,
            len,
            freed_at: 0,
            by: 0,
        });
        Counters::get()
            .large_cached
            .fetch_add(len, Ordering::Relaxed);
        true
    });
    if stashed {
        // A free of a large block is one of the slow paths that run the due sweeps (else
        // `cache_put` runs it).
        crate::pool::maybe_sweep(os::now_ms());
    }
    stashed
}

/// Takes from the calling thread's stash the shortest mapping of at least `len` bytes and at
/// most twice that (a much longer one would keep its resident tail from better uses).
fn stash_take(len: usize) -> Option<(*mut u8, usize)> {
    if len > STASH_MAX_LEN {
        return None;
    }
    STASH.with(|slots| {
        let mut best: Option<&core::cell::Cell<Cached>> = None;
        for slot in slots {
            let run = slot.get();
            if !run.base.is_null()
                && run.len >= len
                && run.len / 2 <= len
                && best.is_none_or(|b| run.len < b.get().len)
            {
                best = Some(slot);
            }
        }
        let run = best?.replace(NO_RUN);
        Counters::get()
            .large_cached
            .fetch_sub(run.len, Ordering::Relaxed);
        Some((run.base, run.len))
    })
}

/// Gives the calling thread's stash to the shared cache (at `collect` and thread exit).
pub(crate) fn flush_stash() {
    STASH.with(|slots| {
        for slot in slots {
            let run = slot.replace(NO_RUN);
            if !run.base.is_null() {
                Counters::get()
                    .large_cached
                    .fetch_sub(run.len, Ordering::Relaxed);
                cache_put(run.base, run.len);
            }
        }
    });
}

/// Unmaps every run of the shared cache and of the calling thread's stash, whatever their
/// age: for a caller whose mapping the OS just refused (an address-space limit, strict
/// overcommit), since what the cache keeps mapped may be what is missing; the caller then
/// tries once more (`tests/hostile_alloc.rs`, and pitlane-malloc's `tests/c_programs.rs`:
/// memory freed under `RLIMIT_AS` serves again). Other threads' stashes (at most 4 MiB each)
/// are left alone. Takes only the cache's lock, allocates nothing and arms nothing, so it may
/// run under the orphan heap's lock.
#[cold]
#[inline(never)]
pub(crate) fn give_back_cached() {
    let counters = Counters::get();
    // Two batches: the stash's and the cache's runs together could outnumber one.
    let mut stashed = Evicted::new();
    STASH.with(|slots| {
        for slot in slots {
            let run = slot.replace(NO_RUN);
            if !run.base.is_null() {
                counters.large_cached.fetch_sub(run.len, Ordering::Relaxed);
                stashed.push(run);
            }
        }
    });
    stashed.unmap(true);
    let mut evicted = Evicted::new();
    {
        let runs = runs();
        for run in runs.runs.iter_mut() {
            if !run.base.is_null() {
                counters.large_cached.fetch_sub(run.len, Ordering::Relaxed);
                evicted.push(*run);
                *run = NO_RUN;
            }
        }
    }
    evicted.unmap(true);
}

/// [`os::map`], or, if the OS refuses, the same once more after [`give_back_cached`].
fn map_or_give_back(len: usize) -> Option<core::ptr::NonNull<u8>> {
    os::map(len).or_else(|| {
        give_back_cached();
        os::map(len)
    })
}

/// Unmaps the cached runs that the policy gives back: those [`Ages::give_back`] says go,
/// oldest first (see [`PurgePolicy`](crate::PurgePolicy)).
pub(crate) fn sweep(ages: &Ages, excess: &mut usize) {
    let mut evicted = Evicted::new();
    {
        let runs = runs();
        let counters = Counters::get();
        while let Some(i) = runs.oldest() {
            let run = runs.runs[i];
            if !ages.give_back(run.freed_at, run.len, excess) {
                // Younger runs are kept too (a run kept for its age keeps the younger ones;
                // one kept for the budget leaves the budget at 0 for them).
                break;
            }
            evicted.push(run);
            counters.large_cached.fetch_sub(run.len, Ordering::Relaxed);
            runs.runs[i] = NO_RUN;
        }
    }
    evicted.unmap(true);
}

/// Marks the calling thread's cached runs as nobody's (at thread exit), so that another
/// thread that happens to get the same tag later does not take them for its own, and any
/// thread takes them before the runs of threads still running (see [`Runs::take_fit`]).
pub(crate) fn disown() {
    let tag = my_tag();
    let runs = runs();
    for run in runs.runs.iter_mut() {
        if !run.base.is_null() && run.by == tag {
            run.by = NOBODY;
        }
    }
}

/// The lines of its first page a block of a whole number of pages may start at: 1 to 63 (the
/// header takes the line before it, in the same OS page, see [`plausible`]).
const COLOURS: usize = OS_PAGE / HEADER - 1;
/// The step from one block's colour to the next one's (prime to [`COLOURS`], so that 63 blocks
/// in a row get 63 different colours, neighbours in time far apart).
const COLOUR_STEP: usize = 25;

/// The colour of the next such block, in `0 .. COLOURS` (see [`place`]). Read and written
/// without a read-modify-write: two threads that race may give their blocks the same colour,
/// which is harmless.
static COLOUR: AtomicUsize = AtomicUsize::new(0);

/// Where a new block of `size` bytes aligned to `align` (at most `OS_PAGE`) starts in a
/// page-aligned mapping, and the mapping's length; `None` if that overflows `isize`.
///
/// A block aligned to more than a line starts at its alignment; a block of any other size
/// than a whole number of pages at line 1, right after its header. A block of a whole number
/// of pages (a `Vec`'s buffer once its capacity in bytes is a power of two of 4 KiB or more,
/// a buffer of pages) starts at one of the lines 1 to 63, a different one from one such block
/// to the next: its mapping has a page more than the block for the header anyway, of which
/// the block at line 1 left 63 lines unused, so where it starts changes neither the mapping's
/// length, nor the pages the block spans, nor which cached mappings fit it. The block keeps
/// its place when it grows in place, moves or is remapped.
///
/// Why: on CPUs whose loads wait for earlier stores to the same address modulo 4 KiB, a copy
/// into a block from a buffer that sits a little before the block's place in its own page (a
/// value on the stack, pushed into a `Vec`) is slowed on every such copy; were every block at
/// line 1, every block of a program that has such a buffer would be. Spread over 63 lines,
/// such a buffer meets a slow place for a few blocks in 63. Blocks of other sizes keep their
/// first line (colouring them too looked slower on `random_churn`). The measurements are in
/// `docs/notes/alloc-bench.md` (twelfth session).
#[inline]
fn place(size: usize, align: usize) -> Option<(usize, usize)> {
    if align > HEADER {
        return Some((align, mapping_len(align, size)?));
    }
    let len = mapping_len(HEADER, size)?;
    if size % OS_PAGE != 0 {
        return Some((HEADER, len));
    }
    // A whole number of pages: the mapping has a page for the header and the block's first
    // line, of which the block may start at any line (`len - size >= OS_PAGE`).
    let colour = COLOUR.load(Ordering::Relaxed);
    COLOUR.store((colour + COLOUR_STEP) % COLOURS, Ordering::Relaxed);
    Some((HEADER * (1 + colour), len))
}

/// The header of the large block at `ptr`.
#[inline]
fn header_of(ptr: *mut u8) -> *mut Header {
    ptr.wrapping_sub(HEADER).cast()
}

/// Allocates a large block of `size` bytes aligned to `align`, for `owner` (null: the global
/// heap). Null when the OS refuses (also after the cache's mappings are given back, see
/// [`give_back_cached`]) or the size cannot be mapped. Zeroed if `zeroed`.
pub(crate) fn alloc(size: usize, align: usize, owner: *mut HeapCore, zeroed: bool) -> *mut u8 {
    let (base, len, ptr) = if align <= OS_PAGE {
        let Some((off, len)) = place(size, align) else {
            return ptr::null_mut();
        };
        let taken = match stash_take(len) {
            Some(run) => Some(run),
            None => runs().take_fit(len, my_tag(), false),
        };
        let (base, len, fresh) = match taken {
            Some((base, taken_len)) => (base, taken_len, false),
            None => match map_or_give_back(len) {
                Some(base) => {
                    Counters::get().mapped.fetch_add(len, Ordering::Relaxed);
                    (base.as_ptr(), len, true)
                }
                None => return ptr::null_mut(),
            },
        };
        // SAFETY: `off + size <= len`.
        let ptr = unsafe { base.add(off) };
        if zeroed && !fresh {
            // SAFETY: the block lies inside the mapping.
            unsafe { ptr.write_bytes(0, size) };
        }
        (base, len, ptr)
    } else {
        // The block starts `align` bytes into a mapping aligned to `align`.
        let Some(len) = mapping_len(align, size) else {
            return ptr::null_mut();
        };
        let Some(base) = os::map_aligned(len, align, false).or_else(|| {
            give_back_cached();
            os::map_aligned(len, align, false)
        }) else {
            return ptr::null_mut();
        };
        Counters::get().mapped.fetch_add(len, Ordering::Relaxed);
        // SAFETY: `align + size <= len`.
        (base.as_ptr(), len, unsafe { base.as_ptr().add(align) })
    };
    let header = header_of(ptr);
    // SAFETY: the header's 64 bytes lie inside the mapping, before the block.
    unsafe {
        header.write(Header {
            base,
            len,
            owner,
            prev: ptr::null_mut(),
            next: ptr::null_mut(),
            seal: seal_of(ptr, base, len),
        });
        link(header);
    }
    Counters::get()
        .large_in_use
        .fetch_add(len, Ordering::Relaxed);
    ptr
}

/// The mapping length for a block of `size` bytes starting `off` bytes in: rounded up to whole
/// kernel pages ([`os::granule`]: every run the cache splits off stays whole pages); `None` if
/// that overflows `isize`.
fn mapping_len(off: usize, size: usize) -> Option<usize> {
    // A power of two: a mask, not a division by a value unknown at compile time.
    let mask = os::granule() - 1;
    let len = off.checked_add(size)?.checked_add(mask)? & !mask;
    (len <= isize::MAX as usize).then_some(len)
}

/// Frees the large block at `ptr`.
///
/// # Safety
/// `ptr` is a live large block of this allocator.
pub(crate) unsafe fn free(ptr: *mut u8) {
    let header = header_of(ptr);
    // SAFETY: a live large block has its header before it.
    let (base, len, aligned) = unsafe {
        unlink(header);
        // No longer live: a second free of it is refused by `plausible`.
        (*header).seal = 0;
        (
            (*header).base,
            (*header).len,
            ptr.addr() - (*header).base.addr() <= OS_PAGE,
        )
    };
    Counters::get()
        .large_in_use
        .fetch_sub(len, Ordering::Relaxed);
    if aligned {
        // SAFETY: the header says the block was allocated for `owner`.
        let global = unsafe { (*header).owner.is_null() };
        if !(global && stash_put(base, len)) {
            cache_put(base, len);
        }
    } else {
        Counters::get().mapped.fetch_sub(len, Ordering::Relaxed);
        os::unmap(base, len);
    }
}

/// Resizes the large block at `ptr` to `new_size` (still large): in place if its mapping has
/// room (giving back a tail of a megabyte or more when it shrinks) or a cached run follows it;
/// else by a copy into a cached run, by `mremap`, or, for a mapping that cannot be remapped
/// as one, by a copy into a new mapping; a moved block keeps its offset in its first page.
/// Null if it cannot (an over-aligned block that would have to move, or no memory; the caller
/// then allocates, copies and frees).
///
/// # Safety
/// `ptr` is a live large block of this allocator, and `new_size` is a large size.
pub(crate) unsafe fn realloc(ptr: *mut u8, new_size: usize) -> *mut u8 {
    let header = header_of(ptr);
    // SAFETY: a live large block has its header before it.
    let (base, len) = unsafe { ((*header).base, (*header).len) };
    let off = ptr.addr() - base.addr();
    let Some(need) = mapping_len(off, new_size) else {
        return ptr::null_mut();
    };
    let counters = Counters::get();
    if need <= len {
        if len - need >= MIN_SPLIT {
            // The tail past `need` holds nothing the block still uses: give it to the cache.
            // SAFETY: the header is ours.
            unsafe {
                (*header).len = need;
                reseal(ptr);
            }
            counters
                .large_in_use
                .fetch_sub(len - need, Ordering::Relaxed);
            cache_put(base.wrapping_add(need), len - need);
        }
        return ptr;
    }
    if off > OS_PAGE {
        // An over-aligned block: moving it would not keep the alignment.
        return ptr::null_mut();
    }
    // A cached run right after the mapping: grow in place, no system call.
    let taken = runs().take_at(base.wrapping_add(len), need - len, my_tag());
    if let Some(extra) = taken {
        // SAFETY: the header is ours.
        unsafe {
            (*header).len = len + extra;
            reseal(ptr);
        }
        counters.large_in_use.fetch_add(extra, Ordering::Relaxed);
        return ptr;
    }
    // A cached run that holds the grown block: copy into it (its pages are warm, so neither
    // the copy nor the growth faults), and cache the old mapping. The longest such run of
    // this thread (or of nobody): a block that grew will likely grow again, into the rest of
    // the run, in place; the shortest would make it move again at its next growth.
    let tag = my_tag();
    let moved = runs().take_fit(need, tag, true);
    if let Some((new_base, new_len)) = moved {
        // SAFETY: the run is mapped and not in use, `new_len >= need > len`, and the header
        // is the live block's.
        return unsafe { move_block(ptr, header, off, new_base, new_len) };
    }
    // SAFETY: the block's list neighbours point at its header, which is about to move.
    unsafe { unlink(header) };
    let Some(moved) = os::remap(base, len, need) else {
        // A mapping pieced together from cached runs of separate mappings cannot be remapped
        // as one: copy the block into a new mapping, at the same offset, so that it keeps
        // its line (see `place`).
        // SAFETY: the header has not moved.
        unsafe { link(header) };
        let Some(new_base) = os::map(need) else {
            return ptr::null_mut();
        };
        counters.mapped.fetch_add(need, Ordering::Relaxed);
        // SAFETY: a new mapping of `need > len` bytes, and the header is the live block's.
        return unsafe { move_block(ptr, header, off, new_base.as_ptr(), need) };
    };
    counters.mapped.fetch_add(need - len, Ordering::Relaxed);
    counters
        .large_in_use
        .fetch_add(need - len, Ordering::Relaxed);
    // SAFETY: the mapping moved whole: the block and its header are at the same offsets.
    unsafe {
        let ptr = moved.as_ptr().add(off);
        let header = header_of(ptr);
        (*header).base = moved.as_ptr();
        (*header).len = need;
        reseal(ptr);
        link(header);
        ptr
    }
}

/// Copies the large block at `ptr` (header `header`, `off` bytes into its mapping) to the same
/// offset of the mapping `new_base .. new_base + new_len`, moves its header there, and caches
/// the old mapping; returns the block's new address.
///
/// # Safety
/// `header` is the header of the live large block at `ptr`; the new mapping is mapped, not in
/// use, and at least as long as the old one.
unsafe fn move_block(
    ptr: *mut u8,
    header: *mut Header,
    off: usize,
    new_base: *mut u8,
    new_len: usize,
) -> *mut u8 {
    // SAFETY: a live block's header.
    let (base, len) = unsafe { ((*header).base, (*header).len) };
    let counters = Counters::get();
    // SAFETY: the new mapping holds the old mapping's bytes from `off` (`new_len >= len`), and
    // the two do not overlap (the new one was not in use); the header is ours.
    unsafe {
        let new_ptr = new_base.add(off);
        ptr::copy_nonoverlapping(ptr, new_ptr, len - off);
        let new_header = header_of(new_ptr);
        unlink(header);
        new_header.write(Header {
            base: new_base,
            len: new_len,
            owner: (*header).owner,
            prev: ptr::null_mut(),
            next: ptr::null_mut(),
            seal: seal_of(new_ptr, new_base, new_len),
        });
        // The old place is freed: a stale pointer to it is refused.
        (*header).seal = 0;
        link(new_header);
        counters.large_in_use.fetch_add(new_len, Ordering::Relaxed);
        counters.large_in_use.fetch_sub(len, Ordering::Relaxed);
        cache_put(base, len);
        new_ptr
    }
}

/// Frees every large block of an owned heap.
///
/// # Safety
/// The caller holds `owner`, and none of its large blocks is used again.
pub(crate) unsafe fn free_all(owner: &HeapCore) {
    loop {
        let header = owner.large.get();
        if header.is_null() {
            break;
        }
        // SAFETY: a live block of the owner: its pointer is `HEADER` bytes after its header.
        unsafe { free(header.cast::<u8>().add(HEADER)) };
    }
}

/// Adds a block to its owner's list (owned heaps only).
///
/// # Safety
/// `header` is a valid header; the caller holds its owner.
unsafe fn link(header: *mut Header) {
    // SAFETY: as promised.
    unsafe {
        let owner = (*header).owner;
        if owner.is_null() {
            return;
        }
        let head = (*owner).large.get();
        (*header).prev = ptr::null_mut();
        (*header).next = head;
        if !head.is_null() {
            (*head).prev = header;
        }
        (*owner).large.set(header);
    }
}

/// Takes a block out of its owner's list (owned heaps only).
///
/// # Safety
/// As [`link`], and the block is in the list.
unsafe fn unlink(header: *mut Header) {
    // SAFETY: as promised.
    unsafe {
        let owner = (*header).owner;
        if owner.is_null() {
            return;
        }
        let (prev, next) = ((*header).prev, (*header).next);
        if !next.is_null() {
            (*next).prev = prev;
        }
        if prev.is_null() {
            (*owner).large.set(next);
        } else {
            (*prev).next = next;
        }
    }
}

/// How many bytes the large block at `ptr` can hold: up to the end of its mapping.
///
/// # Safety
/// `ptr` is a live large block.
pub(crate) unsafe fn usable_size(ptr: *mut u8) -> usize {
    // SAFETY: a live large block has its header before it.
    let header = unsafe { &*header_of(ptr) };
    header.base.addr() + header.len - ptr.addr()
}

/// Whether `ptr`, which lies outside every segment, looks like a live large block of ours —
/// for the C `free`, which must not corrupt anything when handed a foreign pointer. Reads the
/// 64 bytes before `ptr` only when they lie in the same OS page as `ptr` (so in memory that
/// is mapped whenever `ptr` is), and checks that they describe a mapping that holds `ptr`
/// and carry the seal of a live block at `ptr` (see the module documentation): a foreign
/// pointer passes only if the words before it match the seal by accident (one chance in
/// 2^64 for arbitrary bytes), and a freed block fails while its mapping is still there to
/// read. A page-aligned `ptr` (a block aligned to 4 KiB or more) cannot be checked without
/// reading the OS page before it, which may not be mapped, and is taken as ours (see
/// [`sealed`] for a caller that is about to read the header anyway).
pub(crate) fn plausible(ptr: *mut u8) -> bool {
    if ptr.addr() % HEADER != 0 {
        return false;
    }
    if ptr.addr() % OS_PAGE == 0 {
        return true;
    }
    // SAFETY: the header's bytes lie in the page of `ptr`, mapped if `ptr` is.
    unsafe { sealed(ptr) }
}

/// Whether the 64 bytes before `ptr` (64-aligned) describe a mapping that holds `ptr` and
/// carry the seal of a live block at `ptr`. Read as plain words: a foreign block's bytes are
/// arbitrary but initialized memory of the process.
///
/// # Safety
/// The 64 bytes before `ptr` are readable.
pub(crate) unsafe fn sealed(ptr: *mut u8) -> bool {
    // SAFETY: readable, by the caller's contract.
    let (base, len, seal) = unsafe {
        let header = header_of(ptr);
        (
            (&raw const (*header).base).read_volatile(),
            (&raw const (*header).len).read_volatile(),
            (&raw const (*header).seal).read_volatile(),
        )
    };
    seal == seal_of(ptr, base, len)
        && base.addr() % OS_PAGE == 0
        && base.addr() < ptr.addr()
        && len >= OS_PAGE
        && len <= isize::MAX as usize
        && base
            .addr()
            .checked_add(len)
            .is_some_and(|end| end > ptr.addr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use allocator_api2::alloc::Allocator;
    use core::alloc::Layout;

    // On this kernel `mmap` gives 4 KiB-aligned bases, so only lengths can be checked: every
    // run starts at a mapping's base plus whole lengths before it, so whole lengths mean
    // whole pages on a kernel whose `mmap` gives bases aligned to its pages.

    /// Whether every run the cache and this thread's stash hold is whole granules long.
    fn runs_whole(granule: usize) -> bool {
        let cached = {
            let runs = runs();
            runs.runs
                .iter()
                .filter(|r| !r.base.is_null())
                .all(|r| r.len % granule == 0)
        };
        let stashed = STASH.with(|slots| {
            slots
                .iter()
                .map(core::cell::Cell::get)
                .all(|r| r.base.is_null() || r.len % granule == 0)
        });
        cached && stashed
    }

    /// Whether the mapping of the live large block at `ptr` is whole granules long.
    fn mapping_whole(ptr: NonNull<u8>, granule: usize) -> bool {
        // SAFETY: a live large block has its header before it.
        let header = unsafe { &*header_of(ptr.as_ptr()) };
        header.len % granule == 0
    }

    use core::ptr::NonNull;

    #[test]
    fn on_a_kernel_with_64_kib_pages_every_mapping_and_every_split_is_whole_pages() {
        const G: usize = 64 << 10;
        crate::os::set_granule_for_tests(G);
        let a = crate::PitlaneAlloc::new();
        let heap = crate::Heap::new();
        let mut live: Vec<(NonNull<u8>, Layout, bool)> = Vec::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for step in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let size = 16_385 + (x as usize >> 8) % (3 << 20);
            let align = 1usize << ((x >> 40) % 14);
            let layout = Layout::from_size_align(size, align).unwrap();
            let owned = x % 5 == 0;
            match x % 3 {
                0 if !live.is_empty() => {
                    let (p, l, owned) = live.swap_remove((x as usize >> 20) % live.len());
                    // SAFETY: a live block of its allocator, with its layout.
                    unsafe {
                        if owned {
                            (&heap).deallocate(p, l);
                        } else {
                            a.deallocate(p, l);
                        }
                    }
                }
                1 if !live.is_empty() => {
                    let i = (x as usize >> 20) % live.len();
                    let (p, l, owned) = live[i];
                    let new = Layout::from_size_align(size, l.align()).unwrap();
                    // SAFETY: as above; the block is replaced by the result.
                    let q = unsafe {
                        match (owned, size >= l.size()) {
                            (false, true) => a.grow(p, l, new),
                            (false, false) => a.shrink(p, l, new),
                            (true, true) => (&heap).grow(p, l, new),
                            (true, false) => (&heap).shrink(p, l, new),
                        }
                    }
                    .unwrap()
                    .cast::<u8>();
                    live[i] = (q, new, owned);
                }
                _ => {
                    let p = if owned {
                        (&heap).allocate(layout)
                    } else {
                        a.allocate(layout)
                    };
                    live.push((p.unwrap().cast(), layout, owned));
                }
            }
            for &(p, _, _) in &live {
                assert!(
                    mapping_whole(p, G),
                    "step {step}: a live mapping is not whole pages"
                );
            }
            assert!(
                runs_whole(G),
                "step {step}: a cached run is not whole pages"
            );
        }
        for (p, l, owned) in live {
            // SAFETY: as above.
            unsafe {
                if owned {
                    (&heap).deallocate(p, l);
                } else {
                    a.deallocate(p, l);
                }
            }
        }
    }
}
