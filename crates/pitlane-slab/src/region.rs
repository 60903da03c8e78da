//! The memory a slab lives in: process heap, an anonymous shared mapping, or a mapped file.
//! This is the only module that asks the operating system for memory.

use std::alloc::Layout;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use crate::layout::PAGE;

/// Which kind of memory a slab lives in.
///
/// ```
/// use pitlane_slab::{Config, RegionKind, Slab};
/// let slab = Slab::heap(Config::new(8, 4))?;
/// assert_eq!(slab.region_kind(), RegionKind::Heap);
/// # Ok::<(), pitlane_slab::OpenError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegionKind {
    /// Memory of this process's heap, zeroed.
    Heap,
    /// An anonymous `MAP_SHARED` mapping: shared with the children forked after it was made.
    Anonymous,
    /// A file mapped `MAP_SHARED`, possibly by several processes at different addresses.
    File,
}

/// A zeroed block of `len` bytes, page-aligned, owned until drop.
pub(crate) struct Region {
    base: NonNull<u8>,
    len: usize,
    kind: RegionKind,
}

// SAFETY: the region is plain memory; every access to it goes through atomics (words, and the
// relaxed atomic copies of object bytes) made by the slab, which is what makes sharing it
// between threads sound.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// `len` zeroed bytes of heap.
    pub(crate) fn heap(len: usize) -> io::Result<Self> {
        let layout = Layout::from_size_align(len, PAGE)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "region too large"))?;
        // SAFETY: `len` is not zero (a region always holds a header).
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        let base = NonNull::new(base).ok_or(io::ErrorKind::OutOfMemory)?;
        Ok(Self {
            base,
            len,
            kind: RegionKind::Heap,
        })
    }

    /// `len` zeroed bytes mapped `MAP_SHARED | MAP_ANONYMOUS`.
    pub(crate) fn anonymous(len: usize) -> io::Result<Self> {
        Self::map(
            len,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            RegionKind::Anonymous,
        )
    }

    /// The first `len` bytes of the file `fd`, mapped `MAP_SHARED` read-write.
    pub(crate) fn file(fd: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        Self::map(len, libc::MAP_SHARED, fd.as_raw_fd(), RegionKind::File)
    }

    fn map(len: usize, flags: libc::c_int, fd: libc::c_int, kind: RegionKind) -> io::Result<Self> {
        // SAFETY: a fresh mapping at an address the kernel picks; it overlaps nothing of ours.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or(io::ErrorKind::OutOfMemory)?;
        Ok(Self { base, len, kind })
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn kind(&self) -> RegionKind {
        self.kind
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        match self.kind {
            RegionKind::Heap => {
                // SAFETY: allocated in `heap` with this very layout (it was valid then).
                unsafe {
                    std::alloc::dealloc(
                        self.base.as_ptr(),
                        Layout::from_size_align_unchecked(self.len, PAGE),
                    )
                }
            }
            RegionKind::Anonymous | RegionKind::File => {
                // SAFETY: the mapping made in `map`, of this length; no reference into it
                // outlives the slab that owns this region.
                unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
            }
        }
    }
}
