//! Seats: a small number for each live thread, unique among the threads alive at the same
//! time and taken again by a later thread once its holder has exited.
//!
//! A structure that wants per-thread state for its plain calls (the [`Stack`]'s stash of free
//! nodes and its count) keeps an array of it indexed by seat. Nothing then has to be handed
//! back when a thread exits, nor looked up by structure in a thread-local: the state stays in
//! the structure, which frees it with itself, and the next thread to take the seat carries on
//! with it. Moving the structure moves the array with it. A structure made of such structures
//! (a [`Bagpipe`] of stacks) looks the seat up once per call and hands the proof of it
//! ([`Held`]) to each part it calls, so that no part looks it up again; a thread that takes a
//! seat also gets its Bagpipe walk then, so that a seated call need not check for it.
//!
//! Exclusivity: seat `s` is held by at most one live thread. A thread takes a free seat with
//! an `Acquire` compare-and-swap on the seat map and gives it back from its thread-local
//! destructor with a `Release` clear, so everything the previous holder did with per-seat state
//! happens before anything the next holder does with it.
//!
//! A thread that finds all [`SEATS`] taken gets none (and asks again on its next call); a
//! thread whose thread-locals are being torn down gets none. Callers then take their shared
//! path. Under loom no thread has a seat: a model must behave the same in every execution, and
//! a process-wide map would outlive one.
//!
//! [`Stack`]: crate::stack::Stack
//! [`Bagpipe`]: crate::bagpipe::Bagpipe

/// How many threads can hold a seat at once (none under loom).
pub(crate) const SEATS: usize = if cfg!(pitlane_loom) { 0 } else { 128 };

#[cfg(not(pitlane_loom))]
mod map {
    use core::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::SEATS;

    /// Bit `s % 64` of word `s / 64` is set while seat `s` is held.
    static TAKEN: [AtomicU64; SEATS / 64] = [const { AtomicU64::new(0) }; SEATS / 64];

    /// No seat held.
    const NONE: usize = usize::MAX;

    std::thread_local! {
        /// This thread's seat, or [`NONE`]. No destructor, so reading it is one load.
        static SEAT: Cell<usize> = const { Cell::new(NONE) };
        /// Gives the seat back when the thread exits; registered when the seat is taken.
        static HELD: Held = const { Held };
    }

    /// The holder of a seat, as far as thread-local destructors are concerned.
    struct Held;

    impl Drop for Held {
        fn drop(&mut self) {
            let seat = SEAT.get();
            if seat != NONE {
                // Later thread-local destructors of this thread find no seat, and cannot take
                // one (`HELD` is gone): they take the callers' shared paths. Nor may they
                // announce eras in the seat's word, which the next holder will write.
                SEAT.set(NONE);
                crate::era::seat_given_back();
                // Release: our uses of per-seat state happen before the next holder's.
                TAKEN[seat / 64].fetch_and(!(1 << (seat % 64)), Ordering::Release);
            }
        }
    }

    /// The calling thread's seat, taking a free one on first use; `None` if every seat is
    /// taken or the thread's thread-locals are being torn down.
    #[inline]
    pub(crate) fn current() -> Option<usize> {
        let seat = SEAT.get();
        if seat != NONE {
            return Some(seat);
        }
        sit_down()
    }

    /// The calling thread's seat as it stands: its number, or a number of [`SEATS`] or more
    /// (never a seat) if it holds none yet or any more. One thread-local load, and a caller
    /// that indexes an array of [`SEATS`] entries with `get` tests "no seat" and the bounds
    /// with one comparison; on a miss it asks [`current`], which takes a seat.
    #[inline(always)]
    pub(crate) fn as_held() -> usize {
        SEAT.get()
    }

    /// The calling thread's seat if it holds one; never takes one.
    #[cfg(target_os = "linux")]
    pub(crate) fn held() -> Option<usize> {
        let seat = SEAT.get();
        (seat != NONE).then_some(seat)
    }

    /// The first call of a thread (or a call after all seats were taken): take a seat, and
    /// register its return for when the thread exits.
    #[cold]
    fn sit_down() -> Option<usize> {
        // Registers `HELD`'s destructor; fails once it has run.
        HELD.try_with(|_| ()).ok()?;
        let seat = take()?;
        // A seated thread has its Bagpipe walk made: a Bagpipe's seated calls rely on it.
        crate::bagpipe::make_thread_walk();
        SEAT.set(seat);
        Some(seat)
    }

    /// Takes the lowest free seat.
    #[cold]
    fn take() -> Option<usize> {
        for (word_index, word) in TAKEN.iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != u64::MAX {
                let bit = bits.trailing_ones() as usize;
                // Acquire: the previous holder's uses of per-seat state happen before ours.
                match word.compare_exchange_weak(
                    bits,
                    bits | 1 << bit,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some(word_index * 64 + bit),
                    Err(now) => bits = now,
                }
            }
        }
        None
    }
}

#[cfg(not(pitlane_loom))]
pub(crate) use map::{as_held, current};

/// Proof, for one call, that the calling thread holds seat [`index`](Self::index): what a
/// [`Bagpipe`](crate::bagpipe::Bagpipe)'s plain call looks up once and hands to each pipe it
/// tries (see `WeakBag::try_push_seated`), so that a pipe with per-seat state does not look
/// the seat up again.
///
/// Only this crate makes one, for a thread that holds a seat. It is neither `Send` nor `Sync`,
/// so it never reaches another thread, and a pipe receives it with a lifetime of the call
/// alone, so it cannot keep it past the call (in a thread-local, say). The seat cannot change
/// hands during the call: a thread gives its seat back only from its own thread-local
/// destructor, never inside a call.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Held<'call> {
    seat: usize,
    _this_call: core::marker::PhantomData<(&'call (), *const ())>,
}

impl Held<'_> {
    /// The proof for the calling thread's seat; `None` if it holds none (yet, or any more).
    /// The caller hands it on only for the duration of one call.
    // Under loom `SEATS` is 0, so the comparison is always false: no thread holds a seat there.
    #[cfg_attr(pitlane_loom, allow(dead_code, clippy::absurd_extreme_comparisons))]
    #[inline(always)]
    pub(crate) fn now() -> Option<Self> {
        let seat = as_held();
        (seat < SEATS).then_some(Held {
            seat,
            _this_call: core::marker::PhantomData,
        })
    }

    /// The seat, below [`SEATS`].
    #[cfg_attr(pitlane_loom, allow(clippy::absurd_extreme_comparisons))]
    #[inline(always)]
    pub(crate) fn index(self) -> usize {
        // SAFETY: `now` makes a `Held` only for a seat below `SEATS`, and nothing changes it.
        unsafe { core::hint::assert_unchecked(self.seat < SEATS) };
        self.seat
    }
}
#[cfg(all(target_os = "linux", not(pitlane_loom)))]
pub(crate) use map::held;

/// Under loom no thread holds a seat.
#[cfg(pitlane_loom)]
#[inline]
pub(crate) fn current() -> Option<usize> {
    None
}

/// Under loom no thread holds a seat: a number past every seat.
#[cfg(pitlane_loom)]
#[inline]
pub(crate) fn as_held() -> usize {
    usize::MAX
}

#[cfg(all(test, not(pitlane_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_keeps_its_seat_and_live_threads_never_share_one() {
        let mine = current().expect("a seat");
        assert_eq!(current(), Some(mine));
        let barrier = std::sync::Barrier::new(8);
        let seats: Vec<usize> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let seat = current().expect("a seat");
                        // All eight hold their seats at once here.
                        barrier.wait();
                        seat
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut distinct = seats.clone();
        distinct.push(mine);
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 9, "{seats:?} and {mine}");
        assert!(seats.iter().all(|&seat| seat < SEATS));
    }

    #[test]
    fn the_seat_of_an_exited_thread_is_taken_again() {
        // Thousands of threads one after another never run out of seats.
        for _ in 0..2 * SEATS {
            let seat = std::thread::spawn(current).join().unwrap();
            assert!(seat.is_some());
        }
    }
}
