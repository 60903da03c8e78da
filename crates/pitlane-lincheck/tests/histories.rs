//! The checker on histories written by hand.
//!
//! Intervals are written `call..return` on a logical clock. The queue histories of
//! Herlihy & Wing (1990) come first; the intervals are ours, the shapes (which operations
//! overlap, what they return, and the verdict) are the paper's.

use pitlane_lincheck::specs::ContainerOp::{Pop, Push};
use pitlane_lincheck::specs::ContainerRet::{Empty, Full, Popped, Pushed, Transient};
use pitlane_lincheck::specs::{
    BagSpec, BoundedQueueSpec, ContainerOp, ContainerRet, CounterOp, CounterRet, CounterSpec,
    PoolOp, PoolRet, PoolSpec, QueueSpec, RegisterOp, RegisterRet, RegisterSpec, SemaphoreOp,
    SemaphoreRet, SemaphoreSpec, StackSpec, WeakBagSpec,
};
use pitlane_lincheck::{Checker, Counterexample, History, SequentialSpec, Verdict, check};

type Queue = History<ContainerOp<char>, ContainerRet<char>>;

/// Checks `history` and, when linearizable, that the order given is a real linearization:
/// every operation once, real-time order respected, each result allowed in turn.
fn verdict<S: SequentialSpec>(spec: &S, history: &History<S::Op, S::Ret>) -> Verdict {
    let verdict = check(spec, history);
    if let Verdict::Linearizable(order) = &verdict {
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..history.len()).collect::<Vec<_>>());
        let ops = history.operations();
        for (i, &a) in order.iter().enumerate() {
            for &b in &order[i + 1..] {
                assert!(
                    !ops[b].precedes(&ops[a]),
                    "#{b} precedes #{a} but comes later"
                );
            }
        }
        let mut state = spec.init();
        for &id in order {
            state = spec
                .step(&state, &ops[id].op, &ops[id].result)
                .unwrap_or_else(|| panic!("#{id} is not allowed where the order puts it"));
        }
    }
    verdict
}

fn linearizable<S: SequentialSpec>(spec: &S, history: &History<S::Op, S::Ret>) -> bool {
    verdict(spec, history).is_linearizable()
}

// Herlihy & Wing, Figure 1: four FIFO queue histories of processes A and B.

#[test]
fn herlihy_wing_figure_1a_overlapping_enqueues_either_order() {
    // A: Enq(x), then Deq() returning y; B: Enq(y), then Deq() returning x. The enqueues
    // overlap, so x may have gone in first: linearizable.
    let mut h = Queue::new();
    let (a, b) = (0, 1);
    h.add(a, 0..4, Push('x'), Pushed).unwrap();
    h.add(b, 1..3, Push('y'), Pushed).unwrap();
    h.add(b, 5..7, Pop, Popped('x')).unwrap();
    h.add(a, 6..9, Pop, Popped('y')).unwrap();
    assert!(linearizable(&QueueSpec::new(), &h));
}

#[test]
fn herlihy_wing_figure_1b_dequeue_of_the_later_value() {
    // A's Enq(x) returns before B's Enq(y) is called, yet A's Deq returns y while x was
    // never dequeued: not linearizable.
    let mut h = Queue::new();
    h.add(0, 0..2, Push('x'), Pushed).unwrap();
    h.add(1, 3..5, Push('y'), Pushed).unwrap();
    h.add(0, 6..8, Pop, Popped('y')).unwrap();
    assert!(!linearizable(&QueueSpec::new(), &h));
}

#[test]
fn herlihy_wing_figure_1c_dequeue_overlapping_its_enqueue() {
    // B's Deq overlaps A's Enq(x) and returns x: the enqueue took effect first.
    let mut h = Queue::new();
    h.add(0, 0..5, Push('x'), Pushed).unwrap();
    h.add(1, 1..6, Pop, Popped('x')).unwrap();
    assert!(linearizable(&QueueSpec::new(), &h));
}

#[test]
fn herlihy_wing_figure_1d_one_value_dequeued_twice() {
    // Enq(x) and Enq(y) overlap; both processes then dequeue y: not linearizable.
    let mut h = Queue::new();
    h.add(0, 0..3, Push('x'), Pushed).unwrap();
    h.add(1, 1..4, Push('y'), Pushed).unwrap();
    h.add(0, 5..7, Pop, Popped('y')).unwrap();
    h.add(1, 6..8, Pop, Popped('y')).unwrap();
    assert!(!linearizable(&QueueSpec::new(), &h));
}

#[test]
fn herlihy_wing_h1_is_linearizable() {
    // H1: E(x) A and E(y) B overlap; B dequeues x, then A dequeues y.
    let mut h = Queue::new();
    h.add(0, 0..4, Push('x'), Pushed).unwrap();
    h.add(1, 1..3, Push('y'), Pushed).unwrap();
    h.add(1, 5..6, Pop, Popped('x')).unwrap();
    h.add(0, 7..8, Pop, Popped('y')).unwrap();
    assert!(linearizable(&QueueSpec::new(), &h));
}

#[test]
fn herlihy_wing_h2_is_not_linearizable() {
    // H2: A's E(x) completes; B's E(y) is called; A's D() is called; E(y) returns;
    // D returns y. E(x) precedes E(y), yet y is dequeued first.
    let mut h = Queue::new();
    h.add(0, 0..1, Push('x'), Pushed).unwrap();
    h.add(1, 2..4, Push('y'), Pushed).unwrap();
    h.add(0, 3..5, Pop, Popped('y')).unwrap();
    let Verdict::NotLinearizable(Counterexample {
        longest_prefix,
        stuck,
    }) = verdict(&QueueSpec::new(), &h)
    else {
        panic!("H2 is not linearizable");
    };
    assert_eq!(longest_prefix, vec![0, 1]);
    assert_eq!(stuck, 2);
}

// Overlap allows several orders.

#[test]
fn overlapping_pushes_allow_every_order_of_pops() {
    let perms = [
        ['a', 'b', 'c'],
        ['a', 'c', 'b'],
        ['b', 'a', 'c'],
        ['b', 'c', 'a'],
        ['c', 'a', 'b'],
        ['c', 'b', 'a'],
    ];
    let mut orders = Vec::new();
    for perm in perms {
        let mut h = Queue::new();
        // Three pushes all overlapping, then three sequential pops.
        h.add(0, 0..10, Push('a'), Pushed).unwrap();
        h.add(1, 1..11, Push('b'), Pushed).unwrap();
        h.add(2, 2..12, Push('c'), Pushed).unwrap();
        for (i, v) in perm.into_iter().enumerate() {
            let t = 20 + 2 * i as u64;
            h.add(3, t..t + 1, Pop, Popped(v)).unwrap();
        }
        let Verdict::Linearizable(order) = verdict(&QueueSpec::new(), &h) else {
            panic!("pops in order {perm:?} are linearizable");
        };
        orders.push(order);
    }
    orders.sort();
    orders.dedup();
    assert_eq!(orders.len(), 6, "each history gets its own order of pushes");
}

#[test]
fn an_empty_pop_may_take_effect_before_an_overlapping_push() {
    let mut h = Queue::new();
    h.add(0, 0..4, Push('x'), Pushed).unwrap();
    h.add(1, 1..5, Pop, Empty).unwrap();
    h.add(1, 6..7, Pop, Popped('x')).unwrap();
    assert!(linearizable(&QueueSpec::new(), &h));

    // The same empty pop after the push returned is wrong.
    let mut h = Queue::new();
    h.add(0, 0..1, Push('x'), Pushed).unwrap();
    h.add(1, 2..3, Pop, Empty).unwrap();
    assert!(!linearizable(&QueueSpec::new(), &h));
}

#[test]
fn pending_overlap_lets_a_later_call_take_effect_first() {
    // A long push of x overlaps a short push of y and a pop of y: y went in first.
    let mut h = Queue::new();
    h.add(0, 0..20, Push('x'), Pushed).unwrap();
    h.add(1, 1..2, Push('y'), Pushed).unwrap();
    h.add(1, 3..4, Pop, Popped('y')).unwrap();
    h.add(1, 21..22, Pop, Popped('x')).unwrap();
    assert!(linearizable(&QueueSpec::new(), &h));
}

// FIFO broken only through real-time order.

#[test]
fn a_queue_history_that_breaks_fifo_only_through_real_time_order() {
    // Each thread's own order is respected by "push y, push x, pop y, pop x", so the
    // history is sequentially consistent; but push x returned before push y was called,
    // so x must come out first: not linearizable.
    let mut h = Queue::new();
    h.add(0, 0..1, Push('x'), Pushed).unwrap();
    h.add(1, 2..3, Push('y'), Pushed).unwrap();
    h.add(2, 4..5, Pop, Popped('y')).unwrap();
    h.add(2, 6..7, Pop, Popped('x')).unwrap();
    assert!(!linearizable(&QueueSpec::new(), &h));

    // Let the two pushes overlap and the same results are fine.
    let mut h = Queue::new();
    h.add(0, 0..3, Push('x'), Pushed).unwrap();
    h.add(1, 2..4, Push('y'), Pushed).unwrap();
    h.add(2, 5..6, Pop, Popped('y')).unwrap();
    h.add(2, 7..8, Pop, Popped('x')).unwrap();
    assert!(linearizable(&QueueSpec::new(), &h));
}

// Pools.

#[test]
fn a_pool_that_hands_out_one_object_twice() {
    let mut h = History::new();
    h.add(0, 0..2, PoolOp::Alloc, PoolRet::Allocated(5))
        .unwrap();
    h.add(1, 1..3, PoolOp::Alloc, PoolRet::Allocated(5))
        .unwrap();
    assert!(!linearizable(&PoolSpec::unbounded(), &h));

    // Sequentially, without a free in between: also wrong.
    let mut h = History::new();
    h.add(0, 0..1, PoolOp::Alloc, PoolRet::Allocated(5))
        .unwrap();
    h.add(1, 2..3, PoolOp::Alloc, PoolRet::Allocated(5))
        .unwrap();
    assert!(!linearizable(&PoolSpec::unbounded(), &h));

    // With a free that overlaps the second alloc, the object may have come back first.
    let mut h = History::new();
    h.add(0, 0..1, PoolOp::Alloc, PoolRet::Allocated(5))
        .unwrap();
    h.add(0, 2..5, PoolOp::Free(5), PoolRet::Freed).unwrap();
    h.add(1, 3..4, PoolOp::Alloc, PoolRet::Allocated(5))
        .unwrap();
    assert!(linearizable(&PoolSpec::unbounded(), &h));
}

#[test]
fn a_pool_is_exhausted_exactly_when_all_objects_are_out() {
    let mut h = History::new();
    h.add(0, 0..1, PoolOp::Alloc, PoolRet::Allocated(0))
        .unwrap();
    h.add(0, 2..3, PoolOp::Alloc, PoolRet::Allocated(1))
        .unwrap();
    h.add(1, 4..5, PoolOp::Alloc, PoolRet::Exhausted).unwrap();
    assert!(linearizable(&PoolSpec::with_capacity(2), &h));
    assert!(!linearizable(&PoolSpec::with_capacity(3), &h));
    assert!(!linearizable(&PoolSpec::unbounded(), &h));

    let mut h = History::new();
    h.add(0, 0..1, PoolOp::Free(3), PoolRet::Freed).unwrap();
    assert!(
        !linearizable(&PoolSpec::unbounded(), &h),
        "3 was never allocated"
    );
}

// The other specifications.

#[test]
fn bounded_queue_is_full_exactly_at_capacity() {
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Pushed).unwrap();
    h.add(0, 2..3, Push('b'), Pushed).unwrap();
    h.add(1, 4..5, Push('c'), Full).unwrap();
    h.add(1, 6..7, Pop, Popped('a')).unwrap();
    h.add(0, 8..9, Push('d'), Pushed).unwrap();
    assert!(linearizable(&BoundedQueueSpec::new(2), &h));
    assert!(
        !linearizable(&BoundedQueueSpec::new(3), &h),
        "full below capacity"
    );
    assert!(
        !linearizable(&BoundedQueueSpec::new(1), &h),
        "pushed above capacity"
    );
    assert!(
        !linearizable(&QueueSpec::new(), &h),
        "an unbounded queue is never full"
    );

    // A full answer overlapping a pop may come before it.
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Pushed).unwrap();
    h.add(1, 2..6, Push('b'), Full).unwrap();
    h.add(0, 3..4, Pop, Popped('a')).unwrap();
    assert!(linearizable(&BoundedQueueSpec::new(1), &h));
}

#[test]
fn stack_is_last_in_first_out() {
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Pushed).unwrap();
    h.add(0, 2..3, Push('b'), Pushed).unwrap();
    h.add(1, 4..5, Pop, Popped('b')).unwrap();
    h.add(1, 6..7, Pop, Popped('a')).unwrap();
    h.add(1, 8..9, Pop, Empty).unwrap();
    assert!(linearizable(&StackSpec::new(), &h));
    assert!(!linearizable(&QueueSpec::new(), &h));
}

#[test]
fn bag_pops_any_present_value_once() {
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Pushed).unwrap();
    h.add(0, 2..3, Push('b'), Pushed).unwrap();
    h.add(0, 4..5, Push('a'), Pushed).unwrap();
    h.add(1, 6..7, Pop, Popped('a')).unwrap();
    h.add(1, 8..9, Pop, Popped('b')).unwrap();
    h.add(1, 10..11, Pop, Popped('a')).unwrap();
    h.add(1, 12..13, Pop, Empty).unwrap();
    assert!(linearizable(&BagSpec::new(), &h));
    h.add(1, 14..15, Pop, Popped('a')).unwrap();
    assert!(!linearizable(&BagSpec::new(), &h));
}

#[test]
fn weak_bag_allows_transient_failures_but_nothing_invented() {
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Transient).unwrap();
    h.add(1, 0..1, Pop, Transient).unwrap();
    h.add(0, 2..3, Push('b'), Pushed).unwrap();
    h.add(1, 4..5, Pop, Popped('b')).unwrap();
    h.add(1, 6..7, Pop, Empty).unwrap();
    assert!(linearizable(&WeakBagSpec::new(), &h));
    assert!(
        !linearizable(&BagSpec::new(), &h),
        "a plain bag never fails"
    );

    // A pushed value may not hide behind an empty answer...
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Pushed).unwrap();
    h.add(1, 2..3, Pop, Empty).unwrap();
    assert!(!linearizable(&WeakBagSpec::new(), &h));
    // ...but may behind a transient one.
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Pushed).unwrap();
    h.add(1, 2..3, Pop, Transient).unwrap();
    assert!(linearizable(&WeakBagSpec::new(), &h));
    // A value handed back by a failed push never comes out.
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Transient).unwrap();
    h.add(1, 2..3, Pop, Popped('a')).unwrap();
    assert!(!linearizable(&WeakBagSpec::new(), &h));
    // Nor is a weak bag ever full.
    let mut h = Queue::new();
    h.add(0, 0..1, Push('a'), Full).unwrap();
    assert!(!linearizable(&WeakBagSpec::new(), &h));
}

#[test]
fn semaphore_counts_permits() {
    use SemaphoreOp::*;
    use SemaphoreRet::*;
    let mut h = History::new();
    h.add(0, 0..1, Acquire(2), Acquired).unwrap();
    h.add(1, 2..3, TryAcquire(1), WouldBlock).unwrap();
    h.add(0, 4..5, Release(1), Released).unwrap();
    h.add(1, 6..7, TryAcquire(1), Acquired).unwrap();
    assert!(linearizable(&SemaphoreSpec::new(2), &h));
    assert!(
        !linearizable(&SemaphoreSpec::new(3), &h),
        "would not block with 1 left"
    );
    assert!(
        !linearizable(&SemaphoreSpec::new(1), &h),
        "2 were never available"
    );

    // A blocking acquire overlapping a release takes effect after it.
    let mut h = History::new();
    h.add(0, 0..1, Acquire(1), Acquired).unwrap();
    h.add(1, 2..6, Acquire(1), Acquired).unwrap();
    h.add(0, 3..4, Release(1), Released).unwrap();
    assert!(linearizable(&SemaphoreSpec::new(1), &h));
}

#[test]
fn register_reads_the_last_write() {
    use RegisterOp::*;
    use RegisterRet::*;
    let mut h = History::new();
    h.add(0, 0..1, Write(1), Written).unwrap();
    h.add(1, 2..5, Write(2), Written).unwrap();
    h.add(0, 3..4, Read, Value(1)).unwrap(); // inside the second write: may see either
    h.add(0, 6..7, Read, Value(2)).unwrap();
    assert!(linearizable(&RegisterSpec::new(0), &h));
    h.add(0, 8..9, Read, Value(1)).unwrap(); // after both: only 2
    assert!(!linearizable(&RegisterSpec::new(0), &h));

    let mut h = History::new();
    h.add(
        0,
        0..3,
        CompareExchange { current: 0, new: 1 },
        Exchanged(Ok(0)),
    )
    .unwrap();
    h.add(
        1,
        1..4,
        CompareExchange { current: 0, new: 2 },
        Exchanged(Err(1)),
    )
    .unwrap();
    assert!(linearizable(&RegisterSpec::new(0), &h));
    let mut h = History::new();
    h.add(
        0,
        0..3,
        CompareExchange { current: 0, new: 1 },
        Exchanged(Ok(0)),
    )
    .unwrap();
    h.add(
        1,
        1..4,
        CompareExchange { current: 0, new: 2 },
        Exchanged(Ok(0)),
    )
    .unwrap();
    assert!(
        !linearizable(&RegisterSpec::new(0), &h),
        "both swapped from 0"
    );
}

#[test]
fn counter_fetch_adds_see_distinct_values() {
    use CounterOp::*;
    use CounterRet::*;
    let mut h = History::new();
    h.add(0, 0..5, FetchAdd(1), Value(1)).unwrap();
    h.add(1, 1..2, FetchAdd(1), Value(0)).unwrap();
    h.add(2, 3..4, Add(5), Added).unwrap();
    h.add(1, 6..7, Get, Value(7)).unwrap();
    assert!(linearizable(&CounterSpec::new(), &h));
    h.add(2, 8..9, Get, Value(6)).unwrap();
    assert!(!linearizable(&CounterSpec::new(), &h));
}

#[test]
fn the_checker_is_deterministic_and_memo_agrees_with_plain_search() {
    let mut h = Queue::new();
    for (t, v) in ['a', 'b', 'c', 'd'].into_iter().enumerate() {
        h.add(t, 0..10, Push(v), Pushed).unwrap();
        h.add(t, 20..30, Pop, Popped(['d', 'c', 'b', 'a'][t]))
            .unwrap();
    }
    let first = check(&QueueSpec::new(), &h);
    assert!(first.is_linearizable());
    for _ in 0..3 {
        assert_eq!(check(&QueueSpec::new(), &h), first);
    }
    assert_eq!(
        Checker::new().memoize(false).check(&QueueSpec::new(), &h),
        first
    );
    h.add(4, 40..41, Pop, Popped('a')).unwrap();
    let memo = check(&QueueSpec::new(), &h);
    assert!(memo.is_violation());
    assert_eq!(
        Checker::new().memoize(false).check(&QueueSpec::new(), &h),
        memo
    );
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
