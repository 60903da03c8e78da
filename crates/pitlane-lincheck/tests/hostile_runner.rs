//! Hostile settings and inputs around the checker: a runner told to shrink for
//! `Duration::MAX`, a round whose threads cannot all be started, and drawings
//! (`History::timeline`) and `History::threads` of hand-made histories whose thread numbers are
//! huge or sparse (`usize::MAX`, `1 << 40`).
//!
//! What could hang or panic runs in a child process (this binary, re-run with
//! `HOSTILE_RUNNER_CHILD` naming the scenario and only `subprocess_entry` selected), so a hang
//! is a timeout rather than a stuck test suite.
#![cfg(not(pitlane_loom))]

use std::time::Duration;

use pitlane_lincheck::specs::{ContainerOp, ContainerRet, QueueSpec};
use pitlane_lincheck::{History, Runner, Settings, Shape, Shared, workload};
use pitlane_testkit::child::{rerun_test, scenario};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

const CHILD_ENV: &str = "HOSTILE_RUNNER_CHILD";

/// The scenarios' entry point in the child; does nothing in a normal test run.
#[test]
fn subprocess_entry() {
    let Some(name) = scenario(CHILD_ENV) else {
        return;
    };
    std::panic::set_hook(Box::new(|info| eprintln!("child panic: {info}")));
    let thread = match name.as_str() {
        "threads_refused" => {
            threads_refused();
            return;
        }
        "timeline_thread_max" => usize::MAX,
        // 2^40 where `usize` holds it; 2^30 on 32-bit targets.
        "timeline_thread_2_40" => 1usize << (usize::BITS - 24).min(40),
        other => panic!("unknown scenario {other}"),
    };
    let mut h = History::new();
    h.add(0, 0..2, ContainerOp::Push(1u64), ContainerRet::Pushed)
        .unwrap();
    h.add(thread, 1..3, ContainerOp::Pop, ContainerRet::Popped(1))
        .unwrap();
    let drawing = h.timeline().to_string();
    let lines: Vec<&str> = drawing.lines().collect();
    assert_eq!(lines.len(), 2, "{drawing}");
    assert!(lines[0].starts_with("t0 "), "{drawing}");
    assert!(lines[1].starts_with(&format!("t{thread} ")), "{drawing}");
    assert!(lines[1].contains("Popped(1)"), "{drawing}");
    eprintln!("drawn");
}

fn drawn_in_a_child(name: &str) {
    let ended = rerun_test("subprocess_entry", CHILD_ENV, name, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("{name}: the drawing did not finish in 30 s"));
    let err = String::from_utf8_lossy(&ended.stderr);
    assert!(
        ended.status.success() && err.contains("drawn"),
        "{name}: {}\n{err}",
        ended.status
    );
}

#[test]
fn a_history_of_thread_usize_max_is_drawn() {
    drawn_in_a_child("timeline_thread_max");
}

#[test]
fn a_history_of_thread_two_to_the_forty_is_drawn_in_two_lines() {
    drawn_in_a_child("timeline_thread_2_40");
}

#[test]
fn threads_of_a_history_with_thread_usize_max_does_not_overflow() {
    let mut h = History::new();
    h.add(usize::MAX, 0..1, (), ()).unwrap();
    assert_eq!(h.threads(), usize::MAX);
    h.add(3, 0..1, (), ()).unwrap();
    assert_eq!(h.threads(), usize::MAX);
}

#[test]
fn a_failure_is_shrunk_without_panicking_when_shrink_time_is_duration_max() {
    // A "queue" whose pops return a value never pushed: the first round with a pop fails.
    let subject = Shared::new(
        || (),
        |_: &(), op: &ContainerOp<u64>| match op {
            ContainerOp::Push(_) => ContainerRet::Pushed,
            ContainerOp::Pop => ContainerRet::Popped(u64::MAX),
        },
    );
    let settings = Settings {
        threads: 2,
        ops_per_thread: 4,
        rounds: 50,
        shrink_time: Duration::MAX,
        shrink_attempts: 3,
        ..Settings::default()
    };
    let report = Runner::new(QueueSpec::new(), subject, workload::push_pop)
        .settings(settings)
        .run()
        .expect("valid settings");
    let failure = report.failure.expect("the bad pop is caught");
    assert!(failure.shape.threads * failure.shape.ops_per_thread <= 8);
    assert!(failure.to_string().contains("NOT LINEARIZABLE"));
}

/// A round whose threads cannot all be started (an address-space limit leaves no room for
/// their stacks): the threads already started must be let go and the call must panic with
/// the reason, where they used to wait for the missing ones for ever.
fn threads_refused() {
    let subject = Shared::new(|| (), |_: &(), _: &ContainerOp<u64>| ContainerRet::Pushed);
    let runner = Runner::new(QueueSpec::new(), subject, workload::push_pop);
    let shape = Shape {
        threads: 1000,
        ops_per_thread: 1,
    };
    // Threads' stacks (2 MiB each by default) are mapped: 1000 of them do not fit in 64 MiB.
    pitlane_testkit::memory::with_address_space_limit(64 << 20, || {
        let _ = runner.record(shape, 1);
    });
    eprintln!("all 1000 threads started under the limit");
}

#[test]
fn a_round_whose_threads_cannot_all_start_panics_instead_of_hanging() {
    let ended = rerun_test(
        "subprocess_entry",
        CHILD_ENV,
        "threads_refused",
        Duration::from_secs(60),
    )
    .expect("the round hung: started threads waited for ones that never started");
    let err = String::from_utf8_lossy(&ended.stderr);
    assert!(!ended.status.success(), "{err}");
    assert!(err.contains("could not start thread"), "{err}");
}
