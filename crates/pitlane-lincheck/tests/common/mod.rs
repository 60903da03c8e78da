//! Generators of small random histories, shared by the tests of the checker
//! (`hostile_checker.rs`, `checker_memory.rs`).
// Each test binary compiles this module on its own and uses only some of it.
#![allow(dead_code)]

use pitlane_lincheck::specs::{
    ContainerOp, ContainerRet, CounterOp, CounterRet, PoolOp, PoolRet, RegisterOp, RegisterRet,
    SemaphoreOp, SemaphoreRet,
};
use pitlane_lincheck::{History, SplitMix64};

/// A random history of `len` operations over `threads` threads: each thread's operations in
/// turn, stamps from a small range so that calls and returns often share a stamp.
pub fn random_history<Op, Ret>(
    rng: &mut SplitMix64,
    len: usize,
    threads: usize,
    mut op: impl FnMut(&mut SplitMix64) -> (Op, Ret),
) -> History<Op, Ret> {
    let mut history = History::new();
    let mut clock = vec![0u64; threads];
    for _ in 0..len {
        let t = rng.below(threads as u64) as usize;
        let call = clock[t] + rng.below(3);
        let ret = call + 1 + rng.below(4);
        clock[t] = ret + 1;
        let (o, r) = op(rng);
        history.add(t, call..ret, o, r).unwrap();
    }
    history
}

/// A container operation on one of three values, with every result, even those no
/// structure gives.
pub fn container_op(rng: &mut SplitMix64) -> (ContainerOp<u8>, ContainerRet<u8>) {
    let v = rng.below(3) as u8;
    match rng.below(16) {
        0..=5 => (ContainerOp::Push(v), ContainerRet::Pushed),
        6..=10 => (ContainerOp::Pop, ContainerRet::Popped(v)),
        11 | 12 => (ContainerOp::Pop, ContainerRet::Empty),
        13 => (ContainerOp::Push(v), ContainerRet::Full),
        14 => (ContainerOp::Pop, ContainerRet::Transient),
        _ => (ContainerOp::Push(v), ContainerRet::Transient),
    }
}

/// A pool operation on one of `objects` objects.
pub fn pool_op(rng: &mut SplitMix64, objects: u64) -> (PoolOp, PoolRet) {
    let x = rng.below(objects);
    match rng.below(5) {
        0 | 1 => (PoolOp::Alloc, PoolRet::Allocated(x)),
        2 => (PoolOp::Alloc, PoolRet::Exhausted),
        _ => (PoolOp::Free(x), PoolRet::Freed),
    }
}

/// A semaphore operation on up to 2 permits.
pub fn semaphore_op(rng: &mut SplitMix64) -> (SemaphoreOp, SemaphoreRet) {
    let n = rng.below(3);
    match rng.below(5) {
        0 => (SemaphoreOp::Acquire(n), SemaphoreRet::Acquired),
        1 => (SemaphoreOp::TryAcquire(n), SemaphoreRet::Acquired),
        2 => (SemaphoreOp::TryAcquire(n), SemaphoreRet::WouldBlock),
        _ => (SemaphoreOp::Release(n), SemaphoreRet::Released),
    }
}

/// A register operation on one of three values.
pub fn register_op(rng: &mut SplitMix64) -> (RegisterOp<u8>, RegisterRet<u8>) {
    let (a, b) = (rng.below(3) as u8, rng.below(3) as u8);
    match rng.below(5) {
        0 => (RegisterOp::Read, RegisterRet::Value(a)),
        1 | 2 => (RegisterOp::Write(a), RegisterRet::Written),
        3 => (
            RegisterOp::CompareExchange { current: a, new: b },
            RegisterRet::Exchanged(Ok(a)),
        ),
        _ => (
            RegisterOp::CompareExchange { current: a, new: b },
            RegisterRet::Exchanged(Err(b)),
        ),
    }
}

/// A counter operation that sees a value below 4.
pub fn counter_op(rng: &mut SplitMix64) -> (CounterOp, CounterRet) {
    let v = rng.below(4);
    match rng.below(3) {
        0 => (CounterOp::Add(1), CounterRet::Added),
        1 => (CounterOp::FetchAdd(1), CounterRet::Value(v)),
        _ => (CounterOp::Get, CounterRet::Value(v)),
    }
}
