//! Linearizability of the slab against the pool specification (pitlane-lincheck): a one-shard
//! slab small enough to run out, whose `None` must then mean "all allocated", and an
//! eight-shard slab against the unbounded pool (its capacity is never reached, because with
//! several shards an empty answer may be transient, as the docs say).
#![cfg(not(pitlane_loom))]

use std::sync::{Arc, Mutex};

use pitlane_lincheck::specs::{PoolOp, PoolRet, PoolSpec};
use pitlane_lincheck::{Runner, Shape, Subject, workload};
use pitlane_slab::{Config, ObjectId, Slab};

fn rounds() -> u64 {
    if cfg!(debug_assertions) { 1_000 } else { 5_000 }
}

/// A slab shared by the threads; each thread remembers what it holds, so that a free names
/// an object this thread allocated.
struct SlabSubject {
    config: Config,
    /// Objects still held at the end of a round are freed then, and the slab must agree.
    last: Mutex<Option<Arc<Slab>>>,
}

impl Subject for SlabSubject {
    type Op = PoolOp;
    type Ret = PoolRet;
    type Handle = (Arc<Slab>, Vec<ObjectId>);

    fn fresh(&self, shape: Shape) -> Vec<Self::Handle> {
        let slab = Arc::new(Slab::heap(self.config).unwrap());
        if let Some(old) = self.last.lock().unwrap().replace(slab.clone()) {
            let report = old.check();
            assert!(report.problems.is_empty(), "{report}");
        }
        (0..shape.threads)
            .map(|_| (slab.clone(), Vec::new()))
            .collect()
    }

    fn resolve(&self, handle: &mut Self::Handle, planned: &PoolOp) -> PoolOp {
        match planned {
            PoolOp::Free(k) if !handle.1.is_empty() => {
                let at = *k as usize % handle.1.len();
                PoolOp::Free(handle.1[at].to_bits())
            }
            _ => PoolOp::Alloc,
        }
    }

    fn apply(&self, handle: &mut Self::Handle, op: &PoolOp) -> PoolRet {
        match op {
            PoolOp::Alloc => match handle.0.alloc() {
                Some(id) => {
                    handle.1.push(id);
                    PoolRet::Allocated(id.to_bits())
                }
                None => PoolRet::Exhausted,
            },
            PoolOp::Free(x) => {
                let id = ObjectId::from_bits(*x);
                handle.1.retain(|&h| h != id);
                handle
                    .0
                    .free(id)
                    .expect("freeing an object this thread holds");
                PoolRet::Freed
            }
        }
    }
}

#[test]
fn one_shard_slab_is_a_linearizable_pool_with_exhaustion() {
    let subject = SlabSubject {
        config: Config::new(16, 3).with_shards(1),
        last: Mutex::new(None),
    };
    Runner::new(PoolSpec::with_capacity(3), subject, workload::alloc_free)
        .threads(3)
        .ops(8)
        .rounds(rounds())
        .seed(0x51AB)
        .assert_linearizable();
}

#[test]
fn sharded_slab_is_a_linearizable_pool() {
    let subject = SlabSubject {
        config: Config::new(8, 64).with_shards(8),
        last: Mutex::new(None),
    };
    Runner::new(PoolSpec::unbounded(), subject, workload::alloc_free)
        .threads(4)
        .ops(8)
        .rounds(rounds())
        .seed(0x51AC)
        .assert_linearizable();
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
