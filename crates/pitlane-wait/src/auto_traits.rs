//! Compile-time checks of the auto traits and the variance of the crate's public types (built
//! only for doctests; the positive checks, and the comparison with tokio, are in
//! `tests/auto_traits.rs`).
//!
//! Each `compile_fail` example has a sibling just after it that compiles: the same code with
//! the one change that should make it pass, so that a typo cannot make the failing one pass
//! for the wrong reason.
//!
//! # `WaitQueue` is invariant in `T`
//!
//! A queue holds pointers to nodes whose data lock holders read through `&self`, so a
//! `&WaitQueue<&'static str>` must not become a `&WaitQueue<&'a str>`: a node holding a
//! short-lived `&str` could be enqueued through the shortened reference and read as a
//! `&'static str` through the original one after the string is freed.
//!
//! ```compile_fail
//! use pitlane_wait::WaitQueue;
//! fn shorten<'a, 'b>(queue: &'b WaitQueue<&'static str>) -> &'b WaitQueue<&'a str> {
//!     queue
//! }
//! ```
//!
//! ```
//! use pitlane_wait::WaitQueue;
//! fn shorten<'b>(queue: &'b WaitQueue<&'static str>) -> &'b WaitQueue<&'static str> {
//!     queue
//! }
//! ```
//!
//! The whole smuggle, which keeps every promise `enqueue_or_update` asks for (the node is
//! removed through the same queue before it is dropped), is refused: `short` would have to
//! live for `'static`.
//!
//! ```compile_fail,E0597
//! use pitlane_wait::queue::{Decision, Node, WaitQueue};
//!
//! let queue: WaitQueue<&'static str> = WaitQueue::new(0);
//! let node;
//! {
//!     let short = String::from("short-lived");
//!     let shorter: &WaitQueue<&str> = &queue;
//!     node = Box::pin(Node::new(short.as_str()));
//!     // SAFETY: the node is dequeued through this queue below, before it is dropped.
//!     unsafe { shorter.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
//! }
//! let smuggled: &'static str = *queue.lock().front().unwrap();
//! assert_eq!(queue.lock().dequeue(0, |_| None), Some(true));
//! assert_eq!(smuggled, "short-lived"); // would read freed memory
//! ```
//!
//! ```
//! use pitlane_wait::queue::{Decision, Node, WaitQueue};
//!
//! let queue: WaitQueue<&'static str> = WaitQueue::new(0);
//! let node;
//! {
//!     let short: &'static str = "short-lived";
//!     let shorter: &WaitQueue<&str> = &queue;
//!     node = Box::pin(Node::new(short));
//!     // SAFETY: the node is dequeued through this queue below, before it is dropped.
//!     unsafe { shorter.enqueue_or_update(node.as_ref(), |_| Decision::Enqueue) };
//! }
//! let smuggled: &'static str = *queue.lock().front().unwrap();
//! assert_eq!(queue.lock().dequeue(0, |_| None), Some(true));
//! assert_eq!(smuggled, "short-lived");
//! ```
//!
//! The lock guard follows the queue:
//!
//! ```compile_fail
//! use pitlane_wait::queue::Locked;
//! fn shorten<'a, 'b>(locked: Locked<'b, &'static str>) -> Locked<'b, &'a str> {
//!     locked
//! }
//! ```
//!
//! ```
//! use pitlane_wait::queue::Locked;
//! fn shorten<'b>(locked: Locked<'b, &'static str>) -> Locked<'b, &'static str> {
//!     locked
//! }
//! ```
//!
//! # `WaitQueue` is `Send` and `Sync` only for `T: Sync`
//!
//! Lock holders on any thread read queued nodes' data through `&T`.
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_wait::WaitQueue<std::cell::Cell<u8>>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<pitlane_wait::WaitQueue<u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_wait::WaitQueue<std::cell::Cell<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_wait::WaitQueue<u8>>();
//! ```
//!
//! # The lock guard stays on its thread
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_wait::queue::Locked<'static, u8>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<&'static pitlane_wait::WaitQueue<u8>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_wait::queue::Locked<'static, u8>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<&'static pitlane_wait::WaitQueue<u8>>();
//! ```
//!
//! # Nodes and the futures that hold them are not `Unpin`
//!
//! A queued node is pointed to by its neighbours: nothing may move it, so neither it nor a
//! future that holds it inline is `Unpin` (as tokio's `Notified` and acquire futures are not).
//!
//! ```compile_fail,E0277
//! fn unpin<T: Unpin>(_: &T) {}
//! unpin(&pitlane_wait::queue::Node::new(1_u8));
//! ```
//!
//! ```
//! fn unpin<T: Unpin>(_: &T) {}
//! unpin(&Box::pin(pitlane_wait::queue::Node::new(1_u8)));
//! ```
//!
//! ```compile_fail,E0277
//! fn unpin<T: Unpin>(_: &T) {}
//! let notify = pitlane_wait::Notify::new();
//! unpin(&notify.notified());
//! ```
//!
//! ```
//! fn unpin<T: Unpin>(_: &T) {}
//! let notify = pitlane_wait::Notify::new();
//! unpin(&Box::pin(notify.notified()));
//! ```
//!
//! ```compile_fail,E0277
//! fn unpin<T: Unpin>(_: &T) {}
//! let notify = std::sync::Arc::new(pitlane_wait::Notify::new());
//! unpin(&notify.notified_owned());
//! ```
//!
//! ```
//! fn unpin<T: Unpin>(_: &T) {}
//! let notify = std::sync::Arc::new(pitlane_wait::Notify::new());
//! unpin(&Box::pin(notify.notified_owned()));
//! ```
//!
//! ```compile_fail,E0277
//! fn unpin<T: Unpin>(_: &T) {}
//! let semaphore = pitlane_wait::Semaphore::new(1);
//! unpin(&semaphore.acquire());
//! ```
//!
//! ```
//! fn unpin<T: Unpin>(_: &T) {}
//! let semaphore = pitlane_wait::Semaphore::new(1);
//! unpin(&Box::pin(semaphore.acquire()));
//! ```
//!
//! ```compile_fail,E0277
//! fn unpin<T: Unpin>(_: &T) {}
//! let semaphore = pitlane_wait::Semaphore::new(1);
//! unpin(&semaphore.acquire_many(1));
//! ```
//!
//! ```
//! fn unpin<T: Unpin>(_: &T) {}
//! let semaphore = pitlane_wait::Semaphore::new(1);
//! unpin(&Box::pin(semaphore.acquire_many(1)));
//! ```
//!
//! ```compile_fail,E0277
//! fn unpin<T: Unpin>(_: &T) {}
//! let semaphore = std::sync::Arc::new(pitlane_wait::Semaphore::new(1));
//! unpin(&semaphore.acquire_owned());
//! ```
//!
//! ```
//! fn unpin<T: Unpin>(_: &T) {}
//! let semaphore = std::sync::Arc::new(pitlane_wait::Semaphore::new(1));
//! unpin(&Box::pin(semaphore.acquire_owned()));
//! ```
//!
//! ```compile_fail,E0277
//! fn unpin<T: Unpin>(_: &T) {}
//! let semaphore = std::sync::Arc::new(pitlane_wait::Semaphore::new(1));
//! unpin(&semaphore.acquire_many_owned(1));
//! ```
//!
//! ```
//! fn unpin<T: Unpin>(_: &T) {}
//! let semaphore = std::sync::Arc::new(pitlane_wait::Semaphore::new(1));
//! unpin(&Box::pin(semaphore.acquire_many_owned(1)));
//! ```
//!
//! # A node is `Send` and `Sync` as its data is
//!
//! ```compile_fail,E0277
//! fn send<T: Send>() {}
//! send::<pitlane_wait::queue::Node<std::rc::Rc<u8>>>();
//! ```
//!
//! ```
//! fn send<T: Send>() {}
//! send::<pitlane_wait::queue::Node<std::sync::Arc<u8>>>();
//! ```
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<pitlane_wait::queue::Node<std::cell::Cell<u8>>>();
//! ```
//!
//! ```
//! fn sync<T: Sync>() {}
//! sync::<pitlane_wait::queue::Node<u8>>();
//! ```
//!
//! # A permit cannot outlive its semaphore
//!
//! ```compile_fail,E0597
//! let permit;
//! {
//!     let semaphore = pitlane_wait::Semaphore::new(1);
//!     permit = semaphore.try_acquire().unwrap();
//! }
//! drop(permit);
//! ```
//!
//! ```
//! let permit;
//! let semaphore = pitlane_wait::Semaphore::new(1);
//! {
//!     permit = semaphore.try_acquire().unwrap();
//! }
//! drop(permit);
//! ```
