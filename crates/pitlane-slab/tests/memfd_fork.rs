//! A sealed memory-file slab shared with forked children: each child attaches with its own
//! slot through the inherited descriptor, holds objects and allocates and frees until it is
//! killed with SIGKILL; the parent's `recover()` brings back everything it held or had in
//! flight. And the file cannot be truncated.
#![cfg(not(pitlane_loom))]

use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use pitlane_slab::{Config, ShmSlab};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

const CONFIG: Config = Config::new(32, 64).with_shards(2);
const HOLD: usize = 4;

#[test]
fn killed_fork_children_of_a_memfd_slab_are_recovered() {
    let slab = ShmSlab::create_memfd("pitlane-fork-test", CONFIG).unwrap();
    assert!(slab.is_sealed().unwrap());
    let mut in_flight = 0;
    for round in 0..12_u64 {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child opens the slab (glibc resets its allocator's locks at fork), runs
        // the loop below and never returns into the test harness: it is killed or `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let Ok(me) = ShmSlab::open_fd(slab.as_fd(), CONFIG) else {
                // SAFETY: leaving the child.
                unsafe { libc::_exit(1) }
            };
            let held: Vec<_> = (0..HOLD).filter_map(|_| me.alloc()).collect();
            // SAFETY: writing one byte from a live buffer to our pipe.
            unsafe { libc::write(fds[1], [held.len() as u8].as_ptr().cast(), 1) };
            loop {
                if let Some(id) = me.alloc() {
                    let _ = me.write(id, 0, &[7; 32]);
                    let _ = me.free(id);
                }
            }
        }
        let mut ready = [0_u8; 1];
        // SAFETY: reading one byte into a live buffer from our pipe.
        let got = unsafe { libc::read(fds[0], ready.as_mut_ptr().cast(), 1) };
        assert_eq!(got, 1);
        assert_eq!(ready[0] as usize, HOLD);
        std::thread::sleep(Duration::from_millis(1 + round % 7));
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        let r = slab.recover().unwrap();
        assert!(r.reclaimed as usize >= HOLD, "{r:?}");
        in_flight += r.in_flight;
        let report = slab.check();
        assert!(report.is_consistent(), "{report}");
        assert_eq!(report.owned, 0, "{report}");
    }
    println!("12 children killed; {in_flight} died with an object in flight");
}

#[test]
fn a_sealed_slab_cannot_be_truncated() {
    let slab = ShmSlab::create_memfd("pitlane-seal-test", CONFIG).unwrap();
    let file = std::fs::File::from(slab.as_fd().try_clone_to_owned().unwrap());
    let len = file.metadata().unwrap().len();
    assert!(file.set_len(0).is_err());
    assert!(file.set_len(len / 2).is_err());
    assert!(file.set_len(len * 2).is_err());
    assert_eq!(file.metadata().unwrap().len(), len);
    // The seals themselves are sealed.
    // SAFETY: a valid descriptor; removing seals is not possible, adding is refused.
    let rc = unsafe {
        libc::fcntl(
            slab.as_fd().as_raw_fd(),
            libc::F_ADD_SEALS,
            libc::F_SEAL_WRITE,
        )
    };
    assert_ne!(rc, 0);
    let id = slab.alloc().unwrap();
    slab.write(id, 0, b"still here").unwrap();
}

#[test]
fn a_named_file_truncated_by_a_peer_is_refused() {
    let path = std::env::temp_dir().join(format!("pitlane-trunc-{}", std::process::id()));
    let slab = ShmSlab::create(&path, CONFIG).unwrap();
    assert!(!slab.is_sealed().unwrap());
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 4096)
        .unwrap();
    // A new handle refuses it, and recovery stops before touching the lost page.
    assert!(matches!(
        ShmSlab::open(&path, CONFIG),
        Err(pitlane_slab::OpenError::Truncated { .. })
    ));
    assert!(slab.recover().is_err());
    std::fs::remove_file(&path).unwrap();
}
