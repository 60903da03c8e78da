//! The runner every suite shares: warm-up, interleaved rounds, correctness checks, and the
//! records, paired ratios and goal verdicts of a run.
//!
//! A suite describes *cases*: one workload at one set of parameters, with the metrics it
//! produces and the subjects (ours and peers) that run it. [`Bench::measure`] runs a case:
//!
//! 1. a warm-up round — every subject once, results discarded (but still checked);
//! 2. `reps` rounds, every subject once per round, the order rotated each round
//!    (A B C, B C A, C A B, …) so that no subject always runs first or last while the
//!    machine drifts between its fast and slow states;
//! 3. per subject and metric, the median, min and max over the rounds become a [`Record`];
//! 4. per pair of ours and a peer, the ratio of each round (ours ÷ peer of the same round)
//!    becomes a [`Ratio`](crate::results::Ratio) ([`crate::stats::paired`]): the median of
//!    those per-round ratios, their min and max, and how many rounds ours won. A machine
//!    that drifts between rounds moves both sides of a round together, so the paired ratio
//!    cancels the drift where a ratio of two medians would not.
//!
//! A suite declares [`Goal`]s (ours against a peer, with a target ratio); [`Bench::finish`]
//! judges each: met when the median ratio meets the target and at least two thirds of the
//! rounds met it, unsure when only the median does, missed otherwise. Around each case the
//! runner reads the kernel's CPU counters ([`crate::busy`]) to say how busy the machine was
//! with other work while it ran.
//!
//! A subject's run returns one value per metric, or an error when the run produced a wrong
//! answer (a value lost, duplicated or out of order); an error aborts the whole benchmark, so a
//! wrong structure can never print a fast number.
//!
//! ```
//! use pitlane_bench::results::{Better, Metric, params};
//! use pitlane_bench::runner::{Bench, Case, RunConfig, Subject};
//!
//! let mut bench = Bench::new(RunConfig::quick());
//! bench.begin_suite("demo");
//! let metric = Metric::new("ns_per_item", "ns", Better::Lower);
//! let case = Case::new("sum", params! {"items" => 1000}, vec![metric])
//!     .subject(Subject::ours("pitlane::demo", || Ok(vec![1.0])))
//!     .subject(Subject::peer("std", || Ok(vec![2.0])));
//! bench.measure(case).unwrap();
//! let report = bench.finish();
//! let ratio = &report.ratios[0];
//! assert_eq!((ratio.ratio, ratio.rounds, ratio.rounds_won), (0.5, 5, 5));
//! assert!(ratio.ours_better);
//! ```

use std::fmt;
use std::io::IsTerminal;
use std::time::Duration;

use crate::busy::{Busy, CpuSample};
use crate::env::{Machine, MachineState};
use crate::results::{
    CaseBusy, Goal, Metric, Note, Params, Record, Report, fmt_params, judge, ratios,
};
use crate::stats::summarize;

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
    /// `--rounds`: measured rounds per case, instead of the default of [`reps`](Self::reps).
    pub rounds: Option<usize>,
}

impl RunConfig {
    /// The full-size run.
    pub fn full() -> Self {
        Self {
            quick: false,
            threads: None,
            subjects: None,
            rounds: None,
        }
    }

    /// The `--quick` run.
    pub fn quick() -> Self {
        Self {
            quick: true,
            threads: None,
            subjects: None,
            rounds: None,
        }
    }

    /// Measured rounds per case (after the warm-up): `--rounds` if given, else 5 quick and 7
    /// full.
    ///
    /// ```
    /// use pitlane_bench::runner::RunConfig;
    ///
    /// assert_eq!(RunConfig::quick().reps(), 5);
    /// assert_eq!(RunConfig { rounds: Some(9), ..RunConfig::quick() }.reps(), 9);
    /// ```
    pub fn reps(&self) -> usize {
        self.rounds.unwrap_or(if self.quick { 5 } else { 7 })
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

    /// A run duration: `full_ms` milliseconds, an eighth of that when quick (a quick run has
    /// 5 rounds, and all suites must still finish within 3 minutes on 2 cores).
    pub fn duration(&self, full_ms: u64) -> Duration {
        Duration::from_millis(if self.quick { full_ms / 8 } else { full_ms })
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
    /// The OS would not start a workload's threads (see [`crate::start`]): nothing was wrong
    /// with the subject, the machine could not run the case as asked.
    NotStarted {
        /// Suite, workload, params and subject.
        at: String,
        /// The OS's refusal.
        why: String,
    },
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Incorrect { at, why } => write!(f, "wrong result in {at}: {why}"),
            BenchError::Shape(s) => write!(f, "{s}"),
            BenchError::NotStarted { at, why } => write!(f, "could not run {at}: {why}"),
        }
    }
}

impl std::error::Error for BenchError {}

/// Runs cases and collects their records.
pub struct Bench {
    config: RunConfig,
    suite: String,
    suites: Vec<String>,
    records: Vec<Record>,
    goals: Vec<(String, Goal)>,
    notes: Vec<Note>,
    machine_states: Vec<(String, MachineState)>,
    started: Option<CpuSample>,
    case_busy: Vec<CaseBusy>,
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
            goals: Vec::new(),
            notes: Vec::new(),
            machine_states: Vec::new(),
            started: CpuSample::now(),
            case_busy: Vec::new(),
            progress,
        }
    }

    /// The run's size.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// Starts the section of suite `name`; later cases, goals and notes belong to it.
    pub fn begin_suite(&mut self, name: &str) {
        self.suite = name.to_string();
        self.suites.push(name.to_string());
    }

    /// Declares a goal of the current suite; [`finish`](Self::finish) judges it.
    pub fn goal(&mut self, goal: Goal) {
        self.goals.push((self.suite.clone(), goal));
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
    ///
    /// A case whose suite, workload, parameters and a metric were already measured in this run
    /// (a suite or a thread count named twice) is refused: the ratios would pair the rounds of one
    /// measurement with those of the other, which never ran side by side. A value that is not
    /// a finite number (a rate over no time) aborts the benchmark like a wrong answer.
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
        if self.records.iter().any(|r| {
            r.suite == self.suite
                && r.workload == case.workload
                && r.params == case.params
                && case.metrics.iter().any(|m| m.name == r.metric.name)
        }) {
            return Err(BenchError::Shape(format!(
                "{label}: measured twice in one run (a suite or a thread count named twice?); \
                 its ratios would pair rounds that did not run side by side"
            )));
        }
        let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); case.metrics.len()]; n];
        let mut before = None;
        for round in 0..=reps {
            if round == 1 {
                before = CpuSample::now();
            }
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
                let values = (subject.run)().map_err(|why| {
                    let at = format!("{label} {}", subject.name);
                    if crate::start::is_refusal(&why) {
                        BenchError::NotStarted { at, why }
                    } else {
                        BenchError::Incorrect { at, why }
                    }
                })?;
                if values.len() != case.metrics.len() {
                    return Err(BenchError::Shape(format!(
                        "{label} {}: {} values for {} metrics",
                        subject.name,
                        values.len(),
                        case.metrics.len()
                    )));
                }
                if let Some((m, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                    return Err(BenchError::Incorrect {
                        at: format!("{label} {}", subject.name),
                        why: format!("{} was {v}, not a finite number", case.metrics[m].name),
                    });
                }
                if round > 0 {
                    for (m, v) in values.into_iter().enumerate() {
                        samples[i][m].push(v);
                    }
                }
            }
        }
        if let (Some(before), Some(after)) = (before, CpuSample::now())
            && let Some(busy) = Busy::between(&before, &after)
        {
            self.case_busy.push(CaseBusy {
                suite: self.suite.clone(),
                workload: case.workload.to_string(),
                params: case.params.clone(),
                busy,
            });
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
                    rounds: values,
                });
            }
        }
        Ok(())
    }

    /// Ends the run: computes ratios, judges the goals and captures the machine.
    pub fn finish(self) -> Report {
        self.progress.finish_and_clear();
        let ratios = ratios(&self.records);
        let goals = self
            .goals
            .iter()
            .map(|(suite, goal)| judge(suite, goal, &self.records, &self.case_busy))
            .collect();
        let busy = match (self.started, CpuSample::now()) {
            (Some(a), Some(b)) => Busy::between(&a, &b),
            _ => None,
        };
        Report {
            machine: Machine::capture(),
            quick: self.config.quick,
            rounds: self.config.reps(),
            suites: self.suites,
            records: self.records,
            ratios,
            goals,
            notes: self.notes,
            machine_states: self.machine_states,
            busy,
            case_busy: self.case_busy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Better, Verdict, params};
    use serde_json::{Value, json};

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
    fn measure_discards_warm_up_and_computes_paired_ratios() {
        let mut bench = Bench::new(RunConfig {
            rounds: Some(3),
            ..RunConfig::quick()
        });
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
        assert_eq!(ours.rounds, [3.0, 1.0, 2.0]);
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
        // Per round 3/4, 1/8, 2/6.
        let a = by("peerA", "ns_per_item");
        assert!((a.ratio - 2.0 / 6.0).abs() < 1e-12);
        assert_eq!((a.ratio_min, a.ratio_max), (0.125, 0.75));
        assert_eq!((a.rounds, a.rounds_won), (3, 3));
        assert!(a.ours_better);
        let b = by("peerB", "ns_per_item");
        assert_eq!((b.ratio, b.ratio_min, b.ratio_max), (2.0, 1.0, 3.0));
        // A tie (round 2: 1 against 1) is not a round won.
        assert_eq!(b.rounds_won, 0);
        assert!(!b.ours_better);
        let t = by("peerA", "ops_per_s");
        assert_eq!(t.ratio, 4.0);
        assert_eq!(t.rounds_won, 3);
        assert!(t.ours_better);
    }

    /// The machine drifts from a slow state to a fast one in the middle of round 3, between
    /// ours and the peer: ours is 10% faster in every round, but its median comes from the
    /// slow rounds and the peer's from the fast ones, so the ratio of medians says ours is 9x
    /// slower. The paired ratio (round by round) still says 0.9 and that ours won 4 rounds of
    /// 5 (it lost the round the drift split).
    #[test]
    fn a_paired_median_resists_a_drift_that_flips_the_ratio_of_medians() {
        let slow = 10.0;
        let fast = 1.0;
        // Rounds 1..5: ours ran in slow, slow, slow, fast, fast; the peer in slow, slow,
        // fast, fast, fast. Each value is 0.9 (ours) or 1.0 (peer) times the state's cost.
        let ours = vec![
            0.0,
            0.9 * slow,
            0.9 * slow,
            0.9 * slow,
            0.9 * fast,
            0.9 * fast,
        ];
        let peer = vec![0.0, slow, slow, fast, fast, fast];
        let mut bench = Bench::new(RunConfig::quick());
        bench.begin_suite("drift");
        let m = Metric::new("ns_per_item", "ns", Better::Lower);
        bench.goal(Goal::ratio("w", Params::new(), &m, "ours", "peer", 0.95));
        let case = Case::new("w", Params::new(), vec![m])
            .subject(scripted("ours", false, ours))
            .subject(scripted("peer", true, peer));
        bench.measure(case).unwrap();
        let report = bench.finish();

        let median_of = |s: &str| {
            report
                .records
                .iter()
                .find(|r| r.subject == s)
                .unwrap()
                .median
        };
        let of_medians = median_of("ours") / median_of("peer");
        assert!((of_medians - 9.0).abs() < 1e-9, "{of_medians}");
        assert!(!Better::Lower.ours_better(of_medians));

        let ratio = &report.ratios[0];
        assert!((ratio.ratio - 0.9).abs() < 1e-9, "{ratio:?}");
        assert!(ratio.ours_better);
        assert_eq!((ratio.rounds, ratio.rounds_won), (5, 4));
        assert!((ratio.ratio_max - 9.0).abs() < 1e-9);

        let goal = &report.goals[0];
        assert_eq!(goal.verdict(), Some(Verdict::Met));
        assert_eq!(goal.measured.unwrap().won, 4);
    }

    #[test]
    fn goals_are_met_missed_unsure_or_not_measured() {
        let mut bench = Bench::new(RunConfig::quick());
        bench.begin_suite("g");
        let higher = Metric::new("mops_per_s", "Mops/s", Better::Higher);
        for t in [1, 2] {
            // At 2 threads ours is 1.5x the peer in 3 rounds of 5 and 1.1x in the others.
            let ours = if t == 1 {
                vec![0.0, 30.0, 30.0, 30.0, 30.0, 30.0]
            } else {
                vec![0.0, 15.0, 11.0, 15.0, 11.0, 15.0]
            };
            let case = Case::new(
                "pairs",
                params! {"threads" => t, "items" => 0},
                vec![higher.clone()],
            )
            .subject(scripted("ours", false, ours))
            .subject(scripted(
                "peer",
                true,
                vec![0.0, 10.0, 10.0, 10.0, 10.0, 10.0],
            ));
            bench.measure(case).unwrap();
        }
        let at = |t: i32, target: f64| {
            Goal::ratio(
                "pairs",
                params! {"threads" => t},
                &higher,
                "ours",
                "peer",
                target,
            )
        };
        bench.goal(at(1, 2.0).from_issue(5)); // 3.0 in every round: met
        bench.goal(at(2, 1.4)); // median 1.5, but 3 rounds of 5 meet 1.4: unsure
        bench.goal(at(2, 2.0)); // missed
        bench.goal(at(4, 1.0)); // no case at 4 threads: not measured
        bench.goal(Goal::figure(
            "pairs",
            params! {"threads" => 2},
            &higher,
            "ours",
            11.0,
        ));
        let report = bench.finish();
        let verdicts: Vec<Option<Verdict>> = report.goals.iter().map(|g| g.verdict()).collect();
        assert_eq!(
            verdicts,
            [
                Some(Verdict::Met),
                Some(Verdict::Unsure),
                Some(Verdict::Missed),
                None,
                Some(Verdict::Met)
            ]
        );
        let json = report.to_json();
        assert_eq!(
            json["goals"].as_array().unwrap().len(),
            4,
            "unmeasured goals are left out"
        );
        assert_eq!(json["goals"][1]["verdict"], "unsure");
        assert_eq!(json["goals"][1]["rounds_won"], 3);
        assert_eq!(json["goals"][4]["peer"], Value::Null);
    }

    /// results.json has the keys of docs/benchmarks.md, in order, with values of the right
    /// types.
    #[test]
    fn results_json_follows_the_schema() {
        let mut bench = Bench::new(RunConfig::quick());
        bench.begin_suite("spsc");
        let m = Metric::new("ns_per_item", "ns", Better::Lower);
        bench.goal(
            Goal::ratio(
                "throughput",
                params! {"capacity" => 2048},
                &m,
                "pitlane::spsc",
                "rtrb",
                0.8,
            )
            .from_issue(4),
        );
        let case = Case::new(
            "throughput",
            params! {"capacity" => 2048, "threads" => 2},
            vec![m],
        )
        .subject(Subject::ours("pitlane::spsc", || Ok(vec![3.0])))
        .subject(Subject::peer("rtrb", || Ok(vec![4.0])));
        bench.measure(case).unwrap();
        let json = bench.finish().to_json();

        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(
            keys(&json),
            [
                "pitlane_version",
                "git_commit",
                "machine",
                "records",
                "ratios",
                "goals",
                "machine_busy"
            ]
        );
        assert_eq!(keys(&json["machine"]), ["cpu", "cores", "os", "rustc"]);
        assert_eq!(
            keys(&json["records"][0]),
            [
                "suite", "workload", "params", "subject", "peer", "metric", "unit", "better",
                "median", "min", "max", "samples"
            ]
        );
        assert_eq!(
            keys(&json["ratios"][0]),
            [
                "suite",
                "workload",
                "params",
                "metric",
                "ours",
                "peer",
                "ratio",
                "ratio_min",
                "ratio_max",
                "rounds",
                "rounds_won",
                "ours_better"
            ]
        );
        assert_eq!(
            keys(&json["goals"][0]),
            [
                "suite",
                "workload",
                "params",
                "metric",
                "ours",
                "peer",
                "target",
                "ratio",
                "rounds",
                "rounds_won",
                "verdict"
            ]
        );
        let ratio = &json["ratios"][0];
        assert_eq!(ratio["ratio"], 0.75);
        assert_eq!(ratio["rounds"], 5);
        assert_eq!(ratio["rounds_won"], 5);
        assert_eq!(ratio["ours_better"], true);
        assert_eq!(json["records"][0]["samples"], 5);
        assert_eq!(json["records"][0]["better"], "lower");
        assert_eq!(json["records"][0]["params"]["threads"], 2);
        let goal = &json["goals"][0];
        assert_eq!(goal["params"], json!({"capacity": 2048}));
        assert_eq!(
            (goal["target"].as_f64(), goal["verdict"].as_str()),
            (Some(0.8), Some("met"))
        );
        // Linux has /proc: the run says how busy the machine was.
        if std::path::Path::new("/proc/stat").exists() {
            let busy = &json["machine_busy"];
            assert_eq!(
                keys(busy),
                [
                    "steal_pct",
                    "other_cpu_pct",
                    "load_avg_max",
                    "busy_workloads"
                ]
            );
            assert!(busy["steal_pct"].is_number() && busy["other_cpu_pct"].is_number());
            assert!(busy["busy_workloads"].is_array());
        }
    }

    /// Two peers take turns being the fastest: against either one alone ours meets "at most
    /// 0.9x" in two rounds of three, but against the best peer of each round it is 1.14x in
    /// two rounds, and the goal "at most 0.9x the best peer" is missed.
    #[test]
    fn a_goal_against_the_best_peer_takes_each_rounds_best() {
        let mut bench = Bench::new(RunConfig {
            rounds: Some(3),
            ..RunConfig::quick()
        });
        bench.begin_suite("alloc");
        let ns = Metric::new("ns_per_iter", "ns", Better::Lower);
        let ops = Metric::new("ops_per_s", "ops/s", Better::Higher);
        // Rounds 1..3 (after the warm-up): peer a is fast in round 1, b in round 3.
        let case = Case::new("w", params! {"threads" => 1}, vec![ns.clone()])
            .subject(scripted("ours", false, vec![0.0, 8.0, 8.0, 8.0]))
            .subject(scripted("a", true, vec![0.0, 7.0, 10.0, 10.0]))
            .subject(scripted("b", true, vec![0.0, 10.0, 10.0, 7.0]));
        bench.measure(case).unwrap();
        let case = Case::new("w", params! {"threads" => 1}, vec![ops.clone()])
            .subject(scripted("ours", false, vec![0.0, 30.0, 30.0, 30.0]))
            .subject(scripted("a", true, vec![0.0, 10.0, 20.0, 10.0]))
            .subject(scripted("b", true, vec![0.0, 20.0, 10.0, 20.0]));
        bench.measure(case).unwrap();
        let at = |m: &Metric, peers: &[&str], target: f64| {
            Goal::best_peer("w", params! {"threads" => 1}, m, "ours", peers, target)
        };
        bench.goal(Goal::ratio(
            "w",
            params! {"threads" => 1},
            &ns,
            "ours",
            "b",
            0.9,
        ));
        bench.goal(at(&ns, &["a", "b"], 0.9));
        bench.goal(at(&ns, &["a", "b"], 1.15));
        bench.goal(at(&ops, &["a", "b"], 1.5));
        bench.goal(at(&ns, &["a", "c"], 0.9)); // c never ran: not measured
        let report = bench.finish();
        let g = &report.goals;
        // Against b alone: 0.8 in rounds 1 and 2: met.
        assert_eq!(g[0].verdict(), Some(Verdict::Met));
        // Against the best: 8/7, 8/10, 8/7 (the tie of round 2 goes to a, listed first).
        let m = g[1].measured.unwrap();
        assert!((m.median - 8.0 / 7.0).abs() < 1e-12, "{m:?}");
        assert_eq!((m.min, m.rounds, m.won), (0.8, 3, 1));
        assert_eq!(g[1].verdict(), Some(Verdict::Missed));
        assert_eq!(g[1].best_rounds, [("a".into(), 2), ("b".into(), 1)]);
        assert_eq!(g[2].verdict(), Some(Verdict::Met));
        // Higher is better: the best is the highest, 20 in every round; 30/20 = 1.5.
        let m = g[3].measured.unwrap();
        assert_eq!((m.median, m.won), (1.5, 3));
        assert_eq!(g[3].verdict(), Some(Verdict::Met));
        assert_eq!(g[4].verdict(), None);
        let json = report.to_json();
        let goals = json["goals"].as_array().unwrap();
        assert_eq!(goals.len(), 4, "the unmeasured goal is left out");
        assert_eq!(goals[0].get("best_of"), None);
        assert_eq!(goals[1]["peer"], "best of a, b");
        assert_eq!(goals[1]["best_of"], json!(["a", "b"]));
        assert_eq!(goals[1]["best_rounds"], json!({"a": 2, "b": 1}));
        assert_eq!(goals[1]["verdict"], "missed");
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
        // The warm-up and five rounds.
        let expected = ['a', 'b', 'b', 'a', 'a', 'b', 'b', 'a', 'a', 'b', 'b', 'a'];
        assert_eq!(order.into_inner(), expected);
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

    /// A case measured twice in one run (`pitlane bench locks locks`, `--threads 2,2`) used
    /// to give each pair of ours and a peer four ratios, two of them pairing round i of one
    /// measurement with round i of the other, which never ran side by side.
    #[test]
    fn a_case_measured_twice_in_one_run_is_refused() {
        let mut bench = Bench::new(RunConfig {
            rounds: Some(3),
            ..RunConfig::quick()
        });
        bench.begin_suite("s");
        let m = Metric::new("ns_per_item", "ns", Better::Lower);
        let case = |ours: f64| {
            Case::new("w", params! {"threads" => 2}, vec![m.clone()])
                .subject(Subject::ours("ours", move || Ok(vec![ours])))
                .subject(Subject::peer("peer", || Ok(vec![2.0])))
        };
        bench.measure(case(1.0)).unwrap();
        let err = bench.measure(case(4.0)).unwrap_err();
        assert!(err.to_string().contains("measured twice"), "{err}");
        // Another parameter set, or the same one in another suite, is a case of its own.
        let other = Case::new("w", params! {"threads" => 4}, vec![m.clone()])
            .subject(Subject::ours("ours", || Ok(vec![1.0])))
            .subject(Subject::peer("peer", || Ok(vec![2.0])));
        bench.measure(other).unwrap();
        // So is another metric of the same workload and parameters.
        let throughput = Case::new(
            "w",
            params! {"threads" => 2},
            vec![Metric::new("ops_per_s", "ops/s", Better::Higher)],
        )
        .subject(Subject::ours("ours", || Ok(vec![1.0])));
        bench.measure(throughput).unwrap();
        bench.begin_suite("t");
        bench.measure(case(1.0)).unwrap();
        let report = bench.finish();
        assert_eq!(report.records.len(), 7);
        assert_eq!(report.ratios.len(), 3, "{:?}", report.ratios);
        assert!(report.ratios.iter().all(|r| r.ratio == 0.5));
    }

    /// An infinite rate (work over no time) used to become a record whose median, min and max
    /// results.json wrote as `null`, and whose bar chart kept `report.html` from ever being
    /// written; NaN was caught only after every round, as a suite bug.
    #[test]
    fn a_value_that_is_not_a_finite_number_aborts() {
        for bad in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            let mut bench = Bench::new(RunConfig {
                rounds: Some(3),
                ..RunConfig::quick()
            });
            bench.begin_suite("s");
            let m = Metric::new("ops_per_s", "ops/s", Better::Higher);
            let case = Case::new("w", Params::new(), vec![m])
                .subject(Subject::ours("ours", move || Ok(vec![bad])))
                .subject(Subject::peer("peer", || Ok(vec![2.0])));
            let err = bench.measure(case).unwrap_err();
            assert!(
                matches!(err, BenchError::Incorrect { .. }),
                "{bad}: {err:?}"
            );
            assert!(err.to_string().contains("not a finite number"), "{err}");
            assert!(bench.finish().records.is_empty());
        }
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
