//! The benchmark suites, one module each.

use std::time::Instant;

use hdrhistogram::Histogram;

use crate::results::Goal;
use crate::runner::{Bench, BenchError};

pub mod alloc;
pub mod bag;
pub mod lincheck;
pub mod locks;
pub mod malloc;
mod pairs;
pub mod slab;
pub mod spsc;
pub mod wait;

/// A workload a suite runs, for `pitlane bench --list`.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// Stable `snake_case` identifier.
    pub name: &'static str,
    /// One line on what it measures.
    pub about: &'static str,
}

/// A benchmark suite: a set of workloads run on ours and on the peers.
pub trait Suite {
    /// Stable name, as typed on the command line.
    fn name(&self) -> &'static str;
    /// One line on what the suite compares.
    fn about(&self) -> &'static str;
    /// The workloads, for `--list`.
    fn workloads(&self) -> &'static [Workload];
    /// The goals the project set this suite (ours against a peer, with a target), which the
    /// report opens with; none by default.
    fn goals(&self) -> Vec<Goal> {
        Vec::new()
    }
    /// Runs every workload through `bench` (whose suite section is already begun).
    fn run(&self, bench: &mut Bench) -> Result<(), BenchError>;
}

/// Runs `suite` through `bench`: begins its section, declares its goals, runs its workloads.
///
/// ```
/// use pitlane_bench::runner::{Bench, RunConfig};
/// use pitlane_bench::suites::{self, Suite};
///
/// let suites = suites::all();
/// let locks: &dyn Suite = suites.iter().find(|s| s.name() == "locks").unwrap().as_ref();
/// let mut bench = Bench::new(RunConfig { threads: Some(vec![1]), rounds: Some(1), ..RunConfig::quick() });
/// suites::run(&mut bench, locks).unwrap();
/// assert!(!bench.finish().records.is_empty());
/// ```
pub fn run(bench: &mut Bench, suite: &dyn Suite) -> Result<(), BenchError> {
    bench.begin_suite(suite.name());
    for goal in suite.goals() {
        bench.goal(goal);
    }
    suite.run(bench)
}

/// Every suite, in report order.
pub fn all() -> Vec<Box<dyn Suite>> {
    vec![
        Box::new(locks::Locks),
        Box::new(slab::SlabSuite),
        Box::new(spsc::Spsc),
        Box::new(bag::Bag),
        Box::new(wait::Wait),
        Box::new(alloc::AllocSuite),
        Box::new(malloc::MallocSuite),
        Box::new(lincheck::Lincheck),
    ]
}

/// A histogram of nanoseconds, from 1 ns to a minute, to three significant digits.
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// The median cost of timing an empty interval with `Instant`.
pub(crate) fn timer_overhead_ns() -> f64 {
    let samples: Vec<f64> = (0..10_001)
        .map(|_| {
            let t0 = Instant::now();
            let t1 = Instant::now();
            (t1 - t0).as_nanos() as f64
        })
        .collect();
    crate::stats::median(&samples).unwrap_or(0.0)
}
