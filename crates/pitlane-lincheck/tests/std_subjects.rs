//! The `std` subjects pass 10,000 rounds at the default size (4 threads x 8 operations).

use pitlane_lincheck::Settings;
use pitlane_lincheck::subjects::Registry;

#[test]
fn std_subjects_pass_ten_thousand_rounds() {
    let registry = Registry::builtin();
    let correct: Vec<_> = registry.entries().iter().filter(|e| !e.broken).collect();
    assert_eq!(correct.len(), 2);
    for entry in correct {
        let summary = entry
            .run(&Settings {
                rounds: 10_000,
                seed: 0xC0FFEE,
                ..Settings::default()
            })
            .unwrap();
        if let Some(failure) = &summary.failure {
            panic!("{} failed:\n{}", entry.name, failure.text);
        }
        assert_eq!(summary.rounds, 10_000, "{}", entry.name);
        assert_eq!(summary.linearizable, 10_000, "{}", entry.name);
        assert_eq!(summary.unknown, 0, "{}", entry.name);
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
