//! Structures broken on purpose, to show that the checker catches real races.
//!
//! Both are safe Rust built on atomics, with a protocol that is wrong: a read of a shared
//! word, then a plain store of a value computed from it, where a compare-and-swap was
//! needed. Between the read and the store each waits a little (a short spin, then a yield)
//! so that the race, which is real but rare on an idle machine, happens within a few rounds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::Entry;
use crate::runner::{Runner, Settings, SettingsError, Shape, Subject, Summary};
use crate::specs::{ContainerOp, ContainerRet, QueueSpec, StackSpec};
use crate::workload;

pub(super) const ENTRIES: &[Entry] = &[
    Entry::new(
        "broken-racy-tail-queue",
        "an array queue whose push reads the tail and later stores tail + 1 (no CAS): racing pushes overwrite each other",
        true,
        run_racy_tail_queue,
    ),
    Entry::new(
        "broken-lost-push-stack",
        "a Treiber stack whose push stores the new top instead of compare-and-swapping it: one of two racing pushes is lost",
        true,
        run_lost_push_stack,
    ),
];

/// Widens the window between a read and the store that depends on it.
fn race_window() {
    for _ in 0..64 {
        std::hint::spin_loop();
    }
    std::thread::yield_now();
}

/// An array queue with a racy push.
struct RacyTailQueue {
    /// Values, written by push before it publishes them through `tail`.
    slots: Box<[AtomicU64]>,
    /// The next slot to pop; advanced by compare-and-swap (pop itself is correct).
    head: AtomicUsize,
    /// One past the last published slot; meant to be advanced atomically, but push reads it
    /// and stores `tail + 1` later, so concurrent pushes take the same slot.
    tail: AtomicUsize,
}

impl RacyTailQueue {
    fn with_capacity(capacity: usize) -> Self {
        RacyTailQueue {
            slots: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
        }
    }

    fn push(&self, value: u64) {
        let tail = self.tail.load(Ordering::Acquire);
        race_window();
        self.slots[tail].store(value, Ordering::Release);
        // The bug: another push may have published `tail` meanwhile.
        self.tail.store(tail + 1, Ordering::Release);
    }

    fn pop(&self) -> Option<u64> {
        loop {
            let head = self.head.load(Ordering::Acquire);
            if head >= self.tail.load(Ordering::Acquire) {
                return None;
            }
            let value = self.slots[head].load(Ordering::Acquire);
            if self
                .head
                .compare_exchange(head, head + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Some(value);
            }
        }
    }
}

struct RacyTailQueueSubject;

impl Subject for RacyTailQueueSubject {
    type Op = ContainerOp<u64>;
    type Ret = ContainerRet<u64>;
    type Handle = Arc<RacyTailQueue>;

    fn fresh(&self, shape: Shape) -> Vec<Self::Handle> {
        // The tail never passes the number of pushes, at most one per operation.
        let queue = Arc::new(RacyTailQueue::with_capacity(
            shape.threads * shape.ops_per_thread + 1,
        ));
        vec![queue; shape.threads]
    }

    fn apply(&self, queue: &mut Self::Handle, op: &Self::Op) -> Self::Ret {
        match op {
            ContainerOp::Push(v) => {
                queue.push(*v);
                ContainerRet::Pushed
            }
            ContainerOp::Pop => queue.pop().into(),
        }
    }
}

fn run_racy_tail_queue(settings: &Settings) -> Result<Summary, SettingsError> {
    let report = Runner::new(QueueSpec::new(), RacyTailQueueSubject, workload::push_pop)
        .settings(*settings)
        .run()?;
    Ok(report.summary())
}

/// A Treiber stack over an array of nodes, with a racy push. Nodes are numbered from 1
/// (0 is the empty stack) and never reused within a round, so pop's compare-and-swap has no
/// ABA problem; only push is wrong.
struct LostPushStack {
    values: Box<[AtomicU64]>,
    /// `next[i]`: the node below node `i + 1`, written before the node is published.
    next: Box<[AtomicUsize]>,
    /// The top node, 0 when empty.
    top: AtomicUsize,
    /// Nodes handed out so far.
    allocated: AtomicUsize,
}

impl LostPushStack {
    fn with_capacity(capacity: usize) -> Self {
        LostPushStack {
            values: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            next: (0..capacity).map(|_| AtomicUsize::new(0)).collect(),
            top: AtomicUsize::new(0),
            allocated: AtomicUsize::new(0),
        }
    }

    fn push(&self, value: u64) {
        let node = self.allocated.fetch_add(1, Ordering::Relaxed) + 1;
        self.values[node - 1].store(value, Ordering::Relaxed);
        let top = self.top.load(Ordering::Acquire);
        self.next[node - 1].store(top, Ordering::Relaxed);
        race_window();
        // The bug: a store where a compare-and-swap from `top` was needed.
        self.top.store(node, Ordering::Release);
    }

    fn pop(&self) -> Option<u64> {
        loop {
            let top = self.top.load(Ordering::Acquire);
            if top == 0 {
                return None;
            }
            let below = self.next[top - 1].load(Ordering::Relaxed);
            if self
                .top
                .compare_exchange(top, below, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Some(self.values[top - 1].load(Ordering::Relaxed));
            }
        }
    }
}

struct LostPushStackSubject;

impl Subject for LostPushStackSubject {
    type Op = ContainerOp<u64>;
    type Ret = ContainerRet<u64>;
    type Handle = Arc<LostPushStack>;

    fn fresh(&self, shape: Shape) -> Vec<Self::Handle> {
        let stack = Arc::new(LostPushStack::with_capacity(
            shape.threads * shape.ops_per_thread,
        ));
        vec![stack; shape.threads]
    }

    fn apply(&self, stack: &mut Self::Handle, op: &Self::Op) -> Self::Ret {
        match op {
            ContainerOp::Push(v) => {
                stack.push(*v);
                ContainerRet::Pushed
            }
            ContainerOp::Pop => stack.pop().into(),
        }
    }
}

fn run_lost_push_stack(settings: &Settings) -> Result<Summary, SettingsError> {
    let report = Runner::new(StackSpec::new(), LostPushStackSubject, workload::push_pop)
        .settings(*settings)
        .run()?;
    Ok(report.summary())
}
