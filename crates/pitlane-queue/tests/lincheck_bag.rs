//! Linearizability of the weak bags, checked by pitlane-lincheck on recorded histories:
//!
//! - `mpmc::Queue` through `push`/`pop` against a FIFO queue, with segments of 2 cells (every
//!   round crosses segment boundaries) and of the default size;
//! - `stack::Stack` through `push`/`pop` against a LIFO stack;
//! - both through `try_push`/`try_pop` against the weak-bag specification, and their transient
//!   failures must each overlap another operation (they come only from contention);
//! - the `Bagpipe` against the weak-bag specification, with its `Empty` reported as
//!   `Transient` (a Bagpipe's emptiness is not linearizable: it visits pipes one by one), and,
//!   separately, its promise about `Empty` (no item that sat in the bag for the whole call was
//!   missed) and, after each round, a drain that must return exactly the items pushed and not
//!   popped.
#![cfg(not(pitlane_loom))]

use std::sync::{Arc, Mutex};

use pitlane_lincheck::specs::weak_bag::solo_transients;
use pitlane_lincheck::specs::{ContainerOp, ContainerRet, QueueSpec, StackSpec, WeakBagSpec};
use pitlane_lincheck::{History, Runner, Shape, Shared, Subject, check, workload};
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;
use pitlane_queue::{PopError, WeakBag};

/// Rounds per check: fewer in debug builds, where each round is slower.
fn rounds() -> u64 {
    if cfg!(debug_assertions) { 1_000 } else { 5_000 }
}

/// The retrying operations, as a queue or a stack names them.
fn retrying<B: WeakBag<Item = u64>>(bag: &B, op: &ContainerOp<u64>) -> ContainerRet<u64> {
    match op {
        ContainerOp::Push(v) => {
            bag.push(*v);
            ContainerRet::Pushed
        }
        ContainerOp::Pop => bag.pop().into(),
    }
}

/// The single attempts, as the weak-bag specification names them.
fn attempts<B: WeakBag<Item = u64>>(bag: &B, op: &ContainerOp<u64>) -> ContainerRet<u64> {
    match op {
        ContainerOp::Push(v) => match bag.try_push(*v) {
            Ok(()) => ContainerRet::Pushed,
            Err(_) => ContainerRet::Transient,
        },
        ContainerOp::Pop => match bag.try_pop() {
            Ok(v) => ContainerRet::Popped(v),
            Err(PopError::Empty) => ContainerRet::Empty,
            Err(PopError::Transient) => ContainerRet::Transient,
        },
    }
}

#[test]
fn mpmc_is_a_linearizable_fifo_across_segment_boundaries() {
    let subject = Shared::new(
        Queue::<u64, 2>::with_segment_size,
        |q: &Queue<u64, 2>, op: &ContainerOp<u64>| retrying(q, op),
    );
    Runner::new(QueueSpec::new(), subject, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0xFA_A0)
        .assert_linearizable();
}

#[test]
fn mpmc_is_a_linearizable_fifo_with_default_segments() {
    let subject = Shared::new(
        Queue::<u64>::new,
        |q: &Queue<u64>, op: &ContainerOp<u64>| retrying(q, op),
    );
    Runner::new(QueueSpec::new(), subject, workload::push_pop)
        .threads(3)
        .ops(10)
        .rounds(rounds())
        .seed(0xFA_A1)
        .assert_linearizable();
}

#[test]
fn stack_is_a_linearizable_lifo() {
    let subject = Shared::new(
        Stack::<u64>::new,
        |s: &Stack<u64>, op: &ContainerOp<u64>| retrying(s, op),
    );
    Runner::new(StackSpec::new(), subject, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x57AC)
        .assert_linearizable();
}

#[test]
fn stack_through_short_lived_handles_is_a_linearizable_lifo() {
    // A handle per operation: every push refills a stash from the shared free list and every
    // handle's drop spills it back, so the batches move between threads all the time.
    let subject = Shared::new(
        Stack::<u64>::new,
        |s: &Stack<u64>, op: &ContainerOp<u64>| {
            let handle = s.handle();
            match op {
                ContainerOp::Push(v) => {
                    handle.push(*v);
                    ContainerRet::Pushed
                }
                ContainerOp::Pop => handle.pop().into(),
            }
        },
    );
    Runner::new(StackSpec::new(), subject, workload::push_pop)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x57AD)
        .assert_linearizable();
}

/// Which transient failures must overlap another operation.
#[derive(Clone, Copy, PartialEq)]
enum SoloFailures {
    /// None may run alone.
    Never,
    /// Pops may not; a push may (the fetch-and-add queue: a pop that lost a race for the last
    /// value can leave a poisoned cell that the next push to draw its ticket finds alone).
    PushesOnly,
}

/// Runs the single attempts of `make()`'s bag against the weak-bag specification, and checks
/// which transient failures overlapped another operation.
fn attempts_are_a_weak_bag<B, M>(make: M, seed: u64, allowed: SoloFailures)
where
    B: WeakBag<Item = u64> + Send + Sync,
    M: Fn() -> B + Sync,
{
    let runner = Runner::new(
        WeakBagSpec::new(),
        Shared::new(make, |b: &B, op: &ContainerOp<u64>| attempts(b, op)),
        workload::push_pop,
    );
    let shape = Shape {
        threads: 3,
        ops_per_thread: 8,
    };
    let mut transients = 0;
    for round in 0..rounds() {
        let history = runner.record(shape, seed.wrapping_add(round));
        let verdict = check(&WeakBagSpec::new(), &history);
        assert!(
            verdict.is_linearizable(),
            "round {round}: {verdict:?}\n{}",
            history.timeline()
        );
        let solo: Vec<_> = solo_transients(&history)
            .into_iter()
            .filter(|&id| {
                allowed == SoloFailures::Never
                    || matches!(history.operations()[id].op, ContainerOp::Pop)
            })
            .collect();
        assert!(
            solo.is_empty(),
            "round {round}: operations {solo:?} failed with nothing running beside them\n{}",
            history.timeline()
        );
        transients += history
            .operations()
            .iter()
            .filter(|o| matches!(o.result, ContainerRet::Transient))
            .count();
    }
    // Not an assertion (contention depends on the scheduler): a note for whoever reads the
    // test output with --nocapture.
    println!("{transients} transient failures seen");
}

#[test]
fn mpmc_attempts_are_a_weak_bag_whose_pops_fail_only_under_contention() {
    attempts_are_a_weak_bag(
        Queue::<u64, 2>::with_segment_size,
        0xA77E,
        SoloFailures::PushesOnly,
    );
}

#[test]
fn stack_attempts_are_a_weak_bag_failing_only_under_contention() {
    attempts_are_a_weak_bag(Stack::<u64>::new, 0x5A7E, SoloFailures::Never);
}

/// The Bagpipe as a lincheck subject. Each round's Bagpipe is kept so that the test can drain
/// it afterwards, and the pops that returned `Empty` are noted (the history records them as
/// `Transient`, see the module doc).
struct BagpipeSubject<B> {
    pipes: usize,
    current: Arc<Mutex<Option<Arc<Bagpipe<B>>>>>,
    /// `(thread, position in its script)` of every pop that returned `Empty`.
    empties: Arc<Mutex<Vec<(usize, usize)>>>,
}

struct BagpipeHandle<B> {
    bag: Arc<Bagpipe<B>>,
    thread: usize,
    done: usize,
    empties: Arc<Mutex<Vec<(usize, usize)>>>,
}

impl<B> Subject for BagpipeSubject<B>
where
    B: WeakBag<Item = u64> + Default + Send + Sync,
{
    type Op = ContainerOp<u64>;
    type Ret = ContainerRet<u64>;
    type Handle = BagpipeHandle<B>;

    fn fresh(&self, shape: Shape) -> Vec<BagpipeHandle<B>> {
        let bag = Arc::new(Bagpipe::with_pipes(self.pipes).expect("a valid pipe count"));
        *self.current.lock().unwrap() = Some(bag.clone());
        self.empties.lock().unwrap().clear();
        (0..shape.threads)
            .map(|thread| BagpipeHandle {
                bag: bag.clone(),
                thread,
                done: 0,
                empties: self.empties.clone(),
            })
            .collect()
    }

    fn apply(&self, handle: &mut BagpipeHandle<B>, op: &ContainerOp<u64>) -> ContainerRet<u64> {
        let position = handle.done;
        handle.done += 1;
        match op {
            // Half the pushes are single rounds, half retry until a pipe takes the item.
            ContainerOp::Push(v) if v % 2 == 0 => match handle.bag.try_push(*v) {
                Ok(()) => ContainerRet::Pushed,
                Err(_) => ContainerRet::Transient,
            },
            ContainerOp::Push(v) => {
                handle.bag.push(*v);
                ContainerRet::Pushed
            }
            ContainerOp::Pop => match handle.bag.try_pop() {
                Ok(v) => ContainerRet::Popped(v),
                Err(PopError::Transient) => ContainerRet::Transient,
                Err(PopError::Empty) => {
                    handle
                        .empties
                        .lock()
                        .unwrap()
                        .push((handle.thread, position));
                    ContainerRet::Transient
                }
            },
        }
    }
}

/// The operations of `history` that were pops returning `Empty`, given their
/// `(thread, position)`.
fn empty_pops(
    history: &History<ContainerOp<u64>, ContainerRet<u64>>,
    empties: &[(usize, usize)],
) -> Vec<usize> {
    let mut seen_per_thread = vec![0; history.threads()];
    let mut found = Vec::new();
    for (index, op) in history.operations().iter().enumerate() {
        let position = seen_per_thread[op.thread];
        seen_per_thread[op.thread] += 1;
        if empties.contains(&(op.thread, position)) {
            found.push(index);
        }
    }
    assert_eq!(
        found.len(),
        empties.len(),
        "empty pops not found in the history"
    );
    found
}

fn bagpipe_is_a_weak_bag<B>(pipes: usize, seed: u64)
where
    B: WeakBag<Item = u64> + Default + Send + Sync,
{
    let empties = Arc::new(Mutex::new(Vec::new()));
    let current = Arc::new(Mutex::new(None));
    let subject = BagpipeSubject::<B> {
        pipes,
        current: current.clone(),
        empties: empties.clone(),
    };
    let runner = Runner::new(WeakBagSpec::new(), subject, workload::push_pop);
    let shape = Shape {
        threads: 3,
        ops_per_thread: 8,
    };
    for round in 0..rounds() {
        let history = runner.record(shape, seed.wrapping_add(round));
        let verdict = check(&WeakBagSpec::new(), &history);
        assert!(
            verdict.is_linearizable(),
            "round {round}: {verdict:?}\n{}",
            history.timeline()
        );
        let ops = history.operations();

        // Drain: exactly the items pushed and not popped come out.
        let bag = current.lock().unwrap().clone().expect("a round ran");
        let mut left: Vec<u64> = std::iter::from_fn(|| bag.pop()).collect();
        let mut expected: Vec<u64> = ops
            .iter()
            .filter_map(|o| match (o.op, o.result) {
                (ContainerOp::Push(v), ContainerRet::Pushed) => Some(v),
                _ => None,
            })
            .filter(|v| {
                !ops.iter()
                    .any(|o| matches!(o.result, ContainerRet::Popped(p) if p == *v))
            })
            .collect();
        left.sort_unstable();
        expected.sort_unstable();
        assert_eq!(
            left,
            expected,
            "round {round}: the drain does not match\n{}",
            history.timeline()
        );

        // `Empty` never misses an item that was in the bag for the whole call: pushed
        // before the call began, and not taken by a pop that began before the call ended.
        let empties = empties.lock().unwrap().clone();
        for e in empty_pops(&history, &empties) {
            let empty = &ops[e];
            for push in ops.iter().filter(|o| {
                matches!(
                    (o.op, o.result),
                    (ContainerOp::Push(_), ContainerRet::Pushed)
                ) && o.ret < empty.call
            }) {
                let ContainerOp::Push(v) = push.op else {
                    unreachable!()
                };
                let taken_in_time = ops.iter().any(|o| {
                    matches!(o.result, ContainerRet::Popped(p) if p == v) && o.call < empty.ret
                });
                assert!(
                    taken_in_time,
                    "round {round}: operation {e} said Empty while {v} sat in the bag\n{}",
                    history.timeline()
                );
            }
        }
    }
}

#[test]
fn bagpipe_of_queues_is_a_weak_bag_that_loses_nothing() {
    bagpipe_is_a_weak_bag::<Queue<u64, 2>>(2, 0xBA6);
    bagpipe_is_a_weak_bag::<Queue<u64, 2>>(4, 0xBA7);
}

#[test]
fn bagpipe_of_stacks_is_a_weak_bag_that_loses_nothing() {
    bagpipe_is_a_weak_bag::<Stack<u64>>(2, 0x5BA6);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
