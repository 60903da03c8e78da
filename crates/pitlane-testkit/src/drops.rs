//! Values that count their drops, for tests that check every value is dropped exactly once.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use pitlane_testkit::drops::Counted;
//!
//! let drops = AtomicUsize::new(0);
//! let values: Vec<Counted<'_>> = (0..3).map(|id| Counted::new(id, &drops)).collect();
//! assert_eq!(values[2].id, 2);
//! drop(values);
//! assert_eq!(drops.load(Ordering::Relaxed), 3);
//! ```

use core::sync::atomic::{AtomicUsize, Ordering};

/// A value with an id that adds one to its test's counter when it is dropped.
#[derive(Debug)]
pub struct Counted<'a> {
    /// Which value this is, for order and identity checks.
    pub id: usize,
    drops: &'a AtomicUsize,
}

impl<'a> Counted<'a> {
    /// Value `id`, counting its drop in `drops`.
    ///
    /// ```
    /// let drops = std::sync::atomic::AtomicUsize::new(0);
    /// assert_eq!(pitlane_testkit::drops::Counted::new(7, &drops).id, 7);
    /// ```
    pub fn new(id: usize, drops: &'a AtomicUsize) -> Self {
        Self { id, drops }
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}
