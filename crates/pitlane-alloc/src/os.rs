//! The operating system's side: anonymous mappings, purging, and a coarse clock.
//!
//! Every call here is a plain system call through `libc`; none allocates, none panics, and
//! each reports failure as `None` or `false` for the caller to turn into a null pointer.

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicUsize, Ordering};

/// The smallest OS page the allocator assumes, and the unit of a large block's place in its
/// mapping (its header, its colour, see `large`). Lengths of mappings are multiples of
/// [`granule`] instead, which is larger on kernels with larger pages.
pub(crate) const OS_PAGE: usize = 4096;

/// The kernel's page size if larger than [`OS_PAGE`] (read once), else [`OS_PAGE`]; 0 until
/// first read.
static GRANULE: AtomicUsize = AtomicUsize::new(0);

/// The unit of every length the allocator maps, unmaps or remaps, and of every split of a
/// mapping: the kernel's page size, at least [`OS_PAGE`]. `munmap` and `mremap` round a
/// length up to the kernel's page, so a run of a mapping split at a finer unit (AArch64
/// kernels with 16 KiB or 64 KiB pages) would take its neighbour, maybe a live block, with it
/// when unmapped or remapped (`large::tests`).
#[inline]
pub(crate) fn granule() -> usize {
    let granule = GRANULE.load(Ordering::Relaxed);
    if granule != 0 {
        return granule;
    }
    granule_slow()
}

#[cold]
fn granule_slow() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let granule = if page > 0 && (page as usize).is_power_of_two() {
        (page as usize).max(OS_PAGE)
    } else {
        OS_PAGE
    };
    GRANULE.store(granule, Ordering::Relaxed);
    granule
}

/// Makes [`granule`] `granule` (a power of two, at least [`OS_PAGE`]), as a kernel with such
/// pages would: for tests on a kernel with 4 KiB pages (a multiple of the kernel's page is
/// still a valid length there).
#[cfg(test)]
pub(crate) fn set_granule_for_tests(granule: usize) {
    assert!(granule.is_power_of_two() && granule >= granule_slow());
    GRANULE.store(granule, Ordering::Relaxed);
}

/// Maps `len` bytes (a multiple of [`granule`]) of fresh, zeroed, private anonymous memory,
/// subject to the kernel's overcommit policy (as glibc's large blocks are: a request far
/// beyond memory and swap fails instead of mapping address space that can never be backed).
pub(crate) fn map(len: usize) -> Option<NonNull<u8>> {
    map_with(len, 0)
}

/// Like [`map`], but reserving no swap: for segments, which only ever touch what they use.
pub(crate) fn map_reserve(len: usize) -> Option<NonNull<u8>> {
    map_with(len, libc::MAP_NORESERVE)
}

fn map_with(len: usize, flags: libc::c_int) -> Option<NonNull<u8>> {
    // SAFETY: no `MAP_FIXED`: the kernel chooses the address.
    unsafe {
        mmap_anonymous(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
        )
    }
}

/// `mmap` of `len` bytes of anonymous private memory, at `at` (null: where the kernel
/// chooses) with protection `prot` and the extra `flags`; `None` where it fails.
///
/// # Safety
/// Without `MAP_FIXED` in `flags`, none (the mapping touches no existing memory). With it,
/// the `len` bytes at `at` are a reservation of the caller that nothing else maps or uses:
/// they are replaced.
unsafe fn mmap_anonymous(
    at: *mut u8,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping; where it may land is the caller's contract.
    let mapped = unsafe {
        libc::mmap(
            at.cast(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if mapped == libc::MAP_FAILED {
        None
    } else {
        NonNull::new(mapped.cast::<u8>())
    }
}

/// Maps `len` bytes (a multiple of [`granule`]) aligned to `align` (a power of two, at least
/// [`OS_PAGE`]), with [`map`]'s accounting (or [`map_reserve`]'s, with `reserve`). It first
/// reserves `len + align` bytes of address space that cannot be touched, which the kernel's
/// overcommit policy does not count, then maps the aligned `len` bytes inside it in place and
/// gives back the parts before and after them: the policy weighs the `len` bytes kept, not
/// the whole span (an alignment of half the memory would otherwise be refused for asking
/// twice, where glibc's `memalign` is served).
pub(crate) fn map_aligned(len: usize, align: usize, reserve: bool) -> Option<NonNull<u8>> {
    let flags = if reserve { libc::MAP_NORESERVE } else { 0 };
    if align <= OS_PAGE {
        return map_with(len, flags);
    }
    let over = len.checked_add(align)?;
    // SAFETY: no `MAP_FIXED`; `PROT_NONE` and `MAP_NORESERVE`: address space only.
    let span =
        unsafe { mmap_anonymous(ptr::null_mut(), over, libc::PROT_NONE, libc::MAP_NORESERVE) }?;
    let start = span.as_ptr();
    let lead = start.align_offset(align);
    // SAFETY: `lead < align`, so `start + lead + len` stays inside the `len + align` span.
    let aligned = unsafe { start.add(lead) };
    // SAFETY: `MAP_FIXED` replaces pages of the span just reserved, which nothing else can
    // have mapped or be using: the aligned run becomes ordinary memory, in place.
    let Some(kept) = (unsafe {
        mmap_anonymous(
            aligned,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_FIXED | flags,
        )
    }) else {
        unmap(start, over);
        return None;
    };
    if lead > 0 {
        unmap(start, lead);
    }
    let tail = align - lead;
    if tail > 0 {
        // SAFETY: the tail starts `len` bytes after `aligned`, inside the span.
        unmap(unsafe { aligned.add(len) }, tail);
    }
    // The pointer the kernel gave for the mapping kept (the same address as `aligned`).
    Some(kept)
}

/// Gives back a mapping (or part of one) made by [`map`].
pub(crate) fn unmap(at: *mut u8, len: usize) {
    // SAFETY: the caller hands back pages of a mapping it made and that nothing uses any more;
    // an error (which can only be a bad argument) leaves the mapping as it was.
    unsafe { libc::munmap(at.cast(), len) };
}

/// Tells the kernel that the pages of `[at, at + len)` are free: their physical memory goes
/// back at once, and they read as zero when touched again.
pub(crate) fn purge(at: *mut u8, len: usize) -> bool {
    // SAFETY: the range lies inside one of our mappings and holds nothing anyone reads.
    unsafe { libc::madvise(at.cast(), len, libc::MADV_DONTNEED) == 0 }
}

/// Grows or shrinks the mapping at `at` from `old_len` to `new_len` bytes, moving it if the
/// kernel must; the contents move with it (page tables, no copy).
pub(crate) fn remap(at: *mut u8, old_len: usize, new_len: usize) -> Option<NonNull<u8>> {
    // SAFETY: `at`/`old_len` name a whole mapping of ours; on success the old range is gone
    // and the new one holds its contents.
    let moved = unsafe { libc::mremap(at.cast(), old_len, new_len, libc::MREMAP_MAYMOVE) };
    if moved == libc::MAP_FAILED {
        None
    } else {
        // The pointer comes from the kernel, like `mmap`'s: it is the new mapping's own.
        NonNull::new(moved.cast::<u8>())
    }
}

/// Milliseconds on a coarse monotonic clock (the vDSO's, no system call).
pub(crate) fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC_COARSE exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000
}

/// How many CPUs are online (at least 1), without allocating.
pub(crate) fn cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 { 1 } else { n as usize }
}
