//! Suite `wait`: tokio's own benchmarks of `Notify` and `Semaphore` (tokio's
//! `benches/sync_notify.rs` and `benches/sync_semaphore.rs`), reproduced with pitlane's
//! `Notify` and `Semaphore` beside tokio's, event-listener's `Event` and async-lock's
//! `Semaphore`.
//!
//! - `notify_one` / `notify_waiters` (tasks = 10, 50, 100, 200, 500): that many tasks on a
//!   6-worker multi-thread runtime loop on `notified().await` and count each wake-up; the
//!   measuring thread calls `notify_one` (or `notify_waiters`) until 500 wake-ups are counted.
//!   The metric is the time for those 500 wake-ups. As in tokio's benchmark, each task holds
//!   its own clone of the `Arc` and borrows the subject for every wait (until 2026-11-25 the
//!   suite cloned the `Arc` for every wait, which is not tokio's body and changed what was
//!   measured: `docs/notes/wait-bench.md`, fifth session).
//! - `notify_ping_pong`: two tasks on a current-thread runtime hand a notification back and
//!   forth over two `Notify`s (`notify_one`, then wait for the answer), as request/response
//!   tasks of a single-threaded server do; time per 100 round trips. Not one of tokio's
//!   benchmarks: it measures what a notifier on the waiter's own thread costs (a waiter that
//!   spins before it enqueues gains nothing there and loses its whole spin). event-listener's
//!   `Event` is left out: a notification with no listener is lost, and the hand-over stalls.
//! - `semaphore_uncontended`: on a 6-worker runtime, one task acquires and releases a permit of
//!   a 10-permit semaphore 6 times in a row; time per round of 6.
//! - `semaphore_concurrent_multi` (permits = 10 uncontended, 5 contended): 6 spawned tasks on
//!   a 6-worker runtime each acquire and release one permit; time per round of 6.
//! - `semaphore_concurrent_single` (permits = 10 or 5): the same 6 acquires joined on a
//!   current-thread runtime.
//!
//! Correctness inside every run: the wake-up count must reach 500 (a lost wake-up stalls the
//! run, which then aborts after a deadline, read once every 4096 notify calls,
//! `DEADLINE_EVERY`, so that the notifying loop stays tokio's: a clock read after every call
//! slows the notifier enough to change how often a waiter finds a stored permit); the
//! semaphore must hold its permits again at the
//! end (for the semaphores that can say how many they hold).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{Suite, Workload};
use crate::results::{Better, Goal, Metric, params};
use crate::runner::{Bench, BenchError, Case, RunResult, Subject};

mod subjects;
use subjects::{NotifySubject, SemaphoreSubject};

/// The suite.
pub struct Wait;

/// Task counts of the notify workloads (tokio's).
const TASKS: [usize; 5] = [10, 50, 100, 200, 500];
/// Wake-ups counted per iteration of a notify workload (tokio's `N_ITERS`).
const WAKEUPS: usize = 500;
/// Notify calls between two reads of the clock for the deadline of a notify workload.
const DEADLINE_EVERY: u32 = 4096;
/// Worker threads of the multi-thread runtimes (tokio's benchmarks use 6).
const WORKERS: usize = 6;
/// Acquires per iteration of the semaphore workloads (tokio's).
const ACQUIRES: usize = 6;
/// A run that has not finished after this long lost a wake-up.
const DEADLINE: Duration = Duration::from_secs(20);
/// Round trips per iteration of `notify_ping_pong`.
const ROUND_TRIPS: usize = 100;

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "notify_one",
        about: "notify_one until 500 wake-ups of 10..500 waiting tasks, 6-worker runtime",
    },
    Workload {
        name: "notify_waiters",
        about: "notify_waiters until 500 wake-ups of 10..500 waiting tasks, 6-worker runtime",
    },
    Workload {
        name: "notify_ping_pong",
        about: "two tasks hand a notify_one back and forth, 100 round trips, current-thread runtime",
    },
    Workload {
        name: "semaphore_uncontended",
        about: "one task: 6 acquire/release of a 10-permit semaphore, 6-worker runtime",
    },
    Workload {
        name: "semaphore_concurrent_multi",
        about: "6 spawned tasks acquire/release once, 10 or 5 permits, 6-worker runtime",
    },
    Workload {
        name: "semaphore_concurrent_single",
        about: "6 joined acquire/release, 10 or 5 permits, current-thread runtime",
    },
];

fn ns_per_iter() -> Metric {
    Metric::new("ns_per_iter", "ns", Better::Lower)
}

impl Suite for Wait {
    fn name(&self) -> &'static str {
        "wait"
    }

    fn about(&self) -> &'static str {
        "Notify and Semaphore on tokio's own benchmarks, beside tokio, event-listener, async-lock"
    }

    fn workloads(&self) -> &'static [Workload] {
        WORKLOADS
    }

    fn goals(&self) -> Vec<Goal> {
        // Issue 17: at least 1.2x tokio (time ratio <= 0.83) on notify_one/50..500,
        // notify_waiters/50..500, semaphore concurrent_single and uncontended; nowhere
        // below 0.9x tokio (time ratio <= 1/0.9).
        const FASTER: f64 = 0.83;
        const NOT_SLOWER: f64 = 1.0 / 0.9;
        let metric = ns_per_iter();
        let notify = <pitlane_wait::Notify as NotifySubject>::NAME;
        let tokio_notify = <tokio::sync::Notify as NotifySubject>::NAME;
        let semaphore = <pitlane_wait::Semaphore as SemaphoreSubject>::NAME;
        let tokio_semaphore = <tokio::sync::Semaphore as SemaphoreSubject>::NAME;
        let mut goals = Vec::new();
        for workload in ["notify_one", "notify_waiters"] {
            for tasks in TASKS {
                let target = if tasks >= 50 { FASTER } else { NOT_SLOWER };
                goals.push(Goal::ratio(
                    workload,
                    params! {"tasks" => tasks},
                    &metric,
                    notify,
                    tokio_notify,
                    target,
                ));
            }
        }
        goals.push(Goal::ratio(
            "notify_ping_pong",
            params! {},
            &metric,
            notify,
            tokio_notify,
            NOT_SLOWER,
        ));
        goals.push(Goal::ratio(
            "semaphore_uncontended",
            params! {},
            &metric,
            semaphore,
            tokio_semaphore,
            FASTER,
        ));
        for permits in [10, 5] {
            goals.push(Goal::ratio(
                "semaphore_concurrent_single",
                params! {"capacity" => permits},
                &metric,
                semaphore,
                tokio_semaphore,
                FASTER,
            ));
            goals.push(Goal::ratio(
                "semaphore_concurrent_multi",
                params! {"capacity" => permits},
                &metric,
                semaphore,
                tokio_semaphore,
                NOT_SLOWER,
            ));
        }
        goals.into_iter().map(|g| g.from_issue(17)).collect()
    }

    fn run(&self, bench: &mut Bench) -> Result<(), BenchError> {
        let run_for = bench.config().duration(800);
        bench.note(format!(
            "Each run times iterations for {} ms per subject, after building a fresh runtime, \
             spawning the waiting tasks and running iterations untimed for a quarter of that. The multi-thread runtimes \
             have {WORKERS} workers on this {}-core machine, as in tokio's benchmarks: they \
             oversubscribe it.",
            run_for.as_millis(),
            crate::env::cores()
        ));
        for (workload, broadcast) in [("notify_one", false), ("notify_waiters", true)] {
            for tasks in TASKS {
                let mut case = Case::new(
                    workload,
                    params! {"tasks" => tasks, "threads" => WORKERS},
                    vec![ns_per_iter()],
                );
                case.push(notify_subject::<pitlane_wait::Notify>(
                    tasks, broadcast, run_for,
                ));
                case.push(notify_subject::<tokio::sync::Notify>(
                    tasks, broadcast, run_for,
                ));
                case.push(notify_subject::<event_listener::Event>(
                    tasks, broadcast, run_for,
                ));
                bench.measure(case)?;
            }
        }
        let mut case = Case::new(
            "notify_ping_pong",
            params! {"threads" => 1},
            vec![ns_per_iter()],
        );
        case.push(ping_pong_subject::<pitlane_wait::Notify>(run_for));
        case.push(ping_pong_subject::<tokio::sync::Notify>(run_for));
        bench.measure(case)?;
        let mut case = Case::new(
            "semaphore_uncontended",
            params! {"capacity" => 10, "threads" => WORKERS},
            vec![ns_per_iter()],
        );
        push_semaphores(&mut case, |s| semaphore_uncontended(s, run_for));
        bench.measure(case)?;
        for permits in [10, 5] {
            let mut case = Case::new(
                "semaphore_concurrent_multi",
                params! {"capacity" => permits, "tasks" => ACQUIRES, "threads" => WORKERS},
                vec![ns_per_iter()],
            );
            push_semaphores(&mut case, |s| {
                semaphore_concurrent(s, permits, true, run_for)
            });
            bench.measure(case)?;
            let mut case = Case::new(
                "semaphore_concurrent_single",
                params! {"capacity" => permits, "tasks" => ACQUIRES, "threads" => 1},
                vec![ns_per_iter()],
            );
            push_semaphores(&mut case, |s| {
                semaphore_concurrent(s, permits, false, run_for)
            });
            bench.measure(case)?;
        }
        Ok(())
    }
}

/// Which semaphore a semaphore run measures.
#[derive(Clone, Copy)]
enum Which {
    Pitlane,
    Tokio,
    AsyncLock,
}

fn push_semaphores<'a>(case: &mut Case<'a>, run: impl Fn(Which) -> RunResult + Copy + 'a) {
    let subjects = [
        (
            <pitlane_wait::Semaphore as SemaphoreSubject>::NAME,
            <pitlane_wait::Semaphore as SemaphoreSubject>::PEER,
            Which::Pitlane,
        ),
        (
            <tokio::sync::Semaphore as SemaphoreSubject>::NAME,
            <tokio::sync::Semaphore as SemaphoreSubject>::PEER,
            Which::Tokio,
        ),
        (
            <async_lock::Semaphore as SemaphoreSubject>::NAME,
            <async_lock::Semaphore as SemaphoreSubject>::PEER,
            Which::AsyncLock,
        ),
    ];
    for (name, peer, which) in subjects {
        let go = move || run(which);
        case.push(if peer {
            Subject::peer(name, go)
        } else {
            Subject::ours(name, go)
        });
    }
}

fn multi_thread_runtime() -> Result<tokio::runtime::Runtime, String> {
    // tokio panics ("OS can't spawn worker thread") where the OS refuses a worker, rather
    // than returning an error: made the refusal `crate::start` reports, without the panic's
    // own report on stderr before it.
    catch_quietly(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .build()
    })
    .map_err(|panic| {
        let why = pitlane_testkit::panics::message(&*panic).unwrap_or("a panic");
        format!("{} (a tokio worker): {why}", crate::start::REFUSAL)
    })?
    .map_err(|e| format!("cannot build a runtime: {e}"))
}

/// Runs `f`, catching a panic as `catch_unwind` does, and with the panic hook silent for
/// panics of this thread meanwhile (those of other threads still reach the hook that was
/// set), which is put back after.
fn catch_quietly<R>(f: impl FnOnce() -> R + std::panic::UnwindSafe) -> std::thread::Result<R> {
    let caller = std::thread::current().id();
    let previous = std::sync::Arc::new(std::panic::take_hook());
    let others = std::sync::Arc::clone(&previous);
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != caller {
            others(info);
        }
    }));
    let result = std::panic::catch_unwind(f);
    // Dropping this hook drops its handle on the previous one, which then has a single owner
    // again (unless another thread took this hook meanwhile: then it forwards to it).
    drop(std::panic::take_hook());
    match std::sync::Arc::try_unwrap(previous) {
        Ok(hook) => std::panic::set_hook(hook),
        Err(shared) => std::panic::set_hook(Box::new(move |info| shared(info))),
    }
    result
}

/// Runs `iteration` untimed for a quarter of `run_for` (the fresh runtime's workers start,
/// the tasks reach their first wait), then times it over and over for `run_for`; returns
/// nanoseconds per timed iteration.
fn time_iterations(
    run_for: Duration,
    mut iteration: impl FnMut() -> Result<(), String>,
) -> Result<f64, String> {
    let warm_up = Instant::now();
    while warm_up.elapsed() < run_for / 4 {
        iteration()?;
    }
    let start = Instant::now();
    let mut done = 0_u64;
    loop {
        iteration()?;
        done += 1;
        let elapsed = start.elapsed();
        if elapsed >= run_for {
            return Ok(elapsed.as_nanos() as f64 / done as f64);
        }
    }
}

fn notify_subject<'a, N: NotifySubject>(
    tasks: usize,
    broadcast: bool,
    run_for: Duration,
) -> Subject<'a> {
    let run = move || Ok(vec![notify_run::<N>(tasks, broadcast, run_for)?]);
    if N::PEER {
        Subject::peer(N::NAME, run)
    } else {
        Subject::ours(N::NAME, run)
    }
}

/// tokio's `sync_notify` benchmark: `tasks` tasks count their wake-ups; each iteration
/// notifies until 500 are counted.
fn notify_run<N: NotifySubject>(
    tasks: usize,
    broadcast: bool,
    run_for: Duration,
) -> Result<f64, String> {
    let rt = multi_thread_runtime()?;
    let notify = Arc::new(N::new());
    let counter = Arc::new(AtomicUsize::new(0));
    for _ in 0..tasks {
        let notify = notify.clone();
        let counter = counter.clone();
        rt.spawn(async move {
            loop {
                notify.wait().await;
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let deadline = Instant::now() + DEADLINE;
    let mut calls = 0_u32;
    let result = time_iterations(run_for, || {
        counter.store(0, Ordering::SeqCst);
        loop {
            if broadcast {
                notify.notify_waiters();
            } else {
                notify.notify_one();
            }
            if counter.load(Ordering::SeqCst) >= WAKEUPS {
                return Ok(());
            }
            calls = calls.wrapping_add(1);
            if calls.is_multiple_of(DEADLINE_EVERY) && Instant::now() > deadline {
                return Err(format!(
                    "{}: only {} of {WAKEUPS} wake-ups after {DEADLINE:?}",
                    N::NAME,
                    counter.load(Ordering::SeqCst)
                ));
            }
        }
    });
    rt.shutdown_background();
    result
}

fn ping_pong_subject<'a, N: NotifySubject>(run_for: Duration) -> Subject<'a> {
    let run = move || Ok(vec![ping_pong_run::<N>(run_for)?]);
    if N::PEER {
        Subject::peer(N::NAME, run)
    } else {
        Subject::ours(N::NAME, run)
    }
}

/// Two tasks of a current-thread runtime: the measuring one calls `notify_one` on `ping` and
/// waits on `pong`; the echoing one waits on `ping` and calls `notify_one` on `pong`.
/// Nanoseconds per [`ROUND_TRIPS`] round trips. A lost notification stalls the hand-over,
/// which then fails after [`DEADLINE`].
fn ping_pong_run<N: NotifySubject>(run_for: Duration) -> Result<f64, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot build a runtime: {e}"))?;
    let ping = Arc::new(N::new());
    let pong = Arc::new(N::new());
    let result = rt.block_on(async {
        let echo = {
            let (ping, pong) = (ping.clone(), pong.clone());
            tokio::spawn(async move {
                loop {
                    ping.wait().await;
                    pong.notify_one();
                }
            })
        };
        // One iteration: ROUND_TRIPS hand-overs, failing if one stalls.
        let iteration = || async {
            tokio::time::timeout(DEADLINE, async {
                for _ in 0..ROUND_TRIPS {
                    ping.notify_one();
                    pong.wait().await;
                }
            })
            .await
            .map_err(|_| {
                format!(
                    "{}: a ping-pong hand-over stalled for {DEADLINE:?}",
                    N::NAME
                )
            })
        };
        let warm_up = Instant::now();
        while warm_up.elapsed() < run_for / 4 {
            iteration().await?;
        }
        let start = Instant::now();
        let mut done = 0_u64;
        loop {
            iteration().await?;
            done += 1;
            let elapsed = start.elapsed();
            if elapsed >= run_for {
                echo.abort();
                return Ok(elapsed.as_nanos() as f64 / done as f64);
            }
        }
    });
    rt.shutdown_background();
    result
}

fn semaphore_uncontended(which: Which, run_for: Duration) -> RunResult {
    match which {
        Which::Pitlane => uncontended::<pitlane_wait::Semaphore>(run_for),
        Which::Tokio => uncontended::<tokio::sync::Semaphore>(run_for),
        Which::AsyncLock => uncontended::<async_lock::Semaphore>(run_for),
    }
}

fn semaphore_concurrent(which: Which, permits: usize, multi: bool, run_for: Duration) -> RunResult {
    match which {
        Which::Pitlane => concurrent::<pitlane_wait::Semaphore>(permits, multi, run_for),
        Which::Tokio => concurrent::<tokio::sync::Semaphore>(permits, multi, run_for),
        Which::AsyncLock => concurrent::<async_lock::Semaphore>(permits, multi, run_for),
    }
}

fn check_permits<S: SemaphoreSubject>(semaphore: &S, permits: usize) -> Result<(), String> {
    match semaphore.available() {
        Some(available) if available != permits => Err(format!(
            "{}: {available} permits at the end, {permits} expected",
            S::NAME
        )),
        _ => Ok(()),
    }
}

/// tokio's `uncontended`: one task acquires and releases 6 times in a row on a 6-worker
/// runtime, entered with `block_on` per iteration.
fn uncontended<S: SemaphoreSubject>(run_for: Duration) -> RunResult {
    let rt = multi_thread_runtime()?;
    let semaphore = Arc::new(S::new(10));
    let ns = time_iterations(run_for, || {
        let semaphore = semaphore.clone();
        rt.block_on(async move {
            for _ in 0..ACQUIRES {
                semaphore.acquire_release().await;
            }
        });
        Ok(())
    })?;
    rt.shutdown_background();
    check_permits(&*semaphore, 10)?;
    Ok(vec![ns])
}

/// tokio's `concurrent_multi` (6 spawned tasks on the 6-worker runtime) and
/// `concurrent_single` (6 joined futures on a current-thread runtime).
fn concurrent<S: SemaphoreSubject>(permits: usize, multi: bool, run_for: Duration) -> RunResult {
    let rt = if multi {
        multi_thread_runtime()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| format!("cannot build a runtime: {e}"))?
    };
    let semaphore = Arc::new(S::new(permits));
    let ns = time_iterations(run_for, || {
        let s = &semaphore;
        if multi {
            rt.block_on(async {
                let handles: Vec<_> = (0..ACQUIRES)
                    .map(|_| tokio::spawn(s.acquire_release()))
                    .collect();
                for handle in handles {
                    handle
                        .await
                        .map_err(|e| format!("{}: task failed: {e}", S::NAME))?;
                }
                Ok::<(), String>(())
            })
        } else {
            rt.block_on(async {
                tokio::join!(
                    s.acquire_release(),
                    s.acquire_release(),
                    s.acquire_release(),
                    s.acquire_release(),
                    s.acquire_release(),
                    s.acquire_release()
                );
                Ok(())
            })
        }
    })?;
    rt.shutdown_background();
    check_permits(&*semaphore, permits)?;
    Ok(vec![ns])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_notify_subject_counts_its_wakeups() {
        let d = Duration::from_millis(5);
        for broadcast in [false, true] {
            assert!(notify_run::<pitlane_wait::Notify>(10, broadcast, d).unwrap() > 0.0);
            assert!(notify_run::<tokio::sync::Notify>(10, broadcast, d).unwrap() > 0.0);
            assert!(notify_run::<event_listener::Event>(10, broadcast, d).unwrap() > 0.0);
        }
        assert!(ping_pong_run::<pitlane_wait::Notify>(d).unwrap() > 0.0);
        assert!(ping_pong_run::<tokio::sync::Notify>(d).unwrap() > 0.0);
    }

    #[test]
    fn every_semaphore_subject_keeps_its_permits() {
        let d = Duration::from_millis(5);
        for which in [Which::Pitlane, Which::Tokio, Which::AsyncLock] {
            assert!(semaphore_uncontended(which, d).unwrap()[0] > 0.0);
            for multi in [false, true] {
                assert!(semaphore_concurrent(which, 5, multi, d).unwrap()[0] > 0.0);
            }
        }
    }

    #[test]
    fn a_lost_permit_is_detected() {
        let semaphore = pitlane_wait::Semaphore::new(3);
        semaphore.forget_permits(1);
        let err = check_permits(&semaphore, 3).unwrap_err();
        assert!(err.contains("2 permits at the end"), "{err}");
    }

    #[test]
    fn goals_name_subjects_that_run() {
        let names = [
            <pitlane_wait::Notify as NotifySubject>::NAME,
            <tokio::sync::Notify as NotifySubject>::NAME,
            <pitlane_wait::Semaphore as SemaphoreSubject>::NAME,
            <tokio::sync::Semaphore as SemaphoreSubject>::NAME,
        ];
        for goal in Wait.goals() {
            assert!(names.contains(&goal.ours.as_str()));
            assert!(names.contains(&goal.peer.as_deref().unwrap()));
            assert!(WORKLOADS.iter().any(|w| w.name == goal.workload));
        }
    }
}
