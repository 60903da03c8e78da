//! The checker's memory budget ([`Checker::with_memory`]): histories whose search would hold
//! gigabytes (synthetic queue histories of 64 threads x 8 operations, 32 x 20, 16 x 1000,
//! shapes `pitlane lincheck` accepts) are checked within a small budget, in a child process
//! whose peak resident memory is read before and after; a check under an address-space limit
//! below what the search used to take returns instead of aborting; and on small random
//! histories of every specification, a budget small enough to make the search forget its
//! memo again and again gives the unbounded checker's verdict whenever it gives one.
#![cfg(not(pitlane_loom))]

use std::time::Duration;

use pitlane_lincheck::specs::{
    BagSpec, BoundedQueueSpec, ContainerOp, ContainerRet, CounterSpec, PoolSpec, QueueSpec,
    RegisterSpec, SemaphoreSpec, StackSpec, WeakBagSpec,
};
use pitlane_lincheck::synthetic::{lose_one_push, queue_history};
use pitlane_lincheck::{Checker, History, SearchStats, SequentialSpec, Shape, SplitMix64, Verdict};
use pitlane_testkit::child::{rerun_test, scenario};
use pitlane_testkit::memory::with_address_space_limit;
use proptest::prelude::*;

mod common;
use common::{container_op, counter_op, pool_op, random_history, register_op, semaphore_op};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

type Queue = History<ContainerOp<u64>, ContainerRet<u64>>;

const MIB: usize = 1 << 20;

/// The step budget of the large checks: enough for the unbounded search to hold hundreds of
/// megabytes (about 70 bytes a step on these shapes), few enough for a debug build.
fn steps() -> u64 {
    if cfg!(debug_assertions) {
        1_000_000
    } else {
        5_000_000
    }
}

/// The environment variable that tells a re-run of this binary which scenario to run.
const CHILD_ENV: &str = "PITLANE_LINCHECK_MEMORY_CHILD";

/// The synthetic queue history `name` stands for: `TxO` (linearizable) or `TxO-broken` (one
/// push lost, not linearizable).
fn history(name: &str) -> Queue {
    let (shape, broken) = match name.strip_suffix("-broken") {
        Some(shape) => (shape, true),
        None => (name, false),
    };
    let (threads, ops) = shape.split_once('x').expect("TxO");
    let shape = Shape {
        threads: threads.parse().unwrap(),
        ops_per_thread: ops.parse().unwrap(),
    };
    let history = queue_history(shape, 1);
    if broken {
        lose_one_push(&history).expect("a pop to break")
    } else {
        history
    }
}

/// This process's peak resident set (`VmHWM`), in bytes.
fn peak_resident() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .expect("a VmHWM line");
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

fn describe(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Linearizable(_) => "linearizable".into(),
        Verdict::NotLinearizable(_) => "not-linearizable".into(),
        Verdict::Unknown { steps } => format!("unknown:{steps}"),
    }
}

/// What a child ran: `history budget-in-MiB`, or `limit history budget-in-MiB headroom-in-MiB`
/// (under an address-space limit). It prints one line to parse: `RESULT verdict peak-bytes
/// memo-forgotten`, where `peak-bytes` is how much the peak resident set grew during the
/// check.
#[test]
fn child_entry() {
    let Some(scenario) = scenario(CHILD_ENV) else {
        return;
    };
    let words: Vec<&str> = scenario.split_whitespace().collect();
    let (limited, words) = match words.split_first() {
        Some((&"limit", rest)) => (true, rest),
        _ => (false, &words[..]),
    };
    let history = history(words[0]);
    let megabytes: usize = words[1].parse().unwrap();
    let checker = Checker::new()
        .with_budget(steps())
        .with_memory(megabytes * MIB);
    let before = peak_resident();
    let check = || checker.check_with_stats(&QueueSpec::new(), &history);
    let (verdict, stats): (Verdict, SearchStats) = if limited {
        let headroom: u64 = words[2].parse().unwrap();
        with_address_space_limit(headroom << 20, check)
    } else {
        check()
    };
    let grew = peak_resident().saturating_sub(before);
    println!(
        "RESULT {} {grew} {}",
        describe(&verdict),
        stats.memo_forgotten
    );
}

/// Runs `scenario` in a child; its verdict, peak growth in bytes and memo forgettings.
fn in_child(scenario: &str) -> (String, usize, u64) {
    let limit = Duration::from_secs(if cfg!(debug_assertions) { 600 } else { 120 });
    let ended = rerun_test("child_entry", CHILD_ENV, scenario, limit)
        .unwrap_or_else(|| panic!("{scenario}: the child was still running after {limit:?}"));
    let stdout = String::from_utf8_lossy(&ended.stdout);
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert!(
        ended.status.success(),
        "{scenario}: the child failed ({}):\n{stdout}\n{stderr}",
        ended.status
    );
    let line = stdout
        .lines()
        .find_map(|line| line.split_once("RESULT ").map(|(_, result)| result))
        .unwrap_or_else(|| panic!("{scenario}: no result:\n{stdout}\n{stderr}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    (
        fields[0].to_string(),
        fields[1].parse().unwrap(),
        fields[2].parse().unwrap(),
    )
}

/// The large shapes within 32 MiB (and 16 x 1000, whose tables alone take 65 MB, within 128
/// MiB too): each answers within the step budget, with the default checker's verdict when
/// it gives one, and the peak resident set grows by no more than the budget and a little.
/// Without the bound the same checks grow it by 100-500 MB.
#[test]
fn large_histories_stay_within_a_small_memory_budget() {
    let mut forgot = 0;
    for (name, megabytes) in [
        ("64x8", 32),
        ("32x20", 32),
        ("16x1000", 32),
        ("16x1000", 128),
        ("32x20-broken", 32),
        ("32x20-broken", 64),
        // Room enough not to forget: decided, like the default checker.
        ("32x20-broken", 256),
    ] {
        let (verdict, grew, forgotten) = in_child(&format!("{name} {megabytes}"));
        eprintln!(
            "{name} within {megabytes} MiB: {verdict}, peak +{} MiB, memo forgotten {forgotten} times",
            grew / MIB
        );
        assert!(
            grew <= (megabytes + 8) * MIB,
            "{name} within {megabytes} MiB: the peak resident set grew by {grew} bytes"
        );
        forgot += forgotten;
        if let Some(taken) = verdict.strip_prefix("unknown:") {
            assert!(taken.parse::<u64>().unwrap() <= steps());
            continue;
        }
        // Decided: the same as the default checker, whose memory this test does not measure.
        let default = Checker::new()
            .with_budget(steps())
            .check(&QueueSpec::new(), &history(name));
        assert_eq!(verdict, describe(&default), "{name} within {megabytes} MiB");
    }
    assert!(forgot > 0, "no check had to forget its memo");
}

/// Under an address-space limit of 256 MiB above what the process holds, a check within 64
/// MiB returns (the unbounded search took 340 MB on this history and aborted, "memory
/// allocation of ... bytes failed"); and the largest history `pitlane lincheck` makes (64
/// threads x 1000 operations, whose tables take 1 GB, within the default budget of 1 GiB)
/// answers `Unknown` at once when the system refuses the tables, rather than aborting.
#[test]
fn a_check_under_an_address_space_limit_returns() {
    let (verdict, _, _) = in_child("limit 64x8 64 256");
    assert!(verdict.starts_with("unknown:"), "{verdict}");
    let (verdict, _, _) = in_child("limit 64x1000 1024 512");
    assert_eq!(verdict, "unknown:0");
}

/// A spec of the crate with its random operations, for the property below.
type Case = (&'static str, u64, usize, usize);

/// Checks `history` with the unbounded checker and with each small budget; the bounded
/// verdicts must equal the unbounded one unless `Unknown`. Returns how many bounded checks
/// were decided after forgetting the memo at least once.
fn compare<S: SequentialSpec>(spec: &S, history: &History<S::Op, S::Ret>) -> usize {
    let unbounded = Checker::new().with_memory(usize::MAX);
    let (truth, _) = unbounded.check_with_stats(spec, history);
    assert!(!matches!(truth, Verdict::Unknown { .. }));
    let mut decided_after_forgetting = 0;
    for bytes in (1024..=12 * 1024).step_by(256) {
        let (verdict, stats) = Checker::new()
            .with_memory(bytes)
            .check_with_stats(spec, history);
        if matches!(verdict, Verdict::Unknown { .. }) {
            continue;
        }
        assert_eq!(
            verdict,
            truth,
            "within {bytes} bytes\n{}",
            history.timeline()
        );
        if stats.memo_forgotten > 0 {
            decided_after_forgetting += 1;
        }
    }
    decided_after_forgetting
}

/// One random history of the spec named in `case`, checked by [`compare`].
fn compare_case((spec, seed, len, threads): Case) -> usize {
    let rng = &mut SplitMix64::new(seed);
    match spec {
        "queue" => compare(
            &QueueSpec::new(),
            &random_history(rng, len, threads, container_op),
        ),
        "bounded queue" => compare(
            &BoundedQueueSpec::new(2),
            &random_history(rng, len, threads, container_op),
        ),
        "stack" => compare(
            &StackSpec::new(),
            &random_history(rng, len, threads, container_op),
        ),
        "bag" => compare(
            &BagSpec::new(),
            &random_history(rng, len, threads, container_op),
        ),
        "weak bag" => compare(
            &WeakBagSpec::new(),
            &random_history(rng, len, threads, container_op),
        ),
        "pool" => compare(
            &PoolSpec::unbounded(),
            &random_history(rng, len, threads, |r| pool_op(r, 3)),
        ),
        "semaphore" => compare(
            &SemaphoreSpec::new(1),
            &random_history(rng, len, threads, semaphore_op),
        ),
        "register" => compare(
            &RegisterSpec::new(0u8),
            &random_history(rng, len, threads, register_op),
        ),
        "counter" => compare(
            &CounterSpec::new(),
            &random_history(rng, len, threads, counter_op),
        ),
        _ => unreachable!(),
    }
}

const SPECS: [&str; 9] = [
    "queue",
    "bounded queue",
    "stack",
    "bag",
    "weak bag",
    "pool",
    "semaphore",
    "register",
    "counter",
];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(debug_assertions) { 200 } else { 1000 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A tiny budget changes no verdict it gives.
    #[test]
    fn tiny_budgets_give_the_unbounded_verdict(
        spec in 0..SPECS.len(),
        seed: u64,
        len in 1usize..14,
        threads in 1usize..5,
    ) {
        compare_case((SPECS[spec], seed, len, threads));
    }
}

/// The property above is not empty: for every spec, tiny budgets make the search forget its
/// memo and still decide, many times.
#[test]
fn tiny_budgets_forget_the_memo_and_still_decide() {
    for (i, spec) in SPECS.into_iter().enumerate() {
        let mut rng = SplitMix64::new(100 + i as u64);
        let mut decided_after_forgetting = 0;
        for _ in 0..300 {
            let len = 6 + rng.below(8) as usize;
            let threads = 2 + rng.below(3) as usize;
            decided_after_forgetting += compare_case((spec, rng.next_u64(), len, threads));
        }
        eprintln!("{spec}: {decided_after_forgetting} checks decided after forgetting");
        assert!(
            decided_after_forgetting > 0,
            "{spec}: only {decided_after_forgetting} checks decided after forgetting"
        );
    }
}
