//! Loom models of the crash-safe protocol: a process "killed" at each step of an alloc or a
//! free (its thread stops there, its lane keeps its intent record), while another process
//! allocates and frees, and a third recovers at the same time. At the end every object must be
//! listed exactly once or owned by the live process: none lost, none listed twice.
#![cfg(pitlane_loom)]

use loom::sync::Arc;
use loom::thread;
use pitlane_slab::protocol::{Model, crash};

const DEAD: usize = 0;
const LIVE: usize = 1;
const RECOVERER: usize = 2;
const DEAD_TAG: u32 = 1 << 8 | 1;
const LIVE_TAG: u32 = 1 << 8 | 2;

/// Every object handed out is listed once or owned by the live process (which holds `held`).
fn assert_whole(model: &Model, capacity: u32, held: &[u32]) {
    let (mut listed, owned, handed_out) = model.contents();
    for (i, tag) in &owned {
        assert_eq!(*tag, LIVE_TAG, "object {i} owned by {tag:#x}");
        assert!(held.contains(i), "object {i} owned but not held");
    }
    assert_eq!(owned.len(), held.len());
    listed.extend(owned.iter().map(|(i, _)| *i));
    listed.sort_unstable();
    assert!(handed_out.len() <= capacity as usize);
    assert_eq!(listed, handed_out, "lost or listed twice; owned {owned:?}");
}

/// The dying process runs `dying` (told to die after `steps`); the live one allocates and
/// frees (keeping one object when `keep`); recovery runs while the live one works.
fn run(capacity: u32, fresh: u32, shards: usize, steps: usize, keep: bool, free_first: bool) {
    loom::model(move || {
        let model = Arc::new(Model::new(capacity, fresh, shards, 3, 2));
        let m = model.clone();
        let dying = thread::spawn(move || {
            if free_first {
                let (i, g) = m.alloc(DEAD, DEAD_TAG).unwrap().unwrap();
                crash::die_after(steps);
                let _ = m.free(DEAD, i, g);
            } else {
                crash::die_after(steps);
                let _ = m.alloc(DEAD, DEAD_TAG);
            }
        });
        let m = model.clone();
        let live = thread::spawn(move || {
            let mut held = Vec::new();
            if let Some((i, g)) = m.alloc(LIVE, LIVE_TAG).unwrap() {
                if keep {
                    held.push(i);
                } else {
                    assert!(m.free(LIVE, i, g).unwrap());
                }
            }
            held
        });
        dying.join().unwrap();
        // The dying process is gone now: recover while the live one may still be working.
        model
            .recover(RECOVERER, &[DEAD], |tag| tag == DEAD_TAG)
            .unwrap();
        let held = live.join().unwrap();
        assert_whole(&model, capacity, &held);
    });
}

#[test]
fn killed_in_pop_with_a_live_popper_and_recovery() {
    for steps in 0..3 {
        run(2, 0, 1, steps, true, false);
    }
}

#[test]
fn killed_in_pop_with_a_live_pop_and_free() {
    for steps in 0..3 {
        run(2, 0, 1, steps, false, false);
    }
}

#[test]
fn killed_in_free_with_a_live_pop_and_free() {
    for steps in 0..3 {
        run(2, 0, 1, steps, false, true);
    }
}

#[test]
fn killed_in_bump_with_a_live_bump() {
    for steps in 0..3 {
        run(2, 2, 1, steps, true, false);
    }
}

#[test]
fn killed_in_pop_across_two_shards() {
    for steps in 0..3 {
        run(3, 0, 2, steps, true, false);
    }
}

#[test]
fn killed_in_a_double_free_racing_the_real_one() {
    // Both processes free one id: exactly one free succeeds; the other process dies at each
    // step of its own (announced) free. Recovery must not list the object a second time.
    for steps in 0..3 {
        loom::model(move || {
            let model = Arc::new(Model::new(2, 0, 2, 3, 2));
            let (i, g) = model.alloc(LIVE, LIVE_TAG).unwrap().unwrap();
            let m = model.clone();
            let dying = thread::spawn(move || {
                crash::die_after(steps);
                let _ = m.free(DEAD, i, g);
            });
            let m = model.clone();
            let live = thread::spawn(move || {
                let _ = m.free(LIVE, i, g).unwrap();
            });
            dying.join().unwrap();
            model
                .recover(RECOVERER, &[DEAD], |tag| tag == DEAD_TAG)
                .unwrap();
            live.join().unwrap();
            assert_whole(&model, 2, &[]);
        });
    }
}

/// A process killed at each step of a pop, a free and a bump leaves an object lost and an
/// intent record naming it; then, on the quiescent slab, `reclaim_lost` (by the live process,
/// whose shard is another than the dead record names) puts the object back; then recovery
/// runs while the live process allocates and frees. `reclaim_lost` advances the object's
/// generation, so the dead record no longer matches it: no object is listed twice.
fn killed_then_reclaimed_then_recovered(fresh: u32, free_first: bool) {
    for steps in 0..3 {
        loom::model(move || {
            let model = Arc::new(Model::new(3, fresh, 2, 3, 2));
            let m = model.clone();
            let dying = thread::spawn(move || {
                if free_first {
                    let (i, g) = m.alloc(DEAD, DEAD_TAG).unwrap().unwrap();
                    crash::die_after(steps);
                    let _ = m.free(DEAD, i, g);
                } else {
                    crash::die_after(steps);
                    let _ = m.alloc(DEAD, DEAD_TAG);
                }
            });
            dying.join().unwrap();
            // Quiescent: the live process puts back what is lost, onto its own shard (1).
            model.reclaim_lost(LIVE).unwrap();
            let m = model.clone();
            let live = thread::spawn(move || {
                // An object listed twice shows as a corrupt list here (its second pop finds
                // it owned) or in `assert_whole`.
                let corrupt = "the lists are corrupt: an object listed twice?";
                let mut held = Vec::new();
                if let Some((i, g)) = m.alloc(LIVE, LIVE_TAG).expect(corrupt) {
                    assert!(m.free(LIVE, i, g).unwrap());
                }
                if let Some((i, _)) = m.alloc(LIVE, LIVE_TAG).expect(corrupt) {
                    held.push(i);
                }
                held
            });
            let m = model.clone();
            let recoverer = thread::spawn(move || {
                m.recover(RECOVERER, &[DEAD], |tag| tag == DEAD_TAG)
                    .unwrap();
            });
            recoverer.join().unwrap();
            let held = live.join().unwrap();
            // The dead process's object, if it still held one, goes back to the list.
            model
                .recover(RECOVERER, &[DEAD], |tag| tag == DEAD_TAG)
                .unwrap();
            assert_whole(&model, 3, &held);
        });
    }
}

#[test]
fn killed_in_pop_then_reclaim_lost_then_recovery() {
    killed_then_reclaimed_then_recovered(0, false);
}

#[test]
fn killed_in_free_then_reclaim_lost_then_recovery() {
    killed_then_reclaimed_then_recovered(0, true);
}

#[test]
fn killed_in_bump_then_reclaim_lost_then_recovery() {
    killed_then_reclaimed_then_recovered(1, false);
}
