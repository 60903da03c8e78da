//! A process that has used up its `pthread` keys (`PTHREAD_KEYS_MAX`) before the allocator
//! initialises: the allocator cannot make the key whose destructor parks a thread's heap.
//! It must not then write its heap into a key it does not own (key 0, someone else's: that
//! key's destructor would get the allocator's heap as its value at thread exit), and it must
//! still serve, and take back, every kind of block from every thread.
//!
//! Alone in its binary, with PitlaneAlloc not the global allocator, so that the allocator
//! initialises only after the keys are gone (and so left out of CI's run with
//! `--cfg pitlane_alloc_global`, where it is the global allocator from the start).
#![cfg(not(pitlane_alloc_global))]

use std::alloc::Layout;
use std::sync::atomic::{AtomicUsize, Ordering};

use allocator_api2::alloc::Allocator;
use pitlane_alloc::PitlaneAlloc;

/// Values that the destructors of the keys this test made were called with.
static FOREIGN_VALUES: AtomicUsize = AtomicUsize::new(0);

extern "C" fn record(value: *mut libc::c_void) {
    if !value.is_null() {
        FOREIGN_VALUES.fetch_add(1, Ordering::Relaxed);
    }
}

/// The keys that hold a value on the calling thread.
fn keys_with_values() -> Vec<libc::pthread_key_t> {
    (0..1024)
        // SAFETY: reading a key's value has no preconditions (an unused key reads null).
        .filter(|&key| !unsafe { libc::pthread_getspecific(key) }.is_null())
        .collect()
}

fn churn() {
    churn_with(PitlaneAlloc::new());
}

fn churn_with<A: Allocator>(a: A) {
    let mut blocks = Vec::new();
    for i in 0..3000usize {
        let l = Layout::from_size_align(1 + (i * 97) % (i % 7 * 10_000 + 100), 8).unwrap();
        let p = a.allocate(l).unwrap().cast::<u8>();
        // SAFETY: a fresh block of `l.size()` bytes.
        unsafe { p.as_ptr().write_bytes(i as u8, l.size()) };
        blocks.push((p, l, i as u8));
    }
    for (p, l, seed) in blocks {
        // SAFETY: a live block of `l`, freed once.
        unsafe {
            assert_eq!(*p.as_ptr().add(l.size() - 1), seed);
            a.deallocate(p, l);
        }
    }
}

#[test]
fn without_a_pthread_key_the_allocator_writes_no_other_key_and_still_serves() {
    // Use up the keys; every one of them (and any made before, key 0 among them) has a
    // value of null in every thread unless someone sets one.
    let mut made = Vec::new();
    loop {
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: a plain libc call; `record` never unwinds.
        if unsafe { libc::pthread_key_create(&mut key, Some(record)) } != 0 {
            break;
        }
        made.push(key);
    }
    assert!(!made.is_empty());
    // The keys that a thread's own doings set (the standard library's, with a marker), with
    // the system allocator.
    let baseline = std::thread::spawn(|| {
        churn_with(allocator_api2::alloc::Global);
        keys_with_values()
    })
    .join()
    .unwrap();
    // Threads allocate (the first allocation initialises the allocator, without a key),
    // free blocks of other threads, and exit.
    for _ in 0..8 {
        let set = std::thread::spawn(|| {
            churn();
            keys_with_values()
        })
        .join()
        .unwrap();
        assert_eq!(set, baseline, "the allocator set a key it does not own");
    }
    churn();
    assert_eq!(
        FOREIGN_VALUES.load(Ordering::Relaxed),
        0,
        "a destructor of this test's keys was given a value it never set"
    );
}
