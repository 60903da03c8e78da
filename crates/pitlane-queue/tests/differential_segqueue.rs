//! Differential tests of `mpmc::Queue` against the queue it is meant to replace,
//! `crossbeam_queue::SegQueue`: the same random single-threaded script runs on a `SegQueue`
//! and, side by side, on `Queue`s of 1, 2, 3 and 32 cells per segment and of the default size
//! (one made by `new`, one by `Default`), and every step's observations must be the same on
//! all of them as on crossbeam's.
//!
//! What is compared, after every step:
//!
//! - `push`, `pop` (the item's id, or `None`), and `push_mut`/`pop_mut` against crossbeam's
//!   `push_mut`/`pop_mut`;
//! - pitlane's `try_push` against crossbeam's `push` (alone on one thread it must be `Ok`) and
//!   pitlane's `try_pop` against crossbeam's `pop` (`Ok(item)` for `Some(item)`, `Empty` for
//!   `None`; `Transient` or `Full` is a mismatch);
//! - `len` and `is_empty`;
//! - the drops each step causes, in order, read from a thread-local log of ids that every
//!   value writes when it is dropped, and whether (and for which id) a drop panicked;
//! - whether a popped value came out intact (its payload is a pattern of its id);
//! - the end of the queue, one of three: dropped whole with its values in it (the order of
//!   the teardown drops: `SegQueue` drops what is left oldest first); drained by `into_iter`
//!   to the end and then once more (fused); or a few items taken by `into_iter`, and the
//!   iterator dropped with the rest. `into_iter`'s `size_hint` lower bound is compared (0 on
//!   both) and pitlane's upper bound must not be below what is left.
//!
//! The values are ids with drop logs and no payload, zero-sized values (each drop logs the
//! same mark), ids with a 4 KiB inline payload (pitlane *announces* values over 64 bytes), and
//! ids with a 64 KiB boxed payload. Some scripts push values whose `Drop` panics: the panic
//! must come out of the same step on both (out of the drop after a pop, or out of the drop of
//! the queue or of its `into_iter`), with the same drops before it, and, at teardown, the
//! same values left undropped after it (both leak what follows a panicking drop rather than
//! risk a second panic; no step here ever drops a panicking value while unwinding, so no
//! script can abort the process). Scripts also push and pop in bursts of up to 1100 (2100
//! zero-sized) items, to cross crossbeam's 31-slot blocks and pitlane's default 1024-cell
//! segment.
//!
//! Plain tests run a few fixed scripts (teardowns across blocks and segments, a panicking
//! value in a teardown and in a drain) and pin crossbeam's end of each, compare `static`
//! queues made with the `const fn new` of each, and check that both types have the same auto
//! and standard traits for a `T` that is `Send` but not `Sync`.
//!
//! What is deliberately not compared:
//!
//! - `Debug`: crossbeam prints `SegQueue { .. }`, pitlane `Queue { segment: .., len: .. }`.
//! - `into_iter`'s `size_hint` upper bound: crossbeam's is `None` (the default), pitlane's is
//!   its `len` (documented on `weak_bag::IntoIter`); only the lower bounds are compared.
//! - Anything concurrent (this is a single-threaded differential test; the other test files
//!   cover threads), memory use, pitlane's handles and revocable pushes (no crossbeam
//!   counterpart; `props_bags.rs` checks them against a model), and the failure paths of
//!   `try_push`/`try_pop`, which a single thread with memory to spare cannot reach.
#![cfg(not(pitlane_loom))]

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::panic::{AssertUnwindSafe, RefUnwindSafe, UnwindSafe, catch_unwind};
use std::sync::Once;

use crossbeam_queue::SegQueue;
use pitlane_queue::mpmc::{DEFAULT_SEGMENT, Queue};
use pitlane_queue::{PopError, PushError};
use proptest::prelude::*;

thread_local! {
    /// The ids of the values dropped on this thread, in order.
    static DROPPED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// What a zero-sized value logs when it is dropped.
const ZST_MARK: u32 = u32::MAX;

fn log_drop(id: u32) {
    DROPPED.with(|dropped| dropped.borrow_mut().push(id));
}

fn take_drops() -> Vec<u32> {
    DROPPED.with(|dropped| std::mem::take(&mut *dropped.borrow_mut()))
}

/// The payload of a deliberate panic in a value's `Drop`: the value's id.
struct Deliberate(u32);

/// Keeps the deliberate panics out of the test output; any other panic is reported as usual.
fn quiet_deliberate_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Deliberate>().is_none() {
                previous(info);
            }
        }));
    });
}

/// A value the scripts push: it can be made from an id, says its id, checks its payload, and
/// logs its id when dropped.
trait Value: Send + 'static {
    fn make(id: u32, panics: bool) -> Self;
    fn id(&self) -> u32;
    fn intact(&self) -> bool;
}

/// Something a value carries besides its id.
trait Payload: Send + 'static {
    fn make(id: u32) -> Self;
    fn intact(&self, id: u32) -> bool;
}

impl Payload for () {
    fn make(_: u32) -> Self {}
    fn intact(&self, _: u32) -> bool {
        true
    }
}

/// Where a payload of `len` bytes carries its pattern, and what byte is there.
fn pattern(id: u32, len: usize) -> impl Iterator<Item = (usize, u8)> {
    (0..len)
        .step_by(509)
        .chain([len - 1])
        .map(move |at| (at, (id as usize).wrapping_mul(31).wrapping_add(at) as u8))
}

impl Payload for [u8; 4096] {
    fn make(id: u32) -> Self {
        let mut bytes = [0; 4096];
        pattern(id, bytes.len()).for_each(|(at, byte)| bytes[at] = byte);
        bytes
    }
    fn intact(&self, id: u32) -> bool {
        pattern(id, self.len()).all(|(at, byte)| self[at] == byte)
    }
}

impl Payload for Box<[u8; 65536]> {
    fn make(id: u32) -> Self {
        let mut bytes: Box<[u8; 65536]> = vec![0; 65536]
            .into_boxed_slice()
            .try_into()
            .expect("the length is right");
        pattern(id, bytes.len()).for_each(|(at, byte)| bytes[at] = byte);
        bytes
    }
    fn intact(&self, id: u32) -> bool {
        pattern(id, self.len()).all(|(at, byte)| self[at] == byte)
    }
}

/// An id with a payload; its `Drop` logs the id, and panics afterwards if it was made to.
struct Val<P: Payload> {
    id: u32,
    panics: bool,
    payload: P,
}

impl<P: Payload> Drop for Val<P> {
    fn drop(&mut self) {
        log_drop(self.id);
        // Never a second panic while unwinding (that would abort the whole test binary); a
        // queue that dropped a panicking value while unwinding shows in the drop log instead.
        if self.panics && !std::thread::panicking() {
            std::panic::panic_any(Deliberate(self.id));
        }
    }
}

impl<P: Payload> Value for Val<P> {
    fn make(id: u32, panics: bool) -> Self {
        Self {
            id,
            panics,
            payload: P::make(id),
        }
    }
    fn id(&self) -> u32 {
        self.id
    }
    fn intact(&self) -> bool {
        self.payload.intact(self.id)
    }
}

/// A zero-sized value; its drops log [`ZST_MARK`]. It cannot carry a flag, so it never panics.
struct Zst;

impl Drop for Zst {
    fn drop(&mut self) {
        log_drop(ZST_MARK);
    }
}

impl Value for Zst {
    fn make(_: u32, _: bool) -> Self {
        Zst
    }
    fn id(&self) -> u32 {
        ZST_MARK
    }
    fn intact(&self) -> bool {
        true
    }
}

/// One queue under test, crossbeam's or pitlane's, behind the API they share. pitlane's `try_`
/// forms stand beside crossbeam's plain ones, which give the same information on one thread.
trait Subject<T> {
    fn push(&self, value: T);
    /// pitlane's `try_push`; crossbeam's `push`, which cannot fail.
    fn try_push(&self, value: T) -> Result<(), &'static str>;
    fn pop(&self) -> Option<T>;
    /// pitlane's `try_pop` (`Ok(None)` for `Empty`); crossbeam's `pop`.
    fn try_pop(&self) -> Result<Option<T>, &'static str>;
    fn push_mut(&mut self, value: T);
    fn pop_mut(&mut self) -> Option<T>;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool;
    fn into_iter(self: Box<Self>) -> Box<dyn Iterator<Item = T>>;
}

impl<T: 'static> Subject<T> for SegQueue<T> {
    fn push(&self, value: T) {
        SegQueue::push(self, value);
    }
    fn try_push(&self, value: T) -> Result<(), &'static str> {
        SegQueue::push(self, value);
        Ok(())
    }
    fn pop(&self) -> Option<T> {
        SegQueue::pop(self)
    }
    fn try_pop(&self) -> Result<Option<T>, &'static str> {
        Ok(SegQueue::pop(self))
    }
    fn push_mut(&mut self, value: T) {
        SegQueue::push_mut(self, value);
    }
    fn pop_mut(&mut self) -> Option<T> {
        SegQueue::pop_mut(self)
    }
    fn len(&self) -> usize {
        SegQueue::len(self)
    }
    fn is_empty(&self) -> bool {
        SegQueue::is_empty(self)
    }
    fn into_iter(self: Box<Self>) -> Box<dyn Iterator<Item = T>> {
        Box::new(IntoIterator::into_iter(*self))
    }
}

impl<T: 'static, const S: usize> Subject<T> for Queue<T, S> {
    fn push(&self, value: T) {
        Queue::push(self, value);
    }
    fn try_push(&self, value: T) -> Result<(), &'static str> {
        Queue::try_push(self, value).map_err(|error| match error {
            PushError::Full(_) => "try_push: Full",
            PushError::Transient(_) => "try_push: Transient",
        })
    }
    fn pop(&self) -> Option<T> {
        Queue::pop(self)
    }
    fn try_pop(&self) -> Result<Option<T>, &'static str> {
        match Queue::try_pop(self) {
            Ok(value) => Ok(Some(value)),
            Err(PopError::Empty) => Ok(None),
            Err(PopError::Transient) => Err("try_pop: Transient"),
        }
    }
    fn push_mut(&mut self, value: T) {
        Queue::push_mut(self, value);
    }
    fn pop_mut(&mut self) -> Option<T> {
        Queue::pop_mut(self)
    }
    fn len(&self) -> usize {
        Queue::len(self)
    }
    fn is_empty(&self) -> bool {
        Queue::is_empty(self)
    }
    fn into_iter(self: Box<Self>) -> Box<dyn Iterator<Item = T>> {
        Box::new(IntoIterator::into_iter(*self))
    }
}

/// crossbeam's queue first (the reference), then pitlane's, each with its name.
fn subjects<T: 'static>() -> Vec<(&'static str, Box<dyn Subject<T>>)> {
    vec![
        ("SegQueue::new", Box::new(SegQueue::<T>::new())),
        ("Queue<_, 1>", Box::new(Queue::<T, 1>::with_segment_size())),
        ("Queue<_, 2>", Box::new(Queue::<T, 2>::with_segment_size())),
        ("Queue<_, 3>", Box::new(Queue::<T, 3>::with_segment_size())),
        (
            "Queue<_, 32>",
            Box::new(Queue::<T, 32>::with_segment_size()),
        ),
        ("Queue::new", Box::new(Queue::<T>::new())),
        (
            "Queue::default",
            Box::new(Queue::<T, DEFAULT_SEGMENT>::default()),
        ),
    ]
}

/// One step of a script.
#[derive(Clone, Copy, Debug)]
enum Op {
    Push,
    /// A push of a value whose `Drop` panics (a plain push for zero-sized values).
    PushPanicky,
    TryPush,
    PushMut,
    Pop,
    TryPop,
    PopMut,
    PushMany(usize),
    PopMany(usize),
}

/// How a script ends.
#[derive(Clone, Copy, Debug)]
enum End {
    /// Drop the queue with whatever it holds.
    Drop,
    /// `into_iter` to the end, then one more `next`.
    Drain,
    /// Take this many from `into_iter`, then drop the iterator.
    Partial(usize),
}

/// Something a subject did in a step.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    /// A pop or `next`: the id it gave, or `None`.
    Gave(Option<u32>),
    /// A value came out with its payload changed.
    Corrupt(u32),
    /// A `try_` form failed where crossbeam's plain form cannot.
    Failed(&'static str),
    /// Values dropped, in order.
    Dropped(Vec<u32>),
    /// A panic came out of the step: a deliberate one with its id, or another's message.
    Panicked(String),
    /// `into_iter`'s `size_hint` lower bound.
    HintLow(usize),
    /// `into_iter`'s `size_hint` upper bound fell below what was left.
    HintTooLow(Option<usize>, usize),
    Len(usize),
    IsEmpty(bool),
}

fn describe(payload: &(dyn Any + Send)) -> String {
    if let Some(Deliberate(id)) = payload.downcast_ref::<Deliberate>() {
        format!("deliberate #{id}")
    } else if let Some(message) = payload.downcast_ref::<&str>() {
        format!("panic: {message}")
    } else if let Some(message) = payload.downcast_ref::<String>() {
        format!("panic: {message}")
    } else {
        "panic with an unknown payload".to_owned()
    }
}

/// Runs `body`, then records the drops it caused and the panic that came out of it, if any.
fn record(events: &mut Vec<Event>, body: impl FnOnce(&mut Vec<Event>)) {
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&mut *events)));
    let drops = take_drops();
    if !drops.is_empty() {
        events.push(Event::Dropped(drops));
    }
    if let Err(payload) = outcome {
        events.push(Event::Panicked(describe(&*payload)));
    }
}

/// Records what a pop gave, then drops it (which may panic).
fn gave<T: Value>(events: &mut Vec<Event>, value: Option<T>) {
    if let Some(value) = &value {
        if !value.intact() {
            events.push(Event::Corrupt(value.id()));
        }
    }
    events.push(Event::Gave(value.as_ref().map(Value::id)));
    drop(value);
}

/// Runs `op` on one subject; `first` is the id of the first value the step pushes.
fn step<T: Value>(subject: &mut Box<dyn Subject<T>>, op: Op, first: u32) -> Vec<Event> {
    let mut events = Vec::new();
    record(&mut events, |events| match op {
        Op::Push => subject.push(T::make(first, false)),
        Op::PushPanicky => subject.push(T::make(first, true)),
        Op::TryPush => {
            if let Err(error) = subject.try_push(T::make(first, false)) {
                events.push(Event::Failed(error));
            }
        }
        Op::PushMut => subject.push_mut(T::make(first, false)),
        Op::Pop => gave(events, subject.pop()),
        Op::TryPop => match subject.try_pop() {
            Ok(value) => gave(events, value),
            Err(error) => events.push(Event::Failed(error)),
        },
        Op::PopMut => gave(events, subject.pop_mut()),
        Op::PushMany(count) => {
            (first..)
                .take(count)
                .for_each(|id| subject.push(T::make(id, false)));
        }
        Op::PopMany(count) => (0..count).for_each(|_| gave(events, subject.pop())),
    });
    events.push(Event::Len(subject.len()));
    events.push(Event::IsEmpty(subject.is_empty()));
    events
}

/// Ends one subject's script the way `end` says.
fn finish<T: Value>(subject: Box<dyn Subject<T>>, end: End) -> Vec<Event> {
    let mut events = Vec::new();
    match end {
        End::Drop => record(&mut events, |_| drop(subject)),
        End::Drain | End::Partial(_) => {
            let left = subject.len();
            let mut items = subject.into_iter();
            let (low, high) = items.size_hint();
            events.push(Event::HintLow(low));
            if high.is_some_and(|high| high < left) {
                events.push(Event::HintTooLow(high, left));
            }
            let take = match end {
                End::Partial(take) => take,
                _ => usize::MAX,
            };
            let mut taken = Vec::new();
            for _ in 0..take {
                // The value is kept, not dropped, while the iterator lives: a panic from its
                // drop would unwind through the iterator, whose drop could panic again.
                let next = items.next();
                events.push(Event::Gave(next.as_ref().map(Value::id)));
                if let Some(value) = &next {
                    if !value.intact() {
                        events.push(Event::Corrupt(value.id()));
                    }
                }
                match next {
                    Some(value) => taken.push(value),
                    None => {
                        // Fused: once more gives `None` again.
                        let again = items.next();
                        events.push(Event::Gave(again.as_ref().map(Value::id)));
                        taken.extend(again);
                        break;
                    }
                }
            }
            record(&mut events, |_| drop(items));
            for value in taken {
                record(&mut events, |_| drop(value));
            }
        }
    }
    events
}

/// Runs the script on every subject, step by step, and fails at the first step where a pitlane
/// queue's events differ from crossbeam's.
fn differ<T: Value>(ops: &[Op], end: End) -> Result<Vec<Vec<Event>>, TestCaseError> {
    quiet_deliberate_panics();
    take_drops();
    let mut subjects = subjects::<T>();
    let mut next_id = 0_u32;
    let mut trace = Vec::new();
    for (index, &op) in ops.iter().enumerate() {
        let first = next_id;
        next_id += match op {
            Op::Push | Op::PushPanicky | Op::TryPush | Op::PushMut => 1,
            Op::PushMany(count) => count as u32,
            Op::Pop | Op::TryPop | Op::PopMut | Op::PopMany(_) => 0,
        };
        let mut all = subjects.iter_mut();
        let (reference_name, reference) = all.next().expect("crossbeam's queue comes first");
        let expected = step(reference, op, first);
        for (name, subject) in all {
            let got = step(subject, op, first);
            prop_assert_eq!(
                &got,
                &expected,
                "step {} ({:?}): {} differs from {}; script so far: {:?}",
                index,
                op,
                name,
                reference_name,
                &ops[..=index]
            );
        }
        trace.push(expected);
    }
    let mut all = subjects.into_iter();
    let (reference_name, reference) = all.next().expect("crossbeam's queue comes first");
    let expected = finish(reference, end);
    for (name, subject) in all {
        let got = finish(subject, end);
        prop_assert_eq!(
            &got,
            &expected,
            "end {:?}: {} differs from {}",
            end,
            name,
            reference_name
        );
    }
    trace.push(expected);
    Ok(trace)
}

fn op(max_burst: usize, panicky: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => Just(Op::Push),
        panicky => Just(Op::PushPanicky),
        2 => Just(Op::TryPush),
        2 => Just(Op::PushMut),
        6 => Just(Op::Pop),
        2 => Just(Op::TryPop),
        2 => Just(Op::PopMut),
        1 => (0..=max_burst).prop_map(Op::PushMany),
        1 => (0..=max_burst).prop_map(Op::PopMany),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        Just(End::Drop),
        Just(End::Drain),
        (0_usize..8).prop_map(End::Partial),
    ]
}

/// Scripts of up to 100 steps, bursts of up to `max_burst` pushes or pops, and panicking
/// values pushed with weight `panicky` (against 25 for the rest).
fn script(max_burst: usize, panicky: u32) -> impl Strategy<Value = (Vec<Op>, End)> {
    (prop::collection::vec(op(max_burst, panicky), 0..100), end())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn logged_values_behave_as_in_segqueue((ops, end) in script(1100, 0)) {
        differ::<Val<()>>(&ops, end)?;
    }

    #[test]
    fn values_whose_drop_panics_behave_as_in_segqueue((ops, end) in script(40, 2)) {
        differ::<Val<()>>(&ops, end)?;
    }

    #[test]
    fn zero_sized_values_behave_as_in_segqueue((ops, end) in script(2100, 0)) {
        differ::<Zst>(&ops, end)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn four_kib_values_behave_as_in_segqueue((ops, end) in script(1100, 1)) {
        differ::<Val<[u8; 4096]>>(&ops, end)?;
    }

    #[test]
    fn boxed_64_kib_values_behave_as_in_segqueue((ops, end) in script(40, 1)) {
        differ::<Val<Box<[u8; 65536]>>>(&ops, end)?;
    }
}

/// A few fixed scripts the random ones may take long to hit: the teardown order of values
/// left across several blocks and segments, a panicking value in the middle of a teardown
/// (both queues drop the values before it, oldest first, and leak the ones after it), and a
/// panicking value met by a partial drain and by a full one. Each names the last events of
/// crossbeam's run, which every pitlane queue matched.
#[test]
fn fixed_scripts_behave_as_in_segqueue() {
    use Event::{Dropped, Gave, HintLow, Panicked};
    let deliberate = |id: u32| Panicked(format!("deliberate #{id}"));
    let cases: [(Vec<Op>, End, Vec<Event>); 6] = [
        (
            vec![Op::PushMany(100), Op::PopMany(7)],
            End::Drop,
            vec![Dropped((7..100).collect())],
        ),
        (
            vec![Op::PushMany(1030), Op::PopMany(1)],
            End::Drop,
            vec![Dropped((1..1030).collect())],
        ),
        (
            vec![Op::PushMany(40), Op::PushPanicky, Op::PushMany(40)],
            End::Drop,
            vec![Dropped((0..=40).collect()), deliberate(40)],
        ),
        (
            vec![Op::PushMany(5), Op::PushPanicky, Op::PushMany(5)],
            End::Partial(3),
            vec![
                HintLow(0),
                Gave(Some(0)),
                Gave(Some(1)),
                Gave(Some(2)),
                Dropped(vec![3, 4, 5]),
                deliberate(5),
                Dropped(vec![0]),
                Dropped(vec![1]),
                Dropped(vec![2]),
            ],
        ),
        (
            vec![Op::PushMany(5), Op::PushPanicky, Op::PushMany(5)],
            End::Drain,
            (0..=10)
                .map(|id| Gave(Some(id)))
                .chain([Gave(None), Gave(None)])
                .chain((0..=5).map(|id| Dropped(vec![id])))
                .chain([deliberate(5)])
                .chain((6..=10).map(|id| Dropped(vec![id])))
                .collect(),
        ),
        (
            vec![Op::PushPanicky, Op::PushPanicky, Op::Pop, Op::PushMany(3)],
            End::Drop,
            vec![Dropped(vec![1]), deliberate(1)],
        ),
    ];
    for (ops, end, last) in cases {
        match differ::<Val<()>>(&ops, end) {
            Err(error) => panic!("{ops:?} then {end:?}: {error}"),
            Ok(trace) => {
                let ending = trace.last().expect("the end is traced");
                assert!(
                    ending.ends_with(&last),
                    "{ops:?} then {end:?}: crossbeam ended with {ending:?}"
                );
            }
        }
    }
}

/// `static` queues, made by each type's `const fn new` (and pitlane's `const fn
/// with_segment_size`), follow the same script with the same results.
#[test]
fn static_queues_behave_alike() {
    static CROSSBEAM: SegQueue<Val<()>> = SegQueue::new();
    static PITLANE: Queue<Val<()>> = Queue::new();
    static PITLANE_ONE: Queue<Val<()>, 1> = Queue::with_segment_size();

    quiet_deliberate_panics();
    take_drops();
    let pitlanes: [&(dyn Subject<Val<()>> + Sync); 2] = [&PITLANE, &PITLANE_ONE];
    assert_eq!(CROSSBEAM.len(), 0);
    assert!(CROSSBEAM.is_empty());
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for id in 0..600 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        if seed % 5 < 3 {
            CROSSBEAM.push(Val::make(id, false));
            pitlanes
                .iter()
                .for_each(|queue| queue.push(Val::make(id, false)));
        } else {
            let expected = CROSSBEAM.pop().map(|value| value.id);
            let expected_drops = take_drops();
            for queue in pitlanes {
                assert_eq!(queue.pop().map(|value| value.id), expected, "pop {id}");
                assert_eq!(take_drops(), expected_drops);
            }
        }
        for queue in pitlanes {
            assert_eq!(queue.len(), CROSSBEAM.len(), "after step {id}");
            assert_eq!(queue.is_empty(), CROSSBEAM.is_empty());
        }
    }
    assert!(
        CROSSBEAM.len() > 31,
        "the script should leave several blocks"
    );
    while let Some(expected) = CROSSBEAM.pop() {
        let expected_id = expected.id;
        drop(expected);
        let expected_drops = take_drops();
        for queue in pitlanes {
            assert_eq!(queue.pop().map(|value| value.id), Some(expected_id));
            assert_eq!(take_drops(), expected_drops);
        }
    }
    for queue in pitlanes {
        assert_eq!(queue.pop().map(|value| value.id), None);
        assert!(queue.is_empty());
    }
}

/// Both types have the same auto and standard traits for a `T` that is `Send` but not `Sync`
/// (a compile-time check; `api_traits.rs` pins pitlane's own list).
#[test]
fn same_traits_as_segqueue() {
    fn traits<Q: Send + Sync + UnwindSafe + RefUnwindSafe + Default + fmt::Debug>() {}
    fn into_iter<Q: IntoIterator<Item = std::cell::Cell<u32>>>() {}
    traits::<SegQueue<std::cell::Cell<u32>>>();
    traits::<Queue<std::cell::Cell<u32>>>();
    traits::<Queue<std::cell::Cell<u32>, 1>>();
    into_iter::<SegQueue<std::cell::Cell<u32>>>();
    into_iter::<Queue<std::cell::Cell<u32>>>();
}
