//! A probe of the `wait` suite's workloads for analysis, not a benchmark: a fixed number of
//! iterations (so that callgrind's instruction counts can be differenced), and for the notify
//! workloads the distribution of iteration times, how many wake-ups completed on their first
//! poll, and the notifying thread's context switches. The figures it gave are in
//! `docs/notes/wait-bench.md`. The task bodies count their polls, so its notify times are not
//! the suite's.
//!
//! ```sh
//! cargo build --release -p pitlane-bench --example wait_probe
//! # WORKLOAD SUBJECT (pitlane, tokio) ITERATIONS [TASKS] [WORKERS]; WORKLOAD is one, all
//! # (notify, fixed iterations), wone, wall (notify, the suite's 100 ms window; ITERATIONS
//! # unused), unc, single, multi (semaphore); sone, sall (notify_one / notify_waiters, the
//! # suite's loop as it is now, both subjects alternating, ITERATIONS rounds), sone1 (one
//! # subject only, for perf stat). sone/sall/sone1 print per window: where the subject and
//! # the counter lie, ns per iteration, calls and queued wake-ups per iteration, the spread of
//! # iteration times, and each thread's ms on a CPU / ms waiting for one / time slices.
//! # Environment for them: WINDOW_MS (default 100); PAD=n, c or nc (the subject, the counter
//! # or both alone on a 128-byte block; n64: the subject on one 64-byte line); BODY=own (the
//! # task holds its Arc and awaits `notified()` on it, as tokio's benchmark does, instead of
//! # the suite's `wait()`, which clones the Arc for every wait).
//! target/release/examples/wait_probe one pitlane 600 50
//! WINDOW_MS=200 BODY=own target/release/examples/wait_probe sone x 4 50 6
//! valgrind --tool=callgrind target/release/examples/wait_probe single pitlane 10000
//! ```
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

trait N: Send + Sync + 'static {
    fn new() -> Self;
    fn one(&self);
    fn all(&self);
    fn wait(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static;
    /// `notified()` on a `Notify` the task holds (tokio's benchmark body: no `Arc` clone per
    /// wait).
    fn wait_ref(&self) -> impl std::future::Future<Output = ()> + Send + '_;
}
impl N for pitlane_wait::Notify {
    fn new() -> Self {
        Self::new()
    }
    fn one(&self) {
        self.notify_one()
    }
    fn all(&self) {
        self.notify_waiters()
    }
    fn wait(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static {
        let t = self.clone();
        async move { t.notified().await }
    }
    fn wait_ref(&self) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.notified()
    }
}
impl N for tokio::sync::Notify {
    fn new() -> Self {
        Self::new()
    }
    fn one(&self) {
        self.notify_one()
    }
    fn all(&self) {
        self.notify_waiters()
    }
    fn wait(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static {
        let t = self.clone();
        async move { t.notified().await }
    }
    fn wait_ref(&self) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.notified()
    }
}

/// A subject or a counter alone on its 128-byte block (PAD=1): nothing else on the heap shares
/// its cache lines (or the adjacent line the prefetcher pairs with them).
#[repr(C, align(128))]
struct Pad<T>(T);

impl<T> std::ops::Deref for Pad<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// As `Pad`, on one 64-byte line (PAD=n64).
#[repr(C, align(64))]
struct Pad64<T>(T);

macro_rules! padded_n {
    ($p:ident, $t:ty) => {
        impl N for $p<$t> {
            fn new() -> Self {
                $p(<$t>::new())
            }
            fn one(&self) {
                self.0.notify_one()
            }
            fn all(&self) {
                self.0.notify_waiters()
            }
            fn wait(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static {
                let t = self.clone();
                async move { t.0.notified().await }
            }
            fn wait_ref(&self) -> impl std::future::Future<Output = ()> + Send + '_ {
                self.0.notified()
            }
        }
    };
}
padded_n!(Pad, pitlane_wait::Notify);
padded_n!(Pad, tokio::sync::Notify);
padded_n!(Pad64, pitlane_wait::Notify);
padded_n!(Pad64, tokio::sync::Notify);

trait S: Send + Sync + 'static {
    fn new(p: usize) -> Self;
    fn ar(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static;
}
impl S for pitlane_wait::Semaphore {
    fn new(p: usize) -> Self {
        Self::new(p)
    }
    fn ar(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static {
        let t = self.clone();
        async move {
            drop(t.acquire().await.unwrap());
        }
    }
}
impl S for tokio::sync::Semaphore {
    fn new(p: usize) -> Self {
        Self::new(p)
    }
    fn ar(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static {
        let t = self.clone();
        async move {
            drop(t.acquire().await.unwrap());
        }
    }
}

fn rt(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .unwrap()
}

fn notify<X: N>(tasks: usize, iters: usize, all: bool, workers: usize) {
    let rt = rt(workers);
    let n = Arc::new(X::new());
    let c = Arc::new(AtomicUsize::new(0));
    let imm = Arc::new(AtomicUsize::new(0));
    let polls = Arc::new(AtomicUsize::new(0));
    for _ in 0..tasks {
        let n = n.clone();
        let c = c.clone();
        let imm = imm.clone();
        let polls = polls.clone();
        rt.spawn(async move {
            loop {
                let mut f = std::pin::pin!(n.wait());
                let mut k = 0;
                std::future::poll_fn(|cx| {
                    k += 1;
                    f.as_mut().poll(cx)
                })
                .await;
                if k == 1 {
                    imm.fetch_add(1, Ordering::Relaxed);
                }
                polls.fetch_add(k, Ordering::Relaxed);
                c.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let ru0 = rusage();
    let mut calls = 0u64;
    let mut per = Vec::with_capacity(iters);
    let t = Instant::now();
    for _ in 0..iters {
        let t0 = Instant::now();
        c.store(0, Ordering::SeqCst);
        loop {
            if all {
                n.all()
            } else {
                n.one()
            }
            calls += 1;
            if c.load(Ordering::SeqCst) >= 500 {
                break;
            }
        }
        per.push(t0.elapsed().as_micros() as u64);
    }
    let el = t.elapsed();
    let ru1 = rusage();
    print!(
        "M: vol {} invol {} cpu {} ms; ",
        ru1.0 - ru0.0,
        ru1.1 - ru0.1,
        (ru1.2 - ru0.2) / 1000
    );
    per.sort();
    let q = |f: f64| per[((per.len() - 1) as f64 * f) as usize];
    let done = (iters * 500) as f64;
    print!(
        "immediate {:.2} polls/wait {:.2}; ",
        imm.load(Ordering::Relaxed) as f64 / done,
        polls.load(Ordering::Relaxed) as f64 / done
    );
    println!(
        "{:.0} ns/iter, {:.1} calls/iter; us min {} p10 {} p50 {} p90 {} p99 {} max {}",
        el.as_nanos() as f64 / iters as f64,
        calls as f64 / iters as f64,
        q(0.0),
        q(0.1),
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0)
    );
    rt.shutdown_background();
}

/// The suite's `notify_run` (the deadline check on every call as there, a 25 ms untimed
/// warm-up, a 100 ms timed window), with task bodies that count a wake-up that took more than
/// one poll (a waiter queued and woken, not one that took the permit) and nothing else: ns
/// per iteration, `notify_*` calls and such wake-ups per iteration, the notifying thread's
/// context switches and CPU time.
fn notify_window<X: N>(tasks: usize, all: bool, workers: usize) {
    let rt = rt(workers);
    let n = Arc::new(X::new());
    let c = Arc::new(AtomicUsize::new(0));
    // Wake-ups that took more than one poll (the waiter was queued and woken), counted only
    // when they happen, so that the common path is the suite's.
    let woken = Arc::new(AtomicUsize::new(0));
    for _ in 0..tasks {
        let n = n.clone();
        let c = c.clone();
        let woken = woken.clone();
        rt.spawn(async move {
            loop {
                let mut f = std::pin::pin!(n.wait());
                let mut k = 0_u32;
                std::future::poll_fn(|cx| {
                    k += 1;
                    f.as_mut().poll(cx)
                })
                .await;
                if k > 1 {
                    woken.fetch_add(1, Ordering::Relaxed);
                }
                c.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let calls = std::cell::Cell::new(0u64);
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    let iteration = || {
        c.store(0, Ordering::SeqCst);
        loop {
            if all {
                n.all()
            } else {
                n.one()
            }
            calls.set(calls.get() + 1);
            if c.load(Ordering::SeqCst) >= 500 {
                break;
            }
            // The suite's deadline check, on every call as there.
            assert!(Instant::now() < deadline, "stuck");
        }
    };
    let run_for = std::time::Duration::from_millis(100);
    let warm = Instant::now();
    while warm.elapsed() < run_for / 4 {
        iteration();
    }
    calls.set(0);
    let ru0 = rusage();
    let woken0 = woken.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut done = 0u64;
    let el = loop {
        iteration();
        done += 1;
        let el = start.elapsed();
        if el >= run_for {
            break el;
        }
    };
    let ru1 = rusage();
    let woken1 = woken.load(Ordering::Relaxed);
    println!(
        "{:.0} ns/iter, {} iters, {:.1} calls/iter, {:.1} woken/iter; M: vol {} invol {} cpu {} ms",
        el.as_nanos() as f64 / done as f64,
        done,
        calls.get() as f64 / done as f64,
        (woken1 - woken0) as f64 / done as f64,
        ru1.0 - ru0.0,
        ru1.1 - ru0.1,
        (ru1.2 - ru0.2) / 1000
    );
    rt.shutdown_background();
}

/// The suite's `notify_run` as it is now (the deadline read once every 4096 calls, a 25 ms
/// untimed warm-up, a timed window of WINDOW_MS, default 100), with task bodies that count a
/// wake-up that took more than one poll: per window, ns per iteration, the spread of the
/// iterations' times, `notify_*` calls and queued wake-ups per iteration, and the notifying
/// thread's context switches.
fn suite_window<X: N>(tasks: usize, all: bool, workers: usize) {
    let rt = rt(workers);
    let n = Arc::new(X::new());
    // The counter as the suite allocates it (an `Arc`), or alone on a 128-byte block (PAD=1);
    // leaked, so that the tasks can outlive the window.
    let c: &'static AtomicUsize = if std::env::var("PAD").is_ok_and(|v| v == "1" || v.contains('c'))
    {
        &Box::leak(Box::new(Pad(AtomicUsize::new(0)))).0
    } else {
        // SAFETY: the pointer comes from `Arc::into_raw` and is never released.
        unsafe { &*Arc::into_raw(Arc::new(AtomicUsize::new(0))) }
    };
    let woken = Arc::new(AtomicUsize::new(0));
    for _ in 0..tasks {
        let n = n.clone();
        let woken = woken.clone();
        let own = std::env::var("BODY").is_ok_and(|v| v == "own");
        rt.spawn(async move {
            loop {
                if own {
                    let mut f = std::pin::pin!(n.wait_ref());
                    let mut k = 0_u32;
                    std::future::poll_fn(|cx| {
                        k += 1;
                        f.as_mut().poll(cx)
                    })
                    .await;
                    if k > 1 {
                        woken.fetch_add(1, Ordering::Relaxed);
                    }
                    c.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                let mut f = std::pin::pin!(n.wait());
                let mut k = 0_u32;
                std::future::poll_fn(|cx| {
                    k += 1;
                    f.as_mut().poll(cx)
                })
                .await;
                if k > 1 {
                    woken.fetch_add(1, Ordering::Relaxed);
                }
                c.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let calls = std::cell::Cell::new(0u64);
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    let iteration = || {
        c.store(0, Ordering::SeqCst);
        loop {
            if all {
                n.all()
            } else {
                n.one()
            }
            if c.load(Ordering::SeqCst) >= 500 {
                break;
            }
            calls.set(calls.get() + 1);
            if calls.get().is_multiple_of(4096) {
                assert!(Instant::now() < deadline, "stuck");
            }
        }
    };
    // Where the notifier's two shared words lie: the subject (inside its Arc) and the counter.
    let na = Arc::as_ptr(&n).addr();
    let ca = std::ptr::from_ref(c).addr();
    print!(
        "notify {:#x}+{} counter {:#x} (line {}, counter-notify {:+}); ",
        na & 0xfff,
        std::mem::size_of::<X>(),
        ca & 0xfff,
        if na / 64 == ca / 64 {
            "same"
        } else if na / 128 == ca / 128 {
            "pair"
        } else {
            "apart"
        },
        ca as isize - na as isize
    );
    let ms: u64 = std::env::var("WINDOW_MS").map_or(100, |v| v.parse().unwrap());
    let run_for = std::time::Duration::from_millis(ms);
    let warm = Instant::now();
    while warm.elapsed() < run_for / 4 {
        iteration();
    }
    let calls0 = calls.get();
    let ru0 = rusage();
    let pu0 = rusage_of(libc::RUSAGE_SELF);
    let sched0 = schedstats();
    let woken0 = woken.load(Ordering::Relaxed);
    let mut per = Vec::new();
    let start = Instant::now();
    let mut last = start;
    let el = loop {
        iteration();
        let now = Instant::now();
        per.push((now - last).as_micros() as u64);
        last = now;
        let el = now - start;
        if el >= run_for {
            break el;
        }
    };
    let calls = calls.get() - calls0;
    let done = per.len() as u64;
    let ru1 = rusage();
    let pu1 = rusage_of(libc::RUSAGE_SELF);
    let sched1 = schedstats();
    let woken1 = woken.load(Ordering::Relaxed);
    per.sort();
    // Per thread of the process, over the window: ms on a CPU / ms runnable but waiting for
    // one / time slices (from /proc/self/task/*/schedstat), busiest first.
    let mut threads: Vec<(u64, u64, u64)> = sched1
        .iter()
        .filter_map(|(tid, b)| {
            let a = sched0
                .iter()
                .find(|(t, _)| t == tid)
                .map_or((0, 0, 0), |(_, a)| *a);
            let d = (b.0 - a.0, b.1 - a.1, b.2 - a.2);
            (d.0 > 1_000_000).then_some(d)
        })
        .collect();
    threads.sort_by_key(|d| std::cmp::Reverse(d.0));
    let threads: Vec<String> = threads
        .iter()
        .map(|d| format!("{}/{}/{}", d.0 / 1_000_000, d.1 / 1_000_000, d.2))
        .collect();
    print!(
        "{} threads at start, run/wait ms/slices {}; ",
        sched0.len(),
        threads.join(" ")
    );
    let q = |f: f64| per[((per.len() - 1) as f64 * f) as usize];
    println!(
        "{:>7.0} ns/iter {:>4} iters {:>7.1} calls/iter {:>5.1} woken/iter; us p10 {} p50 {} p90 {} p99 {} max {}; invol {} vol {}; cpu notifier {} all {} ms; proc cs vol {} invol {}",
        el.as_nanos() as f64 / done as f64,
        done,
        calls as f64 / done as f64,
        (woken1 - woken0) as f64 / done as f64,
        q(0.1),
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0),
        ru1.1 - ru0.1,
        ru1.0 - ru0.0,
        (ru1.2 - ru0.2) / 1000,
        (pu1.2 - pu0.2) / 1000,
        pu1.0 - pu0.0,
        pu1.1 - pu0.1,
    );
    rt.shutdown_background();
}

fn sem<X: S>(iters: usize, multi: bool, spawn: bool) {
    let rt = if multi {
        rt(6)
    } else {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    };
    let s = Arc::new(X::new(10));
    let t = Instant::now();
    for _ in 0..iters {
        if multi && !spawn {
            rt.block_on(async {
                for _ in 0..6 {
                    s.ar().await;
                }
            });
        } else if !multi {
            rt.block_on(async {
                tokio::join!(s.ar(), s.ar(), s.ar(), s.ar(), s.ar(), s.ar());
            });
        } else {
            rt.block_on(async {
                let hs: Vec<_> = (0..6).map(|_| tokio::spawn(s.ar())).collect();
                for h in hs {
                    h.await.unwrap();
                }
            });
        }
    }
    println!(
        "{:.0} ns/iter",
        t.elapsed().as_nanos() as f64 / iters as f64
    );
    rt.shutdown_background();
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let which = a[1].as_str();
    let subject = a[2].as_str();
    let iters: usize = a[3].parse().unwrap();
    let tasks: usize = a.get(4).map_or(50, |s| s.parse().unwrap());
    let workers: usize = a.get(5).map_or(6, |s| s.parse().unwrap());
    let p = subject == "pitlane";
    match which {
        "one" if p => notify::<pitlane_wait::Notify>(tasks, iters, false, workers),
        "one" => notify::<tokio::sync::Notify>(tasks, iters, false, workers),
        "all" if p => notify::<pitlane_wait::Notify>(tasks, iters, true, workers),
        "all" => notify::<tokio::sync::Notify>(tasks, iters, true, workers),
        // Both subjects in one process, alternating (first one first in even rounds), as the
        // suite runs them; ITERATIONS is the number of rounds.
        "seq-one" | "seq-all" => {
            let all = which == "seq-all";
            for round in 0..iters {
                for k in 0..2 {
                    if (round + k) % 2 == 0 {
                        print!("pitlane round {round}: ");
                        notify_window::<pitlane_wait::Notify>(tasks, all, workers);
                    } else {
                        print!("tokio   round {round}: ");
                        notify_window::<tokio::sync::Notify>(tasks, all, workers);
                    }
                }
            }
        }
        // The suite's loop as it is now, both subjects alternating; ITERATIONS is the number
        // of rounds.
        "sone" | "sall" => {
            let all = which == "sall";
            for round in 0..iters {
                for k in 0..2 {
                    let pad = std::env::var("PAD").is_ok_and(|v| v == "1" || v.contains('n'));
                    let pad64 = std::env::var("PAD").is_ok_and(|v| v.contains("n64"));
                    if (round + k) % 2 == 0 {
                        print!("pitlane {tasks:>3} r{round}: ");
                        if pad64 {
                            suite_window::<Pad64<pitlane_wait::Notify>>(tasks, all, workers);
                        } else if pad {
                            suite_window::<Pad<pitlane_wait::Notify>>(tasks, all, workers);
                        } else {
                            suite_window::<pitlane_wait::Notify>(tasks, all, workers);
                        }
                    } else {
                        print!("tokio   {tasks:>3} r{round}: ");
                        if pad64 {
                            suite_window::<Pad64<tokio::sync::Notify>>(tasks, all, workers);
                        } else if pad {
                            suite_window::<Pad<tokio::sync::Notify>>(tasks, all, workers);
                        } else {
                            suite_window::<tokio::sync::Notify>(tasks, all, workers);
                        }
                    }
                }
            }
        }
        // One subject only, ITERATIONS windows of the suite's loop (for perf stat / strace).
        "sone1" => {
            for round in 0..iters {
                print!("{subject} {tasks:>3} r{round}: ");
                if p {
                    suite_window::<pitlane_wait::Notify>(tasks, false, workers);
                } else {
                    suite_window::<tokio::sync::Notify>(tasks, false, workers);
                }
            }
        }
        "wone" if p => notify_window::<pitlane_wait::Notify>(tasks, false, workers),
        "wone" => notify_window::<tokio::sync::Notify>(tasks, false, workers),
        "wall" if p => notify_window::<pitlane_wait::Notify>(tasks, true, workers),
        "wall" => notify_window::<tokio::sync::Notify>(tasks, true, workers),
        "unc" if p => sem::<pitlane_wait::Semaphore>(iters, true, false),
        "unc" => sem::<tokio::sync::Semaphore>(iters, true, false),
        "single" if p => sem::<pitlane_wait::Semaphore>(iters, false, false),
        "single" => sem::<tokio::sync::Semaphore>(iters, false, false),
        "multi" if p => sem::<pitlane_wait::Semaphore>(iters, true, true),
        "multi" => sem::<tokio::sync::Semaphore>(iters, true, true),
        _ => panic!("?"),
    }
}

/// (tid, (run ns, runqueue wait ns, time slices)) of every thread of this process.
fn schedstats() -> Vec<(u64, (u64, u64, u64))> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let entry = entry.unwrap();
        let tid: u64 = entry.file_name().to_str().unwrap().parse().unwrap();
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        let v: Vec<u64> = text
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        out.push((tid, (v[0], v[1], v[2])));
    }
    out
}

fn rusage() -> (i64, i64, i64) {
    rusage_of(libc::RUSAGE_THREAD)
}

fn rusage_of(who: libc::c_int) -> (i64, i64, i64) {
    // SAFETY: plain data.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer.
    unsafe { libc::getrusage(who, &mut r) };
    (
        r.ru_nvcsw,
        r.ru_nivcsw,
        (r.ru_utime.tv_sec * 1_000_000
            + r.ru_utime.tv_usec
            + r.ru_stime.tv_sec * 1_000_000
            + r.ru_stime.tv_usec) as i64,
    )
}
