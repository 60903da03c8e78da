//! `report.html`: the same content as `report.md` in one self-contained page, with the charts
//! of [`super::chart`] inline.

use std::fmt::Write as _;

use super::chart::{bar_chart, line_chart};
use super::{
    direction, goal_cells, goal_label, header_lines, human, ratio_cell, ratio_rows, tables,
};
use crate::results::{Report, Verdict};

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Inline markdown a note may use (`code`), turned into HTML after escaping.
fn note_html(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in escape(text).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// `report.html`: the same tables, plus a bar chart per workload and metric and a line chart
/// where a workload sweeps thread counts, all inline SVG.
pub fn html(report: &Report) -> String {
    let cores = report.machine.cores;
    let mut h = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>pitlane bench report</title><style>\
         body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
         table{border-collapse:collapse;margin:.5em 0 1em}\
         td,th{border:1px solid #ccc;padding:.25em .6em}td{text-align:right}\
         td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}\
         .ours{font-weight:600}.good{color:#176b1a}.bad{color:#a31515}\
         .range{color:#777;font-size:.85em}.charts svg{max-width:100%;height:auto}\
         </style></head><body>\n<h1>pitlane bench report</h1>\n<ul>\n",
    );
    for line in header_lines(report) {
        let _ = writeln!(h, "<li>{}</li>", note_html(&line));
    }
    h.push_str("</ul>\n<h2>Goals</h2>\n");
    if report.goals.is_empty() {
        h.push_str("<p>No goals are declared by the suites run.</p>\n");
    } else {
        h.push_str(
            "<table><tr><th>goal</th><th>target</th><th>median ratio [min–max]</th>\
             <th>rounds won</th><th>verdict</th></tr>\n",
        );
        for g in &report.goals {
            let class = match g.verdict() {
                Some(Verdict::Met) => "good",
                Some(Verdict::Missed) => "bad",
                _ => "",
            };
            let _ = write!(h, "<tr><td>{}</td>", note_html(&goal_label(g)));
            let [target, median, won, verdict] = goal_cells(g);
            let _ = writeln!(
                h,
                "<td>{}</td><td>{}</td><td>{won}</td><td class=\"{class}\">{}</td></tr>",
                escape(&target),
                escape(&median),
                escape(&verdict)
            );
        }
        h.push_str("</table>\n");
    }
    let all = tables(report);
    for suite in &report.suites {
        let _ = writeln!(h, "<h2>Suite <code>{}</code></h2>", escape(suite));
        for note in report.notes.iter().filter(|n| &n.suite == suite) {
            let _ = writeln!(h, "<p>{}</p>", note_html(&note.text));
        }
        for t in all.iter().filter(|t| t.suite == suite) {
            let _ = writeln!(
                h,
                "<h3>{} — <code>{}</code> ({}, {})</h3>",
                escape(t.workload),
                escape(t.metric.name),
                escape(t.metric.unit),
                direction(t.metric)
            );
            if !t.constant.is_empty() {
                let _ = writeln!(h, "<p>Parameters: {}</p>", escape(&t.constant.join(", ")));
            }
            h.push_str("<div class=\"charts\">\n");
            match bar_chart(t, cores) {
                Ok(svg) => h.push_str(&svg),
                Err(e) => {
                    let _ = writeln!(h, "<p>(bar chart failed: {})</p>", escape(&e));
                }
            }
            if t.sweeps_threads() {
                match line_chart(t, cores) {
                    Ok(svg) => h.push_str(&svg),
                    Err(e) => {
                        let _ = writeln!(h, "<p>(line chart failed: {})</p>", escape(&e));
                    }
                }
            }
            h.push_str("</div>\n<table><tr><th>subject</th>");
            for c in &t.columns {
                let label = t.column_label_in(c, cores, Some(report));
                let _ = write!(h, "<th>{}</th>", escape(&label));
            }
            h.push_str("</tr>\n");
            for (subject, peer) in &t.subjects {
                let class = if *peer { "" } else { " class=\"ours\"" };
                let _ = write!(h, "<tr><td{class}>{}</td>", escape(subject));
                for c in &t.columns {
                    match t.cell(subject, c) {
                        Some(r) => {
                            let _ = write!(
                                h,
                                "<td>{} <span class=\"range\">[{}–{}]</span></td>",
                                human(r.median),
                                human(r.min),
                                human(r.max)
                            );
                        }
                        None => h.push_str("<td>–</td>"),
                    }
                }
                h.push_str("</tr>\n");
            }
            h.push_str("</table>\n");
            let rows = ratio_rows(report, t);
            if !rows.is_empty() {
                h.push_str("<table><tr><th>ours ÷ peer</th>");
                for c in &t.columns {
                    let _ = write!(h, "<th>{}</th>", escape(&t.column_label(c, cores)));
                }
                h.push_str("</tr>\n");
                for (ours, peer, cells) in rows {
                    let _ = write!(h, "<tr><td>{} ÷ {}</td>", escape(ours), escape(peer));
                    for cell in cells {
                        match cell {
                            Some(r) => {
                                let class = if r.ours_better { "good" } else { "bad" };
                                let _ = write!(h, "<td class=\"{class}\">{}</td>", ratio_cell(r));
                            }
                            None => h.push_str("<td>–</td>"),
                        }
                    }
                    h.push_str("</tr>\n");
                }
                h.push_str("</table>\n");
            }
        }
    }
    h.push_str("</body></html>\n");
    h
}
