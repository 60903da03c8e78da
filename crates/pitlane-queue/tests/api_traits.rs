//! The standard traits a user of crossbeam-queue's `SegQueue` or of rtrb expects of each public
//! type of the crate, checked in one place: thread-safety bounds as crossbeam's (a bag of `T`
//! is `Send` and `Sync` when `T` is `Send`, even if `T` is not `Sync`), `UnwindSafe` and
//! `RefUnwindSafe` as crossbeam's queues, `Default` and `Debug` on every structure, owned
//! iterators, and error types that can travel as `Box<dyn Error + Send + Sync>`.
//!
//! Most of it is checked by the compiler (a missing impl fails to build); the runtime parts
//! check what `Default` makes and what `Debug` prints.
#![cfg(not(pitlane_loom))]

use std::cell::Cell;
use std::error::Error;
use std::fmt::Debug;
use std::hash::Hash;
use std::panic::{RefUnwindSafe, UnwindSafe};

use pitlane_queue::bagpipe::{self, Bagpipe, BagpipeError};
use pitlane_queue::mpmc::{self, Queue};
use pitlane_queue::revoke::RevokeHandle;
use pitlane_queue::spsc::{self, ChannelError, ChunkError, Consumer, Producer};
use pitlane_queue::stack::{self, Stack};
use pitlane_queue::{PopError, PushError};

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}
fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}
fn default_debug<T: Default + Debug>() {}
fn debug<T: Debug>() {}
fn error<E: Error + Send + Sync + Copy + Eq + Hash + 'static>() {}
fn owned_iter<C: IntoIterator<Item = T>, T>() {}

/// A value that may move between threads but not be shared by them.
type SendOnly = Cell<u8>;

#[test]
fn bags_are_send_and_sync_for_send_values_as_segqueue_is() {
    send_sync::<Queue<SendOnly>>();
    send_sync::<Queue<SendOnly, 4>>();
    send_sync::<Stack<SendOnly>>();
    send_sync::<Bagpipe<Queue<SendOnly>>>();
    send_sync::<Bagpipe<Stack<SendOnly>>>();
    send_sync::<RevokeHandle>();
}

#[test]
fn spsc_ends_move_to_their_threads_as_rtrb_ends_do() {
    send::<Producer<SendOnly>>();
    send::<Consumer<SendOnly>>();
    send::<spsc::IntoIter<SendOnly>>();
}

#[test]
fn structures_and_ends_are_unwind_safe_as_crossbeams_queues_are() {
    unwind_safe::<Queue<SendOnly>>();
    unwind_safe::<Stack<SendOnly>>();
    unwind_safe::<Bagpipe<Queue<SendOnly>>>();
    unwind_safe::<Bagpipe<Stack<SendOnly>>>();
    unwind_safe::<Producer<SendOnly>>();
    unwind_safe::<Consumer<SendOnly>>();
}

#[test]
fn structures_have_default_and_debug() {
    default_debug::<Queue<u8>>();
    default_debug::<Stack<u8>>();
    default_debug::<Bagpipe<Queue<u8>>>();
    default_debug::<Bagpipe<Stack<u8>>>();
    default_debug::<RevokeHandle>();
    debug::<Producer<u8>>();
    debug::<Consumer<u8>>();
    debug::<mpmc::Handle<'static, u8>>();
    debug::<stack::Handle<'static, u8>>();
    debug::<bagpipe::Handle<'static, Queue<u8>>>();

    let queue: Queue<u8> = Queue::default();
    let stack: Stack<u8> = Stack::default();
    let bag: Bagpipe<Stack<u8>> = Bagpipe::default();
    assert!(queue.is_empty() && stack.is_empty() && bag.size_guess() == 0);
    queue.push(1);
    stack.push(1);
    assert!(format!("{queue:?}").contains("len: 1"), "{queue:?}");
    assert!(format!("{stack:?}").contains("len: 1"), "{stack:?}");
    assert!(format!("{bag:?}").starts_with("Bagpipe"), "{bag:?}");
    let (producer, consumer) = spsc::channel::<u8>(3);
    assert!(
        format!("{producer:?}").contains("capacity: 3"),
        "{producer:?}"
    );
    assert!(
        format!("{consumer:?}").contains("capacity: 3"),
        "{consumer:?}"
    );
}

#[test]
fn structures_drain_into_owned_iterators() {
    owned_iter::<Queue<u8>, u8>();
    owned_iter::<Stack<u8>, u8>();
    owned_iter::<Bagpipe<Queue<u8>>, u8>();
    owned_iter::<Consumer<u8>, u8>();

    let queue = Queue::new();
    (0..3).for_each(|i| queue.push(i));
    assert_eq!(queue.into_iter().collect::<Vec<_>>(), [0, 1, 2]);
    let stack = Stack::new();
    (0..3).for_each(|i| stack.push(i));
    assert_eq!(stack.into_iter().collect::<Vec<_>>(), [2, 1, 0]);
}

/// One vocabulary: every error of the crate is a `Copy + Eq + Hash` std error.
#[test]
fn errors_are_std_errors_that_cross_threads() {
    error::<PushError<u8>>();
    error::<PopError>();
    error::<ChannelError>();
    error::<ChunkError>();
    error::<BagpipeError>();

    let boxed: Box<dyn Error + Send + Sync> = Box::new(PushError::Full(7_u8));
    assert_eq!(boxed.to_string(), PushError::Full(7_u8).to_string());
    let boxed: Box<dyn Error + Send + Sync> = Box::new(PopError::Transient);
    assert!(boxed.downcast_ref::<PopError>().is_some());
}

#[test]
fn a_const_queue_and_stack_can_be_statics_as_a_segqueue_can() {
    static QUEUE: Queue<u32> = Queue::new();
    static STACK: Stack<u32> = Stack::new();
    QUEUE.push(5);
    STACK.push(6);
    assert_eq!((QUEUE.pop(), STACK.pop()), (Some(5), Some(6)));
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
