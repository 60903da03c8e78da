//! Records the compiler version and the source tree's commit for the report's environment
//! capture. The commit is read when the benchmarks are built, not when they run: a binary
//! copied away and run after the tree has moved on must still name the source it was built
//! from.
use std::path::Path;
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=PITLANE_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let root = Path::new(&manifest).join("../..");
    println!(
        "cargo:rustc-env=PITLANE_GIT_COMMIT={}",
        commit(&root).unwrap_or_else(|| "unknown".into())
    );
    // Read again when HEAD moves (a commit, a checkout) or any source of the workspace
    // changes (which may make the tree dirty or clean). Only existing paths: cargo would run
    // the script on every build for a missing one.
    let mut watched = vec![
        root.join("crates"),
        root.join("Cargo.toml"),
        root.join("Cargo.lock"),
    ];
    for name in ["HEAD", "packed-refs"] {
        watched.extend(git(&root, &["rev-parse", "--git-path", name]).map(|p| root.join(p)));
    }
    if let Some(branch) = git(&root, &["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git(&root, &["rev-parse", "--git-path", &branch]).map(|p| root.join(p)));
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// The commit of the tree at `root`, with `-dirty` when tracked files have uncommitted
/// changes.
fn commit(root: &Path) -> Option<String> {
    let mut commit = git(root, &["rev-parse", "HEAD"])?;
    let dirty = run_git(root, &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|stdout| !stdout.is_empty());
    if dirty {
        commit.push_str("-dirty");
    }
    Some(commit)
}

/// `git -C root args…`'s first line of output, if it succeeded.
fn git(root: &Path, args: &[&str]) -> Option<String> {
    let text = String::from_utf8(run_git(root, args)?).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// `git -C root args…`'s standard output, if it ran and succeeded.
fn run_git(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}
