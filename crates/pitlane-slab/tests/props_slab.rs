//! Property tests: scripts of alloc, free (of held ids, of stale ids — freed, perhaps handed out
//! again since — and of arbitrary and out-of-range ones), write and read (through held and
//! stale ids) against a model (the set of live ids and their contents), on slabs of every shape
//! from one object of zero bytes to over-aligned ones, heap and anonymous.
#![cfg(not(pitlane_loom))]

use std::collections::{HashMap, HashSet};

use pitlane_slab::{Config, ObjectId, Slab, SlabError};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Alloc,
    FreeHeld(usize),
    FreeStale(usize),
    FreeAny(u32, u32),
    Write(usize, u8),
    Read(usize),
    ReadStale(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Alloc),
        2 => any::<usize>().prop_map(Step::FreeHeld),
        1 => any::<usize>().prop_map(Step::FreeStale),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(i, g)| Step::FreeAny(i % 80, g % 4)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(k, b)| Step::Write(k, b)),
        1 => any::<usize>().prop_map(Step::Read),
        1 => any::<usize>().prop_map(Step::ReadStale),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        prop_oneof![Just(0_usize), Just(1), Just(7), Just(64), Just(4096)],
        prop_oneof![Just(1_usize), Just(8), Just(64), Just(4096)],
        1_u32..70,
        1_u32..9,
    )
        .prop_map(|(size, align, cap, shards)| {
            Config::new(size, cap).with_align(align).with_shards(shards)
        })
}

fn run(slab: &Slab, steps: &[Step]) -> Result<(), TestCaseError> {
    let cap = slab.capacity();
    let size = slab.config().object_size;
    let mut live: HashSet<ObjectId> = HashSet::new();
    let mut order: Vec<ObjectId> = Vec::new();
    let mut contents: HashMap<ObjectId, u8> = HashMap::new();
    // Ids freed, in order: never handed out again (the generation moved on).
    let mut stale: Vec<ObjectId> = Vec::new();
    for s in steps {
        match *s {
            Step::Alloc => match slab.alloc() {
                Some(id) => {
                    prop_assert!(id.index() < cap);
                    prop_assert!(live.insert(id), "{id} handed out twice");
                    prop_assert!(!stale.contains(&id), "{id} handed out again");
                    prop_assert!(!live.iter().any(|h| h.index() == id.index() && *h != id));
                    order.push(id);
                }
                // Single-threaded, so exhaustion is exact even with several shards.
                None => prop_assert_eq!(live.len(), cap as usize),
            },
            Step::FreeHeld(k) if !order.is_empty() => {
                let id = order.swap_remove(k % order.len());
                live.remove(&id);
                contents.remove(&id);
                prop_assert_eq!(slab.free(id), Ok(()));
                stale.push(id);
            }
            Step::FreeHeld(_) => {}
            Step::FreeStale(k) if !stale.is_empty() => {
                let id = stale[k % stale.len()];
                prop_assert_eq!(slab.free(id), Err(SlabError::DoubleFree(id)));
            }
            Step::FreeStale(_) => {}
            Step::FreeAny(i, g) => {
                // The current generation of a held object, or any other.
                let id = order
                    .iter()
                    .copied()
                    .find(|h| h.index() == i && g == 0)
                    .unwrap_or(ObjectId::new(i, g));
                let got = slab.free(id);
                if i >= cap {
                    let out_of_range = matches!(got, Err(SlabError::OutOfRange { .. }));
                    prop_assert!(out_of_range);
                } else if live.remove(&id) {
                    order.retain(|&h| h != id);
                    contents.remove(&id);
                    prop_assert_eq!(got, Ok(()));
                    stale.push(id);
                } else {
                    prop_assert_eq!(got, Err(SlabError::DoubleFree(id)));
                }
            }
            Step::Write(k, b) if !order.is_empty() && size > 0 => {
                let id = order[k % order.len()];
                slab.write(id, size - 1, &[b]).unwrap();
                contents.insert(id, b);
            }
            Step::Write(..) => {}
            Step::Read(k) if !order.is_empty() && size > 0 => {
                let id = order[k % order.len()];
                let mut buf = [0];
                slab.read(id, size - 1, &mut buf).unwrap();
                if let Some(&b) = contents.get(&id) {
                    prop_assert_eq!(buf[0], b);
                }
                prop_assert!(slab.read(id, size, &mut buf).is_err());
            }
            Step::Read(_) => {}
            Step::ReadStale(k) if !stale.is_empty() => {
                let id = stale[k % stale.len()];
                let mut buf = [0; 1];
                let len = size.min(1);
                prop_assert_eq!(
                    slab.read(id, 0, &mut buf[..len]),
                    Err(SlabError::NotAllocated(id))
                );
                prop_assert_eq!(
                    slab.write(id, 0, &buf[..len]),
                    Err(SlabError::NotAllocated(id))
                );
                prop_assert_eq!(slab.owner_of(id), Ok(None));
                prop_assert!(slab.object_ptr(id).is_err());
            }
            Step::ReadStale(_) => {}
        }
        prop_assert_eq!(
            slab.current_id(0).unwrap(),
            live.iter().copied().find(|id| id.index() == 0)
        );
    }
    let report = slab.check();
    prop_assert!(report.is_consistent(), "{}", report);
    prop_assert_eq!(report.owned as usize, live.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 64 } else { 256 }))]

    #[test]
    fn heap_slab_matches_the_model(config in config(), steps in prop::collection::vec(step(), 0..200)) {
        run(&Slab::heap(config).unwrap(), &steps)?;
    }

    #[test]
    fn anonymous_slab_matches_the_model(config in config(), steps in prop::collection::vec(step(), 0..100)) {
        run(&Slab::anonymous(config).unwrap(), &steps)?;
    }
}

#[test]
fn configurations_out_of_range_are_errors() {
    for c in [
        Config::new(8, 0),
        Config::new(8, pitlane_slab::MAX_CAPACITY + 1),
        Config::new(8, u32::MAX),
        Config::new(pitlane_slab::MAX_OBJECT_SIZE + 1, 1),
        Config::new(usize::MAX, 1),
        Config::new(8, 1).with_align(3),
        Config::new(8, 1).with_align(0),
        Config::new(8, 1).with_align(8192),
        Config::new(8, 1).with_shards(0),
        Config::new(8, 1).with_shards(65),
    ] {
        let err = Slab::heap(c).unwrap_err();
        assert!(
            matches!(err, pitlane_slab::OpenError::InvalidConfig(_)),
            "{c}: {err}"
        );
    }
    // Valid but 16 PiB: the memory cannot be had, which is an error, not an abort.
    let huge = Config::new(pitlane_slab::MAX_OBJECT_SIZE, pitlane_slab::MAX_CAPACITY);
    assert!(Slab::heap(huge).is_err());
    assert!(Slab::anonymous(huge).is_err());
}

#[test]
fn largest_capacity_and_alignment_work() {
    let slab = Slab::anonymous(Config::new(1, pitlane_slab::MAX_CAPACITY).with_shards(1)).unwrap();
    let last = ObjectId::from_index(pitlane_slab::MAX_CAPACITY - 1);
    // Never allocated: neither written nor freed.
    assert_eq!(
        slab.write(last, 0, &[7]),
        Err(SlabError::NotAllocated(last))
    );
    assert_eq!(slab.free(last), Err(SlabError::DoubleFree(last)));
    let big = Slab::heap(Config::new(4096, 3).with_align(4096)).unwrap();
    let id = big.alloc().unwrap();
    assert_eq!(big.object_ptr(id).unwrap().as_ptr().addr() % 4096, 0);
}

#[test]
fn typed_slab_of_zero_sized_and_large_values() {
    use pitlane_slab::TypedSlab;
    let unit =
        TypedSlab::<[u8; 0]>::new(Slab::heap(TypedSlab::<[u8; 0]>::config(2)).unwrap()).unwrap();
    let a = unit.alloc_with([]).unwrap();
    let b = unit.alloc_with([]).unwrap();
    assert_ne!(a, b);
    assert!(unit.alloc_with([]).is_none());
    let big =
        TypedSlab::<[u64; 8192]>::new(Slab::heap(TypedSlab::<[u64; 8192]>::config(2)).unwrap())
            .unwrap();
    let id = big.alloc_with([9; 8192]).unwrap();
    assert!(big.get(id).unwrap().iter().all(|&w| w == 9));
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
