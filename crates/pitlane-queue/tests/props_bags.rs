//! Property tests of the bags against sequential models: single-threaded scripts of pushes,
//! pops and their `try_` forms, made through every door a bag has — its inherent methods, the
//! [`WeakBag`] trait, `&bag` as a [`BagHandle`], and up to two handles that the script makes,
//! releases and drops as it goes — checked step by step against a `VecDeque` (an
//! `mpmc::Queue`, for several segment sizes), a `Vec` (a `Stack`) or a multiset (a `Bagpipe`
//! of queues or of stacks, with 1, 2 or 5 pipes). After every step the bag's `len`,
//! `is_empty` and `size_guess` must equal the model's. A script ends by dropping the bag, by
//! draining it with `into_iter`, or by taking a few items from `into_iter` and dropping the
//! rest; every item pushed must then have been dropped exactly once.
//!
//! Alone on one thread no attempt can lose a race, so a `try_push` must succeed and a
//! `try_pop` must give the model's item or `Empty`: never `Transient`.
#![cfg(not(pitlane_loom))]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::{DEFAULT_SEGMENT, Queue};
use pitlane_queue::stack::Stack;
use pitlane_queue::{BagHandle, PopError, PushError, WeakBag};
use proptest::prelude::*;

thread_local! {
    /// The ids of the items dropped on this thread, in order.
    static DROPPED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// An item that logs its id when it is dropped.
#[derive(Debug, PartialEq, Eq)]
struct Item(u32);

impl Drop for Item {
    fn drop(&mut self) {
        DROPPED.with(|dropped| dropped.borrow_mut().push(self.0));
    }
}

/// What order the model keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Fifo,
    Lifo,
    Unordered,
}

/// The sequential model: the ids in the bag, oldest first.
struct Model {
    order: Order,
    ids: VecDeque<u32>,
}

impl Model {
    fn push(&mut self, id: u32) {
        self.ids.push_back(id);
    }

    /// Checks an item the bag gave (or its `None`) against the model, and takes it out.
    fn take(&mut self, got: Option<&Item>) -> Result<(), TestCaseError> {
        let Some(item) = got else {
            prop_assert!(
                self.ids.is_empty(),
                "no item, but the model holds {:?}",
                self.ids
            );
            return Ok(());
        };
        let expected = match self.order {
            Order::Fifo => self.ids.pop_front(),
            Order::Lifo => self.ids.pop_back(),
            Order::Unordered => {
                let at = self.ids.iter().position(|&id| id == item.0);
                prop_assert!(at.is_some(), "{item:?} is not in the bag {:?}", self.ids);
                at.and_then(|at| self.ids.remove(at))
            }
        };
        prop_assert_eq!(Some(item.0), expected, "wrong item for {:?}", self.order);
        Ok(())
    }
}

/// A bag under test, and what it offers beyond [`WeakBag`].
trait Subject: WeakBag<Item = Item> + IntoIterator<Item = Item> + fmt::Debug {
    const ORDER: Order;
    fn inherent_len(&self) -> usize;
    fn inherent_is_empty(&self) -> bool;
    fn inherent_push(&self, item: Item);
    fn inherent_try_push(&self, item: Item) -> Result<(), PushError<Item>>;
    fn inherent_pop(&self) -> Option<Item>;
    fn inherent_try_pop(&self) -> Result<Item, PopError>;
    /// A Bagpipe's own `push_bounded`; `try_push` elsewhere.
    fn inherent_bounded_push(&self, item: Item, _budget: usize) -> Result<(), PushError<Item>> {
        self.inherent_try_push(item)
    }
    /// A Bagpipe's own `pop_bounded`; `try_pop` elsewhere.
    fn inherent_bounded_pop(&self, _budget: usize) -> Result<Item, PopError> {
        self.inherent_try_pop()
    }
    /// A Bagpipe handle's `push_bounded`; a plain handle push elsewhere.
    fn bounded_push<'a>(
        handle: &Self::Handle<'a>,
        item: Item,
        _budget: usize,
    ) -> Result<(), PushError<Item>>
    where
        Self: 'a,
    {
        handle.push(item);
        Ok(())
    }
    /// A Bagpipe handle's `pop_bounded`; a plain handle `try_pop` elsewhere.
    fn bounded_pop<'a>(handle: &Self::Handle<'a>, _budget: usize) -> Result<Item, PopError>
    where
        Self: 'a,
    {
        handle.try_pop()
    }
}

macro_rules! inherent {
    () => {
        fn inherent_push(&self, item: Item) {
            self.push(item)
        }
        fn inherent_try_push(&self, item: Item) -> Result<(), PushError<Item>> {
            self.try_push(item)
        }
        fn inherent_pop(&self) -> Option<Item> {
            self.pop()
        }
        fn inherent_try_pop(&self) -> Result<Item, PopError> {
            self.try_pop()
        }
    };
}

impl<const S: usize> Subject for Queue<Item, S> {
    const ORDER: Order = Order::Fifo;
    fn inherent_len(&self) -> usize {
        self.len()
    }
    fn inherent_is_empty(&self) -> bool {
        self.is_empty()
    }
    inherent!();
}

impl Subject for Stack<Item> {
    const ORDER: Order = Order::Lifo;
    fn inherent_len(&self) -> usize {
        self.len()
    }
    fn inherent_is_empty(&self) -> bool {
        self.is_empty()
    }
    inherent!();
}

macro_rules! bagpipe_subject {
    ($($generics:tt)*) => {
        impl $($generics)* {
            const ORDER: Order = Order::Unordered;
            fn inherent_len(&self) -> usize {
                self.size_guess()
            }
            fn inherent_is_empty(&self) -> bool {
                self.size_guess() == 0
            }
            inherent!();
            fn inherent_bounded_push(&self, item: Item, budget: usize) -> Result<(), PushError<Item>> {
                self.push_bounded(item, budget)
            }
            fn inherent_bounded_pop(&self, budget: usize) -> Result<Item, PopError> {
                self.pop_bounded(budget)
            }
            fn bounded_push<'a>(
                handle: &Self::Handle<'a>,
                item: Item,
                budget: usize,
            ) -> Result<(), PushError<Item>>
            where
                Self: 'a,
            {
                handle.push_bounded(item, budget)
            }
            fn bounded_pop<'a>(handle: &Self::Handle<'a>, budget: usize) -> Result<Item, PopError>
            where
                Self: 'a,
            {
                handle.pop_bounded(budget)
            }
        }
    };
}

bagpipe_subject!(<const S: usize> Subject for Bagpipe<Queue<Item, S>>);
bagpipe_subject!(Subject for Bagpipe<Stack<Item>>);

/// Which door an operation goes through.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// The bag's own method.
    Inherent,
    /// The [`WeakBag`] method, called on the bag.
    Trait,
    /// `&bag` as a [`BagHandle`].
    Ref,
    /// Handle 0 or 1 of the script, or the bag's own method while that handle does not exist.
    Handle(usize),
}

#[derive(Clone, Debug)]
enum Op {
    Push(Via),
    TryPush(Via),
    PushMany(Via, u16),
    Pop(Via),
    TryPop(Via),
    PopMany(Via, u16),
    MakeHandle(usize),
    DropHandle(usize),
    Release(usize),
    /// Through the handle, or without one the bag's own bounded call (a Bagpipe's) or `try_*`.
    PushBounded(usize, usize),
    PopBounded(usize, usize),
    Debug,
}

#[derive(Clone, Copy, Debug)]
enum Finish {
    Drop,
    IntoIterAll,
    IntoIterTake(u16),
}

fn via() -> impl Strategy<Value = Via> {
    prop_oneof![
        Just(Via::Inherent),
        Just(Via::Trait),
        Just(Via::Ref),
        (0..2_usize).prop_map(Via::Handle),
    ]
}

/// A budget for the bounded operations, from the edges and between them.
fn budget() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0), Just(1), Just(2), Just(usize::MAX), any::<usize>()]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => via().prop_map(Op::Push),
        3 => via().prop_map(Op::TryPush),
        1 => (via(), 0..150_u16).prop_map(|(v, n)| Op::PushMany(v, n)),
        5 => via().prop_map(Op::Pop),
        3 => via().prop_map(Op::TryPop),
        1 => (via(), 0..150_u16).prop_map(|(v, n)| Op::PopMany(v, n)),
        1 => (0..2_usize).prop_map(Op::MakeHandle),
        1 => (0..2_usize).prop_map(Op::DropHandle),
        1 => (0..2_usize).prop_map(Op::Release),
        1 => (0..2_usize, budget()).prop_map(|(h, b)| Op::PushBounded(h, b)),
        1 => (0..2_usize, budget()).prop_map(|(h, b)| Op::PopBounded(h, b)),
        1 => Just(Op::Debug),
    ]
}

fn finish() -> impl Strategy<Value = Finish> {
    prop_oneof![
        Just(Finish::Drop),
        Just(Finish::IntoIterAll),
        (0..40_u16).prop_map(Finish::IntoIterTake),
    ]
}

/// A script: whether its two handles live from start to end (then `MakeHandle` and
/// `DropHandle` do nothing), its operations, and how it ends.
fn script() -> impl Strategy<Value = (bool, Vec<Op>, Finish)> {
    (
        any::<bool>(),
        proptest::collection::vec(op(), 0..120),
        finish(),
    )
}

/// The state of a running script.
struct Run<'b, B: Subject + 'b> {
    bag: &'b B,
    handles: [Option<B::Handle<'b>>; 2],
    model: Model,
    next_id: u32,
}

impl<'b, B: Subject + 'b> Run<'b, B> {
    fn fresh(&mut self) -> Item {
        let item = Item(self.next_id);
        self.next_id += 1;
        self.model.push(item.0);
        item
    }

    fn push(&mut self, via: Via, attempt: bool) -> Result<(), TestCaseError> {
        let item = self.fresh();
        let bag = self.bag;
        let result = match (via, attempt) {
            (Via::Inherent, false) => {
                bag.inherent_push(item);
                Ok(())
            }
            (Via::Inherent, true) => bag.inherent_try_push(item),
            (Via::Trait, false) => {
                WeakBag::push(bag, item);
                Ok(())
            }
            (Via::Trait, true) => WeakBag::try_push(bag, item),
            (Via::Ref, false) => {
                BagHandle::push(&bag, item);
                Ok(())
            }
            (Via::Ref, true) => BagHandle::try_push(&bag, item),
            (Via::Handle(h), attempt) => match (&self.handles[h], attempt) {
                (Some(handle), false) => {
                    handle.push(item);
                    Ok(())
                }
                (Some(handle), true) => handle.try_push(item),
                (None, false) => {
                    bag.inherent_push(item);
                    Ok(())
                }
                (None, true) => bag.inherent_try_push(item),
            },
        };
        if let Err(error) = result {
            let error = format!("{error:?}");
            // Keep the drop log complete: the item came back, and is dropped here.
            self.model.ids.pop_back();
            return Err(TestCaseError::fail(format!(
                "a push alone on its bag failed: {error}"
            )));
        }
        Ok(())
    }

    /// A pop through `via`, as `Some(Ok)` or `Err(PopError)`; `attempt` for `try_pop`.
    fn pop(&mut self, via: Via, attempt: bool) -> Result<(), TestCaseError> {
        let bag = self.bag;
        let result = match (via, attempt) {
            (Via::Inherent, false) => bag.inherent_pop().ok_or(PopError::Empty),
            (Via::Inherent, true) => bag.inherent_try_pop(),
            (Via::Trait, false) => WeakBag::pop(bag).ok_or(PopError::Empty),
            (Via::Trait, true) => WeakBag::try_pop(bag),
            (Via::Ref, false) => BagHandle::pop(&bag).ok_or(PopError::Empty),
            (Via::Ref, true) => BagHandle::try_pop(&bag),
            (Via::Handle(h), attempt) => match (&self.handles[h], attempt) {
                (Some(handle), false) => handle.pop().ok_or(PopError::Empty),
                (Some(handle), true) => handle.try_pop(),
                (None, false) => bag.inherent_pop().ok_or(PopError::Empty),
                (None, true) => bag.inherent_try_pop(),
            },
        };
        self.popped(result)
    }

    fn popped(&mut self, result: Result<Item, PopError>) -> Result<(), TestCaseError> {
        match result {
            Ok(item) => self.model.take(Some(&item)),
            Err(PopError::Empty) => self.model.take(None),
            Err(PopError::Transient) => {
                Err(TestCaseError::fail("a pop alone on its bag lost a race"))
            }
        }
    }

    fn step(&mut self, op: &Op, stable_handles: bool) -> Result<(), TestCaseError> {
        match *op {
            Op::Push(via) => self.push(via, false)?,
            Op::TryPush(via) => self.push(via, true)?,
            Op::PushMany(via, n) => (0..n).try_for_each(|_| self.push(via, false))?,
            Op::Pop(via) => self.pop(via, false)?,
            Op::TryPop(via) => self.pop(via, true)?,
            Op::PopMany(via, n) => (0..n).try_for_each(|i| self.pop(via, i % 2 == 0))?,
            Op::MakeHandle(h) if !stable_handles => self.handles[h] = Some(self.bag.handle()),
            Op::DropHandle(h) if !stable_handles => self.handles[h] = None,
            Op::MakeHandle(_) | Op::DropHandle(_) => {}
            Op::Release(h) => {
                if let Some(handle) = &self.handles[h] {
                    handle.release();
                }
            }
            Op::PushBounded(h, budget) => {
                let item = self.fresh();
                let result = match &self.handles[h] {
                    Some(handle) => B::bounded_push(handle, item, budget),
                    None => self.bag.inherent_bounded_push(item, budget),
                };
                if let Err(error) = result {
                    let error = format!("{error:?}");
                    self.model.ids.pop_back();
                    return Err(TestCaseError::fail(format!(
                        "a bounded push alone failed: {error}"
                    )));
                }
            }
            Op::PopBounded(h, budget) => {
                let result = match &self.handles[h] {
                    Some(handle) => B::bounded_pop(handle, budget),
                    None => self.bag.inherent_bounded_pop(budget),
                };
                self.popped(result)?;
            }
            Op::Debug => {
                let shown = format!("{:?}", self.bag);
                prop_assert!(!shown.is_empty());
            }
        }
        // Nothing is in flight: every count is exact.
        let len = self.model.ids.len();
        prop_assert_eq!(self.bag.inherent_len(), len, "len after {:?}", op);
        prop_assert_eq!(self.bag.size_guess(), len, "size_guess after {:?}", op);
        prop_assert_eq!(
            self.bag.inherent_is_empty(),
            len == 0,
            "is_empty after {:?}",
            op
        );
        Ok(())
    }
}

/// Runs `ops` on `bag`, ends with `finish`, and checks that every item was dropped once.
fn check<B: Subject>(
    bag: B,
    stable_handles: bool,
    ops: &[Op],
    finish: Finish,
) -> Result<(), TestCaseError> {
    DROPPED.with(|dropped| dropped.borrow_mut().clear());
    let (model, pushed) = {
        let mut run = Run {
            bag: &bag,
            handles: [None, None],
            model: Model {
                order: B::ORDER,
                ids: VecDeque::new(),
            },
            next_id: 0,
        };
        if stable_handles {
            run.handles = [Some(bag.handle()), Some(bag.handle())];
        }
        for op in ops {
            run.step(op, stable_handles)?;
        }
        (run.model, run.next_id)
    };
    let mut model = model;
    let left = model.ids.len();
    match finish {
        Finish::Drop => drop(bag),
        Finish::IntoIterAll => {
            let mut items = bag.into_iter();
            prop_assert_eq!(items.size_hint(), (0, Some(left)));
            for item in items.by_ref() {
                model.take(Some(&item))?;
            }
            prop_assert!(model.ids.is_empty(), "into_iter stopped early");
            prop_assert!(items.next().is_none(), "into_iter is fused");
            prop_assert_eq!(items.size_hint(), (0, Some(0)));
        }
        Finish::IntoIterTake(k) => {
            let mut items = bag.into_iter();
            for _ in 0..k {
                prop_assert_eq!(items.size_hint(), (0, Some(model.ids.len())));
                let item = items.next();
                model.take(item.as_ref())?;
            }
            drop(items);
        }
    }
    let mut dropped = DROPPED.with(|dropped| std::mem::take(&mut *dropped.borrow_mut()));
    dropped.sort_unstable();
    prop_assert_eq!(
        dropped,
        (0..pushed).collect::<Vec<_>>(),
        "every item dropped exactly once"
    );
    Ok(())
}

/// Pipe counts: 1, 2, and 5, which rounds up to 8.
fn pipes() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1_usize), Just(2), Just(5)]
}

fn bagpipe<B: WeakBag + Default>(pipes: usize) -> Bagpipe<B> {
    let bag = Bagpipe::with_pipes(pipes).expect("1, 2 and 5 pipes are allowed");
    assert_eq!(bag.pipe_count(), pipes.next_power_of_two());
    bag
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn queue_of_one_cell_segments_is_a_vecdeque((stable, ops, end) in script()) {
        check(Queue::<Item, 1>::with_segment_size(), stable, &ops, end)?;
    }

    #[test]
    fn queue_of_two_cell_segments_is_a_vecdeque((stable, ops, end) in script()) {
        check(Queue::<Item, 2>::with_segment_size(), stable, &ops, end)?;
    }

    #[test]
    fn queue_of_three_cell_segments_is_a_vecdeque((stable, ops, end) in script()) {
        check(Queue::<Item, 3>::with_segment_size(), stable, &ops, end)?;
    }

    #[test]
    fn queue_of_64_cell_segments_is_a_vecdeque((stable, ops, end) in script()) {
        check(Queue::<Item, 64>::with_segment_size(), stable, &ops, end)?;
    }

    #[test]
    fn queue_of_default_segments_is_a_vecdeque((stable, ops, end) in script()) {
        let queue: Queue<Item, DEFAULT_SEGMENT> = Queue::new();
        check(queue, stable, &ops, end)?;
    }

    #[test]
    fn stack_is_a_vec((stable, ops, end) in script()) {
        check(Stack::new(), stable, &ops, end)?;
    }

    #[test]
    fn bagpipe_of_queues_is_a_multiset(pipes in pipes(), (stable, ops, end) in script()) {
        check(bagpipe::<Queue<Item, 3>>(pipes), stable, &ops, end)?;
    }

    #[test]
    fn bagpipe_of_default_queues_is_a_multiset(pipes in pipes(), (stable, ops, end) in script()) {
        check(bagpipe::<Queue<Item>>(pipes), stable, &ops, end)?;
    }

    #[test]
    fn bagpipe_of_stacks_is_a_multiset(pipes in pipes(), (stable, ops, end) in script()) {
        check(bagpipe::<Stack<Item>>(pipes), stable, &ops, end)?;
    }
}

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;
