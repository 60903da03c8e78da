//! Suite `lincheck`: how fast `pitlane-lincheck` decides queue histories.
//!
//! The histories are FIFO queue histories of 4 threads x 8 operations and 3 threads x 20
//! operations (pushes and pops, half and half), made by
//! [`pitlane_lincheck::synthetic::queue_history`]: a sequential queue driven by a seeded
//! simulated scheduler, so the same seeds give the same histories on every machine and the
//! timing covers checking only (all histories are built before the clock starts).
//!
//! Workloads:
//! - `linearizable`: the histories as made (every one linearizable by construction);
//! - `violating`: the same histories with one pop of a value that was certainly inside
//!   answering `Empty` ([`pitlane_lincheck::synthetic::lose_one_push`]; not linearizable).
//!
//! Subjects, all of this crate (no other Rust crate checks linearizability):
//! - `pitlane_lincheck::Checker`: Wing & Gong's search with Lowe's memo cache;
//! - `pitlane_lincheck::queue_patterns`: the bad-pattern check for queues with distinct
//!   values, no search (a proof of linearizability only for histories without `Empty` pops);
//! - the baseline, `Checker` with the memo cache off (Wing & Gong's search without Lowe's
//!   cache, still with the FIFO spec's renaming and implied orders), marked as the peer so
//!   that the report's ratio shows what the cache and the pattern check buy.
//!
//! Correctness inside every run: the checker must answer `Linearizable` for every history of
//! `linearizable` and `NotLinearizable` for every one of `violating`; the pattern check must
//! find no pattern in the first and a pattern in every one of the second; anything else
//! aborts the benchmark.

use std::time::{Duration, Instant};

use pitlane_lincheck::queue_patterns::{QueueCheck, check_queue};
use pitlane_lincheck::specs::{ContainerOp, ContainerRet, QueueSpec};
use pitlane_lincheck::synthetic::{lose_one_push, queue_history};
use pitlane_lincheck::{Checker, History, Shape, Verdict};

use super::{Suite, Workload};
use crate::results::{Better, Goal, Metric, params};
use crate::runner::{Bench, BenchError, Case, Subject};

/// The suite.
pub struct Lincheck;

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "linearizable",
        about: "check linearizable queue histories of 4 threads x 8 ops and 3 x 20 (histories/s, wall and CPU)",
    },
    Workload {
        name: "violating",
        about: "refute the same histories with one pop made to miss a value (histories/s, wall and CPU)",
    },
];

type QueueHistory = History<ContainerOp<u64>, ContainerRet<u64>>;

/// What a linearizable history must get and what a violating one must get.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Linearizable,
    Violation,
}

impl Suite for Lincheck {
    fn name(&self) -> &'static str {
        "lincheck"
    }

    fn about(&self) -> &'static str {
        "linearizability checking of queue histories: memoized search, pattern check, search without memo"
    }

    fn workloads(&self) -> &'static [Workload] {
        WORKLOADS
    }

    /// Issue 3: at least 100,000 checked linearizable 4 x 8 histories per second on one core.
    /// No other crate checks linearizability, so the goal is a figure, not a ratio.
    fn goals(&self) -> Vec<Goal> {
        vec![
            Goal::figure(
                "linearizable",
                params! {"history_threads" => 4, "ops_per_thread" => 8},
                &Metric::new("histories_per_cpu_s", "histories/CPU-s", Better::Higher),
                "pitlane_lincheck::Checker",
                100_000.0,
            )
            .from_issue(3),
        ]
    }

    fn run(&self, bench: &mut Bench) -> Result<(), BenchError> {
        let quick = bench.config().quick;
        // (threads, ops per thread, histories): the plain search takes milliseconds on some
        // 3 x 20 histories, hence fewer of them. Even `--quick` checks enough histories that
        // one measurement of the memoized search lasts some 10 ms: with a few milliseconds,
        // medians moved by a third from run to run on a shared machine.
        let sizes: [(usize, usize, u64); 2] = if quick {
            [(4, 8, 1000), (3, 20, 200)]
        } else {
            [(4, 8, 2000), (3, 20, 300)]
        };
        bench.note(
            "Histories are made by `pitlane_lincheck::synthetic::queue_history` (seeds 0, 1, 2, …) \
             before timing; each run checks all of them on one thread. `history_threads` and \
             `ops_per_thread` give the size of each history (simulated threads, not threads of \
             the benchmark), `batch` the number of histories. The peer is not another crate (none \
             checks linearizability): it is the same search with Lowe's memo cache turned off, \
             the baseline the cache improves on. Both searches use the FIFO spec's aids (values \
             never popped share one name; orders implied by FIFO are imposed). \
             `histories_per_s` divides by wall-clock time; `histories_per_cpu_s` by the CPU time \
             of the checking thread (`CLOCK_THREAD_CPUTIME_ID`), which is what one core achieves \
             when the machine is shared.",
        );
        for (expect, workload) in [
            (Expect::Linearizable, "linearizable"),
            (Expect::Violation, "violating"),
        ] {
            for &(threads, ops, count) in &sizes {
                let shape = Shape {
                    threads,
                    ops_per_thread: ops,
                };
                let histories = build(shape, count, expect);
                let with_empty = histories
                    .iter()
                    .filter(|h| {
                        h.operations()
                            .iter()
                            .any(|o| o.result == ContainerRet::Empty)
                    })
                    .count();
                if expect == Expect::Linearizable {
                    bench.note(format!(
                        "{threads} x {ops}: {} of {} linearizable histories have an `Empty` pop, \
                         for which the pattern check finds no pattern but proves nothing.",
                        with_empty,
                        histories.len()
                    ));
                }
                let metrics = vec![
                    Metric::new("histories_per_s", "histories/s", Better::Higher),
                    Metric::new("histories_per_cpu_s", "histories/CPU-s", Better::Higher),
                ];
                let histories = &histories;
                let case = Case::new(
                    workload,
                    params! {
                        "history_threads" => threads,
                        "ops_per_thread" => ops,
                        "batch" => histories.len()
                    },
                    metrics,
                )
                .subject(Subject::ours("pitlane_lincheck::Checker", move || {
                    run_checker(Checker::new(), histories, expect)
                }))
                .subject(Subject::ours(
                    "pitlane_lincheck::queue_patterns",
                    move || run_patterns(histories, expect),
                ))
                .subject(Subject::peer(
                    "pitlane_lincheck::Checker without memo (baseline)",
                    move || run_checker(Checker::new().memoize(false), histories, expect),
                ));
                bench.measure(case)?;
            }
        }
        Ok(())
    }
}

/// `count` histories of `shape`: linearizable ones from seeds 0, 1, …, or (for violations)
/// the first `count` of those that [`lose_one_push`] can break.
fn build(shape: Shape, count: u64, expect: Expect) -> Vec<QueueHistory> {
    match expect {
        Expect::Linearizable => (0..count).map(|seed| queue_history(shape, seed)).collect(),
        Expect::Violation => (0..)
            .filter_map(|seed| lose_one_push(&queue_history(shape, seed)))
            .take(count as usize)
            .collect(),
    }
}

/// Wall-clock and CPU-time throughput of checking `count` histories since `start`.
fn rates(count: usize, start: (Instant, Duration)) -> Vec<f64> {
    let wall = start.0.elapsed().as_secs_f64();
    let cpu = (thread_cpu_time() - start.1).as_secs_f64();
    vec![count as f64 / wall, count as f64 / cpu]
}

/// The CPU time this thread has used: on a shared machine, the time it really ran.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec, and CLOCK_THREAD_CPUTIME_ID is a clock
    // every Linux provides; the call writes only into `now`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn run_checker(
    checker: Checker,
    histories: &[QueueHistory],
    expect: Expect,
) -> Result<Vec<f64>, String> {
    let spec = QueueSpec::new();
    let start = (Instant::now(), thread_cpu_time());
    for (i, history) in histories.iter().enumerate() {
        let verdict = checker.check(&spec, history);
        let right = match (expect, &verdict) {
            (Expect::Linearizable, Verdict::Linearizable(order)) => order.len() == history.len(),
            (Expect::Violation, Verdict::NotLinearizable(_)) => true,
            _ => false,
        };
        if !right {
            return Err(format!("history {i}: wrong verdict {verdict:?}"));
        }
    }
    Ok(rates(histories.len(), start))
}

fn run_patterns(histories: &[QueueHistory], expect: Expect) -> Result<Vec<f64>, String> {
    let start = (Instant::now(), thread_cpu_time());
    for (i, history) in histories.iter().enumerate() {
        let found = check_queue(history);
        let right = match (&found, expect) {
            (QueueCheck::NoPattern { .. }, Expect::Linearizable) => true,
            // The value made to vanish was inside for the whole of the pop that missed it:
            // the emptiness pattern (or an order pattern it causes) always shows.
            (QueueCheck::Violation(_), Expect::Violation) => true,
            _ => false,
        };
        if !right {
            return Err(format!("history {i}: {found:?}"));
        }
    }
    Ok(rates(histories.len(), start))
}
