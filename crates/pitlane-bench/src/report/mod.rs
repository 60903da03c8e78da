//! The report: `report.md`, a self-contained `report.html` with inline SVG charts drawn by
//! `plotters`, and `results.json`.
//!
//! Both human-readable forms open with the machine, how busy it was with other work, and the
//! goal table (each goal's target, median paired ratio with its range, rounds won and verdict).
//! Then comes one section per suite and, inside it, one table per workload and metric: a row
//! per subject, a column per parameter set (the parameters that vary; the constant ones are
//! named above the table), each cell the median of the interleaved rounds with their min–max
//! range. Below it, the paired ratios of each of ours to each peer. Thread counts above the
//! machine's cores are labelled "oversubscribed"; a column measured while more than a quarter
//! of the machine was busy elsewhere is marked "⚠ busy".
//!
//! - [`markdown`](mod@markdown): `report.md`, and the goal table `pitlane bench --goals` prints;
//! - [`html`](mod@html): `report.html`, with the charts of [`chart`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::busy::Busy;
use crate::results::{Better, Goal, GoalResult, Metric, Params, Ratio, Record, Report, Verdict};

pub mod chart;
pub mod html;
pub mod markdown;

pub use html::html;
pub use markdown::{goals_markdown, goals_summary, markdown};

/// One table: the records of one suite, workload and metric.
struct Table<'a> {
    suite: &'a str,
    workload: &'a str,
    metric: &'a Metric,
    /// Parameter keys whose value differs between columns.
    varying: Vec<String>,
    /// `key=value` of the parameters shared by every column.
    constant: Vec<String>,
    /// Distinct parameter sets, in first-seen order.
    columns: Vec<&'a Params>,
    /// Subjects in first-seen order, with whether each is a peer.
    subjects: Vec<(&'a str, bool)>,
    records: Vec<&'a Record>,
}

impl<'a> Table<'a> {
    fn cell(&self, subject: &str, column: &Params) -> Option<&'a Record> {
        self.records
            .iter()
            .copied()
            .find(|r| r.subject == subject && &r.params == column)
    }

    fn column_label(&self, column: &Params, cores: usize) -> String {
        self.column_label_in(column, cores, None)
    }

    /// The column's label, with the busy mark when `report` says the machine was busy while
    /// the column's case ran.
    fn column_label_in(&self, column: &Params, cores: usize, report: Option<&Report>) -> String {
        let mut parts = Vec::new();
        for key in &self.varying {
            let value = column.get(key).map_or("–".to_string(), plain);
            parts.push(format!("{key}={value}"));
        }
        let label = if parts.is_empty() {
            "all".to_string()
        } else {
            parts.join(", ")
        };
        let label = match column.get("threads").and_then(Value::as_u64) {
            Some(t) if t as usize > cores => format!("{label} (oversubscribed)"),
            _ => label,
        };
        match report.and_then(|r| r.busy_at(self.suite, self.workload, column)) {
            Some(b) if b.is_busy() => format!("{label} {}", busy_mark(b)),
            _ => label,
        }
    }

    fn sweeps_threads(&self) -> bool {
        self.varying == ["threads"] && self.columns.len() > 1
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn tables(report: &Report) -> Vec<Table<'_>> {
    let mut out: Vec<Table<'_>> = Vec::new();
    for r in &report.records {
        let existing = out.iter_mut().find(|t| {
            t.suite == r.suite && t.workload == r.workload && t.metric.name == r.metric.name
        });
        let table = match existing {
            Some(t) => t,
            None => {
                out.push(Table {
                    suite: &r.suite,
                    workload: &r.workload,
                    metric: &r.metric,
                    varying: Vec::new(),
                    constant: Vec::new(),
                    columns: Vec::new(),
                    subjects: Vec::new(),
                    records: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        if !table.columns.contains(&&r.params) {
            table.columns.push(&r.params);
        }
        if !table.subjects.iter().any(|(s, _)| *s == r.subject) {
            table.subjects.push((&r.subject, r.peer));
        }
        table.records.push(r);
    }
    for t in &mut out {
        let mut keys: Vec<&String> = Vec::new();
        for c in &t.columns {
            for k in c.keys() {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        for k in keys {
            let first = t.columns[0].get(k);
            if t.columns.iter().all(|c| c.get(k) == first) {
                if let Some(v) = first {
                    t.constant.push(format!("{k}={}", plain(v)));
                }
            } else {
                t.varying.push(k.clone());
            }
        }
    }
    out
}

/// A number with three significant digits and an SI suffix: `12.3 M`, `845`, `3.10`.
pub fn human(x: f64) -> String {
    let (v, suffix) = match x.abs() {
        a if a >= 1e9 => (x / 1e9, " G"),
        a if a >= 1e6 => (x / 1e6, " M"),
        a if a >= 1e4 => (x / 1e3, " k"),
        _ => (x, ""),
    };
    let digits = match v.abs() {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        _ => 2,
    };
    format!("{v:.digits$}{suffix}")
}

fn direction(metric: &Metric) -> &'static str {
    match metric.better {
        Better::Lower => "lower is better",
        Better::Higher => "higher is better",
    }
}

/// The ratio rows of one table: `(ours, peer, ratio per column)`.
fn ratio_rows<'a>(
    report: &'a Report,
    t: &Table<'_>,
) -> Vec<(&'a str, &'a str, Vec<Option<&'a Ratio>>)> {
    let mut rows: Vec<(&str, &str, Vec<Option<&Ratio>>)> = Vec::new();
    for r in report.ratios.iter().filter(|r| {
        r.suite == t.suite && r.workload == t.workload && r.metric.name == t.metric.name
    }) {
        let col = t.columns.iter().position(|c| **c == r.params);
        let idx = match rows
            .iter()
            .position(|(o, p, _)| *o == r.ours && *p == r.peer)
        {
            Some(i) => i,
            None => {
                rows.push((&r.ours, &r.peer, vec![None; t.columns.len()]));
                rows.len() - 1
            }
        };
        if let Some(c) = col {
            rows[idx].2[c] = Some(r);
        }
    }
    rows
}

/// `0.74× ✓ [0.61–1.08] 6/7`: the paired median, whether it favours ours, the range of the
/// per-round ratios and the rounds ours won.
fn ratio_cell(r: &Ratio) -> String {
    let mark = if r.ours_better { "✓" } else { "✗" };
    format!(
        "{:.2}× {mark} [{:.2}–{:.2}] {}/{}",
        r.ratio, r.ratio_min, r.ratio_max, r.rounds_won, r.rounds
    )
}

/// `⚠ busy 31%`: the share of the machine busy elsewhere while a case ran.
fn busy_mark(b: &Busy) -> String {
    format!("⚠ busy {:.0}%", b.elsewhere_pct())
}

/// How a goal reads: ``spsc `throughput` (capacity=2048): pitlane::spsc ÷ rtrb, `ns_per_item` ``.
pub fn goal_label(g: &GoalResult) -> String {
    goal_name(&g.suite, &g.goal)
}

fn goal_name(suite: &str, goal: &Goal) -> String {
    let params = if goal.params.is_empty() {
        String::new()
    } else {
        format!(" ({})", plain_params(&goal.params))
    };
    let versus = match &goal.peer {
        Some(peer) => format!("{} ÷ {peer}", goal.ours),
        None => goal.ours.clone(),
    };
    format!(
        "{suite} `{}`{params}: {versus}, `{}`",
        goal.workload, goal.metric
    )
}

/// A declared goal in one line, with its target and the issue that set it (for `--list`).
///
/// ```
/// use pitlane_bench::results::{Better, Goal, Metric, params};
///
/// let rtt = Metric::new("ns_per_round_trip", "ns", Better::Lower);
/// let goal = Goal::ratio("rtt", params! {}, &rtt, "pitlane::spsc", "rtrb", 1.1).from_issue(4);
/// assert_eq!(
///     pitlane_bench::report::goal_text("spsc", &goal),
///     "spsc `rtt`: pitlane::spsc ÷ rtrb, `ns_per_round_trip` ≤ 1.10× (issue 4)"
/// );
/// ```
pub fn goal_text(suite: &str, goal: &Goal) -> String {
    let issue = goal
        .issue
        .map_or(String::new(), |i| format!(" (issue {i})"));
    format!("{} {}{issue}", goal_name(suite, goal), target_text(goal))
}

fn plain_params(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={}", plain(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The goal's target as read: `≤ 0.80×`, `≥ 1.20×`, `≥ 100 k histories/CPU-s` (a figure
/// without a peer).
fn target_text(goal: &Goal) -> String {
    let sign = match goal.better {
        Better::Lower => "≤",
        Better::Higher => "≥",
    };
    match goal.peer {
        Some(_) => format!("{sign} {:.2}×", goal.target),
        None => format!("{sign} {} {}", human(goal.target), goal.unit),
    }
}

/// The cells of one goal row: target, median [min–max], rounds won, verdict.
fn goal_cells(g: &GoalResult) -> [String; 4] {
    let Some(m) = g.measured else {
        return [
            target_text(&g.goal),
            "–".into(),
            "–".into(),
            "not run".into(),
        ];
    };
    let figure = |x: f64| match g.goal.peer {
        Some(_) => format!("{x:.2}"),
        None => human(x),
    };
    let median = format!("{} [{}–{}]", figure(m.median), figure(m.min), figure(m.max));
    let verdict = g.verdict().map_or("–", Verdict::as_str).to_string();
    let verdict = match g.busy {
        Some(b) if b.is_busy() => format!("{verdict} {}", busy_mark(&b)),
        _ => verdict,
    };
    [
        target_text(&g.goal),
        median,
        format!("{}/{}", m.won, m.rounds),
        verdict,
    ]
}

/// The lines that say how busy the machine was with other work.
fn busy_lines(report: &Report) -> Vec<String> {
    let Some(b) = &report.busy else {
        return vec!["How busy the machine was: not known (no /proc).".into()];
    };
    let cases = report.case_busy.len();
    let busy = report.case_busy.iter().filter(|c| c.busy.is_busy()).count();
    let worst = report
        .case_busy
        .iter()
        .map(|c| c.busy.elsewhere_pct())
        .fold(0.0_f64, f64::max);
    let mut line = format!(
        "Busy elsewhere during the run: other processes took {:.1}% of the machine's CPU time \
         and the hypervisor stole {:.1}% (`/proc/stat`; this process not counted); highest \
         one-minute load average {:.2}. ",
        b.other_cpu_pct, b.steal_pct, b.load_avg
    );
    if busy == 0 {
        let _ = write!(
            line,
            "No workload of {cases} ran while more than {:.0}% of the machine was busy \
             elsewhere (the busiest: {worst:.0}%).",
            crate::busy::BUSY_LIMIT_PCT
        );
    } else {
        let _ = write!(
            line,
            "{busy} of {cases} workloads ran while more than {:.0}% of the machine was busy \
             elsewhere (the busiest: {worst:.0}%); they are marked ⚠ busy, and their figures say \
             little.",
            crate::busy::BUSY_LIMIT_PCT
        );
    }
    vec![line]
}

fn header_lines(report: &Report) -> Vec<String> {
    let m = &report.machine;
    let rounds = report.rounds;
    let mut lines = vec![
        format!(
            "pitlane {} at commit `{}`",
            env!("CARGO_PKG_VERSION"),
            m.git_commit
        ),
        format!("{} — {} cores — {} — {}", m.cpu, m.cores, m.os, m.rustc),
        format!(
            "{} run: each cell is the median of {rounds} interleaved rounds after a discarded \
             warm-up round, with [min–max]. Ratios are paired: ours ÷ peer within each round, \
             then the median of those per-round ratios with their [min–max] and the rounds ours \
             won (✓: the median favours ours in the metric's direction). A goal is met when \
             the median meets its target and at least two thirds of the rounds met it, unsure \
             when only the median does. One run decides nothing: compare several.",
            if report.quick { "`--quick`" } else { "Full" }
        ),
    ];
    for (when, state) in &report.machine_states {
        lines.push(format!("Machine state {when}: {}.", state.describe()));
    }
    lines.extend(busy_lines(report));
    lines
}

/// Where a run's files went.
#[derive(Debug, Clone)]
pub struct Written {
    /// The output directory.
    pub dir: PathBuf,
    /// `results.json`, or the `--json` path.
    pub json: PathBuf,
}

/// Writes `report.md`, `report.html` and `results.json` into `dir` (created if missing), and
/// the JSON also to `json` when given.
pub fn write(report: &Report, dir: &Path, json: Option<&Path>) -> std::io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("report.md"), markdown(report))?;
    std::fs::write(dir.join("report.html"), html(report))?;
    let text = serde_json::to_string_pretty(&report.to_json()).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("results.json"), &text)?;
    let json_path = match json {
        Some(p) => {
            std::fs::write(p, &text)?;
            p.to_path_buf()
        }
        None => dir.join("results.json"),
    };
    Ok(Written {
        dir: dir.to_path_buf(),
        json: json_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Better, Goal, params};
    use crate::runner::{Bench, Case, RunConfig, Subject};

    fn sample_report() -> Report {
        let mut bench = Bench::new(RunConfig::quick());
        bench.begin_suite("demo");
        bench.note("timed with `Instant`");
        let m = Metric::new("ops_per_s", "ops/s", Better::Higher);
        bench.goal(Goal::ratio(
            "w",
            params! {"threads" => 2},
            &m,
            "pitlane::x",
            "std<x>",
            1.5,
        ));
        bench.goal(Goal::ratio(
            "w",
            params! {"threads" => 3},
            &m,
            "pitlane::x",
            "std<x>",
            1.5,
        ));
        for t in [1, 2, 64] {
            let m = Metric::new("ops_per_s", "ops/s", Better::Higher);
            let case = Case::new("w", params! {"threads" => t, "size" => 64}, vec![m])
                .subject(Subject::ours("pitlane::x", move || {
                    Ok(vec![2e6 * t as f64])
                }))
                .subject(Subject::peer("std<x>", move || Ok(vec![1e6 * t as f64])));
            bench.measure(case).unwrap();
        }
        bench.machine_state(
            "before",
            crate::env::MachineState {
                parallel_speedup: 1.97,
                round_trip_ns: 312.0,
            },
        );
        bench.finish()
    }

    #[test]
    fn markdown_has_tables_ratios_and_oversubscription() {
        let md = markdown(&sample_report());
        assert!(md.contains("## Suite `demo`"), "{md}");
        assert!(md.contains("Parameters: size=64"), "{md}");
        assert!(md.contains("threads=64 (oversubscribed)"), "{md}");
        assert!(
            md.contains("| **pitlane::x** | 2.00 M [2.00 M–2.00 M] |"),
            "{md}"
        );
        assert!(
            md.contains("| pitlane::x ÷ std<x> | 2.00× ✓ [2.00–2.00] 5/5 |"),
            "{md}"
        );
        let goals = md.find("## Goals").expect("a goal section");
        assert!(
            goals < md.find("## Suite").unwrap(),
            "goals come first: {md}"
        );
        assert!(
            md.contains(
                "| demo `w` (threads=2): pitlane::x ÷ std<x>, `ops_per_s` | ≥ 1.50× | 2.00 [2.00–2.00] | 5/5 | met"
            ),
            "{md}"
        );
        assert!(md.contains("| not run |"), "{md}");
        assert!(md.contains("Busy elsewhere during the run"), "{md}");
        assert!(md.contains("timed with `Instant`"), "{md}");
        assert!(
            md.contains("Machine state before: two spinning threads did 1.97× the work of one (two cores); cache-line round trip between two threads 312 ns"),
            "{md}"
        );
    }

    #[test]
    fn a_case_measured_on_a_busy_machine_is_marked() {
        let mut report = sample_report();
        let busy = Busy {
            steal_pct: 5.0,
            other_cpu_pct: 35.0,
            load_avg: 3.0,
        };
        for c in &mut report.case_busy {
            if c.params["threads"] == 2 {
                c.busy = busy;
            }
        }
        for g in &mut report.goals {
            if g.goal.params["threads"] == 2 {
                g.busy = Some(busy);
            }
        }
        let md = markdown(&report);
        assert!(md.contains("| threads=2 ⚠ busy 40% |"), "{md}");
        assert!(md.contains("| met ⚠ busy 40% |"), "{md}");
        assert!(html(&report).contains("threads=2 ⚠ busy 40%"));
    }

    #[test]
    fn html_is_self_contained_with_bar_and_line_charts() {
        let h = html(&sample_report());
        assert_eq!(h.matches("<svg").count(), 2, "one bar and one line chart");
        assert!(h.contains("std&lt;x&gt;"));
        assert!(!h.contains("<script src") && !h.contains("<link"));
        assert!(h.contains("<code>Instant</code>"));
    }

    /// A record with an infinite figure (a `Report` is plain data anyone can build) used to
    /// keep `html` drawing its chart for ever, so `pitlane bench` never wrote its report.
    #[test]
    fn a_figure_that_is_not_finite_leaves_out_its_charts_only() {
        let mut report = sample_report();
        report.records[0].max = f64::INFINITY;
        let started = std::time::Instant::now();
        let h = html(&report);
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        assert!(h.contains("(bar chart failed: pitlane::x's figure"), "{h}");
        assert!(h.contains("(line chart failed:"), "{h}");
        assert!(h.contains("</body></html>"));
    }

    #[test]
    fn human_numbers() {
        assert_eq!(human(12_345_678.0), "12.3 M");
        assert_eq!(human(845.0), "845");
        assert_eq!(human(3.1), "3.10");
        assert_eq!(human(45_000.0), "45.0 k");
    }
}
