//! Threads for stress tests that ThreadSanitizer can see through.
//!
//! The ThreadSanitizer runs in CI use a nightly compiler without a sanitized standard
//! library, so the synchronisation inside `std::thread::spawn`/`join` and `std::thread::scope`
//! is invisible to it and it reports false races on everything handed between a test and its
//! threads. [`run_threads`] starts threads with `pthread_create` and waits for them with
//! `pthread_join`, both of which ThreadSanitizer intercepts, so the only synchronisation it has
//! to reason about is the structure under test and these two calls.
//!
//! The same threads are the ones to start in a child of a multi-threaded `fork`: they take
//! none of the standard library's process-wide locks, which the fork may have left held (see
//! [`child`](crate::child)).
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let sum = AtomicU64::new(0);
//! let per_thread = pitlane_testkit::stress::run_threads(4, |t| {
//!     sum.fetch_add(t as u64, Ordering::Relaxed);
//!     t * 10
//! });
//! assert_eq!(per_thread, [0, 10, 20, 30]);
//! assert_eq!(sum.into_inner(), 6);
//! ```

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

type Outcome<R> = Option<Result<R, Box<dyn Any + Send>>>;

struct Job<'a, R> {
    body: &'a (dyn Fn(usize) -> R + Sync),
    index: usize,
    outcome: Outcome<R>,
}

extern "C" fn thread_main<R>(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `arg` is the `Job` that `run_threads` created for this thread; it outlives the
    // thread (joined before the jobs are dropped) and no other thread touches it meanwhile.
    let job = unsafe { &mut *(arg as *mut Job<'_, R>) };
    let body = job.body;
    let index = job.index;
    job.outcome = Some(catch_unwind(AssertUnwindSafe(|| body(index))));
    std::ptr::null_mut()
}

/// Runs `body(0)`, …, `body(threads - 1)` on `threads` new POSIX threads at once and returns
/// their results in order. A panic in any thread is re-raised here after all have finished.
///
/// # Panics
/// If a thread cannot be created, or when `body` panicked in some thread.
pub fn run_threads<R: Send>(threads: usize, body: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let body: &(dyn Fn(usize) -> R + Sync) = &body;
    let mut jobs: Vec<Job<'_, R>> = (0..threads)
        .map(|index| Job {
            body,
            index,
            outcome: None,
        })
        .collect();
    let mut handles = Vec::with_capacity(threads);
    for job in jobs.iter_mut() {
        // SAFETY: zeroed memory is a valid placeholder for the id that pthread_create writes.
        let mut handle: libc::pthread_t = unsafe { std::mem::zeroed() };
        // SAFETY: `thread_main::<R>` matches the start-routine ABI; `job` stays alive and is not
        // moved (the vector is not resized) until the thread is joined below.
        let rc = unsafe {
            libc::pthread_create(
                &mut handle,
                std::ptr::null(),
                thread_main::<R>,
                job as *mut Job<'_, R> as *mut libc::c_void,
            )
        };
        if rc != 0 {
            for h in handles {
                // SAFETY: `h` is a started, not yet joined thread.
                unsafe { libc::pthread_join(h, std::ptr::null_mut()) };
            }
            panic!("pthread_create failed with error {rc}");
        }
        handles.push(handle);
    }
    for h in handles {
        // SAFETY: `h` is a started, not yet joined thread.
        let rc = unsafe { libc::pthread_join(h, std::ptr::null_mut()) };
        assert_eq!(rc, 0, "pthread_join failed");
    }
    let mut results = Vec::with_capacity(threads);
    let mut panic = None;
    for job in jobs {
        match job.outcome.expect("a joined thread stored its outcome") {
            Ok(r) => results.push(r),
            Err(p) => panic = panic.or(Some(p)),
        }
    }
    if let Some(p) = panic {
        resume_unwind(p);
    }
    results
}

/// Makes the one-time setup of crossbeam-epoch's global collector (which pitlane-queue's MPMC
/// queue pins) happen before any thread of any test touches it, through atomics that
/// ThreadSanitizer sees.
///
/// The collector is set up behind a `std::sync::Once`, and the CI's ThreadSanitizer run uses a
/// standard library built without the sanitizer, so the `Once` itself is invisible to it: a
/// thread that merely finds the collector ready would be reported as racing with the thread
/// that set it up. A stress test calls this first; the first caller pins (setting the
/// collector up), every other caller waits for its `Release` store.
///
/// ```
/// pitlane_testkit::stress::epoch_ready();
/// ```
#[cfg(not(pitlane_loom))]
pub fn epoch_ready() {
    use std::sync::atomic::{AtomicU8, Ordering};

    static STATE: AtomicU8 = AtomicU8::new(0);
    const READY: u8 = 2;
    match STATE.compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire) {
        Ok(_) => {
            let queue = pitlane_queue::mpmc::Queue::<u8, 1>::with_segment_size();
            queue.push(0);
            assert_eq!(queue.pop(), Some(0));
            STATE.store(READY, Ordering::Release);
        }
        Err(_) => {
            while STATE.load(Ordering::Acquire) != READY {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_in_a_thread_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            super::run_threads(3, |t| assert_ne!(t, 1, "thread one fails"));
        });
        assert!(caught.is_err());
    }
}
