//! Thread-local destructors that allocate and free through the global allocator late in a
//! thread's exit: a user's `thread_local!` whose `Drop` frees a block another thread made,
//! allocates blocks, and sends one out (through a channel, which allocates too) to outlive
//! the thread; with std's own thread-local destructors running beside it. Hundreds of
//! threads, created and joined in waves. Every block keeps its contents, and what the
//! threads left behind is given back.

use std::cell::RefCell;
use std::sync::mpsc::{Sender, channel};

use pitlane_alloc::PitlaneAlloc;

// Under `--cfg pitlane_alloc_global` the workspace-wide `#[global_allocator]` serves instead.
#[cfg_attr(not(pitlane_alloc_global), global_allocator)]
#[cfg_attr(pitlane_alloc_global, allow(dead_code))]
static GLOBAL: PitlaneAlloc = PitlaneAlloc::new();

/// What a thread's destructor works with.
struct AtExit {
    /// A block another thread made, freed by the destructor (a remote free).
    inherited: Option<Vec<u64>>,
    /// Where the destructor sends the block it makes.
    out: Option<Sender<Vec<u64>>>,
    seed: u64,
}

impl Drop for AtExit {
    fn drop(&mut self) {
        if let Some(v) = self.inherited.take() {
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
            drop(v);
        }
        // Allocate and free a spread of sizes, small and large.
        for size in [1usize, 7, 100, 1000, 5000, 40_000] {
            let v = vec![self.seed; size];
            assert!(v.iter().all(|&x| x == self.seed));
        }
        // A block that outlives the thread.
        let keep: Vec<u64> = (0..300).map(|i| self.seed ^ i).collect();
        if let Some(out) = self.out.take() {
            out.send(keep).unwrap();
        }
    }
}

thread_local! {
    static AT_EXIT: RefCell<Option<AtExit>> = const { RefCell::new(None) };
}

#[test]
fn thread_local_destructors_allocate_and_free_at_thread_exit() {
    pitlane_alloc::collect();
    let before = pitlane_alloc::stats().in_use;
    let (tx, rx) = channel::<Vec<u64>>();
    let mut expected = 0u64;
    for wave in 0..20u64 {
        let handles: Vec<_> = (0..16u64)
            .map(|t| {
                let seed = wave * 1000 + t;
                let inherited: Vec<u64> = (0..2000).map(|i| i * 3).collect();
                let out = tx.clone();
                std::thread::spawn(move || {
                    // Some allocation of the thread's own, then the destructor's state.
                    let mine: Vec<String> = (0..200).map(|i| format!("{seed}-{i}")).collect();
                    AT_EXIT.with(|slot| {
                        *slot.borrow_mut() = Some(AtExit {
                            inherited: Some(inherited),
                            out: Some(out),
                            seed,
                        })
                    });
                    mine.len()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), 200);
            expected += 1;
        }
    }
    drop(tx);
    let mut got = 0u64;
    for v in rx {
        let seed = v[0];
        assert!(v.iter().enumerate().all(|(i, &x)| x == seed ^ i as u64));
        got += 1;
    }
    assert_eq!(got, expected);
    pitlane_alloc::collect();
    let after = pitlane_alloc::stats().in_use;
    // 320 threads left nothing behind but what the harness holds meanwhile (each freed an
    // inherited block of 16,000 bytes at its exit: had those frees been lost, over 5 MiB).
    assert!(
        after < before + (4 << 20),
        "in use before {before}, after {after}"
    );
}
