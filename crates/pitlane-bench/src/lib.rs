//! Benchmark suites that put each pitlane structure beside its peers, and the report.
//!
//! - [`runner`]: cases, subjects, the warm-up and interleaved rounds, the correctness checks.
//! - [`stats`]: medians, and ratios paired by round.
//! - [`results`]: what a run produced (records, paired ratios, goals and their verdicts, how
//!   busy the machine was) and its `results.json`.
//! - [`report`]: `report.md` and a self-contained `report.html` with inline SVG charts.
//! - [`suites`]: one folder per suite (`locks`, `spsc`, `bag`, `lincheck`), each declaring
//!   its goals; [`suites::all`] lists them.
//! - [`env`](mod@env): the machine and build a run happened on; [`busy`]: how busy the
//!   machine was with other work while each workload ran.
//! - [`start`]: a workload's threads started together, or an error if the OS refuses one.
//!
//! The `pitlane bench` command (crate `pitlane-cli`) is the front end:
//! `pitlane bench [SUITE…] [--quick] [--rounds N] [--goals] [--threads LIST] [--subjects LIST]
//! [--json FILE] [--out DIR]`.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod busy;
pub mod env;
pub mod report;
pub mod results;
pub mod runner;
pub mod start;
pub mod stats;
pub mod suites;

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is the unit tests' global
// allocator.
#[cfg(all(test, pitlane_alloc_global))]
extern crate pitlane_alloc;
