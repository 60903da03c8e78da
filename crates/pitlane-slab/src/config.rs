//! The configuration of a slab and the errors of its operations.

use crate::ObjectId;
use std::fmt;

/// The shape of a slab: object size and alignment, capacity, shards, and a tag the caller
/// chooses to name what the objects hold (checked when a file is opened).
///
/// ```
/// use pitlane_slab::Config;
/// let c = Config::new(48, 1000).with_align(16).with_shards(4).with_type_tag(7);
/// assert_eq!((c.object_size, c.align, c.capacity, c.shards, c.type_tag), (48, 16, 1000, 4, 7));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Config {
    /// Bytes per object (0 to 1 GiB).
    pub object_size: usize,
    /// Alignment of each object: a power of two up to 4096.
    pub align: usize,
    /// Number of objects: 1 to [`MAX_CAPACITY`](crate::MAX_CAPACITY) (2^24 - 2).
    pub capacity: u32,
    /// Sub-freelists, dealt to threads round-robin: 1 to 64.
    pub shards: u32,
    /// What the objects hold, in the caller's numbering; 0 by default.
    pub type_tag: u64,
}

impl Config {
    /// `capacity` objects of `object_size` bytes, aligned to 8 (or to the size rounded up to a
    /// power of two, if smaller), 8 shards, type tag 0.
    ///
    /// ```
    /// let c = pitlane_slab::Config::new(3, 10);
    /// assert_eq!((c.align, c.shards, c.type_tag), (4, 8, 0));
    /// ```
    pub const fn new(object_size: usize, capacity: u32) -> Self {
        let align = if object_size >= 8 {
            8
        } else if object_size == 0 {
            1
        } else {
            object_size.next_power_of_two()
        };
        Self {
            object_size,
            align,
            capacity,
            shards: 8,
            type_tag: 0,
        }
    }

    /// The same with alignment `align`.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::Config::new(8, 1).with_align(64).align, 64);
    /// ```
    pub const fn with_align(mut self, align: usize) -> Self {
        self.align = align;
        self
    }

    /// The same with `shards` sub-freelists.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::Config::new(8, 1).with_shards(1).shards, 1);
    /// ```
    pub const fn with_shards(mut self, shards: u32) -> Self {
        self.shards = shards;
        self
    }

    /// The same with the type tag `tag`.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::Config::new(8, 1).with_type_tag(3).type_tag, 3);
    /// ```
    pub const fn with_type_tag(mut self, tag: u64) -> Self {
        self.type_tag = tag;
        self
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "object size {}, align {}, capacity {}, shards {}, type tag {:#x}",
            self.object_size, self.align, self.capacity, self.shards, self.type_tag
        )
    }
}

/// Why an operation on a slab failed.
///
/// ```
/// use pitlane_slab::{ObjectId, SlabError};
/// let e = SlabError::DoubleFree(ObjectId::from_index(4));
/// assert_eq!(e.to_string(), "object #4.0 is not allocated (double free, or a stale id?)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlabError {
    /// The index is not below the capacity.
    OutOfRange {
        /// The index given.
        index: u32,
        /// The slab's capacity.
        capacity: u32,
    },
    /// Freeing an object that is not allocated at the id's generation: freed already (perhaps
    /// handed out again since: the id is stale), or never allocated.
    DoubleFree(ObjectId),
    /// Reading, writing or pointing into an object that is not allocated at the id's
    /// generation: freed (a stale id), or never allocated.
    NotAllocated(ObjectId),
    /// A byte span that leaves the object.
    OutOfBounds {
        /// Start of the span.
        offset: usize,
        /// Its length.
        len: usize,
        /// The object's size.
        object_size: usize,
    },
    /// An atomic word at an address that is not 8-aligned.
    Misaligned {
        /// The offset asked for.
        offset: usize,
    },
    /// The objects are too small or too loosely aligned for the type.
    TypeMismatch,
    /// The shared words are inconsistent (corrupted memory or a hostile peer): what was wrong.
    Corrupt(&'static str),
    /// A system call failed.
    Io(std::io::ErrorKind),
}

impl fmt::Display for SlabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlabError::OutOfRange { index, capacity } => {
                write!(f, "object index {index} out of range (capacity {capacity})")
            }
            SlabError::DoubleFree(id) => write!(
                f,
                "object {id} is not allocated (double free, or a stale id?)"
            ),
            SlabError::NotAllocated(id) => {
                write!(f, "object {id} is not allocated (freed, or a stale id)")
            }
            SlabError::OutOfBounds {
                offset,
                len,
                object_size,
            } => write!(
                f,
                "bytes {offset}..{offset}+{len} leave the object of {object_size} bytes"
            ),
            SlabError::Misaligned { offset } => {
                write!(f, "offset {offset} is not an 8-aligned word")
            }
            SlabError::TypeMismatch => {
                write!(
                    f,
                    "the slab's objects are too small or unaligned for the type"
                )
            }
            SlabError::Corrupt(what) => write!(f, "slab corrupt: {what}"),
            SlabError::Io(kind) => write!(f, "system call failed: {kind}"),
        }
    }
}

impl std::error::Error for SlabError {}

/// Why a slab could not be made or opened.
///
/// ```
/// let e = pitlane_slab::OpenError::NotASlab;
/// assert_eq!(e.to_string(), "not a pitlane slab file");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The configuration asked for is out of range: what is wrong.
    InvalidConfig(&'static str),
    /// The file does not start with a slab header.
    NotASlab,
    /// The file is a slab of another format version.
    VersionMismatch {
        /// The version this build reads.
        expected: u32,
        /// The version in the file.
        found: u32,
    },
    /// The file is a valid slab of another configuration.
    ConfigMismatch {
        /// The configuration asked for.
        expected: Config,
        /// The configuration in the file.
        found: Config,
    },
    /// The file is shorter than its header says.
    Truncated {
        /// Bytes the slab needs.
        expected: u64,
        /// Bytes the file has.
        found: u64,
    },
    /// The header is damaged: what was wrong.
    Corrupt(&'static str),
    /// Every attachment slot is taken.
    TooManyAttached,
    /// A system call failed (the path exists, is a symbolic link, permission denied, ...).
    Io(std::io::Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::InvalidConfig(what) => write!(f, "invalid slab configuration: {what}"),
            OpenError::NotASlab => write!(f, "not a pitlane slab file"),
            OpenError::VersionMismatch { expected, found } => write!(
                f,
                "slab format version {found}, this build reads version {expected}"
            ),
            OpenError::ConfigMismatch { expected, found } => {
                write!(
                    f,
                    "slab configuration mismatch: expected {expected}, found {found}"
                )
            }
            OpenError::Truncated { expected, found } => write!(
                f,
                "slab file truncated: needs {expected} bytes, has {found}"
            ),
            OpenError::Corrupt(what) => write!(f, "slab header corrupt: {what}"),
            OpenError::TooManyAttached => write!(f, "every attachment slot of the slab is taken"),
            OpenError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Io(e) => Some(e),
            _ => None,
        }
    }
}
