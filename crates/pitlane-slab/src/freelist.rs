//! A lock-free freelist of object indices: several Treiber stacks ("shards") whose heads are
//! tagged indices and whose links live in one separate array of atomic words.
//!
//! Source: the CAS allocator of "Racing to Win" (Nathan Taylor, Fastly, Surge 2015; published
//! as `uslab`), with its own TODO done: the ABA counter lives in the head word next to the
//! index, so one 64-bit compare-exchange suffices (no double-width CAS). The links are kept in
//! a side array instead of inside the free objects, as iceoryx2's `UniqueIndexSet` does, so a
//! user writing into an object can never race with the list, and a link is an index, not an
//! address, so the list means the same in every process that maps it.
//!
//! # Protocol
//!
//! A head is a [`Tagged`] word: the index of the first free object (or [`Tagged::NIL`]) and a
//! generation that every successful exchange advances. `next[i]` holds the index below `i`
//! while `i` is on a list; it is meaningless otherwise.
//!
//! - **pop**: read the head `h`; if nil, the shard is empty. Read `n = next[h]` (possibly stale
//!   if `h` is popped meanwhile) and exchange the head from `h` to `n`. A stale `n` cannot win:
//!   whoever popped `h` advanced the generation, so the word differs even if the index is `h`
//!   again.
//! - **push**: write `next[i] = h.index` for the current head `h`, then exchange the head from
//!   `h` to `i` with release ordering, which publishes both the link and everything the freeing
//!   thread wrote into the object.
//!
//! **Linearization points.** A successful pop or push takes effect at its compare-exchange on
//! the head; a pop that finds the shard empty, at the acquire load that read a nil head.
//! Popping from several shards in turn ([`Freelist::pop_any`]) is *not* one atomic step: it may
//! report "empty" while an object is being pushed onto a shard it has already looked at, so
//! with more than one shard an empty answer is transient, like a weak bag's.
//!
//! Every index read from the shared words is checked against the capacity before it is used,
//! so a corrupted list makes an operation fail ([`Corrupt`]), never read out of bounds.
//!
//! ```
//! use pitlane_slab::freelist::Freelist;
//!
//! let list: Freelist = Freelist::full(4, 2);
//! let a = list.pop_any(0).unwrap().unwrap();
//! list.push(1, a).unwrap();
//! assert_eq!(list.pop(1).unwrap(), Some(a));
//! ```

use pitlane_sync::Tagged;
use pitlane_sync::shim::atomic::{AtomicU32, AtomicU64, Ordering};

/// Index bits of a slab's tagged heads: up to 2^24 - 2 objects, 40 generation bits (a wrap
/// needs 10^12 exchanges of one head word: about 3 hours at 10^8 per second, far beyond what
/// one contended cache line sustains).
pub const SLAB_INDEX_BITS: u32 = 24;

/// A freelist's words were found inconsistent (an index out of range): the memory was
/// corrupted, by a bug or by a hostile process sharing it.
///
/// ```
/// let e = pitlane_slab::freelist::Corrupt("next link out of range");
/// assert_eq!(e.to_string(), "freelist corrupt: next link out of range");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt(pub &'static str);

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "freelist corrupt: {}", self.0)
    }
}

impl std::error::Error for Corrupt {}

/// Where a freelist's words are: heads and links. The slab implements it over a mapped region;
/// [`Freelist`] over its own boxed arrays.
pub(crate) trait Links<const B: u32> {
    /// The number of objects; every valid index is below it.
    fn capacity(&self) -> u32;
    /// The number of shards (at least 1).
    fn shards(&self) -> usize;
    /// The head word of `shard` (`shard < shards()`).
    fn head(&self, shard: usize) -> &AtomicU64;
    /// The link word of `index` (`index < capacity()`).
    fn next(&self, index: u32) -> &AtomicU32;
}

/// Pops one index from `shard`.
#[inline]
pub(crate) fn pop<const B: u32, L: Links<B>>(
    links: &L,
    shard: usize,
) -> Result<Option<u32>, Corrupt> {
    let head_word = links.head(shard);
    let mut head = Tagged::<B>::from_bits(head_word.load(Ordering::Acquire));
    loop {
        if head.is_nil() {
            return Ok(None);
        }
        let index = head.index();
        if index >= links.capacity() {
            return Err(Corrupt("head index out of range"));
        }
        // Stale if `index` was popped meanwhile; the generation then makes the exchange fail.
        let next = links.next(index).load(Ordering::Relaxed);
        if next != Tagged::<B>::NIL && next >= links.capacity() {
            // Re-read before blaming the list: a stale link of a popped-and-reused object
            // is still an index in range, so an out-of-range one is corruption only if the
            // head has not moved.
            let now = Tagged::<B>::from_bits(head_word.load(Ordering::Acquire));
            if now == head {
                return Err(Corrupt("next link out of range"));
            }
            head = now;
            continue;
        }
        match head_word.compare_exchange_weak(
            head.to_bits(),
            head.successor(next).to_bits(),
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => return Ok(Some(index)),
            Err(seen) => head = Tagged::from_bits(seen),
        }
    }
}

/// Pushes `index` (which the caller owns, `index < capacity`) onto `shard`.
#[inline]
pub(crate) fn push<const B: u32, L: Links<B>>(links: &L, shard: usize, index: u32) {
    let head_word = links.head(shard);
    let link = links.next(index);
    let mut head = Tagged::<B>::from_bits(head_word.load(Ordering::Relaxed));
    loop {
        link.store(head.index(), Ordering::Relaxed);
        match head_word.compare_exchange_weak(
            head.to_bits(),
            head.successor(index).to_bits(),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(seen) => head = Tagged::from_bits(seen),
        }
    }
}

/// Pops from `home`, then steals from the other shards in order.
#[inline]
pub(crate) fn pop_any<const B: u32, L: Links<B>>(
    links: &L,
    home: usize,
) -> Result<Option<u32>, Corrupt> {
    if let Some(i) = pop(links, home)? {
        return Ok(Some(i));
    }
    steal(links, home)
}

#[inline(never)]
fn steal<const B: u32, L: Links<B>>(links: &L, home: usize) -> Result<Option<u32>, Corrupt> {
    let shards = links.shards();
    for k in 1..shards {
        if let Some(i) = pop(links, (home + k) % shards)? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// A process-local freelist of the indices `0..capacity` split over shards, on the same
/// protocol as the slab's (see the [module docs](self)). `B` is the index width of the tagged
/// heads; loom tests shorten the generation by widening it.
///
/// ```
/// use pitlane_slab::freelist::Freelist;
///
/// let list: Freelist = Freelist::new(8, 1);
/// assert_eq!(list.pop(0).unwrap(), None);
/// list.push(0, 3).unwrap();
/// assert_eq!(list.pop(0).unwrap(), Some(3));
/// ```
pub struct Freelist<const B: u32 = SLAB_INDEX_BITS> {
    heads: Box<[AtomicU64]>,
    next: Box<[AtomicU32]>,
}

impl<const B: u32> Links<B> for Freelist<B> {
    #[inline]
    fn capacity(&self) -> u32 {
        self.next.len() as u32
    }
    #[inline]
    fn shards(&self) -> usize {
        self.heads.len()
    }
    #[inline]
    fn head(&self, shard: usize) -> &AtomicU64 {
        &self.heads[shard]
    }
    #[inline]
    fn next(&self, index: u32) -> &AtomicU32 {
        &self.next[index as usize]
    }
}

impl<const B: u32> Freelist<B> {
    /// An empty list for indices `0..capacity` with `shards` heads (at least 1).
    ///
    /// # Panics
    /// If `capacity` is not below [`Tagged::NIL`] for `B` index bits or `shards` is 0.
    ///
    /// ```
    /// let list: pitlane_slab::freelist::Freelist = pitlane_slab::freelist::Freelist::new(2, 4);
    /// assert_eq!(list.shards(), 4);
    /// ```
    pub fn new(capacity: u32, shards: usize) -> Self {
        Self::with_generation(capacity, shards, 0)
    }

    /// An empty list whose heads start at `generation` instead of 0, so that a test (a loom
    /// model) can run across the wrap of the generation without 2^40 exchanges first.
    ///
    /// # Panics
    /// As [`Freelist::new`].
    ///
    /// ```
    /// use pitlane_slab::freelist::Freelist;
    /// use pitlane_sync::Tagged;
    /// let last = Tagged::<24>::GENERATIONS - 1;
    /// let list: Freelist = Freelist::with_generation(2, 1, last);
    /// list.push(0, 1).unwrap(); // the head word wraps to generation 0 here
    /// assert_eq!(list.pop(0).unwrap(), Some(1));
    /// ```
    pub fn with_generation(capacity: u32, shards: usize, generation: u64) -> Self {
        assert!(
            capacity < Tagged::<B>::NIL,
            "capacity must be below the nil index"
        );
        assert!(shards >= 1, "a freelist needs at least one shard");
        let nil = Tagged::<B>::new(Tagged::<B>::NIL, generation).to_bits();
        Self {
            heads: (0..shards).map(|_| AtomicU64::new(nil)).collect(),
            next: (0..capacity)
                .map(|_| AtomicU32::new(Tagged::<B>::NIL))
                .collect(),
        }
    }

    /// A list holding every index, dealt round-robin over the shards.
    ///
    /// # Panics
    /// As [`Freelist::new`].
    ///
    /// ```
    /// use pitlane_slab::freelist::Freelist;
    /// let list: Freelist = Freelist::full(3, 1);
    /// let mut all: Vec<u32> = std::iter::from_fn(|| list.pop(0).unwrap()).collect();
    /// all.sort();
    /// assert_eq!(all, [0, 1, 2]);
    /// ```
    pub fn full(capacity: u32, shards: usize) -> Self {
        let list = Self::new(capacity, shards);
        for i in (0..capacity).rev() {
            push(&list, i as usize % shards, i);
        }
        list
    }

    /// The number of indices the list was made for.
    ///
    /// ```
    /// let list: pitlane_slab::freelist::Freelist = pitlane_slab::freelist::Freelist::new(5, 1);
    /// assert_eq!(list.capacity(), 5);
    /// ```
    pub fn capacity(&self) -> u32 {
        Links::<B>::capacity(self)
    }

    /// The number of shards.
    ///
    /// ```
    /// let list: pitlane_slab::freelist::Freelist = pitlane_slab::freelist::Freelist::new(5, 3);
    /// assert_eq!(list.shards(), 3);
    /// ```
    pub fn shards(&self) -> usize {
        Links::<B>::shards(self)
    }

    /// Pops an index from `shard` (taken modulo the shard count); `Ok(None)` when it is empty.
    ///
    /// ```
    /// let list: pitlane_slab::freelist::Freelist = pitlane_slab::freelist::Freelist::full(1, 1);
    /// assert_eq!(list.pop(0).unwrap(), Some(0));
    /// assert_eq!(list.pop(0).unwrap(), None);
    /// ```
    #[inline]
    pub fn pop(&self, shard: usize) -> Result<Option<u32>, Corrupt> {
        pop(self, shard % self.heads.len())
    }

    /// Pops from `home` (modulo the shard count), stealing from the other shards when it is
    /// empty. With several shards, `Ok(None)` is transient (see the module docs).
    ///
    /// ```
    /// let list: pitlane_slab::freelist::Freelist = pitlane_slab::freelist::Freelist::new(4, 2);
    /// list.push(1, 2).unwrap();
    /// assert_eq!(list.pop_any(0).unwrap(), Some(2)); // stolen from shard 1
    /// ```
    #[inline]
    pub fn pop_any(&self, home: usize) -> Result<Option<u32>, Corrupt> {
        pop_any(self, home % self.heads.len())
    }

    /// Pushes `index` onto `shard` (modulo the shard count). The caller must not push an index
    /// that is already on the list (this list does not track owners; the slab does).
    ///
    /// # Errors
    /// [`Corrupt`] if `index` is not below the capacity.
    ///
    /// ```
    /// let list: pitlane_slab::freelist::Freelist = pitlane_slab::freelist::Freelist::new(4, 1);
    /// assert!(list.push(0, 4).is_err());
    /// ```
    #[inline]
    pub fn push(&self, shard: usize, index: u32) -> Result<(), Corrupt> {
        if index >= self.capacity() {
            return Err(Corrupt("pushed index out of range"));
        }
        push(self, shard % self.heads.len(), index);
        Ok(())
    }
}

impl<const B: u32> std::fmt::Debug for Freelist<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Freelist")
            .field("capacity", &self.capacity())
            .field("shards", &self.shards())
            .finish_non_exhaustive()
    }
}
