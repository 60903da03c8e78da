//! The documented contracts of the public API, each checked as the rustdoc states it: the
//! ranges of `Config`'s fields, `Config::new`'s alignment rule, the errors each method lists
//! under `# Errors`, the order in which `alloc` hands objects out, and the freelist's dealing
//! of indices over its shards.
#![cfg(not(pitlane_loom))]

use std::panic::catch_unwind;

use pitlane_slab::freelist::Freelist;
use pitlane_slab::{
    CheckReport, Config, MAX_ALIGN, MAX_CAPACITY, MAX_OBJECT_SIZE, MAX_SHARDS, OpenError, Slab,
    SlabError,
};

fn invalid(config: Config) -> &'static str {
    match Slab::heap(config) {
        Err(OpenError::InvalidConfig(what)) => what,
        other => panic!("{config}: expected InvalidConfig, got {other:?}"),
    }
}

/// `Config::new`: "aligned to 8 (or to the size rounded up to a power of two, if smaller),
/// 8 shards, type tag 0".
#[test]
fn config_new_alignment_rule() {
    for size in [0_usize, 1, 2, 3, 4, 5, 7, 8, 9, 16, 4097, usize::MAX] {
        let c = Config::new(size, 1);
        let expected = size.max(1).checked_next_power_of_two().unwrap_or(8).min(8);
        assert_eq!(c.align, expected, "size {size}");
        assert!(c.align.is_power_of_two());
        assert_eq!((c.shards, c.type_tag, c.capacity), (8, 0, 1));
    }
}

/// The ranges the field docs give: object size 0 to 1 GiB, alignment a power of two up to
/// 4096, capacity 1 to `MAX_CAPACITY` (2^24 - 2), shards 1 to 64. Each bound and the value
/// just past it, and the largest value of each field's type.
#[test]
fn config_ranges_are_enforced_at_both_ends() {
    assert_eq!(MAX_CAPACITY, (1 << 24) - 2);
    assert_eq!(MAX_SHARDS, 64);
    assert_eq!(MAX_ALIGN, 4096);
    assert_eq!(MAX_OBJECT_SIZE, 1 << 30);
    // Accepted edges (small capacities keep the regions small).
    for config in [
        Config::new(0, 1),
        Config::new(1, 1).with_align(1),
        Config::new(8, 1).with_align(MAX_ALIGN),
        Config::new(8, 1).with_shards(1),
        Config::new(8, 1).with_shards(MAX_SHARDS),
        Config::new(8, 1).with_type_tag(u64::MAX),
    ] {
        let slab = Slab::heap(config).unwrap_or_else(|e| panic!("{config}: {e}"));
        assert_eq!(*slab.config(), config);
        assert!(slab.alloc().is_some());
    }
    // Refused edges, with the messages the ranges promise.
    assert_eq!(
        invalid(Config::new(MAX_OBJECT_SIZE + 1, 1)),
        "object size above 1 GiB"
    );
    assert_eq!(
        invalid(Config::new(usize::MAX, 1)),
        "object size above 1 GiB"
    );
    for align in [0, 3, 12, MAX_ALIGN * 2, usize::MAX] {
        assert_eq!(
            invalid(Config::new(8, 1).with_align(align)),
            "alignment must be a power of two of at most 4096",
            "align {align}"
        );
    }
    for capacity in [0, MAX_CAPACITY + 1, u32::MAX] {
        assert_eq!(
            invalid(Config::new(8, capacity)),
            "capacity must be 1 to 16777214",
            "capacity {capacity}"
        );
    }
    for shards in [0, MAX_SHARDS + 1, u32::MAX] {
        assert_eq!(
            invalid(Config::new(8, 1).with_shards(shards)),
            "shards must be 1 to 64",
            "shards {shards}"
        );
    }
    // The same checks guard the other constructors.
    assert!(matches!(
        Slab::anonymous(Config::new(8, 0)),
        Err(OpenError::InvalidConfig(_))
    ));
    // `OpenError::InvalidConfig`'s text.
    assert_eq!(
        OpenError::InvalidConfig("shards must be 1 to 64").to_string(),
        "invalid slab configuration: shards must be 1 to 64"
    );
}

/// `Slab::alloc`: "Never-used objects come first, by bumping a counter (they are zero bytes);
/// then the freelists". With one shard, `None` means every object is allocated.
#[test]
fn never_used_objects_come_first_and_none_means_all_taken() {
    let slab = Slab::heap(Config::new(8, 4).with_shards(1)).unwrap();
    let first = slab.alloc().unwrap();
    slab.write(first, 0, &[9; 8]).unwrap();
    slab.free(first).unwrap();
    // Three never-used objects remain: they come before the freed one, each zeroed, at
    // generation 0.
    let mut fresh = Vec::new();
    for _ in 0..3 {
        let id = slab.alloc().unwrap();
        assert_ne!(id.index(), first.index());
        assert_eq!(id.generation(), 0);
        let mut buf = [1; 8];
        slab.read(id, 0, &mut buf).unwrap();
        assert_eq!(buf, [0; 8]);
        fresh.push(id);
    }
    // Then the freelist: the freed object, one generation on, its bytes as they were left.
    let again = slab.alloc().unwrap();
    assert_eq!((again.index(), again.generation()), (first.index(), 1));
    assert_eq!(slab.alloc(), None);
    assert_eq!(slab.try_alloc(), Ok(None));
    let report = slab.check();
    assert!(report.is_consistent(), "{report}");
    assert_eq!((report.bumped, report.owned, report.free_listed), (4, 4, 0));
}

/// `Slab::atomic_u64`'s `# Errors` lists `OutOfBounds` and `Misaligned`; like every access
/// through an id it also checks the id (as `read` and `write` document): an index past the
/// capacity is `OutOfRange`, a freed (stale) id is `NotAllocated`.
#[test]
fn atomic_u64_checks_the_id_as_read_and_write_do() {
    let slab = Slab::heap(Config::new(16, 2).with_align(8)).unwrap();
    let id = slab.alloc().unwrap();
    slab.atomic_u64(id, 8).unwrap();
    assert_eq!(
        slab.atomic_u64(id, 4).unwrap_err(),
        SlabError::Misaligned { offset: 4 }
    );
    assert_eq!(
        slab.atomic_u64(id, 16).unwrap_err(),
        SlabError::OutOfBounds {
            offset: 16,
            len: 8,
            object_size: 16
        }
    );
    let out = pitlane_slab::ObjectId::from_index(2);
    assert_eq!(
        slab.atomic_u64(out, 0).unwrap_err(),
        SlabError::OutOfRange {
            index: 2,
            capacity: 2
        }
    );
    slab.free(id).unwrap();
    assert_eq!(
        slab.atomic_u64(id, 0).unwrap_err(),
        SlabError::NotAllocated(id)
    );
}

/// Every `SlabError`'s `Display`, against the variant docs: each names what went wrong.
#[test]
fn slab_error_texts() {
    let id = pitlane_slab::ObjectId::new(4, 2);
    let cases = [
        (
            SlabError::OutOfRange {
                index: 5,
                capacity: 5,
            },
            "object index 5 out of range (capacity 5)",
        ),
        (
            SlabError::DoubleFree(id),
            "object #4.2 is not allocated (double free, or a stale id?)",
        ),
        (
            SlabError::NotAllocated(id),
            "object #4.2 is not allocated (freed, or a stale id)",
        ),
        (
            SlabError::OutOfBounds {
                offset: 3,
                len: 8,
                object_size: 8,
            },
            "bytes 3..3+8 leave the object of 8 bytes",
        ),
        (
            SlabError::Misaligned { offset: 4 },
            "offset 4 is not an 8-aligned word",
        ),
        (
            SlabError::Corrupt("head index out of range"),
            "slab corrupt: head index out of range",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}

/// `CheckReport::is_consistent`: "No problem and no lost object".
#[test]
fn check_report_consistency_is_problems_and_lost() {
    let mut report = CheckReport::default();
    assert!(report.is_consistent());
    report.lost.push(pitlane_slab::ObjectId::from_index(0));
    assert!(!report.is_consistent());
    assert!(report.to_string().ends_with("INCONSISTENT"));
    report.lost.clear();
    report.problems.push("a cycle".into());
    assert!(!report.is_consistent());
}

/// `Freelist::full`: "A list holding every index, dealt round-robin over the shards"; `pop`
/// and `pop_any` take the shard modulo the shard count.
#[test]
fn freelist_full_deals_round_robin_and_shards_wrap() {
    let list: Freelist = Freelist::full(10, 3);
    assert_eq!((list.capacity(), list.shards()), (10, 3));
    for shard in 0..3 {
        // `shard + 3` is the same shard.
        let mut got: Vec<u32> = std::iter::from_fn(|| list.pop(shard + 3).unwrap()).collect();
        got.sort_unstable();
        let expected: Vec<u32> = (0..10).filter(|i| *i as usize % 3 == shard).collect();
        assert_eq!(got, expected, "shard {shard}");
    }
    assert_eq!(list.pop_any(usize::MAX).unwrap(), None);
    list.push(usize::MAX, 9).unwrap();
    assert_eq!(list.pop(usize::MAX % 3).unwrap(), Some(9));
}

/// `Freelist::new`'s `# Panics`: a capacity that is not below the nil index, or no shard.
/// The largest capacity below it works.
#[test]
fn freelist_new_panics_as_documented() {
    let nil = (1_u32 << 24) - 1;
    let largest: Freelist = Freelist::new(nil - 1, 1);
    assert_eq!(largest.capacity(), nil - 1);
    assert!(catch_unwind(|| Freelist::<24>::new(nil, 1)).is_err());
    assert!(catch_unwind(|| Freelist::<24>::new(1, 0)).is_err());
}

/// `Freelist::full` calls `new`, so it panics for the same arguments: its docs say so.
#[test]
fn freelist_full_panics_as_new_does() {
    let message = pitlane_testkit::panics::message_of(|| drop(Freelist::<24>::full(4, 0)));
    assert_eq!(message, "a freelist needs at least one shard");
}
