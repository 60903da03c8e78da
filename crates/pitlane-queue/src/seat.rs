//! Seats: a small number for each live thread, unique among the threads alive at the same
//! time and taken again by a later thread once its holder has exited.
//!
//! A structure that wants per-thread state for its plain calls (the [`Stack`]'s stash of free
//! nodes and its count) keeps an array of it indexed by seat. Nothing then has to be handed
//! back when a thread exits: the state stays in the structure, which frees it with itself, and
//! the next thread to take the seat carries on with it. Moving the structure moves the array
//! with it. (The stack adds a one-entry cache per thread in front of its array, [`Local`]'s
//! `stack_id` and `stack_cache`, emptied before the seat is given back.) A structure made of
//! such structures (a [`Bagpipe`] of stacks) reads the seat once per call and hands it
//! ([`Held`]) to each part it calls, so that no part looks it up again. The seat and the
//! thread's Bagpipe walk share one thread-local ([`Local`]).
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
    use crate::bagpipe::Walk;

    /// Bit `s % 64` of word `s / 64` is set while seat `s` is held.
    static TAKEN: [AtomicU64; SEATS / 64] = [const { AtomicU64::new(0) }; SEATS / 64];

    /// No seat held.
    const NONE: usize = usize::MAX;

    /// A thread's seat and, beside it, the walk of its plain Bagpipe calls: one thread-local,
    /// so that a Bagpipe's plain call finds both from one computation of the thread-local's
    /// address (`docs/notes/plain-calls.md`, tenth session).
    pub(crate) struct Local {
        /// This thread's seat, or [`NONE`].
        seat: Cell<usize>,
        /// The walk of this thread's plain calls on Bagpipes (see `bagpipe`).
        pub(crate) walk: Cell<Walk>,
        /// The stack this thread last made a plain call on, by the stack's id, and that
        /// stack's cache for this thread's seat, its type erased (see `Stack::seat_cache`):
        /// a one-entry cache in front of the stack's array of per-seat caches. [`NO_STACK`]
        /// when empty, and from the moment the thread gives its seat back.
        pub(crate) stack_id: Cell<u64>,
        pub(crate) stack_cache: Cell<core::ptr::NonNull<()>>,
    }

    /// What [`Local::stack_id`] holds when it names no stack: no stack ever has this id.
    pub(crate) const NO_STACK: u64 = u64::MAX;

    impl Local {
        /// The seat as it stands: see [`as_held`].
        #[inline(always)]
        pub(crate) fn as_held(&self) -> usize {
            self.seat.get()
        }
    }

    std::thread_local! {
        /// This thread's seat and walk. Initialized by a constant and without destructor, so
        /// reading it is one load and its storage lasts as long as the thread.
        static LOCAL: Local = const {
            Local {
                seat: Cell::new(NONE),
                walk: Cell::new(Walk::UNMADE),
                stack_id: Cell::new(NO_STACK),
                stack_cache: Cell::new(core::ptr::NonNull::dangling()),
            }
        };
        /// Gives the seat back when the thread exits; registered when the seat is taken.
        static HELD: Held = const { Held };
    }

    /// The address of the calling thread's [`Local`]: initialized by a constant and without
    /// destructor, it stays valid, unmoved, for the whole life of the thread.
    #[inline(always)]
    pub(crate) fn local() -> *const Local {
        LOCAL.with(core::ptr::from_ref)
    }

    /// Sets this thread's seat.
    fn set_seat(seat: usize) {
        LOCAL.with(|local| local.seat.set(seat));
    }

    /// The holder of a seat, as far as thread-local destructors are concerned.
    struct Held;

    impl Drop for Held {
        fn drop(&mut self) {
            let seat = as_held();
            if seat != NONE {
                // Later thread-local destructors of this thread find no seat, and cannot take
                // one (`HELD` is gone): they take the callers' shared paths. Nor may they
                // announce eras in a word that no reclaimer reads any more; and the word
                // leaves the registry before the thread's storage is freed.
                set_seat(NONE);
                // Nor may they use a stack's cache for the seat, which the next holder will.
                LOCAL.with(|local| local.stack_id.set(NO_STACK));
                crate::era::seat_given_back(seat);
                // Release: our uses of per-seat state happen before the next holder's.
                TAKEN[seat / 64].fetch_and(!(1 << (seat % 64)), Ordering::Release);
            }
        }
    }

    /// The calling thread's seat, taking a free one on first use; `None` if every seat is
    /// taken or the thread's thread-locals are being torn down.
    #[inline]
    pub(crate) fn current() -> Option<usize> {
        let seat = as_held();
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
        LOCAL.with(Local::as_held)
    }

    /// The calling thread's seat if it holds one; never takes one.
    #[cfg(target_os = "linux")]
    pub(crate) fn held() -> Option<usize> {
        let seat = as_held();
        (seat != NONE).then_some(seat)
    }

    /// The first call of a thread (or a call after all seats were taken): take a seat, and
    /// register its return for when the thread exits.
    #[cold]
    fn sit_down() -> Option<usize> {
        // Registers `HELD`'s destructor; fails once it has run.
        HELD.try_with(|_| ()).ok()?;
        let seat = take()?;
        set_seat(seat);
        // A seated thread has its Bagpipe walk made: a Bagpipe's plain calls over stacks use
        // the walk without testing it (until then they use the unmade walk, a valid one).
        LOCAL.with(crate::bagpipe::make_walk_on_sitting_down);
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
pub(crate) use map::{Local, NO_STACK, as_held, current, local};

/// The calling thread's seat as it stood when one call began: its number, below [`SEATS`], or
/// a number of [`SEATS`] or more if the thread held none (yet, or any more). What a
/// [`Bagpipe`](crate::bagpipe::Bagpipe)'s plain call reads once and hands to each pipe it
/// tries (see `WeakBag::try_push_seated`), so that a pipe with per-seat state does not look
/// the seat up again; the pipe indexes its per-seat array with `get`, so that one comparison
/// tests "no seat" and the bounds, and sends a miss to its own plain call.
///
/// Only this crate makes one, from the calling thread's own [`Local`]. It is neither `Send`
/// nor `Sync`, so it never reaches another thread, and a pipe receives it with a lifetime of
/// the call alone, so it cannot keep it past the call (in a thread-local, say). A seat it
/// names stays the calling thread's for the whole call: a thread gives its seat back only from
/// its own thread-local destructor, never inside a call.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Held<'call> {
    seat: usize,
    _this_call: core::marker::PhantomData<(&'call (), *const ())>,
}

impl Held<'_> {
    /// The calling thread's seat as it stands, read from its [`Local`]. The caller hands it on
    /// only for the duration of one call.
    #[cfg(not(pitlane_loom))]
    #[inline(always)]
    pub(crate) fn now_in(local: &Local) -> Self {
        Held {
            seat: local.as_held(),
            _this_call: core::marker::PhantomData,
        }
    }

    /// The seat, or a number of [`SEATS`] or more for none.
    #[inline(always)]
    pub(crate) fn index(self) -> usize {
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

/// For tests of what a call does after its thread gave its seat back: runs `before` on a new
/// thread (which takes a seat there), then, as that thread exits, `late` from a thread-local
/// destructor that runs after the seat's own (registered before it, so run after it), and
/// returns what `late` returned.
#[cfg(all(test, not(pitlane_loom)))]
pub(crate) fn after_the_seat_is_given_back<R: Send + 'static>(
    before: impl FnOnce() + Send + 'static,
    late: impl FnOnce() -> R + Send + 'static,
) -> R {
    struct LateCall(Option<Box<dyn FnOnce()>>);
    impl Drop for LateCall {
        fn drop(&mut self) {
            if let Some(call) = self.0.take() {
                call();
            }
        }
    }
    std::thread_local! {
        static LATE: core::cell::RefCell<LateCall> =
            const { core::cell::RefCell::new(LateCall(None)) };
    }
    let (tell, told) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Registers `LATE`'s destructor before the seat's.
        LATE.with(|slot| {
            slot.borrow_mut().0 = Some(Box::new(move || {
                let _ = tell.send(late());
            }))
        });
        before();
    })
    .join()
    .unwrap();
    told.recv().expect("the late call ran")
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
    fn a_seat_first_taken_in_a_thread_local_destructor_is_given_back() {
        // Each thread's first call for a seat comes from a thread-local destructor, so the
        // seat's own destructor is registered while the thread's are already running: it must
        // still run, or the seats would run out after 128 such threads.
        struct AskAtExit(Option<std::sync::mpsc::Sender<Option<usize>>>);
        impl Drop for AskAtExit {
            fn drop(&mut self) {
                if let Some(tell) = self.0.take() {
                    let _ = tell.send(current());
                }
            }
        }
        std::thread_local! {
            static ASK: core::cell::RefCell<AskAtExit> =
                const { core::cell::RefCell::new(AskAtExit(None)) };
        }
        for thread in 0..2 * SEATS + 10 {
            let (tell, told) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                assert_eq!(as_held(), usize::MAX, "no seat before the destructor");
                ASK.with(|ask| ask.borrow_mut().0 = Some(tell));
            })
            .join()
            .unwrap();
            let seat = told.recv().expect("the destructor ran");
            assert!(seat.is_some(), "thread {thread} found no seat free");
        }
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
