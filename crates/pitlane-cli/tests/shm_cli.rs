//! `pitlane shm`: create, info, check, recover, rm, and one-line errors with exit code 2.

mod common;

use common::{assert_one_line_error, pitlane};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pitlane-cli-shm-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn create_info_check_recover_rm() {
    let dir = scratch("cycle");
    let path = dir.join("s.slab");
    let p = path.to_str().unwrap();
    let (code, out, err) = pitlane(&[
        "shm",
        "create",
        p,
        "--object-size",
        "64",
        "--capacity",
        "100",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("capacity 100"), "{out}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Objects held by a handle that is gone: recover frees them.
    {
        let slab = pitlane_slab::ShmSlab::open_any(&path).unwrap();
        slab.alloc().unwrap();
        slab.alloc().unwrap();
    }
    let (code, out, _) = pitlane(&["shm", "info", p]);
    assert_eq!(code, 0);
    assert!(out.contains("owned 2"), "{out}");
    let (code, out, _) = pitlane(&["shm", "check", p]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("consistent"), "{out}");
    let (code, out, _) = pitlane(&["shm", "recover", p]);
    assert_eq!(code, 0);
    assert!(out.contains("reclaimed 2"), "{out}");
    let (code, _, _) = pitlane(&["shm", "rm", p]);
    assert_eq!(code, 0);
    assert!(!path.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = scratch("bad");
    let path = dir.join("s.slab");
    let p = path.to_str().unwrap();
    assert_one_line_error(
        &["shm", "create", p, "--object-size", "x", "--capacity", "1"],
        "object-size",
    );
    assert_one_line_error(
        &["shm", "create", p, "--object-size", "8", "--capacity", "0"],
        "capacity",
    );
    assert_one_line_error(
        &[
            "shm",
            "create",
            p,
            "--object-size",
            "8",
            "--capacity",
            "1",
            "--mode",
            "9",
        ],
        "mode",
    );
    assert_one_line_error(
        &[
            "shm",
            "create",
            p,
            "--object-size",
            "8",
            "--capacity",
            "1",
            "--align",
            "3",
        ],
        "alignment",
    );
    assert_one_line_error(
        &["shm", "info", dir.join("missing").to_str().unwrap()],
        "No such file",
    );
    let junk = dir.join("junk");
    std::fs::write(&junk, b"not a slab at all").unwrap();
    assert_one_line_error(
        &["shm", "check", junk.to_str().unwrap()],
        "not a pitlane slab",
    );
    assert_one_line_error(&["shm", "rm", junk.to_str().unwrap()], "not a pitlane slab");
    assert!(junk.exists(), "rm must not remove what is not a slab");
    let (code, _, _) = pitlane(&[
        "shm",
        "create",
        p,
        "--object-size",
        "8",
        "--capacity",
        "4",
        "--mode",
        "0640",
    ]);
    assert_eq!(code, 0);
    assert_one_line_error(
        &["shm", "create", p, "--object-size", "8", "--capacity", "4"],
        "exists",
    );
    let setuid = dir.join("setuid");
    assert_one_line_error(
        &[
            "shm",
            "create",
            setuid.to_str().unwrap(),
            "--object-size",
            "8",
            "--capacity",
            "4",
            "--mode",
            "4777",
        ],
        "0o777",
    );
    assert!(!setuid.exists());
    let _held = pitlane_slab::ShmSlab::open_any(&path).unwrap();
    assert_one_line_error(&["shm", "rm", p], "attached");
    let _ = std::fs::remove_dir_all(&dir);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
