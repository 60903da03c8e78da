//! `pitlane lincheck` subjects from `pitlane-queue`.
//!
//! They live here rather than in `pitlane-lincheck` because `pitlane-queue`'s own tests use
//! `pitlane-lincheck`; the command line is the one place that sees both. The B-Queue (`spsc`)
//! needs a producer and a consumer handle per round and is checked by
//! `crates/pitlane-queue/tests/lincheck_spsc.rs` instead.

use pitlane_lincheck::specs::{ContainerOp, ContainerRet, QueueSpec, StackSpec, WeakBagSpec};
use pitlane_lincheck::subjects::{Entry, Registry};
use pitlane_lincheck::{
    Runner, SequentialSpec, Settings, SettingsError, Shared, Summary, workload,
};
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;
use pitlane_queue::{PopError, WeakBag};

const ENTRIES: &[Entry] = &[
    Entry::new(
        "pitlane-mpmc",
        "pitlane_queue::mpmc::Queue<u64> (push, pop) checked as a FIFO queue",
        false,
        run_mpmc,
    ),
    Entry::new(
        "pitlane-mpmc-small-segments",
        "pitlane_queue::mpmc::Queue<u64, 2>: segments of two cells, so rounds cross segment hand-offs",
        false,
        run_mpmc_small_segments,
    ),
    Entry::new(
        "pitlane-stack",
        "pitlane_queue::stack::Stack<u64> (push, pop) checked as a LIFO stack",
        false,
        run_stack,
    ),
    Entry::new(
        "pitlane-bagpipe",
        "pitlane_queue::bagpipe::Bagpipe<Queue<u64>> try_push/try_pop checked as a weak bag \
         (its Empty is a snapshot per pipe, so it is checked as a transient failure)",
        false,
        run_bagpipe,
    ),
];

/// The built-in subjects and those of `pitlane-queue`.
pub fn registry() -> Registry {
    let mut registry = Registry::builtin();
    for entry in ENTRIES {
        registry
            .add(*entry)
            .expect("pitlane-queue subject names differ from the built-in ones");
    }
    registry
}

fn retrying<B: WeakBag<Item = u64>>(bag: &B, op: &ContainerOp<u64>) -> ContainerRet<u64> {
    match op {
        ContainerOp::Push(v) => {
            bag.push(*v);
            ContainerRet::Pushed
        }
        ContainerOp::Pop => bag.pop().into(),
    }
}

/// Checks the bag that `make` builds, through its retrying `push` and `pop`, against `spec`.
fn check_retrying<B, S>(
    make: fn() -> B,
    spec: S,
    settings: &Settings,
) -> Result<Summary, SettingsError>
where
    B: WeakBag<Item = u64> + Send + Sync,
    S: SequentialSpec<Op = ContainerOp<u64>, Ret = ContainerRet<u64>>,
{
    let subject = Shared::new(make, retrying::<B>);
    let report = Runner::new(spec, subject, workload::push_pop)
        .settings(*settings)
        .run()?;
    Ok(report.summary())
}

fn run_mpmc(settings: &Settings) -> Result<Summary, SettingsError> {
    check_retrying(Queue::<u64>::new, QueueSpec::new(), settings)
}

fn run_mpmc_small_segments(settings: &Settings) -> Result<Summary, SettingsError> {
    check_retrying(
        Queue::<u64, 2>::with_segment_size,
        QueueSpec::new(),
        settings,
    )
}

fn run_stack(settings: &Settings) -> Result<Summary, SettingsError> {
    check_retrying(Stack::<u64>::new, StackSpec::new(), settings)
}

fn run_bagpipe(settings: &Settings) -> Result<Summary, SettingsError> {
    let subject = Shared::new(
        Bagpipe::<Queue<u64>>::new,
        |b: &Bagpipe<Queue<u64>>, op: &ContainerOp<u64>| match op {
            ContainerOp::Push(v) => match b.try_push(*v) {
                Ok(()) => ContainerRet::Pushed,
                Err(_) => ContainerRet::Transient,
            },
            ContainerOp::Pop => match b.try_pop() {
                Ok(v) => ContainerRet::Popped(v),
                Err(PopError::Empty | PopError::Transient) => ContainerRet::Transient,
            },
        },
    );
    let report = Runner::new(WeakBagSpec::new(), subject, workload::push_pop)
        .settings(*settings)
        .run()?;
    Ok(report.summary())
}
