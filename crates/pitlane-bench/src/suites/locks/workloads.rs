//! The workload of the `locks` suite: a pool of objects whose free indices are kept by the
//! freelist under test, run through the shared pair loop (`suites::pairs`).

use super::*;

/// One 64-byte object; word 0 records who holds it (0 when free).
#[repr(align(64))]
pub(crate) struct Object {
    pub(crate) words: [AtomicU64; OBJECT_SIZE / 8],
}

pub(crate) struct Pool<F> {
    pub(crate) list: F,
    pub(crate) objects: Box<[Object]>,
}

impl<F: Freelist> Pool<F> {
    pub(crate) fn new(list: F) -> Self {
        let objects = (0..OBJECTS)
            .map(|_| Object {
                words: Default::default(),
            })
            .collect();
        Self { list, objects }
    }
}

impl<F: Freelist> PairSubject for Pool<F> {
    type Handle = u32;

    #[inline]
    fn take(&self, tag: u64) -> Result<u32, String> {
        let index = self
            .list
            .alloc()
            .ok_or("freelist empty with objects to spare")?;
        let word = &self.objects[index as usize].words[0];
        stamp_on(word, tag, &format_args!("object {index}"))?;
        Ok(index)
    }

    #[inline]
    fn give_back(&self, index: u32, tag: u64) -> Result<(), String> {
        let word = &self.objects[index as usize].words[0];
        stamp_off(word, tag, &format_args!("object {index}"))?;
        self.list.free(index);
        Ok(())
    }

    /// Empties the list and checks that every object was on it exactly once.
    fn check(&self) -> Result<(), String> {
        let mut seen = vec![false; OBJECTS as usize];
        while let Some(i) = self.list.alloc() {
            let slot = seen
                .get_mut(i as usize)
                .ok_or_else(|| format!("index {i} out of range"))?;
            if std::mem::replace(slot, true) {
                return Err(format!("object {i} is on the freelist twice"));
            }
        }
        let missing = seen.iter().filter(|s| !**s).count();
        if missing > 0 {
            return Err(format!("{missing} objects lost from the freelist"));
        }
        Ok(())
    }
}

/// Runs `threads` threads doing alloc/free pairs on a full pool of `F` for `run_for`; returns
/// pairs per second (the shared pair loop, see `suites::pairs`).
pub(super) fn run_pairs<F: Freelist>(
    threads: usize,
    run_for: Duration,
    latency: Option<&mut Histogram<u64>>,
) -> Result<f64, String> {
    run_threads(&Pool::new(F::full()), threads, run_for, latency)
}
