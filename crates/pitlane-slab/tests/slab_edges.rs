//! Edges of the slab's API: parameters at 0, 1 and their largest values, spans whose end
//! overflows, ids of another slab, and a `CheckReport` built by hand.
#![cfg(not(pitlane_loom))]

use pitlane_slab::{
    CheckReport, Config, MAX_ALIGN, MAX_CAPACITY, MAX_OBJECT_SIZE, ObjectId, Slab, SlabError,
};

/// Parameters at 0, 1 and their largest values, and spans whose end overflows: errors, never
/// a panic or an access outside the object.
#[test]
fn edge_parameters_and_overflowing_spans() {
    // Zero-sized objects, each alignment up to a page, capacity 1, more shards than objects.
    for align in [1, 2, 8, 64, 4096] {
        let slab = Slab::heap(Config::new(0, 1).with_align(align).with_shards(64)).unwrap();
        let id = slab.alloc().unwrap();
        assert_eq!(slab.object_ptr(id).unwrap().as_ptr().addr() % align, 0);
        slab.write(id, 0, &[]).unwrap();
        assert!(matches!(
            slab.write(id, 0, &[1]),
            Err(SlabError::OutOfBounds { .. })
        ));
        assert!(matches!(
            slab.read(id, 1, &mut []),
            Err(SlabError::OutOfBounds { .. })
        ));
        assert!(slab.atomic_u64(id, 0).is_err());
        assert_eq!(slab.alloc(), None);
        slab.free(id).unwrap();
        assert_eq!(slab.free(id), Err(SlabError::DoubleFree(id)));
        let again = slab.alloc().unwrap();
        assert_eq!((again.index(), again.generation()), (0, 1));
        assert!(slab.check().is_consistent());
    }
    // Offsets whose end overflows usize.
    let slab = Slab::heap(Config::new(16, 1)).unwrap();
    let id = slab.alloc().unwrap();
    assert!(matches!(
        slab.write(id, usize::MAX, &[1]),
        Err(SlabError::OutOfBounds { .. })
    ));
    assert!(matches!(
        slab.read(id, usize::MAX - 7, &mut [0; 8]),
        Err(SlabError::OutOfBounds { .. })
    ));
    assert!(slab.atomic_u64(id, usize::MAX - 3).is_err());
    assert!(matches!(
        slab.atomic_u64(id, 4),
        Err(SlabError::Misaligned { .. })
    ));
    // Ids out of range, or with a generation no object can have (bit 31 set).
    let max = ObjectId::new(u32::MAX, u32::MAX);
    assert!(matches!(slab.free(max), Err(SlabError::OutOfRange { .. })));
    assert!(slab.owner_of(max).is_err());
    assert!(slab.current_id(u32::MAX).is_err());
    let high = ObjectId::new(id.index(), id.generation() | 1 << 31);
    assert_eq!(slab.free(high), Err(SlabError::DoubleFree(high)));
    assert_eq!(
        slab.read(high, 0, &mut [0; 1]),
        Err(SlabError::NotAllocated(high))
    );
    assert_eq!(slab.owner_of(high).unwrap(), None);
    // The largest object, one of it: its last byte is reachable, the next is not.
    let big = Slab::heap(Config::new(MAX_OBJECT_SIZE, 1).with_align(MAX_ALIGN)).unwrap();
    let id = big.alloc().unwrap();
    big.write(id, MAX_OBJECT_SIZE - 1, &[7]).unwrap();
    let mut b = [0; 1];
    big.read(id, MAX_OBJECT_SIZE - 1, &mut b).unwrap();
    assert_eq!(b, [7]);
    assert!(big.write(id, MAX_OBJECT_SIZE, &[7]).is_err());
    // Largest capacity with the most shards: every bump index is distinct (check walks them).
    let wide = Slab::anonymous(Config::new(0, MAX_CAPACITY).with_shards(64)).unwrap();
    for _ in 0..1000 {
        wide.alloc().unwrap();
    }
    assert!(wide.check().is_consistent());
}

/// Copies at every offset and length around the 8-byte words (the copies go a word at a time
/// where aligned, a byte at a time at the edges) land exactly where they were aimed.
#[test]
fn reads_and_writes_at_every_offset_and_length_around_the_words() {
    let slab = Slab::heap(Config::new(40, 1).with_align(8)).unwrap();
    let id = slab.alloc().unwrap();
    let mut model = [0_u8; 40];
    let mut stamp = 1_u8;
    for offset in 0..24 {
        for len in 0..=(40 - offset).min(20) {
            let data: Vec<u8> = (0..len as u8).map(|k| stamp.wrapping_add(k)).collect();
            slab.write(id, offset, &data).unwrap();
            model[offset..offset + len].copy_from_slice(&data);
            let mut whole = [0; 40];
            slab.read(id, 0, &mut whole).unwrap();
            assert_eq!(whole, model, "write of {len} bytes at {offset}");
            let mut part = vec![0; len];
            slab.read(id, offset, &mut part).unwrap();
            assert_eq!(part, data, "read of {len} bytes at {offset}");
            stamp = stamp.wrapping_add(7);
        }
    }
}

/// Freeing an id of another slab (same index and generation) frees this slab's live object:
/// ids carry no slab identity. Documented ("any handle may free any allocated object"); the
/// holder's id is then stale and its accesses fail rather than alias.
#[test]
fn a_foreign_id_frees_a_live_object_and_the_holder_sees_it() {
    let one = Slab::heap(Config::new(8, 4)).unwrap();
    let two = Slab::heap(Config::new(8, 4)).unwrap();
    let mine = two.alloc().unwrap();
    let foreign = one.alloc().unwrap();
    assert_eq!(foreign, mine);
    two.free(foreign).unwrap();
    assert_eq!(two.write(mine, 0, &[1]), Err(SlabError::NotAllocated(mine)));
}

/// `CheckReport`'s fields are public and it is `Default`: a report built by hand with more
/// objects handed out than the capacity formats (the "never used" count saturates at 0)
/// instead of panicking on an overflowing subtraction (or wrapping, in release builds).
#[test]
fn a_hand_built_check_report_formats_without_overflow() {
    let mut report = CheckReport::default();
    report.bumped = 1;
    let shown = std::panic::catch_unwind(|| report.to_string());
    let shown = shown.expect("formatting a CheckReport panicked");
    assert!(shown.contains("never used 0"), "{shown}");
    report.capacity = u32::MAX;
    report.bumped = 0;
    assert!(
        report
            .to_string()
            .contains(&format!("never used {}", u32::MAX))
    );
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
