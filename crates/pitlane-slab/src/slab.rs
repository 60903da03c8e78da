//! The slab: fixed-size objects handed out by index from a region, over the sharded freelist.

use std::collections::BTreeMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use pitlane_sync::Tagged;

use crate::freelist::{Links, SLAB_INDEX_BITS};
use crate::layout::{BUMP_AT, Geometry, HEAD_STRIDE, HEADS_AT, LANE_STRIDE, LANES, MAX_ATTACHED};
use crate::protocol::{self, gen_of};
use crate::region::{Region, RegionKind};
use crate::{Config, OpenError, SlabError};

/// The owner tag of objects allocated through a heap or anonymous slab: that region has no
/// attachment slots, so every handle shares one tag (slot field 0).
pub(crate) const LOCAL_OWNER: u32 = 1 << 8;

/// An object of a slab, named by its index and its generation: the same value means the same
/// object in every process that maps the slab, wherever the mapping lies.
///
/// The generation advances each time the object is freed, so an id kept after its free is
/// *stale*: freeing it again, or reading or writing through it, is reported as an error even
/// after the object was handed out anew (until the 31-bit generation wraps, after 2^31 - 1
/// frees of that object).
///
/// ```
/// use pitlane_slab::ObjectId;
/// let id = ObjectId::new(3, 1);
/// assert_eq!((id.index(), id.generation()), (3, 1));
/// assert_eq!(id.to_string(), "#3.1");
/// assert_eq!(ObjectId::from_bits(id.to_bits()), id);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId {
    index: u32,
    generation: u32,
}

impl ObjectId {
    /// The object with this index and generation (for ids passed between processes as
    /// numbers). Every operation checks both against the slab.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::ObjectId::new(7, 2).generation(), 2);
    /// ```
    pub const fn new(index: u32, generation: u32) -> Self {
        Self { index, generation }
    }

    /// The object with this index at generation 0: a never-freed object.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::ObjectId::from_index(7).index(), 7);
    /// ```
    pub const fn from_index(index: u32) -> Self {
        Self::new(index, 0)
    }

    /// The object's index, below the slab's capacity.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::ObjectId::from_index(0).index(), 0);
    /// ```
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The object's generation when this id was handed out.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::ObjectId::from_index(0).generation(), 0);
    /// ```
    pub const fn generation(self) -> u32 {
        self.generation
    }

    /// The id as one number (generation in the high half), to pass between processes.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::ObjectId::new(5, 1).to_bits(), 1 << 32 | 5);
    /// ```
    pub const fn to_bits(self) -> u64 {
        (self.generation as u64) << 32 | self.index as u64
    }

    /// The id [`ObjectId::to_bits`] made.
    ///
    /// ```
    /// let id = pitlane_slab::ObjectId::new(5, 9);
    /// assert_eq!(pitlane_slab::ObjectId::from_bits(id.to_bits()), id);
    /// ```
    pub const fn from_bits(bits: u64) -> Self {
        Self::new(bits as u32, (bits >> 32) as u32)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}.{}", self.index, self.generation)
    }
}

static NEXT_HOME: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's home shard, dealt round-robin as threads first touch a slab.
    static HOME: usize = NEXT_HOME.fetch_add(1, Ordering::Relaxed);
}

/// The thread's number, as dealt (0 if thread-locals are gone, during thread exit).
#[inline]
fn thread_home() -> usize {
    HOME.try_with(|h| *h).unwrap_or(0)
}

/// A lock-free slab of fixed-size objects (see the [crate docs](crate) for the protocol).
///
/// ```
/// use pitlane_slab::{Config, Slab};
///
/// let slab = Slab::heap(Config::new(16, 2))?;
/// let a = slab.alloc().unwrap();
/// slab.write(a, 0, b"hello")?;
/// let mut buf = [0; 5];
/// slab.read(a, 0, &mut buf)?;
/// assert_eq!(&buf, b"hello");
/// slab.free(a)?;
/// assert!(slab.free(a).is_err()); // a double free is reported
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Slab {
    region: Region,
    geo: Geometry,
    /// The tag this handle writes into the state word of what it allocates (never 0).
    owner: u32,
    /// The attachment slot whose lanes (intent records) this handle uses: file handles only.
    slot: Option<usize>,
    /// Added to the thread's number to pick its home shard: the attachment slot of a file
    /// handle, so that the first threads of different processes (which all have thread
    /// number 0 in a forked child) start on different shards.
    home_base: usize,
}

impl fmt::Debug for Slab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slab")
            .field("region", &self.region.kind())
            .field("config", &self.geo.config)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl Links<SLAB_INDEX_BITS> for Slab {
    #[inline]
    fn capacity(&self) -> u32 {
        self.geo.config.capacity
    }
    #[inline]
    fn shards(&self) -> usize {
        self.geo.config.shards as usize
    }
    #[inline]
    fn head(&self, shard: usize) -> &AtomicU64 {
        self.word64(HEADS_AT + HEAD_STRIDE * shard)
    }
    #[inline]
    fn next(&self, index: u32) -> &AtomicU32 {
        self.word32(self.geo.next_at + 4 * index as usize)
    }
}

impl protocol::Words for Slab {
    #[inline]
    fn state(&self, index: u32) -> &AtomicU64 {
        self.state_word(index)
    }
    #[inline]
    fn bump_word(&self) -> &AtomicU64 {
        self.bump()
    }
    #[inline]
    fn bumped(&self, n: u64) -> u32 {
        self.geo.bumped_index(n)
    }
    #[inline]
    fn lane_word(&self, lane: usize, k: usize) -> &AtomicU64 {
        self.word64(self.geo.lanes_at + LANE_STRIDE * lane + 8 * k)
    }
    #[inline]
    fn lanes_per_slot(&self) -> usize {
        LANES
    }
    #[inline]
    fn lanes(&self) -> usize {
        LANES * MAX_ATTACHED
    }
}

impl Slab {
    /// A slab in this process's heap.
    ///
    /// # Errors
    /// [`OpenError::InvalidConfig`] for a configuration out of range, [`OpenError::Io`] when
    /// the memory cannot be had.
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(64, 1024))?;
    /// assert_eq!(slab.config().capacity, 1024);
    /// assert!(pitlane_slab::Slab::heap(pitlane_slab::Config::new(64, 0)).is_err());
    /// # Ok::<(), pitlane_slab::OpenError>(())
    /// ```
    pub fn heap(config: Config) -> Result<Self, OpenError> {
        let geo = Geometry::of(config).map_err(OpenError::InvalidConfig)?;
        let region = Region::heap(geo.len).map_err(OpenError::Io)?;
        Ok(Self::format(region, geo, LOCAL_OWNER))
    }

    /// A slab in an anonymous shared mapping: a child process forked after this call shares
    /// the objects (its copy of the handle names the same memory).
    ///
    /// There is no recovery here: a forked child's copy of the handle *is* the parent's
    /// handle — one owner tag, one home shard numbering, no intent records — so nothing in the
    /// region tells a dead child's objects from its parent's, and an owner that is a process
    /// would need a check of the process id at every alloc (a system call) plus a liveness
    /// test that survives pid reuse. For fork children that may die, use
    /// [`ShmSlab::create_memfd`](crate::ShmSlab::create_memfd): also nameless and inherited
    /// across `fork`, but each child calls [`ShmSlab::open_fd`](crate::ShmSlab::open_fd) on
    /// the inherited descriptor to get its own attachment slot, owner tag and intent
    /// records, so that [`ShmSlab::recover`](crate::ShmSlab::recover) brings back what a dead
    /// child held or had in flight.
    ///
    /// # Errors
    /// As [`Slab::heap`].
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::anonymous(pitlane_slab::Config::new(8, 4))?;
    /// assert_eq!(slab.region_kind(), pitlane_slab::RegionKind::Anonymous);
    /// # Ok::<(), pitlane_slab::OpenError>(())
    /// ```
    pub fn anonymous(config: Config) -> Result<Self, OpenError> {
        let geo = Geometry::of(config).map_err(OpenError::InvalidConfig)?;
        let region = Region::anonymous(geo.len).map_err(OpenError::Io)?;
        Ok(Self::format(region, geo, LOCAL_OWNER))
    }

    /// Writes empty heads and then the header into a zeroed region.
    pub(crate) fn format(region: Region, geo: Geometry, owner: u32) -> Self {
        let slab = Self::attach(region, geo, owner);
        let nil = Tagged::<SLAB_INDEX_BITS>::new(Tagged::<SLAB_INDEX_BITS>::NIL, 0).to_bits();
        for s in 0..slab.shards() {
            slab.head(s).store(nil, Ordering::Relaxed);
        }
        let header = geo.header();
        // SAFETY: the header lies within the region (it is at least a page long); the copy
        // is atomic because a process opening the file may read these bytes meanwhile.
        unsafe { atomic_copy_in(slab.region.base().as_ptr(), &header) };
        std::sync::atomic::fence(Ordering::Release);
        slab
    }

    /// A handle on a region whose header was validated as `geo`.
    pub(crate) fn attach(region: Region, geo: Geometry, owner: u32) -> Self {
        debug_assert!(region.len() >= geo.len);
        Self {
            region,
            geo,
            owner,
            slot: None,
            home_base: 0,
        }
    }

    pub(crate) fn set_owner(&mut self, owner: u32, slot: usize) {
        self.owner = owner;
        self.slot = Some(slot);
        self.home_base = slot;
    }

    /// This thread's home shard on this handle.
    #[inline]
    pub(crate) fn home_shard(&self) -> usize {
        self.home()
    }

    /// Claims one of this handle's lanes, if it has any.
    #[inline]
    pub(crate) fn lane(&self) -> Option<usize> {
        self.slot
            .and_then(|slot| protocol::acquire_lane(self, slot, thread_home()))
    }

    #[inline]
    fn release(&self, lane: Option<usize>) {
        if let Some(lane) = lane {
            protocol::release_lane(self, lane);
        }
    }

    /// This thread's home shard on this handle.
    #[inline]
    fn home(&self) -> usize {
        self.home_base.wrapping_add(thread_home()) % self.shards()
    }

    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The word at byte `at` of the region.
    #[inline]
    pub(crate) fn word64(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at % 8 == 0 && at + 8 <= self.region.len());
        // SAFETY: every caller passes an offset from the geometry, 8-aligned and inside the
        // region (whose base is page-aligned), and the region outlives `&self`. A shared
        // reference to an atomic is sound even while other processes write the word: atomics
        // are interior-mutable, and all access to these words is atomic.
        unsafe { AtomicU64::from_ptr(self.region.base().as_ptr().add(at).cast()) }
    }

    #[inline]
    fn word32(&self, at: usize) -> &AtomicU32 {
        debug_assert!(at % 4 == 0 && at + 4 <= self.region.len());
        // SAFETY: as in `word64`, for a 4-aligned offset inside the region.
        unsafe { AtomicU32::from_ptr(self.region.base().as_ptr().add(at).cast()) }
    }

    #[inline]
    fn bump(&self) -> &AtomicU64 {
        self.word64(BUMP_AT)
    }

    #[inline]
    pub(crate) fn state_word(&self, index: u32) -> &AtomicU64 {
        self.word64(self.geo.owners_at + 8 * index as usize)
    }

    pub(crate) fn epoch_word(&self, slot: usize) -> &AtomicU64 {
        self.word64(self.geo.epochs_at + 8 * slot)
    }

    /// The configuration the slab was made with.
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(24, 10).with_align(8))?;
    /// assert_eq!((slab.config().object_size, slab.config().align), (24, 8));
    /// # Ok::<(), pitlane_slab::OpenError>(())
    /// ```
    pub fn config(&self) -> &Config {
        &self.geo.config
    }

    /// The kind of memory the slab lives in.
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 1))?;
    /// assert_eq!(slab.region_kind(), pitlane_slab::RegionKind::Heap);
    /// # Ok::<(), pitlane_slab::OpenError>(())
    /// ```
    pub fn region_kind(&self) -> RegionKind {
        self.region.kind()
    }

    /// Bytes the region occupies (header, links, owners and objects).
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(64, 100))?;
    /// assert!(slab.region_len() >= 64 * 100);
    /// # Ok::<(), pitlane_slab::OpenError>(())
    /// ```
    pub fn region_len(&self) -> usize {
        self.geo.len
    }

    /// The owner tag this handle records in the objects it allocates.
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 1))?;
    /// let id = slab.alloc().unwrap();
    /// assert_eq!(slab.owner_of(id)?, Some(slab.owner_tag()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn owner_tag(&self) -> u64 {
        u64::from(self.owner)
    }

    /// Takes a free object; `None` when none is free.
    ///
    /// Never-used objects come first, by bumping a counter (they are zero bytes); then the
    /// freelists: this thread's home shard, then the others. With one shard, `None` means
    /// every object was allocated at the moment the empty head was read; with several it may
    /// also be transient (an object pushed onto a shard already looked at). A corrupted list
    /// also gives `None` (see [`Slab::try_alloc`] for the reason).
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 1).with_shards(1))?;
    /// let a = slab.alloc().unwrap();
    /// assert_eq!(slab.alloc(), None);
    /// slab.free(a)?;
    /// let b = slab.alloc().unwrap();
    /// assert_eq!((b.index(), b.generation()), (a.index(), 1)); // the same object, reused
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn alloc(&self) -> Option<ObjectId> {
        self.try_alloc().ok().flatten()
    }

    /// Like [`Slab::alloc`], but says when the shared words were found corrupted.
    ///
    /// # Errors
    /// [`SlabError::Corrupt`] when a freelist word holds an index out of range or the object
    /// popped is already owned (left alone: it leaks, nothing is handed out twice by us).
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 2))?;
    /// assert!(slab.try_alloc()?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_alloc(&self) -> Result<Option<ObjectId>, SlabError> {
        let lane = self.lane();
        let got = match protocol::take_bumped(self, lane, self.owner) {
            Ok(Some(index)) => Ok(Some(ObjectId::new(index, 0))),
            Ok(None) => protocol::take_any(self, lane, self.home(), self.owner)
                .map(|got| got.map(|(index, generation)| ObjectId::new(index, generation))),
            Err(e) => Err(e),
        };
        self.release(lane);
        got.map_err(|e| SlabError::Corrupt(e.0))
    }

    /// Gives an allocated object back. Any handle may free any allocated object (a process
    /// may free what another allocated).
    ///
    /// # Errors
    /// [`SlabError::OutOfRange`] for an index not below the capacity, [`SlabError::DoubleFree`]
    /// when the object is not allocated at the id's generation: freed already (even if it was
    /// handed out again since), or never allocated.
    ///
    /// ```
    /// use pitlane_slab::{ObjectId, SlabError};
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 1))?;
    /// let a = slab.alloc().unwrap();
    /// slab.free(a)?;
    /// assert_eq!(slab.free(a), Err(SlabError::DoubleFree(a)));
    /// let b = slab.alloc().unwrap(); // the same object, one generation on
    /// assert_eq!((b.index(), b.generation()), (a.index(), a.generation() + 1));
    /// assert_eq!(slab.free(a), Err(SlabError::DoubleFree(a))); // stale: b is not freed
    /// assert!(matches!(slab.free(ObjectId::from_index(1)), Err(SlabError::OutOfRange { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn free(&self, id: ObjectId) -> Result<(), SlabError> {
        self.check_index(id)?;
        let lane = self.lane();
        let done = protocol::give_back(self, lane, self.home(), id.index, id.generation, None);
        self.release(lane);
        done.map_err(|_| SlabError::DoubleFree(id))
    }

    /// Who owns `id` now: `None` when it is free, else the owner tag recorded by the
    /// allocating handle (see [`ShmSlab::recover`](crate::ShmSlab::recover)).
    ///
    /// # Errors
    /// [`SlabError::OutOfRange`] for an index not below the capacity.
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 2))?;
    /// let a = slab.alloc().unwrap();
    /// assert!(slab.owner_of(a)?.is_some());
    /// slab.free(a)?;
    /// assert_eq!(slab.owner_of(a)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn owner_of(&self, id: ObjectId) -> Result<Option<u64>, SlabError> {
        self.check_index(id)?;
        let w = self.state_word(id.index).load(Ordering::Acquire);
        Ok(protocol::owner_of(w)
            .filter(|_| gen_of(w) == id.generation)
            .map(u64::from))
    }

    /// The id of the object at `index` as it is now, if it is allocated: for tools and for
    /// recovering the ids of a process that did not keep them.
    ///
    /// # Errors
    /// [`SlabError::OutOfRange`] for an index not below the capacity.
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 2))?;
    /// let a = slab.alloc().unwrap();
    /// assert_eq!(slab.current_id(a.index())?, Some(a));
    /// slab.free(a)?;
    /// assert_eq!(slab.current_id(a.index())?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn current_id(&self, index: u32) -> Result<Option<ObjectId>, SlabError> {
        self.check_index(ObjectId::from_index(index))?;
        let w = self.state_word(index).load(Ordering::Acquire);
        Ok(protocol::owner_of(w).map(|_| ObjectId::new(index, gen_of(w))))
    }

    #[inline]
    fn check_index(&self, id: ObjectId) -> Result<(), SlabError> {
        if id.index < self.capacity() {
            Ok(())
        } else {
            Err(SlabError::OutOfRange {
                index: id.index,
                capacity: self.capacity(),
            })
        }
    }

    /// Checks that `id` names an allocated object at its generation.
    #[inline]
    fn check_live(&self, id: ObjectId) -> Result<(), SlabError> {
        self.check_index(id)?;
        let w = self.state_word(id.index).load(Ordering::Acquire);
        if protocol::owner_of(w).is_some() && gen_of(w) == id.generation {
            Ok(())
        } else {
            Err(SlabError::NotAllocated(id))
        }
    }

    /// The address of the first byte of `id` in this process's mapping of the region.
    /// The memory may be written at any time by other threads and processes sharing the slab,
    /// so it must only be accessed through atomics (`AtomicU64::from_ptr` and the like), never
    /// through a Rust reference to plain data; a non-atomic access (even a volatile one) that
    /// races with another thread's access to the same bytes is a data race.
    ///
    /// # Errors
    /// [`SlabError::OutOfRange`] for an index not below the capacity,
    /// [`SlabError::NotAllocated`] when `id` is not allocated at its generation (checked at the
    /// call: the pointer does not stop a later free).
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 2).with_align(8))?;
    /// let a = slab.alloc().unwrap();
    /// let p = slab.object_ptr(a)?;
    /// // SAFETY: an allocated object of 8 bytes, 8-aligned, inside the slab (which outlives
    /// // the reference); accessed atomically only.
    /// let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(p.cast::<u64>().as_ptr()) };
    /// word.store(42, std::sync::atomic::Ordering::Relaxed);
    /// let mut back = [0; 8];
    /// slab.read(a, 0, &mut back)?;
    /// assert_eq!(u64::from_ne_bytes(back), 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn object_ptr(&self, id: ObjectId) -> Result<NonNull<u8>, SlabError> {
        self.check_live(id)?;
        Ok(self.object_base(id.index))
    }

    /// The address of object `index` (below the capacity), allocated or not.
    #[inline]
    pub(crate) fn object_base(&self, index: u32) -> NonNull<u8> {
        debug_assert!(index < self.capacity());
        let at = self.geo.objects_at + self.geo.stride * index as usize;
        // SAFETY: `at` is inside the region: the geometry reserves `stride * capacity` bytes
        // from `objects_at` and the index is below the capacity.
        unsafe { self.region.base().add(at) }
    }

    fn span(&self, id: ObjectId, offset: usize, len: usize) -> Result<NonNull<u8>, SlabError> {
        let base = self.object_ptr(id)?;
        let size = self.geo.config.object_size;
        match offset.checked_add(len) {
            Some(end) if end <= size => {
                // SAFETY: `offset + len <= object_size`, so the span lies inside the object.
                Ok(unsafe { base.add(offset) })
            }
            _ => Err(SlabError::OutOfBounds {
                offset,
                len,
                object_size: size,
            }),
        }
    }

    /// Copies `buf.len()` bytes of `id` from `offset` into `buf`.
    ///
    /// The bytes are copied with relaxed atomic loads of the 8-aligned words (`AtomicU64`) the
    /// span touches; [`Slab::write`] stores whole words the same way and updates a word it
    /// covers in part with a compare-and-swap that changes only the span's bytes. Every access
    /// `read`, `write` and [`Slab::atomic_u64`] make is an aligned 8-byte atomic, so they may
    /// race with each other on the same bytes, from threads or processes, without a data race:
    /// a copy may mix old and new values across words, never within one.
    ///
    /// # Errors
    /// [`SlabError::OutOfRange`], [`SlabError::NotAllocated`] for an id that is not allocated
    /// at its generation (a stale id), or [`SlabError::OutOfBounds`] when the span leaves the
    /// object.
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(4, 1))?;
    /// let a = slab.alloc().unwrap();
    /// let mut buf = [9; 4];
    /// slab.read(a, 0, &mut buf)?;
    /// assert_eq!(buf, [0; 4]); // never-used objects are zero
    /// assert!(slab.read(a, 1, &mut buf).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(&self, id: ObjectId, offset: usize, buf: &mut [u8]) -> Result<(), SlabError> {
        let src = self.span(id, offset, buf.len())?;
        // SAFETY: `span` checked that `buf.len()` bytes from `src` lie in the object, so the
        // words they touch lie in the region.
        unsafe { atomic_copy_out(buf, src.as_ptr()) };
        Ok(())
    }

    /// Copies `data` into `id` at `offset`, with relaxed atomic accesses to the 8-aligned
    /// words it touches (see [`Slab::read`] for what that makes defined when it races).
    ///
    /// # Errors
    /// As [`Slab::read`].
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(4, 1))?;
    /// let a = slab.alloc().unwrap();
    /// slab.write(a, 2, &[1, 2])?;
    /// let mut buf = [0; 4];
    /// slab.read(a, 0, &mut buf)?;
    /// assert_eq!(buf, [0, 0, 1, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write(&self, id: ObjectId, offset: usize, data: &[u8]) -> Result<(), SlabError> {
        let dst = self.span(id, offset, data.len())?;
        // SAFETY: `span` checked that `data.len()` bytes from `dst` lie in the object, so the
        // words they touch lie in the region.
        unsafe { atomic_copy_in(dst.as_ptr(), data) };
        Ok(())
    }

    /// The 8 bytes of `id` at `offset` as an atomic word, for state that processes update
    /// in place (counters, flags, sequence numbers).
    ///
    /// # Errors
    /// [`SlabError::OutOfRange`] and [`SlabError::NotAllocated`] as [`Slab::read`],
    /// [`SlabError::OutOfBounds`] when the word leaves the object, [`SlabError::Misaligned`]
    /// when its address is not 8-aligned.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(16, 1).with_align(8))?;
    /// let a = slab.alloc().unwrap();
    /// slab.atomic_u64(a, 8)?.fetch_add(5, Ordering::Relaxed);
    /// assert_eq!(slab.atomic_u64(a, 8)?.load(Ordering::Relaxed), 5);
    /// assert!(slab.atomic_u64(a, 12).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn atomic_u64(&self, id: ObjectId, offset: usize) -> Result<&AtomicU64, SlabError> {
        let p = self.span(id, offset, 8)?;
        if p.as_ptr().addr() % 8 != 0 {
            return Err(SlabError::Misaligned { offset });
        }
        // SAFETY: 8 aligned bytes inside the region, which outlives `&self`; a reference to an
        // atomic may alias memory others write, as long as all of them write atomically or
        // the object is theirs (the contract of sharing an object).
        Ok(unsafe { AtomicU64::from_ptr(p.as_ptr().cast()) })
    }

    /// The number of objects.
    ///
    /// ```
    /// assert_eq!(pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 9))?.capacity(), 9);
    /// # Ok::<(), pitlane_slab::OpenError>(())
    /// ```
    pub fn capacity(&self) -> u32 {
        self.geo.config.capacity
    }

    /// Checks the freelists and owner words and reports what it found. Exact only on a
    /// quiescent slab (no thread or process allocating or freeing meanwhile); on a busy one it
    /// may report objects in flight as lost. It only reads, so it never harms the slab.
    ///
    /// ```
    /// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 4))?;
    /// let a = slab.alloc().unwrap();
    /// let b = slab.alloc().unwrap();
    /// slab.free(b)?;
    /// let report = slab.check();
    /// assert!(report.is_consistent(), "{report}");
    /// assert_eq!((report.bumped, report.free_listed, report.owned), (2, 1, 1));
    /// # let _ = a;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check(&self) -> CheckReport {
        let capacity = self.capacity();
        let raw_bump = self.bump().load(Ordering::Acquire);
        let bumped = raw_bump.min(u64::from(capacity)) as u32;
        let mut problems = Vec::new();
        if raw_bump > u64::from(capacity) {
            problems.push(format!(
                "bump word {raw_bump} exceeds the capacity {capacity}"
            ));
        }
        let mut handed_out = vec![false; capacity as usize];
        for n in 0..u64::from(bumped) {
            handed_out[self.geo.bumped_index(n) as usize] = true;
        }
        let mut listed = vec![false; capacity as usize];
        let mut free_listed = 0_u32;
        for shard in 0..self.shards() {
            let head =
                Tagged::<SLAB_INDEX_BITS>::from_bits(self.head(shard).load(Ordering::Acquire));
            let mut at = head.index();
            while at != Tagged::<SLAB_INDEX_BITS>::NIL {
                if at >= capacity {
                    problems.push(format!("shard {shard}: index {at} out of range"));
                    break;
                }
                if std::mem::replace(&mut listed[at as usize], true) {
                    problems.push(format!(
                        "shard {shard}: object {at} listed twice (a cycle or a shared tail)"
                    ));
                    break;
                }
                free_listed += 1;
                if !handed_out[at as usize] {
                    problems.push(format!(
                        "shard {shard}: object {at} is listed but was never handed out"
                    ));
                }
                at = self.next(at).load(Ordering::Relaxed);
            }
        }
        let mut owned = 0_u32;
        let mut lost = Vec::new();
        let mut owners = BTreeMap::new();
        for i in 0..capacity {
            let w =
                protocol::owner_of(self.state_word(i).load(Ordering::Acquire)).map_or(0, u64::from);
            let on_list = listed[i as usize];
            if w != 0 {
                owned += 1;
                *owners.entry(w).or_insert(0_u32) += 1;
                if on_list {
                    problems.push(format!("object {i} is both free and owned by {w:#x}"));
                }
                if !handed_out[i as usize] {
                    problems.push(format!("object {i} is owned but was never handed out"));
                }
            } else if !on_list && handed_out[i as usize] {
                lost.push(ObjectId::new(
                    i,
                    gen_of(self.state_word(i).load(Ordering::Acquire)),
                ));
            }
        }
        CheckReport {
            capacity,
            bumped,
            free_listed,
            owned,
            owners,
            lost,
            problems,
        }
    }

    /// Puts back on the freelist every object that was handed out but is neither owned nor
    /// listed — what a process killed between taking an object off a list and recording
    /// itself as its owner (or between clearing its ownership and listing it) leaves behind.
    /// Returns how many it put back.
    ///
    /// Each object goes back as a free does: its generation advances (a compare-exchange from
    /// the state [`Slab::check`] saw) before it is listed, announced in an intent record on a
    /// file-backed slab. So a dead process's intent record that still names the object (a
    /// `recover()` or the next attachment to the dead slot resolves it later) no longer
    /// matches it, and the object is never listed twice.
    ///
    /// Only for a quiescent slab: no other thread or process may allocate or free until it
    /// returns (`&mut self` covers this process's threads; other processes are the caller's
    /// business). On a busy slab it could list an object that another thread has just taken.
    ///
    /// # Errors
    /// [`SlabError::Corrupt`] when [`Slab::check`] finds problems other than lost objects;
    /// then nothing is changed.
    ///
    /// ```
    /// let mut slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 4))?;
    /// assert_eq!(slab.reclaim_lost()?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reclaim_lost(&mut self) -> Result<usize, SlabError> {
        let report = self.check();
        if !report.problems.is_empty() {
            return Err(SlabError::Corrupt(
                "check found problems; nothing reclaimed",
            ));
        }
        let lane = self.lane();
        let home = self.home();
        let mut reclaimed = 0;
        let mut failed = None;
        for id in &report.lost {
            match protocol::put_back_lost(&*self, lane, home, id.index) {
                Ok(true) => reclaimed += 1,
                // Its state changed since `check` (the slab was not quiescent): left alone.
                Ok(false) => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        self.release(lane);
        match failed {
            Some(e) => Err(SlabError::Corrupt(e.0)),
            None => Ok(reclaimed),
        }
    }
}

/// What [`Slab::check`] found.
///
/// ```
/// let slab = pitlane_slab::Slab::heap(pitlane_slab::Config::new(8, 4))?;
/// let report = slab.check();
/// assert!(report.is_consistent());
/// assert_eq!(report.capacity, 4);
/// # Ok::<(), pitlane_slab::OpenError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Objects in the slab.
    pub capacity: u32,
    /// Objects ever handed out (the bump mark); the others are still fresh.
    pub bumped: u32,
    /// Objects on the freelists.
    pub free_listed: u32,
    /// Objects with an owner.
    pub owned: u32,
    /// How many objects each owner tag holds.
    pub owners: BTreeMap<u64, u32>,
    /// Objects handed out that are neither listed nor owned (see [`Slab::reclaim_lost`]).
    pub lost: Vec<ObjectId>,
    /// Inconsistencies: a cycle, an index out of range, an object both free and owned.
    pub problems: Vec<String>,
}

impl CheckReport {
    /// No problem and no lost object: every handed-out object is listed exactly once or owned.
    ///
    /// ```
    /// assert!(pitlane_slab::CheckReport::default().is_consistent());
    /// ```
    pub fn is_consistent(&self) -> bool {
        self.problems.is_empty() && self.lost.is_empty()
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "capacity {}, handed out {}, free (listed) {}, owned {}, never used {}",
            self.capacity,
            self.bumped,
            self.free_listed,
            self.owned,
            self.capacity.saturating_sub(self.bumped)
        )?;
        for (owner, n) in &self.owners {
            writeln!(f, "  owner {owner:#x}: {n} objects")?;
        }
        if !self.lost.is_empty() {
            writeln!(f, "lost (neither free nor owned): {}", self.lost.len())?;
        }
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        write!(
            f,
            "{}",
            if self.is_consistent() {
                "consistent"
            } else {
                "INCONSISTENT"
            }
        )
    }
}

/// The 8-aligned word holding the byte at `at`, and where that byte lies in it.
///
/// # Safety
/// The whole word must lie in one allocation that is valid for reads and writes (in a slab's
/// region it always does: the region starts on a page and is a whole number of pages long).
unsafe fn word_of<'a>(at: *mut u8) -> (&'a AtomicU64, usize) {
    let in_word = at.addr() % 8;
    // SAFETY: the word lies in the same allocation (the caller's promise), so stepping back
    // to its start stays in bounds; the result is 8-aligned, as `AtomicU64` needs.
    let word = unsafe { AtomicU64::from_ptr(at.sub(in_word).cast::<u64>()) };
    (word, in_word)
}

/// Copies `src` to `dst` with relaxed atomic accesses on the 8-aligned words the span
/// touches: a word the span covers whole is stored; a word it covers in part is updated by a
/// compare-and-swap on the whole word that changes only the span's bytes. Every access is an
/// aligned 8-byte atomic, like those of [`Slab::atomic_u64`] and of [`atomic_copy_out`], so
/// any of them may race with any other without a data race or a mixed-size race.
///
/// # Safety
/// `dst..dst + src.len()` must be valid for writes, and so must the rest of the 8-aligned
/// words it touches (a slab's region: see [`word_of`]).
pub(crate) unsafe fn atomic_copy_in(dst: *mut u8, src: &[u8]) {
    let mut k = 0;
    while k < src.len() {
        // SAFETY: `k < src.len()`: a byte of the span, in a word the caller vouches for.
        let (word, in_word) = unsafe { word_of(dst.add(k)) };
        let n = (8 - in_word).min(src.len() - k);
        let mut bytes = [0_u8; 8];
        bytes[in_word..in_word + n].copy_from_slice(&src[k..k + n]);
        let value = u64::from_ne_bytes(bytes);
        if n == 8 {
            word.store(value, Ordering::Relaxed);
        } else {
            let mut mask = [0_u8; 8];
            mask[in_word..in_word + n].fill(0xFF);
            let mask = u64::from_ne_bytes(mask);
            // Never `Err`: the closure always gives a value.
            let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(old & !mask | value)
            });
        }
        k += n;
    }
}

/// Copies from `src` into `dst` with relaxed atomic loads of the 8-aligned words the span
/// touches (the mirror of [`atomic_copy_in`]).
///
/// # Safety
/// `src..src + dst.len()` must be valid for reads, and the rest of the 8-aligned words it
/// touches too; the words are read through `AtomicU64`, so they must lie in writable memory,
/// as a slab's region always does (see [`word_of`]).
pub(crate) unsafe fn atomic_copy_out(dst: &mut [u8], src: *const u8) {
    // `from_ptr` takes `*mut`; these atomics are only loaded from.
    let src = src.cast_mut();
    let mut k = 0;
    while k < dst.len() {
        // SAFETY: `k < dst.len()`: a byte of the span, in a word the caller vouches for.
        let (word, in_word) = unsafe { word_of(src.add(k)) };
        let n = (8 - in_word).min(dst.len() - k);
        let bytes = word.load(Ordering::Relaxed).to_ne_bytes();
        dst[k..k + n].copy_from_slice(&bytes[in_word..in_word + n]);
        k += n;
    }
}
