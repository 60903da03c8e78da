//! The `pitlane bench` command line: listing and its one-line errors.

mod common;

use common::{assert_one_line_error, pitlane};

#[test]
fn list_names_suites_and_workloads() {
    let (code, stdout, _) = pitlane(&["bench", "--list"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("locks"), "{stdout}");
    assert!(
        stdout.contains("throughput") && stdout.contains("latency"),
        "{stdout}"
    );
}

#[test]
fn unknown_suite_is_a_one_line_error() {
    assert_one_line_error(&["bench", "no-such-suite"], "unknown suite 'no-such-suite'");
}

#[test]
fn malformed_thread_list_is_a_one_line_error() {
    assert_one_line_error(
        &["bench", "locks", "--threads", "1,two"],
        "malformed thread list",
    );
    assert_one_line_error(
        &["bench", "locks", "--threads", "0"],
        "malformed thread list",
    );
}

/// A suite or a thread count named twice would measure the same cases twice in one run, and
/// the ratios would pair one measurement's rounds with the other's.
#[test]
fn a_suite_or_thread_count_named_twice_is_a_one_line_error() {
    let dir = std::env::temp_dir().join(format!("pitlane-cli-twice-{}", std::process::id()));
    // Cheap settings, should the check ever be lost: the pattern check alone, one round.
    assert_one_line_error(
        &[
            "bench",
            "lincheck",
            "lincheck",
            "--quick",
            "--rounds",
            "1",
            "--subjects",
            "queue_patterns",
            "--out",
            dir.to_str().unwrap(),
        ],
        "suite 'lincheck' is named twice",
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_one_line_error(
        &["bench", "locks", "--threads", "1,2,1"],
        "thread count 1 is given twice",
    );
}

#[test]
fn unwritable_out_dir_is_a_one_line_error() {
    let dir = std::env::temp_dir().join(format!("pitlane-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A regular file where a directory is needed: not writable as a directory, even for root.
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = file.join("report");
    assert_one_line_error(
        &["bench", "locks", "--quick", "--out", out.to_str().unwrap()],
        "not writable",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn empty_subject_filter_is_a_one_line_error() {
    assert_one_line_error(&["bench", "locks", "--subjects", "mpmc,"], "--subjects");
}

#[test]
fn subject_filter_keeps_only_matching_subjects() {
    let dir = std::env::temp_dir().join(format!("pitlane-cli-subjects-{}", std::process::id()));
    let json = dir.join("out.json");
    std::fs::create_dir_all(&dir).unwrap();
    let (code, _, stderr) = pitlane(&[
        "bench",
        "lincheck",
        "--quick",
        "--subjects",
        "QUEUE_PATTERNS",
        "--json",
        json.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&json).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let records = report["records"].as_array().unwrap();
    assert!(!records.is_empty(), "{text}");
    for record in records {
        let subject = record["subject"].as_str().unwrap();
        assert!(
            subject.contains("queue_patterns"),
            "{subject} was not chosen"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_subject_filter_that_matches_nothing_is_an_error() {
    let dir = std::env::temp_dir().join(format!("pitlane-cli-nomatch-{}", std::process::id()));
    let (code, stdout, stderr) = pitlane(&[
        "bench",
        "lincheck",
        "--quick",
        "--subjects",
        "no-such-subject",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: --subjects") && last.contains("no-such-subject"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn malformed_round_count_is_a_one_line_error() {
    assert_one_line_error(
        &["bench", "locks", "--rounds", "0"],
        "malformed round count",
    );
}

#[test]
fn list_names_the_goals() {
    let (code, stdout, _) = pitlane(&["bench", "--list"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("goal: spsc `throughput` (capacity=2048): pitlane::spsc ÷ rtrb"),
        "{stdout}"
    );
}

#[test]
fn goals_prints_only_the_goal_table_and_exits_zero() {
    let dir = std::env::temp_dir().join(format!("pitlane-cli-goals-{}", std::process::id()));
    // Only the pattern check runs (the checker's searches are slow in a debug build), so the
    // lincheck goal is listed as not run; the verdicts themselves are the harness's tests.
    let (code, stdout, stderr) = pitlane(&[
        "bench",
        "lincheck",
        "--quick",
        "--rounds",
        "1",
        "--subjects",
        "queue_patterns",
        "--goals",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("| goal | target |"), "{stdout}");
    assert!(
        stdout.contains(
            "| lincheck `linearizable` (history_threads=4, ops_per_thread=8): \
             pitlane_lincheck::Checker, `histories_per_cpu_s` | ≥ 100 k histories/CPU-s | – | – | not run |"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("Busy elsewhere during the run"), "{stdout}");
    assert!(!stdout.contains("## Suite"), "only the goals: {stdout}");
    let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["records"][0]["samples"], 1, "{json}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// A machine that will not start a workload's threads (`--threads 1000` under a tight
/// `ulimit -v`) gets an error naming the case and the refusal, not a panic or an abort.
/// `RUST_MIN_STACK` of 2^60 bytes makes every thread the bench starts ask for a stack no
/// machine can map, so the OS refuses the very first; each suite that starts threads of its
/// own (a tokio runtime's too, and a malloc child's) is tried, on one cheap subject.
#[test]
fn threads_the_os_refuses_are_an_error_naming_the_case() {
    let out = std::env::temp_dir().join(format!("pitlane-cli-refused-{}", std::process::id()));
    let out = out.to_str().expect("a UTF-8 temp dir");
    for (suite, subjects) in [
        ("bag", "SegQueue"),
        ("locks", "std::sync::Mutex"),
        ("spsc", "rtrb"),
        ("alloc", "system"),
        ("wait", "tokio"),
        ("malloc", "glibc"),
    ] {
        let ran = std::process::Command::new(env!("CARGO_BIN_EXE_pitlane"))
            .args(["bench", suite, "--quick", "--rounds", "1", "--threads", "2"])
            .args(["--subjects", subjects, "--out", out])
            .env("RUST_MIN_STACK", (1_u64 << 60).to_string())
            .output()
            .expect("run pitlane");
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(1), "{suite}: {stderr}");
        let error = stderr
            .lines()
            .find(|line| line.starts_with("error: "))
            .unwrap_or_else(|| panic!("{suite}: no error line in {stderr}"));
        assert!(
            error.contains(&format!("could not run {suite}/"))
                && error.contains("could not start thread"),
            "{suite}: {error}"
        );
        assert!(!stderr.contains("wrong result"), "{suite}: {stderr}");
        // A refusal is reported once, as the error: no panic report of ours or a peer's.
        assert!(!stderr.contains("panicked"), "{suite}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(out);
}
