//! Crash-safe allocation and freeing over the sharded freelist: object states with
//! generations, intent records ("lanes"), and the recovery that resolves the intents of dead
//! processes.
//!
//! # Why intents
//!
//! Taking an object off a freelist (the compare-exchange on a shard head) and recording an
//! owner in the object's state word are two steps on two words. A process killed between them
//! leaves an object that is neither listed nor owned; the same holds for freeing (clear the
//! owner, then push). The head exchange leaves no trace of who made it, so afterwards nothing
//! in the slab tells such an object from one that is still listed. Each attached process
//! therefore announces, in an intent record of its own, which object it is about to take or
//! give back, before the step that commits it, and withdraws the announcement once the object
//! is owned or listed again.
//!
//! # Words
//!
//! - **State word** per object: `generation << 32 | tag`. The tag is an owner tag (below
//!   2^31), 0 for a free object, or `FREED_BY | lane` for a free object that the holder of
//!   `lane` freed (file-backed slabs: it names the freer until the object is allocated again).
//!   The generation (31 bits, `1..=2^31-1` after the first free, 0 for a never-used object)
//!   advances at every free, so an [`ObjectId`](crate::ObjectId) carrying it goes stale then.
//! - **Lane** per thread of an attached process (`LANES` per attachment slot, one cache line
//!   each): word 0 holds the intent (`kind | shard | index | generation`), word 1 a check of
//!   word 0 (a torn or scribbled record is ignored). A thread claims an idle lane by a compare-exchange for each operation.
//!   Word 2, in file-backed slabs, marks a record that the slot's holder kept from its
//!   previous holder (it then equals word 0; see `ShmSlab::open`): a frozen record, which
//!   recovery does not wait for as it waits for a live thread's.
//!
//! # Protocol
//!
//! - **bump** (never-used object `n`): intent `Bump(n)`, exchange the bump word `n → n + 1`,
//!   exchange the state `(0, 0) → (0, tag)`, lane idle.
//! - **pop** (shard `s`): read head `h`, read `state[h] = (g, 0)` and `next[h]`, re-read the
//!   head: unchanged means `h` was listed on `s` with generation `g` when its state was read.
//!   Intent `Pop(s, h, g)`, exchange the head `h → next` (acquire-release), exchange the state
//!   `(g, 0) → (g, tag)`, lane idle.
//! - **free** (id `(i, g)`) by lane `l`: intent `Push(s, i, g')` with `g'` the next
//!   generation, exchange the state `(g, tag) → (g', FREED_BY | l)` (of two frees of one id
//!   exactly one sees the owner; a stale id finds another generation: both are reported as a
//!   double free), push `i` on `s`, lane idle. The mark stays until the next claim overwrites
//!   it; it is what tells recovery that *this* lane's exchange happened — an intent alone could
//!   not, since a free that announces and then loses to another free of the same id (a double
//!   free) would name an object listed elsewhere.
//!
//! Linearization points are those of the plain protocol (see the [crate docs](crate)): the
//! bump or head exchange for alloc, the state exchange for free.
//!
//! # Recovery of a dead process's intents
//!
//! The lanes of a dead process are frozen. For an intent naming object `h` with generation `g`
//! on shard `s`, recovery (one at a time, under a file lock) *detaches* shard `s` (one
//! exchange of its head to empty: the detached chain is exactly what was listed on `s` at that
//! instant, and nobody else can take from it), waits until no live lane names the object (a
//! live thread names one only for the few instructions of an alloc or free; after a bounded
//! wait the dead record is kept for a later recovery: "deferred"), and decides:
//!
//! `h` is lost — taken or given back by the dead process and never listed again — if and only
//! if `h` is not on the detached chain, no live lane names `h`, and its state is still
//! generation `g` and free (for `Pop`), or exactly `(g, FREED_BY | the dead lane)` (for
//! `Push`). Then it is pushed back (with the recoverer's own `Push` intent, advancing the
//! generation), and the chain is spliced back onto `s`.
//!
//! Why that is exact for a genuine intent: `h` was listed on `s` with generation `g` when the
//! `Pop` record was written (checked by the head re-read), or the dead lane's own free made it
//! generation `g` and was to list it on `s` (its mark says the exchange happened).
//! Listed objects move only by being popped; a popper announces `h` before its head exchange,
//! and the acquire-release exchanges on `s` make that announcement visible to a recoverer whose
//! detach comes later. The popper withdraws it only after writing its owner tag, which the
//! recoverer (reading lanes before states) then sees; an object freed again has a newer
//! generation, and can only then be listed anywhere. So an object of generation `g` that is
//! neither on `s`, nor owned, nor named by a live lane is held by dead processes only, and by
//! at most one of them: it goes back once. A `Bump(n)` intent is decided the same way: the
//! bump word passed `n`, the object's state is still `(0, 0)`, no live lane names it.
//!
//! A recoverer announces what it does in the same way: its pushes are `Push` intents, and its
//! detach a `Detach(s, x, g)` intent. A detach is a pop of the whole chain, and like a pop it
//! leaves no trace of who made it; unlike a lost pop, a chain held by a dead recoverer cannot be
//! told from one whose first object a dead popper took after the chain was put back. So a dead
//! `Detach` record is dropped, and the chain it held (if any) stays out of the lists: a
//! recoverer killed in the microseconds between its detach and its splice leaks that shard's
//! chain ([`Slab::check`](crate::Slab::check) reports the objects as lost;
//! [`Slab::reclaim_lost`](crate::Slab::reclaim_lost) puts them back on a quiescent slab). It
//! never lists an object twice.
//!
//! A record whose check word does not match, or whose kind, shard or index is out of range,
//! is ignored: a forged or scribbled record can make recovery leak an object (it stays lost),
//! never list one twice. (A peer that forges a *valid* record naming a listed object of
//! another shard can make recovery list it twice, as it could by writing the links directly:
//! see "Untrusted memory" in the crate docs.)

use std::collections::HashSet;

use pitlane_sync::Tagged;
use pitlane_sync::shim::atomic::{AtomicU64, Ordering};

use crate::freelist::{self, Corrupt, Links, SLAB_INDEX_BITS};

type Head = Tagged<SLAB_INDEX_BITS>;
const NIL: u32 = Head::NIL;

/// Generations are 31 bits (they fit in an intent record next to an index and a shard).
pub(crate) const GEN_MASK: u32 = (1 << 31) - 1;

/// The generation of a state word.
#[inline]
pub(crate) const fn gen_of(state: u64) -> u32 {
    (state >> 32) as u32 & GEN_MASK
}

/// The tag of a state word: an owner (below 2^31), 0, or `FREED_BY | lane`.
#[inline]
pub(crate) const fn tag_of(state: u64) -> u32 {
    state as u32
}

/// The high bit of a free object's tag that names the lane whose free made it free.
pub(crate) const FREED_BY: u32 = 1 << 31;

/// The owner of a state word, if it is allocated.
#[inline]
pub(crate) const fn owner_of(state: u64) -> Option<u32> {
    let tag = tag_of(state);
    if tag == 0 || tag & FREED_BY != 0 {
        None
    } else {
        Some(tag)
    }
}

/// A state word.
#[inline]
pub(crate) const fn state(generation: u32, tag: u32) -> u64 {
    ((generation & GEN_MASK) as u64) << 32 | tag as u64
}

/// The generation after `g`: 1 to 2^31 - 1, never 0 again (0 marks a never-used object).
#[inline]
pub(crate) const fn next_gen(g: u32) -> u32 {
    (g & GEN_MASK) % GEN_MASK + 1
}

/// What a lane announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Bump,
    Pop,
    Push,
    Detach,
}

/// An idle lane.
pub(crate) const IDLE: u64 = 0;
/// A lane claimed by a thread that has announced nothing yet.
pub(crate) const BUSY: u64 = 1 << 61;

const KIND_SHIFT: u32 = 61;
const SHARD_SHIFT: u32 = 55;
const INDEX_SHIFT: u32 = 31;

/// A decoded intent record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Intent {
    pub(crate) kind: Kind,
    pub(crate) shard: usize,
    /// The object, or for `Bump` the bump count `n`.
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl Intent {
    pub(crate) const fn encode(self) -> u64 {
        let kind = match self.kind {
            Kind::Bump => 2_u64,
            Kind::Pop => 3,
            Kind::Push => 4,
            Kind::Detach => 5,
        };
        kind << KIND_SHIFT
            | (self.shard as u64 & 0x3f) << SHARD_SHIFT
            | ((self.index & 0xff_ffff) as u64) << INDEX_SHIFT
            | (self.generation & GEN_MASK) as u64
    }

    /// The record in `word` if it is one (not idle or busy) and in range.
    pub(crate) fn decode(word: u64, shards: usize, capacity: u32) -> Option<Self> {
        let kind = match word >> KIND_SHIFT {
            2 => Kind::Bump,
            3 => Kind::Pop,
            4 => Kind::Push,
            5 => Kind::Detach,
            _ => return None,
        };
        let intent = Self {
            kind,
            shard: (word >> SHARD_SHIFT & 0x3f) as usize,
            index: (word >> INDEX_SHIFT & 0xff_ffff) as u32,
            generation: word as u32 & GEN_MASK,
        };
        (intent.shard < shards && intent.index < capacity).then_some(intent)
    }
}

/// The check word stored next to an intent: a torn or scribbled record fails it.
#[inline]
pub(crate) const fn check(word: u64) -> u64 {
    word.rotate_left(23) ^ 0x9e37_79b9_7f4a_7c15
}

/// The words of a slab the protocol works on; the slab implements it over its region, the
/// loom model over boxed arrays.
pub(crate) trait Words: Links<SLAB_INDEX_BITS> {
    /// The state word of `index` (`index < capacity()`).
    fn state(&self, index: u32) -> &AtomicU64;
    /// The bump word.
    fn bump_word(&self) -> &AtomicU64;
    /// The object the bump hands out `n`-th (`n < capacity()`).
    fn bumped(&self, n: u64) -> u32;
    /// Word `k` of lane `lane`: 0 or 1 (the record and its check), or 2 (the mark of a kept
    /// record, file-backed slabs only).
    fn lane_word(&self, lane: usize, k: usize) -> &AtomicU64;
    /// Lanes per attachment slot.
    fn lanes_per_slot(&self) -> usize;
    /// All lanes (slots times lanes per slot).
    fn lanes(&self) -> usize;
}

/// Hook for the loom model: a thread told to "die" after a number of steps stops there, as a
/// killed process would (its lanes keep what they hold).
#[cfg(pitlane_loom)]
pub mod crash {
    use std::cell::Cell;
    loom::thread_local! {
        static STEPS: Cell<Option<usize>> = Cell::new(None);
    }
    /// This thread dies after `steps` more steps of the protocol.
    pub fn die_after(steps: usize) {
        STEPS.with(|s| s.set(Some(steps)));
    }
    /// Whether this thread is dead now (counts one step).
    pub(crate) fn step() -> bool {
        STEPS.with(|s| match s.get() {
            Some(0) => true,
            Some(n) => {
                s.set(Some(n - 1));
                false
            }
            None => false,
        })
    }
    /// The error a dead thread's operation returns.
    pub const DIED: crate::freelist::Corrupt = crate::freelist::Corrupt("died (loom model)");
}

macro_rules! step {
    () => {
        #[cfg(pitlane_loom)]
        if crash::step() {
            return Err(crash::DIED);
        }
    };
}

/// How many times a thread looks through its slot's lanes (yielding in between) before it
/// goes on without one.
const LANE_ROUNDS: usize = 64;

/// Claims an idle lane of `slot`, starting at `hint`. While all are taken (more threads of
/// the process inside an operation than there are lanes) it yields and looks again; after
/// `LANE_ROUNDS` rounds — which only a peer scribbling over the lanes makes happen — `None`:
/// the operation then goes on unannounced (correct, but not recoverable if the process dies
/// inside it).
#[inline]
pub(crate) fn acquire_lane<W: Words>(w: &W, slot: usize, hint: usize) -> Option<usize> {
    let per = w.lanes_per_slot();
    for _ in 0..LANE_ROUNDS {
        for k in 0..per {
            let lane = slot * per + (hint + k) % per;
            if w.lane_word(lane, 0)
                .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Some(lane);
            }
        }
        pitlane_sync::shim::thread::yield_now();
    }
    None
}

/// Gives a lane back.
#[inline]
pub(crate) fn release_lane<W: Words>(w: &W, lane: usize) {
    w.lane_word(lane, 0).store(IDLE, Ordering::Release);
}

/// Announces `intent` on `lane`: the record, then its check (so that a process killed
/// between the two leaves a record that fails the check — it had not acted on it yet).
#[inline]
fn announce<W: Words>(w: &W, lane: usize, intent: Intent) {
    let word = intent.encode();
    w.lane_word(lane, 0).store(word, Ordering::Relaxed);
    w.lane_word(lane, 1).store(check(word), Ordering::Release);
}

/// Takes a never-used object by the bump, owned by `tag`; `Ok(None)` when all were bumped.
#[inline]
pub(crate) fn take_bumped<W: Words>(
    w: &W,
    lane: Option<usize>,
    tag: u32,
) -> Result<Option<u32>, Corrupt> {
    let capacity = u64::from(w.capacity());
    let bump = w.bump_word();
    let mut n = bump.load(Ordering::Relaxed);
    while n < capacity {
        if let Some(lane) = lane {
            announce(
                w,
                lane,
                Intent {
                    kind: Kind::Bump,
                    shard: 0,
                    index: n as u32,
                    generation: 0,
                },
            );
        }
        step!();
        match bump.compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => {
                step!();
                let index = w.bumped(n);
                return claim(w, index, state(0, 0), tag).map(|()| Some(index));
            }
            Err(seen) => n = seen,
        }
    }
    Ok(None)
}

/// Records `tag` as the owner of `index`, which the caller just took and whose state it read
/// as `seen` (free) while it was listed.
#[inline]
fn claim<W: Words>(w: &W, index: u32, seen: u64, tag: u32) -> Result<(), Corrupt> {
    if owner_of(seen).is_some() {
        return Err(Corrupt("an object taken off the freelist is owned"));
    }
    w.state(index)
        .compare_exchange(
            seen,
            state(gen_of(seen), tag),
            Ordering::Relaxed,
            Ordering::Relaxed,
        )
        .map(|_| ())
        .map_err(|_| Corrupt("the state of an object taken off the freelist changed"))
}

/// Pops one object from `shard` and records `tag` as its owner; returns it and its generation.
#[inline]
pub(crate) fn take_listed<W: Words>(
    w: &W,
    lane: Option<usize>,
    shard: usize,
    tag: u32,
) -> Result<Option<(u32, u32)>, Corrupt> {
    let head_word = w.head(shard);
    let mut head = Head::from_bits(head_word.load(Ordering::Acquire));
    loop {
        if head.is_nil() {
            return Ok(None);
        }
        let h = head.index();
        if h >= w.capacity() {
            return Err(Corrupt("head index out of range"));
        }
        let st = w.state(h).load(Ordering::Acquire);
        // Stale if `h` was popped meanwhile; the re-read below then finds another head.
        let next = w.next(h).load(Ordering::Relaxed);
        let now = head_word.load(Ordering::Acquire);
        if now != head.to_bits() {
            head = Head::from_bits(now);
            continue;
        }
        // The head did not move: `h` is listed, and `st` and `next` are its own.
        if next != NIL && next >= w.capacity() {
            return Err(Corrupt("next link out of range"));
        }
        let g = gen_of(st);
        if let Some(lane) = lane {
            announce(
                w,
                lane,
                Intent {
                    kind: Kind::Pop,
                    shard,
                    index: h,
                    generation: g,
                },
            );
        }
        step!();
        match head_word.compare_exchange_weak(
            head.to_bits(),
            head.successor(next).to_bits(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                step!();
                return claim(w, h, st, tag).map(|()| Some((h, g)));
            }
            Err(seen) => head = Head::from_bits(seen),
        }
    }
}

/// Pops from `home`, then from the other shards in turn.
#[inline]
pub(crate) fn take_any<W: Words>(
    w: &W,
    lane: Option<usize>,
    home: usize,
    tag: u32,
) -> Result<Option<(u32, u32)>, Corrupt> {
    if let Some(got) = take_listed(w, lane, home, tag)? {
        return Ok(Some(got));
    }
    let shards = w.shards();
    for k in 1..shards {
        if let Some(got) = take_listed(w, lane, (home + k) % shards, tag)? {
            return Ok(Some(got));
        }
    }
    Ok(None)
}

/// Why giving an object back failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GiveFault {
    /// Not allocated at that generation: freed already, or a stale id.
    NotAllocated,
    #[cfg(pitlane_loom)]
    Died,
}

/// Frees `index` of generation `g`: advances its generation, clears its owner, pushes it on
/// `shard`. `only_tag` restricts the free to that owner (recovery of dead owners).
#[inline]
pub(crate) fn give_back<W: Words>(
    w: &W,
    lane: Option<usize>,
    shard: usize,
    index: u32,
    g: u32,
    only_tag: Option<u32>,
) -> Result<(), GiveFault> {
    let word = w.state(index);
    let mut seen = word.load(Ordering::Relaxed);
    let freed = state(next_gen(g), lane.map_or(0, |l| FREED_BY | l as u32));
    announce_push(w, lane, shard, index, g);
    #[cfg(pitlane_loom)]
    if crash::step() {
        return Err(GiveFault::Died);
    }
    loop {
        let Some(owner) = owner_of(seen) else {
            return Err(GiveFault::NotAllocated);
        };
        if gen_of(seen) != g || only_tag.is_some_and(|t| t != owner) {
            return Err(GiveFault::NotAllocated);
        }
        // The exchange that takes the owner away is the free's point of no return: of two
        // frees of one id, exactly one sees the owner.
        match word.compare_exchange_weak(seen, freed, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => seen = now,
        }
    }
    #[cfg(pitlane_loom)]
    if crash::step() {
        return Err(GiveFault::Died);
    }
    freelist::push(w, shard, index);
    Ok(())
}

/// A dead lane's contents, read once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeadLane {
    /// The lane, to be set idle once resolved; `None` when the caller cleared it already.
    pub(crate) lane: Option<usize>,
    /// The lane's number (what its frees wrote into the state words).
    pub(crate) id: usize,
    pub(crate) words: [u64; 2],
}

impl DeadLane {
    /// Reads lane `lane` of a dead holder.
    pub(crate) fn read<W: Words>(w: &W, lane: usize) -> Self {
        let words = [0, 1].map(|k| w.lane_word(lane, k).load(Ordering::Acquire));
        Self {
            lane: Some(lane),
            id: lane,
            words,
        }
    }

    fn intent(&self, shards: usize, capacity: u32) -> Option<Intent> {
        (self.words[1] == check(self.words[0]))
            .then(|| Intent::decode(self.words[0], shards, capacity))
            .flatten()
    }
}

/// What a recovery pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Objects put back on a freelist.
    pub(crate) reclaimed: u32,
    /// Dead intents left in place because a live lane still named their object after
    /// waiting (a descheduled thread, or a scribbled record), as indices into the `dead` lanes
    /// passed to [`resolve`]: a later recovery looks again.
    pub(crate) kept: Vec<usize>,
}

/// Whether a lane not in `skip` (a live holder's) names object `h` now. Conservative: a
/// record that fails its check still names its index (it may be half written).
fn named_by_live<W: Words>(w: &W, skip: &HashSet<usize>, h: u32) -> bool {
    (0..w.lanes()).filter(|l| !skip.contains(l)).any(|lane| {
        let word = w.lane_word(lane, 0).load(Ordering::Acquire);
        Intent::decode(word, w.shards(), w.capacity()).is_some_and(|i| match i.kind {
            Kind::Bump => w.bumped(u64::from(i.index)) == h,
            _ => i.index == h,
        })
    })
}

/// How many times recovery looks again (yielding in between) for a live lane to stop naming
/// an object; a live thread names one only for the few instructions of an alloc or free.
const NAMED_ROUNDS: usize = if cfg!(pitlane_loom) { 3 } else { 1000 };

/// Waits until no live lane names `h`; `false` if one still does after `NAMED_ROUNDS` looks
/// (a thread descheduled mid-operation, or a scribbled record): the object is then left for
/// a later recovery.
fn wait_unnamed<W: Words>(w: &W, skip: &HashSet<usize>, h: u32) -> bool {
    for _ in 0..NAMED_ROUNDS {
        if !named_by_live(w, skip, h) {
            return true;
        }
        pitlane_sync::shim::thread::yield_now();
    }
    false
}

/// Walks the private chain from `first` to `NIL`, bounded by the capacity; returns its members.
fn walk<W: Words>(w: &W, first: u32) -> Result<Vec<u32>, Corrupt> {
    let mut members = Vec::new();
    let mut seen = HashSet::new();
    let mut at = first;
    while at != NIL {
        if at >= w.capacity() {
            return Err(Corrupt("detached chain index out of range"));
        }
        if !seen.insert(at) {
            return Err(Corrupt("detached chain has a cycle"));
        }
        members.push(at);
        at = w.next(at).load(Ordering::Relaxed);
    }
    Ok(members)
}

/// Detaches the whole chain of `shard`, announced on `lane`; returns its members.
fn detach<W: Words>(w: &W, lane: usize, shard: usize) -> Result<Vec<u32>, Corrupt> {
    let head_word = w.head(shard);
    let mut head = Head::from_bits(head_word.load(Ordering::Acquire));
    loop {
        if head.is_nil() {
            return Ok(Vec::new());
        }
        let x = head.index();
        if x >= w.capacity() {
            return Err(Corrupt("head index out of range"));
        }
        let st = w.state(x).load(Ordering::Acquire);
        let now = head_word.load(Ordering::Acquire);
        if now != head.to_bits() {
            head = Head::from_bits(now);
            continue;
        }
        announce(
            w,
            lane,
            Intent {
                kind: Kind::Detach,
                shard,
                index: x,
                generation: gen_of(st),
            },
        );
        step!();
        match head_word.compare_exchange(
            head.to_bits(),
            head.successor(NIL).to_bits(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return walk(w, x),
            Err(seen) => head = Head::from_bits(seen),
        }
    }
}

/// Puts the private chain `members` (as detached) back on top of `shard`, then sets `lane`
/// (which holds the `Detach` record) busy.
fn splice<W: Words>(w: &W, lane: usize, shard: usize, members: &[u32]) -> Result<(), Corrupt> {
    if let (Some(&first), Some(&tail)) = (members.first(), members.last()) {
        step!();
        let head_word = w.head(shard);
        let mut head = Head::from_bits(head_word.load(Ordering::Relaxed));
        loop {
            w.next(tail).store(head.index(), Ordering::Relaxed);
            match head_word.compare_exchange_weak(
                head.to_bits(),
                head.successor(first).to_bits(),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(seen) => head = Head::from_bits(seen),
            }
        }
    }
    w.lane_word(lane, 0).store(BUSY, Ordering::Release);
    Ok(())
}

/// Resolves the intents of `dead` lanes (see the module docs), using the caller's two lanes
/// `mine` (claimed, busy). The caller excludes every other recoverer. `frozen` are lanes of
/// live holders that hold records no thread acts on until the caller's recovery ends (records
/// a holder kept from its slot's previous holder, see `ShmSlab::open`): like the dead lanes,
/// they are not waited for. Each object still goes back at most once: putting it back
/// advances its generation, and a frozen record resolved later no longer matches it.
pub(crate) fn resolve<W: Words>(
    w: &W,
    mine: [usize; 2],
    dead: &[DeadLane],
    frozen: &[usize],
) -> Result<Resolved, Corrupt> {
    let (shards, capacity) = (w.shards(), w.capacity());
    let mut skip: HashSet<usize> = dead.iter().filter_map(|d| d.lane).collect();
    skip.extend(mine);
    skip.extend(frozen);
    let intents: Vec<(usize, Intent)> = dead
        .iter()
        .enumerate()
        .filter_map(|(k, d)| d.intent(shards, capacity).map(|i| (k, i)))
        .collect();
    let mut done = Resolved::default();
    let mut reclaimed: HashSet<u32> = HashSet::new();
    // Dead records to keep (their object is still named by a live lane).
    let mut keep: HashSet<usize> = HashSet::new();
    let mut touched: Vec<usize> = intents
        .iter()
        .filter(|(_, i)| i.kind != Kind::Bump)
        .map(|(_, i)| i.shard)
        .collect();
    touched.sort_unstable();
    touched.dedup();
    for s in touched {
        let chain = detach(w, mine[0], s)?;
        let listed: HashSet<u32> = chain.iter().copied().collect();
        for (k, i) in &intents {
            if !matches!(i.kind, Kind::Pop | Kind::Push) || i.shard != s {
                continue;
            }
            let h = i.index;
            // A live thread that names `h` may be taking it: wait for it to move on, then
            // read the state (which its claim, made before it moved on, is then in).
            if listed.contains(&h) || reclaimed.contains(&h) {
                continue;
            }
            if !wait_unnamed(w, &skip, h) {
                keep.insert(*k);
                done.kept.push(*k);
                continue;
            }
            let st = w.state(h).load(Ordering::Acquire);
            let lost = match i.kind {
                Kind::Pop => gen_of(st) == i.generation && owner_of(st).is_none(),
                _ => st == state(i.generation, FREED_BY | dead[*k].id as u32),
            };
            if !lost {
                continue;
            }
            // Lost: put it back as a free by the recoverer (its generation advances).
            if give_back_unowned(w, Some(mine[1]), s, h, st)? {
                reclaimed.insert(h);
                done.reclaimed += 1;
            }
        }
        for (k, i) in &intents {
            if i.shard == s && i.kind != Kind::Bump && !keep.contains(k) {
                clear(w, &dead[*k]);
            }
        }
        splice(w, mine[0], s, &chain)?;
    }
    // Never-used objects taken by the bump and never claimed.
    let bumped = w.bump_word().load(Ordering::Acquire);
    for (k, i) in &intents {
        if i.kind != Kind::Bump {
            continue;
        }
        let h = w.bumped(u64::from(i.index));
        if u64::from(i.index) >= bumped || reclaimed.contains(&h) {
            clear(w, &dead[*k]);
            continue;
        }
        if !wait_unnamed(w, &skip, h) {
            done.kept.push(*k);
            continue;
        }
        if w.state(h).load(Ordering::Acquire) == state(0, 0)
            && give_back_unowned(w, Some(mine[1]), h as usize % shards, h, state(0, 0))?
        {
            reclaimed.insert(h);
            done.reclaimed += 1;
        }
        clear(w, &dead[*k]);
    }
    for d in dead {
        if d.intent(shards, capacity).is_none() {
            clear(w, d);
        }
    }
    Ok(done)
}

/// Sets lane `lane` busy, for the caller's own records during a recovery: a lane of the
/// caller's slot that holds a dead record the caller has read into a [`DeadLane`] (whose
/// `lane` it set to `None`, so that resolving the record leaves the lane alone). [`restore`]
/// writes the record back if the resolution keeps it.
#[cfg(not(pitlane_loom))] // file-backed slabs only
pub(crate) fn borrow_lane<W: Words>(w: &W, lane: usize) {
    w.lane_word(lane, 0).store(BUSY, Ordering::Release);
}

/// Writes the record `d` was read from back into its lane (borrowed with [`borrow_lane`]):
/// the record, then its check word (a caller killed between the two leaves a record that
/// fails its check: ignored, its object leaks).
#[cfg(not(pitlane_loom))] // file-backed slabs only
pub(crate) fn restore<W: Words>(w: &W, d: &DeadLane) {
    w.lane_word(d.id, 0).store(d.words[0], Ordering::Relaxed);
    w.lane_word(d.id, 1).store(d.words[1], Ordering::Release);
}

/// Sets a resolved dead lane idle (unless it changed meanwhile: then it is not ours).
fn clear<W: Words>(w: &W, d: &DeadLane) {
    if d.words[0] == IDLE {
        return;
    }
    if let Some(lane) = d.lane {
        let _ = w.lane_word(lane, 0).compare_exchange(
            d.words[0],
            IDLE,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

/// On `lane`, if the caller has one: the intent to push `index`, freed at generation `g`
/// (so listed at `g + 1`), on `shard`.
#[inline]
fn announce_push<W: Words>(w: &W, lane: Option<usize>, shard: usize, index: u32, g: u32) {
    if let Some(lane) = lane {
        announce(
            w,
            lane,
            Intent {
                kind: Kind::Push,
                shard,
                index,
                generation: next_gen(g),
            },
        );
    }
}

/// Puts back a lost object whose state was read as `seen` (free): announced on `lane` (if the
/// caller has lanes), generation advanced, pushed on `shard`. `Ok(false)` if its state changed
/// meanwhile.
fn give_back_unowned<W: Words>(
    w: &W,
    lane: Option<usize>,
    shard: usize,
    index: u32,
    seen: u64,
) -> Result<bool, Corrupt> {
    let g = gen_of(seen);
    announce_push(w, lane, shard, index, g);
    step!();
    let freed = state(next_gen(g), lane.map_or(0, |l| FREED_BY | l as u32));
    let swapped = w
        .state(index)
        .compare_exchange(seen, freed, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok();
    if swapped {
        step!();
        freelist::push(w, shard, index);
    }
    if let Some(lane) = lane {
        w.lane_word(lane, 0).store(BUSY, Ordering::Release);
    }
    Ok(swapped)
}

/// Puts back `index`, found lost (handed out, neither listed nor owned) on a quiescent slab,
/// onto `shard`: as a free does, its generation advances first (a compare-exchange from the
/// free state read here), so that a dead process's intent record that still names the object
/// — `Bump` (state `(0, 0)`), `Pop` (its generation, free) or `Push` (its generation, freed by
/// the dead lane) — no longer matches it when recovery resolves the record later, wherever
/// the object was listed. `Ok(false)` when the object is owned now (the slab was not
/// quiescent): left alone. `lane`, when the caller has one, announces the push, so that a
/// caller killed inside it leaves a record recovery resolves.
pub(crate) fn put_back_lost<W: Words>(
    w: &W,
    lane: Option<usize>,
    shard: usize,
    index: u32,
) -> Result<bool, Corrupt> {
    let seen = w.state(index).load(Ordering::Acquire);
    if owner_of(seen).is_some() {
        return Ok(false);
    }
    give_back_unowned(w, lane, shard, index, seen)
}

/// Frees every bumped object whose owner `is_dead` says is gone, announced on `lane`; returns
/// how many.
pub(crate) fn reclaim_owned<W: Words>(
    w: &W,
    lane: usize,
    home: usize,
    mut is_dead: impl FnMut(u32) -> bool,
) -> u32 {
    let capacity = w.capacity();
    let bumped = w
        .bump_word()
        .load(Ordering::Acquire)
        .min(u64::from(capacity));
    let mut reclaimed = 0;
    for n in 0..bumped {
        let i = w.bumped(n);
        let st = w.state(i).load(Ordering::Acquire);
        let Some(tag) = owner_of(st) else {
            continue;
        };
        if !is_dead(tag) {
            continue;
        }
        // Whoever takes the owner away lists the object: a free by a live process that wins
        // the exchange leaves nothing to do here.
        if give_back(w, Some(lane), home, i, gen_of(st), Some(tag)).is_ok() {
            reclaimed += 1;
        }
        w.lane_word(lane, 0).store(BUSY, Ordering::Release);
    }
    reclaimed
}

/// The protocol over boxed words, for the loom models: objects `0..capacity`, all handed out
/// once and listed (round-robin over the shards) with generation 1; `slots` attachment slots
/// of `lanes_per_slot` lanes.
#[cfg(pitlane_loom)]
pub struct Model {
    heads: Box<[AtomicU64]>,
    next: Box<[pitlane_sync::shim::atomic::AtomicU32]>,
    states: Box<[AtomicU64]>,
    bump: AtomicU64,
    lanes: Box<[AtomicU64]>,
    per: usize,
}

#[cfg(pitlane_loom)]
impl Links<SLAB_INDEX_BITS> for Model {
    fn capacity(&self) -> u32 {
        self.next.len() as u32
    }
    fn shards(&self) -> usize {
        self.heads.len()
    }
    fn head(&self, shard: usize) -> &AtomicU64 {
        &self.heads[shard]
    }
    fn next(&self, index: u32) -> &pitlane_sync::shim::atomic::AtomicU32 {
        &self.next[index as usize]
    }
}

#[cfg(pitlane_loom)]
impl Words for Model {
    fn state(&self, index: u32) -> &AtomicU64 {
        &self.states[index as usize]
    }
    fn bump_word(&self) -> &AtomicU64 {
        &self.bump
    }
    fn bumped(&self, n: u64) -> u32 {
        n as u32
    }
    fn lane_word(&self, lane: usize, k: usize) -> &AtomicU64 {
        &self.lanes[2 * lane + k]
    }
    fn lanes_per_slot(&self) -> usize {
        self.per
    }
    fn lanes(&self) -> usize {
        self.lanes.len() / 2
    }
}

#[cfg(pitlane_loom)]
impl Model {
    /// A model slab (see the type's docs); `fresh` objects at the end are never handed out.
    pub fn new(
        capacity: u32,
        fresh: u32,
        shards: usize,
        slots: usize,
        lanes_per_slot: usize,
    ) -> Self {
        use pitlane_sync::shim::atomic::AtomicU32;
        let model = Self {
            heads: (0..shards)
                .map(|_| AtomicU64::new(Head::new(NIL, 0).to_bits()))
                .collect(),
            next: (0..capacity).map(|_| AtomicU32::new(NIL)).collect(),
            states: (0..capacity)
                .map(|i| AtomicU64::new(state(u32::from(i < capacity - fresh), 0)))
                .collect(),
            bump: AtomicU64::new(u64::from(capacity - fresh)),
            lanes: (0..2 * slots * lanes_per_slot)
                .map(|_| AtomicU64::new(IDLE))
                .collect(),
            per: lanes_per_slot,
        };
        for i in (0..capacity - fresh).rev() {
            freelist::push(&model, i as usize % shards, i);
        }
        model
    }

    /// Allocates for the holder of `slot`, owner `tag`: the object and its generation. A
    /// thread told to die stops where it is (`Err`), leaving its lane as it was.
    pub fn alloc(&self, slot: usize, tag: u32) -> Result<Option<(u32, u32)>, Corrupt> {
        let lane = acquire_lane(self, slot, 0).expect("an idle lane");
        let got = match take_bumped(self, Some(lane), tag)? {
            Some(i) => Some((i, 0)),
            None => take_any(self, Some(lane), slot % self.shards(), tag)?,
        };
        step!();
        release_lane(self, lane);
        Ok(got)
    }

    /// Frees `index` of generation `g` for the holder of `slot`; `Ok(false)` for a double free.
    pub fn free(&self, slot: usize, index: u32, g: u32) -> Result<bool, Corrupt> {
        let lane = acquire_lane(self, slot, 0).expect("an idle lane");
        match give_back(self, Some(lane), slot % self.shards(), index, g, None) {
            Ok(()) => {}
            Err(GiveFault::Died) => return Err(crash::DIED),
            Err(GiveFault::NotAllocated) => {
                release_lane(self, lane);
                return Ok(false);
            }
        }
        step!();
        release_lane(self, lane);
        Ok(true)
    }

    /// Recovery by the holder of `slot`: resolves the lanes of `dead_slots`, then frees what
    /// owners `is_dead` says are gone hold. Returns how many objects went back.
    pub fn recover(
        &self,
        slot: usize,
        dead_slots: &[usize],
        is_dead: impl FnMut(u32) -> bool,
    ) -> Result<u32, Corrupt> {
        let dead: Vec<DeadLane> = dead_slots
            .iter()
            .flat_map(|&s| s * self.per..(s + 1) * self.per)
            .map(|lane| DeadLane::read(self, lane))
            .collect();
        let mine = [0, 1].map(|k| acquire_lane(self, slot, k).expect("an idle lane"));
        let resolved = resolve(self, mine, &dead, &[])?;
        let owned = reclaim_owned(self, mine[1], 0, is_dead);
        for lane in mine {
            release_lane(self, lane);
        }
        Ok(resolved.reclaimed + owned)
    }

    /// On a quiescent model, what `Slab::reclaim_lost` does: puts back every object handed out
    /// but neither listed nor owned, announced on a lane of `slot`, onto shard
    /// `slot % shards`. Returns how many.
    pub fn reclaim_lost(&self, slot: usize) -> Result<u32, Corrupt> {
        let (listed, owned, handed_out) = self.contents();
        let lane = acquire_lane(self, slot, 0).expect("an idle lane");
        let mut reclaimed = 0;
        for i in handed_out {
            if listed.contains(&i) || owned.iter().any(|&(o, _)| o == i) {
                continue;
            }
            if put_back_lost(self, Some(lane), slot % self.shards(), i)? {
                reclaimed += 1;
            }
        }
        release_lane(self, lane);
        Ok(reclaimed)
    }

    /// On a quiescent model: every listed object (shard by shard), every owned one with its
    /// tag, and the objects ever handed out.
    pub fn contents(&self) -> (Vec<u32>, Vec<(u32, u32)>, Vec<u32>) {
        let mut listed = Vec::new();
        for s in 0..self.shards() {
            let mut at = Head::from_bits(self.heads[s].load(Ordering::Acquire)).index();
            while at != NIL && listed.len() <= self.next.len() {
                listed.push(at);
                at = self.next[at as usize].load(Ordering::Relaxed);
            }
        }
        let owned = (0..self.capacity())
            .filter_map(|i| {
                owner_of(self.states[i as usize].load(Ordering::Acquire)).map(|t| (i, t))
            })
            .collect();
        let bumped = self
            .bump
            .load(Ordering::Acquire)
            .min(u64::from(self.capacity()));
        (listed, owned, (0..bumped as u32).collect())
    }
}
