//! Property test: random scripts of acquires (polled by hand, served, cancelled, dropped
//! unpolled), try_acquires, add_permits, forget_permits, permit drops and close, on one
//! thread, against a model of tokio's fair semaphore (FIFO service with partial permits
//! taken at enqueue, cancellation returning them, close failing every waiter, which gives its
//! partial permits back when it is next polled or dropped, and a waiter served before a close
//! but polled after it failing too and giving its permits back: tokio's rules, which
//! `differential_tokio.rs` checks against tokio itself).
#![cfg(not(pitlane_loom))]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use pitlane_wait::{AcquireError, Semaphore, SemaphorePermit, TryAcquireError};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Start an acquire of n permits and poll it once.
    Acquire(u32),
    /// Poll the k-th live acquire.
    Poll(usize),
    /// Drop the k-th live acquire.
    DropAcquire(usize),
    TryAcquire(u32),
    Add(usize),
    Forget(usize),
    /// Drop the k-th held permit.
    DropPermit(usize),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0_u32..5).prop_map(Op::Acquire),
        3 => (0_usize..8).prop_map(Op::Poll),
        2 => (0_usize..8).prop_map(Op::DropAcquire),
        2 => (0_u32..4).prop_map(Op::TryAcquire),
        3 => (0_usize..5).prop_map(Op::Add),
        1 => (0_usize..4).prop_map(Op::Forget),
        3 => (0_usize..8).prop_map(Op::DropPermit),
        1 => Just(Op::Close),
    ]
}

/// Where the model's waiter stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stand {
    Queued {
        got: u64,
    },
    Served,
    /// Failed by a close; still holds the permits it had been given, until it is polled (and
    /// fails) or dropped.
    Failed {
        got: u64,
    },
}

#[derive(Debug, Default)]
struct Model {
    permits: u64,
    closed: bool,
    /// Ids of queued waiters, in order.
    queue: VecDeque<usize>,
    /// Per id: permits asked, where it stands.
    waiters: Vec<(u64, Stand)>,
}

impl Model {
    fn release(&mut self, mut rem: u64) {
        while rem > 0 {
            let Some(&head) = self.queue.front() else {
                break;
            };
            let (need, Stand::Queued { got }) = self.waiters[head] else {
                unreachable!()
            };
            if rem >= need - got {
                rem -= need - got;
                self.waiters[head].1 = Stand::Served;
                self.queue.pop_front();
            } else {
                self.waiters[head].1 = Stand::Queued { got: got + rem };
                rem = 0;
            }
        }
        self.permits += rem;
    }

    fn available(&self) -> u64 {
        if self.queue.is_empty() {
            self.permits
        } else {
            0
        }
    }
}

type Acquire<'a> = Pin<Box<dyn Future<Output = Result<SemaphorePermit<'a>, AcquireError>> + 'a>>;

fn run(start: usize, ops: &[Op]) {
    let semaphore = Semaphore::new(start);
    let mut model = Model {
        permits: start as u64,
        ..Model::default()
    };
    // Live acquires: (model id, future).
    let mut acquires: Vec<(usize, Acquire<'_>)> = Vec::new();
    let mut permits: Vec<SemaphorePermit<'_>> = Vec::new();
    let mut cx = Context::from_waker(Waker::noop());
    for op in ops {
        match *op {
            Op::Acquire(n) => {
                let id = model.waiters.len();
                let mut future: Acquire<'_> = Box::pin(semaphore.acquire_many(n));
                let got = future.as_mut().poll(&mut cx);
                let n = n as u64;
                let expect = if model.closed {
                    Stand::Failed { got: 0 }
                } else if n == 0 || (model.queue.is_empty() && model.permits >= n) {
                    model.permits -= if model.queue.is_empty() { n } else { 0 };
                    Stand::Served
                } else {
                    let got = if model.queue.is_empty() {
                        std::mem::take(&mut model.permits)
                    } else {
                        0
                    };
                    model.queue.push_back(id);
                    Stand::Queued { got }
                };
                model.waiters.push((n, expect));
                match (got, expect) {
                    (Poll::Ready(Ok(permit)), Stand::Served) => {
                        assert_eq!(permit.num_permits() as u64, n);
                        permits.push(permit);
                    }
                    (Poll::Ready(Err(_)), Stand::Failed { got: 0 }) => {}
                    (Poll::Pending, Stand::Queued { .. }) => acquires.push((id, future)),
                    (got, expect) => panic!("acquire {n}: got {got:?}, model {expect:?}"),
                }
            }
            Op::Poll(k) if !acquires.is_empty() => {
                let k = k % acquires.len();
                let id = acquires[k].0;
                let got = acquires[k].1.as_mut().poll(&mut cx);
                // Served before a close but polled after it: fails, and its permits go back.
                if let (true, (need, Stand::Served)) = (model.closed, model.waiters[id]) {
                    model.waiters[id].1 = Stand::Failed { got: need };
                }
                match (got, model.waiters[id].1) {
                    (Poll::Ready(Ok(permit)), Stand::Served) => {
                        permits.push(permit);
                        drop(acquires.remove(k));
                    }
                    (Poll::Ready(Err(_)), Stand::Failed { got }) => {
                        model.permits += got;
                        model.waiters[id].1 = Stand::Failed { got: 0 };
                        drop(acquires.remove(k));
                    }
                    (Poll::Pending, Stand::Queued { .. }) => {}
                    (got, stand) => panic!("poll of {id}: got {got:?}, model {stand:?}"),
                }
            }
            Op::DropAcquire(k) if !acquires.is_empty() => {
                let (id, future) = acquires.remove(k % acquires.len());
                drop(future);
                match model.waiters[id].1 {
                    Stand::Queued { got } => {
                        model.queue.retain(|&w| w != id);
                        model.release(got);
                    }
                    // Served but never returned: its permits go back.
                    Stand::Served => model.release(model.waiters[id].0),
                    // Failed by a close, not polled since: its partial permits go back.
                    Stand::Failed { got } => model.permits += got,
                }
            }
            Op::TryAcquire(n) => {
                let got = semaphore.try_acquire_many(n);
                let n = n as u64;
                let expect = if model.closed {
                    Err(TryAcquireError::Closed)
                } else if model.available() >= n {
                    // With tasks waiting nothing is free, so only `n == 0` gets here then.
                    model.permits -= n;
                    Ok(())
                } else {
                    Err(TryAcquireError::NoPermits)
                };
                match got {
                    Ok(permit) => {
                        assert_eq!(expect, Ok(()), "try_acquire {n}");
                        permits.push(permit);
                    }
                    Err(e) => assert_eq!(expect, Err(e), "try_acquire {n}"),
                }
            }
            Op::Add(n) => {
                semaphore.add_permits(n);
                model.release(n as u64);
            }
            Op::Forget(n) => {
                let expect = if model.queue.is_empty() {
                    let removed = model.permits.min(n as u64);
                    model.permits -= removed;
                    removed
                } else {
                    0
                };
                assert_eq!(semaphore.forget_permits(n) as u64, expect, "forget {n}");
            }
            Op::DropPermit(k) if !permits.is_empty() => {
                let permit = permits.remove(k % permits.len());
                model.release(permit.num_permits() as u64);
                drop(permit);
            }
            Op::Close => {
                semaphore.close();
                model.closed = true;
                for id in model.queue.drain(..) {
                    if let Stand::Queued { got } = model.waiters[id].1 {
                        model.waiters[id].1 = Stand::Failed { got };
                    }
                }
            }
            _ => {}
        }
        assert_eq!(
            semaphore.available_permits() as u64,
            model.available(),
            "after {op:?}"
        );
        assert_eq!(semaphore.is_closed(), model.closed);
    }
    // Tear down: drop everything; every permit comes back.
    drop(acquires);
    drop(permits);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 512 } else { 4096 }))]

    #[test]
    fn semaphore_matches_the_model(start in 0_usize..4, ops in prop::collection::vec(op(), 0..40)) {
        run(start, &ops);
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
