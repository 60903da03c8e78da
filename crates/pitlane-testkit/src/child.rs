//! Forked children of a test: waiting for one with a deadline, so that a child stuck on a lock
//! that a `fork` left held fails its test instead of hanging the whole test run.
//!
//! A child of a multi-threaded process gets a copy of every lock as it was at the `fork`,
//! including locks that other threads held then and will never release in the child. The
//! allocator's own locks are made safe by its `pthread_atfork` handlers, but the standard
//! library has process-wide locks of its own: `std::thread::spawn` takes one as each new
//! thread starts (its stack-overflow handler's thread registry), so a child forked while a
//! parent thread was starting can hang forever in its own first `spawn`. Tests therefore start
//! threads in a child with [`run_threads`](crate::stress::run_threads) (POSIX threads, none of
//! the standard library's locks), and wait for children with [`wait_for_child`].
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
