//! `pitlane lincheck`: run a registered subject for many rounds and check every history.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use pitlane_lincheck::Settings;

use crate::UsageError;

/// Exit 0 when every history checked is linearizable; 1 with the timeline when one is not
/// (or when some history could not be decided); 2 on bad arguments.
#[derive(Args, Debug)]
pub struct LincheckArgs {
    /// The subject to check; see --list.
    subject: Option<String>,
    /// List the subjects and exit.
    #[arg(long)]
    list: bool,
    /// Threads per round, 1 to 64 [default: 4].
    #[arg(long, value_name = "T")]
    threads: Option<String>,
    /// Operations per thread per round, 1 to 1000 [default: 8].
    #[arg(long, value_name = "N")]
    ops: Option<String>,
    /// Rounds, each with a fresh structure [default: 1000].
    #[arg(long, value_name = "R")]
    rounds: Option<String>,
    /// Seed of round 0, decimal or 0x-hexadecimal [default: from the clock, printed].
    #[arg(long, value_name = "S")]
    seed: Option<String>,
}

/// Parses a whole number in `range`, or says which option was wrong.
fn parse_count(
    option: &str,
    text: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!(
            "malformed {option} '{text}': expected a whole number from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

/// Parses a seed: decimal, or hexadecimal after `0x`.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let parsed = match trimmed
        .strip_prefix("0x")
        .or_else(|| trimmed.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => trimmed.parse::<u64>(),
    };
    parsed.map_err(|_| {
        format!("malformed --seed '{text}': expected a 64-bit number, decimal or 0x-hexadecimal")
    })
}

fn clock_seed() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    now.as_secs().wrapping_mul(1_000_000_007) ^ u64::from(now.subsec_nanos())
}

pub fn run(args: LincheckArgs) -> Result<ExitCode, UsageError> {
    let registry = crate::queue_subjects::registry();
    if args.list {
        for entry in registry.entries() {
            let broken = if entry.broken {
                " (broken on purpose: expected to fail)"
            } else {
                ""
            };
            println!("{:<24} {}{broken}", entry.name, entry.about);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(name) = args.subject.as_deref() else {
        return Err(UsageError(
            "name a subject to check (see pitlane lincheck --list)".to_string(),
        ));
    };
    let entry = registry.get(name).ok_or_else(|| {
        let known: Vec<&str> = registry.entries().iter().map(|e| e.name).collect();
        UsageError(format!(
            "unknown subject '{name}' (known: {})",
            known.join(", ")
        ))
    })?;

    let defaults = Settings::default();
    let count = |option: &str, text: &Option<String>, default: u64, max: u64| {
        text.as_deref()
            .map(|t| parse_count(option, t, 1..=max))
            .transpose()
            .map(|n| n.unwrap_or(default))
            .map_err(UsageError)
    };
    let threads = count("--threads", &args.threads, defaults.threads as u64, 64)?;
    let ops = count("--ops", &args.ops, defaults.ops_per_thread as u64, 1000)?;
    let rounds = count("--rounds", &args.rounds, defaults.rounds, u64::MAX)?;
    let seed = match args.seed.as_deref() {
        Some(text) => parse_seed(text).map_err(UsageError)?,
        None => clock_seed(),
    };
    let settings = Settings {
        threads: threads as usize,
        ops_per_thread: ops as usize,
        rounds,
        seed,
        ..defaults
    };

    println!(
        "pitlane lincheck {name}: {rounds} rounds of {threads} threads x {ops} ops, seed {seed:#x}"
    );
    let summary = entry
        .run(&settings)
        .map_err(|e| UsageError(e.to_string()))?;
    if let Some(failure) = &summary.failure {
        println!("{}", failure.text);
        println!(
            "replay: pitlane lincheck {name} --threads {} --ops {} --seed {:#x}",
            failure.shape.threads, failure.shape.ops_per_thread, failure.seed
        );
        return Ok(ExitCode::from(1));
    }
    if summary.unknown > 0 {
        println!(
            "UNDECIDED: {} of {} histories could not be decided within the checker's budget; \
             use fewer threads or operations",
            summary.unknown, summary.rounds
        );
        return Ok(ExitCode::from(1));
    }
    println!("ok: all {} histories linearizable", summary.linearizable);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_in_decimal_and_hex() {
        assert_eq!(parse_seed("42"), Ok(42));
        assert_eq!(parse_seed("0x2a"), Ok(42));
        assert_eq!(parse_seed("0XFF"), Ok(255));
        assert_eq!(parse_seed("18446744073709551615"), Ok(u64::MAX));
        for bad in ["", "x", "0x", "-1", "0xg", "18446744073709551616"] {
            assert!(parse_seed(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn counts_in_range() {
        assert_eq!(parse_count("--threads", "4", 1..=64), Ok(4));
        for bad in ["0", "65", "four", "-2", ""] {
            assert!(parse_count("--threads", bad, 1..=64).is_err(), "{bad:?}");
        }
    }
}
