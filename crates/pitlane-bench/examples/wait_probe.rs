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
//! # unused), unc, single, multi (semaphore)
//! target/release/examples/wait_probe one pitlane 600 50
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
}

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

fn rusage() -> (i64, i64, i64) {
    // SAFETY: plain data.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) };
    (
        r.ru_nvcsw,
        r.ru_nivcsw,
        (r.ru_utime.tv_sec * 1_000_000
            + r.ru_utime.tv_usec
            + r.ru_stime.tv_sec * 1_000_000
            + r.ru_stime.tv_usec) as i64,
    )
}
