//! The harness every suite shares: warm-up, interleaved repetitions, correctness checks,
//! records and ratios.
//!
//! A suite describes *cases*: one workload at one set of parameters, with the metrics it
//! produces and the subjects (ours and peers) that run it. [`Bench::measure`] runs a case:
//!
//! 1. a warm-up round — every subject once, results discarded (but still checked);
//! 2. `reps` rounds, every subject once per round, the order rotated each round
//!    (A B C, B C A, C A B, …) so that no subject always runs first or last while the
//!    machine drifts between its fast and slow states;
//! 3. per subject and metric, the median, min and max over the rounds become a [`Record`].
//!
//! A subject's run returns one value per metric, or an error when the run produced a wrong
//! answer (a value lost, duplicated or out of order); an error aborts the whole benchmark, so a
//! wrong structure can never print a fast number.
//!
//! ```
//! use pitlane_bench::harness::{Bench, Better, Case, Metric, RunConfig, Subject, params};
//!
//! let mut bench = Bench::new(RunConfig::quick());
//! bench.begin_suite("demo");
//! let metric = Metric::new("ns_per_item", "ns", Better::Lower);
//! let case = Case::new("sum", params! {"items" => 1000}, vec![metric])
//!     .subject(Subject::ours("pitlane::demo", || Ok(vec![1.0])))
//!     .subject(Subject::peer("std", || Ok(vec![2.0])));
//! bench.measure(case).unwrap();
//! let report = bench.finish();
//! assert_eq!(report.ratios[0].ratio, 0.5);
//! assert!(report.ratios[0].ours_better);
//! ```

use std::fmt;
use std::io::IsTerminal;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::env::{Machine, MachineState};

/// Which direction of a metric is good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Times and latencies.
    Lower,
    /// Throughputs.
    Higher,
}

impl Better {
    /// `"lower"` or `"higher"`, as in results.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Better::Lower => "lower",
            Better::Higher => "higher",
        }
    }

    /// Whether `ratio` (ours / peer) favours ours.
    pub fn ours_better(self, ratio: f64) -> bool {
        match self {
            Better::Lower => ratio < 1.0,
            Better::Higher => ratio > 1.0,
        }
    }
}

/// A quantity a case reports, with a stable `snake_case` name.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// Stable identifier, e.g. `ns_per_item`.
    pub name: &'static str,
    /// Unit, e.g. `ns`, `pairs/s`.
    pub unit: &'static str,
    /// Which direction is good.
    pub better: Better,
    /// Whether ours-versus-peer ratios are computed for it (not for a figure that explains
    /// another, such as a backlog that is often zero).
    pub ratios: bool,
}

impl Metric {
    /// A metric, with ratios.
    pub const fn new(name: &'static str, unit: &'static str, better: Better) -> Self {
        Self {
            name,
            unit,
            better,
            ratios: true,
        }
    }

    /// The same metric, recorded (and reported) for every subject but never put in a ratio.
    ///
    /// ```
    /// use pitlane_bench::harness::{Better, Metric};
    ///
    /// let backlog = Metric::new("backlog_items", "items", Better::Lower).without_ratios();
    /// assert!(!backlog.ratios);
    /// ```
    pub const fn without_ratios(self) -> Self {
        Self {
            ratios: false,
            ..self
        }
    }
}

/// Parameters of a case, in the order written (keys per BENCHMARKS.md: `threads`,
/// `processes`, `capacity`, `queues`, `tasks`, `batch`, `size`, `items`).
pub type Params = Map<String, Value>;

/// Builds [`Params`]: `params! {"threads" => 2, "items" => 1000}`.
#[macro_export]
macro_rules! params {
    ($($key:expr => $value:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut map = $crate::harness::Params::new();
        $( map.insert(::std::string::String::from($key), ::serde_json::json!($value)); )*
        map
    }};
}
pub use crate::params;

/// What a subject's run produced: one value per metric of its case, in the case's order.
pub type RunResult = Result<Vec<f64>, String>;

/// One implementation under test.
pub struct Subject<'a> {
    name: String,
    peer: bool,
    run: Box<dyn FnMut() -> RunResult + 'a>,
}

impl<'a> Subject<'a> {
    /// One of pitlane's own implementations, named by its path (`pitlane::spsc`).
    pub fn ours(name: impl Into<String>, run: impl FnMut() -> RunResult + 'a) -> Self {
        Self {
            name: name.into(),
            peer: false,
            run: Box::new(run),
        }
    }

    /// A peer from another crate, named by the path a user types (`rtrb`, `std::sync::Mutex`).
    pub fn peer(name: impl Into<String>, run: impl FnMut() -> RunResult + 'a) -> Self {
        Self {
            name: name.into(),
            peer: true,
            run: Box::new(run),
        }
    }

    /// The subject's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A workload at one set of parameters, with its metrics and subjects.
pub struct Case<'a> {
    workload: &'static str,
    params: Params,
    metrics: Vec<Metric>,
    subjects: Vec<Subject<'a>>,
}

impl<'a> Case<'a> {
    /// A case with no subjects yet.
    pub fn new(workload: &'static str, params: Params, metrics: Vec<Metric>) -> Self {
        Self {
            workload,
            params,
            metrics,
            subjects: Vec::new(),
        }
    }

    /// Adds a subject.
    pub fn subject(mut self, subject: Subject<'a>) -> Self {
        self.subjects.push(subject);
        self
    }

    /// Adds a subject in place.
    pub fn push(&mut self, subject: Subject<'a>) {
        self.subjects.push(subject);
    }
}

/// How large a run is.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// `--quick`: fewer repetitions and shorter runs; every workload and subject still runs.
    pub quick: bool,
    /// `--threads`: overrides the thread counts of workloads that sweep them.
    pub threads: Option<Vec<usize>>,
    /// `--subjects`: when set, only subjects whose name contains one of these strings
    /// (ignoring case) are measured; the others are left out of the report.
    pub subjects: Option<Vec<String>>,
}

impl RunConfig {
    /// The full-size run.
    pub fn full() -> Self {
        Self {
            quick: false,
            threads: None,
            subjects: None,
        }
    }

    /// The `--quick` run.
    pub fn quick() -> Self {
        Self {
            quick: true,
            threads: None,
            subjects: None,
        }
    }

    /// Measured repetitions per case (after the warm-up): 3 quick, 7 full.
    pub fn reps(&self) -> usize {
        if self.quick { 3 } else { 7 }
    }

    /// The thread counts to sweep: `--threads` if given, else the suite's default.
    pub fn threads(&self, default: &[usize]) -> Vec<usize> {
        self.threads.clone().unwrap_or_else(|| default.to_vec())
    }

    /// `quick` when `--quick`, else `full`: for sizes and durations.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick { quick } else { full }
    }

    /// Whether the subject `name` is to be measured (see [`subjects`](Self::subjects)).
    pub fn wants(&self, name: &str) -> bool {
        match &self.subjects {
            None => true,
            Some(patterns) => {
                let name = name.to_lowercase();
                patterns.iter().any(|p| name.contains(&p.to_lowercase()))
            }
        }
    }

    /// A run duration: `full_ms` milliseconds, a fifth of that when quick.
    pub fn duration(&self, full_ms: u64) -> Duration {
        Duration::from_millis(if self.quick { full_ms / 5 } else { full_ms })
    }
}

/// Why a benchmark stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum BenchError {
    /// A subject's run produced a wrong answer.
    Incorrect {
        /// Suite, workload, params and subject.
        at: String,
        /// What was wrong.
        why: String,
    },
    /// A subject returned the wrong number of metric values (a bug in the suite).
    Shape(String),
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Incorrect { at, why } => write!(f, "wrong result in {at}: {why}"),
            BenchError::Shape(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for BenchError {}

/// One measured point: a subject's metric at one case, over the repetitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Suite name.
    pub suite: String,
    /// Workload name.
    pub workload: String,
    /// Parameters.
    pub params: Params,
    /// Subject name.
    pub subject: String,
    /// Whether the subject is a peer (not pitlane's).
    pub peer: bool,
    /// Metric.
    pub metric: Metric,
    /// Median over the repetitions.
    pub median: f64,
    /// Smallest repetition.
    pub min: f64,
    /// Largest repetition.
    pub max: f64,
    /// Number of repetitions.
    pub samples: usize,
}

/// Ours divided by a peer's median, for one suite, workload, params and metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    /// Suite name.
    pub suite: String,
    /// Workload name.
    pub workload: String,
    /// Parameters.
    pub params: Params,
    /// Metric.
    pub metric: Metric,
    /// Our subject.
    pub ours: String,
    /// The peer.
    pub peer: String,
    /// `ours.median / peer.median`.
    pub ratio: f64,
    /// The ratio read in the metric's direction.
    pub ours_better: bool,
}

/// Free-text remarks a suite attaches to its section of the report (how latency was timed,
/// which thread counts oversubscribe the machine).
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    /// Suite name.
    pub suite: String,
    /// The remark (markdown).
    pub text: String,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct Report {
    /// The machine and build.
    pub machine: Machine,
    /// Whether the run was `--quick`.
    pub quick: bool,
    /// Suites in the order run.
    pub suites: Vec<String>,
    /// Every measured point.
    pub records: Vec<Record>,
    /// Every ours-versus-peer ratio.
    pub ratios: Vec<Ratio>,
    /// Suite remarks.
    pub notes: Vec<Note>,
    /// How the machine behaved, probed at the moments named (see [`MachineState`]); not part
    /// of `results.json`, whose schema is fixed.
    pub machine_states: Vec<(String, MachineState)>,
}

impl Report {
    /// results.json, exactly in BENCHMARKS.md's schema.
    pub fn to_json(&self) -> Value {
        let records: Vec<Value> = self
            .records
            .iter()
            .map(|r| {
                json!({
                    "suite": r.suite,
                    "workload": r.workload,
                    "params": r.params,
                    "subject": r.subject,
                    "peer": r.peer,
                    "metric": r.metric.name,
                    "unit": r.metric.unit,
                    "better": r.metric.better.as_str(),
                    "median": r.median,
                    "min": r.min,
                    "max": r.max,
                    "samples": r.samples,
                })
            })
            .collect();
        let ratios: Vec<Value> = self
            .ratios
            .iter()
            .map(|r| {
                json!({
                    "suite": r.suite,
                    "workload": r.workload,
                    "params": r.params,
                    "metric": r.metric.name,
                    "ours": r.ours,
                    "peer": r.peer,
                    "ratio": r.ratio,
                    "ours_better": r.ours_better,
                })
            })
            .collect();
        json!({
            "pitlane_version": env!("CARGO_PKG_VERSION"),
            "git_commit": self.machine.git_commit,
            "machine": {
                "cpu": self.machine.cpu,
                "cores": self.machine.cores,
                "os": self.machine.os,
                "rustc": self.machine.rustc,
            },
            "records": records,
            "ratios": ratios,
        })
    }
}

/// The median of `samples` (mean of the middle two for an even count). `None` when empty or
/// when a sample is NaN.
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// Summarises one subject's samples of one metric.
pub fn summarize(samples: &[f64]) -> Option<(f64, f64, f64)> {
    let median = median(samples)?;
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((median, min, max))
}

/// Every ratio of an `ours` record to a `peer` record with the same suite, workload, params and
/// metric.
pub fn ratios(records: &[Record]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for ours in records.iter().filter(|r| !r.peer && r.metric.ratios) {
        for peer in records.iter().filter(|r| {
            r.peer
                && r.suite == ours.suite
                && r.workload == ours.workload
                && r.params == ours.params
                && r.metric.name == ours.metric.name
        }) {
            if peer.median == 0.0 {
                continue;
            }
            let ratio = ours.median / peer.median;
            out.push(Ratio {
                suite: ours.suite.clone(),
                workload: ours.workload.clone(),
                params: ours.params.clone(),
                metric: ours.metric.clone(),
                ours: ours.subject.clone(),
                peer: peer.subject.clone(),
                ratio,
                ours_better: ours.metric.better.ours_better(ratio),
            });
        }
    }
    out
}

/// Runs cases and collects their records.
pub struct Bench {
    config: RunConfig,
    suite: String,
    suites: Vec<String>,
    records: Vec<Record>,
    notes: Vec<Note>,
    machine_states: Vec<(String, MachineState)>,
    progress: indicatif::ProgressBar,
}

impl Bench {
    /// A bench with the given size. A spinner goes to stderr when it is a terminal.
    pub fn new(config: RunConfig) -> Self {
        let progress = if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        } else {
            indicatif::ProgressBar::hidden()
        };
        Self {
            config,
            suite: String::new(),
            suites: Vec::new(),
            records: Vec::new(),
            notes: Vec::new(),
            machine_states: Vec::new(),
            progress,
        }
    }

    /// The run's size.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// Starts the section of suite `name`; later cases and notes belong to it.
    pub fn begin_suite(&mut self, name: &str) {
        self.suite = name.to_string();
        self.suites.push(name.to_string());
    }

    /// Attaches a remark to the current suite's section of the report.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(Note {
            suite: self.suite.clone(),
            text: text.into(),
        });
    }

    /// Records how the machine behaved at moment `when` (e.g. "before", "after").
    pub fn machine_state(&mut self, when: impl Into<String>, state: MachineState) {
        self.machine_states.push((when.into(), state));
    }

    /// Runs `case`: a checked warm-up round, then the configured number of interleaved rounds.
    pub fn measure(&mut self, mut case: Case<'_>) -> Result<(), BenchError> {
        case.subjects.retain(|s| self.config.wants(&s.name));
        if case.subjects.is_empty() {
            return Ok(());
        }
        let reps = self.config.reps();
        let n = case.subjects.len();
        let label = format!(
            "{}/{} {}",
            self.suite,
            case.workload,
            fmt_params(&case.params)
        );
        let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); case.metrics.len()]; n];
        for round in 0..=reps {
            for k in 0..n {
                let i = (k + round) % n;
                let subject = &mut case.subjects[i];
                let phase = if round == 0 {
                    "warm-up".to_string()
                } else {
                    format!("round {round}/{reps}")
                };
                self.progress
                    .set_message(format!("{label} {} ({phase})", subject.name));
                let values = (subject.run)().map_err(|why| BenchError::Incorrect {
                    at: format!("{label} {}", subject.name),
                    why,
                })?;
                if values.len() != case.metrics.len() {
                    return Err(BenchError::Shape(format!(
                        "{label} {}: {} values for {} metrics",
                        subject.name,
                        values.len(),
                        case.metrics.len()
                    )));
                }
                if round > 0 {
                    for (m, v) in values.into_iter().enumerate() {
                        samples[i][m].push(v);
                    }
                }
            }
        }
        for (subject, per_metric) in case.subjects.iter().zip(samples) {
            for (metric, values) in case.metrics.iter().zip(per_metric) {
                let Some((median, min, max)) = summarize(&values) else {
                    return Err(BenchError::Shape(format!(
                        "{label} {}: no usable samples of {}",
                        subject.name, metric.name
                    )));
                };
                self.records.push(Record {
                    suite: self.suite.clone(),
                    workload: case.workload.to_string(),
                    params: case.params.clone(),
                    subject: subject.name.clone(),
                    peer: subject.peer,
                    metric: metric.clone(),
                    median,
                    min,
                    max,
                    samples: values.len(),
                });
            }
        }
        Ok(())
    }

    /// Ends the run: computes ratios and captures the machine.
    pub fn finish(self) -> Report {
        self.progress.finish_and_clear();
        let ratios = ratios(&self.records);
        Report {
            machine: Machine::capture(),
            quick: self.config.quick,
            suites: self.suites,
            records: self.records,
            ratios,
            notes: self.notes,
            machine_states: self.machine_states,
        }
    }
}

/// `threads=2, items=1000`.
pub fn fmt_params(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
        assert_eq!(summarize(&[5.0, 1.0, 9.0, 2.0, 4.0]), Some((4.0, 1.0, 9.0)));
    }

    /// A subject that returns the given samples in turn (first one for the warm-up).
    fn scripted<'a>(name: &str, peer: bool, values: Vec<f64>) -> Subject<'a> {
        let mut it = values.into_iter();
        let run = move || Ok(vec![it.next().expect("enough scripted samples")]);
        if peer {
            Subject::peer(name, run)
        } else {
            Subject::ours(name, run)
        }
    }

    #[test]
    fn a_metric_without_ratios_is_recorded_but_never_compared() {
        let mut bench = Bench::new(RunConfig::quick());
        bench.begin_suite("synthetic");
        let metrics = vec![
            Metric::new("ops_per_s", "ops/s", Better::Higher),
            Metric::new("backlog_items", "items", Better::Lower).without_ratios(),
        ];
        let two = |a: f64, b: f64| move || Ok(vec![a, b]);
        let case = Case::new("w", params! {"threads" => 2}, metrics)
            .subject(Subject::ours("ours", two(10.0, 5.0)))
            .subject(Subject::peer("peer", two(5.0, 50.0)));
        bench.measure(case).unwrap();
        let report = bench.finish();
        let backlog: Vec<_> = report
            .records
            .iter()
            .filter(|r| r.metric.name == "backlog_items")
            .map(|r| (r.subject.as_str(), r.median))
            .collect();
        assert_eq!(backlog, [("ours", 5.0), ("peer", 50.0)]);
        let compared: Vec<_> = report.ratios.iter().map(|r| r.metric.name).collect();
        assert_eq!(compared, ["ops_per_s"]);
    }

    #[test]
    fn measure_discards_warm_up_and_computes_ratios() {
        let mut bench = Bench::new(RunConfig::quick()); // 3 rounds + warm-up
        bench.begin_suite("synthetic");
        let lower = Metric::new("ns_per_item", "ns", Better::Lower);
        let case = Case::new("w", params! {"threads" => 2}, vec![lower])
            // Warm-up values (1000) must not reach the median or the min/max.
            .subject(scripted("ours", false, vec![1000.0, 3.0, 1.0, 2.0]))
            .subject(scripted("peerA", true, vec![1000.0, 4.0, 8.0, 6.0]))
            .subject(scripted("peerB", true, vec![1000.0, 1.0, 1.0, 1.0]));
        bench.measure(case).unwrap();
        let higher = Metric::new("ops_per_s", "ops/s", Better::Higher);
        let case = Case::new("w", params! {"threads" => 2}, vec![higher])
            .subject(scripted("ours", false, vec![0.0, 10.0, 30.0, 20.0]))
            .subject(scripted("peerA", true, vec![0.0, 5.0, 5.0, 5.0]));
        bench.measure(case).unwrap();
        let report = bench.finish();

        let ours = &report.records[0];
        assert_eq!(
            (ours.median, ours.min, ours.max, ours.samples),
            (2.0, 1.0, 3.0, 3)
        );
        assert_eq!(report.records[1].median, 6.0);
        assert_eq!(report.ratios.len(), 3);
        let by = |peer: &str, metric: &str| {
            report
                .ratios
                .iter()
                .find(|r| r.peer == peer && r.metric.name == metric)
                .unwrap()
                .clone()
        };
        let a = by("peerA", "ns_per_item");
        assert!((a.ratio - 2.0 / 6.0).abs() < 1e-12);
        assert!(a.ours_better);
        let b = by("peerB", "ns_per_item");
        assert_eq!(b.ratio, 2.0);
        assert!(!b.ours_better);
        let t = by("peerA", "ops_per_s");
        assert_eq!(t.ratio, 4.0);
        assert!(t.ours_better);

        let json = report.to_json();
        assert_eq!(json["records"][0]["better"], "lower");
        assert_eq!(json["records"][0]["params"]["threads"], 2);
        assert_eq!(json["ratios"][0]["ours"], "ours");
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "pitlane_version",
                "git_commit",
                "machine",
                "records",
                "ratios"
            ]
        );
    }

    #[test]
    fn rounds_rotate_the_subject_order() {
        use std::cell::RefCell;
        let order = RefCell::new(Vec::new());
        let mut bench = Bench::new(RunConfig::quick());
        bench.begin_suite("s");
        let m = Metric::new("x", "x", Better::Lower);
        let case = Case::new("w", Params::new(), vec![m])
            .subject(Subject::ours("a", || {
                order.borrow_mut().push('a');
                Ok(vec![1.0])
            }))
            .subject(Subject::peer("b", || {
                order.borrow_mut().push('b');
                Ok(vec![1.0])
            }));
        bench.measure(case).unwrap();
        assert_eq!(order.into_inner(), ['a', 'b', 'b', 'a', 'a', 'b', 'b', 'a']);
    }

    #[test]
    fn only_the_chosen_subjects_run() {
        use std::cell::Cell;
        let ran_b = Cell::new(false);
        let mut bench = Bench::new(RunConfig {
            subjects: Some(vec!["SEGq".into()]),
            ..RunConfig::quick()
        });
        bench.begin_suite("s");
        let m = Metric::new("x", "x", Better::Lower);
        let case = Case::new("w", Params::new(), vec![m.clone()])
            .subject(Subject::ours("pitlane::x", || Ok(vec![1.0])))
            .subject(Subject::peer("crossbeam::SegQueue", || Ok(vec![2.0])))
            .subject(Subject::peer("other", || {
                ran_b.set(true);
                Ok(vec![3.0])
            }));
        bench.measure(case).unwrap();
        // A case none of whose subjects is chosen is skipped entirely.
        let case = Case::new("v", Params::new(), vec![m])
            .subject(Subject::ours("a", || Err("must not run".into())));
        bench.measure(case).unwrap();
        let report = bench.finish();
        assert!(!ran_b.get());
        let names: Vec<&str> = report.records.iter().map(|r| r.subject.as_str()).collect();
        assert_eq!(names, ["crossbeam::SegQueue"]);
        assert!(report.ratios.is_empty());
    }

    #[test]
    fn a_wrong_answer_aborts() {
        let mut bench = Bench::new(RunConfig::quick());
        bench.begin_suite("s");
        let m = Metric::new("x", "x", Better::Lower);
        let case = Case::new("w", Params::new(), vec![m])
            .subject(Subject::ours("a", || Err("lost value 7".into())));
        let err = bench.measure(case).unwrap_err();
        assert!(err.to_string().contains("lost value 7"), "{err}");
    }
}
