//! What the command-line tests share: running `pitlane` and checking a one-line error.

use std::process::Command;

/// Runs `pitlane` with `args`: exit code (-1 if killed), stdout, stderr.
pub fn pitlane(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pitlane"))
        .args(args)
        .output()
        .expect("run pitlane");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `pitlane args` exits 2 with nothing on stdout and one `error:` line naming `needle`.
pub fn assert_one_line_error(args: &[&str], needle: &str) {
    let (code, stdout, stderr) = pitlane(args);
    assert_eq!(code, 2, "exit code for {args:?}; stderr: {stderr}");
    assert!(
        stdout.is_empty(),
        "nothing on stdout for {args:?}: {stdout}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one line for {args:?}: {stderr}"
    );
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr} should mention {needle}"
    );
}
