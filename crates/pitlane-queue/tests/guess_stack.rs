//! The stack's owner's guess of its top (module doc of `stack`, "The owner's guess"), made
//! stale in every way a user can: another handle, a plain call of another thread, a handle
//! dropped and a new one made, a seat handed from an exited thread to a new one, a moved or
//! swapped stack, and a plain call made from inside a pop (a revoked item's `Drop`).
//!
//! Without a concurrent operation, a stale guess must never surface as a lost race
//! ([`PopError::Transient`] or [`PushError::Transient`]), and every value comes back once, in
//! LIFO order. With concurrent operations, seats changing hands while other threads push and
//! pop must lose and duplicate nothing.
#![cfg(not(pitlane_loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::Stack;
use pitlane_queue::{PopError, PushError};

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

/// A push that must not fail: no other operation runs beside it.
fn push_alone<T: std::fmt::Debug>(push: impl FnOnce(T) -> Result<(), PushError<T>>, item: T) {
    if let Err(error) = push(item) {
        panic!("a push with nothing beside it failed: {error:?}");
    }
}

#[test]
fn stale_guesses_never_report_a_lost_race_without_a_concurrent_operation() {
    let stack = Stack::new();
    // The seat of this thread guesses from its last exchange.
    push_alone(|x| stack.try_push(x), 1);
    // Another handle moves the top: the seat's guess is stale.
    {
        let handle = stack.handle();
        push_alone(|x| handle.try_push(x), 2);
        assert_eq!(handle.try_pop(), Ok(2));
        push_alone(|x| handle.try_push(x), 3);
    }
    assert_eq!(stack.try_pop(), Ok(3));
    // A plain call of another thread (another seat) moves the top.
    std::thread::scope(|s| {
        s.spawn(|| push_alone(|x| stack.try_push(x), 4));
    });
    assert_eq!(stack.try_pop(), Ok(4));
    push_alone(|x| stack.try_push(x), 5);
    // A handle dropped and a new one made on the same thread: the new one has no guess, and
    // the old one's node stash went back to the shared list.
    let first = stack.handle();
    push_alone(|x| first.try_push(x), 6);
    drop(first);
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(stack.try_pop(), Ok(6));
            push_alone(|x| stack.try_push(x), 7);
        });
    });
    let second = stack.handle();
    assert_eq!(second.try_pop(), Ok(7));
    push_alone(|x| second.try_push(x), 8);
    // Threads started one after another take the seats of exited ones, with the guesses their
    // last exchanges left, while this thread and `second` move the top in between.
    for round in 0..40 {
        std::thread::scope(|s| {
            s.spawn(|| {
                push_alone(|x| stack.try_push(x), 100 + round);
                assert_eq!(stack.try_pop(), Ok(100 + round));
                push_alone(|x| stack.try_push(x), 200 + round);
            });
        });
        assert_eq!(second.try_pop(), Ok(200 + round));
        push_alone(|x| stack.try_push(x), 300 + round);
        assert_eq!(stack.try_pop(), Ok(300 + round));
    }
    drop(second);
    // Moved: the seats' stashes and guesses move with the stack.
    let boxed = Box::new(stack);
    push_alone(|x| boxed.try_push(x), 9);
    let mut other = Stack::new();
    push_alone(|x| other.try_push(x), 50);
    let mut moved = *boxed;
    // Swapped: each stack keeps its own stashes, and the guesses come along.
    std::mem::swap(&mut moved, &mut other);
    assert_eq!(moved.try_pop(), Ok(50));
    assert_eq!(moved.try_pop(), Err(PopError::Empty));
    let drained: Vec<u32> = std::iter::from_fn(|| other.try_pop().ok()).collect();
    assert_eq!(drained, [9, 8, 5, 1]);
    assert_eq!(other.try_pop(), Err(PopError::Empty));
    assert_eq!((other.len(), moved.len()), (0, 0));
}

#[test]
fn seats_changing_hands_while_other_threads_push_and_pop_lose_and_duplicate_nothing() {
    const STEADY: usize = 2;
    /// The most values a steady thread pushes; it stops early once the short-lived threads
    /// are done, so that it overlaps all of them.
    const EACH: usize = 1_000_000;
    const SHORT_LIVED: usize = 60;
    const SHORT_EACH: usize = 200;
    let stack = Stack::new();
    let seen: Vec<AtomicUsize> = (0..STEADY * EACH + SHORT_LIVED * SHORT_EACH)
        .map(|_| AtomicUsize::new(0))
        .collect();
    let done = AtomicBool::new(false);
    let pushed: Vec<AtomicUsize> = (0..STEADY).map(|_| AtomicUsize::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..STEADY {
            let (stack, seen, done, pushed) = (&stack, &seen, &done, &pushed);
            s.spawn(move || {
                for i in 0..EACH {
                    if done.load(Ordering::Relaxed) {
                        break;
                    }
                    pushed[t].store(i + 1, Ordering::Relaxed);
                    stack.push(t * EACH + i);
                    if i % 2 == 0 {
                        if let Some(v) = stack.pop() {
                            seen[v].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        let (stack, seen, done) = (&stack, &seen, &done);
        s.spawn(move || {
            // Threads one after another: each takes a seat an exited thread held, with that
            // thread's stash and a guess the steady threads have made stale.
            for k in 0..SHORT_LIVED {
                std::thread::scope(|inner| {
                    inner.spawn(|| {
                        let base = STEADY * EACH + k * SHORT_EACH;
                        for i in 0..SHORT_EACH {
                            stack.push(base + i);
                            if i % 3 != 0 {
                                if let Some(v) = stack.pop() {
                                    seen[v].fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                    });
                });
            }
            done.store(true, Ordering::Release);
        });
    });
    assert!(done.load(Ordering::Acquire));
    let left = stack.len();
    let mut drained = 0;
    while let Some(v) = stack.pop() {
        seen[v].fetch_add(1, Ordering::Relaxed);
        drained += 1;
    }
    assert_eq!(drained, left, "len before the drain");
    for (value, count) in seen.iter().enumerate() {
        let was_pushed =
            value >= STEADY * EACH || value % EACH < pushed[value / EACH].load(Ordering::Relaxed);
        let expected = usize::from(was_pushed);
        assert_eq!(count.load(Ordering::Relaxed), expected, "value {value}");
    }
}

/// A revocable item whose copy in the stack, when dropped, pushes a plain value onto the same
/// stack from inside the pop that drops it.
struct Item {
    shared: Arc<RevokeHandle>,
    value: u32,
    push_on_drop: Option<&'static Stack<Item>>,
}

// SAFETY: every copy of an item reaches the same handle through the `Arc`, which lives as long
// as any copy.
unsafe impl Revocable for Item {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.shared
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        if let Some(stack) = self.push_on_drop.take() {
            // A plain call from inside the stack's own pop, on the same thread and seat.
            stack.push(Item {
                shared: Arc::new(RevokeHandle::new()),
                value: self.value + 1000,
                push_on_drop: None,
            });
        }
    }
}

#[test]
fn a_plain_push_from_inside_a_pop_that_drops_a_revoked_item_is_popped_next() {
    static STACK: Stack<Item> = Stack::new();
    let plain = |value| Item {
        shared: Arc::new(RevokeHandle::new()),
        value,
        push_on_drop: None,
    };
    STACK.push(plain(1));
    let handle = Arc::new(RevokeHandle::new());
    STACK.push_revocable(Item {
        shared: handle.clone(),
        value: 2,
        push_on_drop: Some(&STACK),
    });
    let mine = Item {
        shared: handle,
        value: 2,
        push_on_drop: None,
    };
    // SAFETY: the item was pushed into `STACK`, a static.
    assert!(unsafe { Stack::revoke(&mine) });
    // The pop passes over the revoked node and drops the stack's copy, whose `Drop` pushes
    // 1002 with this thread's seat stash; the same pop then goes on from the new top.
    assert_eq!(STACK.pop().map(|item| item.value), Some(1002));
    assert_eq!(STACK.len(), 1);
    STACK.push(plain(3));
    let rest: Vec<u32> = std::iter::from_fn(|| STACK.pop().map(|item| item.value)).collect();
    assert_eq!(rest, [3, 1]);
    assert_eq!(STACK.try_pop().map(|item| item.value), Err(PopError::Empty));
}
