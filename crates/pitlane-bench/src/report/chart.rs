//! The SVG charts of `report.html`, drawn with `plotters`: a bar chart per table (with the
//! min–max whiskers of the rounds) and a line chart where a workload sweeps thread counts.

use plotters::prelude::*;
use serde_json::Value;

use super::{Table, human};

const CHART_W: u32 = 1000;
const CHART_H: u32 = 380;
const LEGEND_W: u32 = 300;

fn plot_err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Draws the subject legend in the right-hand strip.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    subjects: &[(&str, bool)],
) -> Result<(), String> {
    for (i, (name, peer)) in subjects.iter().enumerate() {
        let y = 30 + 22 * i as i32;
        let color = Palette99::pick(i);
        area.draw(&Rectangle::new([(8, y - 6), (22, y + 6)], color.filled()))
            .map_err(plot_err)?;
        let label = if *peer {
            name.to_string()
        } else {
            format!("{name} (ours)")
        };
        area.draw(&Text::new(label, (28, y - 7), ("sans-serif", 13)))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// An error when a figure of the table is not a finite number: an axis up to infinity keeps
/// `plotters` from ever finishing the chart. (The runner refuses such figures; a `Report` may
/// also be built by hand.)
fn finite(t: &Table<'_>) -> Result<(), String> {
    match t
        .records
        .iter()
        .find(|r| ![r.median, r.min, r.max].iter().all(|v| v.is_finite()))
    {
        Some(r) => Err(format!(
            "{}'s figure {} [{}–{}] is not a finite number",
            r.subject, r.median, r.min, r.max
        )),
        None => Ok(()),
    }
}

/// A bar per subject and column, with the rounds' min–max as a whisker.
pub(super) fn bar_chart(t: &Table<'_>, cores: usize) -> Result<String, String> {
    finite(t)?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (CHART_W, CHART_H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, side) = root.split_horizontally(CHART_W - LEGEND_W);
        let groups: Vec<String> = t.columns.iter().map(|c| t.column_label(c, cores)).collect();
        let max = t
            .records
            .iter()
            .map(|r| r.max)
            .fold(0.0_f64, f64::max)
            .max(f64::MIN_POSITIVE);
        let n = groups.len();
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!("{} — {} ({})", t.workload, t.metric.name, t.metric.unit),
                ("sans-serif", 17),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(72)
            .build_cartesian_2d(-0.5_f64..(n as f64 - 0.5), 0_f64..max * 1.08)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.max(2))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < groups.len() {
                    groups[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| human(*y))
            .y_desc(t.metric.unit)
            .draw()
            .map_err(plot_err)?;
        let k = t.subjects.len().max(1) as f64;
        let width = 0.8 / k;
        for (si, (subject, _)) in t.subjects.iter().enumerate() {
            let color = Palette99::pick(si);
            let bars = t.columns.iter().enumerate().filter_map(|(gi, c)| {
                let r = t.cell(subject, c)?;
                let x0 = gi as f64 - 0.4 + width * si as f64;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.9, r.median)],
                    color.filled(),
                ))
            });
            chart.draw_series(bars).map_err(plot_err)?;
            // The min–max range of the rounds, as a thin whisker on each bar.
            let whiskers = t.columns.iter().enumerate().filter_map(|(gi, c)| {
                let r = t.cell(subject, c)?;
                let x = gi as f64 - 0.4 + width * si as f64 + width * 0.45;
                Some(PathElement::new(vec![(x, r.min), (x, r.max)], BLACK))
            });
            chart.draw_series(whiskers).map_err(plot_err)?;
        }
        legend(&side, &t.subjects)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// A line per subject over the thread counts of the columns.
pub(super) fn line_chart(t: &Table<'_>, cores: usize) -> Result<String, String> {
    finite(t)?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (CHART_W, CHART_H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, side) = root.split_horizontally(CHART_W - LEGEND_W);
        let threads: Vec<f64> = t
            .columns
            .iter()
            .map(|c| c.get("threads").and_then(Value::as_f64).unwrap_or(0.0))
            .collect();
        let (lo, hi) = threads
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        let max = t
            .records
            .iter()
            .map(|r| r.median)
            .fold(0.0_f64, f64::max)
            .max(f64::MIN_POSITIVE);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!("{} — {} by thread count", t.workload, t.metric.name),
                ("sans-serif", 17),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(72)
            .build_cartesian_2d((lo - 0.3)..(hi + 0.3), 0_f64..max * 1.08)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(format!("threads ({cores} cores; more oversubscribes)"))
            .y_desc(t.metric.unit)
            .y_label_formatter(&|y| human(*y))
            .x_labels(((hi - lo) as usize + 1).clamp(2, 16))
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-6 {
                    format!("{x:.0}")
                } else {
                    String::new()
                }
            })
            .draw()
            .map_err(plot_err)?;
        for (si, (subject, _)) in t.subjects.iter().enumerate() {
            let color = Palette99::pick(si);
            let points: Vec<(f64, f64)> = t
                .columns
                .iter()
                .zip(&threads)
                .filter_map(|(c, &x)| Some((x, t.cell(subject, c)?.median)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(plot_err)?;
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 4, color.filled())),
                )
                .map_err(plot_err)?;
        }
        legend(&side, &t.subjects)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}
