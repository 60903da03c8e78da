//! The owned iterator of a bag holding a revoked item. The bag's count keeps a revoked item
//! until a pop passes over it (`revoke` has no reference to the bag), so `IntoIter` cannot know
//! its exact length: it is not an `ExactSizeIterator` (the queue audit found it claiming one
//! more item than it yielded), and its `size_hint` is `(0, Some(size_guess))`, which must bound
//! what it yields.
#![cfg(not(pitlane_loom))]

use std::sync::Arc;

use pitlane_queue::bagpipe::Bagpipe;
use pitlane_queue::mpmc::Queue;
use pitlane_queue::revoke::{Revocable, RevocableBag, RevokeHandle};
use pitlane_queue::stack::Stack;

// Under `--cfg pitlane_alloc_global` (a CI step), pitlane-alloc is this binary's global allocator.
#[cfg(pitlane_alloc_global)]
extern crate pitlane_alloc;

#[derive(Clone, Debug)]
struct Page(Arc<RevokeHandle>);

// SAFETY: every clone reaches the same handle through the `Arc`.
unsafe impl Revocable for Page {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.0
    }
}

fn check<B>(name: &str, bag: B)
where
    B: RevocableBag<Item = Page> + IntoIterator<Item = Page>,
{
    let kept = Page(Arc::new(RevokeHandle::new()));
    let gone = Page(Arc::new(RevokeHandle::new()));
    bag.push_revocable(kept.clone());
    bag.push_revocable(gone.clone());
    // SAFETY: `gone` was pushed into `bag`, alive here.
    assert!(unsafe { B::revoke(&gone) });
    assert_eq!(bag.size_guess(), 2, "{name}: the revoked item still counts");
    let mut iter = bag.into_iter();
    let (lower, upper) = iter.size_hint();
    let yielded: Vec<Page> = iter.by_ref().collect();
    assert_eq!(yielded.len(), 1, "{name}: only the kept item comes out");
    assert!(Arc::ptr_eq(&yielded[0].0, &kept.0), "{name}: the kept item");
    assert!(
        lower <= yielded.len() && upper.is_some_and(|upper| yielded.len() <= upper),
        "{name}: size_hint {:?} does not bound the {} items yielded",
        (lower, upper),
        yielded.len()
    );
    assert_eq!(iter.size_hint(), (0, Some(0)), "{name}: drained");
}

#[test]
fn the_owned_iterator_of_a_bag_with_a_revoked_item_bounds_what_it_yields() {
    check("stack", Stack::new());
    check("queue", Queue::<Page, 4>::with_segment_size());
    check("bagpipe", Bagpipe::<Stack<Page>>::with_pipes(1).unwrap());
}
