//! Recording: one global clock, one log per thread.
//!
//! Each operation takes a stamp from the shared clock just before its call and another just
//! after its return, then appends itself to its own thread's log. The only shared write is
//! the clock's `fetch_add`; the logs are plain vectors owned by their threads and meet only
//! when [`History::merge`] joins them after the threads have finished.
//!
//! Why the stamps order operations correctly: all stamps come from read-modify-writes of one
//! atomic, so they are totally ordered, and each `fetch_add` is `AcqRel`. If operation A's
//! return stamp is smaller than B's call stamp, B's call `fetch_add` reads a value in the
//! release sequence headed by A's return `fetch_add`, so everything A did happens before
//! everything B does: A really completed before B began. Operations whose intervals overlap
//! on the clock may have run in either order, which is exactly what the checker allows.
//!
//! The clock uses `std` atomics directly, not the loom shim: recording runs on real threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::history::{History, Operation};

/// The shared clock of one recording; hands out [`ThreadLog`]s.
///
/// Cloning a recorder shares its clock.
///
/// # Examples
///
/// ```
/// use std::sync::Mutex;
/// use pitlane_lincheck::{History, Recorder};
///
/// let counter = Mutex::new(0u64);
/// let recorder = Recorder::new();
/// let logs = std::thread::scope(|s| {
///     let workers: Vec<_> = (0..2)
///         .map(|thread| {
///             let mut log = recorder.log::<&str, u64>(thread);
///             let counter = &counter;
///             s.spawn(move || {
///                 log.record("increment", |_| {
///                     let mut c = counter.lock().unwrap();
///                     *c += 1;
///                     *c
///                 });
///                 log
///             })
///         })
///         .collect();
///     workers.into_iter().map(|w| w.join().unwrap()).collect::<Vec<_>>()
/// });
/// let history = History::merge(logs);
/// assert_eq!(history.len(), 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    /// The next stamp to hand out; stamps are never reused within one recorder.
    clock: Arc<CachePadded<AtomicU64>>,
}

impl Recorder {
    /// A recorder whose clock starts at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty log for `thread`, sharing this recorder's clock.
    pub fn log<Op, Ret>(&self, thread: usize) -> ThreadLog<Op, Ret> {
        self.log_with_capacity(thread, 0)
    }

    /// An empty log for `thread` with room for `operations` entries, so that recording them
    /// allocates nothing.
    pub fn log_with_capacity<Op, Ret>(
        &self,
        thread: usize,
        operations: usize,
    ) -> ThreadLog<Op, Ret> {
        ThreadLog {
            clock: Arc::clone(&self.clock),
            thread,
            operations: Vec::with_capacity(operations),
        }
    }

    /// The next stamp; the `AcqRel` read-modify-write is what orders operations (see the
    /// module documentation).
    fn tick(clock: &AtomicU64) -> u64 {
        clock.fetch_add(1, Ordering::AcqRel)
    }
}

/// The operations of one thread, in the order it ran them.
///
/// A log is `Send` when its operations are, so it can be moved into the thread that fills it
/// and moved back out when the thread ends.
#[derive(Debug)]
pub struct ThreadLog<Op, Ret> {
    clock: Arc<CachePadded<AtomicU64>>,
    thread: usize,
    operations: Vec<Operation<Op, Ret>>,
}

impl<Op, Ret> ThreadLog<Op, Ret> {
    /// Runs `run(&op)` between two stamps of the clock, appends the operation to the log and
    /// returns its result.
    ///
    /// # Examples
    ///
    /// ```
    /// use pitlane_lincheck::Recorder;
    ///
    /// let recorder = Recorder::new();
    /// let mut log = recorder.log::<u32, u32>(0);
    /// assert_eq!(*log.record(20, |x| x + 1), 21);
    /// ```
    pub fn record(&mut self, op: Op, run: impl FnOnce(&Op) -> Ret) -> &Ret {
        let call = Recorder::tick(&self.clock);
        let result = run(&op);
        let ret = Recorder::tick(&self.clock);
        self.operations.push(Operation {
            thread: self.thread,
            call,
            ret,
            op,
            result,
        });
        &self.operations[self.operations.len() - 1].result
    }

    /// The thread this log belongs to.
    pub fn thread(&self) -> usize {
        self.thread
    }

    /// The operations recorded so far.
    pub fn operations(&self) -> &[Operation<Op, Ret>] {
        &self.operations
    }
}

impl<Op, Ret> History<Op, Ret> {
    /// Joins the logs of the threads of one recording into a history, thread by thread.
    ///
    /// The logs should come from one [`Recorder`] (or its clones) and have distinct thread
    /// numbers; operation ids follow the order of the logs, then each thread's order.
    pub fn merge(logs: impl IntoIterator<Item = ThreadLog<Op, Ret>>) -> Self {
        let mut operations = Vec::new();
        for log in logs {
            operations.extend(log.operations);
        }
        History::from_recorded(operations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_bracket_the_call_and_order_a_thread() {
        let recorder = Recorder::new();
        let mut log = recorder.log_with_capacity::<u8, u8>(3, 2);
        log.record(1, |x| *x);
        log.record(2, |x| *x);
        let history = History::merge([log]);
        let ops = history.operations();
        assert_eq!(ops.len(), 2);
        assert!(ops[0].call < ops[0].ret);
        assert!(ops[0].precedes(&ops[1]));
        assert_eq!(ops[1].thread, 3);
    }

    #[test]
    fn logs_of_one_recorder_share_the_clock() {
        let recorder = Recorder::new();
        let mut a = recorder.log::<u8, ()>(0);
        let mut b = recorder.clone().log::<u8, ()>(1);
        a.record(0, |_| ());
        b.record(0, |_| ());
        let history = History::merge([a, b]);
        assert!(history.operations()[0].precedes(&history.operations()[1]));
    }

    #[test]
    fn merged_threads_that_ran_at_once_have_distinct_stamps() {
        let recorder = Recorder::new();
        let logs = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|t| {
                    let mut log = recorder.log_with_capacity::<usize, usize>(t, 100);
                    s.spawn(move || {
                        for i in 0..100 {
                            log.record(i, |i| *i);
                        }
                        log
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap())
                .collect::<Vec<_>>()
        });
        let history = History::merge(logs);
        let mut stamps: Vec<u64> = history
            .operations()
            .iter()
            .flat_map(|o| [o.call, o.ret])
            .collect();
        stamps.sort_unstable();
        stamps.dedup();
        assert_eq!(stamps.len(), 800);
    }
}
