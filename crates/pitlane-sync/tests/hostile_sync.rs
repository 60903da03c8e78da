//! pitlane-sync as a hostile user would use it: `TaggedIndex` at the edges of its split (one
//! index bit, thirty-two), the spin locks' `lock_api` contracts where the guards' `Send` lets
//! a lock be released by another thread, a guard forgotten and the lock forced open,
//! `MutexGuard::unlocked`, and `RawTasBackoff` waiting long enough for its backoff to reach
//! its cap. The earlier passes judged these crates fine; no test pinned these cases.
#![cfg(not(pitlane_loom))]

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use lock_api::RawMutex;
use pitlane_sync::spin::{RawTas, RawTasBackoff, RawTtas};
use pitlane_sync::{Tagged, TaggedIndex};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

// ---------------------------------------------------------------------------------------------
// TaggedIndex at the edges of its split
// ---------------------------------------------------------------------------------------------

/// Exchanges through every index a split has at its edges (0, NIL - 1, NIL): each success
/// advances the generation by one and installs the index exactly, a stale snapshot fails
/// against the same index at a later generation, and a failure reports the word as it is.
fn exchanges_at_the_edges<const B: u32>() {
    let nil = Tagged::<B>::NIL;
    let word = TaggedIndex::<B>::new(nil);
    let start = word.load(Ordering::Relaxed);
    assert_eq!((start.index(), start.generation()), (nil, 0));
    assert!(start.is_nil());
    let mut seen = start;
    let indices = [0, nil.saturating_sub(1), nil, 0];
    for (step, &index) in indices.iter().enumerate() {
        let now = word
            .compare_exchange(seen, index, Ordering::AcqRel, Ordering::Acquire)
            .unwrap_or_else(|found| panic!("split {B}, step {step}: lost to {found:?}"));
        assert_eq!((now.index(), now.generation()), (index, step as u64 + 1));
        assert_eq!(word.load(Ordering::Relaxed), now);
        seen = now;
    }
    // The word holds index 0 again, at generation 4: the snapshot of generation 1 (index 0
    // too) is stale.
    let stale = Tagged::<B>::new(0, 1);
    assert_eq!(
        word.compare_exchange(stale, nil, Ordering::AcqRel, Ordering::Acquire),
        Err(seen)
    );
    let mut weak = stale;
    loop {
        match word.compare_exchange_weak(weak, nil, Ordering::AcqRel, Ordering::Acquire) {
            Ok(now) => {
                assert_eq!((now.index(), now.generation()), (nil, 5));
                break;
            }
            Err(found) => weak = found,
        }
    }
    // An index past NIL keeps its low bits (NIL + 1 is 0), and the generation still moves on.
    if B < 32 {
        let cut = word.load(Ordering::Relaxed).successor(nil + 1);
        assert_eq!((cut.index(), cut.generation()), (0, 6));
    }
}

#[test]
fn tagged_index_exchanges_at_one_and_thirty_two_index_bits() {
    exchanges_at_the_edges::<1>();
    exchanges_at_the_edges::<2>();
    exchanges_at_the_edges::<21>();
    exchanges_at_the_edges::<31>();
    exchanges_at_the_edges::<32>();
    assert_eq!(Tagged::<1>::NIL, 1);
    assert_eq!(Tagged::<32>::NIL, u32::MAX);
    assert_eq!(Tagged::<1>::GENERATIONS, 1 << 63);
    assert_eq!(Tagged::<32>::GENERATIONS, 1 << 32);
}

/// The last generation of each edge split wraps to generation 0 on the next exchange and
/// keeps the index; the word's bits round-trip at the largest index and generation.
#[test]
fn tagged_snapshots_wrap_and_round_trip_at_the_edges() {
    fn check<const B: u32>() {
        let last = Tagged::<B>::GENERATIONS - 1;
        let top = Tagged::<B>::new(Tagged::<B>::NIL, last);
        assert_eq!(top.to_bits(), u64::MAX, "split {B}");
        assert_eq!(Tagged::<B>::from_bits(u64::MAX), top);
        let wrapped = top.successor(0);
        assert_eq!((wrapped.index(), wrapped.generation()), (0, 0), "split {B}");
        // A generation past the last is cut to its bits, as the docs say.
        assert_eq!(
            Tagged::<B>::new(0, Tagged::<B>::GENERATIONS + 3).generation(),
            3,
            "split {B}"
        );
    }
    check::<1>();
    check::<32>();
}

// ---------------------------------------------------------------------------------------------
// The spin locks' lock_api contracts
// ---------------------------------------------------------------------------------------------

/// Waits for `rx` with a deadline, so that a lock that never opens fails the test.
fn within<T>(rx: &mpsc::Receiver<T>, what: &str) -> T {
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what}: nothing within 30 s"))
}

/// A guard is `Send` (`GuardSend`): dropped on another thread, it releases the lock there,
/// and the locking thread can take the lock again; meanwhile `try_lock` fails everywhere.
fn guard_released_by_another_thread<R>()
where
    R: RawMutex<GuardMarker = lock_api::GuardSend> + Send + Sync + 'static,
{
    let mutex: &'static lock_api::Mutex<R, Vec<u32>> =
        Box::leak(Box::new(lock_api::Mutex::new(vec![1])));
    let mut guard = mutex.lock();
    guard.push(2);
    assert!(mutex.is_locked());
    let (tell, told) = mpsc::channel();
    std::thread::spawn(move || {
        let held_elsewhere = mutex.try_lock().is_none();
        guard.push(3);
        drop(guard);
        tell.send(held_elsewhere).unwrap();
    });
    assert!(within(&told, "the guard's drop on another thread"));
    assert!(!mutex.is_locked());
    let mut again = mutex.try_lock().expect("released by the other thread");
    again.push(4);
    drop(again);
    assert_eq!(*mutex.lock(), [1, 2, 3, 4]);
}

#[test]
fn guards_dropped_on_another_thread_release_the_lock() {
    guard_released_by_another_thread::<RawTas>();
    guard_released_by_another_thread::<RawTtas>();
    guard_released_by_another_thread::<RawTasBackoff>();
}

/// `MutexGuard::unlocked` releases the lock for the closure and takes it back after; a
/// forgotten guard leaves the lock held until `force_unlock`.
fn unlocked_and_forgotten<R: RawMutex>() {
    let mutex = lock_api::Mutex::<R, u32>::new(0);
    let mut guard = mutex.lock();
    *guard += 1;
    let inside = lock_api::MutexGuard::unlocked(&mut guard, || {
        let mut other = mutex.try_lock().expect("open inside `unlocked`");
        *other += 10;
        *other
    });
    assert_eq!(inside, 11);
    assert!(mutex.try_lock().is_none(), "held again after `unlocked`");
    assert_eq!(*guard, 11);
    std::mem::forget(guard);
    assert!(mutex.is_locked() && mutex.try_lock().is_none());
    // SAFETY: the forgotten guard's lock is held and nothing else uses the mutex.
    unsafe { mutex.force_unlock() };
    assert_eq!(*mutex.try_lock().expect("forced open"), 11);
}

#[test]
fn unlocked_reacquires_and_a_forgotten_guard_holds_until_forced_open() {
    unlocked_and_forgotten::<RawTas>();
    unlocked_and_forgotten::<RawTtas>();
    unlocked_and_forgotten::<RawTasBackoff>();
}

/// A waiter on a `RawTasBackoff` held for long enough that its backoff reaches
/// `MAX_BACKOFF_SPINS` (2^10: the wait doubles from 1, so after 11 failed attempts) and stays
/// there for thousands more attempts still gets the lock once it is released, and sees the
/// holder's write.
#[test]
fn a_backoff_waiter_at_its_cap_gets_the_lock_after_a_long_hold() {
    static LOCK: RawTasBackoff = RawTasBackoff::new();
    static DATA: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    LOCK.lock();
    let (tell, told) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        tell.send(()).unwrap();
        LOCK.lock();
        let seen = DATA.load(Ordering::Relaxed);
        // SAFETY: this thread holds the lock.
        unsafe { LOCK.unlock() };
        seen
    });
    within(&told, "the waiter's start");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!waiter.is_finished(), "the waiter got a held lock");
    DATA.store(7, Ordering::Relaxed);
    // SAFETY: this thread holds the lock.
    unsafe { LOCK.unlock() };
    let (tell, told) = mpsc::channel();
    std::thread::spawn(move || tell.send(waiter.join().unwrap()).unwrap());
    assert_eq!(within(&told, "the waiter's lock"), 7);
    assert!(!LOCK.is_locked());
}
