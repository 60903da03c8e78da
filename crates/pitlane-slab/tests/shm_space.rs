//! The space of a file-backed slab: `create` and `create_memfd` reserve the whole region, so
//! that a filesystem without room is an error at creation, never a `SIGBUS` at a later write;
//! a creation that fails removes its file; an attach gives a file left sparse its space, or
//! fails; descriptors that are not slab files are refused.
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

/// Frees the backing of the region's last 64 KiB (objects not yet handed out), as a copy that
/// kept holes or a program punching one would leave the file: its size stays, its pages go.
fn punch_tail(fd: std::os::fd::BorrowedFd<'_>, region_len: usize) {
    use std::os::fd::AsRawFd;
    let len = 64 * 1024;
    let at = libc::off_t::try_from(region_len - len).unwrap();
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: a valid descriptor; an in-range hole, with the file's size kept.
    let done = unsafe { libc::fallocate(fd.as_raw_fd(), mode, at, len as libc::off_t) };
    assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
}

/// A slab file left sparse by someone else gets its space back when a process attaches
/// (`open_fd` and `open`), as `create` gives it: without that, the first write into the hole on
/// a full filesystem would raise `SIGBUS` in the attaching process.
#[test]
fn an_attach_reserves_what_another_program_left_sparse() {
    let config = Config::new(4096, 64).with_shards(1).with_align(4096);
    let memfd = ShmSlab::create_memfd("pitlane-space-holes", config).unwrap();
    let whole = memfd.region_len() as u64;
    punch_tail(memfd.as_fd(), memfd.region_len());
    assert!(
        allocated(memfd.as_fd()) < whole,
        "the hole was not punched: {} of {whole} bytes allocated",
        allocated(memfd.as_fd())
    );
    let peer = ShmSlab::open_fd(memfd.as_fd(), config).unwrap();
    assert!(
        allocated(memfd.as_fd()) >= whole,
        "open_fd left the file sparse: {} of {whole} bytes allocated",
        allocated(memfd.as_fd())
    );
    while let Some(id) = peer.alloc() {
        peer.write(id, 0, &[7; 4096]).unwrap();
    }

    let dir = Scratch::new("holes");
    let path = dir.path("slab");
    let made = ShmSlab::create(&path, config).unwrap();
    let whole = made.region_len() as u64;
    punch_tail(made.as_fd(), made.region_len());
    if allocated(made.as_fd()) >= whole {
        // A filesystem that keeps blocks for a punched hole (or cannot punch): nothing to see.
        eprintln!(
            "{}: the hole kept its blocks; skipping the named file",
            path.display()
        );
        return;
    }
    let opened = ShmSlab::open(&path, config).unwrap();
    assert!(
        allocated(opened.as_fd()) >= whole,
        "open left the file sparse: {} of {whole} bytes allocated",
        allocated(opened.as_fd())
    );
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
/// default; `.ci/run` runs it with `cargo test -p pitlane-slab --test shm_space -- --ignored`
/// (it prints a note and passes when no namespace can be made there).
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
    assert!(text.contains("open of the sparse slab refused"), "{text}");
    println!("the child, on a 1 MiB tmpfs:\n{text}");
}

/// The child of `a_slab_larger_than_its_tmpfs_is_refused_at_creation_not_by_sigbus`, on a
/// 1 MiB tmpfs: a 4 MiB slab must be refused with `ENOSPC` and leave no file; a 512 KiB one
/// must be created and take a write into each of its objects; once a hole is punched in it and
/// the tmpfs is filled up, attaching to it must fail with `ENOSPC`.
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
    // Left sparse by someone else, then the filesystem filled up: an attach must fail with
    // `ENOSPC`, not succeed and let a later write raise `SIGBUS`.
    punch_tail(slab.as_fd(), slab.region_len());
    let filler = Path::new(&dir).join("filler");
    let mut fill = std::fs::File::create(&filler).unwrap();
    let block = vec![0xA5_u8; 4096];
    while std::io::Write::write_all(&mut fill, &block).is_ok() {}
    drop(fill);
    match ShmSlab::open(Path::new(&dir).join("small"), small) {
        Err(OpenError::Io(e)) => {
            println!("open of the sparse slab refused: {e}");
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(peer) => {
            println!("open of a sparse slab on a full tmpfs succeeded");
            while let Some(id) = peer.alloc() {
                let _ = peer.write(id, 0, &[2; 4096]);
            }
            panic!("a sparse slab was attached on a full filesystem");
        }
    }
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
