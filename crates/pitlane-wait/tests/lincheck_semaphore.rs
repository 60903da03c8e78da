//! Linearizability of the semaphore, checked by pitlane-lincheck against its counting
//! semaphore specification: threads run `try_acquire_many` and give permits back on real
//! threads, with 1, 2 and 3 starting permits; a thread that holds too few permits for a planned
//! release tries to acquire instead, so that permits are never made from nothing. A release
//! is made two ways, each checked: dropping a part split off the permits the thread holds
//! (the permit's release path), and forgetting that part and calling
//! `Semaphore::add_permits` (the public call itself).
#![cfg(not(pitlane_loom))]

use std::sync::Arc;

use pitlane_lincheck::specs::{SemaphoreOp, SemaphoreRet, SemaphoreSpec};
use pitlane_lincheck::{Runner, Shape, Subject, workload};
use pitlane_wait::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// Rounds per check: fewer in debug builds, where each round is slower.
fn rounds() -> u64 {
    if cfg!(debug_assertions) { 1_000 } else { 5_000 }
}

/// A fresh semaphore per round; each thread keeps the permits it took, merged into one.
struct Permits {
    start: usize,
    /// Whether a release forgets the split-off permits and calls `add_permits` (else it drops
    /// them).
    through_add_permits: bool,
}

struct Held {
    semaphore: Arc<Semaphore>,
    permits: Option<OwnedSemaphorePermit>,
}

/// A thread's handle may be dropped while other threads still run: giving its permits back
/// then would be a release the history does not show, so they are forgotten.
impl Drop for Held {
    fn drop(&mut self) {
        if let Some(permits) = self.permits.take() {
            permits.forget();
        }
    }
}

impl Held {
    fn count(&self) -> u64 {
        self.permits.as_ref().map_or(0, |p| p.num_permits() as u64)
    }
}

impl Subject for Permits {
    type Op = SemaphoreOp;
    type Ret = SemaphoreRet;
    type Handle = Held;

    fn fresh(&self, shape: Shape) -> Vec<Held> {
        let semaphore = Arc::new(Semaphore::new(self.start));
        (0..shape.threads)
            .map(|_| Held {
                semaphore: semaphore.clone(),
                permits: None,
            })
            .collect()
    }

    fn resolve(&self, held: &mut Held, planned: &SemaphoreOp) -> SemaphoreOp {
        match *planned {
            SemaphoreOp::Release(n) if held.count() >= n => SemaphoreOp::Release(n),
            SemaphoreOp::Release(_) if held.count() > 0 => SemaphoreOp::Release(held.count()),
            SemaphoreOp::Release(n) => SemaphoreOp::TryAcquire(n),
            other => other,
        }
    }

    fn apply(&self, held: &mut Held, op: &SemaphoreOp) -> SemaphoreRet {
        match *op {
            SemaphoreOp::TryAcquire(n) => {
                match held.semaphore.clone().try_acquire_many_owned(n as u32) {
                    Ok(permit) => {
                        match &mut held.permits {
                            Some(mine) => mine.merge(permit),
                            None => held.permits = Some(permit),
                        }
                        SemaphoreRet::Acquired
                    }
                    Err(TryAcquireError::NoPermits) => SemaphoreRet::WouldBlock,
                    Err(TryAcquireError::Closed) => unreachable!("never closed"),
                }
            }
            SemaphoreOp::Release(n) => {
                let mine = held
                    .permits
                    .as_mut()
                    .expect("resolved to a release of held permits");
                let part = mine.split(n as usize).expect("holds at least n");
                if self.through_add_permits {
                    part.forget();
                    held.semaphore.add_permits(n as usize);
                } else {
                    drop(part); // the permit gives its n back
                }
                SemaphoreRet::Released
            }
            SemaphoreOp::Acquire(_) => unreachable!("the workload plans no blocking acquire"),
        }
    }
}

/// Checks from 1, 2 and 3 starting permits, each with its seed from `seeds`; releases go
/// through a permit's drop, or through `Semaphore::add_permits` itself.
fn check_try_acquire_and_release(through_add_permits: bool, seeds: [u64; 3]) {
    for (start, seed) in [1, 2, 3].into_iter().zip(seeds) {
        Runner::new(
            SemaphoreSpec::new(start as u64),
            Permits {
                start,
                through_add_permits,
            },
            workload::try_acquire_release,
        )
        .threads(3)
        .ops(8)
        .rounds(rounds())
        .seed(seed)
        .assert_linearizable();
    }
}

#[test]
fn try_acquire_and_add_permits_are_linearizable() {
    check_try_acquire_and_release(false, [0x5E_A1, 0x5E_A2, 0x5E_A3]);
}

#[test]
fn try_acquire_and_add_permits_called_directly_are_linearizable() {
    check_try_acquire_and_release(true, [0xAD_D1, 0xAD_D2, 0xAD_D3]);
}

/// The checker is not vacuous here: a semaphore that lets a `try_acquire` through without
/// taking a permit is caught.
#[test]
fn a_semaphore_that_forgets_to_take_is_caught() {
    struct Leaky;
    impl Subject for Leaky {
        type Op = SemaphoreOp;
        type Ret = SemaphoreRet;
        type Handle = (Arc<Semaphore>, u64);
        fn fresh(&self, shape: Shape) -> Vec<Self::Handle> {
            let semaphore = Arc::new(Semaphore::new(1));
            (0..shape.threads).map(|_| (semaphore.clone(), 0)).collect()
        }
        fn resolve(&self, held: &mut Self::Handle, planned: &SemaphoreOp) -> SemaphoreOp {
            match *planned {
                SemaphoreOp::Release(n) if held.1 >= n => SemaphoreOp::Release(n),
                SemaphoreOp::Release(n) => SemaphoreOp::TryAcquire(n),
                other => other,
            }
        }
        fn apply(&self, held: &mut Self::Handle, op: &SemaphoreOp) -> SemaphoreRet {
            match *op {
                // Checks that permits are there, but takes none.
                SemaphoreOp::TryAcquire(n) if held.0.available_permits() as u64 >= n => {
                    held.1 += n;
                    SemaphoreRet::Acquired
                }
                SemaphoreOp::TryAcquire(_) => SemaphoreRet::WouldBlock,
                SemaphoreOp::Release(n) => {
                    held.1 -= n;
                    held.0.add_permits(n as usize);
                    SemaphoreRet::Released
                }
                SemaphoreOp::Acquire(_) => unreachable!(),
            }
        }
    }
    let report = Runner::new(SemaphoreSpec::new(1), Leaky, workload::try_acquire_release)
        .threads(2)
        .ops(6)
        .rounds(300)
        .seed(0x1EA4)
        .run()
        .unwrap();
    assert!(!report.all_linearizable());
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
