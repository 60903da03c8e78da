//! The `pitlane lincheck` command line: listing, passing and failing subjects, exit codes and
//! one-line errors.

mod common;

use common::{assert_one_line_error, pitlane};

#[test]
fn list_names_every_subject() {
    let (code, stdout, _) = pitlane(&["lincheck", "--list"]);
    assert_eq!(code, 0);
    for name in [
        "std-mutex-vecdeque",
        "std-mutex-vec-stack",
        "broken-racy-tail-queue",
        "broken-lost-push-stack",
    ] {
        assert!(stdout.contains(name), "{name} missing from:\n{stdout}");
    }
}

#[test]
fn std_subjects_pass_and_exit_zero() {
    for name in ["std-mutex-vecdeque", "std-mutex-vec-stack"] {
        let (code, stdout, stderr) =
            pitlane(&["lincheck", name, "--rounds", "2000", "--seed", "7"]);
        assert_eq!(code, 0, "{name}: {stdout}{stderr}");
        assert!(
            stdout.contains("ok: all 2000 histories linearizable"),
            "{stdout}"
        );
    }
}

#[test]
fn broken_subjects_fail_with_a_timeline_within_ten_seconds() {
    for name in ["broken-racy-tail-queue", "broken-lost-push-stack"] {
        for seed in ["1", "0x5eed", "987654321"] {
            let (code, stdout, stderr) = pitlane(&["lincheck", name, "--seed", seed]);
            assert_eq!(code, 1, "{name} --seed {seed}: {stdout}{stderr}");
            assert!(stdout.contains("NOT LINEARIZABLE"), "{stdout}");
            // A line per thread of the drawing.
            assert!(stdout.lines().any(|l| l.starts_with("t0 ")), "{stdout}");
            assert!(stdout.lines().any(|l| l.starts_with("t1 ")), "{stdout}");
            assert!(
                stdout.contains(&format!("replay: pitlane lincheck {name} --threads ")),
                "{stdout}"
            );
            let after: f64 = stdout
                .split("found after ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|secs| secs.parse().ok())
                .unwrap_or_else(|| panic!("no detection time in:\n{stdout}"));
            assert!(after < 10.0, "{name} --seed {seed} found after {after} s");
        }
    }
}

#[test]
fn the_replay_line_runs() {
    let (code, stdout, _) = pitlane(&["lincheck", "broken-racy-tail-queue", "--seed", "3"]);
    assert_eq!(code, 1);
    let replay = stdout
        .lines()
        .find_map(|l| l.strip_prefix("replay: pitlane "))
        .expect("a replay line");
    let args: Vec<&str> = replay.split_whitespace().collect();
    // The replayed scripts run; the race itself may or may not recur, so only the exit
    // code's meaning is checked.
    let (code, stdout, stderr) = pitlane(&args);
    assert!(code == 0 || code == 1, "{stdout}{stderr}");
}

#[test]
fn bad_arguments_are_one_line_errors() {
    assert_one_line_error(&["lincheck"], "name a subject");
    assert_one_line_error(
        &["lincheck", "no-such-subject"],
        "unknown subject 'no-such-subject'",
    );
    assert_one_line_error(
        &["lincheck", "std-mutex-vecdeque", "--threads", "0"],
        "malformed --threads '0'",
    );
    assert_one_line_error(
        &["lincheck", "std-mutex-vecdeque", "--threads", "65"],
        "malformed --threads",
    );
    assert_one_line_error(
        &["lincheck", "std-mutex-vecdeque", "--ops", "many"],
        "malformed --ops 'many'",
    );
    assert_one_line_error(
        &["lincheck", "std-mutex-vecdeque", "--rounds", "0"],
        "malformed --rounds '0'",
    );
    assert_one_line_error(
        &["lincheck", "std-mutex-vecdeque", "--seed", "0xnope"],
        "malformed --seed '0xnope'",
    );
}

#[test]
fn pitlane_queue_subjects_are_listed_and_pass() {
    let (_, listed, _) = pitlane(&["lincheck", "--list"]);
    for name in [
        "pitlane-mpmc",
        "pitlane-mpmc-small-segments",
        "pitlane-stack",
        "pitlane-bagpipe",
    ] {
        assert!(listed.contains(name), "{name} missing from:\n{listed}");
        let (code, stdout, stderr) = pitlane(&["lincheck", name, "--rounds", "300", "--seed", "7"]);
        assert_eq!(code, 0, "{name}: {stdout}{stderr}");
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
