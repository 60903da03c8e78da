//! The space of a file-backed slab: `create` and `create_memfd` reserve the whole region, so
//! that a filesystem without room is an error at creation, never a `SIGBUS` at a later write;
//! a creation that fails removes its file; descriptors that are not slab files are refused.
#![cfg(not(pitlane_loom))]

use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use pitlane_slab::{Config, MAX_CAPACITY, MAX_OBJECT_SIZE, OpenError, ShmSlab};
use pitlane_testkit::scratch::Scratch;

/// Bytes the file behind `fd` has allocated (512-byte blocks, as `stat` counts them).
fn allocated(fd: std::os::fd::BorrowedFd<'_>) -> u64 {
    let file = std::fs::File::from(fd.try_clone_to_owned().unwrap());
    file.metadata().unwrap().blocks() * 512
}

/// A 4 MiB slab is created with its pages already allocated: in a memory file (which always
/// supports `fallocate`), and in a named file on `/dev/shm` (a tmpfs) where there is one. Without
/// the reservation the file would be sparse, and a write into it on a full filesystem would
/// raise `SIGBUS`.
#[test]
fn created_slabs_have_their_whole_region_allocated() {
    let config = Config::new(4096, 1024).with_shards(1).with_align(4096);
    let memfd = ShmSlab::create_memfd("pitlane-space", config).unwrap();
    assert!(
        allocated(memfd.as_fd()) >= memfd.region_len() as u64,
        "memfd: {} of {} bytes allocated",
        allocated(memfd.as_fd()),
        memfd.region_len()
    );
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let path = shm.join(format!("pitlane-space-{}", std::process::id()));
        let slab = ShmSlab::create(&path, config).unwrap();
        let got = allocated(slab.as_fd());
        drop(slab);
        std::fs::remove_file(&path).unwrap();
        assert!(
            got >= memfd.region_len() as u64,
            "/dev/shm: {got} bytes allocated"
        );
    }
}

const SMALL_TMPFS_ROLE: &str = "PITLANE_SMALL_TMPFS_DIR";

/// A slab larger than the filesystem it is created on: `create` fails with `ENOSPC` (and
/// removes its file) instead of succeeding with a sparse file whose pages cannot be allocated
/// later, which would kill the process with `SIGBUS` in the middle of a safe `alloc` or
/// `write`. A slab that fits is created and every object of it can be written.
///
/// It needs a private mount namespace with a 1 MiB tmpfs: the test re-runs this binary on the
/// ignored test `small_tmpfs_child` under `unshare -m` (as root) or `unshare -r -m` (as another
/// user: an unprivileged user namespace, where the kernel allows them). So it is ignored by
/// default; CI can run it on a Linux runner with
/// `cargo test -p pitlane-slab --test shm_space -- --ignored` (it prints a note and passes
/// when no namespace can be made there).
#[test]
#[ignore = "needs a private mount namespace (root, or unprivileged user namespaces)"]
fn a_slab_larger_than_its_tmpfs_is_refused_at_creation_not_by_sigbus() {
    let dir = Scratch::new("small-tmpfs");
    let mnt = dir.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs '{m}' && exec '{e}' --exact small_tmpfs_child --ignored --nocapture",
        m = mnt.display(),
        e = exe.display()
    );
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let unshare: &[&str] = if root { &["-m"] } else { &["-r", "-m"] };
    let out = Command::new("unshare")
        .args(unshare)
        .args(["sh", "-c", &script])
        .env(SMALL_TMPFS_ROLE, &mnt)
        .output()
        .expect("unshare");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if text.contains("mount:") || text.contains("unshare:") {
        eprintln!("cannot make a private tmpfs here; skipping:\n{text}");
        return;
    }
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        None,
        "the child was killed by signal {:?} (7 = SIGBUS) inside safe slab calls:\n{text}",
        out.status.signal()
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("create refused"), "{text}");
    println!("the child, on a 1 MiB tmpfs:\n{text}");
}

/// The child of `a_slab_larger_than_its_tmpfs_is_refused_at_creation_not_by_sigbus`, on a
/// 1 MiB tmpfs: a 4 MiB slab must be refused with `ENOSPC` and leave no file; a 512 KiB one
/// must be created and take a write into each of its objects.
#[test]
#[ignore = "child process of a_slab_larger_than_its_tmpfs_is_refused_at_creation_not_by_sigbus"]
fn small_tmpfs_child() {
    let Some(dir) = std::env::var_os(SMALL_TMPFS_ROLE) else {
        return;
    };
    let path = Path::new(&dir).join("big");
    let big = Config::new(4096, 1024).with_shards(1).with_align(4096);
    match ShmSlab::create(&path, big) {
        Err(OpenError::Io(e)) => {
            println!("create refused: {e}");
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
            assert!(!path.exists(), "create left {} behind", path.display());
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(slab) => {
            // Without the reservation: each write may be the one that raises SIGBUS.
            println!(
                "create succeeded: {} bytes on a 1 MiB tmpfs",
                slab.region_len()
            );
            for _ in 0..1024 {
                let id = slab.alloc().expect("room");
                slab.write(id, 0, &[1; 4096]).unwrap();
            }
            panic!("a 4 MiB slab on a 1 MiB tmpfs was created");
        }
    }
    let small = Config::new(4096, 64).with_shards(1).with_align(4096);
    let slab = ShmSlab::create(Path::new(&dir).join("small"), small).unwrap();
    while let Some(id) = slab.alloc() {
        slab.write(id, 0, &[1; 4096]).unwrap();
    }
    println!(
        "a {} byte slab fits and takes its writes",
        slab.region_len()
    );
}

/// When the backing file cannot be sized, mapped or reserved, `create` fails with an error
/// and removes the file it made; `open_fd` on descriptors that are not slab files fails
/// cleanly.
#[test]
fn create_failures_remove_the_file_and_odd_descriptors_are_refused() {
    for base in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        if !base.is_dir() {
            continue;
        }
        let path = base.join(format!("pitlane-space-huge-{}", std::process::id()));
        // 16 PiB: set_len fails (EFBIG) or mmap fails (ENOMEM): an error either way.
        let huge = Config::new(MAX_OBJECT_SIZE, MAX_CAPACITY);
        assert!(matches!(
            ShmSlab::create(&path, huge),
            Err(OpenError::Io(_))
        ));
        assert!(!path.exists(), "create left {} behind", path.display());
        assert!(ShmSlab::create_memfd("huge", huge).is_err());
    }
    let config = Config::new(16, 8).with_shards(1);
    let null = std::fs::File::open("/dev/null").unwrap();
    assert!(ShmSlab::open_fd(null.as_fd(), config).is_err());
    let (socket, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    assert!(ShmSlab::open_fd(socket.as_fd(), config).is_err());
    let dir = std::fs::File::open(std::env::temp_dir()).unwrap();
    assert!(ShmSlab::open_fd(dir.as_fd(), config).is_err());
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
