//! The runner on subjects written here: per-thread handles with `resolve`, seeds that replay,
//! failures found and shrunk, settings refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pitlane_lincheck::specs::{
    ContainerOp, CounterOp, CounterRet, CounterSpec, PoolOp, PoolRet, PoolSpec, QueueSpec,
};
use pitlane_lincheck::{
    MAX_THREADS, OpSlot, Runner, SettingsError, Shape, Shared, Subject, workload,
};

/// A pool of numbered objects behind a mutex; each thread's handle remembers what it holds,
/// so that a scripted `Free(k)` frees one of them.
struct MutexPool {
    objects: u64,
    /// Whether to hand out the last freed object again without taking it off the list (the
    /// bug under test).
    broken: bool,
}

struct PoolHandle {
    pool: Arc<Mutex<Vec<u64>>>,
    held: Vec<u64>,
    broken: bool,
}

impl Subject for MutexPool {
    type Op = PoolOp;
    type Ret = PoolRet;
    type Handle = PoolHandle;

    fn fresh(&self, shape: Shape) -> Vec<PoolHandle> {
        let pool = Arc::new(Mutex::new((0..self.objects).collect()));
        (0..shape.threads)
            .map(|_| PoolHandle {
                pool: Arc::clone(&pool),
                held: Vec::new(),
                broken: self.broken,
            })
            .collect()
    }

    fn resolve(&self, handle: &mut PoolHandle, planned: &PoolOp) -> PoolOp {
        match planned {
            PoolOp::Free(k) if !handle.held.is_empty() => {
                PoolOp::Free(handle.held[*k as usize % handle.held.len()])
            }
            _ => PoolOp::Alloc,
        }
    }

    fn apply(&self, handle: &mut PoolHandle, op: &PoolOp) -> PoolRet {
        match op {
            PoolOp::Alloc => {
                let mut free = handle.pool.lock().unwrap();
                let taken = if handle.broken {
                    free.last().copied()
                } else {
                    free.pop()
                };
                drop(free);
                match taken {
                    Some(x) => {
                        handle.held.push(x);
                        PoolRet::Allocated(x)
                    }
                    None => PoolRet::Exhausted,
                }
            }
            PoolOp::Free(x) => {
                handle.held.retain(|h| h != x);
                handle.pool.lock().unwrap().push(*x);
                PoolRet::Freed
            }
        }
    }
}

#[test]
fn a_pool_with_per_thread_handles_passes() {
    Runner::new(
        PoolSpec::with_capacity(4),
        MutexPool {
            objects: 4,
            broken: false,
        },
        workload::alloc_free,
    )
    .threads(3)
    .ops(8)
    .rounds(300)
    .seed(11)
    .assert_linearizable();
}

#[test]
fn a_pool_handing_out_an_object_twice_is_caught_and_shrunk() {
    let report = Runner::new(
        PoolSpec::with_capacity(4),
        MutexPool {
            objects: 4,
            broken: true,
        },
        workload::alloc_free,
    )
    .threads(3)
    .ops(8)
    .rounds(300)
    .seed(12)
    .run()
    .unwrap();
    let failure = report.failure.expect("the broken pool is caught");
    assert!(failure.history.len() <= 24);
    assert!(failure.shape.threads * failure.shape.ops_per_thread <= 24);
    let text = failure.to_string();
    assert!(text.contains("Allocated"), "{text}");
    assert!(text.contains("replay the scripts with"), "{text}");
}

#[test]
fn an_atomic_counter_passes_and_a_racy_one_fails() {
    let good = Shared::new(
        || AtomicU64::new(0),
        |c: &AtomicU64, op: &CounterOp| match op {
            CounterOp::Add(n) => {
                c.fetch_add(*n, Ordering::SeqCst);
                CounterRet::Added
            }
            CounterOp::FetchAdd(n) => CounterRet::Value(c.fetch_add(*n, Ordering::SeqCst)),
            CounterOp::Get => CounterRet::Value(c.load(Ordering::SeqCst)),
        },
    );
    Runner::new(CounterSpec::new(), good, workload::count)
        .threads(3)
        .ops(6)
        .rounds(300)
        .assert_linearizable();

    // Fetch-add as a load, a pause and a store: increments get lost.
    let racy = Shared::new(
        || AtomicU64::new(0),
        |c: &AtomicU64, op: &CounterOp| {
            let rmw = |n: u64| {
                let before = c.load(Ordering::SeqCst);
                std::thread::yield_now();
                c.store(before + n, Ordering::SeqCst);
                before
            };
            match op {
                CounterOp::Add(n) => {
                    rmw(*n);
                    CounterRet::Added
                }
                CounterOp::FetchAdd(n) => CounterRet::Value(rmw(*n)),
                CounterOp::Get => CounterRet::Value(c.load(Ordering::SeqCst)),
            }
        },
    );
    let report = Runner::new(CounterSpec::new(), racy, workload::count)
        .threads(3)
        .ops(6)
        .rounds(2000)
        .shrink_time(Duration::from_millis(200))
        .run()
        .unwrap();
    assert!(
        report.failure.is_some(),
        "lost updates found in {} rounds",
        report.rounds
    );
}

#[test]
fn a_seed_replays_the_same_scripts() {
    let subject = Shared::new(
        || Mutex::new(std::collections::VecDeque::new()),
        |q: &Mutex<std::collections::VecDeque<u64>>, op: &ContainerOp<u64>| {
            let mut q = q.lock().unwrap();
            match op {
                ContainerOp::Push(v) => {
                    q.push_back(*v);
                    pitlane_lincheck::specs::ContainerRet::Pushed
                }
                ContainerOp::Pop => q.pop_front().into(),
            }
        },
    );
    let runner = Runner::new(QueueSpec::new(), subject, workload::push_pop);
    let shape = Shape {
        threads: 3,
        ops_per_thread: 5,
    };
    let scripts = |seed| {
        let history = runner.record(shape, seed);
        let mut per_thread: Vec<Vec<ContainerOp<u64>>> = vec![Vec::new(); 3];
        for o in history.operations() {
            per_thread[o.thread].push(o.op);
        }
        per_thread
    };
    assert_eq!(scripts(77), scripts(77));
    assert_ne!(scripts(77), scripts(78));
    let small = runner.record(
        Shape {
            threads: 2,
            ops_per_thread: 3,
        },
        77,
    );
    // A smaller shape from the same seed makes the same random choices: each thread's
    // script starts like the larger one (values made from `serial` may differ).
    let kinds = |ops: &[ContainerOp<u64>]| -> Vec<bool> {
        ops.iter()
            .map(|op| matches!(op, ContainerOp::Push(_)))
            .collect()
    };
    let full = scripts(77);
    for (t, script) in full.iter().enumerate().take(2) {
        let ops: Vec<_> = small
            .operations()
            .iter()
            .filter(|o| o.thread == t)
            .map(|o| o.op)
            .collect();
        assert_eq!(kinds(&ops), kinds(&script[..3]));
    }
}

#[test]
fn generated_values_are_distinct_within_a_round() {
    let subject = Shared::new(
        || (),
        |_: &(), _: &ContainerOp<u64>| pitlane_lincheck::specs::ContainerRet::Pushed,
    );
    let generate = |slot: &mut OpSlot<'_>| ContainerOp::Push(slot.serial);
    let runner = Runner::new(QueueSpec::new(), subject, generate);
    let history = runner.record(
        Shape {
            threads: 4,
            ops_per_thread: 8,
        },
        5,
    );
    let mut values: Vec<u64> = history
        .operations()
        .iter()
        .map(|o| match o.op {
            ContainerOp::Push(v) => v,
            ContainerOp::Pop => unreachable!(),
        })
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..32).collect::<Vec<_>>());
}

#[test]
fn settings_out_of_range_are_errors_not_panics() {
    let subject = Shared::new(
        || (),
        |_: &(), _: &ContainerOp<u64>| pitlane_lincheck::specs::ContainerRet::Pushed,
    );
    let runner = Runner::new(QueueSpec::new(), subject, workload::push_pop);
    let runner = runner.threads(0);
    assert_eq!(runner.run().unwrap_err(), SettingsError::NoThreads);
    let runner = runner.threads(2).ops(0);
    assert_eq!(runner.run().unwrap_err(), SettingsError::NoOperations);
    let runner = runner.ops(2).rounds(0);
    assert_eq!(runner.run().unwrap_err(), SettingsError::NoRounds);
    // A million threads of one operation each fit in `MAX_OPERATIONS`, but would be a million
    // OS threads, each waiting for all the others (it hung: see `record`'s docs).
    let runner = runner.rounds(1).ops(1).threads(1 << 20);
    assert_eq!(
        runner.run().unwrap_err(),
        SettingsError::TooManyThreads { threads: 1 << 20 }
    );
    let runner = runner.threads(MAX_THREADS + 1);
    assert!(
        runner
            .run()
            .unwrap_err()
            .to_string()
            .contains("1025 threads")
    );
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
