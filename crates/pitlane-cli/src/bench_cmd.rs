//! `pitlane bench`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use pitlane_bench::env::MachineState;
use pitlane_bench::runner::{Bench, RunConfig};
use pitlane_bench::suites::{self, Suite};

use crate::UsageError;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Suites to run (all when none is named); see --list.
    suites: Vec<String>,
    /// List the suites and their workloads, and exit.
    #[arg(long)]
    list: bool,
    /// Reduced sizes and shorter rounds (5 of them); every workload and subject still runs.
    #[arg(long)]
    quick: bool,
    /// Measured rounds per workload (after the warm-up), instead of 5 (--quick) or 7.
    #[arg(long, value_name = "N")]
    rounds: Option<String>,
    /// Print only the goal table (met, missed or unsure per goal) on stdout; the report is still
    /// written. Exits 0 whatever the verdicts: it is a report, not a gate.
    #[arg(long)]
    goals: bool,
    /// Thread counts for workloads that sweep them, e.g. 1,2,4.
    #[arg(long, value_name = "LIST")]
    threads: Option<String>,
    /// Measure only the subjects whose name contains one of these strings (comma-separated,
    /// ignoring case), e.g. `--subjects mpmc,SegQueue`; ratios need both sides present.
    #[arg(long, value_name = "LIST")]
    subjects: Option<String>,
    /// Also write results.json to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Directory for report.md, report.html and results.json.
    #[arg(long, value_name = "DIR", default_value = "target/pitlane-report")]
    out: PathBuf,
}

/// Parses `mpmc,SegQueue`: non-empty name fragments separated by commas.
pub fn parse_subjects(list: &str) -> Result<Vec<String>, String> {
    let parts: Vec<String> = list.split(',').map(|p| p.trim().to_string()).collect();
    if parts.iter().any(String::is_empty) {
        return Err(format!(
            "--subjects {list:?}: expected comma-separated parts of subject names, none empty \
             (e.g. --subjects mpmc,SegQueue)"
        ));
    }
    Ok(parts)
}

/// Parses a round count: 1 to 1000.
pub fn parse_rounds(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(n),
        _ => Err(format!(
            "malformed round count '{text}': expected a number of rounds from 1 to 1000 \
             (e.g. --rounds 9)"
        )),
    }
}

/// Parses `1,2,4`: positive integers separated by commas, none twice (a thread count named
/// twice would measure its cases twice, and the report cannot pair two measurements' rounds).
pub fn parse_threads(list: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in list.split(',') {
        let part = part.trim();
        match part.parse::<usize>() {
            Ok(n) if out.contains(&n) => {
                return Err(format!(
                    "malformed thread list '{list}': thread count {n} is given twice \
                     (expected e.g. --threads 1,2,4)"
                ));
            }
            Ok(n) if (1..=1024).contains(&n) => out.push(n),
            _ => {
                return Err(format!(
                    "malformed thread list '{list}': '{part}' is not a thread count from 1 to 1024 \
                     (expected e.g. --threads 1,2,4)"
                ));
            }
        }
    }
    Ok(out)
}

fn check_writable_dir(dir: &Path) -> Result<(), String> {
    let fail =
        |e: std::io::Error| format!("output directory '{}' is not writable: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(".pitlane-write-probe");
    std::fs::write(&probe, b"").map_err(fail)?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

fn check_writable_file(file: &Path) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .map(drop)
        .map_err(|e| format!("JSON file '{}' is not writable: {e}", file.display()))
}

pub fn run(args: BenchArgs) -> Result<ExitCode, UsageError> {
    let all = suites::all();
    if args.list {
        for suite in &all {
            println!("{} — {}", suite.name(), suite.about());
            for w in suite.workloads() {
                println!("    {:<20} {}", w.name, w.about);
            }
            for goal in suite.goals() {
                println!(
                    "    goal: {}",
                    pitlane_bench::report::goal_text(suite.name(), &goal)
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let chosen: Vec<&dyn Suite> = if args.suites.is_empty() {
        all.iter().map(|s| s.as_ref()).collect()
    } else {
        let mut chosen: Vec<&dyn Suite> = Vec::new();
        for name in &args.suites {
            if chosen.iter().any(|s| s.name() == name) {
                return Err(UsageError(format!(
                    "suite '{name}' is named twice (each suite runs once per run)"
                )));
            }
            let suite = all.iter().find(|s| s.name() == name).ok_or_else(|| {
                let known: Vec<&str> = all.iter().map(|s| s.name()).collect();
                UsageError(format!(
                    "unknown suite '{name}' (known: {})",
                    known.join(", ")
                ))
            })?;
            chosen.push(suite.as_ref());
        }
        chosen
    };
    let threads = args
        .threads
        .as_deref()
        .map(parse_threads)
        .transpose()
        .map_err(UsageError)?;
    let subjects = args
        .subjects
        .as_deref()
        .map(parse_subjects)
        .transpose()
        .map_err(UsageError)?;
    let rounds = args
        .rounds
        .as_deref()
        .map(parse_rounds)
        .transpose()
        .map_err(UsageError)?;
    check_writable_dir(&args.out).map_err(UsageError)?;
    if let Some(json) = &args.json {
        check_writable_file(json).map_err(UsageError)?;
    }

    let mut bench = Bench::new(RunConfig {
        quick: args.quick,
        threads,
        subjects,
        rounds,
    });
    bench.machine_state("before the run", MachineState::probe());
    for suite in chosen {
        eprintln!("pitlane bench: running suite '{}'", suite.name());
        if let Err(e) = suites::run(&mut bench, suite) {
            eprintln!("error: benchmark aborted: {e}");
            return Ok(ExitCode::FAILURE);
        }
    }
    bench.machine_state("after the run", MachineState::probe());
    let report = bench.finish();
    if let Some(list) = &args.subjects
        && report.records.is_empty()
    {
        return Err(UsageError(format!(
            "--subjects {list:?}: no subject of the suites run has a name containing any of \
             these (see the subject names in a report)"
        )));
    }
    let written =
        pitlane_bench::report::write(&report, &args.out, args.json.as_deref()).map_err(|e| {
            UsageError(format!(
                "cannot write the report to '{}': {e}",
                args.out.display()
            ))
        })?;
    eprintln!(
        "pitlane bench: report in {}/report.md and report.html, results in {}",
        written.dir.display(),
        written.json.display()
    );
    if args.goals {
        print!("{}", pitlane_bench::report::goals_summary(&report));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{parse_rounds, parse_subjects, parse_threads};

    #[test]
    fn round_counts() {
        assert_eq!(parse_rounds("9"), Ok(9));
        for bad in ["", "0", "x", "-1", "1001", "2.5"] {
            assert!(parse_rounds(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn subject_lists_parse_and_empty_parts_are_rejected() {
        assert_eq!(
            parse_subjects("mpmc, SegQueue"),
            Ok(vec!["mpmc".to_string(), "SegQueue".to_string()])
        );
        for bad in ["", ",", "mpmc,", ",mpmc", "a,,b"] {
            assert!(parse_subjects(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn thread_lists() {
        assert_eq!(parse_threads("1,2,4"), Ok(vec![1, 2, 4]));
        assert_eq!(parse_threads(" 3 "), Ok(vec![3]));
        for bad in ["", "1,,2", "0", "x", "1;2", "-1", "2000", "2,2", "1,2,1"] {
            assert!(parse_threads(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
