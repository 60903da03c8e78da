//! The corruption test (after elfmalloc's object-alloc-test): every object carries a hash of
//! its own address and contents; any block handed out twice, moved without its contents, or
//! overwritten by the allocator's own bookkeeping breaks a hash. Random allocation, free and
//! realloc, with objects passed between threads through a shared pool.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::Mutex;

use pitlane_alloc::PitlaneAlloc;
use pitlane_testkit::stress::run_threads;

#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// An object: `[size][nonce][hash][payload...]`, hash over the address, the nonce and the
/// payload.
struct Object {
    at: *mut u64,
    size: usize,
}

// SAFETY: an object is a heap block owned by whoever holds this value.
unsafe impl Send for Object {}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).unwrap()
}

fn hash(at: *mut u64, words: usize) -> u64 {
    // SAFETY: the object's block holds `words` words.
    unsafe {
        let mut h = mix(at.addr() as u64 ^ at.add(1).read());
        for i in 3..words {
            h = mix(h ^ at.add(i).read());
        }
        h
    }
}

fn seal(at: *mut u64, size: usize, nonce: u64) {
    let words = size / 8;
    // SAFETY: the block holds `size` bytes.
    unsafe {
        at.write(size as u64);
        at.add(1).write(nonce);
        for i in 3..words {
            at.add(i).write(mix(nonce + i as u64));
        }
        at.add(2).write(hash(at, words));
    }
}

fn verify(o: &Object) {
    // SAFETY: the object's block is live.
    unsafe {
        assert_eq!(o.at.read(), o.size as u64, "size word overwritten");
        assert_eq!(
            o.at.add(2).read(),
            hash(o.at, o.size / 8),
            "object corrupted or moved"
        );
    }
}

fn make(size: usize, nonce: u64) -> Object {
    // SAFETY: a valid layout.
    let at = unsafe { GLOBAL.alloc(layout(size)) }.cast::<u64>();
    assert!(!at.is_null());
    seal(at, size, nonce);
    Object { at, size }
}

fn free(o: Object) {
    verify(&o);
    // Scribble before freeing, so a block handed out twice shows up as a broken hash.
    // SAFETY: live block.
    unsafe {
        o.at.add(2).write(!0);
        GLOBAL.dealloc(o.at.cast(), layout(o.size));
    }
}

#[test]
fn objects_keep_their_hashes_through_random_alloc_free_realloc_across_threads() {
    let pool = Mutex::new(Vec::<Object>::new());
    let ops = if cfg!(debug_assertions) {
        20_000
    } else {
        200_000
    };
    run_threads(6, |t| {
        let mut rng = mix(t as u64 + 99);
        let mut mine: Vec<Object> = Vec::new();
        for i in 0..ops {
            rng = mix(rng);
            let size = 24 + 8 * (rng as usize % if rng % 50 == 0 { 8000 } else { 200 });
            match rng % 10 {
                0..=3 => mine.push(make(size, rng)),
                4..=5 => {
                    if !mine.is_empty() {
                        let k = (rng >> 20) as usize % mine.len();
                        free(mine.swap_remove(k));
                    }
                }
                6 => {
                    if let Some(o) = mine.pop() {
                        verify(&o);
                        // SAFETY: live block, valid new size.
                        let at = unsafe { GLOBAL.realloc(o.at.cast(), layout(o.size), size) }
                            .cast::<u64>();
                        assert!(!at.is_null());
                        // The prefix moved with the block; reseal at the new address.
                        // SAFETY: the new block holds `size` bytes.
                        assert_eq!(unsafe { at.read() }, o.size as u64);
                        seal(at, size, rng);
                        mine.push(Object { at, size });
                    }
                }
                7 => {
                    // Hand an object to any thread.
                    if let Some(o) = mine.pop() {
                        pool.lock().unwrap().push(o);
                    }
                }
                _ => {
                    let taken = pool.lock().unwrap().pop();
                    if let Some(o) = taken {
                        free(o);
                    }
                }
            }
            if i % 10_000 == 0 {
                mine.iter().for_each(verify);
            }
        }
        mine.into_iter().for_each(free);
    });
    pool.into_inner().unwrap().into_iter().for_each(free);
}
