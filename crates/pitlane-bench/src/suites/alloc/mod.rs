//! Suite `alloc`: general-purpose allocators on the Vec workloads of "Fun with the Rust Alloc
//! trait" (the elfmalloc post) and on Rust versions of the classic C allocator benchmarks.
//!
//! Subjects: the C library's allocator (`system`, glibc here), `jemalloc`
//! (`tikv-jemallocator`) and `mimalloc` (the `mimalloc` crate), each as an
//! `allocator_api2::alloc::Allocator` (see [`subjects`]), so that one generic workload runs
//! every allocator in the same process, interleaved round by round like every other suite;
//! and pitlane's own, `pitlane_alloc::PitlaneAlloc`, which implements that trait itself.
//!
//! Workloads (see [`workloads`] for what each does and checks), each at 1 and 2 threads:
//! - `vec_small`, `vec_medium`, `vec_large`: the post's three, through
//!   `allocator_api2::vec::Vec<_, A>`;
//! - `larson`: server churn, blocks freed by threads other than their allocator's, and by
//!   threads that outlive the one that allocated them;
//! - `xmalloc`: allocating threads feed freeing threads through bounded channels (2 threads
//!   and more);
//! - `cache_scratch`: passive false sharing between threads' small objects;
//! - `random_churn`: a working set of random sizes from 8 B to 128 KiB, replaced at random.
//!
//! Metrics: `ns_per_iter`, the wall time of a pass divided by one thread's iterations,
//! measured in this process; and `peak_rss_kib`, the peak resident set of a separate process
//! that ran the same pass with that allocator alone (this program started again, told by the
//! `PITLANE_ALLOC_CHILD` environment variable which pass to run; it reports its own
//! peak, `VmHWM`), so that one allocator's cached or retained memory never counts
//! against another. `start_rss_kib`, the child's resident set before its pass began (the
//! program itself), is recorded beside it without ratios. Goals, from issue 19: pitlane at
//! most 0.9× the best peer's `ns_per_iter` and at most 1.5× the lowest peer's
//! `peak_rss_kib` on every workload, each round against that round's best peer.

use super::{Suite, Workload};
use crate::results::{Better, Goal, Metric, params};
use crate::runner::{Bench, BenchError, Case, Subject};

pub mod subjects;
pub mod workloads;

use subjects::{AllocSubject, JemallocAlloc, MimallocAlloc, SystemAlloc};
use workloads::{Pass, Size};

/// The suite.
pub struct AllocSuite;

/// Our subject's name in the report.
pub const OURS: &str = "pitlane_alloc::PitlaneAlloc";
/// The peers, in report order.
pub const PEERS: [&str; 3] = ["system", "jemalloc", "mimalloc"];

/// The environment variable that makes a process run one pass as a child of the suite.
pub const CHILD_ENV: &str = "PITLANE_ALLOC_CHILD";
/// The line a child prints its figures on.
const CHILD_MARK: &str = "pitlane-alloc-child:";

/// A workload of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The post's small Vecs.
    VecSmall,
    /// The post's medium Vec.
    VecMedium,
    /// The post's Vec of 8 KiB arrays.
    VecLarge,
    /// larson-like churn with frees by other threads.
    Larson,
    /// xmalloc-like producers and consumers.
    Xmalloc,
    /// cache-scratch-like false sharing.
    CacheScratch,
    /// Random sizes replaced at random.
    RandomChurn,
}

impl Kind {
    /// Every workload, in report order.
    pub const ALL: [Kind; 7] = [
        Kind::VecSmall,
        Kind::VecMedium,
        Kind::VecLarge,
        Kind::Larson,
        Kind::Xmalloc,
        Kind::CacheScratch,
        Kind::RandomChurn,
    ];

    /// Its stable name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::VecSmall => "vec_small",
            Kind::VecMedium => "vec_medium",
            Kind::VecLarge => "vec_large",
            Kind::Larson => "larson",
            Kind::Xmalloc => "xmalloc",
            Kind::CacheScratch => "cache_scratch",
            Kind::RandomChurn => "random_churn",
        }
    }

    fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The size of a pass: full or quick.
    pub fn size(self, quick: bool) -> Size {
        let pick = |full: u64, q: u64| if quick { q } else { full };
        match self {
            Kind::VecSmall => Size {
                iters: pick(16_000, 8000),
                slots: 0,
                rounds: 0,
            },
            Kind::VecMedium => Size {
                iters: pick(60, 30),
                slots: 0,
                rounds: 0,
            },
            Kind::VecLarge => Size {
                iters: pick(30, 15),
                slots: 0,
                rounds: 0,
            },
            Kind::Larson => Size {
                iters: pick(100_000, 50_000),
                slots: pick(2000, 1000),
                rounds: pick(8, 4),
            },
            Kind::Xmalloc => Size {
                iters: pick(800_000, 400_000),
                slots: 0,
                rounds: 0,
            },
            Kind::CacheScratch => Size {
                iters: pick(8000, 4000),
                slots: 0,
                rounds: pick(5000, 5000),
            },
            Kind::RandomChurn => Size {
                iters: pick(1_200_000, 600_000),
                slots: pick(4096, 2048),
                rounds: 0,
            },
        }
    }

    /// The smallest thread count it runs at.
    pub fn min_threads(self) -> usize {
        match self {
            Kind::Xmalloc => 2,
            _ => 1,
        }
    }

    /// Runs one pass of this workload with allocator `A`.
    pub fn pass<A: AllocSubject>(self, size: &Size, threads: usize) -> Result<Pass, String> {
        match self {
            Kind::VecSmall => workloads::vec_small::<A>(size, threads),
            Kind::VecMedium => workloads::vec_medium::<A>(size, threads),
            Kind::VecLarge => workloads::vec_large::<A>(size, threads),
            Kind::Larson => workloads::larson::<A>(size, threads),
            Kind::Xmalloc => workloads::xmalloc::<A>(size, threads),
            Kind::CacheScratch => workloads::cache_scratch::<A>(size, threads),
            Kind::RandomChurn => workloads::random_churn::<A>(size, threads),
        }
    }
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "vec_small",
        about: "8x (new Vec, 500 usize pushes, drop) per iteration; ns and peak RSS at 1/2 threads",
    },
    Workload {
        name: "vec_medium",
        about: "a 16 Ki-element Vec then 500,000 pushes per iteration; ns and peak RSS at 1/2 threads",
    },
    Workload {
        name: "vec_large",
        about: "1,000 pushes of [usize; 1024] per iteration; ns and peak RSS at 1/2 threads",
    },
    Workload {
        name: "larson",
        about: "larson-like churn, 8-1000 B, arrays passed between thread generations; ns per \
                replacement and peak RSS at 1/2 threads",
    },
    Workload {
        name: "xmalloc",
        about: "xmalloc-like: producers allocate 16-128 B, consumers free; ns per block and peak \
                RSS at 2 threads",
    },
    Workload {
        name: "cache_scratch",
        about: "cache-scratch-like false sharing of 8 B objects; ns per allocate-write-free and \
                peak RSS at 1/2 threads",
    },
    Workload {
        name: "random_churn",
        about: "random sizes 8 B-128 KiB replaced at random; ns per replacement and peak RSS at \
                1/2 threads",
    },
];

fn time_metric() -> Metric {
    Metric::new("ns_per_iter", "ns", Better::Lower)
}

fn rss_metric() -> Metric {
    Metric::new("peak_rss_kib", "KiB", Better::Lower)
}

fn start_rss_metric() -> Metric {
    Metric::new("start_rss_kib", "KiB", Better::Lower).without_ratios()
}

/// One allocator as the suite runs it: its name, whether it is a peer, and its passes.
#[derive(Clone, Copy)]
pub struct Entry {
    /// Name in the report.
    pub name: &'static str,
    /// Whether a peer.
    pub peer: bool,
    /// One pass of a workload.
    pub pass: fn(Kind, &Size, usize) -> Result<Pass, String>,
}

fn entry<A: AllocSubject>() -> Entry {
    Entry {
        name: A::NAME,
        peer: A::PEER,
        pass: |kind, size, threads| kind.pass::<A>(size, threads),
    }
}

/// Every subject, ours first.
pub fn entries() -> Vec<Entry> {
    vec![
        entry::<pitlane_alloc::PitlaneAlloc>(),
        entry::<SystemAlloc>(),
        entry::<JemallocAlloc>(),
        entry::<MimallocAlloc>(),
    ]
}

/// One round of one subject: a pass in this process for the time, then the same pass in a
/// child process for the resident set; the values of the case's three metrics.
fn round(e: Entry, kind: Kind, size: Size, threads: usize) -> Result<Vec<f64>, String> {
    let ns = (e.pass)(kind, &size, threads)?.ns_per_iter();
    let child = run_child(e.name, kind, &size, threads)?;
    Ok(vec![ns, child.peak_rss_kib, child.start_rss_kib])
}

/// What a child process reported.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChildFigures {
    /// Peak resident set over the child's life, KiB.
    pub peak_rss_kib: f64,
    /// Resident set just before its pass, KiB.
    pub start_rss_kib: f64,
}

/// The command that starts a child: this program again. Under `cargo test` the program is
/// the test binary, which runs the one test that hands over to [`child_main`].
fn child_command() -> Result<std::process::Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    #[allow(unused_mut)]
    let mut cmd = std::process::Command::new(exe);
    #[cfg(test)]
    cmd.args([
        "suites::alloc::tests::child_process_entry",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ]);
    Ok(cmd)
}

/// Runs one pass of `kind` with the subject `name` in a fresh process; its figures.
pub fn run_child(
    name: &str,
    kind: Kind,
    size: &Size,
    threads: usize,
) -> Result<ChildFigures, String> {
    let spec = format!(
        "{} {} {} {} {} {}",
        kind.name(),
        name,
        threads,
        size.iters,
        size.slots,
        size.rounds
    );
    let out = child_command()?
        .env(CHILD_ENV, &spec)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("starting a child process: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "the child process of `{spec}` failed: {}",
            out.status
        ));
    }
    let line = stdout
        .lines()
        .find_map(|l| l.split_once(CHILD_MARK).map(|(_, figures)| figures))
        .ok_or_else(|| format!("the child process of `{spec}` printed no figures"))?;
    let mut peak = None;
    let mut start = None;
    for field in line.split_whitespace() {
        match field.split_once('=') {
            Some(("peak_rss_kib", v)) => peak = v.parse().ok(),
            Some(("start_rss_kib", v)) => start = v.parse().ok(),
            _ => {}
        }
    }
    match (peak, start) {
        (Some(peak_rss_kib), Some(start_rss_kib)) => Ok(ChildFigures {
            peak_rss_kib,
            start_rss_kib,
        }),
        _ => Err(format!("the child process of `{spec}` printed `{line}`")),
    }
}

/// The child's side: when [`CHILD_ENV`] is set, runs the pass it names, prints the figures
/// and returns the exit code (0 when the pass was right); `None` when the variable is not set.
/// The `pitlane` command calls this before anything else.
pub fn child_main() -> Option<i32> {
    let spec = std::env::var(CHILD_ENV).ok()?;
    let start = rss_kib("VmRSS:");
    Some(match child_pass(&spec) {
        Ok(()) => match (peak_rss_kib(), start) {
            (Some(peak), Some(start)) => {
                println!("{CHILD_MARK} peak_rss_kib={peak} start_rss_kib={start}");
                0
            }
            _ => {
                eprintln!("alloc child: cannot read the resident set size");
                1
            }
        },
        Err(e) => {
            eprintln!("alloc child `{spec}`: {e}");
            1
        }
    })
}

fn child_pass(spec: &str) -> Result<(), String> {
    let f: Vec<&str> = spec.split_whitespace().collect();
    let [kind, name, threads, iters, slots, rounds] = f[..] else {
        return Err("malformed specification".into());
    };
    let kind = Kind::from_name(kind).ok_or("unknown workload")?;
    let entry = entries()
        .into_iter()
        .find(|e| e.name == name)
        .ok_or("unknown subject")?;
    let num = |s: &str| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
    let size = Size {
        iters: num(iters)?,
        slots: num(slots)?,
        rounds: num(rounds)?,
    };
    let threads = usize::try_from(num(threads)?).map_err(|e| e.to_string())?;
    (entry.pass)(kind, &size, threads).map(|_| ())
}

/// The peak resident set of this process, KiB: `VmHWM` of `/proc/self/status`, the high-water
/// mark of this program's own address space. (`getrusage`'s `ru_maxrss` would not do: Linux
/// carries it over from the address space the process had before `exec`, a copy of the
/// parent's.)
fn peak_rss_kib() -> Option<u64> {
    rss_kib("VmHWM:")
}

/// A `kB` line of `/proc/self/status`.
fn rss_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix(key))?;
    line.trim().strip_suffix("kB")?.trim().parse().ok()
}

impl Suite for AllocSuite {
    fn name(&self) -> &'static str {
        "alloc"
    }

    fn about(&self) -> &'static str {
        "pitlane_alloc beside system, jemalloc and mimalloc on the elfmalloc post's Vec workloads and larson/xmalloc/cache-scratch/churn"
    }

    fn workloads(&self) -> &'static [Workload] {
        WORKLOADS
    }

    /// Issue 19: on every workload at 1 and 2 threads, pitlane's time at most 0.9× the best
    /// peer's and its peak RSS at most 1.5× the lowest peer's.
    fn goals(&self) -> Vec<Goal> {
        let mut goals = Vec::new();
        for kind in Kind::ALL {
            for t in [1, 2].into_iter().filter(|&t| t >= kind.min_threads()) {
                for (metric, target) in [(time_metric(), 0.9), (rss_metric(), 1.5)] {
                    goals.push(
                        Goal::best_peer(
                            kind.name(),
                            params! {"threads" => t},
                            &metric,
                            OURS,
                            &PEERS,
                            target,
                        )
                        .from_issue(19),
                    );
                }
            }
        }
        goals
    }

    fn run(&self, bench: &mut Bench) -> Result<(), BenchError> {
        let quick = bench.config().quick;
        let threads = bench.config().threads(&[1, 2]);
        bench.note(format!(
            "`ns_per_iter` is the wall time of one pass (all threads, from their common start \
             to the last one's end) divided by the iterations of one thread, measured in this \
             process with every allocator reached through an `allocator_api2` handle; \
             `peak_rss_kib` is the peak resident set (`VmHWM`) of a fresh process that ran \
             the same pass with that allocator alone, and `start_rss_kib` that process's \
             resident set before the pass (the program itself, the same for every subject). \
             Threads beyond the machine's {} cores oversubscribe it. Every pass checks its \
             result (sums of what was pushed, stamps written into every block and checked \
             when it is freed).",
            crate::env::cores()
        ));
        for kind in Kind::ALL {
            let size = kind.size(quick);
            for &t in threads.iter().filter(|&&t| t >= kind.min_threads()) {
                let mut case = Case::new(
                    kind.name(),
                    params! {
                        "threads" => t,
                        "items" => size.iters,
                    },
                    vec![time_metric(), rss_metric(), start_rss_metric()],
                );
                for e in entries() {
                    let run = move || round(e, kind, size, t);
                    case.push(if e.peer {
                        Subject::peer(e.name, run)
                    } else {
                        Subject::ours(e.name, run)
                    });
                }
                bench.measure(case)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One in-process pass of `kind` with the first subject.
    fn one_pass(kind: Kind, size: &Size, threads: usize) -> Result<Pass, String> {
        (entries()[0].pass)(kind, size, threads)
    }

    /// Not a test: the entry point of the child processes the suite starts under `cargo test`
    /// (see `child_command`). Without the environment variable it does nothing.
    #[test]
    fn child_process_entry() {
        if let Some(code) = child_main() {
            std::process::exit(code);
        }
    }

    /// A small size of each workload, for tests.
    fn tiny(kind: Kind) -> Size {
        let s = kind.size(true);
        Size {
            iters: (s.iters / 20).max(2),
            slots: s.slots.min(64),
            rounds: s.rounds.min(50),
        }
    }

    #[test]
    fn every_subject_passes_every_workload_at_one_and_two_threads() {
        for e in entries() {
            for kind in Kind::ALL {
                for t in [1, 2, 3].into_iter().filter(|&t| t >= kind.min_threads()) {
                    (e.pass)(kind, &tiny(kind), t)
                        .unwrap_or_else(|err| panic!("{} {} t={t}: {err}", e.name, kind.name()));
                }
            }
        }
    }

    #[test]
    fn xmalloc_needs_two_threads() {
        let err = one_pass(Kind::Xmalloc, &tiny(Kind::Xmalloc), 1).unwrap_err();
        assert!(err.contains("at least 2 threads"), "{err}");
    }

    #[test]
    fn a_child_process_reports_its_peak_rss() {
        // One vec_large iteration grows a Vec to 8 MiB: the peak is at least that above the start.
        let size = Size {
            iters: 1,
            slots: 0,
            rounds: 0,
        };
        for e in entries() {
            let f = run_child(e.name, Kind::VecLarge, &size, 1)
                .unwrap_or_else(|err| panic!("{}: {err}", e.name));
            assert!(f.start_rss_kib > 0.0, "{}: {f:?}", e.name);
            assert!(
                f.peak_rss_kib >= f.start_rss_kib + 8.0 * 1024.0,
                "{}: {f:?}",
                e.name
            );
        }
    }

    #[test]
    fn a_child_that_is_given_nonsense_fails() {
        assert!(child_pass("vec_small nobody 1 1 0 0").is_err());
        assert!(child_pass("nothing system 1 1 0 0").is_err());
        assert!(child_pass("vec_small system").is_err());
    }

    #[test]
    fn the_goals_cover_every_workload_and_a_case_records_each_metric() {
        use crate::runner::RunConfig;
        let goals = AllocSuite.goals();
        // 7 workloads at 1 and 2 threads, less xmalloc at 1, times two metrics.
        assert_eq!(goals.len(), (7 * 2 - 1) * 2);
        assert!(goals.iter().all(|g| g.best_of.len() == PEERS.len()));
        let mut bench = Bench::new(RunConfig {
            threads: Some(vec![2]),
            rounds: Some(1),
            subjects: Some(vec!["system".into(), "mimalloc".into()]),
            ..RunConfig::quick()
        });
        bench.begin_suite("alloc");
        // Only the cheap workloads: the whole suite at quick size is the CI smoke run's.
        let size = tiny(Kind::RandomChurn);
        let mut case = Case::new(
            "random_churn",
            params! {"threads" => 2},
            vec![time_metric(), rss_metric(), start_rss_metric()],
        );
        for e in entries() {
            case.push(Subject::peer(e.name, move || {
                round(e, Kind::RandomChurn, size, 2)
            }));
        }
        bench.measure(case).unwrap();
        let report = bench.finish();
        let subjects: Vec<&str> = report
            .records
            .iter()
            .filter(|r| r.metric.name == "peak_rss_kib")
            .map(|r| r.subject.as_str())
            .collect();
        assert_eq!(subjects, ["system", "mimalloc"]);
        assert!(report.records.iter().all(|r| r.median > 0.0));
    }
}
