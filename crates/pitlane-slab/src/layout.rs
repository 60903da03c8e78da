//! The geometry of a slab region and its header: where each word lives, computed from the
//! configuration alone, so that a process opening a file recomputes it and trusts nothing but
//! the validated header.
//!
//! ```text
//! 0      header: magic, version, object size, alignment, capacity, shards, type tag,
//!        region length, checksum (of the bytes before it)
//! 128    bump word: how many objects were ever handed out (lazy bump allocation)
//! 256    shard heads, 128 bytes apart (tagged index words; 128, not 64, because x86's
//!        adjacent-line prefetcher moves cache lines in pairs)
//! ...    attachment epochs, one u64 per attachment slot
//! ...    lanes (intent records), LANES per attachment slot, 64 bytes each: the record, its
//!        check, and (file-backed slabs) the mark of a record kept from a slot's previous holder
//! ...    next links, one u32 per object
//! ...    state words, one u64 per object: generation << 32 | owner tag (tag 0: not allocated)
//! ...    objects, each `stride` bytes, aligned to max(alignment, 64)
//! ```

use crate::Config;
use crate::freelist::SLAB_INDEX_BITS;

/// "PLSLAB" and a format byte: the first word of every slab file.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"PLSLAB\0\x01");
/// The file format this build reads and writes.
pub const FORMAT_VERSION: u32 = 2;
/// Bytes of the header proper (the checksum covers `0..CHECKSUM_AT`).
pub(crate) const CHECKSUM_AT: usize = 64;
pub(crate) const HEADER_BYTES: usize = 72;
pub(crate) const BUMP_AT: usize = 128;
pub(crate) const HEADS_AT: usize = 256;
pub(crate) const LINE: usize = 64;
/// Bytes between two shard heads.
pub(crate) const HEAD_STRIDE: usize = 128;
/// How many processes (handles) may be attached to one file-backed slab at once.
pub const MAX_ATTACHED: usize = 128;
/// Intent records (lanes) per attachment slot: how many threads of one process may be inside
/// an alloc or free of a file-backed slab at once (more wait for a lane).
pub(crate) const LANES: usize = 16;
/// Bytes between two lanes (each has a cache line, so threads do not share one).
pub(crate) const LANE_STRIDE: usize = 64;
/// The largest capacity: indices must stay below the nil index of the tagged heads.
pub const MAX_CAPACITY: u32 = (1 << SLAB_INDEX_BITS) - 2;
/// The largest object size accepted (1 GiB).
pub const MAX_OBJECT_SIZE: usize = 1 << 30;
/// The largest alignment accepted (a page).
pub const MAX_ALIGN: usize = 4096;
/// The most shards (per-thread sub-freelists) a slab may have.
pub const MAX_SHARDS: u32 = 64;
pub(crate) const PAGE: usize = 4096;

/// Offsets of everything in a region, derived from a valid [`Config`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) config: Config,
    pub(crate) epochs_at: usize,
    pub(crate) lanes_at: usize,
    pub(crate) next_at: usize,
    pub(crate) owners_at: usize,
    pub(crate) objects_at: usize,
    pub(crate) stride: usize,
    pub(crate) len: usize,
    /// The bump hands out object `n * spread mod capacity` as its `n`-th: a step coprime to
    /// the capacity (so every object comes once) near capacity / golden ratio, so that objects
    /// handed out one after the other — which threads then keep recycling — lie far apart
    /// and do not share cache lines of objects, links or owner words.
    pub(crate) spread: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn spread_for(capacity: u64) -> u64 {
    let mut p = (capacity * 618 / 1000).max(1);
    while gcd(p, capacity) != 1 {
        p -= 1;
    }
    p
}

fn align_up(x: usize, a: usize) -> Option<usize> {
    Some(x.checked_add(a - 1)? & !(a - 1))
}

impl Geometry {
    /// The geometry of `config`, or what is wrong with it.
    pub(crate) fn of(config: Config) -> Result<Self, &'static str> {
        if config.object_size > MAX_OBJECT_SIZE {
            return Err("object size above 1 GiB");
        }
        if !config.align.is_power_of_two() || config.align > MAX_ALIGN {
            return Err("alignment must be a power of two of at most 4096");
        }
        if config.capacity == 0 || config.capacity > MAX_CAPACITY {
            return Err("capacity must be 1 to 16777214");
        }
        if config.shards == 0 || config.shards > MAX_SHARDS {
            return Err("shards must be 1 to 64");
        }
        let cap = config.capacity as usize;
        let epochs_at = HEADS_AT + HEAD_STRIDE * config.shards as usize;
        let lanes_at = align_up(epochs_at + 8 * MAX_ATTACHED, LINE).ok_or("too large")?;
        let next_at = lanes_at + LANE_STRIDE * LANES * MAX_ATTACHED;
        let owners_at = align_up(next_at + 4 * cap, 8).ok_or("too large")?;
        let objects_at =
            align_up(owners_at + 8 * cap, config.align.max(LINE)).ok_or("too large")?;
        let stride = align_up(config.object_size.max(1), config.align).ok_or("too large")?;
        let len = stride
            .checked_mul(cap)
            .and_then(|b| b.checked_add(objects_at))
            .and_then(|l| align_up(l, PAGE))
            .filter(|&l| l <= isize::MAX as usize)
            .ok_or("region larger than the address space")?;
        Ok(Self {
            config,
            epochs_at,
            lanes_at,
            next_at,
            owners_at,
            objects_at,
            stride,
            len,
            spread: spread_for(u64::from(config.capacity)),
        })
    }

    /// The object the bump hands out `n`-th (`n < capacity`).
    #[inline]
    pub(crate) fn bumped_index(&self, n: u64) -> u32 {
        (n * self.spread % u64::from(self.config.capacity)) as u32
    }

    /// The header bytes of this geometry (magic, fields, checksum).
    pub(crate) fn header(&self) -> [u8; HEADER_BYTES] {
        let mut h = [0_u8; HEADER_BYTES];
        let c = &self.config;
        h[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        h[16..24].copy_from_slice(&(c.object_size as u64).to_le_bytes());
        h[24..32].copy_from_slice(&(c.align as u64).to_le_bytes());
        h[32..40].copy_from_slice(&u64::from(c.capacity).to_le_bytes());
        h[40..48].copy_from_slice(&u64::from(c.shards).to_le_bytes());
        h[48..56].copy_from_slice(&c.type_tag.to_le_bytes());
        h[56..64].copy_from_slice(&(self.len as u64).to_le_bytes());
        let sum = checksum(&h[..CHECKSUM_AT]);
        h[64..72].copy_from_slice(&sum.to_le_bytes());
        h
    }
}

/// FNV-1a, 64 bits: enough to tell a torn or scribbled header from a good one (it is not a
/// defence against a peer that forges a header; nothing in the file can be).
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn word(h: &[u8], at: usize) -> u64 {
    let mut w = [0_u8; 8];
    w.copy_from_slice(&h[at..at + 8]);
    u64::from_le_bytes(w)
}

/// What reading a header found wrong.
#[derive(Debug)]
pub(crate) enum HeaderFault {
    NotASlab,
    Version(u32),
    Corrupt(&'static str),
}

/// Validates header bytes and returns the geometry they describe.
pub(crate) fn parse_header(h: &[u8; HEADER_BYTES]) -> Result<Geometry, HeaderFault> {
    if word(h, 0) != MAGIC {
        return Err(HeaderFault::NotASlab);
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if version != FORMAT_VERSION {
        return Err(HeaderFault::Version(version));
    }
    if checksum(&h[..CHECKSUM_AT]) != word(h, CHECKSUM_AT) {
        return Err(HeaderFault::Corrupt("header checksum"));
    }
    if h[12..16] != [0; 4] {
        return Err(HeaderFault::Corrupt("reserved header bytes"));
    }
    let field = |at| usize::try_from(word(h, at)).ok();
    let small = |at| u32::try_from(word(h, at)).ok();
    let config = match (field(16), field(24), small(32), small(40)) {
        (Some(object_size), Some(align), Some(capacity), Some(shards)) => Config {
            object_size,
            align,
            capacity,
            shards,
            type_tag: word(h, 48),
        },
        _ => return Err(HeaderFault::Corrupt("header field out of range")),
    };
    let geometry = Geometry::of(config).map_err(HeaderFault::Corrupt)?;
    if word(h, 56) != geometry.len as u64 {
        return Err(HeaderFault::Corrupt("region length"));
    }
    Ok(geometry)
}
