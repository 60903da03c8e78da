//! The checker against its own aids and against the pattern check for queues, on thousands
//! of synthetic histories: some left linearizable, some with one result changed.

use pitlane_lincheck::queue_patterns::{QueueCheck, check_queue};
use pitlane_lincheck::specs::{ContainerOp, ContainerRet, QueueSpec};
use pitlane_lincheck::synthetic::queue_history;
use pitlane_lincheck::{Checker, History, Operation, Shape, SplitMix64, Verdict};

type Queue = History<ContainerOp<u64>, ContainerRet<u64>>;

/// The history with one pop result changed at random (or none).
fn mutate(history: &Queue, rng: &mut SplitMix64) -> Queue {
    let mut ops: Vec<Operation<_, _>> = history.operations().to_vec();
    let pops: Vec<usize> = (0..ops.len())
        .filter(|&i| ops[i].op == ContainerOp::Pop)
        .collect();
    let pushed: Vec<u64> = ops
        .iter()
        .filter_map(|o| match o.op {
            ContainerOp::Push(v) => Some(v),
            ContainerOp::Pop => None,
        })
        .collect();
    if !pops.is_empty() && !pushed.is_empty() {
        let pop = pops[rng.below(pops.len() as u64) as usize];
        match rng.below(4) {
            0 => ops[pop].result = ContainerRet::Empty,
            1 => {
                ops[pop].result =
                    ContainerRet::Popped(pushed[rng.below(pushed.len() as u64) as usize])
            }
            2 => {
                let other = pops[rng.below(pops.len() as u64) as usize];
                let (a, b) = (ops[pop].result, ops[other].result);
                ops[pop].result = b;
                ops[other].result = a;
            }
            _ => {}
        }
    }
    let mut mutated = History::new();
    for o in ops {
        mutated.push(o).unwrap();
    }
    mutated
}

#[test]
fn patterns_agree_with_the_search() {
    let mut rng = SplitMix64::new(2013);
    let checker = Checker::new();
    let (mut violations, mut proofs, mut undecided, mut missed) = (0, 0, 0, 0);
    for seed in 0..3000 {
        let shape = Shape {
            threads: 2 + (seed % 3) as usize,
            ops_per_thread: 3 + (seed % 6) as usize,
        };
        let history = mutate(&queue_history(shape, seed), &mut rng);
        let verdict = checker.check(&QueueSpec::new(), &history);
        assert!(!matches!(verdict, Verdict::Unknown { .. }));
        match check_queue(&history) {
            QueueCheck::Violation(v) => {
                // Sound: every pattern is a real violation.
                assert!(verdict.is_violation(), "seed {seed}: {v:?} but {verdict:?}");
                violations += 1;
            }
            QueueCheck::NoPattern { has_empty: false } => {
                // Complete without empty answers.
                assert!(
                    verdict.is_linearizable(),
                    "seed {seed}: no pattern and no empty pop, but {verdict:?}\n{}",
                    history.timeline()
                );
                proofs += 1;
            }
            QueueCheck::NoPattern { has_empty: true } => {
                undecided += 1;
                if verdict.is_violation() {
                    missed += 1;
                }
            }
            QueueCheck::NotApplicable(why) => {
                // Only a mutation that made two pops return one value... which is a
                // pattern, or a duplicate push, which the generator never makes.
                panic!("seed {seed}: not applicable: {why}");
            }
        }
    }
    eprintln!(
        "{violations} violations found by both, {proofs} proved linearizable, \
         {undecided} with empty pops and no pattern, of which the search found {missed} not linearizable"
    );
    assert!(violations > 1000 && proofs > 200, "{violations} {proofs}");
    // Not a theorem for empty answers (see the module documentation), but on these
    // histories the emptiness pattern missed nothing.
    assert_eq!(missed, 0);
}

/// The queue spec without its aids to the search (`canonical`, `implied_order`).
struct PlainQueue(QueueSpec<u64>);

impl pitlane_lincheck::SequentialSpec for PlainQueue {
    type Op = ContainerOp<u64>;
    type Ret = ContainerRet<u64>;
    type State = <QueueSpec<u64> as pitlane_lincheck::SequentialSpec>::State;

    fn init(&self) -> Self::State {
        self.0.init()
    }

    fn step(&self, state: &Self::State, op: &Self::Op, ret: &Self::Ret) -> Option<Self::State> {
        self.0.step(state, op, ret)
    }
}

#[test]
fn the_aids_to_the_search_do_not_change_verdicts() {
    let mut rng = SplitMix64::new(1993);
    let checker = Checker::new();
    let (mut linearizable, mut violations) = (0, 0);
    for seed in 0..3000 {
        let shape = Shape {
            threads: 2 + (seed % 2) as usize,
            ops_per_thread: 2 + (seed % 5) as usize,
        };
        let history = mutate(&queue_history(shape, seed), &mut rng);
        let aided = checker.check(&QueueSpec::new(), &history);
        let plain = checker.check(&PlainQueue(QueueSpec::new()), &history);
        assert_eq!(
            aided.is_linearizable(),
            plain.is_linearizable(),
            "seed {seed}: {aided:?} vs {plain:?}\n{}",
            history.timeline()
        );
        assert_eq!(aided.is_violation(), plain.is_violation(), "seed {seed}");
        if aided.is_linearizable() {
            linearizable += 1;
        } else {
            violations += 1;
        }
    }
    assert!(
        linearizable > 500 && violations > 500,
        "{linearizable} {violations}"
    );
}

#[test]
fn synthetic_histories_are_all_found_linearizable() {
    // Linearizable by construction, at the sizes the runner uses: a wrong implied order or
    // renaming would show here as a false alarm.
    for (threads, ops_per_thread) in [(4, 8), (3, 20), (6, 6)] {
        for seed in 0..300 {
            let shape = Shape {
                threads,
                ops_per_thread,
            };
            let history = queue_history(shape, seed);
            let verdict = Checker::new().check(&QueueSpec::new(), &history);
            assert!(
                verdict.is_linearizable(),
                "{shape} seed {seed}: {verdict:?}\n{}",
                history.timeline()
            );
        }
    }
}

#[test]
fn the_memo_changes_no_verdict_order_or_counterexample() {
    // Lowe's memo (kept as the configurations that failed, behind a filter on linearized
    // sets) only skips configurations whose every continuation already failed: the search
    // without it finds the same first linearization, or the same longest prefix and stuck
    // operation, and its count of successful steps is never smaller.
    let mut rng = SplitMix64::new(2017);
    let (mut linearizable, mut violations) = (0, 0);
    for seed in 0..3000 {
        let shape = Shape {
            threads: 2 + (seed % 3) as usize,
            ops_per_thread: 2 + (seed % 4) as usize,
        };
        let history = mutate(&queue_history(shape, seed), &mut rng);
        let spec = QueueSpec::new();
        let (memo, memo_stats) = Checker::new().check_with_stats(&spec, &history);
        let (plain, plain_stats) = Checker::new()
            .memoize(false)
            .check_with_stats(&spec, &history);
        assert_eq!(memo, plain, "seed {seed}\n{}", history.timeline());
        assert!(
            memo_stats.linearized <= plain_stats.linearized,
            "seed {seed}"
        );
        assert_eq!(memo_stats.configurations, memo_stats.linearized);
        match memo {
            Verdict::Linearizable(_) => linearizable += 1,
            Verdict::NotLinearizable(_) => violations += 1,
            Verdict::Unknown { .. } => panic!("seed {seed}: undecided"),
        }
    }
    assert!(
        linearizable > 500 && violations > 500,
        "{linearizable} {violations}"
    );
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
