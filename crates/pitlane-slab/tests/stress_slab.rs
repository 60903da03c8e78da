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
            if let Some(r) = recoverer.filter(|_| t == 0 && n % 1000 == 0) {
                assert_eq!(r.recover().unwrap().reclaimed, 0);
            }
            let taken = if held.len() < hold {
                slab.alloc()
            } else {
                None
            };
            if let Some(id) = taken {
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

/// `Slab::read`, `Slab::write`, `Slab::atomic_u64` and a `TypedSlab`'s `get`/`set` on the same
/// whole words of one object, from four threads at once: safe calls only, so no data race.
/// The copies are relaxed atomic accesses, a word at a time where aligned; a copy made of
/// non-atomic (even volatile) accesses racing with `atomic_u64` would be a data race, which
/// ThreadSanitizer reports (CI runs the `stress_*` tests under it). Natively it checks that no
/// word tears: every word read has the eight equal bytes some writer stored.
#[test]
fn reads_writes_typed_values_and_atomic_words_of_one_object_may_race() {
    use pitlane_slab::TypedSlab;
    let slab = Slab::heap(Config::new(16, 1).with_shards(1).with_align(8)).unwrap();
    let id = slab.alloc().unwrap();
    let typed = TypedSlab::<[u64; 2], &Slab>::new(&slab).unwrap();
    let rounds: u64 = if cfg!(debug_assertions) {
        20_000
    } else {
        200_000
    };
    /// A word whose eight bytes are `b`.
    fn splat(b: u8) -> u64 {
        u64::from_ne_bytes([b; 8])
    }
    fn whole(w: u64) -> bool {
        w.to_ne_bytes().iter().all(|&b| b == w as u8)
    }
    run_threads(4, |t| {
        for n in 0..rounds {
            let b = (n as u8) | 1;
            match t {
                0 => slab.write(id, 0, &[b; 16]).unwrap(),
                1 => {
                    let mut buf = [0; 16];
                    slab.read(id, 0, &mut buf).unwrap();
                    for w in buf.chunks(8) {
                        assert!(w.iter().all(|&x| x == w[0]), "a word tore: {buf:?}");
                    }
                }
                2 => {
                    let word = slab.atomic_u64(id, 8).unwrap();
                    if n % 2 == 0 {
                        assert!(whole(word.load(Ordering::Relaxed)));
                    } else {
                        word.store(splat(b), Ordering::Relaxed);
                    }
                }
                _ => {
                    if n % 2 == 0 {
                        typed.set(id, [splat(b); 2]).unwrap();
                    } else {
                        let got = typed.get(id).unwrap();
                        assert!(got.iter().all(|&w| whole(w)), "{got:x?}");
                    }
                }
            }
        }
    });
}

/// A `write` that covers part of a word updates the word with a compare-and-swap that keeps
/// its other bytes, so it loses no update another thread makes to them meanwhile through
/// `atomic_u64` (and, every access being an aligned 8-byte atomic, the two do not race). One
/// thread counts in byte 0 of a word with `fetch_add` while another writes bytes 1 to 7 over
/// and over; every increment must survive.
#[test]
fn a_partial_word_write_keeps_concurrent_updates_to_the_rest_of_the_word() {
    let slab = Slab::heap(Config::new(16, 1).with_shards(1).with_align(8)).unwrap();
    let id = slab.alloc().unwrap();
    const INCREMENTS: u64 = 250;
    let writes: u64 = if cfg!(debug_assertions) {
        20_000
    } else {
        200_000
    };
    for _ in 0..20 {
        slab.write(id, 0, &[0; 8]).unwrap();
        run_threads(2, |t| {
            if t == 0 {
                let word = slab.atomic_u64(id, 0).unwrap();
                for _ in 0..INCREMENTS {
                    // Byte 0 is the low byte on a little-endian machine, the high one on a
                    // big-endian one: count in whichever `to_ne_bytes` puts first.
                    word.fetch_add(
                        u64::from_ne_bytes([1, 0, 0, 0, 0, 0, 0, 0]),
                        Ordering::Relaxed,
                    );
                    std::hint::spin_loop();
                }
            } else {
                for n in 0..writes {
                    slab.write(id, 1, &[(n as u8) | 1; 7]).unwrap();
                }
            }
        });
        let mut back = [0; 8];
        slab.read(id, 0, &mut back).unwrap();
        assert_eq!(u64::from(back[0]), INCREMENTS, "increments lost: {back:?}");
        let last = ((writes - 1) as u8) | 1;
        assert_eq!(back[1..], [last; 7]);
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
