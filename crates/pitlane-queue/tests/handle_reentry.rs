//! A queue handle's pin must hold for the whole of each of its operations, also when user code
//! that a pop runs (a revoked item's `Drop`) reaches the same handle (here through a
//! thread-local) and releases it or works through it. A pin let go mid-operation leaves the
//! rest of the pop (which goes on loading segments) unprotected: another thread could retire
//! and recycle a segment it is reading. The pop drops a revoked item only between two attempts,
//! outside the pin, and pins again for the next; so a second revoked item, dropped after the
//! first one released the handle, must find the thread pinned again. (Before this was so, the
//! first item's drop ran inside the pop and its release left the rest of the pop, and the
//! second item's drop, unpinned.)
//!
//! Whether the thread is still pinned is seen through the epoch itself: a function deferred by
//! another thread can run only after the global epoch has advanced twice past it, which a
//! thread pinned since before the deferral prevents. So this binary holds one test: no other
//! test's pins may hold the epoch back.
#![cfg(not(pitlane_loom))]

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pitlane_queue::BagHandle;
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::{self, Queue};
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};

struct Page {
    handle: RevokeHandle,
}

static PAGE: Page = Page {
    handle: RevokeHandle::new(),
};

/// The second revoked item's handle.
static SECOND_PAGE: Page = Page {
    handle: RevokeHandle::new(),
};

/// What an item's drop does with the thread's handle.
#[derive(Clone, Copy, PartialEq)]
enum OnDrop {
    Nothing,
    /// Release the handle, then see whether the thread is still pinned.
    Release,
    /// Push and pop through the handle 300 times each (past a renewal of its pin), then see.
    Operate,
    /// See whether the thread is pinned (the second revoked item).
    Check,
}

struct Item(OnDrop);

// SAFETY: the handle lives in a static, outside the item's bytes.
unsafe impl Revocable for Item {
    fn revoke_handle(&self) -> &RevokeHandle {
        if self.0 == OnDrop::Check {
            &SECOND_PAGE.handle
        } else {
            &PAGE.handle
        }
    }
}

static QUEUE: Queue<Item, 1> = Queue::with_segment_size();
static BAGPIPE: std::sync::LazyLock<Bagpipe<Queue<Item, 1>>> =
    std::sync::LazyLock::new(|| Bagpipe::with_pipes(1).unwrap());

thread_local! {
    static QUEUE_HANDLE: mpmc::Handle<'static, Item, 1> = QUEUE.handle();
    static BAGPIPE_HANDLE: pitlane_queue::bagpipe::Handle<'static, Queue<Item, 1>> =
        BAGPIPE.handle();
    /// Which handle the drops reach, and whether the thread was found unpinned.
    static VIA_BAGPIPE: Cell<bool> = const { Cell::new(false) };
    static UNPINNED: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether a function another thread defers now runs while this thread stays as it is: true
/// only if this thread is not pinned.
fn epoch_runs_past_this_thread() -> bool {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    std::thread::spawn(move || {
        let local = crossbeam_epoch::default_collector().register();
        {
            let guard = local.pin();
            let set = Arc::clone(&flag);
            guard.defer(move || set.store(true, Ordering::Release));
            guard.flush();
        }
        for _ in 0..10_000 {
            if flag.load(Ordering::Acquire) {
                return;
            }
            local.pin().flush();
        }
    })
    .join()
    .unwrap();
    ran.load(Ordering::Acquire)
}

impl Drop for Item {
    fn drop(&mut self) {
        if self.0 == OnDrop::Nothing {
            return;
        }
        let via_bagpipe = VIA_BAGPIPE.get();
        match self.0 {
            OnDrop::Release if via_bagpipe => BAGPIPE_HANDLE.with(|h| h.release()),
            OnDrop::Release => QUEUE_HANDLE.with(|h| h.release()),
            OnDrop::Operate if via_bagpipe => BAGPIPE_HANDLE.with(|h| {
                (0..300).for_each(|_| {
                    h.push(Item(OnDrop::Nothing));
                    drop(h.pop());
                });
            }),
            OnDrop::Operate => QUEUE_HANDLE.with(|h| {
                (0..300).for_each(|_| {
                    h.push(Item(OnDrop::Nothing));
                    drop(h.pop());
                });
            }),
            OnDrop::Check => UNPINNED.set(Some(epoch_runs_past_this_thread())),
            OnDrop::Nothing => unreachable!(),
        }
    }
}

/// Pushes a revocable item that does `on_drop` and one that checks the pin, revokes both,
/// pushes a plain one, and pops through the handle: the pop passes the revoked items (running
/// their drops) and returns the plain one. Whether the check found the thread unpinned.
fn pop_past_a_revoked_item<B: RevocableBag<Item = Item>>(
    bag: &B,
    on_drop: OnDrop,
    pop: impl Fn() -> Option<Item>,
) -> bool {
    UNPINNED.set(None);
    // Neither handle holds a pin from an earlier case: only the pop's own pin may hold.
    QUEUE_HANDLE.with(|h| h.release());
    BAGPIPE_HANDLE.with(|h| h.release());
    bag.push_revocable(Item(on_drop));
    let probe = std::mem::ManuallyDrop::new(Item(OnDrop::Nothing));
    // SAFETY: the bag is a static.
    assert!(unsafe { B::revoke(&probe) });
    bag.push_revocable(Item(OnDrop::Check));
    let probe = std::mem::ManuallyDrop::new(Item(OnDrop::Check));
    // SAFETY: the bag is a static.
    assert!(unsafe { B::revoke(&probe) });
    bag.push(Item(OnDrop::Nothing));
    let popped = pop().expect("the plain item");
    assert!(popped.0 == OnDrop::Nothing);
    assert!(pop().is_none());
    UNPINNED
        .get()
        .expect("the second revoked item was dropped by the pop")
}

#[test]
fn a_handles_pin_holds_through_user_code_that_releases_or_uses_the_handle() {
    // Sanity: the probe sees an unpinned thread as unpinned, and a pinned one as pinned.
    assert!(
        epoch_runs_past_this_thread(),
        "the epoch does not move here at all"
    );
    QUEUE_HANDLE.with(|h| {
        h.push(Item(OnDrop::Nothing));
        drop(h.pop());
        assert!(
            !epoch_runs_past_this_thread(),
            "a pinned handle does not hold the epoch"
        );
        h.release();
    });
    for via_bagpipe in [false, true] {
        VIA_BAGPIPE.set(via_bagpipe);
        for on_drop in [OnDrop::Release, OnDrop::Operate] {
            let unpinned = if via_bagpipe {
                pop_past_a_revoked_item(&*BAGPIPE, on_drop, || BAGPIPE_HANDLE.with(|h| h.pop()))
            } else {
                pop_past_a_revoked_item(&QUEUE, on_drop, || QUEUE_HANDLE.with(|h| h.pop()))
            };
            let how = if on_drop == OnDrop::Release {
                "released"
            } else {
                "used"
            };
            let through = if via_bagpipe {
                "a Bagpipe's"
            } else {
                "a queue's"
            };
            assert!(
                !unpinned,
                "{through} handle {how} by a revoked item's drop left the rest of the pop unpinned"
            );
        }
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
