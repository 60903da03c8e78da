//! Revoking through a bag type other than the one the item sits in. The `Revocable` contract
//! lets two item types reach the same handle (a `&Page` and a wrapper of it, say), and
//! `RevocableBag::revoke` asks only that the bag the item was last pushed into is alive; it
//! does not name that bag. So `Stack::<B>::revoke(&b)` may find a slot of a `Queue<A>`: the
//! revoke must touch that slot's state word alone, wherever `A` puts it, and keep the queue's
//! segment alive as the queue's own revoke does.
#![cfg(not(pitlane_loom))]

use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::Stack;

/// A page whose handle is its first field, so that a `&Page` points at the handle.
#[repr(C)]
struct Page {
    handle: RevokeHandle,
    number: usize,
}

/// A reference to a page, over-aligned, with two words of its own in front: a slot of it
/// keeps its value before its state word.
#[repr(C, align(4096))]
struct Big {
    words: [usize; 2],
    page: &'static Page,
}

// SAFETY: the handle lives in the page, outside the value's bytes, the same for every copy.
unsafe impl Revocable for Big {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.page.handle
    }
}

/// A plain reference to the same page: a second item type with the same handle.
#[derive(Clone, Copy)]
struct Small(&'static Page);

// SAFETY: as for `Big`.
unsafe impl Revocable for Small {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.0.handle
    }
}

fn page(number: usize) -> &'static Page {
    Box::leak(Box::new(Page {
        handle: RevokeHandle::new(),
        number,
    }))
}

/// What a slot's state holds for the first tracked push of an item whose handle is at
/// `handle`: its address with stamp 1 above bit 48 (see the `slot` module).
#[cfg(target_pointer_width = "64")]
fn first_tracked_state(handle: &RevokeHandle) -> usize {
    std::ptr::from_ref(handle).addr() | 1 << 48
}

/// On a 32-bit target there are no stamp bits: every tracked push writes the address with
/// bit 0 set (an *unstamped* word, see the `slot` module).
#[cfg(not(target_pointer_width = "64"))]
fn first_tracked_state(handle: &RevokeHandle) -> usize {
    std::ptr::from_ref(handle).addr() | 1
}

#[test]
fn a_revoke_through_another_item_type_marks_the_state_and_never_the_value() {
    for through_stack in [false, true] {
        let page = page(7);
        let queue: Queue<Big, 4> = Queue::with_segment_size();
        // The value's first words hold exactly what the slot's state will hold: a revoke
        // that read a word inside the value would mistake it for the state.
        let state = first_tracked_state(&page.handle);
        queue.push_revocable(Big {
            words: [state, state],
            page,
        });
        assert!(page.handle.is_in_bag());
        let small = Small(page);
        // SAFETY: the queue the item was pushed into is alive.
        let revoked = unsafe {
            if through_stack {
                <Stack<Small> as RevocableBag>::revoke(&small)
            } else {
                <Queue<Small> as RevocableBag>::revoke(&small)
            }
        };
        // Of a revoke and a pop, exactly one gets the item, and the value is whole.
        match queue.pop() {
            Some(big) => {
                assert!(
                    !revoked,
                    "revoked and popped too (through a stack: {through_stack})"
                );
                assert_eq!(
                    big.words,
                    [state, state],
                    "the value was written by the revoke"
                );
                assert_eq!(big.page.number, 7);
            }
            None => assert!(revoked, "neither revoked nor popped"),
        }
        assert!(!page.handle.is_in_bag());
    }
}

#[test]
fn a_revoke_through_another_item_type_takes_the_item_out() {
    let page = page(1);
    let stack: Stack<Big> = Stack::new();
    stack.push_revocable(Big {
        words: [0, 0],
        page,
    });
    // SAFETY: the stack the item was pushed into is alive.
    assert!(unsafe { <Queue<Small> as RevocableBag>::revoke(&Small(page)) });
    assert!(stack.pop().is_none(), "a revoked item was popped");
    assert!(!page.handle.is_in_bag());
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
