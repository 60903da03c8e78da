//! Eras: protection of plain (handle-less) calls with plain stores, paid for by the rare
//! reclaimer with a process-wide barrier.
//!
//! A plain `push` or `pop` of the [`mpmc::Queue`](crate::mpmc::Queue) reads a segment's
//! address and then works inside it, so the segment must not be recycled while such a call
//! may still hold it. An epoch pin would protect it, but it costs a read-modify-write and,
//! every 128 pins, a collection that reads every other thread's epoch line; for a call that
//! otherwise costs a fetch-and-add and a store, that is most of its price. Instead, a thread
//! with a seat (see the `seat` module) *announces* the global era it entered in, with a plain
//! store into a word of its own, and clears the word when it leaves. The fast side needs no
//! fence: the reclaimer issues a process-wide barrier (`membarrier`, see the `barrier`
//! module) before it reads the announcements, which is the asymmetric pairing of Linux's
//! userspace RCU and folly's hazard pointers.
//!
//! # The protocol
//!
//! - **Enter**: `e = ERA.load(Acquire)`; `WORD.store(e, Release)`; compiler fence; then the
//!   call's loads of the structure's pointers. `WORD` is the calling thread's announcement
//!   word. A call made while the thread is already inside one (a value's `Drop` run by a pop,
//!   say) leaves the announcement as it is.
//! - **Leave**: `WORD.store(0, Release)`.
//! - **Retire** (after unlinking a segment, so that no shared pointer leads to it any more):
//!   `r = ERA.fetch_add(1, AcqRel) + 1`. A call that entered in an era `≥ r` read `ERA` after
//!   that increment, which the unlink precedes, so all its later loads see the segment
//!   unlinked: it cannot reach the segment.
//! - **Reclaim**: issue the process-wide barrier, then read every registered announcement
//!   word (below). The segment retired with `r` may be recycled once no word holds an era in
//!   `1..r`.
//!
//! Why the barrier is enough: take a call that holds the segment, so it read a pointer to it
//! before the unlink reached it, and entered in an era `e < r`. The barrier makes its thread
//! execute a full fence at some moment `B` during the barrier. If the call's load of the
//! pointer came after `B`, it would have seen the unlink, which happened before the barrier
//! began; so it came before `B`, and so did its announcement, which precedes that load in
//! program order, and its thread's registration, which precedes its first announcement; the
//! fence at `B` made both visible before the barrier returned, and the reclaimer's reads come
//! after. It then reads `e`, or `0` written by the call's leave (a `Release` store:
//! everything the call did with the segment happens before the reclaimer acts on that `0`), or
//! a later era of a later call of the same thread, which left the first call first.
//!
//! # Where the words live
//!
//! A thread's announcement word is a thread-local of its own (`WORD`), so that a call in an
//! executable reaches it at a fixed offset from the thread pointer: the store's address is
//! known without a load, and the lock-prefixed operation that follows waits on a shorter chain.
//! (The word used to be a seat's entry of a static array, reached through a reference the
//! thread kept in a thread-local: one dependent load more before every announcement. Two
//! threads of push+pop pairs on one queue, both builds laid out alike, gained about 3% on an
//! Intel Xeon when the word moved: `docs/notes/plain-calls.md`, nineteenth session.)
//!
//! The reclaimer finds the words through a registry with one entry per seat (see the `seat`
//! module): a thread's first call, once it holds a seat, stores its word's address in its
//! seat's entry. A word starts out *unregistered*, a value no era reaches, so the fast path's
//! one test (is the word `0`?) also sends a thread's first call, and every call of a thread
//! that has no seat, to the slow path. A thread without a seat, a call from a thread-local
//! destructor after the thread gave its seat back, and every call in a process where the
//! barrier is not available (see `barrier::asymmetric`) pin the epoch instead; the reclaimer
//! serves both kinds of protection by waiting for quiet eras first and then for the epoch's
//! grace periods.
//!
//! An exiting thread's word is freed with its thread-local storage, so the reclaimer must
//! never read it after that. The thread gives its seat back from a thread-local destructor
//! (the `seat` module), before its storage is freed; it first empties its registry entry and
//! then waits while any reclaimer is between the start and the end of a scan (`SCANNERS`,
//! counted around each scan). With every access sequentially consistent, either a scan's load
//! of the entry comes before the emptying store, and then the scan's increment comes before
//! the exiting thread's load of the count, which waits for the scan's decrement; or the scan
//! reads the empty entry. Scans run no user code and never block: a scan is a few hundred
//! loads, after a process-wide barrier that takes microseconds and is not counted. The wait is
//! not bounded by a count of steps, though: scans that kept starting, each before the last
//! one ended, would keep an exiting thread waiting.
//!
//! Under loom no thread has a seat, so every call pins (the loom stand-in).

use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

use crate::barrier;
use crate::seat::{self, SEATS};

/// The current era; starts at 1 (an announcement of 0 means "not inside a call").
static ERA: CachePadded<AtomicU64> = CachePadded::new(AtomicU64::new(1));

/// What a word says while its thread is registered and not inside a call.
const OUTSIDE: u64 = 0;
/// What a word says before its thread registered it, and after the thread gave its seat
/// back: no era ever reaches this value (`ERA` counts retirements one by one from 1).
const UNREGISTERED: u64 = u64::MAX;

std::thread_local! {
    /// This thread's announcement word: [`UNREGISTERED`], [`OUTSIDE`], or the era of the call
    /// the thread is inside. Initialized by a constant and without destructor, so a call
    /// reaches it at a fixed offset from the thread pointer, and its storage lasts until the
    /// thread's thread-local storage is freed, after every destructor ran.
    static WORD: AtomicU64 = const { AtomicU64::new(UNREGISTERED) };
}

/// Per seat: the announcement word of the thread holding the seat, once that thread
/// registered it; null otherwise.
static WORDS: [AtomicPtr<AtomicU64>; SEATS] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; SEATS];

/// Reclaimers between the start and the end of a scan of [`WORDS`]; a thread that empties its
/// entry waits until there are none, so that no scan reads its word after it is freed.
static SCANNERS: AtomicUsize = AtomicUsize::new(0);

/// The calling thread's announcement word.
#[inline(always)]
fn word() -> &'static AtomicU64 {
    // SAFETY: `WORD` is initialized by a constant and has no destructor, so its storage stays
    // valid, unmoved, for the calling thread's whole life; the reference is only used by this
    // thread, during the call that took it (the `'static` does not escape a call: `Leave` and
    // `Inside` live inside it). Only the word's address outlives the call, in the registry,
    // and the thread takes it out of there, and waits out the scans that may read it, before
    // its storage is freed (`seat_given_back`).
    unsafe { &*WORD.with(core::ptr::from_ref) }
}

/// A call inside an era, for the tests that hold one; leaves it when dropped. Not `Send`: the
/// announcement is the thread's.
#[cfg(test)]
pub(crate) struct Inside {
    /// The announcement word this call wrote, or `None` for a call nested in another call of
    /// the same thread, which leaves the announcement to the outer one.
    active: Option<&'static AtomicU64>,
    _not_send: core::marker::PhantomData<*const ()>,
}

/// Enters the current era: `None` if the calling thread has no seat or the process has no
/// process-wide barrier; the caller then pins the epoch instead.
/// (Calls go through [`within`]; this serves the tests that hold an era.)
#[cfg(test)]
pub(crate) fn enter() -> Option<Inside> {
    let active = word();
    if active.load(Ordering::Relaxed) == UNREGISTERED && !register(active) {
        return None;
    }
    // Only this thread writes its word, so a plain load tells whether we are inside.
    if active.load(Ordering::Relaxed) != OUTSIDE {
        return Some(Inside {
            active: None,
            _not_send: core::marker::PhantomData,
        });
    }
    publish(active);
    Some(Inside {
        active: Some(active),
        _not_send: core::marker::PhantomData,
    })
}

#[cfg(test)]
impl Drop for Inside {
    fn drop(&mut self) {
        if let Some(active) = self.active {
            // Release: the call's accesses happen before a reclaimer that reads this 0.
            active.store(OUTSIDE, Ordering::Release);
        }
    }
}

/// Whether the calling thread is inside an era (for the unit tests' checks).
#[cfg(all(test, not(pitlane_loom)))]
pub(crate) fn is_inside() -> bool {
    let era = word().load(Ordering::Relaxed);
    era != OUTSIDE && era != UNREGISTERED
}

/// Runs the call `f` inside the current era, or hands it to `pinned` where the thread cannot
/// announce (no seat, or no process-wide barrier): enter, `f`, leave, shaped for the fast
/// path. The common case, a registered thread not inside another call, is the only one
/// compiled in line, with no `Option` of a guard to test on the way out and the result of `f`
/// left in registers; a nested call and a thread's first call go out of line. A panic in `f`
/// (a value's `Drop`) still leaves the era, through [`Leave`].
#[inline(always)]
pub(crate) fn within<R, F: FnOnce() -> R>(f: F, pinned: impl FnOnce(F) -> R) -> R {
    let active = word();
    // Only this thread writes its word, so a plain load tells whether we are inside, or not
    // registered.
    if active.load(Ordering::Relaxed) != OUTSIDE {
        return not_outside(active, f, pinned);
    }
    let _leave = Leave(active);
    publish(active);
    f()
}

/// [`within`] when the thread's word is not [`OUTSIDE`]: a call made while the thread is
/// inside another call (a value's `Drop` run by a pop), which the outer call's announcement,
/// older than anything this call could reach, covers (and the outer call clears); or a call
/// of a thread that has not registered its word (its first call, a thread without a seat, a
/// call after the thread gave its seat back).
#[cold]
#[inline(never)]
fn not_outside<R, F: FnOnce() -> R>(
    active: &'static AtomicU64,
    f: F,
    pinned: impl FnOnce(F) -> R,
) -> R {
    if active.load(Ordering::Relaxed) != UNREGISTERED {
        return f();
    }
    if !register(active) {
        return pinned(f);
    }
    let _leave = Leave(active);
    publish(active);
    f()
}

/// Registers the calling thread's word `active` under its seat, taking one if it has none;
/// `false` (and nothing registered) if the process has no process-wide barrier or the thread
/// cannot hold a seat.
#[cold]
fn register(active: &'static AtomicU64) -> bool {
    if !barrier::asymmetric() {
        return false;
    }
    let Some(seat) = seat::current() else {
        return false;
    };
    // Release, and before the word's first announcement: a reclaimer that finds an
    // announcement through the entry reads the word as the barrier's argument needs (see the
    // module documentation).
    WORDS[seat].store(core::ptr::from_ref(active).cast_mut(), Ordering::Release);
    active.store(OUTSIDE, Ordering::Relaxed);
    true
}

/// Clears the announcement of the call that made it when dropped: the leave of [`within`].
struct Leave(&'static AtomicU64);

impl Drop for Leave {
    #[inline(always)]
    fn drop(&mut self) {
        // Release: the call's accesses happen before a reclaimer that reads this 0.
        self.0.store(OUTSIDE, Ordering::Release);
    }
}

/// Announces the current era in `active`, the word of a registered thread not inside a call.
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

/// The calling thread, holder of `seat`, is giving the seat back (it is exiting): its word
/// leaves the registry before its storage is freed, and its later calls, from other
/// thread-locals' destructors, pin instead of announcing in a word no reclaimer reads any
/// more. Called by the seat module, from a thread-local destructor, before it frees the seat;
/// no call of the thread is in progress.
pub(crate) fn seat_given_back(seat: usize) {
    let active = word();
    let entry = &WORDS[seat];
    if entry.load(Ordering::Relaxed) == core::ptr::from_ref(active).cast_mut() {
        entry.store(core::ptr::null_mut(), Ordering::SeqCst);
        // A scan that loaded the entry before the store above has counted itself before we
        // read the count (see the module documentation): wait for it to end.
        let mut spins = 0_u32;
        while SCANNERS.load(Ordering::SeqCst) != 0 {
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 {
                std::thread::yield_now();
            } else {
                core::hint::spin_loop();
            }
        }
    }
    active.store(UNREGISTERED, Ordering::Relaxed);
}

/// In the child of a `fork`, only the forking thread exists: every other thread's word is a
/// stale copy (its thread cannot be inside anything), and would hold back every retirement of
/// the child forever; a scan another thread had in progress will never end. Registered once,
/// before the process first chooses the asymmetric protocol (see `barrier::init`), so before
/// any announcement can exist. The seats themselves stay taken in the child: a thread that
/// vanished in the middle of a call may have left per-seat state (a stack's stash)
/// half-updated, which no new thread may inherit.
#[cfg(target_os = "linux")]
pub(crate) fn forget_other_threads_after_fork() {
    extern "C" fn child() {
        let mine = seat::held();
        for (seat, entry) in WORDS.iter().enumerate() {
            if Some(seat) != mine {
                entry.store(core::ptr::null_mut(), Ordering::Relaxed);
            }
        }
        SCANNERS.store(0, Ordering::Relaxed);
    }
    // SAFETY: `pthread_atfork` only records the handlers; `child` touches atomics and
    // thread-locals without destructors, which is what a child of a multithreaded process may
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
    SCANNERS.fetch_add(1, Ordering::SeqCst);
    let oldest = WORDS
        .iter()
        .filter_map(|entry| {
            let active = entry.load(Ordering::SeqCst);
            // SAFETY: a registered word's thread empties its entry and then waits for this
            // scan (counted above) to end before its storage can be freed.
            (!active.is_null()).then(|| unsafe { &*active }.load(Ordering::Acquire))
        })
        .filter(|&era| era != OUTSIDE && era != UNREGISTERED)
        .min();
    // Release: our reads of the words happen before an exiting thread that sees the count
    // drop goes on to free its word.
    SCANNERS.fetch_sub(1, Ordering::Release);
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
        // Other tests' threads may be inside older eras of their own, so only our own word
        // is checked: leaving cleared it, and the reclaimers find it under our seat.
        assert_eq!(word().load(Ordering::Relaxed), OUTSIDE);
        let seat = seat::current().unwrap();
        assert_eq!(
            WORDS[seat].load(Ordering::Relaxed).cast_const(),
            core::ptr::from_ref(word())
        );
    }

    #[test]
    fn within_announces_keeps_a_nested_call_inside_and_leaves_even_on_a_panic() {
        crate::barrier::init();
        if !crate::barrier::asymmetric() {
            // No membarrier here: the call is handed to the pinned path.
            assert!(within(|| false, |_| true));
            return;
        }
        // The first call registers the thread's word; later ones take the fast path.
        within(|| (), |_| unreachable!("a seat and the barrier"));
        let word = word();
        assert_eq!(word.load(Ordering::Relaxed), OUTSIDE);
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
            // Takes a seat and registers the thread's word under it.
            || drop(enter().expect("a seat and the barrier")),
            // The seat is given back: the word left the registry, and a later call pins
            // instead of announcing in a word no reclaimer reads.
            || {
                (
                    seat::current().is_some(),
                    enter().is_some(),
                    within(|| "announced", |_| "pinned"),
                    word().load(Ordering::Relaxed) == UNREGISTERED,
                    WORDS
                        .iter()
                        .any(|entry| entry.load(Ordering::Relaxed).cast_const() == word()),
                )
            },
        );
        assert_eq!(late, (false, false, "pinned", true, false));
    }

    #[test]
    fn a_thread_giving_its_seat_back_waits_for_a_scan_that_may_read_its_word() {
        crate::barrier::init();
        if !crate::barrier::asymmetric() {
            return;
        }
        // Stand for a reclaimer in the middle of a scan of the registry.
        SCANNERS.fetch_add(1, Ordering::SeqCst);
        let (gone, told) = std::sync::mpsc::channel();
        let exiting = std::thread::spawn(move || {
            seat::after_the_seat_is_given_back(
                // Registers the thread's word under its seat.
                || within(|| (), |_| unreachable!("a seat and the barrier")),
                // Runs once the seat's destructor, which must wait for the scan, returned.
                move || gone.send(()).unwrap(),
            )
        });
        let during_the_scan = told.recv_timeout(std::time::Duration::from_millis(200));
        SCANNERS.fetch_sub(1, Ordering::SeqCst);
        exiting.join().unwrap();
        assert!(
            during_the_scan.is_err(),
            "the thread's storage could be freed while a scan may read its word"
        );
        told.recv()
            .expect("the thread gave its seat back once the scan ended");
    }
}
