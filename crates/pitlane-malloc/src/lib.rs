//! pitlane-alloc as the C `malloc`: a shared library to preload into any program
//! (`LD_PRELOAD=libpitlane_malloc.so program`), or a static library to link into a C or C++
//! program (`include/pitlane_malloc.h`).
//!
//! ```text
//!  C / C++ program ──malloc, free, new, delete──▶ this crate: the C ABI, errno, C++ failure
//!                                                   │
//!                                                   ▼
//!                                     pitlane_alloc::raw: size classes, pages, heaps
//! ```
//!
//! # What is exported
//!
//! `malloc`, `free`, `calloc`, `realloc`, `reallocarray`, `aligned_alloc`, `posix_memalign`,
//! `memalign`, `valloc`, `pvalloc`, `malloc_usable_size`, `cfree`, C23's `free_sized` and
//! `free_aligned_sized`, glibc's `__libc_*` names for the same functions, and the C++
//! `operator new`/`operator delete` family in every form (plain, array, sized, aligned,
//! `nothrow`), under their Itanium C++ ABI names. Also
//! `pitlane_malloc_version`, by which a program (and our own tests) can tell that this is the
//! malloc in use.
//!
//! # Contracts, where the C standard leaves a choice
//!
//! - `malloc(0)`, `calloc(0, n)`, `aligned_alloc(a, 0)` and `operator new(0)` return a unique
//!   pointer that `free` (or `delete`) accepts.
//! - A block of `malloc(n)` is aligned to 16 bytes when `n` is a multiple of 16 (0 included)
//!   or more than 56, and to 8 otherwise: what any object of `n` bytes can need (C17's
//!   `max_align_t` is 16 bytes, and an object's size is a multiple of its alignment).
//! - Every failure returns null and sets `errno` to `ENOMEM` (`EINVAL` for a bad alignment to
//!   `aligned_alloc` and `memalign`); `posix_memalign` returns the error and leaves `*p` and
//!   `errno` alone. Sizes past `isize::MAX`, and `calloc`/`reallocarray` products that
//!   overflow, fail.
//! - `free` (and `delete`) never changes `errno`.
//! - `realloc(p, 0)` frees `p` and returns null, as glibc's does; `realloc(NULL, n)` is
//!   `malloc(n)`. A failed `realloc` leaves the block as it was.
//! - `free` of a pointer this allocator did not hand out (one from another allocator, or one
//!   not at the start of a block) is detected when the pointer is not inside any memory of
//!   ours, reported once on standard error, and ignored: the block leaks rather than the heap
//!   being corrupted. A large block's header carries a seal, cleared when it is freed, so a
//!   second `free` of a large block whose mapping is kept for reuse is refused the same way.
//!   A small block freed twice in a row by one thread (still at the head of its page's free
//!   list, or at the head of its batch of remote frees), or whose page its first `free` gave
//!   back to the pool, is refused and reported once as well. Not detected: a pointer inside our memory
//!   but not at a block's start, other second `free`s of a small block (two later `malloc`s
//!   then return it), and the other cases `docs/malloc.md` lists.
//! - The throwing C++ `operator new` forms call the program's new-handler and retry while one
//!   is installed, then throw `std::bad_alloc`: they find `std::get_new_handler` and the
//!   function that throws in the C++ runtime already loaded into the process (any program
//!   that calls `operator new` has one), so this library does not link the C++ runtime itself.
//!   The `nothrow` forms return null.
//! - `fork`: the allocator's `pthread_atfork` handlers are registered when the library is
//!   loaded (an ELF constructor, run before the program's own constructors and `main`), so
//!   that a program's handlers registered before its first `malloc` may allocate, as under
//!   glibc (except for handlers a shared library of the program registers from its own
//!   constructor before any `malloc`: the loader runs ours after those).
//!
//! Nothing here allocates, locks, formats or unwinds except the throwing `operator new`
//! forms, whose unwinding is the C++ exception they are required to throw.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod cxx;

use core::ffi::{c_char, c_int, c_void};
use core::ptr;
use core::sync::atomic::{AtomicBool, Ordering};

use pitlane_alloc::raw;

/// The alignment `malloc` asks of the allocator. Blocks are aligned to the largest power of
/// two that divides their size class (see pitlane-alloc's size classes), so a block is
/// 16-aligned whenever its size is a multiple of 16 or above 56 bytes, and 8-aligned
/// otherwise: every object that fits a block of 24, 40 or 56 bytes needs at most 8 (an
/// object's size is a multiple of its alignment). mimalloc does the same.
const MALLOC_ALIGN: usize = 8;

/// Run by the dynamic loader when the library is loaded (and by the C runtime's start-up when
/// the static library is linked): registers pitlane-alloc's `fork` handlers before the
/// program can register its own. glibc runs `pthread_atfork` prepare handlers in the reverse
/// order of registration, parent and child handlers in that order; registered at the first
/// `malloc` instead (as they were), ours came after those of a program that registered
/// before allocating, so its prepare handler ran with the allocator's locks held and a
/// `malloc` there that needed one spun forever (glibc's malloc locks after every prepare
/// handler and unlocks before every parent and child handler). Not covered: handlers that a
/// shared library of the program registers from its own constructor before any `malloc` (the
/// loader runs a preloaded library's constructor after those of the program's libraries,
/// just before the program's): they still come first.
#[used]
// SAFETY: `.init_array` holds pointers to functions the loader calls once, with `argc`,
// `argv` and `envp`, which an `extern "C"` function of no arguments ignores (the C calling
// convention leaves extra arguments to the caller); this one never unwinds.
#[unsafe(link_section = ".init_array")]
static REGISTER_FORK_HANDLERS: extern "C" fn() = register_fork_handlers;

/// The body of [`REGISTER_FORK_HANDLERS`]; the loader's arguments (`argc`, `argv`, `envp`)
/// are not needed. Should `pthread_atfork` fail here (for want of memory), the allocator
/// tries again in each thread's first allocation, once that thread holds its heap: glibc's
/// `pthread_atfork` may allocate, and that allocation (ours) is then served from the heap
/// rather than make the thread take a second one.
extern "C" fn register_fork_handlers() {
    raw::install_fork_handlers();
}

fn set_errno(value: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = value };
}

fn errno() -> c_int {
    // SAFETY: as in `set_errno`.
    unsafe { *libc::__errno_location() }
}

/// A power of two, and no smaller than a pointer (as `posix_memalign` requires).
fn is_pointer_alignment(align: usize) -> bool {
    align.is_power_of_two() && align >= size_of::<*mut c_void>()
}

/// `malloc(size)` with the alignment `align` (a power of two), setting `errno` on failure.
#[inline]
fn allocate(size: usize, align: usize) -> *mut c_void {
    let block = raw::malloc(size, align);
    if block.is_null() {
        set_errno(libc::ENOMEM);
    }
    block.cast()
}

/// Allocates `size` bytes aligned for any type (16 bytes).
///
/// # Safety
/// None beyond C's: the block is the caller's until it is passed to `free` or `realloc`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    // The fast path makes no call, so `malloc` needs no stack frame; anything else is a
    // tail call to `malloc_slow`.
    let block = raw::malloc_fast(size);
    if !block.is_null() {
        return block.cast();
    }
    malloc_slow(size)
}

/// `malloc` beyond the fast path: a new page, a large block, or a failure to report.
#[inline(never)]
extern "C" fn malloc_slow(size: usize) -> *mut c_void {
    allocate(size, MALLOC_ALIGN)
}

/// Frees a block from any of this library's allocation functions; `NULL` is ignored.
///
/// # Safety
/// `block` is null or came from this allocator and was not freed since.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free(block: *mut c_void) {
    // As in `malloc`: the fast path makes no call, anything else is a tail call.
    // SAFETY: by the caller's contract `block` is null, or a live block of ours, or (a
    // misuse `free_fast` tells apart without reading it) a pointer outside our segments.
    if unsafe { raw::free_fast(block.cast()) } {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { free_slow(block) }
}

/// `free` beyond the fast path: a null pointer, a block of a page another thread owns or
/// whose free changes the page's state, a large block, or a foreign pointer.
///
/// # Safety
/// As `free`.
#[inline(never)]
unsafe extern "C" fn free_slow(block: *mut c_void) {
    if block.is_null() {
        return;
    }
    release(block);
}

/// The shared body of `free`, `cfree` and every `operator delete`.
#[inline]
fn release(block: *mut c_void) {
    let block = block.cast::<u8>();
    if raw::in_segment(block) {
        // SAFETY: a pointer into one of our segments; the C contract makes it a live block,
        // and a buggy program's second free of it in a row is refused.
        if !unsafe { raw::try_free_small(block) } {
            double_free(block);
        }
        return;
    }
    release_large(block);
}

/// A block outside the segments: a large block of ours, or a foreign pointer.
#[inline(never)]
fn release_large(block: *mut u8) {
    // SAFETY: the C contract makes `block` a block of ours, whose header (read by the free
    // anyway) is readable; a page-aligned foreign pointer whose preceding page is not mapped
    // faults here rather than in the free.
    if !unsafe { raw::owns_block(block) } {
        foreign_free(block);
        return;
    }
    // Unmapping or purging on this path may set errno; `free` must not.
    let saved = errno();
    // SAFETY: `block` is ours, and by the C contract a live block.
    unsafe { raw::free(block) };
    set_errno(saved);
}

/// A pointer outside every mapping of ours: reported once, then leaked.
#[cold]
#[inline(never)]
fn foreign_free(block: *mut u8) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    report_once(
        &REPORTED,
        b"pitlane-malloc: free() of a pointer it did not allocate: 0x",
        block,
    );
}

/// `realloc` of a pointer outside every mapping of ours: reported once; the block is left as
/// it was (the caller keeps it, as after any failed `realloc`).
#[cold]
#[inline(never)]
fn foreign_realloc(block: *mut u8) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    report_once(
        &REPORTED,
        b"pitlane-malloc: realloc() of a pointer it did not allocate: 0x",
        block,
    );
}

/// A small block freed twice in a row: reported once, the second free ignored.
#[cold]
#[inline(never)]
fn double_free(block: *mut u8) {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    report_once(
        &REPORTED,
        b"pitlane-malloc: double free of a block just freed: 0x",
        block,
    );
}

/// Writes `head`, the address of `block` in hexadecimal and a tail to standard error, the
/// first time only (per `reported`); without allocating.
fn report_once(reported: &AtomicBool, head: &[u8], block: *mut u8) {
    if reported.swap(true, Ordering::Relaxed) {
        return;
    }
    const HEAD_MAX: usize = 64;
    const TAIL: &[u8] = b" (ignored; reported once)\n";
    let head = &head[..head.len().min(HEAD_MAX)];
    let mut line = [0u8; HEAD_MAX + 16 + TAIL.len()];
    line[..head.len()].copy_from_slice(head);
    let mut value = block.addr();
    for at in (head.len()..head.len() + 16).rev() {
        line[at] = b"0123456789abcdef"[value & 15];
        value >>= 4;
    }
    let len = head.len() + 16 + TAIL.len();
    line[head.len() + 16..len].copy_from_slice(TAIL);
    // SAFETY: writes the first `len` bytes of a buffer of ours to standard error; the
    // result is not needed.
    unsafe { libc::write(2, line.as_ptr().cast(), len) };
}

/// `free`, under the name SunOS and old glibc gave it.
///
/// # Safety
/// As [`free`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cfree(block: *mut c_void) {
    // SAFETY: forwarded.
    unsafe { free(block) }
}

/// C23's `free` told the block's size (the size asked of `malloc`, `calloc` or `realloc`);
/// the size is not needed here, so this is [`free`]. Exported so that a program built
/// against a C library that has it (glibc 2.36 has not) frees our blocks here, not in that
/// library's allocator.
///
/// # Safety
/// As [`free`]; C23 makes a `size` other than the one asked for undefined behaviour.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free_sized(block: *mut c_void, size: usize) {
    let _ = size;
    // SAFETY: forwarded.
    unsafe { free(block) }
}

/// C23's `free` of a block from `aligned_alloc`, told its alignment and size; neither is
/// needed here, so this is [`free`] (exported for the reason given at [`free_sized`]).
///
/// # Safety
/// As [`free`]; C23 makes an `alignment` or `size` other than the ones asked for undefined
/// behaviour.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free_aligned_sized(block: *mut c_void, alignment: usize, size: usize) {
    let _ = (alignment, size);
    // SAFETY: forwarded.
    unsafe { free(block) }
}

/// Allocates `count * size` zeroed bytes; null and `ENOMEM` if the product overflows.
///
/// # Safety
/// As [`malloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn calloc(count: usize, size: usize) -> *mut c_void {
    let Some(total) = count.checked_mul(size) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    let block = raw::calloc(total, MALLOC_ALIGN);
    if block.is_null() {
        set_errno(libc::ENOMEM);
    }
    block.cast()
}

/// Resizes a block, in place when its size class allows, keeping its contents up to the
/// smaller size. `realloc(NULL, n)` is `malloc(n)`; `realloc(p, 0)` frees `p` and returns null.
///
/// # Safety
/// `block` is null or a live block of this allocator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realloc(block: *mut c_void, size: usize) -> *mut c_void {
    if block.is_null() {
        return allocate(size, MALLOC_ALIGN);
    }
    if size == 0 {
        release(block);
        return ptr::null_mut();
    }
    let old = block.cast::<u8>();
    // SAFETY: as in `release_large`.
    if !unsafe { raw::owns_block(old) } {
        // Not ours: nothing can be copied safely (its size is unknown).
        foreign_realloc(old);
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
    // SAFETY: `old` is a live block of ours (the caller's contract, and `owns`).
    let resized = unsafe { raw::realloc(old, size) };
    if resized.is_null() {
        set_errno(libc::ENOMEM);
    }
    resized.cast()
}

/// `realloc(block, count * size)`, with null and `ENOMEM` if the product overflows (the block
/// is then left as it was).
///
/// # Safety
/// As [`realloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn reallocarray(
    block: *mut c_void,
    count: usize,
    size: usize,
) -> *mut c_void {
    match count.checked_mul(size) {
        // SAFETY: forwarded.
        Some(total) => unsafe { realloc(block, total) },
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// Allocates `size` bytes aligned to `align`, a power of two (null and `EINVAL` otherwise).
/// C17 lets `size` be any value, not only a multiple of `align`.
///
/// # Safety
/// As [`malloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    allocate(size, align.max(MALLOC_ALIGN))
}

/// The obsolete form of [`aligned_alloc`], as lenient as glibc's: an alignment that is not a
/// power of two is rounded up to the next one (0 asks for no more than `malloc`'s), since
/// programs written against glibc may pass one; past the largest power of two, null and
/// `EINVAL`.
///
/// # Safety
/// As [`malloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let Some(align) = align.max(1).checked_next_power_of_two() else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // SAFETY: forwarded.
    unsafe { aligned_alloc(align, size) }
}

/// Allocates `size` bytes aligned to `align` into `*out`: returns 0, or `EINVAL` (alignment
/// not a power of two at least the size of a pointer) or `ENOMEM`, leaving `*out` alone.
///
/// # Safety
/// `out` is valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !is_pointer_alignment(align) {
        return libc::EINVAL;
    }
    let saved = errno();
    let block = raw::malloc(size, align.max(MALLOC_ALIGN));
    if block.is_null() {
        // A refused mapping set errno on the way; the error is the return value only.
        set_errno(saved);
        return libc::ENOMEM;
    }
    // SAFETY: the caller's contract.
    unsafe { out.write(block.cast()) };
    0
}

fn page_size() -> usize {
    // SAFETY: `sysconf` has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 { page as usize } else { 4096 }
}

/// Allocates `size` bytes aligned to a page.
///
/// # Safety
/// As [`malloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    allocate(size, page_size())
}

/// Allocates `size` bytes rounded up to a whole page, aligned to a page.
///
/// # Safety
/// As [`malloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let page = page_size();
    let Some(rounded) = size.max(1).checked_next_multiple_of(page) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    allocate(rounded, page)
}

/// How many bytes the block can hold (at least what was asked for); 0 for null.
///
/// # Safety
/// `block` is null or a live block of this allocator.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn malloc_usable_size(block: *mut c_void) -> usize {
    let block = block.cast::<u8>();
    // SAFETY: as in `release_large`.
    if block.is_null() || !unsafe { raw::owns_block(block) } {
        return 0;
    }
    // SAFETY: a live block of ours, by the caller's contract.
    unsafe { raw::usable_size(block) }
}

/// The version of pitlane-malloc, as a C string: its presence tells a program which malloc
/// it runs on.
#[unsafe(no_mangle)]
pub extern "C" fn pitlane_malloc_version() -> *const c_char {
    concat!("pitlane-malloc ", env!("CARGO_PKG_VERSION"), "\0")
        .as_ptr()
        .cast()
}

/// glibc's internal names of the same functions, which some programs and libraries call.
mod libc_names {
    use super::*;

    /// [`malloc`](super::malloc).
    ///
    /// # Safety
    /// As `malloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_malloc(size: usize) -> *mut c_void {
        // SAFETY: forwarded.
        unsafe { malloc(size) }
    }

    /// [`free`](super::free).
    ///
    /// # Safety
    /// As `free`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_free(block: *mut c_void) {
        // SAFETY: forwarded.
        unsafe { free(block) }
    }

    /// [`calloc`](super::calloc).
    ///
    /// # Safety
    /// As `calloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_calloc(count: usize, size: usize) -> *mut c_void {
        // SAFETY: forwarded.
        unsafe { calloc(count, size) }
    }

    /// [`realloc`](super::realloc).
    ///
    /// # Safety
    /// As `realloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_realloc(block: *mut c_void, size: usize) -> *mut c_void {
        // SAFETY: forwarded.
        unsafe { realloc(block, size) }
    }

    /// [`memalign`](super::memalign).
    ///
    /// # Safety
    /// As `memalign`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_memalign(align: usize, size: usize) -> *mut c_void {
        // SAFETY: forwarded.
        unsafe { memalign(align, size) }
    }

    /// [`valloc`](super::valloc).
    ///
    /// # Safety
    /// As `valloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_valloc(size: usize) -> *mut c_void {
        // SAFETY: forwarded.
        unsafe { valloc(size) }
    }

    /// [`pvalloc`](super::pvalloc).
    ///
    /// # Safety
    /// As `pvalloc`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __libc_pvalloc(size: usize) -> *mut c_void {
        // SAFETY: forwarded.
        unsafe { pvalloc(size) }
    }
}
