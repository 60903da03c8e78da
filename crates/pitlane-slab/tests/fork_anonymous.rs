//! An anonymous shared slab is shared with a child forked after it was made: what the child
//! allocates and writes, the parent sees, and the reverse.
#![cfg(not(pitlane_loom))]

use pitlane_slab::{Config, ObjectId, Slab};

#[test]
fn a_forked_child_shares_the_objects() {
    let slab = Slab::anonymous(Config::new(16, 8).with_shards(2)).unwrap();
    let mine = slab.alloc().unwrap();
    slab.write(mine, 0, b"from the parent!").unwrap();
    // SAFETY: the child only touches the mapping (atomics, atomic copies) and `_exit`s; it
    // allocates no heap memory and takes no lock another thread of this process might hold.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let mut buf = [0_u8; 16];
        let ok = slab.read(mine, 0, &mut buf).is_ok() && &buf == b"from the parent!";
        let code = match (ok, slab.alloc(), slab.alloc()) {
            (true, Some(a), Some(b)) => {
                let written = slab.write(a, 0, b"from the child!!").is_ok();
                let freed = slab.free(b).is_ok() && slab.free(mine).is_ok();
                if written && freed { 0 } else { 2 }
            }
            _ => 1,
        };
        // SAFETY: leaving the child without running the test harness's code.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: reaping our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
    // The child freed our object and one of its own, and kept one it wrote.
    assert_eq!(slab.owner_of(mine).unwrap(), None);
    let report = slab.check();
    assert!(report.is_consistent(), "{report}");
    assert_eq!(
        (report.bumped, report.owned, report.free_listed),
        (3, 1, 2),
        "{report}"
    );
    let kept = (0..8)
        .map(ObjectId::from_index)
        .find(|&id| slab.owner_of(id).unwrap().is_some())
        .unwrap();
    let mut buf = [0_u8; 16];
    slab.read(kept, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"from the child!!");
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
