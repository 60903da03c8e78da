//! Stress test of revocation against pops and pushes of new copies of the revoked items: the
//! late-revoker race of the `revoke` module, in release builds and under ThreadSanitizer.
//!
//! Each *cycler* thread owns one page and one bag, and loops: pop (which skips the page's node
//! if it was revoked), then push the page again with tracking. Its pop finding the bag empty
//! tells it that its page is in no bag, revoked or not, so it may push the page again at
//! once, even while the revoke that took it has not returned: that is the moment in which a
//! revoker's late clear of the handle could erase the new copy's tracking. *Revoker* threads
//! revoke pages at random meanwhile. The checks:
//!
//! - in the run: when a cycler's pop returns its page, the page's handle said "in the bag"
//!   just before the pop (only a revoke can clear it meanwhile, and then the pop cannot
//!   return the page; a late clear of an older push is the defect);
//! - at the end, per page: the handle says "in the bag" exactly when the page's bag still
//!   holds a copy, and every copy pushed was popped, revoked, or is left, exactly once.
//!
//! The cyclers start after 128 *sitters* have taken every seat (see the crate's `seat`
//! module), so that they have none: an unseated pop gives its node straight back to the
//! stack's shared free list, whose first node the next tracked push takes, so the new copy
//! lands in the node just revoked, as in the race. On Stack and Bagpipe<Stack> (where nodes
//! are reused at once) and on mpmc (where cells are not, but the protocol is the same).
//!
//! Only our own atomics synchronize the threads, which are started with
//! `pitlane_testkit::stress::run_threads` (seen by ThreadSanitizer):
//!
//! ```text
//! cargo test --release -p pitlane-queue --test stress_revoke
//! ```
#![cfg(not(pitlane_loom))]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::RevocableBag;
use pitlane_queue::stack::Stack;
use pitlane_testkit::pages::Page;
use pitlane_testkit::stress::{epoch_ready, run_threads};

/// Whether tracked pushes carry stamps, without which a late revoker may erase the tracking
/// of a copy pushed again meanwhile (the `revoke` module's residual risk): not where `usize`
/// is 32 bits. There the checks of the handle's answer are left out, and the count of copies
/// (each popped, revoked or left exactly once) still holds.
const STAMPED: bool = cfg!(target_pointer_width = "64");

/// How many threads can hold a seat at once (the crate's `seat::SEATS`).
const SEATS: usize = 128;
/// Cyclers, each with its own page and bag, and revokers; more than the two cores of the test
/// machines, so that threads are preempted, between a revoker's steps too.
const CYCLERS: usize = 4;
const REVOKERS: usize = 2;

/// Revokes that must win in a run (see the cyclers' loop).
const WANTED_WINS: usize = if cfg!(debug_assertions) { 1_000 } else { 5_000 };

/// Pop-and-push rounds of each cycler, at least.
fn rounds() -> usize {
    if cfg!(debug_assertions) {
        20_000
    } else {
        400_000
    }
}

/// What happened to the copies of one page.
#[derive(Default)]
struct Copies {
    pushed: AtomicUsize,
    popped: AtomicUsize,
    revoked: AtomicUsize,
}

/// A cycler's exit, on return or unwind: the last one out lets the sitters go.
struct Done<'a> {
    cyclers_done: &'a AtomicUsize,
    finished: &'a AtomicBool,
}

impl Drop for Done<'_> {
    fn drop(&mut self) {
        if self.cyclers_done.fetch_add(1, Ordering::AcqRel) + 1 == CYCLERS {
            self.finished.store(true, Ordering::Release);
        }
    }
}

/// Runs the cyclers and revokers over `bags` (one per cycler) and checks every page at the end.
fn late_revokers<'p, B>(bags: &[B], pages: &'p [Page])
where
    B: RevocableBag<Item = &'p Page> + Sync,
{
    late_revokers_through::<B, B>(bags, pages);
}

/// [`late_revokers`] with the revokes called through `R`'s `revoke`, which need not be the
/// bags' type (`RevocableBag::revoke` does not name the bag).
fn late_revokers_through<'p, B, R>(bags: &[B], pages: &'p [Page])
where
    B: RevocableBag<Item = &'p Page> + Sync,
    R: RevocableBag<Item = &'p Page>,
{
    // Every revoke pins the epoch (a stack's too): its collector is set up first, where
    // ThreadSanitizer sees it (see `epoch_ready`).
    epoch_ready();
    assert_eq!(bags.len(), CYCLERS);
    assert_eq!(pages.len(), CYCLERS);
    let copies: Vec<Copies> = (0..CYCLERS).map(|_| Copies::default()).collect();
    let seated = AtomicUsize::new(0);
    let cyclers_done = AtomicUsize::new(0);
    let finished = AtomicBool::new(false);
    let won = AtomicUsize::new(0);
    let rounds = rounds();
    run_threads(SEATS + CYCLERS + REVOKERS, |t| {
        if t < SEATS {
            // A sitter: its first plain call takes a seat (or finds them all taken); it keeps
            // it, asleep, until the others are done.
            Stack::<u8>::new().push(0);
            seated.fetch_add(1, Ordering::AcqRel);
            while !finished.load(Ordering::Acquire) {
                thread::sleep(Duration::from_millis(1));
            }
            return;
        }
        while seated.load(Ordering::Acquire) < SEATS {
            thread::sleep(Duration::from_millis(1));
        }
        let t = t - SEATS;
        if t < CYCLERS {
            // Counts this cycler done however it leaves, a failed check included, so that the
            // revokers and sitters stop and the failure is reported rather than hanging.
            let _done = Done {
                cyclers_done: &cyclers_done,
                finished: &finished,
            };
            let (bag, page, copies) = (&bags[t], &pages[t], &copies[t]);
            // The race needs revokes that win: a cycler goes on past its rounds (up to 20
            // times as many) until the revokers, who may get little of the machine, have won
            // enough of them.
            for round in (0..).take_while(|&round| {
                round < rounds || (round < 20 * rounds && won.load(Ordering::Relaxed) < WANTED_WINS)
            }) {
                let tracked = page.handle.is_in_bag();
                if let Some(popped) = bag.pop() {
                    assert!(std::ptr::eq(popped, page), "another cycler's page");
                    assert!(
                        tracked || !STAMPED,
                        "round {round}: page {} popped, but its handle said it was in no bag \
                         (a late revoker erased the tracking of the copy pushed last)",
                        page.number
                    );
                    copies.popped.fetch_add(1, Ordering::Relaxed);
                }
                // Our bag is empty: the page is in no bag, whether or not its revoke returned.
                bag.push_revocable(page);
                copies.pushed.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        // A revoker: a cheap xorshift walk over the pages, until the cyclers are done.
        let mut x = 0x9e37_79b9_u64 + t as u64;
        while cyclers_done.load(Ordering::Acquire) < CYCLERS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = x as usize % CYCLERS;
            // SAFETY: page `c` is only ever pushed into `bags[c]`, which outlives the threads.
            if unsafe { R::revoke(&&pages[c]) } {
                copies[c].revoked.fetch_add(1, Ordering::Relaxed);
                won.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let mut revoked = 0;
    for (c, bag) in bags.iter().enumerate() {
        let tracked = pages[c].handle.is_in_bag();
        let left = std::iter::from_fn(|| bag.pop()).count();
        let (pushed, popped, revoked_here) = (
            copies[c].pushed.load(Ordering::Relaxed),
            copies[c].popped.load(Ordering::Relaxed),
            copies[c].revoked.load(Ordering::Relaxed),
        );
        assert!(left <= 1, "page {c}: {left} copies left");
        assert!(
            tracked == (left == 1) || !STAMPED,
            "page {c}: the handle says in the bag: {tracked}, with {left} copies left"
        );
        assert_eq!(
            pushed,
            popped + revoked_here + left,
            "page {c}: {pushed} pushed, {popped} popped, {revoked_here} revoked, {left} left"
        );
        assert!(!pages[c].handle.is_in_bag());
        revoked += revoked_here;
    }
    assert!(revoked >= WANTED_WINS, "only {revoked} revokes won");
}

#[test]
fn a_late_revoker_leaves_a_copy_pushed_again_into_its_stack_node_tracked() {
    let pages = Page::numbered(CYCLERS);
    let bags: Vec<Stack<&Page>> = (0..CYCLERS).map(|_| Stack::new()).collect();
    late_revokers(&bags, &pages);
}

#[test]
fn a_late_revoker_leaves_a_copy_pushed_again_into_a_bagpipe_of_stacks_tracked() {
    let pages = Page::numbered(CYCLERS);
    let bags: Vec<Bagpipe<Stack<&Page>>> = (0..CYCLERS)
        .map(|_| Bagpipe::with_pipes(2).unwrap())
        .collect();
    late_revokers(&bags, &pages);
}

#[test]
fn a_late_revoker_leaves_a_copy_pushed_again_into_a_queue_tracked() {
    epoch_ready();
    let pages = Page::numbered(CYCLERS);
    let bags: Vec<Queue<&Page, 4>> = (0..CYCLERS).map(|_| Queue::with_segment_size()).collect();
    late_revokers(&bags, &pages);
}

#[test]
fn a_revoker_calling_through_a_stack_keeps_the_queue_segment_it_reads_alive() {
    // `Stack::revoke` of a page that sits in a queue: the revoke must protect the queue's
    // segment as the queue's own revoke does (it once did not pin the epoch). 4-cell segments
    // are retired and recycled (or freed, past the pool) all along; AddressSanitizer runs this.
    epoch_ready();
    let pages = Page::numbered(CYCLERS);
    let bags: Vec<Queue<&Page, 4>> = (0..CYCLERS).map(|_| Queue::with_segment_size()).collect();
    late_revokers_through::<_, Stack<&Page>>(&bags, &pages);
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
