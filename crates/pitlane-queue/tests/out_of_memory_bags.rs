//! When the allocator refuses the memory an unbounded bag needs to grow (here: the process's
//! address-space limit, `RLIMIT_AS`, lowered to what it uses plus a few MiB, and a segment
//! size no machine can allocate), `try_push` hands the item back in `PushError::Full`, `push`
//! panics with a message instead of aborting the process, nothing already in the bag is lost
//! or reordered, and pushes succeed again once memory is available. One test in its own
//! binary: the limit is the whole process's.
#![cfg(not(pitlane_loom))]
#![cfg(not(pitlane_alloc_global))]

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::stack::Stack;
use pitlane_queue::{PushError, WeakBag};
use pitlane_testkit::memory::with_address_space_limit;

/// A value big enough that the headroom runs out after some thousands of pushes, and that
/// says which push it came from. (The headroom is a few MiB beyond what the process has
/// mapped, and glibc's arena of a test thread has reserved 64 MiB of address space already.)
#[derive(Clone, Debug, PartialEq)]
struct Page([u64; 512]);

fn page(i: u64) -> Page {
    let mut words = [i; 512];
    words[511] = !i;
    Page(words)
}

/// Pushes pages `next..` with `try_push` until one fails; returns the failure (which must
/// come within `most` pushes) and how far it got. The pushed numbers go into `model`.
fn push_until_refused<B: WeakBag<Item = Page>>(
    bag: &B,
    next: &mut u64,
    model: &mut Vec<u64>,
    most: u64,
) -> PushError<Page> {
    for _ in 0..most {
        match bag.try_push(page(*next)) {
            Ok(()) => {
                model.push(*next);
                *next += 1;
            }
            Err(error) => return error,
        }
    }
    panic!("{most} pushes of 4 KiB pages all succeeded under the address-space limit");
}

/// A push that must succeed panics with a message that names the cause.
fn push_panics<B: WeakBag<Item = Page>>(bag: &B, item: Page) -> String {
    pitlane_testkit::panics::message_of(|| bag.push(item))
}

/// Memory is back: pushes `count` more pages with `push`, which must all succeed.
fn push_more<B: WeakBag<Item = Page>>(bag: &B, next: &mut u64, model: &mut Vec<u64>, count: usize) {
    for _ in 0..count {
        bag.push(page(*next));
        model.push(*next);
        *next += 1;
    }
}

/// Pops every page, checking each is whole, and returns their numbers in popping order.
fn pop_all<B: WeakBag<Item = Page>>(bag: &B) -> Vec<u64> {
    std::iter::from_fn(|| bag.pop())
        .map(|p| {
            assert_eq!(p, page(p.0[0]), "a page came out damaged");
            p.0[0]
        })
        .collect()
}

fn queue_refuses_and_recovers() {
    // 64 cells of 4 KiB: a segment is 256 KiB.
    let queue: Queue<Page, 64> = Queue::with_segment_size();
    let mut model = Vec::new();
    let mut next = 0;
    queue.push(page(next));
    model.push(next);
    next += 1;
    let (refused, message) = with_address_space_limit(4 << 20, || {
        let refused = push_until_refused(&queue, &mut next, &mut model, 100_000);
        let message = push_panics(&queue, page(u64::MAX));
        (refused, message)
    });
    assert!(
        refused.is_full(),
        "a refused segment is Full, got {refused:?}"
    );
    assert_eq!(
        refused.into_inner(),
        page(next),
        "the item comes back whole"
    );
    assert!(
        message.contains("could not be allocated"),
        "push's panic names the cause: {message:?}"
    );
    assert_eq!(
        queue.len(),
        model.len(),
        "a refused push changed the length"
    );
    // Memory is back: pushes succeed again, and everything comes out in order.
    push_more(&queue, &mut next, &mut model, 200);
    let popped: Vec<u64> = pop_all(&queue);
    assert_eq!(popped, model);
}

/// 2^40 cells: 16 TiB of cells and 128 GiB of skip bits.
#[cfg(target_pointer_width = "64")]
const HUGE_SEGMENT: usize = 1 << 40;
/// On a 32-bit target, 2^24 cells (128 MiB and more), beyond the 64 MiB of headroom left.
#[cfg(not(target_pointer_width = "64"))]
const HUGE_SEGMENT: usize = 1 << 24;

fn a_segment_no_machine_can_allocate_is_an_error() {
    let queue: Queue<u8, HUGE_SEGMENT> = Queue::with_segment_size();
    let refused = with_address_space_limit(64 << 20, || queue.try_push(7));
    assert_eq!(refused, Err(PushError::Full(7)));
    assert_eq!(queue.len(), 0);
    assert!(queue.is_empty());
    assert_eq!(queue.pop(), None);
}

fn stack_refuses_and_recovers() {
    let stack: Stack<Page> = Stack::new();
    let mut model = Vec::new();
    let mut next = 0;
    let (refused, message) = with_address_space_limit(4 << 20, || {
        let refused = push_until_refused(&stack, &mut next, &mut model, 100_000);
        let message = push_panics(&stack, page(u64::MAX));
        (refused, message)
    });
    assert!(
        refused.is_full(),
        "a refused chunk is Full, got {refused:?}"
    );
    assert_eq!(refused.into_inner(), page(next));
    assert!(message.contains("could not be allocated"), "{message:?}");
    assert_eq!(stack.len(), model.len());
    push_more(&stack, &mut next, &mut model, 2_000);
    let popped: Vec<u64> = pop_all(&stack);
    model.reverse();
    assert_eq!(popped, model, "the stack lost or reordered a page");
}

fn bagpipe_of_queues_refuses_and_recovers() {
    let bag: Bagpipe<Queue<Page, 64>> = Bagpipe::with_pipes(2).expect("two pipes");
    let mut model = Vec::new();
    let mut next = 0;
    let refused = with_address_space_limit(4 << 20, || {
        push_until_refused(&bag, &mut next, &mut model, 100_000)
    });
    assert!(
        refused.is_full(),
        "every pipe refused: Full, got {refused:?}"
    );
    assert_eq!(refused.into_inner(), page(next));
    push_more(&bag, &mut next, &mut model, 200);
    let mut popped: Vec<u64> = pop_all(&bag);
    popped.sort_unstable();
    assert_eq!(popped, model, "the Bagpipe lost or duplicated a page");
    assert_eq!(bag.pop(), None, "nothing is left behind");
}

#[test]
fn growth_refused_by_the_allocator_is_an_error_and_recovers() {
    a_segment_no_machine_can_allocate_is_an_error();
    queue_refuses_and_recovers();
    stack_refuses_and_recovers();
    bagpipe_of_queues_refuses_and_recovers();
}
