use std::collections::BTreeSet;

use crate::spec::SequentialSpec;

/// An operation on an object pool (a slab, a freelist): objects are named by a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolOp {
    /// Take an object out of the pool.
    Alloc,
    /// Give this object back.
    Free(u64),
}

/// What a [`PoolOp`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolRet {
    /// The object handed out.
    Allocated(u64),
    /// No object was free.
    Exhausted,
    /// The object was taken back.
    Freed,
}

/// An object pool: alloc returns an object not currently allocated, free takes back an
/// allocated one.
///
/// `Alloc` returns `Allocated(x)` when `x` is not allocated, and marks it allocated; with a
/// capacity it may do so only while fewer than `capacity` objects are allocated, and it
/// returns `Exhausted` exactly when `capacity` are (without a capacity, never). `Free(x)`
/// returns `Freed` when `x` is allocated, and makes it free again. Which object an alloc
/// picks is not specified: any free one will do.
///
/// # Examples
///
/// A pool handing out one object twice:
///
/// ```
/// use pitlane_lincheck::{History, check};
/// use pitlane_lincheck::specs::{PoolOp::*, PoolRet::*, PoolSpec};
///
/// let mut history = History::new();
/// history.add(0, 0..2, Alloc, Allocated(5))?;
/// history.add(1, 1..3, Alloc, Allocated(5))?;
/// assert!(!check(&PoolSpec::unbounded(), &history).is_linearizable());
/// # Ok::<(), pitlane_lincheck::HistoryError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct PoolSpec {
    capacity: Option<usize>,
}

impl PoolSpec {
    /// A pool that never runs out (an `Exhausted` answer is never allowed).
    pub fn unbounded() -> Self {
        PoolSpec { capacity: None }
    }

    /// A pool of `capacity` objects: it answers `Exhausted` exactly when all are allocated.
    pub fn with_capacity(capacity: usize) -> Self {
        PoolSpec {
            capacity: Some(capacity),
        }
    }
}

impl SequentialSpec for PoolSpec {
    type Op = PoolOp;
    type Ret = PoolRet;
    /// The objects allocated now.
    type State = BTreeSet<u64>;

    fn init(&self) -> BTreeSet<u64> {
        BTreeSet::new()
    }

    fn step(&self, allocated: &BTreeSet<u64>, op: &PoolOp, ret: &PoolRet) -> Option<BTreeSet<u64>> {
        let full = self.capacity.is_some_and(|c| allocated.len() >= c);
        match (op, ret) {
            (PoolOp::Alloc, PoolRet::Allocated(x)) if !full && !allocated.contains(x) => {
                let mut next = allocated.clone();
                next.insert(*x);
                Some(next)
            }
            (PoolOp::Alloc, PoolRet::Exhausted) if full => Some(allocated.clone()),
            (PoolOp::Free(x), PoolRet::Freed) if allocated.contains(x) => {
                let mut next = allocated.clone();
                next.remove(x);
                Some(next)
            }
            _ => None,
        }
    }

    /// A B-tree node holds up to 11 objects and at least 5 (the root excepted), in about
    /// 100 bytes for the objects and its header (leaves; the few inner nodes hold edges too).
    fn state_heap_bytes(&self, allocated: &BTreeSet<u64>) -> usize {
        allocated.len().div_ceil(5) * 112
    }
}
