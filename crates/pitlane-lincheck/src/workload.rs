//! Ready operation generators for [`Runner`](crate::Runner), one per family of specifications.
//!
//! Each is a plain function of the [`OpSlot`], so it can be passed as it is
//! (`workload::push_pop`) or called from a closure that adapts it.

use crate::runner::OpSlot;
use crate::specs::{ContainerOp, CounterOp, PoolOp, RegisterOp, SemaphoreOp};

/// Pushes and pops, half and half; each pushed value is distinct within its round
/// (`serial + 1`, so no value is 0).
pub fn push_pop(slot: &mut OpSlot<'_>) -> ContainerOp<u64> {
    if slot.rng.chance(1, 2) {
        ContainerOp::Push(slot.serial + 1)
    } else {
        ContainerOp::Pop
    }
}

/// Allocations and frees, half and half. A free names a position, not an object: the
/// subject's [`Subject::resolve`](crate::Subject::resolve) turns `Free(k)` into a free of
/// the `k % held`-th object its thread holds (or an `Alloc` when it holds none).
pub fn alloc_free(slot: &mut OpSlot<'_>) -> PoolOp {
    if slot.rng.chance(1, 2) {
        PoolOp::Alloc
    } else {
        PoolOp::Free(slot.rng.below(8))
    }
}

/// Tries to take one or two permits, or releases one or two; a subject should resolve a
/// release into one of permits its thread holds (or a try-acquire when it holds none), so
/// that permits are never created from nothing.
pub fn try_acquire_release(slot: &mut OpSlot<'_>) -> SemaphoreOp {
    let n = 1 + slot.rng.below(2);
    if slot.rng.chance(1, 2) {
        SemaphoreOp::TryAcquire(n)
    } else {
        SemaphoreOp::Release(n)
    }
}

/// Reads, writes and compare-exchanges, a third each, over the values 0 to 3 (few values,
/// so that compare-exchanges often succeed).
pub fn read_write_cas(slot: &mut OpSlot<'_>) -> RegisterOp<u64> {
    match slot.rng.below(3) {
        0 => RegisterOp::Read,
        1 => RegisterOp::Write(slot.rng.below(4)),
        _ => RegisterOp::CompareExchange {
            current: slot.rng.below(4),
            new: slot.rng.below(4),
        },
    }
}

/// Fetch-adds of 1, adds of 1 and reads, a third each.
pub fn count(slot: &mut OpSlot<'_>) -> CounterOp {
    match slot.rng.below(3) {
        0 => CounterOp::FetchAdd(1),
        1 => CounterOp::Add(1),
        _ => CounterOp::Get,
    }
}
