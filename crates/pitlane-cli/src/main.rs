//! The `pitlane` command.
//!
//! - `pitlane bench` — run benchmark suites and write the report (see `pitlane bench --help`).
//! - `pitlane lincheck` — check a subject for linearizability (see `pitlane lincheck --help`).
//! - `pitlane shm` — create, inspect, check, recover and remove file-backed slabs.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench_cmd;
mod lincheck_cmd;
mod queue_subjects;
mod shm_cmd;

/// pitlane: lock-free lanes for memory and messages, measured against their peers.
#[derive(Parser, Debug)]
#[command(name = "pitlane", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand, Debug)]
enum Commands {
    /// Run benchmark suites (ours beside the peers) and write report.md, report.html and results.json.
    Bench(bench_cmd::BenchArgs),
    /// Check a registered subject for linearizability over many rounds of random operations.
    Lincheck(lincheck_cmd::LincheckArgs),
    /// Create, inspect, check, recover and remove file-backed slabs.
    Shm(shm_cmd::ShmArgs),
}

/// A failure the user can fix: printed as one line, exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

fn main() -> ExitCode {
    // A child process of `pitlane bench alloc` (one allocator's pass, for its peak RSS):
    // started with PITLANE_ALLOC_CHILD set, it runs that pass and nothing else.
    if let Some(code) = pitlane_bench::suites::alloc::child_main() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // A child of the `malloc` bench suite (one C allocator preloaded): started with
    // PITLANE_MALLOC_CHILD set, it runs its workload and nothing else.
    if let Some(code) = pitlane_bench::suites::malloc::child_main() {
        return code;
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Commands::Bench(args) => bench_cmd::run(args),
        Commands::Lincheck(args) => lincheck_cmd::run(args),
        Commands::Shm(args) => shm_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(UsageError(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
