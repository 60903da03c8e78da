//! The subjects of the `locks` suite: a freelist of objects behind pitlane's spin locks,
//! the locks a Rust user would pick instead, and a lock-free Treiber freelist.

use super::*;

/// One subject's run: threads, duration, optional latency histogram -> pairs per second.
pub(super) type Runner = fn(usize, Duration, Option<&mut Histogram<u64>>) -> Result<f64, String>;

/// Subject name, whether it is a peer, and its run (monomorphised per freelist, so no subject
/// pays for dynamic dispatch).
pub(super) fn subjects() -> Vec<(&'static str, bool, Runner)> {
    vec![
        (
            "pitlane::spin::TasMutex",
            false,
            run_pairs::<LockApiList<RawTas>>,
        ),
        (
            "pitlane::spin::TtasMutex",
            false,
            run_pairs::<LockApiList<RawTtas>>,
        ),
        (
            "pitlane::spin::TasBackoffMutex",
            false,
            run_pairs::<LockApiList<RawTasBackoff>>,
        ),
        ("pitlane_slab::Slab", false, run_pairs::<SlabList>),
        ("std::sync::Mutex", true, run_pairs::<StdList>),
        (
            "parking_lot::Mutex",
            true,
            run_pairs::<LockApiList<parking_lot::RawMutex>>,
        ),
        (
            "libc::pthread_mutex_t",
            true,
            run_pairs::<LockApiList<RawPthreadMutex>>,
        ),
    ]
}

/// The operations every subject provides: take a free index, give one back.
pub trait Freelist: Send + Sync {
    /// Takes a free object's index, `None` when none is free.
    fn alloc(&self) -> Option<u32>;
    /// Returns an object taken by `alloc`.
    fn free(&self, index: u32);
    /// A list holding every object of the pool.
    fn full() -> Self
    where
        Self: Sized;
}

/// The freelist as sequential code, for the lock-based subjects.
pub(crate) struct ListState {
    pub(super) head: u32,
    pub(super) next: Box<[u32]>,
}

impl ListState {
    pub(super) fn full() -> Self {
        let next = (1..=OBJECTS)
            .map(|i| if i == OBJECTS { NIL } else { i })
            .collect();
        Self { head: 0, next }
    }

    #[inline]
    pub(super) fn pop(&mut self) -> Option<u32> {
        let head = self.head;
        if head == NIL {
            return None;
        }
        self.head = self.next[head as usize];
        Some(head)
    }

    #[inline]
    pub(super) fn push(&mut self, index: u32) {
        self.next[index as usize] = self.head;
        self.head = index;
    }
}

pub(crate) struct LockApiList<R: RawMutex>(lock_api::Mutex<R, ListState>);

impl<R: RawMutex + Send + Sync> Freelist for LockApiList<R> {
    fn full() -> Self {
        Self(lock_api::Mutex::new(ListState::full()))
    }

    #[inline]
    fn alloc(&self) -> Option<u32> {
        self.0.lock().pop()
    }

    #[inline]
    fn free(&self, index: u32) {
        self.0.lock().push(index)
    }
}

pub(crate) struct StdList(std::sync::Mutex<ListState>);

impl Freelist for StdList {
    fn full() -> Self {
        Self(std::sync::Mutex::new(ListState::full()))
    }

    #[inline]
    fn alloc(&self) -> Option<u32> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    #[inline]
    fn free(&self, index: u32) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(index)
    }
}

/// The talk's lock-free allocator, as pitlane ships it: `pitlane_slab::Slab` (its Treiber
/// freelist of tagged indices, sharded per thread, links in a side array, owner words).
pub(crate) struct SlabList(pub(crate) pitlane_slab::Slab);

impl Freelist for SlabList {
    fn full() -> Self {
        let config = pitlane_slab::Config::new(OBJECT_SIZE, OBJECTS);
        Self(pitlane_slab::Slab::heap(config).expect("a 4096 x 64 B slab"))
    }

    #[inline]
    fn alloc(&self) -> Option<u32> {
        self.0.alloc().map(pitlane_slab::ObjectId::index)
    }

    #[inline]
    fn free(&self, index: u32) {
        // A double free is a broken benchmark: abort rather than report a figure.
        // The pool deals in indices; the slab's id adds the object's generation, read back
        // here (a load of the state word that the free reads anyway).
        let id = self
            .0
            .current_id(index)
            .ok()
            .flatten()
            .expect("an object the pool handed out is allocated");
        self.0
            .free(id)
            .expect("the slab refused a free of an object the pool handed out");
    }
}

/// A `pthread_mutex_t` as a `lock_api` raw mutex, so the pthread subject runs the same code as
/// the others.
pub struct RawPthreadMutex(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: a pthread mutex is made to be shared between threads; all access goes through the
// pthread functions.
unsafe impl Sync for RawPthreadMutex {}
// SAFETY: as above; an unlocked mutex may move between threads.
unsafe impl Send for RawPthreadMutex {}

// SAFETY: pthread_mutex_lock/trylock/unlock give mutual exclusion; a default (normal) mutex is
// unlocked only by its holder, which lock_api guarantees.
unsafe impl RawMutex for RawPthreadMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawPthreadMutex(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
    type GuardMarker = lock_api::GuardNoSend;

    fn lock(&self) {
        // SAFETY: the mutex was statically initialised and is not moved while in use (it
        // lives inside a boxed pool for its whole life).
        let rc = unsafe { libc::pthread_mutex_lock(self.0.get()) };
        assert_eq!(rc, 0, "pthread_mutex_lock failed");
    }

    fn try_lock(&self) -> bool {
        // SAFETY: as in `lock`.
        unsafe { libc::pthread_mutex_trylock(self.0.get()) == 0 }
    }

    unsafe fn unlock(&self) {
        // SAFETY: the caller holds the lock (RawMutex contract); the mutex is initialised.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
    }
}

impl Drop for RawPthreadMutex {
    fn drop(&mut self) {
        // SAFETY: nobody holds or waits on the mutex: we have `&mut self`.
        unsafe { libc::pthread_mutex_destroy(self.0.get()) };
    }
}
