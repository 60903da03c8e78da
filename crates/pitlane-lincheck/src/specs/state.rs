//! The states of the queue and stack specifications: the values inside, in order, kept
//! inline up to a few and on the heap beyond.
//!
//! The checker makes a new state at every step of its search and compares and hashes states
//! in its memo, so a state of a few values is one small block of memory: no allocation, and
//! hashing and comparison run over a slice.

use std::fmt::{self, Debug};
use std::hash::Hash;

use smallvec::SmallVec;

/// How many values a state holds without allocating; a checked history of 4 threads × 8
/// operations rarely has more inside at once. (Each step copies the whole inline buffer a few
/// times, so more is not free: of 4, 8, 10, 12, 14 and 16, 12 made checks of such histories
/// the cheapest, counted in instructions.)
const INLINE: usize = 12;

type Values<T> = SmallVec<[T; INLINE]>;

/// The values `values` then `last`, in one buffer of the final size.
fn with_last<T: Clone>(values: &[T], last: &T) -> Values<T> {
    values.iter().chain([last]).cloned().collect()
}

/// The bytes of `values`' buffer on the heap: none while they fit inline.
fn spilled_bytes<T>(values: &Values<T>) -> usize {
    if values.spilled() {
        values.capacity() * std::mem::size_of::<T>()
    } else {
        0
    }
}

/// The state of a [`QueueSpec`](super::QueueSpec) or
/// [`BoundedQueueSpec`](super::BoundedQueueSpec): the values in the queue, front first.
///
/// States compare equal when they hold the same values in the same order.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::SequentialSpec;
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet::*, QueueSpec};
///
/// let spec = QueueSpec::new();
/// let one = spec.step(&spec.init(), &Push(1), &Pushed).unwrap();
/// let two = spec.step(&one, &Push(2), &Pushed).unwrap();
/// assert_eq!(two.front(), Some(&1));
/// assert_eq!(two.iter().copied().collect::<Vec<_>>(), [1, 2]);
/// assert_eq!(spec.step(&two, &Pop, &Popped(1)), Some([2].into_iter().collect()));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct QueueState<T>(Values<T>);

impl<T> QueueState<T> {
    /// An empty queue.
    pub fn new() -> Self {
        QueueState(Values::new())
    }

    /// How many values are in the queue.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the queue holds no value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value a pop would return.
    pub fn front(&self) -> Option<&T> {
        self.0.first()
    }

    /// The values, front first.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
}

impl<T: Clone> QueueState<T> {
    /// The queue after pushing `value`.
    pub(super) fn pushed(&self, value: &T) -> Self {
        QueueState(with_last(&self.0, value))
    }

    /// The queue without its front value (the same, empty, if it is empty).
    pub(super) fn popped(&self) -> Self {
        let behind_front = self.0.get(1..).unwrap_or_default();
        QueueState(behind_front.iter().cloned().collect())
    }
}

impl<T> QueueState<T> {
    /// The bytes of the buffer its values spilled to, if they did not fit inline (what
    /// [`SequentialSpec::state_heap_bytes`](crate::SequentialSpec::state_heap_bytes) reports).
    pub(crate) fn heap_bytes(&self) -> usize {
        spilled_bytes(&self.0)
    }
}

impl<T> Default for QueueState<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Debug> Debug for QueueState<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Values pushed in this order, front first.
impl<T> FromIterator<T> for QueueState<T> {
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        QueueState(values.into_iter().collect())
    }
}

impl<'a, T> IntoIterator for &'a QueueState<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The state of a [`StackSpec`](super::StackSpec): the values on the stack, bottom first.
///
/// States compare equal when they hold the same values in the same order.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::SequentialSpec;
/// use pitlane_lincheck::specs::{ContainerOp::*, ContainerRet::*, StackSpec};
///
/// let spec = StackSpec::new();
/// let one = spec.step(&spec.init(), &Push(1), &Pushed).unwrap();
/// let two = spec.step(&one, &Push(2), &Pushed).unwrap();
/// assert_eq!(two.top(), Some(&2));
/// assert_eq!(two.iter().copied().collect::<Vec<_>>(), [1, 2]);
/// assert_eq!(spec.step(&two, &Pop, &Popped(2)), Some(one));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct StackState<T>(Values<T>);

impl<T> StackState<T> {
    /// An empty stack.
    pub fn new() -> Self {
        StackState(Values::new())
    }

    /// How many values are on the stack.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the stack holds no value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value a pop would return.
    pub fn top(&self) -> Option<&T> {
        self.0.last()
    }

    /// The values, bottom first.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
}

impl<T: Clone> StackState<T> {
    /// The stack after pushing `value`.
    pub(super) fn pushed(&self, value: &T) -> Self {
        StackState(with_last(&self.0, value))
    }

    /// The stack without its top value (the same, empty, if it is empty).
    pub(super) fn popped(&self) -> Self {
        let below = self.0.len().saturating_sub(1);
        StackState(self.0[..below].iter().cloned().collect())
    }
}

impl<T> StackState<T> {
    /// The bytes of the buffer its values spilled to, if they did not fit inline (what
    /// [`SequentialSpec::state_heap_bytes`](crate::SequentialSpec::state_heap_bytes) reports).
    pub(crate) fn heap_bytes(&self) -> usize {
        spilled_bytes(&self.0)
    }
}

impl<T> Default for StackState<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Debug> Debug for StackState<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Values pushed in this order, bottom first.
impl<T> FromIterator<T> for StackState<T> {
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        StackState(values.into_iter().collect())
    }
}

impl<'a, T> IntoIterator for &'a StackState<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_beyond_the_inline_size_keep_every_value_in_order() {
        let mut queue = QueueState::new();
        let mut stack = StackState::new();
        for v in 0..3 * INLINE as u32 {
            queue = queue.pushed(&v);
            stack = stack.pushed(&v);
        }
        let all: Vec<u32> = (0..3 * INLINE as u32).collect();
        assert_eq!(queue.iter().copied().collect::<Vec<_>>(), all);
        assert_eq!(stack.iter().copied().collect::<Vec<_>>(), all);
        assert_eq!(queue.popped(), all[1..].iter().copied().collect());
        assert_eq!(
            stack.popped(),
            all[..all.len() - 1].iter().copied().collect()
        );
        assert_eq!(
            format!("{:?}", queue.popped().popped()),
            format!("{:?}", &all[2..])
        );
    }

    #[test]
    fn equal_states_hash_equal_whether_inline_or_spilled() {
        use std::hash::BuildHasher;
        let hasher = foldhash::fast::FixedState::default();
        // The same four values, once built by pops from a spilled buffer.
        let mut spilled: QueueState<u32> = (0..2 * INLINE as u32).collect();
        while spilled.len() > 4 {
            spilled = spilled.popped();
        }
        let inline: QueueState<u32> = (2 * INLINE as u32 - 4..2 * INLINE as u32).collect();
        assert_eq!(spilled, inline);
        assert_eq!(hasher.hash_one(&spilled), hasher.hash_one(&inline));
    }
}
