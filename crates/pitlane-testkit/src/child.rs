//! Children of a test, each waited for with a deadline so that a stuck child fails its test
//! instead of hanging the whole test run: forked ones ([`wait_for_child`]), any command
//! ([`output_within`]), and the test binary re-run on one scenario that may abort or hang
//! ([`rerun_test`]).
//!
//! A forked child may be stuck on a lock that the `fork` left held: a child of a
//! multi-threaded process gets a copy of every lock as it was at the `fork`,
//! including locks that other threads held then and will never release in the child. The
//! allocator's own locks are made safe by its `pthread_atfork` handlers, but the standard
//! library has process-wide locks of its own: `std::thread::spawn` takes one as each new
//! thread starts (its stack-overflow handler's thread registry), so a child forked while a
//! parent thread was starting can hang forever in its own first `spawn`. Tests therefore start
//! threads in a child with [`run_threads`](crate::stress::run_threads) (POSIX threads, none of
//! the standard library's locks), and wait for children with [`wait_for_child`].
//!
//! A child has only the thread that forked it. The stacks of the parent's other threads (the
//! test's own thread among them, where the fork came from one of `run_threads`' threads) are
//! memory that the C library may hand to the threads the child starts, so once it starts
//! threads a child must reach nothing on those stacks: copy what it needs onto the forking
//! thread's stack, or leak it onto the heap, before it starts any (pitlane-queue's
//! `tests/hostile_threads.rs` does both).
//!
//! ```
//! use std::time::Duration;
//!
//! // SAFETY: the child only leaves, with `_exit`.
//! let pid = unsafe { libc::fork() };
//! assert!(pid >= 0);
//! if pid == 0 {
//!     // SAFETY: ends the child at once.
//!     unsafe { libc::_exit(0) };
//! }
//! assert_eq!(pitlane_testkit::child::wait_for_child(pid, Duration::from_secs(60)), Ok(()));
//! ```

use std::time::{Duration, Instant};

/// Waits for the child `pid` to end: `Ok` if it exited with status 0, else a description of
/// how it ended. A child still running after `limit` is killed (`SIGKILL`) and reported as
/// stuck.
pub fn wait_for_child(pid: libc::pid_t, limit: Duration) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: waits, without blocking, for a child of this process.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if waited == pid {
            return if libc::WIFEXITED(status) {
                match libc::WEXITSTATUS(status) {
                    0 => Ok(()),
                    code => Err(format!("child {pid} exited with status {code}")),
                }
            } else if libc::WIFSIGNALED(status) {
                Err(format!(
                    "child {pid} was ended by signal {}",
                    libc::WTERMSIG(status)
                ))
            } else {
                Err(format!("child {pid} ended with wait status {status}"))
            };
        }
        if waited == -1 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("waitpid({pid}) failed: {error}"));
        }
        if started.elapsed() > limit {
            // SAFETY: signals and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!(
                "child {pid} was still running after {limit:?} and was killed (stuck on a lock \
                 the fork left held?)"
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs `command` with its standard output and error captured, killing it (`SIGKILL`) if it
/// is still running after `limit`: `Some` of its output once it ended, `None` if it was
/// killed, so that a child stuck in a deadlock fails its test instead of hanging the run. The
/// two streams are read while the child runs, so that one filling its pipe cannot stall it.
///
/// ```
/// use std::process::Command;
/// use std::time::Duration;
/// use pitlane_testkit::child::output_within;
///
/// let done = output_within(Command::new("true"), Duration::from_secs(60)).unwrap();
/// assert!(done.status.success());
/// let mut sleeper = Command::new("sleep");
/// sleeper.arg("60");
/// assert!(output_within(sleeper, Duration::from_millis(50)).is_none());
/// ```
pub fn output_within(
    mut command: std::process::Command,
    limit: Duration,
) -> Option<std::process::Output> {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} could not start: {e}"));
    let drain = |stream: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waits for the child") {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    status.map(|status| std::process::Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs this test binary again, on its test `entry` alone, with the environment variable
/// `role` set to `scenario` (the entry reads it with [`scenario`] and runs that scenario; in
/// a normal run it finds nothing to do), under [`output_within`]'s deadline: for scenarios that
/// may abort or hang, which must not take the test run with them. Panics if the binary has no
/// test named `entry`.
///
/// ```no_run
/// use std::time::Duration;
/// use pitlane_testkit::child::{rerun_test, scenario};
///
/// const ROLE: &str = "MY_TESTS_SCENARIO";
///
/// #[test]
/// fn child_entry() {
///     match scenario(ROLE).as_deref() {
///         Some("aborts") => std::process::abort(),
///         _ => {}
///     }
/// }
///
/// #[test]
/// fn an_abort_is_seen_from_the_parent() {
///     let ended = rerun_test("child_entry", ROLE, "aborts", Duration::from_secs(60)).unwrap();
///     assert!(!ended.status.success());
/// }
/// ```
pub fn rerun_test(
    entry: &str,
    role: &str,
    scenario: &str,
    limit: Duration,
) -> Option<std::process::Output> {
    let mut command = std::process::Command::new(std::env::current_exe().expect("this binary"));
    command
        .args([entry, "--exact", "--nocapture", "--test-threads=1"])
        .env(role, scenario);
    let ended = output_within(command, limit)?;
    // A misspelt entry would run no test and "pass": a check that could not fail.
    assert!(
        !String::from_utf8_lossy(&ended.stdout).contains("running 0 tests"),
        "the test binary has no test named {entry}"
    );
    Some(ended)
}

/// The scenario a test binary re-run by [`rerun_test`] with `role` is to run; `None` in a
/// normal test run.
///
/// ```
/// assert_eq!(pitlane_testkit::child::scenario("PITLANE_NO_SUCH_ROLE"), None);
/// ```
pub fn scenario(role: &str) -> Option<String> {
    std::env::var(role).ok()
}
