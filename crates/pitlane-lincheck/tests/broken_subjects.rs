//! The broken subjects are caught within 10 seconds at default settings, on every seed
//! tried. (This file holds one test, so that nothing else in its process competes for the
//! two cores while it is timed; the timing covers the search for the failure, and the
//! shrinking after it is bounded by its own 2 s.)

use std::time::Duration;

use pitlane_lincheck::Settings;
use pitlane_lincheck::subjects::Registry;

#[test]
fn broken_subjects_are_caught_within_ten_seconds_on_every_seed() {
    let registry = Registry::builtin();
    let broken: Vec<_> = registry.entries().iter().filter(|e| e.broken).collect();
    assert_eq!(broken.len(), 2);
    for entry in broken {
        for seed in [0, 1, 2, 0x5EED, 0xDEAD_BEEF, u64::MAX] {
            let summary = entry
                .run(&Settings {
                    seed,
                    ..Settings::default()
                })
                .unwrap();
            let failure = summary.failure.unwrap_or_else(|| {
                panic!(
                    "{} passed {} rounds with seed {seed:#x}",
                    entry.name, summary.rounds
                )
            });
            assert!(
                failure.found_after < Duration::from_secs(10),
                "{} with seed {seed:#x} was found only after {:?}",
                entry.name,
                failure.found_after
            );
            assert!(
                failure.text.starts_with("NOT LINEARIZABLE"),
                "{}",
                failure.text
            );
            assert!(failure.text.contains("replay"), "{}", failure.text);
            eprintln!(
                "{} seed {seed:#x}: found in round {} after {:?}, shrunk to {} threads x {} ops",
                entry.name,
                failure.round,
                failure.found_after,
                failure.shape.threads,
                failure.shape.ops_per_thread
            );
        }
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
