//! Benchmark suites that put each pitlane structure beside its peers, and the report.
//!
//! - [`harness`]: cases, subjects, warm-up and interleaved repetitions, records and ratios in
//!   the `results.json` schema of the design's BENCHMARKS.md.
//! - [`suites`]: one module per suite (`locks`, …); [`suites::all`] lists them.
//! - [`report`]: `report.md`, a self-contained `report.html` with inline SVG charts, and
//!   `results.json`.
//! - [`env`](mod@env): the machine and build a run happened on.
//! - [`busy`]: how busy the machine was with other work while each workload ran.
//!
//! The `pitlane bench` command (crate `pitlane-cli`) is the front end:
//! `pitlane bench [SUITE…] [--quick] [--threads LIST] [--json FILE] [--out DIR]`.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod busy;
pub mod env;
pub mod harness;
pub mod report;
pub mod suites;
