//! Eras: protection of plain (handle-less) calls with plain stores, paid for by the rare
//! reclaimer with a process-wide barrier.
//!
//! A plain `push` or `pop` of the [`mpmc::Queue`](crate::mpmc::Queue) reads a segment's
//! address and then works inside it, so the segment must not be recycled while such a call
//! may still hold it. An epoch pin would protect it, but it costs a read-modify-write and,
//! every 128 pins, a collection that reads every other thread's epoch line; for a call that
//! otherwise costs a fetch-and-add and a store, that is most of its price. Instead, a thread
//! with a seat (see the `seat` module) *announces* the global era it entered in, with a plain
//! store into its seat's word, and clears the word when it leaves. The fast side needs no
//! fence: the reclaimer issues a process-wide barrier (`membarrier`, see the `barrier`
//! module) before it reads the announcements, which is the asymmetric pairing of Linux's
//! userspace RCU and folly's hazard pointers.
//!
//! # The protocol
//!
//! - **Enter**: `e = ERA.load(Acquire)`; `ACTIVE[seat].store(e, Release)`; compiler fence; then the
//!   call's loads of the structure's pointers. A call made while the thread is already inside
//!   one (a value's `Drop` run by a pop, say) leaves the announcement as it is.
//! - **Leave**: `ACTIVE[seat].store(0, Release)`.
//! - **Retire** (after unlinking a segment, so that no shared pointer leads to it any more):
//!   `r = ERA.fetch_add(1, AcqRel) + 1`. A call that entered in an era `≥ r` read `ERA` after
//!   that increment, which the unlink precedes, so all its later loads see the segment
//!   unlinked: it cannot reach the segment.
//! - **Reclaim**: issue the process-wide barrier, then read every seat's word. The segment
//!   retired with `r` may be recycled once no word holds an era in `1..r`.
//!
//! Why the barrier is enough: take a call that holds the segment, so it read a pointer to it
//! before the unlink reached it, and entered in an era `e < r`. The barrier makes its thread
//! execute a full fence at some moment `B` during the barrier. If the call's load of the
//! pointer came after `B`, it would have seen the unlink, which happened before the barrier
//! began; so it came before `B`, and so did its announcement, which precedes that load in
//! program order; the fence at `B` made the announcement visible before the barrier returned,
//! and the reclaimer's reads come after. It then reads `e`, or `0` written by the call's leave
//! (a `Release` store: everything the call did with the segment happens before the reclaimer
//! acts on that `0`), or a later era of a later call of the same thread, which left the first
//! call first.
//!
//! A thread without a seat, a call from a thread-local destructor at thread exit, and every
//! call in a process where the barrier is not available (see `barrier::asymmetric`) pin the
//! epoch instead; the reclaimer serves both kinds of protection by waiting for quiet eras
//! first and then for the epoch's grace periods.
//!
//! A thread's first call finds its word (`ACTIVE[seat]`) and keeps a reference to it in a
//! thread-local, so that every later call reaches it with one thread-local load: no seat
//! number, no bounds check, no look at the barrier's mode (which never changes once decided).
//! The seat module drops that reference before it gives the seat back, so that no call made
//! after that (from another thread-local's destructor) writes a word the seat's next holder
//! owns. Two threads of push+pop pairs on one queue with 1024 items in it went from 0.86–0.91
//! of the handles' throughput to 0.93–0.95 with this (`docs/notes/plain-calls.md`).
//!
//! Under loom no thread has a seat, so every call pins (the loom stand-in).

use core::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::barrier;
use crate::seat::{self, SEATS};

/// The current era; starts at 1 (an announcement of 0 means "not inside a call").
static ERA: CachePadded<AtomicU64> = CachePadded::new(AtomicU64::new(1));

/// Per seat: the era its holder's current call entered in, or 0.
static ACTIVE: [CachePadded<AtomicU64>; SEATS] =
    [const { CachePadded::new(AtomicU64::new(0)) }; SEATS];

/// A call inside an era; leaves it when dropped. Not `Send`: the announcement is the
/// thread's.
pub(crate) struct Inside {
    /// The announcement word this call wrote, or `None` for a call nested in another call of
    /// the same thread, which leaves the announcement to the outer one.
    active: Option<&'static AtomicU64>,
    _not_send: core::marker::PhantomData<*const ()>,
}

std::thread_local! {
    /// This thread's announcement word (its seat's entry of [`ACTIVE`]), cached by the first
    /// call that entered an era, so that later calls reach it with one thread-local load: no
    /// seat number, no bounds check, no look at the barrier's mode (which never changes once
    /// decided). `None` before that call, and again once the thread has given its seat back
    /// (see [`seat_given_back`]). No destructor, so it stays readable while the thread exits.
    static MINE: core::cell::Cell<Option<&'static AtomicU64>> =
        const { core::cell::Cell::new(None) };
}

/// Enters the current era: `None` if the calling thread has no seat or the process has no
/// process-wide barrier; the caller then pins the epoch instead.
/// (Calls go through [`within`]; this serves the tests that hold an era.)
#[cfg(test)]
pub(crate) fn enter() -> Option<Inside> {
    match MINE.get() {
        Some(active) => Some(announce(active)),
        None => enter_first(),
    }
}

/// Runs the call `f` inside the current era, or hands it to `pinned` where the thread cannot
/// announce (no seat, or no process-wide barrier): enter, `f`, leave, shaped for the fast
/// path. The common case, a thread with its word cached and not inside another call, is
/// the only one compiled in line, with no `Option` of a guard to test on the way out and the
/// result of `f` left in registers; a nested call and a thread's first call go out of line.
/// A panic in `f` (a value's `Drop`) still leaves the era, through [`Leave`].
#[inline(always)]
pub(crate) fn within<R, F: FnOnce() -> R>(f: F, pinned: impl FnOnce(F) -> R) -> R {
    let Some(active) = MINE.get() else {
        return first_call(f, pinned);
    };
    // Only this thread writes its word, so a plain load tells whether we are inside.
    if active.load(Ordering::Relaxed) != 0 {
        return nested(f);
    }
    let _leave = Leave(active);
    publish(active);
    f()
}

/// [`within`] for a call made while the thread is inside another call (a value's `Drop` run
/// by a pop): the outer call's announcement, older than anything this call could reach,
/// covers it, and the outer call clears it.
#[cold]
#[inline(never)]
fn nested<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// [`within`] when the thread has no cached word: its first call, or one from a thread
/// without a seat.
#[cold]
#[inline(never)]
fn first_call<R, F: FnOnce() -> R>(f: F, pinned: impl FnOnce(F) -> R) -> R {
    match enter_first() {
        Some(inside) => {
            let result = f();
            drop(inside);
            result
        }
        None => pinned(f),
    }
}

/// Clears the announcement of the call that made it when dropped: the leave of [`within`].
struct Leave(&'static AtomicU64);

impl Drop for Leave {
    #[inline(always)]
    fn drop(&mut self) {
        // Release: the call's accesses happen before a reclaimer that reads this 0.
        self.0.store(0, Ordering::Release);
    }
}

/// A thread's first call (or one after the thread gave its seat back, or one from a thread
/// that found no seat): find its announcement word and remember it.
#[cold]
#[inline(never)]
fn enter_first() -> Option<Inside> {
    if !barrier::asymmetric() {
        return None;
    }
    let active: &'static AtomicU64 = &ACTIVE[seat::current()?];
    MINE.set(Some(active));
    Some(announce(active))
}

/// Announces the current era in `active`, the calling thread's word, unless the thread is
/// inside a call already.
#[inline(always)]
fn announce(active: &'static AtomicU64) -> Inside {
    // Only this thread writes its word, so a plain load tells whether we are inside.
    if active.load(Ordering::Relaxed) != 0 {
        return Inside {
            active: None,
            _not_send: core::marker::PhantomData,
        };
    }
    publish(active);
    Inside {
        active: Some(active),
        _not_send: core::marker::PhantomData,
    }
}

/// Announces the current era in `active`, the word of a thread not inside a call.
#[inline(always)]
fn publish(active: &'static AtomicU64) {
    // Release (a plain store on x86, as `Relaxed`): a reclaimer that reads this era also
    // sees, in the memory model's terms, everything this thread's earlier calls did; the
    // argument in the module documentation needs this for a thread that left an old era and
    // entered a new one since.
    active.store(ERA.load(Ordering::Acquire), Ordering::Release);
    // The announcement is ordered before the call's loads by the reclaimer's barrier; the
    // compiler must keep them in this order too.
    barrier::light();
}

/// The calling thread is giving its seat back (it is exiting): its later calls, from other
/// thread-locals' destructors, must not announce in a word that the seat's next holder will
/// write. Called by the seat module before it frees the seat.
pub(crate) fn seat_given_back() {
    MINE.set(None);
}

impl Drop for Inside {
    #[inline]
    fn drop(&mut self) {
        if let Some(active) = self.active {
            // Release: the call's accesses happen before a reclaimer that reads this 0.
            active.store(0, Ordering::Release);
        }
    }
}

/// In the child of a `fork`, only the forking thread exists: every other seat's announcement
/// is stale (its thread cannot be inside anything), and would hold back every retirement of the
/// child forever. Registered once, before the process first chooses the asymmetric protocol
/// (see `barrier::init`), so before any announcement can exist. The seats themselves stay
/// taken in the child: a thread that vanished in the middle of a call may have left per-seat
/// state (a stack's stash) half-updated, which no new thread may inherit.
#[cfg(target_os = "linux")]
pub(crate) fn forget_other_threads_after_fork() {
    extern "C" fn child() {
        let mine = seat::held();
        for (seat, active) in ACTIVE.iter().enumerate() {
            if Some(seat) != mine {
                active.store(0, Ordering::Relaxed);
            }
        }
    }
    // SAFETY: `pthread_atfork` only records the handlers; `child` touches atomics and a
    // thread-local without a destructor, which is what a child of a multithreaded process may
    // do. A failure (out of memory for the record) leaves the leak this prevents, nothing worse.
    unsafe { libc::pthread_atfork(None, None, Some(child)) };
}

/// Called after unlinking something: the era from which calls cannot reach it.
#[inline]
pub(crate) fn retire() -> u64 {
    ERA.fetch_add(1, Ordering::AcqRel) + 1
}

/// The oldest era a call may still be inside of, after the process-wide barrier: what was
/// retired with an era `r` at most this may be recycled. `None` if the barrier was refused
/// (nothing may be recycled on this evidence).
#[cold]
pub(crate) fn oldest_inside() -> Option<u64> {
    if !barrier::heavy() {
        return None;
    }
    let oldest = ACTIVE
        .iter()
        .map(|active| active.load(Ordering::Acquire))
        .filter(|&era| era != 0)
        .min();
    Some(oldest.unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_inside_an_old_era_holds_back_what_was_retired_after_it_entered() {
        crate::barrier::init();
        if !crate::barrier::asymmetric() {
            // No membarrier here: calls pin the epoch instead, and `enter` says so.
            assert!(enter().is_none());
            return;
        }
        let inside = enter().expect("a seat and the barrier");
        let retired = retire();
        let oldest = oldest_inside().expect("the barrier");
        assert!(oldest < retired, "oldest {oldest}, retired {retired}");
        // A nested call changes nothing; leaving it keeps the outer announcement.
        drop(enter().expect("nested"));
        assert!(oldest_inside().unwrap() < retired);
        drop(inside);
        // Other tests' threads may be inside older eras of their own, so only our seat's
        // word is checked: leaving cleared it.
        let seat = seat::current().unwrap();
        assert_eq!(ACTIVE[seat].load(Ordering::Relaxed), 0);
    }

    #[test]
    fn within_announces_keeps_a_nested_call_inside_and_leaves_even_on_a_panic() {
        crate::barrier::init();
        if !crate::barrier::asymmetric() {
            // No membarrier here: the call is handed to the pinned path.
            assert!(within(|| false, |_| true));
            return;
        }
        // The first call finds the thread's word; later ones take the fast path.
        within(|| (), |_| unreachable!("a seat and the barrier"));
        let word = &ACTIVE[seat::current().unwrap()];
        within(
            || {
                let retired = retire();
                assert_ne!(word.load(Ordering::Relaxed), 0);
                assert!(oldest_inside().unwrap() < retired);
                // A nested call (a value's `Drop` inside a pop) leaves the announcement as
                // it is, before and after.
                within(
                    || assert!(oldest_inside().unwrap() < retired),
                    |_| unreachable!(),
                );
                assert!(oldest_inside().unwrap() < retired);
            },
            |_| unreachable!(),
        );
        assert_eq!(word.load(Ordering::Relaxed), 0);
        let panicked = std::panic::catch_unwind(|| {
            within(
                || {
                    assert_ne!(word.load(Ordering::Relaxed), 0);
                    panic!("a value's Drop panics inside the call");
                },
                |_| unreachable!(),
            )
        });
        assert!(panicked.is_err());
        assert_eq!(word.load(Ordering::Relaxed), 0, "the panic left the era");
    }

    #[test]
    fn a_call_after_the_thread_gave_its_seat_back_announces_nothing() {
        crate::barrier::init();
        if !crate::barrier::asymmetric() {
            return;
        }
        let late = seat::after_the_seat_is_given_back(
            // Takes a seat and caches its word.
            || drop(enter().expect("a seat and the barrier")),
            // The seat is given back, and the announcement word cached by the thread's earlier
            // calls must not be written any more.
            || (seat::current().is_some(), enter().is_some()),
        );
        assert_eq!(late, (false, false));
    }
}
