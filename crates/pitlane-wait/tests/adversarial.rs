//! An adversary's use of the queue, `Notify` and `Semaphore`: wakers and closures that panic,
//! wakers that call back into the primitive that wakes them, futures forgotten or replaced in
//! place while queued, and the safe methods of the queue's public API used where its users
//! would not expect them. Each test asserts that the structure stays sound and keeps its
//! contract (every node it still links is `Queued`, permits are conserved, the lock is held
//! while a guard says so).
#![cfg(not(pitlane_loom))]

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use pitlane_testkit::wakers::{CountingWaker, on_wake};
use pitlane_wait::lock::{Lock, Spin};
use pitlane_wait::notify::{Notified, OwnedNotified};
use pitlane_wait::queue::{Decision, Node, NodeStatus, WAKE_BATCH, WaitQueue};
use pitlane_wait::{Notify, Semaphore};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

fn poll<F: Future>(future: Pin<&mut F>, waker: &CountingWaker) -> Poll<F::Output> {
    waker.with_context(|cx| future.poll(cx))
}

fn panicking_waker() -> Waker {
    on_wake(|| panic!("waker panics"))
}

/// A spin lock that tells whether it is held, and panics when released unheld.
struct CheckedLock(&'static AtomicBool);

impl CheckedLock {
    fn new() -> (Self, &'static AtomicBool) {
        let held: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        (CheckedLock(held), held)
    }
}

// SAFETY: a compare-and-swap spin lock: one holder at a time, acquire on lock, release on
// unlock.
unsafe impl Lock for CheckedLock {
    fn lock(&self) {
        while self
            .0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    }

    unsafe fn unlock(&self) {
        assert!(
            self.0.swap(false, Ordering::Release),
            "unlock of a lock nobody holds"
        );
    }
}

#[test]
fn a_guard_still_holds_the_lock_after_a_waker_panicked_in_its_batch_flush() {
    let (lock, held) = CheckedLock::new();
    let queue: WaitQueue<u8, CheckedLock, Spin> = WaitQueue::with_lock(0, lock);
    let node = pin!(Node::new(7));
    // SAFETY: the node is removed below before it is dropped.
    unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
    let w = CountingWaker::new();
    let mut locked = queue.lock();
    locked.wake_later(panicking_waker());
    for _ in 1..WAKE_BATCH {
        locked.wake_later(w.waker());
    }
    // The batch is full: this releases the lock to wake it, and the first waker panics.
    let result = catch_unwind(AssertUnwindSafe(|| locked.wake_later(w.waker())));
    assert!(result.is_err());
    assert!(
        held.load(Ordering::Relaxed),
        "the guard survived the panic without the lock"
    );
    // The guard is still usable, under the lock.
    assert_eq!(locked.front(), Some(&7));
    // SAFETY: enqueued on this queue only.
    assert!(unsafe { locked.remove(node.as_ref()) });
    drop(locked);
    assert!(!held.load(Ordering::Relaxed));
    // The rest of the panicked batch was dropped without being woken (tokio's `WakeList`
    // does the same), and so was the waker of the call that panicked.
    assert_eq!(w.wakes(), 0);
    assert_eq!(w.live(), 1, "every waker was dropped");
}

#[test]
fn notify_waiters_survives_every_waker_of_a_batch_panicking() {
    // More than a batch of waiters whose wakers all panic: the first panic unwinds out of
    // `notify_waiters`; none of the others may be woken during that unwinding (a second
    // panic there aborts the process).
    let notify = Notify::new();
    let panicking = panicking_waker();
    let mut fs: Vec<Pin<Box<Notified<'_>>>> = (0..2 * WAKE_BATCH + 5)
        .map(|_| Box::pin(notify.notified()))
        .collect();
    for f in &mut fs {
        assert!(
            f.as_mut()
                .poll(&mut Context::from_waker(&panicking))
                .is_pending()
        );
    }
    let result = catch_unwind(AssertUnwindSafe(|| notify.notify_waiters()));
    assert!(result.is_err());
    let w = CountingWaker::new();
    assert!(fs.iter_mut().all(|f| poll(f.as_mut(), &w).is_ready()));
    drop(fs);
    let mut next = pin!(notify.notified());
    assert!(poll(next.as_mut(), &w).is_pending());
    notify.notify_one();
    assert!(poll(next.as_mut(), &w).is_ready());
}

#[test]
fn close_survives_every_waker_of_a_batch_panicking() {
    let semaphore = Semaphore::new(0);
    let panicking = panicking_waker();
    let mut fs: Vec<_> = (0..2 * WAKE_BATCH + 5)
        .map(|_| Box::pin(semaphore.acquire()))
        .collect();
    for f in &mut fs {
        assert!(
            f.as_mut()
                .poll(&mut Context::from_waker(&panicking))
                .is_pending()
        );
    }
    let result = catch_unwind(AssertUnwindSafe(|| semaphore.close()));
    assert!(result.is_err());
    let w = CountingWaker::new();
    assert!(
        fs.iter_mut()
            .all(|f| matches!(poll(f.as_mut(), &w), Poll::Ready(Err(_))))
    );
}

#[test]
fn a_waker_panicking_in_close_loses_no_partial_permit() {
    // The head waiter holds a partial permit; its waker panics in the first batch of the
    // close's drain, with more waiters behind it than a batch.
    let semaphore = Semaphore::new(1);
    let mut head = Box::pin(semaphore.acquire_many(2)); // takes 1, lacks 1
    assert!(
        head.as_mut()
            .poll(&mut Context::from_waker(&panicking_waker()))
            .is_pending()
    );
    let w = CountingWaker::new();
    let mut rest: Vec<_> = (0..WAKE_BATCH + 8)
        .map(|_| Box::pin(semaphore.acquire()))
        .collect();
    for f in &mut rest {
        assert!(poll(f.as_mut(), &w).is_pending());
    }
    assert_eq!(semaphore.available_permits(), 0);
    let result = catch_unwind(AssertUnwindSafe(|| semaphore.close()));
    assert!(result.is_err());
    assert!(semaphore.is_closed());
    assert!(matches!(poll(head.as_mut(), &w), Poll::Ready(Err(_))));
    drop((head, rest));
    assert_eq!(
        semaphore.available_permits(),
        1,
        "the head's partial permit went back to the closed semaphore"
    );
}

/// Enqueues `a` and `b` (in that order) on `queue`.
///
/// # Safety
/// Both are removed (or seen `Dequeued`) before they are dropped.
unsafe fn enqueue_two(queue: &WaitQueue<u8>, a: Pin<&Node<u8>>, b: Pin<&Node<u8>>) {
    // SAFETY: forwarded from the caller.
    unsafe {
        queue.enqueue_or_update(a, |_| Decision::Enqueue);
        queue.enqueue_or_update(b, |_| Decision::Enqueue);
    }
}

#[test]
fn a_take_that_panics_in_dequeue_leaves_the_node_dequeued() {
    let queue: WaitQueue<u8> = WaitQueue::new(0);
    let (a, b) = (pin!(Node::new(1)), pin!(Node::new(2)));
    // SAFETY: removed or dequeued below before they are dropped.
    unsafe { enqueue_two(&queue, a.as_ref(), b.as_ref()) };
    let result = catch_unwind(AssertUnwindSafe(|| {
        queue.lock().dequeue(0, |_| panic!("take panics"))
    }));
    assert!(result.is_err());
    // `a` is out of the queue: its status must say so, else its owner unlinks it again
    // through links that no longer hold.
    assert_eq!(a.status(), NodeStatus::Dequeued);
    let mut locked = queue.lock();
    // SAFETY: enqueued on this queue only.
    assert!(!unsafe { locked.remove(a.as_ref()) });
    assert_eq!(locked.front(), Some(&2));
    // SAFETY: as above.
    assert!(unsafe { locked.remove(b.as_ref()) });
    drop(locked);
    assert_eq!(queue.state(), Some(0));
}

#[test]
fn a_take_that_panics_in_pop_leaves_the_node_dequeued() {
    let queue: WaitQueue<u8> = WaitQueue::new(0);
    let (a, b) = (pin!(Node::new(1)), pin!(Node::new(2)));
    // SAFETY: removed or dequeued below before they are dropped.
    unsafe { enqueue_two(&queue, a.as_ref(), b.as_ref()) };
    let result = catch_unwind(AssertUnwindSafe(|| {
        queue.lock().pop(|_| panic!("take panics"))
    }));
    assert!(result.is_err());
    assert_eq!(b.status(), NodeStatus::Dequeued);
    let mut locked = queue.lock();
    // SAFETY: enqueued on this queue only.
    assert!(!unsafe { locked.remove(b.as_ref()) });
    // SAFETY: as above.
    assert!(unsafe { locked.remove(a.as_ref()) });
    drop(locked);
    assert_eq!(queue.state(), Some(0));
}

#[test]
fn a_take_that_panics_in_drain_leaves_every_node_dequeued() {
    // A node left `Queued` by the drain would still point at the drain's sentinel, a local
    // of the returned drain call, and its owner's removal would follow it.
    let queue: WaitQueue<u8> = WaitQueue::new(0);
    let (a, b) = (pin!(Node::new(1)), pin!(Node::new(2)));
    // SAFETY: removed or dequeued below before they are dropped.
    unsafe { enqueue_two(&queue, a.as_ref(), b.as_ref()) };
    let (takes, marks) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let result = catch_unwind(AssertUnwindSafe(|| {
        queue.lock().drain(
            0,
            |_| {
                if takes.fetch_add(1, Ordering::Relaxed) == 0 {
                    panic!("take panics");
                }
                None
            },
            |_| {
                marks.fetch_add(1, Ordering::Relaxed);
            },
        )
    }));
    assert!(result.is_err());
    assert_eq!(
        (takes.load(Ordering::Relaxed), marks.load(Ordering::Relaxed)),
        (1, 1),
        "the drain finished the rest with `mark`"
    );
    assert_eq!(a.status(), NodeStatus::Dequeued);
    assert_eq!(b.status(), NodeStatus::Dequeued);
    let mut locked = queue.lock();
    // SAFETY: enqueued on this queue only.
    assert!(!unsafe { locked.remove(a.as_ref()) });
    // SAFETY: as above.
    assert!(!unsafe { locked.remove(b.as_ref()) });
}

#[test]
#[should_panic(expected = "queued")]
fn reset_of_a_queued_node_panics() {
    let queue: WaitQueue<()> = WaitQueue::new(0);
    // Leaked, so that the node outlives the queue's pointer to it whatever happens.
    let node: Pin<&'static Node<()>> = Pin::static_ref(Box::leak(Box::new(Node::new(()))));
    // SAFETY: the node is never dropped.
    unsafe { queue.enqueue_or_update(node, |_| Decision::Enqueue) };
    // Were this allowed, its owner would see `Unqueued` and free it while it is linked.
    node.reset();
}

#[test]
fn reset_of_an_unqueued_or_dequeued_node_is_allowed() {
    let queue: WaitQueue<()> = WaitQueue::new(0);
    let node = pin!(Node::new(()));
    node.reset();
    assert_eq!(node.status(), NodeStatus::Unqueued);
    // SAFETY: dequeued below before it is dropped.
    unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
    assert_eq!(queue.lock().dequeue(0, |_| None), Some(true));
    assert_eq!(node.status(), NodeStatus::Dequeued);
    node.reset();
    assert_eq!(node.status(), NodeStatus::Unqueued);
}

#[test]
fn wakers_that_call_back_into_notify_from_their_wake() {
    // A waiter's waker calls notify_one, notify_last and notify_waiters on the very Notify
    // that wakes it, and drops another queued waiter: no deadlock, no lost or doubled
    // notification.
    let notify = Arc::new(Notify::new());
    let victim: Arc<Mutex<Option<Pin<Box<OwnedNotified>>>>> = Arc::default();
    let reentrant = {
        let notify = notify.clone();
        let victim = victim.clone();
        on_wake(move || {
            victim.lock().unwrap().take(); // a queued waiter, dropped while queued
            notify.notify_waiters();
            notify.notify_last();
            notify.notify_one();
        })
    };
    let w = CountingWaker::new();
    let mut first = pin!(notify.notified());
    assert!(
        first
            .as_mut()
            .poll(&mut Context::from_waker(&reentrant))
            .is_pending()
    );
    let mut v = Box::pin(notify.clone().notified_owned());
    assert!(!v.as_mut().enable());
    *victim.lock().unwrap() = Some(v);
    let mut second = pin!(notify.notified());
    assert!(poll(second.as_mut(), &w).is_pending());
    notify.notify_one(); // to `first`, whose waker does the rest
    assert!(victim.lock().unwrap().is_none());
    assert!(poll(first.as_mut(), &w).is_ready());
    // The broadcast in the waker reached `second`; then notify_last and notify_one found
    // nobody waiting: one permit stored.
    assert!(poll(second.as_mut(), &w).is_ready());
    let mut third = pin!(notify.notified());
    assert!(poll(third.as_mut(), &w).is_ready(), "the stored permit");
    let mut fourth = pin!(notify.notified());
    assert!(poll(fourth.as_mut(), &w).is_pending(), "only one permit");
}

#[test]
fn wakers_that_call_back_into_the_semaphore_from_their_wake() {
    // A served waiter's waker adds permits and then closes the semaphore that woke it; the
    // waiter behind it is served by the added permit before the close. Both are polled after
    // the close, so both fail, as tokio's do, and give their permits back.
    let semaphore = Arc::new(Semaphore::new(0));
    let reentrant = {
        let semaphore = semaphore.clone();
        on_wake(move || {
            semaphore.add_permits(1);
            semaphore.close();
        })
    };
    let w = CountingWaker::new();
    let mut first = Box::pin(semaphore.acquire());
    assert!(
        first
            .as_mut()
            .poll(&mut Context::from_waker(&reentrant))
            .is_pending()
    );
    let mut second = Box::pin(semaphore.acquire());
    assert!(poll(second.as_mut(), &w).is_pending());
    let mut third = Box::pin(semaphore.acquire_many(2));
    assert!(poll(third.as_mut(), &w).is_pending());
    semaphore.add_permits(1); // to `first`
    assert!(matches!(poll(first.as_mut(), &w), Poll::Ready(Err(_))));
    assert_eq!(
        semaphore.available_permits(),
        1,
        "the first's permit came back"
    );
    assert!(matches!(poll(second.as_mut(), &w), Poll::Ready(Err(_))));
    assert!(matches!(poll(third.as_mut(), &w), Poll::Ready(Err(_))));
    drop((first, second, third));
    assert_eq!(semaphore.available_permits(), 2, "both permits came back");
    assert!(semaphore.is_closed());
}

#[test]
fn a_forgotten_queued_notified_keeps_the_queue_sound() {
    // `mem::forget` of a boxed, queued `Notified` leaks its node: the queue keeps pointing
    // at live memory. It takes the notification it is given, as tokio's does.
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut forgotten = Box::pin(notify.notified());
    assert!(poll(forgotten.as_mut(), &w).is_pending());
    std::mem::forget(forgotten);
    let mut behind = pin!(notify.notified());
    assert!(poll(behind.as_mut(), &w).is_pending());
    notify.notify_one(); // to the forgotten waiter
    assert_eq!(w.wakes(), 1);
    assert!(poll(behind.as_mut(), &w).is_pending());
    notify.notify_one();
    assert!(poll(behind.as_mut(), &w).is_ready());
    // Forgotten again, then a broadcast drains it with others.
    let mut forgotten = Box::pin(notify.notified());
    assert!(poll(forgotten.as_mut(), &w).is_pending());
    std::mem::forget(forgotten);
    let mut other = pin!(notify.notified());
    assert!(poll(other.as_mut(), &w).is_pending());
    notify.notify_waiters();
    assert!(poll(other.as_mut(), &w).is_ready());
    assert!(format!("{notify:?}").contains("waiters: false"));
}

#[test]
fn a_forgotten_queued_acquire_keeps_its_partial_permits_and_the_rest_works() {
    let semaphore = Semaphore::new(1);
    let w = CountingWaker::new();
    let mut forgotten = Box::pin(semaphore.acquire_many(3)); // takes 1, lacks 2
    assert!(poll(forgotten.as_mut(), &w).is_pending());
    std::mem::forget(forgotten);
    let mut behind = Box::pin(semaphore.acquire());
    assert!(poll(behind.as_mut(), &w).is_pending());
    semaphore.add_permits(3); // 2 to the forgotten head, 1 to `behind`
    assert!(matches!(poll(behind.as_mut(), &w), Poll::Ready(Ok(_))));
    drop(behind);
    assert_eq!(semaphore.available_permits(), 1);
}

#[test]
fn pin_set_over_a_queued_future_removes_it_first() {
    // `Pin::set` drops the old value in place before writing the new one: the queued node
    // leaves the queue before its memory is reused.
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut slot = Box::pin(notify.notified());
    assert!(poll(slot.as_mut(), &w).is_pending());
    slot.set(notify.notified());
    assert!(format!("{notify:?}").contains("waiters: false"));
    notify.notify_one(); // nobody waits: the permit is stored
    assert!(poll(slot.as_mut(), &w).is_ready());

    let semaphore = Semaphore::new(1);
    let mut slot = Box::pin(semaphore.acquire_many(2));
    assert!(poll(slot.as_mut(), &w).is_pending());
    slot.set(semaphore.acquire_many(1));
    assert_eq!(
        semaphore.available_permits(),
        1,
        "the partial permit came back"
    );
    let Poll::Ready(Ok(permit)) = poll(slot.as_mut(), &w) else {
        panic!("the new acquire takes the permit")
    };
    drop(permit);
    assert_eq!(semaphore.available_permits(), 1);
}

#[test]
fn a_queued_future_polled_and_dropped_on_other_threads() {
    // `&mut Pin<Box<_>>` is sent to another thread to poll it with another waker, and the
    // future is dropped on a third thread while queued; the notification it took goes on.
    let notify = Arc::new(Notify::new());
    let (w1, w2) = (CountingWaker::new(), CountingWaker::new());
    let mut f = Box::pin(notify.clone().notified_owned());
    assert!(poll(f.as_mut(), &w1).is_pending());
    std::thread::scope(|s| {
        s.spawn(|| assert!(poll(f.as_mut(), &w2).is_pending()));
    });
    let mut behind = pin!(notify.notified());
    assert!(poll(behind.as_mut(), &w1).is_pending());
    notify.notify_one();
    assert_eq!(w2.wakes(), 1, "the last waker given was woken");
    std::thread::spawn(move || drop(f)).join().unwrap();
    assert!(
        poll(behind.as_mut(), &w1).is_ready(),
        "the dropped waiter's notification went on"
    );
}

/// A waker whose `clone` panics once `armed` is set (its `wake` and `drop` do nothing).
fn clone_panics_waker(armed: &'static AtomicBool) -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    fn clone(data: *const ()) -> RawWaker {
        // SAFETY: `data` is the `&'static AtomicBool` the waker was made from.
        let armed = unsafe { &*data.cast::<AtomicBool>() };
        assert!(!armed.load(Ordering::Relaxed), "waker clone panics");
        RawWaker::new(data, &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions keep `RawWaker`'s contract (no resources, `clone`
    // returns the same data).
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::from_ref(armed).cast(), &VTABLE)) }
}

#[test]
fn a_waker_whose_clone_panics_leaves_futures_usable() {
    let armed: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(true)));
    let bad = clone_panics_waker(armed);
    let w = CountingWaker::new();

    // First poll: the clone panics before the waiter is queued.
    let notify = Notify::new();
    let mut f = pin!(notify.notified());
    let result = catch_unwind(AssertUnwindSafe(|| {
        f.as_mut().poll(&mut Context::from_waker(&bad))
    }));
    assert!(result.is_err());
    assert!(format!("{notify:?}").contains("waiters: false"));
    assert!(poll(f.as_mut(), &w).is_pending());
    // Later poll: the clone panics under the lock, while queued.
    let result = catch_unwind(AssertUnwindSafe(|| {
        f.as_mut().poll(&mut Context::from_waker(&bad))
    }));
    assert!(result.is_err());
    notify.notify_one();
    assert_eq!(w.wakes(), 1, "the waker kept from before was woken");
    assert!(poll(f.as_mut(), &w).is_ready());

    // The same for an acquire that would take a partial permit: nothing is taken.
    let semaphore = Semaphore::new(1);
    let mut a = Box::pin(semaphore.acquire_many(2));
    let result = catch_unwind(AssertUnwindSafe(|| {
        a.as_mut().poll(&mut Context::from_waker(&bad))
    }));
    assert!(result.is_err());
    assert_eq!(semaphore.available_permits(), 1, "no permit taken");
    drop(a);
    let mut a = Box::pin(semaphore.acquire_many(2));
    assert!(poll(a.as_mut(), &w).is_pending());
    let result = catch_unwind(AssertUnwindSafe(|| {
        a.as_mut().poll(&mut Context::from_waker(&bad))
    }));
    assert!(result.is_err());
    drop(a);
    assert_eq!(
        semaphore.available_permits(),
        1,
        "the partial permit came back"
    );
    armed.store(false, Ordering::Relaxed);
}

#[test]
fn a_waker_that_drops_its_own_future_passes_the_notification_on() {
    // The woken waiter's future is dropped from inside its own `wake` (after `notify_one`
    // released the lock): it never returns `Ready`, so its notification goes on.
    let notify = Arc::new(Notify::new());
    let own: Arc<Mutex<Option<Pin<Box<OwnedNotified>>>>> = Arc::default();
    let drops_itself = {
        let own = own.clone();
        on_wake(move || drop(own.lock().unwrap().take()))
    };
    let mut first = Box::pin(notify.clone().notified_owned());
    assert!(
        first
            .as_mut()
            .poll(&mut Context::from_waker(&drops_itself))
            .is_pending()
    );
    *own.lock().unwrap() = Some(first);
    let w = CountingWaker::new();
    let mut second = pin!(notify.notified());
    assert!(poll(second.as_mut(), &w).is_pending());
    notify.notify_one();
    assert!(own.lock().unwrap().is_none());
    assert_eq!(w.wakes(), 1);
    assert!(poll(second.as_mut(), &w).is_ready());
}

#[test]
fn a_waker_that_drops_its_own_served_acquire_gives_the_permits_back() {
    let semaphore = Arc::new(Semaphore::new(0));
    type Slot = Arc<Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>>;
    let own: Slot = Arc::default();
    let drops_itself = {
        let own = own.clone();
        on_wake(move || drop(own.lock().unwrap().take()))
    };
    let mut first: Pin<Box<dyn Future<Output = ()> + Send>> = {
        let semaphore = semaphore.clone();
        Box::pin(async move {
            let _permit = semaphore.acquire_many(2).await.unwrap();
        })
    };
    assert!(
        first
            .as_mut()
            .poll(&mut Context::from_waker(&drops_itself))
            .is_pending()
    );
    *own.lock().unwrap() = Some(first);
    let w = CountingWaker::new();
    let mut second = Box::pin(semaphore.acquire());
    assert!(poll(second.as_mut(), &w).is_pending());
    semaphore.add_permits(2); // both to `first`, whose waker drops it: they go to `second`
    assert!(own.lock().unwrap().is_none());
    assert!(matches!(poll(second.as_mut(), &w), Poll::Ready(Ok(_))));
    drop(second);
    assert_eq!(semaphore.available_permits(), 2);
}

#[test]
fn an_owned_notified_outlives_every_other_arc() {
    let notify = Arc::new(Notify::new());
    let w = CountingWaker::new();
    let mut queued = Box::pin(notify.clone().notified_owned());
    assert!(poll(queued.as_mut(), &w).is_pending());
    let mut unpolled = Box::pin(notify.clone().notified_owned());
    let weak = Arc::downgrade(&notify);
    drop(notify);
    assert!(weak.upgrade().is_some(), "the futures keep it alive");
    assert!(poll(unpolled.as_mut(), &w).is_pending());
    drop(queued); // leaves the queue of a Notify only it and `unpolled` keep
    weak.upgrade().unwrap().notify_one();
    assert!(poll(unpolled.as_mut(), &w).is_ready());
    drop(unpolled);
    assert!(weak.upgrade().is_none());
}

#[test]
fn a_broadcast_from_inside_a_broadcasts_wake_drains_only_the_new_queue() {
    // While a drain of more than a batch has released the lock, a woken waiter's waker
    // enables a new waiter, broadcasts again (a second drain, with its own sentinel, of the
    // queue that grew after the first drain's swap) and drops a waiter still in the first
    // drain's list. Each drain finishes exactly its own waiters.
    let notify = Arc::new(Notify::new());
    let late: Arc<Mutex<Vec<Pin<Box<OwnedNotified>>>>> = Arc::default();
    let victims: Arc<Mutex<Vec<Pin<Box<OwnedNotified>>>>> = Arc::default();
    let waker = {
        let notify = notify.clone();
        let late = late.clone();
        let victims = victims.clone();
        on_wake(move || {
            let mut again = Box::pin(notify.clone().notified_owned());
            assert!(!again.as_mut().enable());
            late.lock().unwrap().push(again);
            notify.notify_waiters(); // reaches `again`, not the first drain's waiters
            victims.lock().unwrap().pop();
        })
    };
    let mut cx = Context::from_waker(&waker);
    let mut first: Vec<Pin<Box<Notified<'_>>>> = (0..WAKE_BATCH + 8)
        .map(|_| Box::pin(notify.notified()))
        .collect();
    for f in &mut first {
        assert!(f.as_mut().poll(&mut cx).is_pending());
    }
    for _ in 0..WAKE_BATCH + 8 {
        let mut f = Box::pin(notify.clone().notified_owned());
        assert!(!f.as_mut().enable());
        victims.lock().unwrap().push(f);
    }
    notify.notify_waiters();
    assert!(
        first
            .iter_mut()
            .all(|f| f.as_mut().poll(&mut cx).is_ready())
    );
    let mut late = late.lock().unwrap();
    assert_eq!(late.len(), first.len(), "one per woken first waiter");
    assert!(late.iter_mut().all(|f| f.as_mut().enable()));
    // The victims not dropped were drained by the first broadcast.
    let mut victims = victims.lock().unwrap();
    assert!(victims.iter_mut().all(|f| f.as_mut().enable()));
    assert!(format!("{notify:?}").contains("waiters: false"));
}

#[test]
fn a_waker_panicking_in_notify_one_and_add_permits_leaves_its_waiter_served() {
    let w = CountingWaker::new();
    let panicking = panicking_waker();

    let notify = Notify::new();
    let mut chosen = pin!(notify.notified());
    assert!(
        chosen
            .as_mut()
            .poll(&mut Context::from_waker(&panicking))
            .is_pending()
    );
    let mut behind = pin!(notify.notified());
    assert!(poll(behind.as_mut(), &w).is_pending());
    assert!(catch_unwind(AssertUnwindSafe(|| notify.notify_one())).is_err());
    assert!(
        poll(chosen.as_mut(), &w).is_ready(),
        "notified before the wake-up"
    );
    assert!(
        poll(behind.as_mut(), &w).is_pending(),
        "one notification, one waiter"
    );
    notify.notify_one();
    assert!(poll(behind.as_mut(), &w).is_ready());

    let semaphore = Semaphore::new(0);
    let mut served = Box::pin(semaphore.acquire_many(2));
    assert!(
        served
            .as_mut()
            .poll(&mut Context::from_waker(&panicking))
            .is_pending()
    );
    let mut next = Box::pin(semaphore.acquire());
    assert!(poll(next.as_mut(), &w).is_pending());
    assert!(catch_unwind(AssertUnwindSafe(|| semaphore.add_permits(3))).is_err());
    let Poll::Ready(Ok(permit)) = poll(served.as_mut(), &w) else {
        panic!("the head was served before its waker panicked")
    };
    assert_eq!(permit.num_permits(), 2);
    // `next` was served in the same call (its wake-up was dropped with the panicked batch).
    assert!(matches!(poll(next.as_mut(), &w), Poll::Ready(Ok(_))));
    drop((permit, served, next));
    assert_eq!(semaphore.available_permits(), 3, "every permit came back");
}

#[test]
fn a_waker_whose_drop_panics_when_replaced_leaves_the_waiter_queued() {
    /// A waker whose last drop panics once.
    struct PanicOnDrop(AtomicBool);
    impl Wake for PanicOnDrop {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            if self.0.swap(false, Ordering::Relaxed) {
                panic!("waker drop panics");
            }
        }
    }
    let notify = Notify::new();
    let w = CountingWaker::new();
    let mut f = pin!(notify.notified());
    {
        let bad = Waker::from(Arc::new(PanicOnDrop(AtomicBool::new(true))));
        assert!(f.as_mut().poll(&mut Context::from_waker(&bad)).is_pending());
        // `bad` (ours) drops here; the queue keeps a clone, the last.
    }
    // Polled with another waker: the kept one is replaced and dropped (outside the lock),
    // and panics.
    let result = catch_unwind(AssertUnwindSafe(|| poll(f.as_mut(), &w)));
    assert!(result.is_err());
    notify.notify_one();
    assert_eq!(
        w.wakes(),
        1,
        "the new waker was kept before the old one dropped"
    );
    assert!(poll(f.as_mut(), &w).is_ready());
}
