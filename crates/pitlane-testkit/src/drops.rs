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

use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

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

/// How often each of up to `ids` values was dropped, for values that hand their id out
/// themselves and may be dropped on any thread, in any order, by user code inside a
/// structure's operation. Leaked, so that values in `static` structures can name it.
///
/// ```
/// let ledger = pitlane_testkit::drops::Ledger::leaked(16);
/// let (a, b) = (ledger.id(), ledger.id());
/// assert_eq!((a, b), (0, 1));
/// assert_eq!(ledger.dropped(a), 0);
/// assert_eq!(ledger.dropped(b), 0);
/// ledger.assert_each_dropped_once();
/// ```
#[derive(Debug)]
pub struct Ledger {
    drops: Vec<AtomicU8>,
    next: AtomicUsize,
}

impl Ledger {
    /// A new ledger for `ids` values, leaked.
    ///
    /// ```
    /// let ledger = pitlane_testkit::drops::Ledger::leaked(1);
    /// assert_eq!(ledger.id(), 0);
    /// ```
    pub fn leaked(ids: usize) -> &'static Self {
        Box::leak(Box::new(Self {
            drops: (0..ids).map(|_| AtomicU8::new(0)).collect(),
            next: AtomicUsize::new(0),
        }))
    }

    /// The next id. Panics past the ledger's size.
    ///
    /// ```
    /// let ledger = pitlane_testkit::drops::Ledger::leaked(2);
    /// assert_eq!([ledger.id(), ledger.id()], [0, 1]);
    /// ```
    pub fn id(&self) -> usize {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        assert!(id < self.drops.len(), "more than {} ids", self.drops.len());
        id
    }

    /// Records a drop of value `id`; returns how many drops it had before this one.
    ///
    /// ```
    /// let ledger = pitlane_testkit::drops::Ledger::leaked(1);
    /// let id = ledger.id();
    /// assert_eq!(ledger.dropped(id), 0);
    /// assert_eq!(ledger.dropped(id), 1);
    /// ```
    pub fn dropped(&self, id: usize) -> u8 {
        self.drops[id].fetch_add(1, Ordering::Relaxed)
    }

    /// Panics unless every id handed out was dropped exactly once.
    ///
    /// ```should_panic
    /// let ledger = pitlane_testkit::drops::Ledger::leaked(1);
    /// ledger.id();
    /// ledger.assert_each_dropped_once(); // id 0 was never dropped
    /// ```
    pub fn assert_each_dropped_once(&self) {
        let made = self.next.load(Ordering::Relaxed);
        for (id, count) in self.drops[..made].iter().enumerate() {
            assert_eq!(
                count.load(Ordering::Relaxed),
                1,
                "item {id} dropped that many times"
            );
        }
    }
}
