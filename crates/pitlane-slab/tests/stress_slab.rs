//! Stress: threads allocate, stamp, check and free objects; every object carries its holder's
//! stamp, so a double hand-out or a lost write is caught, and the slab must be whole at the end.
//! On heap slabs and on file-backed ones (a sealed memory file), whose alloc and free also
//! write intent records, with a recovery by a second handle running meanwhile.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::Ordering;

use pitlane_slab::{Config, ShmSlab, Slab};
use pitlane_testkit::stress::run_threads;

fn run(config: Config, threads: usize, pairs: u64, hold: usize) {
    check_under_load(&Slab::heap(config).unwrap(), threads, pairs, hold, None);
}

fn run_shared(config: Config, threads: usize, pairs: u64, hold: usize) {
    use std::os::fd::AsFd;
    let slab = ShmSlab::create_memfd("pitlane-stress", config).unwrap();
    let recoverer = ShmSlab::open_fd(slab.as_fd(), config).unwrap();
    check_under_load(&slab, threads, pairs, hold, Some(&recoverer));
}

/// `threads` threads doing stamped pairs; with `recoverer`, one of them (thread 0) also calls
/// its `recover()` every 1000 pairs, which must find nothing to take.
fn check_under_load(
    slab: &Slab,
    threads: usize,
    pairs: u64,
    hold: usize,
    recoverer: Option<&ShmSlab>,
) {
    run_threads(threads, |t| {
        let stamp = t as u64 + 1;
        let mut held = Vec::with_capacity(hold);
        for n in 0..pairs {
            if t == 0
                && n % 1000 == 0
                && let Some(r) = recoverer
            {
                assert_eq!(r.recover().unwrap().reclaimed, 0);
            }
            if held.len() < hold
                && let Some(id) = slab.alloc()
            {
                let word = slab.atomic_u64(id, 0).unwrap();
                assert_eq!(
                    word.swap(stamp, Ordering::Relaxed),
                    0,
                    "object handed out while held"
                );
                held.push(id);
            }
            if !held.is_empty() && (n % 3 != 0 || held.len() == hold) {
                let id = held.swap_remove((n as usize) % held.len());
                let word = slab.atomic_u64(id, 0).unwrap();
                assert_eq!(
                    word.swap(0, Ordering::Relaxed),
                    stamp,
                    "object changed hands while held"
                );
                slab.free(id).unwrap();
            }
        }
        for id in held {
            slab.atomic_u64(id, 0).unwrap().store(0, Ordering::Relaxed);
            slab.free(id).unwrap();
        }
    });
    let report = slab.check();
    assert!(report.is_consistent(), "{report}");
    assert_eq!(report.owned, 0, "{report}");
    assert_eq!(report.free_listed, report.bumped, "{report}");
}

fn pairs() -> u64 {
    if cfg!(debug_assertions) {
        20_000
    } else {
        500_000
    }
}

#[test]
fn four_threads_on_eight_shards() {
    run(Config::new(64, 256).with_align(8), 4, pairs(), 16);
}

#[test]
fn four_threads_on_one_shard() {
    run(Config::new(8, 64).with_shards(1), 4, pairs(), 8);
}

#[test]
fn four_threads_on_a_shared_slab_with_intents_and_recovery() {
    run_shared(
        Config::new(64, 256).with_align(8).with_shards(4),
        4,
        pairs(),
        16,
    );
}

#[test]
fn threads_running_a_shared_slab_dry() {
    run_shared(Config::new(8, 6).with_shards(3), 4, pairs() / 10, 4);
}

#[test]
fn threads_running_the_slab_dry() {
    // Fewer objects than the threads want to hold: alloc returns None often.
    run(Config::new(8, 6).with_shards(3), 4, pairs(), 4);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
