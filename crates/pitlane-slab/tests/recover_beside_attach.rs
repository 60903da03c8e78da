//! `recover()` beside handles that attach, work and detach over and over.
//!
//! Every handle here is dropped cleanly with its intent records idle and every object it took
//! given back, so no dead process ever leaves anything in flight: a recovery that reports an
//! object in flight, or reclaims anything at all, has resolved the records of a *live* handle
//! (one that took a slot the recovery had already found free, then announced operations in
//! it). Such a recovery lists an object that a live free is about to list too (the object is
//! handed out twice) or takes an object from under a live alloc (whose claim then fails).
#![cfg(not(pitlane_loom))]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pitlane_slab::{Config, ShmSlab};
use pitlane_testkit::scratch::Scratch;

const CONFIG: Config = Config::new(8, 64).with_shards(2);

/// Runs the calling thread (and the threads it spawns later) on one CPU, so that threads
/// interleave only by preemption: a recovery is then often preempted between its look at the
/// attachment locks and its read of the intent records, and the other threads run meanwhile.
fn one_cpu() {
    // SAFETY: a zeroed `cpu_set_t` is an empty set; the calls only read and write it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        // The test still means something if this fails (only less often): ignore the result.
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[test]
fn recovery_never_resolves_the_records_of_a_handle_attached_meanwhile() {
    let seconds = std::env::var("PITLANE_SLAB_ATTACH_RACE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let dir = Scratch::new("recover-attach");
    let path = dir.path("s");
    let recoverer = ShmSlab::create(&path, CONFIG).unwrap();
    let stop = AtomicBool::new(false);
    let faults = Mutex::new(Vec::<String>::new());
    let (mut recoveries, mut in_flight, mut reclaimed) = (0_u64, 0_u64, 0_u64);
    std::thread::scope(|s| {
        let handle = s.spawn(|| {
            one_cpu();
            std::thread::scope(|s| {
                for _ in 0..6 {
                    s.spawn(|| {
                        while !stop.load(Ordering::Relaxed) {
                            let slab = ShmSlab::open(&path, CONFIG).unwrap();
                            for _ in 0..40 {
                                match slab.try_alloc() {
                                    Ok(Some(id)) => {
                                        if let Err(e) = slab.free(id) {
                                            faults.lock().unwrap().push(format!("free: {e}"));
                                        }
                                    }
                                    Ok(None) => {}
                                    Err(e) => faults.lock().unwrap().push(format!("alloc: {e}")),
                                }
                            }
                        }
                    });
                }
                let end = Instant::now() + Duration::from_secs(seconds);
                while Instant::now() < end {
                    match recoverer.recover() {
                        Ok(report) => {
                            recoveries += 1;
                            in_flight += u64::from(report.in_flight);
                            reclaimed += u64::from(report.reclaimed);
                        }
                        Err(e) => {
                            faults.lock().unwrap().push(format!("recover: {e}"));
                            break;
                        }
                    }
                }
                // The workers stop whatever happened, so that a failure ends the test.
                stop.store(true, Ordering::Relaxed);
            });
        });
        handle.join().unwrap();
    });
    let faults = faults.into_inner().unwrap();
    let report = recoverer.check();
    eprintln!(
        "{recoveries} recoveries: {reclaimed} reclaimed ({in_flight} in flight); {} faults",
        faults.len()
    );
    assert!(
        faults.is_empty(),
        "live operations failed: {:?}",
        &faults[..faults.len().min(5)]
    );
    assert_eq!(
        (reclaimed, in_flight),
        (0, 0),
        "recovery reclaimed objects though no handle ever died holding one"
    );
    assert!(report.is_consistent(), "{report}");
    assert_eq!(report.owned, 0, "{report}");
}
