//! What machine and build produced a report.

use std::process::Command;

/// The environment of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Cores available to this process.
    pub cores: usize,
    /// Operating system and kernel.
    pub os: String,
    /// The compiler that built the benchmarks.
    pub rustc: String,
    /// The commit of the source tree, with `-dirty` when it had uncommitted changes.
    pub git_commit: String,
}

impl Machine {
    /// Reads the machine now.
    pub fn capture() -> Self {
        Self {
            cpu: cpu_model().unwrap_or_else(|| "unknown".into()),
            cores: cores(),
            os: os_name(),
            rustc: env!("PITLANE_RUSTC_VERSION").to_string(),
            git_commit: git_commit().unwrap_or_else(|| "unknown".into()),
        }
    }
}

/// Cores available to this process (1 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn os_name() -> String {
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string());
    match (pretty, kernel) {
        (Some(p), Some(k)) => format!("{p}, Linux {k}"),
        (Some(p), None) => p,
        (None, Some(k)) => format!("Linux {k}"),
        (None, None) => std::env::consts::OS.to_string(),
    }
}

fn git_commit() -> Option<String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("git")
        .args(["-C", dir, "rev-parse", "HEAD"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut commit = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let dirty = Command::new("git")
        .args(["-C", dir, "status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    if dirty {
        commit.push_str("-dirty");
    }
    Some(commit)
}
