//! Heaps: who owns which pages, the fast paths, and the life of a thread's heap.
//!
//! A [`HeapCore`] owns pages. For each size class it keeps a list of pages that may have free
//! blocks (the head is the *current* page, the one the fast path allocates from) and, for all
//! classes together, a list of pages it found full. Heaps live in a registry in memory mapped
//! for them and are never freed; a heap is *held* by one thread at a time (the `held` flag),
//! and only the holder touches its lists and its pages' owner-only fields.
//!
//! # Fast paths
//!
//! Allocation: the thread-local heap pointer → `pages[class]` → pop the page's `free` list.
//! A thread that never allocated points at the static empty heap, whose pages are all the
//! static empty page with an empty `free` list, so the first allocation falls into the slow
//! path, which gives the thread a heap: no initialisation check on the fast path.
//!
//! Free: the page is found by masking the address (see `segment`); if its owner is the
//! calling thread's heap, the block is pushed on the page's `free` list. Otherwise it goes to
//! the page's atomic `remote` list, whatever thread the owner is on, or whether that thread
//! still exists: held back first in the freeing thread's batch for that page, and pushed
//! with the rest of the batch in one CAS (Release) (see [`free_remote`]).
//!
//! # Full pages and the way back
//!
//! When a page has no free block, no remote frees to collect and no untouched space, its
//! owner sets the `FULL` bit in `remote` (CAS from null) and moves it to its full list. The
//! first remote free that finds `FULL` clears it in the same CAS that pushes the block, and
//! then pushes the page on its owner's `delayed` list (a Treiber stack that the owner takes
//! whole with one swap, so no ABA). The owner drains `delayed` at the start of its slow path
//! and puts those pages back in their class lists. A free by the owner itself into a full
//! page clears `FULL` with a CAS and puts it back directly; if a remote free cleared it first,
//! the page arrives through `delayed` instead. So a page is in `delayed` at most once, and
//! never while it is in a class list.
//!
//! # Threads
//!
//! A thread gets a heap on its first allocation: a *parked* heap if there is one (its pages,
//! blocks and all, come with it), else a new one. A `pthread` key destructor runs at thread
//! exit (std's `thread_local!` destructors may not allocate through us, so none is used): it
//! publishes its held-back remote frees, gives the pages no block uses any more (remote frees
//! counted) to the pool and parks the heap (the remote lists of pages still in use wait for
//! the heap's next holder, see `tidy`). A thread whose key value cannot be set
//! (`pthread_setspecific` refused: glibc's allocation of its key table failed) would not run
//! that destructor: it takes no heap then (the orphan heap serves that allocation, and its
//! remote frees are published at once) and tries again at its next allocation. Blocks of a
//! parked heap can still be freed from anywhere (remote frees), and the periodic sweep (see
//! `pool`) visits parked heaps to release the pages that became empty. Allocations made
//! later in a thread's exit (by other destructors) and while the allocator initialises (on
//! any thread: one that finds another thread initialising does not wait for it) go to a
//! shared *orphan* heap under a spin lock, whose blocks are all freed remotely and whose
//! emptied pages the sweep releases too; frees made then (by the destructors of `pthread`
//! keys created after ours, which run after it) are published at once, and freed large
//! mappings go straight to the shared cache, since no flush is left to come.
//! (`tests/late_thread_exit.rs`)
//!
//! # fork
//!
//! `pthread_atfork` handlers take every lock of the allocator before `fork` and release them
//! after it in both processes. Lock-free operations of other threads cut short by the fork
//! leave the child's structures consistent (each takes effect at one CAS) and at most lose a
//! page to a pop whose thread is not there. The heaps of the parent's other threads stay held
//! in the child (one may have been mid-update), so their pages are not reused there. A sweep
//! another thread was making is abandoned (its flag cleared, see `pool`), so the child
//! sweeps too (`tests/fork_sweep.rs`). Not handled: a `fork` while another thread is in
//! the allocator's one-time initialisation leaves the child on the orphan heap for good
//! (correct, but every allocation takes its lock).
//!
//! glibc runs prepare handlers in the reverse order of their registration, and parent and
//! child handlers in that order, so handlers registered before ours run with a working
//! allocator (as glibc's own malloc, which locks after every prepare handler and unlocks
//! before every parent and child handler, lets them) and those registered after ours run with
//! its locks held: a `malloc` there that needs one spins forever. The first allocation
//! registers ours; a C `malloc` registers them earlier, when it is loaded
//! ([`raw::install_fork_handlers`](crate::raw::install_fork_handlers)).

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};

use crate::class::{CLASSES, size_of_class};
use crate::lock::SpinLock;
use crate::os;
use crate::pool;
use crate::segment::{Block, ListState, PAGE_SIZE, Page};

/// The `FULL` flag in a page's `remote` word.
const FULL: usize = 1;

/// What a heap is for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// The static empty heap of threads that have none yet.
    Empty,
    /// A thread's heap (held by a live thread, or parked).
    Thread,
    /// An owned [`Heap`](crate::Heap)'s.
    Owned,
    /// The shared heap of exiting threads and of the initialisation.
    Orphan,
}

/// A heap: see the [module documentation](self).
#[repr(C)]
pub(crate) struct HeapCore {
    /// The current page of each class (the head of its list), or the static empty page.
    pub(crate) pages: [Cell<*mut Page>; CLASSES],
    /// The full pages (linked through `next`/`prev`).
    full: Cell<*mut Page>,
    /// Large blocks of an owned heap (see `large`).
    pub(crate) large: Cell<*mut crate::large::Header>,
    /// Pages that came back from full through remote frees (see above).
    delayed: AtomicPtr<Page>,
    /// Whether a thread (or an owned `Heap`) holds the heap.
    held: AtomicBool,
    kind: Kind,
    /// The next heap of the registry.
    registry_next: AtomicPtr<HeapCore>,
}

// SAFETY: the `Cell` fields are touched only by the holder of the heap (`held`), one thread
// at a time; the rest are atomics.
unsafe impl Sync for HeapCore {}

/// The page of every class of a heap that has none: no free blocks, no owner.
pub(crate) static EMPTY_PAGE: Page = Page::empty();

const fn empty_pages() -> [Cell<*mut Page>; CLASSES] {
    [const { Cell::new((&raw const EMPTY_PAGE).cast_mut()) }; CLASSES]
}

impl HeapCore {
    const fn new(kind: Kind) -> Self {
        Self {
            pages: empty_pages(),
            full: Cell::new(ptr::null_mut()),
            large: Cell::new(ptr::null_mut()),
            delayed: AtomicPtr::new(ptr::null_mut()),
            held: AtomicBool::new(false),
            kind,
            registry_next: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

/// The heap of threads that have none.
pub(crate) static EMPTY_HEAP: HeapCore = HeapCore::new(Kind::Empty);
/// The heap of exiting threads and of the initialisation, under [`ORPHAN_LOCK`].
static ORPHAN_HEAP: HeapCore = HeapCore::new(Kind::Orphan);
static ORPHAN_LOCK: SpinLock = SpinLock::new();

#[inline(always)]
fn empty_page() -> *mut Page {
    (&raw const EMPTY_PAGE).cast_mut()
}

#[inline(always)]
fn empty_heap() -> *mut HeapCore {
    (&raw const EMPTY_HEAP).cast_mut()
}

thread_local! {
    /// Set once the thread's key destructor ran: later allocations use the orphan heap.
    static EXITING: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's heap (the empty heap if it has none).
#[inline(always)]
pub(crate) fn thread_heap() -> *mut HeapCore {
    heap_slot::get()
}

/// Where the calling thread's heap pointer lives: a thread-local word read on every
/// allocation and free.
///
/// On x86-64 Linux it is a word of the static TLS block, reached with the initial-exec model
/// (one load of its offset from the GOT, one load through `fs`), written in assembly because
/// stable Rust cannot choose a TLS model: a `thread_local!` in a shared library
/// (`libpitlane_malloc.so`) uses the general-dynamic model, a call to `__tls_get_addr` per
/// access. The word's initial value is the empty heap's address. A library with
/// initial-exec TLS must be loaded at program start (preloaded or linked) or find room in
/// the static TLS surplus when `dlopen`ed, which glibc keeps for such libraries; 8 bytes.
/// Elsewhere, a `thread_local!` without destructor.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(pitlane_loom)))]
mod heap_slot {
    use super::{EMPTY_HEAP, HeapCore};

    core::arch::global_asm!(
        ".pushsection .tdata.pitlane_alloc_heap_slot, \"awT\", @progbits",
        ".p2align 3",
        ".globl pitlane_alloc_heap_slot_v0",
        ".hidden pitlane_alloc_heap_slot_v0",
        ".type pitlane_alloc_heap_slot_v0, @object",
        ".size pitlane_alloc_heap_slot_v0, 8",
        "pitlane_alloc_heap_slot_v0:",
        ".quad {empty}",
        ".popsection",
        empty = sym EMPTY_HEAP,
    );

    #[inline(always)]
    pub(crate) fn get() -> *mut HeapCore {
        let heap: *mut HeapCore;
        // SAFETY: reads this thread's word of the static TLS block, at the offset the
        // dynamic linker put in the GOT; touches no other memory.
        unsafe {
            core::arch::asm!(
                "mov {heap}, qword ptr [rip + pitlane_alloc_heap_slot_v0@gottpoff]",
                "mov {heap}, qword ptr fs:[{heap}]",
                heap = out(reg) heap,
                options(nostack, readonly, preserves_flags),
            );
        }
        heap
    }

    #[inline]
    pub(crate) fn set(heap: *mut HeapCore) {
        // SAFETY: writes this thread's word of the static TLS block, as `get` reads it.
        unsafe {
            core::arch::asm!(
                "mov {offset}, qword ptr [rip + pitlane_alloc_heap_slot_v0@gottpoff]",
                "mov qword ptr fs:[{offset}], {heap}",
                offset = out(reg) _,
                heap = in(reg) heap,
                options(nostack, preserves_flags),
            );
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux", not(pitlane_loom))))]
use heap_slot_tls as heap_slot;

/// The `thread_local!` heap slot of targets other than x86-64 Linux (see `heap_slot`);
/// compiled in the tests of every target too, so that a change that breaks it shows where
/// only x86-64 is built (it once called itself, by a path that did not resolve: the crate
/// did not build on aarch64).
#[cfg(any(
    test,
    not(all(target_arch = "x86_64", target_os = "linux", not(pitlane_loom)))
))]
mod heap_slot_tls {
    use super::{Cell, EMPTY_HEAP, HeapCore};

    thread_local! {
        /// The calling thread's heap, or the empty heap. No destructor: thread exit goes
        /// through the pthread key.
        static HEAP: Cell<*mut HeapCore> =
            const { Cell::new((&raw const EMPTY_HEAP).cast_mut()) };
    }

    #[inline(always)]
    pub(crate) fn get() -> *mut HeapCore {
        HEAP.with(Cell::get)
    }

    #[inline]
    pub(crate) fn set(heap: *mut HeapCore) {
        HEAP.with(|slot| slot.set(heap));
    }
}

// ---------------------------------------------------------------------------------------
// Fast paths
// ---------------------------------------------------------------------------------------

/// Allocates a block of `class` from `heap`; null if memory is exhausted.
///
/// # Safety
/// The calling thread holds `heap`, or `heap` is the empty heap.
#[inline(always)]
pub(crate) unsafe fn alloc_small(heap: *mut HeapCore, class: usize) -> *mut u8 {
    // SAFETY: the caller's contract.
    let block = unsafe { alloc_fast(heap, class) };
    if block.is_null() {
        // SAFETY: the caller's contract.
        return unsafe { alloc_slow(heap, class) };
    }
    block
}

/// The fast path of [`alloc_small`] alone: a block of `class` from `heap`'s current page,
/// or null when that page has none free (the empty heap's pages never have one).
///
/// # Safety
/// As [`alloc_small`].
#[inline(always)]
pub(crate) unsafe fn alloc_fast(heap: *mut HeapCore, class: usize) -> *mut u8 {
    // SAFETY: `heap` is held by this thread (or is the empty heap, whose pages are the empty
    // page, only read here); the page's owner-only fields are this thread's.
    unsafe {
        let page = (*heap).pages[class].get();
        let block = (*page).free.get();
        if block.is_null() {
            return ptr::null_mut();
        }
        let next = (*block).next;
        (*page).free.set(next);
        prefetch(next);
        let used = (*page).used.load(Ordering::Relaxed);
        (*page).used.store(used + 1, Ordering::Relaxed);
        block.cast()
    }
}

/// Asks the CPU to bring the line of the new head of a free list into its cache: the next
/// allocation of the class reads its link from there, and by then (other work and other
/// classes' allocations in between) the line has arrived. A free block last touched long
/// ago (its `next` written when it was freed) is otherwise a load miss on the allocation's
/// critical path. A hint only: it reads nothing, cannot fault (null included), and is not
/// an access to the memory model or the sanitizers.
#[inline(always)]
fn prefetch(block: *mut Block) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is part of SSE, which every x86-64 CPU has; it does not access
    // memory and does not fault, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            block.cast::<i8>().cast_const(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = block;
}

/// Frees the small block at `ptr`, from the heap `heap` held by the calling thread (or the
/// empty heap).
///
/// # Safety
/// `ptr` is a live small block of this allocator; the calling thread holds `heap` or it is
/// the empty heap.
#[inline(always)]
pub(crate) unsafe fn free_small(heap: *mut HeapCore, ptr: *mut u8) {
    // SAFETY: forwarded.
    unsafe { free_small_in::<false>(heap, ptr) };
}

/// [`free_small`] for a caller that may be handed a block freed twice (the C `free`): a
/// block at the head of its page's free list in `heap` (freed by this thread and not handed
/// out since: a double free in a row), or of a page in the pool (whose first free emptied
/// it), is refused, and `false` returned with nothing done. Other double frees are not
/// caught.
///
/// # Safety
/// As [`free_small`], but for a block that may have just been freed by the calling thread.
#[inline(always)]
pub(crate) unsafe fn free_small_checked(heap: *mut HeapCore, ptr: *mut u8) -> bool {
    // SAFETY: forwarded.
    unsafe { free_small_in::<true>(heap, ptr) }
}

/// The body of [`free_small`] and, with `CHECK`, of [`free_small_checked`].
///
/// # Safety
/// As [`free_small_checked`].
#[inline(always)]
unsafe fn free_small_in<const CHECK: bool>(heap: *mut HeapCore, ptr: *mut u8) -> bool {
    // SAFETY: `ptr` is a small block, so its page descriptor is where `page_of` says.
    unsafe {
        let page = crate::segment::page_of(ptr);
        let owner = (*page).owner.load(Ordering::Relaxed);
        if owner == heap {
            let block = ptr.cast::<Block>();
            let head = (*page).free.get();
            if CHECK && ptr::eq(head, block) {
                return false;
            }
            (*block).next = head;
            (*page).free.set(block);
            let used = (*page).used.load(Ordering::Relaxed) - 1;
            (*page).used.store(used, Ordering::Relaxed);
            if (used == 0 || (*page).list.get() == ListState::Full) && !keeps_empty(heap, page) {
                free_local_slow(heap, page);
            }
        } else {
            if CHECK && owner.is_null() {
                // The page is in the pool: no block of it is live.
                return false;
            }
            return free_remote::<CHECK>(page, ptr);
        }
        true
    }
}

/// Whether a local free that left `page` empty needs nothing more: see [`kept_when_empty`].
#[inline(always)]
unsafe fn keeps_empty(heap: *mut HeapCore, page: *mut Page) -> bool {
    // SAFETY: the caller holds `heap`, which owns `page`.
    unsafe { (*page).used.load(Ordering::Relaxed) == 0 && kept_when_empty(heap, page) }
}

/// Whether `page` stays where it is when a local free empties it: it is the current page of
/// its class (kept, so that one block allocated and freed in a loop does not move the page
/// in and out of the pool), in its class list, and the heap is not the orphan heap.
///
/// # Safety
/// The calling thread holds `heap`, which owns `page`.
#[inline(always)]
unsafe fn kept_when_empty(heap: *mut HeapCore, page: *mut Page) -> bool {
    // SAFETY: the caller holds `heap`, which owns `page`.
    unsafe {
        (*page).list.get() == ListState::Partial
            && (*heap)
                .pages
                .get((*page).class.load(Ordering::Relaxed) as usize)
                .is_some_and(|current| ptr::eq(current.get(), page))
            && (*heap).kind != Kind::Orphan
    }
}

/// The fast path of [`free_small`] alone: frees `ptr` when `heap` owns its page and the free
/// needs nothing more (the page was not full and stays where it is), and says whether it
/// did; on `false` nothing was done, and [`free_small`] does all of it. A block at the head
/// of its page's free list (freed twice in a row, by the C program that this serves) is
/// left to the slow path too, where [`free_small_checked`] refuses it: one compare of
/// values this path loads anyway.
///
/// A page in the full list is told by its empty free list, not by its list state: it went
/// there with no free block (`alloc_slow`), and a local free into it while its `FULL` flag
/// is set takes the slow path (the list is empty) and moves it back to its class list
/// ([`free_local_slow`]). Once a remote free has cleared the flag (the page waits in
/// `delayed`), a local free needs only the push, which is what [`free_small`] does then too.
/// An empty free list of a page outside the full list (the current page just exhausted)
/// sends the free to the slow path, which does the same push. So the null test and the
/// double-free test are the two tests of the head this path loads anyway, and the list state
/// is not read unless the free empties the page.
///
/// # Safety
/// As [`free_small`].
#[inline(always)]
pub(crate) unsafe fn free_fast(heap: *mut HeapCore, ptr: *mut u8) -> bool {
    // SAFETY: `ptr` is a small block, so its page descriptor is where `page_of` says; when
    // `heap` owns the page, its owner-only fields are this thread's.
    unsafe {
        let page = crate::segment::page_of(ptr);
        if (*page).owner.load(Ordering::Relaxed) != heap {
            return false;
        }
        let used = (*page).used.load(Ordering::Relaxed);
        let block = ptr.cast::<Block>();
        let head = (*page).free.get();
        if head.is_null() || ptr::eq(head, block) || (used == 1 && !kept_when_empty(heap, page)) {
            return false;
        }
        (*block).next = head;
        (*page).free.set(block);
        (*page).used.store(used - 1, Ordering::Relaxed);
        true
    }
}

/// Remote frees held back by a thread to publish together: blocks of one page, chained.
#[derive(Clone, Copy)]
struct Batch {
    page: *mut Page,
    head: *mut Block,
    tail: *mut Block,
    count: u32,
}

const NO_BATCH: Batch = Batch {
    page: ptr::null_mut(),
    head: ptr::null_mut(),
    tail: ptr::null_mut(),
    count: 0,
};

/// The most remote frees a thread holds back for one page before it publishes them.
const BATCH_MAX: u32 = 64;

/// How many pages a thread holds back remote frees for at once: one slot per page, picked
/// by the page's place in its segment header, so that the pages of the classes a producer
/// allocates from (taken one after another, so numbered one after another) get a slot each.
const BATCH_SLOTS: usize = 16;

thread_local! {
    /// This thread's held-back remote frees (see [`free_remote`]), by slot.
    static BATCHES: [Cell<Batch>; BATCH_SLOTS] = const { [const { Cell::new(NO_BATCH) }; BATCH_SLOTS] };
    /// Whether this thread's key destructor is armed (it flushes the batches at exit).
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// The batch slot of the page that holds `block`: its page number in the segment, modulo
/// [`BATCH_SLOTS`] (neighbouring pages take different slots).
#[inline(always)]
fn batch_slot(block: *mut u8) -> usize {
    (block.addr() / crate::PAGE_SIZE) % BATCH_SLOTS
}

/// A free into a page owned by another heap.
///
/// Remote frees into one page are chained privately, in the page's batch slot, and published
/// together with one CAS: when the thread frees into another page that takes the same slot,
/// after [`BATCH_MAX`] of them, at [`collect`](crate::collect), or when the thread exits (its
/// key destructor): the producer/consumer batching the issue asks for. A consumer of a
/// producer's blocks frees them in the order they were carved, and the producer allocates
/// each class from one page at a time, so every slot's run is long even when the sizes (and
/// so the pages) alternate from one free to the next; scattered frees publish more often.
///
/// With `CHECK` (the C `free`, see [`free_small_checked`]), a block that is already the
/// head of the thread's batch for its page (freed twice in a row by this thread) is
/// refused and `false` returned: linked to itself, it would count as two free blocks of a
/// page that has one, and the page would go back to the pool while a block of it is live.
///
/// # Safety
/// `ptr` is a live small block of `page` (with `CHECK`, or the head of this thread's batch).
#[inline(never)]
unsafe fn free_remote<const CHECK: bool>(page: *mut Page, ptr: *mut u8) -> bool {
    let block = ptr.cast::<Block>();
    let slot = batch_slot(ptr);
    BATCHES.with(|slots| {
        let cell = &slots[slot];
        let batch = cell.get();
        if CHECK && ptr::eq(batch.page, page) && ptr::eq(batch.head, block) {
            return false;
        }
        if ptr::eq(batch.page, page) && batch.count < BATCH_MAX {
            // SAFETY: the block is ours to write; only this thread sees the chain.
            unsafe { (*block).next = batch.head };
            cell.set(Batch {
                head: block,
                count: batch.count + 1,
                ..batch
            });
            return true;
        }
        if !batch.page.is_null() {
            // SAFETY: a held-back chain of live blocks of `batch.page`.
            unsafe { publish_remote(batch.page, batch.head, batch.tail, batch.count) };
        }
        if !arm_exit_flush() {
            cell.set(NO_BATCH);
            // SAFETY: as promised by the caller.
            unsafe { publish_remote(page, block, block, 1) };
            return true;
        }
        // SAFETY: the block is ours to write.
        unsafe { (*block).next = ptr::null_mut() };
        cell.set(Batch {
            page,
            head: block,
            tail: block,
            count: 1,
        });
        true
    })
}

/// Makes sure this thread's key destructor will run (it flushes the batch); `false` if it
/// cannot (the thread is exiting, or the allocator is not initialised).
#[inline]
pub(crate) fn arm_exit_flush() -> bool {
    if ARMED.with(Cell::get) {
        return true;
    }
    arm_exit_flush_slow()
}

#[cold]
fn arm_exit_flush_slow() -> bool {
    if EXITING.with(Cell::get) || INIT.load(Ordering::Acquire) != 2 {
        return false;
    }
    // Without the key nothing runs at thread exit: publish and cache at once instead.
    let Some(key) = key() else {
        return false;
    };
    // A thread without a heap arms the destructor with the empty heap, which it skips.
    // Refused (see `set_key_value`), the destructor would not run: the caller publishes or
    // caches at once, and the next call tries again.
    let mut heap = thread_heap();
    loop {
        if !set_key_value(key, heap) {
            return false;
        }
        // The allocation inside `pthread_setspecific` is ours under the C shim: on a thread
        // without a heap it took one and set the key's value to it, which our call then
        // overwrote with the empty heap, and the destructor would not park that heap. Name
        // it again (the key table is in place now, so this call allocates nothing).
        let now = thread_heap();
        if ptr::eq(now, heap) {
            break;
        }
        heap = now;
    }
    ARMED.with(|a| a.set(true));
    true
}

/// Sets the calling thread's value of our key (`pthread_setspecific`), which makes our
/// destructor run at the thread's exit; `false` if it was refused. glibc refuses for want of
/// memory only: a key numbered 32 or more needs a second level of the thread's key table,
/// which the first `pthread_setspecific` of such a key in each thread allocates (`calloc`,
/// through us under the C shim), and a refused call leaves the thread's value as it was.
/// Under `cfg(test)` a thread can have it refused (`tests::REFUSE_KEY_VALUE`), or have a
/// function allocate first once, as glibc's `calloc` there does (`tests::ALLOC_IN_KEY_VALUE`).
fn set_key_value(key: libc::pthread_key_t, heap: *mut HeapCore) -> bool {
    #[cfg(test)]
    {
        if let Some(allocate) = tests::ALLOC_IN_KEY_VALUE.with(Cell::take) {
            allocate();
        }
        if tests::REFUSE_KEY_VALUE.with(Cell::get) {
            return false;
        }
    }
    // SAFETY: the key exists (initialisation made it); the value is only read by our
    // destructor.
    unsafe { libc::pthread_setspecific(key, heap.cast()) == 0 }
}

/// Publishes the calling thread's held-back remote frees.
pub(crate) fn flush_remote() {
    BATCHES.with(|slots| {
        for cell in slots {
            let batch = cell.replace(NO_BATCH);
            if !batch.page.is_null() {
                // SAFETY: a held-back chain of live blocks of `batch.page`.
                unsafe { publish_remote(batch.page, batch.head, batch.tail, batch.count) };
            }
        }
    });
}

/// Pushes the chain `head ..= tail` of `count` blocks of `page` on its `remote` list, adds
/// `count` to its `remote_count`, and then hands the page to its owner if it was full.
///
/// The count comes after the push: the owner subtracts what it finds in `remote_count` from
/// `used` when it collects, so a block is counted free only once it is on the list (or already
/// taken from it), and `used` reaching 0 means every block's publisher is done with the page
/// (but for the hand-over of a page that was full, which the owner waits for, see the module
/// documentation).
///
/// # Safety
/// The chain holds `count` live blocks of `page` that nobody else can reach, linked from
/// `head` to `tail`.
unsafe fn publish_remote(page: *mut Page, head: *mut Block, tail: *mut Block, count: u32) {
    // SAFETY: the descriptor is mapped for the life of the process; the chain is ours to
    // write until the CAS publishes it.
    unsafe {
        let remote = &(*page).remote;
        let mut old = remote.load(Ordering::Relaxed);
        loop {
            (*tail).next = old.map_addr(|a| a & !FULL);
            match remote.compare_exchange_weak(old, head, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => old = now,
            }
        }
        (*page).remote_count.fetch_add(count, Ordering::Release);
        if old.addr() & FULL != 0 {
            // We cleared FULL: the page is ours to deliver to its owner. Until the owner
            // drains it, the page cannot leave the owner (our block is still counted used).
            let owner = (*page).owner.load(Ordering::Acquire);
            let delayed = &(*owner).delayed;
            let mut head = delayed.load(Ordering::Relaxed);
            loop {
                (*page).delayed_next.store(head, Ordering::Relaxed);
                match delayed.compare_exchange_weak(
                    head,
                    page,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => head = now,
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Slow paths (the holder of the heap only)
// ---------------------------------------------------------------------------------------

/// The allocation slow path: the current page of `class` is empty.
///
/// # Safety
/// As [`alloc_small`].
#[inline(never)]
unsafe fn alloc_slow(heap: *mut HeapCore, class: usize) -> *mut u8 {
    if ptr::eq(heap, empty_heap()) {
        return alloc_without_heap(class);
    }
    // SAFETY: the calling thread holds `heap`.
    let heap = unsafe { &*heap };
    drain_delayed(heap);
    loop {
        let page_ptr = heap.pages[class].get();
        if ptr::eq(page_ptr, empty_page()) {
            break;
        }
        // SAFETY: pages in a heap's lists are valid descriptors owned by it.
        let page = unsafe { &*page_ptr };
        collect(page);
        if page.free.get().is_null() && page.reserved.get() < page.capacity.get() {
            extend(page);
        }
        if !page.free.get().is_null() {
            // SAFETY: the heap is held by this thread and the page now has a free block.
            return unsafe { alloc_small(core::ptr::from_ref(heap).cast_mut(), class) };
        }
        // Full: detach it, unless remote frees arrived meanwhile.
        if page
            .remote
            .compare_exchange(
                ptr::null_mut(),
                ptr::without_provenance_mut(FULL),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            continue;
        }
        unlink(heap, page);
        push_full(heap, page);
    }
    let Some(page) = pool::acquire() else {
        return ptr::null_mut();
    };
    // SAFETY: a page from the pool is in no heap: ours alone.
    let page = unsafe { page.as_ref() };
    init_page(heap, page, class);
    extend(page);
    // SAFETY: as above, the page is the current one of `class` and has free blocks.
    unsafe { alloc_small(core::ptr::from_ref(heap).cast_mut(), class) }
}

/// A local free left a page empty, or freed into a full page.
#[cold]
unsafe fn free_local_slow(heap: *mut HeapCore, page: *mut Page) {
    // SAFETY: the calling thread holds `heap`, which owns `page`.
    let (heap, page) = unsafe { (&*heap, &*page) };
    if page.list.get() == ListState::Full {
        // Take FULL back; if a remote free took it first, the page comes back via `delayed`.
        let mut old = page.remote.load(Ordering::Relaxed);
        loop {
            if old.addr() & FULL == 0 {
                return;
            }
            match page.remote.compare_exchange_weak(
                old,
                old.map_addr(|a| a & !FULL),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => old = now,
            }
        }
        unlink(heap, page);
        push_partial(heap, page);
    }
    if page.used.load(Ordering::Relaxed) == 0 {
        retire(heap, page);
    }
}

/// An empty page in a class list: keep it if it is the current page of its class (so that a
/// loop of one alloc and one free does not move pages in and out of the pool), else give it to
/// the pool.
fn retire(heap: &HeapCore, page: &Page) {
    let class = page.class.load(Ordering::Relaxed) as usize;
    if ptr::eq(heap.pages[class].get(), page) && heap.kind != Kind::Orphan {
        return;
    }
    release(heap, page);
}

/// Unlinks an empty page and gives it to the pool.
fn release(heap: &HeapCore, page: &Page) {
    unlink(heap, page);
    page.owner.store(ptr::null_mut(), Ordering::Release);
    page.free.set(ptr::null_mut());
    page.list.set(ListState::None);
    pool::release(page);
}

/// Moves the blocks of the page's `remote` list to its `free` list, and takes the count of
/// remote frees off `used`. Only for pages in a class list (whose `FULL` bit is clear).
///
/// When `free` is empty (the allocation slow path), the list becomes the free list as it is:
/// the blocks are not walked, so the owner touches each of them only when it hands it out
/// (a walk would read every block in a row, each most likely a cache miss on a line the
/// freeing thread wrote). The count comes from `remote_count`, which publishers add to after
/// their push: it may run ahead of the list (blocks pushed after the swap, counted before
/// the count's swap), never behind what was handed out, so `used` never underflows; see
/// [`publish_remote`].
fn collect(page: &Page) {
    if page.remote.load(Ordering::Relaxed).is_null()
        && page.remote_count.load(Ordering::Relaxed) == 0
    {
        return;
    }
    let list = page.remote.swap(ptr::null_mut(), Ordering::Acquire);
    debug_assert_eq!(list.addr() & FULL, 0);
    if !list.is_null() {
        if page.free.get().is_null() {
            page.free.set(list);
        } else {
            let mut tail = list;
            // SAFETY: the blocks of the remote list are free blocks of this page, published
            // by the Release CAS of each remote free and acquired by the swap.
            unsafe {
                while !(*tail).next.is_null() {
                    tail = (*tail).next;
                }
                (*tail).next = page.free.get();
            }
            page.free.set(list);
        }
    }
    let count = page.remote_count.swap(0, Ordering::Acquire);
    let used = page.used.load(Ordering::Relaxed) - count;
    page.used.store(used, Ordering::Relaxed);
}

/// Carves the next untouched blocks of the page into its (empty) free list: those that begin
/// in the next 4 KiB of the page, so a page's memory is touched as it is used.
///
/// The carving starts at block 1 and takes block 0 last. A heap that needs few blocks of a
/// class at a time hands out the first block carved from its page again and again; at block
/// 0 those blocks would all begin at a page offset of 0, and since pages are 64 KiB-aligned
/// and the L1 data cache picks a line's set from address bits 6–11, the first lines of every
/// class's block would compete for one set (8 ways), and a `Vec` growing from 32 B to 4 KiB
/// (eight classes, one live block each) would keep eight lines in it and miss L1 about eight
/// times (the figures are in `docs/notes/alloc-bench.md`, eleventh session). From block 1 the
/// first block begins at page offset `size`: for the power-of-two classes below 4 KiB the
/// ranges `size .. 2 × size` are disjoint, and the other classes' offsets spread as well.
fn extend(page: &Page) {
    let class = page.class.load(Ordering::Relaxed) as usize;
    let size = size_of_class(class);
    let reserved = page.reserved.get() as usize;
    let capacity = page.capacity.get() as usize;
    // Blocks are carved in the order 1, 2, ..., capacity - 1, 0; `reserved` of them so far.
    // Each time, the blocks that begin in the 4 KiB of the page where block `at` begins.
    let at = (reserved + 1) % capacity;
    let offset = at * size;
    let count = ((offset / 4096 + 1) * 4096 - offset)
        .div_ceil(size)
        .clamp(1, capacity - reserved)
        .min(capacity - at);
    // SAFETY: blocks `at .. at + count` lie inside the page (`at + count <= capacity`).
    unsafe {
        let first = page.start.get().add(at * size);
        for i in 0..count {
            let block = first.add(i * size).cast::<Block>();
            let next = if i + 1 < count {
                first.add((i + 1) * size).cast::<Block>()
            } else {
                page.free.get()
            };
            (*block).next = next;
        }
        page.free.set(first.cast());
    }
    page.reserved.set((reserved + count) as u32);
}

/// Makes a page from the pool the current page of `class` in `heap`.
fn init_page(heap: &HeapCore, page: &Page, class: usize) {
    page.class.store(class as u32, Ordering::Relaxed);
    page.capacity.set((PAGE_SIZE / size_of_class(class)) as u32);
    page.reserved.set(0);
    page.free.set(ptr::null_mut());
    page.used.store(0, Ordering::Relaxed);
    page.remote.store(ptr::null_mut(), Ordering::Relaxed);
    page.remote_count.store(0, Ordering::Relaxed);
    page.owner
        .store(core::ptr::from_ref(heap).cast_mut(), Ordering::Release);
    page.next.set(ptr::null_mut());
    page.prev.set(ptr::null_mut());
    push_head(heap, page, class);
}

/// Makes `page` the head (current page) of its class list.
fn push_head(heap: &HeapCore, page: &Page, class: usize) {
    let head = heap.pages[class].get();
    let page_ptr = core::ptr::from_ref(page).cast_mut();
    page.prev.set(ptr::null_mut());
    if ptr::eq(head, empty_page()) {
        page.next.set(ptr::null_mut());
    } else {
        page.next.set(head);
        // SAFETY: the head is a page of this heap.
        unsafe { (*head).prev.set(page_ptr) };
    }
    page.list.set(ListState::Partial);
    heap.pages[class].set(page_ptr);
}

/// Puts `page` in its class list, second after the current page (or first if none).
fn push_partial(heap: &HeapCore, page: &Page) {
    let class = page.class.load(Ordering::Relaxed) as usize;
    let head = heap.pages[class].get();
    if ptr::eq(head, empty_page()) {
        push_head(heap, page, class);
        return;
    }
    let page_ptr = core::ptr::from_ref(page).cast_mut();
    // SAFETY: the head and its successor are pages of this heap.
    unsafe {
        let next = (*head).next.get();
        page.prev.set(head);
        page.next.set(next);
        if !next.is_null() {
            (*next).prev.set(page_ptr);
        }
        (*head).next.set(page_ptr);
    }
    page.list.set(ListState::Partial);
}

/// Puts `page` in the full list.
fn push_full(heap: &HeapCore, page: &Page) {
    let head = heap.full.get();
    let page_ptr = core::ptr::from_ref(page).cast_mut();
    page.prev.set(ptr::null_mut());
    page.next.set(head);
    if !head.is_null() {
        // SAFETY: a page of this heap's full list.
        unsafe { (*head).prev.set(page_ptr) };
    }
    heap.full.set(page_ptr);
    page.list.set(ListState::Full);
}

/// Takes `page` out of whichever list of `heap` it is in.
fn unlink(heap: &HeapCore, page: &Page) {
    let prev = page.prev.get();
    let next = page.next.get();
    // SAFETY: neighbours are pages of the same list of this heap.
    unsafe {
        if !next.is_null() {
            (*next).prev.set(prev);
        }
        if !prev.is_null() {
            (*prev).next.set(next);
        } else {
            match page.list.get() {
                ListState::Partial => {
                    let class = page.class.load(Ordering::Relaxed) as usize;
                    heap.pages[class].set(if next.is_null() { empty_page() } else { next });
                }
                ListState::Full => heap.full.set(next),
                ListState::None => {}
            }
        }
    }
    page.next.set(ptr::null_mut());
    page.prev.set(ptr::null_mut());
    page.list.set(ListState::None);
}

/// Puts the pages that remote frees handed back into their class lists.
#[inline]
fn drain_delayed(heap: &HeapCore) {
    if heap.delayed.load(Ordering::Relaxed).is_null() {
        return;
    }
    let mut at = heap.delayed.swap(ptr::null_mut(), Ordering::Acquire);
    while !at.is_null() {
        // SAFETY: pages in `delayed` are pages of this heap in its full list.
        let page = unsafe { &*at };
        at = page.delayed_next.load(Ordering::Relaxed);
        debug_assert_eq!(page.list.get(), ListState::Full);
        unlink(heap, page);
        push_partial(heap, page);
        collect(page);
        if page.used.load(Ordering::Relaxed) == 0 {
            release(heap, page);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Heaps for threads, the orphan heap, the registry
// ---------------------------------------------------------------------------------------

/// An allocation by a thread that has no heap yet (or no more).
#[cold]
fn alloc_without_heap(class: usize) -> *mut u8 {
    // Without the key (the process had used up its `pthread` keys) no destructor would park
    // the heap: such a process's threads share the orphan heap.
    let key = if !EXITING.with(Cell::get) && init() {
        key()
    } else {
        None
    };
    let heap = key.and_then(|_| acquire(Kind::Thread));
    if let (Some(key), Some(heap)) = (key, heap) {
        // The slot first: `pthread_setspecific` may allocate (see `set_key_value`), and
        // under the C shim that allocation comes back here, to be served from this heap.
        heap_slot::set(heap);
        if set_key_value(key, heap) {
            ARMED.with(|a| a.set(true));
            // A retry, should the first registration have failed (a relaxed load otherwise).
            // Only now: glibc's `pthread_atfork` may allocate, through us under the C shim,
            // and that allocation must find this thread's heap in place. Made while the
            // thread had none, it took a heap of its own, and this call a second one: the
            // first was never parked.
            retry_fork_handlers();
            // SAFETY: this thread holds `heap` now.
            return unsafe { alloc_small(heap, class) };
        }
        // Refused: no destructor would park the heap at this thread's exit, nor publish
        // the remote frees it holds back. Give the heap back, parked as at exit (a block of
        // it still in use, were there one, is freed remotely as any parked heap's), and
        // serve this allocation from the orphan heap. The thread stays heapless and unarmed,
        // so its remote frees are published at once, and its next allocation tries again.
        heap_slot::set(empty_heap());
        // SAFETY: this thread holds `heap` (`acquire`).
        unsafe { (*heap).held.store(false, Ordering::Release) };
    }
    let _guard = ORPHAN_LOCK.lock();
    // SAFETY: the orphan heap is held through its lock.
    unsafe { alloc_small((&raw const ORPHAN_HEAP).cast_mut(), class) }
}

/// [`install_fork_handlers`], as a heapless thread's first allocation retries it. Under
/// `cfg(test)` a thread can have a function run in its place once (`tests::FORK_RETRY`), one
/// that allocates as glibc's `pthread_atfork` may.
fn retry_fork_handlers() {
    #[cfg(test)]
    if let Some(hook) = tests::FORK_RETRY.with(Cell::take) {
        hook();
        return;
    }
    install_fork_handlers();
}

/// The initialisation state: 0 not started, 1 in progress, 2 done.
static INIT: AtomicU8 = AtomicU8::new(0);
/// The pthread key whose destructor parks a thread's heap, once [`KEY_MADE`] says it exists.
static KEY: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
/// Whether `init` made the key: a process that has used up its keys (`PTHREAD_KEYS_MAX`) has
/// none for us, and then key 0 (the value [`KEY`] starts with) is someone else's, whose
/// destructor must never receive our heap (`tests/no_pthread_key.rs`).
static KEY_MADE: AtomicBool = AtomicBool::new(false);

/// Our key, if `init` could make one.
fn key() -> Option<libc::pthread_key_t> {
    // Relaxed: both were stored before `INIT` became 2 (Release), which our callers loaded
    // (Acquire).
    KEY_MADE
        .load(Ordering::Relaxed)
        .then(|| KEY.load(Ordering::Relaxed) as libc::pthread_key_t)
}

/// Whether the fork handlers are registered: 0 not, 1 being registered, 2 registered.
static FORK_HANDLERS: AtomicU8 = AtomicU8::new(0);

/// Registers the fork handlers unless they are. `pthread_atfork` can fail (only for want of
/// memory); then the next thread's first allocation tries again, so that they are in place
/// before a second thread exists to hold one of the locks across a `fork` (a single-threaded
/// process forks safely without them: no lock of ours is held across its `fork` call). That
/// retry comes once the thread holds its heap and its key names it ([`alloc_without_heap`]):
/// glibc's `pthread_atfork` may allocate, and under the C shim that allocation is ours, served
/// from the thread's heap; made before, it made the thread take a second heap.
///
/// Also called before the first allocation, through `raw::install_fork_handlers` (the C
/// `malloc` calls it when its library is loaded): the handlers need nothing initialised, and
/// registered before the program's own they let those allocate (see the module
/// documentation).
pub(crate) fn install_fork_handlers() {
    if FORK_HANDLERS.load(Ordering::Acquire) == 2
        || FORK_HANDLERS
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    // SAFETY: a plain libc call; the handlers are `extern "C"` functions that never unwind.
    // Only the thread that moved the state from 0 to 1 registers, so they are registered at
    // most once (twice would take each lock twice before a fork).
    let registered = unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        )
    } == 0;
    FORK_HANDLERS.store(if registered { 2 } else { 0 }, Ordering::Release);
}

/// Initialises the allocator once: the thread-exit key, the fork handlers, the pool and the
/// purge policy from the environment. Returns whether it is done (`false` while another
/// call, possibly a nested one on this thread, is in progress).
#[inline]
pub(crate) fn init() -> bool {
    if INIT.load(Ordering::Acquire) == 2 {
        return true;
    }
    init_slow()
}

#[cold]
fn init_slow() -> bool {
    if INIT
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire)
        .is_err()
    {
        return INIT.load(Ordering::Acquire) == 2;
    }
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a plain libc call with valid arguments; the destructor is an `extern "C"`
    // function that never unwinds.
    unsafe {
        if libc::pthread_key_create(&mut key, Some(on_thread_exit)) == 0 {
            KEY.store(key as u32, Ordering::Relaxed);
            KEY_MADE.store(true, Ordering::Relaxed);
        }
    }
    install_fork_handlers();
    crate::policy::init_from_env();
    pool::init();
    INIT.store(2, Ordering::Release);
    true
}

/// The pthread key destructor: parks the exiting thread's heap.
///
/// The destructors of keys created after ours run after it (glibc runs them in the order the
/// keys were made; in a preloaded C program ours is one of the first), and may still free
/// blocks. So this one disarms the thread's exit flush: from here on, a remote free is
/// published at once and a freed large mapping goes to the shared cache, rather than wait in
/// the thread's batch or stash for a flush that would never come.
extern "C" fn on_thread_exit(heap: *mut libc::c_void) {
    EXITING.with(|e| e.set(true));
    ARMED.with(|a| a.set(false));
    flush_remote();
    crate::large::flush_stash();
    crate::large::disown();
    heap_slot::set(empty_heap());
    let heap = heap.cast::<HeapCore>();
    if heap.is_null() || ptr::eq(heap, empty_heap()) {
        return;
    }
    // SAFETY: the value of the key is the heap this thread held.
    let heap = unsafe { &*heap };
    tidy(heap);
    heap.held.store(false, Ordering::Release);
}

/// Drains, and gives the pages of a heap its caller holds that no block uses any more (remote
/// frees counted) to the pool.
///
/// Pages still in use keep their remote lists, for the next allocation slow path of the
/// heap's holder to take: [`collect`] would walk a list whole to append it to a non-empty free
/// list, a chain of dependent loads of lines the freeing threads wrote, and at thread exit
/// (where a heap's pages hold the remote frees of a whole generation of other threads) that
/// walk cost more than the rest of the exit (`docs/notes/alloc-bench.md`, sixth session).
fn tidy(heap: &HeapCore) {
    drain_delayed(heap);
    for class in 0..CLASSES {
        let mut at = heap.pages[class].get();
        while !ptr::eq(at, empty_page()) && !at.is_null() {
            // SAFETY: a page of this heap's class list.
            let page = unsafe { &*at };
            at = page.next.get();
            if take_if_emptied(page) {
                release(heap, page);
            }
        }
    }
}

/// Whether no block of `page` (in a class list of a heap the caller holds) is in use, remote
/// frees counted; if so, its remote list and count are cleared, ready for [`release`]. The
/// blocks on the remote list are not walked: every block of the page is free, and the page's
/// lists start over when it is next handed out ([`init_page`]).
fn take_if_emptied(page: &Page) -> bool {
    let used = page.used.load(Ordering::Relaxed);
    // Acquire: every publisher adds its count (Release) after its push and its writes into
    // the blocks, so those happen before the page is handed to anyone else.
    let count = page.remote_count.load(Ordering::Acquire);
    // Only blocks handed out are counted, so `count <= used`; equal means every block handed
    // out is back, and no publisher is left to push or count (a block is freed once).
    if count != used {
        return false;
    }
    if count != 0 {
        page.remote.store(ptr::null_mut(), Ordering::Relaxed);
        page.remote_count.store(0, Ordering::Relaxed);
        page.used.store(0, Ordering::Relaxed);
    }
    true
}

/// The first heap of the registry.
static REGISTRY: AtomicPtr<HeapCore> = AtomicPtr::new(ptr::null_mut());
/// Guards carving new heaps from [`META`].
static REGISTRY_LOCK: SpinLock = SpinLock::new();

/// Memory for heaps: the current chunk and how much of it is used (under `REGISTRY_LOCK`).
struct Meta {
    chunk: Cell<*mut u8>,
    used: Cell<usize>,
}
// SAFETY: under REGISTRY_LOCK only.
unsafe impl Sync for Meta {}
static META: Meta = Meta {
    chunk: Cell::new(ptr::null_mut()),
    used: Cell::new(META_CHUNK),
};
const META_CHUNK: usize = 1 << 16;

/// Takes a heap of `kind` that nobody holds, or makes one; `None` if the OS refuses memory.
pub(crate) fn acquire(kind: Kind) -> Option<*mut HeapCore> {
    let mut at = REGISTRY.load(Ordering::Acquire);
    while !at.is_null() {
        // SAFETY: registry heaps are never freed.
        let heap = unsafe { &*at };
        if heap.kind == kind
            && !heap.held.load(Ordering::Relaxed)
            && heap
                .held
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return Some(at);
        }
        at = heap.registry_next.load(Ordering::Acquire);
    }
    let _guard = REGISTRY_LOCK.lock();
    let size = core::mem::size_of::<HeapCore>().next_multiple_of(128);
    if META.used.get() + size > META_CHUNK {
        let chunk = os::map_reserve(META_CHUNK)?;
        crate::stats::Counters::get()
            .mapped
            .fetch_add(META_CHUNK, Ordering::Relaxed);
        META.chunk.set(chunk.as_ptr());
        META.used.set(0);
    }
    // SAFETY: the chunk has room for one more heap at `used`, aligned to 128.
    let heap = unsafe { META.chunk.get().add(META.used.get()) }.cast::<HeapCore>();
    META.used.set(META.used.get() + size);
    // SAFETY: fresh memory for one heap; not yet visible to anyone.
    unsafe {
        heap.write(HeapCore::new(kind));
        (*heap).held.store(true, Ordering::Relaxed);
    }
    let mut head = REGISTRY.load(Ordering::Relaxed);
    loop {
        // SAFETY: ours until published.
        unsafe { (*heap).registry_next.store(head, Ordering::Relaxed) };
        match REGISTRY.compare_exchange_weak(head, heap, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return Some(heap),
            Err(now) => head = now,
        }
    }
}

/// Gives up an owned heap: every page goes back to the pool, blocks in use or not (the
/// caller guarantees none is used again). Large blocks are handled by the caller first.
///
/// # Safety
/// The caller holds `heap` and none of its blocks is used again.
pub(crate) unsafe fn release_owned(heap: *mut HeapCore) {
    // SAFETY: held by the caller.
    let heap = unsafe { &*heap };
    let mut lists: [*mut Page; CLASSES + 1] = [ptr::null_mut(); CLASSES + 1];
    for (class, slot) in lists.iter_mut().enumerate().take(CLASSES) {
        *slot = heap.pages[class].get();
    }
    lists[CLASSES] = heap.full.get();
    for head in lists {
        let mut at = head;
        while !at.is_null() && !ptr::eq(at, empty_page()) {
            // SAFETY: a page of this heap.
            let page = unsafe { &*at };
            at = page.next.get();
            page.used.store(0, Ordering::Relaxed);
            page.remote.store(ptr::null_mut(), Ordering::Relaxed);
            page.remote_count.store(0, Ordering::Relaxed);
            release(heap, page);
        }
    }
    heap.delayed.store(ptr::null_mut(), Ordering::Relaxed);
    heap.held.store(false, Ordering::Release);
}

/// Visits the parked thread heaps and the orphan heap, and gives their empty pages to the pool
/// (from a sweep).
///
/// The orphan heap's blocks are all freed remotely (no thread holds it as its own heap), and
/// it allocates only when an exiting or initialising thread needs a block, so without this
/// visit its pages would stay owned, counted in use, long after their blocks were freed: a
/// thread that raced another's initialisation of the allocator took every block of its first
/// moments from it (`tests/stress_handover.rs` saw 4 MB stay in use), and so does every
/// allocation of a late key destructor (`tests/orphan_heap.rs`). An ordinary sweep only tries
/// the orphan heap's lock: it can start inside an orphan allocation (a page released there),
/// on the thread that holds it. A forced sweep ([`collect`](crate::collect)) waits for it:
/// `collect` is called from outside the allocator, so its thread never holds that lock, and
/// an orphan allocation waits for nothing a sweep holds (its own sweep returns at once while
/// another thread sweeps). Had `collect` only tried it, a `collect` beside an orphan
/// allocation in progress would have left the orphan heap's empty pages owned.
pub(crate) fn reclaim_parked(force: bool) {
    let mut at = REGISTRY.load(Ordering::Acquire);
    while !at.is_null() {
        // SAFETY: registry heaps are never freed.
        let heap = unsafe { &*at };
        if heap.kind == Kind::Thread
            && !heap.held.load(Ordering::Relaxed)
            && heap
                .held
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            tidy(heap);
            heap.held.store(false, Ordering::Release);
        }
        at = heap.registry_next.load(Ordering::Acquire);
    }
    let guard = if force {
        Some(ORPHAN_LOCK.lock())
    } else {
        ORPHAN_LOCK.try_lock()
    };
    if let Some(_guard) = guard {
        tidy(&ORPHAN_HEAP);
    }
}

/// Before `fork`: take every lock, so that none is held by a thread missing in the child.
extern "C" fn before_fork() {
    REGISTRY_LOCK.lock_raw();
    ORPHAN_LOCK.lock_raw();
    crate::large::CACHE_LOCK.lock_raw();
    crate::segment::FRESH_LOCK.lock_raw();
}

/// After `fork`, in the parent: release the locks.
extern "C" fn after_fork_parent() {
    // SAFETY: `before_fork` took them on this thread.
    unsafe {
        crate::segment::FRESH_LOCK.unlock_raw();
        crate::large::CACHE_LOCK.unlock_raw();
        ORPHAN_LOCK.unlock_raw();
        REGISTRY_LOCK.unlock_raw();
    }
}

/// After `fork`, in the child: release the locks. The heaps of the parent's other threads
/// (which do not exist in the child) stay held: one of them may have been in the middle of an
/// update of its lists when the parent forked, so no thread of the child may adopt it. Their
/// blocks can still be freed (remote frees), but their pages are not reused in the child.
extern "C" fn after_fork_child() {
    after_fork_parent();
    pool::after_fork_child();
}

/// Gives the calling thread's empty pages to the pool (for `collect`).
pub(crate) fn tidy_mine() {
    flush_remote();
    crate::large::flush_stash();
    let heap = thread_heap();
    if !ptr::eq(heap, empty_heap()) {
        // SAFETY: the calling thread holds its heap.
        tidy(unsafe { &*heap });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Makes `set_key_value` fail on this thread, as glibc's `pthread_setspecific` does
        /// when it cannot allocate the second level of the thread's key table.
        pub(super) static REFUSE_KEY_VALUE: Cell<bool> = const { Cell::new(false) };
        /// Run once, on this thread, in place of the fork handlers' retry in a heapless
        /// thread's first allocation: an allocation there stands for glibc's `pthread_atfork`
        /// allocating through us (under the C shim).
        pub(super) static FORK_RETRY: Cell<Option<fn()>> = const { Cell::new(None) };
        /// Run once, on this thread, at the start of `set_key_value`: an allocation there
        /// stands for glibc's `calloc` of the thread's key table, ours under the C shim.
        pub(super) static ALLOC_IN_KEY_VALUE: Cell<Option<fn()>> = const { Cell::new(None) };
        /// What the `FORK_RETRY` function of a test saw: the heap that owns the block it
        /// allocated.
        static RETRY_BLOCK_OWNER: Cell<usize> = const { Cell::new(0) };
    }

    /// A block of `size` bytes from `owned`, another heap than any test thread's (a free of it
    /// from such a thread is remote), and its exposed address for those threads.
    fn block_of(owned: &crate::Heap, size: usize) -> (core::ptr::NonNull<u8>, usize) {
        let layout = core::alloc::Layout::from_size_align(size, 8).unwrap();
        let block = allocator_api2::alloc::Allocator::allocate(&owned, layout)
            .unwrap()
            .cast::<u8>();
        (block, block.as_ptr().expose_provenance())
    }

    /// The heap that owns the small block at `block`.
    fn owner_of(block: *mut u8) -> *mut HeapCore {
        // SAFETY: a live small block of ours, whose page descriptor `page_of` finds.
        unsafe {
            (*crate::segment::page_of(block))
                .owner
                .load(Ordering::Acquire)
        }
    }

    /// A thread whose `pthread_setspecific` is refused has no destructor to park its heap or
    /// publish its held-back remote frees at exit. So it must not keep a heap as its own (the
    /// orphan heap serves it), its remote frees must be published all the same, and a later
    /// allocation, once the key's value can be set, gives it its heap.
    #[test]
    fn a_thread_whose_key_value_is_refused_keeps_no_heap_and_holds_back_no_remote_free() {
        const CLASS: usize = 2;
        let owned = crate::Heap::new();
        let (remote, remote_addr) = block_of(&owned, 24);
        // Threads of pthread_create's: nothing allocates on them before the body starts (a
        // std thread may, under `--cfg pitlane_alloc_global`). This one's key value is
        // refused to its end.
        let seen = pitlane_testkit::stress::run_threads(1, |_| {
            REFUSE_KEY_VALUE.with(|r| r.set(true));
            assert!(
                ptr::eq(thread_heap(), empty_heap()),
                "a fresh thread has no heap"
            );
            // SAFETY: this thread has the empty heap.
            let first = unsafe { alloc_small(thread_heap(), CLASS) };
            assert!(!first.is_null());
            let first_owner = owner_of(first);
            let heap_after_refusal = thread_heap();
            // SAFETY: a live small block of another heap, freed once.
            unsafe { free_small(thread_heap(), ptr::with_exposed_provenance_mut(remote_addr)) };
            // SAFETY: a live small block of ours, freed once.
            unsafe { free_small(thread_heap(), first) };
            (first_owner.expose_provenance(), heap_after_refusal.addr())
        });
        let (first_owner, heap_after_refusal) = seen[0];
        let first_owner = ptr::with_exposed_provenance::<HeapCore>(first_owner);
        // The thread has exited: a heap it kept as its own would still be held.
        // SAFETY: heaps live for the whole process.
        let first_owner_held = unsafe { (*first_owner).held.load(Ordering::Acquire) };
        assert!(
            !first_owner_held,
            "the heap that served the thread whose key value was refused is still held after \
             the thread exited: no destructor parked it"
        );
        // SAFETY: the block's page belongs to `owned`, which has not allocated since.
        let published = unsafe {
            (*crate::segment::page_of(remote.as_ptr()))
                .remote_count
                .load(Ordering::Acquire)
        };
        assert_eq!(
            published, 1,
            "the remote free of the thread whose key value was refused was held back and \
             never published"
        );
        assert_eq!(heap_after_refusal, empty_heap().addr());
        drop(owned);
        // This one's is refused at its first allocation only: the next gives it its heap.
        let later_is_own = pitlane_testkit::stress::run_threads(1, |_| {
            REFUSE_KEY_VALUE.with(|r| r.set(true));
            // SAFETY: this thread has the empty heap.
            let first = unsafe { alloc_small(thread_heap(), CLASS) };
            assert!(!first.is_null());
            REFUSE_KEY_VALUE.with(|r| r.set(false));
            // SAFETY: as above.
            let later = unsafe { alloc_small(thread_heap(), CLASS) };
            assert!(!later.is_null());
            let later_is_own =
                ptr::eq(owner_of(later), thread_heap()) && !ptr::eq(thread_heap(), empty_heap());
            // SAFETY: live small blocks of ours, each freed once.
            unsafe {
                free_small(thread_heap(), first);
                free_small(thread_heap(), later);
            }
            later_is_own
        });
        assert!(
            later_is_own[0],
            "a later allocation, with the key's value set, did not give the thread a heap"
        );
    }

    /// A thread without a heap whose first call is a remote free arms its exit destructor
    /// with the empty heap; glibc's `pthread_setspecific` may allocate (the second level of
    /// its key table), and under the C shim that allocation gives the thread a heap and sets
    /// the key's value to it. The outer call must not leave the empty heap as the key's
    /// value, or the destructor would never park that heap.
    #[test]
    fn an_allocation_inside_the_arming_pthread_setspecific_leaves_the_key_naming_the_heap() {
        const CLASS: usize = 4;
        fn allocate_as_glibc_calloc_may() {
            // SAFETY: the calling thread's heap (or the empty heap); the block is left to the
            // thread's heap, as glibc keeps its key table for the thread's life.
            let block = unsafe { alloc_small(thread_heap(), CLASS) };
            assert!(!block.is_null());
        }
        let owned = crate::Heap::new();
        let (_, remote_addr) = block_of(&owned, 64);
        let key = key().expect("the allocator has its key");
        let seen = pitlane_testkit::stress::run_threads(1, |_| {
            assert!(
                ptr::eq(thread_heap(), empty_heap()),
                "a fresh thread has no heap"
            );
            ALLOC_IN_KEY_VALUE.with(|r| r.set(Some(allocate_as_glibc_calloc_may)));
            // SAFETY: a live small block of another heap, freed once.
            unsafe { free_small(thread_heap(), ptr::with_exposed_provenance_mut(remote_addr)) };
            let allocated = ALLOC_IN_KEY_VALUE.with(Cell::take).is_none();
            // SAFETY: a plain libc call with our key.
            let value = unsafe { libc::pthread_getspecific(key) }.addr();
            (allocated, value, thread_heap().addr())
        });
        drop(owned);
        let (allocated, value, heap) = seen[0];
        assert!(allocated, "the remote free did not arm the exit destructor");
        assert_ne!(
            heap,
            empty_heap().addr(),
            "the nested allocation took no heap"
        );
        assert_eq!(
            value, heap,
            "the key's value is not the thread's heap: the destructor will not park it"
        );
    }

    /// An allocation inside a `pthread_setspecific` that is then refused (served from the heap
    /// the thread had just taken, which the refusal gives back): the block stays usable, and
    /// the thread, heapless and unarmed, frees it as a remote free published at once into the
    /// given-back heap's page, not held back in a batch no exit flush would publish.
    #[test]
    fn a_block_taken_inside_a_refused_pthread_setspecific_is_freed_into_the_given_back_heap() {
        const CLASS: usize = 5;
        thread_local! {
            static NESTED: Cell<usize> = const { Cell::new(0) };
        }
        fn allocate_before_the_refusal() {
            // SAFETY: the calling thread's heap (the one it just took).
            let block = unsafe { alloc_small(thread_heap(), CLASS) };
            assert!(!block.is_null());
            NESTED.with(|n| n.set(block.expose_provenance()));
        }
        let seen = pitlane_testkit::stress::run_threads(1, |_| {
            REFUSE_KEY_VALUE.with(|r| r.set(true));
            ALLOC_IN_KEY_VALUE.with(|r| r.set(Some(allocate_before_the_refusal)));
            // SAFETY: this thread has the empty heap.
            let first = unsafe { alloc_small(thread_heap(), CLASS) };
            assert!(!first.is_null());
            let nested = ptr::with_exposed_provenance_mut::<u8>(NESTED.with(Cell::get));
            assert!(
                !nested.is_null(),
                "the allocation inside the call did not run"
            );
            let heapless = ptr::eq(thread_heap(), empty_heap());
            let from_other_heap = !ptr::eq(owner_of(nested), owner_of(first));
            // SAFETY: the block is live and ours to write.
            unsafe { nested.write_bytes(0xa5, 8) };
            // SAFETY: a live small block of ours, freed once.
            unsafe { free_small(thread_heap(), nested) };
            let held_back = BATCHES.with(|s| !s[batch_slot(nested)].get().page.is_null());
            // SAFETY: as above.
            unsafe { free_small(thread_heap(), first) };
            (heapless, from_other_heap, held_back, ARMED.with(Cell::get))
        });
        let (heapless, from_other_heap, held_back, armed) = seen[0];
        assert!(
            heapless,
            "the thread kept a heap though its key value was refused"
        );
        assert!(
            from_other_heap,
            "the nested block is not from the heap the refusal gave back"
        );
        assert!(
            !held_back && !armed,
            "the free of the nested block was held back by a thread whose exit flush never runs"
        );
    }

    /// The fork handlers' retry in a heapless thread's first allocation may allocate (glibc's
    /// `pthread_atfork` does, through us under the C shim). That allocation must be served
    /// from the heap the thread takes, not make it take one of its own: the thread would then
    /// take a second heap for the allocation that retried, and the first would never be
    /// parked.
    #[test]
    fn an_allocation_inside_the_fork_handlers_retry_takes_no_second_heap() {
        const CLASS: usize = 3;
        fn allocate_as_pthread_atfork_may() {
            // SAFETY: the calling thread's heap (or the empty heap).
            let block = unsafe { alloc_small(thread_heap(), CLASS) };
            assert!(!block.is_null());
            RETRY_BLOCK_OWNER.with(|o| o.set(owner_of(block).addr()));
            // SAFETY: a live small block of ours, freed once.
            unsafe { free_small(thread_heap(), block) };
        }
        let seen = pitlane_testkit::stress::run_threads(1, |_| {
            FORK_RETRY.with(|r| r.set(Some(allocate_as_pthread_atfork_may)));
            assert!(
                ptr::eq(thread_heap(), empty_heap()),
                "a fresh thread has no heap"
            );
            // SAFETY: this thread has the empty heap.
            let block = unsafe { alloc_small(thread_heap(), CLASS) };
            assert!(!block.is_null());
            let retried = FORK_RETRY.with(Cell::take).is_none();
            let nested_owner = RETRY_BLOCK_OWNER.with(Cell::get);
            let owner = owner_of(block).addr();
            let heap = thread_heap().addr();
            // SAFETY: a live small block of ours, freed once.
            unsafe { free_small(thread_heap(), block) };
            (retried, nested_owner, owner, heap)
        });
        let (retried, nested_owner, owner, heap) = seen[0];
        assert!(
            retried,
            "the first allocation did not retry the fork handlers"
        );
        assert_eq!(owner, heap, "the thread's first block is not from its heap");
        assert_eq!(
            nested_owner, heap,
            "the allocation inside the fork handlers' retry took a heap other than the \
             thread's: the thread took two, and the first is never parked"
        );
    }

    /// A forced sweep (`collect`) visits the orphan heap even while an orphan allocation holds
    /// its lock: it waits for the lock rather than skip the heap. The holder marks the
    /// moment it lets go; the sweep must not return before it. (With the lock only tried, the
    /// sweep returned at once, long before the holder's 200 ms were up.)
    #[test]
    fn a_forced_sweep_waits_for_the_orphan_heap_lock() {
        use std::sync::Barrier;
        use std::sync::atomic::AtomicBool;
        let released = AtomicBool::new(false);
        let held = Barrier::new(2);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let guard = ORPHAN_LOCK.lock();
                held.wait();
                std::thread::sleep(std::time::Duration::from_millis(200));
                released.store(true, Ordering::Release);
                drop(guard);
            });
            held.wait();
            crate::pool::sweep_now(crate::os::now_ms(), true);
            assert!(
                released.load(Ordering::Acquire),
                "the forced sweep returned while the orphan heap's lock was held"
            );
        });
    }

    #[test]
    fn the_thread_local_heap_slot_starts_empty_and_keeps_what_each_thread_sets() {
        let mine = (&raw const ORPHAN_HEAP).cast_mut();
        let other = std::thread::spawn(|| {
            assert!(ptr::eq(heap_slot_tls::get(), empty_heap()));
            heap_slot_tls::set(ptr::null_mut());
            heap_slot_tls::get().addr()
        });
        assert!(ptr::eq(heap_slot_tls::get(), empty_heap()));
        heap_slot_tls::set(mine);
        assert!(ptr::eq(heap_slot_tls::get(), mine));
        assert_eq!(other.join().unwrap(), 0);
        assert!(ptr::eq(heap_slot_tls::get(), mine));
        heap_slot_tls::set(empty_heap());
    }
}
