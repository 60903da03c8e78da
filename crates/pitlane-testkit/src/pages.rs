//! Revocable pages: what an allocator keeps in a bag and takes back, for the revocation tests.
//!
//! ```
//! use pitlane_queue::revoke::RevocableBag;
//! use pitlane_queue::stack::Stack;
//! use pitlane_testkit::pages::Page;
//!
//! let pages = Page::numbered(2);
//! let stack = Stack::new();
//! stack.push_revocable(&pages[1]);
//! // SAFETY: the page was pushed into `stack`, alive here.
//! assert!(unsafe { Stack::revoke(&&pages[1]) });
//! assert!(stack.pop().is_none());
//! ```

use pitlane_queue::revoke::{Revocable, RevokeHandle};

/// A page that can sit in a bag, through `&Page`, and be revoked from it.
#[derive(Debug)]
pub struct Page {
    /// Where the page sits, if in a bag.
    pub handle: RevokeHandle,
    /// Which page this is.
    pub number: usize,
}

impl Page {
    /// Pages `0..count`, in no bag.
    ///
    /// ```
    /// let pages = pitlane_testkit::pages::Page::numbered(3);
    /// assert_eq!(pages[2].number, 2);
    /// assert!(!pages[0].handle.is_in_bag());
    /// ```
    pub fn numbered(count: usize) -> Vec<Page> {
        (0..count)
            .map(|number| Page {
                handle: RevokeHandle::new(),
                number,
            })
            .collect()
    }
}

// SAFETY: the handle lives in the page; a `&Page` only points to it, so every copy of the
// reference reaches the same handle, which outlives it.
unsafe impl Revocable for &Page {
    fn revoke_handle(&self) -> &RevokeHandle {
        &self.handle
    }
}
