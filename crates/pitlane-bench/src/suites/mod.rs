//! The benchmark suites, one module each.

use crate::harness::{Bench, BenchError};

pub mod bag;
pub mod lincheck;
pub mod locks;
pub mod spsc;

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
    /// Runs every workload through `bench` (whose suite section is already begun).
    fn run(&self, bench: &mut Bench) -> Result<(), BenchError>;
}

/// Every suite, in report order.
pub fn all() -> Vec<Box<dyn Suite>> {
    vec![
        Box::new(locks::Locks),
        Box::new(spsc::Spsc),
        Box::new(bag::Bag),
        Box::new(lincheck::Lincheck),
    ]
}
