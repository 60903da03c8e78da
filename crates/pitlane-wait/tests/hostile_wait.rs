//! Hostile uses of `Notify` and `Semaphore` not covered by `adversarial.rs` and
//! `differential_tokio.rs`: wakers dropped (or panicking in `drop`) on the unwinding path of a
//! broadcast or close whose first waker panicked, a panicking waker on an `add_permits` that
//! overflows, acquire loops that never give the runtime back its thread (tokio's cooperative
//! budget), futures forgotten and then their primitive moved, waiters cancelled from a served
//! waiter's `wake`, futures polled and dropped across threads, the blocking forms in and around
//! a tokio runtime and from thread-local destructors.
//!
//! Scenarios that may abort or deadlock the process run in a child process (this binary,
//! re-run with `HOSTILE_WAIT_CHILD` naming the scenario and only `subprocess_entry` selected),
//! so the parent test sees the abort or the hang as a failed exit status or a timeout (a
//! hang is waited out for 30 s).
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use pitlane_testkit::child::{rerun_test, scenario};
use pitlane_testkit::wakers::{CountingWaker, on_wake};
use pitlane_wait::notify::OwnedNotified;
use pitlane_wait::queue::WAKE_BATCH;
use pitlane_wait::{Notify, Semaphore};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

fn poll<F: Future + ?Sized>(future: Pin<&mut F>, waker: &CountingWaker) -> Poll<F::Output> {
    waker.with_context(|cx| future.poll(cx))
}

fn panicking_waker() -> Waker {
    on_wake(|| panic!("waker panics on wake"))
}

/// A waker that does nothing when woken and runs `action` when its last clone is dropped.
struct OnDrop<F: FnMut() + Send + Sync + 'static>(Mutex<Option<F>>);

impl<F: FnMut() + Send + Sync + 'static> Wake for OnDrop<F> {
    fn wake(self: Arc<Self>) {}
    fn wake_by_ref(self: &Arc<Self>) {}
}

impl<F: FnMut() + Send + Sync + 'static> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(mut action) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            action();
        }
    }
}

fn on_drop_waker(action: impl FnMut() + Send + Sync + 'static) -> Waker {
    Waker::from(Arc::new(OnDrop(Mutex::new(Some(action)))))
}

// ---------------------------------------------------------------------------------------------
// Child processes.
// ---------------------------------------------------------------------------------------------

const CHILD_ENV: &str = "HOSTILE_WAIT_CHILD";

/// The scenarios' entry point in the child; does nothing in a normal test run.
#[test]
fn subprocess_entry() {
    let Some(name) = scenario(CHILD_ENV) else {
        return;
    };
    // Keep the expected panics' messages short.
    std::panic::set_hook(Box::new(|info| eprintln!("child panic: {info}")));
    match name.as_str() {
        "tokio_broadcast_drop_reenters" => tokio_broadcast(TailWaker::DropReenters, AFTER),
        "tokio_broadcast_drop_panics" => tokio_broadcast(TailWaker::DropPanics, AFTER),
        "tokio_broadcast_drop_panics_33rd" => tokio_broadcast(TailWaker::DropPanics, FULL),
        "tokio_close_drop_reenters" => tokio_close(TailWaker::DropReenters, AFTER),
        "tokio_close_drop_panics" => tokio_close(TailWaker::DropPanics, AFTER),
        "tokio_close_drop_panics_33rd" => tokio_close(TailWaker::DropPanics, FULL),
        "pitlane_broadcast_drop_reenters" => pitlane_broadcast(TailWaker::DropReenters, AFTER),
        "pitlane_broadcast_drop_panics" => pitlane_broadcast(TailWaker::DropPanics, AFTER),
        "pitlane_broadcast_drop_panics_33rd" => pitlane_broadcast(TailWaker::DropPanics, FULL),
        "pitlane_close_drop_reenters" => pitlane_close(TailWaker::DropReenters, AFTER),
        "pitlane_close_drop_panics" => pitlane_close(TailWaker::DropPanics, AFTER),
        "pitlane_close_drop_panics_33rd" => pitlane_close(TailWaker::DropPanics, FULL),
        "tokio_add_permits_overflow_panicking_waker" => {
            let sem = tokio::sync::Semaphore::new(0);
            let mut a = Box::pin(sem.acquire());
            assert!(
                a.as_mut()
                    .poll(&mut Context::from_waker(&panicking_waker()))
                    .is_pending()
            );
            assert!(catch_unwind(AssertUnwindSafe(|| sem.add_permits(usize::MAX))).is_err());
            drop(a);
        }
        "pitlane_add_permits_overflow_panicking_waker" => {
            let sem = Semaphore::new(0);
            let mut a = Box::pin(sem.acquire());
            assert!(
                a.as_mut()
                    .poll(&mut Context::from_waker(&panicking_waker()))
                    .is_pending()
            );
            assert!(catch_unwind(AssertUnwindSafe(|| sem.add_permits(usize::MAX))).is_err());
            drop(a);
        }
        "tokio_add_permits_flush_drop_reenters" => {
            let sem = Arc::new(tokio::sync::Semaphore::new(0));
            let make = {
                let sem = sem.clone();
                move || -> BoxFut {
                    let sem = sem.clone();
                    Box::pin(async move {
                        let _ = sem.acquire_owned().await;
                    })
                }
            };
            hostile_flush(&make, &|| sem.add_permits(WAKE_BATCH + 1));
        }
        "pitlane_add_permits_flush_drop_reenters" => {
            let sem = Arc::new(Semaphore::new(0));
            let make = {
                let sem = sem.clone();
                move || -> BoxFut {
                    let sem = sem.clone();
                    Box::pin(async move {
                        let _ = sem.acquire_owned().await;
                    })
                }
            };
            hostile_flush(&make, &|| sem.add_permits(WAKE_BATCH + 1));
        }
        other => panic!("unknown scenario {other}"),
    }
    eprintln!("child scenario {name} finished");
}

type BoxFut = Pin<Box<dyn Future<Output = ()> + Send>>;

#[derive(Clone, Copy)]
enum TailWaker {
    /// Its drop drops another waiter that is still queued (so takes the queue's lock).
    DropReenters,
    /// Its drop panics.
    DropPanics,
}

/// The hostile waiter's position in [`hostile_drain`]: the 34th, after the waiter whose
/// waker the drain would collect when the first batch is full.
const AFTER: usize = WAKE_BATCH + 2;
/// The hostile waiter's position in [`hostile_drain`]: the 33rd, the first after the first
/// batch (the drain wakes that batch before it takes this waiter's waker).
const FULL: usize = WAKE_BATCH + 1;

/// More than a batch of waiters, the first with a waker that panics on `wake`, the one at
/// position `at` (1-based, after the first batch) with a hostile `drop` (see [`TailWaker`]),
/// then a victim waiter and a few more; runs `broadcast` (expected to panic, from the first
/// waker) and then drops every waiter. Returns normally unless the process aborts or
/// deadlocks.
fn hostile_drain(make: &dyn Fn() -> BoxFut, broadcast: &dyn Fn(), tail: TailWaker, at: usize) {
    assert!(at > WAKE_BATCH);
    let w = CountingWaker::new();
    let victim: Arc<Mutex<Option<BoxFut>>> = Arc::default();
    let mut fs: Vec<BoxFut> = Vec::new();
    // Positions 1..at: the first panics on wake; 1..=32 fill the first batch.
    for i in 0..at - 1 {
        let mut f = make();
        let waker = if i == 0 { panicking_waker() } else { w.waker() };
        assert!(
            f.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        fs.push(f);
    }
    // Position `at`: the hostile waker (the future keeps the only clone once ours is dropped).
    {
        let mut f = make();
        let waker = match tail {
            TailWaker::DropReenters => {
                let victim = victim.clone();
                on_drop_waker(move || drop(victim.lock().unwrap().take()))
            }
            TailWaker::DropPanics => on_drop_waker(|| panic!("waker panics on drop")),
        };
        assert!(
            f.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        fs.push(f);
    }
    // Next: the victim; then a few more.
    let mut v = make();
    assert!(poll(v.as_mut(), &w).is_pending());
    *victim.lock().unwrap() = Some(v);
    for _ in 0..3 {
        let mut f = make();
        assert!(poll(f.as_mut(), &w).is_pending());
        fs.push(f);
    }
    let result = catch_unwind(AssertUnwindSafe(broadcast));
    assert!(result.is_err(), "the first waker's panic comes out");
    // With tokio, the hostile waker is still in its future: its drop runs here.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(fs)));
    drop(victim.lock().unwrap().take());
}

/// A batch of waiters, the first with a waker that panics on `wake`, then one whose waker's
/// drop drops the next waiter (still queued); `serve` (expected to panic, from the first
/// waker) serves the batch and the hostile one, which finds the batch full. Returns normally
/// unless the process aborts or deadlocks.
fn hostile_flush(make: &dyn Fn() -> BoxFut, serve: &dyn Fn()) {
    let w = CountingWaker::new();
    let victim: Arc<Mutex<Option<BoxFut>>> = Arc::default();
    let mut fs: Vec<BoxFut> = Vec::new();
    for i in 0..WAKE_BATCH {
        let mut f = make();
        let waker = if i == 0 { panicking_waker() } else { w.waker() };
        assert!(
            f.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        fs.push(f);
    }
    {
        let mut f = make();
        let victim = victim.clone();
        let waker = on_drop_waker(move || drop(victim.lock().unwrap().take()));
        assert!(
            f.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        fs.push(f);
    }
    let mut v = make();
    assert!(poll(v.as_mut(), &w).is_pending());
    *victim.lock().unwrap() = Some(v);
    let result = catch_unwind(AssertUnwindSafe(serve));
    assert!(result.is_err(), "the first waker's panic comes out");
    let _ = catch_unwind(AssertUnwindSafe(move || drop(fs)));
    drop(victim.lock().unwrap().take());
}

fn pitlane_broadcast(tail: TailWaker, at: usize) {
    let notify = Arc::new(Notify::new());
    let make = {
        let notify = notify.clone();
        move || -> BoxFut { Box::pin(notify.clone().notified_owned()) }
    };
    hostile_drain(&make, &|| notify.notify_waiters(), tail, at);
}

fn tokio_broadcast(tail: TailWaker, at: usize) {
    let notify = Arc::new(tokio::sync::Notify::new());
    let make = {
        let notify = notify.clone();
        move || -> BoxFut { Box::pin(notify.clone().notified_owned()) }
    };
    hostile_drain(&make, &|| notify.notify_waiters(), tail, at);
}

fn pitlane_close(tail: TailWaker, at: usize) {
    let sem = Arc::new(Semaphore::new(0));
    let make = {
        let sem = sem.clone();
        move || -> BoxFut {
            let sem = sem.clone();
            Box::pin(async move {
                let _ = sem.acquire_owned().await;
            })
        }
    };
    hostile_drain(&make, &|| sem.close(), tail, at);
}

fn tokio_close(tail: TailWaker, at: usize) {
    let sem = Arc::new(tokio::sync::Semaphore::new(0));
    let make = {
        let sem = sem.clone();
        move || -> BoxFut {
            let sem = sem.clone();
            Box::pin(async move {
                let _ = sem.acquire_owned().await;
            })
        }
    };
    hostile_drain(&make, &|| sem.close(), tail, at);
}

fn child_outcome(name: &str) -> String {
    match rerun_test("subprocess_entry", CHILD_ENV, name, Duration::from_secs(30)) {
        None => "hung (killed after 30 s)".to_string(),
        Some(ended) if ended.status.success() => "ok".to_string(),
        Some(ended) => format!(
            "failed: {} ({})",
            ended.status,
            String::from_utf8_lossy(&ended.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        ),
    }
}

/// Runs `scenario` through `notify_waiters` and `close`, on tokio's types and on ours, each in
/// a child process, and asserts that all four finish (`what` says what the scenario does).
fn broadcast_and_close_survive(scenario: &str, what: &str) {
    let outcome = |who: &str, how: &str| child_outcome(&format!("{who}_{how}_{scenario}"));
    assert_eq!(
        (outcome("tokio", "broadcast"), outcome("tokio", "close")),
        ("ok".to_string(), "ok".to_string()),
        "tokio finishes both: {what}"
    );
    assert_eq!(
        (outcome("pitlane", "broadcast"), outcome("pitlane", "close")),
        ("ok".to_string(), "ok".to_string()),
        "{what}"
    );
}

/// Regression: `notify_waiters` (and `close`) with more than a batch of waiters, whose first
/// waker panics on `wake`, then a waiter whose waker's drop drops another waiter still queued
/// on the same primitive (as an executor's waker that owns the last reference to a task that
/// owns such a future does). The drain's unwinding path (`Locked::drain`, src/queue.rs)
/// finishes the remaining waiters with `mark`, which records the notification (or the close)
/// and leaves each waker in its node, so the hostile waker is dropped with its future, after
/// the panic and outside the queue's lock, and the waiter its drop drops leaves normally. The
/// 33rd waiter, whose waker would have been collected when the batch was full, is not taken
/// before the batch is woken, so its waker is not dropped under the lock either. (Taking the
/// wakers and dropping them under the lock deadlocked on the non-reentrant lock.) tokio's
/// `notify_waiters` marks those waiters notified without taking their wakers, and its
/// `close` leaves the waiters after the panicking one queued: both finish too.
#[test]
fn a_waker_whose_drop_reenters_after_a_panicked_drain_runs_outside_the_lock() {
    broadcast_and_close_survive(
        "drop_reenters",
        "notify_waiters / close with a panicking waker, then a waker whose drop re-enters",
    );
}

/// Regression: the same path as above, with a waker whose `drop` panics. No waker is taken,
/// and so none dropped, while the first waker's panic unwinds: the second panic comes later,
/// when the future holding that waker is dropped, as with tokio; the process does not abort
/// ("panic in a destructor during cleanup").
#[test]
fn a_waker_whose_drop_panics_after_a_panicked_drain_does_not_abort() {
    broadcast_and_close_survive(
        "drop_panics",
        "notify_waiters / close with a panicking waker, then a waker whose drop panics",
    );
}

/// Regression: as above, with the hostile waker on the 33rd waiter, the first after the
/// first batch. The drain wakes a full batch before it takes the next waiter's waker (as
/// tokio's `notify_waiters` takes no waker it has no room for), so when the batch's first
/// waker panics, the 33rd waiter is still in the drain and is finished with `mark`: its waker
/// stays with its future. (Taken first and handed to `wake_later`, it would be dropped with
/// the rest of the batch while the panic unwinds: an abort.)
#[test]
fn the_waiter_after_a_panicked_batch_keeps_its_waker() {
    broadcast_and_close_survive(
        "drop_panics_33rd",
        "notify_waiters / close with a panicking waker, then on the 33rd a waker whose drop panics",
    );
}

/// Regression: `add_permits(usize::MAX)` with a waiter whose waker panics on `wake`.
/// `release_locked` (src/semaphore.rs) serves the waiter and returns the refused rest instead
/// of panicking with the served waiters' wakers still in the guard; its caller drops the
/// guard first, which wakes them with the lock released and no panic unwinding, and only
/// then panics in `overflow`. Here the waker's panic comes out of `add_permits` instead of
/// the overflow's, and the process goes on. (Panicking first had the guard's drop wake the
/// waker during the unwinding: an abort.) tokio panics with "cannot add more than
/// MAX_PERMITS permits" and drops the collected wakers unwoken; `differential_tokio.rs` pins
/// "pitlane wakes the served waiters, tokio does not" as a kept difference.
#[test]
fn add_permits_overflow_wakes_the_served_waiters_before_it_panics() {
    assert_eq!(
        child_outcome("tokio_add_permits_overflow_panicking_waker"),
        "ok",
        "tokio survives"
    );
    assert_eq!(
        child_outcome("pitlane_add_permits_overflow_panicking_waker"),
        "ok",
        "add_permits past MAX_PERMITS, served waiter's waker panics"
    );
}

/// Regression: `add_permits` serving a batch of waiters and one more, whose first waker
/// panics on `wake`: the 33rd waiter's waker, handed to `Locked::wake_later` when the batch
/// was full, is dropped (unwoken, with the rest of the batch) before `Locked::flush` takes the
/// lock back, so its drop, which drops a 34th waiter still queued, does not deadlock on the
/// lock. (It was dropped by `wake_later`'s unwinding, after the lock was taken back.) tokio
/// takes no waker it has no room for, so its 33rd waiter keeps its waker and stays queued.
#[test]
fn a_waker_collected_when_its_batch_flush_panics_is_dropped_outside_the_lock() {
    assert_eq!(
        child_outcome("tokio_add_permits_flush_drop_reenters"),
        "ok",
        "tokio finishes"
    );
    assert_eq!(
        child_outcome("pitlane_add_permits_flush_drop_reenters"),
        "ok",
        "add_permits with a panicking waker, then a waker whose drop re-enters"
    );
}

// ---------------------------------------------------------------------------------------------
// Cooperative scheduling.
// ---------------------------------------------------------------------------------------------

/// How many acquire/release rounds a task makes, on a `current_thread` runtime, before a
/// task spawned beside it gets to run (capped at `LIMIT`).
#[cfg(feature = "tokio")]
const LIMIT: usize = 100_000;

#[cfg(feature = "tokio")]
macro_rules! rounds_until_the_other_task_runs {
    ($sem:expr) => {{
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let sem = $sem;
            let ran = Arc::new(AtomicBool::new(false));
            let flag = ran.clone();
            tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
            let mut rounds = 0;
            while !ran.load(Ordering::SeqCst) && rounds < LIMIT {
                drop(sem.acquire().await.unwrap());
                rounds += 1;
            }
            rounds
        })
    }};
}

/// Regression (feature `tokio`): tokio's `Semaphore::acquire` spends the task's cooperative
/// budget (`batch_semaphore::Acquire::poll` calls `coop::poll_proceed`), so a task that
/// acquires and releases a free permit in a loop returns `Pending` after 128 rounds and lets
/// the other tasks of its runtime run. pitlane's acquires do the same with the `tokio`
/// feature (`coop::proceed`, src/semaphore.rs); a loop waiting for a flag another task sets
/// ends. (Without a budget, it kept the thread of a `current_thread` runtime for ever; here
/// it would be cut at 100,000 rounds. Without the feature there is no budget: see the
/// crate doc.)
#[cfg(feature = "tokio")]
#[test]
fn an_acquire_loop_gives_the_runtime_back_its_thread_like_tokio() {
    let tokio_rounds = rounds_until_the_other_task_runs!(tokio::sync::Semaphore::new(1));
    assert!(tokio_rounds < 1_000, "tokio yields: {tokio_rounds} rounds");
    let rounds = rounds_until_the_other_task_runs!(Semaphore::new(1));
    assert!(
        rounds < LIMIT,
        "the spawned task never ran in {rounds} acquire rounds (tokio: {tokio_rounds})"
    );
}

/// What an acquire does when the task's budget is spent: returns `Pending` holding the
/// permits it took (so it keeps its place, tokio 1.54's #8371), completes after the task
/// yields, and fails (giving the permits back) if the semaphore is closed meanwhile.
/// Returns (first poll pending, permits free then, completed after the yield, second first
/// poll pending, failed after a close, permits free at the end).
#[cfg(feature = "tokio")]
macro_rules! acquire_out_of_budget {
    ($sem:expr) => {{
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            use tokio::task::coop::{consume_budget, has_budget_remaining};
            let sem = $sem;
            while has_budget_remaining() {
                consume_budget().await;
            }
            let mut acquire = Box::pin(sem.acquire());
            let pending =
                std::future::poll_fn(|cx| Poll::Ready(acquire.as_mut().poll(cx).is_pending()))
                    .await;
            let free = sem.available_permits();
            let completed = acquire.await.is_ok();
            while has_budget_remaining() {
                consume_budget().await;
            }
            let mut acquire = Box::pin(sem.acquire());
            let pending_again =
                std::future::poll_fn(|cx| Poll::Ready(acquire.as_mut().poll(cx).is_pending()))
                    .await;
            sem.close();
            let failed = acquire.await.is_err();
            (
                pending,
                free,
                completed,
                pending_again,
                failed,
                sem.available_permits(),
            )
        })
    }};
}

#[cfg(feature = "tokio")]
#[test]
fn an_acquire_out_of_budget_keeps_its_permits_and_its_place_like_tokio() {
    let tokio = acquire_out_of_budget!(tokio::sync::Semaphore::new(1));
    assert_eq!(tokio, (true, 0, true, true, true, 1), "tokio");
    let pitlane = acquire_out_of_budget!(Semaphore::new(1));
    assert_eq!(pitlane, tokio);
}

// ---------------------------------------------------------------------------------------------
// Other hostile uses.
// ---------------------------------------------------------------------------------------------

#[test]
fn waiters_left_by_a_panicked_drain_keep_their_wakers_and_complete_when_polled() {
    // More than a batch of waiters, the first with a waker that panics: the first batch's
    // wakers are taken (the rest of that batch dropped unwoken), the waiters after it are
    // marked with their wakers left in them. Each completes when polled, dropping its waker
    // then (as tokio's); a notified waiter dropped without polling passes nothing on, and its
    // waker goes with its future.
    let n = WAKE_BATCH + 4;
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut fs: Vec<_> = (0..n).map(|_| Box::pin(notify.notified())).collect();
    assert!(
        fs[0]
            .as_mut()
            .poll(&mut Context::from_waker(&panicking_waker()))
            .is_pending()
    );
    for f in &mut fs[1..] {
        assert!(poll(f.as_mut(), &w).is_pending());
    }
    assert_eq!(w.live(), n);
    assert!(catch_unwind(AssertUnwindSafe(|| notify.notify_waiters())).is_err());
    assert_eq!(w.wakes(), 0, "the rest of the batch was dropped unwoken");
    assert_eq!(
        w.live(),
        1 + n - WAKE_BATCH,
        "the later waiters keep their wakers"
    );
    for f in &mut fs[..n - 2] {
        assert!(poll(f.as_mut(), &w).is_ready());
    }
    assert_eq!(
        w.live(),
        1 + 2,
        "the two waiters not polled keep their wakers"
    );
    fs.truncate(n - 2); // two notified waiters dropped without being polled
    assert_eq!(w.live(), 1);
    let mut late = pin!(notify.notified());
    assert!(
        poll(late.as_mut(), &w).is_pending(),
        "nothing was passed on"
    );
    drop(fs);
    assert_eq!(w.live(), 2, "the counter and `late`'s waker");
    notify.notify_one();
    assert!(poll(late.as_mut(), &w).is_ready());

    let sem = Semaphore::new(0);
    let w = CountingWaker::new();
    let mut fs: Vec<_> = (0..n).map(|_| Box::pin(sem.acquire())).collect();
    assert!(
        fs[0]
            .as_mut()
            .poll(&mut Context::from_waker(&panicking_waker()))
            .is_pending()
    );
    for f in &mut fs[1..] {
        assert!(poll(f.as_mut(), &w).is_pending());
    }
    assert!(catch_unwind(AssertUnwindSafe(|| sem.close())).is_err());
    assert!(sem.is_closed());
    assert_eq!(w.wakes(), 0);
    assert_eq!(w.live(), 1 + n - WAKE_BATCH);
    for f in &mut fs[..n - 2] {
        assert!(matches!(poll(f.as_mut(), &w), Poll::Ready(Err(_))));
    }
    drop(fs);
    assert_eq!(w.live(), 1);
    assert_eq!(sem.available_permits(), 0);
}

#[test]
fn a_served_waiters_wake_cancelling_a_partly_served_waiter_passes_its_permits_on() {
    // `add_permits(2)`: `a` (lacks 1) is served, `b` (lacks 3) gets 1 and keeps its place.
    // `a`'s waker, run after the lock is released, drops `b`: its partial permit goes to `c`.
    let sem = Arc::new(Semaphore::new(0));
    let b_slot: Arc<Mutex<Option<BoxFut>>> = Arc::default();
    let reentrant = {
        let b_slot = b_slot.clone();
        on_wake(move || drop(b_slot.lock().unwrap().take()))
    };
    let w = CountingWaker::new();
    let mut a = Box::pin(sem.acquire());
    assert!(
        a.as_mut()
            .poll(&mut Context::from_waker(&reentrant))
            .is_pending()
    );
    let mut b: BoxFut = {
        let sem = sem.clone();
        Box::pin(async move {
            let _ = sem.acquire_many_owned(3).await;
        })
    };
    assert!(poll(b.as_mut(), &w).is_pending());
    *b_slot.lock().unwrap() = Some(b);
    let mut c = Box::pin(sem.acquire());
    assert!(poll(c.as_mut(), &w).is_pending());
    sem.add_permits(2);
    assert!(
        b_slot.lock().unwrap().is_none(),
        "b was dropped by a's waker"
    );
    assert_eq!(w.wakes(), 1, "c was woken");
    let Poll::Ready(Ok(pa)) = poll(a.as_mut(), &w) else {
        panic!("a served")
    };
    let Poll::Ready(Ok(pc)) = poll(c.as_mut(), &w) else {
        panic!("c served with b's partial permit")
    };
    assert_eq!(sem.available_permits(), 0);
    drop((pa, pc, a, c));
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn an_acquire_polled_on_other_threads_with_new_wakers_and_dropped_on_a_third_returns_its_part() {
    let sem = Arc::new(Semaphore::new(1));
    let (w1, w2) = (CountingWaker::new(), CountingWaker::new());
    let mut f: BoxFut = {
        let sem = sem.clone();
        Box::pin(async move {
            let _ = sem.acquire_many_owned(3).await;
        })
    };
    assert!(poll(f.as_mut(), &w1).is_pending()); // took 1, lacks 2
    std::thread::scope(|s| {
        s.spawn(|| assert!(poll(f.as_mut(), &w2).is_pending()));
    });
    sem.add_permits(1); // partial: no wake-up
    assert_eq!(w1.wakes() + w2.wakes(), 0);
    let w3 = CountingWaker::new();
    std::thread::scope(|s| {
        s.spawn(|| assert!(poll(f.as_mut(), &w3).is_pending()));
    });
    let mut behind = Box::pin(sem.acquire());
    assert!(poll(behind.as_mut(), &w1).is_pending());
    std::thread::spawn(move || drop(f)).join().unwrap();
    // Its 2 permits went to `behind` (1) and the semaphore (1).
    let Poll::Ready(Ok(permit)) = poll(behind.as_mut(), &w1) else {
        panic!("behind served by the dropped acquire's permits")
    };
    assert_eq!(sem.available_permits(), 1);
    drop((permit, behind));
    assert_eq!(sem.available_permits(), 2);
    assert_eq!(w2.wakes() + w3.wakes(), 0);
}

#[test]
fn a_replaced_waker_whose_drop_reenters_the_notify_runs_outside_the_lock() {
    let notify = Arc::new(Notify::new());
    let victim: Arc<Mutex<Option<Pin<Box<OwnedNotified>>>>> = Arc::default();
    let hostile = {
        let notify = notify.clone();
        let victim = victim.clone();
        on_drop_waker(move || {
            drop(victim.lock().unwrap().take()); // a queued waiter: takes the lock
            notify.notify_one();
        })
    };
    let w = CountingWaker::new();
    let mut f = Box::pin(notify.clone().notified_owned());
    assert!(
        f.as_mut()
            .poll(&mut Context::from_waker(&hostile))
            .is_pending()
    );
    drop(hostile);
    let mut v = Box::pin(notify.clone().notified_owned());
    assert!(!v.as_mut().enable());
    *victim.lock().unwrap() = Some(v);
    // Replaces the hostile waker: it is dropped after the lock is released; its notify_one
    // goes to `f`, the only waiter left.
    assert!(poll(f.as_mut(), &w).is_pending());
    assert!(victim.lock().unwrap().is_none());
    assert_eq!(w.wakes(), 1);
    assert!(poll(f.as_mut(), &w).is_ready());
}

#[test]
fn a_forgotten_waiter_survives_its_notify_and_semaphore_being_moved() {
    // `mem::forget` ends the borrow, so the primitive may move while the leaked node is
    // queued: the queue holds no pointer into itself.
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut f = Box::pin(notify.notified());
    assert!(poll(f.as_mut(), &w).is_pending());
    std::mem::forget(f);
    let moved = Box::new(notify);
    let mut g = pin!(moved.notified());
    assert!(poll(g.as_mut(), &w).is_pending());
    moved.notify_one(); // the forgotten one
    assert!(poll(g.as_mut(), &w).is_pending());
    moved.notify_waiters();
    assert!(poll(g.as_mut(), &w).is_ready());

    let sem = Semaphore::new(1);
    let mut a = Box::pin(sem.acquire_many(3)); // takes 1, lacks 2
    assert!(poll(a.as_mut(), &w).is_pending());
    std::mem::forget(a);
    let moved = Box::new(sem);
    let mut b = Box::pin(moved.acquire());
    assert!(poll(b.as_mut(), &w).is_pending());
    moved.add_permits(3); // 2 to the forgotten head, 1 to `b`
    assert!(matches!(poll(b.as_mut(), &w), Poll::Ready(Ok(_))));
    drop(b);
    assert_eq!(moved.available_permits(), 1);
    moved.close();
    assert!(moved.is_closed());
}

// Where `usize` is 64 bits, `u32::MAX` permits fit under `MAX_PERMITS`.
#[cfg(target_pointer_width = "64")]
#[test]
fn acquire_many_u32_max_waits_and_gives_its_part_back_when_dropped() {
    let sem = Semaphore::new(5);
    let w = CountingWaker::new();
    let mut big = Box::pin(sem.acquire_many(u32::MAX));
    assert!(poll(big.as_mut(), &w).is_pending());
    assert_eq!(sem.available_permits(), 0);
    // Serves it; the rest stays (room is left for its permits to come back).
    let added = Semaphore::MAX_PERMITS - u32::MAX as usize;
    sem.add_permits(added);
    let Poll::Ready(Ok(permit)) = poll(big.as_mut(), &w) else {
        panic!("served")
    };
    assert_eq!(permit.num_permits(), u32::MAX as usize);
    assert_eq!(sem.available_permits(), added + 5 - u32::MAX as usize);
    drop((permit, big));
    assert_eq!(sem.available_permits(), added + 5);

    let sem = Semaphore::new(7);
    let mut big = Box::pin(sem.acquire_many(u32::MAX));
    assert!(poll(big.as_mut(), &w).is_pending());
    drop(big);
    assert_eq!(sem.available_permits(), 7, "the partial permits came back");
}

// Where `usize` is 32 bits, `u32::MAX` exceeds `MAX_PERMITS` (`usize::MAX >> 3`): every
// acquire of that many panics with tokio's message (its acquires check first: a closed
// semaphore panics too), the async ones when first polled, and nothing is taken.
#[cfg(target_pointer_width = "32")]
#[test]
fn acquires_beyond_max_permits_panic_as_tokios() {
    use pitlane_testkit::panics::message_of;

    let expected = format!(
        "a semaphore may not have more than MAX_PERMITS permits ({})",
        Semaphore::MAX_PERMITS
    );
    for closed in [false, true] {
        let sem = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
        if closed {
            sem.close();
        }
        let w = CountingWaker::new();
        // Not polled: nothing happens.
        drop(sem.acquire_many(u32::MAX));
        let acquire = message_of(|| drop(poll(pin!(sem.acquire_many(u32::MAX)), &w)));
        assert_eq!(acquire, expected);
        let owned = message_of(|| drop(poll(pin!(sem.clone().acquire_many_owned(u32::MAX)), &w)));
        assert_eq!(owned, expected);
        assert_eq!(
            message_of(|| drop(sem.try_acquire_many(u32::MAX))),
            expected
        );
        assert_eq!(
            message_of(|| drop(sem.clone().try_acquire_many_owned(u32::MAX))),
            expected
        );
        assert_eq!(
            message_of(|| drop(sem.blocking_acquire_many(u32::MAX))),
            expected
        );
        assert_eq!(sem.available_permits(), Semaphore::MAX_PERMITS);
        assert_eq!(sem.is_closed(), closed);
    }
}

#[test]
fn forget_permits_usize_max_is_zero_with_waiters_and_keeps_a_closed_semaphore_closed() {
    let sem = Semaphore::new(2);
    let w = CountingWaker::new();
    let mut f = Box::pin(sem.acquire_many(3));
    assert!(poll(f.as_mut(), &w).is_pending());
    assert_eq!(sem.forget_permits(usize::MAX), 0);
    drop(f);
    assert_eq!(sem.available_permits(), 2);
    sem.close();
    assert_eq!(sem.forget_permits(usize::MAX), 2);
    assert!(sem.is_closed());
    sem.add_permits(Semaphore::MAX_PERMITS);
    assert_eq!(sem.forget_permits(usize::MAX), Semaphore::MAX_PERMITS);
    assert!(sem.is_closed());
    assert_eq!(sem.available_permits(), 0);
}

#[test]
fn split_zero_and_split_everything_conserve_permits() {
    let sem = Arc::new(Semaphore::new(3));
    let mut p = sem.try_acquire_many(3).unwrap();
    let zero = p.split(0).unwrap();
    assert_eq!(zero.num_permits(), 0);
    drop(zero);
    assert_eq!(sem.available_permits(), 0);
    let all = p.split(3).unwrap();
    assert_eq!(p.num_permits(), 0);
    assert!(p.split(1).is_none());
    drop(p);
    assert_eq!(sem.available_permits(), 0);
    drop(all);
    assert_eq!(sem.available_permits(), 3);

    let mut o = sem.clone().try_acquire_many_owned(3).unwrap();
    assert!(o.split(4).is_none());
    let zero = o.split(0).unwrap();
    zero.forget();
    o.merge(sem.clone().try_acquire_many_owned(0).unwrap());
    assert_eq!(o.num_permits(), 3);
    drop(o);
    assert_eq!(sem.available_permits(), 3);
}

#[test]
fn a_panicking_waker_in_a_single_batch_drain_loses_no_waiter() {
    // Fewer waiters than a batch: the drain finishes, then the guard's drop wakes them and
    // the first waker panics; every waiter is notified and later ones are not lost.
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut first = Box::pin(notify.notified());
    assert!(
        first
            .as_mut()
            .poll(&mut Context::from_waker(&panicking_waker()))
            .is_pending()
    );
    let mut rest: Vec<_> = (0..5).map(|_| Box::pin(notify.notified())).collect();
    for f in &mut rest {
        assert!(poll(f.as_mut(), &w).is_pending());
    }
    assert!(catch_unwind(AssertUnwindSafe(|| notify.notify_waiters())).is_err());
    assert!(poll(first.as_mut(), &w).is_ready());
    assert!(rest.iter_mut().all(|f| poll(f.as_mut(), &w).is_ready()));
    let mut next = pin!(notify.notified());
    assert!(poll(next.as_mut(), &w).is_pending());
    notify.notify_one();
    assert!(poll(next.as_mut(), &w).is_ready());
}

#[test]
fn close_from_a_waker_while_add_permits_flushes_a_full_batch() {
    // `add_permits` serves more than a batch, releasing the lock to wake the first batch; the
    // first served waiter's waker closes the semaphore meanwhile. The waiters served before
    // the close fail when polled after it (as tokio's) and give their permits back; none is
    // lost or made.
    let sem = Arc::new(Semaphore::new(0));
    let closer = {
        let sem = sem.clone();
        on_wake(move || sem.close())
    };
    let w = CountingWaker::new();
    let n = 2 * WAKE_BATCH + 3;
    let mut fs: Vec<_> = (0..n).map(|_| Box::pin(sem.acquire())).collect();
    assert!(
        fs[0]
            .as_mut()
            .poll(&mut Context::from_waker(&closer))
            .is_pending()
    );
    for f in &mut fs[1..] {
        assert!(poll(f.as_mut(), &w).is_pending());
    }
    sem.add_permits(WAKE_BATCH + 5);
    assert!(sem.is_closed());
    for f in &mut fs {
        assert!(matches!(poll(f.as_mut(), &w), Poll::Ready(Err(_))));
    }
    drop(fs);
    assert_eq!(sem.available_permits(), WAKE_BATCH + 5);
}

#[test]
fn notify_one_and_blocking_acquire_from_a_thread_local_destructor() {
    struct OnExit(Arc<Notify>, Arc<Semaphore>, Arc<AtomicUsize>);
    impl Drop for OnExit {
        fn drop(&mut self) {
            self.0.notify_one();
            let permit = self.1.blocking_acquire().unwrap();
            drop(permit);
            self.2.fetch_add(1, Ordering::SeqCst);
        }
    }
    thread_local! {
        static GUARD: std::cell::RefCell<Option<OnExit>> = const { std::cell::RefCell::new(None) };
    }
    let notify = Arc::new(Notify::new());
    let sem = Arc::new(Semaphore::new(1));
    let done = Arc::new(AtomicUsize::new(0));
    let (n, s, d) = (notify.clone(), sem.clone(), done.clone());
    std::thread::spawn(move || {
        // Block once first, so that the thread's blocking waker is in its thread-local.
        drop(s.blocking_acquire().unwrap());
        GUARD.with(|g| *g.borrow_mut() = Some(OnExit(n, s, d)));
    })
    .join()
    .unwrap();
    assert_eq!(done.load(Ordering::SeqCst), 1);
    let w = CountingWaker::new();
    let mut f = pin!(notify.notified());
    assert!(poll(f.as_mut(), &w).is_ready(), "the permit stored on exit");
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn blocking_acquire_inside_a_future_of_another_executor() {
    let sem = Arc::new(Semaphore::new(0));
    let releaser = {
        let sem = sem.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            sem.add_permits(2);
        })
    };
    let got = pitlane_testkit::wakers::block_on(async {
        let p = sem.blocking_acquire_many(2).unwrap();
        p.num_permits()
    });
    assert_eq!(got, 2);
    releaser.join().unwrap();
    assert_eq!(sem.available_permits(), 2);
}

#[cfg(feature = "tokio")]
#[test]
fn blocking_acquire_on_a_multi_thread_worker_panics_like_tokio() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let sem = Arc::new(Semaphore::new(1));
    let result = rt.block_on({
        let sem = sem.clone();
        async move {
            tokio::spawn(async move {
                let _ = sem.blocking_acquire();
            })
            .await
        }
    });
    let panic = result.unwrap_err().into_panic();
    let message = pitlane_testkit::panics::message(&*panic).unwrap_or_default();
    assert!(
        message.contains("Cannot block the current thread from within a runtime"),
        "{message}"
    );
    assert_eq!(sem.available_permits(), 1, "nothing taken");
}

#[cfg(feature = "tokio")]
#[test]
fn blocking_acquire_in_spawn_blocking_and_block_in_place_works_like_tokio() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let sem = Arc::new(Semaphore::new(0));
    rt.block_on({
        let sem = sem.clone();
        async move {
            let blocking = {
                let sem = sem.clone();
                tokio::task::spawn_blocking(move || sem.blocking_acquire().unwrap().forget())
            };
            let in_place = {
                let sem = sem.clone();
                tokio::spawn(async move {
                    tokio::task::block_in_place(|| sem.blocking_acquire().unwrap().forget())
                })
            };
            tokio::time::sleep(Duration::from_millis(20)).await;
            sem.add_permits(2);
            blocking.await.unwrap();
            in_place.await.unwrap();
        }
    });
    assert_eq!(sem.available_permits(), 0);
}

#[test]
fn close_racing_cancels_and_acquires_on_threads_conserves_permits() {
    // Threads enqueue acquires of 1-3 permits and cancel them at random moments while another
    // closes; every permit comes back.
    for round in 0..50 {
        let sem = Arc::new(Semaphore::new(2));
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for t in 0..3 {
            let sem = sem.clone();
            let stop = stop.clone();
            handles.push(std::thread::spawn(move || {
                let w = CountingWaker::new();
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let mut f = Box::pin(sem.acquire_many((i % 3 + 1) as u32));
                    match poll(f.as_mut(), &w) {
                        Poll::Ready(Ok(p)) => drop(p),
                        Poll::Ready(Err(_)) => return,
                        Poll::Pending => {
                            if i % 2 == 0 {
                                std::thread::yield_now();
                                if let Poll::Ready(Ok(p)) = poll(f.as_mut(), &w) {
                                    drop(p);
                                }
                            }
                        }
                    }
                    drop(f);
                }
            }));
        }
        std::thread::sleep(Duration::from_micros(200 + round * 10));
        sem.close();
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(sem.available_permits(), 2, "round {round}");
    }
}
