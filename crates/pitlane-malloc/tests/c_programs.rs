//! The exported ABI as C and C++ programs see it: `tests/c/api.c` and `tests/c/api.cpp`,
//! compiled here with the system's `cc` and `c++`, run linked against the shared library,
//! linked against the static library, and preloaded into a program built without it. Each
//! program first checks that pitlane-malloc is the malloc in use, then every export and its
//! error cases, and prints `ok <n> checks`.
//!
//! Also real programs under `LD_PRELOAD`: `python3` running threads that allocate, `python3`
//! forking a `multiprocessing` pool, `git` on a scratch repository, `sort` of a generated file,
//! `sqlite3` on a generated database, each checked for its exit status and its output.
//!
//! And hostile C programs under `LD_PRELOAD` (`tests/c/hostile.c`, one scenario per process,
//! each killed if it outlives its deadline, so that a deadlock fails its test instead of
//! hanging the suite): the allocator's initialisation under an address-space limit
//! (`RLIMIT_AS`) that leaves no room for it (NULL and `ENOMEM`, never an abort); memory freed
//! under such a limit serving later large and small blocks (not held back in the allocator's
//! caches while the OS refuses new mappings); `fork`, `posix_spawn` and `system` while threads
//! allocate, the child allocating and starting a thread; thousands of threads handing blocks to
//! the next and freeing from `pthread` key destructors, with the mapped address space bounded;
//! `valloc`/`pvalloc`/`memalign` edge sizes with `malloc_usable_size` of every kind of
//! block; and `pthread_atfork` handlers, registered before the first `malloc`, that allocate.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use pitlane_testkit::child::output_within;

/// The directory holding `libpitlane_malloc.so` and `libpitlane_malloc.a` built from the
/// sources under test. `cargo test` builds only the rlib of this crate, so the first test that
/// needs the libraries builds them, once per test binary, with the same cargo and profile,
/// into a target directory of its own beside this binary's (a separate directory, so that it
/// never waits on the lock of the build that started the tests).
fn library_dir() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test binary's path");
            // target/<profile>/deps/<test binary>
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("target/<profile>/deps/<test>");
            let target = profile_dir.join("pitlane-malloc-under-test");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut build = Command::new(cargo);
            build
                .args(["build", "-p", "pitlane-malloc", "--lib"])
                .env("CARGO_TARGET_DIR", &target)
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            let profile = if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            };
            if profile == "release" {
                build.arg("--release");
            }
            let status = build.status().expect("cargo starts");
            assert!(status.success(), "cargo build -p pitlane-malloc failed");
            target.join(profile)
        })
        .clone()
}

fn shared_library() -> PathBuf {
    let path = library_dir().join("libpitlane_malloc.so");
    assert!(path.exists(), "{} was not built", path.display());
    path
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pitlane-malloc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

/// Compiles `sources` with `compiler` and `extra` arguments into `out`; `-fno-builtin` keeps
/// the compiler from folding away the calls under test.
fn compile(compiler: &str, sources: &[PathBuf], out: &Path, extra: &[&str]) {
    let status = Command::new(compiler)
        .args([
            "-O1",
            "-fno-builtin",
            "-Wall",
            "-Wno-alloc-size-larger-than",
            "-o",
        ])
        .arg(out)
        .args(sources)
        .args(extra)
        .status()
        .unwrap_or_else(|e| panic!("{compiler} could not start: {e}"));
    assert!(status.success(), "{compiler} failed on {sources:?}");
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("the program starts");
    assert!(
        output.status.success(),
        "{command:?}: {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn preloaded(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    command.env("LD_PRELOAD", shared_library());
    command
}

/// Runs an API program and checks that it ran on pitlane-malloc and passed every check.
fn passes(command: &mut Command) {
    let output = run(command);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with("ok ") && stdout.contains("(pitlane-malloc "),
        "unexpected output: {stdout}"
    );
}

#[test]
fn the_c_program_passes_when_preloaded() {
    let dir = scratch("c-preload");
    let program = dir.join("api");
    compile("cc", &[source("api.c")], &program, &["-lpthread", "-ldl"]);
    // Without the library, the program must refuse to run (so that a pass means something).
    let alone = Command::new(&program).output().expect("runs");
    assert_eq!(alone.status.code(), Some(2), "ran without pitlane-malloc");
    passes(&mut preloaded(&program));
}

#[test]
fn a_foreign_pointer_is_reported_once_and_survived() {
    let dir = scratch("c-foreign");
    let program = dir.join("api");
    compile("cc", &[source("api.c")], &program, &["-lpthread", "-ldl"]);
    let output = run(preloaded(&program).arg("foreign"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let foreign = lines
        .next()
        .and_then(|line| line.strip_prefix("foreign 0x"))
        .and_then(|hex| usize::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("unexpected output: {stdout}"));
    assert_eq!(lines.next(), Some("survived"), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let marker = "free() of a pointer it did not allocate: ";
    assert_eq!(stderr.matches(marker).count(), 1, "{stderr}");
    // The report names the pointer.
    let reported = stderr
        .split(marker)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|word| word.strip_prefix("0x"))
        .and_then(|hex| usize::from_str_radix(hex, 16).ok());
    assert_eq!(reported, Some(foreign), "{stderr}");
    // The foreign realloc, reported once, under its own name.
    assert_eq!(
        stderr
            .matches("realloc() of a pointer it did not allocate: 0x")
            .count(),
        1,
        "{stderr}"
    );
    // The small block freed twice in a row, reported once too.
    assert_eq!(
        stderr
            .matches("double free of a block just freed: 0x")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn the_c_program_passes_linked_against_the_shared_library() {
    let dir = scratch("c-shared");
    let program = dir.join("api");
    let libs = library_dir();
    compile(
        "cc",
        &[source("api.c")],
        &program,
        &[
            &format!("-L{}", libs.display()),
            &format!("-Wl,-rpath,{}", libs.display()),
            "-lpitlane_malloc",
            "-lpthread",
            "-ldl",
        ],
    );
    passes(&mut Command::new(&program));
}

#[test]
fn the_c_program_passes_linked_against_the_static_library() {
    let dir = scratch("c-static");
    let program = dir.join("api");
    let archive = library_dir().join("libpitlane_malloc.a");
    assert!(archive.exists(), "{} was not built", archive.display());
    // `-rdynamic` exports the program's symbols, so that `dlsym` finds the marker in it.
    compile(
        "cc",
        &[source("api.c"), archive],
        &program,
        &["-rdynamic", "-lpthread", "-ldl", "-lm"],
    );
    passes(&mut Command::new(&program));
}

#[test]
fn the_cpp_program_passes_when_preloaded() {
    let dir = scratch("cpp-preload");
    let program = dir.join("api");
    compile(
        "c++",
        &[source("api.cpp")],
        &program,
        &["-std=c++17", "-ldl", "-lpthread"],
    );
    passes(&mut preloaded(&program));
}

#[test]
fn python_threads_allocating_run_on_it() {
    let script = r#"
import json, threading
results = []
def work(seed):
    table = {}
    for i in range(30000):
        table[f"{seed}-{i}"] = [i] * (i % 40)
        if i % 3 == 0:
            table.pop(f"{seed}-{i // 2}", None)
    results.append(len(json.dumps(table)))
threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(len(results), all(r > 0 for r in results))
"#;
    let output = run(preloaded("python3").args(["-c", script]));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "4 True");
}

/// `multiprocessing` with `fork`: a pool of three workers forked from a parent whose pool
/// threads (task, result and worker handlers) run and allocate meanwhile, each child building
/// and serialising dictionaries; the parent checks a result against its own. Skipped when
/// there is no `python3`.
#[test]
fn python_multiprocessing_forking_a_pool_runs_on_it() {
    if Command::new("python3").arg("-V").output().is_err() {
        eprintln!("skipped: no python3");
        return;
    }
    let script = r#"
import hashlib, json, multiprocessing
def job(n):
    d = {str(i): [i] * (i % 30) for i in range(20000 + n)}
    return hashlib.sha256(json.dumps(d).encode()).hexdigest()
if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(3) as pool:
        out = pool.map(job, range(12))
    print(len(set(out)), out[5] == job(5))
"#;
    let dir = scratch("python-fork");
    let path = dir.join("pool.py");
    std::fs::write(&path, script).expect("writes the script");
    let mut command = preloaded("python3");
    command.arg(&path);
    let Some(output) = output_within(command, Duration::from_secs(120)) else {
        panic!("python3 multiprocessing: still running after 120 s (deadlock?)");
    };
    assert!(
        output.status.success(),
        "{}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "12 True");
}

#[test]
fn sort_of_a_generated_file_runs_on_it() {
    let dir = scratch("sort");
    let input = dir.join("numbers.txt");
    // 200,000 numbers in a scrambled order.
    let text: String = (0..200_000u64)
        .map(|i| format!("{}\n", (i * 7_919) % 200_000))
        .collect();
    std::fs::write(&input, text).expect("writes the input");
    let output = run(preloaded("sort").arg("-n").arg(&input));
    let sorted: Vec<u64> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.parse().expect("a number"))
        .collect();
    assert_eq!(sorted, (0..200_000).collect::<Vec<_>>());
}

#[test]
fn git_on_a_scratch_repository_runs_on_it() {
    let dir = scratch("git");
    let git = |args: &[&str]| {
        run(preloaded("git")
            .args([
                "-c",
                "user.name=pitlane",
                "-c",
                "user.email=pitlane@example.invalid",
            ])
            .args(["-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(&dir))
    };
    git(&["init", "-q"]);
    for commit in 0..5 {
        for file in 0..40 {
            std::fs::write(
                dir.join(format!("f{file}.txt")),
                format!("{commit} {file}\n").repeat(50),
            )
            .expect("writes a file");
        }
        git(&["add", "."]);
        git(&["commit", "-q", "-m", &format!("commit {commit}")]);
    }
    git(&["gc", "-q"]);
    let log = git(&["log", "--oneline"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 5);
    let fsck = git(&["fsck", "--strict"]);
    assert!(fsck.status.success());
}

#[test]
fn sqlite3_on_a_generated_database_runs_on_it() {
    let Ok(found) = Command::new("sqlite3").arg("-version").output() else {
        panic!("sqlite3 is not installed (CI installs it: apt-get install sqlite3)");
    };
    assert!(found.status.success());
    let dir = scratch("sqlite");
    let database = dir.join("test.db");
    let sql = "create table t(a integer primary key, b blob, c text);
        with recursive n(i) as (select 1 union all select i + 1 from n where i < 50000)
        insert into t select i, randomblob(i % 300), printf('row %d', i) from n;
        create index tc on t(c);
        delete from t where a % 7 = 0;
        vacuum;
        select count(*), sum(length(b)) > 0 from t;";
    let output = run(preloaded("sqlite3").arg(&database).arg(sql));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "42858|1");
}

/// The C interface at its edges (`tests/c/edges.c`): every class boundary at every
/// alignment, realloc of over-aligned blocks, null, zero and overflowing sizes with their
/// `errno`, `posix_memalign`'s refusals, `free` keeping `errno`, frees racing the exit of the
/// allocating thread, and 16-byte alignment of zero-sized blocks.
#[test]
fn the_c_interface_holds_at_its_edges_when_preloaded() {
    let dir = scratch("c-edges");
    let program = dir.join("edges");
    compile("cc", &[source("edges.c")], &program, &["-lpthread", "-ldl"]);
    passes(&mut preloaded(&program));
}

/// `tests/c/hostile.c`, compiled once per test binary.
fn hostile_program() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let program = scratch("c-hostile").join("hostile");
            compile(
                "cc",
                &[source("hostile.c")],
                &program,
                &["-lpthread", "-ldl"],
            );
            program
        })
        .clone()
}

/// Runs `hostile <scenario>` preloaded, kills it past `limit` (a deadlock fails the test
/// instead of hanging the suite), and checks that it ran on pitlane-malloc and passed every
/// check.
fn hostile_passes(scenario: &str, limit: Duration) {
    let mut command = preloaded(hostile_program());
    command.arg(scenario);
    let Some(output) = output_within(command, limit) else {
        panic!("{scenario}: still running after {limit:?} (deadlock?)");
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.starts_with("ok ") && stdout.contains("(pitlane-malloc "),
        "{scenario}: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The first `malloc` of a process initialises the allocator, which builds its page pool
/// through the Rust global allocator, that is through this very `malloc`. Under an
/// address-space limit with no room for a segment that nested allocation failed, and Rust's
/// allocation-error handler aborted the process ("memory allocation of 512 bytes failed")
/// where `malloc` must return NULL with `ENOMEM` (glibc's serves it).
#[test]
fn the_first_malloc_under_an_address_space_limit_fails_cleanly() {
    hostile_passes("first-malloc-under-limit", Duration::from_secs(60));
}

/// Freed large blocks stayed mapped in the allocator's cache (up to 64 MiB, for up to 10 s)
/// while the OS refused new mappings for want of address space: a program under `RLIMIT_AS`
/// that freed everything got NULL for the next blocks that needed a new mapping.
#[test]
fn memory_freed_under_an_address_space_limit_serves_again() {
    hostile_passes("freed-memory-serves-again", Duration::from_secs(60));
}

/// `fork` (40 times), `posix_spawnp` and `system` while four threads allocate and free: each
/// child allocates and starts a thread under `alarm(20)`.
#[test]
fn fork_posix_spawn_and_system_while_threads_allocate() {
    hostile_passes("fork-while-allocating", Duration::from_secs(240));
}

/// 3,000 threads in turn, each freeing the blocks of the one before it (already exited) and
/// one block from a `pthread` key destructor: the mapped address space stays bounded.
#[test]
fn thousands_of_threads_handing_blocks_on_keep_the_address_space_bounded() {
    hostile_passes("thread-churn", Duration::from_secs(240));
}

/// `valloc`, `pvalloc` and `memalign` at huge and zero sizes, and `malloc_usable_size` of every
/// kind of block.
#[test]
fn valloc_pvalloc_memalign_edges_and_usable_size_of_every_kind_of_block() {
    hostile_passes("invalid-arguments", Duration::from_secs(60));
}

/// A program that registers `pthread_atfork` handlers before its first `malloc` (so before the
/// allocator registered its own, at its initialisation), each handler allocating small and
/// large blocks. glibc runs prepare handlers in the reverse order of registration and parent
/// and child handlers in that order, so the allocator's handlers, registered later, took its
/// locks before the program's prepare handler ran and released them after its parent and
/// child handlers: the prepare handler's `malloc` spun forever on a lock its own thread held
/// (glibc's malloc takes its locks after every handler). The library now registers its
/// handlers when it is loaded (an `.init_array` entry, which must survive static linking too).
#[test]
fn atfork_handlers_registered_before_the_first_malloc_may_allocate() {
    hostile_passes("atfork-handlers-allocate", Duration::from_secs(60));
    let program = scratch("c-hostile-static").join("hostile");
    let archive = library_dir().join("libpitlane_malloc.a");
    compile(
        "cc",
        &[source("hostile.c"), archive],
        &program,
        &["-rdynamic", "-lpthread", "-ldl", "-lm"],
    );
    let mut command = Command::new(&program);
    command.arg("atfork-handlers-allocate");
    let Some(output) = output_within(command, Duration::from_secs(60)) else {
        panic!("statically linked: still running after 60 s (deadlock?)");
    };
    assert!(
        output.status.success() && output.stdout.starts_with(b"ok "),
        "statically linked: {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
