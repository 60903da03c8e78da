//! Hostile inputs to the checker and its specifications: every spec of the crate against a
//! brute-force oracle (all orders that respect real time, no memo, no aids) on thousands of
//! small random histories with repeated values, touching stamps and results no structure
//! gives; hand-made histories that are not linearizable (a value never pushed, popped twice,
//! FIFO or LIFO order broken between operations that do not overlap, a semaphore gone
//! negative, a pool handing out an object twice, ...) and their overlapping twins that are;
//! each `Linearizable` answer's order replayed against the spec; and the pattern check for
//! queues on histories outside its domain.
#![cfg(not(pitlane_loom))]

use std::fmt::Debug;

use pitlane_lincheck::queue_patterns::{QueueCheck, check_queue};
use pitlane_lincheck::specs::{
    BagSpec, BoundedQueueSpec, ContainerOp, ContainerRet, CounterOp, CounterRet, CounterSpec,
    PoolOp, PoolRet, PoolSpec, QueueSpec, RegisterOp, RegisterRet, RegisterSpec, SemaphoreOp,
    SemaphoreRet, SemaphoreSpec, StackSpec, WeakBagSpec,
};
use pitlane_lincheck::{Checker, History, SequentialSpec, SplitMix64, Verdict};

mod common;
use common::{container_op, counter_op, pool_op, random_history, register_op, semaphore_op};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// Whether some order of all operations respects real time and every result: a plain
/// depth-first search over every order, with nothing from the checker.
fn brute_force<S: SequentialSpec>(spec: &S, history: &History<S::Op, S::Ret>) -> bool {
    fn go<S: SequentialSpec>(
        spec: &S,
        history: &History<S::Op, S::Ret>,
        done: &mut Vec<bool>,
        state: &S::State,
        left: usize,
    ) -> bool {
        if left == 0 {
            return true;
        }
        let ops = history.operations();
        for (i, o) in ops.iter().enumerate() {
            if done[i] {
                continue;
            }
            // Minimal: no operation left returned before this one was called.
            if ops
                .iter()
                .enumerate()
                .any(|(j, p)| !done[j] && j != i && p.precedes(o))
            {
                continue;
            }
            let Some(next) = spec.step(state, &o.op, &o.result) else {
                continue;
            };
            done[i] = true;
            let found = go(spec, history, done, &next, left - 1);
            done[i] = false;
            if found {
                return true;
            }
        }
        false
    }
    let n = history.len();
    go(spec, history, &mut vec![false; n], &spec.init(), n)
}

/// Checks that `order` is a linearization of `history`: each operation once, real time
/// respected, each result allowed.
fn replay<S: SequentialSpec>(spec: &S, history: &History<S::Op, S::Ret>, order: &[usize]) {
    let ops = history.operations();
    assert_eq!(order.len(), ops.len(), "not every operation: {order:?}");
    let mut seen = vec![false; ops.len()];
    let mut state = spec.init();
    for (k, &id) in order.iter().enumerate() {
        assert!(!seen[id], "#{id} twice in {order:?}");
        seen[id] = true;
        for &later in &order[k + 1..] {
            assert!(
                !ops[later].precedes(&ops[id]),
                "#{later} returned before #{id} was called, yet comes after it in {order:?}"
            );
        }
        state = spec
            .step(&state, &ops[id].op, &ops[id].result)
            .unwrap_or_else(|| panic!("#{id} not allowed at its place in {order:?}"));
    }
}

/// The checker (with and without memo) against the oracle on `history`; returns the oracle's
/// answer.
fn agree<S: SequentialSpec>(
    name: &str,
    spec: &S,
    history: &History<S::Op, S::Ret>,
    also: impl FnOnce(&History<S::Op, S::Ret>, bool),
) -> bool
where
    S::Op: Debug,
    S::Ret: Debug,
{
    let truth = brute_force(spec, history);
    also(history, truth);
    for checker in [Checker::new(), Checker::new().memoize(false)] {
        let verdict = checker.check(spec, history);
        match &verdict {
            Verdict::Linearizable(order) => {
                assert!(
                    truth,
                    "{name}: checker says linearizable by {order:?}, oracle says not\n{}",
                    history.timeline()
                );
                replay(spec, history, order);
            }
            Verdict::NotLinearizable(c) => {
                assert!(
                    !truth,
                    "{name}: checker says not linearizable ({c}), oracle found an order\n{}",
                    history.timeline()
                );
                assert!(c.stuck < history.len());
                assert!(c.longest_prefix.iter().all(|&id| id < history.len()));
            }
            Verdict::Unknown { steps } => panic!("{name}: undecided after {steps} steps"),
        }
    }
    truth
}

/// Runs `each` on many random histories and asserts both verdicts came up often.
fn fuzz<S: SequentialSpec>(
    name: &str,
    spec: &S,
    seed: u64,
    mut op: impl FnMut(&mut SplitMix64) -> (S::Op, S::Ret),
    mut also: impl FnMut(&History<S::Op, S::Ret>, bool),
) {
    let mut rng = SplitMix64::new(seed);
    let (mut yes, mut no) = (0, 0);
    for _ in 0..2000 {
        let len = 1 + rng.below(8) as usize;
        let threads = 1 + rng.below(3) as usize;
        let history = random_history(&mut rng, len, threads, &mut op);
        if agree(name, spec, &history, &mut also) {
            yes += 1;
        } else {
            no += 1;
        }
    }
    assert!(yes > 20 && no > 20, "{name}: {yes} linearizable, {no} not");
}

/// The promises of [`check_queue`] against the oracle's answer for an unbounded FIFO queue:
/// every pattern is a real violation, and no pattern without `Empty` answers is a proof.
fn patterns_are_sound<T: Eq + std::hash::Hash + Debug>(
    history: &History<ContainerOp<T>, ContainerRet<T>>,
    linearizable: bool,
) {
    match check_queue(history) {
        QueueCheck::Violation(v) => assert!(
            !linearizable,
            "check_queue found {v:?} in a linearizable history\n{}",
            history.timeline()
        ),
        QueueCheck::NoPattern { has_empty: false } => assert!(
            linearizable,
            "check_queue proves linearizable a history that is not\n{}",
            history.timeline()
        ),
        _ => {}
    }
}

fn nothing<H>(_: &H, _: bool) {}

#[test]
fn every_container_spec_agrees_with_brute_force() {
    fuzz(
        "queue",
        &QueueSpec::new(),
        1,
        container_op,
        patterns_are_sound,
    );
    let bounded = |capacity| BoundedQueueSpec::new(capacity);
    fuzz("bounded queue 1", &bounded(1), 2, container_op, nothing);
    fuzz("bounded queue 2", &bounded(2), 3, container_op, nothing);
    fuzz("bounded queue 0", &bounded(0), 4, container_op, nothing);
    fuzz("stack", &StackSpec::new(), 5, container_op, nothing);
    fuzz("bag", &BagSpec::new(), 6, container_op, nothing);
    fuzz("weak bag", &WeakBagSpec::new(), 7, container_op, nothing);
}

#[test]
fn containers_with_distinct_values_agree_with_brute_force() {
    // Distinct pushed values switch on the FIFO specs' implied orders.
    let distinct = |rng: &mut SplitMix64, next: &mut u64| {
        // A recent value, or one not pushed yet.
        let v = (*next + 1).saturating_sub(rng.below(5));
        match rng.below(8) {
            0..=3 => {
                *next += 1;
                (ContainerOp::Push(*next), ContainerRet::Pushed)
            }
            4..=6 => (ContainerOp::Pop, ContainerRet::Popped(v)),
            _ => (ContainerOp::Pop, ContainerRet::Empty),
        }
    };
    let mut next = 0;
    let queue = QueueSpec::new();
    fuzz(
        "queue, distinct",
        &queue,
        11,
        |r| distinct(r, &mut next),
        patterns_are_sound,
    );
    let mut next = 0;
    let bounded = BoundedQueueSpec::new(2);
    fuzz(
        "bounded 2, distinct",
        &bounded,
        12,
        |r| distinct(r, &mut next),
        nothing,
    );
    let mut next = 0;
    fuzz(
        "stack, distinct",
        &StackSpec::new(),
        13,
        |r| distinct(r, &mut next),
        nothing,
    );
}

#[test]
fn other_specs_agree_with_brute_force() {
    fuzz(
        "pool",
        &PoolSpec::unbounded(),
        21,
        |rng| pool_op(rng, 3),
        nothing,
    );
    fuzz(
        "pool of 1",
        &PoolSpec::with_capacity(1),
        22,
        |rng| pool_op(rng, 2),
        nothing,
    );
    fuzz(
        "semaphore",
        &SemaphoreSpec::new(1),
        23,
        semaphore_op,
        nothing,
    );
    fuzz(
        "register",
        &RegisterSpec::new(0u8),
        24,
        register_op,
        nothing,
    );
    fuzz("counter", &CounterSpec::new(), 25, counter_op, nothing);
}

type Container = History<ContainerOp<u64>, ContainerRet<u64>>;

/// One operation written by hand: `(thread, call, ret, op, result)`.
type Row = (usize, u64, u64, ContainerOp<u64>, ContainerRet<u64>);

/// Builds a container history from rows.
fn container(ops: &[Row]) -> Container {
    let mut h = History::new();
    for &(t, call, ret, op, result) in ops {
        h.add(t, call..ret, op, result).unwrap();
    }
    h
}

use ContainerOp::{Pop, Push};
use ContainerRet::{Empty, Popped, Pushed};

#[test]
fn hand_made_container_violations_are_caught_by_every_spec_that_should() {
    let never_pushed = container(&[(0, 0, 1, Push(1), Pushed), (1, 2, 3, Pop, Popped(2))]);
    let popped_twice = container(&[
        (0, 0, 1, Push(1), Pushed),
        (1, 0, 5, Pop, Popped(1)),
        (2, 0, 5, Pop, Popped(1)),
    ]);
    let pop_before_push = container(&[(0, 0, 1, Pop, Popped(1)), (1, 2, 3, Push(1), Pushed)]);
    let empty_while_full = container(&[(0, 0, 1, Push(1), Pushed), (1, 2, 3, Pop, Empty)]);
    for (name, h) in [
        ("never pushed", &never_pushed),
        ("popped twice", &popped_twice),
        ("pop before push", &pop_before_push),
        ("empty while full", &empty_while_full),
    ] {
        assert!(
            check_all_containers(h).iter().all(|v| v.is_violation()),
            "{name}"
        );
    }

    // FIFO broken between operations that do not overlap: a stack or a bag allows it.
    let lifo = container(&[
        (0, 0, 1, Push(1), Pushed),
        (0, 2, 3, Push(2), Pushed),
        (1, 4, 5, Pop, Popped(2)),
    ]);
    let [queue, bounded, stack, bag, weak] = check_all_containers(&lifo);
    assert!(queue.is_violation() && bounded.is_violation());
    assert!(stack.is_linearizable() && bag.is_linearizable() && weak.is_linearizable());
    // LIFO broken the same way: a value below the top with nothing overlapping.
    let fifo = container(&[
        (0, 0, 1, Push(1), Pushed),
        (0, 2, 3, Push(2), Pushed),
        (1, 4, 5, Pop, Popped(1)),
    ]);
    let [queue, bounded, stack, bag, weak] = check_all_containers(&fifo);
    assert!(stack.is_violation());
    assert!(queue.is_linearizable() && bounded.is_linearizable());
    assert!(bag.is_linearizable() && weak.is_linearizable());
    // With the pushes overlapping, every container allows either pop.
    for first in [1, 2] {
        let h = container(&[
            (0, 0, 3, Push(1), Pushed),
            (1, 1, 2, Push(2), Pushed),
            (2, 4, 5, Pop, Popped(first)),
            (2, 6, 7, Pop, Popped(3 - first)),
            (2, 8, 9, Pop, Empty),
        ]);
        assert!(
            check_all_containers(&h)
                .iter()
                .all(Verdict::is_linearizable),
            "{first}"
        );
    }
}

fn check_all_containers(h: &Container) -> [Verdict; 5] {
    [
        Checker::new().check(&QueueSpec::new(), h),
        Checker::new().check(&BoundedQueueSpec::new(8), h),
        Checker::new().check(&StackSpec::new(), h),
        Checker::new().check(&BagSpec::new(), h),
        Checker::new().check(&WeakBagSpec::new(), h),
    ]
}

#[test]
fn hand_made_violations_of_the_other_specs() {
    // A semaphore of one permit acquired twice with no release between.
    let mut h = History::new();
    h.add(0, 0..1, SemaphoreOp::Acquire(1), SemaphoreRet::Acquired)
        .unwrap();
    h.add(1, 2..3, SemaphoreOp::TryAcquire(1), SemaphoreRet::Acquired)
        .unwrap();
    assert!(
        Checker::new()
            .check(&SemaphoreSpec::new(1), &h)
            .is_violation()
    );
    // With a release overlapping the second acquire, it is fine.
    h.add(2, 1..4, SemaphoreOp::Release(1), SemaphoreRet::Released)
        .unwrap();
    assert!(
        Checker::new()
            .check(&SemaphoreSpec::new(1), &h)
            .is_linearizable()
    );
    // Releases that would overflow the count are not allowed.
    let mut h = History::new();
    h.add(
        0,
        0..1,
        SemaphoreOp::Release(u64::MAX),
        SemaphoreRet::Released,
    )
    .unwrap();
    assert!(
        Checker::new()
            .check(&SemaphoreSpec::new(1), &h)
            .is_violation()
    );
    // A `WouldBlock` while permits were surely there.
    let mut h = History::new();
    h.add(
        0,
        0..1,
        SemaphoreOp::TryAcquire(1),
        SemaphoreRet::WouldBlock,
    )
    .unwrap();
    assert!(
        Checker::new()
            .check(&SemaphoreSpec::new(1), &h)
            .is_violation()
    );

    // A pool handing out an object still allocated; a free of one never allocated.
    let mut h = History::new();
    h.add(0, 0..1, PoolOp::Alloc, PoolRet::Allocated(3))
        .unwrap();
    h.add(1, 2..3, PoolOp::Alloc, PoolRet::Allocated(3))
        .unwrap();
    assert!(
        Checker::new()
            .check(&PoolSpec::unbounded(), &h)
            .is_violation()
    );
    let mut h = History::new();
    h.add(0, 0..1, PoolOp::Free(3), PoolRet::Freed).unwrap();
    assert!(
        Checker::new()
            .check(&PoolSpec::unbounded(), &h)
            .is_violation()
    );

    // A read of a value overwritten before it began.
    let mut h = History::new();
    h.add(0, 0..1, RegisterOp::Write(1u8), RegisterRet::Written)
        .unwrap();
    h.add(0, 2..3, RegisterOp::Write(2), RegisterRet::Written)
        .unwrap();
    h.add(1, 4..5, RegisterOp::Read, RegisterRet::Value(1))
        .unwrap();
    assert!(
        Checker::new()
            .check(&RegisterSpec::new(0), &h)
            .is_violation()
    );

    // Two fetch-adds that saw the same value, not overlapping.
    let mut h = History::new();
    h.add(0, 0..1, CounterOp::FetchAdd(1), CounterRet::Value(0))
        .unwrap();
    h.add(1, 2..3, CounterOp::FetchAdd(1), CounterRet::Value(0))
        .unwrap();
    assert!(Checker::new().check(&CounterSpec::new(), &h).is_violation());
}

#[test]
fn pattern_check_is_not_applicable_when_a_value_is_pushed_twice_even_if_popped_first() {
    // push(1), pop -> 1, push(1), pop -> 1, one after the other: a FIFO queue gives exactly
    // this. The module promises `NotApplicable` when a value is pushed twice, and that every
    // `Violation` it reports is real; here the second push comes last in the history's list.
    let h = container(&[
        (0, 0, 1, Push(1), Pushed),
        (1, 2, 3, Pop, Popped(1)),
        (1, 6, 7, Pop, Popped(1)),
        (0, 4, 5, Push(1), Pushed),
    ]);
    assert!(
        Checker::new()
            .check(&QueueSpec::new(), &h)
            .is_linearizable()
    );
    let found = check_queue(&h);
    assert!(
        matches!(found, QueueCheck::NotApplicable(_)),
        "check_queue says {found:?} of a linearizable history"
    );
}

/// A spec with the aids of `S` switched off (the defaults: no renaming, no implied order).
struct Plain<S>(S);

impl<S: SequentialSpec> SequentialSpec for Plain<S> {
    type Op = S::Op;
    type Ret = S::Ret;
    type State = S::State;

    fn init(&self) -> Self::State {
        self.0.init()
    }

    fn step(&self, state: &Self::State, op: &Self::Op, ret: &Self::Ret) -> Option<Self::State> {
        self.0.step(state, op, ret)
    }
}

#[test]
fn aids_change_no_verdict_on_histories_of_more_than_64_operations() {
    // The u128 and wide bitsets, and the FIFO implied order beyond 64 values, against the
    // plain search; histories a queue could give, and the same with one pop's result changed.
    use pitlane_lincheck::Shape;
    use pitlane_lincheck::synthetic::queue_history;
    let mut rng = SplitMix64::new(77);
    let (mut decided, mut violations) = (0, 0);
    for seed in 0..60 {
        let shape = Shape {
            threads: 3,
            ops_per_thread: [24, 45, 50][seed as usize % 3],
        };
        let mut ops = queue_history(shape, seed).operations().to_vec();
        if seed % 2 == 1 {
            let pops: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].op == Pop).collect();
            let at = pops[rng.below(pops.len() as u64) as usize];
            ops[at].result = match rng.below(3) {
                0 => Empty,
                _ => Popped(1 + rng.below(ops.len() as u64 / 2)),
            };
        }
        let mut h = History::new();
        for o in ops {
            h.push(o).unwrap();
        }
        for (spec_name, aided, plain) in [
            (
                "queue",
                Checker::new().check(&QueueSpec::new(), &h),
                Checker::new()
                    .with_budget(3_000_000)
                    .check(&Plain(QueueSpec::new()), &h),
            ),
            (
                "bounded",
                Checker::new().check(&BoundedQueueSpec::new(5), &h),
                Checker::new()
                    .with_budget(3_000_000)
                    .check(&Plain(BoundedQueueSpec::new(5)), &h),
            ),
        ] {
            if let Verdict::Linearizable(order) = &aided {
                replay(&QueueSpec::new(), &h, order);
            }
            if matches!(plain, Verdict::Unknown { .. }) {
                continue;
            }
            decided += 1;
            violations += usize::from(plain.is_violation());
            assert_eq!(
                aided.is_linearizable(),
                plain.is_linearizable(),
                "{spec_name} {shape} seed {seed}: {aided:?} vs {plain:?}"
            );
        }
    }
    assert!(decided > 60 && violations > 10, "{decided} {violations}");
}
