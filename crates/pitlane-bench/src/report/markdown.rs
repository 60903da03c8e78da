//! `report.md`: the header, the goal table, and a table per suite, workload and metric with
//! its paired ratios.

use std::fmt::Write as _;

use super::{
    Table, direction, goal_cells, goal_label, header_lines, human, ratio_cell, ratio_rows, tables,
};
use crate::results::Report;

/// The goal table in markdown (what `pitlane bench --goals` prints and the report opens with).
pub fn goals_markdown(report: &Report) -> String {
    let mut md = String::new();
    if report.goals.is_empty() {
        md.push_str("No goals are declared by the suites run.\n");
        return md;
    }
    md.push_str(
        "| goal | target | median ratio [min–max] | rounds won | verdict |\n\
         |---|---:|---:|---:|---|\n",
    );
    for g in &report.goals {
        let [target, median, won, verdict] = goal_cells(g);
        let _ = writeln!(
            md,
            "| {} | {target} | {median} | {won} | {verdict} |",
            goal_label(g)
        );
    }
    md
}

/// What `pitlane bench --goals` prints: the commit and machine, how busy the machine was, and
/// the goal table.
pub fn goals_summary(report: &Report) -> String {
    let mut md = String::new();
    for line in header_lines(report) {
        let _ = writeln!(md, "- {line}");
    }
    md.push('\n');
    md.push_str(&goals_markdown(report));
    md
}

/// `report.md`.
pub fn markdown(report: &Report) -> String {
    let mut md = String::from("# pitlane bench report\n\n");
    for line in header_lines(report) {
        let _ = writeln!(md, "- {line}");
    }
    md.push_str("\n## Goals\n\n");
    md.push_str(&goals_markdown(report));
    let all = tables(report);
    for suite in &report.suites {
        let _ = writeln!(md, "\n## Suite `{suite}`\n");
        for note in report.notes.iter().filter(|n| &n.suite == suite) {
            let _ = writeln!(md, "{}\n", note.text);
        }
        for t in all.iter().filter(|t| t.suite == suite) {
            md.push_str(&markdown_table(report, t));
        }
    }
    md
}

/// The markdown of one table and its ratios (also what README.md quotes).
fn markdown_table(report: &Report, t: &Table<'_>) -> String {
    let cores = report.machine.cores;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "### {} — `{}` ({}, {})\n",
        t.workload,
        t.metric.name,
        t.metric.unit,
        direction(t.metric)
    );
    if !t.constant.is_empty() {
        let _ = writeln!(md, "Parameters: {}\n", t.constant.join(", "));
    }
    let _ = write!(md, "| subject |");
    for c in &t.columns {
        let _ = write!(md, " {} |", t.column_label_in(c, cores, Some(report)));
    }
    let _ = write!(md, "\n|---|");
    for _ in &t.columns {
        md.push_str("---:|");
    }
    md.push('\n');
    for (subject, peer) in &t.subjects {
        let label = if *peer {
            subject.to_string()
        } else {
            format!("**{subject}**")
        };
        let _ = write!(md, "| {label} |");
        for c in &t.columns {
            match t.cell(subject, c) {
                Some(r) => {
                    let _ = write!(
                        md,
                        " {} [{}–{}] |",
                        human(r.median),
                        human(r.min),
                        human(r.max)
                    );
                }
                None => md.push_str(" – |"),
            }
        }
        md.push('\n');
    }
    let rows = ratio_rows(report, t);
    if !rows.is_empty() {
        let _ = write!(md, "\n| ours ÷ peer |");
        for c in &t.columns {
            let _ = write!(md, " {} |", t.column_label(c, cores));
        }
        let _ = write!(md, "\n|---|");
        for _ in &t.columns {
            md.push_str("---:|");
        }
        md.push('\n');
        for (ours, peer, cells) in rows {
            let _ = write!(md, "| {ours} ÷ {peer} |");
            for cell in cells {
                match cell {
                    Some(r) => {
                        let _ = write!(md, " {} |", ratio_cell(r));
                    }
                    None => md.push_str(" – |"),
                }
            }
            md.push('\n');
        }
    }
    md.push('\n');
    md
}
