//! The stack's plain calls and handles against user code that runs *inside* them where the
//! earlier passes (`hostile_mpmc_stack.rs`, `guess_stack.rs`, `reentrant_drops.rs`) put none:
//! the global allocator. A `#[global_allocator]` is user code, and a stack allocates in the
//! middle of an operation: a seat's cache on the seat's first plain call on a stack, and a
//! chunk of nodes when a stash refills with never-used nodes. An allocator that keeps its own
//! free blocks in a `Stack` (the module's `static FREE_PAGES` example) calls the very stack
//! that is allocating, on the same thread, with the same seat or handle (or through a Bagpipe
//! of stacks, which hands its seat to the stack). Here this binary's
//! allocator runs a test's hook at the allocation the test picks, and refuses, on demand,
//! the allocations a test picks (the stack documents what a refused chunk does: `try_push`
//! hands the item back, `push` panics, nothing aborts).
//!
//! Each hook runs once, on the thread that armed it, and the tests check that it ran: a
//! hook that never fires would make a test that cannot fail.
//!
//! Also pinned here (judged fine): a revoked item's `Drop`, run inside a plain pop, that
//! replaces the thread's one-entry cache with other stacks it makes and drops, and pushes
//! onto the popped stack plainly and through a new handle.
#![cfg(not(pitlane_loom))]
// The binary's allocator is this file's; under `--cfg pitlane_alloc_global` (pitlane-alloc
// as every test binary's allocator) there would be two.
#![cfg(not(pitlane_alloc_global))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::{MAX_ITEMS, Stack};
use pitlane_queue::{PopError, PushError};
use pitlane_testkit::child::{rerun_test, scenario};

/// Set in a child process: the name of the scenario it runs.
const CHILD_ENV: &str = "PITLANE_HOSTILE_STACK_2_CHILD";

/// Which allocations a hook or a refusal applies to.
type Picks = fn(Layout) -> bool;

/// A hook: which allocation it waits for, and what it runs then.
type Hook = (Picks, Box<dyn FnOnce()>);

thread_local! {
    /// User code to run at this thread's next allocation that the predicate picks; taken
    /// (so run once) when it fires.
    static HOOK: Cell<Option<Hook>> = const { Cell::new(None) };
    /// This thread's allocations that the predicate picks fail (return null).
    static REFUSE: Cell<Option<Picks>> = const { Cell::new(None) };
}

/// The system allocator, with the hooks and refusals above.
struct Hooked;

/// Runs this thread's hook if it picks `layout`; whether the allocation is to be refused.
fn before(layout: Layout) -> bool {
    let run = HOOK
        .try_with(|hook| match hook.take() {
            Some((picks, run)) if picks(layout) => Some(run),
            other => {
                hook.set(other);
                None
            }
        })
        .ok()
        .flatten();
    if let Some(run) = run {
        run();
    }
    REFUSE
        .try_with(|refuse| refuse.get().is_some_and(|picks| picks(layout)))
        .unwrap_or(false)
}

// SAFETY: every call is forwarded to `System` unchanged, or refused with a null pointer, which
// `GlobalAlloc` allows; the hooks are side effects (they may allocate, through this same
// allocator, and their own allocations do not fire them again: a hook is taken before it runs).
unsafe impl GlobalAlloc for Hooked {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if before(layout) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if before(layout) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `new_size` is valid for `layout.align()` by `realloc`'s contract.
        if before(unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) }) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static HOOKED: Hooked = Hooked;

/// Arms this thread's hook: `run` at the next allocation `picks` picks.
fn arm(picks: Picks, run: impl FnOnce() + 'static) {
    let run: Box<dyn FnOnce()> = Box::new(run);
    HOOK.with(|hook| hook.set(Some((picks, run))));
}

/// Whether this thread's hook has fired (or none was armed).
fn hook_fired() -> bool {
    HOOK.with(|hook| {
        let armed = hook.take();
        let fired = armed.is_none();
        hook.set(armed);
        fired
    })
}

/// A seat's cache of a stack: it holds a cache-padded tally, so it is the stack's only
/// allocation aligned as a cache pad that plain calls make (a handle's tally is another, and
/// these tests make none where this is used).
fn seat_cache(layout: Layout) -> bool {
    layout.align() == core::mem::align_of::<CachePadded<u8>>()
}

/// A chunk of nodes of a `Stack<()>` past the first: 128 nodes or more, each at least its two
/// 32-bit index words and its state word (a `usize`), at most 8-aligned; the first chunk (64
/// nodes) is smaller, and nothing else a push allocates is as large.
fn later_chunk(layout: Layout) -> bool {
    layout.align() <= 8 && layout.size() >= 128 * (8 + size_of::<usize>())
}

// ---------------------------------------------------------------------------------------------
// A plain call from the allocator while the seat's cache is made
// ---------------------------------------------------------------------------------------------

/// A thread's first plain call on a stack allocates its seat's cache there; an allocator that
/// pushes onto the same stack makes the first plain call of the same seat from inside that
/// allocation. Both calls' pushes must be counted: `len` is exact when no operation is in
/// flight, and both items come out.
#[test]
fn a_plain_call_from_the_allocator_while_the_seat_cache_is_made_keeps_len_exact() {
    let stack = Arc::new(Stack::<u64>::new());
    let (len, popped, fired) = std::thread::spawn({
        let stack = Arc::clone(&stack);
        move || {
            let nested = Arc::clone(&stack);
            arm(seat_cache, move || nested.push(1_000));
            stack.push(1);
            let fired = hook_fired();
            let len = stack.len();
            let popped: Vec<u64> = std::iter::from_fn(|| stack.pop()).collect();
            (len, popped, fired)
        }
    })
    .join()
    .unwrap();
    assert!(
        fired,
        "the hook never ran: the seat cache was not allocated"
    );
    assert_eq!(
        (len, popped),
        (2, vec![1, 1_000]),
        "len after the two pushes, and the items popped"
    );
    assert_eq!(stack.len(), 0);
}

// ---------------------------------------------------------------------------------------------
// A plain call or a handle's call from the allocator while a stash refills
// ---------------------------------------------------------------------------------------------

/// Pushes `()` with `try_push` until the stack says it is full, and returns how many went in;
/// alone on the stack, no attempt may lose a race.
fn fill(mut try_push: impl FnMut() -> Result<(), PushError<()>>) -> usize {
    let mut pushed = 0;
    loop {
        match try_push() {
            Ok(()) => pushed += 1,
            Err(PushError::Full(())) => return pushed,
            Err(PushError::Transient(())) => panic!("a lost race with nobody else on the stack"),
        }
    }
}

/// The 65th push of a thread's plain calls refills its seat's stash with never-used nodes of
/// the second chunk, which it allocates; the allocator pushes onto the same stack (the same
/// seat's stash, empty at that moment) from inside that allocation. No node may be lost: the
/// thread then fills the stack, and it must hold `MAX_ITEMS` (its own stash is empty when a
/// push finds no node, and no other thread used the stack).
#[test]
fn a_plain_call_from_the_allocator_while_a_stash_refills_loses_no_node() {
    let stack = Arc::new(Stack::<()>::new());
    let (fired, filled) = std::thread::spawn({
        let stack = Arc::clone(&stack);
        move || {
            // The first chunk's 64 nodes, taken by the seat's stash 32 at a time.
            (0..64).for_each(|_| stack.push(()));
            let nested = Arc::clone(&stack);
            arm(later_chunk, move || nested.push(()));
            stack.push(());
            let fired = hook_fired();
            (fired, fill(|| stack.try_push(())))
        }
    })
    .join()
    .unwrap();
    assert!(
        fired,
        "the hook never ran: the push did not allocate a chunk"
    );
    assert_eq!(
        (66 + filled, stack.len()),
        (MAX_ITEMS, MAX_ITEMS),
        "pushes that went in, and len, when the stack said it was full"
    );
    let stack = Arc::into_inner(stack).expect("the thread is done");
    assert_eq!(stack.into_iter().count(), MAX_ITEMS);
}

/// As above, through a Bagpipe of one stack: its plain calls hand the thread's seat to the
/// stack (`try_push_seated`), which takes the seat's stash without the thread's one-entry
/// cache; the allocator pushes through the same Bagpipe.
#[test]
fn a_bagpipe_call_from_the_allocator_while_a_pipes_stash_refills_loses_no_node() {
    let bag = Arc::new(Bagpipe::<Stack<()>>::with_pipes(1).unwrap());
    let (fired, filled) = std::thread::spawn({
        let bag = Arc::clone(&bag);
        move || {
            (0..64).for_each(|_| bag.push(()));
            let nested = Arc::clone(&bag);
            arm(later_chunk, move || nested.push(()));
            bag.push(());
            let fired = hook_fired();
            (fired, fill(|| bag.try_push(())))
        }
    })
    .join()
    .unwrap();
    assert!(
        fired,
        "the hook never ran: the push did not allocate a chunk"
    );
    assert_eq!(
        (66 + filled, bag.size_guess()),
        (MAX_ITEMS, MAX_ITEMS),
        "pushes that went in, and the size, when the Bagpipe said it was full"
    );
}

/// A stack whose handle lives in a thread-local, as an allocator's would.
static HANDLED: Stack<()> = Stack::new();

thread_local! {
    static HANDLE: pitlane_queue::stack::Handle<'static, ()> = HANDLED.handle();
}

/// As above, through one handle kept in a thread-local: the allocator pushes through the same
/// handle (the same stash) while the handle's push refills it.
#[test]
fn a_handle_call_from_the_allocator_while_its_stash_refills_loses_no_node() {
    let (fired, filled) = std::thread::spawn(|| {
        HANDLE.with(|handle| (0..64).for_each(|_| handle.push(())));
        arm(later_chunk, || HANDLE.with(|handle| handle.push(())));
        HANDLE.with(|handle| handle.push(()));
        let fired = hook_fired();
        (fired, HANDLE.with(|handle| fill(|| handle.try_push(()))))
    })
    .join()
    .unwrap();
    assert!(
        fired,
        "the hook never ran: the push did not allocate a chunk"
    );
    assert_eq!(
        (66 + filled, HANDLED.len()),
        (MAX_ITEMS, MAX_ITEMS),
        "pushes that went in, and len, when the stack said it was full"
    );
    // Empty it again, so that the nodes' memory is all this static keeps.
    assert_eq!(std::iter::from_fn(|| HANDLED.pop()).count(), MAX_ITEMS);
}

// ---------------------------------------------------------------------------------------------
// Refused allocations on a thread's first plain call
// ---------------------------------------------------------------------------------------------

const REFUSED_FIRST_CALLS: &str = "refused_first_calls";

/// What a thread's first plain calls on a stack do when the allocator refuses everything of
/// 512 bytes or more (a seat's cache: over 600 bytes on 32-bit targets, 1,280 on x86-64; a
/// chunk of 64 nodes; not a panic's short message): `try_push` hands the item
/// back as full, `push` panics (both as documented for a refused chunk), the pops find the
/// stack empty, and once memory is back every call works and `len` is exact. Before, the
/// seat's cache was allocated infallibly and the first call aborted the process. In a child
/// process, so that an abort fails this test only.
#[test]
fn refused_first_calls() {
    if scenario(CHILD_ENV).as_deref() == Some(REFUSED_FIRST_CALLS) {
        // The default hook may capture a backtrace, allocating more than the refusals let
        // through; the panic itself allocates only its short message.
        std::panic::set_hook(Box::new(|_| {}));
        let stack = Stack::<u64>::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                REFUSE.with(|refuse| refuse.set(Some(|layout| layout.size() >= 512)));
                assert_eq!(stack.try_pop(), Err(PopError::Empty));
                assert_eq!(stack.pop(), None);
                assert_eq!(stack.try_push(7), Err(PushError::Full(7)));
                let message = pitlane_testkit::panics::message_of(|| stack.push(8));
                assert!(message.contains("could not be allocated"), "{message}");
                assert_eq!(stack.len(), 0);
                REFUSE.with(|refuse| refuse.set(None));
                stack.push(9);
                assert_eq!(stack.try_push(10), Ok(()));
                assert_eq!(stack.len(), 2);
                assert_eq!(stack.pop(), Some(10));
                assert_eq!(stack.try_pop(), Ok(9));
                assert_eq!(stack.len(), 0);
            });
        });
        println!("{REFUSED_FIRST_CALLS}: done");
        return;
    }
    let ended = rerun_test(
        REFUSED_FIRST_CALLS,
        CHILD_ENV,
        REFUSED_FIRST_CALLS,
        Duration::from_secs(60),
    )
    .expect("the child ended within the limit");
    assert!(
        ended.status.success()
            && String::from_utf8_lossy(&ended.stdout).contains("refused_first_calls: done"),
        "child: {}\n{}",
        ended.status,
        String::from_utf8_lossy(&ended.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// A revoked value's Drop, inside a plain pop, that replaces the thread's one-entry cache
// ---------------------------------------------------------------------------------------------

/// A revocable item whose `Drop` runs a closure (once).
struct Dropping {
    handle: &'static RevokeHandle,
    value: u64,
    on_drop: Option<Box<dyn FnOnce()>>,
}

// SAFETY: the handle is leaked, outside the item, and the same for every copy (there are none).
unsafe impl Revocable for Dropping {
    fn revoke_handle(&self) -> &RevokeHandle {
        self.handle
    }
}

impl Drop for Dropping {
    fn drop(&mut self) {
        if let Some(run) = self.on_drop.take() {
            run();
        }
    }
}

fn plain(value: u64) -> Dropping {
    Dropping {
        handle: Box::leak(Box::new(RevokeHandle::new())),
        value,
        on_drop: None,
    }
}

/// A plain pop passes a revoked item, whose `Drop` (run inside the pop, after its exchange
/// and before it keeps the node in the seat's stash) works on two other stacks, each made,
/// used plainly (so that the thread's one-entry cache names it) and dropped, the second
/// perhaps at the first one's address; then reads `len`, pushes plainly and through a new
/// handle onto the popped stack. The pop goes on with the seat's cache it started with: it
/// returns the newest item, and everything else comes out once, in order, with `len` exact.
#[test]
fn a_revoked_items_drop_inside_a_plain_pop_that_drops_the_cached_stack_and_pushes() {
    std::thread::spawn(|| {
        let stack = std::rc::Rc::new(Stack::<Dropping>::new());
        stack.push(plain(1));
        let handle: &'static RevokeHandle = Box::leak(Box::new(RevokeHandle::new()));
        let ran = std::rc::Rc::new(Cell::new(false));
        let nested = {
            let (stack, ran) = (std::rc::Rc::clone(&stack), std::rc::Rc::clone(&ran));
            move || {
                // The pop has counted itself: the one plain item is left.
                assert_eq!(stack.len(), 1);
                let first = Box::new(Stack::<u64>::new());
                first.push(10);
                assert_eq!(first.pop(), Some(10));
                first.push(11);
                drop(first);
                let second = Box::new(Stack::<u64>::new());
                assert_eq!((second.len(), second.pop()), (0, None));
                second.push(20);
                assert_eq!(
                    (second.len(), second.pop(), second.pop()),
                    (1, Some(20), None)
                );
                drop(second);
                stack.push(plain(4));
                let by_handle = stack.handle();
                by_handle.push(plain(5));
                drop(by_handle);
                assert_eq!(stack.len(), 3);
                ran.set(true);
            }
        };
        stack.push_revocable(Dropping {
            handle,
            value: 2,
            on_drop: Some(Box::new(nested)),
        });
        stack.push(plain(3));
        let twin = Dropping {
            handle,
            value: 2,
            on_drop: None,
        };
        // SAFETY: `stack`, which holds the item, outlives the call.
        assert!(unsafe { Stack::<Dropping>::revoke(&twin) });
        assert_eq!(stack.pop().map(|item| item.value), Some(3));
        // Passes the revoked item (its `Drop` pushes 4, then 5 through a handle).
        assert_eq!(stack.pop().map(|item| item.value), Some(5));
        assert!(ran.get(), "the revoked item's drop did not run");
        assert_eq!(stack.len(), 2);
        let rest: Vec<u64> = std::iter::from_fn(|| stack.pop().map(|item| item.value)).collect();
        assert_eq!(rest, [4, 1]);
        assert_eq!(stack.len(), 0);
        // The stash holds the nodes again: more plain calls reuse them.
        (0..200).for_each(|i| stack.push(plain(i)));
        assert_eq!(stack.len(), 200);
        assert_eq!(stack.pop().map(|item| item.value), Some(199));
    })
    .join()
    .unwrap();
}
