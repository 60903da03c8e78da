//! The results of a run and their JSON: records, paired ratios, goals and their verdicts, how
//! busy the machine was, in the `results.json` schema of `docs/benchmarks.md`.
//!
//! The runner ([`crate::runner`]) produces a [`Report`]; the report module renders it as
//! markdown and HTML, and [`Report::to_json`] as `results.json`.

use serde_json::{Map, Value, json};

use crate::busy::Busy;
use crate::env::{Machine, MachineState};
use crate::stats::{Paired, paired, summarize};

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

    /// Whether `value` reaches `target`: at most it for lower-is-better, at least it for
    /// higher-is-better.
    ///
    /// ```
    /// use pitlane_bench::results::Better;
    ///
    /// assert!(Better::Lower.meets(0.74, 0.8));
    /// assert!(!Better::Higher.meets(1.1, 1.2));
    /// ```
    pub fn meets(self, value: f64, target: f64) -> bool {
        match self {
            Better::Lower => value <= target,
            Better::Higher => value >= target,
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
    /// use pitlane_bench::results::{Better, Metric};
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
        let mut map = $crate::results::Params::new();
        $( map.insert(::std::string::String::from($key), ::serde_json::json!($value)); )*
        map
    }};
}
pub use crate::params;

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
    /// The value of each measured round, in round order (not in `results.json`): what paired
    /// ratios are computed from.
    pub rounds: Vec<f64>,
}

/// Ours against a peer for one suite, workload, params and metric, paired by round: in each
/// round, ours ÷ peer of that round; the ratio is the median of those per-round ratios.
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
    /// The median over rounds of ours ÷ peer in that round.
    pub ratio: f64,
    /// The smallest per-round ratio.
    pub ratio_min: f64,
    /// The largest per-round ratio.
    pub ratio_max: f64,
    /// Rounds with a ratio (a round whose peer value is zero has none).
    pub rounds: usize,
    /// Rounds in which ours was better in the metric's direction.
    pub rounds_won: usize,
    /// The ratio read in the metric's direction.
    pub ours_better: bool,
}

/// A goal a suite declares: ours against a peer (or against a fixed figure) on one workload,
/// with the ratio (or figure) to reach.
///
/// ```
/// use pitlane_bench::results::{Better, Goal, Metric, params};
///
/// let ns_per_item = Metric::new("ns_per_item", "ns", Better::Lower);
/// let goal = Goal::ratio("throughput", params! {"capacity" => 2048}, &ns_per_item,
///                        "pitlane::spsc", "rtrb", 0.8).from_issue(4);
/// assert_eq!(goal.peer.as_deref(), Some("rtrb"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    /// Workload name.
    pub workload: String,
    /// The parameters that pick the case: a case matches when it has each of these values
    /// (it may have more parameters).
    pub params: Params,
    /// Metric name.
    pub metric: String,
    /// The metric's unit.
    pub unit: String,
    /// The metric's direction.
    pub better: Better,
    /// Our subject.
    pub ours: String,
    /// The peer; `None` for a goal on ours alone, whose `target` is in the metric's unit. For
    /// a goal against the best of several peers ([`Goal::best_peer`]) it reads
    /// `best of a, b, c` and names no subject: [`best_of`](Self::best_of) lists them.
    pub peer: Option<String>,
    /// For a goal against the best peer of each round: the peers, every one of which must
    /// have run the case. Empty for a goal against one peer or a figure.
    pub best_of: Vec<String>,
    /// The ratio ours ÷ peer must reach (at most it for a lower-is-better metric, at least it
    /// for a higher-is-better one), or the figure ours must reach when there is no peer.
    pub target: f64,
    /// The issue that set the goal, if any.
    pub issue: Option<u32>,
}

impl Goal {
    /// Ours ÷ `peer` must reach `target`.
    pub fn ratio(
        workload: &str,
        params: Params,
        metric: &Metric,
        ours: &str,
        peer: &str,
        target: f64,
    ) -> Self {
        Self {
            workload: workload.into(),
            params,
            metric: metric.name.into(),
            unit: metric.unit.into(),
            better: metric.better,
            ours: ours.into(),
            peer: Some(peer.into()),
            best_of: Vec::new(),
            target,
            issue: None,
        }
    }

    /// Ours ÷ the best of `peers` must reach `target`, where the best is taken anew in each
    /// round: the lowest of the peers' values of that round for a lower-is-better metric, the
    /// highest for a higher-is-better one. Each round's ratio is ours ÷ that round's best, and
    /// the goal is judged on those ratios like any other (median, rounds won). A goal "at most
    /// 0.9× the best peer" is then met only if ours beat whichever peer was best, round by
    /// round, rather than the peer that was best on the medians.
    ///
    /// ```
    /// use pitlane_bench::results::{Better, Goal, Metric, params};
    ///
    /// let ns = Metric::new("ns_per_iter", "ns", Better::Lower);
    /// let goal = Goal::best_peer("vec_small", params! {"threads" => 1}, &ns,
    ///                            "pitlane_alloc::PitlaneAlloc", &["jemalloc", "mimalloc"], 0.9);
    /// assert_eq!(goal.best_of, ["jemalloc", "mimalloc"]);
    /// assert_eq!(goal.peer.as_deref(), Some("best of jemalloc, mimalloc"));
    /// ```
    pub fn best_peer(
        workload: &str,
        params: Params,
        metric: &Metric,
        ours: &str,
        peers: &[&str],
        target: f64,
    ) -> Self {
        Self {
            workload: workload.into(),
            params,
            metric: metric.name.into(),
            unit: metric.unit.into(),
            better: metric.better,
            ours: ours.into(),
            peer: Some(format!("best of {}", peers.join(", "))),
            best_of: peers.iter().map(|p| p.to_string()).collect(),
            target,
            issue: None,
        }
    }

    /// Ours alone must reach `target` in the metric's unit (when no other crate does the job).
    ///
    /// ```
    /// use pitlane_bench::results::{Better, Goal, Metric, params};
    ///
    /// let rate = Metric::new("histories_per_cpu_s", "histories/CPU-s", Better::Higher);
    /// let goal = Goal::figure("linearizable", params! {}, &rate,
    ///                         "pitlane_lincheck::Checker", 100_000.0);
    /// assert!(goal.peer.is_none());
    /// ```
    pub fn figure(
        workload: &str,
        params: Params,
        metric: &Metric,
        ours: &str,
        target: f64,
    ) -> Self {
        Self {
            workload: workload.into(),
            params,
            metric: metric.name.into(),
            unit: metric.unit.into(),
            better: metric.better,
            ours: ours.into(),
            peer: None,
            best_of: Vec::new(),
            target,
            issue: None,
        }
    }

    /// Names the issue that set the goal.
    pub fn from_issue(self, issue: u32) -> Self {
        Self {
            issue: Some(issue),
            ..self
        }
    }

    /// Whether a case with `params` is one this goal is about.
    ///
    /// ```
    /// use pitlane_bench::results::{Better, Goal, Metric, params};
    ///
    /// let mops = Metric::new("mops_per_s", "Mops/s", Better::Higher);
    /// let goal = Goal::ratio("pairs", params! {"threads" => 2}, &mops, "ours", "peer", 1.2);
    /// assert!(goal.picks(&params! {"threads" => 2, "items" => 0}));
    /// assert!(!goal.picks(&params! {"threads" => 4, "items" => 0}));
    /// ```
    pub fn picks(&self, params: &Params) -> bool {
        self.params.iter().all(|(k, v)| params.get(k) == Some(v))
    }
}

/// Where a goal stands after a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The median meets the target and at least two thirds of the rounds met it.
    Met,
    /// The median does not meet the target.
    Missed,
    /// The median meets the target but fewer than two thirds of the rounds did.
    Unsure,
}

impl Verdict {
    /// `met`, `missed` or `unsure`, as in results.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "missed",
            Verdict::Unsure => "unsure",
        }
    }

    /// The verdict of a median that does or does not meet the target, with `won` of `rounds`
    /// rounds meeting it.
    ///
    /// ```
    /// use pitlane_bench::results::Verdict;
    ///
    /// assert_eq!(Verdict::of(true, 4, 6), Verdict::Met);
    /// assert_eq!(Verdict::of(true, 3, 6), Verdict::Unsure);
    /// assert_eq!(Verdict::of(false, 6, 6), Verdict::Missed);
    /// ```
    pub fn of(median_meets: bool, won: usize, rounds: usize) -> Self {
        if !median_meets {
            Verdict::Missed
        } else if 3 * won >= 2 * rounds && rounds > 0 {
            Verdict::Met
        } else {
            Verdict::Unsure
        }
    }
}

/// A goal and what one run measured of it.
#[derive(Clone, Debug, PartialEq)]
pub struct GoalResult {
    /// The suite that declared it.
    pub suite: String,
    /// The goal.
    pub goal: Goal,
    /// The paired ratio (or, without a peer, the figures of ours against the target, as
    /// `median`/`min`/`max` of ours); `None` when the case was not measured in this run (its
    /// suite or subjects were left out).
    pub measured: Option<Paired>,
    /// How busy the machine was while the goal's case ran.
    pub busy: Option<Busy>,
    /// For a goal against the best peer: each peer of [`Goal::best_of`] with the number of
    /// rounds in which it was the best (ties go to the first listed). Empty otherwise.
    pub best_rounds: Vec<(String, usize)>,
}

impl GoalResult {
    /// The verdict; `None` when not measured.
    pub fn verdict(&self) -> Option<Verdict> {
        let m = self.measured?;
        Some(Verdict::of(
            self.goal.better.meets(m.median, self.goal.target),
            m.won,
            m.rounds,
        ))
    }
}

/// How busy the machine was while one case ran.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseBusy {
    /// Suite name.
    pub suite: String,
    /// Workload name.
    pub workload: String,
    /// Parameters.
    pub params: Params,
    /// Steal and other processes' CPU time over the case's rounds.
    pub busy: Busy,
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
    /// Measured rounds per case (after the warm-up).
    pub rounds: usize,
    /// Suites in the order run.
    pub suites: Vec<String>,
    /// Every measured point.
    pub records: Vec<Record>,
    /// Every ours-versus-peer ratio, paired by round.
    pub ratios: Vec<Ratio>,
    /// The goals of the suites run, in declaration order, with what this run measured.
    pub goals: Vec<GoalResult>,
    /// Suite remarks.
    pub notes: Vec<Note>,
    /// How the machine behaved, probed at the moments named (see [`MachineState`]); not part
    /// of `results.json`.
    pub machine_states: Vec<(String, MachineState)>,
    /// How busy the machine was with other work over the whole run (`None` without `/proc`).
    pub busy: Option<Busy>,
    /// How busy it was during each case.
    pub case_busy: Vec<CaseBusy>,
}

impl Report {
    /// How busy the machine was while the case of `suite`, `workload` and `params` ran.
    pub fn busy_at(&self, suite: &str, workload: &str, params: &Params) -> Option<&Busy> {
        self.case_busy
            .iter()
            .find(|c| c.suite == suite && c.workload == workload && &c.params == params)
            .map(|c| &c.busy)
    }

    /// results.json, in the schema of docs/benchmarks.md (the design's BENCHMARKS.md).
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
                    "ratio_min": r.ratio_min,
                    "ratio_max": r.ratio_max,
                    "rounds": r.rounds,
                    "rounds_won": r.rounds_won,
                    "ours_better": r.ours_better,
                })
            })
            .collect();
        let goals: Vec<Value> = self
            .goals
            .iter()
            .filter_map(|g| {
                let m = g.measured?;
                let mut goal = json!({
                    "suite": g.suite,
                    "workload": g.goal.workload,
                    "params": g.goal.params,
                    "metric": g.goal.metric,
                    "ours": g.goal.ours,
                    "peer": g.goal.peer,
                    "target": g.goal.target,
                    "ratio": m.median,
                    "rounds": m.rounds,
                    "rounds_won": m.won,
                    "verdict": g.verdict()?.as_str(),
                });
                if !g.goal.best_of.is_empty()
                    && let Some(obj) = goal.as_object_mut()
                {
                    obj.insert("best_of".into(), json!(g.goal.best_of));
                    let best: Map<String, Value> = g
                        .best_rounds
                        .iter()
                        .map(|(peer, n)| (peer.clone(), json!(n)))
                        .collect();
                    obj.insert("best_rounds".into(), Value::Object(best));
                }
                Some(goal)
            })
            .collect();
        let busy_cases: Vec<Value> = self
            .case_busy
            .iter()
            .filter(|c| c.busy.is_busy())
            .map(|c| {
                json!({
                    "suite": c.suite,
                    "workload": c.workload,
                    "params": c.params,
                    "steal_pct": round2(c.busy.steal_pct),
                    "other_cpu_pct": round2(c.busy.other_cpu_pct),
                })
            })
            .collect();
        let machine_busy = match &self.busy {
            Some(b) => json!({
                "steal_pct": round2(b.steal_pct),
                "other_cpu_pct": round2(b.other_cpu_pct),
                "load_avg_max": b.load_avg,
                "busy_workloads": busy_cases,
            }),
            None => Value::Null,
        };
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
            "goals": goals,
            "machine_busy": machine_busy,
        })
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Every paired ratio of an `ours` record to a `peer` record with the same suite, workload,
/// params and metric.
///
/// ```
/// use pitlane_bench::results::{Better, Metric, Params, Record, ratios};
///
/// let record = |subject: &str, peer: bool, rounds: Vec<f64>| Record {
///     suite: "s".into(), workload: "w".into(), params: Params::new(),
///     subject: subject.into(), peer,
///     metric: Metric::new("ns_per_item", "ns", Better::Lower),
///     median: 0.0, min: 0.0, max: 0.0, samples: rounds.len(), rounds,
/// };
/// let r = ratios(&[record("ours", false, vec![1.0, 2.0, 6.0]), record("peer", true, vec![2.0, 2.0, 3.0])]);
/// assert_eq!((r[0].ratio, r[0].ratio_min, r[0].ratio_max, r[0].rounds_won), (1.0, 0.5, 2.0, 1));
/// ```
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
            let better = ours.metric.better;
            let Some(p) = paired(&ours.rounds, &peer.rounds, |r| better.ours_better(r)) else {
                continue;
            };
            out.push(Ratio {
                suite: ours.suite.clone(),
                workload: ours.workload.clone(),
                params: ours.params.clone(),
                metric: ours.metric.clone(),
                ours: ours.subject.clone(),
                peer: peer.subject.clone(),
                ratio: p.median,
                ratio_min: p.min,
                ratio_max: p.max,
                rounds: p.rounds,
                rounds_won: p.won,
                ours_better: better.ours_better(p.median),
            });
        }
    }
    out
}

/// Measures `goal` (declared by `suite`) from a run's records: the first case that the goal
/// picks and where both its subjects ran.
///
/// ```
/// use pitlane_bench::results::{Better, Goal, Metric, Params, Record, Verdict, judge};
///
/// let mops = Metric::new("mops_per_s", "Mops/s", Better::Higher);
/// let record = |subject: &str, peer: bool, rounds: Vec<f64>| Record {
///     suite: "bag".into(), workload: "pairs".into(), params: Params::new(),
///     subject: subject.into(), peer, metric: mops.clone(),
///     median: 0.0, min: 0.0, max: 0.0, samples: rounds.len(), rounds,
/// };
/// let records = [record("ours", false, vec![30.0, 30.0, 9.0]), record("peer", true, vec![10.0; 3])];
/// let goal = Goal::ratio("pairs", Params::new(), &mops, "ours", "peer", 2.0);
/// let result = judge("bag", &goal, &records, &[]);
/// // Median 3.0, two rounds of three at least 2x: met.
/// assert_eq!(result.verdict(), Some(Verdict::Met));
/// ```
pub fn judge(suite: &str, goal: &Goal, records: &[Record], case_busy: &[CaseBusy]) -> GoalResult {
    let mut result = GoalResult {
        suite: suite.to_string(),
        goal: goal.clone(),
        measured: None,
        busy: None,
        best_rounds: Vec::new(),
    };
    let candidates = records.iter().filter(|r| {
        r.suite == suite
            && r.workload == goal.workload
            && r.metric.name == goal.metric
            && r.subject == goal.ours
            && goal.picks(&r.params)
    });
    for ours in candidates {
        let better = goal.better;
        let target = goal.target;
        let same_case = |r: &&Record| {
            r.suite == ours.suite
                && r.workload == ours.workload
                && r.params == ours.params
                && r.metric.name == ours.metric.name
        };
        let measured = match &goal.peer {
            Some(_) if !goal.best_of.is_empty() => {
                let peers: Option<Vec<&Record>> = goal
                    .best_of
                    .iter()
                    .map(|name| {
                        records
                            .iter()
                            .filter(same_case)
                            .find(|r| &r.subject == name)
                    })
                    .collect();
                peers.and_then(|peers| {
                    let (best, counts) = best_by_round(&peers, better);
                    let p = paired(&ours.rounds, &best, |r| better.meets(r, target))?;
                    result.best_rounds = counts;
                    Some(p)
                })
            }
            Some(peer) => records
                .iter()
                .filter(same_case)
                .find(|r| &r.subject == peer)
                .and_then(|p| paired(&ours.rounds, &p.rounds, |r| better.meets(r, target))),
            None => summarize(&ours.rounds).map(|(median, min, max)| Paired {
                median,
                min,
                max,
                rounds: ours.rounds.len(),
                won: ours
                    .rounds
                    .iter()
                    .filter(|&&v| better.meets(v, target))
                    .count(),
            }),
        };
        if measured.is_some() {
            result.measured = measured;
            result.busy = case_busy
                .iter()
                .find(|c| {
                    c.suite == suite && c.workload == ours.workload && c.params == ours.params
                })
                .map(|c| c.busy);
            break;
        }
    }
    result
}

/// The best of `peers` in each round (the lowest value for a lower-is-better metric, the
/// highest for a higher-is-better one; NaN where a peer has no finite value that round), and
/// how many rounds each peer was the best in (ties to the first).
fn best_by_round(peers: &[&Record], better: Better) -> (Vec<f64>, Vec<(String, usize)>) {
    let rounds = peers.iter().map(|p| p.rounds.len()).min().unwrap_or(0);
    let mut counts: Vec<(String, usize)> = peers.iter().map(|p| (p.subject.clone(), 0)).collect();
    let mut best = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let mut pick: Option<(usize, f64)> = None;
        let mut whole = true;
        for (k, p) in peers.iter().enumerate() {
            let v = p.rounds[i];
            if !v.is_finite() {
                whole = false;
                break;
            }
            let beats = match pick {
                None => true,
                Some((_, b)) => match better {
                    Better::Lower => v < b,
                    Better::Higher => v > b,
                },
            };
            if beats {
                pick = Some((k, v));
            }
        }
        match pick {
            Some((k, v)) if whole => {
                counts[k].1 += 1;
                best.push(v);
            }
            _ => best.push(f64::NAN),
        }
    }
    (best, counts)
}

/// `threads=2, items=1000`.
pub fn fmt_params(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
