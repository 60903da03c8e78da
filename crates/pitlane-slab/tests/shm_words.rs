//! File-backed slabs whose shared words are written directly, through a second descriptor of
//! the file, exactly as a process killed at a given instant (or a hostile peer) leaves them:
//! dead intent records next to an object `reclaim_lost` then puts back, which a later
//! `recover()` or attachment to the dead slot must not list a second time; a cyclic free list
//! and a reset bump word, which must never make the slab hand one object to two holders.
//!
//! The offsets are recomputed here from the documented geometry (`layout.rs`), not taken from
//! the crate, so that a change of layout shows up as a failure here.
#![cfg(not(pitlane_loom))]

use std::fs::File;
use std::os::unix::fs::FileExt;

use pitlane_slab::{Config, ObjectId, ShmSlab, SlabError};
use pitlane_sync::Tagged;
use pitlane_testkit::scratch::Scratch;

// ---- the region layout, recomputed from the documented geometry (layout.rs) ----

const HEADS_AT: u64 = 256;
const HEAD_STRIDE: u64 = 128;
const BUMP_AT: u64 = 128;
const MAX_ATTACHED: u64 = 128;
const LANES: u64 = 16;
const LANE_STRIDE: u64 = 64;

/// The high bit of a free object's tag that names the lane whose free made it free.
const FREED_BY: u64 = 1 << 31;
/// A lane claimed by a thread that has announced nothing yet (`protocol::BUSY`).
const BUSY: u64 = 1 << 61;

type Head = Tagged<24>;

fn align_up(x: u64, a: u64) -> u64 {
    (x + a - 1) & !(a - 1)
}

struct Offsets {
    lanes_at: u64,
    next_at: u64,
    owners_at: u64,
    objects_at: u64,
}

fn offsets(c: &Config) -> Offsets {
    let cap = u64::from(c.capacity);
    let epochs_at = HEADS_AT + HEAD_STRIDE * u64::from(c.shards);
    let lanes_at = align_up(epochs_at + 8 * MAX_ATTACHED, 64);
    let next_at = lanes_at + LANE_STRIDE * LANES * MAX_ATTACHED;
    let owners_at = align_up(next_at + 4 * cap, 8);
    let objects_at = align_up(owners_at + 8 * cap, (c.align as u64).max(64));
    Offsets {
        lanes_at,
        next_at,
        owners_at,
        objects_at,
    }
}

/// What an intent record announces (`protocol::Kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Taking never-used object number `n` by the bump.
    Bump,
    /// Popping an object off a shard.
    Pop,
    /// Pushing an object freed by this lane onto a shard.
    Push,
}

/// An intent record as `protocol::Intent::encode` writes it, and its check word.
fn intent(kind: Kind, shard: u64, index: u32, generation: u32) -> (u64, u64) {
    let kind = match kind {
        Kind::Bump => 2_u64,
        Kind::Pop => 3,
        Kind::Push => 4,
    };
    let word = kind << 61
        | (shard & 0x3f) << 55
        | u64::from(index & 0xff_ffff) << 31
        | u64::from(generation & 0x7fff_ffff);
    (word, word.rotate_left(23) ^ 0x9e37_79b9_7f4a_7c15)
}

fn read_u64(file: &File, at: u64) -> u64 {
    let mut b = [0; 8];
    file.read_exact_at(&mut b, at).unwrap();
    u64::from_le_bytes(b)
}

fn write_u64(file: &File, at: u64, v: u64) {
    file.write_all_at(&v.to_le_bytes(), at).unwrap();
}

fn write_u32(file: &File, at: u64, v: u32) {
    file.write_all_at(&v.to_le_bytes(), at).unwrap();
}

fn head_of(file: &File, shard: u64) -> Head {
    Head::from_bits(read_u64(file, HEADS_AT + HEAD_STRIDE * shard))
}

/// The slab file at `path`, opened for reading and writing its words directly.
fn open_words(path: &std::path::Path) -> File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

/// Writes an intent record (`word`, `check`) into the lane at byte `at`.
fn write_record(file: &File, at: u64, (word, check): (u64, u64)) {
    write_u64(file, at, word);
    write_u64(file, at + 8, check);
}

/// The slab's one object is handed out once to `survivor`, and then the slab is empty (not
/// corrupt).
fn assert_one_object_handed_out_once(survivor: &ShmSlab, what: &str) {
    let id = survivor.try_alloc().unwrap().expect("the object");
    assert_eq!(survivor.owner_of(id).unwrap(), Some(survivor.owner_tag()));
    assert_eq!(survivor.try_alloc(), Ok(None), "{what}");
}

/// Leaves the words of the one-object slab behind `file` as `victim` (a handle of this test
/// process) would leave them if it were killed in the middle of an alloc or a free of object 0:
/// the object lost (handed out, neither listed nor owned) and a valid `kind` record naming it
/// in the victim's first lane. Returns the record's word 0.
fn leave_dead_record(kind: Kind, file: &File, victim: &ShmSlab, off: &Offsets) -> u64 {
    let lane = victim.slot() as u64 * LANES;
    let lane_at = off.lanes_at + LANE_STRIDE * lane;
    let state_at = off.owners_at; // object 0's state word
    let (word, check) = match kind {
        Kind::Bump => {
            // Killed between its bump exchange (0 -> 1) and its claim: the object is still
            // `(0, 0)`, never used.
            assert_eq!(read_u64(file, BUMP_AT), 0);
            write_u64(file, BUMP_AT, 1);
            intent(Kind::Bump, 0, 0, 0)
        }
        Kind::Pop | Kind::Push => {
            // The object goes through one alloc and free of the victim: listed on its home shard.
            let a = victim.alloc().unwrap();
            victim.free(a).unwrap();
            let home = (0..2).find(|&s| head_of(file, s).index() == a.index());
            let home = home.expect("the freed object is listed");
            if kind == Kind::Pop {
                // Killed between its head exchange and its claim: off the list, state
                // `(1, freed)`.
                let head = head_of(file, home);
                write_u64(
                    file,
                    HEADS_AT + HEAD_STRIDE * home,
                    head.successor(Head::NIL).to_bits(),
                );
                intent(Kind::Pop, home, a.index(), 1)
            } else {
                // Allocated again, then killed between its free's state exchange (which wrote
                // generation 2, freed by this lane) and its push.
                let b = victim.alloc().unwrap();
                assert_eq!(b, ObjectId::new(a.index(), 1));
                write_u64(file, state_at, 2 << 32 | FREED_BY | lane);
                intent(Kind::Push, home, a.index(), 2)
            }
        }
    };
    write_record(file, lane_at, (word, check));
    word
}

/// What is done after `reclaim_lost` put the dead process's object back.
#[derive(Clone, Copy, Debug)]
enum Then {
    /// The routine `recover()`, which resolves the dead slot's intent records.
    Recover,
    /// The next handle to attach, which takes the dead slot and resolves its records first.
    Attach,
    /// Nothing.
    Nothing,
}

/// A process attached in slot 1 is killed in the middle of an alloc or a free, leaving one
/// object lost (handed out, neither listed nor owned) and a valid intent record naming it in
/// its first lane. Then the survivor (slot 0) calls `reclaim_lost`, and `then` happens. At the
/// end the slab must be whole and its one object handed out exactly once.
///
/// The slab has one object and two shards. The dead process's home shard and the survivor's
/// differ (a handle's home shard is its slot plus the thread's number, modulo the shards), so
/// that for `Pop` and `Push` records `reclaim_lost` lists the object on a shard other than the
/// one the record names — where recovery's "not on the detached chain" test alone cannot tell
/// that the object was put back.
fn dead_record_then_reclaim_lost(kind: Kind, then: Then) {
    let dir = Scratch::new("dead-record");
    let path = dir.path("s");
    let config = Config::new(16, 1).with_shards(2);
    let off = offsets(&config);
    let mut survivor = ShmSlab::create(&path, config).unwrap();
    assert_eq!(survivor.layout().0 as u64, off.objects_at);
    let file = open_words(&path);
    let victim = ShmSlab::open(&path, config).unwrap();
    let slot = victim.slot() as u64;
    let word = leave_dead_record(kind, &file, &victim, &off);
    drop(victim); // SIGKILL: the lock goes, the words stay
    let report = survivor.check();
    assert_eq!(report.lost.len(), 1, "{kind:?}: {report}");
    // The remedy for a quiescent slab: put the lost object back.
    assert_eq!(survivor.reclaim_lost().unwrap(), 1, "{kind:?}");
    let report = survivor.check();
    assert!(report.is_consistent(), "{kind:?}: {report}");
    assert_eq!(report.free_listed, 1, "{kind:?}: {report}");
    if kind != Kind::Bump {
        // The premise: listed on a shard other than the one the record names.
        let record_shard = word >> 55 & 0x3f;
        assert_eq!(head_of(&file, record_shard).index(), Head::NIL, "{kind:?}");
    }
    let what = match then {
        Then::Recover => format!("recover: {:?}", survivor.recover().unwrap()),
        Then::Attach => {
            let next = ShmSlab::open(&path, config).unwrap();
            assert_eq!(next.slot() as u64, slot);
            "attach to the dead slot".to_string()
        }
        Then::Nothing => "nothing".to_string(),
    };
    let report = survivor.check();
    assert!(
        report.is_consistent() && report.free_listed == 1,
        "{kind:?} record, reclaim_lost, then {what}: the object is listed twice\n{report}"
    );
    assert_one_object_handed_out_once(&survivor, &format!("{kind:?}, then {what}"));
}

/// `Slab::reclaim_lost` advances the generation of each object it puts back, so that the dead
/// process's intent record that still names it — `Bump` (state `(0, 0)`), `Pop` (its
/// generation, free) or `Push` (its generation, freed by the dead lane), the last two naming
/// another shard than the one `reclaim_lost` listed it on — no longer matches it when the
/// routine `recover()` resolves the record: the object is listed once.
#[test]
fn recover_after_reclaim_lost_lists_each_object_once() {
    for kind in [Kind::Bump, Kind::Pop, Kind::Push] {
        dead_record_then_reclaim_lost(kind, Then::Recover);
    }
}

/// As `recover_after_reclaim_lost_lists_each_object_once`, when the next handle to attach
/// takes the dead slot and resolves its old intent records inside `ShmSlab::open`.
#[test]
fn attaching_to_the_dead_slot_after_reclaim_lost_lists_each_object_once() {
    for kind in [Kind::Bump, Kind::Pop, Kind::Push] {
        dead_record_then_reclaim_lost(kind, Then::Attach);
    }
}

/// `ShmSlab::reclaim_lost` (forwarded to `Slab::reclaim_lost`, since a `ShmSlab` lends no
/// `&mut Slab`) puts back what a process killed mid-alloc or mid-free left lost.
#[test]
fn shm_slab_reclaim_lost_puts_back_what_a_killed_process_left() {
    for kind in [Kind::Bump, Kind::Pop, Kind::Push] {
        dead_record_then_reclaim_lost(kind, Then::Nothing);
    }
}

/// Who resolves, once the live thread has moved on, the record whose resolution the attaching
/// handle put off.
#[derive(Clone, Copy, Debug)]
enum Later {
    /// The handle that attached to the dead slot, by its own `recover()`.
    Holder,
    /// A survivor's `recover()`, once that handle detached.
    Survivor,
}

/// What the other lanes of the dead slot hold, beside the record in its first lane.
#[derive(Clone, Copy, Debug)]
enum Rest {
    /// Nothing: they are idle.
    Idle,
    /// A claim with nothing announced yet (threads killed just after claiming a lane).
    Busy,
    /// Copies of the first lane's record (threads that announced on the same object).
    Copies,
}

/// A process attached in slot 1 is killed in the middle of an alloc or a free (its one object
/// lost, named by a valid record in its first lane), while a thread of a live handle (slot 2)
/// has announced an operation on the same object and not yet moved on (descheduled; its record
/// is written here directly). The next handle to attach takes slot 1 and resolves the dead
/// record inside `ShmSlab::open`: the live record still names the object after the wait, so
/// the resolution is put off — and the dead record must stay for a later recovery, as
/// `recover()` keeps it, not be dropped with the object lost. Once the live thread moves on,
/// `later` recovers: the object goes back exactly once, and the slab is whole.
///
/// `rest` says what the dead slot's other lanes hold: with anything but `Rest::Idle` the new
/// holder has no idle lane, and its resolutions borrow lanes that hold records.
fn record_put_off_at_attach(kind: Kind, later: Later, rest: Rest) {
    let dir = Scratch::new("put-off-at-attach");
    let path = dir.path("s");
    let config = Config::new(16, 1).with_shards(2);
    let off = offsets(&config);
    let survivor = ShmSlab::create(&path, config).unwrap();
    let file = open_words(&path);
    let victim = ShmSlab::open(&path, config).unwrap();
    let live = ShmSlab::open(&path, config).unwrap();
    let slot = victim.slot();
    assert_eq!((survivor.slot(), slot, live.slot()), (0, 1, 2));
    let word = leave_dead_record(kind, &file, &victim, &off);
    let first_at = off.lanes_at + LANE_STRIDE * (slot as u64 * LANES);
    let check = read_u64(&file, first_at + 8);
    let filler = match rest {
        Rest::Idle => None,
        Rest::Busy => Some((BUSY, 0)),
        Rest::Copies => Some((word, check)),
    };
    if let Some((w0, w1)) = filler {
        for k in 1..LANES {
            write_record(&file, first_at + LANE_STRIDE * k, (w0, w1));
        }
    }
    drop(victim); // SIGKILL: the lock goes, the words stay
    // A thread of `live` announced a pop of the same object (its generation as the dead record
    // has it, on the shard the record names) and was descheduled before its head exchange.
    let index = (word >> 31 & 0xff_ffff) as u32;
    let (named, named_check) = intent(
        Kind::Pop,
        word >> 55 & 0x3f,
        index,
        word as u32 & 0x7fff_ffff,
    );
    let live_lane_at = off.lanes_at + LANE_STRIDE * (live.slot() as u64 * LANES + 5);
    write_record(&file, live_lane_at, (named, named_check));
    let next = ShmSlab::open(&path, config).unwrap();
    assert_eq!(
        next.slot(),
        slot,
        "{kind:?}: the next handle takes the dead slot"
    );
    // The live thread moves on (its pop lost the race: the object was not on the list).
    write_record(&file, live_lane_at, (0, 0));
    let recovered = match later {
        Later::Holder => next.recover().unwrap(),
        Later::Survivor => {
            drop(next);
            survivor.recover().unwrap()
        }
    };
    drop(live);
    let report = survivor.check();
    assert!(
        report.is_consistent() && report.free_listed == 1,
        "{kind:?} record (other lanes: {rest:?}) put off at attach, then recovered by the \
         {later:?} ({recovered:?}): the object is lost or listed twice\n{report}"
    );
    let what = format!("{kind:?}, other lanes {rest:?}, {later:?}");
    assert_eq!((recovered.in_flight, recovered.deferred), (1, 0), "{what}");
    // Every record was resolved: the dead slot's lanes are idle.
    for lane in slot as u64 * LANES..(slot as u64 + 1) * LANES {
        let at = off.lanes_at + LANE_STRIDE * lane;
        assert_eq!(read_u64(&file, at), 0, "{what}: lane {lane}");
    }
    assert_one_object_handed_out_once(&survivor, &what);
}

/// An attaching handle whose resolution of the dead slot's records is put off (a live thread
/// still names the object) keeps the record for a later recovery: its own `recover()`, once the
/// live thread has moved on, puts the object back.
#[test]
fn a_record_put_off_at_attach_is_resolved_by_the_new_holders_recover() {
    for kind in [Kind::Bump, Kind::Pop, Kind::Push] {
        for rest in [Rest::Idle, Rest::Busy, Rest::Copies] {
            record_put_off_at_attach(kind, Later::Holder, rest);
        }
    }
}

/// As `a_record_put_off_at_attach_is_resolved_by_the_new_holders_recover`, when the new holder
/// detaches first and a survivor's `recover()` resolves the record it left in the slot.
#[test]
fn a_record_put_off_at_attach_is_resolved_after_the_new_holder_detaches() {
    for kind in [Kind::Bump, Kind::Pop, Kind::Push] {
        for rest in [Rest::Idle, Rest::Busy, Rest::Copies] {
            record_put_off_at_attach(kind, Later::Survivor, rest);
        }
    }
}

/// A file whose free list was made cyclic (b -> a -> b) and whose bump word was reset and
/// then set to u64::MAX: allocation fails with `Corrupt` or hands out distinct objects, never
/// one object to two holders; `check` names the cycle and the bump word; `recover` returns;
/// out-of-range heads and owner words of every shape are answered, never a panic or a hang.
#[test]
fn a_cyclic_free_list_and_a_reset_bump_word_never_hand_an_object_out_twice() {
    let dir = Scratch::new("cycle");
    let path = dir.path("s");
    let config = Config::new(16, 6).with_shards(1);
    let off = offsets(&config);
    let slab = ShmSlab::create(&path, config).unwrap();
    let file = open_words(&path);
    let a = slab.alloc().unwrap();
    let b = slab.alloc().unwrap();
    slab.free(a).unwrap();
    slab.free(b).unwrap(); // list: b -> a -> nil
    write_u32(&file, off.next_at + 4 * u64::from(a.index()), b.index()); // b -> a -> b
    let report = slab.check();
    assert!(
        report.problems.iter().any(|p| p.contains("twice")),
        "{report}"
    );
    // The bump word reset to 0: the bump would hand out objects already in use.
    write_u64(&file, BUMP_AT, 0);
    let mut held: Vec<ObjectId> = Vec::new();
    let mut errors = 0;
    for _ in 0..40 {
        match slab.try_alloc() {
            Ok(Some(id)) => {
                assert!(
                    held.iter().all(|h| h.index() != id.index()),
                    "{id} handed out twice"
                );
                held.push(id);
            }
            Ok(None) => {}
            Err(SlabError::Corrupt(_)) => errors += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(errors > 0);
    for id in &held {
        assert_eq!(slab.owner_of(*id).unwrap(), Some(slab.owner_tag()));
    }
    write_u64(&file, BUMP_AT, u64::MAX);
    let _ = slab.try_alloc();
    let report = slab.check();
    assert!(
        report.problems.iter().any(|p| p.contains("bump word")),
        "{report}"
    );
    slab.recover().unwrap();
    // Out-of-range head and link words.
    write_u64(&file, HEADS_AT, 0xff_fffe);
    assert!(matches!(
        slab.try_alloc(),
        Err(SlabError::Corrupt(_)) | Ok(None)
    ));
    let _ = slab.check();
    // Owner words with every tag shape: queries answer, never panic.
    for tag in [0_u64, 1, 0xff, 0x100, 0x180, 0x181, 1 << 31, u64::MAX] {
        let _ = slab.is_owner_alive(tag).unwrap();
        write_u64(&file, off.owners_at, tag);
        let _ = slab.current_id(0).unwrap();
        let _ = slab.owner_of(ObjectId::from_index(0)).unwrap();
    }
    let _ = slab.recover();
}

/// Who names the lost object, beside the dead process's record, when the next handles attach.
#[derive(Clone, Copy, Debug)]
enum Namer {
    /// A second process killed in the same instant, attached in slot 2, that had announced an
    /// operation on the same object: its dead record is seen from slot 1 as another slot's.
    DeadPeer,
    /// A thread of a live handle (slot 3), descheduled after announcing an operation on the
    /// object, that moves on once both new handles attached.
    LivePeer,
}

/// Two slots each keep, at attach, a record of their previous holder naming the same lost
/// object: the record of the dead process in slot 1 (as `leave_dead_record` leaves it) and, in
/// slot 2, a record naming the same object (a thread of a second dead process that announced
/// an operation on it). When the new holders of slots 1 and 2 attach, each resolution is put
/// off (`namer` names the object meanwhile), so each keeps its record. Once nothing else names
/// the object, each holder's `recover()` must put it back, exactly once: a kept record is
/// frozen (its lane is never claimed), so it must not stop another recovery the way a live
/// thread's record does, or each holder's record stops the other's recovery for as long as
/// both are attached, and the object stays lost.
fn records_kept_in_two_slots(kind: Kind, namer: Namer) {
    let dir = Scratch::new("kept-in-two-slots");
    let path = dir.path("s");
    let config = Config::new(16, 1).with_shards(2);
    let off = offsets(&config);
    let survivor = ShmSlab::create(&path, config).unwrap();
    let file = open_words(&path);
    let victim = ShmSlab::open(&path, config).unwrap();
    let second = ShmSlab::open(&path, config).unwrap();
    let live = ShmSlab::open(&path, config).unwrap();
    assert_eq!(
        (survivor.slot(), victim.slot(), second.slot(), live.slot()),
        (0, 1, 2, 3)
    );
    let word = leave_dead_record(kind, &file, &victim, &off);
    let index = (word >> 31 & 0xff_ffff) as u32;
    // The second process's thread had announced the same operation (a `Pop` of the object at
    // the record's generation for `Pop` and `Push`, the same `Bump` for `Bump`).
    let (named, named_check) = match kind {
        Kind::Bump => intent(Kind::Bump, 0, 0, 0),
        _ => intent(
            Kind::Pop,
            word >> 55 & 0x3f,
            index,
            word as u32 & 0x7fff_ffff,
        ),
    };
    let second_at = off.lanes_at + LANE_STRIDE * (second.slot() as u64 * LANES);
    write_record(&file, second_at, (named, named_check));
    let live_at = off.lanes_at + LANE_STRIDE * (live.slot() as u64 * LANES + 5);
    if let Namer::LivePeer = namer {
        write_record(&file, live_at, (named, named_check));
    }
    drop(victim); // SIGKILL, both: the locks go, the words stay
    drop(second);
    let one = ShmSlab::open(&path, config).unwrap();
    let two = ShmSlab::open(&path, config).unwrap();
    assert_eq!((one.slot(), two.slot()), (1, 2), "{kind:?}, {namer:?}");
    // The live thread moves on.
    write_record(&file, live_at, (0, 0));
    let first = one.recover().unwrap();
    let then = two.recover().unwrap();
    let report = survivor.check();
    assert!(
        report.is_consistent() && report.free_listed == 1,
        "{kind:?} record kept at attach by two slots (named by a {namer:?}), then both \
         holders recovered ({first:?}, {then:?}): the object is lost or listed twice\n{report}"
    );
    assert_one_object_handed_out_once(&survivor, &format!("{kind:?}, {namer:?}"));
    drop(live);
}

/// Records that two attached handles kept from their slots' previous holders, naming the same
/// object, do not stop each other's recovery: the holders' `recover()` puts the object back
/// once.
#[test]
fn records_kept_in_two_slots_do_not_stop_each_others_recovery() {
    for kind in [Kind::Bump, Kind::Pop, Kind::Push] {
        for namer in [Namer::DeadPeer, Namer::LivePeer] {
            records_kept_in_two_slots(kind, namer);
        }
    }
}

/// A holder killed with all 16 lanes of its slot holding records that name a lost object
/// while a live thread names it too: the next holder of the slot keeps all 16 records and has
/// no lane of its own. Its allocs and frees still complete (unannounced, after a bounded wait
/// for a lane), and its `recover()`, once the live thread has moved on, borrows two of the
/// kept records' lanes, puts the object back once and leaves every lane idle.
#[test]
fn a_holder_that_kept_all_sixteen_records_still_allocates_frees_and_recovers() {
    let dir = Scratch::new("all-lanes-kept");
    let path = dir.path("s");
    let config = Config::new(16, 4).with_shards(2);
    let off = offsets(&config);
    let survivor = ShmSlab::create(&path, config).unwrap();
    let file = open_words(&path);
    let victim = ShmSlab::open(&path, config).unwrap();
    let live = ShmSlab::open(&path, config).unwrap();
    let word = leave_dead_record(Kind::Pop, &file, &victim, &off);
    let first_at = off.lanes_at + LANE_STRIDE * (victim.slot() as u64 * LANES);
    let check = read_u64(&file, first_at + 8);
    for k in 1..LANES {
        write_record(&file, first_at + LANE_STRIDE * k, (word, check));
    }
    let slot = victim.slot();
    drop(victim);
    let live_at = off.lanes_at + LANE_STRIDE * (live.slot() as u64 * LANES + 5);
    write_record(&file, live_at, (word, check));
    let next = ShmSlab::open(&path, config).unwrap();
    assert_eq!(next.slot(), slot);
    for k in 0..LANES {
        assert_eq!(
            read_u64(&file, first_at + LANE_STRIDE * k),
            word,
            "lane {k} kept"
        );
    }
    let start = std::time::Instant::now();
    let ids: Vec<ObjectId> = (0..3)
        .map(|_| next.alloc().expect("a fresh object"))
        .collect();
    for id in ids {
        next.free(id).unwrap();
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    // Nothing was announced over the kept records.
    for k in 0..LANES {
        assert_eq!(
            read_u64(&file, first_at + LANE_STRIDE * k),
            word,
            "lane {k} kept"
        );
    }
    write_record(&file, live_at, (0, 0));
    let recovered = next.recover().unwrap();
    assert_eq!((recovered.in_flight, recovered.deferred), (1, 0));
    for k in 0..LANES {
        assert_eq!(
            read_u64(&file, first_at + LANE_STRIDE * k),
            0,
            "lane {k} idle"
        );
    }
    let report = survivor.check();
    assert!(
        report.is_consistent() && report.free_listed == 4,
        "{recovered:?}\n{report}"
    );
    drop(live);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
