//! A slab in a file that several processes map at once, with attachment slots, owner tags and
//! recovery of what dead processes held.
//!
//! # Owners and liveness
//!
//! Each handle attaches in one of [`MAX_ATTACHED`](crate::MAX_ATTACHED) slots: it takes an
//! open-file-description lock (`F_OFD_SETLK`, write) on byte `LOCK_BASE + slot` of the file
//! (past its end: the lock is advisory and touches no data), then advances the slot's epoch
//! word in the region. Its owner tag is `epoch << 8 | (slot + 1)`. The kernel drops the lock
//! when the process exits or is killed, whatever way it dies.
//!
//! An owner tag `(e, s)` (31 bits: a 23-bit epoch and the slot plus one) is dead when slot
//! `s`'s epoch is no longer `e` (a later handle took the slot, which it can only do after the
//! lock was released), or when the epoch is `e` but nobody holds the slot's lock
//! (`F_OFD_GETLK`). A handle that took the lock but has not yet advanced the epoch makes a
//! dead `(e, s)` look alive: recovery then leaves its objects for a later `recover()`, never
//! the reverse. The epoch wraps after 2^23 attachments of one slot; a tag of a holder that many
//! attachments back looks alive while the slot's current holder is (its objects wait).
//!
//! # Truncation by a peer
//!
//! A process that may write the file can shrink it (`ftruncate`) at any moment. The pages past
//! the new end are then gone from every mapping, and the next access to one of them raises
//! `SIGBUS` in whichever process touches it — for any `MAP_SHARED` file, not only here; a
//! signal handler cannot unwind out of the access safely, so this crate does not try. What it
//! does:
//! - [`ShmSlab::create_memfd`] makes the slab in a memory file whose size is **sealed**
//!   (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`): the kernel refuses every truncation, so
//!   the hazard is gone for slabs shared that way ([`ShmSlab::is_sealed`] says which kind a
//!   handle has).
//! - [`ShmSlab::open`] refuses a file shorter than its header says
//!   ([`OpenError::Truncated`]), and [`ShmSlab::recover`] first checks the length again.
//!
//! What remains for a slab in a named file (`create`/`open`): a peer that truncates it after
//! those checks makes the processes that touch the lost pages die of `SIGBUS`. The file's mode
//! (0600 by default) decides who can; regular files cannot be sealed.
//!
//! # Space
//!
//! `create` and `create_memfd` reserve the region's space with `fallocate(2)`, and the `open`
//! calls reserve what a file left sparse lacks, so that a full filesystem is an error at
//! creation or attach rather than a `SIGBUS` at a later write: see "Space" in [`ShmSlab`]'s
//! docs.
//!
//! # Objects in flight
//!
//! Each slot has `LANES` intent records, one per thread inside an alloc or free; the
//! protocol and how recovery decides which announced objects were lost are in the
//! `protocol` module's docs. [`ShmSlab::recover`] resolves the records of dead slots;
//! a handle attaching to a slot first resolves what the slot's previous holder left there.
//! A record whose resolution is put off (a live thread still names its object) stays where
//! it is, in either case, for a later recovery: in a dead slot, the next `recover()` or the
//! slot's next holder looks again; in the attaching handle's own slot, the handle leaves that
//! lane unused and its own `recover()` looks again (or, once it detached, any recovery). Such
//! a kept record is marked in its lane (word 2 holds a copy of the record) while the
//! recovery lock is held: other recoveries treat it as frozen, as a dead slot's records, and
//! do not wait for it as for a live thread's (two holders whose kept records named one object
//! would otherwise put off each other's resolution for as long as both stayed attached).
//! Recoveries run one at a time: an open-file-description lock on byte `LOCK_BASE +
//! MAX_ATTACHED` (waited for), plus a mutex for the threads sharing one handle. An attaching
//! handle takes that lock too, after its slot's lock and before its first operation, so that
//! a recovery which found the slot free never sees the new holder's intent records.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use crate::layout::{
    Geometry, HEADER_BYTES, HeaderFault, LANES, MAGIC, MAX_ATTACHED, parse_header,
};
use crate::protocol::{self, DeadLane, Words};
use crate::region::Region;
use crate::{Config, OpenError, Slab, SlabError};

/// Where the attachment locks lie in the file's byte space (far past any region).
const LOCK_BASE: i64 = 1 << 48;

/// A [`Slab`] in a file mapped `MAP_SHARED`; dereferences to the slab (`&Slab`).
///
/// ```
/// use pitlane_slab::{Config, ShmSlab};
///
/// let dir = std::env::temp_dir().join(format!("pitlane-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("sessions.slab");
/// let config = Config::new(64, 1000).with_type_tag(0x5e55);
/// let a = {
///     let slab = ShmSlab::create(&path, config)?;
///     let a = slab.alloc().unwrap();
///     slab.write(a, 0, b"kept")?;
///     a
/// };
/// // Reopened later (by this or another process): the object is still there.
/// let slab = ShmSlab::open(&path, config)?;
/// let mut buf = [0; 4];
/// slab.read(a, 0, &mut buf)?;
/// assert_eq!(&buf, b"kept");
/// // Its owner detached, so it counts as dead: recovery frees the object.
/// assert_eq!(slab.recover()?.reclaimed, 1);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Space
///
/// A file sized by `ftruncate` alone is sparse: no disk block or memory page backs it until it
/// is first written, and a write into the mapping that finds the filesystem full (a small
/// tmpfs such as a container's `/dev/shm`, a full disk, a quota, a memory cgroup's limit)
/// kills the writing process with `SIGBUS`. So [`ShmSlab::create`] and
/// [`ShmSlab::create_memfd`] reserve the whole region with `fallocate(2)` (mode 0: allocate,
/// change no byte) before formatting it, and a filesystem without room fails the call with
/// [`OpenError::Io`] (`ENOSPC`, `EFBIG`, `EDQUOT`, ...), the file removed. The cost: the
/// region's memory or disk space is taken at creation, not as objects are first used. On a
/// filesystem that cannot reserve space (`fallocate` fails with `EOPNOTSUPP`, `EINVAL` or
/// `ENOSYS`) the file stays sparse, and the hazard with it. [`ShmSlab::open`],
/// [`ShmSlab::open_any`] and [`ShmSlab::open_fd`] reserve the region too (allocating only what
/// is not yet, changing no byte), so a slab file that another program left sparse (copied, or a
/// hole punched in it) is given its space at attach, or refused with [`OpenError::Io`]. What no
/// call can prevent: a peer that punches a hole after the attach.
///
/// # No `&mut Slab`
///
/// A handle gives out no `&mut Slab`, so that the slab and the file whose locks say which of
/// its owners are alive stay together. (Were the slabs of two handles on two files swapped,
/// `recover()` would judge the owners of one file by the locks of the other and free a live
/// holder's objects.) The one `&mut self` method of [`Slab`],
/// [`reclaim_lost`](ShmSlab::reclaim_lost), is forwarded.
///
/// ```compile_fail,E0596
/// fn swap(mut a: pitlane_slab::ShmSlab, mut b: pitlane_slab::ShmSlab) {
///     std::mem::swap(&mut *a, &mut *b); // no `DerefMut`: a `ShmSlab` lends only `&Slab`
/// }
/// ```
#[derive(Debug)]
pub struct ShmSlab {
    slab: Slab,
    file: File,
    slot: usize,
    path: PathBuf,
    /// Serialises the recoveries of the threads sharing this handle (the file lock does not:
    /// they share its open file description), and holds the lanes of this handle's slot that
    /// still hold records of the slot's previous holder whose resolution was put off (see
    /// [`ShmSlab::open`]): this handle's threads never claim them; its `recover()` resolves them.
    recovering: Mutex<Vec<usize>>,
}

impl std::borrow::Borrow<Slab> for ShmSlab {
    fn borrow(&self) -> &Slab {
        &self.slab
    }
}

/// The slab's file, to pass to other processes (see [`ShmSlab::create_memfd`]).
impl AsFd for ShmSlab {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Deref for ShmSlab {
    type Target = Slab;
    fn deref(&self) -> &Slab {
        &self.slab
    }
}

/// What [`ShmSlab::recover`] did.
///
/// ```
/// let r = pitlane_slab::RecoverReport::default();
/// assert_eq!(r.reclaimed, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoverReport {
    /// Objects put back on the freelist: those of dead owners, and those a dead process was
    /// taking or giving back when it died.
    pub reclaimed: u32,
    /// Of those, the objects a dead process had in flight (named by its intent records).
    pub in_flight: u32,
    /// Objects a dead process had in flight that recovery left for a later `recover()`,
    /// because a live thread's intent record still named them after it waited (a thread
    /// descheduled in the middle of an alloc or free, or a scribbled record). Records that this
    /// handle's slot kept from its previous holder (see [`ShmSlab::open`]) count here too.
    pub deferred: u32,
    /// Attachment slots held by a live handle (this one included) when recovery ran.
    pub live_slots: u32,
}

fn cstring(path: &Path) -> Result<std::ffi::CString, OpenError> {
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| OpenError::Io(io::Error::new(io::ErrorKind::InvalidInput, "NUL in path")))
}

/// The byte whose lock admits one recovery at a time.
const RECOVERY_LOCK: usize = MAX_ATTACHED;

/// The epoch bits of an owner tag.
const EPOCH_MASK: u64 = (1 << 23) - 1;

fn lock_record(slot: usize, kind: libc::c_short) -> libc::flock {
    // SAFETY: `flock` is plain data; all-zero is a valid value (l_pid must be 0 for OFD locks).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = LOCK_BASE + slot as i64;
    fl.l_len = 1;
    fl
}

impl ShmSlab {
    /// Creates the file `path` (it must not exist; a symbolic link is not followed) with
    /// mode 0600, reserves its space (see [Space](ShmSlab#space)) and formats an empty slab in
    /// it.
    ///
    /// # Errors
    /// [`OpenError::InvalidConfig`], or [`OpenError::Io`] (`AlreadyExists` when the path
    /// exists, including as a symbolic link; `StorageFull`, `FileTooLarge` and the like when
    /// the filesystem cannot hold the region). On an error the file is removed.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-create-{}", std::process::id()));
    /// let slab = pitlane_slab::ShmSlab::create(&path, pitlane_slab::Config::new(8, 16))?;
    /// assert!(pitlane_slab::ShmSlab::create(&path, *slab.config()).is_err());
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(path: impl AsRef<Path>, config: Config) -> Result<Self, OpenError> {
        Self::create_with_mode(path, config, 0o600)
    }

    /// [`ShmSlab::create`] with the file's permission bits (applied exactly, whatever the
    /// umask): read, write and execute for owner, group and others, nothing else. The
    /// set-user-ID, set-group-ID and sticky bits are refused: they mean nothing for a data
    /// file, and a set-user-ID file that others may write through a mapping is a way to run
    /// their code as its owner.
    ///
    /// # Errors
    /// As [`ShmSlab::create`]; [`OpenError::InvalidConfig`] for a mode with any bit outside
    /// `0o777`.
    ///
    /// ```
    /// use std::os::unix::fs::PermissionsExt;
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-mode-{}", std::process::id()));
    /// let _slab = pitlane_slab::ShmSlab::create_with_mode(&path, pitlane_slab::Config::new(8, 4), 0o640)?;
    /// assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o7777, 0o640);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with_mode(
        path: impl AsRef<Path>,
        config: Config,
        mode: u32,
    ) -> Result<Self, OpenError> {
        let path = path.as_ref();
        if mode & !0o777 != 0 {
            return Err(OpenError::InvalidConfig(
                "mode with bits outside 0o777 (set-user-ID, set-group-ID, sticky or no mode bit)",
            ));
        }
        let geo = Geometry::of(config).map_err(OpenError::InvalidConfig)?;
        let c = cstring(path)?;
        // SAFETY: a NUL-terminated path; the flags create a new file and never follow a link.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(OpenError::Io(io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let file = unsafe { File::from_raw_fd(fd) };
        let formatted = (|| {
            // SAFETY: a valid descriptor; fchmod only changes the permission bits.
            if unsafe { libc::fchmod(file.as_raw_fd(), mode as libc::mode_t) } != 0 {
                return Err(OpenError::Io(io::Error::last_os_error()));
            }
            file.set_len(geo.len as u64).map_err(OpenError::Io)?;
            // Mapped before the space is reserved: a region too large for the address space
            // fails here, before it would be reserved.
            let region = Region::file(file.as_fd(), geo.len).map_err(OpenError::Io)?;
            reserve(&file, geo.len).map_err(OpenError::Io)?;
            let slab = Slab::format(region, geo, 0);
            Self::attach(slab, file, path)
        })();
        if formatted.is_err() {
            let _ = std::fs::remove_file(path);
        }
        formatted
    }

    /// Opens the slab in `path` (a symbolic link is not followed) after checking that its
    /// header is whole and describes exactly `expected`.
    ///
    /// The new handle takes a free attachment slot and resolves what that slot's previous
    /// holder left in flight; if another handle is running [`ShmSlab::recover`] meanwhile, it
    /// waits for that recovery to end first (every way of attaching does). An intent record of
    /// the previous holder whose object a live thread of another handle still names (after a
    /// short wait) is kept, not dropped: it stays in its lane, which the new handle then does
    /// not use (it has fewer lanes for concurrent allocs and frees until then), and the
    /// handle's [`ShmSlab::recover`] resolves it later (after this handle detached, any
    /// recovery or the slot's next holder does). `open` does not wait for the other thread:
    /// a scribbled record may name an object for ever.
    ///
    /// # Errors
    /// [`OpenError::NotASlab`], [`OpenError::VersionMismatch`], [`OpenError::ConfigMismatch`],
    /// [`OpenError::Truncated`], [`OpenError::Corrupt`], [`OpenError::TooManyAttached`] or
    /// [`OpenError::Io`] (`ENOSPC` among others: the region is reserved as at creation, see
    /// [Space](ShmSlab#space)); never a panic, whatever the file holds.
    ///
    /// ```
    /// use pitlane_slab::{Config, OpenError, ShmSlab};
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-open-{}", std::process::id()));
    /// let _made = ShmSlab::create(&path, Config::new(8, 4))?;
    /// let err = ShmSlab::open(&path, Config::new(16, 4)).unwrap_err();
    /// assert!(matches!(err, OpenError::ConfigMismatch { .. }));
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, expected: Config) -> Result<Self, OpenError> {
        Self::open_checked(path.as_ref(), Some(expected))
    }

    /// Opens the slab in `path` whatever its configuration (read from the validated header):
    /// for tools that inspect slabs.
    ///
    /// # Errors
    /// As [`ShmSlab::open`], less `ConfigMismatch`.
    ///
    /// ```
    /// use pitlane_slab::{Config, ShmSlab};
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-any-{}", std::process::id()));
    /// let _made = ShmSlab::create(&path, Config::new(8, 4).with_type_tag(9))?;
    /// assert_eq!(ShmSlab::open_any(&path)?.config().type_tag, 9);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_any(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        Self::open_checked(path.as_ref(), None)
    }

    fn open_checked(path: &Path, expected: Option<Config>) -> Result<Self, OpenError> {
        let c = cstring(path)?;
        // SAFETY: a NUL-terminated path; the flags never follow a link nor create a file.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(OpenError::Io(io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let file = unsafe { File::from_raw_fd(fd) };
        Self::open_file(file, path, expected)
    }

    /// Validates the slab in `file` and attaches to it.
    fn open_file(file: File, path: &Path, expected: Option<Config>) -> Result<Self, OpenError> {
        let meta = file.metadata().map_err(OpenError::Io)?;
        if !meta.file_type().is_file() {
            return Err(OpenError::NotASlab);
        }
        let len = meta.len();
        let mut header = [0_u8; HEADER_BYTES];
        let got = read_prefix(&file, &mut header).map_err(OpenError::Io)?;
        if got < 8 || u64::from_le_bytes(header[..8].try_into().unwrap_or([0; 8])) != MAGIC {
            return Err(OpenError::NotASlab);
        }
        if got < HEADER_BYTES {
            return Err(OpenError::Truncated {
                expected: HEADER_BYTES as u64,
                found: len,
            });
        }
        let geo = parse_header(&header).map_err(|fault| match fault {
            HeaderFault::NotASlab => OpenError::NotASlab,
            HeaderFault::Version(found) => OpenError::VersionMismatch {
                expected: crate::FORMAT_VERSION,
                found,
            },
            HeaderFault::Corrupt(what) => OpenError::Corrupt(what),
        })?;
        if let Some(expected) = expected {
            if expected != geo.config {
                return Err(OpenError::ConfigMismatch {
                    expected,
                    found: geo.config,
                });
            }
        }
        if len < geo.len as u64 {
            return Err(OpenError::Truncated {
                expected: geo.len as u64,
                found: len,
            });
        }
        let region = Region::file(file.as_fd(), geo.len).map_err(OpenError::Io)?;
        // A file another program left sparse (a copy, a hole punched in it) gets its space
        // here, as `create` gives it: no room is this error, not a `SIGBUS` in a later write.
        reserve(&file, geo.len).map_err(OpenError::Io)?;
        Self::attach(Slab::attach(region, geo, 0), file, path)
    }

    /// Creates a slab in an anonymous memory file (`memfd_create`, named `name` for
    /// `/proc/*/fd` listings) whose size is **sealed**: no process can shrink or grow it, so
    /// none can make the others take `SIGBUS` by truncating it (see [`ShmSlab`]). The file has
    /// no path; share it by its descriptor ([`AsFd`]): a child inherits it across `fork` (and
    /// `exec`, once close-on-exec is cleared on a duplicate), another process receives it
    /// over a Unix socket, and each calls [`ShmSlab::open_fd`] to attach with its own slot.
    ///
    /// Its memory is reserved at creation (see [Space](ShmSlab#space)).
    ///
    /// # Errors
    /// [`OpenError::InvalidConfig`]; [`OpenError::Io`] when the memory file cannot be made,
    /// sealed or given its memory (`ENOSPC`, `ENOMEM`: a memory cgroup's limit, for one).
    ///
    /// ```
    /// use std::os::fd::AsFd;
    /// let config = pitlane_slab::Config::new(32, 64);
    /// let slab = pitlane_slab::ShmSlab::create_memfd("sessions", config)?;
    /// assert!(slab.is_sealed()?);
    /// let peer = pitlane_slab::ShmSlab::open_fd(slab.as_fd(), config)?;
    /// assert_ne!(peer.slot(), slab.slot());
    /// // Truncating the file is refused by the kernel.
    /// let file = std::fs::File::from(slab.as_fd().try_clone_to_owned()?);
    /// assert!(file.set_len(0).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_memfd(name: &str, config: Config) -> Result<Self, OpenError> {
        let geo = Geometry::of(config).map_err(OpenError::InvalidConfig)?;
        let c = std::ffi::CString::new(name).map_err(|_| {
            OpenError::Io(io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
        })?;
        // SAFETY: a NUL-terminated name and valid flags.
        let fd =
            unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return Err(OpenError::Io(io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just made and is owned by nothing else.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(geo.len as u64).map_err(OpenError::Io)?;
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: a valid descriptor of a memory file made with sealing allowed.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(OpenError::Io(io::Error::last_os_error()));
        }
        // Mapped first, so that a region too large for the address space fails before its
        // memory is reserved; the reservation stays within the sealed size.
        let region = Region::file(file.as_fd(), geo.len).map_err(OpenError::Io)?;
        reserve(&file, geo.len).map_err(OpenError::Io)?;
        let slab = Slab::format(region, geo, 0);
        let path = PathBuf::from(format!("memfd:{name}"));
        Self::attach(slab, file, &path)
    }

    /// Attaches to the slab in the file `fd` refers to (a sealed memory file from
    /// [`ShmSlab::create_memfd`], inherited or received, or any slab file), after the same
    /// checks as [`ShmSlab::open`]. The file is reopened (through `/proc/self/fd`), so this
    /// handle has its own open file description and attachment slot even when `fd` is shared
    /// with the parent that forked this process.
    ///
    /// # Errors
    /// As [`ShmSlab::open`].
    ///
    /// ```
    /// use std::os::fd::AsFd;
    /// let config = pitlane_slab::Config::new(8, 4);
    /// let slab = pitlane_slab::ShmSlab::create_memfd("doc", config)?;
    /// let id = slab.alloc().unwrap();
    /// let peer = pitlane_slab::ShmSlab::open_fd(slab.as_fd(), config)?;
    /// assert_eq!(peer.owner_of(id)?, Some(slab.owner_tag()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_fd(fd: BorrowedFd<'_>, expected: Config) -> Result<Self, OpenError> {
        let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        let c = cstring(&path)?;
        // SAFETY: a NUL-terminated path; following this one link is the point (it names the
        // open file itself, not a path another process could swap).
        let raw = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(OpenError::Io(io::Error::last_os_error()));
        }
        // SAFETY: `raw` was just opened and is owned by nothing else.
        let file = unsafe { File::from_raw_fd(raw) };
        Self::open_file(file, &path, Some(expected))
    }

    /// Whether the file's size is sealed against shrinking (a slab from
    /// [`ShmSlab::create_memfd`]), so that no peer can truncate it.
    ///
    /// # Errors
    /// [`SlabError::Io`] when the query fails.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-seal-{}", std::process::id()));
    /// let slab = pitlane_slab::ShmSlab::create(&path, pitlane_slab::Config::new(8, 4))?;
    /// assert!(!slab.is_sealed()?); // an ordinary file cannot be sealed
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_sealed(&self) -> Result<bool, SlabError> {
        // SAFETY: a valid descriptor; F_GET_SEALS takes no argument.
        let seals = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_GET_SEALS) };
        match seals {
            s if s >= 0 => Ok(s & libc::F_SEAL_SHRINK != 0),
            _ => match io::Error::last_os_error().raw_os_error() {
                // Files that do not support seals.
                Some(libc::EINVAL) => Ok(false),
                _ => Err(SlabError::Io(io::Error::last_os_error().kind())),
            },
        }
    }

    /// Fails when the file is now shorter than the slab (a peer truncated it): touching the
    /// lost pages would raise `SIGBUS`.
    fn check_len(&self) -> Result<(), SlabError> {
        let len = self
            .file
            .metadata()
            .map_err(|e| SlabError::Io(e.kind()))?
            .len();
        if len < self.slab.region_len() as u64 {
            return Err(SlabError::Corrupt("the file was truncated by a peer"));
        }
        Ok(())
    }

    /// Takes a free attachment slot and the owner tag that goes with it.
    fn attach(mut slab: Slab, file: File, path: &Path) -> Result<Self, OpenError> {
        for slot in 0..MAX_ATTACHED {
            let fl = lock_record(slot, libc::F_WRLCK as libc::c_short);
            // SAFETY: a valid descriptor and a valid lock record.
            if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) } == 0 {
                let epoch = slab
                    .epoch_word(slot)
                    .fetch_add(1, Ordering::AcqRel)
                    .wrapping_add(1)
                    & EPOCH_MASK;
                slab.set_owner((epoch << 8 | (slot as u64 + 1)) as u32, slot);
                let handle = Self {
                    slab,
                    file,
                    slot,
                    path: path.to_path_buf(),
                    recovering: Mutex::new(Vec::new()),
                };
                // What the slot's previous holder left in flight. Damaged records or chains
                // are left alone (they leak, which `check` reports); a failed lock is an error.
                match handle.resolve_own_lanes() {
                    Ok(()) | Err(SlabError::Corrupt(_)) => {}
                    Err(e) => return Err(OpenError::Io(io::Error::other(e.to_string()))),
                }
                return Ok(handle);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EACCES) => continue,
                _ => return Err(OpenError::Io(err)),
            }
        }
        Err(OpenError::TooManyAttached)
    }

    /// The file's path as given when it was created or opened.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-path-{}", std::process::id()));
    /// let slab = pitlane_slab::ShmSlab::create(&path, pitlane_slab::Config::new(8, 4))?;
    /// assert_eq!(slab.path(), path);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This handle's attachment slot (`0..MAX_ATTACHED`).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-slot-{}", std::process::id()));
    /// let a = pitlane_slab::ShmSlab::create(&path, pitlane_slab::Config::new(8, 4))?;
    /// let b = pitlane_slab::ShmSlab::open_any(&path)?;
    /// assert_ne!(a.slot(), b.slot());
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Whether another handle (in any process) holds attachment slot `slot`.
    fn slot_held_by_other(&self, slot: usize) -> Result<bool, SlabError> {
        let mut fl = lock_record(slot, libc::F_WRLCK as libc::c_short);
        // SAFETY: a valid descriptor and a valid lock record, which F_OFD_GETLK overwrites.
        if unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) } != 0 {
            return Err(SlabError::Io(io::Error::last_os_error().kind()));
        }
        Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
    }

    /// The attachment slots held now, this handle's included.
    ///
    /// # Errors
    /// [`SlabError::Io`] when the lock query fails.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-att-{}", std::process::id()));
    /// let a = pitlane_slab::ShmSlab::create(&path, pitlane_slab::Config::new(8, 4))?;
    /// assert_eq!(a.attached()?, vec![a.slot()]);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn attached(&self) -> Result<Vec<usize>, SlabError> {
        let mut live = Vec::new();
        for slot in 0..MAX_ATTACHED {
            if slot == self.slot || self.slot_held_by_other(slot)? {
                live.push(slot);
            }
        }
        Ok(live)
    }

    /// Whether the owner tag `tag` belongs to a handle that is still attached.
    ///
    /// # Errors
    /// [`SlabError::Io`] when the lock query fails.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-alive-{}", std::process::id()));
    /// let slab = pitlane_slab::ShmSlab::create(&path, pitlane_slab::Config::new(8, 4))?;
    /// assert!(slab.is_owner_alive(slab.owner_tag())?);
    /// assert!(!slab.is_owner_alive(12345 << 8 | 7)?);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_owner_alive(&self, tag: u64) -> Result<bool, SlabError> {
        let mut cache = [None; MAX_ATTACHED];
        self.alive(tag, &mut cache)
    }

    fn alive(&self, tag: u64, cache: &mut [Option<(u64, bool)>]) -> Result<bool, SlabError> {
        if tag == self.owner_tag() {
            return Ok(true);
        }
        let slot = match (tag & 0xff) as usize {
            // Tags of slot 0 are never written by file handles: garbage, so no live owner.
            0 => return Ok(false),
            s if s > MAX_ATTACHED => return Ok(false),
            s => s - 1,
        };
        let epoch = tag >> 8;
        let now = self.slab.epoch_word(slot).load(Ordering::Acquire) & EPOCH_MASK;
        if now != epoch {
            return Ok(false);
        }
        if let Some((_, held)) = cache[slot].filter(|&(seen, _)| seen == now) {
            return Ok(held);
        }
        // The epoch read before the query: if the lock is free now, that epoch's holder is
        // gone for good (a new holder advances the epoch before allocating).
        let held = slot == self.slot || self.slot_held_by_other(slot)?;
        cache[slot] = Some((now, held));
        Ok(held)
    }

    /// Returns to the freelist every object whose owner is dead (its process exited or was
    /// killed, or its handle was dropped), and every object a dead process was taking off or
    /// putting back on a freelist when it died (named by its intent records; see the crate
    /// docs), including the records this handle's slot kept from its previous holder because
    /// the attach put their resolution off (see [`ShmSlab::open`]). Safe to run at any time,
    /// while other processes allocate and free; recoveries run one at a time (a second waits
    /// for the first).
    ///
    /// While it runs, each shard named by a dead process's intent is detached for a moment:
    /// an alloc that finds every other shard empty then returns `None`.
    ///
    /// # Errors
    /// [`SlabError::Io`] when a lock fails, [`SlabError::Corrupt`] when a detached chain is
    /// damaged (out-of-range index or cycle: left off the lists).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-rec-{}", std::process::id()));
    /// let config = pitlane_slab::Config::new(8, 4);
    /// let a = pitlane_slab::ShmSlab::create(&path, config)?;
    /// let b = pitlane_slab::ShmSlab::open(&path, config)?;
    /// b.alloc().unwrap();
    /// assert_eq!(a.recover()?.reclaimed, 0); // b is alive
    /// drop(b);
    /// assert_eq!(a.recover()?.reclaimed, 1);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recover(&self) -> Result<RecoverReport, SlabError> {
        let mut inherited = self.recovering.lock().unwrap_or_else(|e| e.into_inner());
        let _file = RecoveryLock::take(&self.file)?;
        self.check_len()?;
        let mut dead_slots = Vec::new();
        for slot in 0..MAX_ATTACHED {
            if slot != self.slot && !self.slot_held_by_other(slot)? {
                dead_slots.push(slot);
            }
        }
        // The records of dead holders, and those this slot's previous holder left here whose
        // resolution was put off (frozen too: this handle's threads never claim their lanes).
        let mut dead: Vec<DeadLane> = dead_slots
            .iter()
            .flat_map(|&slot| slot * LANES..(slot + 1) * LANES)
            .chain(inherited.iter().copied())
            .map(|lane| DeadLane::read(&self.slab, lane))
            .collect();
        let Some((mine, borrowed)) = self.recovery_lanes(&inherited, &mut dead) else {
            return Err(SlabError::Corrupt("no idle intent record for recovery"));
        };
        let resolved = protocol::resolve(&self.slab, mine, &dead, &self.frozen_lanes());
        let mut cache = [None; MAX_ATTACHED];
        let mut failure = None;
        let owned = match resolved {
            Ok(_) => protocol::reclaim_owned(&self.slab, mine[1], self.slab.home_shard(), |tag| {
                if failure.is_some() {
                    return false;
                }
                match self.alive(u64::from(tag), &mut cache) {
                    Ok(alive) => !alive,
                    Err(e) => {
                        failure = Some(e);
                        false
                    }
                }
            }),
            Err(_) => 0,
        };
        let kept = resolved.as_ref().ok().map(|r| r.kept.as_slice());
        self.return_recovery_lanes(mine, &borrowed, &dead, kept, &mut inherited);
        let resolved = resolved.map_err(|e| SlabError::Corrupt(e.0))?;
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(RecoverReport {
            reclaimed: resolved.reclaimed + owned,
            in_flight: resolved.reclaimed,
            deferred: resolved.kept.len() as u32,
            live_slots: self.attached()?.len() as u32,
        })
    }

    /// Two lanes of this handle's slot for a recovery (claimed, busy), and which of them were
    /// borrowed from the `inherited` lanes (those of this slot that hold records of its
    /// previous holder, all read into `dead`). Idle lanes are taken first; an inherited lane is
    /// borrowed only when the inherited records leave fewer than two idle lanes in the slot (a
    /// previous holder that died with that many threads inside an alloc or free): its record,
    /// already read, has its `lane` set to `None` (the recovery's own records go in the lane)
    /// and is written back by [`ShmSlab::return_recovery_lanes`] if the resolution keeps it. A
    /// process killed before that leaves the record lost, and its object with it (reported by
    /// `check`, put back by `reclaim_lost` on a quiescent slab), never listed twice. `None`
    /// when no lane is idle after a wait (other threads of this handle hold them all, or a peer
    /// scribbled over them).
    fn recovery_lanes(
        &self,
        inherited: &[usize],
        dead: &mut [DeadLane],
    ) -> Option<([usize; 2], Vec<usize>)> {
        let idle = LANES.saturating_sub(inherited.len()).min(2);
        let mut claimed = Vec::with_capacity(2);
        for _ in 0..idle {
            match self.slab.lane() {
                Some(lane) => claimed.push(lane),
                None => {
                    for lane in claimed {
                        protocol::release_lane(&self.slab, lane);
                    }
                    return None;
                }
            }
        }
        // Lanes whose record fails its check first (claimed with nothing announced, or torn):
        // resolving them only clears them, so they need not be written back.
        let mut borrowed: Vec<usize> = inherited.to_vec();
        borrowed.sort_by_key(|&lane| {
            dead.iter()
                .any(|d| d.id == lane && d.words[1] == protocol::check(d.words[0]))
        });
        borrowed.truncate(2 - idle);
        for &lane in &borrowed {
            if let Some(d) = dead.iter_mut().find(|d| d.id == lane) {
                d.lane = None;
            }
            protocol::borrow_lane(&self.slab, lane);
            claimed.push(lane);
        }
        Some(([claimed[0], claimed[1]], borrowed))
    }

    /// Gives back the lanes of a recovery after `protocol::resolve` ran over `dead`: a borrowed
    /// lane whose record the resolution kept (`kept`, indices into `dead`; `None` when the
    /// resolution failed midway, which keeps them all) gets its record back, the others go
    /// idle. Then `inherited` names exactly the lanes of this slot that still hold a record of
    /// its previous holder.
    fn return_recovery_lanes(
        &self,
        mine: [usize; 2],
        borrowed: &[usize],
        dead: &[DeadLane],
        kept: Option<&[usize]>,
        inherited: &mut Vec<usize>,
    ) {
        for lane in mine {
            let record = dead.iter().enumerate().find(|&(k, d)| {
                d.id == lane
                    && borrowed.contains(&lane)
                    && kept.is_none_or(|kept| kept.contains(&k))
            });
            match record {
                Some((_, d)) => protocol::restore(&self.slab, d),
                None => protocol::release_lane(&self.slab, lane),
            }
        }
        // A resolved record's lane was set idle (or, borrowed, given back idle above); a kept
        // one still holds the record as read.
        let own = self.slot * LANES..(self.slot + 1) * LANES;
        inherited.retain(|&lane| {
            own.contains(&lane)
                && dead.iter().any(|d| {
                    d.id == lane
                        && d.words[0] != protocol::IDLE
                        && DeadLane::read(&self.slab, lane).words == d.words
                })
        });
        self.mark_kept(inherited);
    }

    /// Marks the lanes of this handle's slot that hold a kept record of its previous holder
    /// (`inherited`) as such, for the other handles' recoveries, and clears the mark of the
    /// others: word 2 of a kept record's lane holds the record's word 0, that of any other
    /// lane 0. Called under the recovery lock, before it is released, so that a recovery never
    /// sees a mark that is out of date (a resolved record's lane may already be claimed again
    /// by a thread of this handle).
    fn mark_kept(&self, inherited: &[usize]) {
        for lane in self.slot * LANES..(self.slot + 1) * LANES {
            let record = if inherited.contains(&lane) {
                self.slab.lane_word(lane, 0).load(Ordering::Acquire)
            } else {
                protocol::IDLE
            };
            self.slab
                .lane_word(lane, 2)
                .store(record, Ordering::Release);
        }
    }

    /// The lanes of other slots that hold a record their holder kept from its slot's previous
    /// holder (marked by [`ShmSlab::mark_kept`]: word 2 equals word 0). Such a record is frozen
    /// for as long as the caller holds the recovery lock (its lane is never claimed; only its
    /// holder's recovery, or one that finds the slot dead, resolves it), so a recovery must
    /// not wait for it as for a live thread's: two holders whose kept records name one object
    /// would otherwise put off each other's resolution for as long as both are attached.
    fn frozen_lanes(&self) -> Vec<usize> {
        let own = self.slot * LANES..(self.slot + 1) * LANES;
        (0..LANES * MAX_ATTACHED)
            .filter(|lane| !own.contains(lane))
            .filter(|&lane| {
                let mark = self.slab.lane_word(lane, 2).load(Ordering::Acquire);
                mark != protocol::IDLE
                    && self.slab.lane_word(lane, 0).load(Ordering::Acquire) == mark
            })
            .collect()
    }

    /// Resolves what the previous holder of this handle's slot left in its lanes.
    ///
    /// Takes the recovery lock even when there is nothing to resolve: a recovery running now
    /// may have found this slot free before this handle took it, and then reads the slot's
    /// lanes as a dead holder's (and ignores them as live ones). It must end before this
    /// handle announces anything there, or it would resolve a live operation as a dead one:
    /// list an object that a live free is about to list too, or take one from a live alloc.
    ///
    /// A record whose resolution is put off (a live thread of another handle still names its
    /// object after the wait) stays in its lane, as `recover()` keeps one of a dead slot: the
    /// lane is left out of this handle's use (it has fewer lanes until then) and listed in
    /// `recovering`, and this handle's `recover()` resolves it later — or, once this handle
    /// has detached, any recovery or the slot's next holder does. Releasing the lane first
    /// would drop the record, and its object would stay lost until `reclaim_lost` on a
    /// quiescent slab. The attach does not wait longer instead: a scribbled record can name an
    /// object for ever.
    fn resolve_own_lanes(&self) -> Result<(), SlabError> {
        let mut inherited = self.recovering.lock().unwrap_or_else(|e| e.into_inner());
        let _file = RecoveryLock::take(&self.file)?;
        let mut dead: Vec<DeadLane> = (self.slot * LANES..(self.slot + 1) * LANES)
            .map(|lane| DeadLane::read(&self.slab, lane))
            .filter(|d| d.words[0] != protocol::IDLE)
            .collect();
        if dead.is_empty() {
            self.mark_kept(&[]);
            return Ok(());
        }
        *inherited = dead.iter().map(|d| d.id).collect();
        let Some((mine, borrowed)) = self.recovery_lanes(&inherited, &mut dead) else {
            self.mark_kept(&inherited);
            return Err(SlabError::Corrupt("no idle intent record for recovery"));
        };
        let resolved = protocol::resolve(&self.slab, mine, &dead, &self.frozen_lanes());
        let kept = resolved.as_ref().ok().map(|r| r.kept.as_slice());
        self.return_recovery_lanes(mine, &borrowed, &dead, kept, &mut inherited);
        resolved.map(|_| ()).map_err(|e| SlabError::Corrupt(e.0))
    }

    /// The geometry, for the CLI's `info`.
    pub(crate) fn geometry(&self) -> &Geometry {
        self.slab.geometry()
    }

    /// The bytes each region part takes: header and words before the objects, and objects.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-lay-{}", std::process::id()));
    /// let slab = pitlane_slab::ShmSlab::create(&path, pitlane_slab::Config::new(64, 4))?;
    /// let (meta, objects) = slab.layout();
    /// assert_eq!(objects, 4 * 64);
    /// assert!(meta + objects <= slab.region_len());
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn layout(&self) -> (usize, usize) {
        let g = self.geometry();
        (g.objects_at, g.stride * g.config.capacity as usize)
    }

    /// [`Slab::reclaim_lost`] on this handle's slab: puts back every object handed out but
    /// neither owned nor listed (announced in this handle's intent records, so that a kill in
    /// the middle leaves nothing `recover()` cannot resolve). Only while no other thread or
    /// process allocates or frees in the file.
    ///
    /// # Errors
    /// As [`Slab::reclaim_lost`].
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("pitlane-doc-lost-{}", std::process::id()));
    /// let mut slab = pitlane_slab::ShmSlab::create(&path, pitlane_slab::Config::new(8, 4))?;
    /// assert_eq!(slab.reclaim_lost()?, 0);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reclaim_lost(&mut self) -> Result<usize, SlabError> {
        self.slab.reclaim_lost()
    }
}

/// Reserves the first `len` bytes of `file` (`fallocate` mode 0: allocates what is not yet,
/// changes no byte), so that a filesystem without room fails here rather than with `SIGBUS` at
/// a later write into the mapping. `fallocate(2)` rather than `posix_fallocate(3)`: the C
/// library's fallback for filesystems without it writes a byte per block, which would take
/// minutes for a large region; such filesystems keep a sparse file (`Ok`).
fn reserve(file: &File, len: usize) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    loop {
        // SAFETY: a valid descriptor; mode 0 with an in-range offset and length.
        if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS) => return Ok(()),
            _ => return Err(err),
        }
    }
}

/// The recovery lock, held until drop.
struct RecoveryLock<'a>(&'a File);

impl<'a> RecoveryLock<'a> {
    fn take(file: &'a File) -> Result<Self, SlabError> {
        let fl = lock_record(RECOVERY_LOCK, libc::F_WRLCK as libc::c_short);
        loop {
            // SAFETY: a valid descriptor and a valid lock record.
            if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLKW, &fl) } == 0 {
                return Ok(Self(file));
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(SlabError::Io(err.kind()));
            }
        }
    }
}

impl Drop for RecoveryLock<'_> {
    fn drop(&mut self) {
        let fl = lock_record(RECOVERY_LOCK, libc::F_UNLCK as libc::c_short);
        // SAFETY: a valid descriptor and a valid lock record; unlocking cannot conflict.
        unsafe { libc::fcntl(self.0.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    }
}

/// Reads up to `buf.len()` bytes from the start of `file`; returns how many there were.
fn read_prefix(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
