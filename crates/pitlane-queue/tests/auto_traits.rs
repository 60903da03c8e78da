//! The auto traits every public type of the crate has (the ones it must not have, and the
//! invariance of each type in its items, are `compile_fail` doctests in `src/auto_traits.rs`).
//! Items that are `Send` but not `Sync` (`Cell`) are the weakest the structures accept.
#![cfg(not(pitlane_loom))]

use std::cell::Cell;
use std::panic::{RefUnwindSafe, UnwindSafe};

use pitlane_queue::bagpipe::{self, Bagpipe, BagpipeError};
use pitlane_queue::mpmc::{self, Queue};
use pitlane_queue::revoke::RevokeHandle;
use pitlane_queue::spsc::{
    self, ChannelError, ChunkError, Consumer, Producer, ReadChunk, TryIter, WriteChunk,
    WriteChunkUninit,
};
use pitlane_queue::stack::{self, Stack};
use pitlane_queue::weak_bag;
use pitlane_queue::{PopError, PushError};

fn send<T: Send>() {}
fn sync<T: Sync>() {}
fn unpin<T: Unpin>() {}
fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}

/// Moves between threads, is not shared by them.
type SendOnly = Cell<u8>;

#[test]
fn structures_are_send_sync_unpin_and_unwind_safe() {
    send::<Queue<SendOnly>>();
    sync::<Queue<SendOnly>>();
    send::<Queue<SendOnly, 4>>();
    sync::<Queue<SendOnly, 4>>();
    send::<Stack<SendOnly>>();
    sync::<Stack<SendOnly>>();
    send::<Bagpipe<Queue<SendOnly>>>();
    sync::<Bagpipe<Queue<SendOnly>>>();
    send::<Bagpipe<Stack<SendOnly>>>();
    sync::<Bagpipe<Stack<SendOnly>>>();
    send::<RevokeHandle>();
    sync::<RevokeHandle>();

    unpin::<Queue<SendOnly>>();
    unpin::<Stack<SendOnly>>();
    unpin::<Bagpipe<Queue<SendOnly>>>();
    unpin::<RevokeHandle>();

    // As crossbeam's `SegQueue` and `ArrayQueue`, whatever the items.
    unwind_safe::<Queue<SendOnly>>();
    unwind_safe::<Queue<std::rc::Rc<u8>>>();
    unwind_safe::<Stack<SendOnly>>();
    unwind_safe::<Stack<std::rc::Rc<u8>>>();
    unwind_safe::<Bagpipe<Queue<SendOnly>>>();
    unwind_safe::<Bagpipe<Stack<SendOnly>>>();
    unwind_safe::<RevokeHandle>();
}

#[test]
fn handles_move_as_documented() {
    // A stack handle holds no thread state; a Bagpipe of stacks' handle neither.
    send::<stack::Handle<'static, SendOnly>>();
    send::<bagpipe::Handle<'static, Stack<SendOnly>>>();
    unpin::<mpmc::Handle<'static, SendOnly>>();
    unpin::<stack::Handle<'static, SendOnly>>();
    unpin::<bagpipe::Handle<'static, Queue<SendOnly>>>();
}

#[test]
fn spsc_ends_chunks_and_iterators_move_when_items_do() {
    send::<Producer<SendOnly>>();
    send::<Consumer<SendOnly>>();
    send::<spsc::IntoIter<SendOnly>>();
    send::<TryIter<'static, SendOnly>>();
    send::<ReadChunk<'static, SendOnly>>();
    send::<WriteChunk<'static, SendOnly>>();
    send::<WriteChunkUninit<'static, SendOnly>>();

    unpin::<Producer<SendOnly>>();
    unpin::<Consumer<SendOnly>>();
    unpin::<ReadChunk<'static, SendOnly>>();
    unpin::<WriteChunk<'static, SendOnly>>();

    // As rtrb's ends, whatever the items.
    unwind_safe::<Producer<std::rc::Rc<u8>>>();
    unwind_safe::<Consumer<std::rc::Rc<u8>>>();
}

#[test]
fn owned_iterators_move_when_their_structure_does() {
    send::<<Queue<SendOnly> as IntoIterator>::IntoIter>();
    send::<<Stack<SendOnly> as IntoIterator>::IntoIter>();
    send::<weak_bag::IntoIter<Bagpipe<Stack<SendOnly>>>>();
    sync::<<Queue<SendOnly> as IntoIterator>::IntoIter>();
}

#[test]
fn errors_carry_their_value_as_it_is() {
    send::<PushError<SendOnly>>();
    sync::<PushError<u8>>();
    unpin::<PushError<u8>>();
    send::<PopError>();
    sync::<PopError>();
    send::<ChannelError>();
    sync::<ChannelError>();
    send::<ChunkError>();
    sync::<ChunkError>();
    send::<BagpipeError>();
    sync::<BagpipeError>();
}

#[test]
fn owned_values_may_be_seen_as_shorter_lived() {
    // An error owns its value and nothing else holds it: covariance is harmless there.
    fn shorter<'a>(error: PushError<&'static str>) -> PushError<&'a str> {
        error
    }
    assert_eq!(shorter(PushError::Full("x")).into_inner(), "x");
}
