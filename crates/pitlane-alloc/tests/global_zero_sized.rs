//! `GlobalAlloc` with zero sizes, which its contract does not allow but the crate serves (an
//! 8-byte block, see the crate documentation): a `realloc` from or to size 0 must keep that
//! promise — a block freed once, a real block handed back — so that a later `dealloc` with
//! the zero-sized layout frees it instead of reading the page descriptor of address 0.
//! PitlaneAlloc is not the global allocator here, so the 8-byte class's count is the test's
//! own (and so left out of CI's run with `--cfg pitlane_alloc_global`, as `stats_exact.rs`).
#![cfg(not(pitlane_alloc_global))]

use std::alloc::{GlobalAlloc, Layout};

use pitlane_alloc::{PitlaneAlloc, class_stats, raw};

const A: PitlaneAlloc = PitlaneAlloc::new();

/// Blocks in use in the 8-byte class.
fn eights() -> usize {
    class_stats()[0].blocks_in_use
}

#[test]
fn realloc_from_and_to_zero_sizes_keeps_one_real_block() {
    for align in [1usize, 8, 64, 4096, 1 << 15, 1 << 20] {
        let zero = Layout::from_size_align(0, align).unwrap();
        let sixteen = Layout::from_size_align(16, align).unwrap();
        // SAFETY: zero-sized layouts, served by this allocator (see the module doc); every
        // block is freed once, with the layout it has.
        unsafe {
            // To size 0: a real block comes back, freed later with the zero-sized layout.
            let p = A.alloc(sixteen);
            assert!(!p.is_null());
            p.write_bytes(0x5A, 16);
            let q = A.realloc(p, sixteen, 0);
            assert!(!q.is_null(), "align {align}");
            assert_eq!(q.addr() % align, 0);
            assert!(
                raw::owns(q),
                "align {align}: realloc to 0 gave {q:p}, not a block"
            );
            A.dealloc(q, zero);

            // From size 0: the zero-sized block is freed, not leaked.
            if align <= 8 {
                let before = eights();
                for _ in 0..1000 {
                    let z = A.alloc(zero);
                    assert!(!z.is_null());
                    let r = A.realloc(z, zero, 16);
                    assert!(!r.is_null());
                    r.write_bytes(1, 16);
                    A.dealloc(r, sixteen);
                }
                assert_eq!(eights(), before, "align {align}: zero-sized blocks leaked");
            } else {
                let z = A.alloc(zero);
                let r = A.realloc(z, zero, 16);
                assert!(!r.is_null() && r.addr() % align == 0);
                A.dealloc(r, sixteen);
            }
        }
    }
}
