//! Compile-time checks of the auto traits and the variance of the crate's public types (built
//! only for doctests; the positive checks are in `tests/auto_traits.rs`).
//!
//! Each `compile_fail` example has a sibling just after it that compiles: the same code with
//! the one change that should make it pass, so that a typo cannot make the failing one pass
//! for the wrong reason.
//!
//! # Every structure is invariant in its item type
//!
//! A structure that takes values in through `&self` (or through a handle, an end or a chunk)
//! must not let `&'static str` items be seen as shorter-lived ones: a short-lived `&str` could
//! then be pushed through the shortened view and popped as `&'static str` through the original
//! one after it is freed.
//!
//! The whole smuggle, on the MPMC queue:
//!
//! ```compile_fail,E0597
//! use pitlane_queue::mpmc::Queue;
//!
//! let queue: Queue<&'static str> = Queue::new();
//! {
//!     let short = String::from("short-lived");
//!     let shorter: &Queue<&str> = &queue;
//!     shorter.push(short.as_str());
//! }
//! let smuggled: &'static str = queue.pop().unwrap();
//! assert_eq!(smuggled, "short-lived"); // would read freed memory
//! ```
//!
//! ```
//! use pitlane_queue::mpmc::Queue;
//!
//! let queue: Queue<&'static str> = Queue::new();
//! {
//!     let short: &'static str = "short-lived";
//!     let shorter: &Queue<&str> = &queue;
//!     shorter.push(short);
//! }
//! let smuggled: &'static str = queue.pop().unwrap();
//! assert_eq!(smuggled, "short-lived");
//! ```
//!
//! On the SPSC channel, where the producer is owned (and could be coerced by value):
//!
//! ```compile_fail,E0597
//! use pitlane_queue::spsc::{self, Producer};
//!
//! let (producer, mut consumer) = spsc::channel::<&'static str>(2);
//! {
//!     let short = String::from("short-lived");
//!     let mut shorter: Producer<&str> = producer;
//!     shorter.try_push(short.as_str()).unwrap();
//! }
//! let smuggled: &'static str = consumer.try_pop().unwrap();
//! assert_eq!(smuggled, "short-lived"); // would read freed memory
//! ```
//!
//! ```
//! use pitlane_queue::spsc::{self, Producer};
//!
//! let (producer, mut consumer) = spsc::channel::<&'static str>(2);
//! {
//!     let short: &'static str = "short-lived";
//!     let mut shorter: Producer<&str> = producer;
//!     shorter.try_push(short).unwrap();
//! }
//! let smuggled: &'static str = consumer.try_pop().unwrap();
//! assert_eq!(smuggled, "short-lived");
//! ```
//!
//! Then the coercion itself, type by type.
//!
//! ```compile_fail
//! use pitlane_queue::mpmc::Queue;
//! fn shorten<'a, 'b>(queue: &'b Queue<&'static str>) -> &'b Queue<&'a str> {
//!     queue
//! }
//! ```
//!
//! ```
//! use pitlane_queue::mpmc::Queue;
//! fn shorten<'b>(queue: &'b Queue<&'static str>) -> &'b Queue<&'static str> {
//!     queue
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::mpmc::Queue;
//! fn shorten<'a, 'b>(queue: &'b Queue<&'static str, 4>) -> &'b Queue<&'a str, 4> {
//!     queue
//! }
//! ```
//!
//! ```
//! use pitlane_queue::mpmc::Queue;
//! fn shorten<'b>(queue: &'b Queue<&'static str, 4>) -> &'b Queue<&'static str, 4> {
//!     queue
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::mpmc::Handle;
//! fn shorten<'a, 'q>(handle: Handle<'q, &'static str>) -> Handle<'q, &'a str> {
//!     handle
//! }
//! ```
//!
//! ```
//! use pitlane_queue::mpmc::Handle;
//! fn shorten<'q>(handle: Handle<'q, &'static str>) -> Handle<'q, &'static str> {
//!     handle
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::stack::Stack;
//! fn shorten<'a, 'b>(stack: &'b Stack<&'static str>) -> &'b Stack<&'a str> {
//!     stack
//! }
//! ```
//!
//! ```
//! use pitlane_queue::stack::Stack;
//! fn shorten<'b>(stack: &'b Stack<&'static str>) -> &'b Stack<&'static str> {
//!     stack
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::stack::Handle;
//! fn shorten<'a, 's>(handle: Handle<'s, &'static str>) -> Handle<'s, &'a str> {
//!     handle
//! }
//! ```
//!
//! ```
//! use pitlane_queue::stack::Handle;
//! fn shorten<'s>(handle: Handle<'s, &'static str>) -> Handle<'s, &'static str> {
//!     handle
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::{bagpipe::Bagpipe, mpmc::Queue};
//! fn shorten<'a, 'b>(bag: &'b Bagpipe<Queue<&'static str>>) -> &'b Bagpipe<Queue<&'a str>> {
//!     bag
//! }
//! ```
//!
//! ```
//! use pitlane_queue::{bagpipe::Bagpipe, mpmc::Queue};
//! fn shorten<'b>(bag: &'b Bagpipe<Queue<&'static str>>) -> &'b Bagpipe<Queue<&'static str>> {
//!     bag
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
//! fn shorten<'a, 'b>(bag: &'b Bagpipe<Stack<&'static str>>) -> &'b Bagpipe<Stack<&'a str>> {
//!     bag
//! }
//! ```
//!
//! ```
//! use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
//! fn shorten<'b>(bag: &'b Bagpipe<Stack<&'static str>>) -> &'b Bagpipe<Stack<&'static str>> {
//!     bag
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::{bagpipe::Handle, stack::Stack};
//! fn shorten<'a, 'h>(handle: Handle<'h, Stack<&'static str>>) -> Handle<'h, Stack<&'a str>> {
//!     handle
//! }
//! ```
//!
//! ```
//! use pitlane_queue::{bagpipe::Handle, stack::Stack};
//! fn shorten<'h>(handle: Handle<'h, Stack<&'static str>>) -> Handle<'h, Stack<&'static str>> {
//!     handle
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::spsc::Producer;
//! fn shorten<'a>(producer: Producer<&'static str>) -> Producer<&'a str> {
//!     producer
//! }
//! ```
//!
//! ```
//! use pitlane_queue::spsc::Producer;
//! fn shorten(producer: Producer<&'static str>) -> Producer<&'static str> {
//!     producer
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::spsc::Consumer;
//! fn shorten<'a>(consumer: Consumer<&'static str>) -> Consumer<&'a str> {
//!     consumer
//! }
//! ```
//!
//! ```
//! use pitlane_queue::spsc::Consumer;
//! fn shorten(consumer: Consumer<&'static str>) -> Consumer<&'static str> {
//!     consumer
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::spsc::IntoIter;
//! fn shorten<'a>(values: IntoIter<&'static str>) -> IntoIter<&'a str> {
//!     values
//! }
//! ```
//!
//! ```
//! use pitlane_queue::spsc::IntoIter;
//! fn shorten(values: IntoIter<&'static str>) -> IntoIter<&'static str> {
//!     values
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::spsc::TryIter;
//! fn shorten<'a, 'c>(values: TryIter<'c, &'static str>) -> TryIter<'c, &'a str> {
//!     values
//! }
//! ```
//!
//! ```
//! use pitlane_queue::spsc::TryIter;
//! fn shorten<'c>(values: TryIter<'c, &'static str>) -> TryIter<'c, &'static str> {
//!     values
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::spsc::WriteChunk;
//! fn shorten<'a, 'p>(chunk: WriteChunk<'p, &'static str>) -> WriteChunk<'p, &'a str> {
//!     chunk
//! }
//! ```
//!
//! ```
//! use pitlane_queue::spsc::WriteChunk;
//! fn shorten<'p>(chunk: WriteChunk<'p, &'static str>) -> WriteChunk<'p, &'static str> {
//!     chunk
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::spsc::WriteChunkUninit;
//! fn shorten<'a, 'p>(
//!     chunk: WriteChunkUninit<'p, &'static str>,
//! ) -> WriteChunkUninit<'p, &'a str> {
//!     chunk
//! }
//! ```
//!
//! ```
//! use pitlane_queue::spsc::WriteChunkUninit;
//! fn shorten<'p>(
//!     chunk: WriteChunkUninit<'p, &'static str>,
//! ) -> WriteChunkUninit<'p, &'static str> {
//!     chunk
//! }
//! ```
//!
//! ```compile_fail
//! use pitlane_queue::spsc::ReadChunk;
//! fn shorten<'a, 'c>(chunk: ReadChunk<'c, &'static str>) -> ReadChunk<'c, &'a str> {
//!     chunk
//! }
//! ```
//!
//! ```
//! use pitlane_queue::spsc::ReadChunk;
//! fn shorten<'c>(chunk: ReadChunk<'c, &'static str>) -> ReadChunk<'c, &'static str> {
//!     chunk
//! }
//! ```
//!
//! # Structures are `Send` and `Sync` only for `Send` items
//!
//! They move items between threads (as crossbeam's `SegQueue` does, `T: Send` is enough, `Sync`
//! is not needed: no reference to an item is ever shared).
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::mpmc::Queue<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::mpmc::Queue<std::cell::Cell<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_queue::mpmc::Queue<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::mpmc::Queue<std::cell::Cell<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::stack::Stack<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::stack::Stack<std::cell::Cell<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_queue::stack::Stack<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::stack::Stack<std::cell::Cell<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! use pitlane_queue::{bagpipe::Bagpipe, mpmc::Queue};
//! fn sync<T: Sync>() {}
//! sync::<Bagpipe<Queue<std::rc::Rc<u8>>>>();
//! ```
//!
//! ```
//! use pitlane_queue::{bagpipe::Bagpipe, mpmc::Queue};
//! fn sync<T: Sync>() {}
//! sync::<Bagpipe<Queue<std::cell::Cell<u8>>>>();
//! ```
//!
//! # Handles stay on their thread
//!
//! An MPMC handle holds its thread's epoch pin: neither `Send` nor `Sync`. A stack handle
//! holds no thread state and may move (for `Send` items), but it is not `Sync`: its stash is
//! used without synchronisation. A Bagpipe handle is neither `Sync` nor, with queue pipes,
//! `Send`.
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_queue::mpmc::Handle<'static, u8>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::stack::Handle<'static, u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::mpmc::Handle<'static, u8>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<&'static pitlane_queue::mpmc::Queue<u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::stack::Handle<'static, u8>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<&'static pitlane_queue::stack::Stack<u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_queue::stack::Handle<'static, std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::stack::Handle<'static, std::cell::Cell<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! use pitlane_queue::{bagpipe::Handle, mpmc::Queue};
//! fn send<T: Send>() {}
//! send::<Handle<'static, Queue<u8>>>();
//! ```
//!
//! ```
//! use pitlane_queue::{bagpipe::Handle, stack::Stack};
//! fn send<T: Send>() {}
//! send::<Handle<'static, Stack<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! use pitlane_queue::{bagpipe::Handle, stack::Stack};
//! fn sync<T: Sync>() {}
//! sync::<Handle<'static, Stack<u8>>>();
//! ```
//!
//! ```
//! use pitlane_queue::{bagpipe::Bagpipe, stack::Stack};
//! fn sync<T: Sync>() {}
//! sync::<&'static Bagpipe<Stack<u8>>>();
//! ```
//!
//! # SPSC ends move to their thread but are not shared
//!
//! Each end is `Send` when `T` is (as rtrb's), and neither end nor chunk is `Sync`: an end
//! keeps its position without synchronisation, and `peek` or a chunk lends `&T`.
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::Producer<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::Producer<std::cell::Cell<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::Consumer<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::Consumer<std::cell::Cell<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::spsc::Producer<u8>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::Producer<u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::spsc::Consumer<u8>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::Consumer<u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::spsc::ReadChunk<'static, u8>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::ReadChunk<'static, u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::spsc::WriteChunk<'static, u8>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::WriteChunk<'static, u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_queue::spsc::WriteChunkUninit<'static, u8>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::WriteChunkUninit<'static, u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::ReadChunk<'static, std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_queue::spsc::ReadChunk<'static, std::cell::Cell<u8>>>();
//! ```
