//! The `std` structures behind a mutex: correct by construction, so they must pass.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::Entry;
use crate::runner::{Runner, Settings, SettingsError, Shared, Summary};
use crate::specs::{ContainerOp, ContainerRet, QueueSpec, StackSpec};
use crate::workload;

pub(super) const ENTRIES: &[Entry] = &[
    Entry::new(
        "std-mutex-vecdeque",
        "std::sync::Mutex<VecDeque<u64>> (push_back, pop_front) checked as a FIFO queue",
        false,
        run_vecdeque,
    ),
    Entry::new(
        "std-mutex-vec-stack",
        "std::sync::Mutex<Vec<u64>> (push, pop) checked as a LIFO stack",
        false,
        run_vec_stack,
    ),
];

fn run_vecdeque(settings: &Settings) -> Result<Summary, SettingsError> {
    let subject = Shared::new(
        || Mutex::new(VecDeque::new()),
        |queue: &Mutex<VecDeque<u64>>, op: &ContainerOp<u64>| {
            let mut queue = queue
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match op {
                ContainerOp::Push(v) => {
                    queue.push_back(*v);
                    ContainerRet::Pushed
                }
                ContainerOp::Pop => queue.pop_front().into(),
            }
        },
    );
    let report = Runner::new(QueueSpec::new(), subject, workload::push_pop)
        .settings(*settings)
        .run()?;
    Ok(report.summary())
}

fn run_vec_stack(settings: &Settings) -> Result<Summary, SettingsError> {
    let subject = Shared::new(
        || Mutex::new(Vec::new()),
        |stack: &Mutex<Vec<u64>>, op: &ContainerOp<u64>| {
            let mut stack = stack
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match op {
                ContainerOp::Push(v) => {
                    stack.push(*v);
                    ContainerRet::Pushed
                }
                ContainerOp::Pop => stack.pop().into(),
            }
        },
    );
    let report = Runner::new(StackSpec::new(), subject, workload::push_pop)
        .settings(*settings)
        .run()?;
    Ok(report.summary())
}
