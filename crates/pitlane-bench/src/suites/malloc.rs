//! Suite `malloc`: pitlane-malloc as the C `malloc` of a program, beside glibc's, jemalloc's
//! and mimalloc's, on C-style workloads that call `malloc` and `free` through the C ABI.
//!
//! Every subject runs the same code: this binary, started again as a child process with
//! `LD_PRELOAD` naming the allocator's shared library (none for glibc), runs one workload and
//! prints its time, its peak resident set (`VmHWM`) and a checksum of the bytes it read
//! back. A pass per child keeps each allocator's memory to itself, and is the only way to
//! give several C allocators the same program: none of them can be linked into this process
//! without replacing its `malloc`. The libraries:
//!
//! - `pitlane-malloc`: `libpitlane_malloc.so` next to the `pitlane` binary
//!   (`cargo build --release -p pitlane-malloc`);
//! - jemalloc and mimalloc: Debian's packages `libjemalloc2` (5.3.0) and `libmimalloc2.0`
//!   (2.0.9), `/usr/lib/x86_64-linux-gnu/libjemalloc.so.2` and `libmimalloc.so.2`.
//!
//! A library that is not there leaves its subject out, with a note in the report.
//!
//! Workloads (sizes and seeds are the same for every subject):
//! - `glibc_simple`: one thread allocates 100 blocks of 16–64 bytes, writes each whole, then
//!   frees them, over and over (glibc's `bench-malloc-simple`); ns per malloc+free pair.
//! - `thread_churn`: two threads at a time are created, each allocates 2,000 blocks of
//!   16–512 bytes, frees half and hands the other half to the main thread, which frees them
//!   once the thread has exited; ns per malloc+free pair, thread creation included.
//! - `xmalloc`: one thread allocates blocks of 16–256 bytes and passes them, 256 at a time,
//!   to a second thread that reads and frees them (`xmalloc-test`); ns per block.
//! - `larson`: two threads each keep 1,000 live blocks of 16–1,024 bytes and replace a random
//!   one per step; every 20,000 steps a thread hands its blocks to a new thread, which goes on
//!   with them (`larson`'s server churn); ns per step.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::mpsc;
use std::time::Instant;

use super::{Suite, Workload};
use crate::results::{Better, Goal, Metric, params};
use crate::runner::{Bench, BenchError, Case, RunResult, Subject};

/// The suite.
pub struct MallocSuite;

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "glibc_simple",
        about: "1 thread: 100 blocks of 16-64 B allocated, written, freed, repeated; ns per pair",
    },
    Workload {
        name: "thread_churn",
        about: "threads created 2 at a time, 2,000 blocks each, half freed by the main thread",
    },
    Workload {
        name: "xmalloc",
        about: "1 thread allocates 16-256 B blocks, a second one frees them; ns per block",
    },
    Workload {
        name: "larson",
        about: "2 threads replace random blocks of 16-1024 B, handing them to new threads",
    },
];

/// The environment variable that turns this binary into a workload child.
const CHILD: &str = "PITLANE_MALLOC_CHILD";

const OURS: &str = "pitlane-malloc";
const GLIBC: &str = "glibc";
const JEMALLOC: &str = "jemalloc";
const MIMALLOC: &str = "mimalloc";
const JEMALLOC_SO: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
const MIMALLOC_SO: &str = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2";

fn ns_per_op() -> Metric {
    Metric::new("ns_per_op", "ns", Better::Lower)
}

fn peak_rss() -> Metric {
    Metric::new("peak_rss_kib", "KiB", Better::Lower)
}

impl Suite for MallocSuite {
    fn name(&self) -> &'static str {
        "malloc"
    }

    fn about(&self) -> &'static str {
        "pitlane-malloc preloaded beside glibc, jemalloc and mimalloc on C-style workloads"
    }

    fn workloads(&self) -> &'static [Workload] {
        WORKLOADS
    }

    /// Issue 20: at most 0.6x glibc's time on `glibc_simple`; at most 1.1x mimalloc's time on
    /// every workload; peak RSS at most 1.3x mimalloc's.
    fn goals(&self) -> Vec<Goal> {
        let mut goals = vec![Goal::ratio(
            "glibc_simple",
            params! {},
            &ns_per_op(),
            OURS,
            GLIBC,
            0.6,
        )];
        for workload in WORKLOADS {
            goals.push(Goal::ratio(
                workload.name,
                params! {},
                &ns_per_op(),
                OURS,
                MIMALLOC,
                1.1,
            ));
            goals.push(Goal::ratio(
                workload.name,
                params! {},
                &peak_rss(),
                OURS,
                MIMALLOC,
                1.3,
            ));
        }
        goals.into_iter().map(|g| g.from_issue(20)).collect()
    }

    fn run(&self, bench: &mut Bench) -> Result<(), BenchError> {
        let config = bench.config().clone();
        let allocators = allocators();
        bench.note(
            "Each subject is this binary started again as a child process, with `LD_PRELOAD` \
             naming the allocator's shared library (none for glibc 2.36's own malloc): the \
             same workload code calls `malloc` and `free` through the C ABI. Peak RSS is the \
             child's `VmHWM` (its own peak; `ru_maxrss` would carry the parent's across `exec`). jemalloc 5.3.0 and mimalloc 2.0.9 are Debian's packages \
             `libjemalloc2` and `libmimalloc2.0`; pitlane-malloc is `libpitlane_malloc.so` \
             beside the `pitlane` binary.",
        );
        for (name, library) in &allocators {
            if let Err(missing) = library {
                bench.note(format!("{name} left out: {missing}"));
            }
        }
        let scale: u64 = config.pick(4, 1);
        let cases: [(&'static str, u64); 4] = [
            ("glibc_simple", 2_000_000 * scale),
            ("thread_churn", 100 * scale),
            ("xmalloc", 1_000_000 * scale),
            ("larson", 500_000 * scale),
        ];
        for (workload, ops) in cases {
            let mut case = Case::new(workload, params! {}, vec![ns_per_op(), peak_rss()]);
            for (name, library) in &allocators {
                let Ok(library) = library else { continue };
                let library = library.clone();
                let run = move || run_child(workload, ops, library.as_deref());
                case.push(if *name == OURS {
                    Subject::ours(*name, run)
                } else {
                    Subject::peer(*name, run)
                });
            }
            bench.measure(case)?;
        }
        Ok(())
    }
}

/// Each subject with the library to preload (`None`: glibc's own malloc), or why it is
/// missing.
fn allocators() -> Vec<(&'static str, Result<Option<PathBuf>, String>)> {
    let ours = std::env::current_exe()
        .map_err(|e| format!("cannot find the pitlane binary: {e}"))
        .and_then(|exe| {
            let library = exe.with_file_name("libpitlane_malloc.so");
            if library.exists() {
                Ok(Some(library))
            } else {
                Err(format!(
                    "{} not found (build it with `cargo build --release -p pitlane-malloc`)",
                    library.display()
                ))
            }
        });
    let installed = |path: &str, package: &str| {
        if Path::new(path).exists() {
            Ok(Some(PathBuf::from(path)))
        } else {
            Err(format!("{path} not found (apt-get install {package})"))
        }
    };
    vec![
        (OURS, ours),
        (GLIBC, Ok(None)),
        (JEMALLOC, installed(JEMALLOC_SO, "libjemalloc2")),
        (MIMALLOC, installed(MIMALLOC_SO, "libmimalloc2.0")),
    ]
}

/// Runs `workload` in a child process on the allocator in `library`; returns ns per
/// operation and peak RSS in KiB.
fn run_child(workload: &str, ops: u64, library: Option<&Path>) -> RunResult {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut command = Command::new(exe);
    command.env(CHILD, format!("{workload}:{ops}"));
    match library {
        Some(library) => command.env("LD_PRELOAD", library),
        None => command.env_remove("LD_PRELOAD"),
    };
    let output = command
        .output()
        .map_err(|e| format!("starting the {workload} child: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.code() == Some(REFUSED_EXIT) {
        // The child's one line, in `crate::start`'s words.
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
    }
    if !output.status.success() {
        return Err(format!(
            "the {workload} child failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    child_figures(workload, ops, &stdout)
}

/// The figures of a child's line `ns_per_op peak_rss_kib checksum`, checked: the checksum must
/// be the expected one, the time and the resident set positive (a child that cannot read its
/// `VmHWM` prints -1, which is no figure).
fn child_figures(workload: &str, ops: u64, stdout: &str) -> RunResult {
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    let [ns, rss, checksum] = fields[..] else {
        return Err(format!("the {workload} child printed {stdout:?}"));
    };
    let parse = |text: &str| {
        text.parse::<f64>()
            .map_err(|e| format!("the {workload} child printed {text:?}: {e}"))
    };
    let expected = expected_checksum(workload, ops);
    if checksum != expected.to_string() {
        return Err(format!(
            "the {workload} child read back checksum {checksum}, expected {expected}: the \
             allocator handed out blocks that did not keep what was written"
        ));
    }
    let (ns, rss) = (parse(ns)?, parse(rss)?);
    if !(ns > 0.0 && rss > 0.0) {
        return Err(format!(
            "the {workload} child printed {stdout:?}: no time or no peak resident set"
        ));
    }
    Ok(vec![ns, rss])
}

/// A child's exit status when the OS would not start one of its threads.
const REFUSED_EXIT: i32 = 3;

/// Starts a thread of a child's workload; if the OS refuses, says so on stderr in
/// [`crate::start`]'s words and ends the child with [`REFUSED_EXIT`], which the parent reports
/// as a case that could not run rather than as a wrong result.
fn spawn_or_exit<T: Send + 'static>(
    body: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .spawn(body)
        .unwrap_or_else(|refused| {
            eprintln!("{} in a malloc child: {refused}", crate::start::REFUSAL);
            std::process::exit(REFUSED_EXIT)
        })
}

/// In a child started by this suite: runs its workload, prints `ns_per_op peak_rss_kib
/// checksum` and returns the exit code; `None` in any other process. The `pitlane` binary
/// calls this first thing in `main`.
pub fn child_main() -> Option<ExitCode> {
    let spec = std::env::var(CHILD).ok()?;
    let Some((workload, ops)) = spec.split_once(':') else {
        eprintln!("{CHILD}={spec}: expected WORKLOAD:OPS");
        return Some(ExitCode::FAILURE);
    };
    let Ok(ops) = ops.parse::<u64>() else {
        eprintln!("{CHILD}={spec}: OPS is not a number");
        return Some(ExitCode::FAILURE);
    };
    let started = Instant::now();
    let Some((done, checksum)) = run_workload(workload, ops) else {
        eprintln!("{CHILD}={spec}: unknown workload");
        return Some(ExitCode::FAILURE);
    };
    let ns = started.elapsed().as_nanos() as f64 / done.max(1) as f64;
    println!("{ns:.3} {} {checksum}", peak_rss_kib());
    Some(ExitCode::SUCCESS)
}

/// This process's peak resident set in KiB (`VmHWM` of `/proc/self/status`; -1 if it cannot
/// be read). Not `getrusage`: its `ru_maxrss` survives `exec`, so a child would report the
/// parent's peak whenever that is larger.
fn peak_rss_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(-1)
}

/// Runs a workload; returns how many operations it timed and its checksum.
fn run_workload(workload: &str, ops: u64) -> Option<(u64, u64)> {
    Some(match workload {
        "glibc_simple" => glibc_simple(ops),
        "thread_churn" => thread_churn(ops),
        "xmalloc" => xmalloc(ops),
        "larson" => larson(ops),
        _ => return None,
    })
}

/// What a workload's checksum must be: computed the same way, on the same sizes and seeds,
/// without touching an allocator (every workload's checksum depends only on its inputs).
fn expected_checksum(workload: &str, ops: u64) -> u64 {
    match workload {
        "glibc_simple" => {
            let rounds = ops / BATCH as u64;
            let mut sum = 0u64;
            let mut random = Random(1);
            for _ in 0..rounds {
                for slot in 0..BATCH {
                    let size = 16 + random.below(49);
                    sum = sum.wrapping_add(fill_byte(slot as u64, size) as u64 * size as u64);
                }
            }
            sum
        }
        "thread_churn" => {
            let mut sum = 0u64;
            for round in 0..ops {
                for thread in 0..2 {
                    sum = sum.wrapping_add(churn_sum(round * 2 + thread));
                }
            }
            sum
        }
        "xmalloc" => {
            let mut random = Random(3);
            (0..ops).fold(0u64, |sum, i| {
                let _size = 16 + random.below(241);
                sum.wrapping_add(fill_byte(i, 1) as u64)
            })
        }
        "larson" => larson_checksum(ops),
        _ => 0,
    }
}

/// Blocks allocated before any is freed in `glibc_simple`.
const BATCH: usize = 100;

/// A small deterministic generator (xorshift), seeded per workload.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

/// The byte a block is filled with: depends on where it is used and on its size.
fn fill_byte(seed: u64, size: usize) -> u8 {
    (seed.wrapping_mul(31).wrapping_add(size as u64) % 251) as u8
}

/// `malloc(size)` through the C ABI; the pointer is hidden from the optimiser, so that a
/// malloc/free pair cannot be folded away.
fn c_malloc(size: usize) -> *mut u8 {
    // SAFETY: `malloc` has no preconditions.
    let block = std::hint::black_box(unsafe { libc::malloc(size) }).cast::<u8>();
    assert!(!block.is_null(), "malloc({size}) failed");
    block
}

/// `free(block)` through the C ABI.
///
/// # Safety
/// `block` came from [`c_malloc`] and is freed once.
unsafe fn c_free(block: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe { libc::free(std::hint::black_box(block).cast()) }
}

/// Fills `size` bytes at `block` with `byte`.
///
/// # Safety
/// `block` holds at least `size` bytes.
unsafe fn fill(block: *mut u8, size: usize, byte: u8) {
    // SAFETY: the caller's contract.
    unsafe { block.write_bytes(byte, size) };
}

/// Reads back a filled block: its first and last bytes must be the fill; returns the byte.
///
/// # Safety
/// `block` holds at least `size` bytes, filled.
unsafe fn read_back(block: *mut u8, size: usize) -> u8 {
    // SAFETY: the caller's contract.
    let (first, last) = unsafe { (block.read_volatile(), block.add(size - 1).read_volatile()) };
    assert_eq!(first, last, "a block lost what was written into it");
    first
}

fn glibc_simple(ops: u64) -> (u64, u64) {
    let rounds = ops / BATCH as u64;
    let mut random = Random(1);
    let mut blocks = [(std::ptr::null_mut::<u8>(), 0usize); BATCH];
    let mut sum = 0u64;
    for _ in 0..rounds {
        for (slot, entry) in blocks.iter_mut().enumerate() {
            let size = 16 + random.below(49);
            let block = c_malloc(size);
            // SAFETY: a fresh block of `size` bytes.
            unsafe { fill(block, size, fill_byte(slot as u64, size)) };
            *entry = (block, size);
        }
        for &(block, size) in &blocks {
            // SAFETY: each block was filled above and is freed once.
            unsafe {
                sum = sum.wrapping_add(read_back(block, size) as u64 * size as u64);
                c_free(block);
            }
        }
    }
    (rounds * BATCH as u64, sum)
}

/// Blocks each thread of `thread_churn` allocates.
const CHURN_BLOCKS: usize = 2000;

/// The sizes of thread `index`'s blocks in `thread_churn`.
fn churn_sizes(index: u64) -> impl Iterator<Item = usize> {
    let mut random = Random(index.wrapping_mul(0x9E37_79B9) | 1);
    (0..CHURN_BLOCKS).map(move |_| 16 + random.below(497))
}

fn churn_sum(index: u64) -> u64 {
    churn_sizes(index)
        .enumerate()
        .map(|(i, size)| fill_byte(i as u64, size) as u64)
        .sum()
}

fn thread_churn(rounds: u64) -> (u64, u64) {
    let mut sum = 0u64;
    for round in 0..rounds {
        let threads: Vec<_> = (0..2)
            .map(|thread| {
                let index = round * 2 + thread;
                spawn_or_exit(move || {
                    let mut kept = Vec::with_capacity(CHURN_BLOCKS / 2);
                    let mut sum = 0u64;
                    for (i, size) in churn_sizes(index).enumerate() {
                        let block = c_malloc(size);
                        // SAFETY: a fresh block of `size` bytes.
                        unsafe { fill(block, size, fill_byte(i as u64, size)) };
                        if i % 2 == 0 {
                            kept.push(Handed(block, size));
                        } else {
                            // SAFETY: filled above, freed once.
                            unsafe {
                                sum += read_back(block, size) as u64;
                                c_free(block);
                            }
                        }
                    }
                    (sum, kept)
                })
            })
            .collect();
        for thread in threads {
            let (part, kept) = thread.join().expect("a churn thread panicked");
            sum = sum.wrapping_add(part);
            for Handed(block, size) in kept {
                // SAFETY: the exited thread's blocks, filled, freed once here.
                unsafe {
                    sum = sum.wrapping_add(read_back(block, size) as u64);
                    c_free(block);
                }
            }
        }
    }
    (rounds * 2 * CHURN_BLOCKS as u64, sum)
}

/// A block handed from one thread to another.
struct Handed(*mut u8, usize);
// SAFETY: a malloc'd block may be freed by any thread; only one thread holds it at a time.
unsafe impl Send for Handed {}

/// Blocks passed at a time in `xmalloc`.
const HANDOFF: usize = 256;

fn xmalloc(ops: u64) -> (u64, u64) {
    let (to_freer, from_maker) = mpsc::sync_channel::<Vec<Handed>>(16);
    let freer = spawn_or_exit(move || {
        let mut sum = 0u64;
        for batch in from_maker {
            for Handed(block, _) in batch {
                // SAFETY: a block filled by the maker (its first byte), freed once here.
                unsafe {
                    sum = sum.wrapping_add(block.read_volatile() as u64);
                    c_free(block);
                }
            }
        }
        sum
    });
    let mut random = Random(3);
    let mut batch = Vec::with_capacity(HANDOFF);
    for i in 0..ops {
        let size = 16 + random.below(241);
        let block = c_malloc(size);
        // SAFETY: a fresh block of at least 1 byte.
        unsafe { fill(block, 1, fill_byte(i, 1)) };
        batch.push(Handed(block, size));
        if batch.len() == HANDOFF {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(HANDOFF));
            to_freer.send(full).expect("the freeing thread is there");
        }
    }
    to_freer.send(batch).expect("the freeing thread is there");
    drop(to_freer);
    (ops, freer.join().expect("the freeing thread panicked"))
}

/// Live blocks per thread in `larson`.
const LARSON_SLOTS: usize = 1000;
/// Steps a `larson` thread takes before it hands its blocks to a new thread.
const LARSON_GENERATION: u64 = 20_000;

/// One `larson` thread's walk: slot and size per step, from the thread's seed.
fn larson_steps(seed: u64) -> impl FnMut() -> (usize, usize) {
    let mut random = Random(seed.wrapping_mul(0xA24B_AED4_963E_E407) | 1);
    move || (random.below(LARSON_SLOTS), 16 + random.below(1009))
}

/// Runs `steps` of one `larson` lane on `slots`, starting at step `from`; returns the sum of
/// the bytes of the blocks it replaced.
fn larson_lane(
    slots: &mut [Handed],
    next: &mut impl FnMut() -> (usize, usize),
    from: u64,
    steps: u64,
) -> u64 {
    let mut sum = 0u64;
    for step in from..from + steps {
        let (slot, size) = next();
        let Handed(old, old_size) =
            std::mem::replace(&mut slots[slot], Handed(std::ptr::null_mut(), 0));
        // SAFETY: every slot holds a filled block; it is freed once, here.
        unsafe {
            sum = sum.wrapping_add(read_back(old, old_size) as u64);
            c_free(old);
        }
        let block = c_malloc(size);
        // SAFETY: a fresh block of `size` bytes.
        unsafe { fill(block, size, fill_byte(step, size)) };
        slots[slot] = Handed(block, size);
    }
    sum
}

fn larson(ops: u64) -> (u64, u64) {
    let per_lane = ops / 2;
    let lanes: Vec<_> = (0..2u64)
        .map(|lane| {
            spawn_or_exit(move || {
                let mut next = larson_steps(lane);
                let mut slots: Vec<Handed> = (0..LARSON_SLOTS)
                    .map(|i| {
                        let block = c_malloc(16);
                        // SAFETY: a fresh block of 16 bytes.
                        unsafe { fill(block, 16, fill_byte(i as u64, 16)) };
                        Handed(block, 16)
                    })
                    .collect();
                let mut sum = 0u64;
                let mut done = 0;
                while done < per_lane {
                    let steps = LARSON_GENERATION.min(per_lane - done);
                    // A new thread of the lane takes over the blocks and the walk.
                    let (part, back, walk) = spawn_or_exit(move || {
                        let mut slots = slots;
                        let part = larson_lane(&mut slots, &mut next, done, steps);
                        (part, slots, next)
                    })
                    .join()
                    .expect("a larson thread panicked");
                    sum = sum.wrapping_add(part);
                    slots = back;
                    next = walk;
                    done += steps;
                }
                for Handed(block, size) in slots {
                    // SAFETY: the lane's last blocks, filled, freed once.
                    unsafe {
                        sum = sum.wrapping_add(read_back(block, size) as u64);
                        c_free(block);
                    }
                }
                sum
            })
        })
        .collect();
    let sum = lanes
        .into_iter()
        .map(|lane| lane.join().expect("a larson lane panicked"))
        .fold(0u64, u64::wrapping_add);
    (per_lane * 2, sum)
}

/// The checksum of `larson`, computed without allocating: the same walk over sizes and fills.
fn larson_checksum(ops: u64) -> u64 {
    let per_lane = ops / 2;
    let mut total = 0u64;
    for lane in 0..2u64 {
        let mut next = larson_steps(lane);
        let mut slots: Vec<(u8, usize)> = (0..LARSON_SLOTS)
            .map(|i| (fill_byte(i as u64, 16), 16))
            .collect();
        for step in 0..per_lane {
            let (slot, size) = next();
            total = total.wrapping_add(slots[slot].0 as u64);
            slots[slot] = (fill_byte(step, size), size);
        }
        total = slots
            .iter()
            .fold(total, |sum, &(byte, _)| sum.wrapping_add(byte as u64));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that could not read its peak resident set prints -1 for it; that used to
    /// become a figure of -1 KiB, and a per-round ratio of ours ÷ -1 that counted as a round
    /// ours won on a lower-is-better metric.
    #[test]
    fn a_child_without_a_resident_set_gives_no_figure() {
        let sum = expected_checksum("xmalloc", 1000);
        assert_eq!(
            child_figures("xmalloc", 1000, &format!("12.500 2048 {sum}\n")),
            Ok(vec![12.5, 2048.0])
        );
        let err = child_figures("xmalloc", 1000, &format!("12.500 -1 {sum}\n")).unwrap_err();
        assert!(err.contains("no time or no peak resident set"), "{err}");
        assert!(child_figures("xmalloc", 1000, &format!("0.000 2048 {sum}\n")).is_err());
        let err = child_figures("xmalloc", 1000, "12.500 2048 7\n").unwrap_err();
        assert!(err.contains("checksum"), "{err}");
    }

    /// In this process (glibc's malloc, or whatever the test binary runs on), every workload
    /// reads back exactly the checksum computed without allocating.
    #[test]
    fn every_workload_reads_back_its_expected_checksum() {
        for (workload, ops) in [
            ("glibc_simple", 10_000),
            ("thread_churn", 3),
            ("xmalloc", 10_000),
            ("larson", 50_000),
        ] {
            let (_, sum) = run_workload(workload, ops).expect("a known workload");
            assert_eq!(sum, expected_checksum(workload, ops), "{workload}");
        }
    }
}
