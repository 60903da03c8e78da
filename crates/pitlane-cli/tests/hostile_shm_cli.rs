//! `pitlane shm` on files that are not slabs or are slabs gone wrong: a FIFO (which must not
//! block the open), a directory, `/dev/zero`, symbolic links (to a slab and to a device), an
//! empty file, a slab cut inside its header and inside its region, and a header with one
//! byte changed. Each must be one `error:` line and exit code 2, within seconds.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `pitlane args`, killing it after 20 s: (exit code, stdout, stderr), or `None` on a hang.
fn pitlane_within(args: &[&str]) -> Option<(i32, String, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pitlane"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pitlane");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn refused(args: &[&str], needle: &str) {
    let (code, stdout, stderr) =
        pitlane_within(args).unwrap_or_else(|| panic!("{args:?} did not finish in 20 s"));
    assert_eq!(code, 2, "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?}: {stdout}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(needle),
        "{args:?}: {stderr} should mention {needle}"
    );
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("pitlane-cli-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn files_that_are_not_slabs_are_refused_in_one_line() {
    let dir = scratch("kinds");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let subdir = dir.join("dir");
    std::fs::create_dir(&subdir).unwrap();
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    let zero_link = dir.join("zero-link");
    std::os::unix::fs::symlink("/dev/zero", &zero_link).unwrap();
    for command in ["info", "check", "recover", "rm"] {
        if made.as_ref().is_ok_and(|status| status.success()) {
            refused(&["shm", command, &s(&fifo)], "not a pitlane slab");
        }
        refused(&["shm", command, &s(&subdir)], "directory");
        refused(&["shm", command, &s(&empty)], "not a pitlane slab");
        refused(&["shm", command, "/dev/zero"], "not a pitlane slab");
        refused(&["shm", command, &s(&zero_link)], "symbolic links");
    }
    assert!(
        subdir.is_dir() && empty.exists(),
        "rm removed what is not a slab"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slabs_cut_short_linked_or_scribbled_on_are_refused_in_one_line() {
    let dir = scratch("slabs");
    let good = dir.join("good.slab");
    let g = good.to_str().unwrap();
    let (code, _, err) = pitlane_within(&[
        "shm",
        "create",
        g,
        "--object-size",
        "64",
        "--capacity",
        "16",
    ])
    .expect("create finishes");
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&good).unwrap();
    let link = dir.join("link.slab");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let write = |name: &str, contents: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let in_header = write("header.slab", &bytes[..40]);
    let in_region = write("region.slab", &bytes[..bytes.len() / 2]);
    let mut scribbled = bytes.clone();
    scribbled[20] ^= 0x40; // the object size: the checksum no longer matches
    let scribbled = write("scribbled.slab", &scribbled);
    let mut version = bytes.clone();
    version[8] = 0x7f;
    let version = write("version.slab", &version);
    for command in ["info", "check", "recover", "rm"] {
        refused(&["shm", command, link.to_str().unwrap()], "symbolic links");
        refused(&["shm", command, &in_header], "truncated");
        refused(&["shm", command, &in_region], "truncated");
        refused(&["shm", command, &scribbled], "checksum");
        refused(&["shm", command, &version], "version");
    }
    for kept in [&in_header, &in_region, &scribbled, &version] {
        assert!(std::path::Path::new(kept).exists(), "rm removed {kept}");
    }
    // The slab itself is untouched by all that.
    let (code, out, _) = pitlane_within(&["shm", "check", g]).unwrap();
    assert_eq!(code, 0, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
