//! File-backed slabs: persistence across reopen, validation of what `open` reads (typed errors,
//! 10^4 random header corruptions), permissions and symbolic links, and several processes: one
//! killed with SIGKILL mid-run and recovered, and a hostile one scribbling over the freelist.
//!
//! The child processes are this test binary re-run on the ignored test `child`, with the role
//! in the environment.
#![cfg(not(pitlane_loom))]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pitlane_slab::{Config, ObjectId, OpenError, ShmSlab};
use pitlane_testkit::scratch::Scratch;

/// xorshift64*: enough randomness for fuzzing, reproducible from its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const CONFIG: Config = Config::new(64, 256).with_shards(4).with_type_tag(0xC0FFEE);

#[test]
fn objects_and_freelist_persist_across_reopen() {
    let dir = Scratch::new("persist");
    let path = dir.path("s");
    let (kept, freed) = {
        let slab = ShmSlab::create(&path, CONFIG).unwrap();
        let kept: Vec<ObjectId> = (0..10).map(|_| slab.alloc().unwrap()).collect();
        for (k, id) in kept.iter().enumerate() {
            slab.write(*id, 0, &[k as u8; 64]).unwrap();
        }
        let freed: Vec<ObjectId> = (0..5).map(|_| slab.alloc().unwrap()).collect();
        for id in &freed {
            slab.free(*id).unwrap();
        }
        (kept, freed)
    };
    let slab = ShmSlab::open(&path, CONFIG).unwrap();
    let report = slab.check();
    assert!(report.is_consistent(), "{report}");
    assert_eq!(
        (report.bumped, report.free_listed, report.owned),
        (15, 5, 10)
    );
    for (k, id) in kept.iter().enumerate() {
        let mut buf = [0; 64];
        slab.read(*id, 0, &mut buf).unwrap();
        assert_eq!(buf, [k as u8; 64]);
    }
    // The freed objects come back before the never-used ones run out? No: fresh ones first.
    let mut got: Vec<ObjectId> = (0..(256 - 10)).map(|_| slab.alloc().unwrap()).collect();
    assert_eq!(slab.alloc(), None);
    // The freed objects come back one generation on; their old ids are stale.
    got.sort();
    for id in &freed {
        let again = got.iter().find(|g| g.index() == id.index()).unwrap();
        assert_eq!(again.generation(), id.generation() + 1);
        assert!(slab.free(*id).is_err());
    }
    // The earlier owner is gone: recovery frees the ten kept objects.
    assert_eq!(slab.recover().unwrap().reclaimed, 10);
}

#[test]
fn open_reports_typed_errors() {
    let dir = Scratch::new("errors");
    let path = dir.path("s");
    drop(ShmSlab::create(&path, CONFIG).unwrap());
    let good = std::fs::read(&path).unwrap();
    let open = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        ShmSlab::open(&path, CONFIG).map(|_| ())
    };
    assert!(matches!(open(b""), Err(OpenError::NotASlab)));
    assert!(matches!(open(b"hello, world"), Err(OpenError::NotASlab)));
    assert!(matches!(
        open(&good[..40]),
        Err(OpenError::Truncated { .. })
    ));
    assert!(matches!(
        open(&good[..4096]),
        Err(OpenError::Truncated { .. })
    ));
    let mut v = good.clone();
    v[8] = 1;
    assert!(matches!(
        open(&v),
        Err(OpenError::VersionMismatch {
            expected: 2,
            found: 1
        })
    ));
    let mut v = good.clone();
    v[20] ^= 1;
    assert!(matches!(
        open(&v),
        Err(OpenError::Corrupt("header checksum"))
    ));
    open(&good).unwrap();
    let other = CONFIG.with_type_tag(1);
    match ShmSlab::open(&path, other) {
        Err(OpenError::ConfigMismatch { expected, found }) => {
            assert_eq!((expected, found), (other, CONFIG));
        }
        r => panic!("{r:?}"),
    }
    // A directory and a missing file are errors too.
    assert!(ShmSlab::open(dir.path("missing"), CONFIG).is_err());
    assert!(ShmSlab::open_any(dir.dir()).is_err());
}

#[test]
fn ten_thousand_header_corruptions_never_crash() {
    let dir = Scratch::new("fuzz");
    let path = dir.path("s");
    let config = Config::new(16, 64).with_shards(2);
    {
        let slab = ShmSlab::create(&path, config).unwrap();
        let held: Vec<ObjectId> = (0..20).map(|_| slab.alloc().unwrap()).collect();
        for id in &held[..10] {
            slab.free(*id).unwrap();
        }
    }
    let good = std::fs::read(&path).unwrap();
    let copy = dir.path("copy");
    std::fs::write(&copy, &good).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    let mut rng = Rng(0x5EED_0001);
    let (mut opened, mut refused) = (0, 0);
    for _ in 0..10_000 {
        // One to three flipped bytes in the header (the first 128 bytes).
        let mut page = good[..128].to_vec();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(128) as usize;
            page[at] ^= 1 << rng.below(8);
        }
        file.write_at(&page, 0).unwrap();
        match ShmSlab::open_any(&copy) {
            Ok(slab) => {
                opened += 1;
                let report = slab.check();
                assert!(report.problems.is_empty(), "{report}");
            }
            Err(_) => refused += 1,
        }
    }
    // Flips in bytes 72..128 are outside the header proper and harmless; all others refused.
    assert!(refused > 5_000, "{refused} refused, {opened} opened");
    println!("header flips: {refused} refused by open, {opened} opened and checked clean");
    // Now flips anywhere in the words before the objects: open may succeed, check may find
    // problems, and alloc/free may fail, but nothing may crash or hang.
    let objects_at = {
        let s = ShmSlab::open(&path, config).unwrap();
        s.layout().0
    };
    for _ in 0..2_000 {
        let mut bytes = good[..objects_at].to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = 128 + rng.below((objects_at - 128) as u64) as usize;
            bytes[at] = rng.next() as u8;
        }
        file.write_at(&bytes, 0).unwrap();
        if let Ok(slab) = ShmSlab::open_any(&copy) {
            let _ = slab.check();
            for _ in 0..8 {
                if let Ok(Some(id)) = slab.try_alloc() {
                    let _ = slab.write(id, 0, &[1; 16]);
                    let _ = slab.free(id);
                }
            }
            let _ = slab.free(ObjectId::from_index(rng.below(64) as u32));
            let _ = slab.recover();
        }
    }
}

/// 20 threads (more than a slot's 16 intent records) allocate, write, check and free through
/// one handle while another handle recovers 50 times over: recovery takes back exactly the
/// five objects of a dropped handle, and nothing a live thread holds or has in flight (a
/// wrongly reclaimed object would fail its holder's free, whose generation moved on, or its
/// contents check).
#[test]
fn recover_on_a_busy_slab_takes_nothing_from_live_threads() {
    use std::sync::atomic::AtomicBool;
    let dir = Scratch::new("busy");
    let path = dir.path("s");
    let slab = ShmSlab::create(&path, CONFIG).unwrap();
    let other = ShmSlab::open(&path, CONFIG).unwrap();
    {
        let gone = ShmSlab::open(&path, CONFIG).unwrap();
        for _ in 0..5 {
            gone.alloc().unwrap();
        }
    }
    let stop = AtomicBool::new(false);
    let reclaimed = std::thread::scope(|s| {
        for t in 0..20_u8 {
            let (slab, stop) = (&slab, &stop);
            s.spawn(move || {
                let mut held = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(id) = slab.alloc() {
                        slab.write(id, 0, &[t; 64]).unwrap();
                        held.push(id);
                    }
                    if held.len() > 3 {
                        let id = held.remove(0);
                        let mut back = [0; 64];
                        slab.read(id, 0, &mut back).unwrap();
                        assert_eq!(back, [t; 64], "{id} changed under its holder");
                        slab.free(id).unwrap();
                    }
                }
                for id in held {
                    slab.free(id).unwrap();
                }
            });
        }
        let recovered: Result<Vec<u32>, _> = (0..50)
            .map(|_| other.recover().map(|report| report.reclaimed))
            .collect();
        // The workers stop whatever happened, so that a failed recovery ends the test
        // instead of leaving the scope waiting for them.
        stop.store(true, Ordering::Relaxed);
        recovered
    });
    assert_eq!(reclaimed.unwrap().iter().sum::<u32>(), 5);
    let report = slab.check();
    assert!(report.is_consistent(), "{report}");
    assert_eq!(report.owned, 0, "{report}");
}

#[test]
fn create_is_exclusive_private_and_follows_no_link() {
    let dir = Scratch::new("perm");
    let path = dir.path("s");
    let slab = ShmSlab::create(&path, CONFIG).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600);
    assert!(matches!(
        ShmSlab::create(&path, CONFIG),
        Err(OpenError::Io(e)) if e.kind() == std::io::ErrorKind::AlreadyExists
    ));
    drop(slab);
    let wide = dir.path("wide");
    drop(ShmSlab::create_with_mode(&wide, CONFIG, 0o644).unwrap());
    assert_eq!(
        std::fs::metadata(&wide).unwrap().permissions().mode() & 0o7777,
        0o644
    );
    // No bit beyond read, write and execute: a set-user-ID (or set-group-ID, or sticky)
    // slab that others may write would run their code as its owner. Nothing is created.
    for bad in [0o10000, 0o4755, 0o2660, 0o1666, 0o7777, u32::MAX] {
        assert!(
            matches!(
                ShmSlab::create_with_mode(dir.path("bad"), CONFIG, bad),
                Err(OpenError::InvalidConfig(_))
            ),
            "{bad:o}"
        );
        assert!(!dir.path("bad").exists(), "{bad:o}");
    }
    drop(ShmSlab::create_with_mode(dir.path("all"), CONFIG, 0o777).unwrap());
    assert_eq!(
        std::fs::metadata(dir.path("all"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o777
    );
    // A link to a good slab is not opened, and a dangling link is not created through.
    let link = dir.path("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    match ShmSlab::open(&link, CONFIG) {
        Err(OpenError::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::ELOOP)),
        r => panic!("{r:?}"),
    }
    let dangling = dir.path("dangling");
    let target = dir.path("target");
    std::os::unix::fs::symlink(&target, &dangling).unwrap();
    assert!(ShmSlab::create(&dangling, CONFIG).is_err());
    assert!(!target.exists());
    // Without read/write permission, open is refused (unless we are root, who bypasses it).
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        match ShmSlab::open(&path, CONFIG) {
            Err(OpenError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied),
            r => panic!("{r:?}"),
        }
    }
}

#[test]
fn attachment_slots_run_out_cleanly() {
    let dir = Scratch::new("slots");
    let path = dir.path("s");
    let first = ShmSlab::create(&path, CONFIG).unwrap();
    let mut handles = vec![];
    loop {
        match ShmSlab::open(&path, CONFIG) {
            Ok(h) => handles.push(h),
            Err(OpenError::TooManyAttached) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(handles.len() + 1, pitlane_slab::MAX_ATTACHED);
    assert_eq!(first.attached().unwrap().len(), pitlane_slab::MAX_ATTACHED);
    let id = handles[5].alloc().unwrap();
    handles.truncate(3);
    // The dropped handle's object is reclaimed; its slot is free again. Another test of this
    // binary that starts a child process at the moment the handles are dropped lends the
    // child (until its `exec`) their open file descriptions, and with them their slot locks:
    // a recovery then sees the slot held and rightly leaves the object. So recover until the
    // child has let go (a few milliseconds), and count what all the recoveries reclaimed.
    let mut reclaimed = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while reclaimed == 0 && Instant::now() < deadline {
        reclaimed += first.recover().unwrap().reclaimed;
        if reclaimed == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(reclaimed, 1);
    assert_eq!(first.owner_of(id).unwrap(), None);
    assert!(ShmSlab::open(&path, CONFIG).is_ok());
}

// ---- several processes ----

const ROLE: &str = "PITLANE_SLAB_CHILD_ROLE";
const PATH: &str = "PITLANE_SLAB_CHILD_PATH";
const HOLD: usize = 8;

fn spawn(role: &str, path: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(PATH, path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The body of a child process (does nothing when run as a plain test).
#[test]
#[ignore = "run as a child process by the multi-process tests"]
fn child() {
    let (Ok(role), Ok(path)) = (std::env::var(ROLE), std::env::var(PATH)) else {
        return;
    };
    let path = PathBuf::from(path);
    match role.as_str() {
        "worker" => worker(&path),
        "scribbler" => scribbler(&path),
        r => panic!("unknown role {r}"),
    }
}

/// Holds HOLD objects, then allocates and frees until the stop file exists, then reports what
/// it holds and waits (attached) until its stdin closes.
fn worker(path: &Path) {
    let slab = ShmSlab::open(path, CONFIG).unwrap();
    let mut held: Vec<ObjectId> = (0..HOLD).map(|_| slab.alloc().unwrap()).collect();
    let stop = path.with_extension("stop");
    let me = std::process::id().to_le_bytes();
    let mut out = std::io::stdout();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let mut n = 0_u64;
    // A worker whose parent test died must not spin forever.
    let deadline = Instant::now() + Duration::from_secs(30);
    while n % 64 != 0 || !stop.exists() {
        if n % 64 == 0 && Instant::now() > deadline {
            std::process::exit(3);
        }
        if let Some(id) = slab.alloc() {
            slab.write(id, 0, &me).unwrap();
            held.push(id);
        }
        if held.len() > HOLD {
            let id = held.swap_remove(HOLD + (n as usize % (held.len() - HOLD)));
            slab.free(id).unwrap();
        }
        n += 1;
    }
    while held.len() > HOLD {
        slab.free(held.pop().unwrap()).unwrap();
    }
    let ids: Vec<String> = held.iter().map(|id| id.to_bits().to_string()).collect();
    writeln!(out, "HELD {} {}", slab.owner_tag(), ids.join(" ")).unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// Writes random words over the freelist words (bump, heads, links, owners) through the file.
fn scribbler(path: &Path) {
    let slab = ShmSlab::open(path, CONFIG).unwrap();
    let end = slab.layout().0 as u64;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let mut rng = Rng(u64::from(std::process::id()) | 1);
    let mut out = std::io::stdout();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let until = Instant::now() + Duration::from_millis(800);
    while Instant::now() < until {
        let at = 128 + rng.below((end - 128) / 4) * 4;
        let word = match rng.below(4) {
            0 => rng.next(),
            1 => rng.below(300),
            2 => u64::MAX,
            _ => 0,
        };
        file.write_at(&(word as u32).to_le_bytes(), at).unwrap();
    }
    writeln!(out, "DONE").unwrap();
}

/// A child and its buffered stdout.
struct Peer {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

fn spawn_peer(role: &str, path: &Path) -> Peer {
    let mut child = spawn(role, path);
    let out = BufReader::new(child.stdout.take().unwrap());
    Peer { child, out }
}

/// The next line the child wrote that starts with `word` (libtest writes its own lines too).
fn read_line(peer: &mut Peer, word: &str) -> String {
    loop {
        let mut line = String::new();
        let n = peer.out.read_line(&mut line).unwrap();
        assert!(n > 0, "child exited before writing {word}");
        // libtest's "test child ... " has no newline, so a word may follow it on one line.
        if let Some(at) = line.find(word) {
            return line[at..].to_string();
        }
    }
}

/// SIGKILL at a random moment of a tight alloc/write/free loop, many times over. `recover()`
/// alone, run while the survivors keep allocating and freeing, must bring back everything the
/// dead process held or had in flight: once the survivors are idle, `check()` finds every
/// object handed out either listed once or owned by a live worker, and none lost.
#[test]
fn sigkilled_process_objects_are_recovered_exactly_once() {
    let mut in_flight = 0;
    let rounds = 24;
    let mut rng = Rng(0x5EED_0002 ^ u64::from(std::process::id()));
    for _ in 0..rounds {
        let dir = Scratch::new("kill");
        let path = dir.path("s");
        let slab = ShmSlab::create(&path, CONFIG).unwrap();
        let mut workers: Vec<Peer> = (0..3).map(|_| spawn_peer("worker", &path)).collect();
        for w in workers.iter_mut() {
            read_line(w, "READY");
        }
        std::thread::sleep(Duration::from_millis(5 + rng.below(60)));
        // SIGKILL, mid-run: the victim may die anywhere in alloc or free.
        workers[0].child.kill().unwrap();
        workers[0].child.wait().unwrap();
        // The survivors are still allocating and freeing: recovery needs no quiescence.
        let recovered = slab.recover().unwrap();
        assert!(recovered.reclaimed as usize >= HOLD, "{recovered:?}");
        assert!(recovered.in_flight <= 1, "{recovered:?}");
        in_flight += recovered.in_flight;
        std::fs::write(path.with_extension("stop"), b"").unwrap();
        let mut live = Vec::new();
        for w in workers[1..].iter_mut() {
            let line = read_line(w, "HELD");
            let mut words = line.split_whitespace();
            assert_eq!(words.next(), Some("HELD"), "{line}");
            let tag: u64 = words.next().unwrap().parse().unwrap();
            let ids: Vec<ObjectId> = words
                .map(|w| ObjectId::from_bits(w.parse().unwrap()))
                .collect();
            assert_eq!(ids.len(), HOLD);
            live.push((tag, ids));
        }
        // What recovery deferred (a survivor descheduled while its record named the object)
        // it finds now that the survivors are idle; it takes nothing of theirs.
        let again = slab.recover().unwrap();
        assert_eq!(again.deferred, 0, "{again:?}");
        assert_eq!(again.reclaimed, again.in_flight, "{again:?}");
        assert!(
            again.in_flight <= recovered.deferred,
            "{again:?} after {recovered:?}"
        );
        in_flight += again.in_flight;
        // The survivors are attached but idle: the slab is quiescent, so check is exact.
        let report = slab.check();
        assert!(report.is_consistent(), "{report}");
        assert!(report.lost.is_empty(), "{report}");
        assert_eq!(report.free_listed + report.owned, report.bumped, "{report}");
        // Every owned object is owned by a live worker, and exactly the ones it reported.
        assert_eq!(report.owners.len(), live.len(), "{report}");
        for (tag, ids) in &live {
            assert!(slab.is_owner_alive(*tag).unwrap());
            assert_eq!(report.owners.get(tag), Some(&(HOLD as u32)), "{report}");
            for &id in ids {
                assert_eq!(slab.owner_of(id).unwrap(), Some(*tag));
            }
        }
        for mut w in workers.drain(1..) {
            drop(w.child.stdin.take());
            assert!(w.child.wait().unwrap().success());
        }
        // Now they are gone too: everything comes back.
        slab.recover().unwrap();
        let report = slab.check();
        assert!(report.is_consistent(), "{report}");
        assert_eq!(report.owned, 0, "{report}");
    }
    println!(
        "{rounds} processes killed mid-run; {in_flight} of them died with an object in flight, \
         which recover() put back"
    );
}

#[test]
fn hostile_peer_cannot_crash_an_allocator() {
    let dir = Scratch::new("hostile");
    let path = dir.path("s");
    let slab = ShmSlab::create(&path, CONFIG).unwrap();
    // Objects taken before the peer starts: their frees below run against scribbled words
    // whatever the peer manages to break first (it may break the freelist before this
    // process's first allocation under it succeeds).
    let mut held: Vec<_> = (0..8)
        .map(|_| slab.try_alloc().unwrap().expect("a fresh slab has room"))
        .collect();
    let mut peer = spawn_peer("scribbler", &path);
    read_line(&mut peer, "READY");
    let (mut allocs, mut frees, mut errors) = (0_u64, 0_u64, 0_u64);
    let until = Instant::now() + Duration::from_millis(1000);
    while Instant::now() < until {
        match slab.try_alloc() {
            Ok(Some(id)) => {
                allocs += 1;
                // The peer may have scribbled over this object's generation already: the
                // access is then refused, which is one of the errors this test allows.
                if slab.write(id, 0, &[0xAB; 64]).is_err() {
                    errors += 1;
                }
                held.push(id);
            }
            Ok(None) => {}
            Err(_) => errors += 1,
        }
        if held.len() > 4 {
            frees += 1;
            if slab.free(held.remove(0)).is_err() {
                errors += 1;
            }
        }
        let _ = slab.check();
    }
    read_line(&mut peer, "DONE");
    assert!(peer.child.wait().unwrap().success());
    // Whatever state the words are in, these calls return.
    let _ = slab.recover();
    let report = slab.check();
    println!("hostile peer: {allocs} allocations, {frees} frees, {errors} errors; after: {report}");
    // The allocator was exercised under the peer: at least the objects held from before it
    // started were freed against its scribbles.
    assert!(frees >= 4, "only {frees} frees ran");
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
