//! A fourth hostile pass (after `adversarial.rs`, `hostile_wait.rs`, `hostile_wait_2.rs` and
//! `hostile_wait_3.rs`): the wakers a completed `Notified` keeps, on each path by which it
//! completes; what `enable` does to a `Notified` that a broadcast drained without covering it;
//! the public `WaitQueue` API used directly (its documented contracts, taken at their word);
//! and cases judged fine that no test pinned. Where tokio has the same thing, each case runs
//! on tokio's types too.

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[cfg(not(pitlane_loom))]
mod hostile {
    use std::future::Future;
    use std::pin::{Pin, pin};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Context, RawWaker, RawWakerVTable, Waker};
    use std::time::Duration;

    use pitlane_testkit::wakers::{CloneGate, CountingWaker, on_wake};
    use pitlane_wait::WaitQueue;
    use pitlane_wait::queue::{Decision, Node, NodeStatus, Outcome, WAKE_BATCH};
    use pitlane_wait::{Notify, OwnedNotified};

    /// What a waker of `hook_waker` points at: its own clone of a counted waker (so that the
    /// counter's `live` counts every waker of the hook) and the action its `clone` runs.
    struct Hook {
        on_clone: Arc<dyn Fn() + Send + Sync>,
        inner: Waker,
    }

    static HOOK: RawWakerVTable = RawWakerVTable::new(
        |p| {
            // SAFETY: `p` is the `Box<Hook>` of a live waker (see `hook_waker`).
            let hook = unsafe { &*p.cast::<Hook>() };
            (hook.on_clone)();
            hook_raw(hook.on_clone.clone(), hook.inner.clone())
        },
        |p| {
            // SAFETY: as above; waking by value consumes the waker.
            let hook = unsafe { Box::from_raw(p.cast_mut().cast::<Hook>()) };
            hook.inner.wake_by_ref();
        },
        |p| {
            // SAFETY: as above.
            unsafe { &*p.cast::<Hook>() }.inner.wake_by_ref();
        },
        |p| {
            // SAFETY: as above; dropping consumes the waker.
            drop(unsafe { Box::from_raw(p.cast_mut().cast::<Hook>()) });
        },
    );

    fn hook_raw(on_clone: Arc<dyn Fn() + Send + Sync>, inner: Waker) -> RawWaker {
        let hook = Box::into_raw(Box::new(Hook { on_clone, inner }));
        RawWaker::new(hook.cast_const().cast(), &HOOK)
    }

    /// A waker counted by `counts` (each of its clones too) whose `clone` runs `on_clone`
    /// first.
    fn hook_waker(counts: &CountingWaker, on_clone: impl Fn() + Send + Sync + 'static) -> Waker {
        // SAFETY: the vtable keeps the `RawWaker` contract: each waker owns its `Box<Hook>`
        // (a clone makes a new one), freed when the waker is woken by value or dropped; `Hook`
        // is `Send + Sync`.
        unsafe { Waker::from_raw(hook_raw(Arc::new(on_clone), counts.waker())) }
    }

    /// A `Notified` whose first poll's waker broadcasts from its `clone` (which pitlane makes
    /// while deciding, tokio before it locks): the broadcast comes after the future was
    /// created, so the future completes at that poll. Returns whether it did and how many
    /// wakers are alive after (the counter's own, plus any the completed future kept).
    macro_rules! completes_on_a_broadcast_from_its_clone {
        ($notify:expr) => {{
            let notify = Arc::new($notify);
            let counts = CountingWaker::new();
            let fired = AtomicBool::new(false);
            let waker = {
                let notify = notify.clone();
                hook_waker(&counts, move || {
                    if !fired.swap(true, Ordering::SeqCst) {
                        notify.notify_waiters();
                    }
                })
            };
            let mut notified = Box::pin(notify.clone().notified_owned());
            let ready = notified
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready();
            drop(waker);
            let live = counts.live();
            drop(notified);
            (ready, live, counts.live())
        }};
    }

    /// Regression: a `Notified` that enqueued and then saw a broadcast made since its first
    /// read of the counter leaves the queue and completes; it kept the waker clone it had
    /// registered until it was dropped (`left: (true, 2, 1)`), where tokio's completed future
    /// holds no waker (its waiter checks the counter under its lock before it registers, and
    /// drops its clone). Now a `Notified` drops its registered waker when it completes.
    #[test]
    fn a_notified_completed_by_a_broadcast_during_its_first_poll_keeps_no_waker_like_tokio() {
        let tokio = completes_on_a_broadcast_from_its_clone!(tokio::sync::Notify::new());
        assert_eq!(
            tokio,
            (true, 1, 1),
            "tokio: (ready, live after, live once dropped)"
        );
        let pitlane = completes_on_a_broadcast_from_its_clone!(Notify::new());
        assert_eq!(pitlane, tokio);
    }

    /// `WAKE_BATCH + 2` waiters; a broadcast drains them, waking the first batch with the lock
    /// released. The first waiter's waker polls the last waiter (not reached by the drain yet)
    /// with the waker it registered: it completes (the broadcast covers it) and leaves the
    /// drain list. Returns whether it completed then and how many of its wakers are alive
    /// after the broadcast (the counter's own, plus any the completed future kept).
    macro_rules! completes_in_a_later_batch {
        ($notify:expr, $owned:ty) => {{
            let notify = Arc::new($notify);
            let last_counts = CountingWaker::new();
            let last: Arc<Mutex<Option<Pin<Box<$owned>>>>> = Arc::default();
            let seen = Arc::new(AtomicBool::new(false));
            let probe = {
                let (last, seen, last_counts) = (last.clone(), seen.clone(), last_counts.clone());
                on_wake(move || {
                    if let Some(f) = last.lock().unwrap().as_mut() {
                        let ready = last_counts
                            .with_context(|cx| f.as_mut().poll(cx))
                            .is_ready();
                        seen.store(ready, Ordering::SeqCst);
                    }
                })
            };
            let w = CountingWaker::new();
            let mut fs: Vec<Pin<Box<$owned>>> = (0..WAKE_BATCH + 1)
                .map(|_| Box::pin(notify.clone().notified_owned()))
                .collect();
            assert!(
                fs[0]
                    .as_mut()
                    .poll(&mut Context::from_waker(&probe))
                    .is_pending()
            );
            for f in &mut fs[1..] {
                assert!(w.with_context(|cx| f.as_mut().poll(cx)).is_pending());
            }
            let mut l = Box::pin(notify.clone().notified_owned());
            assert!(
                last_counts
                    .with_context(|cx| l.as_mut().poll(cx))
                    .is_pending()
            );
            *last.lock().unwrap() = Some(l);
            notify.notify_waiters();
            drop(probe); // holds a clone of `last_counts`
            let live = last_counts.live();
            (seen.load(Ordering::SeqCst), live)
        }};
    }

    /// Regression: a queued `Notified` polled while a broadcast that covers it has not drained
    /// it yet (its drain wakes a batch ahead with the lock released) leaves the drain list and
    /// completes; it kept its registered waker until dropped (`left: (true, 2)`), where
    /// tokio's, completing on the same path, takes its waker out and drops it.
    #[test]
    fn a_notified_completed_ahead_of_its_drain_keeps_no_waker_like_tokio() {
        let tokio = completes_in_a_later_batch!(
            tokio::sync::Notify::new(),
            tokio::sync::futures::OwnedNotified
        );
        assert_eq!(tokio, (true, 1), "tokio: (ready in the batch, live after)");
        let pitlane = completes_in_a_later_batch!(Notify::new(), OwnedNotified);
        assert_eq!(pitlane, tokio);
    }

    /// More than a batch of waiters, the first with a waker that panics: the waiters after the
    /// first batch are marked notified with their wakers left in them. Each completes when
    /// polled, and then holds its waker no more, as tokio's (which takes the waker of a
    /// notified waiter out at that poll). Returns the wakers alive after the broadcast and
    /// after every waiter was polled to completion (the counter's own, plus those kept).
    macro_rules! wakers_after_a_panicked_broadcast {
        ($notify:expr) => {{
            let notify = Arc::new($notify);
            let n = WAKE_BATCH + 4;
            let w = CountingWaker::new();
            let mut fs: Vec<_> = (0..n)
                .map(|_| Box::pin(notify.clone().notified_owned()))
                .collect();
            let panicking = on_wake(|| panic!("a waker panics"));
            assert!(
                fs[0]
                    .as_mut()
                    .poll(&mut Context::from_waker(&panicking))
                    .is_pending()
            );
            drop(panicking);
            for f in &mut fs[1..] {
                assert!(w.with_context(|cx| f.as_mut().poll(cx)).is_pending());
            }
            let panicked =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify.notify_waiters()));
            assert!(panicked.is_err());
            let after_broadcast = w.live();
            for f in &mut fs {
                assert!(w.with_context(|cx| f.as_mut().poll(cx)).is_ready());
            }
            (after_broadcast, w.live())
        }};
    }

    /// Pins (with the fix of the two tests above): the waiters a panicked broadcast left
    /// marked keep their wakers until they complete, then drop them, as tokio's.
    #[test]
    fn waiters_left_by_a_panicked_broadcast_drop_their_wakers_when_they_complete_like_tokio() {
        let tokio = wakers_after_a_panicked_broadcast!(tokio::sync::Notify::new());
        assert_eq!(
            tokio,
            (1 + 4, 1),
            "tokio: (after the broadcast, after completing)"
        );
        let pitlane = wakers_after_a_panicked_broadcast!(Notify::new());
        assert_eq!(pitlane, tokio);
    }

    /// Holds up the clone of its waker: a queued `Notified` polled with it (a new waker)
    /// clones it under the notify's lock, so the lock stays held until the gate opens.
    static GATE: CloneGate = CloneGate::new();

    /// A `Notified` polled with a waker, later only `enable`d, keeps that waker registered:
    /// tokio's `enable` on a waiting `Notified` leaves its waker as it is, so the next
    /// `notify_one` wakes the task that polled it. Here the same holds even when a broadcast
    /// that began before the `Notified` was created drained it (its drain wakes the waiter,
    /// which registers again when next polled or enabled): returns whether the `notify_one`
    /// after the `enable` woke the waker, and whether the future is then ready.
    ///
    /// On tokio the broadcast cannot be caught between its increment and its drain (both
    /// happen under one hold of its lock): its run is the linearized one, the broadcast
    /// before the `Notified` is created.
    fn tokio_enable_after_a_broadcast() -> (bool, bool) {
        let notify = Arc::new(tokio::sync::Notify::new());
        let w = CountingWaker::new();
        notify.notify_waiters();
        let mut later = Box::pin(notify.clone().notified_owned());
        assert!(w.with_context(|cx| later.as_mut().poll(cx)).is_pending());
        assert!(!later.as_mut().enable());
        let before = w.wakes();
        notify.notify_one();
        let woken = w.wakes() > before;
        (
            woken,
            w.with_context(|cx| later.as_mut().poll(cx)).is_ready(),
        )
    }

    /// Serializes the tests that use `GATE`.
    static HOLDING: Mutex<()> = Mutex::new(());

    /// Makes the race of `hostile_wait_3.rs`: a `notify_waiters` increments its counter and
    /// then waits for the lock (held by a queued `Notified` polled with a new waker whose
    /// `clone`, made under the lock, waits); a sleep lets the broadcast reach its increment
    /// (checked: a `Notified` created before it is then complete). Meanwhile a `Notified` is
    /// created and polled with `waker`; the drain then takes it without covering it. Returns
    /// it, drained.
    fn drained_without_being_covered(
        notify: &Arc<Notify>,
        waker: &CountingWaker,
    ) -> Pin<Box<OwnedNotified>> {
        let (later, broadcast) = drained_without_being_covered_by(notify, &waker.waker());
        broadcast.unwrap();
        // The drain took `later` (queued when it swapped the queue out) and woke it.
        assert_eq!(waker.wakes(), 1, "the drain woke the uncovered waiter");
        later
    }

    /// `drained_without_being_covered` with the later `Notified` polled with `waker`; returns
    /// it and how the broadcast's call ended.
    fn drained_without_being_covered_by(
        notify: &Arc<Notify>,
        waker: &Waker,
    ) -> (Pin<Box<OwnedNotified>>, std::thread::Result<()>) {
        GATE.reset();
        let w = CountingWaker::new();
        let mut first = Box::pin(notify.clone().notified_owned());
        assert!(w.with_context(|cx| first.as_mut().poll(cx)).is_pending());
        let mut before = Box::pin(notify.clone().notified_owned());
        std::thread::scope(|s| {
            let holder = s.spawn(move || {
                let waker = GATE.waker();
                let _ = first.as_mut().poll(&mut Context::from_waker(&waker));
                first
            });
            GATE.wait_until_cloning();
            let broadcaster = s.spawn(|| notify.notify_waiters());
            std::thread::sleep(Duration::from_millis(200));
            assert!(
                before.as_mut().enable(),
                "the broadcast has incremented its counter"
            );
            let mut later = Box::pin(notify.clone().notified_owned());
            assert!(
                later
                    .as_mut()
                    .poll(&mut Context::from_waker(waker))
                    .is_pending()
            );
            GATE.open();
            let mut first = holder.join().unwrap();
            let broadcast = broadcaster.join();
            assert!(w.with_context(|cx| first.as_mut().poll(cx)).is_ready());
            (later, broadcast)
        })
    }

    /// Regression: a `Notified` created after a `notify_waiters` incremented its counter but
    /// before that broadcast's drain took the lock, and polled (queued) meanwhile, is drained
    /// without being covered; when next polled it registers again. When it was next only
    /// `enable`d, it registered again with no waker (the drain had taken the one its poll
    /// registered, to wake it), so the `notify_one` that then chose it woke nobody: a task
    /// that polls once and then checks with `enable` (correct on tokio, whose `enable` keeps
    /// the registered waker) slept for ever. Now the drain wakes such a waiter through a clone
    /// and leaves it its waker, which an `enable` keeps.
    #[test]
    fn enable_after_a_drain_that_did_not_cover_the_waiter_keeps_its_waker_like_tokio() {
        let _serial = HOLDING.lock().unwrap_or_else(|e| e.into_inner());
        let tokio = tokio_enable_after_a_broadcast();
        assert_eq!(tokio, (true, true), "tokio");

        let notify = Arc::new(Notify::new());
        let later_waker = CountingWaker::new();
        let mut later = drained_without_being_covered(&notify, &later_waker);
        assert!(!later.as_mut().enable(), "not covered by that broadcast");
        let before = later_waker.wakes();
        notify.notify_one();
        let woken = later_waker.wakes() > before;
        let ready = later_waker
            .with_context(|cx| later.as_mut().poll(cx))
            .is_ready();
        assert_eq!(
            (woken, ready),
            tokio,
            "(woken by the notify_one, ready after it)"
        );
    }

    /// A waiter drained without being covered and then covered by a later broadcast completes
    /// when enabled, and keeps no clone of its waker once complete (tokio's completed
    /// `Notified` holds none): the clone the drain left it goes when it completes.
    #[test]
    fn a_drained_uncovered_waiter_covered_later_keeps_no_waker_once_complete() {
        let _serial = HOLDING.lock().unwrap_or_else(|e| e.into_inner());
        let notify = Arc::new(Notify::new());
        let later_waker = CountingWaker::new();
        let mut later = drained_without_being_covered(&notify, &later_waker);
        notify.notify_waiters();
        assert!(later.as_mut().enable(), "covered by the second broadcast");
        assert_eq!(later_waker.live(), 1, "wakers kept by the complete future");
        assert!(
            later_waker
                .with_context(|cx| later.as_mut().poll(cx))
                .is_ready()
        );
        // The same on tokio: registered, then completed by a broadcast.
        let tokio_notify = Arc::new(tokio::sync::Notify::new());
        let tokio_waker = CountingWaker::new();
        let mut tokio_later = Box::pin(tokio_notify.clone().notified_owned());
        assert!(
            tokio_waker
                .with_context(|cx| tokio_later.as_mut().poll(cx))
                .is_pending()
        );
        tokio_notify.notify_waiters();
        assert!(tokio_later.as_mut().enable());
        assert_eq!(tokio_waker.live(), 1, "tokio");
    }

    /// Polled again with a new waker after the uncovered drain, the waiter registers that
    /// waker and drops the one the drain left it: the next `notify_one` wakes the new one only.
    #[test]
    fn a_drained_uncovered_waiter_polled_with_a_new_waker_registers_that_one() {
        let _serial = HOLDING.lock().unwrap_or_else(|e| e.into_inner());
        let notify = Arc::new(Notify::new());
        let old = CountingWaker::new();
        let mut later = drained_without_being_covered(&notify, &old);
        let new = CountingWaker::new();
        assert!(new.with_context(|cx| later.as_mut().poll(cx)).is_pending());
        assert_eq!(old.live(), 1, "the old waker is dropped");
        notify.notify_one();
        assert_eq!((old.wakes(), new.wakes()), (1, 1));
        assert!(new.with_context(|cx| later.as_mut().poll(cx)).is_ready());
    }

    /// Regression: `Locked::remove` documents "Returns whether it was queued; it is
    /// `Unqueued` after", but a node that a remover had taken out (`Dequeued`) stayed
    /// `Dequeued` after it (`left: Dequeued`): an owner following the doc, which enqueues the
    /// node again after `remove` (as `enqueue_or_update` asks of an `Unqueued` node), broke
    /// that call's precondition (a debug build asserts it). Now `remove` leaves a dequeued
    /// node `Unqueued`, as it says.
    #[test]
    fn remove_leaves_a_dequeued_node_unqueued_as_documented() {
        let queue: WaitQueue<u8> = WaitQueue::new(0);
        let node = pin!(Node::new(1));
        // SAFETY: the node leaves the queue (dequeued below, then removed) before it is
        // dropped, and is enqueued on this queue only.
        unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
        assert_eq!(queue.lock().dequeue(0, |_| None), Some(true));
        assert_eq!(node.status(), NodeStatus::Dequeued);
        // SAFETY: enqueued on this queue only, by a call that returned.
        assert!(!unsafe { queue.lock().remove(node.as_ref()) });
        assert_eq!(node.status(), NodeStatus::Unqueued, "after `remove`");
        // So it may be enqueued again, as the doc has it.
        // SAFETY: as above.
        let again = unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
        assert_eq!(again, Outcome::Enqueued(Some(0)));
        // SAFETY: as above.
        assert!(unsafe { queue.lock().remove(node.as_ref()) });
        assert_eq!(node.status(), NodeStatus::Unqueued);
        // A node never enqueued stays `Unqueued` too.
        let fresh = pin!(Node::new(2));
        // SAFETY: never enqueued anywhere.
        assert!(!unsafe { queue.lock().remove(fresh.as_ref()) });
        assert_eq!(fresh.status(), NodeStatus::Unqueued);
        assert_eq!(queue.state(), Some(0));
    }

    /// Pin: a drain's `take` that changes the emptied queue's state (the drain swapped the
    /// chain out for `new_state` first, so the queue is empty and open to state updates while
    /// the drain finishes its nodes): the drain leaves that state alone, and returns `true`.
    #[test]
    fn a_drains_take_that_updates_the_new_state_keeps_its_update() {
        let queue: WaitQueue<u8> = WaitQueue::new(0);
        let nodes = [pin!(Node::new(1)), pin!(Node::new(2)), pin!(Node::new(3))];
        for node in &nodes {
            // SAFETY: drained below, before the nodes are dropped; this queue only.
            unsafe { queue.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
        }
        let mut seen = Vec::new();
        let drained = queue.lock().drain(
            5,
            |n| {
                seen.push((*n, queue.state()));
                assert!(queue.fetch_update_state(|s| Some(s + 10)).is_ok());
                None
            },
            |_| {},
        );
        assert!(drained);
        assert_eq!(seen, [(1, Some(5)), (2, Some(15)), (3, Some(25))]);
        assert_eq!(queue.state(), Some(35));
        assert!(nodes.iter().all(|n| n.status() == NodeStatus::Dequeued));
    }

    /// Pin: a guard's batch of wakers is woken with the lock released, so a waker that takes
    /// the same queue's lock from its `wake` (on this thread, or on another that it waits
    /// for) does not deadlock, in the flush of a full batch and in the guard's drop.
    #[test]
    fn a_waker_that_locks_the_same_queue_from_its_wake_does_not_deadlock() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let queue: Arc<WaitQueue<()>> = Arc::new(WaitQueue::new(0));
            let relocks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let waker = {
                let (queue, relocks) = (queue.clone(), relocks.clone());
                on_wake(move || {
                    // Another thread takes the lock too, and this waker waits for it.
                    let q = queue.clone();
                    std::thread::spawn(move || drop(q.lock())).join().unwrap();
                    let mut locked = queue.lock();
                    assert_eq!(locked.dequeue(0, |_| None), None);
                    relocks.fetch_add(1, Ordering::SeqCst);
                })
            };
            let mut locked = queue.lock();
            for _ in 0..WAKE_BATCH + 1 {
                locked.wake_later(waker.clone());
            }
            let during = relocks.load(Ordering::SeqCst);
            drop(locked);
            let _ = done.send((during, relocks.load(Ordering::SeqCst)));
        });
        let counts = finished
            .recv_timeout(Duration::from_secs(20))
            .expect("a waker that locked the queue deadlocked");
        assert_eq!(
            counts,
            (WAKE_BATCH, WAKE_BATCH + 1),
            "(after the flush, after the drop)"
        );
    }

    /// Pin: `Park` maps keys to 64 parking addresses, so of 65 keys at least two share one;
    /// an `unpark` wakes every thread parked on its key's address (a thread woken for another
    /// key checks its own condition and parks again). Each of 65 threads parked on its own
    /// key returns after its own unpark, one after the other: an unpark that woke only one
    /// thread of an address could wake the wrong one and leave the right one parked.
    #[test]
    fn park_unparks_every_thread_of_keys_sharing_a_parking_address() {
        use pitlane_wait::lock::{Park, Parker};
        const THREADS: usize = 65;
        let flags: Arc<Vec<AtomicBool>> =
            Arc::new((0..THREADS).map(|_| AtomicBool::new(true)).collect());
        let (done, finished) = std::sync::mpsc::channel();
        for i in 0..THREADS {
            let (flags, done) = (flags.clone(), done.clone());
            std::thread::spawn(move || {
                let flag = &flags[i];
                let key = std::ptr::from_ref(flag).addr();
                while flag.load(Ordering::Acquire) {
                    Park::park(key, || flag.load(Ordering::Acquire));
                }
                let _ = done.send(i);
            });
        }
        std::thread::sleep(Duration::from_millis(200)); // let them park
        for i in (0..THREADS).rev() {
            let flag = &flags[i];
            flag.store(false, Ordering::Release);
            Park::unpark(std::ptr::from_ref(flag).addr());
            let returned = finished
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("thread {i} stayed parked after its unpark"));
            assert_eq!(returned, i);
        }
    }

    /// An `OwnedSemaphorePermit` dropped from the waker of a waiter that a release just
    /// served (woken with the lock released): its permits go to the next waiter, as on tokio.
    /// Returns `(first ready, second ready, second woken, free permits)`.
    macro_rules! permit_dropped_from_a_served_waiters_wake {
        ($sem:ty) => {{
            let sem = Arc::new(<$sem>::new(1));
            let extra = Arc::new(Mutex::new(Some(sem.clone().try_acquire_owned().unwrap())));
            let dropper = {
                let extra = extra.clone();
                on_wake(move || drop(extra.lock().unwrap().take()))
            };
            let w = CountingWaker::new();
            let mut first = Box::pin(sem.clone().acquire_owned());
            let mut second = Box::pin(sem.clone().acquire_owned());
            assert!(
                first
                    .as_mut()
                    .poll(&mut Context::from_waker(&dropper))
                    .is_pending()
            );
            assert!(w.with_context(|cx| second.as_mut().poll(cx)).is_pending());
            sem.add_permits(1);
            let first_ready = match w.with_context(|cx| first.as_mut().poll(cx)) {
                std::task::Poll::Ready(Ok(p)) => {
                    p.forget();
                    true
                }
                _ => false,
            };
            let second_woken = w.wakes();
            let second_ready = match w.with_context(|cx| second.as_mut().poll(cx)) {
                std::task::Poll::Ready(Ok(p)) => {
                    p.forget();
                    true
                }
                _ => false,
            };
            (
                first_ready,
                second_ready,
                second_woken,
                sem.available_permits(),
            )
        }};
    }

    #[test]
    fn a_permit_dropped_from_a_served_waiters_wake_serves_the_next_like_tokio() {
        let tokio = permit_dropped_from_a_served_waiters_wake!(tokio::sync::Semaphore);
        assert_eq!(tokio, (true, true, 1, 0), "tokio");
        let pitlane = permit_dropped_from_a_served_waiters_wake!(pitlane_wait::Semaphore);
        assert_eq!(pitlane, tokio);
    }

    /// Pin of the drain's clone (made under the lock) of an uncovered waiter's waker: one whose
    /// `clone` panics there makes `notify_waiters` panic (as a `take` that panics in a drain
    /// does), and leaves the waiter its waker and the queue whole: the waiter registers again
    /// at its `enable`, the next `notify_one` wakes it, and nothing else is lost.
    #[test]
    fn an_uncovered_waiters_waker_whose_clone_panics_in_the_drain_leaves_it_its_waker() {
        let _serial = HOLDING.lock().unwrap_or_else(|e| e.into_inner());
        let notify = Arc::new(Notify::new());
        let counts = CountingWaker::new();
        let clones = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let waker = {
            let clones = clones.clone();
            // The first clone is the poll's registration; the second, the drain's.
            hook_waker(&counts, move || {
                if clones.fetch_add(1, Ordering::SeqCst) == 1 {
                    panic!("a waker's clone panics");
                }
            })
        };
        let (mut later, broadcast) = drained_without_being_covered_by(&notify, &waker);
        assert!(
            broadcast.is_err(),
            "the clone's panic came out of notify_waiters"
        );
        assert_eq!(clones.load(Ordering::SeqCst), 2);
        assert_eq!(counts.wakes(), 0);
        assert!(!later.as_mut().enable(), "not covered by that broadcast");
        notify.notify_one();
        assert_eq!(
            counts.wakes(),
            1,
            "the notify_one woke the registered waker"
        );
        assert!(later.as_mut().enable());
        drop(waker);
        assert_eq!(counts.live(), 1, "no waker left in the completed future");
        // The queue works on.
        let mut next = Box::pin(notify.clone().notified_owned());
        assert!(!next.as_mut().enable());
        notify.notify_waiters();
        assert!(next.as_mut().enable());
    }
}
